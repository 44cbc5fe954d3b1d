//! Packet buffers: the safe owning handle [`Mbuf`] and the raw fast-path helpers.
//!
//! An mbuf is a header ([`ironpath_abi::Mbuf`]) followed by its buffer; a packet is a
//! chain of segments linked by `next`. Each segment has a reference count: a segment
//! returns to its pool when the count reaches zero. A *shared* packet ([`Mbuf::share`])
//! bumps the count of every segment; an *indirect* clone ([`Mbuf::clone_indirect`])
//! gets new headers from a pool that point at the original buffers (the buffers'
//! owners are referenced), so the clone can have its own offsets and lengths — what
//! GSO and TCP retransmission need. Shared or indirect data is read-only.

use crate::mempool::{Mempool, PoolInner, MBUF_HDR};
use ironpath_abi as abi;
use ironpath_abi::Mbuf as RawMbuf;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

/// Errors of mbuf operations.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MbufError {
    /// The pool is empty.
    #[error("mempool exhausted")]
    NoMbuf,
    /// Not enough head- or tailroom, or data, for the operation.
    #[error("{op}: {want} bytes requested, {have} available")]
    NoRoom {
        /// Operation name.
        op: &'static str,
        /// Bytes requested.
        want: usize,
        /// Bytes available.
        have: usize,
    },
    /// The data is shared with another handle (or indirect) and cannot be written.
    #[error("mbuf data is shared (refcount > 1 or indirect) and cannot be modified")]
    Shared,
    /// A chain would exceed the segment limit.
    #[error("chain would have {0} segments (limit 65535)")]
    TooManySegs(usize),
}

/// Reset a segment to a fresh one-segment packet with `headroom` bytes of headroom.
/// Writes only the first cache line: `next` must already be NULL (true of every free
/// mbuf and every single-segment packet).
///
/// # Safety
/// `m` must point to a valid mbuf owned by the caller, with `next` NULL, and
/// `headroom <= buf_len` (pools guarantee it for their own headroom).
#[inline(always)]
pub unsafe fn reset_raw(m: *mut RawMbuf, headroom: u16) {
    // SAFETY: caller's contract.
    let m = unsafe { &mut *m };
    debug_assert!(m.next.is_null());
    m.nb_segs = 1;
    debug_assert!(headroom <= m.buf_len);
    m.data_off = headroom;
    m.pkt_len = 0;
    m.data_len = 0;
    m.ol_flags = 0;
    m.packet_type = 0;
    m.port = u16::MAX;
    m.vlan_tci = 0;
    m.rss_hash = 0;
    m.l2_len = 0;
    m.l3_len = 0;
    m.l4_len = 0;
    m.tso_segsz = 0;
}

/// Drop one reference to a segment. Returns the segment if the caller must now return
/// it to its pool (count reached zero; left at 1 for its next user), else NULL.
///
/// # Safety
/// `m` must point to a valid segment the caller holds a reference to.
#[inline(always)]
unsafe fn prefree_seg(m: *mut RawMbuf) -> *mut RawMbuf {
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

/// The direct mbuf that owns the buffer an indirect segment points to.
#[inline(always)]
fn direct_of(buf_addr: *mut u8) -> *mut RawMbuf {
    buf_addr.wrapping_sub(MBUF_HDR).cast()
}

/// Takes a reference for `mi` (a fresh header about to point into `s`'s buffer) on
/// that buffer's owner, and returns the flag `mi` must carry: an external buffer's
/// shared record gains a count (and `mi` records it), otherwise the direct mbuf
/// owning the buffer gains a reference.
///
/// # Safety
/// `s` is a valid segment the caller holds a reference to; `mi` is a header the
/// caller owns.
#[inline(always)]
unsafe fn attach_to_owner_of(s: *const RawMbuf, mi: &mut RawMbuf) -> u64 {
    // SAFETY: caller's contract.
    let sr = unsafe { &*s };
    if sr.ol_flags & abi::EXT_ATTACHED != 0 {
        let sh = sr.ext_shared.cast::<ExtShared>();
        // SAFETY: `s` holds a count on the live record; Relaxed for an increment made
        // while holding a reference (as `Arc::clone`).
        unsafe { (*sh).refcnt.fetch_add(1, Ordering::Relaxed) };
        mi.ext_shared = sr.ext_shared;
        return abi::EXT_ATTACHED;
    }
    let direct = if sr.ol_flags & abi::IND_ATTACHED != 0 { direct_of(sr.buf_addr) } else { s.cast_mut() };
    // SAFETY: the direct mbuf is live while `s` is (it holds a reference to it).
    unsafe { (*direct).refcnt.fetch_add(1, Ordering::Relaxed) };
    abi::IND_ATTACHED
}

/// Either way of pointing at a buffer the mbuf does not own.
pub(crate) const ATTACHED: u64 = abi::IND_ATTACHED | abi::EXT_ATTACHED;

/// The shared record of an external buffer (as DPDK's `rte_mbuf_ext_shared_info`):
/// how many segments point into it, and how to release it when the last one goes.
/// It heads a heap block that also holds the buffer's owner (see [`Mbuf::external`]).
#[repr(C)]
struct ExtShared {
    refcnt: std::sync::atomic::AtomicU32,
    release: unsafe fn(*mut ExtShared),
}

/// An [`ExtShared`] followed by the owner of the memory.
#[repr(C)]
struct ExtBox<T> {
    shared: ExtShared,
    owner: T,
}

/// Releases an `ExtBox<T>` made by [`Mbuf::external`].
///
/// # Safety
/// `p` came from `Box::into_raw` of an `ExtBox<T>` and no segment points into it.
unsafe fn release_ext<T>(p: *mut ExtShared) {
    // SAFETY: caller's contract (ExtShared is the first field of the repr(C) box).
    drop(unsafe { Box::from_raw(p.cast::<ExtBox<T>>()) });
}

/// If `m` is indirect or external, point it back at its own buffer and drop its
/// reference to the buffer's owner (the direct mbuf, freed when that was its last
/// reference; or the external buffer, released when no segment points to it).
///
/// # Safety
/// `m` is a valid segment with no other reference.
#[inline(always)]
unsafe fn detach_if_indirect(m: *mut RawMbuf) {
    // SAFETY: caller's contract.
    let mr = unsafe { &mut *m };
    if mr.ol_flags & ATTACHED == 0 {
        return;
    }
    // SAFETY: `pool` of a host mbuf is the `abi` field of a live PoolInner.
    let pool = unsafe { &*mr.pool.cast::<PoolInner>() };
    let own = m.cast::<u8>().wrapping_add(MBUF_HDR);
    let (buf, flags) = (mr.buf_addr, mr.ol_flags);
    mr.buf_addr = own;
    mr.buf_iova = pool.abi.region_iova + (own as u64 - pool.abi.region_va as u64);
    mr.buf_len = pool.abi.buf_len;
    mr.ol_flags &= !ATTACHED;
    if flags & abi::EXT_ATTACHED != 0 {
        let sh = std::mem::replace(&mut mr.ext_shared, std::ptr::null_mut()).cast::<ExtShared>();
        // SAFETY: an external segment holds one count on its live shared record.
        // AcqRel: every segment's reads of the buffer happen-before its release.
        unsafe {
            if (*sh).refcnt.fetch_sub(1, Ordering::AcqRel) == 1 {
                ((*sh).release)(sh);
            }
        }
        return;
    }
    let direct = direct_of(buf);
    // SAFETY: an indirect segment holds one reference to its direct segment.
    let d = unsafe { prefree_seg(direct) };
    if !d.is_null() {
        // SAFETY: `d` is now owned by us and belongs to its own pool; it may still
        // carry the link of the chain it was in.
        unsafe {
            (*d).next = std::ptr::null_mut();
            (*d).nb_segs = 1;
            put_seg(d);
        }
    }
}

/// Return one segment whose count reached zero to its pool.
///
/// # Safety
/// `m` is a valid segment owned by the caller alone.
#[inline(always)]
unsafe fn put_seg(m: *mut RawMbuf) {
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
        let mut j = i;
        while j < pkts.len() {
            // SAFETY: as above.
            let m = unsafe { &*pkts[j] };
            // Acquire on the count: another holder's last reads happen-before reuse.
            if m.nb_segs == 1 && m.ol_flags & ATTACHED == 0 && m.pool == pool && m.refcnt.load(Ordering::Acquire) == 1 {
                j += 1;
            } else {
                break;
            }
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

/// One-segment packets linked into a chain as they arrive, in constant time each
/// (the last one is remembered), to be hung behind a packet in one step with
/// [`Mbuf::chain_list`]: receive aggregation collects each merged segment's
/// payload this way. Dropping the list frees what it holds.
pub struct SegList {
    /// First and last segment (null when empty); linked through `next`.
    first: *mut RawMbuf,
    last: *mut RawMbuf,
    count: u32,
    bytes: u32,
}

// SAFETY: the list owns one reference to each of its segments, as an `Mbuf` does.
unsafe impl Send for SegList {}

impl Default for SegList {
    fn default() -> Self {
        Self::new()
    }
}

impl SegList {
    /// An empty list.
    pub const fn new() -> Self {
        SegList { first: std::ptr::null_mut(), last: std::ptr::null_mut(), count: 0, bytes: 0 }
    }

    /// Segments held.
    #[inline]
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether the list holds nothing.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes held.
    #[inline]
    pub fn bytes(&self) -> usize {
        self.bytes as usize
    }

    /// Start loading the last segment's link field (the next [`SegList::push`]
    /// writes it; held a while, that segment has often left the cache).
    #[inline]
    pub fn prefetch_tail(&self) {
        if self.last.is_null() {
            return;
        }
        // (Only an address is computed: `last` is a segment the list owns.)
        let a = self.last.wrapping_byte_add(std::mem::offset_of!(RawMbuf, next));
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch never faults, whatever the address.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(a as *const i8)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let _ = a;
    }

    /// Link `m`, a one-segment packet held only by us, at the end. Given back if
    /// it has more segments, if another holder shares it (linking writes its
    /// `next`, which that holder would see), or if the list holds `u16::MAX`
    /// segments already.
    #[inline]
    pub fn push(&mut self, m: Mbuf) -> Result<(), Mbuf> {
        if m.hdr().nb_segs != 1 || m.refcnt() > 1 || self.count >= u32::from(u16::MAX) {
            return Err(m);
        }
        let len = m.hdr().pkt_len;
        let p = m.into_raw();
        // SAFETY: `p` is a one-segment packet we now own (its `next` is null);
        // `last`, when set, is our last segment, owned by the list.
        unsafe {
            if self.first.is_null() {
                self.first = p;
            } else {
                (*self.last).next = p;
            }
        }
        self.last = p;
        self.count += 1;
        self.bytes += len;
        Ok(())
    }

    /// Move every segment of `other` to the end of this list. Refused (both
    /// unchanged) if the result would hold more than `u16::MAX` segments.
    #[inline]
    pub fn append(&mut self, other: &mut SegList) -> Result<(), MbufError> {
        if other.first.is_null() {
            return Ok(());
        }
        let total = self.count + other.count;
        if total > u32::from(u16::MAX) {
            return Err(MbufError::TooManySegs(total as usize));
        }
        // SAFETY: `last`, when set, is our last segment; `other`'s segments become ours
        // (`other` is emptied below, so each is owned once).
        unsafe {
            if self.first.is_null() {
                self.first = other.first;
            } else {
                (*self.last).next = other.first;
            }
        }
        self.last = other.last;
        self.count = total;
        self.bytes += other.bytes;
        other.forget();
        Ok(())
    }

    /// Free every segment held.
    pub fn clear(&mut self) {
        if !self.first.is_null() {
            // SAFETY: we own one reference to each segment of the chain from `first`
            // (the last one's `next` is null); the list forgets them below.
            unsafe { free_segs_raw(self.first) };
        }
        self.forget();
    }

    /// Empty the list without freeing (its segments were handed on). (Assigning
    /// a new list would drop this one, freeing them.)
    #[inline]
    fn forget(&mut self) {
        self.first = std::ptr::null_mut();
        self.last = std::ptr::null_mut();
        self.count = 0;
        self.bytes = 0;
    }
}

impl Drop for SegList {
    fn drop(&mut self) {
        self.clear();
    }
}

/// An owned reference to a packet (a chain of segments). Dropping it frees the chain.
pub struct Mbuf {
    ptr: NonNull<RawMbuf>,
}

// SAFETY: an `Mbuf` owns its reference; data shared with other handles is only read,
// and reference counts are atomic.
unsafe impl Send for Mbuf {}

impl Drop for Mbuf {
    fn drop(&mut self) {
        // SAFETY: we own one reference to this packet and give it up.
        unsafe { free_bulk_raw(&[self.ptr.as_ptr()]) };
    }
}

impl std::fmt::Debug for Mbuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mbuf")
            .field("pkt_len", &self.pkt_len())
            .field("nb_segs", &self.nb_segs())
            .field("refcnt", &self.refcnt())
            .finish()
    }
}

impl Mbuf {
    /// Allocate one empty packet.
    pub fn alloc(pool: &Mempool) -> Result<Self, MbufError> {
        let mut p = [std::ptr::null_mut()];
        pool.alloc_bulk_raw(&mut p).map_err(|_| MbufError::NoMbuf)?;
        // SAFETY: fresh, non-null, owned by us.
        Ok(unsafe { Self::from_raw(p[0]) })
    }

    /// Allocate `n` empty packets, all or nothing.
    pub fn alloc_bulk(pool: &Mempool, n: usize) -> Result<Vec<Self>, MbufError> {
        let mut raw = vec![std::ptr::null_mut(); n];
        pool.alloc_bulk_raw(&mut raw).map_err(|_| MbufError::NoMbuf)?;
        // SAFETY: fresh, non-null, owned by us.
        Ok(raw.into_iter().map(|p| unsafe { Self::from_raw(p) }).collect())
    }

    /// Allocate a packet holding a copy of `data` (chained across segments if needed).
    pub fn from_slice(pool: &Mempool, data: &[u8]) -> Result<Self, MbufError> {
        let mut head = Self::alloc(pool)?;
        let mut rest = data;
        let first = head.tailroom().min(rest.len());
        head.append(first)?.copy_from_slice(&rest[..first]);
        rest = &rest[first..];
        while !rest.is_empty() {
            let mut seg = Self::alloc(pool)?;
            let k = seg.tailroom().min(rest.len());
            if k == 0 {
                return Err(MbufError::NoRoom { op: "from_slice", want: rest.len(), have: 0 });
            }
            seg.append(k)?.copy_from_slice(&rest[..k]);
            rest = &rest[k..];
            head.chain(seg)?;
        }
        Ok(head)
    }

    /// Take ownership of a raw packet.
    ///
    /// # Safety
    /// `p` is a valid packet from an ironpath pool and the caller gives up its reference.
    #[inline(always)]
    pub unsafe fn from_raw(p: *mut RawMbuf) -> Self {
        // SAFETY: caller's contract (non-null).
        let ptr = unsafe { NonNull::new_unchecked(p) };
        Self { ptr }
    }

    /// Give up the handle without freeing; the caller now owns the reference.
    #[inline(always)]
    pub fn into_raw(self) -> *mut RawMbuf {
        let p = self.ptr.as_ptr();
        std::mem::forget(self);
        p
    }

    /// The raw header pointer (still owned by this handle).
    #[inline(always)]
    pub fn as_ptr(&self) -> *mut RawMbuf {
        self.ptr.as_ptr()
    }

    #[inline(always)]
    fn hdr(&self) -> &RawMbuf {
        // SAFETY: we hold a reference, so the header is valid.
        unsafe { self.ptr.as_ref() }
    }

    fn segs(&self) -> impl Iterator<Item = *mut RawMbuf> {
        let mut cur = self.ptr.as_ptr();
        std::iter::from_fn(move || {
            if cur.is_null() {
                return None;
            }
            let s = cur;
            // SAFETY: segments of a chain we hold a reference to are valid.
            cur = unsafe { (*s).next };
            Some(s)
        })
    }

    /// Total packet length.
    pub fn pkt_len(&self) -> usize {
        self.hdr().pkt_len as usize
    }

    /// Length of the first segment's data.
    pub fn data_len(&self) -> usize {
        self.hdr().data_len as usize
    }

    /// Number of segments.
    pub fn nb_segs(&self) -> usize {
        self.hdr().nb_segs as usize
    }

    /// Memory the packet keeps from its pool, whatever it carries (Linux's
    /// `truesize`): a header and a buffer of the first segment's size per segment
    /// (the segments of a received chain come from one pool). O(1): the chain is not
    /// walked.
    pub fn truesize(&self) -> usize {
        let h = self.hdr();
        usize::from(h.nb_segs.max(1)) * (crate::mempool::MBUF_HDR + usize::from(h.buf_len))
    }

    /// Reference count of the first segment.
    pub fn refcnt(&self) -> u16 {
        self.hdr().refcnt.load(Ordering::Relaxed)
    }

    /// Header fields (read-only).
    pub fn header(&self) -> &RawMbuf {
        self.hdr()
    }

    /// True when every segment is held only by this handle and none is indirect or
    /// external.
    pub fn is_writable(&self) -> bool {
        self.segs().all(|s| {
            // SAFETY: valid segment of our chain.
            let s = unsafe { &*s };
            s.refcnt.load(Ordering::Acquire) == 1 && s.ol_flags & ATTACHED == 0
        })
    }

    /// Header fields for writing (offload flags, lengths for offloads, port ...).
    /// Changing `data_off`/`data_len`/`pkt_len`/`next` by hand must keep the chain
    /// consistent; prefer the methods.
    pub fn header_mut(&mut self) -> &mut RawMbuf {
        // SAFETY: we own the handle exclusively; header writes of a shared packet only
        // affect this packet's metadata, which (for shared, not indirect, packets) the
        // other holder sees too — documented above.
        unsafe { self.ptr.as_mut() }
    }

    /// The first segment's data.
    pub fn data(&self) -> &[u8] {
        let h = self.hdr();
        // SAFETY: buf_addr+data_off .. +data_len lies inside the segment's buffer.
        unsafe { std::slice::from_raw_parts(h.buf_addr.add(h.data_off as usize), h.data_len as usize) }
    }

    /// The first segment's data, writable if the packet is not shared.
    pub fn data_mut(&mut self) -> Result<&mut [u8], MbufError> {
        if !self.is_writable() {
            return Err(MbufError::Shared);
        }
        let h = self.hdr();
        // SAFETY: as in `data`, and we are the only holder of this buffer.
        Ok(unsafe { std::slice::from_raw_parts_mut(h.buf_addr.add(h.data_off as usize), h.data_len as usize) })
    }

    /// Each segment's data, in order.
    pub fn segments(&self) -> impl Iterator<Item = &[u8]> {
        self.segs().map(|s| {
            // SAFETY: valid segment of our chain; its data lies inside its buffer.
            unsafe {
                let s = &*s;
                std::slice::from_raw_parts(s.buf_addr.add(s.data_off as usize), s.data_len as usize)
            }
        })
    }

    /// Free bytes in front of the data.
    pub fn headroom(&self) -> usize {
        self.hdr().data_off as usize
    }

    fn last_seg(&self) -> *mut RawMbuf {
        self.segs().last().unwrap_or(self.ptr.as_ptr())
    }

    /// The last segment, if every segment's header is held by this handle alone:
    /// only then may the chain's links and lengths change (a segment another handle
    /// holds would change under it, and linking a packet behind a segment it already
    /// reaches would make a loop).
    fn last_exclusive_seg(&self) -> Result<*mut RawMbuf, MbufError> {
        let mut last = self.ptr.as_ptr();
        for s in self.segs() {
            // SAFETY: valid segment of our chain.
            if unsafe { (*s).refcnt.load(Ordering::Acquire) } != 1 {
                return Err(MbufError::Shared);
            }
            last = s;
        }
        Ok(last)
    }

    /// Free bytes after the data of the last segment.
    pub fn tailroom(&self) -> usize {
        // SAFETY: valid segment.
        let l = unsafe { &*self.last_seg() };
        l.buf_len as usize - l.data_off as usize - l.data_len as usize
    }

    /// Grow the packet by `len` bytes at the end (in the last segment); returns them.
    pub fn append(&mut self, len: usize) -> Result<&mut [u8], MbufError> {
        if !self.is_writable() {
            return Err(MbufError::Shared);
        }
        let have = self.tailroom();
        if len > have {
            return Err(MbufError::NoRoom { op: "append", want: len, have });
        }
        let last = self.last_seg();
        // SAFETY: valid, exclusively held segment; len fits in its tailroom.
        unsafe {
            let l = &mut *last;
            let start = l.buf_addr.add(l.data_off as usize + l.data_len as usize);
            l.data_len += len as u16;
            (*self.ptr.as_ptr()).pkt_len += len as u32;
            Ok(std::slice::from_raw_parts_mut(start, len))
        }
    }

    /// Grow the packet by `len` bytes at the front (headroom); returns them.
    pub fn prepend(&mut self, len: usize) -> Result<&mut [u8], MbufError> {
        if !self.is_writable() {
            return Err(MbufError::Shared);
        }
        let have = self.headroom();
        if len > have {
            return Err(MbufError::NoRoom { op: "prepend", want: len, have });
        }
        let h = self.header_mut();
        h.data_off -= len as u16;
        h.data_len += len as u16;
        h.pkt_len += len as u32;
        // SAFETY: the new range lies in the first segment's buffer; we hold it alone.
        Ok(unsafe { std::slice::from_raw_parts_mut(h.buf_addr.add(h.data_off as usize), len) })
    }

    /// Remove `len` bytes from the front (of the first segment, as DPDK's `adj`).
    /// Works on shared packets too: it moves only this header's offsets when the
    /// packet is indirect; for a plainly shared packet it is refused.
    pub fn adj(&mut self, len: usize) -> Result<(), MbufError> {
        if self.refcnt() > 1 {
            return Err(MbufError::Shared);
        }
        let have = self.data_len();
        if len > have {
            return Err(MbufError::NoRoom { op: "adj", want: len, have });
        }
        let h = self.header_mut();
        h.data_off += len as u16;
        h.data_len -= len as u16;
        h.pkt_len -= len as u32;
        Ok(())
    }

    /// Keep only bytes `off..off + len` of a one-segment packet: what [`Mbuf::adj`]
    /// of `off` and [`Mbuf::trim`] of the rest do, in one step (receive
    /// aggregation cuts each segment's headers and padding this way).
    #[inline]
    pub fn keep(&mut self, off: usize, len: usize) -> Result<(), MbufError> {
        if self.refcnt() > 1 {
            return Err(MbufError::Shared);
        }
        let h = self.header_mut();
        let have = h.data_len as usize;
        if h.nb_segs != 1 || off + len > have {
            return Err(MbufError::NoRoom { op: "keep", want: off + len, have });
        }
        h.data_off += off as u16;
        h.data_len = len as u16;
        h.pkt_len = len as u32;
        Ok(())
    }

    /// Remove `len` bytes from the end, across segments; emptied trailing segments are
    /// freed. Refused if any segment is shared with another handle.
    pub fn trim(&mut self, len: usize) -> Result<(), MbufError> {
        self.last_exclusive_seg()?;
        let have = self.pkt_len();
        if len > have {
            return Err(MbufError::NoRoom { op: "trim", want: len, have });
        }
        let keep = have - len;
        let mut acc = 0usize;
        let mut nsegs = 0u16;
        let mut cur = self.ptr.as_ptr();
        // SAFETY: walking our own chain; segments after the cut are unlinked and
        // freed, each was referenced once through this chain.
        unsafe {
            loop {
                let s = &mut *cur;
                nsegs += 1;
                let dl = s.data_len as usize;
                if acc + dl >= keep || s.next.is_null() {
                    s.data_len = (keep - acc) as u16;
                    let rest = s.next;
                    s.next = std::ptr::null_mut();
                    if !rest.is_null() {
                        free_segs_raw(rest);
                    }
                    break;
                }
                acc += dl;
                cur = s.next;
            }
            let h = &mut *self.ptr.as_ptr();
            h.pkt_len = keep as u32;
            h.nb_segs = nsegs;
        }
        Ok(())
    }

    /// Append the packet `tail` as further segments of this one. Refused (`tail`
    /// freed) if a segment of this packet is shared with another handle.
    pub fn chain(&mut self, tail: Mbuf) -> Result<(), MbufError> {
        let total = self.nb_segs() + tail.nb_segs();
        if total > u16::MAX as usize {
            return Err(MbufError::TooManySegs(total));
        }
        let last = self.last_exclusive_seg()?;
        let t = tail.into_raw();
        // SAFETY: `last` is our last segment; `t` is a packet we now own and link in.
        unsafe {
            (*last).next = t;
            let h = &mut *self.ptr.as_ptr();
            h.nb_segs = total as u16;
            h.pkt_len += (*t).pkt_len;
        }
        Ok(())
    }

    /// Append several packets, in order, as further segments of this one (one walk
    /// to the end of the chain, however many are added). `tails` ends empty.
    /// Refused (`tails` kept) if a segment of this packet is shared.
    pub fn chain_many(&mut self, tails: &mut Vec<Mbuf>) -> Result<(), MbufError> {
        let total = self.nb_segs() + tails.iter().map(Mbuf::nb_segs).sum::<usize>();
        if total > u16::MAX as usize {
            return Err(MbufError::TooManySegs(total));
        }
        let mut last = self.last_exclusive_seg()?;
        let mut add = 0u32;
        for t in tails.drain(..) {
            // (A one-segment tail is its own last segment: no walk into `next`.)
            let t_last = if t.hdr().nb_segs == 1 { t.ptr.as_ptr() } else { t.last_seg() };
            let t = t.into_raw();
            // SAFETY: `last` is our last segment; `t` a packet we now own and link in;
            // its own last segment becomes ours.
            unsafe {
                (*last).next = t;
                add += (*t).pkt_len;
            }
            last = t_last;
        }
        // SAFETY: our head.
        unsafe {
            let h = &mut *self.ptr.as_ptr();
            h.nb_segs = total as u16;
            h.pkt_len += add;
        }
        Ok(())
    }

    /// Hang every segment of `list` behind this packet's last segment, in one step
    /// (the list ends empty). Refused (both unchanged) if the packet would have
    /// more than `u16::MAX` segments or a segment of it is shared.
    pub fn chain_list(&mut self, list: &mut SegList) -> Result<(), MbufError> {
        if list.first.is_null() {
            return Ok(());
        }
        let total = self.nb_segs() + list.len();
        if total > u16::MAX as usize {
            return Err(MbufError::TooManySegs(total));
        }
        let last = if self.hdr().nb_segs == 1 {
            if self.refcnt() != 1 {
                return Err(MbufError::Shared);
            }
            self.ptr.as_ptr()
        } else {
            self.last_exclusive_seg()?
        };
        // SAFETY: `last` is our last segment; the list's segments become ours (the
        // list is emptied below, so each is owned once).
        unsafe { (*last).next = list.first };
        let h = self.header_mut();
        h.nb_segs = total as u16;
        h.pkt_len += list.bytes;
        list.forget();
        Ok(())
    }

    /// A one-segment packet whose data are bytes `off..off + len` of `owner`, without
    /// a copy: the header comes from `pool`, the bytes stay where `owner` keeps them,
    /// and `owner` is dropped when the last segment pointing into them is freed
    /// (clones and slices of the packet share it). As DPDK's external buffers
    /// (`rte_pktmbuf_attach_extbuf`). The data are read-only, as an indirect
    /// segment's, and have no IO address (`buf_iova` 0): for ports whose drivers copy
    /// (the kernel ones), never for DMA. At most 65,535 bytes (a segment's length).
    pub fn external<T: AsRef<[u8]> + Send + Sync + 'static>(
        pool: &Mempool,
        owner: T,
        off: usize,
        len: usize,
    ) -> Result<Mbuf, MbufError> {
        let have = owner.as_ref().len();
        if off.checked_add(len).is_none_or(|end| end > have) || len > usize::from(u16::MAX) {
            return Err(MbufError::NoRoom { op: "external", want: off.saturating_add(len), have });
        }
        let mut raw = [std::ptr::null_mut(); 1];
        pool.get_bulk(&mut raw).map_err(|_| MbufError::NoMbuf)?;
        let shared = ExtShared { refcnt: std::sync::atomic::AtomicU32::new(1), release: release_ext::<T> };
        let b = Box::into_raw(Box::new(ExtBox { shared, owner }));
        // SAFETY: `b` is a live box we own. The bytes are read through `owner` once it
        // is in the box, and the box never moves, so the pointer stays valid as long
        // as the box lives: until the last segment pointing into it is detached.
        let data = unsafe { (*b).owner.as_ref().as_ptr().add(off) };
        let mi = raw[0];
        // SAFETY: `mi` is a fresh header we own; from here the box is released by the
        // detach of the last segment holding it.
        unsafe {
            reset_raw(mi, 0);
            let m = &mut *mi;
            m.buf_addr = data.cast_mut();
            m.buf_iova = 0;
            m.buf_len = len as u16;
            m.data_len = len as u16;
            m.pkt_len = len as u32;
            m.ol_flags = abi::EXT_ATTACHED;
            m.ext_shared = b.cast();
            Ok(Mbuf::from_raw(mi))
        }
    }

    /// A new packet made of indirect segments (headers from `pool`) that show bytes
    /// `off..off + len` of this packet's data, sharing its buffers (each buffer's
    /// owner gains a reference). For segmentation: payload slices without copies.
    pub fn slice_indirect(&self, pool: &Mempool, off: usize, len: usize) -> Result<Mbuf, MbufError> {
        if off + len > self.pkt_len() {
            return Err(MbufError::NoRoom { op: "slice_indirect", want: off + len, have: self.pkt_len() });
        }
        let mut head: Option<Mbuf> = None;
        let mut tail: *mut RawMbuf = std::ptr::null_mut();
        let mut skip = off;
        let mut left = len;
        for s in self.segs() {
            if left == 0 {
                break;
            }
            // SAFETY: a valid segment we hold a reference to.
            let sr = unsafe { &*s };
            let dl = sr.data_len as usize;
            if skip >= dl {
                skip -= dl;
                continue;
            }
            let take = (dl - skip).min(left);
            let mut raw = [std::ptr::null_mut(); 1];
            pool.get_bulk(&mut raw).map_err(|_| MbufError::NoMbuf)?;
            let mi = raw[0];
            // SAFETY: the buffer's owner is live (we hold a reference to `s` through
            // `self`); `mi` is a fresh header we own.
            unsafe {
                reset_raw(mi, 0);
                let m = &mut *mi;
                m.ol_flags = attach_to_owner_of(s, m);
                m.buf_addr = sr.buf_addr;
                m.buf_iova = sr.buf_iova;
                m.buf_len = sr.buf_len;
                m.data_off = sr.data_off + skip as u16;
                m.data_len = take as u16;
                m.pkt_len = take as u32;
                m.port = sr.port;
            }
            match head.as_mut() {
                None => {
                    // SAFETY: a complete one-segment packet owned by us.
                    head = Some(unsafe { Mbuf::from_raw(mi) });
                }
                Some(h) => {
                    // SAFETY: `tail` is the last segment of `h`; `mi` joins the chain.
                    unsafe {
                        (*tail).next = mi;
                        let hh = &mut *h.ptr.as_ptr();
                        hh.nb_segs += 1;
                        hh.pkt_len += take as u32;
                    }
                }
            }
            tail = mi;
            skip = 0;
            left -= take;
        }
        match head {
            Some(h) => Ok(h),
            None => {
                // A zero-length slice: an empty packet.
                let m = Mbuf::alloc(pool)?;
                Ok(m)
            }
        }
    }

    /// Copy `dst.len()` bytes starting at `off` into `dst`, across segments. Returns
    /// the number copied (less when the packet is shorter).
    pub fn copy_to(&self, off: usize, dst: &mut [u8]) -> usize {
        let mut skip = off;
        let mut done = 0;
        for seg in self.segments() {
            if done == dst.len() {
                break;
            }
            if skip >= seg.len() {
                skip -= seg.len();
                continue;
            }
            let src = &seg[skip..];
            skip = 0;
            let k = src.len().min(dst.len() - done);
            dst[done..done + k].copy_from_slice(&src[..k]);
            done += k;
        }
        done
    }

    /// Read `len` bytes at `off`: a slice into the packet when they are contiguous in
    /// one segment, else a copy into `buf` (which must hold `len` bytes). `None` when
    /// the packet is too short or `buf` too small.
    pub fn read<'a>(&'a self, off: usize, len: usize, buf: &'a mut [u8]) -> Option<&'a [u8]> {
        if off.checked_add(len)? > self.pkt_len() {
            return None;
        }
        let mut skip = off;
        for seg in self.segments() {
            if skip < seg.len() {
                if skip + len <= seg.len() {
                    return Some(&seg[skip..skip + len]);
                }
                break;
            }
            skip -= seg.len();
        }
        let buf = buf.get_mut(..len)?;
        (self.copy_to(off, buf) == len).then_some(&*buf)
    }

    /// The whole packet as one vector (for tests and slow paths).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.pkt_len());
        for s in self.segments() {
            v.extend_from_slice(s);
        }
        v
    }

    /// Another handle to the same packet: every segment's count goes up by one.
    /// Both handles then see the data as read-only.
    pub fn share(&self) -> Mbuf {
        for s in self.segs() {
            // SAFETY: valid segment we hold a reference to; Relaxed suffices for an
            // increment (we already hold a reference, as with `Arc::clone`).
            unsafe { (*s).refcnt.fetch_add(1, Ordering::Relaxed) };
        }
        Mbuf { ptr: self.ptr }
    }

    /// A clone with its own headers from `pool`, attached to this packet's buffers
    /// (each buffer's owner gains a reference). Offsets and lengths of the clone can
    /// change independently; the data is read-only for both.
    pub fn clone_indirect(&self, pool: &Mempool) -> Result<Mbuf, MbufError> {
        let n = self.nb_segs();
        let mut raw = vec![std::ptr::null_mut(); n];
        pool.get_bulk(&mut raw).map_err(|_| MbufError::NoMbuf)?;
        for (i, s) in self.segs().enumerate() {
            // SAFETY: `s` is our valid segment; `raw[i]` a fresh header owned by us.
            unsafe {
                let mi = &mut *raw[i];
                reset_raw(mi, 0);
                let attached = attach_to_owner_of(s, mi);
                let s = &*s;
                mi.buf_addr = s.buf_addr;
                mi.buf_iova = s.buf_iova;
                mi.buf_len = s.buf_len;
                mi.data_off = s.data_off;
                mi.data_len = s.data_len;
                mi.port = s.port;
                mi.ol_flags = (s.ol_flags & !ATTACHED) | attached;
                mi.packet_type = s.packet_type;
                mi.next = raw.get(i + 1).copied().unwrap_or(std::ptr::null_mut());
            }
        }
        let h = self.hdr();
        // SAFETY: raw[0] is the head we just built.
        unsafe {
            let m = &mut *raw[0];
            m.pkt_len = h.pkt_len;
            m.nb_segs = h.nb_segs;
            m.rss_hash = h.rss_hash;
            m.l2_len = h.l2_len;
            m.l3_len = h.l3_len;
            m.l4_len = h.l4_len;
            m.tso_segsz = h.tso_segsz;
            m.vlan_tci = h.vlan_tci;
        }
        // SAFETY: a complete packet owned by us.
        Ok(unsafe { Mbuf::from_raw(raw[0]) })
    }

    /// Make this a fresh empty one-segment packet (frees the other segments).
    pub fn reset(&mut self) -> Result<(), MbufError> {
        if !self.is_writable() {
            return Err(MbufError::Shared);
        }
        let h = self.hdr();
        let rest = h.next;
        // SAFETY: `pool` is a live PoolInner.
        let headroom = unsafe { (*h.pool).headroom };
        if !rest.is_null() {
            // SAFETY: the rest of our chain, owned through this handle; then our own
            // first segment, held alone, becomes a one-segment packet.
            unsafe {
                free_segs_raw(rest);
                (*self.ptr.as_ptr()).next = std::ptr::null_mut();
            }
        }
        // SAFETY: our own first segment, held alone, `next` NULL.
        unsafe { reset_raw(self.ptr.as_ptr(), headroom) };
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::memory::MemPolicy;
    use crate::mempool::MempoolConfig;

    /// An owner that counts its drops.
    struct Counted(Vec<u8>, std::sync::Arc<std::sync::atomic::AtomicUsize>);

    impl AsRef<[u8]> for Counted {
        fn as_ref(&self) -> &[u8] {
            &self.0
        }
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn external_buffers_are_shared_read_only_and_released_with_the_last_segment() {
        let p = Mempool::create(&MempoolConfig::new("ext-test", 64).cache_size(0).policy(MemPolicy::NoHuge)).unwrap();
        let drops = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let data: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
        assert!(matches!(
            Mbuf::external(&p, Counted(data.clone(), drops.clone()), 0, 70_000),
            Err(MbufError::NoRoom { .. })
        ));
        assert!(Mbuf::external(&p, Counted(data.clone(), drops.clone()), 69_000, 1001).is_err());
        assert_eq!(drops.load(Ordering::SeqCst), 2, "refused owners are dropped at once");
        let mut m = Mbuf::external(&p, Counted(data.clone(), drops.clone()), 1000, 60_000).unwrap();
        assert_eq!((m.pkt_len(), m.data(), m.header().buf_iova), (60_000, &data[1000..61_000], 0));
        assert!(!m.is_writable() && m.data_mut().is_err() && m.append(1).is_err() && m.prepend(1).is_err());
        // A slice, a clone and a share all keep the owner alive.
        let s = m.slice_indirect(&p, 100, 50).unwrap();
        let c = m.clone_indirect(&p).unwrap();
        let sh = m.share();
        assert_eq!(s.data(), &data[1100..1150]);
        assert_eq!(c.data(), m.data());
        // Chained behind a direct header, as a TSO frame is built.
        let mut h = Mbuf::alloc(&p).unwrap();
        h.append(54).unwrap().fill(7);
        h.chain(c).unwrap();
        assert_eq!(h.pkt_len(), 60_054);
        assert_eq!(p.stats().in_use, 4, "headers: the packet, the slice, the clone, the frame's");
        drop(m);
        drop(sh);
        drop(s);
        assert_eq!(drops.load(Ordering::SeqCst), 2, "still held by the chained clone");
        // Freed the way a PMD frees: free_bulk_raw on the raw pointer.
        // SAFETY: we own the packet and do not use it afterwards.
        unsafe { free_bulk_raw(&[h.into_raw()]) };
        assert_eq!(drops.load(Ordering::SeqCst), 3, "released with its last segment");
        assert_eq!(p.stats().in_use, 0, "every header back in the pool");
    }

    fn pool(n: u32, room: u16) -> Mempool {
        Mempool::create(&MempoolConfig::new("m", n).cache_size(0).data_room(room).policy(MemPolicy::NoHuge)).unwrap()
    }

    /// Links and lengths change only where no other handle looks: chaining a packet
    /// behind itself (a loop) or behind a shared segment, and trimming a shared
    /// segment, are refused; everything still comes back to the pool.
    #[test]
    fn chains_change_only_where_no_other_handle_looks() {
        let p = pool(32, 256);
        let mut a = Mbuf::from_slice(&p, b"abc").unwrap();
        let alias = a.share();
        assert!(matches!(a.chain(alias), Err(MbufError::Shared)), "a loop");
        let mut y = Mbuf::from_slice(&p, b"y").unwrap();
        let x = a.share();
        y.chain(x).unwrap(); // y -> a (a's head now held twice)
        let mut z = Mbuf::from_slice(&p, b"z").unwrap();
        z.chain(a).unwrap(); // z -> a, a consumed
        assert_eq!(z.to_vec(), b"zabc");
        let zz = Mbuf::from_slice(&p, b"!").unwrap();
        assert!(matches!(y.chain(zz), Err(MbufError::Shared)), "behind a shared segment");
        assert!(matches!(y.trim(2), Err(MbufError::Shared)), "cutting a shared segment");
        assert!(matches!(y.chain_many(&mut vec![Mbuf::from_slice(&p, b"w").unwrap()]), Err(MbufError::Shared)));
        assert_eq!((y.to_vec(), z.to_vec()), (b"yabc".to_vec(), b"zabc".to_vec()));
        drop((y, z));
        assert_eq!(p.stats().in_use, 0);
    }

    /// A segment list links one-segment packets as they come, refuses chained
    /// ones, moves whole into another list or behind a packet, and frees what it
    /// still holds when cleared or dropped.
    #[test]
    fn seg_list_links_hands_on_and_frees() {
        let p = pool(32, 256);
        let mut a = SegList::new();
        for d in [&b"de"[..], b"f", b"ghi"] {
            a.push(Mbuf::from_slice(&p, d).unwrap()).unwrap();
        }
        let mut two = Mbuf::from_slice(&p, b"xy").unwrap();
        two.chain(Mbuf::from_slice(&p, b"z").unwrap()).unwrap();
        let two = a.push(two).unwrap_err();
        let shared = Mbuf::from_slice(&p, b"s").unwrap();
        let other = shared.share();
        let shared = a.push(shared).unwrap_err();
        drop((shared, other));
        assert_eq!((a.len(), a.bytes()), (3, 6));
        let mut b = SegList::new();
        b.push(Mbuf::from_slice(&p, b"jk").unwrap()).unwrap();
        a.append(&mut b).unwrap();
        assert!(b.is_empty());
        a.append(&mut b).unwrap();
        let mut head = Mbuf::from_slice(&p, b"abc").unwrap();
        head.chain_list(&mut a).unwrap();
        assert!(a.is_empty());
        assert_eq!((head.nb_segs(), head.pkt_len()), (5, 11));
        assert_eq!(head.to_vec(), b"abcdefghijk");
        head.chain_list(&mut a).unwrap();
        assert_eq!(head.nb_segs(), 5);
        drop(head);
        drop(two);
        assert_eq!(p.stats().in_use, 0);
        let mut c = SegList::new();
        for _ in 0..4 {
            c.push(Mbuf::from_slice(&p, b"q").unwrap()).unwrap();
        }
        c.clear();
        assert_eq!(p.stats().in_use, 0);
        c.push(Mbuf::from_slice(&p, b"r").unwrap()).unwrap();
        drop(c);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn chain_many_and_slice_indirect_share_without_copies() {
        let p = pool(32, 256);
        let mut head = Mbuf::from_slice(&p, b"abc").unwrap();
        let mut tails: Vec<Mbuf> =
            [&b"defg"[..], b"h", b"ijklmn"].iter().map(|d| Mbuf::from_slice(&p, d).unwrap()).collect();
        head.chain_many(&mut tails).unwrap();
        assert!(tails.is_empty());
        assert_eq!((head.nb_segs(), head.pkt_len()), (4, 14));
        assert_eq!(head.to_vec(), b"abcdefghijklmn");
        for (off, len) in [(0, 14), (2, 5), (3, 4), (7, 0), (8, 6), (13, 1)] {
            let s = head.slice_indirect(&p, off, len).unwrap();
            assert_eq!(s.to_vec(), &b"abcdefghijklmn"[off..off + len], "{off}+{len}");
            assert_eq!(s.pkt_len(), len);
            assert!(len == 0 || !s.is_writable());
        }
        assert!(head.slice_indirect(&p, 10, 5).is_err());
        let s = head.slice_indirect(&p, 2, 9).unwrap();
        drop(head);
        // The slice keeps the buffers alive after the original is gone.
        assert_eq!(s.to_vec(), b"cdefghijk");
        assert_eq!(s.slice_indirect(&p, 1, 3).unwrap().to_vec(), b"def");
        drop(s);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn alloc_append_prepend_adj_trim() {
        let p = pool(8, 256);
        let mut m = Mbuf::alloc(&p).unwrap();
        assert_eq!(m.headroom(), 128);
        assert_eq!(m.tailroom(), 128);
        m.append(10).unwrap().copy_from_slice(b"0123456789");
        m.prepend(2).unwrap().copy_from_slice(b"ab");
        assert_eq!(m.data(), b"ab0123456789");
        m.adj(3).unwrap();
        m.trim(2).unwrap();
        assert_eq!(m.data(), b"1234567");
        assert_eq!(m.pkt_len(), 7);
        assert!(matches!(m.append(1000), Err(MbufError::NoRoom { op: "append", .. })));
        assert!(matches!(m.adj(8), Err(MbufError::NoRoom { op: "adj", .. })));
        drop(m);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn chains_read_and_trim_across_segments() {
        let p = pool(16, 128 + 100);
        let data: Vec<u8> = (0..250u32).map(|i| i as u8).collect();
        let m = Mbuf::from_slice(&p, &data).unwrap();
        assert_eq!(m.nb_segs(), 3);
        assert_eq!(m.to_vec(), data);
        let mut buf = [0u8; 20];
        // Crosses the 100-byte boundary: copied.
        assert_eq!(m.read(90, 20, &mut buf).unwrap(), &data[90..110]);
        // Inside one segment: a slice into the packet.
        assert_eq!(m.read(120, 10, &mut buf).unwrap(), &data[120..130]);
        assert!(m.read(245, 10, &mut buf).is_none());
        let mut m = m;
        m.trim(160).unwrap();
        assert_eq!(m.nb_segs(), 1);
        assert_eq!(m.to_vec(), &data[..90]);
        assert_eq!(p.stats().in_use, 1);
        drop(m);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn share_and_indirect_clone_free_last() {
        let p = pool(16, 128 + 100);
        let hdrs = pool(16, 128);
        let data: Vec<u8> = (0..150u32).map(|i| i as u8).collect();
        let m = Mbuf::from_slice(&p, &data).unwrap();
        let s = m.share();
        assert_eq!(m.refcnt(), 2);
        let mut c = m.clone_indirect(&hdrs).unwrap();
        assert_eq!(m.refcnt(), 3);
        assert_eq!(c.to_vec(), data);
        assert!(!c.is_writable());
        // The clone's offsets are its own.
        c.adj(10).unwrap();
        assert_eq!(c.pkt_len(), 140);
        assert_eq!(m.pkt_len(), 150);
        drop(m);
        drop(s);
        // The buffers are still referenced by the clone.
        assert_eq!(p.stats().in_use, 2);
        assert_eq!(c.to_vec(), &data[10..]);
        let c2 = c.clone_indirect(&hdrs).unwrap();
        drop(c);
        assert_eq!(c2.to_vec(), &data[10..]);
        drop(c2);
        assert_eq!(p.stats().in_use, 0);
        assert_eq!(hdrs.stats().in_use, 0);
    }

    #[test]
    fn shared_data_is_read_only() {
        let p = pool(4, 256);
        let mut m = Mbuf::from_slice(&p, b"hello").unwrap();
        let s = m.share();
        assert_eq!(m.data_mut().unwrap_err(), MbufError::Shared);
        assert_eq!(m.append(1).unwrap_err(), MbufError::Shared);
        drop(s);
        m.data_mut().unwrap()[0] = b'j';
        assert_eq!(m.data(), b"jello");
        m.reset().unwrap();
        assert_eq!(m.pkt_len(), 0);
    }

    #[test]
    fn alloc_fails_cleanly_when_empty() {
        let p = pool(2, 256);
        let v = Mbuf::alloc_bulk(&p, 2).unwrap();
        assert_eq!(Mbuf::alloc(&p).unwrap_err(), MbufError::NoMbuf);
        assert_eq!(Mbuf::alloc_bulk(&p, 1).unwrap_err(), MbufError::NoMbuf);
        drop(v);
        assert_eq!(Mbuf::alloc_bulk(&p, 2).unwrap().len(), 2);
    }
}
