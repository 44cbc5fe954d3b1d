//! Packet buffers: the safe owning handle [`Mbuf`] and the raw fast-path helpers.
//!
//! An mbuf is a header ([`ironpath_abi::Mbuf`]) followed by its buffer; a packet is a
//! chain of segments linked by `next`. Each segment has a reference count: a segment
//! returns to its pool when the count reaches zero. A *shared* packet ([`Mbuf::share`])
//! bumps the count of every segment; an *indirect* clone ([`Mbuf::clone_indirect`])
//! gets new headers from a pool that point at the original buffers (the buffers'
//! owners are referenced), so the clone can have its own offsets and lengths — what
//! GSO and TCP retransmission need. Shared or indirect data is read-only.

mod ext;
mod free;
mod seglist;

pub(crate) use ext::ATTACHED;
pub use free::{free_bulk_raw, free_segs_raw};
pub use seglist::SegList;

use crate::mempool::Mempool;
use ironpath_abi::Mbuf as RawMbuf;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

/// Errors of mbuf operations.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MbufError {
    /// The pool is empty.
    #[error("mempool exhausted")]
    NoMbuf,
    /// Not enough head- or tailroom, or data, for the operation.
    #[error("{op}: {want} bytes requested, {have} available")]
    NoRoom {
        /// Operation name.
        op: &'static str,
        /// Bytes requested.
        want: usize,
        /// Bytes available.
        have: usize,
    },
    /// The data is shared with another handle (or indirect) and cannot be written.
    #[error("mbuf data is shared (refcount > 1 or indirect) and cannot be modified")]
    Shared,
    /// A chain would exceed the segment limit.
    #[error("chain would have {0} segments (limit 65535)")]
    TooManySegs(usize),
}

/// Reset a segment to a fresh one-segment packet with `headroom` bytes of headroom.
/// Writes only the first cache line: `next` must already be NULL (true of every free
/// mbuf and every single-segment packet).
///
/// # Safety
/// `m` must point to a valid mbuf owned by the caller, with `next` NULL, and
/// `headroom <= buf_len` (pools guarantee it for their own headroom).
#[inline(always)]
pub unsafe fn reset_raw(m: *mut RawMbuf, headroom: u16) {
    // SAFETY: caller's contract.
    let m = unsafe { &mut *m };
    debug_assert!(m.next.is_null());
    m.nb_segs = 1;
    debug_assert!(headroom <= m.buf_len);
    m.data_off = headroom;
    m.pkt_len = 0;
    m.data_len = 0;
    m.ol_flags = 0;
    m.packet_type = 0;
    m.port = u16::MAX;
    m.vlan_tci = 0;
    m.rss_hash = 0;
    m.l2_len = 0;
    m.l3_len = 0;
    m.l4_len = 0;
    m.tso_segsz = 0;
}

/// An owned reference to a packet (a chain of segments). Dropping it frees the chain.
pub struct Mbuf {
    ptr: NonNull<RawMbuf>,
}

// SAFETY: an `Mbuf` owns its reference; data shared with other handles is only read,
// and reference counts are atomic.
unsafe impl Send for Mbuf {}

impl Drop for Mbuf {
    fn drop(&mut self) {
        // SAFETY: we own one reference to this packet and give it up.
        unsafe { free_bulk_raw(&[self.ptr.as_ptr()]) };
    }
}

impl std::fmt::Debug for Mbuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mbuf")
            .field("pkt_len", &self.pkt_len())
            .field("nb_segs", &self.nb_segs())
            .field("refcnt", &self.refcnt())
            .finish()
    }
}

impl Mbuf {
    /// Allocate one empty packet.
    pub fn alloc(pool: &Mempool) -> Result<Self, MbufError> {
        let mut p = [std::ptr::null_mut()];
        pool.alloc_bulk_raw(&mut p).map_err(|_| MbufError::NoMbuf)?;
        // SAFETY: fresh, non-null, owned by us.
        Ok(unsafe { Self::from_raw(p[0]) })
    }

    /// Allocate `n` empty packets, all or nothing.
    pub fn alloc_bulk(pool: &Mempool, n: usize) -> Result<Vec<Self>, MbufError> {
        let mut raw = vec![std::ptr::null_mut(); n];
        pool.alloc_bulk_raw(&mut raw).map_err(|_| MbufError::NoMbuf)?;
        // SAFETY: fresh, non-null, owned by us.
        Ok(raw.into_iter().map(|p| unsafe { Self::from_raw(p) }).collect())
    }

    /// Allocate a packet holding a copy of `data` (chained across segments if needed).
    pub fn from_slice(pool: &Mempool, data: &[u8]) -> Result<Self, MbufError> {
        let mut head = Self::alloc(pool)?;
        let mut rest = data;
        let first = head.tailroom().min(rest.len());
        head.append(first)?.copy_from_slice(&rest[..first]);
        rest = &rest[first..];
        while !rest.is_empty() {
            let mut seg = Self::alloc(pool)?;
            let k = seg.tailroom().min(rest.len());
            if k == 0 {
                return Err(MbufError::NoRoom { op: "from_slice", want: rest.len(), have: 0 });
            }
            seg.append(k)?.copy_from_slice(&rest[..k]);
            rest = &rest[k..];
            head.chain(seg)?;
        }
        Ok(head)
    }

    /// Take ownership of a raw packet.
    ///
    /// # Safety
    /// `p` is a valid packet from an ironpath pool and the caller gives up its reference.
    #[inline(always)]
    pub unsafe fn from_raw(p: *mut RawMbuf) -> Self {
        // SAFETY: caller's contract (non-null).
        let ptr = unsafe { NonNull::new_unchecked(p) };
        Self { ptr }
    }

    /// Give up the handle without freeing; the caller now owns the reference.
    #[inline(always)]
    pub fn into_raw(self) -> *mut RawMbuf {
        let p = self.ptr.as_ptr();
        std::mem::forget(self);
        p
    }

    /// The raw header pointer (still owned by this handle).
    #[inline(always)]
    pub fn as_ptr(&self) -> *mut RawMbuf {
        self.ptr.as_ptr()
    }

    #[inline(always)]
    fn hdr(&self) -> &RawMbuf {
        // SAFETY: we hold a reference, so the header is valid.
        unsafe { self.ptr.as_ref() }
    }

    fn segs(&self) -> impl Iterator<Item = *mut RawMbuf> {
        let mut cur = self.ptr.as_ptr();
        std::iter::from_fn(move || {
            if cur.is_null() {
                return None;
            }
            let s = cur;
            // SAFETY: segments of a chain we hold a reference to are valid.
            cur = unsafe { (*s).next };
            Some(s)
        })
    }

    /// Total packet length.
    pub fn pkt_len(&self) -> usize {
        self.hdr().pkt_len as usize
    }

    /// Length of the first segment's data.
    pub fn data_len(&self) -> usize {
        self.hdr().data_len as usize
    }

    /// Number of segments.
    pub fn nb_segs(&self) -> usize {
        self.hdr().nb_segs as usize
    }

    /// Memory the packet keeps from its pool, whatever it carries (Linux's
    /// `truesize`): a header and a buffer of the first segment's size per segment
    /// (the segments of a received chain come from one pool). O(1): the chain is not
    /// walked.
    pub fn truesize(&self) -> usize {
        let h = self.hdr();
        usize::from(h.nb_segs.max(1)) * (crate::mempool::MBUF_HDR + usize::from(h.buf_len))
    }

    /// Reference count of the first segment.
    pub fn refcnt(&self) -> u16 {
        self.hdr().refcnt.load(Ordering::Relaxed)
    }

    /// Header fields (read-only).
    pub fn header(&self) -> &RawMbuf {
        self.hdr()
    }

    /// True when every segment is held only by this handle and none is indirect or
    /// external.
    pub fn is_writable(&self) -> bool {
        self.segs().all(|s| {
            // SAFETY: valid segment of our chain.
            let s = unsafe { &*s };
            s.refcnt.load(Ordering::Acquire) == 1 && s.ol_flags & ATTACHED == 0
        })
    }

    /// True when the first segment (its header and buffer) is held only by this handle
    /// and is not indirect or external: what [`Mbuf::prepend`] writes. Later segments
    /// may be shared (the payload slices of a segmented packet).
    pub fn head_writable(&self) -> bool {
        let h = self.hdr();
        h.refcnt.load(Ordering::Acquire) == 1 && h.ol_flags & ATTACHED == 0
    }

    /// Header fields for writing (offload flags, lengths for offloads, port ...).
    /// Changing `data_off`/`data_len`/`pkt_len`/`next` by hand must keep the chain
    /// consistent; prefer the methods.
    pub fn header_mut(&mut self) -> &mut RawMbuf {
        // SAFETY: we own the handle exclusively; header writes of a shared packet only
        // affect this packet's metadata, which (for shared, not indirect, packets) the
        // other holder sees too — documented above.
        unsafe { self.ptr.as_mut() }
    }

    /// The first segment's data.
    pub fn data(&self) -> &[u8] {
        let h = self.hdr();
        // SAFETY: buf_addr+data_off .. +data_len lies inside the segment's buffer.
        unsafe { std::slice::from_raw_parts(h.buf_addr.add(h.data_off as usize), h.data_len as usize) }
    }

    /// The first segment's data, writable if the packet is not shared.
    pub fn data_mut(&mut self) -> Result<&mut [u8], MbufError> {
        if !self.is_writable() {
            return Err(MbufError::Shared);
        }
        let h = self.hdr();
        // SAFETY: as in `data`, and we are the only holder of this buffer.
        Ok(unsafe { std::slice::from_raw_parts_mut(h.buf_addr.add(h.data_off as usize), h.data_len as usize) })
    }

    /// Each segment's data, in order.
    pub fn segments(&self) -> impl Iterator<Item = &[u8]> {
        self.segs().map(|s| {
            // SAFETY: valid segment of our chain; its data lies inside its buffer.
            unsafe {
                let s = &*s;
                std::slice::from_raw_parts(s.buf_addr.add(s.data_off as usize), s.data_len as usize)
            }
        })
    }

    /// Free bytes in front of the data.
    pub fn headroom(&self) -> usize {
        self.hdr().data_off as usize
    }

    fn last_seg(&self) -> *mut RawMbuf {
        self.segs().last().unwrap_or(self.ptr.as_ptr())
    }

    /// The last segment, if every segment's header is held by this handle alone:
    /// only then may the chain's links and lengths change (a segment another handle
    /// holds would change under it, and linking a packet behind a segment it already
    /// reaches would make a loop).
    fn last_exclusive_seg(&self) -> Result<*mut RawMbuf, MbufError> {
        let mut last = self.ptr.as_ptr();
        for s in self.segs() {
            // SAFETY: valid segment of our chain.
            if unsafe { (*s).refcnt.load(Ordering::Acquire) } != 1 {
                return Err(MbufError::Shared);
            }
            last = s;
        }
        Ok(last)
    }

    /// Free bytes after the data of the last segment.
    pub fn tailroom(&self) -> usize {
        // SAFETY: valid segment.
        let l = unsafe { &*self.last_seg() };
        l.buf_len as usize - l.data_off as usize - l.data_len as usize
    }

    /// Grow the packet by `len` bytes at the end (in the last segment); returns them.
    pub fn append(&mut self, len: usize) -> Result<&mut [u8], MbufError> {
        if !self.is_writable() {
            return Err(MbufError::Shared);
        }
        let have = self.tailroom();
        if len > have {
            return Err(MbufError::NoRoom { op: "append", want: len, have });
        }
        let last = self.last_seg();
        // SAFETY: valid, exclusively held segment; len fits in its tailroom.
        unsafe {
            let l = &mut *last;
            let start = l.buf_addr.add(l.data_off as usize + l.data_len as usize);
            l.data_len += len as u16;
            (*self.ptr.as_ptr()).pkt_len += len as u32;
            Ok(std::slice::from_raw_parts_mut(start, len))
        }
    }

    /// Grow the packet by `len` bytes at the front (headroom); returns them. Only the
    /// first segment must be this handle's alone ([`Mbuf::head_writable`]).
    pub fn prepend(&mut self, len: usize) -> Result<&mut [u8], MbufError> {
        if !self.head_writable() {
            return Err(MbufError::Shared);
        }
        let have = self.headroom();
        if len > have {
            return Err(MbufError::NoRoom { op: "prepend", want: len, have });
        }
        let h = self.header_mut();
        h.data_off -= len as u16;
        h.data_len += len as u16;
        h.pkt_len += len as u32;
        // SAFETY: the new range lies in the first segment's buffer; we hold it alone.
        Ok(unsafe { std::slice::from_raw_parts_mut(h.buf_addr.add(h.data_off as usize), len) })
    }

    /// Remove `len` bytes from the front (of the first segment, as DPDK's `adj`).
    /// Works on shared packets too: it moves only this header's offsets when the
    /// packet is indirect; for a plainly shared packet it is refused.
    pub fn adj(&mut self, len: usize) -> Result<(), MbufError> {
        if self.refcnt() > 1 {
            return Err(MbufError::Shared);
        }
        let have = self.data_len();
        if len > have {
            return Err(MbufError::NoRoom { op: "adj", want: len, have });
        }
        let h = self.header_mut();
        h.data_off += len as u16;
        h.data_len -= len as u16;
        h.pkt_len -= len as u32;
        Ok(())
    }

    /// Keep only bytes `off..off + len` of a one-segment packet: what [`Mbuf::adj`]
    /// of `off` and [`Mbuf::trim`] of the rest do, in one step (receive
    /// aggregation cuts each segment's headers and padding this way).
    #[inline]
    pub fn keep(&mut self, off: usize, len: usize) -> Result<(), MbufError> {
        if self.refcnt() > 1 {
            return Err(MbufError::Shared);
        }
        let h = self.header_mut();
        let have = h.data_len as usize;
        // (`len > have - off`, not `off + len > have`: a sum that wraps would pass.)
        if h.nb_segs != 1 || off > have || len > have - off {
            return Err(MbufError::NoRoom { op: "keep", want: off.saturating_add(len), have });
        }
        h.data_off += off as u16;
        h.data_len = len as u16;
        h.pkt_len = len as u32;
        Ok(())
    }

    /// Remove `len` bytes from the end, across segments; emptied trailing segments are
    /// freed. Refused if any segment is shared with another handle.
    pub fn trim(&mut self, len: usize) -> Result<(), MbufError> {
        self.last_exclusive_seg()?;
        let have = self.pkt_len();
        if len > have {
            return Err(MbufError::NoRoom { op: "trim", want: len, have });
        }
        let keep = have - len;
        let mut acc = 0usize;
        let mut nsegs = 0u16;
        let mut cur = self.ptr.as_ptr();
        // SAFETY: walking our own chain; segments after the cut are unlinked and
        // freed, each was referenced once through this chain.
        unsafe {
            loop {
                let s = &mut *cur;
                nsegs += 1;
                let dl = s.data_len as usize;
                if acc + dl >= keep || s.next.is_null() {
                    s.data_len = (keep - acc) as u16;
                    let rest = s.next;
                    s.next = std::ptr::null_mut();
                    if !rest.is_null() {
                        free_segs_raw(rest);
                    }
                    break;
                }
                acc += dl;
                cur = s.next;
            }
            let h = &mut *self.ptr.as_ptr();
            h.pkt_len = keep as u32;
            h.nb_segs = nsegs;
        }
        Ok(())
    }

    /// Copy `dst.len()` bytes starting at `off` into `dst`, across segments. Returns
    /// the number copied (less when the packet is shorter).
    pub fn copy_to(&self, off: usize, dst: &mut [u8]) -> usize {
        let mut skip = off;
        let mut done = 0;
        for seg in self.segments() {
            if done == dst.len() {
                break;
            }
            if skip >= seg.len() {
                skip -= seg.len();
                continue;
            }
            let src = &seg[skip..];
            skip = 0;
            let k = src.len().min(dst.len() - done);
            dst[done..done + k].copy_from_slice(&src[..k]);
            done += k;
        }
        done
    }

    /// Read `len` bytes at `off`: a slice into the packet when they are contiguous in
    /// one segment, else a copy into `buf` (which must hold `len` bytes). `None` when
    /// the packet is too short or `buf` too small.
    pub fn read<'a>(&'a self, off: usize, len: usize, buf: &'a mut [u8]) -> Option<&'a [u8]> {
        if off.checked_add(len)? > self.pkt_len() {
            return None;
        }
        let mut skip = off;
        for seg in self.segments() {
            if skip < seg.len() {
                if skip + len <= seg.len() {
                    return Some(&seg[skip..skip + len]);
                }
                break;
            }
            skip -= seg.len();
        }
        let buf = buf.get_mut(..len)?;
        (self.copy_to(off, buf) == len).then_some(&*buf)
    }

    /// The whole packet as one vector (for tests and slow paths).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.pkt_len());
        for s in self.segments() {
            v.extend_from_slice(s);
        }
        v
    }

    /// Make this a fresh empty one-segment packet (frees the other segments).
    pub fn reset(&mut self) -> Result<(), MbufError> {
        if !self.is_writable() {
            return Err(MbufError::Shared);
        }
        let h = self.hdr();
        let rest = h.next;
        // SAFETY: `pool` is a live PoolInner.
        let headroom = unsafe { (*h.pool).headroom };
        if !rest.is_null() {
            // SAFETY: the rest of our chain, owned through this handle; then our own
            // first segment, held alone, becomes a one-segment packet.
            unsafe {
                free_segs_raw(rest);
                (*self.ptr.as_ptr()).next = std::ptr::null_mut();
            }
        }
        // SAFETY: our own first segment, held alone, `next` NULL.
        unsafe { reset_raw(self.ptr.as_ptr(), headroom) };
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::memory::MemPolicy;
    use crate::mempool::MempoolConfig;

    /// A pool of `n` mbufs with `room` bytes of data room (128 of them headroom).
    pub(super) fn pool(n: u32, room: u16) -> Mempool {
        Mempool::create(&MempoolConfig::new("m", n).cache_size(0).data_room(room).policy(MemPolicy::NoHuge)).unwrap()
    }

    #[test]
    fn alloc_append_prepend_adj_trim() {
        let p = pool(8, 256);
        let mut m = Mbuf::alloc(&p).unwrap();
        assert_eq!(m.headroom(), 128);
        assert_eq!(m.tailroom(), 128);
        m.append(10).unwrap().copy_from_slice(b"0123456789");
        m.prepend(2).unwrap().copy_from_slice(b"ab");
        assert_eq!(m.data(), b"ab0123456789");
        m.adj(3).unwrap();
        m.trim(2).unwrap();
        assert_eq!(m.data(), b"1234567");
        assert_eq!(m.pkt_len(), 7);
        assert!(matches!(m.append(1000), Err(MbufError::NoRoom { op: "append", .. })));
        assert!(matches!(m.adj(8), Err(MbufError::NoRoom { op: "adj", .. })));
        drop(m);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn chains_read_and_trim_across_segments() {
        let p = pool(16, 128 + 100);
        let data: Vec<u8> = (0..250u32).map(|i| i as u8).collect();
        let m = Mbuf::from_slice(&p, &data).unwrap();
        assert_eq!(m.nb_segs(), 3);
        assert_eq!(m.to_vec(), data);
        let mut buf = [0u8; 20];
        // Crosses the 100-byte boundary: copied.
        assert_eq!(m.read(90, 20, &mut buf).unwrap(), &data[90..110]);
        // Inside one segment: a slice into the packet.
        assert_eq!(m.read(120, 10, &mut buf).unwrap(), &data[120..130]);
        assert!(m.read(245, 10, &mut buf).is_none());
        let mut m = m;
        m.trim(160).unwrap();
        assert_eq!(m.nb_segs(), 1);
        assert_eq!(m.to_vec(), &data[..90]);
        assert_eq!(p.stats().in_use, 1);
        drop(m);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn alloc_fails_cleanly_when_empty() {
        let p = pool(2, 256);
        let v = Mbuf::alloc_bulk(&p, 2).unwrap();
        assert_eq!(Mbuf::alloc(&p).unwrap_err(), MbufError::NoMbuf);
        assert_eq!(Mbuf::alloc_bulk(&p, 1).unwrap_err(), MbufError::NoMbuf);
        drop(v);
        assert_eq!(Mbuf::alloc_bulk(&p, 2).unwrap().len(), 2);
    }
}
