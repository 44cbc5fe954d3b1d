//! What to send next and how: the SYN, data (Nagle, sender SWS avoidance, flow and
//! congestion control), retransmissions, zero-window probes, ACKs and window updates.
use ironpath_wire::{TcpControl, TcpRepr};

use super::{Connection, State};
use crate::options::sack_options_len;
use crate::segment::bare_repr;
use crate::{Payload, Segment, SeqNum, Time};

/// The next segment `dispatch` sends. `plan` decides it from the state alone, so
/// `poll_at` and `dispatch` agree; `commit` applies it once the caller took it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// The RST of an abort, with its sequence number.
    Rst(SeqNum),
    /// SYN, or SYN-ACK in SYN-RECEIVED.
    Syn,
    /// The first unacknowledged segment again (fast retransmit, partial ACK).
    Retransmit { len: usize, fin: bool },
    /// One byte beyond a zero window.
    Probe,
    /// A keep-alive probe: no data, one below `snd_una`, so the peer answers.
    Keepalive,
    /// Data at `snd_nxt` (also resent data after a timeout), maybe with the FIN.
    Data { len: usize, fin: bool },
    /// A pure ACK (owed, or a window update).
    Ack,
}

impl<P: Payload> Connection<P> {
    /// Handles expired timers, then emits every segment that is due: handshake,
    /// retransmissions, new data within the peer's and the congestion window, probes,
    /// ACKs and window updates. Returns how many were emitted.
    ///
    /// If `emit` fails, the segment it was given counts as not sent (it is offered
    /// again at the next call) and the error is returned.
    pub fn dispatch<E>(&mut self, now: Time, mut emit: impl FnMut(Segment<P>) -> Result<(), E>) -> Result<usize, E> {
        self.on_timers(now);
        let mut sent = 0;
        let mut result = Ok(());
        while let Some(plan) = self.plan() {
            let (segment, rcv_adv) = self.build(now, plan);
            if let Err(e) = emit(segment) {
                result = Err(e);
                break;
            }
            self.commit(now, plan, rcv_adv);
            sent += 1;
        }
        self.update_timers(now);
        result.map(|()| sent)
    }

    /// Whether `dispatch` has something to send right now (timers aside).
    pub(super) fn has_output(&self) -> bool {
        self.plan().is_some()
    }

    fn plan(&self) -> Option<Plan> {
        if let Some(seq) = self.rst_due {
            return Some(Plan::Rst(seq));
        }
        match self.state {
            State::Closed => return None,
            State::SynSent | State::SynReceived => return (self.snd_nxt == self.iss).then_some(Plan::Syn),
            _ => {}
        }
        if self.rexmit_head {
            if let Some((len, fin)) = self.head_segment() {
                return Some(Plan::Retransmit { len, fin });
            }
        }
        if self.probe_due && self.unsent() > 0 {
            return Some(Plan::Probe);
        }
        if self.keepalive_due {
            return Some(Plan::Keepalive);
        }
        if let Some((len, fin)) = self.next_data() {
            return Some(Plan::Data { len, fin });
        }
        if self.ack_now || self.window_update_due() {
            return Some(Plan::Ack);
        }
        None
    }

    /// States in which data and a FIN may be sent (or resent).
    fn sending(&self) -> bool {
        matches!(self.state, State::Established | State::CloseWait | State::FinWait1 | State::Closing | State::LastAck)
    }

    /// Queued bytes not sent yet (beyond `snd_nxt`).
    pub(super) fn unsent(&self) -> usize {
        let sent = self.snd_nxt.distance(self.snd_una) as usize;
        self.send_buf.len().saturating_sub(sent)
    }

    /// The first unacknowledged segment: `(payload length, FIN)`.
    fn head_segment(&self) -> Option<(usize, bool)> {
        if !self.sending() || self.snd_max == self.snd_una {
            return None;
        }
        let outstanding = self.snd_max.distance(self.snd_una) as usize;
        let buffered = self.send_buf.len();
        let len = buffered.min(outstanding).min(self.max_payload());
        let fin = self.fin_queued && outstanding > buffered && len == buffered;
        (len > 0 || fin).then_some((len, fin))
    }

    /// The next new (or, after a timeout, resent) segment at `snd_nxt`, if flow control,
    /// congestion control, Nagle and sender-side SWS avoidance (RFC 9293 §3.8.6.2.1)
    /// let it go now.
    fn next_data(&self) -> Option<(usize, bool)> {
        if !self.sending() {
            return None;
        }
        let buffered = self.send_buf.len();
        let in_flight = self.snd_nxt.distance(self.snd_una) as usize;
        if in_flight > buffered {
            return None; // the FIN is sent
        }
        let unsent = buffered - in_flight;
        let window = self.snd_wnd.min(self.cc.cwnd()) as usize;
        let seg = self.max_payload();
        let max = self.tso_payload(seg);
        let mut len = unsent.min(window.saturating_sub(in_flight)).min(max);
        if len > seg && len < unsent {
            // A TSO segment cut by the window: whole segments only (no runt inside
            // the stream; the rest goes when the window opens).
            len -= len % seg;
        }
        // A FIN takes no window: a zero window answers it with an ACK, or takes it.
        let fin = self.fin_queued && len == unsent;
        if len == 0 {
            return fin.then_some((0, true));
        }
        // (With TSO a full segment is enough: the rest of `max` may never come.)
        let go = len >= seg
            || fin
            || in_flight == 0
            || self.snd_nxt < self.snd_max
            || (!self.config.nagle && len == unsent)
            || (self.max_snd_wnd > 0 && len >= self.max_snd_wnd as usize / 2);
        go.then_some((len, fin))
    }

    /// Payload bytes new data may take in one (TSO) segment: whole segments of `seg`
    /// up to `tso_max`, or `seg` without TSO.
    fn tso_payload(&self, seg: usize) -> usize {
        let tso = self.config.tso_max;
        if tso > seg {
            tso / seg * seg
        } else {
            seg
        }
    }

    /// Payload bytes of a full segment now: the sender MSS minus the SACK option.
    fn max_payload(&self) -> usize {
        let blocks = if self.opts.sack { self.recv_buf.sack_blocks().iter().flatten().count() } else { 0 };
        self.smss().saturating_sub(sack_options_len(blocks)).max(1)
    }

    /// The receive window we could offer now, in units of the scale: the free buffer,
    /// and no more payload than the free memory holds at the ratio full-sized
    /// segments arrive with (a 1,448-byte segment in a 2 KiB packet buffer fills the
    /// memory before the window).
    fn advertisable(&self) -> usize {
        let shift = self.opts.rcv_wscale;
        let free = self.rcv_cap().saturating_sub(self.recv_buf.ready_len());
        let free_mem = self.config.recv_buffer.saturating_sub(self.recv_buf.ready_mem());
        let by_mem = ((free_mem as u64 * u64::from(self.rcv_ratio)) / u64::from(super::RATIO_ONE)) as usize;
        (free.min(by_mem) >> shift).min(65535) << shift
    }

    /// Receiver SWS avoidance (RFC 9293 §3.8.6.2.2): the window only opens by at least
    /// min(buffer / 2, MSS).
    fn sws_threshold(&self) -> usize {
        (self.rcv_cap() / 2).min(usize::from(self.config.local_mss())).max(1)
    }

    /// Whether reading opened the window enough to tell the peer without waiting for
    /// data: by the SWS threshold and to at least twice what it holds now.
    fn window_update_due(&self) -> bool {
        if !self.read_since_ack || !matches!(self.state, State::Established | State::FinWait1 | State::FinWait2) {
            return false;
        }
        let cur = self.rcv_wnd() as usize;
        let adv = self.advertisable();
        adv >= cur + self.sws_threshold() && adv >= 2 * cur
    }

    /// The window field to send and the right edge it advertises. The scale rounds the
    /// window down, so the edge the peer sees may move left by less than one unit of
    /// the scale (RFC 7323 §2.4); `rcv_adv` keeps the furthest edge ever advertised, and
    /// data up to it is still taken. Rounding up instead would let the edge creep past
    /// the buffer by a unit per ACK.
    pub(super) fn window_field(&self) -> (u16, SeqNum) {
        let shift = self.opts.rcv_wscale;
        let cur = self.rcv_wnd() as usize;
        let adv = self.advertisable();
        let win = if adv >= cur + self.sws_threshold() { adv } else { cur };
        let field = (win >> shift).min(65535);
        (field as u16, self.rcv_nxt + (field << shift))
    }

    /// Our timestamp clock: milliseconds plus the connection's offset.
    pub(super) fn ts_now(&self, now: Time) -> u32 {
        (now.millis() as u32).wrapping_add(self.ts_offset)
    }

    /// An ACK-bearing header at `seq` (window, SACK blocks, timestamp) and the right
    /// edge its window advertises.
    fn ack_repr(&self, now: Time, seq: SeqNum) -> (TcpRepr, SeqNum) {
        let (window_len, rcv_adv) = self.window_field();
        let mut repr = bare_repr(self.local.port, self.remote.port, seq, Some(self.rcv_nxt), TcpControl::None);
        repr.window_len = window_len;
        if self.opts.sack {
            repr.sack_ranges = self.recv_buf.sack_blocks();
        }
        if self.opts.timestamps {
            repr.timestamp = Some((self.ts_now(now), self.ts_recent));
        }
        (repr, rcv_adv)
    }

    fn syn_repr(&self, now: Time) -> TcpRepr {
        let synack = self.state == State::SynReceived;
        let o = &self.opts;
        let mut repr =
            bare_repr(self.local.port, self.remote.port, self.iss, synack.then_some(self.rcv_nxt), TcpControl::Syn);
        repr.window_len = self.syn_window();
        repr.max_seg_size = Some(self.config.local_mss());
        repr.window_scale = o.window_scaling.then_some(o.rcv_wscale);
        repr.sack_permitted = o.sack;
        repr.timestamp = o.timestamps.then(|| (self.ts_now(now), if synack { self.ts_recent } else { 0 }));
        repr
    }

    fn build(&mut self, now: Time, plan: Plan) -> (Segment<P>, SeqNum) {
        let (repr, payload, rcv_adv) = match plan {
            Plan::Rst(seq) => {
                (bare_repr(self.local.port, self.remote.port, seq, None, TcpControl::Rst), None, self.rcv_adv)
            }
            Plan::Syn => (self.syn_repr(now), None, self.rcv_adv),
            Plan::Retransmit { len, fin } => self.data_repr(now, self.snd_una, len, fin),
            Plan::Probe => self.data_repr(now, self.snd_nxt, 1, false),
            Plan::Keepalive => {
                let (repr, rcv_adv) = self.ack_repr(now, self.snd_una - 1u32);
                (repr, None, rcv_adv)
            }
            Plan::Data { len, fin } => {
                let seg = self.max_payload();
                let (repr, payload, rcv_adv) = self.data_repr(now, self.snd_nxt, len, fin);
                let mut s = self.segment(repr, payload);
                if len > seg {
                    s.tso_segsz = seg as u16;
                }
                return (s, rcv_adv);
            }
            Plan::Ack => {
                let (repr, rcv_adv) = self.ack_repr(now, self.snd_max);
                (repr, None, rcv_adv)
            }
        };
        (self.segment(repr, payload), rcv_adv)
    }

    fn data_repr(&mut self, now: Time, seq: SeqNum, len: usize, fin: bool) -> (TcpRepr, Option<P>, SeqNum) {
        let (mut repr, rcv_adv) = self.ack_repr(now, seq);
        let off = seq.distance(self.snd_una) as usize;
        let payload = self.send_buf.slice(off, len);
        repr.payload_len = payload.as_ref().map_or(0, P::len);
        repr.control = if fin {
            TcpControl::Fin
        } else if off + len == self.send_buf.len() {
            TcpControl::Psh
        } else {
            TcpControl::None
        };
        (repr, payload, rcv_adv)
    }

    fn segment(&self, repr: TcpRepr, payload: Option<P>) -> Segment<P> {
        Segment { src_addr: self.local.addr, dst_addr: self.remote.addr, repr, payload, tso_segsz: 0 }
    }

    /// Applies a plan the caller has taken.
    fn commit(&mut self, now: Time, plan: Plan, rcv_adv: SeqNum) {
        self.counters.segs_out += 1;
        match plan {
            Plan::Rst(_) => {
                self.rst_due = None;
                return;
            }
            Plan::Syn => {
                if self.snd_max != self.iss {
                    self.counters.retransmits += 1;
                } else {
                    self.rtt_seq = Some((self.iss, now));
                }
                self.snd_nxt = self.iss + 1u32;
                self.snd_max = self.snd_max.max(self.snd_nxt);
                if self.state == State::SynSent {
                    return; // no ACK in a SYN
                }
            }
            Plan::Retransmit { len, fin } => {
                self.counters.retransmits += 1;
                self.counters.bytes_out += len as u64;
                self.rexmit_head = false;
                let end = self.snd_una + len + usize::from(fin);
                self.snd_nxt = self.snd_nxt.max(end);
                self.snd_max = self.snd_max.max(end);
            }
            Plan::Probe => {
                self.counters.zero_window_probes += 1;
                self.counters.bytes_out += 1;
                self.probe_due = false;
                // The byte is not counted as sent (snd_nxt stays): only snd_max covers it,
                // so an ACK of it is acceptable.
                self.snd_max = self.snd_max.max(self.snd_nxt + 1u32);
                self.persist_probes += 1;
                self.timers.persist = Some(now + self.rtt.persist_interval(self.persist_probes));
            }
            Plan::Keepalive => {
                self.counters.keepalive_probes += 1;
                self.keepalive_due = false;
                self.keepalive_sent += 1;
            }
            Plan::Data { len, fin } => {
                let seq = self.snd_nxt;
                let end = seq + len + usize::from(fin);
                if seq < self.snd_max {
                    self.counters.retransmits += 1;
                } else if self.rtt_seq.is_none() && !self.opts.timestamps {
                    self.rtt_seq = Some((seq, now));
                }
                self.counters.bytes_out += len as u64;
                self.snd_nxt = end;
                self.snd_max = self.snd_max.max(end);
            }
            Plan::Ack => {
                if !self.ack_now {
                    self.counters.window_updates += 1;
                }
            }
        }
        self.ack_sent(rcv_adv);
    }

    /// An ACK of `rcv_nxt` with a window up to `rcv_adv` went out.
    fn ack_sent(&mut self, rcv_adv: SeqNum) {
        self.last_ack_sent = self.rcv_nxt;
        self.rcv_adv = self.rcv_adv.max(rcv_adv);
        self.ack_now = false;
        self.read_since_ack = false;
        self.unacked_segs = 0;
        self.timers.ack = None;
    }

    /// A pure ACK to send at once (from `process`); it counts as sent.
    ///
    /// Pure ACKs carry `snd_max`, not `snd_nxt` (as BSD does): while resending after a
    /// timeout `snd_nxt` lags behind what the peer may already have, and an ACK below
    /// its RCV.NXT would be unacceptable to it (and answered, and so on).
    pub(super) fn ack_reply(&mut self, now: Time) -> Segment<P> {
        let (repr, rcv_adv) = self.ack_repr(now, self.snd_max);
        self.ack_sent(rcv_adv);
        self.segment(repr, None)
    }

    /// `<SEQ=seq><ACK=ack><CTL=RST>` to the peer.
    pub(super) fn rst(&self, seq: SeqNum, ack: Option<SeqNum>) -> Segment<P> {
        self.segment(bare_repr(self.local.port, self.remote.port, seq, ack, TcpControl::Rst), None)
    }
}
