//! Test fixtures (feature `test-utils`): the one seeded generator every crate's tests
//! draw their pseudo-random data and decisions from.

/// A xorshift64 generator (Marsaglia's shifts 13, 7, 17): the same seed gives the same
/// sequence, so a failing test fails again. A zero seed counts as 1 (xorshift would
/// stay at zero). For tests only: anyone who sees a few outputs can predict the rest.
#[derive(Debug, Clone)]
pub struct XorShift(pub u64);

impl XorShift {
    /// The next 64 pseudo-random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0.max(1);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A value in `0..n` (0 if `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// An index in `0..n` (0 if `n` is 0).
    pub fn index(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// True with probability `parts_per_million` / 1e6.
    pub fn chance(&mut self, parts_per_million: u32) -> bool {
        self.below(1_000_000) < u64::from(parts_per_million)
    }

    /// One of `items` (which must not be empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.index(items.len())]
    }

    /// `len` pseudo-random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_is_marsaglias_xorshift64() {
        // Worked out apart from this code: seed 1 through x ^= x << 13, x ^= x >> 7,
        // x ^= x << 17 (64-bit).
        let mut r = XorShift(1);
        assert_eq!(
            [r.next_u64(), r.next_u64(), r.next_u64()],
            [0x4082_2041, 0x1000_4106_0c01_1441, 0x9b1e_842f_6e86_2629]
        );
        // Zero counts as 1.
        assert_eq!(XorShift(0).next_u64(), 0x4082_2041);
    }

    #[test]
    fn ranges_hold() {
        let mut r = XorShift(0x5eed);
        for n in 1..200u64 {
            assert!(r.below(n) < n);
            assert!(r.index(n as usize) < n as usize);
        }
        assert_eq!(r.below(0), 0);
        assert_eq!(r.index(0), 0);
        assert!(!r.chance(0));
        assert!(r.chance(1_000_000));
        assert_eq!(r.bytes(5).len(), 5);
        assert_eq!(*r.pick(&[7]), 7);
    }
}
