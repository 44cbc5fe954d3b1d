//! The transmit queue: a ring of TX descriptors (8254x SDM 3.3). A packet takes one
//! data descriptor per segment, plus a context descriptor in front when it asks for
//! checksum offloads with other header offsets than the previous one did.
//!
//! Descriptors `[clean, tail)` are in flight; TDT is `tail`. The last descriptor of
//! each packet asks for a status write-back (RS); when fewer than `free_thresh`
//! descriptors are free, a burst first reclaims finished packets (DD on their last
//! descriptor) from `clean` on and frees their mbufs in bulk.
//!
//! Every segment's buffer must lie in memory the NIC can reach: the queue keeps a
//! copy of the device's IOMMU mappings, maps a packet's mempool on first sight, and
//! drops (counting an error) a packet whose buffer is in no mapped region.

use crate::nic::{DmaMem, Nic};
use crate::regs::{self, txd, DESC_SIZE};
use ironpath_pmd_sdk::abi::{self, Mbuf};
use ironpath_pmd_sdk::{free_bulk, PmdError, QueueStats, TxBurst, TxQueue};
use std::ops::Range;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

/// Largest packet the 82540EM sends (sum of its segments).
const MAX_PKT_LEN: u32 = 16_128;
/// Checksum offloads this queue performs.
pub const TX_CKSUM: u64 = abi::TX_IP_CKSUM | abi::TX_TCP_CKSUM | abi::TX_UDP_CKSUM;

#[derive(Clone, Copy)]
struct Slot {
    /// The packet, at its last descriptor (freed when that one is done).
    mbuf: *mut Mbuf,
    /// At a packet's first descriptor: the index of its last one.
    last: u16,
}

/// Header lengths a checksum context cannot describe (missing, or past byte 255).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadOffsets;

/// The header offsets of a checksum context descriptor (SDM 3.3.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ctx {
    ipcss: u8,
    ipcso: u8,
    ipcse: u16,
    tucss: u8,
    tucso: u8,
    tucmd: u8,
    popts: u8,
}

impl Ctx {
    /// The context a packet's offload flags and header lengths ask for: `Ok(None)` for
    /// no offload, `Err` when the headers are beyond what a context can describe.
    pub fn of(ol_flags: u64, l2_len: u8, l3_len: u16) -> Result<Option<Ctx>, BadOffsets> {
        let f = ol_flags & TX_CKSUM;
        if f == 0 {
            return Ok(None);
        }
        let l2 = u16::from(l2_len);
        let l4 = l2 + l3_len;
        if l2 == 0 || l3_len == 0 || l4 + 16 > 255 {
            return Err(BadOffsets);
        }
        let tcp = f & abi::TX_TCP_CKSUM != 0;
        let l4_cksum = f & (abi::TX_TCP_CKSUM | abi::TX_UDP_CKSUM) != 0;
        let ip = f & abi::TX_IP_CKSUM != 0;
        let v4 = ip || ol_flags & abi::TX_IPV4 != 0;
        Ok(Some(Ctx {
            ipcss: l2 as u8,
            ipcso: (l2 + 10) as u8,
            ipcse: l4 - 1,
            tucss: l4 as u8,
            tucso: (l4 + if tcp { 16 } else { 6 }) as u8,
            tucmd: txd::DEXT | if tcp { txd::TUCMD_TCP } else { 0 } | if v4 { txd::TUCMD_IP } else { 0 },
            popts: if ip { txd::POPTS_IXSM } else { 0 } | if l4_cksum { txd::POPTS_TXSM } else { 0 },
        }))
    }

    /// The 16 bytes of the context descriptor, as two little-endian quad words.
    pub fn desc(&self) -> (u64, u64) {
        let lo = u64::from(self.ipcss)
            | u64::from(self.ipcso) << 8
            | u64::from(self.ipcse) << 16
            | u64::from(self.tucss) << 32
            | u64::from(self.tucso) << 40;
        // TUCSE 0: to the end of the packet. PAYLEN, HDRLEN, MSS: only for TSO.
        let hi = u64::from(self.tucmd) << 24;
        (lo, hi)
    }
}

/// Second quad word of a legacy data descriptor.
#[inline(always)]
fn legacy_hi(len: u16, eop: bool) -> u64 {
    let cmd = txd::IFCS | if eop { txd::EOP | txd::RS } else { 0 };
    u64::from(len) | u64::from(cmd) << 24
}

/// Second quad word of an extended data descriptor with checksum options.
#[inline(always)]
fn data_hi(len: u16, eop: bool, popts: u8) -> u64 {
    let cmd = txd::DEXT | txd::IFCS | if eop { txd::EOP | txd::RS } else { 0 };
    u64::from(len) | u64::from(txd::DTYP_DATA) | u64::from(cmd) << 24 | u64::from(popts) << 40
}

/// TX queue 0 of an e1000.
pub struct E1000Tx {
    nic: Arc<Nic>,
    ring: DmaMem,
    sw: Box<[Slot]>,
    n: usize,
    tail: usize,
    clean: usize,
    used: usize,
    free_thresh: usize,
    /// Packets whose descriptors the NIC has not been seen to finish.
    held: usize,
    /// The context the NIC holds now (it applies to every later data descriptor).
    ctx: Option<Ctx>,
    /// The device's mapped IOVA ranges and their generation.
    maps: Vec<Range<u64>>,
    map_gen: u64,
    stats: Arc<QueueStats>,
}

// SAFETY: the mbufs in `sw` are owned by the queue, which one thread at a time uses.
unsafe impl Send for E1000Tx {}

impl E1000Tx {
    /// Allocate a ring of `n` descriptors and point the NIC at it (TX disabled).
    pub fn new(nic: &Arc<Nic>, n: usize, free_thresh: usize, stats: Arc<QueueStats>) -> Result<E1000Tx, PmdError> {
        let ring = DmaMem::new(&nic.f, n * DESC_SIZE, "TX descriptor ring")?;
        let r = &nic.regs;
        let iova = ring.iova();
        r.write(regs::TDBAL, iova as u32);
        r.write(regs::TDBAH, (iova >> 32) as u32);
        r.write(regs::TDLEN, (n * DESC_SIZE) as u32);
        r.write(regs::TDH, 0);
        r.write(regs::TDT, 0);
        let (map_gen, maps) = nic.mapped();
        Ok(E1000Tx {
            nic: nic.clone(),
            ring,
            sw: vec![Slot { mbuf: std::ptr::null_mut(), last: 0 }; n].into_boxed_slice(),
            n,
            tail: 0,
            clean: 0,
            used: 0,
            free_thresh: free_thresh.clamp(1, n - 1),
            held: 0,
            ctx: None,
            maps,
            map_gen,
            stats,
        })
    }

    #[inline(always)]
    fn desc(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.n);
        // SAFETY: i < n and the ring is n * DESC_SIZE bytes.
        unsafe { self.ring.ptr().add(i * DESC_SIZE) }
    }

    #[inline(always)]
    fn write_desc(&self, i: usize, lo: u64, hi: u64) {
        let d = self.desc(i);
        // SAFETY: `d` is a descriptor the NIC does not own (outside [clean, tail)
        // until TDT moves past it), 16 bytes inside the ring, 8-byte aligned.
        unsafe {
            std::ptr::write_volatile(d.cast::<u64>(), lo);
            std::ptr::write_volatile(d.add(8).cast::<u64>(), hi);
        }
    }

    /// Free descriptors (one always stays unused: TDH == TDT means empty).
    #[inline(always)]
    fn free(&self) -> usize {
        self.n - 1 - self.used
    }

    /// Reclaim finished packets from `clean` on and free their mbufs; returns how many.
    fn reclaim(&mut self) -> usize {
        let mut done = [std::ptr::null_mut(); 64];
        let mut k = 0;
        let mut freed = 0;
        while self.used > 0 {
            let last = usize::from(self.sw[self.clean].last);
            // SAFETY: `last` is a descriptor of the ring; its status is written by the NIC.
            let st = unsafe { std::ptr::read_volatile(self.desc(last).add(12)) };
            if st & txd::DD == 0 {
                break;
            }
            let m = std::mem::replace(&mut self.sw[last].mbuf, std::ptr::null_mut());
            if !m.is_null() {
                done[k] = m;
                k += 1;
                freed += 1;
                self.held -= 1;
                if k == done.len() {
                    // SAFETY: the NIC is done with these packets, which we own.
                    unsafe { free_bulk(&done) };
                    k = 0;
                }
            }
            self.used -= (last + self.n - self.clean) % self.n + 1;
            self.clean = (last + 1) % self.n;
        }
        // SAFETY: as above.
        unsafe { free_bulk(&done[..k]) };
        freed
    }

    /// Whether `[iova, iova + len)` is in a mapped region.
    #[inline(always)]
    fn reachable(&self, iova: u64, len: u64) -> bool {
        self.maps.iter().any(|r| r.start <= iova && iova + len <= r.end)
    }

    /// The number of segments of `m` if each is reachable by the NIC, mapping a
    /// segment's pool on first sight (slow path, once per pool). The walk stops past
    /// `max` segments (a chain longer than its `nb_segs` says is refused).
    fn reachable_segments(&mut self, m: *mut Mbuf, max: usize) -> Option<usize> {
        let mut s = m;
        let mut count = 0;
        while !s.is_null() {
            count += 1;
            if count > max {
                return None;
            }
            // SAFETY: `s` is a segment of a packet the caller owns.
            let (iova, len, pool, next) =
                unsafe { ((*s).buf_iova + u64::from((*s).data_off), u64::from((*s).data_len), (*s).pool, (*s).next) };
            if !self.reachable(iova, len) {
                // SAFETY: the pool of a live host mbuf is a live host pool.
                if unsafe { self.nic.map_pool(pool, false) }.is_err() {
                    return None;
                }
                (self.map_gen, self.maps) = self.nic.mapped();
                if !self.reachable(iova, len) {
                    return None;
                }
            }
            s = next;
        }
        Some(count)
    }
}

impl TxQueue for E1000Tx {
    const HOLDS_PACKETS: bool = true;

    fn tx_burst(&mut self, burst: &mut TxBurst<'_>) {
        // SAFETY: `send` takes packets from the front of the rest (posting them to
        // descriptors or freeing them) and returns how many.
        unsafe {
            let n = self.send(burst.raw_rest());
            burst.set_taken(n);
        }
    }

    fn tx_done_cleanup(&mut self, _max: usize) -> usize {
        self.reclaim()
    }

    fn tx_inflight(&self) -> usize {
        self.held
    }
}

impl E1000Tx {
    /// Post packets from the front of `pkts` to descriptors; returns how many were
    /// taken (posted, or dropped and freed).
    fn send(&mut self, pkts: &mut [*mut Mbuf]) -> usize {
        if self.nic.map_gen() != self.map_gen {
            (self.map_gen, self.maps) = self.nic.mapped();
        }
        if self.free() < self.free_thresh {
            self.reclaim();
        }
        let mut taken = 0;
        let mut sent = 0u64;
        let mut bytes = 0u64;
        let mut dropped = [std::ptr::null_mut(); 8];
        let mut ndropped = 0;
        let start_tail = self.tail;
        for &m in pkts.iter() {
            // SAFETY: the caller hands us valid packets it owns.
            let (nb_segs, pkt_len, ol_flags, l2_len, l3_len) =
                unsafe { ((*m).nb_segs, (*m).pkt_len, (*m).ol_flags, (*m).l2_len, (*m).l3_len) };
            let ctx = Ctx::of(ol_flags, l2_len, l3_len);
            let need_ctx = matches!(ctx, Ok(Some(c)) if self.ctx != Some(c));
            let need = usize::from(nb_segs) + usize::from(need_ctx);
            // A chain longer than the ring can never go: drop it below rather than
            // refuse it forever.
            let fits = need < self.n;
            if fits && need > self.free() {
                self.reclaim();
                if need > self.free() {
                    break;
                }
            }
            taken += 1;
            if !fits
                || pkt_len == 0
                || pkt_len > MAX_PKT_LEN
                || nb_segs == 0
                || ctx.is_err()
                || self.reachable_segments(m, usize::from(nb_segs)) != Some(usize::from(nb_segs))
            {
                self.stats.errors.add(1);
                dropped[ndropped] = m;
                ndropped += 1;
                if ndropped == dropped.len() {
                    // SAFETY: we took these packets and nothing else refers to them.
                    unsafe { free_bulk(&dropped) };
                    ndropped = 0;
                }
                continue;
            }
            let first = self.tail;
            let popts = match ctx {
                Ok(Some(c)) => {
                    if need_ctx {
                        let (lo, hi) = c.desc();
                        self.write_desc(self.tail, lo, hi);
                        self.tail = (self.tail + 1) % self.n;
                        self.ctx = Some(c);
                    }
                    Some(c.popts)
                }
                _ => None,
            };
            let mut s = m;
            let mut last = self.tail;
            while !s.is_null() {
                // SAFETY: `s` is a segment of the packet we now own.
                let (iova, len, next) = unsafe { ((*s).buf_iova + u64::from((*s).data_off), (*s).data_len, (*s).next) };
                let eop = next.is_null();
                let hi = match popts {
                    Some(p) => data_hi(len, eop, p),
                    None => legacy_hi(len, eop),
                };
                self.write_desc(self.tail, iova, hi);
                last = self.tail;
                self.tail = (self.tail + 1) % self.n;
                s = next;
            }
            self.sw[first].last = last as u16;
            self.sw[last].mbuf = m;
            self.held += 1;
            self.used += (last + self.n - first) % self.n + 1;
            sent += 1;
            bytes += u64::from(pkt_len);
        }
        if ndropped > 0 {
            // SAFETY: as above.
            unsafe { free_bulk(&dropped[..ndropped]) };
        }
        if self.tail != start_tail {
            // Descriptors before the tail write that hands them to the NIC.
            fence(Ordering::SeqCst);
            self.nic.regs.write(regs::TDT, self.tail as u32);
        }
        self.stats.packets.add(sent);
        self.stats.bytes.add(bytes);
        taken
    }
}

impl Drop for E1000Tx {
    fn drop(&mut self) {
        // The port is stopped before queues are released. Give the NIC a moment to
        // finish what it was sending, then take back every packet still held.
        let r = &self.nic.regs;
        for _ in 0..100 {
            if r.read(regs::TDH) == r.read(regs::TDT) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let tctl = r.read(regs::TCTL);
        if tctl & regs::TCTL_EN != 0 {
            r.write(regs::TCTL, tctl & !regs::TCTL_EN);
        }
        r.write(regs::TDLEN, 0);
        r.write(regs::TDH, 0);
        r.write(regs::TDT, 0);
        let held: Vec<*mut Mbuf> = self.sw.iter().map(|s| s.mbuf).filter(|m| !m.is_null()).collect();
        for chunk in held.chunks(64) {
            // SAFETY: the queue owns these packets; each is freed once.
            unsafe { free_bulk(chunk) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_for_ipv4_tcp_and_udp() {
        assert_eq!(Ctx::of(0, 14, 20), Ok(None));
        let c = Ctx::of(abi::TX_IP_CKSUM | abi::TX_TCP_CKSUM | abi::TX_IPV4, 14, 20).unwrap().unwrap();
        assert_eq!((c.ipcss, c.ipcso, c.ipcse, c.tucss, c.tucso), (14, 24, 33, 34, 50));
        assert_eq!(c.tucmd, txd::DEXT | txd::TUCMD_TCP | txd::TUCMD_IP);
        assert_eq!(c.popts, txd::POPTS_IXSM | txd::POPTS_TXSM);
        let (lo, hi) = c.desc();
        assert_eq!(lo, 14 | 24 << 8 | 33 << 16 | 34 << 32 | 50 << 40);
        assert_eq!(hi, 0x23 << 24, "DEXT | IP | TCP in TUCMD, DTYP 0 (context)");
        let u = Ctx::of(abi::TX_UDP_CKSUM | abi::TX_IPV6, 14, 40).unwrap().unwrap();
        assert_eq!((u.tucss, u.tucso, u.tucmd, u.popts), (54, 60, txd::DEXT, txd::POPTS_TXSM));
        assert_eq!(Ctx::of(abi::TX_TCP_CKSUM, 0, 20), Err(BadOffsets));
        assert_eq!(Ctx::of(abi::TX_TCP_CKSUM, 14, 240), Err(BadOffsets));
    }

    #[test]
    fn data_descriptors() {
        // Legacy: length, CMD = IFCS (+ EOP | RS on the last segment).
        assert_eq!(legacy_hi(60, true), 60 | 0x0b << 24);
        assert_eq!(legacy_hi(60, false), 60 | 0x02 << 24);
        // Extended data: DTYP 1, DEXT, POPTS in byte 13.
        assert_eq!(data_hi(60, true, 3), 60 | 1 << 20 | 0x2b << 24 | 3 << 40);
    }
}
