//! Timers: retransmission (RFC 6298, with go-back-N and backoff), persist (zero-window
//! probes, RFC 9293 §3.8.6.1), delayed ACK and TIME-WAIT; and `poll_at`.
use super::{Connection, State, Timers};
use std::time::Duration;

use crate::{ConnError, Payload, Time};

impl<P: Payload> Connection<P> {
    /// When to call [`dispatch`](Self::dispatch) next: [`Time::ZERO`] (or any time not
    /// after now) if something is due already, the earliest timer otherwise, `None` when
    /// only a received segment or an application call can change anything.
    pub fn poll_at(&self) -> Option<Time> {
        if self.has_output() {
            return Some(Time::ZERO);
        }
        let Timers { rto, persist, ack, time_wait, idle } = self.timers;
        [rto, persist, ack, time_wait, idle].into_iter().flatten().min()
    }

    /// Fires the timers that expired by `now`.
    pub(super) fn on_timers(&mut self, now: Time) {
        if self.state == State::Closed {
            return;
        }
        if self.timers.time_wait.is_some_and(|t| now >= t) {
            self.enter_closed(None);
            return;
        }
        if self.timers.rto.is_some_and(|t| now >= t) {
            self.on_rto(now);
            if self.state == State::Closed {
                return;
            }
        }
        if self.timers.persist.is_some_and(|t| now >= t) {
            self.timers.persist = None;
            self.probe_due = true;
        }
        if self.timers.ack.is_some_and(|t| now >= t) {
            self.timers.ack = None;
            self.ack_now = true;
        }
        if self.timers.idle.is_some_and(|t| now >= t) {
            self.timers.idle = None;
            self.on_idle_timer(now);
        }
    }

    /// The idle deadlines that apply now: `(FIN-WAIT-2 end, idle timeout, next
    /// keep-alive probe, send timeout)`.
    fn idle_deadlines(&self) -> [Option<Time>; 4] {
        let c = &self.config;
        let fin_wait2 = match (self.state, c.fin_wait2_timeout) {
            (State::FinWait2, Some(t)) => Some(self.fin_wait2_at + t),
            _ => None,
        };
        let synchronized = !matches!(self.state, State::Closed | State::SynSent | State::TimeWait);
        let idle = c.idle_timeout.filter(|_| synchronized).map(|t| self.last_rx + t);
        // Probes only when nothing is outstanding or waiting (RFC 1122 §4.2.3.6):
        // otherwise the retransmission or persist timer already asks the peer.
        let quiet = matches!(self.state, State::Established | State::CloseWait)
            && self.snd_una == self.snd_max
            && self.unsent() == 0;
        let keepalive = c
            .keepalive
            .filter(|_| quiet)
            .map(|k| self.last_rx + k.idle.saturating_add(k.interval.saturating_mul(self.keepalive_sent)));
        let stalled = c.send_timeout.zip(self.stalled_since).map(|(t, since)| since + t);
        [fin_wait2, idle, keepalive, stalled]
    }

    /// The idle timer expired: reset the connection, send a keep-alive probe, or
    /// nothing (traffic arrived since it was armed; `update_timers` arms it again).
    fn on_idle_timer(&mut self, now: Time) {
        let [fin_wait2, idle, keepalive, stalled] = self.idle_deadlines();
        let reset = if stalled.is_some_and(|t| now >= t) {
            let quota = self.send_quota();
            let taken = u64::from(self.snd_una.distance(self.stall_una));
            if quota == 0 {
                Some(ConnError::SendTimeout)
            } else if taken >= quota {
                // Enough went through this period: the next one starts now.
                self.stalled_since = Some(now);
                self.stall_una = self.snd_una;
                None
            } else if taken == 0 {
                Some(ConnError::SendTimeout)
            } else {
                Some(ConnError::SendTooSlow)
            }
        } else if fin_wait2.is_some_and(|t| now >= t) || idle.is_some_and(|t| now >= t) {
            Some(ConnError::IdleTimeout)
        } else if keepalive.is_some_and(|t| now >= t) {
            let probes = self.config.keepalive.map_or(0, |k| k.probes);
            if self.keepalive_sent >= probes {
                Some(ConnError::KeepaliveTimeout)
            } else {
                self.keepalive_due = true;
                None
            }
        } else {
            None
        };
        if let Some(e) = reset {
            // The peer may still hold state: tell it (Linux sends a RST here too).
            self.rst_due = Some(self.snd_max);
            self.enter_closed(Some(e));
        }
    }

    /// Bytes the peer must acknowledge per send-timeout period (`send_min_rate`); 0:
    /// any acknowledgment will do.
    fn send_quota(&self) -> u64 {
        let rate = u64::from(self.config.send_min_rate);
        let period = self.config.send_timeout.unwrap_or_default();
        (rate * period.as_millis() as u64 / 1000).max(u64::from(rate > 0))
    }

    /// Retransmission timeout (RFC 6298 §5.4 to §5.6, RFC 5681 §3.1): back off, shrink
    /// cwnd to one segment and resend from `snd_una` (go-back-N).
    fn on_rto(&mut self, now: Time) {
        self.timers.rto = None;
        self.retries += 1;
        self.counters.rto_timeouts += 1;
        let handshake = matches!(self.state, State::SynSent | State::SynReceived);
        let limit = if handshake { self.config.syn_retries } else { self.config.max_retries };
        if self.retries > limit {
            self.enter_closed(Some(ConnError::TimedOut));
            return;
        }
        if !handshake {
            let flight = self.snd_max.distance(self.snd_una);
            self.cc.on_rto(flight, self.snd_max, self.retries == 1);
        }
        self.rtt.back_off();
        self.rtt_seq = None;
        self.rexmit_head = false;
        self.snd_nxt = self.snd_una;
        self.timers.rto = Some(now + self.rtt.rto());
    }

    /// Starts and stops the retransmission and persist timers after the state changed.
    pub(super) fn update_timers(&mut self, now: Time) {
        match self.state {
            State::Closed => {
                self.timers = Timers::default();
                return;
            }
            State::TimeWait => {
                self.timers.rto = None;
                self.timers.persist = None;
                self.timers.idle = None;
                self.rexmit_head = false;
                return;
            }
            _ => {}
        }
        // Data or a FIN waiting for the peer (in flight, or held back by its window):
        // the send timeout runs from when it began to wait or the peer last took some.
        let waiting = self.snd_max > self.snd_una || self.unsent() > 0;
        match (waiting, self.stalled_since) {
            (true, None) => {
                self.stalled_since = Some(now);
                self.stall_una = self.snd_una;
            }
            (false, Some(_)) => self.stalled_since = None,
            _ => {}
        }
        // The idle timer runs at the earliest deadline; it is moved earlier when one
        // appears (a state change), never later by traffic.
        if let Some(d) = self.idle_deadlines().into_iter().flatten().min() {
            // A deadline already past (keep-alive became due while data was
            // outstanding, say) fires at the next call, not "now": `poll_at` stays
            // after the call that armed it.
            let d = d.max(now + Duration::from_micros(1));
            if self.timers.idle.is_none_or(|t| d < t) {
                self.timers.idle = Some(d);
            }
        }
        if self.snd_una == self.snd_max {
            self.timers.rto = None;
            self.rexmit_head = false;
        }
        // Persist: a zero window, data waiting and nothing in flight that an ACK would
        // answer. (After a timeout `snd_nxt == snd_una`: the window then decides.)
        let data_states = matches!(
            self.state,
            State::Established | State::CloseWait | State::FinWait1 | State::Closing | State::LastAck
        );
        if data_states && self.snd_wnd == 0 && self.unsent() > 0 && self.snd_nxt == self.snd_una {
            self.timers.rto = None;
            if self.timers.persist.is_none() && !self.probe_due {
                self.timers.persist = Some(now + self.rtt.persist_interval(self.persist_probes));
            }
        } else {
            self.timers.persist = None;
            self.probe_due = false;
            if self.snd_wnd > 0 {
                self.persist_probes = 0;
            }
        }
        // Anything outstanding is covered by the retransmission timer (RFC 6298 §5.1).
        if self.snd_max > self.snd_una && self.timers.rto.is_none() && self.timers.persist.is_none() && !self.probe_due
        {
            self.timers.rto = Some(now + self.rtt.rto());
        }
    }
}
