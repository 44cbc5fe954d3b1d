//! Congestion control: slow start (RFC 5681, counting bytes as in RFC 3465), NewReno
//! fast retransmit and fast recovery (RFC 6582), and congestion avoidance either by
//! NewReno (one SMSS per window) or by CUBIC (RFC 9438: the window follows a cubic
//! function of the time since the last reduction, multiplicative decrease by 0.7, fast
//! convergence and the Reno-friendly region).
use crate::{SeqNum, Time};
use std::time::Duration;

/// Congestion avoidance algorithm of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Congestion {
    /// CUBIC (RFC 9438), the default (as in Linux).
    #[default]
    Cubic,
    /// NewReno (RFC 5681, RFC 6582).
    NewReno,
}

/// CUBIC's C (segments per second cubed).
const CUBIC_C: f64 = 0.4;
/// CUBIC's multiplicative decrease factor.
const CUBIC_BETA: f64 = 0.7;

/// CUBIC's state between two reductions.
#[derive(Debug, Clone, Default)]
struct Cubic {
    /// Window before the last reduction (bytes), fast convergence applied.
    w_max: f64,
    /// When the current congestion avoidance epoch started.
    epoch: Option<Time>,
    /// Time (seconds) the cubic function takes to come back to `w_max`.
    k: f64,
    /// The Reno-friendly estimate (bytes).
    w_est: f64,
}

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
    algo: Congestion,
    cubic: Cubic,
}

impl NewReno {
    /// Before the handshake: `start` is the ISS, so any later ACK may start a recovery.
    pub(crate) fn new(start: SeqNum, algo: Congestion) -> Self {
        NewReno {
            cwnd: 536,
            ssthresh: u32::MAX,
            smss: 536,
            recover: start,
            in_recovery: false,
            partial_seen: false,
            ca_acked: 0,
            dup_acks: 0,
            algo,
            cubic: Cubic::default(),
        }
    }

    /// The congestion avoidance algorithm.
    pub(crate) fn algo(&self) -> Congestion {
        self.algo
    }

    /// A window reduction (a loss): the new ssthresh, and CUBIC's new epoch.
    fn reduce(&mut self, flight: u32) -> u32 {
        match self.algo {
            Congestion::NewReno => (flight / 2).max(2 * self.smss),
            Congestion::Cubic => {
                let cwnd = f64::from(self.cwnd);
                // Fast convergence (RFC 9438 §4.7): a flow whose window shrank since the
                // previous loss lets go of bandwidth for newer flows.
                self.cubic.w_max = if cwnd < self.cubic.w_max { cwnd * (1.0 + CUBIC_BETA) / 2.0 } else { cwnd };
                self.cubic.epoch = None;
                ((cwnd * CUBIC_BETA) as u32).max(2 * self.smss)
            }
        }
    }

    /// CUBIC congestion avoidance for `acked` bytes at `now` (RFC 9438 §4.2-4.4).
    fn cubic_avoidance(&mut self, acked: u32, now: Time, rtt: Duration) {
        let smss = f64::from(self.smss);
        let cwnd = f64::from(self.cwnd);
        let c = &mut self.cubic;
        let epoch = match c.epoch {
            Some(e) => e,
            None => {
                c.epoch = Some(now);
                if c.w_max <= cwnd {
                    c.w_max = cwnd;
                    c.k = 0.0;
                } else {
                    c.k = ((c.w_max - cwnd) / smss / CUBIC_C).cbrt();
                }
                c.w_est = cwnd;
                now
            }
        };
        let t = now.micros().saturating_sub(epoch.micros()) as f64 / 1e6 + rtt.as_secs_f64();
        let w_cubic = (CUBIC_C * (t - c.k).powi(3)) * smss + c.w_max;
        // The Reno-friendly estimate grows like Reno with CUBIC's beta (§4.3).
        let alpha = if c.w_est >= c.w_max { 1.0 } else { 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA) };
        c.w_est += alpha * smss * f64::from(acked) / cwnd;
        let next = if w_cubic < c.w_est {
            c.w_est
        } else {
            // Concave or convex region: towards the target, at most 1.5 cwnd (§4.4).
            let target = w_cubic.clamp(cwnd, 1.5 * cwnd);
            cwnd + (target - cwnd) * f64::from(acked) / cwnd
        };
        self.cwnd = (next as u32).clamp(self.cwnd, CWND_MAX);
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
    /// `now` and `rtt` (the smoothed RTT) drive CUBIC's window growth.
    pub(crate) fn on_ack(&mut self, ack: SeqNum, acked: u32, flight: u32, now: Time, rtt: Duration) -> AckEvent {
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
            match self.algo {
                Congestion::NewReno => {
                    self.ca_acked += acked;
                    while self.ca_acked >= self.cwnd {
                        self.ca_acked -= self.cwnd;
                        self.cwnd += self.smss;
                    }
                }
                Congestion::Cubic => self.cubic_avoidance(acked, now, rtt),
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
        self.ssthresh = self.reduce(flight);
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
            self.ssthresh = self.reduce(flight);
        }
        self.cubic.epoch = None;
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
        let mut cc = NewReno::new(SeqNum(0), Congestion::NewReno);
        cc.init(MSS, 10);
        cc
    }

    const T0: Time = Time::from_secs(1);
    const RTT: Duration = Duration::from_millis(10);

    #[test]
    fn slow_start_then_avoidance() {
        let mut cc = reno();
        assert_eq!(cc.cwnd(), 10 * MSS);
        // A delayed ACK of two segments grows cwnd by two, an ACK of a 10-segment
        // aggregate by ten.
        assert_eq!(cc.on_ack(SeqNum(2000), 2 * MSS, 8 * MSS, T0, RTT), AckEvent::Normal);
        assert_eq!(cc.cwnd(), 12 * MSS);
        cc.ssthresh = 16 * MSS;
        cc.on_ack(SeqNum(12000), 10 * MSS, 2 * MSS, T0, RTT);
        // Slow start stops at ssthresh; the rest counts for congestion avoidance.
        assert_eq!((cc.cwnd(), cc.ca_acked), (16 * MSS, 6 * MSS));
        cc.ca_acked = 0;
        cc.cwnd = 14 * MSS;
        cc.ssthresh = 14 * MSS;
        // Congestion avoidance: one SMSS per cwnd of acknowledged bytes.
        for i in 1..14 {
            cc.on_ack(SeqNum(12000 + i * MSS), MSS, 13 * MSS, T0, RTT);
            assert_eq!(cc.cwnd(), 14 * MSS);
        }
        cc.on_ack(SeqNum(26000), MSS, 13 * MSS, T0, RTT);
        assert_eq!(cc.cwnd(), 15 * MSS);
        // A sender using less than half of cwnd does not grow it.
        cc.on_ack(SeqNum(27000), MSS, 5 * MSS, T0, RTT);
        cc.on_ack(SeqNum(28000), MSS, 0, T0, RTT);
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
        assert_eq!(cc.on_ack(SeqNum(6000), 5 * MSS, 15 * MSS, T0, RTT), AckEvent::PartialAck { first: true });
        assert_eq!(cc.cwnd(), 10 * MSS);
        assert_eq!(cc.on_ack(SeqNum(6500), 500, 14 * MSS, T0, RTT), AckEvent::PartialAck { first: false });
        assert_eq!(cc.cwnd(), 9500);
        // Full ACK: cwnd = min(ssthresh, flight + SMSS).
        assert_eq!(cc.on_ack(snd_max, 14500, 2 * MSS, T0, RTT), AckEvent::RecoveryDone);
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
        cc.on_ack(SeqNum(21000), 16 * MSS, 0, T0, RTT);
        assert_eq!(cc.cwnd(), 10 * MSS, "slow start after the timeout, up to ssthresh");
        for _ in 0..2 {
            assert!(!cc.on_dup_ack(SeqNum(21000), SeqNum(30000), 9 * MSS));
        }
        assert!(cc.on_dup_ack(SeqNum(21000), SeqNum(30000), 9 * MSS));
    }

    fn cubic() -> NewReno {
        let mut cc = NewReno::new(SeqNum(0), Congestion::Cubic);
        cc.init(MSS, 10);
        cc
    }

    /// CUBIC right after a loss at W_max = 100 segments: cwnd = ssthresh = 70.
    fn after_loss_at_100() -> NewReno {
        let mut cc = cubic();
        cc.cubic.w_max = f64::from(100 * MSS);
        cc.cwnd = 70 * MSS;
        cc.ssthresh = 70 * MSS;
        cc
    }

    /// `n` round trips of `rtt` from t = 1 s, each acknowledging one window in
    /// MSS-sized ACKs; cwnd in segments after each.
    fn rounds(cc: &mut NewReno, rtt: Duration, n: u64) -> Vec<f64> {
        let mut seq = 0u32;
        (0..n)
            .map(|r| {
                let now = Time::from_micros(1_000_000 + r * rtt.as_micros() as u64);
                let w = cc.cwnd();
                let mut acked = 0;
                while acked < w {
                    seq = seq.wrapping_add(MSS);
                    cc.on_ack(SeqNum(seq), MSS, w, now, rtt);
                    acked += MSS;
                }
                f64::from(cc.cwnd()) / f64::from(MSS)
            })
            .collect()
    }

    #[test]
    fn cubic_reduces_by_0_7_with_fast_convergence() {
        let mut cc = cubic();
        cc.cwnd = 100 * MSS;
        assert!(!cc.on_dup_ack(SeqNum(0), SeqNum(100_000), 100 * MSS));
        assert!(!cc.on_dup_ack(SeqNum(0), SeqNum(100_000), 100 * MSS));
        assert!(cc.on_dup_ack(SeqNum(0), SeqNum(100_000), 100 * MSS));
        assert_eq!(cc.ssthresh(), 70 * MSS);
        assert_eq!(cc.cubic.w_max, f64::from(100 * MSS));
        // Lost again below the previous maximum: w_max = cwnd (1 + beta) / 2.
        cc.in_recovery = false;
        cc.cwnd = 80 * MSS;
        cc.on_rto(80 * MSS, SeqNum(200_000), true);
        assert_eq!(cc.ssthresh(), 56 * MSS);
        assert!((cc.cubic.w_max - f64::from(68 * MSS)).abs() < 1.0, "{}", cc.cubic.w_max);
        assert_eq!(cc.cwnd(), MSS);
    }

    /// After a loss at W_max = 100 segments (cwnd 70), with a 100 ms RTT and one window
    /// acknowledged per RTT: the window climbs fast, flattens around W_max at
    /// K = cbrt(30 / 0.4) = 4.2 s (concave), then accelerates past it (convex).
    #[test]
    fn cubic_window_is_concave_then_convex_around_w_max() {
        let mut cc = after_loss_at_100();
        let at = rounds(&mut cc, Duration::from_millis(100), 80);
        let k = 42; // RTTs to K
        assert!((at[k - 1] - 100.0).abs() < 3.0, "near W_max at K: {:?}", &at[35..50]);
        let early = at[10] - at[0];
        let late = at[k - 1] - at[k - 11];
        assert!(early > 2.0 * late, "concave: {early} then {late}");
        let after = at[k + 29] - at[k + 19];
        assert!(after > 2.0 * late, "convex past W_max: {after} vs {late}");
        // Never below the Reno-friendly estimate: 0.53 segment per RTT up to W_max
        // (57 RTTs), one per RTT after.
        assert!(at[79] >= 122.0, "{}", at[79]);
    }

    /// With a short RTT the Reno-friendly estimate leads (CUBIC is never slower than
    /// Reno with its beta).
    #[test]
    fn cubic_is_reno_friendly_at_short_rtts() {
        let mut cc = after_loss_at_100();
        rounds(&mut cc, Duration::from_millis(1), 200);
        // 200 RTTs in 0.2 s: the cubic curve is still near 70; Reno-friendly growth of
        // 0.53 then 1 segment per RTT took it past 100.
        assert!(cc.cwnd() > 100 * MSS, "{}", cc.cwnd() / MSS);
    }
}
