//! [`Listener`]: the LISTEN state (RFC 9293 §3.10.7.2) of one port, with its backlog of
//! connections that are still in the handshake or not yet accepted.
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound::{Excluded, Unbounded};

use ironpath_wire::{IpAddress, TcpControl, TcpRepr};

use crate::isn::COOKIE_MSS;
use crate::segment::rst_reply;
use crate::{Config, Connection, Endpoint, IsnGenerator, ListenError, Payload, Segment, SeqNum, State, Time};

/// Listener event counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListenerCounters {
    /// SYNs that created a connection.
    pub syns: u64,
    /// SYNs dropped because the backlog was full.
    pub backlog_drops: u64,
    /// RSTs sent for segments that matched no connection.
    pub resets: u64,
    /// Connections handed out by `accept`.
    pub accepted: u64,
    /// Connections that closed (reset, timed out) before being accepted.
    pub dropped: u64,
    /// SYN-ACKs sent with a SYN cookie (backlog full), no state kept.
    pub cookies_sent: u64,
    /// Connections made from a valid cookie in the handshake's last ACK.
    pub cookies_valid: u64,
    /// ACKs that carried no valid cookie while cookies were in use (answered by RST).
    pub cookies_invalid: u64,
}

/// How long after the last cookie was sent ACKs are checked for one.
const COOKIE_WINDOW: std::time::Duration = std::time::Duration::from_secs(128);

/// Passive opens on one port. It owns each connection from the peer's SYN until the
/// application [`accept`](Self::accept)s it: the caller routes segments of 4-tuples it
/// has no connection for to [`process`](Self::process), and drives the listener's
/// [`dispatch`](Self::dispatch)/[`poll_at`](Self::poll_at) like a connection's.
#[derive(Debug)]
pub struct Listener<P> {
    port: u16,
    config: Config,
    isn: IsnGenerator,
    backlog: usize,
    /// By (remote endpoint, local address): deterministic order for `dispatch`.
    conns: BTreeMap<(Endpoint, IpAddress), Connection<P>>,
    /// Connections past the handshake, in the order they got there.
    ready: VecDeque<(Endpoint, IpAddress)>,
    counters: ListenerCounters,
    /// When the last SYN cookie went out.
    last_cookie: Option<Time>,
}

impl<P: Payload> Listener<P> {
    /// Listens on `port` (any local address); at most `backlog` connections wait in the
    /// handshake or for `accept`. `isn` keys the initial sequence numbers.
    pub fn new(port: u16, backlog: usize, config: Config, isn: IsnGenerator) -> Result<Self, ListenError> {
        if port == 0 {
            return Err(ListenError::Unaddressable);
        }
        if backlog == 0 {
            return Err(ListenError::ZeroBacklog);
        }
        Ok(Listener {
            port,
            config,
            isn,
            backlog,
            conns: BTreeMap::new(),
            ready: VecDeque::new(),
            counters: ListenerCounters::default(),
            last_cookie: None,
        })
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Connections held (in the handshake or waiting for `accept`).
    pub fn pending(&self) -> usize {
        self.conns.len()
    }

    /// Event counters.
    pub fn counters(&self) -> &ListenerCounters {
        &self.counters
    }

    /// Processes a segment from `src` to `dst` for which the caller has no connection.
    /// Returns a segment to send back at once, if any (RST, or a held connection's reply).
    pub fn process(
        &mut self,
        now: Time,
        src: IpAddress,
        dst: IpAddress,
        seg: &TcpRepr,
        payload: Option<P>,
        segs: u16,
    ) -> Option<Segment<P>> {
        let key = (Endpoint::new(src, seg.src_port), dst);
        if let Some(conn) = self.conns.get_mut(&key) {
            let reply = conn.process(now, seg, payload, segs);
            self.sweep(key);
            return reply;
        }
        let payload_len = payload.as_ref().map_or(0, P::len);
        if seg.control == TcpControl::Rst {
            return None;
        }
        if seg.ack_number.is_some() {
            if self.cookies_in_use(now) && seg.control != TcpControl::Syn {
                let local = Endpoint::new(dst, seg.dst_port);
                match self.cookie_connection(now, local, key, seg) {
                    Some(Some(mut conn)) => {
                        let reply = conn.process(now, seg, payload, segs);
                        self.conns.insert(key, conn);
                        self.counters.cookies_valid += 1;
                        self.sweep(key);
                        return reply;
                    }
                    Some(None) => return None, // valid, but no room even for cookies
                    None => self.counters.cookies_invalid += 1,
                }
            }
            self.counters.resets += 1;
            return rst_reply(src, dst, seg, payload_len);
        }
        if seg.control != TcpControl::Syn {
            return None;
        }
        if self.conns.len() >= self.backlog {
            if self.config.syn_cookies {
                return self.cookie_syn_ack(now, Endpoint::new(dst, seg.dst_port), key.0, seg);
            }
            self.counters.backlog_drops += 1;
            return None;
        }
        let local = Endpoint::new(dst, seg.dst_port);
        let conn = Connection::accept_syn(now, local, key.0, &self.config, &self.isn, seg);
        self.conns.insert(key, conn);
        self.counters.syns += 1;
        None
    }

    /// Whether ACKs may carry a cookie: cookies are on and one went out lately.
    fn cookies_in_use(&self, now: Time) -> bool {
        self.config.syn_cookies && self.last_cookie.is_some_and(|t| now - t < COOKIE_WINDOW)
    }

    /// What a cookie connection negotiates: the MSS only.
    fn cookie_config(&self) -> Config {
        Config { window_scaling: false, timestamps: false, sack: false, ..self.config.clone() }
    }

    /// The peer's SYN as a cookie remembers it: sequence number, ports, window and the
    /// MSS of `COOKIE_MSS[idx]`.
    fn cookie_syn(seg: &TcpRepr, peer_isn: u32, idx: u8) -> TcpRepr {
        TcpRepr {
            src_port: seg.src_port,
            dst_port: seg.dst_port,
            seq_number: peer_isn,
            ack_number: None,
            control: TcpControl::Syn,
            window_len: seg.window_len,
            max_seg_size: Some(COOKIE_MSS[usize::from(idx)]),
            window_scale: None,
            sack_permitted: false,
            sack_ranges: [None; 3],
            timestamp: None,
            payload_len: 0,
        }
    }

    /// The SYN-ACK of a SYN that found the backlog full, its ISS a SYN cookie; nothing
    /// is kept.
    fn cookie_syn_ack(&mut self, now: Time, local: Endpoint, remote: Endpoint, syn: &TcpRepr) -> Option<Segment<P>> {
        let peer_mss = syn.max_seg_size.unwrap_or(536);
        let idx = COOKIE_MSS.iter().rposition(|&m| m <= peer_mss).unwrap_or(0) as u8;
        let iss = SeqNum(self.isn.cookie(now, &local, &remote, syn.seq_number, idx));
        let syn = Self::cookie_syn(syn, syn.seq_number, idx);
        let mut conn =
            Connection::<P>::accept_syn_with_iss(now, local, remote, &self.cookie_config(), &self.isn, &syn, iss);
        let mut reply = None;
        let _ = conn.dispatch(now, |s| {
            reply.get_or_insert(s);
            Ok::<(), ()>(())
        });
        self.counters.cookies_sent += 1;
        self.last_cookie = Some(now);
        reply
    }

    /// The connection a handshake's last ACK `seg` completes if it carries a valid
    /// cookie: `Some(None)` if valid but even the cookies' room (twice the backlog) is
    /// full, `None` if not valid.
    fn cookie_connection(
        &self,
        now: Time,
        local: Endpoint,
        key: (Endpoint, IpAddress),
        seg: &TcpRepr,
    ) -> Option<Option<Connection<P>>> {
        let peer_isn = seg.seq_number.wrapping_sub(1);
        let cookie = seg.ack_number?.wrapping_sub(1);
        let idx = self.isn.check_cookie(now, &local, &key.0, peer_isn, cookie)?;
        if self.conns.len() >= 2 * self.backlog {
            return Some(None);
        }
        let syn = Self::cookie_syn(seg, peer_isn, idx);
        let mut conn =
            Connection::accept_syn_with_iss(now, local, key.0, &self.cookie_config(), &self.isn, &syn, SeqNum(cookie));
        // Our SYN-ACK went out when the cookie was made: count it as sent.
        let _ = conn.dispatch(now, |_| Ok::<(), ()>(()));
        Some(Some(conn))
    }

    /// Emits the held connections' segments (SYN-ACKs, their retransmissions, ACKs) and
    /// forgets the ones that closed. Stops at the first `emit` error.
    pub fn dispatch<E>(&mut self, now: Time, mut emit: impl FnMut(Segment<P>) -> Result<(), E>) -> Result<usize, E> {
        let mut sent = 0;
        let mut next = self.conns.keys().next().copied();
        while let Some(key) = next {
            let result = self.conns.get_mut(&key).map_or(Ok(0), |conn| conn.dispatch(now, &mut emit));
            self.sweep(key);
            sent += result?;
            next = self.conns.range((Excluded(key), Unbounded)).next().map(|(k, _)| *k);
        }
        Ok(sent)
    }

    /// The earliest `poll_at` of the held connections.
    pub fn poll_at(&self) -> Option<Time> {
        self.conns.values().filter_map(Connection::poll_at).min()
    }

    /// Takes the oldest connection that completed its handshake.
    pub fn accept(&mut self) -> Option<Connection<P>> {
        let key = self.ready.pop_front()?;
        let conn = self.conns.remove(&key)?;
        self.counters.accepted += 1;
        Some(conn)
    }

    /// After a connection changed: queue it for `accept` once synchronized, drop it once
    /// closed with nothing left to send.
    fn sweep(&mut self, key: (Endpoint, IpAddress)) {
        let Some(conn) = self.conns.get(&key) else { return };
        match conn.state() {
            State::Closed if conn.poll_at().is_none() => {
                self.conns.remove(&key);
                self.ready.retain(|k| *k != key);
                self.counters.dropped += 1;
            }
            State::SynReceived | State::Closed => {}
            _ => {
                if !self.ready.contains(&key) {
                    self.ready.push_back(key);
                }
            }
        }
    }
}
