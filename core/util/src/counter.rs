//! The counter with one writer: a per-queue or per-node count that the lcore owning
//! the queue (or node) adds to and anyone may read.

use std::sync::atomic::{AtomicU64, Ordering};

/// A counter with one writer (the owning lcore) and any number of readers.
///
/// [`add`](Self::add) is a relaxed load and a relaxed store, not a locked
/// read-modify-write: this is correct only while a single thread writes, which is
/// the rule for per-queue and per-node counters (DPDK's PMDs count the same way).
/// Readers see a value at most one update old.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// A counter at `v`.
    pub const fn new(v: u64) -> Self {
        Self(AtomicU64::new(v))
    }

    /// Add `n`, wrapping (only the owning lcore calls this).
    #[inline(always)]
    pub fn add(&self, n: u64) {
        // Relaxed is enough: one writer, and readers only need some recent value.
        self.0.store(self.0.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    /// Current value.
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Set the value (gauges; or a reset by the writer itself).
    #[inline]
    pub fn set(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_wraps_and_sets() {
        let c = Counter::default();
        c.add(3);
        c.add(4);
        assert_eq!(c.get(), 7);
        c.set(u64::MAX);
        c.add(2);
        assert_eq!(c.get(), 1);
        assert_eq!(Counter::new(9).get(), 9);
    }

    #[test]
    fn readers_on_other_threads_see_the_writes() {
        let c = std::sync::Arc::new(Counter::default());
        let w = std::sync::Arc::clone(&c);
        std::thread::spawn(move || (0..1000).for_each(|_| w.add(1))).join().unwrap();
        assert_eq!(c.get(), 1000);
    }
}
