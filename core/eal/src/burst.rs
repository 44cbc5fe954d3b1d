//! [`Burst`]: a fixed-capacity array of owned packets, the unit of work on the fast
//! path. Receiving fills it, transmitting drains it from the front, dropping it frees
//! what is left. It gives safe access to each packet's header and first-segment data,
//! so forwarding engines and graph nodes need no `unsafe`.

use crate::mbuf::{free_bulk_raw, reset_raw};
use crate::mempool::Mempool;
use crate::port::{RxQ, TxQ};
use crate::Mbuf;
use ironpath_abi as abi;
use ironpath_abi::Mbuf as RawMbuf;
use std::mem::MaybeUninit;
use std::sync::atomic::Ordering;

/// Most packets a burst holds (as a graph frame).
pub const MAX_BURST: usize = 256;

/// Owned packets, at most [`MAX_BURST`].
pub struct Burst {
    pkts: [*mut RawMbuf; MAX_BURST],
    len: usize,
}

// SAFETY: the burst owns one reference to each packet it holds.
unsafe impl Send for Burst {}

impl Default for Burst {
    fn default() -> Self {
        Self::new()
    }
}

impl AsMut<Burst> for Burst {
    fn as_mut(&mut self) -> &mut Burst {
        self
    }
}

impl Drop for Burst {
    fn drop(&mut self) {
        self.free_all();
    }
}

impl Burst {
    /// An empty burst.
    pub const fn new() -> Self {
        Self { pkts: [std::ptr::null_mut(); MAX_BURST], len: 0 }
    }

    /// Number of packets.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Free slots.
    #[inline(always)]
    pub fn room(&self) -> usize {
        MAX_BURST - self.len
    }

    /// Receive up to `max` packets from `q`, appended; returns how many.
    #[inline(always)]
    pub fn rx(&mut self, q: &RxQ, max: usize) -> usize {
        let end = (self.len + max).min(MAX_BURST);
        let n = q.rx_burst(&mut self.pkts[self.len..end]);
        self.len += n;
        n
    }

    /// Send packets from the front to `q`; the ones sent leave the burst, the rest
    /// move to the front. Returns how many were sent.
    #[inline(always)]
    pub fn tx(&mut self, q: &TxQ) -> usize {
        if self.len == 0 {
            return 0;
        }
        let n = q.tx_burst(&mut self.pkts[..self.len]);
        if n < self.len {
            self.pkts.copy_within(n..self.len, 0);
        }
        self.len -= n;
        n
    }

    /// Free every packet.
    #[inline(always)]
    pub fn free_all(&mut self) {
        if self.len > 0 {
            // SAFETY: we own one reference to each of these packets.
            unsafe { free_bulk_raw(&self.pkts[..self.len]) };
            self.len = 0;
        }
    }

    /// Allocate `n` reset packets from `pool` and append them, all or nothing.
    #[inline(always)]
    pub fn alloc(&mut self, pool: &Mempool, n: usize) -> Result<(), crate::MempoolError> {
        let n = n.min(self.room());
        pool.alloc_bulk_raw(&mut self.pkts[self.len..self.len + n])?;
        self.len += n;
        Ok(())
    }

    /// Append a packet; gives it back if the burst is full.
    pub fn push(&mut self, m: Mbuf) -> Result<(), Mbuf> {
        if self.len == MAX_BURST {
            return Err(m);
        }
        self.pkts[self.len] = m.into_raw();
        self.len += 1;
        Ok(())
    }

    /// Remove and return packet `i` (the last packet takes its place).
    pub fn swap_remove(&mut self, i: usize) -> Option<Mbuf> {
        if i >= self.len {
            return None;
        }
        let p = self.pkts[i];
        self.len -= 1;
        self.pkts[i] = self.pkts[self.len];
        // SAFETY: we owned this packet and no longer list it.
        Some(unsafe { Mbuf::from_raw(p) })
    }

    /// Keep only the packets for which `f` returns true (in order); free the others.
    /// Returns how many were freed.
    #[inline]
    pub fn retain(&mut self, mut f: impl FnMut(&RawMbuf, &[u8]) -> bool) -> usize {
        let mut keep = 0;
        let mut dropped = [std::ptr::null_mut::<RawMbuf>(); MAX_BURST];
        let mut nd = 0;
        for i in 0..self.len {
            let p = self.pkts[i];
            if f(self.header(i), self.data(i)) {
                self.pkts[keep] = p;
                keep += 1;
            } else {
                dropped[nd] = p;
                nd += 1;
            }
        }
        self.len = keep;
        if nd > 0 {
            // SAFETY: we owned these packets and no longer list them.
            unsafe { free_bulk_raw(&dropped[..nd]) };
        }
        nd
    }

    /// Header of packet `i` (read-only). Panics if `i >= len()`.
    #[inline(always)]
    pub fn header(&self, i: usize) -> &RawMbuf {
        assert!(i < self.len);
        // SAFETY: a packet we own.
        unsafe { &*self.pkts[i] }
    }

    /// Header of packet `i` for writing metadata (offload flags, lengths for offloads,
    /// port, ...). Panics if `i >= len()`.
    #[inline(always)]
    pub fn header_mut(&mut self, i: usize) -> &mut RawMbuf {
        assert!(i < self.len);
        // SAFETY: a packet we own, borrowed mutably through `self`.
        unsafe { &mut *self.pkts[i] }
    }

    /// First-segment data of packet `i`. Panics if `i >= len()`.
    #[inline(always)]
    pub fn data(&self, i: usize) -> &[u8] {
        let h = self.header(i);
        // SAFETY: the data range lies inside the segment's buffer.
        unsafe { std::slice::from_raw_parts(h.buf_addr.add(h.data_off as usize), h.data_len as usize) }
    }

    /// Every segment's data of packet `i`, in order. Panics if `i >= len()`.
    pub fn segments(&self, i: usize) -> impl Iterator<Item = &[u8]> + '_ {
        let mut seg: *const RawMbuf = self.header(i);
        std::iter::from_fn(move || {
            if seg.is_null() {
                return None;
            }
            // SAFETY: a segment of a packet we own (the chain is ours with the head);
            // `next` is NULL at the end of the chain.
            let h = unsafe { &*seg };
            seg = h.next;
            // SAFETY: the data range lies inside the segment's buffer.
            Some(unsafe { std::slice::from_raw_parts(h.buf_addr.add(h.data_off as usize), h.data_len as usize) })
        })
    }

    /// Total length of packet `i` (all segments). Panics if `i >= len()`.
    #[inline(always)]
    pub fn pkt_len(&self, i: usize) -> usize {
        self.header(i).pkt_len as usize
    }

    /// Call `f` with the first-segment data of every packet that is not shared, in
    /// order, prefetching the data of the packet `PREFETCH_AHEAD` places further.
    /// The fast loop for engines and nodes that rewrite headers in place.
    #[inline(always)]
    pub fn for_each_data_mut(&mut self, mut f: impl FnMut(&mut [u8])) {
        const PREFETCH_AHEAD: usize = 4;
        let pkts = &self.pkts[..self.len];
        let mut one = |p: *mut RawMbuf| {
            // SAFETY: a packet we own.
            let h = unsafe { &*p };
            if h.refcnt.load(Ordering::Acquire) == 1 && h.ol_flags & (abi::IND_ATTACHED | abi::EXT_ATTACHED) == 0 {
                // SAFETY: exclusively owned data inside the segment's buffer; the slice
                // lives only for the call.
                f(unsafe { std::slice::from_raw_parts_mut(h.buf_addr.add(h.data_off as usize), h.data_len as usize) });
            }
        };
        // The packets with one PREFETCH_AHEAD places on, then the last few (no test
        // a packet for whether it has one).
        let (head, tail) = pkts.split_at(pkts.len().saturating_sub(PREFETCH_AHEAD));
        for (&p, &ahead) in head.iter().zip(&pkts[pkts.len() - head.len()..]) {
            prefetch_pkt_data(ahead);
            one(p);
        }
        tail.iter().for_each(|&p| one(p));
    }

    /// Swap the Ethernet destination and source addresses of every packet whose
    /// first segment is not shared (testpmd's `macswap`, a reflector's turn-around);
    /// a frame shorter than the two (12 bytes) is left as it is, and counted: the
    /// result. Where the CPU has SSSE3 (detected at run time) a frame of 16 bytes or
    /// more takes one 16-byte load, byte shuffle and store; else, and for 12 to 15
    /// bytes, [`ironpath_wire::ethernet::swap_addresses`] (two loads and stores in
    /// registers).
    #[inline(always)]
    pub fn swap_mac_addresses(&mut self) -> usize {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("ssse3") {
            // SAFETY: the CPU has SSSE3 (detected just above).
            return unsafe { self.swap_mac_addresses_ssse3() };
        }
        self.swap_mac_addresses_scalar()
    }

    /// [`Burst::swap_mac_addresses`] without SIMD (the fallback, tested against it).
    #[inline(always)]
    pub fn swap_mac_addresses_scalar(&mut self) -> usize {
        let mut short = 0;
        self.for_each_data_mut(|d| short += usize::from(!ironpath_wire::ethernet::swap_addresses(d)));
        short
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "ssse3")]
    fn swap_mac_addresses_ssse3(&mut self) -> usize {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_setr_epi8, _mm_shuffle_epi8, _mm_storeu_si128};
        // Byte i of the result is byte `swap[i]` of the frame: source, destination, rest.
        let swap = _mm_setr_epi8(6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5, 12, 13, 14, 15);
        let mut short = 0;
        self.for_each_data_mut(|d| match d.first_chunk_mut::<16>() {
            Some(h) => {
                let p = h.as_mut_ptr().cast::<__m128i>();
                // SAFETY: `p` is 16 writable bytes (`h`); both accesses are unaligned ones.
                unsafe { _mm_storeu_si128(p, _mm_shuffle_epi8(_mm_loadu_si128(p), swap)) };
            }
            None => short += usize::from(!ironpath_wire::ethernet::swap_addresses(d)),
        });
        short
    }

    /// Hint the CPU to load the first data cache line of packet `i` (no-op when out
    /// of range). Engines call it a few packets ahead of the one they work on.
    #[inline(always)]
    pub fn prefetch_data(&self, i: usize) {
        if i < self.len {
            prefetch_pkt_data(self.pkts[i]);
        }
    }

    /// First-segment data of packet `i` for writing, or `None` when the packet's data
    /// is shared (refcount > 1, indirect or external). Panics if `i >= len()`.
    #[inline(always)]
    pub fn data_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        let h = self.header(i);
        if h.refcnt.load(Ordering::Acquire) != 1 || h.ol_flags & (abi::IND_ATTACHED | abi::EXT_ATTACHED) != 0 {
            return None;
        }
        // SAFETY: exclusively owned data inside the segment's buffer.
        Some(unsafe { std::slice::from_raw_parts_mut(h.buf_addr.add(h.data_off as usize), h.data_len as usize) })
    }

    /// Make packet `i` a one-segment packet of `len` bytes (fresh packets from
    /// [`Burst::alloc`]); returns its data for writing, or `None` if `len` does not
    /// fit the buffer or the packet is shared.
    #[inline(always)]
    pub fn set_len(&mut self, i: usize, len: usize) -> Option<&mut [u8]> {
        let h = self.header_mut(i);
        if h.nb_segs == 1 && h.data_off as usize + len <= h.buf_len as usize {
            h.data_len = len as u16;
            h.pkt_len = len as u32;
            self.data_mut(i)
        } else {
            None
        }
    }

    /// Reset packet `i` to an empty packet with the pool's headroom.
    pub fn reset(&mut self, i: usize) {
        let h = self.header(i);
        // SAFETY: `pool` of a host mbuf is a live pool.
        let headroom = unsafe { (*h.pool).headroom };
        let p = self.pkts[i];
        // SAFETY: a packet we own; its chain tail (if any) is freed first.
        unsafe {
            if (*p).nb_segs != 1 {
                crate::mbuf::free_segs_raw((*p).next);
                (*p).next = std::ptr::null_mut();
            }
            reset_raw(p, headroom);
        }
    }

    /// Hand every packet to the burst its tag names (`tags[i]` for packet `i`,
    /// an index into `outs`), keeping their order within each output; packets with
    /// a tag outside `outs`, and packets whose output is full, are freed. The burst
    /// ends empty. Returns how many were freed. Panics if `tags` is shorter than
    /// the burst. (VPP's "enqueue to next" for a vector with per-packet nexts.)
    #[inline]
    pub fn distribute<B: AsMut<Burst>>(&mut self, tags: &[u16], outs: &mut [B]) -> usize {
        let n = self.len;
        let tags = &tags[..n];
        // Packets to free are gathered at the front of our own array (slot `nd` is
        // always at or before the one being read), so no second array is needed on
        // the stack of this hot, inlined function.
        let mut nd = 0;
        if outs.len() <= PACKED_OUTS && outs.iter_mut().all(|o| o.as_mut().len == 0) {
            // The engine's case: a few empty outputs. Their lengths live in 9-bit
            // fields of one register (a burst holds at most 256 packets, so no field
            // overflows into the next), so packets in a row to one output do not
            // each wait for the store of its length.
            let mut lens = 0u64;
            for (i, &tag) in tags.iter().enumerate() {
                let p = self.pkts[i];
                match outs.get_mut(tag as usize) {
                    Some(o) => {
                        let shift = PACKED_BITS * u32::from(tag);
                        o.as_mut().pkts[(lens >> shift) as usize & PACKED_MASK] = p;
                        lens += 1 << shift;
                    }
                    None => {
                        self.pkts[nd] = p;
                        nd += 1;
                    }
                }
            }
            for (k, o) in outs.iter_mut().enumerate() {
                o.as_mut().len = (lens >> (PACKED_BITS * k as u32)) as usize & PACKED_MASK;
            }
            self.len = 0;
            if nd > 0 {
                // SAFETY: we owned these packets and no longer list them.
                unsafe { free_bulk_raw(&self.pkts[..nd]) };
            }
            return nd;
        }
        for (i, &tag) in tags.iter().enumerate() {
            let p = self.pkts[i];
            match outs.get_mut(tag as usize).map(AsMut::as_mut) {
                Some(o) if o.len < MAX_BURST => {
                    o.pkts[o.len] = p;
                    o.len += 1;
                }
                _ => {
                    self.pkts[nd] = p;
                    nd += 1;
                }
            }
        }
        self.len = 0;
        if nd > 0 {
            // SAFETY: we owned these packets and no longer list them.
            unsafe { free_bulk_raw(&self.pkts[..nd]) };
        }
        nd
    }

    /// Raw pointers of the packets (read-only view, e.g. to enqueue them to a ring
    /// and then `consume_front` the ones taken).
    #[inline(always)]
    pub(crate) fn as_ptrs(&self) -> &[*mut RawMbuf] {
        &self.pkts[..self.len]
    }

    /// Forget the first `n` packets because their ownership moved elsewhere (a ring
    /// took them through [`Burst::as_ptrs`]); the rest move to the front.
    ///
    /// # Safety
    /// The caller must have handed ownership of exactly these `n` packets to someone
    /// else; otherwise they leak (or, worse, are used twice).
    #[inline(always)]
    pub(crate) unsafe fn consume_front(&mut self, n: usize) {
        let n = n.min(self.len);
        self.pkts.copy_within(n..self.len, 0);
        self.len -= n;
    }

    /// Append up to `room()` packets produced by `f`, which fills the slice it is
    /// given and returns how many it wrote (e.g. a ring dequeue).
    ///
    /// # Safety
    /// Every pointer `f` writes (within the count it returns) must be a packet whose
    /// ownership passes to the burst.
    #[inline(always)]
    pub(crate) unsafe fn fill_with(&mut self, max: usize, f: impl FnOnce(&mut [*mut RawMbuf]) -> usize) -> usize {
        let end = (self.len + max).min(MAX_BURST);
        let n = f(&mut self.pkts[self.len..end]).min(end - self.len);
        self.len += n;
        n
    }

    /// Take every packet out as an owned [`Mbuf`], in order; the burst ends empty.
    /// Packets the iterator has not yielded when it is dropped are freed. For nodes
    /// that keep some packets (held until an address resolves) and push others back.
    /// (The iterator holds its own pointer array, of which only the packets are
    /// written; a hot loop may still prefer [`Burst::take_into`].)
    #[inline]
    pub fn drain(&mut self) -> Drain {
        // Not `self.pkts` whole: a 2 KiB copy per call showed as a third of an idle
        // HTTP server's time (the tcp node drains its input on every walk).
        let mut d = Drain { pkts: [MaybeUninit::uninit(); MAX_BURST], len: self.len, pos: 0 };
        for (dst, &p) in d.pkts.iter_mut().zip(&self.pkts[..self.len]) {
            dst.write(p);
        }
        self.len = 0;
        d
    }

    /// Move every packet, in order, to the end of `v` as owned [`Mbuf`]s; the
    /// burst ends empty. Copies only the pointers in use.
    #[inline]
    pub fn take_into(&mut self, v: &mut Vec<Mbuf>) {
        // SAFETY: the burst owns one reference to each of its packets and gives it
        // to the handle (the burst is emptied below, so none is used twice).
        v.extend(self.pkts[..self.len].iter().map(|&p| unsafe { Mbuf::from_raw(p) }));
        self.len = 0;
    }

    /// Move the first `max` packets (at most as many as fit) to the end of `other`;
    /// returns how many moved.
    #[inline]
    pub fn move_front_to(&mut self, other: &mut Burst, max: usize) -> usize {
        let n = self.len.min(other.room()).min(max);
        other.pkts[other.len..other.len + n].copy_from_slice(&self.pkts[..n]);
        other.len += n;
        if n < self.len {
            self.pkts.copy_within(n..self.len, 0);
        }
        self.len -= n;
        n
    }

    /// Another reference to packet `i` ([`Mbuf::share`]): the packet stays in the burst,
    /// read-only while the reference lives.
    pub fn share(&self, i: usize) -> Mbuf {
        assert!(i < self.len, "packet {i} of a burst of {}", self.len);
        // SAFETY: the burst owns a reference to packet i; `from_raw` takes a second one
        // for the duration of `share` only (forgotten right after).
        let m = std::mem::ManuallyDrop::new(unsafe { Mbuf::from_raw(self.pkts[i]) });
        m.share()
    }

    /// Move all packets to `other` (as many as fit); returns how many moved.
    #[inline]
    pub fn move_to(&mut self, other: &mut Burst) -> usize {
        let n = self.len.min(other.room());
        if other.len == 0 && n == self.len {
            // The common case (a whole frame to an empty one).
            copy_ptrs(&mut other.pkts, &self.pkts, n);
            other.len = n;
            self.len = 0;
            return n;
        }
        other.pkts[other.len..other.len + n].copy_from_slice(&self.pkts[..n]);
        other.len += n;
        if n < self.len {
            self.pkts.copy_within(n..self.len, 0);
        }
        self.len -= n;
        n
    }
}

/// [`Burst::distribute`]'s register-held lengths: bits per output (0..=256 fit),
/// their mask, and how many outputs one `u64` holds.
const PACKED_BITS: u32 = 9;
const PACKED_MASK: usize = (1 << PACKED_BITS) - 1;
const PACKED_OUTS: usize = 64 / PACKED_BITS as usize;
const _: () = assert!(MAX_BURST <= PACKED_MASK);

/// Copy the first `n` pointers of `src` to the start of `dst` in fixed blocks of 8
/// (two vector moves each, inlined), rounding up: the slots past `n` hold no
/// owned packet, so copying stale values there is harmless. A variable-length
/// `copy_from_slice` here would be a call to `memmove` per frame.
#[inline(always)]
fn copy_ptrs(dst: &mut [*mut RawMbuf; MAX_BURST], src: &[*mut RawMbuf; MAX_BURST], n: usize) {
    const B: usize = 8;
    let mut k = 0;
    while k < n {
        let d: &mut [*mut RawMbuf; B] = (&mut dst[k..k + B]).try_into().expect("MAX_BURST is a multiple of 8");
        d.copy_from_slice(&src[k..k + B]);
        k += B;
    }
}

/// Packets taken out of a [`Burst`] by [`Burst::drain`].
pub struct Drain {
    /// Entries `..len` are initialised.
    pkts: [MaybeUninit<*mut RawMbuf>; MAX_BURST],
    len: usize,
    pos: usize,
}

impl Iterator for Drain {
    type Item = Mbuf;

    fn next(&mut self) -> Option<Mbuf> {
        if self.pos == self.len {
            return None;
        }
        // SAFETY: pos < len, and entries below len were written by `drain`.
        let p = unsafe { self.pkts[self.pos].assume_init() };
        self.pos += 1;
        // SAFETY: the burst gave us its reference to each packet; each is yielded once.
        Some(unsafe { Mbuf::from_raw(p) })
    }
}

impl Drop for Drain {
    fn drop(&mut self) {
        if self.pos < self.len {
            let rest = &self.pkts[self.pos..self.len];
            // SAFETY: entries below len are initialised (`drain`), and
            // `MaybeUninit<T>` has the layout of `T`; the packets not yielded are
            // still owned by us.
            unsafe { free_bulk_raw(std::slice::from_raw_parts(rest.as_ptr().cast::<*mut RawMbuf>(), rest.len())) };
        }
    }
}

/// Hint the CPU to load the cache line holding `*r` (a lookup table slot a few
/// packets ahead of the one being worked on). Never faults; no effect off x86_64.
#[inline(always)]
pub fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, whatever the address; `r` is a live reference.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((r as *const T).cast::<i8>())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

/// Prefetch the first data cache line of a packet we own.
#[inline(always)]
fn prefetch_pkt_data(p: *mut RawMbuf) {
    // SAFETY: `p` is a packet the burst owns; we only compute an address inside its
    // buffer.
    let a = unsafe { (*p).buf_addr.add((*p).data_off as usize) };
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(a as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = a;
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::{MemPolicy, MempoolConfig};
    use ironpath_util::testing::XorShift;

    /// A 64-object pool and a burst of `n` 60-byte packets whose first byte is their index.
    fn numbered(n: usize) -> (Mempool, Burst) {
        let p = Mempool::create(&MempoolConfig::new("b", 64).cache_size(0).policy(MemPolicy::NoHuge)).unwrap();
        let mut b = Burst::new();
        b.alloc(&p, n).unwrap();
        for i in 0..n {
            b.set_len(i, 60).unwrap()[0] = i as u8;
        }
        (p, b)
    }

    #[test]
    fn drain_yields_in_order_and_frees_what_it_did_not_yield() {
        let (p, mut b) = numbered(5);
        let mut d = b.drain();
        assert!(b.is_empty());
        let first: Vec<Mbuf> = d.by_ref().take(2).collect();
        assert_eq!((first[0].data()[0], first[1].data()[0]), (0, 1));
        assert_eq!(p.stats().in_use, 5);
        drop(d); // the three not yielded go home
        assert_eq!(p.stats().in_use, 2);
        drop(first);
        assert_eq!(p.stats().in_use, 0);
        // An empty burst drains to nothing.
        assert_eq!(b.drain().count(), 0);
    }

    #[test]
    fn alloc_write_retain_and_free() {
        let (p, mut b) = numbered(10);
        assert_eq!(b.data(3)[0], 3);
        let freed = b.retain(|_, d| d[0] % 2 == 0);
        assert_eq!((freed, b.len()), (5, 5));
        assert_eq!(b.data(1)[0], 2);
        let m = b.swap_remove(0).unwrap();
        let s = m.share();
        b.push(m).unwrap();
        let last = b.len() - 1;
        assert!(b.data_mut(last).is_none(), "shared data is read-only");
        drop(s);
        assert!(b.data_mut(last).is_some());
        assert!(b.set_len(0, 5000).is_none());
        let mut other = Burst::new();
        assert_eq!(b.move_to(&mut other), 5);
        drop(other);
        drop(b);
        assert_eq!(p.stats().in_use, 0);
    }

    /// Freeing a burst hands each packet back to its own pool whatever the mix (runs of
    /// plain packets of one pool, broken anywhere by another pool's, a shared packet,
    /// a chain or an indirect clone), and a packet another handle shares is left to
    /// it, intact.
    #[test]
    fn free_all_returns_every_kind_of_packet_to_its_pool() {
        let pool = |name: &str, data_room: u16| {
            Mempool::create(&MempoolConfig::new(name, 512).cache_size(0).data_room(data_room).policy(MemPolicy::NoHuge))
                .unwrap()
        };
        let (a, b, c) = (pool("fa", 2048), pool("fb", 2048), pool("fc", 128 + 100));
        let mut rng = XorShift(11);
        for round in 0..300 {
            let mut burst = Burst::new();
            let mut held = Vec::new();
            let n = rng.below(41) as usize;
            for i in 0..n {
                let kind = rng.below(if round % 2 == 0 { 2 } else { 9 });
                let data = [(round + i) as u8; 60];
                let m = match kind {
                    0 | 2 | 3 => Mbuf::from_slice(&a, &data).unwrap(),
                    1 | 4 => Mbuf::from_slice(&b, &data).unwrap(),
                    5 => Mbuf::from_slice(&c, &[(round + i) as u8; 250]).unwrap(),
                    // Headers of `b` over a buffer of `a` (freed with the clone).
                    6 => Mbuf::from_slice(&a, &data).unwrap().clone_indirect(&b).unwrap(),
                    _ => {
                        let m = Mbuf::from_slice(&a, &data).unwrap();
                        held.push((m.share(), data.to_vec()));
                        m
                    }
                };
                assert!(burst.push(m).is_ok());
            }
            burst.free_all();
            assert!(burst.is_empty());
            assert_eq!(a.in_use() as usize, held.len(), "round {round}: the shared packets stay");
            assert_eq!((b.in_use(), c.in_use()), (0, 0), "round {round}");
            for (m, want) in &held {
                assert_eq!(&m.to_vec(), want, "round {round}: a shared packet is intact");
            }
            drop(held);
            assert_eq!(a.in_use(), 0, "round {round}");
        }
    }

    /// The SIMD swap (where the CPU has it) and the scalar one do the same to frames
    /// of every length around 12 and 16 bytes, and leave shared packets alone.
    #[test]
    fn mac_swaps_agree_and_skip_shared_packets() {
        let p = Mempool::create(&MempoolConfig::new("s", 128).cache_size(0).policy(MemPolicy::NoHuge)).unwrap();
        let (mut a, mut b) = (Burst::new(), Burst::new());
        a.alloc(&p, 40).unwrap();
        b.alloc(&p, 40).unwrap();
        for i in 0..40 {
            let len = i % 20 + 1;
            for x in [&mut a, &mut b] {
                let d = x.set_len(i, len).unwrap();
                d.iter_mut().enumerate().for_each(|(j, v)| *v = (i * 31 + j) as u8);
            }
        }
        let before: Vec<Vec<u8>> = (0..40).map(|i| a.data(i).to_vec()).collect();
        // Shared: one frame the SIMD path would take (16 bytes), one the register
        // swap would (13).
        let held = [a.share(15), a.share(12)];
        // Frames of 1 to 11 bytes are short: 22 of the 40, none of them shared.
        assert_eq!(a.swap_mac_addresses(), 22);
        assert_eq!(b.swap_mac_addresses_scalar(), 22);
        for (i, f) in before.iter().enumerate() {
            let mut want = f.clone();
            if f.len() >= 12 {
                want[..12].rotate_left(6);
            }
            assert_eq!(b.data(i), &want[..], "scalar, frame {i} of {} bytes", f.len());
            if i == 15 || i == 12 {
                assert_eq!(a.data(i), &f[..], "shared frame {i} of {} bytes is left alone", f.len());
            } else {
                assert_eq!(a.data(i), &want[..], "frame {i} of {} bytes", f.len());
            }
        }
        drop(held);
    }

    /// `distribute` against a model: each output receives its packets in order,
    /// whatever tag is out of range is freed; with few empty outputs (lengths held
    /// in a register) and with many or partly filled ones.
    #[test]
    fn distribute_matches_a_model() {
        let p = Mempool::create(&MempoolConfig::new("d", 1024).cache_size(0).policy(MemPolicy::NoHuge)).unwrap();
        let mut rng = XorShift(7);
        let mut rnd = |m: u64| rng.below(m);
        for round in 0..200 {
            let outputs = 1 + rnd(10) as usize;
            let n = [0, 1, 31, 32, 255, MAX_BURST][round % 6].min(MAX_BURST);
            let prefill = if round % 3 == 0 { rnd(4) as usize } else { 0 };
            let mut outs: Vec<Box<Burst>> = (0..outputs).map(|_| Box::new(Burst::new())).collect();
            let mut model: Vec<Vec<u16>> = vec![Vec::new(); outputs];
            for (k, o) in outs.iter_mut().enumerate() {
                o.alloc(&p, prefill).unwrap();
                for i in 0..prefill {
                    o.set_len(i, 60).unwrap()[..2].copy_from_slice(&u16::MAX.to_le_bytes());
                    model[k].push(u16::MAX);
                }
            }
            let mut b = Burst::new();
            b.alloc(&p, n).unwrap();
            let mut tags = [0u16; MAX_BURST];
            // One output takes most packets (runs of one tag), the rest at random.
            let hot = rnd(outputs as u64) as u16;
            let mut freed = 0;
            for (i, tag) in tags.iter_mut().enumerate().take(n) {
                b.set_len(i, 60).unwrap()[..2].copy_from_slice(&(i as u16).to_le_bytes());
                *tag = match rnd(8) {
                    0 => DROP_TAG,
                    1 => outputs as u16 + rnd(3) as u16,
                    2 | 3 => rnd(outputs as u64) as u16,
                    _ => hot,
                };
                match model.get_mut(*tag as usize) {
                    Some(m) if m.len() < MAX_BURST => m.push(i as u16),
                    _ => freed += 1,
                }
            }
            assert_eq!(b.distribute(&tags, &mut outs), freed, "round {round}");
            assert!(b.is_empty());
            for (k, o) in outs.iter().enumerate() {
                let got: Vec<u16> = (0..o.len()).map(|i| u16::from_le_bytes([o.data(i)[0], o.data(i)[1]])).collect();
                assert_eq!(got, model[k], "round {round}, output {k} of {outputs}");
            }
            drop(outs);
            assert_eq!(p.stats().in_use, 0, "round {round}");
        }
    }

    const DROP_TAG: u16 = u16::MAX;
}
