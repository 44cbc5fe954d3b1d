//! Test fixtures (feature `test-utils`): a refcounted [`Payload`] and the workspace's
//! seeded generator, shared by this crate's tests, the simulation tests and the fuzz target.
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use crate::Payload;

/// A rope of shared byte buffers: slicing and appending copy no bytes (like an mbuf
/// chain with indirect segments).
#[derive(Clone, Default)]
pub struct Bytes {
    parts: Vec<(Arc<[u8]>, Range<usize>)>,
    len: usize,
    /// Bytes each part is charged as memory (`None`: its length), like a packet
    /// buffer that pins its whole data room whatever it carries.
    buffer: Option<usize>,
}

impl Bytes {
    /// The bytes, copied out.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        self.copy_into(&mut out);
        out
    }

    /// Appends the bytes to `out`.
    pub fn copy_into(&self, out: &mut Vec<u8>) {
        for (buf, range) in &self.parts {
            out.extend_from_slice(&buf[range.clone()]);
        }
    }

    /// How many shared buffers the rope references.
    pub fn parts(&self) -> usize {
        self.parts.len()
    }

    /// `data` as if it sat in a packet buffer of `buffer` bytes: each part (slices
    /// too) is charged `buffer` bytes of memory ([`Payload::truesize`]).
    pub fn in_buffer(data: &[u8], buffer: usize) -> Self {
        Bytes { buffer: Some(buffer), ..Bytes::from(data) }
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Self {
        let len = v.len();
        if len == 0 {
            return Bytes::default();
        }
        Bytes { parts: vec![(Arc::from(v), 0..len)], len, buffer: None }
    }
}

impl From<&[u8]> for Bytes {
    fn from(v: &[u8]) -> Self {
        Bytes::from(v.to_vec())
    }
}

impl Payload for Bytes {
    fn len(&self) -> usize {
        self.len
    }

    fn slice(&self, off: usize, len: usize) -> Self {
        assert!(off + len <= self.len, "slice {off}+{len} of {} bytes", self.len);
        let mut out = Bytes { buffer: self.buffer, ..Bytes::default() };
        let mut skip = off;
        let mut want = len;
        for (buf, range) in &self.parts {
            if want == 0 {
                break;
            }
            let part_len = range.len();
            if skip >= part_len {
                skip -= part_len;
                continue;
            }
            let take = (part_len - skip).min(want);
            let start = range.start + skip;
            out.parts.push((buf.clone(), start..start + take));
            out.len += take;
            want -= take;
            skip = 0;
        }
        out
    }

    fn truesize(&self) -> usize {
        match self.buffer {
            Some(b) => b * self.parts.len(),
            None => self.len,
        }
    }

    fn compact(parts: &[Self]) -> Option<Self> {
        let mut v = Vec::new();
        for p in parts {
            p.copy_into(&mut v);
        }
        Some(Bytes::from(v))
    }

    fn append(&mut self, tail: Self) {
        if self.parts.is_empty() {
            self.buffer = tail.buffer;
        }
        for (buf, range) in tail.parts {
            self.len += range.len();
            if let Some((last, last_range)) = self.parts.last_mut() {
                if Arc::ptr_eq(last, &buf) && last_range.end == range.start {
                    last_range.end = range.end;
                    continue;
                }
            }
            self.parts.push((buf, range));
        }
    }
}

impl PartialEq for Bytes {
    fn eq(&self, other: &Self) -> bool {
        self.to_vec() == other.to_vec()
    }
}

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bytes({} bytes in {} parts)", self.len, self.parts.len())
    }
}

/// The workspace's seeded test generator (ironpath-util's), for this crate's tests.
pub use ironpath_util::testing::XorShift;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_slice_and_append_share_buffers() {
        let a = Bytes::from((0u8..100).collect::<Vec<_>>());
        let b = Bytes::from((100u8..200).collect::<Vec<_>>());
        let mut ab = a.slice(10, 90);
        ab.append(b.slice(0, 50));
        assert_eq!(ab.len(), 140);
        assert_eq!(ab.parts(), 2);
        assert_eq!(ab.to_vec(), (10u8..150).collect::<Vec<_>>());
        let mid = ab.slice(85, 10);
        assert_eq!(mid.to_vec(), (95u8..105).collect::<Vec<_>>());
        // Re-joining adjacent slices of one buffer keeps one part.
        let mut joined = a.slice(0, 30);
        joined.append(a.slice(30, 20));
        assert_eq!(joined.parts(), 1);
        assert_eq!(joined, Bytes::from((0u8..50).collect::<Vec<_>>()));
        assert!(Bytes::from(Vec::new()).is_empty());
    }
}
