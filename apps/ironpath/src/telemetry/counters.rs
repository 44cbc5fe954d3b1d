//! The telemetry endpoints' own counters: clients accepted, and every bound a
//! client can hit, counted when it bites. The endpoint threads count; a scrape
//! carries a snapshot ([`Counts`]) to the thread that renders it, and the socket
//! answers `/ironpath/telemetry` with one.

use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicU64, Ordering};

/// One thing an endpoint counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A client of the socket was accepted and served.
    SocketClient,
    /// A socket client was closed: as many as the socket serves at once already.
    SocketLimit,
    /// A socket client was closed: it runs as another user than ours or root.
    SocketPeerUid,
    /// A socket command got `null`: the owning thread did not answer in time.
    SocketUnanswered,
    /// A metrics client was accepted.
    HttpClient,
    /// A metrics client was closed to make room for a newcomer: the oldest of
    /// those that had not sent their whole request.
    HttpEvicted,
    /// A metrics client was closed at once: as many as the endpoint holds, every
    /// one waiting for its answer.
    HttpLimit,
    /// A metrics client's request head did not arrive whole within its deadline,
    /// or its reply could not be written within its own.
    HttpDeadline,
    /// A metrics request head was longer than the endpoint reads.
    HttpTooLarge,
    /// A scrape got 503: the owning thread did not answer in time.
    HttpUnanswered,
}

impl Event {
    /// Every event, in the order they are shown.
    pub const ALL: [Event; 10] = [
        Event::SocketClient,
        Event::SocketLimit,
        Event::SocketPeerUid,
        Event::SocketUnanswered,
        Event::HttpClient,
        Event::HttpEvicted,
        Event::HttpLimit,
        Event::HttpDeadline,
        Event::HttpTooLarge,
        Event::HttpUnanswered,
    ];

    /// The endpoint (`socket`, `metrics`) and the refusal's reason (`None`: a
    /// client accepted).
    pub fn label(self) -> (&'static str, Option<&'static str>) {
        match self {
            Event::SocketClient => ("socket", None),
            Event::SocketLimit => ("socket", Some("limit")),
            Event::SocketPeerUid => ("socket", Some("peer_uid")),
            Event::SocketUnanswered => ("socket", Some("unanswered")),
            Event::HttpClient => ("metrics", None),
            Event::HttpEvicted => ("metrics", Some("evicted")),
            Event::HttpLimit => ("metrics", Some("limit")),
            Event::HttpDeadline => ("metrics", Some("deadline")),
            Event::HttpTooLarge => ("metrics", Some("too_large")),
            Event::HttpUnanswered => ("metrics", Some("unanswered")),
        }
    }
}

/// The live counters, shared by the endpoint threads.
#[derive(Debug, Default)]
pub struct Counters([AtomicU64; Event::ALL.len()]);

impl Counters {
    /// Counts one `e`.
    pub fn count(&self, e: Event) {
        // Relaxed: independent counters, read for display only.
        self.0[e as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The values now.
    pub fn snapshot(&self) -> Counts {
        Counts(std::array::from_fn(|i| self.0[i].load(Ordering::Relaxed)))
    }
}

/// The counters' values at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts([u64; Event::ALL.len()]);

impl Counts {
    /// The value of `e`.
    pub fn get(&self, e: Event) -> u64 {
        self.0[e as usize]
    }

    /// `{"socket": {"clients": N, "refused": {REASON: N, ...}}, "metrics": {...}}`,
    /// the answer to `/ironpath/telemetry`.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        for e in Event::ALL {
            let (endpoint, reason) = e.label();
            let ep = out.entry(endpoint).or_insert_with(|| json!({"clients": 0, "refused": {}}));
            match reason {
                None => ep["clients"] = self.get(e).into(),
                Some(r) => ep["refused"][r] = self.get(e).into(),
            }
        }
        out.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_event_counts_apart() {
        let c = Counters::default();
        c.count(Event::HttpEvicted);
        c.count(Event::HttpEvicted);
        c.count(Event::SocketPeerUid);
        let s = c.snapshot();
        assert_eq!((s.get(Event::HttpEvicted), s.get(Event::SocketPeerUid), s.get(Event::HttpLimit)), (2, 1, 0));
        let j = s.to_json();
        assert_eq!(j["metrics"]["refused"]["evicted"], 2);
        assert_eq!(j["socket"]["refused"]["peer_uid"], 1);
        assert_eq!(j["socket"]["clients"], 0);
        assert_eq!(Event::ALL.iter().enumerate().filter(|(i, e)| **e as usize != *i).count(), 0);
    }
}
