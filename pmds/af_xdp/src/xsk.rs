//! One XDP socket of a queue pair: its UMEM (the RX queue's pool region), its four
//! rings, and the mbufs the kernel holds when it closes.

use crate::sys::{self, Fd, Ring};
use crate::umem::{Layout, Posted};
use ironpath_pmd_sdk::abi::Mbuf;
use ironpath_pmd_sdk::{free_bulk, Counter, Pool};
use std::sync::{Arc, Mutex};

/// Counters of one socket that are ours (the kernel's come from XDP_STATISTICS).
#[derive(Default)]
pub struct XskCounters {
    /// RX descriptors that named no buffer we had posted (dropped, never used).
    pub rx_bad_desc: Counter,
    /// Packets copied into a UMEM buffer to be sent (another pool's, chained).
    pub tx_copied: Counter,
    /// Completions whose address was not the next one sent.
    pub tx_bad_completion: Counter,
    /// Packets dropped as larger than a UMEM chunk.
    pub tx_too_long: Counter,
}

/// The socket, shared by the queue pair's two halves and the device (statistics).
pub struct Xsk {
    fd: Option<Fd>,
    map: Arc<Fd>,
    queue: u32,
    /// The region's start (the UMEM's offset 0) and geometry.
    pub base: *mut u8,
    /// The pool as the UMEM sees it.
    pub layout: Layout,
    /// The pool the UMEM is (packets from it are sent by address).
    pub pool: Pool,
    /// Whether the kernel runs the socket in zero-copy mode.
    pub zero_copy: bool,
    /// Packets the kernel still held when a half was dropped: freed once the socket
    /// is closed (the kernel can no longer write to them).
    orphans: Mutex<Vec<*mut Mbuf>>,
    /// Our counters.
    pub counters: XskCounters,
}

// SAFETY: `base` is the pool's region (shared memory by design); the orphans are
// owned packets behind a mutex.
unsafe impl Send for Xsk {}
// SAFETY: as above; everything else is immutable or atomic.
unsafe impl Sync for Xsk {}

impl Xsk {
    /// The socket's descriptor.
    pub fn fd(&self) -> &Fd {
        self.fd.as_ref().expect("open until dropped")
    }

    /// The kernel's counters (zeros if they cannot be read).
    pub fn stats(&self) -> libc::xdp_statistics {
        // SAFETY: an all-zero xdp_statistics is valid.
        sys::statistics(self.fd()).unwrap_or(unsafe { std::mem::zeroed() })
    }

    /// The mbuf whose object is `idx`.
    #[inline(always)]
    pub fn mbuf(&self, idx: u32) -> *mut Mbuf {
        // SAFETY: `idx` < layout.count (checked by the layout), so the object lies in
        // the region.
        unsafe { self.base.add(idx as usize * self.layout.stride as usize).cast::<Mbuf>() }
    }

    /// Region offset of `p`, a pointer into the region.
    #[inline(always)]
    pub fn offset(&self, p: *const u8) -> u64 {
        (p as usize).wrapping_sub(self.base as usize) as u64
    }

    fn orphan(&self, pkts: impl IntoIterator<Item = *mut Mbuf>) {
        self.orphans.lock().unwrap_or_else(|e| e.into_inner()).extend(pkts);
    }
}

impl Drop for Xsk {
    fn drop(&mut self) {
        // Out of the map first (no frame is redirected to the socket any more), then
        // closed (the kernel waits for what is in flight): only then are the
        // buffers it held ours again.
        let _ = sys::xskmap_clear(&self.map, self.queue);
        drop(self.fd.take());
        let left = std::mem::take(&mut *self.orphans.lock().unwrap_or_else(|e| e.into_inner()));
        for c in left.chunks(64) {
            // SAFETY: packets no one else holds (the kernel let them go above).
            unsafe { free_bulk(c) };
        }
    }
}

/// The RX half: the RX ring and the fill ring.
pub struct RxSide {
    pub xsk: Arc<Xsk>,
    pub rx: Ring<libc::xdp_desc>,
    pub fill: Ring<u64>,
    pub posted: Posted,
}

impl Drop for RxSide {
    fn drop(&mut self) {
        let left: Vec<*mut Mbuf> = self.posted.drain().into_iter().map(|i| self.xsk.mbuf(i)).collect();
        self.xsk.orphan(left);
    }
}

/// The TX half: the TX ring, the completion ring, and the packets sent and not yet
/// completed, oldest first, with the address each was sent at.
pub struct TxSide {
    pub xsk: Arc<Xsk>,
    pub tx: Ring<libc::xdp_desc>,
    pub comp: Ring<u64>,
    pub held: std::collections::VecDeque<(*mut Mbuf, u64)>,
    /// Whether the kernel was last seen with frames still to send (a kick answered
    /// EAGAIN): the next burst or cleanup kicks again even with nothing new.
    pub unsent: bool,
}

// SAFETY: the held packets are owned by the half, which one thread uses at a time.
unsafe impl Send for TxSide {}
// SAFETY: as above.
unsafe impl Send for RxSide {}

impl Drop for TxSide {
    fn drop(&mut self) {
        let left: Vec<*mut Mbuf> = self.held.drain(..).map(|h| h.0).collect();
        self.xsk.orphan(left);
    }
}

/// What a queue pair's socket is set up with.
pub struct Setup<'a> {
    pub map: &'a Arc<Fd>,
    pub ifindex: i32,
    pub queue: u32,
    pub pool: Pool,
    /// Entries of the RX ring; the fill ring has twice as many (as DPDK's), so that
    /// buffers are posted while the RX ring is full of frames not yet taken.
    pub rx_size: u32,
    pub tx_size: u32,
    pub bind_flags: u16,
    pub busy_budget: u32,
}

/// Why a socket could not be set up: the step and the system's error.
pub struct SetupError(pub &'static str, pub std::io::Error);

/// The pool's objects as a UMEM: the stride and header size the host's pools use
/// (each object an mbuf header, then its buffer, 64-byte aligned), checked against
/// the region the pool reports.
pub fn layout_of(pool: &Pool) -> Result<Layout, String> {
    let raw = pool.as_raw();
    // SAFETY: a live host pool (the host keeps it while queues exist).
    let (len, count, buf_len) = unsafe { ((*raw).region_len, (*raw).size, (*raw).buf_len) };
    let hdr = std::mem::size_of::<Mbuf>() as u64;
    let stride = (hdr + u64::from(buf_len)).div_ceil(64) * 64;
    Layout::new(len, stride, count, hdr, u32::from(buf_len)).map_err(|e| e.to_string())
}

/// Create, map and bind the socket of one queue pair and put it in the map: the RX
/// half (its fill ring stocked from the pool) and the TX half.
pub fn open(s: &Setup<'_>) -> Result<(RxSide, TxSide), SetupError> {
    let layout = layout_of(&s.pool).map_err(|m| SetupError("the mempool", std::io::Error::other(m)))?;
    let raw = s.pool.as_raw();
    // SAFETY: a live host pool.
    let base = unsafe { (*raw).region_va };
    let fd = sys::xsk_socket().map_err(|e| SetupError("cannot open the AF_XDP socket", e))?;
    sys::umem_reg(&fd, base, layout.region_len, layout.chunk)
        .map_err(|e| SetupError("cannot register the mempool's memory as the UMEM (XDP_UMEM_REG)", e))?;
    for (opt, n, what) in [
        (libc::XDP_UMEM_FILL_RING, 2 * s.rx_size, "the fill ring"),
        (libc::XDP_UMEM_COMPLETION_RING, s.tx_size, "the completion ring"),
        (libc::XDP_RX_RING, s.rx_size, "the RX ring"),
        (libc::XDP_TX_RING, s.tx_size, "the TX ring"),
    ] {
        sys::ring_size(&fd, opt, n).map_err(|e| SetupError(what, e))?;
    }
    let off = sys::mmap_offsets(&fd).map_err(|e| SetupError("XDP_MMAP_OFFSETS", e))?;
    let map_err = |what| move |e| SetupError(what, e);
    let fill = Ring::<u64>::map(&fd, &off.fr, libc::XDP_UMEM_PGOFF_FILL_RING, 2 * s.rx_size, true)
        .map_err(map_err("cannot map the fill ring"))?;
    let comp = Ring::<u64>::map(&fd, &off.cr, libc::XDP_UMEM_PGOFF_COMPLETION_RING, s.tx_size, false)
        .map_err(map_err("cannot map the completion ring"))?;
    let rx = Ring::<libc::xdp_desc>::map(&fd, &off.rx, libc::XDP_PGOFF_RX_RING as u64, s.rx_size, false)
        .map_err(map_err("cannot map the RX ring"))?;
    let tx = Ring::<libc::xdp_desc>::map(&fd, &off.tx, libc::XDP_PGOFF_TX_RING as u64, s.tx_size, true)
        .map_err(map_err("cannot map the TX ring"))?;
    if s.busy_budget > 0 {
        sys::busy_poll(&fd, s.busy_budget).map_err(map_err("busy polling (SO_PREFER_BUSY_POLL)"))?;
    }
    sys::bind(&fd, s.ifindex, s.queue, s.bind_flags).map_err(map_err("cannot bind the socket to the queue"))?;
    let zero_copy = sys::zero_copy(&fd);
    let xsk = Arc::new(Xsk {
        fd: Some(fd),
        map: s.map.clone(),
        queue: s.queue,
        base,
        layout,
        pool: s.pool,
        zero_copy,
        orphans: Mutex::new(Vec::new()),
        counters: XskCounters::default(),
    });
    let mut rxs = RxSide { xsk: xsk.clone(), rx, fill, posted: Posted::new(layout.count) };
    // Frames arrive only once the socket is in the map; its buffers go first.
    rxs.refill(u32::MAX);
    sys::xskmap_set(s.map, s.queue, xsk.fd()).map_err(map_err("cannot put the socket in the XSKMAP"))?;
    let txs =
        TxSide { xsk, tx, comp, held: std::collections::VecDeque::with_capacity(s.tx_size as usize), unsent: false };
    Ok((rxs, txs))
}

impl RxSide {
    /// Post fresh buffers to the fill ring, up to `max` and what the ring has room
    /// for; returns how many (fewer when the pool runs dry).
    pub fn refill(&mut self, max: u32) -> u32 {
        let room = self.fill.free(self.fill.size()).min(max);
        let mut done = 0;
        let mut batch = [std::ptr::null_mut::<Mbuf>(); 64];
        while done < room {
            let n = ((room - done) as usize).min(batch.len());
            if !self.xsk.pool.alloc_bulk(&mut batch[..n]) {
                break;
            }
            let mut k = 0;
            for &m in &batch[..n] {
                // SAFETY: a fresh packet of the pool; its buffer lies in the region.
                let buf = unsafe { (*m).buf_addr };
                match self.xsk.layout.index_of(self.xsk.offset(buf)) {
                    Some(idx) if self.posted.set(idx) => {
                        self.fill.put(k, self.xsk.layout.fill_addr(idx));
                        k += 1;
                    }
                    _ => {
                        // Not laid out as the UMEM expects (or posted twice): never
                        // handed to the kernel.
                        self.xsk.counters.rx_bad_desc.add(1);
                        // SAFETY: a packet we own and did not post.
                        unsafe { free_bulk(&[m]) };
                    }
                }
            }
            self.fill.submit(k);
            done += n as u32;
        }
        done
    }
}

/// An mbuf as a received frame: `len` bytes at `off` in its buffer, from `port`.
///
/// # Safety
/// `m` is a packet of the pool that the caller owns.
#[inline(always)]
pub unsafe fn received(m: *mut Mbuf, off: u16, len: u32, port: u16) {
    // SAFETY: caller's contract; fields of an owned mbuf header.
    unsafe {
        let h = &mut *m;
        h.data_off = off;
        h.data_len = len as u16;
        h.pkt_len = len;
        h.port = port;
        h.ol_flags = 0;
        h.packet_type = 0;
        h.nb_segs = 1;
        h.next = std::ptr::null_mut();
    }
}
