//! Segments that point at a buffer they do not own: indirect ones (into another
//! mbuf's buffer: [`Mbuf::share`], [`Mbuf::clone_indirect`], [`Mbuf::slice_indirect`])
//! and external ones (into memory the application owns: [`Mbuf::external`]).

use super::free::{prefree_seg, put_seg};
use super::{reset_raw, Mbuf, MbufError};
use crate::mempool::{Mempool, PoolInner, MBUF_HDR};
use ironpath_abi as abi;
use ironpath_abi::Mbuf as RawMbuf;
use std::sync::atomic::Ordering;

/// The direct mbuf that owns the buffer an indirect segment points to.
#[inline(always)]
fn direct_of(buf_addr: *mut u8) -> *mut RawMbuf {
    buf_addr.wrapping_sub(MBUF_HDR).cast()
}

/// Takes a reference for `mi` (a fresh header about to point into `s`'s buffer) on
/// that buffer's owner, and returns the flag `mi` must carry: an external buffer's
/// shared record gains a count (and `mi` records it), otherwise the direct mbuf
/// owning the buffer gains a reference.
///
/// # Safety
/// `s` is a valid segment the caller holds a reference to; `mi` is a header the
/// caller owns.
#[inline(always)]
unsafe fn attach_to_owner_of(s: *const RawMbuf, mi: &mut RawMbuf) -> u64 {
    // SAFETY: caller's contract.
    let sr = unsafe { &*s };
    if sr.ol_flags & abi::EXT_ATTACHED != 0 {
        let sh = sr.ext_shared.cast::<ExtShared>();
        // SAFETY: `s` holds a count on the live record; Relaxed for an increment made
        // while holding a reference (as `Arc::clone`).
        unsafe { (*sh).refcnt.fetch_add(1, Ordering::Relaxed) };
        mi.ext_shared = sr.ext_shared;
        return abi::EXT_ATTACHED;
    }
    let direct = if sr.ol_flags & abi::IND_ATTACHED != 0 { direct_of(sr.buf_addr) } else { s.cast_mut() };
    // SAFETY: the direct mbuf is live while `s` is (it holds a reference to it).
    unsafe { (*direct).refcnt.fetch_add(1, Ordering::Relaxed) };
    abi::IND_ATTACHED
}

/// Either way of pointing at a buffer the mbuf does not own.
pub(crate) const ATTACHED: u64 = abi::IND_ATTACHED | abi::EXT_ATTACHED;

/// The shared record of an external buffer (as DPDK's `rte_mbuf_ext_shared_info`):
/// how many segments point into it, and how to release it when the last one goes.
/// It heads a heap block that also holds the buffer's owner (see [`Mbuf::external`]).
#[repr(C)]
struct ExtShared {
    refcnt: std::sync::atomic::AtomicU32,
    release: unsafe fn(*mut ExtShared),
}

/// An [`ExtShared`] followed by the owner of the memory.
#[repr(C)]
struct ExtBox<T> {
    shared: ExtShared,
    owner: T,
}

/// Releases an `ExtBox<T>` made by [`Mbuf::external`].
///
/// # Safety
/// `p` came from `Box::into_raw` of an `ExtBox<T>` and no segment points into it.
unsafe fn release_ext<T>(p: *mut ExtShared) {
    // SAFETY: caller's contract (ExtShared is the first field of the repr(C) box).
    drop(unsafe { Box::from_raw(p.cast::<ExtBox<T>>()) });
}

/// If `m` is indirect or external, point it back at its own buffer and drop its
/// reference to the buffer's owner (the direct mbuf, freed when that was its last
/// reference; or the external buffer, released when no segment points to it).
///
/// # Safety
/// `m` is a valid segment with no other reference.
#[inline(always)]
pub(super) unsafe fn detach_if_indirect(m: *mut RawMbuf) {
    // SAFETY: caller's contract.
    let mr = unsafe { &mut *m };
    if mr.ol_flags & ATTACHED == 0 {
        return;
    }
    // SAFETY: `pool` of a host mbuf is the `abi` field of a live PoolInner.
    let pool = unsafe { &*mr.pool.cast::<PoolInner>() };
    let own = m.cast::<u8>().wrapping_add(MBUF_HDR);
    let (buf, flags) = (mr.buf_addr, mr.ol_flags);
    mr.buf_addr = own;
    mr.buf_iova = pool.abi.region_iova + (own as u64 - pool.abi.region_va as u64);
    mr.buf_len = pool.abi.buf_len;
    mr.ol_flags &= !ATTACHED;
    if flags & abi::EXT_ATTACHED != 0 {
        let sh = std::mem::replace(&mut mr.ext_shared, std::ptr::null_mut()).cast::<ExtShared>();
        // SAFETY: an external segment holds one count on its live shared record.
        // AcqRel: every segment's reads of the buffer happen-before its release.
        unsafe {
            if (*sh).refcnt.fetch_sub(1, Ordering::AcqRel) == 1 {
                ((*sh).release)(sh);
            }
        }
        return;
    }
    let direct = direct_of(buf);
    // SAFETY: an indirect segment holds one reference to its direct segment.
    let d = unsafe { prefree_seg(direct) };
    if !d.is_null() {
        // SAFETY: `d` is now owned by us and belongs to its own pool; it may still
        // carry the link of the chain it was in.
        unsafe {
            (*d).next = std::ptr::null_mut();
            (*d).nb_segs = 1;
            put_seg(d);
        }
    }
}

impl Mbuf {
    /// A one-segment packet whose data are bytes `off..off + len` of `owner`, without
    /// a copy: the header comes from `pool`, the bytes stay where `owner` keeps them,
    /// and `owner` is dropped when the last segment pointing into them is freed
    /// (clones and slices of the packet share it). As DPDK's external buffers
    /// (`rte_pktmbuf_attach_extbuf`). The data are read-only, as an indirect
    /// segment's, and have no IO address (`buf_iova` 0): for ports whose drivers copy
    /// (the kernel ones), never for DMA. At most 65,535 bytes (a segment's length).
    pub fn external<T: AsRef<[u8]> + Send + Sync + 'static>(
        pool: &Mempool,
        owner: T,
        off: usize,
        len: usize,
    ) -> Result<Mbuf, MbufError> {
        let have = owner.as_ref().len();
        if off.checked_add(len).is_none_or(|end| end > have) || len > usize::from(u16::MAX) {
            return Err(MbufError::NoRoom { op: "external", want: off.saturating_add(len), have });
        }
        let mut raw = [std::ptr::null_mut(); 1];
        pool.get_bulk(&mut raw).map_err(|_| MbufError::NoMbuf)?;
        let shared = ExtShared { refcnt: std::sync::atomic::AtomicU32::new(1), release: release_ext::<T> };
        let b = Box::into_raw(Box::new(ExtBox { shared, owner }));
        // SAFETY: `b` is a live box we own. The bytes are read through `owner` once it
        // is in the box, and the box never moves, so the pointer stays valid as long
        // as the box lives: until the last segment pointing into it is detached.
        let data = unsafe { (*b).owner.as_ref().as_ptr().add(off) };
        let mi = raw[0];
        // SAFETY: `mi` is a fresh header we own; from here the box is released by the
        // detach of the last segment holding it.
        unsafe {
            reset_raw(mi, 0);
            let m = &mut *mi;
            m.buf_addr = data.cast_mut();
            m.buf_iova = 0;
            m.buf_len = len as u16;
            m.data_len = len as u16;
            m.pkt_len = len as u32;
            m.ol_flags = abi::EXT_ATTACHED;
            m.ext_shared = b.cast();
            Ok(Mbuf::from_raw(mi))
        }
    }

    /// A new packet made of indirect segments (headers from `pool`) that show bytes
    /// `off..off + len` of this packet's data, sharing its buffers (each buffer's
    /// owner gains a reference). For segmentation: payload slices without copies.
    pub fn slice_indirect(&self, pool: &Mempool, off: usize, len: usize) -> Result<Mbuf, MbufError> {
        if off + len > self.pkt_len() {
            return Err(MbufError::NoRoom { op: "slice_indirect", want: off + len, have: self.pkt_len() });
        }
        let mut head: Option<Mbuf> = None;
        let mut tail: *mut RawMbuf = std::ptr::null_mut();
        let mut skip = off;
        let mut left = len;
        for s in self.segs() {
            if left == 0 {
                break;
            }
            // SAFETY: a valid segment we hold a reference to.
            let sr = unsafe { &*s };
            let dl = sr.data_len as usize;
            if skip >= dl {
                skip -= dl;
                continue;
            }
            let take = (dl - skip).min(left);
            let mut raw = [std::ptr::null_mut(); 1];
            pool.get_bulk(&mut raw).map_err(|_| MbufError::NoMbuf)?;
            let mi = raw[0];
            // SAFETY: the buffer's owner is live (we hold a reference to `s` through
            // `self`); `mi` is a fresh header we own.
            unsafe {
                reset_raw(mi, 0);
                let m = &mut *mi;
                m.ol_flags = attach_to_owner_of(s, m);
                m.buf_addr = sr.buf_addr;
                m.buf_iova = sr.buf_iova;
                m.buf_len = sr.buf_len;
                m.data_off = sr.data_off + skip as u16;
                m.data_len = take as u16;
                m.pkt_len = take as u32;
                m.port = sr.port;
            }
            match head.as_mut() {
                None => {
                    // SAFETY: a complete one-segment packet owned by us.
                    head = Some(unsafe { Mbuf::from_raw(mi) });
                }
                Some(h) => {
                    // SAFETY: `tail` is the last segment of `h`; `mi` joins the chain.
                    unsafe {
                        (*tail).next = mi;
                        let hh = &mut *h.ptr.as_ptr();
                        hh.nb_segs += 1;
                        hh.pkt_len += take as u32;
                    }
                }
            }
            tail = mi;
            skip = 0;
            left -= take;
        }
        match head {
            Some(h) => Ok(h),
            None => {
                // A zero-length slice: an empty packet.
                let m = Mbuf::alloc(pool)?;
                Ok(m)
            }
        }
    }

    /// Another handle to the same packet: every segment's count goes up by one.
    /// Both handles then see the data as read-only.
    pub fn share(&self) -> Mbuf {
        for s in self.segs() {
            // SAFETY: valid segment we hold a reference to; Relaxed suffices for an
            // increment (we already hold a reference, as with `Arc::clone`).
            unsafe { (*s).refcnt.fetch_add(1, Ordering::Relaxed) };
        }
        Mbuf { ptr: self.ptr }
    }

    /// A clone with its own headers from `pool`, attached to this packet's buffers
    /// (each buffer's owner gains a reference). Offsets and lengths of the clone can
    /// change independently; the data is read-only for both.
    pub fn clone_indirect(&self, pool: &Mempool) -> Result<Mbuf, MbufError> {
        let n = self.nb_segs();
        let mut raw = vec![std::ptr::null_mut(); n];
        pool.get_bulk(&mut raw).map_err(|_| MbufError::NoMbuf)?;
        for (i, s) in self.segs().enumerate() {
            // SAFETY: `s` is our valid segment; `raw[i]` a fresh header owned by us.
            unsafe {
                let mi = &mut *raw[i];
                reset_raw(mi, 0);
                let attached = attach_to_owner_of(s, mi);
                let s = &*s;
                mi.buf_addr = s.buf_addr;
                mi.buf_iova = s.buf_iova;
                mi.buf_len = s.buf_len;
                mi.data_off = s.data_off;
                mi.data_len = s.data_len;
                mi.port = s.port;
                mi.ol_flags = (s.ol_flags & !ATTACHED) | attached;
                mi.packet_type = s.packet_type;
                mi.next = raw.get(i + 1).copied().unwrap_or(std::ptr::null_mut());
            }
        }
        let h = self.hdr();
        // SAFETY: raw[0] is the head we just built.
        unsafe {
            let m = &mut *raw[0];
            m.pkt_len = h.pkt_len;
            m.nb_segs = h.nb_segs;
            copy_packet_meta(m, h);
        }
        // SAFETY: a complete packet owned by us.
        Ok(unsafe { Mbuf::from_raw(raw[0]) })
    }

    /// A copy in buffers of its own from `pool`, writable whatever this packet's
    /// sharing: the data (chained over as many segments as it needs) and the
    /// metadata (port, offload flags and header lengths, packet type, VLAN tag, RSS
    /// hash, aggregate count, timestamp; not the private area).
    pub fn deep_copy(&self, pool: &Mempool) -> Result<Mbuf, MbufError> {
        let mut head = Mbuf::alloc(pool)?;
        let mut tail: Option<Mbuf> = None;
        for mut seg in self.segments() {
            while !seg.is_empty() {
                let cur = tail.as_mut().unwrap_or(&mut head);
                let k = cur.tailroom().min(seg.len());
                if k == 0 {
                    let next = Mbuf::alloc(pool)?;
                    if next.tailroom() == 0 {
                        return Err(MbufError::NoRoom { op: "deep_copy", want: seg.len(), have: 0 });
                    }
                    if let Some(full) = tail.replace(next) {
                        head.chain(full)?;
                    }
                    continue;
                }
                cur.append(k)?.copy_from_slice(&seg[..k]);
                seg = &seg[k..];
            }
        }
        if let Some(last) = tail {
            head.chain(last)?;
        }
        let h = self.hdr();
        let c = head.header_mut();
        c.port = h.port;
        c.ol_flags = h.ol_flags & !ATTACHED;
        c.packet_type = h.packet_type;
        copy_packet_meta(c, h);
        Ok(head)
    }
}

/// The per-packet fields a copy or a clone keeps from its original (those of the
/// head: hash, header lengths for offloads, segment size, VLAN tag, aggregate count,
/// timestamp); buffers, lengths, flags and port are the caller's.
fn copy_packet_meta(dst: &mut RawMbuf, src: &RawMbuf) {
    dst.rss_hash = src.rss_hash;
    dst.l2_len = src.l2_len;
    dst.l3_len = src.l3_len;
    dst.l4_len = src.l4_len;
    dst.tso_segsz = src.tso_segsz;
    dst.vlan_tci = src.vlan_tci;
    dst.aggr_segs = src.aggr_segs;
    dst.timestamp = src.timestamp;
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::mbuf::free_bulk_raw;
    use crate::mbuf::tests::pool;
    use crate::memory::MemPolicy;
    use crate::mempool::MempoolConfig;

    /// An owner that counts its drops.
    struct Counted(Vec<u8>, std::sync::Arc<std::sync::atomic::AtomicUsize>);

    impl AsRef<[u8]> for Counted {
        fn as_ref(&self) -> &[u8] {
            &self.0
        }
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn deep_copy_is_writable_chained_as_needed_and_keeps_the_metadata() {
        let p = pool(32, 256); // 128 bytes of data per segment
        let data: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        let mut m = Mbuf::from_slice(&p, &data).unwrap();
        {
            let h = m.header_mut();
            h.port = 3;
            h.ol_flags = abi::TX_TCP_CKSUM | abi::TX_IPV4;
            h.l2_len = 18;
            h.l3_len = 20;
            h.l4_len = 32;
            h.vlan_tci = 7;
            h.rss_hash = 0xabcd;
        }
        let shared = m.share();
        let before = p.stats().in_use;
        let mut c = m.deep_copy(&p).unwrap();
        assert_eq!(c.to_vec(), data);
        assert_eq!(c.nb_segs(), 8);
        assert_eq!(p.stats().in_use, before + 8);
        assert!(c.is_writable(), "the copy is its own");
        let h = c.header();
        assert_eq!(
            (h.port, h.ol_flags, h.l2_len, h.l3_len, h.l4_len),
            (3, abi::TX_TCP_CKSUM | abi::TX_IPV4, 18, 20, 32)
        );
        assert_eq!((h.vlan_tci, h.rss_hash), (7, 0xabcd));
        c.data_mut().unwrap()[0] = 0xff;
        assert_eq!(m.data()[0], 0, "the original is untouched");
        drop((m, shared, c));
        assert_eq!(p.stats().in_use, 0);
        // A pool too small for the copy: an error, nothing leaked.
        let small = pool(4, 256);
        let m = Mbuf::from_slice(&p, &data).unwrap();
        assert!(m.deep_copy(&small).is_err());
        assert_eq!(small.stats().in_use, 0);
    }

    #[test]
    fn external_buffers_are_shared_read_only_and_released_with_the_last_segment() {
        let p = Mempool::create(&MempoolConfig::new("ext-test", 64).cache_size(0).policy(MemPolicy::NoHuge)).unwrap();
        let drops = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let data: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
        assert!(matches!(
            Mbuf::external(&p, Counted(data.clone(), drops.clone()), 0, 70_000),
            Err(MbufError::NoRoom { .. })
        ));
        assert!(Mbuf::external(&p, Counted(data.clone(), drops.clone()), 69_000, 1001).is_err());
        assert_eq!(drops.load(Ordering::SeqCst), 2, "refused owners are dropped at once");
        let mut m = Mbuf::external(&p, Counted(data.clone(), drops.clone()), 1000, 60_000).unwrap();
        assert_eq!((m.pkt_len(), m.data(), m.header().buf_iova), (60_000, &data[1000..61_000], 0));
        assert!(!m.is_writable() && m.data_mut().is_err() && m.append(1).is_err() && m.prepend(1).is_err());
        // A slice, a clone and a share all keep the owner alive.
        let s = m.slice_indirect(&p, 100, 50).unwrap();
        let c = m.clone_indirect(&p).unwrap();
        let sh = m.share();
        assert_eq!(s.data(), &data[1100..1150]);
        assert_eq!(c.data(), m.data());
        // Chained behind a direct header, as a TSO frame is built.
        let mut h = Mbuf::alloc(&p).unwrap();
        h.append(54).unwrap().fill(7);
        h.chain(c).unwrap();
        assert_eq!(h.pkt_len(), 60_054);
        assert_eq!(p.stats().in_use, 4, "headers: the packet, the slice, the clone, the frame's");
        drop(m);
        drop(sh);
        drop(s);
        assert_eq!(drops.load(Ordering::SeqCst), 2, "still held by the chained clone");
        // Freed the way a PMD frees: free_bulk_raw on the raw pointer.
        // SAFETY: we own the packet and do not use it afterwards.
        unsafe { free_bulk_raw(&[h.into_raw()]) };
        assert_eq!(drops.load(Ordering::SeqCst), 3, "released with its last segment");
        assert_eq!(p.stats().in_use, 0, "every header back in the pool");
    }

    #[test]
    fn chain_many_and_slice_indirect_share_without_copies() {
        let p = pool(32, 256);
        let mut head = Mbuf::from_slice(&p, b"abc").unwrap();
        let mut tails: Vec<Mbuf> =
            [&b"defg"[..], b"h", b"ijklmn"].iter().map(|d| Mbuf::from_slice(&p, d).unwrap()).collect();
        head.chain_many(&mut tails).unwrap();
        assert!(tails.is_empty());
        assert_eq!((head.nb_segs(), head.pkt_len()), (4, 14));
        assert_eq!(head.to_vec(), b"abcdefghijklmn");
        for (off, len) in [(0, 14), (2, 5), (3, 4), (7, 0), (8, 6), (13, 1)] {
            let s = head.slice_indirect(&p, off, len).unwrap();
            assert_eq!(s.to_vec(), &b"abcdefghijklmn"[off..off + len], "{off}+{len}");
            assert_eq!(s.pkt_len(), len);
            assert!(len == 0 || !s.is_writable());
        }
        assert!(head.slice_indirect(&p, 10, 5).is_err());
        let s = head.slice_indirect(&p, 2, 9).unwrap();
        drop(head);
        // The slice keeps the buffers alive after the original is gone.
        assert_eq!(s.to_vec(), b"cdefghijk");
        assert_eq!(s.slice_indirect(&p, 1, 3).unwrap().to_vec(), b"def");
        drop(s);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn share_and_indirect_clone_free_last() {
        let p = pool(16, 128 + 100);
        let hdrs = pool(16, 128);
        let data: Vec<u8> = (0..150u32).map(|i| i as u8).collect();
        let m = Mbuf::from_slice(&p, &data).unwrap();
        let s = m.share();
        assert_eq!(m.refcnt(), 2);
        let mut c = m.clone_indirect(&hdrs).unwrap();
        assert_eq!(m.refcnt(), 3);
        assert_eq!(c.to_vec(), data);
        assert!(!c.is_writable());
        // The clone's offsets are its own.
        c.adj(10).unwrap();
        assert_eq!(c.pkt_len(), 140);
        assert_eq!(m.pkt_len(), 150);
        drop(m);
        drop(s);
        // The buffers are still referenced by the clone.
        assert_eq!(p.stats().in_use, 2);
        assert_eq!(c.to_vec(), &data[10..]);
        let c2 = c.clone_indirect(&hdrs).unwrap();
        drop(c);
        assert_eq!(c2.to_vec(), &data[10..]);
        drop(c2);
        assert_eq!(p.stats().in_use, 0);
        assert_eq!(hdrs.stats().in_use, 0);
    }

    #[test]
    fn shared_data_is_read_only() {
        let p = pool(4, 256);
        let mut m = Mbuf::from_slice(&p, b"hello").unwrap();
        let s = m.share();
        assert_eq!(m.data_mut().unwrap_err(), MbufError::Shared);
        assert_eq!(m.append(1).unwrap_err(), MbufError::Shared);
        drop(s);
        m.data_mut().unwrap()[0] = b'j';
        assert_eq!(m.data(), b"jello");
        m.reset().unwrap();
        assert_eq!(m.pkt_len(), 0);
    }
}
