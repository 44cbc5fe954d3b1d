//! The queues: RX takes frames from the RX ring as mbufs (no copy: the kernel wrote
//! them into the pool's buffers) and refills the fill ring; TX posts packets of the
//! pool by address (others are copied into a buffer of the pool first) and frees them
//! when their address comes back on the completion ring.

use crate::sys;
use crate::xsk::{received, RxSide, TxSide};
use ironpath_pmd_sdk::abi::{self, Mbuf};
use ironpath_pmd_sdk::{free_bulk, Packet, QueueStats, RxBurst, RxQueue, TxBurst, TxQueue};
use std::sync::{Arc, Mutex};

/// A receive queue.
pub struct XdpRx {
    pub(crate) side: RxSide,
    pub(crate) stats: Arc<QueueStats>,
    pub(crate) busy: bool,
}

impl RxQueue for XdpRx {
    /// The XSK socket: readable while its RX ring holds descriptors.
    fn wake_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.side.xsk.fd().raw())
    }

    fn rx_burst(&mut self, burst: &mut RxBurst<'_>) {
        let port = burst.port_id();
        let s = &mut self.side;
        // SAFETY: we write packets we own into the free slots and declare them below.
        let slots = unsafe { burst.raw_rest() };
        let n = s.rx.ready(slots.len() as u32);
        let (mut k, mut bytes) = (0usize, 0u64);
        for i in 0..n {
            let d = s.rx.get(i);
            match s.xsk.layout.rx_desc(d.addr, d.len) {
                Some((idx, off)) if s.posted.take(idx) => {
                    let m = s.xsk.mbuf(idx);
                    // SAFETY: a buffer we posted and the kernel filled: ours again.
                    unsafe { received(m, off, d.len, port) };
                    slots[k] = m;
                    k += 1;
                    bytes += u64::from(d.len);
                }
                _ => s.xsk.counters.rx_bad_desc.add(1),
            }
        }
        if n > 0 {
            s.rx.release(n);
        }
        // SAFETY: the first `k` slots hold packets we gave up.
        unsafe { burst.set_filled(k) };
        self.stats.packets.add(k as u64);
        self.stats.bytes.add(bytes);
        // Keep the fill ring full: what was taken, and what an empty pool left short.
        let want = s.fill.free(s.fill.size());
        if want > 0 && s.refill(want) < want {
            self.stats.nombuf.add(1);
        }
        if (n == 0 && self.busy) || s.fill.needs_wakeup() {
            sys::wake_rx(s.xsk.fd());
        }
    }
}

/// A transmit queue. Its half of the socket comes from the RX queue of the same
/// index (the socket is made there, with the pool as its UMEM).
pub struct XdpTx {
    pub(crate) slot: Arc<Mutex<Option<TxSide>>>,
    pub(crate) side: Option<TxSide>,
    pub(crate) stats: Arc<QueueStats>,
}

impl XdpTx {
    fn side(&mut self) -> Option<&mut TxSide> {
        if self.side.is_none() {
            self.side = self.slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        }
        self.side.as_mut()
    }
}

/// Most kicks per burst: copy mode sends 32 frames per call.
const MAX_KICKS: u32 = 8;

impl TxSide {
    /// Free the packets whose addresses came back, up to `max` (0 = all).
    fn reclaim(&mut self, max: usize) -> usize {
        let want = if max == 0 { self.held.len() } else { max.min(self.held.len()) };
        let n = self.comp.ready(want as u32);
        let mut done = [std::ptr::null_mut::<Mbuf>(); 64];
        let mut nd = 0;
        for i in 0..n {
            let addr = self.comp.get(i);
            let Some((m, sent_at)) = self.held.pop_front() else { break };
            if addr != sent_at {
                self.xsk.counters.tx_bad_completion.add(1);
            }
            done[nd] = m;
            nd += 1;
            if nd == done.len() {
                // SAFETY: packets the kernel is done with, ours.
                unsafe { free_bulk(&done) };
                nd = 0;
            }
        }
        if nd > 0 {
            // SAFETY: as above.
            unsafe { free_bulk(&done[..nd]) };
        }
        if n > 0 {
            self.comp.release(n);
        }
        n as usize
    }

    /// Have the kernel send what the TX ring holds: one call, again only while the
    /// kernel says it has more (copy mode sends 32 frames a call and then answers
    /// EAGAIN). The ring's consumer index cannot tell: the kernel publishes it
    /// lazily, at its next look at the ring, so a second call "to be sure" would find
    /// the ring empty every time (the socket's `tx_ring_empty` counts such calls).
    fn kick(&mut self) {
        if self.xsk.zero_copy && !self.tx.needs_wakeup() {
            return;
        }
        self.unsent = true;
        for _ in 0..MAX_KICKS {
            match sys::kick_tx(self.xsk.fd()) {
                Ok(true) | Err(_) => {
                    self.unsent = false;
                    break;
                }
                // More to send, or out of completion room: free what completed, go on.
                Ok(false) => {
                    self.reclaim(0);
                }
            }
        }
    }

    /// Post packets from the front of `pkts`; returns how many were taken (posted,
    /// copied and posted, or dropped) and the bytes and drops among them.
    fn post(&mut self, pkts: &[Packet]) -> (usize, u64, u64) {
        let room = self.tx.free(pkts.len() as u32) as usize;
        let (mut k, mut bytes, mut dropped) = (0u32, 0u64, 0u64);
        let mut taken = 0;
        let pool_raw = self.xsk.pool.as_raw();
        for p in pkts {
            if k as usize == room {
                break;
            }
            let m = p.as_ptr();
            let mb = p.mbuf();
            let len = p.len();
            let direct = if std::ptr::eq(mb.pool, pool_raw)
                && mb.nb_segs == 1
                && mb.ol_flags & (abi::IND_ATTACHED | abi::EXT_ATTACHED) == 0
            {
                // SAFETY: the packet's data lies in its buffer, in the region.
                let at = self.xsk.offset(unsafe { mb.buf_addr.add(usize::from(mb.data_off)) });
                self.xsk.layout.tx_addr(at, len)
            } else {
                None
            };
            let (m, addr) = match direct {
                Some(a) => (m, a),
                None => match self.copy(p) {
                    Some(x) => {
                        // The copy is held until it completes; the original goes.
                        // SAFETY: a packet we take.
                        unsafe { free_bulk(&[m]) };
                        x
                    }
                    None => {
                        // SAFETY: a packet we take and drop.
                        unsafe { free_bulk(&[m]) };
                        dropped += 1;
                        taken += 1;
                        continue;
                    }
                },
            };
            self.tx.put(k, libc::xdp_desc { addr, len, options: 0 });
            self.held.push_back((m, addr));
            k += 1;
            taken += 1;
            bytes += u64::from(len);
        }
        if k > 0 {
            self.tx.submit(k);
        }
        (taken, bytes, dropped)
    }

    /// A copy of `p` in a fresh buffer of the pool, and the address to send it at;
    /// `None` if it does not fit a chunk or the pool is empty (the caller drops the
    /// packet). `p` stays the caller's either way.
    fn copy(&mut self, p: &Packet) -> Option<(*mut Mbuf, u64)> {
        let len = p.len();
        if len > self.xsk.layout.chunk {
            self.xsk.counters.tx_too_long.add(1);
            return None;
        }
        let mut one = [std::ptr::null_mut::<Mbuf>(); 1];
        if !self.xsk.pool.alloc_bulk(&mut one) {
            return None;
        }
        let c = one[0];
        // SAFETY: a fresh packet of the pool: write the segments into its buffer from
        // its headroom on (len <= chunk <= buf_len; the headroom is moved down if the
        // frame would run past the buffer).
        let at = unsafe {
            let h = &mut *c;
            let start = usize::from(h.data_off).min(usize::from(h.buf_len) - len as usize);
            h.data_off = start as u16;
            let mut off = 0;
            for s in p.segments() {
                std::ptr::copy_nonoverlapping(s.as_ptr(), h.buf_addr.add(start + off), s.len());
                off += s.len();
            }
            h.data_len = len as u16;
            h.pkt_len = len;
            self.xsk.offset(h.buf_addr.add(start))
        };
        self.xsk.counters.tx_copied.add(1);
        match self.xsk.layout.tx_addr(at, len) {
            Some(a) => Some((c, a)),
            None => {
                // SAFETY: our fresh copy, never posted.
                unsafe { free_bulk(&[c]) };
                None
            }
        }
    }
}

impl TxQueue for XdpTx {
    const HOLDS_PACKETS: bool = true;

    fn tx_burst(&mut self, burst: &mut TxBurst<'_>) {
        let stats = self.stats.clone();
        let Some(s) = self.side() else {
            // No socket: the RX queue of this index was never set up.
            stats.errors.add(burst.len() as u64);
            burst.free_all();
            return;
        };
        // What completed goes back to the pool every burst, while it is still warm in
        // the cache (and the completion ring never fills).
        if !s.held.is_empty() {
            s.reclaim(0);
        }
        // SAFETY: `post` takes the first `taken` packets (holds or frees them),
        // declared taken just below.
        let (taken, bytes, dropped) = s.post(unsafe { burst.packets_to_post() });
        // SAFETY: as above.
        unsafe { burst.set_taken(taken) };
        if taken > 0 || s.unsent {
            s.kick();
        }
        stats.packets.add(taken as u64 - dropped);
        stats.bytes.add(bytes);
        stats.errors.add(dropped);
    }

    fn tx_done_cleanup(&mut self, max: usize) -> usize {
        let Some(s) = self.side() else { return 0 };
        if s.unsent {
            s.kick();
        }
        s.reclaim(max)
    }

    fn tx_inflight(&self) -> usize {
        self.side.as_ref().map_or(0, |s| s.held.len())
    }
}
