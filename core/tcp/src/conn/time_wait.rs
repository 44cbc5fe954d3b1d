//! [`TimeWait`]: what a connection in TIME-WAIT still has to know, without its
//! buffers, congestion state and configuration.
//!
//! A server that closes first keeps every connection in TIME-WAIT for 2 MSL (60 s):
//! tens of thousands of them at a few thousand connections a second. A [`Connection`]
//! is about a kilobyte; this is a few cache lines, so that those connections do not
//! push the live ones out of the cache (Linux keeps an `inet_timewait_sock` for the
//! same reason). [`Connection::time_wait`] makes one; [`TimeWait::process`] answers
//! segments exactly as the connection would have (a differential test and a fuzz
//! target feed both the same segments and compare).
use std::time::Duration;

use ironpath_wire::{TcpControl, TcpRepr};

use super::input::{acceptable, AckLimits};
use super::{Connection, State};
use crate::options::{paws_rejects, ts_before};
use crate::segment::bare_repr;
use crate::{Endpoint, Payload, Segment, SeqNum, Time};

/// A connection in TIME-WAIT (RFC 9293 §3.10.7.4), reduced to what answering its
/// peer needs: the sequence numbers, the window it advertised, the timestamp state
/// (PAWS) and the rate limits of its ACKs.
#[derive(Debug, Clone)]
pub struct TimeWait {
    local: Endpoint,
    remote: Endpoint,
    /// Our sequence space is all acknowledged: SND.UNA = SND.NXT = SND.MAX.
    snd_max: SeqNum,
    max_snd_wnd: u32,
    snd_wl1: SeqNum,
    snd_wl2: SeqNum,
    rcv_nxt: SeqNum,
    /// Right edge of the window advertised so far.
    rcv_adv: SeqNum,
    /// The window field of our ACKs (fixed: nothing is received any more) and the
    /// right edge it advertises.
    window_len: u16,
    window_edge: SeqNum,
    snd_wscale: u8,
    timestamps: bool,
    ts_offset: u32,
    ts_recent: u32,
    ts_recent_at: Time,
    last_ack_sent: SeqNum,
    ack_limits: AckLimits,
    challenge_limit: u32,
    challenge_acks: u32,
    /// 2 MSL, and when it ends.
    linger: Duration,
    expires: Time,
}

/// What [`TimeWait::process`] made of a segment.
#[derive(Debug)]
pub enum TimeWaitReply<P> {
    /// Nothing to send.
    None,
    /// Send this ACK.
    Ack(Segment<P>),
    /// A RST ended TIME-WAIT: forget the connection.
    Closed,
}

impl<P: Payload> Connection<P> {
    /// The connection's TIME-WAIT state on its own, when it is in TIME-WAIT with
    /// nothing left to read, send or acknowledge; the caller may then drop the
    /// connection and keep this until [`TimeWait::expires`].
    pub fn time_wait(&self) -> Option<TimeWait> {
        let settled = self.state == State::TimeWait
            && self.recv_buf.ready_len() == 0
            && self.recv_buf.ooo_len() == 0
            && self.snd_una == self.snd_max
            && !self.ack_now
            && self.timers.ack.is_none()
            && self.rst_due.is_none();
        let expires = self.timers.time_wait.filter(|_| settled)?;
        let (window_len, window_edge) = self.window_field();
        Some(TimeWait {
            local: self.local,
            remote: self.remote,
            snd_max: self.snd_max,
            max_snd_wnd: self.max_snd_wnd,
            snd_wl1: self.snd_wl1,
            snd_wl2: self.snd_wl2,
            rcv_nxt: self.rcv_nxt,
            rcv_adv: self.rcv_adv,
            window_len,
            window_edge,
            snd_wscale: self.opts.snd_wscale,
            timestamps: self.opts.timestamps,
            ts_offset: self.ts_offset,
            ts_recent: self.ts_recent,
            ts_recent_at: self.ts_recent_at,
            last_ack_sent: self.last_ack_sent,
            ack_limits: self.ack_limits,
            challenge_limit: self.config.challenge_ack_limit,
            challenge_acks: 0,
            linger: self.config.msl * 2,
            expires,
        })
    }
}

impl TimeWait {
    /// Our end.
    pub fn local(&self) -> Endpoint {
        self.local
    }

    /// The peer.
    pub fn remote(&self) -> Endpoint {
        self.remote
    }

    /// The next sequence number expected from the peer (a new SYN beyond it may
    /// replace this connection).
    pub fn rcv_nxt(&self) -> SeqNum {
        self.rcv_nxt
    }

    /// When TIME-WAIT ends (a retransmitted FIN moves it later).
    pub fn expires(&self) -> Time {
        self.expires
    }

    /// Challenge ACKs sent (RFC 5961) since this was made.
    pub fn challenge_acks(&self) -> u32 {
        self.challenge_acks
    }

    /// Processes a segment of this 4-tuple (`plen` payload bytes), as
    /// [`Connection::process`] followed by [`Connection::dispatch`] would in
    /// TIME-WAIT: a retransmitted FIN is acknowledged and restarts the 2 MSL wait,
    /// unacceptable segments get a (rate-limited) ACK, RFC 5961's checks answer SYNs,
    /// inexact RSTs and unacceptable ACKs with a challenge ACK, PAWS applies, and a RST
    /// at RCV.NXT ends the connection. Data is not taken.
    pub fn process<P: Payload>(&mut self, now: Time, seg: &TcpRepr, plen: usize) -> TimeWaitReply<P> {
        let seq = SeqNum(seg.seq_number);
        let syn = seg.control == TcpControl::Syn;
        let fin = seg.control == TcpControl::Fin;
        let rst = seg.control == TcpControl::Rst;
        let ack = |tw: &mut Self| TimeWaitReply::Ack(tw.ack_reply(now));

        // PAWS (RFC 7323 §5.3 R1) and the missing-timestamp rule (§3.2).
        if self.timestamps && !rst {
            let Some((tsval, _)) = seg.timestamp else { return TimeWaitReply::None };
            let recent = (self.ts_recent, self.ts_recent_at);
            if paws_rejects(seg, plen, tsval, self.rcv_nxt, self.snd_max, recent, now) {
                let answer = plen > 0 || fin || self.ack_limits.oow_ack_allowed(now);
                return if answer { ack(self) } else { TimeWaitReply::None };
            }
        }
        if syn {
            return self.challenge_ack(now);
        }

        let seg_len = plen + usize::from(fin);
        let wnd = self.rcv_wnd();
        // Data into a zero window is answered with an ACK (once the segment passed
        // the checks below).
        let mut ack_owed = false;
        if !acceptable(seq, seg_len as u32, self.rcv_nxt, wnd) {
            if wnd == 0 && seq == self.rcv_nxt {
                ack_owed = plen > 0;
            } else {
                if rst {
                    return TimeWaitReply::None;
                }
                if fin {
                    // A retransmitted FIN: acknowledge it and restart the 2 MSL wait.
                    self.expires = now + self.linger;
                }
                if seg_len == 0 && !self.ack_limits.oow_ack_allowed(now) {
                    return TimeWaitReply::None;
                }
                return ack(self);
            }
        }
        if rst {
            if seq != self.rcv_nxt {
                return self.challenge_ack(now);
            }
            return TimeWaitReply::Closed;
        }
        if let (true, Some((tsval, _))) = (self.timestamps, seg.timestamp) {
            if !ts_before(tsval, self.ts_recent) && seq <= self.last_ack_sent {
                self.ts_recent = tsval;
                self.ts_recent_at = now;
            }
        }
        let Some(ack_number) = seg.ack_number.map(SeqNum) else {
            return if ack_owed { ack(self) } else { TimeWaitReply::None };
        };
        // RFC 5961 §5.2: (SND.UNA - MAX.SND.WND) <= SEG.ACK <= SND.NXT.
        if ack_number > self.snd_max || ack_number < self.snd_max - self.max_snd_wnd {
            return self.challenge_ack(now);
        }
        if ack_number >= self.snd_max && (self.snd_wl1 < seq || (self.snd_wl1 == seq && self.snd_wl2 <= ack_number)) {
            // The send window no longer matters, but its maximum bounds the ACKs
            // accepted above.
            let window = u32::from(seg.window_len) << self.snd_wscale;
            self.max_snd_wnd = self.max_snd_wnd.max(window);
            (self.snd_wl1, self.snd_wl2) = (seq, ack_number);
        }
        if ack_owed {
            ack(self)
        } else {
            TimeWaitReply::None
        }
    }

    fn rcv_wnd(&self) -> u32 {
        if self.rcv_adv > self.rcv_nxt {
            self.rcv_adv.distance(self.rcv_nxt)
        } else {
            0
        }
    }

    fn ack_reply<P>(&mut self, now: Time) -> Segment<P> {
        let mut repr = bare_repr(self.local.port, self.remote.port, self.snd_max, Some(self.rcv_nxt), TcpControl::None);
        repr.window_len = self.window_len;
        if self.timestamps {
            repr.timestamp = Some(((now.millis() as u32).wrapping_add(self.ts_offset), self.ts_recent));
        }
        self.last_ack_sent = self.rcv_nxt;
        self.rcv_adv = self.rcv_adv.max(self.window_edge);
        Segment { src_addr: self.local.addr, dst_addr: self.remote.addr, repr, payload: None, tso_segsz: 0 }
    }

    fn challenge_ack<P>(&mut self, now: Time) -> TimeWaitReply<P> {
        if !self.ack_limits.challenge_allowed(now, self.challenge_limit) {
            return TimeWaitReply::None;
        }
        self.challenge_acks += 1;
        TimeWaitReply::Ack(self.ack_reply(now))
    }
}
