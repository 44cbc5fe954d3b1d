//! [`Chunk`]: the [`Payload`] the `tcp` node gives the engine. Received data stays in
//! the mbufs it arrived in (shared by reference count, so a GRO chain or an LRO
//! buffer is never copied); data an application sends stays in its own buffer
//! (`Arc<[u8]>`: a cached file, a response head, a pattern). Slicing and appending
//! move references only. The bytes are copied exactly once per transmission, into
//! the frame that carries them, or not at all: a TSO frame's payload is a chain of
//! segments pointing into those buffers ([`Chunk::to_segments`]).

use ironpath_eal::{Mbuf, MbufError, Mempool};
use ironpath_tcp::Payload;
use std::sync::Arc;

/// One contiguous run of bytes of a [`Chunk`].
enum Piece {
    /// `len` bytes from offset `off` of a packet (any of its segments).
    Mbuf { m: Mbuf, off: u32, len: u32 },
    /// `len` bytes from offset `off` of an application buffer.
    Bytes { b: Arc<[u8]>, off: u32, len: u32 },
}

impl Clone for Piece {
    fn clone(&self) -> Self {
        match self {
            Piece::Mbuf { m, off, len } => Piece::Mbuf { m: m.share(), off: *off, len: *len },
            Piece::Bytes { b, off, len } => Piece::Bytes { b: Arc::clone(b), off: *off, len: *len },
        }
    }
}

/// Heap bytes an application buffer costs beyond its contents (the `Arc` counts and
/// the allocator's header), charged with it.
const HEAP_OVERHEAD: usize = 32;

impl Piece {
    fn len(&self) -> usize {
        match self {
            Piece::Mbuf { len, .. } | Piece::Bytes { len, .. } => *len as usize,
        }
    }

    /// Memory the piece pins: the packet's buffers, or the whole heap buffer.
    #[inline]
    fn truesize(&self) -> usize {
        match self {
            Piece::Mbuf { m, .. } => m.truesize(),
            Piece::Bytes { b, .. } => b.len() + HEAP_OVERHEAD,
        }
    }

    /// `len` bytes from `off` (relative to this piece).
    fn slice(&self, off: usize, len: usize) -> Piece {
        match self {
            Piece::Mbuf { m, off: o, .. } => Piece::Mbuf { m: m.share(), off: *o + off as u32, len: len as u32 },
            Piece::Bytes { b, off: o, .. } => Piece::Bytes { b: Arc::clone(b), off: *o + off as u32, len: len as u32 },
        }
    }

    /// Calls `f` on the piece's bytes in order (several slices for a chained packet).
    fn for_each(&self, f: &mut impl FnMut(&[u8])) {
        match self {
            Piece::Bytes { b, off, len } => f(&b[*off as usize..(*off + *len) as usize]),
            Piece::Mbuf { m, off, len } => {
                let (mut skip, mut left) = (*off as usize, *len as usize);
                for s in m.segments() {
                    if left == 0 {
                        break;
                    }
                    if skip >= s.len() {
                        skip -= s.len();
                        continue;
                    }
                    let n = (s.len() - skip).min(left);
                    f(&s[skip..skip + n]);
                    skip = 0;
                    left -= n;
                }
            }
        }
    }
}

/// Segment data: received packet bytes or application bytes, by reference.
///
/// Almost every chunk is a single piece (one received payload, or a slice of one
/// buffer); a segment that spans two queued buffers gets more, kept in `rest`.
#[derive(Clone)]
pub struct Chunk {
    first: Option<Piece>,
    rest: Vec<Piece>,
    len: usize,
}

impl std::fmt::Debug for Chunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Chunk({} bytes in {} pieces)", self.len, self.first.iter().count() + self.rest.len())
    }
}

impl Chunk {
    /// `len` bytes at offset `off` of packet `m` (the chunk holds a reference to it).
    pub fn from_mbuf(m: Mbuf, off: usize, len: usize) -> Chunk {
        debug_assert!(off + len <= m.pkt_len());
        Chunk { first: Some(Piece::Mbuf { m, off: off as u32, len: len as u32 }), rest: Vec::new(), len }
    }

    /// `len` bytes at offset `off` of an application buffer.
    ///
    /// # Panics
    /// If the range is outside `b` or longer than 4 GiB.
    pub fn from_bytes(b: Arc<[u8]>, off: usize, len: usize) -> Chunk {
        assert!(off + len <= b.len() && off + len <= u32::MAX as usize, "chunk outside its buffer");
        Chunk { first: Some(Piece::Bytes { b, off: off as u32, len: len as u32 }), rest: Vec::new(), len }
    }

    /// All of `b`.
    pub fn from_vec(b: Vec<u8>) -> Chunk {
        let len = b.len();
        Chunk::from_bytes(b.into(), 0, len)
    }

    /// The bytes as packets whose segments point into the chunk's buffers, headers
    /// from `pool`, appended to `out` in order, without a copy: an application buffer
    /// becomes external segments of at most 65,535 bytes ([`Mbuf::external`], each
    /// holding the buffer), received data indirect segments of the packets it came
    /// in ([`Mbuf::slice_indirect`]). For ports whose drivers copy (the segments have
    /// no IO address). On an error what was appended stays in `out` for the caller
    /// to drop.
    pub fn to_segments(&self, pool: &Mempool, out: &mut Vec<Mbuf>) -> Result<(), MbufError> {
        for p in self.first.iter().chain(&self.rest) {
            match p {
                Piece::Bytes { b, off, len } => {
                    let (mut off, mut left) = (*off as usize, *len as usize);
                    while left > 0 {
                        let n = left.min(usize::from(u16::MAX));
                        out.push(Mbuf::external(pool, Arc::clone(b), off, n)?);
                        off += n;
                        left -= n;
                    }
                }
                Piece::Mbuf { m, off, len } => out.push(m.slice_indirect(pool, *off as usize, *len as usize)?),
            }
        }
        Ok(())
    }

    /// Calls `f` on the bytes in order, as one or more slices.
    pub fn for_each_slice(&self, mut f: impl FnMut(&[u8])) {
        for p in self.first.iter().chain(&self.rest) {
            p.for_each(&mut f);
        }
    }

    /// The bytes, copied (for tests and small heads).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len);
        self.for_each_slice(|s| v.extend_from_slice(s));
        v
    }

    /// Copies the bytes into `dst` (exactly `self.len()` long) and returns their
    /// Internet checksum sum (not folded), computed in the same pass over the data.
    pub fn copy_and_sum(&self, dst: &mut [u8]) -> u32 {
        debug_assert_eq!(dst.len(), self.len);
        let mut at = 0;
        let mut acc: u64 = 0;
        self.for_each_slice(|s| {
            dst[at..at + s.len()].copy_from_slice(s);
            let sum = u64::from(ironpath_wire::checksum::fold(ironpath_wire::checksum::sum(s)));
            // A run starting at an odd offset contributes its sum byte-swapped.
            acc += if at % 2 == 1 { u64::from((sum as u16).swap_bytes()) } else { sum };
            at += s.len();
        });
        while acc > 0xffff_ffff {
            acc = (acc & 0xffff_ffff) + (acc >> 32);
        }
        acc as u32
    }
}

impl Payload for Chunk {
    fn len(&self) -> usize {
        self.len
    }

    fn slice(&self, off: usize, len: usize) -> Self {
        let mut out = Chunk { first: None, rest: Vec::new(), len };
        let (mut skip, mut left) = (off, len);
        for p in self.first.iter().chain(&self.rest) {
            if left == 0 {
                break;
            }
            if skip >= p.len() {
                skip -= p.len();
                continue;
            }
            let n = (p.len() - skip).min(left);
            let piece = p.slice(skip, n);
            if out.first.is_none() {
                out.first = Some(piece);
            } else {
                out.rest.push(piece);
            }
            skip = 0;
            left -= n;
        }
        out
    }

    #[inline]
    fn truesize(&self) -> usize {
        let first = self.first.as_ref().map_or(0, Piece::truesize);
        if self.rest.is_empty() {
            first // the usual case: one received payload
        } else {
            first + self.rest.iter().map(Piece::truesize).sum::<usize>()
        }
    }

    /// The bytes copied into one heap buffer of their size: received data that
    /// pinned a packet buffer per few bytes gives the buffers back to the pool.
    fn compact(parts: &[Self]) -> Option<Self> {
        let len = parts.iter().map(|p| p.len).sum();
        let mut v = Vec::with_capacity(len);
        for p in parts {
            p.for_each_slice(|s| v.extend_from_slice(s));
        }
        Some(Chunk::from_vec(v))
    }

    fn append(&mut self, tail: Self) {
        let Chunk { first, rest, len } = tail;
        for p in first.into_iter().chain(rest) {
            if self.first.is_none() {
                self.first = Some(p);
            } else {
                self.rest.push(p);
            }
        }
        self.len += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ironpath_eal::{Mempool, MempoolConfig};
    use ironpath_wire::checksum;

    fn pool() -> Mempool {
        Mempool::create(&MempoolConfig::new("chunk", 64).data_room(256)).unwrap()
    }

    #[test]
    fn slices_and_appends_without_copying() {
        let pool = pool();
        let mut m = Mbuf::from_slice(&pool, &[1, 2, 3, 4, 5]).unwrap();
        m.chain(Mbuf::from_slice(&pool, &[6, 7, 8]).unwrap()).unwrap();
        let a = Chunk::from_mbuf(m, 1, 6); // 2..=7 across both segments
        assert_eq!(a.to_vec(), [2, 3, 4, 5, 6, 7]);
        let mut b = Chunk::from_vec(vec![10, 11, 12, 13]).slice(1, 2);
        assert_eq!(b.to_vec(), [11, 12]);
        b.append(a.slice(3, 3));
        assert_eq!((b.len(), b.to_vec()), (5, vec![11, 12, 5, 6, 7]));
        assert_eq!(b.slice(1, 3).to_vec(), [12, 5, 6]);
        assert_eq!(b.slice(2, 3).to_vec(), [5, 6, 7]);
        drop((a, b));
        assert_eq!(pool.stats().in_use, 0, "every reference returned");
    }

    #[test]
    fn copy_and_sum_matches_a_plain_checksum_at_odd_boundaries() {
        let mut c = Chunk::from_vec(vec![0x12, 0x34, 0x56]);
        c.append(Chunk::from_vec(vec![0x78, 0x9a]));
        c.append(Chunk::from_vec(vec![0xbc, 0xde, 0xf0, 0x11]));
        let mut dst = vec![0; c.len()];
        let s = c.copy_and_sum(&mut dst);
        assert_eq!(dst, c.to_vec());
        assert_eq!(checksum::fold(s), checksum::fold(checksum::sum(&dst)));
    }
}
