//! Single-producer/single-consumer rings of packets for edges between two lcores,
//! built on the `ringbuf` crate (lock-free, bulk copies, cached indices).
//!
//! The two ends are separate values: the producer end moves to the sending lcore,
//! the consumer end to the receiving one, so the type system enforces "single".

use ironpath_abi::Mbuf as RawMbuf;
use ringbuf::traits::{Consumer, Observer, Producer, Split};
use ringbuf::{HeapCons, HeapProd, HeapRb};

/// A packet pointer that may cross threads (ownership moves with it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct PktPtr(pub *mut RawMbuf);

// SAFETY: a packet pointer in a ring is owned by exactly one side at a time: the
// producer gives it up when it is enqueued, the consumer takes it when dequeued.
unsafe impl Send for PktPtr {}

/// Sending end.
pub struct SpscProducer(HeapProd<PktPtr>);
/// Receiving end.
pub struct SpscConsumer(HeapCons<PktPtr>);

/// A ring of `capacity` packet slots, split into its two ends.
pub fn spsc_ring(capacity: usize) -> (SpscProducer, SpscConsumer) {
    let (p, c) = HeapRb::<PktPtr>::new(capacity.max(1)).split();
    (SpscProducer(p), SpscConsumer(c))
}

fn as_ptrs(s: &[*mut RawMbuf]) -> &[PktPtr] {
    // SAFETY: `PktPtr` is `repr(transparent)` over `*mut RawMbuf`: same layout.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), s.len()) }
}

fn as_ptrs_mut(s: &mut [*mut RawMbuf]) -> &mut [PktPtr] {
    // SAFETY: as above; the slice is borrowed mutably for the same lifetime.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast(), s.len()) }
}

impl SpscProducer {
    /// Enqueue as many packets as fit, in order; returns how many (the rest stay
    /// with the caller).
    #[inline]
    pub fn enqueue_burst(&mut self, pkts: &[*mut RawMbuf]) -> usize {
        self.0.push_slice(as_ptrs(pkts))
    }

    /// Enqueue packets from the front of `b` (as many as fit, in order); the ones
    /// enqueued leave the burst. Returns how many.
    #[inline]
    pub fn enqueue_from(&mut self, b: &mut crate::Burst) -> usize {
        let n = self.0.push_slice(as_ptrs(b.as_ptrs()));
        // SAFETY: the ring now owns exactly the first `n` packets of the burst.
        unsafe { b.consume_front(n) };
        n
    }

    /// Free slots (snapshot).
    pub fn free_count(&self) -> usize {
        self.0.vacant_len()
    }
}

impl SpscConsumer {
    /// Dequeue up to `out.len()` packets; returns how many.
    #[inline]
    pub fn dequeue_burst(&mut self, out: &mut [*mut RawMbuf]) -> usize {
        self.0.pop_slice(as_ptrs_mut(out))
    }

    /// Dequeue up to `max` packets onto the end of `b`; returns how many.
    #[inline]
    pub fn dequeue_into(&mut self, b: &mut crate::Burst, max: usize) -> usize {
        let r = &mut self.0;
        // SAFETY: packets leave the ring as they enter the burst: ownership moves.
        unsafe { b.fill_with(max, |s| r.pop_slice(as_ptrs_mut(s))) }
    }

    /// Packets waiting (snapshot).
    pub fn count(&self) -> usize {
        self.0.occupied_len()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn moves_pointers_in_order_across_threads() {
        let (mut p, mut c) = spsc_ring(64);
        const N: usize = 1_000_000;
        let t = std::thread::spawn(move || {
            let mut i = 1usize;
            while i <= N {
                let batch: Vec<*mut RawMbuf> = (i..(i + 32).min(N + 1)).map(|v| v as *mut RawMbuf).collect();
                let n = p.enqueue_burst(&batch);
                i += n;
            }
        });
        let mut next = 1usize;
        let mut buf = [std::ptr::null_mut(); 32];
        while next <= N {
            let n = c.dequeue_burst(&mut buf);
            for b in &buf[..n] {
                assert_eq!(*b as usize, next);
                next += 1;
            }
        }
        t.join().unwrap();
        assert_eq!(c.count(), 0);
    }
}
