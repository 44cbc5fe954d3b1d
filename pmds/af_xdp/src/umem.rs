//! Where packets live in the UMEM: the host pool's memory region, registered with the
//! kernel as it is, in unaligned-chunk mode. Pure arithmetic on offsets, with every
//! value the kernel writes (an RX descriptor, a completion) checked before it is used;
//! no pointer is formed here.
//!
//! The pool lays its objects out back to back from the region's start, `stride`
//! bytes apart: an mbuf header (`hdr` bytes), then its buffer (`buf_len` bytes, the
//! headroom first). A buffer is posted to the fill ring by the offset of its first
//! byte; with a UMEM headroom of 0 the kernel writes the frame `XDP_PACKET_HEADROOM`
//! (256) bytes further on (the buffer's own headroom, so nothing the kernel or an XDP
//! program writes reaches the mbuf header), and the RX descriptor gives back that
//! offset as the base, the distance to the frame in its top 16 bits.

/// Bytes the kernel keeps in front of a received frame (`XDP_PACKET_HEADROOM`).
pub const XDP_HEADROOM: u32 = 256;
/// Smallest and largest chunk the kernel accepts (`XDP_UMEM_MIN_CHUNK_SIZE`, a page).
pub const MIN_CHUNK: u32 = 2048;
/// Largest chunk: one page.
pub const MAX_CHUNK: u32 = 4096;
/// The base offset of an unaligned-mode address; the rest is the offset to the data.
pub const ADDR_MASK: u64 = (1 << 48) - 1;

/// The pool's geometry as the UMEM sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Bytes of the registered region.
    pub region_len: u64,
    /// Distance between two objects.
    pub stride: u64,
    /// Objects in the pool.
    pub count: u32,
    /// Bytes of mbuf header in front of each buffer.
    pub hdr: u64,
    /// Bytes of each buffer (headroom included).
    pub buf_len: u32,
    /// The chunk size registered: what the kernel may write from a posted offset.
    pub chunk: u32,
}

/// Why a layout cannot be a UMEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayoutError {
    /// Buffers smaller than the kernel's smallest chunk.
    BufferTooSmall(u32),
    /// The objects do not fit the region.
    RegionTooSmall,
}

impl std::fmt::Display for LayoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::BufferTooSmall(b) => write!(
                f,
                "the pool's buffers hold {b} bytes; AF_XDP needs at least {MIN_CHUNK} (a mempool with a larger data room)"
            ),
            Self::RegionTooSmall => write!(f, "the pool's objects do not fit its memory region"),
        }
    }
}

impl Layout {
    /// The UMEM view of a pool of `count` objects `stride` bytes apart, `hdr` bytes
    /// of header in front of `buf_len`-byte buffers, in a region of `region_len` bytes.
    pub fn new(region_len: u64, stride: u64, count: u32, hdr: u64, buf_len: u32) -> Result<Self, LayoutError> {
        if buf_len < MIN_CHUNK {
            return Err(LayoutError::BufferTooSmall(buf_len));
        }
        let end = stride.checked_mul(u64::from(count)).ok_or(LayoutError::RegionTooSmall)?;
        if stride < hdr + u64::from(buf_len) || end > region_len {
            return Err(LayoutError::RegionTooSmall);
        }
        Ok(Self { region_len, stride, count, hdr, buf_len, chunk: buf_len.min(MAX_CHUNK) })
    }

    /// The largest frame the kernel delivers into a buffer.
    pub fn max_frame(&self) -> u32 {
        self.chunk - XDP_HEADROOM
    }

    /// The fill-ring address of object `idx`'s buffer.
    #[inline(always)]
    pub fn fill_addr(&self, idx: u32) -> u64 {
        u64::from(idx) * self.stride + self.hdr
    }

    /// Object index of a buffer whose first byte is at region offset `buf_off`, if it
    /// is one of the pool's buffers.
    #[inline(always)]
    pub fn index_of(&self, buf_off: u64) -> Option<u32> {
        let rel = buf_off.checked_sub(self.hdr)?;
        let idx = rel / self.stride;
        (rel % self.stride == 0 && idx < u64::from(self.count)).then_some(idx as u32)
    }

    /// An RX descriptor (`addr`, `len`) from the kernel: the object it names and
    /// the frame's offset in that object's buffer. `None` if it names no buffer of the
    /// pool, or the frame would not lie inside the buffer.
    #[inline(always)]
    pub fn rx_desc(&self, addr: u64, len: u32) -> Option<(u32, u16)> {
        let idx = self.index_of(addr & ADDR_MASK)?;
        let off = addr >> 48;
        if len == 0 || off + u64::from(len) > u64::from(self.buf_len) {
            return None;
        }
        Some((idx, off as u16))
    }

    /// The TX address of `len` bytes at region offset `data_off`, if they lie in one
    /// of the pool's buffers (the kernel checks its own bound, the chunk size).
    #[inline(always)]
    pub fn tx_addr(&self, data_off: u64, len: u32) -> Option<u64> {
        let rel = data_off.checked_sub(self.hdr)?;
        let (idx, at) = (rel / self.stride, rel % self.stride);
        let fits = idx < u64::from(self.count) && at + u64::from(len) <= u64::from(self.buf_len);
        (fits && len > 0 && len <= self.chunk).then_some(data_off)
    }
}

/// Which objects are in the kernel's hands (posted to the fill ring and not yet
/// received), one bit each: a descriptor naming any other object is refused, so a
/// buffer is never handed out twice.
pub struct Posted {
    bits: Vec<u64>,
    count: u32,
    n: usize,
}

impl Posted {
    /// None of `count` objects posted.
    pub fn new(count: u32) -> Self {
        Self { bits: vec![0; (count as usize).div_ceil(64)], count, n: 0 }
    }

    /// Mark `idx` posted; `false` if it already was (or is out of range).
    #[inline(always)]
    pub fn set(&mut self, idx: u32) -> bool {
        if idx >= self.count {
            return false;
        }
        let (w, b) = (idx as usize / 64, idx % 64);
        match self.bits.get_mut(w) {
            Some(x) if *x & (1 << b) == 0 => {
                *x |= 1 << b;
                self.n += 1;
                true
            }
            _ => false,
        }
    }

    /// Take `idx` back; `false` if it was not posted.
    #[inline(always)]
    pub fn take(&mut self, idx: u32) -> bool {
        if idx >= self.count {
            return false;
        }
        let (w, b) = (idx as usize / 64, idx % 64);
        match self.bits.get_mut(w) {
            Some(x) if *x & (1 << b) != 0 => {
                *x &= !(1 << b);
                self.n -= 1;
                true
            }
            _ => false,
        }
    }

    /// How many are posted.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Every posted index (and forget them).
    pub fn drain(&mut self) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.n);
        for (w, x) in self.bits.iter_mut().enumerate() {
            while *x != 0 {
                let b = x.trailing_zeros();
                out.push(w as u32 * 64 + b);
                *x &= *x - 1;
            }
        }
        self.n = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host's default pool: 128-byte headers, 2176-byte buffers, 2304-byte objects.
    fn layout() -> Layout {
        Layout::new(2304 * 100 + 4096, 2304, 100, 128, 2176).unwrap()
    }

    #[test]
    fn buffers_map_to_objects_and_back() {
        let l = layout();
        assert_eq!(l.chunk, 2176);
        assert_eq!(l.max_frame(), 1920);
        for idx in [0, 1, 57, 99] {
            let a = l.fill_addr(idx);
            assert_eq!(l.index_of(a), Some(idx));
            // The kernel's descriptor: the base we posted, the frame 256 bytes on.
            assert_eq!(l.rx_desc(a | 256 << 48, 60), Some((idx, 256)));
            assert_eq!(l.rx_desc(a | 256 << 48, 1920), Some((idx, 256)));
        }
        assert_eq!(l.index_of(l.fill_addr(100)), None, "past the last object");
        assert_eq!(l.index_of(l.fill_addr(3) + 64), None, "not a buffer's start");
        assert_eq!(l.index_of(0), None);
        assert_eq!(l.rx_desc(l.fill_addr(3) | 256 << 48, 1921), None, "past the buffer");
        assert_eq!(l.rx_desc(l.fill_addr(3) | 256 << 48, 0), None);
        assert_eq!(l.rx_desc(l.fill_addr(3) | 2200 << 48, 1), None);
        assert_eq!(l.tx_addr(l.fill_addr(5) + 128, 1000), Some(l.fill_addr(5) + 128));
        assert_eq!(l.tx_addr(l.fill_addr(5) + 128, 2049), None, "past the buffer");
        assert_eq!(l.tx_addr(l.fill_addr(100) + 128, 60), None, "past the pool");
        assert_eq!(l.tx_addr(10, 60), None, "in a header");
    }

    #[test]
    fn small_buffers_and_short_regions_are_refused() {
        assert_eq!(Layout::new(1 << 20, 2048, 100, 128, 1920), Err(LayoutError::BufferTooSmall(1920)));
        assert_eq!(Layout::new(2304 * 99, 2304, 100, 128, 2176), Err(LayoutError::RegionTooSmall));
        assert_eq!(Layout::new(1 << 30, 2000, 100, 128, 2176), Err(LayoutError::RegionTooSmall));
        assert_eq!(Layout::new(1 << 30, 9344, 10, 128, 9216).unwrap().chunk, 4096);
    }

    #[test]
    fn posted_objects_are_taken_once() {
        let mut p = Posted::new(130);
        assert!(p.set(0) && p.set(129) && p.set(64));
        assert!(!p.set(64), "twice");
        assert!(!p.set(130), "out of range");
        assert_eq!(p.len(), 3);
        assert!(p.take(64) && !p.take(64) && !p.take(5) && !p.take(1000));
        assert_eq!(p.drain(), [0, 129]);
        assert!(p.is_empty());
    }
}
