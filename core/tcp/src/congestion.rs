//! Congestion control: slow start and congestion avoidance (RFC 5681, counting bytes as
//! in RFC 3465) and NewReno fast retransmit and fast recovery (RFC 6582).
use crate::SeqNum;

/// Upper bound of cwnd: far beyond any window the engine can use.
const CWND_MAX: u32 = 1 << 30;

/// What an ACK of new data means for recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AckEvent {
    /// Not in recovery: cwnd grew.
    Normal,
    /// In recovery, below `recover`: resend the first unacknowledged segment. Only the
    /// first partial ACK of a recovery restarts the retransmission timer ("impatient"
    /// variant, RFC 6582 §4.1).
    PartialAck { first: bool },
    /// This ACK covers `recover`: recovery is over.
    RecoveryDone,
}

/// NewReno state: cwnd, ssthresh, duplicate ACK count and the recovery point.
#[derive(Debug, Clone)]
pub(crate) struct NewReno {
    cwnd: u32,
    ssthresh: u32,
    smss: u32,
    /// `snd_max` when recovery (or the last RTO) started: the end of the data that was
    /// in flight then. A fast retransmit needs an ACK at or beyond it.
    recover: SeqNum,
    in_recovery: bool,
    partial_seen: bool,
    /// Bytes acknowledged in congestion avoidance since cwnd last grew.
    ca_acked: u32,
    dup_acks: u32,
}

impl NewReno {
    /// Before the handshake: `start` is the ISS, so any later ACK may start a recovery.
    pub(crate) fn new(start: SeqNum) -> Self {
        NewReno {
            cwnd: 536,
            ssthresh: u32::MAX,
            smss: 536,
            recover: start,
            in_recovery: false,
            partial_seen: false,
            ca_acked: 0,
            dup_acks: 0,
        }
    }

    /// At the end of the handshake: the sender MSS and the initial window (RFC 6928:
    /// `segments` × SMSS).
    pub(crate) fn init(&mut self, smss: u32, segments: u32) {
        self.smss = smss.max(1);
        self.cwnd = self.smss.saturating_mul(segments.max(1)).min(CWND_MAX);
    }

    pub(crate) fn cwnd(&self) -> u32 {
        self.cwnd
    }

    pub(crate) fn ssthresh(&self) -> u32 {
        self.ssthresh
    }

    pub(crate) fn in_recovery(&self) -> bool {
        self.in_recovery
    }

    /// `acked` new bytes up to `ack`; `flight` is what is still outstanding after it.
    /// cwnd only grows while the sender uses at least half of it (`flight + acked`
    /// bytes were outstanding), a simple form of RFC 7661's validation: a sender limited
    /// by the peer's window or the application does not inflate cwnd without bound.
    pub(crate) fn on_ack(&mut self, ack: SeqNum, acked: u32, flight: u32) -> AckEvent {
        self.dup_acks = 0;
        if self.in_recovery {
            if ack >= self.recover {
                // RFC 6582 §3.2 step 6, first option.
                self.in_recovery = false;
                self.cwnd = self.ssthresh.min(flight.max(self.smss) + self.smss);
                self.ca_acked = 0;
                return AckEvent::RecoveryDone;
            }
            // Deflate by what was acked, add back one SMSS if at least that much was.
            self.cwnd = self.cwnd.saturating_sub(acked);
            if acked >= self.smss {
                self.cwnd += self.smss;
            }
            self.cwnd = self.cwnd.max(self.smss);
            let first = !self.partial_seen;
            self.partial_seen = true;
            return AckEvent::PartialAck { first };
        }
        if u64::from(flight) + u64::from(acked) < u64::from(self.cwnd / 2) {
            return AckEvent::Normal;
        }
        let mut acked = acked;
        if self.cwnd < self.ssthresh {
            // Slow start counts every acknowledged byte (as Linux counts packets), so a
            // receiver that ACKs GRO/LRO aggregates or stretches its ACKs does not slow
            // the growth; RFC 3465's limit L is not applied. What crosses ssthresh
            // counts for congestion avoidance.
            let grow = acked.min(self.ssthresh - self.cwnd);
            self.cwnd += grow;
            acked -= grow;
        }
        if acked > 0 {
            self.ca_acked += acked;
            while self.ca_acked >= self.cwnd {
                self.ca_acked -= self.cwnd;
                self.cwnd += self.smss;
            }
        }
        self.cwnd = self.cwnd.min(CWND_MAX);
        AckEvent::Normal
    }

    /// A duplicate ACK for `ack` while `flight` bytes up to `snd_max` are outstanding.
    /// Returns true on the third one outside recovery: retransmit now.
    pub(crate) fn on_dup_ack(&mut self, ack: SeqNum, snd_max: SeqNum, flight: u32) -> bool {
        self.dup_acks += 1;
        if self.in_recovery {
            // Window inflation (RFC 5681 §3.2 step 4).
            self.cwnd = (self.cwnd + self.smss).min(CWND_MAX);
            return false;
        }
        if self.dup_acks != 3 || ack < self.recover {
            return false;
        }
        self.ssthresh = (flight / 2).max(2 * self.smss);
        self.cwnd = self.ssthresh + 3 * self.smss;
        self.recover = snd_max;
        self.in_recovery = true;
        self.partial_seen = false;
        true
    }

    /// A retransmission timeout with `flight` bytes up to `snd_max` outstanding;
    /// `first` unless the same data already timed out (then ssthresh is kept).
    pub(crate) fn on_rto(&mut self, flight: u32, snd_max: SeqNum, first: bool) {
        if first {
            self.ssthresh = (flight / 2).max(2 * self.smss);
        }
        self.cwnd = self.smss;
        self.recover = snd_max;
        self.in_recovery = false;
        self.ca_acked = 0;
        self.dup_acks = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;

    fn reno() -> NewReno {
        let mut cc = NewReno::new(SeqNum(0));
        cc.init(MSS, 10);
        cc
    }

    #[test]
    fn slow_start_then_avoidance() {
        let mut cc = reno();
        assert_eq!(cc.cwnd(), 10 * MSS);
        // A delayed ACK of two segments grows cwnd by two, an ACK of a 10-segment
        // aggregate by ten.
        assert_eq!(cc.on_ack(SeqNum(2000), 2 * MSS, 8 * MSS), AckEvent::Normal);
        assert_eq!(cc.cwnd(), 12 * MSS);
        cc.ssthresh = 16 * MSS;
        cc.on_ack(SeqNum(12000), 10 * MSS, 2 * MSS);
        // Slow start stops at ssthresh; the rest counts for congestion avoidance.
        assert_eq!((cc.cwnd(), cc.ca_acked), (16 * MSS, 6 * MSS));
        cc.ca_acked = 0;
        cc.cwnd = 14 * MSS;
        cc.ssthresh = 14 * MSS;
        // Congestion avoidance: one SMSS per cwnd of acknowledged bytes.
        for i in 1..14 {
            cc.on_ack(SeqNum(12000 + i * MSS), MSS, 13 * MSS);
            assert_eq!(cc.cwnd(), 14 * MSS);
        }
        cc.on_ack(SeqNum(26000), MSS, 13 * MSS);
        assert_eq!(cc.cwnd(), 15 * MSS);
        // A sender using less than half of cwnd does not grow it.
        cc.on_ack(SeqNum(27000), MSS, 5 * MSS);
        cc.on_ack(SeqNum(28000), MSS, 0);
        assert_eq!(cc.cwnd(), 15 * MSS);
    }

    #[test]
    fn fast_recovery_with_partial_acks() {
        let mut cc = reno();
        let una = SeqNum(1000);
        let snd_max = SeqNum(21000);
        assert!(!cc.on_dup_ack(una, snd_max, 20 * MSS));
        assert!(!cc.on_dup_ack(una, snd_max, 20 * MSS));
        assert!(cc.on_dup_ack(una, snd_max, 20 * MSS));
        assert!(cc.in_recovery());
        assert_eq!((cc.ssthresh(), cc.cwnd()), (10 * MSS, 13 * MSS));
        assert!(!cc.on_dup_ack(una, snd_max, 20 * MSS));
        assert_eq!(cc.cwnd(), 14 * MSS);
        // Partial ACK of 5 segments: deflate by 5, add one back.
        assert_eq!(cc.on_ack(SeqNum(6000), 5 * MSS, 15 * MSS), AckEvent::PartialAck { first: true });
        assert_eq!(cc.cwnd(), 10 * MSS);
        assert_eq!(cc.on_ack(SeqNum(6500), 500, 14 * MSS), AckEvent::PartialAck { first: false });
        assert_eq!(cc.cwnd(), 9500);
        // Full ACK: cwnd = min(ssthresh, flight + SMSS).
        assert_eq!(cc.on_ack(snd_max, 14500, 2 * MSS), AckEvent::RecoveryDone);
        assert_eq!(cc.cwnd(), 3 * MSS);
        assert!(!cc.in_recovery());
    }

    #[test]
    fn no_fast_retransmit_below_recover_after_rto() {
        let mut cc = reno();
        cc.on_rto(20 * MSS, SeqNum(21000), true);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (MSS, 10 * MSS));
        cc.on_rto(MSS, SeqNum(21000), false);
        assert_eq!(cc.ssthresh(), 10 * MSS, "repeated RTO keeps ssthresh");
        for _ in 0..5 {
            assert!(!cc.on_dup_ack(SeqNum(5000), SeqNum(21000), 16 * MSS));
        }
        cc.on_ack(SeqNum(21000), 16 * MSS, 0);
        assert_eq!(cc.cwnd(), 10 * MSS, "slow start after the timeout, up to ssthresh");
        for _ in 0..2 {
            assert!(!cc.on_dup_ack(SeqNum(21000), SeqNum(30000), 9 * MSS));
        }
        assert!(cc.on_dup_ack(SeqNum(21000), SeqNum(30000), 9 * MSS));
    }
}
