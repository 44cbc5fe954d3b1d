//! Split virtqueues in the front end's memory, walked by the queues: the guest's TX
//! queue is our RX ([`Vring::dequeue`]), its RX queue our TX ([`Vring::enqueue`]).
//!
//! The guest is hostile. Everything it wrote is read once into our own variables
//! before it is checked and used (it may change under us at any time): ring indices
//! (an available index more than a ring ahead of ours breaks the ring: counted, the
//! ring stopped until the front end sets it up again), descriptor indices (inside the
//! table), chains (at most as many steps as the table has entries, so no loop, and
//! at most [`MAX_STEPS`] descriptors in all, so a burst's cost is bounded; an
//! indirect table only as a chain's first descriptor, its length a multiple of 16,
//! at most [`MAX_INDIRECT`] entries, never nested), every buffer (whole, length
//! included, inside one region of the memory table, see [`crate::mem`]), directions
//! (we read only device-readable buffers and write only device-writable ones) and
//! sizes (a packet is at most [`MAX_FRAME`] bytes over at most [`MAX_SEGS`]
//! buffers). A bad chain is counted, its packet dropped and its head returned to
//! the guest, so a guest that errs loses its packet, never our ring. Packets are
//! copied both ways: no mbuf is ever in the guest's memory.

use crate::mem::MemTable;
use crate::proto::RingAddr;
use ironpath_pmd_sdk::abi;
use ironpath_pmd_sdk::vnet::{VnetHdr, F_NEEDS_CSUM};
use ironpath_pmd_sdk::{Counter, Pool, RxBurst, TxBurst};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

/// The largest packet either way (a 64 KiB GSO frame and its Ethernet and VLAN
/// headers), header excluded.
pub const MAX_FRAME: usize = 65536 + 18;
/// Most buffers one packet may span.
pub const MAX_SEGS: usize = 64;
/// Most entries in an indirect table.
pub const MAX_INDIRECT: u32 = 1024;
/// Most packets one RX burst takes.
const RX_BURST: usize = 64;
/// Most mbufs a received packet becomes (a 64 KiB frame in 2 KiB mbufs: 33).
const MAX_RX_CHAIN: usize = 40;
/// Largest ring (the split ring's limit).
pub const MAX_RING: u32 = 32768;
/// Most descriptors one chain may take to walk, indirect entries included (a
/// Linux or DPDK guest uses fewer than 20): a burst of chains costs at most its
/// packets times this many descriptor reads, whatever the guest links.
pub const MAX_STEPS: u32 = 256;

const DESC_NEXT: u16 = 1;
const DESC_WRITE: u16 = 2;
const DESC_INDIRECT: u16 = 4;
const AVAIL_F_NO_INTERRUPT: u16 = 1;
const USED_F_NO_NOTIFY: u16 = 1;

/// What a guest did wrong, per queue (read by the xstats).
#[derive(Debug, Default)]
pub struct Faults {
    /// Chains refused (bad index, address, direction, loop, indirect table, size).
    pub bad_desc: Counter,
    /// Rings stopped: an available index more than a ring ahead.
    pub bad_ring_index: Counter,
    /// TX: packets that found no guest buffer (the guest's RX ring was empty).
    pub ring_full: Counter,
    /// TX: packets longer than the guest's buffers (without merged buffers), or
    /// segmentation the guest did not negotiate.
    pub too_long: Counter,
    /// Bursts skipped because the control thread held the ring.
    pub busy: Counter,
    /// Packets carrying a segmentation offload (GSO/TSO) through the header.
    pub gso: Counter,
    /// RX: packets whose checksum the guest left partial (`NEEDS_CSUM`).
    pub partial_csum: Counter,
}

/// What the front end negotiated that the data path follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Negotiated {
    /// Header length: 12 with `VERSION_1` or `MRG_RXBUF`, else 10.
    pub hdr_len: usize,
    /// Merged receive buffers.
    pub mrg: bool,
    /// The guest completes partial checksums we send.
    pub guest_csum: bool,
    /// The guest takes TCP segments larger than its MTU.
    pub guest_tso: bool,
    /// `VIRTIO_F_IN_ORDER`: a batch of used chains the guest sent may be returned
    /// as one used entry (the last chain's id, in the batch's first slot).
    pub in_order: bool,
}

/// One split ring and its state.
#[derive(Debug)]
pub struct Vring {
    /// Entries (a power of two), 0 until `SET_VRING_NUM`.
    pub num: u32,
    /// The addresses the front end gave (re-translated when the memory table changes).
    pub addr: Option<RingAddr>,
    desc: *mut u8,
    avail: *mut u8,
    used: *mut u8,
    /// The next available entry we will take; the used index we publish is the same
    /// (every chain is returned in order, as soon as it is taken).
    pub last_avail: u16,
    /// `SET_VRING_KICK` came: the ring runs (until `GET_VRING_BASE`).
    pub started: bool,
    /// `SET_VRING_ENABLE` (or no protocol features: enabled when started).
    pub enabled: bool,
    /// A guest's error stopped the ring until it is set up again.
    pub broken: bool,
    /// The guest asked for a signal after our last update (read by the control thread).
    pub want_call: bool,
    /// The memory the addresses are in.
    pub mem: Option<Arc<MemTable>>,
    /// The negotiated header and offloads.
    pub neg: Negotiated,
    /// Used entries of the burst, written to the ring by `publish`.
    shadow: Vec<u64>,
    /// The guest should kick us after adding buffers (an RX queue's lcore is about
    /// to sleep); else its used flags tell it not to (we poll).
    kicks_wanted: bool,
    /// The bursts' scratch (taken for a burst, put back after it; allocated with
    /// the ring, and again only if a burst panicked while it held it).
    scratch: Option<Box<Scratch>>,
}

/// A burst's scratch arrays, kept with the ring: set up on the stack they cost a
/// few KiB of stores every burst.
struct Scratch {
    ch: Chain,
    first: Chain,
    chains: [(u32, usize); MAX_SEGS],
    later: Deferred,
    fresh: [*mut abi::Mbuf; RX_BURST],
    rx_later: [(*mut abi::Mbuf, *mut u8, usize); RX_BURST],
}

impl Scratch {
    fn boxed() -> Box<Scratch> {
        Box::new(Scratch {
            ch: Chain::new(),
            first: Chain::new(),
            chains: [(0, 0); MAX_SEGS],
            later: Deferred::new(),
            fresh: [std::ptr::null_mut(); RX_BURST],
            rx_later: [(std::ptr::null_mut(), std::ptr::null_mut(), 0); RX_BURST],
        })
    }
}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Scratch")
    }
}

// SAFETY: the raw pointers address the front end's shared memory, kept mapped by
// `mem` for as long as they are set; the ring is used under its lock only.
unsafe impl Send for Vring {}

impl Default for Vring {
    fn default() -> Self {
        Vring {
            num: 0,
            addr: None,
            desc: std::ptr::null_mut(),
            avail: std::ptr::null_mut(),
            used: std::ptr::null_mut(),
            last_avail: 0,
            started: false,
            enabled: false,
            broken: false,
            want_call: false,
            mem: None,
            neg: Negotiated { hdr_len: 12, ..Default::default() },
            shadow: Vec::with_capacity(256),
            kicks_wanted: false,
            scratch: Some(Scratch::boxed()),
        }
    }
}

/// A descriptor, read once.
#[derive(Clone, Copy)]
struct Desc {
    addr: u64,
    len: u32,
    flags: u16,
    next: u16,
}

/// The buffers of one chain, in our address space.
struct Chain {
    segs: [(*mut u8, u32); MAX_SEGS],
    n: usize,
    total: usize,
}

impl Chain {
    fn new() -> Self {
        Chain { segs: [(std::ptr::null_mut(), 0); MAX_SEGS], n: 0, total: 0 }
    }
}

/// Read a little-endian 16-bit field of guest memory once.
///
/// # Safety
/// `p` is 2-aligned and points to at least 2 readable bytes.
#[inline(always)]
unsafe fn rd16(p: *const u8) -> u16 {
    // SAFETY: the caller's bounds and alignment.
    u16::from_le(unsafe { std::ptr::read_volatile(p.cast::<u16>()) })
}

/// # Safety
/// `p` is 2-aligned and points to 2 writable bytes.
#[inline(always)]
unsafe fn wr16(p: *mut u8, v: u16) {
    // SAFETY: the caller's bounds and alignment.
    unsafe { std::ptr::write_volatile(p.cast::<u16>(), v.to_le()) }
}

/// The index at `p` (2-aligned, checked when the ring was set), as an atomic.
///
/// # Safety
/// `p` is 2-aligned and points to 2 bytes of the mapped ring.
#[inline(always)]
unsafe fn idx<'a>(p: *mut u8) -> &'a AtomicU16 {
    // SAFETY: the caller's alignment and bounds; the guest writes it with atomics too.
    unsafe { &*(p.cast::<AtomicU16>()) }
}

impl Vring {
    /// Whether the queues may use the ring.
    #[inline(always)]
    pub fn ready(&self) -> bool {
        !self.desc.is_null() && self.started && self.enabled && !self.broken
    }

    /// Translate the ring's addresses with its memory table: every part must lie in
    /// one region, aligned (descriptors 16, available 2, used 4). `false` (and the
    /// ring not ready) otherwise.
    pub fn translate(&mut self) -> bool {
        self.desc = std::ptr::null_mut();
        self.avail = std::ptr::null_mut();
        self.used = std::ptr::null_mut();
        let (Some(a), Some(m)) = (self.addr, self.mem.as_ref()) else { return false };
        let n = u64::from(self.num);
        if n == 0 || !n.is_power_of_two() || n > u64::from(MAX_RING) {
            return false;
        }
        let d = m.uva(a.desc, 16 * n);
        let av = m.uva(a.avail, 6 + 2 * n);
        let u = m.uva(a.used, 6 + 8 * n);
        match (d, av, u) {
            (Some(d), Some(av), Some(u))
                if (d as usize).is_multiple_of(16)
                    && (av as usize).is_multiple_of(2)
                    && (u as usize).is_multiple_of(4) =>
            {
                (self.desc, self.avail, self.used) = (d, av, u);
                self.write_used_flags();
                true
            }
            _ => false,
        }
    }

    /// Whether the guest should kick us when it adds buffers (written to the ring's
    /// used flags now if it is translated, and again whenever it is).
    pub fn want_kicks(&mut self, on: bool) {
        self.kicks_wanted = on;
        self.write_used_flags();
    }

    /// The used flags: no kicks while we poll.
    fn write_used_flags(&mut self) {
        if !self.used.is_null() {
            let f = if self.kicks_wanted { 0 } else { USED_F_NO_NOTIFY };
            // SAFETY: the used ring's flags, inside the translated ring.
            unsafe { wr16(self.used, f) };
        }
    }

    /// Forget the memory and addresses (the connection ended or was reset); the
    /// indices stay for a front end that reconnects without setting them.
    pub fn clear(&mut self) {
        self.addr = None;
        self.mem = None;
        self.started = false;
        self.enabled = false;
        self.broken = false;
        self.want_call = false;
        self.translate();
    }

    /// Read descriptor `i` of `table`.
    ///
    /// # Safety
    /// `table` maps at least `i + 1` descriptors.
    #[inline(always)]
    unsafe fn desc_at(table: *const u8, i: u32) -> Desc {
        let p = table.wrapping_add(16 * i as usize);
        let (a, b) = if (p as usize).is_multiple_of(8) {
            // The ring's table (16-aligned) and aligned indirect tables: two loads.
            // SAFETY: the caller's bounds; 8-aligned.
            unsafe { (std::ptr::read_volatile(p.cast::<u64>()), std::ptr::read_volatile(p.add(8).cast::<u64>())) }
        } else {
            // SAFETY: the caller's bounds; byte arrays need no alignment.
            let raw: [u8; 16] = unsafe { std::ptr::read_volatile(p.cast()) };
            (
                u64::from_ne_bytes(raw[..8].try_into().unwrap_or_default()),
                u64::from_ne_bytes(raw[8..].try_into().unwrap_or_default()),
            )
        };
        let (a, b) = (u64::from_le(a), u64::from_le(b));
        Desc { addr: a, len: b as u32, flags: (b >> 32) as u16, next: (b >> 48) as u16 }
    }

    /// The buffers of the chain at `head`, all device-writable (`write`) or all
    /// device-readable; `None` for a chain the rules refuse.
    #[inline(always)]
    fn chain(&self, mem: &MemTable, head: u32, write: bool, out: &mut Chain) -> Option<()> {
        if head < self.num {
            // The common case first: the head alone, in the direction asked (the
            // walk below reads it again for any other chain, and rules on it).
            // SAFETY: `head < num`, inside the ring's table (checked at `translate`).
            let d = unsafe { Self::desc_at(self.desc, head) };
            let dir = if write { DESC_WRITE } else { 0 };
            if d.flags & (DESC_NEXT | DESC_INDIRECT | DESC_WRITE) == dir && d.len > 0 {
                if !write && d.len as usize > MAX_FRAME + 12 {
                    return None;
                }
                out.segs[0] = (mem.gpa(d.addr, u64::from(d.len))?, d.len);
                out.n = 1;
                out.total = d.len as usize;
                return Some(());
            }
        }
        let (mut table, mut size, mut i) = (self.desc as *const u8, self.num, head);
        let (mut steps, mut walked, mut indirect) = (0u32, 0u32, false);
        out.n = 0;
        out.total = 0;
        loop {
            if i >= size || steps >= size || walked >= MAX_STEPS {
                return None;
            }
            steps += 1;
            walked += 1;
            // SAFETY: `i < size`, the entries `table` maps (the ring's table, checked
            // at `translate`, or an indirect table checked below).
            let d = unsafe { Self::desc_at(table, i) };
            if d.flags & DESC_INDIRECT != 0 {
                if indirect || steps != 1 || d.flags & DESC_NEXT != 0 || d.len % 16 != 0 {
                    return None;
                }
                let n = d.len / 16;
                if n == 0 || n > MAX_INDIRECT {
                    return None;
                }
                table = mem.gpa(d.addr, u64::from(d.len))?;
                (size, i, steps, indirect) = (n, 0, 0, true);
                continue;
            }
            if (d.flags & DESC_WRITE != 0) != write {
                return None;
            }
            if d.len > 0 {
                if out.n == MAX_SEGS {
                    return None;
                }
                let p = mem.gpa(d.addr, u64::from(d.len))?;
                out.segs[out.n] = (p, d.len);
                out.n += 1;
                out.total += d.len as usize;
                if out.total > MAX_FRAME + 12 && !write {
                    return None;
                }
            }
            if d.flags & DESC_NEXT == 0 {
                return Some(());
            }
            i = u32::from(d.next);
        }
    }

    /// How many chains the guest made available beyond ours; `None` (the ring is
    /// then broken, counted) for an index more than a ring ahead.
    #[inline(always)]
    fn avail_count(&mut self, faults: &Faults) -> Option<u16> {
        // SAFETY: the available ring's index, 2-aligned inside the translated ring.
        let a = unsafe { idx(self.avail.add(2)) }.load(Ordering::Acquire);
        let n = a.wrapping_sub(self.last_avail);
        if u32::from(n) > self.num {
            self.broken = true;
            faults.bad_ring_index.add(1);
            return None;
        }
        Some(n)
    }

    /// The head of available entry `k` (counted from ours).
    #[inline(always)]
    fn head(&self, k: u16) -> u32 {
        let slot = u32::from(self.last_avail.wrapping_add(k)) & (self.num - 1);
        // SAFETY: `slot < num`: inside the available ring's entries.
        u32::from(unsafe { rd16(self.avail.add(4 + 2 * slot as usize)) })
    }

    /// Used entry `k` (counted from ours): chain `head`, `len` bytes written; kept in
    /// the shadow until `publish`.
    #[inline(always)]
    fn put_used(&mut self, k: u16, head: u32, len: u32) {
        let k = usize::from(k);
        if k >= self.shadow.len() {
            self.shadow.resize(k + 1, 0);
        }
        self.shadow[k] = u64::from(head) | u64::from(len) << 32;
    }

    /// Publish `k` more used entries (written from the shadow in one pass, so the
    /// guest's core, which reads them, takes their cache lines once a burst rather
    /// than once a packet) and note whether the guest wants a signal. With `batch`
    /// (chains the guest sent, in order, so no length it needs), only one entry is
    /// written, as the in-order rules have it: the last chain's, in the batch's
    /// first slot (the driver counts the batch from that id).
    #[inline(always)]
    fn publish(&mut self, k: u16, batch: bool) {
        if k == 0 {
            return;
        }
        let one = batch && self.neg.in_order;
        let entries =
            if one { &self.shadow[usize::from(k) - 1..usize::from(k)] } else { &self.shadow[..usize::from(k)] };
        for (i, &e) in entries.iter().enumerate() {
            let slot = u32::from(self.last_avail.wrapping_add(i as u16)) & (self.num - 1);
            // SAFETY: `slot < num`: inside the used ring's entries (8 bytes each,
            // 4-aligned): id, then length.
            unsafe {
                let p = self.used.add(4 + 8 * slot as usize).cast::<u32>();
                std::ptr::write_volatile(p, (e as u32).to_le());
                std::ptr::write_volatile(p.add(1), ((e >> 32) as u32).to_le());
            };
        }
        self.last_avail = self.last_avail.wrapping_add(k);
        // SAFETY: the used ring's index, 2-aligned inside the translated ring.
        unsafe { idx(self.used.add(2)) }.store(self.last_avail, Ordering::Release);
        std::sync::atomic::fence(Ordering::SeqCst);
        // SAFETY: the available ring's flags, inside the translated ring.
        let flags = unsafe { rd16(self.avail) };
        if flags & AVAIL_F_NO_INTERRUPT == 0 {
            self.want_call = true;
        }
    }

    /// Receive the guest's packets (its TX queue) into `burst`; returns (packets,
    /// bytes, packets lost for lack of mbufs). One bulk allocation a burst for the
    /// packets that fit an mbuf; a longer one (a TSO frame) gets a chain of its own.
    pub fn dequeue(&mut self, burst: &mut RxBurst<'_>, pool: &Pool, faults: &Faults) -> (u64, u64, u64) {
        let Some(avail) = self.avail_count(faults) else { return (0, 0, 0) };
        let total = usize::from(avail).min(burst.room());
        if total == 0 {
            return (0, 0, 0);
        }
        // Taken for the burst (no reference count touched), put back below.
        let Some(mem) = self.mem.take() else { return (0, 0, 0) };
        let mut scratch = self.scratch.take().unwrap_or_else(Scratch::boxed);
        // `later`: packets in one buffer each, copied after the walk (see `Deferred`).
        let Scratch { ch, fresh, rx_later: later, .. } = &mut *scratch;
        let (mut n, mut nf) = (0usize, 0usize);
        let (mut pkts, mut bytes, mut nombuf) = (0, 0, 0);
        let mut nl = 0usize;
        let hl = self.neg.hdr_len;
        let room = usize::from(pool.buf_len().saturating_sub(pool.headroom()));
        let port = burst.port_id();
        // SAFETY: the burst's free slots; the first `filled` hold packets we received.
        let out = unsafe { burst.raw_rest() };
        let (mut filled, mut taken) = (0usize, 0u16);
        while usize::from(taken) < total {
            if nf == n {
                // The next mbufs, RX_BURST at a time in one bulk allocation.
                n = (total - usize::from(taken)).min(RX_BURST);
                nf = 0;
                if !pool.alloc_bulk(&mut fresh[..n]) {
                    n = 0;
                    nombuf += 1;
                    break;
                }
            }
            let head = self.head(taken);
            if self.chain(&mem, head, false, ch).is_none() || ch.total < hl + 14 {
                faults.bad_desc.add(1);
                self.put_used(taken, head, 0);
                taken += 1;
                continue;
            }
            let len = ch.total - hl;
            if len <= room && ch.n == 1 && nl < RX_BURST {
                // The common case, one buffer into one mbuf: read and copied once the
                // burst's chains are all walked (its lines loading meanwhile).
                prefetch_lines(ch.segs[0].0, hl + len, false);
                let m = fresh[nf];
                nf += 1;
                later[nl] = (m, ch.segs[0].0, len);
                nl += 1;
                out[filled] = m;
                filled += 1;
                self.put_used(taken, head, 0);
                taken += 1;
                pkts += 1;
                bytes += len as u64;
                continue;
            }
            let mut h = [0u8; 12];
            gather(ch, 0, &mut h[..hl]);
            let vh = VnetHdr::parse(&h[..10]).unwrap_or_default();
            let m = if len <= room {
                let m = fresh[nf];
                nf += 1;
                // SAFETY: a fresh mbuf of the pool, ours; `len` fits its data room.
                unsafe {
                    let r = &mut *m;
                    gather_raw(ch, hl, r.buf_addr.add(usize::from(r.data_off)), len);
                    r.data_len = len as u16;
                    r.pkt_len = len as u32;
                }
                m
            } else {
                let k = len.div_ceil(room.max(1));
                let mut segs = [std::ptr::null_mut::<abi::Mbuf>(); MAX_RX_CHAIN];
                if k > MAX_RX_CHAIN {
                    faults.bad_desc.add(1);
                    self.put_used(taken, head, 0);
                    taken += 1;
                    continue;
                }
                if !pool.alloc_bulk(&mut segs[..k]) {
                    // No mbuf: leave the chain (and the rest) for the next burst.
                    nombuf += 1;
                    break;
                }
                let mut at = hl;
                for (i, &sm) in segs[..k].iter().enumerate() {
                    let part = (len - (at - hl)).min(room);
                    // SAFETY: fresh mbufs of the pool, ours; `part` fits each one's room.
                    unsafe {
                        let r = &mut *sm;
                        gather_raw(ch, at, r.buf_addr.add(usize::from(r.data_off)), part);
                        r.data_len = part as u16;
                        r.next = if i + 1 < k { segs[i + 1] } else { std::ptr::null_mut() };
                    }
                    at += part;
                }
                // SAFETY: the head of the chain just linked.
                unsafe {
                    (*segs[0]).pkt_len = len as u32;
                    (*segs[0]).nb_segs = k as u16;
                }
                segs[0]
            };
            // SAFETY: the packet just filled, ours until the burst takes it.
            rx_offloads(unsafe { &mut *m }, port, &vh, faults);
            out[filled] = m;
            filled += 1;
            self.put_used(taken, head, 0);
            taken += 1;
            pkts += 1;
            bytes += len as u64;
        }
        for &(m, src, len) in later[..nl].iter() {
            // SAFETY: `src` maps the chain's one buffer of `hl + len` readable bytes
            // (checked by `chain`), still the guest's to reuse only after `publish`;
            // `m` is a fresh mbuf whose room holds `len`, ours until the burst takes it.
            let (r, lo, hi) = unsafe {
                // The header's 10 bytes as two words, read once.
                let lo = u64::from_le(std::ptr::read_unaligned(src.cast::<u64>()));
                let hi = u16::from_le(std::ptr::read_unaligned(src.add(8).cast::<u16>()));
                let r = &mut *m;
                ironpath_pmd_sdk::copy_bytes(r.buf_addr.add(usize::from(r.data_off)), src.add(hl), len);
                r.data_len = len as u16;
                r.pkt_len = len as u32;
                (r, lo, hi)
            };
            rx_offloads(r, port, &VnetHdr::from_words(lo, hi), faults);
        }
        if nf < n {
            // SAFETY: fresh mbufs no packet took.
            unsafe { ironpath_pmd_sdk::free_bulk(&fresh[nf..n]) };
        }
        self.mem = Some(mem);
        self.scratch = Some(scratch);
        self.publish(taken, true);
        // SAFETY: `filled` slots hold the packets received above.
        unsafe { burst.set_filled(filled) };
        (pkts, bytes, nombuf)
    }

    /// Send `burst` to the guest (its RX queue): each packet taken is copied into the
    /// guest's buffers (merged across several chains when negotiated) and freed.
    /// Packets left in the burst found no room. Returns (packets, bytes).
    pub fn enqueue(&mut self, burst: &mut TxBurst<'_>, faults: &Faults) -> (u64, u64) {
        let Some(mut avail) = self.avail_count(faults) else { return (0, 0) };
        // Taken for the burst (no reference count touched), put back below.
        let Some(mem) = self.mem.take() else { return (0, 0) };
        let neg = self.neg;
        let (mut pkts, mut bytes) = (0, 0);
        let mut used = 0u16;
        // Scratch for the chains of one packet, kept with the ring: set up per packet
        // it cost more than a small packet's copies, per burst still a few
        // instructions a packet.
        let mut scratch = self.scratch.take().unwrap_or_else(Scratch::boxed);
        let Scratch { ch, first, chains, later, .. } = &mut *scratch;
        // Packets are freed together at the end: `done` from the front were sent or
        // dropped.
        let mut done = 0;
        for p in burst.packets() {
            let m = p.mbuf();
            let mut vh = VnetHdr::from_mbuf(m);
            if vh.gso_type != 0 && !neg.guest_tso {
                faults.too_long.add(1);
                done += 1;
                continue;
            }
            // A partial checksum the guest will not complete: completed here.
            let fix = if vh.flags & F_NEEDS_CSUM != 0 && !neg.guest_csum {
                let c = checksum_from(p.segments(), usize::from(vh.csum_start));
                vh.flags = 0;
                Some((usize::from(vh.csum_start) + usize::from(vh.csum_offset), c))
            } else {
                None
            };
            let need = neg.hdr_len + p.len() as usize;
            // Take chains until the packet fits (one chain without merged buffers).
            let start = used;
            let (mut nch, mut have, mut bad) = (0usize, 0usize, None);
            while have < need && avail > 0 && nch < MAX_SEGS {
                let head = self.head(used);
                used += 1;
                avail -= 1;
                let c: &mut Chain = if nch == 0 { first } else { ch };
                if self.chain(&mem, head, true, c).is_none()
                    || (nch == 0 && (c.n == 0 || (c.segs[0].1 as usize) < neg.hdr_len))
                {
                    bad = Some(head);
                    break;
                }
                let put = (need - have).min(c.total);
                if nch > 0 {
                    let from = have - neg.hdr_len;
                    scatter_packet(c, 0, p.segments(), from, put, fix.map(|(o, v)| (o, v, from)));
                }
                chains[nch] = (head, put);
                nch += 1;
                have += put;
                if !neg.mrg {
                    break;
                }
            }
            if bad.is_some() || (have < need && nch > 0 && (!neg.mrg || nch == MAX_SEGS)) {
                // A chain the rules refuse, or one too small for the packet (without
                // merged buffers), or more chains than a packet may span: the packet
                // is dropped, the chains go back empty.
                if bad.is_some() {
                    faults.bad_desc.add(1);
                } else {
                    faults.too_long.add(1);
                }
                for (k, &(head, _)) in chains[..nch].iter().chain(bad.map(|h| (h, 0)).iter()).enumerate() {
                    self.put_used(start + k as u16, head, 0);
                }
                done += 1;
                continue;
            }
            if have < need {
                // The guest has no more room: its chains stay its own (nothing was
                // published) and the packet stays in the burst.
                used = start;
                faults.ring_full.add(1);
                break;
            }
            // The first chain: header, then the start of the frame.
            let first_data = chains[0].1 - neg.hdr_len;
            let (b0, l0) = first.segs[0];
            let d = p.data();
            if fix.is_none() && d.len() == p.len() as usize && first_data == d.len() && need <= l0 as usize {
                // The common case: one segment into one buffer, header and frame,
                // copied once the burst's chains are all walked (its lines loading
                // meanwhile). The segment's own length is the one checked against the
                // buffer, whatever the mbuf's other fields say.
                prefetch_lines(b0, need, true);
                // SAFETY: `b0` maps `l0 >= need` writable bytes of guest memory
                // (checked by `chain`); the packet's data stays until the burst frees
                // it, after `later` is done.
                unsafe { later.push(b0, vh.to_words(), nch as u16, neg.hdr_len, d.as_ptr(), d.len()) };
            } else {
                let mut hb = [0u8; 12];
                hb[..10].copy_from_slice(&vh.to_bytes());
                hb[10..12].copy_from_slice(&(nch as u16).to_le_bytes());
                scatter_packet(first, neg.hdr_len, p.segments(), 0, first_data, fix.map(|(o, v)| (o, v, 0)));
                scatter(first, 0, &hb[..neg.hdr_len]);
            }
            for (k, &(head, put)) in chains[..nch].iter().enumerate() {
                self.put_used(start + k as u16, head, put as u32);
            }
            if vh.gso_type != 0 {
                faults.gso.add(1);
            }
            pkts += 1;
            bytes += u64::from(p.len());
            done += 1;
        }
        // SAFETY: as at `push`: the packets are not freed yet.
        unsafe { later.run() };
        burst.free(done);
        self.mem = Some(mem);
        self.scratch = Some(scratch);
        self.publish(used, false);
        (pkts, bytes)
    }
}

/// Most copies [`Deferred`] holds before it must run them.
const DEFERRED: usize = 64;

/// Copies of whole small packets into the guest's buffers, run at the end of a burst
/// (as DPDK's vhost batches its copies): the burst's descriptors are all read first,
/// so those loads (lines the guest's core just wrote) are not held up behind stores
/// into lines it owns, and the stores then go out together.
struct Deferred {
    n: usize,
    items: [Copy; DEFERRED],
}

/// One deferred copy: to `dst`, the header (as words, and `num_buffers`) in its `hl`
/// bytes, then `len` bytes from `src`.
#[derive(Clone, Copy)]
struct Copy {
    dst: *mut u8,
    hdr: (u64, u16),
    nbuf: u16,
    hl: usize,
    src: *const u8,
    len: usize,
}

impl Deferred {
    fn new() -> Self {
        let none = Copy { dst: std::ptr::null_mut(), hdr: (0, 0), nbuf: 0, hl: 0, src: std::ptr::null(), len: 0 };
        Deferred { n: 0, items: [none; DEFERRED] }
    }

    /// Write header `hdr` (with `nbuf` as `num_buffers` when `hl` is 12, else 10
    /// bytes) to `dst`, then copy `len` bytes from `src` after it (the copies run at
    /// the latest when the table is full).
    ///
    /// # Safety
    /// `dst` is writable for `hl + len` bytes and `src` readable for `len` until
    /// [`Deferred::run`] is called; `hl` is 10 or 12.
    #[inline(always)]
    unsafe fn push(&mut self, dst: *mut u8, hdr: (u64, u16), nbuf: u16, hl: usize, src: *const u8, len: usize) {
        if self.n == DEFERRED {
            // SAFETY: the caller's contract for the copies held.
            unsafe { self.run() };
        }
        self.items[self.n] = Copy { dst, hdr, nbuf, hl, src, len };
        self.n += 1;
    }

    /// Run the copies held.
    ///
    /// # Safety
    /// As at [`Deferred::push`], for every copy held.
    #[inline(always)]
    unsafe fn run(&mut self) {
        for c in &self.items[..self.n] {
            // SAFETY: the ranges `push`'s caller vouched for; word stores need no
            // alignment when unaligned.
            unsafe {
                std::ptr::write_unaligned(c.dst.cast::<u64>(), c.hdr.0.to_le());
                if c.hl == 12 {
                    let w = u32::from(c.hdr.1) | u32::from(c.nbuf) << 16;
                    std::ptr::write_unaligned(c.dst.add(8).cast::<u32>(), w.to_le());
                } else {
                    std::ptr::write_unaligned(c.dst.add(8).cast::<u16>(), c.hdr.1.to_le());
                }
                ironpath_pmd_sdk::copy_bytes(c.dst.add(c.hl), c.src, c.len);
            }
        }
        self.n = 0;
    }
}

/// Start loading the cache lines of `len` bytes (at most two lines) at `p`, for
/// reading or writing: only a hint, nothing is accessed.
#[inline(always)]
fn prefetch_lines(p: *mut u8, len: usize, write: bool) {
    let f = if write { ironpath_pmd_sdk::prefetch_write } else { ironpath_pmd_sdk::prefetch };
    f(p);
    if (p as usize & 63) + len > 64 {
        f(p.wrapping_add(64));
    }
}

/// Set a received packet's port and the offloads its header asks for (counted).
#[inline(always)]
fn rx_offloads(m: &mut abi::Mbuf, port: u16, vh: &VnetHdr, faults: &Faults) {
    m.port = port;
    if *vh != VnetHdr::default() {
        if vh.gso_type != 0 {
            faults.gso.add(1);
        }
        if vh.flags & F_NEEDS_CSUM != 0 {
            faults.partial_csum.add(1);
        }
        vh.to_mbuf(m);
    }
}

/// Copy `out.len()` bytes of the chain from byte `skip` into `out` (the chain holds
/// them: the caller checked its total).
fn gather(c: &Chain, skip: usize, out: &mut [u8]) {
    // SAFETY: `out` has room for its length; the caller checked the chain's total.
    unsafe { gather_raw(c, skip, out.as_mut_ptr(), out.len()) }
}

/// Copy `len` bytes of the chain from byte `skip` to `dst`.
///
/// # Safety
/// `dst` has room for `len` bytes; the chain holds `skip + len` bytes.
#[inline(always)]
unsafe fn gather_raw(c: &Chain, mut skip: usize, dst: *mut u8, len: usize) {
    let mut at = 0;
    for &(p, l) in &c.segs[..c.n] {
        let l = l as usize;
        if skip >= l {
            skip -= l;
            continue;
        }
        let k = (l - skip).min(len - at);
        // SAFETY: `p` maps `l` bytes of guest memory (checked by `chain`); `dst` has
        // room for `len` (the caller's contract).
        unsafe { ironpath_pmd_sdk::copy_bytes(dst.add(at), p.add(skip), k) };
        at += k;
        skip = 0;
        if at == len {
            return;
        }
    }
}

/// Copy `bytes` into the chain from byte `skip` on (within its total).
fn scatter(c: &Chain, mut skip: usize, bytes: &[u8]) {
    let mut at = 0;
    for &(p, len) in &c.segs[..c.n] {
        let len = len as usize;
        if skip >= len {
            skip -= len;
            continue;
        }
        let k = (len - skip).min(bytes.len() - at);
        // SAFETY: `p` maps `len` writable bytes of guest memory (checked by `chain`).
        unsafe { ironpath_pmd_sdk::copy_bytes(p.add(skip), bytes.as_ptr().add(at), k) };
        at += k;
        skip = 0;
        if at == bytes.len() {
            return;
        }
    }
}

/// Copy `count` bytes of the packet, from its byte `from`, into the chain at byte
/// `skip`; `fix` = (offset in the packet, checksum, `from` again) patches a
/// checksum completed here as it passes.
fn scatter_packet<'a>(
    c: &Chain,
    skip: usize,
    segs: impl Iterator<Item = &'a [u8]>,
    from: usize,
    count: usize,
    fix: Option<(usize, u16, usize)>,
) {
    let mut dst = skip;
    let mut pos = 0usize;
    let mut left = count;
    for s in segs {
        if left == 0 {
            break;
        }
        let end = pos + s.len();
        if end <= from {
            pos = end;
            continue;
        }
        let o = from.saturating_sub(pos);
        let part = &s[o..];
        let k = part.len().min(left);
        scatter(c, dst, &part[..k]);
        dst += k;
        left -= k;
        pos = end;
    }
    if let Some((off, v, f)) = fix {
        let b = v.to_be_bytes();
        for (i, byte) in b.iter().enumerate() {
            let o = off + i;
            if o >= f && o < f + count {
                scatter(c, skip + (o - f), std::slice::from_ref(byte));
            }
        }
    }
}

/// The completed checksum of a packet whose checksum field (at `start` +
/// offset) holds the pseudo-header's sum, as a partial checksum does: the ones'
/// complement of the sum of every byte from `start` on.
pub fn checksum_from<'a>(segs: impl Iterator<Item = &'a [u8]>, start: usize) -> u16 {
    let mut sum = 0u64;
    let (mut pos, mut odd) = (0usize, false);
    for s in segs {
        let end = pos + s.len();
        if end <= start {
            pos = end;
            continue;
        }
        let mut b = &s[start.saturating_sub(pos)..];
        pos = end;
        if odd && !b.is_empty() {
            sum += u64::from(b[0]);
            b = &b[1..];
            odd = false;
        }
        let mut words = b.chunks_exact(2);
        for w in &mut words {
            sum += u64::from(u16::from_be_bytes([w[0], w[1]]));
        }
        if let [last] = words.remainder() {
            sum += u64::from(*last) << 8;
            odd = true;
        }
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let c = !(sum as u16);
    if c == 0 {
        0xffff
    } else {
        c
    }
}

/// The offloads `neg` lets the guest's packets ask of us and ours of it.
pub fn rx_offload_capa() -> u64 {
    abi::RX_L4_CKSUM_GOOD | abi::RX_L4_CKSUM_NONE | abi::RX_AGGREGATED
}
