//! Mempools of packet buffers: a fixed array of equal objects (mbuf header followed by
//! its data buffer) in one memory region, the free objects in an MPMC ring, and a
//! per-lcore cache in front of the ring. `get_bulk`/`put_bulk` move whole bursts.
//!
//! The pool's first field is the ABI view [`ironpath_abi::Mempool`], so the pointer
//! an mbuf keeps in `pool` is the pool itself and plugins reach the host's
//! [`MempoolOps`] through it.
//!
//! A pool lives as long as its last [`Mempool`] handle *and* its last mbuf: if the
//! handle is dropped while mbufs are still out, the pool is leaked (with a warning)
//! rather than freed under them.

use crate::lcore::{lcore_id, LCORE_ID_ANY, MAX_LCORES};
use crate::mbuf;
use crate::memory::{MemKind, MemPolicy, MemRegion};
use crate::mpmc::MpmcRing;
use crate::sync::CachePadded;
use ironpath_abi as abi;
use ironpath_abi::{Mbuf as RawMbuf, MempoolOps};
use std::cell::UnsafeCell;
use std::ffi::CString;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// Largest per-lcore cache size (objects), as DPDK's `RTE_MEMPOOL_CACHE_MAX_SIZE`.
pub const CACHE_MAX_SIZE: u32 = 512;

/// Size of the mbuf header that precedes each buffer.
pub const MBUF_HDR: usize = std::mem::size_of::<RawMbuf>();

/// Errors creating a pool or getting objects.
#[derive(Debug, thiserror::Error)]
pub enum MempoolError {
    /// Bad parameter.
    #[error("mempool `{name}`: {why}")]
    Param {
        /// Pool name.
        name: String,
        /// What is wrong and what is accepted.
        why: String,
    },
    /// Memory could not be had.
    #[error("mempool `{name}`: {err}")]
    Memory {
        /// Pool name.
        name: String,
        /// Underlying error.
        err: crate::memory::MemError,
    },
    /// The pool cannot supply the objects asked for.
    #[error("mempool exhausted: {want} object(s) requested, fewer available")]
    Exhausted {
        /// Number requested.
        want: usize,
    },
}

/// Parameters of a packet pool.
#[derive(Clone, Debug)]
pub struct MempoolConfig {
    /// Name (for messages and `show` commands).
    pub name: String,
    /// Number of mbufs.
    pub size: u32,
    /// Per-lcore cache size (0 = no cache), at most [`CACHE_MAX_SIZE`].
    pub cache_size: u32,
    /// Data room per mbuf, headroom included (DPDK default 2048 + 128).
    pub data_room: u16,
    /// Headroom reserved in front of packet data.
    pub headroom: u16,
    /// Hugepages or not.
    pub policy: MemPolicy,
}

impl MempoolConfig {
    /// A pool named `name` of `size` mbufs with DPDK's defaults (cache 256, 2176-byte
    /// data room, 128-byte headroom, hugepages preferred).
    pub fn new(name: &str, size: u32) -> Self {
        Self {
            name: name.to_string(),
            size,
            cache_size: 256.min(size / 2),
            data_room: 2048 + abi::PKTMBUF_HEADROOM,
            headroom: abi::PKTMBUF_HEADROOM,
            policy: MemPolicy::PreferHuge,
        }
    }

    /// Set the cache size.
    pub fn cache_size(mut self, n: u32) -> Self {
        self.cache_size = n;
        self
    }

    /// Set the data room (headroom included).
    pub fn data_room(mut self, n: u16) -> Self {
        self.data_room = n;
        self
    }

    /// Set the memory policy.
    pub fn policy(mut self, p: MemPolicy) -> Self {
        self.policy = p;
        self
    }
}

/// A per-lcore cache: a LIFO stack of free objects, touched only by its lcore.
struct LcoreCache {
    /// Number of objects in `objs`; written by the owner, read by anyone for stats.
    len: AtomicU32,
    hits: AtomicU64,
    misses: AtomicU64,
    objs: UnsafeCell<Box<[*mut RawMbuf]>>,
}

/// Counters of a pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MempoolStats {
    /// Objects in the pool.
    pub size: u32,
    /// Objects free (in the ring or a cache).
    pub available: u32,
    /// Objects handed out.
    pub in_use: u32,
    /// Of those free, how many sit in per-lcore caches.
    pub in_caches: u32,
    /// Gets and puts served by a cache alone.
    pub cache_hits: u64,
    /// Cache refills and flushes (gets and puts that had to touch the ring). Calls
    /// that bypass the cache (no cache, non-lcore threads, bursts larger than the
    /// cache) are not counted.
    pub cache_misses: u64,
    /// Gets refused because the pool was empty.
    pub get_fails: u64,
}

/// The pool proper. `repr(C)` with the ABI view first: `*const abi::Mempool` of an
/// mbuf's `pool` field points here.
#[repr(C)]
pub(crate) struct PoolInner {
    pub(crate) abi: abi::Mempool,
    ring: MpmcRing<*mut RawMbuf, false>,
    caches: Box<[CachePadded<LcoreCache>]>,
    cache_size: u32,
    flush_thresh: u32,
    get_fails: AtomicU64,
    region: MemRegion,
    elt_size: usize,
    name: CString,
    /// Live handles; the pool is freed when this reaches 0 with every object home.
    handles: AtomicU32,
}

// SAFETY: all shared state is atomics, the MPMC ring (Sync), or per-lcore caches that
// only the thread holding that lcore id touches (lcore ids are unique per live thread,
// see `lcore`).
unsafe impl Sync for PoolInner {}
// SAFETY: the raw pointers inside point into the pool's own region.
unsafe impl Send for PoolInner {}

static OPS: MempoolOps = MempoolOps {
    size: std::mem::size_of::<MempoolOps>() as u32,
    reserved: 0,
    alloc_bulk: Some(ops_alloc_bulk),
    free_bulk: Some(ops_free_bulk),
};

unsafe extern "C" fn ops_alloc_bulk(pool: *const abi::Mempool, objs: *mut *mut RawMbuf, n: u32) -> i32 {
    // SAFETY: `pool` is the `abi` field at offset 0 of a live `PoolInner` (the host
    // only hands out such pointers), and `objs` has room for `n` pointers (caller's
    // contract in the ABI).
    unsafe {
        let p = &*pool.cast::<PoolInner>();
        let out = std::slice::from_raw_parts_mut(objs, n as usize);
        if p.get_bulk(out) {
            // (Read once: the resets' stores could alias it for the compiler.)
            let headroom = p.abi.headroom;
            for &m in out.iter() {
                mbuf::reset_raw(m, headroom);
            }
            0
        } else {
            -abi::errno::ENOBUFS
        }
    }
}

/// `dst.copy_from_slice(src)` for the few pointers of a burst moved between a
/// caller and a per-lcore cache: four at a time inline, not a call to `memcpy`
/// (which costs more than the copy for a burst of 32).
#[inline(always)]
fn copy_objs(dst: &mut [*mut RawMbuf], src: &[*mut RawMbuf]) {
    assert_eq!(dst.len(), src.len());
    let mut d = dst.chunks_exact_mut(4);
    let mut s = src.chunks_exact(4);
    for (d, s) in (&mut d).zip(&mut s) {
        let d: &mut [*mut RawMbuf; 4] = d.try_into().expect("chunks of 4");
        d.copy_from_slice(s);
    }
    for (d, s) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *d = *s;
    }
}

unsafe extern "C" fn ops_free_bulk(objs: *const *mut RawMbuf, n: u32) {
    // SAFETY: the caller passes `n` packets it owns one reference to each (ABI contract).
    unsafe { mbuf::free_bulk_raw(std::slice::from_raw_parts(objs, n as usize)) }
}

impl PoolInner {
    #[inline(always)]
    fn cache(&self) -> Option<&LcoreCache> {
        if self.cache_size == 0 {
            return None;
        }
        let id = lcore_id();
        if id == LCORE_ID_ANY {
            return None;
        }
        self.caches.get(id as usize).map(|c| &c.0)
    }

    /// Get `out.len()` objects, all or nothing.
    #[inline]
    pub(crate) fn get_bulk(&self, out: &mut [*mut RawMbuf]) -> bool {
        let ok = self.take(out);
        #[cfg(debug_assertions)]
        if ok {
            Self::mark_used(out);
        }
        ok
    }

    #[inline(always)]
    fn take(&self, out: &mut [*mut RawMbuf]) -> bool {
        let n = out.len() as u32;
        let Some(c) = self.cache().filter(|_| n <= self.cache_size) else {
            // No shared counter here: a contended atomic per call would cost more
            // than the ring operation itself on two cores.
            let ok = self.ring.dequeue_bulk(out);
            if !ok {
                self.get_fails.fetch_add(1, Ordering::Relaxed);
            }
            return ok;
        };
        // SAFETY: only the thread that holds this lcore id touches this cache's array.
        let objs = unsafe { &mut *c.objs.get() };
        let mut len = c.len.load(Ordering::Relaxed);
        if len < n {
            // Refill to cache_size plus what this request needs.
            let req = (self.cache_size + n - len) as usize;
            let dst = &mut objs[len as usize..len as usize + req];
            bump(&c.misses);
            if self.ring.dequeue_bulk(dst) {
                len += req as u32;
            } else if !self.ring.dequeue_bulk(out) {
                self.get_fails.fetch_add(1, Ordering::Relaxed);
                return false;
            } else {
                return true;
            }
        } else {
            bump(&c.hits);
        }
        // Hand out the top of the stack (most recently freed: warm in cache).
        let top = (len - n) as usize;
        copy_objs(out, &objs[top..len as usize]);
        c.len.store(len - n, Ordering::Relaxed);
        true
    }

    /// Debug builds (and the AddressSanitizer runs, which are debug builds) mark a
    /// free object with a reference count of 0, which no object in use has, and
    /// panic when one is returned again: a double free into a per-lcore cache would
    /// otherwise hand one buffer to two users later, silently.
    #[cfg(debug_assertions)]
    fn mark_free(&self, objs: &[*mut RawMbuf]) {
        for &m in objs {
            // SAFETY: the caller returns objects of this pool (live memory of its
            // region); only the count is touched.
            let before = unsafe { (*m).refcnt.swap(0, Ordering::Relaxed) };
            assert!(
                before != 0,
                "mbuf {m:p} of pool `{}` freed twice (it was free already)",
                self.name.to_string_lossy()
            );
        }
    }

    /// Objects handed out carry a count of 1 again (debug builds; see `mark_free`).
    #[cfg(debug_assertions)]
    fn mark_used(objs: &[*mut RawMbuf]) {
        for &m in objs {
            // SAFETY: objects just taken from this pool: ours alone.
            unsafe { (*m).refcnt.store(1, Ordering::Relaxed) };
        }
    }

    /// Return objects to the pool.
    #[inline]
    pub(crate) fn put_bulk(&self, objs_in: &[*mut RawMbuf]) {
        #[cfg(debug_assertions)]
        self.mark_free(objs_in);
        let n = objs_in.len() as u32;
        let Some(c) = self.cache().filter(|_| n <= self.cache_size) else {
            let ok = self.ring.enqueue_bulk(objs_in);
            debug_assert!(ok, "mempool ring overflow: an object was freed twice");
            return;
        };
        // SAFETY: only the thread that holds this lcore id touches this cache's array.
        let objs = unsafe { &mut *c.objs.get() };
        let len = c.len.load(Ordering::Relaxed) as usize;
        copy_objs(&mut objs[len..len + n as usize], objs_in);
        let mut len = len as u32 + n;
        if len > self.flush_thresh {
            // Flush down to cache_size, oldest objects first.
            let extra = (len - self.cache_size) as usize;
            let ok = self.ring.enqueue_bulk(&objs[..extra]);
            debug_assert!(ok, "mempool ring overflow: an object was freed twice");
            objs.copy_within(extra..len as usize, 0);
            len -= extra as u32;
            bump(&c.misses);
        } else {
            bump(&c.hits);
        }
        c.len.store(len, Ordering::Relaxed);
    }

    fn stats(&self) -> MempoolStats {
        let size = self.abi.size;
        let in_caches: u32 = self.caches.iter().map(|c| c.len.load(Ordering::Relaxed)).sum();
        let available = (self.ring.len() as u32 + in_caches).min(size);
        MempoolStats {
            size,
            available,
            in_use: size - available,
            in_caches,
            cache_hits: self.caches.iter().map(|c| c.hits.load(Ordering::Relaxed)).sum(),
            cache_misses: self.caches.iter().map(|c| c.misses.load(Ordering::Relaxed)).sum(),
            get_fails: self.get_fails.load(Ordering::Relaxed),
        }
    }
}

/// Single-writer counter increment: a load and a store, no locked instruction.
#[inline(always)]
fn bump(c: &AtomicU64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
}

/// A handle to a packet pool. Cloning is cheap (a reference count).
pub struct Mempool {
    inner: NonNull<PoolInner>,
}

// SAFETY: `PoolInner` is Sync + Send; the handle only reads through the pointer.
unsafe impl Send for Mempool {}
// SAFETY: as above.
unsafe impl Sync for Mempool {}

impl Clone for Mempool {
    fn clone(&self) -> Self {
        self.inner().handles.fetch_add(1, Ordering::Relaxed);
        Self { inner: self.inner }
    }
}

impl Drop for Mempool {
    fn drop(&mut self) {
        if self.inner().handles.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        let st = self.inner().stats();
        if st.in_use != 0 {
            log::warn!("mempool `{}` dropped with {} mbuf(s) still in use; leaking it", self.name(), st.in_use);
            return;
        }
        // SAFETY: last handle and no object outstanding: nothing can reach the pool
        // any more; it was made by `Box::into_raw` in `create`.
        drop(unsafe { Box::from_raw(self.inner.as_ptr()) });
    }
}

impl std::fmt::Debug for Mempool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mempool").field("name", &self.name()).field("stats", &self.stats()).finish()
    }
}

impl Mempool {
    /// Create a pool; its memory is mapped and every mbuf header initialised.
    pub fn create(cfg: &MempoolConfig) -> Result<Self, MempoolError> {
        let perr = |why: String| MempoolError::Param { name: cfg.name.clone(), why };
        if cfg.size == 0 || cfg.size > (1 << 30) {
            return Err(perr(format!("size {} is out of range (1..=2^30)", cfg.size)));
        }
        if cfg.cache_size > CACHE_MAX_SIZE {
            return Err(perr(format!("cache size {} is above the maximum {CACHE_MAX_SIZE}", cfg.cache_size)));
        }
        if cfg.headroom > cfg.data_room {
            return Err(perr(format!("headroom {} is larger than the data room {}", cfg.headroom, cfg.data_room)));
        }
        let name = CString::new(cfg.name.clone()).map_err(|_| perr("name contains a NUL byte".into()))?;
        let elt_size = (MBUF_HDR + cfg.data_room as usize).div_ceil(64) * 64;
        let total =
            elt_size.checked_mul(cfg.size as usize).ok_or_else(|| perr("size times element size overflows".into()))?;
        let region =
            MemRegion::new(total, cfg.policy).map_err(|err| MempoolError::Memory { name: cfg.name.clone(), err })?;
        let ring = MpmcRing::new((cfg.size as usize).next_power_of_two()).map_err(|e| perr(e.to_string()))?;
        let cache_cap = if cfg.cache_size == 0 { 0 } else { 3 * cfg.cache_size as usize };
        let caches = (0..MAX_LCORES)
            .map(|_| {
                CachePadded(LcoreCache {
                    len: AtomicU32::new(0),
                    hits: AtomicU64::new(0),
                    misses: AtomicU64::new(0),
                    objs: UnsafeCell::new(vec![std::ptr::null_mut(); cache_cap].into_boxed_slice()),
                })
            })
            .collect();
        let inner = Box::new(PoolInner {
            abi: abi::Mempool {
                ops: &OPS,
                name: std::ptr::null(),
                buf_len: cfg.data_room,
                headroom: cfg.headroom,
                size: cfg.size,
                region_va: region.as_ptr(),
                region_iova: region.iova(),
                region_len: region.len() as u64,
            },
            ring,
            caches,
            cache_size: cfg.cache_size,
            flush_thresh: cfg.cache_size + cfg.cache_size / 2,
            get_fails: AtomicU64::new(0),
            region,
            elt_size,
            name,
            handles: AtomicU32::new(1),
        });
        let inner = NonNull::from(Box::leak(inner));
        // SAFETY: `inner` was just leaked from a Box and is not shared yet.
        let p = unsafe { &mut *inner.as_ptr() };
        p.abi.name = p.name.as_ptr();
        let base = p.region.as_ptr();
        let mut batch = Vec::with_capacity(64);
        for i in 0..cfg.size as usize {
            // SAFETY: element i lies inside the region (total = elt_size * size) and is
            // 64-byte aligned (region is page aligned, elt_size a multiple of 64).
            let m = unsafe { base.add(i * elt_size) }.cast::<RawMbuf>();
            // SAFETY: `m` is valid for writes of one mbuf header, not yet shared.
            unsafe {
                m.write(RawMbuf {
                    buf_addr: m.cast::<u8>().add(MBUF_HDR),
                    buf_iova: p.abi.region_iova + (i * elt_size + MBUF_HDR) as u64,
                    data_off: cfg.headroom,
                    refcnt: AtomicU16::new(1),
                    nb_segs: 1,
                    port: u16::MAX,
                    ol_flags: 0,
                    packet_type: 0,
                    pkt_len: 0,
                    data_len: 0,
                    vlan_tci: 0,
                    rss_hash: 0,
                    buf_len: cfg.data_room,
                    l2_len: 0,
                    l4_len: 0,
                    l3_len: 0,
                    tso_segsz: 0,
                    next: std::ptr::null_mut(),
                    pool: &p.abi,
                    aggr_segs: 0,
                    reserved: [0; 3],
                    timestamp: 0,
                    private: [0; abi::MBUF_PRIV_WORDS],
                    ext_shared: std::ptr::null_mut(),
                });
            }
            batch.push(m);
            if batch.len() == 64 {
                p.ring.enqueue_bulk(&batch);
                batch.clear();
            }
        }
        p.ring.enqueue_bulk(&batch);
        Ok(Self { inner })
    }

    #[inline(always)]
    pub(crate) fn inner(&self) -> &PoolInner {
        // SAFETY: the pool outlives every handle (freed only when the last handle goes
        // with no object outstanding).
        unsafe { self.inner.as_ref() }
    }

    /// The ABI view handed to plugins (`rx_queue_setup`).
    pub fn as_abi(&self) -> *const abi::Mempool {
        &self.inner().abi
    }

    /// Pool name.
    pub fn name(&self) -> &str {
        self.inner().name.to_str().unwrap_or("?")
    }

    /// What backs the pool's memory.
    pub fn mem_kind(&self) -> MemKind {
        self.inner().region.kind()
    }

    /// Base address, IOVA and length of the memory region backing the pool
    /// (what a DMA-capable PMD maps).
    pub fn region(&self) -> (*mut u8, u64, usize) {
        let r = &self.inner().region;
        (r.as_ptr(), r.iova(), r.len())
    }

    /// Bytes per object (header + buffer, cache-line rounded).
    pub fn elt_size(&self) -> usize {
        self.inner().elt_size
    }

    /// Objects each lcore may keep in its cache.
    pub fn cache_size(&self) -> u32 {
        self.inner().cache_size
    }

    /// Data room per mbuf (headroom included).
    pub fn data_room(&self) -> u16 {
        self.inner().abi.buf_len
    }

    /// Counters (a snapshot).
    pub fn stats(&self) -> MempoolStats {
        self.inner().stats()
    }

    /// Objects in use ([`MempoolStats::in_use`]), without the other figures: for a
    /// pool without per-lcore caches, one read of the ring's length.
    pub fn in_use(&self) -> u32 {
        let p = self.inner();
        if p.cache_size == 0 {
            p.abi.size - (p.ring.len() as u32).min(p.abi.size)
        } else {
            p.stats().in_use
        }
    }

    /// Get `out.len()` raw objects, all or nothing (not reset: see [`crate::Mbuf`]
    /// for packet allocation). Returns `Err(Exhausted)` and counts it when the pool
    /// cannot supply them.
    #[inline]
    pub fn get_bulk(&self, out: &mut [*mut RawMbuf]) -> Result<(), MempoolError> {
        if self.inner().get_bulk(out) {
            Ok(())
        } else {
            Err(MempoolError::Exhausted { want: out.len() })
        }
    }

    /// Return raw objects obtained from `get_bulk` of this pool.
    ///
    /// # Safety
    /// Each pointer must come from this pool, be owned by the caller, and not be
    /// returned twice.
    #[inline]
    pub unsafe fn put_bulk(&self, objs: &[*mut RawMbuf]) {
        self.inner().put_bulk(objs)
    }

    /// Allocate `out.len()` reset packets, all or nothing, as raw pointers (fast path).
    #[inline]
    pub fn alloc_bulk_raw(&self, out: &mut [*mut RawMbuf]) -> Result<(), MempoolError> {
        self.get_bulk(out)?;
        // (Read once: the resets' stores could alias it for the compiler.)
        let headroom = self.inner().abi.headroom;
        for &m in out.iter() {
            // SAFETY: fresh objects from this pool, owned by us.
            unsafe { mbuf::reset_raw(m, headroom) };
        }
        Ok(())
    }
}

/// Shared-ownership pool handle used where an `Arc` reads better.
pub type MempoolRef = Arc<Mempool>;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::lcore;

    fn pool(n: u32, cache: u32) -> Mempool {
        Mempool::create(&MempoolConfig::new("t", n).cache_size(cache).policy(MemPolicy::NoHuge)).unwrap()
    }

    /// The layout plugins that register a pool's region with the kernel rely on
    /// (net_af_xdp's UMEM; docs/writing-a-pmd.md): objects back to back from the
    /// region's start, each an mbuf header then its buffer, `round_up(128 + buf_len,
    /// 64)` bytes apart, all inside `region_len`.
    #[test]
    fn objects_are_laid_out_as_the_abi_documents() {
        for room in [2176u16, 2048 + 100, 9216] {
            let p = Mempool::create(
                &MempoolConfig::new("lay", 100).data_room(room).cache_size(0).policy(MemPolicy::NoHuge),
            )
            .unwrap();
            let (va, _, len) = p.region();
            let stride = (std::mem::size_of::<RawMbuf>() + usize::from(room)).div_ceil(64) * 64;
            assert_eq!(std::mem::size_of::<RawMbuf>(), 128);
            assert!(stride * 100 <= len);
            let mut objs = [std::ptr::null_mut(); 100];
            p.get_bulk(&mut objs).unwrap();
            let mut seen: Vec<usize> = objs
                .iter()
                .map(|&m| {
                    let off = m as usize - va as usize;
                    assert_eq!(off % stride, 0, "object at {off}");
                    // SAFETY: a live object of the pool.
                    let h = unsafe { &*m };
                    assert_eq!(h.buf_addr as usize, m as usize + 128);
                    assert_eq!(h.buf_len, room);
                    off / stride
                })
                .collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..100).collect::<Vec<_>>());
            // SAFETY: objects from this pool, returned once.
            unsafe { p.put_bulk(&objs) };
        }
    }

    #[test]
    fn in_use_agrees_with_the_stats_with_and_without_caches() {
        for cache in [0, 16] {
            let p = pool(64, cache);
            let mut objs = [std::ptr::null_mut(); 40];
            assert_eq!(p.in_use(), 0);
            p.get_bulk(&mut objs).unwrap();
            assert_eq!((p.in_use(), p.stats().in_use), (40, 40), "cache {cache}");
            // SAFETY: objects from this pool, returned once.
            unsafe { p.put_bulk(&objs[..10]) };
            assert_eq!((p.in_use(), p.stats().in_use), (30, 30), "cache {cache}");
            // SAFETY: as above.
            unsafe { p.put_bulk(&objs[10..]) };
            assert_eq!(p.in_use(), 0);
        }
    }

    #[test]
    fn get_put_without_lcore_uses_ring() {
        let p = pool(64, 16);
        let mut objs = [std::ptr::null_mut(); 32];
        p.get_bulk(&mut objs).unwrap();
        assert_eq!(p.stats().in_use, 32);
        // SAFETY: objects from this pool, returned once.
        unsafe { p.put_bulk(&objs) };
        assert_eq!(p.stats().available, 64);
        assert_eq!(p.stats().cache_hits, 0);
    }

    #[test]
    fn exhaustion_is_an_error_and_counted() {
        let p = pool(8, 0);
        let mut objs = [std::ptr::null_mut(); 8];
        p.get_bulk(&mut objs).unwrap();
        let mut one = [std::ptr::null_mut(); 1];
        assert!(matches!(p.get_bulk(&mut one), Err(MempoolError::Exhausted { want: 1 })));
        assert_eq!(p.stats().get_fails, 1);
        // SAFETY: objects from this pool, returned once.
        unsafe { p.put_bulk(&objs) };
    }

    #[test]
    fn lcore_cache_serves_repeated_bursts() {
        let p = pool(1024, 64);
        let p2 = p.clone();
        let h = lcore::launch(101, false, move || {
            let mut objs = [std::ptr::null_mut(); 32];
            for _ in 0..100 {
                p2.get_bulk(&mut objs).unwrap();
                // SAFETY: objects from this pool, returned once.
                unsafe { p2.put_bulk(&objs) };
            }
            p2.stats()
        })
        .unwrap();
        let st = h.join().unwrap();
        assert!(st.cache_hits >= 190, "{st:?}");
        assert!(st.cache_misses <= 10, "{st:?}");
        assert_eq!(st.in_use, 0);
        assert_eq!(p.stats().available, 1024);
    }

    /// A packet freed twice into an lcore's cache is caught (debug and ASan builds),
    /// whether the second free goes the fast path or the general one.
    #[test]
    #[cfg(debug_assertions)]
    fn a_double_free_into_an_lcore_cache_is_caught() {
        let p = pool(256, 64);
        for general in [false, true] {
            let p2 = p.clone();
            let h = lcore::launch(110, false, move || {
                let m = crate::Mbuf::alloc(&p2).unwrap();
                let raw = m.into_raw();
                // SAFETY: the packet is ours; the second free is the bug under test.
                unsafe { crate::mbuf::free_bulk_raw(&[raw]) };
                let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    if general {
                        // SAFETY: as above (deliberately wrong).
                        unsafe { crate::mbuf::free_segs_raw(raw) };
                    } else {
                        // SAFETY: as above (deliberately wrong).
                        unsafe { p2.put_bulk(&[raw]) };
                    }
                }));
                let msg = again.expect_err("a double free must panic");
                msg.downcast_ref::<String>().cloned().unwrap_or_default()
            })
            .unwrap();
            let msg = h.join().unwrap();
            assert!(msg.contains("freed twice"), "{msg}");
        }
        assert_eq!(p.stats().in_use, 0, "the object is in the pool once");
    }

    #[test]
    fn bad_parameters_are_refused_with_reasons() {
        let e = Mempool::create(&MempoolConfig::new("x", 0)).unwrap_err();
        assert!(e.to_string().contains("size 0"), "{e}");
        let e = Mempool::create(&MempoolConfig::new("x", 10).cache_size(1000)).unwrap_err();
        assert!(e.to_string().contains("cache size 1000"), "{e}");
    }

    /// Two lcores doing get/put bulk 10^7 times in total on one pool: at the end
    /// every object is home exactly once.
    #[test]
    fn two_threads_lose_and_duplicate_nothing() {
        for cache in [0u32, 32] {
            let p = pool(256, cache);
            let hs: Vec<_> = [102u32, 103]
                .into_iter()
                .map(|id| {
                    let p = p.clone();
                    lcore::launch(id, false, move || {
                        let mut objs = [std::ptr::null_mut(); 32];
                        let mut done = 0u64;
                        while done < 5_000_000 {
                            if p.get_bulk(&mut objs).is_ok() {
                                // SAFETY: objects from this pool, returned once.
                                unsafe { p.put_bulk(&objs) };
                                done += 1;
                            }
                        }
                    })
                    .unwrap()
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            let st = p.stats();
            assert_eq!(st.available, 256, "cache {cache}: {st:?}");
            // Drain every object through the same lcore ids (so their caches empty
            // too): all 256 must come out, each exactly once.
            let mut all = Vec::new();
            for id in [102u32, 103] {
                let p = p.clone();
                let got = lcore::launch(id, false, move || {
                    let mut v = Vec::new();
                    let mut one = [std::ptr::null_mut(); 1];
                    while p.get_bulk(&mut one).is_ok() {
                        v.push(one[0] as usize);
                    }
                    v
                })
                .unwrap()
                .join()
                .unwrap();
                all.extend(got);
            }
            all.sort_unstable();
            all.dedup();
            assert_eq!(all.len(), 256, "cache {cache}");
            let all: Vec<*mut RawMbuf> = all.into_iter().map(|a| a as *mut RawMbuf).collect();
            // SAFETY: objects from this pool, returned once.
            unsafe { p.put_bulk(&all) };
        }
    }
}
