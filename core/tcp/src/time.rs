//! [`Time`]: the engine's notion of "now", always passed in by the caller.
use std::fmt;
use std::ops::{Add, Sub};
use std::time::Duration;

/// A point in time in microseconds since an epoch the caller chooses (a TSC-derived
/// clock in a node, a virtual clock in tests). The engine never reads a clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(u64);

impl Time {
    /// The epoch. Also what [`poll_at`](crate::Connection::poll_at) returns for "now".
    pub const ZERO: Time = Time(0);

    /// `us` microseconds after the epoch.
    pub const fn from_micros(us: u64) -> Self {
        Time(us)
    }

    /// `ms` milliseconds after the epoch.
    pub const fn from_millis(ms: u64) -> Self {
        Time(ms.saturating_mul(1_000))
    }

    /// `s` seconds after the epoch.
    pub const fn from_secs(s: u64) -> Self {
        Time(s.saturating_mul(1_000_000))
    }

    /// Microseconds since the epoch.
    pub const fn micros(self) -> u64 {
        self.0
    }

    /// Whole milliseconds since the epoch.
    pub const fn millis(self) -> u64 {
        self.0 / 1_000
    }
}

/// Saturates at `u64::MAX` microseconds.
impl Add<Duration> for Time {
    type Output = Time;

    fn add(self, d: Duration) -> Time {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        Time(self.0.saturating_add(us))
    }
}

/// The time between two instants, zero if `earlier` is later.
impl Sub<Time> for Time {
    type Output = Duration;

    fn sub(self, earlier: Time) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:06}s", self.0 / 1_000_000, self.0 % 1_000_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Time::from_millis(1_500);
        assert_eq!(t.micros(), 1_500_000);
        assert_eq!(t.millis(), 1_500);
        assert_eq!(t + Duration::from_millis(500), Time::from_secs(2));
        assert_eq!(Time::from_secs(2) - t, Duration::from_millis(500));
        assert_eq!(t - Time::from_secs(2), Duration::ZERO);
        assert_eq!(Time::from_micros(u64::MAX) + Duration::from_secs(1), Time::from_micros(u64::MAX));
        assert_eq!(t.to_string(), "1.500000s");
    }
}
