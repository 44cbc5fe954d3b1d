//! Segment arrival (RFC 9293 §3.10.7) with the RFC 5961 checks, PAWS (RFC 7323 §5),
//! ACK processing (RTT, NewReno) and the receive side (reassembly, delayed ACKs).
use std::time::Duration;

use ironpath_wire::{TcpControl, TcpRepr};

use super::{Connection, State, RATIO_ONE};
use crate::congestion::AckEvent;
use crate::options::{paws_rejects, ts_before};
use crate::segment::rst_reply;
use crate::{ConnError, Payload, Segment, SeqNum, Time};

/// Least time between ACKs answering unacceptable pure ACKs (Linux's default
/// `tcp_invalid_ratelimit`).
const OOW_ACK_INTERVAL: Duration = Duration::from_millis(500);

/// The rate limits of ACKs that answer segments (a connection's and its TIME-WAIT
/// form's): unacceptable pure ACKs at most one per [`OOW_ACK_INTERVAL`], as Linux does,
/// so that two ends that disagree about sequence numbers cannot ping-pong ACKs
/// forever; RFC 5961 challenge ACKs at most `limit` a second.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct AckLimits {
    oow_ack_at: Option<Time>,
    challenge_epoch: Time,
    challenge_count: u32,
}

impl AckLimits {
    /// Whether an ACK may answer an unacceptable pure ACK now (and counts it if so).
    pub(super) fn oow_ack_allowed(&mut self, now: Time) -> bool {
        if self.oow_ack_at.is_some_and(|at| now < at + OOW_ACK_INTERVAL) {
            return false;
        }
        self.oow_ack_at = Some(now);
        true
    }

    /// Whether a challenge ACK may go out now (and counts it if so).
    pub(super) fn challenge_allowed(&mut self, now: Time, limit: u32) -> bool {
        if now >= self.challenge_epoch + Duration::from_secs(1) {
            self.challenge_epoch = now;
            self.challenge_count = 0;
        }
        if self.challenge_count >= limit {
            return false;
        }
        self.challenge_count += 1;
        true
    }
}

/// RFC 9293 §3.10.7.4, "first, check sequence number": is a segment of `len` sequence
/// numbers at `seq` acceptable for a window of `wnd` from `rcv_nxt`?
pub(super) fn acceptable(seq: SeqNum, len: u32, rcv_nxt: SeqNum, wnd: u32) -> bool {
    let in_window = |s: SeqNum| s.distance(rcv_nxt) < wnd;
    match (len, wnd) {
        (0, 0) => seq == rcv_nxt,
        (0, _) => in_window(seq),
        (_, 0) => false,
        _ => in_window(seq) || in_window(seq + (len - 1)),
    }
}

impl<P: Payload> Connection<P> {
    /// Processes one received segment for this connection and returns the segment to
    /// send back at once, if any: a RST, a challenge ACK, the ACK of an unacceptable
    /// segment, or the ACK the data calls for now (out of order, filling a hole, every
    /// second segment, a FIN). Delayed ACKs, data and everything else go out from
    /// [`dispatch`](Self::dispatch).
    ///
    /// `seg` carries the header fields (the caller demultiplexed it to this 4-tuple and
    /// verified its checksum); `payload` is its data (`seg.payload_len` is ignored);
    /// `segs` is how many original segments an aggregate (GRO/LRO) merged, 1 otherwise:
    /// delayed-ACK accounting counts those.
    pub fn process(&mut self, now: Time, seg: &TcpRepr, payload: Option<P>, segs: u16) -> Option<Segment<P>> {
        let segs = segs.max(1);
        self.accepted = false;
        self.counters.segs_in += u64::from(segs);
        // Any segment shows the peer is there (a keep-alive answer is an ACK).
        self.last_rx = now;
        self.keepalive_sent = 0;
        let before = self.state;
        let payload = payload.filter(|p| !p.is_empty());
        let reply = match self.state {
            State::Closed => {
                let len = payload.as_ref().map_or(0, P::len);
                rst_reply(self.remote.addr, self.local.addr, seg, len)
            }
            State::SynSent => self.process_syn_sent(now, seg),
            _ => self.process_synchronized(now, seg, payload, segs),
        };
        if reply.is_some() {
            self.counters.segs_out += 1;
        }
        if self.state == State::FinWait2 && before != State::FinWait2 {
            self.fin_wait2_at = now;
        }
        self.update_timers(now);
        reply
    }

    /// RFC 9293 §3.10.7.3.
    fn process_syn_sent(&mut self, now: Time, seg: &TcpRepr) -> Option<Segment<P>> {
        let ack = seg.ack_number.map(SeqNum);
        if let Some(ack) = ack {
            if ack <= self.iss || ack > self.snd_max {
                return (seg.control != TcpControl::Rst).then(|| self.rst(ack, None));
            }
        }
        match seg.control {
            TcpControl::Rst => {
                // Acceptable only with an ACK of our SYN (RFC 5961 §3.2 leaves SYN-SENT as is).
                if ack.is_some() {
                    self.enter_closed(Some(ConnError::Refused));
                }
                return None;
            }
            TcpControl::Syn => {}
            _ => return None,
        }
        self.take_peer_syn(now, seg);
        self.accepted = ack.is_some();
        match ack {
            Some(ack) => {
                self.on_syn_acked(now, ack, seg.timestamp);
                self.state = State::Established;
                self.ack_now = true;
            }
            None => {
                // Simultaneous open: answer with <SEQ=ISS><ACK=RCV.NXT><CTL=SYN,ACK>.
                self.state = State::SynReceived;
                self.snd_nxt = self.iss;
                self.rtt_seq = None;
            }
        }
        None
    }

    /// RFC 9293 §3.10.7.4 for SYN-RECEIVED and the synchronized states.
    fn process_synchronized(&mut self, now: Time, seg: &TcpRepr, payload: Option<P>, segs: u16) -> Option<Segment<P>> {
        let seq = SeqNum(seg.seq_number);
        let plen = payload.as_ref().map_or(0, P::len);
        let syn = seg.control == TcpControl::Syn;
        let fin = seg.control == TcpControl::Fin;
        let rst = seg.control == TcpControl::Rst;

        // The peer did not get our SYN-ACK and sent its SYN again: resend the SYN-ACK.
        if self.state == State::SynReceived && syn && seg.ack_number.is_none() && seq == self.irs {
            self.snd_nxt = self.iss;
            self.rtt_seq = None;
            return None;
        }

        // PAWS (RFC 7323 §5.3 R1) and the missing-timestamp rule (§3.2).
        if self.opts.timestamps && !rst {
            let Some((tsval, _)) = seg.timestamp else {
                self.counters.paws_drops += 1;
                return None;
            };
            let recent = (self.ts_recent, self.ts_recent_at);
            if paws_rejects(seg, plen, tsval, self.rcv_nxt, self.snd_una, recent, now) {
                self.counters.paws_drops += 1;
                let answer = plen > 0 || fin || self.oow_ack_allowed(now);
                return answer.then(|| self.ack_reply(now));
            }
        }

        // RFC 5961 §4: a SYN in a synchronized state, whatever its sequence number.
        if syn {
            return self.challenge_ack(now);
        }

        let seg_len = plen + usize::from(fin);
        let wnd = self.rcv_wnd();
        let (mut take_data, mut take_fin) = (true, true);
        if !acceptable(seq, seg_len as u32, self.rcv_nxt, wnd) {
            if wnd == 0 && seq == self.rcv_nxt {
                // A zero window still takes ACKs and RSTs (§3.10.7.4), and a bare FIN
                // (as Linux does): data is dropped and answered with an ACK.
                take_data = false;
                take_fin = plen == 0;
                if plen > 0 {
                    self.counters.bytes_dropped += plen as u64;
                    self.ack_now = true;
                }
            } else {
                self.counters.out_of_window += 1;
                if rst {
                    return None;
                }
                if self.state == State::TimeWait && fin {
                    // A retransmitted FIN: acknowledge it and restart the 2 MSL timeout.
                    self.timers.time_wait = Some(now + self.config.msl * 2);
                }
                if seg_len == 0 && !self.oow_ack_allowed(now) {
                    return None;
                }
                return Some(self.ack_reply(now));
            }
        }

        // RFC 5961 §3.2: only a RST at exactly RCV.NXT resets; others in the window get
        // a challenge ACK (out-of-window ones were dropped above).
        if rst {
            if seq != self.rcv_nxt {
                return self.challenge_ack(now);
            }
            let error = match self.state {
                State::SynReceived => Some(ConnError::Refused),
                State::Closing | State::LastAck | State::TimeWait => None,
                _ => Some(ConnError::Reset),
            };
            self.enter_closed(error);
            return None;
        }

        // RFC 7323 §4.3: TS.Recent follows the segment that Last.ACK.sent covers.
        if let (true, Some((tsval, _))) = (self.opts.timestamps, seg.timestamp) {
            if !ts_before(tsval, self.ts_recent) && seq <= self.last_ack_sent {
                self.ts_recent = tsval;
                self.ts_recent_at = now;
            }
        }

        let ack = SeqNum(seg.ack_number?);
        if let Some(reply) = self.process_ack(now, seg, ack, plen, fin) {
            return reply;
        }
        self.accepted = true;

        let receiving = matches!(self.state, State::Established | State::FinWait1 | State::FinWait2);
        if receiving && take_data {
            if let Some(data) = payload {
                self.receive_data(now, seq, data, segs);
            }
        }
        if receiving && take_fin && fin {
            let fin_seq = seq + plen;
            if fin_seq == self.rcv_nxt {
                self.receive_fin(now);
            } else if fin_seq > self.rcv_nxt && fin_seq <= self.rcv_adv {
                self.fin_at = Some(fin_seq);
                self.ack_now = true;
            }
        }
        // An ACK owed now goes out as the reply, one per segment that calls for it:
        // bursts of out-of-order segments make as many duplicate ACKs.
        self.ack_now.then(|| self.ack_reply(now))
    }

    /// The ACK field (§3.10.7.4, fifth check). `Some(reply)` ends processing of the
    /// segment with that reply.
    fn process_ack(
        &mut self,
        now: Time,
        seg: &TcpRepr,
        ack: SeqNum,
        plen: usize,
        fin: bool,
    ) -> Option<Option<Segment<P>>> {
        let seq = SeqNum(seg.seq_number);
        let window = u32::from(seg.window_len) << self.opts.snd_wscale;
        if self.state == State::SynReceived {
            if !(self.snd_una < ack && ack <= self.snd_max) {
                return Some(Some(self.rst(ack, None)));
            }
            self.set_send_window(window, seq, ack);
            self.on_syn_acked(now, ack, seg.timestamp);
            self.state = if self.fin_queued { State::FinWait1 } else { State::Established };
            return None;
        }
        // RFC 5961 §5.2: (SND.UNA - MAX.SND.WND) <= SEG.ACK <= SND.NXT, else discard
        // and ACK.
        if ack > self.snd_max || ack < self.snd_una - self.max_snd_wnd {
            return Some(self.challenge_ack(now));
        }
        if ack > self.snd_una {
            self.on_new_ack(now, ack, seg.timestamp);
        } else if ack == self.snd_una
            && plen == 0
            && !fin
            && window > 0
            && self.snd_nxt > self.snd_una
            && !matches!(self.state, State::TimeWait)
        {
            // RFC 5681 §2 (a zero window or a probe outstanding is not a loss signal):
            // the window must be unchanged, unless SACK blocks report data not reported
            // before (RFC 6675's DupAck): receivers grow their window while out-of-order
            // data arrives (Linux does, as its application reads), which would hide
            // every duplicate ACK and leave the loss to the retransmission timer.
            let mut new_sack = false;
            if self.opts.sack {
                for &(_, right) in seg.sack_ranges.iter().flatten() {
                    let right = SeqNum(right);
                    if right > self.sack_high.max(ack) && right <= self.snd_max {
                        self.sack_high = right;
                        new_sack = true;
                    }
                }
            }
            if new_sack || window == self.snd_wnd {
                self.on_dup_ack(ack);
            }
        }
        if ack >= self.snd_una && (self.snd_wl1 < seq || (self.snd_wl1 == seq && self.snd_wl2 <= ack)) {
            self.set_send_window(window, seq, ack);
        }
        if self.fin_acked {
            match self.state {
                State::FinWait1 => self.state = State::FinWait2,
                State::Closing => self.enter_time_wait(now),
                State::LastAck => {
                    self.enter_closed(None);
                    return Some(None);
                }
                _ => {}
            }
        }
        None
    }

    fn set_send_window(&mut self, window: u32, seq: SeqNum, ack: SeqNum) {
        self.snd_wnd = window;
        self.max_snd_wnd = self.max_snd_wnd.max(window);
        self.snd_wl1 = seq;
        self.snd_wl2 = ack;
    }

    /// Our SYN is acknowledged by `ack`: the handshake is done on our side.
    fn on_syn_acked(&mut self, now: Time, ack: SeqNum, timestamp: Option<(u32, u32)>) {
        self.snd_una = ack;
        self.snd_nxt = self.snd_nxt.max(ack);
        self.snd_max = self.snd_max.max(ack);
        self.take_rtt_sample(now, ack, timestamp);
        self.retries = 0;
        self.timers.rto = None;
        self.cc.init(self.smss() as u32, self.config.initial_window);
    }

    /// `ack` acknowledges new data (and maybe our FIN).
    fn on_new_ack(&mut self, now: Time, ack: SeqNum, timestamp: Option<(u32, u32)>) {
        let acked = ack.distance(self.snd_una);
        let buffered = self.send_buf.len();
        if acked as usize > buffered {
            // Only a FIN lies beyond the data, and `ack <= snd_max` says it was sent.
            self.fin_acked = true;
        }
        self.send_buf.consume(acked as usize);
        self.snd_una = ack;
        // The peer took something: the send timeout starts again (or stops, if
        // nothing waits any more: `update_timers` sees to it). With a minimum rate the
        // period runs on: its end checks how much was taken.
        if self.config.send_min_rate == 0 {
            self.stalled_since = Some(now);
        }
        self.snd_nxt = self.snd_nxt.max(ack);
        self.take_rtt_sample(now, ack, timestamp);
        self.retries = 0;
        let flight = self.snd_max.distance(self.snd_una);
        let rtt = self.rtt.srtt().unwrap_or_default();
        let restart = match self.cc.on_ack(ack, acked, flight, now, rtt) {
            AckEvent::PartialAck { first } => {
                self.counters.partial_acks += 1;
                self.rexmit_head = true;
                self.rtt_seq = None;
                first
            }
            AckEvent::Normal | AckEvent::RecoveryDone => {
                self.rexmit_head = false;
                true
            }
        };
        // RFC 6298 §5.2 and §5.3.
        if self.snd_una == self.snd_max {
            self.timers.rto = None;
        } else if restart && self.timers.persist.is_none() {
            self.timers.rto = Some(now + self.rtt.rto());
        }
    }

    fn on_dup_ack(&mut self, ack: SeqNum) {
        self.counters.dup_acks += 1;
        let flight = self.snd_max.distance(self.snd_una);
        if self.cc.on_dup_ack(ack, self.snd_max, flight) {
            self.counters.fast_retransmits += 1;
            self.rexmit_head = true;
            self.rtt_seq = None;
        }
    }

    /// An RTT sample from the echoed timestamp (RFC 7323 §4, only for ACKs that advance
    /// SND.UNA) or, without timestamps, from the timed segment (Karn's algorithm).
    fn take_rtt_sample(&mut self, now: Time, ack: SeqNum, timestamp: Option<(u32, u32)>) {
        if self.opts.timestamps {
            if let Some((_, tsecr)) = timestamp {
                let rtt_ms = self.ts_now(now).wrapping_sub(tsecr);
                if rtt_ms < (1 << 31) {
                    self.rtt.sample(Duration::from_millis(u64::from(rtt_ms)));
                }
            }
            return;
        }
        if let Some((seq, sent)) = self.rtt_seq {
            if ack > seq {
                self.rtt.sample(now - sent);
                self.rtt_seq = None;
            }
        }
    }

    /// In-window data at `seq` (ESTABLISHED, FIN-WAIT-1 and -2).
    fn receive_data(&mut self, now: Time, seq: SeqNum, data: P, segs: u16) {
        // Cut what lies beyond the advertised window.
        let right = self.rcv_adv.max(self.rcv_nxt);
        let end = seq + data.len();
        let data = if end > right {
            let keep = if seq < right { right.distance(seq) as usize } else { 0 };
            self.counters.bytes_dropped += (data.len() - keep) as u64;
            self.ack_now = true;
            if keep == 0 {
                return;
            }
            data.slice(0, keep)
        } else {
            data
        };
        if self.discard && seq > self.rcv_nxt {
            // Timed out by the application: nothing is kept for later.
            self.counters.bytes_dropped += data.len() as u64;
            self.ack_now = true;
            return;
        }
        let Some(data) = self.make_room(seq, data) else { return };
        let had_ooo = !self.recv_buf.ooo_is_empty();
        let r = self.recv_buf.insert(self.rcv_nxt, seq, data);
        self.counters.bytes_in += r.stored as u64;
        self.counters.bytes_dropped += r.dropped as u64;
        self.rcv_nxt = r.rcv_nxt;
        if self.discard {
            while let Some(p) = self.recv_buf.pop() {
                self.counters.bytes_dropped += p.len() as u64;
            }
        }
        if r.out_of_order {
            // RFC 5681 §4.2: out-of-order data is acknowledged at once (with SACK blocks).
            self.counters.ooo_segments += u64::from(segs);
            self.ack_now = true;
        } else if r.filled_hole || had_ooo || r.stored == 0 {
            // Filling a hole, or a duplicate: also at once.
            self.ack_now = true;
        } else {
            // At least every second (original) segment, else after the ACK delay.
            self.unacked_segs += u32::from(segs);
            if self.unacked_segs >= 2 || self.config.ack_delay.is_zero() {
                self.ack_now = true;
            } else if self.timers.ack.is_none() {
                self.timers.ack = Some(now + self.config.ack_delay);
            }
        }
        if self.fin_at == Some(self.rcv_nxt) {
            self.receive_fin(now);
        }
    }

    /// Charges `data` (at `seq`) against `recv_buffer`: when it would not fit, small
    /// pieces are collapsed (the arriving one too), then out-of-order pieces beyond it
    /// are pruned, highest first; if it still does not fit it is dropped (`None`) and
    /// the peer, told by an ACK at once, sends it again. An empty buffer takes any one
    /// segment (a large aggregate in a small buffer must not stall the connection).
    /// Full-sized segments also set the payload-to-memory ratio the window is offered
    /// with.
    fn make_room(&mut self, seq: SeqNum, data: P) -> Option<P> {
        let (len, mem) = (data.len(), data.truesize().max(1));
        if len >= self.smss() {
            self.rcv_ratio = ((len as u64 * u64::from(RATIO_ONE)) / mem as u64).clamp(1, u64::from(RATIO_ONE)) as u32;
        }
        let limit = self.config.recv_buffer;
        let held = self.recv_buf.mem();
        if held == 0 || held + mem <= limit {
            return Some(data);
        }
        let done = self.recv_buf.collapse();
        self.counters.rcv_collapsed += done.pieces as u64;
        let data = if mem > 2 * len {
            match P::compact(std::slice::from_ref(&data)) {
                Some(c) => {
                    self.counters.rcv_collapsed += 1;
                    c
                }
                None => data,
            }
        } else {
            data
        };
        let mem = data.truesize();
        let pruned = self.recv_buf.prune_ooo(seq, limit.saturating_sub(mem));
        self.counters.ooo_pruned += pruned.bytes as u64;
        let held = self.recv_buf.mem();
        if held == 0 || held + mem <= limit {
            return Some(data);
        }
        self.counters.rcv_mem_drops += 1;
        self.counters.bytes_dropped += len as u64;
        self.ack_now = true;
        None
    }

    /// The peer's FIN is next in sequence.
    fn receive_fin(&mut self, now: Time) {
        self.fin_at = None;
        // Nothing follows a FIN: out-of-order data beyond it was never sent by the peer.
        self.counters.bytes_dropped += self.recv_buf.clear_ooo() as u64;
        self.fin_received = true;
        self.rcv_nxt = self.rcv_nxt + 1u32;
        self.ack_now = true;
        match self.state {
            State::Established => self.state = State::CloseWait,
            State::FinWait1 if self.fin_acked => self.enter_time_wait(now),
            State::FinWait1 => self.state = State::Closing,
            State::FinWait2 => self.enter_time_wait(now),
            _ => {}
        }
    }

    /// Whether to answer an unacceptable segment without data (a pure ACK) with an ACK
    /// ([`AckLimits`]). Segments with data are always answered.
    fn oow_ack_allowed(&mut self, now: Time) -> bool {
        let allowed = self.ack_limits.oow_ack_allowed(now);
        self.counters.oow_acks_suppressed += u64::from(!allowed);
        allowed
    }

    /// A challenge ACK (RFC 5961), at most `challenge_ack_limit` per second.
    fn challenge_ack(&mut self, now: Time) -> Option<Segment<P>> {
        if !self.ack_limits.challenge_allowed(now, self.config.challenge_ack_limit) {
            self.counters.challenge_acks_suppressed += 1;
            return None;
        }
        self.counters.challenge_acks += 1;
        Some(self.ack_reply(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acceptability_matches_rfc_table() {
        let nxt = SeqNum(1000);
        assert!(acceptable(nxt, 0, nxt, 0));
        assert!(!acceptable(nxt + 1u32, 0, nxt, 0));
        assert!(acceptable(nxt + 99u32, 0, nxt, 100));
        assert!(!acceptable(nxt + 100u32, 0, nxt, 100));
        assert!(!acceptable(nxt - 1u32, 0, nxt, 100));
        assert!(!acceptable(nxt, 10, nxt, 0));
        // The first or the last byte in the window suffices.
        assert!(acceptable(nxt - 5u32, 10, nxt, 100));
        assert!(acceptable(nxt + 95u32, 10, nxt, 100));
        assert!(!acceptable(nxt - 10u32, 10, nxt, 100));
        assert!(!acceptable(nxt + 100u32, 10, nxt, 100));
        // Across the wrap.
        let nxt = SeqNum(u32::MAX - 2);
        assert!(acceptable(SeqNum(5), 10, nxt, 100));
    }
}
