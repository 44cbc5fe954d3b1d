//! The receive queue: a V3 block ring (the default) or a V2 frame ring, each frame
//! copied into mbufs (`rx.rs` keeps the kernel's offload state).

use crate::rx;
use crate::sys::{self, Fd, Mmap};
use ironpath_pmd_sdk::abi::{self, Mbuf};
use ironpath_pmd_sdk::tpacket;
use ironpath_pmd_sdk::vnet::VnetHdr;
use ironpath_pmd_sdk::{free_bulk, Pool, QueueStats, RxBurst, RxQueue};
use std::sync::Arc;

/// Receive queue.
pub struct AfRx {
    /// Kept open while the queue lives (the device holds another reference for its
    /// drop counter); the ring is unmapped before the socket closes (field order).
    pub(crate) ring: Mmap,
    pub(crate) _fd: Arc<Fd>,
    pub(crate) blocksz: usize,
    pub(crate) nblocks: usize,
    pub(crate) block: usize,
    /// Packets left in the current block and the offset of the next one.
    pub(crate) left: u32,
    pub(crate) next_off: usize,
    /// The burst function of the ring version (`rx_blocks` or `rx_frames`), chosen
    /// at queue setup.
    pub(crate) recv: fn(&mut AfRx, &mut [*mut Mbuf], u16) -> usize,
    /// `rx_ring=frames`: the ring is `nframes` V2 frames of `framesz` bytes (the
    /// block fields are unused), `frame` the next one to look at.
    pub(crate) framesz: usize,
    pub(crate) nframes: usize,
    pub(crate) frame: usize,
    pub(crate) pool: Pool,
    pub(crate) stats: Arc<QueueStats>,
    /// The socket has `PACKET_VNET_HDR`: a `virtio_net_hdr` precedes each frame.
    pub(crate) vnet: bool,
    /// `vlan_strip=1`: a tag the kernel took off stays in `vlan_tci`.
    pub(crate) vlan_strip: bool,
    pub(crate) offloads: Arc<rx::RxOffloads>,
}

impl RxQueue for AfRx {
    fn rx_burst(&mut self, burst: &mut RxBurst<'_>) {
        let port = burst.port_id();
        // SAFETY: the ring functions fill the front of the rest with packets they
        // give up and return how many.
        unsafe {
            let n = (self.recv)(self, burst.raw_rest(), port);
            burst.set_filled(n);
        }
    }

    /// The packet socket: readable while its ring holds a frame or a block the
    /// kernel handed over.
    fn wake_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self._fd.raw())
    }
}

impl AfRx {
    /// `rx_burst` on a V3 block ring.
    pub(crate) fn rx_blocks(&mut self, pkts: &mut [*mut Mbuf], port: u16) -> usize {
        let mut n = 0;
        while n < pkts.len() {
            if self.left == 0 && !self.open_block() {
                break;
            }
            // Allocate what this block can still give, up to the room left.
            let want = (self.left as usize).min(pkts.len() - n);
            if !self.pool.alloc_bulk(&mut pkts[n..n + want]) {
                self.stats.nombuf.add(want as u64);
                break;
            }
            let got = self.fill(&mut pkts[n..n + want], port);
            n += got;
            if self.left == 0 {
                self.close_block();
            }
        }
        self.stats.packets.add(n as u64);
        n
    }

    fn block_ptr(&self) -> *mut u8 {
        // SAFETY: block < nblocks and the ring maps nblocks * blocksz bytes.
        unsafe { self.ring.ptr().add(self.block * self.blocksz) }
    }

    /// Take the current block if the kernel handed it to us (an empty retired block
    /// is handed straight back).
    fn open_block(&mut self) -> bool {
        let b = self.block_ptr();
        // SAFETY: the block descriptor lies at the start of the block; its status is
        // written by the kernel, read with acquire so the block's frames are visible.
        let status = unsafe { sys::load_acquire_u32(b.add(sys::BLK_STATUS)) };
        if status & libc::TP_STATUS_USER == 0 {
            return false;
        }
        // The header through checked offsets: a count no block can hold is cut to
        // what fits (the frames' own checks end the walk early).
        let Some(h) = tpacket::block_header(self.block_bytes()) else { return false };
        self.left = h.num_pkts;
        self.next_off = h.first;
        if self.left == 0 {
            self.close_block();
            return false;
        }
        true
    }

    /// The current block's bytes. Only while the kernel has handed it to us (status
    /// USER): it writes none of them until `close_block` hands it back.
    fn block_bytes(&self) -> &[u8] {
        // SAFETY: block < nblocks, the ring maps nblocks * blocksz bytes, and the
        // block is ours (see above): nothing else writes it while the slice lives.
        unsafe { std::slice::from_raw_parts(self.block_ptr(), self.blocksz) }
    }

    /// Give the current block back to the kernel and move to the next.
    fn close_block(&mut self) {
        let b = self.block_ptr();
        // SAFETY: we own the block until this release store hands it back.
        unsafe { sys::store_release_u32(b.add(sys::BLK_STATUS), libc::TP_STATUS_KERNEL) };
        self.block = (self.block + 1) % self.nblocks;
        self.left = 0;
    }

    fn frame_ptr(&self, i: usize) -> *mut u8 {
        // SAFETY: i < nframes and the ring maps nframes * framesz bytes (blocks are
        // whole multiples of framesz: the frames are contiguous).
        unsafe { self.ring.ptr().add(i * self.framesz) }
    }

    /// Whether the kernel handed V2 frame `i` to us (acquire: its bytes are visible).
    fn frame_ready(&self, i: usize) -> bool {
        // SAFETY: the frame header lies at the frame's start; its status is written by
        // the kernel.
        unsafe { sys::load_acquire_u32(self.frame_ptr(i).add(sys::H2_STATUS)) & libc::TP_STATUS_USER != 0 }
    }

    /// `rx_burst` on a V2 frame ring: the ready frames in ring order, each copied
    /// into an mbuf and handed back at once.
    pub(crate) fn rx_frames(&mut self, pkts: &mut [*mut Mbuf], port: u16) -> usize {
        let mut ready = 0;
        while ready < pkts.len() && self.frame_ready((self.frame + ready) % self.nframes) {
            ready += 1;
        }
        if ready == 0 {
            return 0;
        }
        if !self.pool.alloc_bulk(&mut pkts[..ready]) {
            self.stats.nombuf.add(ready as u64);
            return 0;
        }
        let mut k = 0;
        let mut bytes = 0u64;
        let mut spare: Vec<*mut Mbuf> = Vec::new();
        for i in 0..ready {
            let f = self.frame_ptr(self.frame);
            // SAFETY: the kernel handed this frame to us (status USER, checked above
            // with acquire); its header fields are stable until we hand it back.
            let (snap, mac, status, tci, tpid, wire_len) = unsafe {
                (
                    std::ptr::read_volatile(f.add(sys::H2_SNAPLEN).cast::<u32>()) as usize,
                    std::ptr::read_volatile(f.add(sys::H2_MAC).cast::<u16>()) as usize,
                    std::ptr::read_volatile(f.add(sys::H2_STATUS).cast::<u32>()),
                    std::ptr::read_volatile(f.add(sys::H2_VLAN_TCI).cast::<u16>()),
                    std::ptr::read_volatile(f.add(sys::H2_VLAN_TPID).cast::<u16>()),
                    std::ptr::read_volatile(f.add(sys::H2_LEN).cast::<u32>()) as usize,
                )
            };
            let m = pkts[i];
            // The frame's bytes (and the vnet header before them) must lie inside the
            // frame: a header saying otherwise is an error, not an address to follow.
            let vnet = self.vnet && mac >= sys::H2_HDR_LEN + VnetHdr::LEN;
            if mac.checked_add(snap).is_none_or(|end| end > self.framesz) || mac < sys::H2_HDR_LEN {
                self.stats.errors.add(1);
                spare.push(m);
            } else {
                // SAFETY: the frame is ours until handed back; `mac + snap <= framesz`
                // and the vnet header lies between the frame header and `mac`.
                let (bytes_in, vnet_bytes) = unsafe {
                    (
                        std::slice::from_raw_parts(f.add(mac), snap),
                        vnet.then(|| std::slice::from_raw_parts(f.add(mac - VnetHdr::LEN), VnetHdr::LEN)),
                    )
                };
                let kf = rx::KernelFrame {
                    bytes: bytes_in,
                    wire_len,
                    status,
                    vlan_tci: tci,
                    vlan_tpid: tpid,
                    vnet: vnet_bytes,
                };
                // SAFETY: `m` is a fresh mbuf from our pool, owned by us.
                match unsafe { rx::deliver(&self.pool, m, &kf, self.vlan_strip, port, &self.offloads) } {
                    Ok(len) => {
                        // SAFETY: as above.
                        unsafe { (*m).rss_hash = 0 };
                        bytes += len as u64;
                        pkts[k] = m;
                        k += 1;
                    }
                    Err(why) => {
                        match why {
                            rx::Refused::Cut => self.stats.errors.add(1),
                            rx::Refused::NoMbuf => self.stats.nombuf.add(1),
                        }
                        spare.push(m);
                    }
                }
            }
            // SAFETY: we own the frame until this release store hands it back.
            unsafe { sys::store_release_u32(f.add(sys::H2_STATUS), libc::TP_STATUS_KERNEL) };
            self.frame = (self.frame + 1) % self.nframes;
        }
        if !spare.is_empty() {
            // SAFETY: fresh mbufs we own and did not hand out.
            unsafe { free_bulk(&spare) };
        }
        self.stats.bytes.add(bytes);
        self.stats.packets.add(k as u64);
        k
    }

    /// Copy frames of the current block into the fresh mbufs `out`; returns how many
    /// were filled (the rest are freed: oversized frames are counted as errors).
    fn fill(&mut self, out: &mut [*mut Mbuf], port: u16) -> usize {
        let mut k = 0;
        let mut bytes = 0u64;
        let mut spare: Vec<*mut Mbuf> = Vec::new();
        for i in 0..out.len() {
            if self.left == 0 {
                spare.extend_from_slice(&out[i..]);
                break;
            }
            // Each header through checked offsets: one that points outside the block
            // (or back into it) ends the block, counted, instead of being followed.
            let f = match tpacket::frame_at(self.block_bytes(), self.next_off, self.left == 1) {
                Ok(f) => f,
                Err(_) => {
                    self.stats.errors.add(1);
                    self.left = 0;
                    spare.extend_from_slice(&out[i..]);
                    break;
                }
            };
            self.left -= 1;
            self.next_off = f.next;
            let m = out[i];
            let block = self.block_bytes();
            let kf = rx::KernelFrame {
                bytes: &block[f.data..f.data + f.snap],
                wire_len: f.wire_len,
                status: f.status,
                vlan_tci: f.vlan_tci,
                vlan_tpid: f.vlan_tpid,
                vnet: if self.vnet { tpacket::vnet_before(block, &f) } else { None },
            };
            // SAFETY: `m` is a fresh mbuf from our pool, owned by us.
            match unsafe { rx::deliver(&self.pool, m, &kf, self.vlan_strip, port, &self.offloads) } {
                Ok(len) => {
                    // SAFETY: as above.
                    unsafe {
                        (*m).rss_hash = f.rxhash;
                        (*m).ol_flags |= abi::RX_RSS_HASH;
                    }
                    bytes += len as u64;
                    out[k] = m;
                    k += 1;
                }
                Err(why) => {
                    // A frame cut to the ring's frame size is not delivered truncated:
                    // it is an RX error.
                    match why {
                        rx::Refused::Cut => self.stats.errors.add(1),
                        rx::Refused::NoMbuf => self.stats.nombuf.add(1),
                    }
                    spare.push(m);
                }
            }
        }
        if !spare.is_empty() {
            // SAFETY: fresh mbufs we own and did not hand out.
            unsafe { free_bulk(&spare) };
        }
        self.stats.bytes.add(bytes);
        k
    }
}
