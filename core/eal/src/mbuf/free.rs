//! The free path: dropping references to segments and returning the last ones to
//! their pools in batches of one pool each.

use super::ext::{detach_if_indirect, ATTACHED};
use crate::mempool::PoolInner;
use ironpath_abi as abi;
use ironpath_abi::Mbuf as RawMbuf;
use std::sync::atomic::Ordering;

/// Drop one reference to a segment. Returns the segment if the caller must now return
/// it to its pool (count reached zero; left at 1 for its next user), else NULL.
///
/// # Safety
/// `m` must point to a valid segment the caller holds a reference to.
#[inline(always)]
pub(super) unsafe fn prefree_seg(m: *mut RawMbuf) -> *mut RawMbuf {
    // SAFETY: caller's contract.
    let r = unsafe { &*m };
    // A free object's count is 0 in debug builds (the pool marks it): freeing it
    // again is a double free.
    debug_assert!(r.refcnt.load(Ordering::Relaxed) != 0, "mbuf {m:p} freed twice (it was free already)");
    // Acquire on the last reference: every other holder's reads of the buffer
    // happen-before we recycle it (their decrement is a Release RMW).
    if r.refcnt.load(Ordering::Acquire) == 1 {
        // SAFETY: we hold the only reference.
        unsafe { detach_if_indirect(m) };
        return m;
    }
    if r.refcnt.fetch_sub(1, Ordering::AcqRel) == 1 {
        r.refcnt.store(1, Ordering::Relaxed);
        // SAFETY: count reached zero: the segment is ours alone.
        unsafe { detach_if_indirect(m) };
        return m;
    }
    std::ptr::null_mut()
}

/// Return one segment whose count reached zero to its pool.
///
/// # Safety
/// `m` is a valid segment owned by the caller alone.
#[inline(always)]
pub(super) unsafe fn put_seg(m: *mut RawMbuf) {
    // SAFETY: caller's contract; `pool` is a live PoolInner.
    let pool = unsafe { &*(*m).pool.cast::<PoolInner>() };
    pool.put_bulk(&[m]);
}

/// Returns segments to their pools in batches of one pool each.
struct Returner {
    pending: [std::mem::MaybeUninit<*mut RawMbuf>; RETURN_BATCH],
    n: usize,
    pool: *const abi::Mempool,
}

const RETURN_BATCH: usize = 16;

impl Returner {
    #[inline(always)]
    fn new() -> Self {
        // No zeroing: only `pending[..n]` is ever read.
        Self { pending: [std::mem::MaybeUninit::uninit(); RETURN_BATCH], n: 0, pool: std::ptr::null() }
    }

    /// Queue one segment whose count reached zero (its `next` already NULL).
    ///
    /// # Safety
    /// `m` is a valid segment owned by the caller alone.
    #[inline(always)]
    unsafe fn push(&mut self, m: *mut RawMbuf) {
        // SAFETY: caller's contract.
        let mp = unsafe { (*m).pool };
        if (mp != self.pool && self.n > 0) || self.n == RETURN_BATCH {
            self.flush();
        }
        self.pool = mp;
        // SAFETY: n < RETURN_BATCH (flushed above when full).
        unsafe { self.pending.get_unchecked_mut(self.n).write(m) };
        self.n += 1;
    }

    #[inline(always)]
    fn flush(&mut self) {
        if self.n > 0 {
            // SAFETY: `pending[..n]` were written by `push`; `pool` is the live
            // PoolInner every pending segment belongs to.
            unsafe {
                let objs = std::slice::from_raw_parts(self.pending.as_ptr().cast::<*mut RawMbuf>(), self.n);
                (*self.pool.cast::<PoolInner>()).put_bulk(objs);
            }
            self.n = 0;
        }
    }

    /// Drop a reference to every segment from `seg` on, following `next`.
    ///
    /// # Safety
    /// The caller owns one reference to each segment of the chain from `seg`.
    #[inline(always)]
    unsafe fn chain(&mut self, mut seg: *mut RawMbuf) {
        while !seg.is_null() {
            // SAFETY: a segment of a chain we hold a reference to.
            let next = unsafe { (*seg).next };
            // SAFETY: as above.
            let m = unsafe { prefree_seg(seg) };
            if !m.is_null() {
                // SAFETY: ours alone now; free mbufs keep `next` NULL and one segment.
                unsafe {
                    (*m).next = std::ptr::null_mut();
                    (*m).nb_segs = 1;
                    self.push(m);
                }
            }
            seg = next;
        }
    }
}

impl Drop for Returner {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Release one reference to each packet (whole chains), batching the returns per pool.
///
/// The common case — runs of single-segment, unshared, direct packets of one pool —
/// is recognised from each packet's first cache line alone and handed to the pool
/// straight from `pkts`, with no copy. Anything else (chains, shared or indirect
/// packets) takes the general path.
///
/// # Safety
/// The caller owns one reference to each packet (each pointer is a first segment);
/// none is used afterwards.
#[inline]
pub unsafe fn free_bulk_raw(pkts: &[*mut RawMbuf]) {
    let mut i = 0;
    while i < pkts.len() {
        // SAFETY: packets we own a reference to.
        let pool = unsafe { (*pkts[i]).pool };
        let plain = |p: *mut RawMbuf| {
            // SAFETY: as above.
            let m = unsafe { &*p };
            // Acquire on the count: another holder's last reads happen-before reuse.
            m.nb_segs == 1 && m.ol_flags & ATTACHED == 0 && m.pool == pool && m.refcnt.load(Ordering::Acquire) == 1
        };
        // Four at a time (one loop test for four packets), then one at a time from
        // the first four that are not all plain.
        let mut j = i;
        while let Some(q) = pkts.get(j..j + 4) {
            if plain(q[0]) && plain(q[1]) && plain(q[2]) && plain(q[3]) {
                j += 4;
            } else {
                break;
            }
        }
        while j < pkts.len() && plain(pkts[j]) {
            j += 1;
        }
        if j > i {
            // SAFETY: sole owner of each of these direct one-segment packets (next is
            // NULL), all of `pool`, a live PoolInner.
            unsafe { (*pool.cast::<PoolInner>()).put_bulk(&pkts[i..j]) };
            i = j;
            continue;
        }
        let mut r = Returner::new();
        // SAFETY: a packet we own a reference to.
        unsafe {
            if (*pkts[i]).nb_segs == 1 {
                let s = prefree_seg(pkts[i]);
                if !s.is_null() {
                    r.push(s);
                }
            } else {
                r.chain(pkts[i]);
            }
        }
        i += 1;
    }
}

/// Release one reference to every segment from `seg` on (a chain cut from a packet:
/// its `nb_segs` is not trusted).
///
/// # Safety
/// The caller owns one reference to each segment of the chain from `seg`.
pub unsafe fn free_segs_raw(seg: *mut RawMbuf) {
    let mut r = Returner::new();
    // SAFETY: caller's contract.
    unsafe { r.chain(seg) };
}
