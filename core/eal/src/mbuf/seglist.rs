//! Chains: hanging packets behind a packet ([`Mbuf::chain`], [`Mbuf::chain_many`])
//! and the [`SegList`] that collects segments to hang in one step.

use super::free::free_segs_raw;
use super::{Mbuf, MbufError};
use ironpath_abi::Mbuf as RawMbuf;

/// One-segment packets linked into a chain as they arrive, in constant time each
/// (the last one is remembered), to be hung behind a packet in one step with
/// [`Mbuf::chain_list`]: receive aggregation collects each merged segment's
/// payload this way. Dropping the list frees what it holds.
pub struct SegList {
    /// First and last segment (null when empty); linked through `next`.
    first: *mut RawMbuf,
    last: *mut RawMbuf,
    count: u32,
    bytes: u32,
}

// SAFETY: the list owns one reference to each of its segments, as an `Mbuf` does.
unsafe impl Send for SegList {}

impl Default for SegList {
    fn default() -> Self {
        Self::new()
    }
}

impl SegList {
    /// An empty list.
    pub const fn new() -> Self {
        SegList { first: std::ptr::null_mut(), last: std::ptr::null_mut(), count: 0, bytes: 0 }
    }

    /// Segments held.
    #[inline]
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether the list holds nothing.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes held.
    #[inline]
    pub fn bytes(&self) -> usize {
        self.bytes as usize
    }

    /// Start loading the last segment's link field (the next [`SegList::push`]
    /// writes it; held a while, that segment has often left the cache).
    #[inline]
    pub fn prefetch_tail(&self) {
        if self.last.is_null() {
            return;
        }
        // (Only an address is computed: `last` is a segment the list owns.)
        let a = self.last.wrapping_byte_add(std::mem::offset_of!(RawMbuf, next));
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch never faults, whatever the address.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(a as *const i8)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let _ = a;
    }

    /// Link `m`, a one-segment packet held only by us, at the end. Given back if
    /// it has more segments, if another holder shares it (linking writes its
    /// `next`, which that holder would see), or if the list holds `u16::MAX`
    /// segments already.
    #[inline]
    pub fn push(&mut self, m: Mbuf) -> Result<(), Mbuf> {
        if m.hdr().nb_segs != 1 || m.refcnt() > 1 || self.count >= u32::from(u16::MAX) {
            return Err(m);
        }
        let len = m.hdr().pkt_len;
        // SAFETY: a one-segment packet (checked), ours now.
        unsafe { self.link(m.into_raw(), len) };
        Ok(())
    }

    /// Link `p` at the end and count it.
    ///
    /// # Safety
    /// `p` is a one-segment packet (its `next` is null) whose one reference the
    /// caller gives to the list; the list holds at most `u16::MAX - 1` segments.
    #[inline(always)]
    unsafe fn link(&mut self, p: *mut RawMbuf, len: u32) {
        // SAFETY: `last`, when set, is our last segment, owned by the list.
        unsafe {
            if self.first.is_null() {
                self.first = p;
            } else {
                (*self.last).next = p;
            }
        }
        self.last = p;
        self.count += 1;
        self.bytes += len;
    }

    /// [`Mbuf::keep`] then [`SegList::push`] in one step, with one set of checks:
    /// keep bytes `off..off + len` of `m`, a one-segment packet held only by us,
    /// and link it at the end. Given back unchanged if it has more segments, is
    /// shared, is shorter than `off + len`, or the list is full. (Receive
    /// aggregation links each merged segment's payload this way.)
    #[inline(always)]
    pub fn push_part(&mut self, m: Mbuf, off: usize, len: usize) -> Result<(), Mbuf> {
        let h = m.hdr();
        let have = usize::from(h.data_len);
        // (`len > have - off`, not `off + len > have`: a sum that wraps would pass.)
        if h.nb_segs != 1 || m.refcnt() > 1 || off > have || len > have - off || self.count >= u32::from(u16::MAX) {
            return Err(m);
        }
        let p = m.into_raw();
        // SAFETY: `p` is a one-segment packet we now own and `off + len` lies
        // within its data (checked), so it may be linked.
        unsafe {
            (*p).data_off += off as u16;
            (*p).data_len = len as u16;
            (*p).pkt_len = len as u32;
            self.link(p, len as u32);
        }
        Ok(())
    }

    /// Move every segment of `other` to the end of this list. Refused (both
    /// unchanged) if the result would hold more than `u16::MAX` segments.
    #[inline]
    pub fn append(&mut self, other: &mut SegList) -> Result<(), MbufError> {
        if other.first.is_null() {
            return Ok(());
        }
        let total = self.count + other.count;
        if total > u32::from(u16::MAX) {
            return Err(MbufError::TooManySegs(total as usize));
        }
        // SAFETY: `last`, when set, is our last segment; `other`'s segments become ours
        // (`other` is emptied below, so each is owned once).
        unsafe {
            if self.first.is_null() {
                self.first = other.first;
            } else {
                (*self.last).next = other.first;
            }
        }
        self.last = other.last;
        self.count = total;
        self.bytes += other.bytes;
        other.forget();
        Ok(())
    }

    /// Free every segment held.
    pub fn clear(&mut self) {
        if !self.first.is_null() {
            // SAFETY: we own one reference to each segment of the chain from `first`
            // (the last one's `next` is null); the list forgets them below.
            unsafe { free_segs_raw(self.first) };
        }
        self.forget();
    }

    /// Empty the list without freeing (its segments were handed on). (Assigning
    /// a new list would drop this one, freeing them.)
    #[inline]
    fn forget(&mut self) {
        self.first = std::ptr::null_mut();
        self.last = std::ptr::null_mut();
        self.count = 0;
        self.bytes = 0;
    }
}

impl Drop for SegList {
    fn drop(&mut self) {
        self.clear();
    }
}

impl Mbuf {
    /// Append the packet `tail` as further segments of this one. Refused (`tail`
    /// freed) if a segment of this packet is shared with another handle.
    pub fn chain(&mut self, tail: Mbuf) -> Result<(), MbufError> {
        let total = self.nb_segs() + tail.nb_segs();
        if total > u16::MAX as usize {
            return Err(MbufError::TooManySegs(total));
        }
        let last = self.last_exclusive_seg()?;
        let t = tail.into_raw();
        // SAFETY: `last` is our last segment; `t` is a packet we now own and link in.
        unsafe {
            (*last).next = t;
            let h = &mut *self.ptr.as_ptr();
            h.nb_segs = total as u16;
            h.pkt_len += (*t).pkt_len;
        }
        Ok(())
    }

    /// Append several packets, in order, as further segments of this one (one walk
    /// to the end of the chain, however many are added). `tails` ends empty.
    /// Refused (`tails` kept) if a segment of this packet is shared.
    pub fn chain_many(&mut self, tails: &mut Vec<Mbuf>) -> Result<(), MbufError> {
        let total = self.nb_segs() + tails.iter().map(Mbuf::nb_segs).sum::<usize>();
        if total > u16::MAX as usize {
            return Err(MbufError::TooManySegs(total));
        }
        let mut last = self.last_exclusive_seg()?;
        let mut add = 0u32;
        for t in tails.drain(..) {
            // (A one-segment tail is its own last segment: no walk into `next`.)
            let t_last = if t.hdr().nb_segs == 1 { t.ptr.as_ptr() } else { t.last_seg() };
            let t = t.into_raw();
            // SAFETY: `last` is our last segment; `t` a packet we now own and link in;
            // its own last segment becomes ours.
            unsafe {
                (*last).next = t;
                add += (*t).pkt_len;
            }
            last = t_last;
        }
        // SAFETY: our head.
        unsafe {
            let h = &mut *self.ptr.as_ptr();
            h.nb_segs = total as u16;
            h.pkt_len += add;
        }
        Ok(())
    }

    /// Hang every segment of `list` behind this packet's last segment, in one step
    /// (the list ends empty). Refused (both unchanged) if the packet would have
    /// more than `u16::MAX` segments or a segment of it is shared.
    pub fn chain_list(&mut self, list: &mut SegList) -> Result<(), MbufError> {
        if list.first.is_null() {
            return Ok(());
        }
        let total = self.nb_segs() + list.len();
        if total > u16::MAX as usize {
            return Err(MbufError::TooManySegs(total));
        }
        let last = if self.hdr().nb_segs == 1 {
            if self.refcnt() != 1 {
                return Err(MbufError::Shared);
            }
            self.ptr.as_ptr()
        } else {
            self.last_exclusive_seg()?
        };
        // SAFETY: `last` is our last segment; the list's segments become ours (the
        // list is emptied below, so each is owned once).
        unsafe { (*last).next = list.first };
        let h = self.header_mut();
        h.nb_segs = total as u16;
        h.pkt_len += list.bytes;
        list.forget();
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::mbuf::tests::pool;

    /// Links and lengths change only where no other handle looks: chaining a packet
    /// behind itself (a loop) or behind a shared segment, and trimming a shared
    /// segment, are refused; everything still comes back to the pool.
    #[test]
    fn chains_change_only_where_no_other_handle_looks() {
        let p = pool(32, 256);
        let mut a = Mbuf::from_slice(&p, b"abc").unwrap();
        let alias = a.share();
        assert!(matches!(a.chain(alias), Err(MbufError::Shared)), "a loop");
        let mut y = Mbuf::from_slice(&p, b"y").unwrap();
        let x = a.share();
        y.chain(x).unwrap(); // y -> a (a's head now held twice)
        let mut z = Mbuf::from_slice(&p, b"z").unwrap();
        z.chain(a).unwrap(); // z -> a, a consumed
        assert_eq!(z.to_vec(), b"zabc");
        let zz = Mbuf::from_slice(&p, b"!").unwrap();
        assert!(matches!(y.chain(zz), Err(MbufError::Shared)), "behind a shared segment");
        assert!(matches!(y.trim(2), Err(MbufError::Shared)), "cutting a shared segment");
        assert!(matches!(y.chain_many(&mut vec![Mbuf::from_slice(&p, b"w").unwrap()]), Err(MbufError::Shared)));
        assert_eq!((y.to_vec(), z.to_vec()), (b"yabc".to_vec(), b"zabc".to_vec()));
        drop((y, z));
        assert_eq!(p.stats().in_use, 0);
    }

    /// A segment list links one-segment packets as they come, refuses chained
    /// ones, moves whole into another list or behind a packet, and frees what it
    /// still holds when cleared or dropped.
    #[test]
    fn seg_list_links_hands_on_and_frees() {
        let p = pool(32, 256);
        let mut a = SegList::new();
        for d in [&b"de"[..], b"f", b"ghi"] {
            a.push(Mbuf::from_slice(&p, d).unwrap()).unwrap();
        }
        let mut two = Mbuf::from_slice(&p, b"xy").unwrap();
        two.chain(Mbuf::from_slice(&p, b"z").unwrap()).unwrap();
        let two = a.push(two).unwrap_err();
        let shared = Mbuf::from_slice(&p, b"s").unwrap();
        let other = shared.share();
        let shared = a.push(shared).unwrap_err();
        drop((shared, other));
        assert_eq!((a.len(), a.bytes()), (3, 6));
        let mut b = SegList::new();
        b.push(Mbuf::from_slice(&p, b"jk").unwrap()).unwrap();
        a.append(&mut b).unwrap();
        assert!(b.is_empty());
        a.append(&mut b).unwrap();
        let mut head = Mbuf::from_slice(&p, b"abc").unwrap();
        head.chain_list(&mut a).unwrap();
        assert!(a.is_empty());
        assert_eq!((head.nb_segs(), head.pkt_len()), (5, 11));
        assert_eq!(head.to_vec(), b"abcdefghijk");
        head.chain_list(&mut a).unwrap();
        assert_eq!(head.nb_segs(), 5);
        drop(head);
        drop(two);
        assert_eq!(p.stats().in_use, 0);
        let mut c = SegList::new();
        for _ in 0..4 {
            c.push(Mbuf::from_slice(&p, b"q").unwrap()).unwrap();
        }
        c.clear();
        assert_eq!(p.stats().in_use, 0);
        c.push(Mbuf::from_slice(&p, b"r").unwrap()).unwrap();
        drop(c);
        assert_eq!(p.stats().in_use, 0);
    }

    /// `push_part` keeps the asked bytes and links them, and gives back unchanged
    /// a chained, shared or too-short packet.
    #[test]
    fn push_part_keeps_the_part_or_gives_the_packet_back() {
        let p = pool(32, 256);
        let mut a = SegList::new();
        a.push_part(Mbuf::from_slice(&p, b"HHHdePAD").unwrap(), 3, 2).unwrap();
        a.push_part(Mbuf::from_slice(&p, b"HHfgh").unwrap(), 2, 3).unwrap();
        a.push_part(Mbuf::from_slice(&p, b"i").unwrap(), 0, 1).unwrap();
        let short = a.push_part(Mbuf::from_slice(&p, b"HHjk").unwrap(), 2, 3).unwrap_err();
        assert_eq!(short.to_vec(), b"HHjk");
        let short = a.push_part(short, usize::MAX - 1, 3).unwrap_err(); // the sum wraps
        assert_eq!(short.to_vec(), b"HHjk");
        let shared = Mbuf::from_slice(&p, b"HHs").unwrap();
        let other = shared.share();
        let shared = a.push_part(shared, 2, 1).unwrap_err();
        assert_eq!(shared.to_vec(), b"HHs");
        let mut two = Mbuf::from_slice(&p, b"HHxy").unwrap();
        two.chain(Mbuf::from_slice(&p, b"z").unwrap()).unwrap();
        let two = a.push_part(two, 2, 2).unwrap_err();
        assert_eq!((a.len(), a.bytes()), (3, 6));
        let mut head = Mbuf::from_slice(&p, b"abc").unwrap();
        head.chain_list(&mut a).unwrap();
        assert_eq!((head.nb_segs(), head.pkt_len()), (4, 9));
        assert_eq!(head.to_vec(), b"abcdefghi");
        drop((head, short, shared, other, two));
        assert_eq!(p.stats().in_use, 0);
    }
}
