//! The retransmission timeout (RFC 6298): SRTT, RTTVAR, bounds and exponential backoff.
use std::time::Duration;

use crate::Config;

/// Clock granularity G of RFC 6298 §2: timestamps tick in milliseconds.
const GRANULARITY_US: u64 = 1_000;

/// RTT estimator and RTO, in microseconds.
#[derive(Debug, Clone)]
pub(crate) struct RttEstimator {
    srtt: Option<u64>,
    rttvar: u64,
    /// The RTO before backoff.
    rto: u64,
    /// Doublings applied since the last RTT sample.
    backoff: u32,
    min: u64,
    max: u64,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl RttEstimator {
    pub(crate) fn new(config: &Config) -> Self {
        let min = micros(config.rto_min).max(GRANULARITY_US);
        let max = micros(config.rto_max).max(min);
        RttEstimator { srtt: None, rttvar: 0, rto: micros(config.rto_initial).clamp(min, max), backoff: 0, min, max }
    }

    /// Takes a measurement (RFC 6298 §2.2 and §2.3) and clears the backoff.
    pub(crate) fn sample(&mut self, rtt: Duration) {
        let r = micros(rtt).min(self.max);
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(srtt) => {
                self.rttvar = (3 * self.rttvar + srtt.abs_diff(r)) / 4;
                self.srtt = Some((7 * srtt + r) / 8);
            }
        }
        let srtt = self.srtt.unwrap_or(r);
        self.rto = srtt.saturating_add(GRANULARITY_US.max(4 * self.rttvar)).clamp(self.min, self.max);
        self.backoff = 0;
    }

    /// The current RTO, backoff included, at most the configured maximum.
    pub(crate) fn rto(&self) -> Duration {
        Duration::from_micros(self.backed_off(self.rto, self.backoff))
    }

    /// `base` doubled `n` times, clamped to the RTO bounds.
    fn backed_off(&self, base: u64, n: u32) -> u64 {
        base.saturating_mul(1u64 << n.min(32)).clamp(self.min, self.max)
    }

    /// The persist (zero-window probe) interval after `n` probes: the RTO without
    /// retransmission backoff, doubled `n` times, within the RTO bounds.
    pub(crate) fn persist_interval(&self, n: u32) -> Duration {
        Duration::from_micros(self.backed_off(self.rto, n))
    }

    /// Doubles the RTO (RFC 6298 §5.5), up to the maximum.
    pub(crate) fn back_off(&mut self) {
        if self.backed_off(self.rto, self.backoff) < self.max {
            self.backoff += 1;
        }
    }

    /// The smoothed RTT, once measured.
    pub(crate) fn srtt(&self) -> Option<Duration> {
        self.srtt.map(Duration::from_micros)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn rfc6298_estimates() {
        let mut cfg = Config { rto_min: ms(1), ..Config::default() };
        let mut r = RttEstimator::new(&cfg);
        assert_eq!(r.rto(), ms(1000));
        r.sample(ms(100));
        // SRTT = 100, RTTVAR = 50, RTO = 100 + 4 * 50.
        assert_eq!((r.srtt(), r.rto()), (Some(ms(100)), ms(300)));
        r.sample(ms(200));
        // RTTVAR = 3/4 * 50 + 1/4 * 100 = 62.5; SRTT = 7/8 * 100 + 1/8 * 200 = 112.5.
        assert_eq!(r.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(r.rto(), Duration::from_micros(112_500 + 250_000));
        // Constant samples: RTTVAR decays until G bounds the variance term.
        for _ in 0..200 {
            r.sample(ms(10));
        }
        assert_eq!(r.rto(), ms(11));
        cfg.rto_min = ms(200);
        let mut r = RttEstimator::new(&cfg);
        r.sample(ms(1));
        assert_eq!(r.rto(), ms(200), "clamped to rto_min");
    }

    #[test]
    fn backoff_doubles_up_to_max_and_a_sample_clears_it() {
        let cfg = Config { rto_max: ms(5000), ..Config::default() };
        let mut r = RttEstimator::new(&cfg);
        let mut seen = vec![];
        for _ in 0..6 {
            seen.push(r.rto().as_millis());
            r.back_off();
        }
        assert_eq!(seen, [1000, 2000, 4000, 5000, 5000, 5000]);
        assert_eq!(r.persist_interval(1), ms(2000));
        r.sample(ms(100));
        assert_eq!(r.rto(), ms(300));
        assert_eq!(r.persist_interval(40), ms(5000));
    }
}
