//! A live connection's shared memory, and the copies in and out of it.
//!
//! Trust: the peer shares the memory and may write any of it at any time. So
//! * every descriptor is read once (a 16-byte volatile copy) and checked before use:
//!   a server reads the client's buffers only where [`Desc::fits`] says the bytes
//!   lie inside a mapped region, and writes into a posted buffer only within its
//!   room and region; a client uses its own buffer of the slot (its region layout is
//!   its own) and takes from the server only a length, capped at the buffer size;
//! * the index this side moves is kept locally and only stored to the ring (a peer
//!   that rewrites it changes nothing here); the peer's index is loaded once per
//!   burst and must lie within the ring ([`pending`]), else the burst is skipped and
//!   counted (`bad_ring_index`);
//! * regions were checked against their file's size before mapping (no access past
//!   the end of a file), and each client region is sealed against shrinking.
//!
//! Reads and writes of the packet bytes race with a misbehaving peer by nature of
//! shared memory; they are plain copies between raw pointers into the mapping, never
//! references, so a racing peer can only garble the bytes it owns.

use crate::notify::Doorbell;
use crate::proto::{
    pending, Desc, Layout, DESC_FLAG_NEXT, DESC_SIZE, RING_FLAGS_OFF, RING_FLAG_MASK_INT, RING_HDR, RING_HEAD_OFF,
    RING_TAIL_OFF,
};
use crate::sys::Mapping;
use ironpath_pmd_sdk::abi::Mbuf;
use ironpath_pmd_sdk::packet::PushError;
use ironpath_pmd_sdk::{free_bulk, prefetch, Counter, Pool, RxBurst, TxBurst};
use std::sync::atomic::{fence, AtomicU16, Ordering};

/// One ring in a mapped region.
#[derive(Debug)]
pub struct Ring {
    base: *mut u8,
    mask: u16,
    size: u32,
    /// The interrupt to the peer (asked for after TX if it did not mask interrupts;
    /// the control thread signals its eventfd, never the queue).
    bell: Option<Doorbell>,
}

// SAFETY: `base` points into a mapping the connection owns; the ring is used by one
// queue (one lcore) at a time and its shared words are atomics.
unsafe impl Send for Ring {}
// SAFETY: as above.
unsafe impl Sync for Ring {}

impl Ring {
    /// The ring at `offset` of `m`, `1 << log2` descriptors.
    ///
    /// # Safety
    /// `offset` is 8-byte aligned and the whole ring lies inside `m`, which outlives
    /// the ring.
    pub unsafe fn new(m: &Mapping, offset: u64, log2: u8, bell: Option<Doorbell>) -> Ring {
        // SAFETY: the caller's contract: the ring lies inside the mapping.
        let base = unsafe { m.ptr().add(offset as usize) };
        Ring { base, mask: ((1u32 << log2) - 1) as u16, size: 1 << log2, bell }
    }

    /// The ring's interrupt to the peer, if it has an eventfd.
    pub fn doorbell(&self) -> Option<&Doorbell> {
        self.bell.as_ref()
    }

    fn word(&self, off: usize) -> &AtomicU16 {
        // SAFETY: `off` is a header offset inside the ring, 2-byte aligned (the ring
        // is 8-byte aligned); shared words are only accessed atomically here.
        unsafe { AtomicU16::from_ptr(self.base.add(off).cast()) }
    }

    /// `head`.
    pub fn head(&self) -> &AtomicU16 {
        self.word(RING_HEAD_OFF)
    }

    /// `tail`.
    pub fn tail(&self) -> &AtomicU16 {
        self.word(RING_TAIL_OFF)
    }

    /// `flags`.
    pub fn flags(&self) -> &AtomicU16 {
        self.word(RING_FLAGS_OFF)
    }

    /// The cookie the client wrote.
    pub fn cookie(&self) -> u32 {
        // SAFETY: the first 4 bytes of the ring, aligned; a volatile read of shared memory.
        unsafe { std::ptr::read_volatile(self.base.cast::<u32>()) }
    }

    /// Write the cookie (client).
    pub fn set_cookie(&self, c: u32) {
        // SAFETY: as in `cookie`.
        unsafe { std::ptr::write_volatile(self.base.cast::<u32>(), c) }
    }

    /// Entries.
    pub fn size(&self) -> u32 {
        self.size
    }

    #[inline(always)]
    fn desc_ptr(&self, slot: u16) -> *mut u64 {
        // SAFETY: `slot & mask` indexes one of the ring's descriptors, inside it.
        unsafe { self.base.add(RING_HDR + usize::from(slot & self.mask) * DESC_SIZE).cast() }
    }

    /// Descriptor of `slot` (masked), read once (two 8-byte loads).
    #[inline(always)]
    pub fn desc(&self, slot: u16) -> Desc {
        let p = self.desc_ptr(slot);
        // SAFETY: inside the ring (`desc_ptr`), 8-byte aligned (the ring is, and
        // descriptors are 16 bytes after a 128-byte header); volatile loads of
        // memory the peer may write.
        let (w0, w1) = unsafe { (std::ptr::read_volatile(p), std::ptr::read_volatile(p.add(1))) };
        Desc::from_words(w0, w1)
    }

    /// The first half of the descriptor of `slot`: flags, region, length.
    #[inline(always)]
    pub fn desc_head(&self, slot: u16) -> Desc {
        // SAFETY: as in `desc`, the first word only.
        Desc::from_words(unsafe { std::ptr::read_volatile(self.desc_ptr(slot)) }, 0)
    }

    /// Write the descriptor of `slot` (masked).
    #[inline(always)]
    pub fn set_desc(&self, slot: u16, d: Desc) {
        let p = self.desc_ptr(slot);
        let (w0, w1) = d.to_words();
        // SAFETY: as in `desc`.
        unsafe {
            std::ptr::write_volatile(p, w0);
            std::ptr::write_volatile(p.add(1), w1);
        }
    }

    /// Write flags, region and length of the descriptor of `slot`, leaving its
    /// offset as it is (one 8-byte store).
    #[inline(always)]
    pub fn set_desc_head(&self, slot: u16, flags: u16, region: u16, length: u32) {
        let w0 = Desc { flags, region, length, offset: 0, metadata: 0 }.to_words().0;
        // SAFETY: as in `desc`.
        unsafe { std::ptr::write_volatile(self.desc_ptr(slot), w0) }
    }

    /// Wake the receiver if it asked for interrupts: mark the doorbell (no system
    /// call on the peer's descriptor here; see [`crate::notify`]).
    #[inline(always)]
    fn notify(&self) {
        // The index just stored, then the flags loaded: a store then a load, which
        // only a full fence keeps in that order. A receiver that clears `MASK_INT`
        // and then polls (its own fence between, `crate::wakeup`) either finds our
        // descriptors or sees us signal; without it both could miss (one fence per
        // burst that sent something).
        fence(Ordering::SeqCst);
        if self.flags().load(Ordering::Relaxed) & RING_FLAG_MASK_INT == 0 {
            if let Some(b) = &self.bell {
                b.ring();
            }
        }
    }
}

/// A connection: the mapped regions and the rings, as each queue sees them.
#[derive(Debug)]
pub struct Conn {
    /// Rings client-to-server, by queue.
    pub c2s: Vec<Option<Ring>>,
    /// Rings server-to-client, by queue.
    pub s2c: Vec<Option<Ring>>,
    /// Region sizes (what descriptors are checked against).
    pub sizes: Vec<u64>,
    /// The client's own layout (None: we are the server and read descriptors).
    pub layout: Option<Layout>,
    /// Mapped regions (last: dropped after the rings that point into them).
    pub regions: Vec<Mapping>,
}

impl Conn {
    /// The ring queue `q` receives from: a server's client-to-server ring, a
    /// client's server-to-client one.
    pub fn rx_ring(&self, q: u16) -> Option<&Ring> {
        let rings = if self.layout.is_some() { &self.s2c } else { &self.c2s };
        rings.get(usize::from(q)).and_then(Option::as_ref)
    }

    /// The peer's index on queue `q`'s receive ring: the slot it fills next (a
    /// client's `head`, a server's `tail`).
    pub fn rx_peer_index(&self, q: u16) -> Option<u16> {
        let r = self.rx_ring(q)?;
        Some(if self.layout.is_some() { r.tail() } else { r.head() }.load(Ordering::Acquire))
    }

    /// A pointer to `len` bytes at `offset` of `region`.
    ///
    /// Callers checked `offset + len <= sizes[region]`.
    #[inline(always)]
    fn at(&self, region: u16, offset: u64) -> *mut u8 {
        // SAFETY: the caller checked the bytes lie inside the mapping.
        unsafe { self.regions[usize::from(region)].ptr().add(offset as usize) }
    }
}

/// Per-queue counters of what the peer did wrong (single writer: the queue).
#[derive(Debug, Default)]
pub struct QueueFaults {
    /// Descriptors naming bytes outside a region, longer than a buffer, or a chain
    /// too long: the packet is dropped.
    pub bad_desc: Counter,
    /// The peer's ring index was outside the ring: the burst is skipped.
    pub bad_ring_index: Counter,
    /// TX: packets left to the host for lack of room in the ring.
    pub ring_full: Counter,
}

/// Longest packet accepted from a peer (a chain of descriptors).
pub const MAX_FRAME: usize = 64 * 1024 + 64;

/// Most descriptors in one packet's chain (a 9000-byte frame in 64-byte buffers takes
/// 141): a longer chain is dropped (`bad_desc`), and one the peer has not finished
/// costs each burst a look at this many descriptors at most, never a copy.
pub const MAX_CHAIN: usize = 256;

/// The RX side of one queue over a connection.
#[derive(Debug, Default)]
pub struct RxState {
    /// Next slot to consume.
    pub last: u16,
    /// Client: next slot to post (our own copy of `head`).
    pub head: u16,
}

impl RxState {
    /// The state of queue `q` on a new connection: a client's buffers are all
    /// posted when it connects (see `ctl`).
    pub fn fresh(c: &Conn, q: u16) -> RxState {
        let posted = match (c.layout, c.s2c.get(usize::from(q)).and_then(Option::as_ref)) {
            (Some(_), Some(r)) => r.size() as u16,
            _ => 0,
        };
        RxState { last: 0, head: posted }
    }
}

/// Most packets one RX burst takes.
const RX_MAX: usize = 64;

/// Receive into `burst` from ring `q` of `c` (the server reads C2S rings, the
/// client S2C rings); returns (packets, bytes, no-mbuf drops).
pub fn rx(
    c: &Conn,
    q: u16,
    st: &mut RxState,
    burst: &mut RxBurst<'_>,
    pool: &Pool,
    f: &QueueFaults,
    scratch: &mut Vec<u8>,
) -> (u64, u64, u64) {
    let client = c.layout;
    let Some(ring) = c.rx_ring(q) else { return (0, 0, 0) };
    let size = ring.size();
    let (mut pkts, mut bytes, mut nombuf) = (0u64, 0u64, 0u64);
    // The peer's index: the server reads the client's head, the client the server's tail.
    let to = if client.is_some() { ring.tail() } else { ring.head() }.load(Ordering::Acquire);
    let avail = match pending(st.last, to, size) {
        // The client's posted buffers bound what the server may have filled.
        Some(n) if client.is_none() || n <= st.head.wrapping_sub(st.last) => n,
        _ => {
            f.bad_ring_index.add(1);
            return (0, 0, 0);
        }
    };
    let mut cur = st.last;
    let end = cur.wrapping_add(avail);
    let want = usize::from(avail).min(burst.room()).min(RX_MAX);
    let mut fresh = [std::ptr::null_mut::<Mbuf>(); RX_MAX];
    let mut used = 0usize;
    if want > 0 && !pool.alloc_bulk(&mut fresh[..want]) {
        // Nothing taken: the packets wait in the ring for the next burst.
        nombuf += 1;
    } else {
        let room = usize::from(pool.buf_len().saturating_sub(pool.headroom()));
        let port = burst.port_id();
        // The buffers of this burst, fetched while the first are copied (the peer
        // wrote them last, on its own core).
        prefetch_buffers(c, q, ring, false, cur, want);
        while cur != end && burst.room() > 0 && used < want {
            // One packet: descriptors up to the first without NEXT, at most
            // MAX_CHAIN. A chain's flags are looked at first, so that one the peer has
            // not finished costs a look at its descriptors per burst, not a copy (a
            // packet of one descriptor, the common case, is read once).
            let start = cur;
            let first_desc = if client.is_some() { ring.desc_head(cur) } else { ring.desc(cur) };
            let mut n = 1usize;
            if first_desc.flags & DESC_FLAG_NEXT != 0 {
                let mut at = cur.wrapping_add(1);
                let finished = loop {
                    if at == end {
                        break false;
                    }
                    let d = if client.is_some() { ring.desc_head(at) } else { ring.desc(at) };
                    at = at.wrapping_add(1);
                    n += 1;
                    if d.flags & DESC_FLAG_NEXT == 0 || n >= MAX_CHAIN {
                        break true;
                    }
                };
                if !finished {
                    // Not finished yet: wait for it (nothing consumed).
                    break;
                }
            }
            // Then each descriptor checked (read again: the peer may have changed it
            // meanwhile) and its bytes gathered. A chain longer than MAX_CHAIN is
            // dropped, its first MAX_CHAIN descriptors consumed.
            let mut total = 0usize;
            let mut ok = true;
            let mut first: Option<(*const u8, usize)> = None;
            let mut chained = false;
            for k in 0..n {
                let d = match k {
                    0 => first_desc,
                    _ if client.is_some() => ring.desc_head(cur),
                    _ => ring.desc(cur),
                };
                let piece = match client {
                    Some(l) => (d.length <= l.bsize)
                        .then(|| (c.at(0, l.buffer_offset(false, q, cur & ring.mask)) as *const u8, d.length as usize)),
                    None => {
                        d.fits(&c.sizes).then(|| (c.at(d.region, u64::from(d.offset)) as *const u8, d.length as usize))
                    }
                };
                cur = cur.wrapping_add(1);
                let last = d.flags & DESC_FLAG_NEXT == 0;
                match piece {
                    // (A chain cut at MAX_CHAIN, or whose end moved, is not taken.)
                    Some((src, len)) if ok && total + len <= MAX_FRAME && last == (k + 1 == n) => {
                        total += len;
                        if first.is_none() {
                            first = Some((src, len));
                        } else {
                            if !chained {
                                chained = true;
                                scratch.clear();
                                let (s0, l0) = first.unwrap_or((src, 0));
                                // SAFETY: `s0` holds `l0` readable bytes inside a
                                // mapped region (checked when it was read).
                                unsafe { extend_from(scratch, s0, l0) };
                            }
                            // SAFETY: as above, for this piece.
                            unsafe { extend_from(scratch, src, len) };
                        }
                    }
                    _ => ok = false,
                }
            }
            let Some((src, len)) = first.filter(|_| ok) else {
                f.bad_desc.add(1);
                continue;
            };
            if !chained && len <= room {
                let m = fresh[used];
                used += 1;
                // SAFETY: `m` is a fresh mbuf of `pool` we own, with `room >= len`
                // bytes after its headroom; `src` holds `len` readable bytes. The
                // burst takes it over (the slot after those filled).
                unsafe {
                    let r = &mut *m;
                    copy_frame(r.buf_addr.add(usize::from(r.data_off)), src, len);
                    r.data_len = len as u16;
                    r.pkt_len = len as u32;
                    r.port = port;
                    burst.raw_rest()[0] = m;
                    burst.set_filled(1);
                }
                pkts += 1;
                bytes += len as u64;
                continue;
            }
            if !chained {
                scratch.clear();
                // SAFETY: as above.
                unsafe { extend_from(scratch, src, len) };
            }
            match burst.push_bytes(pool, scratch) {
                Ok(p) => {
                    p.set_port(port);
                    pkts += 1;
                    bytes += u64::from(p.len());
                }
                Err(PushError::NoMbuf) => {
                    nombuf += 1;
                    cur = start;
                    break;
                }
                Err(_) => f.bad_desc.add(1),
            }
        }
        // SAFETY: the fresh mbufs not handed to the burst are still ours.
        unsafe { free_bulk(&fresh[used..want]) };
    }
    st.last = cur;
    match client {
        Some(l) => {
            // Post every free buffer back: the slot's own, with its full room.
            let free = size as u16 - st.head.wrapping_sub(st.last);
            // (Each descriptor's offset was written with the ring; a server that
            // changed it only misdirects its own writes: we read the slot's buffer.)
            for _ in 0..free {
                ring.set_desc_head(st.head, 0, 0, l.bsize);
                st.head = st.head.wrapping_add(1);
            }
            ring.head().store(st.head, Ordering::Release);
        }
        None => ring.tail().store(st.last, Ordering::Release),
    }
    (pkts, bytes, nombuf)
}

/// Copy `n` bytes from `src` to `dst`: frames of 16 to 256 bytes inline, 16 bytes
/// at a time (the last 16 overlapping), the rest by `memcpy`.
///
/// # Safety
/// `src` holds `n` readable bytes, `dst` room for `n`, and they do not overlap.
#[inline(always)]
unsafe fn copy_frame(dst: *mut u8, src: *const u8, n: usize) {
    if !(16..=256).contains(&n) {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
        return;
    }
    let mut i = 0;
    // SAFETY: every 16-byte access lies in `0..n` (the last one ends at `n`).
    unsafe {
        while i + 16 <= n {
            std::ptr::write_unaligned(dst.add(i).cast::<u128>(), std::ptr::read_unaligned(src.add(i).cast::<u128>()));
            i += 16;
        }
        if i < n {
            std::ptr::write_unaligned(
                dst.add(n - 16).cast::<u128>(),
                std::ptr::read_unaligned(src.add(n - 16).cast::<u128>()),
            );
        }
    }
}

/// Prefetch the buffers of `n` slots of `ring` from `slot` on: a client's own of the
/// slot (`c2s`: its TX ring, else its RX ring), those a server's descriptors name when
/// they lie inside a region.
#[inline(always)]
fn prefetch_buffers(c: &Conn, q: u16, ring: &Ring, c2s: bool, mut slot: u16, n: usize) {
    for _ in 0..n {
        match c.layout {
            Some(l) => prefetch(c.at(0, l.buffer_offset(c2s, q, slot & ring.mask))),
            None => {
                let d = ring.desc(slot);
                if d.fits(&c.sizes) {
                    prefetch(c.at(d.region, u64::from(d.offset)));
                }
            }
        }
        slot = slot.wrapping_add(1);
    }
}

/// Append `len` bytes at `src` to `v`.
///
/// # Safety
/// `src` points at `len` readable bytes.
unsafe fn extend_from(v: &mut Vec<u8>, src: *const u8, len: usize) {
    v.reserve(len);
    // SAFETY: the caller's contract for `src`; `v` has room for `len` more bytes,
    // which are initialised before the length grows.
    unsafe {
        std::ptr::copy_nonoverlapping(src, v.as_mut_ptr().add(v.len()), len);
        v.set_len(v.len() + len);
    }
}

/// The TX side of one queue over a connection.
#[derive(Debug, Default)]
pub struct TxState {
    /// Next slot to fill (our own copy of the index we move).
    pub next: u16,
}

/// Send the front of `burst` on ring `q` of `c` (the client writes C2S rings, the
/// server S2C rings); returns (packets, bytes). What does not fit stays the host's.
pub fn tx(c: &Conn, q: u16, st: &mut TxState, burst: &mut TxBurst<'_>, f: &QueueFaults) -> (u64, u64) {
    let client = c.layout;
    let rings = if client.is_some() { &c.c2s } else { &c.s2c };
    let Some(ring) = rings.get(usize::from(q)).and_then(Option::as_ref) else { return (0, 0) };
    let size = ring.size();
    let mut free = match client {
        // The client's in-flight descriptors: from the server's tail to our head.
        Some(_) => match pending(ring.tail().load(Ordering::Acquire), st.next, size) {
            Some(inflight) => size as u16 - inflight,
            None => {
                f.bad_ring_index.add(1);
                return (0, 0);
            }
        },
        // The server's room: buffers the client posted up to its head.
        None => match pending(st.next, ring.head().load(Ordering::Acquire), size) {
            Some(n) => n,
            None => {
                f.bad_ring_index.add(1);
                return (0, 0);
            }
        },
    };
    let (mut pkts, mut bytes) = (0u64, 0u64);
    let mut slot = st.next;
    let mut sent = 0usize;
    // The buffers this burst fills, fetched ahead (the peer read them last).
    prefetch_buffers(c, q, ring, true, slot, burst.len().min(usize::from(free)));
    for p in burst.packets() {
        if free == 0 {
            f.ring_full.add(1);
            break;
        }
        // The common case: one segment into one buffer.
        if p.mbuf().nb_segs == 1 {
            let data = p.data();
            let len = data.len();
            let dst = match client {
                // Our own buffer of the slot (its descriptor's offset was written
                // with the ring and is ours to trust).
                Some(l) if len <= l.bsize as usize => Some((c.at(0, l.buffer_offset(true, q, slot & ring.mask)), 0)),
                Some(_) => None,
                None => {
                    let d = ring.desc(slot);
                    (len <= d.length as usize && d.fits(&c.sizes))
                        .then(|| (c.at(d.region, u64::from(d.offset)), d.region))
                }
            };
            if let Some((dst, region)) = dst {
                // SAFETY: `dst` has room for `len` bytes inside a mapped region
                // (client: its own buffer of `bsize`; server: `fits` checked the
                // posted buffer, `len` no longer than its room).
                unsafe { copy_frame(dst, data.as_ptr(), len) };
                ring.set_desc_head(slot, 0, region, len as u32);
                slot = slot.wrapping_add(1);
                free -= 1;
                pkts += 1;
                bytes += len as u64;
                sent += 1;
                continue;
            }
        }
        match tx_chained(c, q, ring, p, &mut slot, &mut free, f) {
            Some(delivered) => {
                if delivered {
                    pkts += 1;
                    bytes += u64::from(p.len());
                }
                sent += 1;
            }
            None => {
                f.ring_full.add(1);
                break;
            }
        }
    }
    if sent > 0 {
        st.next = slot;
        if client.is_some() {
            ring.head().store(slot, Ordering::Release);
        } else {
            ring.tail().store(slot, Ordering::Release);
        }
        ring.notify();
        burst.free(sent);
    }
    (pkts, bytes)
}

/// Send `p` over as many descriptors as it needs (several segments, longer than a
/// buffer, or a posted buffer that cannot take it): `Some(true)` sent, `Some(false)`
/// dropped for a posted buffer outside the client's regions (the slot goes back
/// empty, counted), `None` no room (nothing consumed).
fn tx_chained(
    c: &Conn,
    q: u16,
    ring: &Ring,
    p: &ironpath_pmd_sdk::Packet,
    slot: &mut u16,
    free: &mut u16,
    f: &QueueFaults,
) -> Option<bool> {
    let client = c.layout;
    let (saved, saved_free) = (*slot, *free);
    // Where each descriptor's bytes go: (address, room, region).
    let open = |slot: u16| -> Option<(*mut u8, usize, u16)> {
        match client {
            Some(l) => Some((c.at(0, l.buffer_offset(true, q, slot & ring.mask)), l.bsize as usize, 0)),
            None => {
                let d = ring.desc(slot);
                (d.length > 0 && d.fits(&c.sizes))
                    .then(|| (c.at(d.region, u64::from(d.offset)), d.length as usize, d.region))
            }
        }
    };
    // The descriptor being filled: (address, room, used, region).
    let mut cur: Option<(*mut u8, usize, usize, u16)> = None;
    let mut segs = p.segments().peekable();
    let mut left: &[u8] = &[];
    loop {
        if left.is_empty() {
            match segs.next() {
                Some(s) => left = s,
                None => break,
            }
            continue;
        }
        let (dst, room, used, region) = match cur {
            Some(x) if x.2 < x.1 => x,
            other => {
                if let Some((_, _, used, region)) = other {
                    ring.set_desc_head(*slot, DESC_FLAG_NEXT, region, used as u32);
                    *slot = slot.wrapping_add(1);
                }
                if *free == 0 {
                    *slot = saved;
                    *free = saved_free;
                    return None;
                }
                *free -= 1;
                match open(*slot) {
                    Some((dst, room, region)) => (dst, room, 0, region),
                    None => {
                        // A posted buffer outside the client's regions: give the
                        // slot back empty and drop the packet.
                        f.bad_desc.add(1);
                        let d = ring.desc_head(*slot);
                        ring.set_desc_head(*slot, 0, d.region, 0);
                        *slot = slot.wrapping_add(1);
                        return Some(false);
                    }
                }
            }
        };
        let n = left.len().min(room - used);
        // SAFETY: `dst` has `room` writable bytes inside a mapped region (client: its
        // own buffer; server: checked by `fits`), and `used + n <= room`.
        unsafe { std::ptr::copy_nonoverlapping(left.as_ptr(), dst.add(used), n) };
        left = &left[n..];
        cur = Some((dst, room, used + n, region));
    }
    match cur {
        Some((_, _, used, region)) => ring.set_desc_head(*slot, 0, region, used as u32),
        None => {
            // An empty packet: one empty descriptor.
            if *free == 0 {
                return None;
            }
            *free -= 1;
            let region = ring.desc_head(*slot).region;
            ring.set_desc_head(*slot, 0, if client.is_some() { 0 } else { region }, 0);
        }
    }
    *slot = slot.wrapping_add(1);
    Some(true)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::notify::{Doorbell, Wake};
    use crate::proto::ring_bytes;
    use crate::sys;
    use ironpath_pmd_sdk::testing::TestPool;
    use ironpath_pmd_sdk::{Packet, RxBurst};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::time::Duration;

    /// A server's connection with one S2C ring of 16 slots whose client posted every
    /// buffer and asks for interrupts (flags 0), signalled through `bell`.
    pub(crate) fn server_conn(bell: Doorbell) -> Conn {
        let log2 = 4;
        let size = ring_bytes(log2) + 16 * 2048;
        let fd = sys::memfd(c"ring-test", size).unwrap();
        let map = Mapping::new(&fd, size).unwrap();
        // SAFETY: offset 0, the whole ring inside the mapping, which the connection keeps.
        let r = unsafe { Ring::new(&map, 0, log2, Some(bell)) };
        for i in 0..16u16 {
            let offset = (ring_bytes(log2) + u64::from(i) * 2048) as u32;
            r.set_desc(i, Desc { flags: 0, region: 0, length: 2048, offset, metadata: 0 });
        }
        r.flags().store(0, Ordering::Relaxed);
        r.head().store(16, Ordering::Relaxed);
        r.tail().store(0, Ordering::Relaxed);
        Conn { c2s: vec![None], s2c: vec![Some(r)], sizes: vec![size], layout: None, regions: vec![map] }
    }

    /// A blocking pipe's write end whose pipe is full (any write(2) to it would wait),
    /// and the bytes queued in it.
    fn full_pipe() -> (OwnedFd, OwnedFd, i32) {
        let mut p = [0; 2];
        // SAFETY: pipe2 fills two descriptors we then own.
        assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) }, 0);
        // SAFETY: as above.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) };
        let chunk = [0u8; 4096];
        // SAFETY: writes from a live buffer until the pipe is full (EAGAIN).
        while unsafe { libc::write(w.as_raw_fd(), chunk.as_ptr().cast(), chunk.len()) } > 0 {}
        // SAFETY: clears O_NONBLOCK on our own descriptor: from now on a write waits.
        assert_eq!(unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETFL, 0) }, 0);
        (r, w, queued(&p[0]))
    }

    fn queued(fd: &i32) -> i32 {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int.
        assert_eq!(unsafe { libc::ioctl(*fd, libc::FIONREAD, &mut n) }, 0);
        n
    }

    fn readable(fd: i32) -> bool {
        sys::poll(&[fd], 0)[0]
    }

    #[test]
    fn tx_with_interrupts_wanted_never_touches_the_peers_descriptor() {
        // The peer's interrupt descriptor is one a write(2) would wait on forever: a
        // full blocking pipe (refused at ADD_RING, but the queue must not rely on
        // that), then a blocking eventfd at its maximum.
        for pipe in [true, false] {
            let (done_tx, done_rx) = std::sync::mpsc::channel();
            let t = std::thread::spawn(move || {
                let (pr, peer, before) = if pipe {
                    let (r, w, n) = full_pipe();
                    (Some(r), w, n)
                } else {
                    (None, sys::tests::saturated_eventfd(), 0)
                };
                let wake = Wake::new().unwrap();
                let conn = server_conn(Doorbell::new(peer, wake.clone()));
                let tp = TestPool::new(32, 2048, 128);
                let mut raw: Vec<_> = (0..4).map(|_| tp.packet(&[0xab; 60]).into_raw()).collect();
                // SAFETY: each pointer is a packet we own, handed over to the burst.
                let mut burst = unsafe { TxBurst::new(&mut raw) };
                let (mut st, f) = (TxState::default(), QueueFaults::default());
                let (pkts, _) = tx(&conn, 0, &mut st, &mut burst, &f);
                // Twice: the second burst finds the doorbell already marked.
                let mut raw2: Vec<_> = (0..2).map(|_| tp.packet(&[0xcd; 60]).into_raw()).collect();
                // SAFETY: as above.
                let mut burst2 = unsafe { TxBurst::new(&mut raw2) };
                let (pkts2, _) = tx(&conn, 0, &mut st, &mut burst2, &f);
                let ring = conn.s2c[0].as_ref().unwrap();
                let wanted = ring.doorbell().unwrap().is_wanted();
                let after = pr.as_ref().map_or(0, |r| queued(&r.as_raw_fd()));
                let _ = done_tx.send((pkts + pkts2, wanted, readable(wake.fd()), before, after, tp.in_use()));
            });
            // A queue that wrote to the peer's descriptor would never answer.
            let (pkts, wanted, woken, before, after, in_use) =
                done_rx.recv_timeout(Duration::from_secs(5)).expect("the TX path blocked on the peer's descriptor");
            t.join().unwrap();
            assert_eq!((pkts, in_use), (6, 0), "sent and freed");
            assert!(wanted && woken, "the interrupt is asked of the control thread");
            assert_eq!(before, after, "nothing written to the peer's pipe");
        }
    }

    /// A server's connection with one C2S ring of 512 slots, each with a 64-byte
    /// buffer, none posted yet (the test plays the client).
    fn server_rx_conn() -> Conn {
        let log2 = 9;
        let size = ring_bytes(log2) + 512 * 64;
        let fd = sys::memfd(c"rx-test", size).unwrap();
        let map = Mapping::new(&fd, size).unwrap();
        // SAFETY: offset 0, the whole ring inside the mapping, which the connection keeps.
        let r = unsafe { Ring::new(&map, 0, log2, None) };
        r.head().store(0, Ordering::Relaxed);
        r.tail().store(0, Ordering::Relaxed);
        Conn { c2s: vec![Some(r)], s2c: vec![None], sizes: vec![size], layout: None, regions: vec![map] }
    }

    /// The client posts `n` descriptors of 60 bytes from slot `from`, all flagged NEXT
    /// but the last when `end`.
    fn post_chain(c: &Conn, from: u16, n: u16, end: bool) {
        let r = c.c2s[0].as_ref().unwrap();
        for k in 0..n {
            let i = from.wrapping_add(k);
            let offset = (ring_bytes(9) + u64::from(i & 511) * 64) as u32;
            let flags = if end && k + 1 == n { 0 } else { DESC_FLAG_NEXT };
            r.set_desc(i, Desc { flags, region: 0, length: 60, offset, metadata: 0 });
        }
        r.head().store(from.wrapping_add(n), Ordering::Release);
    }

    /// A chain the peer never finishes costs a burst at most MAX_CHAIN descriptors:
    /// one longer than that is dropped (its first MAX_CHAIN consumed), one shorter
    /// waits, unread, until its end comes; then it is one packet.
    #[test]
    fn a_chain_is_bounded_and_an_unfinished_one_waits_unread() {
        let c = server_rx_conn();
        let tp = TestPool::new(256, 2048, 128);
        let pool = tp.pool();
        let f = QueueFaults::default();
        let mut st = RxState::default();
        let mut scratch = Vec::new();
        let mut rx_now = |st: &mut RxState| {
            let mut slots = vec![std::ptr::null_mut(); 32];
            let mut burst = RxBurst::new(&mut slots, 0);
            let (p, b, _) = rx(&c, 0, st, &mut burst, &pool, &f, &mut scratch);
            let n = burst.len();
            // SAFETY: the first `n` slots hold packets the burst received, now ours.
            drop(slots[..n].iter().map(|&m| unsafe { Packet::from_raw(m) }).collect::<Vec<_>>());
            (p, b)
        };
        // 300 descriptors, all NEXT: too long; the first MAX_CHAIN go, the rest waits.
        post_chain(&c, 0, 300, false);
        assert_eq!(rx_now(&mut st), (0, 0));
        assert_eq!((st.last, f.bad_desc.get()), (MAX_CHAIN as u16, 1));
        assert_eq!(rx_now(&mut st), (0, 0), "44 left, unfinished: nothing consumed");
        assert_eq!((st.last, f.bad_desc.get()), (MAX_CHAIN as u16, 1));
        // The peer ends that chain: 45 descriptors of 60 bytes, one packet.
        post_chain(&c, 300, 1, true);
        assert_eq!(rx_now(&mut st), (1, 45 * 60));
        assert_eq!(st.last, 301);
        assert_eq!(tp.in_use(), 0);
    }
}
