//! Sequence numbers: arithmetic and comparison modulo 2^32 (RFC 9293 §3.4).
use std::cmp::Ordering;
use std::fmt;
use std::ops::{Add, Sub};

/// A TCP sequence number. Comparison is modulo 2^32 ("serial number arithmetic"): `a < b`
/// when `b` is less than 2^31 ahead of `a`. It is therefore not a total order, which is
/// why there is no `Ord`; every pair the engine compares is within a window of each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SeqNum(pub u32);

impl SeqNum {
    /// Bytes from `earlier` to `self`, assuming `earlier <= self` (wraps otherwise).
    pub const fn distance(self, earlier: SeqNum) -> u32 {
        self.0.wrapping_sub(earlier.0)
    }

    /// The later of the two.
    pub fn max(self, other: SeqNum) -> SeqNum {
        if other > self {
            other
        } else {
            self
        }
    }

    /// The earlier of the two.
    pub fn min(self, other: SeqNum) -> SeqNum {
        if other < self {
            other
        } else {
            self
        }
    }
}

impl PartialOrd for SeqNum {
    fn partial_cmp(&self, other: &SeqNum) -> Option<Ordering> {
        Some((self.0.wrapping_sub(other.0) as i32).cmp(&0))
    }
}

impl Add<u32> for SeqNum {
    type Output = SeqNum;

    fn add(self, n: u32) -> SeqNum {
        SeqNum(self.0.wrapping_add(n))
    }
}

/// Lengths above 2^32 wrap; the engine never adds more than a window.
impl Add<usize> for SeqNum {
    type Output = SeqNum;

    fn add(self, n: usize) -> SeqNum {
        SeqNum(self.0.wrapping_add(n as u32))
    }
}

impl Sub<u32> for SeqNum {
    type Output = SeqNum;

    fn sub(self, n: u32) -> SeqNum {
        SeqNum(self.0.wrapping_sub(n))
    }
}

impl fmt::Display for SeqNum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparison_wraps() {
        let a = SeqNum(u32::MAX - 10);
        let b = a + 20u32;
        assert_eq!(b, SeqNum(9));
        assert!(a < b);
        assert!(b > a);
        assert_eq!(a.partial_cmp(&a), Some(Ordering::Equal));
        assert_eq!(b.distance(a), 20);
        assert_eq!(b - 20u32, a);
        assert_eq!(a.max(b), b);
        assert_eq!(a.min(b), a);
        // Half the space away flips the order.
        assert!(SeqNum(0) < SeqNum(0x7fff_ffff));
        assert!(SeqNum(0) > SeqNum(0x8000_0001));
        assert_eq!(SeqNum(7) + 3usize, SeqNum(10));
        assert_eq!(SeqNum(7).to_string(), "7");
    }
}
