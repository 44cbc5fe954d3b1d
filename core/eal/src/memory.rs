//! Memory regions: 2 MiB hugepages through `hugepage-rs` when the system has free
//! ones, otherwise ordinary anonymous pages with one warning per process (like DPDK's
//! `--no-huge`). IOVA is the virtual address (IOVA-as-VA, what VFIO with an IOMMU uses).

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

/// Size of the hugepages this runtime asks for.
pub const HUGEPAGE_SIZE: usize = 2 << 20;

/// What backs a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemKind {
    /// 2 MiB hugepages (`MAP_HUGETLB`).
    Hugepages,
    /// Ordinary 4 KiB pages.
    Normal,
}

impl std::fmt::Display for MemKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MemKind::Hugepages => "2 MiB hugepages",
            MemKind::Normal => "ordinary pages",
        })
    }
}

/// Which memory the runtime should try.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemPolicy {
    /// Hugepages if the system has enough free, else ordinary pages with a warning.
    #[default]
    PreferHuge,
    /// Ordinary pages only (`--no-huge`), no warning.
    NoHuge,
}

/// Errors creating a region.
#[derive(Debug, thiserror::Error)]
pub enum MemError {
    /// Zero-length request.
    #[error("memory region of 0 bytes requested")]
    Empty,
    /// `mmap` of ordinary pages failed.
    #[error("cannot map {len} bytes of memory: {err}")]
    Map {
        /// Requested length.
        len: usize,
        /// OS error.
        err: std::io::Error,
    },
}

static WARNED: AtomicBool = AtomicBool::new(false);

/// Free 2 MiB hugepages according to `/proc/meminfo` (0 when unknown).
pub fn hugepages_free() -> usize {
    let Ok(s) = std::fs::read_to_string("/proc/meminfo") else {
        return 0;
    };
    let mut free = 0;
    let mut size_ok = false;
    for line in s.lines() {
        let mut it = line.split_whitespace();
        match (it.next(), it.next()) {
            (Some("HugePages_Free:"), Some(v)) => free = v.parse().unwrap_or(0),
            (Some("Hugepagesize:"), Some(v)) => size_ok = v == "2048",
            _ => {}
        }
    }
    if size_ok {
        free
    } else {
        0
    }
}

/// One mapping of memory for pools.
#[derive(Debug)]
pub struct MemRegion {
    ptr: NonNull<u8>,
    len: usize,
    kind: MemKind,
}

// SAFETY: a region is a plain block of memory; it carries no thread affinity.
unsafe impl Send for MemRegion {}
// SAFETY: the region hands out only raw pointers; access discipline is the user's.
unsafe impl Sync for MemRegion {}

impl MemRegion {
    /// Map `len` bytes (rounded up to the page size), zeroed, following `policy`.
    pub fn new(len: usize, policy: MemPolicy) -> Result<Self, MemError> {
        if len == 0 {
            return Err(MemError::Empty);
        }
        let huge_len = len.div_ceil(HUGEPAGE_SIZE) * HUGEPAGE_SIZE;
        if policy == MemPolicy::PreferHuge {
            if hugepages_free() * HUGEPAGE_SIZE >= huge_len {
                if let Ok(layout) = Layout::from_size_align(huge_len, 64) {
                    // SAFETY: `layout` has non-zero size; the block is released with the
                    // same layout in `Drop`.
                    let p = unsafe { hugepage_rs::alloc(layout) };
                    if let Some(ptr) = NonNull::new(p) {
                        return Ok(Self { ptr, len: huge_len, kind: MemKind::Hugepages });
                    }
                }
            }
            if !WARNED.swap(true, Ordering::Relaxed) {
                log::warn!(
                    "no free 2 MiB hugepages for {} MiB; using ordinary pages \
                     (slower; reserve some with `echo 64 > /proc/sys/vm/nr_hugepages`, or pass --no-huge)",
                    huge_len >> 20
                );
            }
        }
        let page = 4096;
        let norm_len = len.div_ceil(page) * page;
        // SAFETY: an anonymous private mapping with no address hint has no preconditions.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                norm_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(MemError::Map { len: norm_len, err: std::io::Error::last_os_error() });
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or(MemError::Empty)?;
        Ok(Self { ptr, len: norm_len, kind: MemKind::Normal })
    }

    /// Whether the one-time fallback warning has been printed in this process.
    pub fn fallback_warned() -> bool {
        WARNED.load(Ordering::Relaxed)
    }

    /// Start of the region.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// IO virtual address of the start (IOVA-as-VA).
    pub fn iova(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true: regions are at least one page.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// What backs the region.
    pub fn kind(&self) -> MemKind {
        self.kind
    }
}

impl Drop for MemRegion {
    fn drop(&mut self) {
        match self.kind {
            MemKind::Hugepages => {
                if let Ok(layout) = Layout::from_size_align(self.len, 64) {
                    // SAFETY: allocated by `hugepage_rs::alloc` with this same layout.
                    unsafe { hugepage_rs::dealloc(self.ptr.as_ptr(), layout) };
                }
            }
            MemKind::Normal => {
                // SAFETY: mapped by `mmap` above with exactly this length; no references
                // into the region outlive it (pools own their region).
                unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
            }
        }
    }
}

/// `N` words, zeroed, on an anonymous mapping of their own (page-aligned): pages
/// never written take no memory (on huge pages, see [`ZeroTable::with_front`], a
/// written page holds 2 MiB), and dropping the table gives the mapping back at
/// once. For a table sized to every index its users can form (so that reads need no
/// bounds checks) of which only a part is used: from the heap, a block of megabytes
/// may be cleared whole, and stay resident, when the allocator reuses memory.
pub struct ZeroTable<const N: usize> {
    region: MemRegion,
    /// Where word 0 is in the region, in bytes (0, or up to a huge page's worth of
    /// padding before a 2 MiB boundary).
    at: usize,
}

/// From how many bytes of a [`ZeroTable`]'s front in use the table asks for
/// transparent huge pages there: 64 pages of 4 KiB are what a first-level data TLB
/// holds, so a table read at random over more takes a TLB miss on most reads; on
/// 2 MiB pages one entry covers it. The price is up to one huge page less what is
/// used, resident.
pub const ZERO_TABLE_HUGE_FROM: usize = 256 << 10;

impl<const N: usize> ZeroTable<N> {
    /// Map it.
    pub fn new() -> Result<Self, MemError> {
        Self::with_front(0)
    }

    /// Map it for a user that will write and read at random its first `front`
    /// words: when they take [`ZERO_TABLE_HUGE_FROM`] bytes or more and the kernel
    /// gives transparent huge pages, word 0 is on a 2 MiB boundary and those pages
    /// (rounded up to whole huge pages) are asked to be huge before they are first
    /// touched: the table then holds whole 2 MiB pages resident (a front of 272 KiB
    /// takes 2 MiB). The rest is as [`ZeroTable::new`].
    pub fn with_front(front: usize) -> Result<Self, MemError> {
        const HUGE: usize = 2 << 20;
        let bytes = N * std::mem::size_of::<u32>();
        let front = front.min(N) * std::mem::size_of::<u32>();
        if front < ZERO_TABLE_HUGE_FROM || !transparent_huge_pages() {
            return Ok(Self { region: MemRegion::new(bytes, MemPolicy::NoHuge)?, at: 0 });
        }
        let region = MemRegion::new(bytes + HUGE, MemPolicy::NoHuge)?;
        let start = region.as_ptr() as usize;
        let at = start.next_multiple_of(HUGE) - start;
        let span = front.next_multiple_of(HUGE).min(region.len() - at);
        // SAFETY: [start + at, start + at + span) lies inside the region (at < HUGE
        // and span <= len - at), which nothing has touched yet; MADV_HUGEPAGE changes
        // no content, only how the pages are backed, and a refusal is harmless.
        unsafe { libc::madvise((start + at) as *mut libc::c_void, span, libc::MADV_HUGEPAGE) };
        Ok(Self { region, at })
    }

    fn words(&self) -> *mut [u32; N] {
        // The region holds `at` bytes and then `N` words, whichever constructor made it.
        self.region.as_ptr().wrapping_add(self.at).cast::<[u32; N]>()
    }
}

impl<const N: usize> std::ops::Deref for ZeroTable<N> {
    type Target = [u32; N];

    fn deref(&self) -> &[u32; N] {
        // SAFETY: from `at` bytes on, the region holds at least `N` words (rounded
        // up to pages); it is page-aligned and `at` a multiple of the page size (so
        // word 0 is aligned for `u32`); it is zero-filled by `mmap` (a valid `u32`
        // pattern) and written only through `deref_mut`, and it lives as long as
        // `self`.
        unsafe { &*self.words() }
    }
}

impl<const N: usize> std::ops::DerefMut for ZeroTable<N> {
    fn deref_mut(&mut self) -> &mut [u32; N] {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference.
        unsafe { &mut *self.words() }
    }
}

impl<const N: usize> std::fmt::Debug for ZeroTable<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ZeroTable<{N}>")
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn huge_table_starts_on_a_huge_page_boundary() {
        for len in [0usize, 1, 65_536, 262_144, 700_000] {
            let (v, at) = huge_table(len, 7u32);
            assert_eq!(v.len(), at + len);
            assert!(v[at..].iter().all(|&x| x == 7));
            if len >= 262_144 {
                assert_eq!(v[at..].as_ptr() as usize % (2 << 20), 0, "len {len}");
            } else {
                assert_eq!(at, 0, "len {len}: no padding");
            }
        }
    }

    #[test]
    fn normal_region_is_zeroed_and_writable() {
        let r = MemRegion::new(10_000, MemPolicy::NoHuge).unwrap();
        assert_eq!(r.kind(), MemKind::Normal);
        assert_eq!(r.len(), 12_288);
        // SAFETY: the region is `len` bytes, mapped read/write, owned by this test.
        let s = unsafe { std::slice::from_raw_parts_mut(r.as_ptr(), r.len()) };
        assert!(s.iter().all(|b| *b == 0));
        s[0] = 1;
        s[r.len() - 1] = 2;
    }

    #[test]
    fn a_zero_table_is_zeroed_page_aligned_and_writable_at_both_ends() {
        let mut t = ZeroTable::<{ 1 << 20 }>::new().unwrap();
        assert_eq!(t.as_ptr() as usize % 4096, 0);
        assert!(t[..4096].iter().chain(&t[(1 << 20) - 4096..]).all(|&w| w == 0));
        t[0] = 1;
        t[(1 << 20) - 1] = 2;
        assert_eq!((t[0], t[(1 << 20) - 1]), (1, 2));
    }

    #[test]
    fn a_zero_table_with_a_large_front_starts_on_a_huge_page_boundary() {
        let mut t = ZeroTable::<{ 3 << 20 }>::with_front(ZERO_TABLE_HUGE_FROM / 4).unwrap();
        let huge = transparent_huge_pages();
        assert_eq!(t.as_ptr() as usize % if huge { 2 << 20 } else { 4096 }, 0);
        assert!(t.iter().step_by(1021).all(|&w| w == 0));
        t[0] = 1;
        t[(3 << 20) - 1] = 2;
        assert_eq!((t[0], t[(3 << 20) - 1]), (1, 2));
        let small = ZeroTable::<{ 3 << 20 }>::with_front(ZERO_TABLE_HUGE_FROM / 4 - 1).unwrap();
        assert_eq!(small.at, 0);
    }

    #[test]
    fn empty_region_is_refused() {
        assert!(matches!(MemRegion::new(0, MemPolicy::NoHuge), Err(MemError::Empty)));
    }
}

/// Can [`huge_table`] get transparent huge pages: the kernel's setting is `always`
/// or `madvise` (not `never`, and the file exists)?
pub fn transparent_huge_pages() -> bool {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .map(|s| !s.contains("[never]"))
        .unwrap_or(false)
}

/// A table of `len` copies of `fill` for random reads (a FIB), on transparent huge
/// pages where the kernel allows (`madvise(MADV_HUGEPAGE)` before the first touch):
/// a table of megabytes on 4 KiB pages takes a TLB miss on nearly every random
/// read, on 2 MiB pages few. Gives a vector and the index at which the table starts
/// in it: on a 2 MiB boundary for a table of 1 MiB or more (the elements before it
/// are padding, up to 2 MiB, and its last huge page is whole), else 0 (an ordinary
/// vector: padding would cost more than the few TLB entries saved).
pub fn huge_table<T: Copy>(len: usize, fill: T) -> (Vec<T>, usize) {
    const HUGE: usize = 2 << 20;
    let size = std::mem::size_of::<T>();
    if size == 0 || !HUGE.is_multiple_of(size) || len * size < HUGE / 2 {
        return (vec![fill; len], 0);
    }
    let per = HUGE / size;
    let span = len.next_multiple_of(per);
    let mut v: Vec<T> = Vec::with_capacity(span + per);
    let start = v.as_mut_ptr() as usize;
    let pad = start.next_multiple_of(HUGE) - start;
    if !pad.is_multiple_of(size) {
        v.resize(len, fill);
        return (v, 0);
    }
    let at = pad / size;
    if span > 0 {
        // SAFETY: [start + pad, start + pad + span * size) lies inside the vector's
        // own allocation (capacity span + per elements, pad < HUGE), which nothing has
        // touched yet; MADV_HUGEPAGE changes no content, only how the pages are
        // backed, and a refusal is harmless.
        unsafe { libc::madvise((start + pad) as *mut libc::c_void, span * size, libc::MADV_HUGEPAGE) };
    }
    v.resize(at + len, fill);
    (v, at)
}
