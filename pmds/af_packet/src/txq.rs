//! The transmit queue: a V2 frame ring whose frames hold packets until the kernel
//! hands them back, and the TSO socket for packets the kernel segments.

use crate::sys::{self, Fd, Mmap};
use ironpath_pmd_sdk::abi::{self, Mbuf};
use ironpath_pmd_sdk::vnet::VnetHdr;
use ironpath_pmd_sdk::{free_bulk, Counter, Packet, QueueStats, TxBurst, TxQueue};
use std::sync::Arc;

/// Transmit queue.
pub struct AfTx {
    pub(crate) ring: Mmap,
    pub(crate) fd: Fd,
    pub(crate) framesz: usize,
    pub(crate) nframes: usize,
    pub(crate) head: usize,
    /// Oldest frame still in flight (== head when none).
    pub(crate) tail: usize,
    /// Frames in flight (sent, not yet reclaimed).
    pub(crate) inflight: usize,
    /// The packet of each in-flight frame (NULL for one dropped as too long).
    pub(crate) held: Vec<*mut Mbuf>,
    pub(crate) free_thresh: usize,
    /// The `PACKET_VNET_HDR` socket for TSO packets.
    pub(crate) gso: Option<Fd>,
    /// Whether `gso` bypasses the qdisc layer (see `send_gso`).
    pub(crate) gso_bypass: bool,
    pub(crate) stats: Arc<QueueStats>,
    pub(crate) offloads: Arc<TxOffloads>,
}

/// Offload events of a queue's transmit side (xstats).
#[derive(Default)]
pub(crate) struct TxOffloads {
    /// Packets sent whole for the kernel to segment (TSO, forwarded GSO frames).
    pub(crate) gso: Counter,
    /// Packets whose checksum the kernel completed (`NEEDS_CSUM`).
    pub(crate) csum: Counter,
    /// Times the TSO socket left the qdisc bypass because the device could not take a
    /// packet whole (0 or 1 per queue).
    pub(crate) gso_qdisc: Counter,
}

// SAFETY: the held packets are owned by the queue, which one thread uses at a time.
unsafe impl Send for AfTx {}

/// The virtio_net_hdr of a TX ring frame holding `m` (`len` bytes): the checksum
/// offload `m` asks for, no segmentation (TSO packets go through the TSO socket), and
/// `hdr_len` = the whole packet, so that the kernel copies it into the skb's linear
/// part. Without it the skb's data are page fragments of the ring, which a veth (or
/// anything that orphans or clones the skb) must copy into freshly allocated pages
/// first (`skb_copy_ubufs`): a page allocation per packet.
fn ring_vnet_hdr(m: &Mbuf, len: usize) -> VnetHdr {
    let mut h = VnetHdr::from_mbuf(m);
    h.gso_type = 0;
    h.gso_size = 0;
    h.hdr_len = len.min(usize::from(u16::MAX)) as u16;
    h
}

/// Whether `m` goes out whole for the kernel to segment: a TSO packet (`TX_TCP_SEG`),
/// or a GSO frame received from the kernel (or a TAP) and forwarded as it came
/// (`RX_AGGREGATED` with its checksum still partial; an aggregate made here, whose
/// checksums are complete, is not one: a `gso` node splits those, or `rx_aggregate`
/// with `tso: true` makes them TSO packets).
#[inline(always)]
fn needs_gso(m: &Mbuf) -> bool {
    let f = m.ol_flags;
    f & abi::TX_TCP_SEG != 0
        || (f & (abi::RX_AGGREGATED | abi::RX_L4_CKSUM_NONE) == abi::RX_AGGREGATED | abi::RX_L4_CKSUM_NONE
            && m.tso_segsz > 0)
}

/// Most segments of a TSO packet (a 64 KiB payload in 2 KiB mbufs, its headers).
const MAX_GSO_SEGS: usize = 64;

impl AfTx {
    /// Send TSO packet `m` whole with a `virtio_net_hdr` through the GSO socket and
    /// free it (the kernel copied it). `Ok(true)` sent, `Ok(false)` dropped (refused
    /// or too many segments, counted by the caller), `Err` the socket is full: `m`
    /// is still the caller's.
    fn send_gso(&mut self, p: &Packet) -> Result<bool, ()> {
        let Some(fd) = self.gso.as_ref() else { return Ok(false) };
        let hdr = VnetHdr::from_mbuf(p.mbuf()).to_bytes();
        let mut iov = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; MAX_GSO_SEGS + 1];
        iov[0] = libc::iovec { iov_base: hdr.as_ptr() as *mut libc::c_void, iov_len: hdr.len() };
        let mut n = 1;
        let mut fits = true;
        for s in p.segments().filter(|s| !s.is_empty()) {
            if n == iov.len() {
                fits = false;
                break;
            }
            iov[n] = libc::iovec { iov_base: s.as_ptr() as *mut libc::c_void, iov_len: s.len() };
            n += 1;
        }
        let ok = if fits {
            let mut r = sys::send_iov(fd, &iov[..n]);
            if self.gso_bypass && matches!(&r, Err(e) if e.raw_os_error() == Some(libc::ENOBUFS)) {
                // The bypass (`dev_direct_xmit`) drops a packet the kernel had to
                // segment in software (a device without TSO for it, e.g. `ethtool -K
                // IF tso off`): from now on this queue's TSO packets go through the
                // qdisc layer, which segments them. Once per queue; the packet is
                // sent again.
                if sys::set_int(fd, libc::PACKET_QDISC_BYPASS, 0).is_ok() {
                    self.gso_bypass = false;
                    self.offloads.gso_qdisc.add(1);
                    r = sys::send_iov(fd, &iov[..n]);
                }
            }
            match r {
                Ok(_) => true,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::ENOBUFS)) => return Err(()),
                Err(_) => false,
            }
        } else {
            false
        };
        // SAFETY: sent (copied by the kernel) or dropped: either way the caller takes
        // the packet, and it is ours to free.
        unsafe { free_bulk(&[p.as_ptr()]) };
        Ok(ok)
    }

    /// Free the packets of frames the kernel has handed back, oldest first, up to
    /// `max` (0 = all); returns how many frames were reclaimed.
    fn reclaim(&mut self, max: usize) -> usize {
        let mut done: [*mut Mbuf; 64] = [std::ptr::null_mut(); 64];
        let mut nd = 0;
        let mut n = 0;
        while self.inflight > 0 && (max == 0 || n < max) {
            // SAFETY: tail < nframes; the ring maps nframes * framesz bytes.
            let f = unsafe { self.ring.ptr().add(self.tail * self.framesz) };
            // SAFETY: the frame's status word is shared with the kernel.
            let st = unsafe { sys::load_acquire_u32(f.add(sys::H2_STATUS)) };
            if st != libc::TP_STATUS_AVAILABLE && st != libc::TP_STATUS_WRONG_FORMAT {
                break; // still queued or being sent
            }
            if st == libc::TP_STATUS_WRONG_FORMAT {
                self.stats.errors.add(1);
                // SAFETY: as above; hand the frame back as available.
                unsafe { sys::store_release_u32(f.add(sys::H2_STATUS), libc::TP_STATUS_AVAILABLE) };
            }
            let m = std::mem::replace(&mut self.held[self.tail], std::ptr::null_mut());
            if !m.is_null() {
                done[nd] = m;
                nd += 1;
                if nd == done.len() {
                    // SAFETY: packets this queue owned, taken out of `held`.
                    unsafe { free_bulk(&done) };
                    nd = 0;
                }
            }
            self.tail = (self.tail + 1) % self.nframes;
            self.inflight -= 1;
            n += 1;
        }
        if nd > 0 {
            // SAFETY: as above.
            unsafe { free_bulk(&done[..nd]) };
        }
        n
    }
}

impl Drop for AfTx {
    fn drop(&mut self) {
        let left: Vec<*mut Mbuf> = self.held.iter().copied().filter(|m| !m.is_null()).collect();
        if !left.is_empty() {
            // SAFETY: packets this queue still owns; the ring goes away with it.
            unsafe { free_bulk(&left) };
        }
    }
}

impl TxQueue for AfTx {
    const HOLDS_PACKETS: bool = true;

    fn tx_burst(&mut self, burst: &mut TxBurst<'_>) {
        // SAFETY: `send` takes the first `sent` packets (it holds them in `held` or
        // frees them), declared taken just below.
        let sent = self.send(unsafe { burst.packets_to_post() });
        // SAFETY: as above.
        unsafe { burst.set_taken(sent) };
    }

    fn tx_done_cleanup(&mut self, max: usize) -> usize {
        self.reclaim(max)
    }

    fn tx_inflight(&self) -> usize {
        self.inflight
    }
}

impl AfTx {
    /// Send from the front of `pkts`; returns how many were taken (held in ring
    /// frames, sent through the GSO socket, or dropped and freed).
    fn send(&mut self, pkts: &[Packet]) -> usize {
        if self.inflight >= self.free_thresh || self.inflight + pkts.len() > self.nframes {
            self.reclaim(0);
        }
        // Each frame holds a virtio_net_hdr, then the packet.
        let data = sys::TX_DATA_OFF + VnetHdr::LEN;
        let room = self.framesz - data;
        let mut sent = 0;
        let mut bytes = 0u64;
        let mut dropped = 0u64;
        let mut too_long: [*mut Mbuf; 8] = [std::ptr::null_mut(); 8];
        let mut ntl = 0;
        let mut queued = false; // ring frames marked since the last kick
        for p in pkts {
            if self.inflight == self.nframes {
                break; // ring full: the rest stays with the caller
            }
            let m = p.as_ptr();
            let (len, tso) = (p.len() as usize, needs_gso(p.mbuf()));
            if tso && self.gso.is_some() {
                if queued {
                    sys::kick(&self.fd); // what the ring holds goes first
                    queued = false;
                }
                match self.send_gso(p) {
                    Ok(true) => {
                        bytes += len as u64;
                        sent += 1;
                        self.offloads.gso.add(1);
                    }
                    Ok(false) => {
                        dropped += 1;
                        sent += 1;
                    }
                    Err(()) => break, // the socket is full: the rest stays with the caller
                }
                continue;
            }
            if len > room {
                dropped += 1;
                if ntl == too_long.len() {
                    // SAFETY: packets we took and will not send.
                    unsafe { free_bulk(&too_long) };
                    ntl = 0;
                }
                too_long[ntl] = m;
                ntl += 1;
                sent += 1;
                continue;
            }
            // SAFETY: head < nframes; the ring maps nframes * framesz bytes.
            let f = unsafe { self.ring.ptr().add(self.head * self.framesz) };
            let vh = ring_vnet_hdr(p.mbuf(), len);
            if vh.flags & ironpath_pmd_sdk::vnet::F_NEEDS_CSUM != 0 {
                self.offloads.csum.add(1);
            }
            let hdr = vh.to_bytes();
            // SAFETY: copy the header and each segment into the frame's data area
            // (VnetHdr::LEN + len <= framesz - TX_DATA_OFF); the frame is ours (in
            // flight frames are counted, this one is past them).
            unsafe {
                std::ptr::copy_nonoverlapping(hdr.as_ptr(), f.add(sys::TX_DATA_OFF), hdr.len());
                let mut off = 0;
                for s in p.segments() {
                    if off >= len {
                        break;
                    }
                    let k = s.len().min(len - off);
                    std::ptr::copy_nonoverlapping(s.as_ptr(), f.add(data + off), k);
                    off += k;
                }
                std::ptr::write_volatile(f.add(sys::H2_LEN).cast::<u32>(), (VnetHdr::LEN + len) as u32);
                sys::store_release_u32(f.add(sys::H2_STATUS), libc::TP_STATUS_SEND_REQUEST);
            }
            self.held[self.head] = m;
            self.inflight += 1;
            bytes += len as u64;
            self.head = (self.head + 1) % self.nframes;
            sent += 1;
            queued = true;
        }
        if ntl > 0 {
            // SAFETY: as above.
            unsafe { free_bulk(&too_long[..ntl]) };
        }
        if queued {
            // One kick per burst; the kernel sends every SEND_REQUEST frame.
            sys::kick(&self.fd);
        }
        self.stats.packets.add(sent as u64 - dropped);
        self.stats.bytes.add(bytes);
        self.stats.errors.add(dropped);
        sent
    }
}
