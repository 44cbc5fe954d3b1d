//! Packets as a driver handles them, in safe code.
//!
//! * [`Packet`]: one reference to a packet the driver holds; its header and data
//!   can be read ([`Packet::data`], [`Packet::segments`]); dropping it frees it to
//!   its pool.
//! * [`RxBurst`]: the array the host gave `rx_burst`, filled front to back:
//!   [`RxBurst::alloc`] allocates fresh one-segment packets ([`Fresh`]: data room
//!   to write, length to set), [`RxBurst::push_bytes`] copies a frame into one
//!   packet or a chain, [`RxBurst::push`] hands over a packet held elsewhere.
//!   What is in the burst when `rx_burst` returns is received.
//! * [`TxBurst`]: the packets the host gave `tx_burst`, read in place
//!   ([`TxBurst::packets`]) and taken front to back ([`TxBurst::take`],
//!   [`TxBurst::free_all`]); what is not taken stays the host's.
//! * [`PacketRing`]: a single-producer single-consumer ring of packets between a
//!   TX queue and an RX queue, moving pointers only.
//!
//! The types are `repr(transparent)` over the ABI's `*mut Mbuf`, so a burst is the
//! host's array itself and these calls compile to the loads and stores a driver
//! would write by hand.

use crate::abi::Mbuf;
use crate::pool::Pool;
use crate::raw;
use ringbuf::traits::{Consumer, Observer, Producer, Split};
use ringbuf::{HeapCons, HeapProd, HeapRb};
use std::mem::MaybeUninit;
use std::ptr::NonNull;

/// One reference to a packet (a chain of segments), held by the driver. Dropping it
/// releases the reference to the packet's pool.
#[repr(transparent)]
pub struct Packet(NonNull<Mbuf>);

// SAFETY: a reference to a host packet may be released from any thread (host pools
// are thread-safe), and the driver is its only user while it holds it.
unsafe impl Send for Packet {}

impl Packet {
    /// Take ownership of the reference `m`.
    ///
    /// # Safety
    /// `m` is a valid host packet the caller owns a reference to, and gives up.
    #[inline(always)]
    pub unsafe fn from_raw(m: *mut Mbuf) -> Self {
        // SAFETY: the caller's contract: a valid packet is not NULL.
        Self(unsafe { NonNull::new_unchecked(m) })
    }

    /// Give up ownership: the caller now holds the reference.
    #[inline(always)]
    pub fn into_raw(self) -> *mut Mbuf {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        p
    }

    /// The packet's address (for drivers that post it by address).
    #[inline(always)]
    pub fn as_ptr(&self) -> *mut Mbuf {
        self.0.as_ptr()
    }

    /// The packet's header (first segment): lengths, offload flags, type, port.
    #[inline(always)]
    pub fn mbuf(&self) -> &Mbuf {
        // SAFETY: a held packet is valid for as long as it is held.
        unsafe { self.0.as_ref() }
    }

    /// Total length over all segments.
    #[inline(always)]
    pub fn len(&self) -> u32 {
        self.mbuf().pkt_len
    }

    /// Whether the packet holds no byte.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first segment's data.
    #[inline(always)]
    pub fn data(&self) -> &[u8] {
        // SAFETY: a held packet's data lies inside its buffer.
        unsafe { raw::data(self.0.as_ptr()) }
    }

    /// Each segment's data, in order.
    #[inline]
    pub fn segments(&self) -> Segments<'_> {
        Segments { seg: self.0.as_ptr(), left: self.mbuf().nb_segs, _pkt: std::marker::PhantomData }
    }

    /// Append every byte of the packet to `out`.
    pub fn copy_to(&self, out: &mut Vec<u8>) {
        for s in self.segments() {
            out.extend_from_slice(s);
        }
    }

    /// Record the receiving port.
    #[inline(always)]
    pub fn set_port(&mut self, port: u16) {
        // SAFETY: the driver holds the packet; its header is the driver's to write.
        unsafe { (*self.0.as_ptr()).port = port };
    }

    /// The header to write offload metadata into (RX: flags, lengths, TSO size).
    ///
    /// # Safety
    /// The buffer fields (`buf_addr`, `data_off`, `data_len`, `buf_len`, `next`,
    /// `nb_segs`, `pkt_len`, `pool`, `refcnt`) must stay as they are.
    #[inline(always)]
    pub unsafe fn mbuf_mut(&mut self) -> &mut Mbuf {
        // SAFETY: the driver holds the packet; the caller keeps the buffer fields.
        unsafe { self.0.as_mut() }
    }
}

impl Drop for Packet {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: we hold this reference and release it once.
        unsafe { raw::free_bulk(std::slice::from_ref(&self.0.as_ptr())) };
    }
}

impl std::fmt::Debug for Packet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packet").field("len", &self.len()).field("nb_segs", &self.mbuf().nb_segs).finish()
    }
}

/// The segments of a packet, as byte slices.
pub struct Segments<'a> {
    seg: *mut Mbuf,
    left: u16,
    _pkt: std::marker::PhantomData<&'a Packet>,
}

impl<'a> Iterator for Segments<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 || self.seg.is_null() {
            return None;
        }
        self.left -= 1;
        // SAFETY: the segments of a held packet are valid while it is held (`'a`).
        unsafe {
            let d = raw::data(self.seg);
            self.seg = (*self.seg).next;
            Some(d)
        }
    }
}

/// A freshly allocated one-segment packet in an [`RxBurst`]: empty, headroom
/// reserved, the driver's alone. Write its data room, then set its length.
#[repr(transparent)]
pub struct Fresh(NonNull<Mbuf>);

impl Fresh {
    #[inline(always)]
    fn m(&mut self) -> &mut Mbuf {
        // SAFETY: a fresh packet in the burst is valid and only reachable through us.
        unsafe { self.0.as_mut() }
    }

    /// Bytes that fit after the headroom.
    #[inline(always)]
    pub fn room(&self) -> usize {
        // SAFETY: as in `m`.
        let m = unsafe { self.0.as_ref() };
        usize::from(m.buf_len - m.data_off)
    }

    /// The whole data room (its current content is undefined garbage of earlier use).
    #[inline(always)]
    pub fn room_mut(&mut self) -> &mut [u8] {
        let m = self.m();
        // SAFETY: the room lies inside the buffer, after the headroom.
        unsafe {
            std::slice::from_raw_parts_mut(m.buf_addr.add(usize::from(m.data_off)), usize::from(m.buf_len - m.data_off))
        }
    }

    /// Set the length (capped at the room).
    #[inline(always)]
    pub fn set_len(&mut self, len: u16) {
        let len = len.min(self.room() as u16);
        let m = self.m();
        m.data_len = len;
        m.pkt_len = u32::from(len);
    }

    /// Copy `bytes` in as the whole content (cut to the room); returns the length.
    #[inline]
    pub fn set_data(&mut self, bytes: &[u8]) -> usize {
        let n = bytes.len().min(self.room());
        copy_small(&mut self.room_mut()[..n], &bytes[..n]);
        self.set_len(n as u16);
        n
    }

    /// Record the receiving port.
    #[inline(always)]
    pub fn set_port(&mut self, port: u16) {
        self.m().port = port;
    }

    /// Set offload flags (`abi::RX_*`) and the packet type (`abi::ptype`).
    #[inline(always)]
    pub fn set_offload(&mut self, ol_flags: u64, packet_type: u32) {
        let m = self.m();
        m.ol_flags = ol_flags;
        m.packet_type = packet_type;
    }
}

/// The array `rx_burst` fills, front to back. What it holds when `rx_burst` returns
/// is received by the host.
pub struct RxBurst<'a> {
    slots: &'a mut [*mut Mbuf],
    filled: usize,
    port_id: u16,
}

/// Why [`RxBurst::push_bytes`] received nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PushError {
    /// The burst is full.
    Full,
    /// The pool has too few free mbufs (count it as `nombuf`).
    NoMbuf,
    /// The frame needs more segments than a chain may have ([`RxBurst::MAX_SEGS`]).
    TooLong,
}

impl<'a> RxBurst<'a> {
    /// Most segments [`RxBurst::push_bytes`] links into one packet.
    pub const MAX_SEGS: usize = 64;

    /// A burst over the host's array (for the SDK's trampoline and drivers' tests).
    pub fn new(slots: &'a mut [*mut Mbuf], port_id: u16) -> Self {
        Self { slots, filled: 0, port_id }
    }

    /// The host's id of this port (learnt at configure), for `Fresh::set_port`.
    #[inline(always)]
    pub fn port_id(&self) -> u16 {
        self.port_id
    }

    /// Packets received so far.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.filled
    }

    /// Whether nothing is received yet.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.filled == 0
    }

    /// How many more packets fit.
    #[inline(always)]
    pub fn room(&self) -> usize {
        self.slots.len() - self.filled
    }

    /// Allocate `n` (at most [`RxBurst::room`]) fresh packets from `pool`, all or
    /// nothing, and receive them; `None` when the pool is short (count it as
    /// `nombuf`). Fill them through the returned slice.
    #[inline(always)]
    pub fn alloc(&mut self, pool: &Pool, n: usize) -> Option<&mut [Fresh]> {
        let n = n.min(self.room());
        let at = self.filled;
        if n == 0 || !pool.alloc_bulk(&mut self.slots[at..at + n]) {
            return None;
        }
        self.filled += n;
        let s = &mut self.slots[at..at + n];
        // SAFETY: `Fresh` is repr(transparent) over a non-NULL `*mut Mbuf`, and the
        // pool just wrote `n` valid packets there, owned by the burst.
        Some(unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<Fresh>(), n) })
    }

    /// Allocate `n` (at most [`RxBurst::room`]) fresh packets from `pool` like
    /// [`RxBurst::alloc`], each `len` bytes long (capped at the pool's data room),
    /// untagged and stamped with this port: a generator's burst in one pass over the
    /// packets.
    #[inline(always)]
    pub fn alloc_len(&mut self, pool: &Pool, n: usize, len: u16) -> Option<&mut [Fresh]> {
        let len = len.min(pool.buf_len().saturating_sub(pool.headroom()));
        let n = n.min(self.room());
        let (at, port) = (self.filled, self.port_id);
        let s = &mut self.slots[at..at + n];
        if n == 0 || !pool.alloc_bulk(s) {
            return None;
        }
        // `pkt_len`, `data_len` and `vlan_tci` (untagged: 0) are eight bytes in a row
        // (the ABI's layout, asserted in `ironpath_abi`): one store.
        let mut lens = [0u8; 8];
        lens[..4].copy_from_slice(&u32::from(len).to_ne_bytes());
        lens[4..6].copy_from_slice(&len.to_ne_bytes());
        let stamp = |m: *mut Mbuf| {
            // SAFETY: a fresh packet of `pool` has `data_off` = headroom, so `len`
            // bytes fit its buffer; it is ours alone. `pkt_len` is at offset 36 and
            // `data_len`, `vlan_tci` follow it (offsets 40, 42): eight bytes inside
            // the mbuf, written unaligned.
            unsafe {
                (&raw mut (*m).pkt_len).cast::<[u8; 8]>().write_unaligned(lens);
                (*m).port = port;
            }
        };
        // Four at a time: the loop a generator spends its time in, unrolled.
        let mut quads = s.chunks_exact(4);
        for q in &mut quads {
            q.iter().for_each(|&m| stamp(m));
        }
        quads.remainder().iter().for_each(|&m| stamp(m));
        self.filled += n;
        // SAFETY: as in `alloc`: `n` valid packets, owned by the burst.
        Some(unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<Fresh>(), n) })
    }

    /// Receive `p`; gives it back when the burst is full.
    #[inline(always)]
    pub fn push(&mut self, p: Packet) -> Result<(), Packet> {
        if self.filled == self.slots.len() {
            return Err(p);
        }
        self.slots[self.filled] = p.into_raw();
        self.filled += 1;
        Ok(())
    }

    /// Receive `bytes` as one packet from `pool`: one segment if it fits, else a chain
    /// of as many as needed. Returns the packet to set its metadata on.
    pub fn push_bytes(&mut self, pool: &Pool, bytes: &[u8]) -> Result<&mut Packet, PushError> {
        if self.filled == self.slots.len() {
            return Err(PushError::Full);
        }
        let room = usize::from(pool.buf_len().saturating_sub(pool.headroom())).max(1);
        let segs = bytes.len().div_ceil(room).max(1);
        if segs > Self::MAX_SEGS {
            return Err(PushError::TooLong);
        }
        let mut chain = [std::ptr::null_mut::<Mbuf>(); Self::MAX_SEGS];
        if !pool.alloc_bulk(&mut chain[..segs]) {
            return Err(PushError::NoMbuf);
        }
        // SAFETY: fresh packets from the pool, owned here; the bytes fit `segs`
        // segments of `room` bytes each, so `fill_chain` links them all.
        unsafe { raw::fill_chain(&chain[..segs], &[bytes]) };
        let at = self.filled;
        self.slots[at] = chain[0];
        self.filled += 1;
        // SAFETY: `Packet` is repr(transparent) over a non-NULL `*mut Mbuf`; the slot
        // holds the packet just linked.
        Ok(unsafe { &mut *(&mut self.slots[at] as *mut *mut Mbuf).cast::<Packet>() })
    }

    /// The packets received so far.
    #[inline(always)]
    pub fn packets_mut(&mut self) -> &mut [Packet] {
        let n = self.filled;
        // SAFETY: the first `filled` slots hold valid packets owned by the burst;
        // `Packet` is repr(transparent) over a non-NULL `*mut Mbuf`.
        unsafe { std::slice::from_raw_parts_mut(self.slots.as_mut_ptr().cast::<Packet>(), n) }
    }

    /// The unfilled rest of the array, for drivers that fill it by hand.
    ///
    /// # Safety
    /// Whatever is written there counts as received only after [`RxBurst::set_filled`].
    #[inline(always)]
    pub unsafe fn raw_rest(&mut self) -> &mut [*mut Mbuf] {
        &mut self.slots[self.filled..]
    }

    /// Declare `n` more slots (after those already received) filled by hand.
    ///
    /// # Safety
    /// Those slots hold valid packets the driver gives up.
    #[inline(always)]
    pub unsafe fn set_filled(&mut self, n: usize) {
        self.filled = (self.filled + n).min(self.slots.len());
    }

    /// Give back every received packet (the trampoline does so when `rx_burst`
    /// panics); returns how many were freed.
    pub(crate) fn reclaim(&mut self) -> usize {
        let n = self.filled;
        // SAFETY: the first `filled` slots hold packets owned by the burst; after
        // this, nothing is received.
        unsafe { raw::free_bulk(&self.slots[..n]) };
        self.filled = 0;
        n
    }
}

/// The packets `tx_burst` is offered. The driver takes them front to back; what it
/// does not take stays the host's (a full device takes fewer).
pub struct TxBurst<'a> {
    pkts: &'a mut [*mut Mbuf],
    taken: usize,
    /// The driver asked for the raw array (then the count taken is its word).
    raw: bool,
}

impl<'a> TxBurst<'a> {
    /// A burst over the host's array (for the SDK's trampoline and drivers' tests).
    ///
    /// # Safety
    /// Every pointer of `pkts` is a valid packet the caller gives a reference to,
    /// for the driver to take.
    pub unsafe fn new(pkts: &'a mut [*mut Mbuf]) -> Self {
        Self { pkts, taken: 0, raw: false }
    }

    /// Packets not yet taken.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.pkts.len() - self.taken
    }

    /// Whether every packet is taken.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Packets taken so far (what `tx_burst` reports).
    #[inline(always)]
    pub fn taken(&self) -> usize {
        self.taken
    }

    /// The packets not yet taken, to read in place.
    #[inline(always)]
    pub fn packets(&self) -> &[Packet] {
        let rest = &self.pkts[self.taken..];
        // SAFETY: untaken slots hold valid packets; `Packet` is repr(transparent)
        // over a non-NULL `*mut Mbuf`, and a shared slice allows no move or drop.
        unsafe { std::slice::from_raw_parts(rest.as_ptr().cast::<Packet>(), rest.len()) }
    }

    /// Take the next packet.
    #[inline(always)]
    pub fn take(&mut self) -> Option<Packet> {
        let m = *self.pkts.get(self.taken)?;
        self.taken += 1;
        // SAFETY: an untaken slot holds a valid packet; taking it moves the
        // reference to the driver (the host no longer counts it as its own).
        Some(unsafe { Packet::from_raw(m) })
    }

    /// Take up to `n` packets and free them at once (a sink, or a copy done).
    #[inline(always)]
    pub fn free(&mut self, n: usize) {
        let n = n.min(self.len());
        // SAFETY: untaken slots hold valid packets; taking them makes them ours to
        // release, once.
        unsafe { raw::free_bulk(&self.pkts[self.taken..self.taken + n]) };
        self.taken += n;
    }

    /// Take every packet left and free them at once.
    #[inline(always)]
    pub fn free_all(&mut self) {
        self.free(self.len());
    }

    /// The untaken rest, for drivers that post packets by address.
    ///
    /// # Safety
    /// Packets used from there count as taken only after [`TxBurst::set_taken`]; one
    /// the driver keeps or frees must be declared taken.
    #[inline(always)]
    pub unsafe fn raw_rest(&mut self) -> &mut [*mut Mbuf] {
        self.raw = true;
        &mut self.pkts[self.taken..]
    }

    /// The untaken packets, for a driver that posts them by address and keeps them
    /// (`Packet::as_ptr`): like [`TxBurst::packets`], but from now on a panic makes
    /// the SDK claim the whole burst, since the driver may hold any of them.
    ///
    /// # Safety
    /// A packet the driver keeps or frees counts as taken only after
    /// [`TxBurst::set_taken`].
    #[inline(always)]
    pub unsafe fn packets_to_post(&mut self) -> &[Packet] {
        self.raw = true;
        self.packets()
    }

    /// Whether the driver asked for the raw array.
    pub(crate) fn used_raw(&self) -> bool {
        self.raw
    }

    /// Declare `n` more packets (after those already taken) taken by hand.
    ///
    /// # Safety
    /// The driver owns those packets now (it holds or freed them).
    #[inline(always)]
    pub unsafe fn set_taken(&mut self, n: usize) {
        self.taken = (self.taken + n).min(self.pkts.len());
    }
}

/// A single-producer single-consumer ring of packets: a TX queue pushes, an RX
/// queue pops, and only pointers move. Packets left inside when both ends are
/// dropped are freed.
pub struct PacketRing;

impl PacketRing {
    /// A ring of `size` slots, split into its two ends.
    pub fn with_capacity(size: usize) -> (RingProducer, RingConsumer) {
        let (p, c) = HeapRb::<Packet>::new(size).split();
        (RingProducer(p), RingConsumer(c))
    }
}

/// The sending end of a [`PacketRing`].
pub struct RingProducer(HeapProd<Packet>);

/// The receiving end of a [`PacketRing`].
pub struct RingConsumer(HeapCons<Packet>);

impl RingProducer {
    /// Free slots.
    #[inline(always)]
    pub fn vacant(&self) -> usize {
        self.0.vacant_len()
    }

    /// Take as many packets of `burst` as fit, in order; returns how many.
    #[inline]
    pub fn push_from(&mut self, burst: &mut TxBurst<'_>) -> usize {
        let src = &burst.pkts[burst.taken..];
        let (a, b) = self.0.vacant_slices_mut();
        let na = src.len().min(a.len());
        let nb = (src.len() - na).min(b.len());
        // SAFETY: `MaybeUninit<Packet>` has the layout of `*mut Mbuf`; we copy valid
        // untaken packets into vacant slots, then publish exactly those and mark them
        // taken, so each reference moves from the host to the ring once.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), a.as_mut_ptr().cast::<*mut Mbuf>(), na);
            if nb > 0 {
                std::ptr::copy_nonoverlapping(src.as_ptr().add(na), b.as_mut_ptr().cast::<*mut Mbuf>(), nb);
            }
            self.0.advance_write_index(na + nb);
        }
        burst.taken += na + nb;
        na + nb
    }
}

impl RingConsumer {
    /// Packets waiting.
    #[inline(always)]
    pub fn occupied(&self) -> usize {
        self.0.occupied_len()
    }

    /// Move as many waiting packets as fit into `burst`; returns how many.
    #[inline]
    pub fn pop_into(&mut self, burst: &mut RxBurst<'_>) -> usize {
        let at = burst.filled;
        let rest = &mut burst.slots[at..];
        // SAFETY: `MaybeUninit<Packet>` has the layout of `*mut Mbuf`; the ring
        // writes initialized packets into the first `n` and we count only those.
        let dst =
            unsafe { std::slice::from_raw_parts_mut(rest.as_mut_ptr().cast::<MaybeUninit<Packet>>(), rest.len()) };
        let n = self.0.pop_slice_uninit(dst);
        burst.filled += n;
        n
    }
}

const _: () = {
    assert!(std::mem::size_of::<Packet>() == std::mem::size_of::<*mut Mbuf>());
    assert!(std::mem::size_of::<Fresh>() == std::mem::size_of::<*mut Mbuf>());
    assert!(std::mem::size_of::<MaybeUninit<Packet>>() == std::mem::size_of::<*mut Mbuf>());
};

/// `dst.copy_from_slice(src)` (equal lengths), with frames up to 256 bytes copied
/// inline instead of by a call to `memcpy`: what a driver copying small packets
/// spends its time in. Up to 64 bytes, two fixed-size copies whose ranges overlap
/// (no loop); longer, 16 bytes at a time, the last 16 overlapping.
#[inline(always)]
fn copy_small(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if !(16..=256).contains(&n) || dst.len() != n {
        dst.copy_from_slice(src);
        return;
    }
    if n <= 32 {
        dst[..16].copy_from_slice(&src[..16]);
        dst[n - 16..].copy_from_slice(&src[n - 16..]);
        return;
    }
    if n <= 64 {
        dst[..32].copy_from_slice(&src[..32]);
        dst[n - 32..].copy_from_slice(&src[n - 32..]);
        return;
    }
    let mut i = 0;
    while i + 16 <= n {
        dst[i..i + 16].copy_from_slice(&src[i..i + 16]);
        i += 16;
    }
    if i < n {
        dst[n - 16..].copy_from_slice(&src[n - 16..]);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn copy_small_copies_every_length_exactly() {
        let src: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        for n in 0..300 {
            let mut dst = vec![0xeeu8; 300];
            super::copy_small(&mut dst[..n], &src[..n]);
            assert_eq!(&dst[..n], &src[..n], "length {n}");
            assert!(dst[n..].iter().all(|&b| b == 0xee), "nothing past {n}");
        }
    }
}
