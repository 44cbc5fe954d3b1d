//! The host's mempools as a driver sees them.

use crate::abi;
use ironpath_abi::Mbuf;

/// A host mempool as seen by a driver: allocate packets for RX.
#[derive(Clone, Copy, Debug)]
pub struct Pool {
    raw: *const abi::Mempool,
    alloc: abi::AllocBulkFn,
}

// SAFETY: a host pool is thread-safe (its ops may be called from any thread).
unsafe impl Send for Pool {}
// SAFETY: as above.
unsafe impl Sync for Pool {}

impl Pool {
    /// The pool `raw` whose allocation function is `alloc` (the SDK builds it at
    /// queue setup).
    pub(crate) fn from_host(raw: *const abi::Mempool, alloc: abi::AllocBulkFn) -> Self {
        Self { raw, alloc }
    }

    /// Allocate `out.len()` reset packets, all or nothing. `false` when the pool is
    /// empty (count it as `nombuf`).
    #[inline(always)]
    pub fn alloc_bulk(&self, out: &mut [*mut Mbuf]) -> bool {
        // SAFETY: `raw` is a live host pool (the host keeps it alive while the queue
        // exists) and `out` has room for `out.len()` pointers.
        unsafe { (self.alloc)(self.raw, out.as_mut_ptr(), out.len() as u32) == 0 }
    }

    /// Buffer length of each mbuf (headroom included).
    pub fn buf_len(&self) -> u16 {
        // SAFETY: live host pool.
        unsafe { (*self.raw).buf_len }
    }

    /// Headroom of each mbuf.
    pub fn headroom(&self) -> u16 {
        // SAFETY: live host pool.
        unsafe { (*self.raw).headroom }
    }

    /// The raw ABI pointer (for DMA mapping: region address, IOVA and length).
    pub fn as_raw(&self) -> *const abi::Mempool {
        self.raw
    }
}
