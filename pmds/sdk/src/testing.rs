//! A host stand-in for a driver's own unit tests: a pool of real mbufs in plain
//! memory ([`TestPool`]) and the bursts the host would pass ([`run_rx`],
//! [`run_tx`]), so a queue's fast path can be tested without loading the plugin.

use crate::abi::{self, Mbuf};
use crate::packet::{Packet, RxBurst, TxBurst};
use crate::pool::Pool;
use crate::{RxQueue, TxQueue};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Mutex;

/// The pool's memory. `head` comes first so that the ABI's `*const Mempool` of an
/// mbuf leads back here.
#[repr(C)]
struct Inner {
    head: abi::Mempool,
    free: Mutex<Vec<usize>>,
    /// `n` mbufs and their buffers, from `Box::into_raw` (freed in `drop`): raw
    /// pointers, because the mbufs are written through pointers the driver holds.
    mbufs: *mut [Mbuf],
    bufs: *mut [u8],
}

impl Drop for Inner {
    fn drop(&mut self) {
        // SAFETY: both came from `Box::into_raw` in `TestPool::new` and no packet
        // is out (`TestPool::drop` keeps the memory otherwise).
        unsafe {
            drop(Box::from_raw(self.mbufs));
            drop(Box::from_raw(self.bufs));
        }
    }
}

impl Inner {
    fn n(&self) -> usize {
        self.mbufs.len()
    }

    fn mbuf(&self, i: usize) -> *mut Mbuf {
        self.mbufs.cast::<Mbuf>().wrapping_add(i)
    }
}

/// A pool of `n` mbufs of `buf_len` bytes each, allocated and freed through the same
/// ABI calls a host pool answers. Dropping it with packets still out leaks its
/// memory instead of freeing it under them.
pub struct TestPool(Option<Box<Inner>>);

static OPS: abi::MempoolOps = abi::MempoolOps {
    size: std::mem::size_of::<abi::MempoolOps>() as u32,
    reserved: 0,
    alloc_bulk: Some(alloc_bulk),
    free_bulk: Some(free_bulk),
};

impl TestPool {
    /// A pool of `n` mbufs of `buf_len` bytes, `headroom` of them reserved.
    pub fn new(n: usize, buf_len: u16, headroom: u16) -> Self {
        assert!(headroom < buf_len, "the headroom must leave data room");
        let bufs = Box::into_raw(vec![0u8; n * usize::from(buf_len)].into_boxed_slice());
        let base = bufs.cast::<u8>();
        let mbufs: Box<[Mbuf]> = (0..n)
            .map(|i| Mbuf {
                // SAFETY: `i * buf_len` is inside `bufs` (n buffers of buf_len).
                buf_addr: unsafe { base.add(i * usize::from(buf_len)) },
                buf_iova: 0,
                data_off: headroom,
                refcnt: AtomicU16::new(0),
                nb_segs: 1,
                port: u16::MAX,
                ol_flags: 0,
                packet_type: 0,
                pkt_len: 0,
                data_len: 0,
                vlan_tci: 0,
                rss_hash: 0,
                buf_len,
                l2_len: 0,
                l4_len: 0,
                l3_len: 0,
                tso_segsz: 0,
                pool: std::ptr::null(),
                next: std::ptr::null_mut(),
                aggr_segs: 0,
                reserved: [0; 3],
                timestamp: 0,
                private: [0; abi::MBUF_PRIV_WORDS],
                ext_shared: std::ptr::null_mut(),
            })
            .collect();
        let mbufs = Box::into_raw(mbufs);
        let inner = Box::new(Inner {
            head: abi::Mempool {
                ops: &OPS,
                name: c"test".as_ptr(),
                buf_len,
                headroom,
                size: n as u32,
                region_va: base,
                region_iova: 0,
                region_len: (n * usize::from(buf_len)) as u64,
            },
            free: Mutex::new((0..n).rev().collect()),
            mbufs,
            bufs,
        });
        let head: *const abi::Mempool = &inner.head;
        for i in 0..n {
            // SAFETY: mbuf `i` of the fresh array, not yet shared.
            unsafe { (*inner.mbuf(i)).pool = head };
        }
        Self(Some(inner))
    }

    fn inner(&self) -> &Inner {
        self.0.as_ref().expect("pool alive")
    }

    /// The pool as a driver's queue setup receives it.
    pub fn pool(&self) -> Pool {
        Pool::from_host(&self.inner().head, alloc_bulk)
    }

    /// Mbufs currently allocated.
    pub fn in_use(&self) -> usize {
        let i = self.inner();
        i.n() - i.free.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// A one-segment packet holding `bytes` (panics if the pool is empty or the
    /// bytes do not fit).
    pub fn packet(&self, bytes: &[u8]) -> Packet {
        let mut slot = [std::ptr::null_mut(); 1];
        let mut burst = RxBurst::new(&mut slot, 0);
        burst.push_bytes(&self.pool(), bytes).expect("room in the test pool");
        // SAFETY: the burst received one packet into `slot`, which we now own.
        unsafe { Packet::from_raw(slot[0]) }
    }
}

impl Drop for TestPool {
    fn drop(&mut self) {
        if self.in_use() != 0 {
            // Packets still point into this memory: keep it.
            std::mem::forget(self.0.take());
        }
    }
}

/// The pool an mbuf belongs to.
///
/// # Safety
/// `m` is an mbuf of a live `TestPool`.
unsafe fn owner<'a>(m: *const Mbuf) -> &'a Inner {
    // SAFETY: `Inner` is repr(C) with the `Mempool` first, and `pool` points at it.
    unsafe { &*(*m).pool.cast::<Inner>() }
}

unsafe extern "C" fn alloc_bulk(mp: *const abi::Mempool, out: *mut *mut Mbuf, n: u32) -> i32 {
    // SAFETY: `mp` is the head of a live `Inner` (only `TestPool::pool` hands it out).
    let inner = unsafe { &*mp.cast::<Inner>() };
    let mut free = inner.free.lock().unwrap_or_else(|e| e.into_inner());
    if free.len() < n as usize {
        return -abi::errno::ENOBUFS;
    }
    for k in 0..n as usize {
        let i = free.pop().unwrap_or_default();
        let m = inner.mbuf(i);
        // SAFETY: mbuf `i` was free, so nobody else references it; `out` has room
        // for `n` pointers (ABI contract).
        unsafe {
            let r = &mut *m;
            r.refcnt.store(1, Ordering::Relaxed);
            r.data_off = inner.head.headroom;
            r.nb_segs = 1;
            r.pkt_len = 0;
            r.data_len = 0;
            r.ol_flags = 0;
            r.next = std::ptr::null_mut();
            *out.add(k) = m;
        }
    }
    0
}

unsafe extern "C" fn free_bulk(pkts: *const *mut Mbuf, n: u32) {
    for k in 0..n as usize {
        // SAFETY: `pkts` holds `n` packets of live test pools (ABI contract).
        let mut seg = unsafe { *pkts.add(k) };
        while !seg.is_null() {
            // SAFETY: a valid segment of a live test pool; once its count drops to 0
            // it is ours alone until it goes back to the free list.
            unsafe {
                let next = (*seg).next;
                if (*seg).refcnt.fetch_sub(1, Ordering::AcqRel) == 1 {
                    let inner = owner(seg);
                    let i = seg.offset_from(inner.mbuf(0)) as usize;
                    (*seg).next = std::ptr::null_mut();
                    inner.free.lock().unwrap_or_else(|e| e.into_inner()).push(i);
                }
                seg = next;
            }
        }
    }
}

/// Call `q.rx_burst` as the host would, with room for `room` packets and port id
/// `port`; returns what it received.
pub fn run_rx(q: &mut impl RxQueue, room: usize, port: u16) -> Vec<Packet> {
    let mut slots = vec![std::ptr::null_mut(); room];
    let mut burst = RxBurst::new(&mut slots, port);
    q.rx_burst(&mut burst);
    let n = burst.len();
    // SAFETY: the first `n` slots hold packets the burst received, now ours.
    slots[..n].iter().map(|&m| unsafe { Packet::from_raw(m) }).collect()
}

/// Offer `pkts` to `q.tx_burst` as the host would; returns those not taken.
pub fn run_tx(q: &mut impl TxQueue, pkts: Vec<Packet>) -> Vec<Packet> {
    let mut raw: Vec<*mut Mbuf> = pkts.into_iter().map(Packet::into_raw).collect();
    // SAFETY: each pointer is a packet we own and hand over for the driver to take.
    let mut burst = unsafe { TxBurst::new(&mut raw) };
    q.tx_burst(&mut burst);
    let taken = burst.taken();
    // SAFETY: the untaken rest is still ours.
    raw[taken..].iter().map(|&m| unsafe { Packet::from_raw(m) }).collect()
}

/// A blocking eventfd whose counter is at its maximum: a write(2) of 1 would wait.
#[cfg(target_os = "linux")]
pub fn saturated_eventfd() -> std::os::fd::OwnedFd {
    // SAFETY: plain eventfd(2), blocking.
    let fd: std::os::fd::OwnedFd =
        unsafe { std::os::fd::FromRawFd::from_raw_fd(crate::ipc::cvt(libc::eventfd(0, libc::EFD_CLOEXEC)).unwrap()) };
    let max = u64::MAX - 1;
    // SAFETY: writes 8 bytes from a live u64.
    assert_eq!(unsafe { libc::write(std::os::fd::AsRawFd::as_raw_fd(&fd), (&max as *const u64).cast(), 8) }, 8);
    fd
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `alloc_len` sets both lengths and the port, and clears the tag a reused mbuf
    /// held (the test pool does not reset what it hands out).
    #[test]
    fn alloc_len_sets_the_lengths_and_port_and_clears_the_tag() {
        let tp = TestPool::new(8, 2048, 128);
        let mut slots = [std::ptr::null_mut(); 8];
        let mut b = RxBurst::new(&mut slots, 1);
        assert_eq!(b.alloc(&tp.pool(), 8).map(|f| f.len()), Some(8));
        for &m in &slots {
            // SAFETY: a packet the burst received, ours alone; plain field writes.
            unsafe { ((*m).vlan_tci, (*m).data_len, (*m).pkt_len, (*m).port) = (0xabcd, 9, 9, 5) };
        }
        // SAFETY: the eight packets the burst received, taken over and freed.
        drop(slots.iter().map(|&m| unsafe { Packet::from_raw(m) }).collect::<Vec<_>>());
        for (room, len) in [(7, 1514u16), (1, 60), (4, 2048 - 128)] {
            let mut slots = [std::ptr::null_mut(); 8];
            let mut b = RxBurst::new(&mut slots, 3);
            assert_eq!(b.alloc_len(&tp.pool(), room, len).map(|f| f.len()), Some(room));
            // SAFETY: the packets the burst received, taken over (freed at the end).
            let got: Vec<Packet> = slots[..room].iter().map(|&m| unsafe { Packet::from_raw(m) }).collect();
            for p in &got {
                let m = p.mbuf();
                assert_eq!((m.pkt_len, m.data_len, m.vlan_tci, m.port), (u32::from(len), len, 0, 3));
            }
        }
        assert_eq!(tp.in_use(), 0);
    }

    #[test]
    fn packets_allocate_chain_and_return() {
        let tp = TestPool::new(8, 128, 32);
        let p = tp.packet(&[7u8; 60]);
        assert_eq!((p.len(), p.data().len(), tp.in_use()), (60, 60, 1));
        let mut slots = [std::ptr::null_mut(); 4];
        let mut b = RxBurst::new(&mut slots, 9);
        let long: Vec<u8> = (0..250u8).collect();
        let c = b.push_bytes(&tp.pool(), &long).unwrap();
        assert_eq!((c.len(), c.mbuf().nb_segs), (250, 3));
        let mut back = Vec::new();
        c.copy_to(&mut back);
        assert_eq!(back, long);
        assert_eq!(c.segments().map(<[u8]>::len).collect::<Vec<_>>(), vec![96, 96, 58]);
        assert_eq!(tp.in_use(), 4);
        let fresh = b.alloc(&tp.pool(), 3).unwrap();
        assert_eq!(fresh.len(), 3);
        assert!(b.alloc(&tp.pool(), 1).is_none(), "the burst is full");
        assert_eq!(b.len(), 4);
        drop(p);
        // Packets in a burst that is dropped are not freed: the host owns them.
        // SAFETY: the burst received these four; we take them over as the host would.
        let got: Vec<Packet> = slots.iter().map(|&m| unsafe { Packet::from_raw(m) }).collect();
        assert_eq!(tp.in_use(), 6);
        drop(got);
        assert_eq!(tp.in_use(), 0);
    }
}
