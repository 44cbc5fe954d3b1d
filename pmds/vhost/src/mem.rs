//! The front end's memory as we map it: the regions of its last `SET_MEM_TABLE`, and
//! the translation of the addresses it names (guest physical addresses in
//! descriptors, its own process addresses for rings) into ours. A translation
//! succeeds only when the whole range, length included, lies inside one region and
//! computing its end does not wrap; anything else is the front end's fault, counted
//! by the caller.

use crate::proto::Region;
use std::os::fd::OwnedFd;

/// One mapped region.
#[derive(Debug)]
struct Mapped {
    gpa: u64,
    uaddr: u64,
    size: u64,
    /// Our address of the region's first byte.
    host: *mut u8,
}

/// A memory table, mapped. Dropping it unmaps every region: only the control thread
/// drops one (a queue reaches it through its ring's lock, never owns it).
#[derive(Debug, Default)]
pub struct MemTable {
    regions: Vec<Mapped>,
    #[cfg(target_os = "linux")]
    _maps: Vec<ironpath_pmd_sdk::ipc::Mapping>,
    /// Regions whose file could shrink under the mapping (not sealed, or hugetlbfs).
    pub unsealed: usize,
}

// SAFETY: the table is plain addresses of shared mappings; every access through them
// follows the rules of `vring.rs` (bounds checked here, the ring's lock held).
unsafe impl Send for MemTable {}
// SAFETY: as above.
unsafe impl Sync for MemTable {}

/// Why a memory table was refused.
#[derive(Debug)]
pub enum MapError {
    /// The file is smaller than the region it is said to hold.
    ShortFile { region: usize, file: u64, need: u64 },
    /// Two regions overlap in guest or process addresses.
    Overlap,
    /// The file can shrink under the mapping (not sealed against it, or hugetlbfs).
    Unsealed { region: usize },
    /// `fstat` or `mmap` failed.
    Io(std::io::Error),
}

impl std::fmt::Display for MapError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MapError::ShortFile { region, file, need } => {
                write!(f, "region {region}: its file has {file} bytes, the region needs {need}")
            }
            MapError::Overlap => f.write_str("regions overlap"),
            MapError::Unsealed { region } => {
                write!(f, "region {region}: its file is not sealed against shrinking (require-sealed=no accepts it)")
            }
            MapError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl MemTable {
    /// Map `regions`, each from its file in `fds` (same order). A region's file must
    /// be sealed against shrinking (else a front end could cut the memory under us,
    /// and our next access to it would fault), unless `unsealed_ok`: such regions are
    /// then only counted. Only the region itself is mapped (from its offset rounded
    /// down to the file's page size), never the file before it.
    #[cfg(target_os = "linux")]
    pub fn map(regions: &[Region], fds: &[OwnedFd], unsealed_ok: bool) -> Result<MemTable, MapError> {
        use ironpath_pmd_sdk::ipc;
        use std::os::fd::AsRawFd;
        let mut t = MemTable::default();
        for (i, (r, fd)) in regions.iter().zip(fds).enumerate() {
            // Sealed first, then measured: a size read before the seal could change.
            let sealed = !ipc::on_hugetlbfs(fd) && ipc::seal_shrink(fd);
            if !sealed {
                if !unsealed_ok {
                    return Err(MapError::Unsealed { region: i });
                }
                t.unsealed += 1;
            }
            let file = ipc::file_size(fd).map_err(MapError::Io)?;
            let need = r.offset.checked_add(r.size).ok_or(MapError::Overlap)?;
            if file < need {
                return Err(MapError::ShortFile { region: i, file, need });
            }
            // hugetlbfs maps whole huge pages: offsets and lengths in its block size.
            // SAFETY: an all-zero stat is valid; fstat fills it from a descriptor we hold.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            let blk = if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } == 0 {
                st.st_blksize.max(4096) as u64
            } else {
                4096
            };
            let start = r.offset / blk * blk;
            let len = (need - start).div_ceil(blk).saturating_mul(blk);
            let m = ipc::Mapping::new_at(fd, start, len).map_err(MapError::Io)?;
            // SAFETY: `offset - start + size <= len`, inside the mapping just made.
            let host = unsafe { m.ptr().add((r.offset - start) as usize) };
            t.regions.push(Mapped { gpa: r.gpa, uaddr: r.uaddr, size: r.size, host });
            t._maps.push(m);
        }
        t.check_overlap()?;
        Ok(t)
    }

    /// A table over memory the caller owns (tests, fuzzing, an in-process peer).
    ///
    /// # Safety
    /// Each `(region, host)`: `host` points to `region.size` bytes that stay valid
    /// (readable and writable) while the table lives.
    pub unsafe fn from_raw(regions: &[(Region, *mut u8)]) -> Result<MemTable, MapError> {
        let mut t = MemTable::default();
        for &(r, host) in regions {
            t.regions.push(Mapped { gpa: r.gpa, uaddr: r.uaddr, size: r.size, host });
        }
        t.check_overlap()?;
        Ok(t)
    }

    fn check_overlap(&self) -> Result<(), MapError> {
        let over = |a0: u64, a1: u64, b0: u64, b1: u64| a0 < b1 && b0 < a1;
        for (i, a) in self.regions.iter().enumerate() {
            for b in &self.regions[i + 1..] {
                if over(a.gpa, a.gpa + a.size, b.gpa, b.gpa + b.size)
                    || over(a.uaddr, a.uaddr + a.size, b.uaddr, b.uaddr + b.size)
                {
                    return Err(MapError::Overlap);
                }
            }
        }
        Ok(())
    }

    /// Our address of the `len` bytes at guest physical address `addr`, when they lie
    /// in one region.
    #[inline]
    pub fn gpa(&self, addr: u64, len: u64) -> Option<*mut u8> {
        let end = addr.checked_add(len)?;
        for r in &self.regions {
            if addr >= r.gpa && end <= r.gpa + r.size {
                // SAFETY: inside the region, which `host` maps whole.
                return Some(unsafe { r.host.add((addr - r.gpa) as usize) });
            }
        }
        None
    }

    /// Our address of the `len` bytes at the front end's process address `addr`.
    pub fn uva(&self, addr: u64, len: u64) -> Option<*mut u8> {
        let end = addr.checked_add(len)?;
        for r in &self.regions {
            if addr >= r.uaddr && end <= r.uaddr + r.size {
                // SAFETY: inside the region, which `host` maps whole.
                return Some(unsafe { r.host.add((addr - r.uaddr) as usize) });
            }
        }
        None
    }

    /// How many regions.
    pub fn len(&self) -> usize {
        self.regions.len()
    }

    /// Whether the table has no region.
    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_translates_only_inside_one_region_without_wrapping() {
        let mut a = vec![0u8; 4096];
        let mut b = vec![0u8; 4096];
        let ra = Region { gpa: 0x1000, size: 4096, uaddr: 0x10_0000, offset: 0 };
        let rb = Region { gpa: 0x2000, size: 4096, uaddr: 0x20_0000, offset: 0 };
        // SAFETY: both vectors outlive the table.
        let t = unsafe { MemTable::from_raw(&[(ra, a.as_mut_ptr()), (rb, b.as_mut_ptr())]) }.unwrap();
        assert_eq!(t.gpa(0x1000, 4096), Some(a.as_mut_ptr()));
        // SAFETY: in bounds.
        assert_eq!(t.gpa(0x2010, 16), Some(unsafe { b.as_mut_ptr().add(16) }));
        assert_eq!(t.gpa(0x1fff, 2), None, "across two regions, even adjacent");
        assert_eq!(t.gpa(0x0fff, 1), None);
        assert_eq!(t.gpa(u64::MAX, 2), None);
        assert_eq!(t.gpa(0x3001, 0), None);
        // SAFETY: in bounds.
        let at = unsafe { a.as_mut_ptr().add(0xff0) };
        assert_eq!(t.uva(0x10_0ff0, 16), Some(at));
        assert_eq!(t.uva(0x10_0ff0, 17), None);
        let overlapping = Region { gpa: 0x1800, size: 4096, uaddr: 0x30_0000, offset: 0 };
        // SAFETY: as above.
        assert!(unsafe { MemTable::from_raw(&[(ra, a.as_mut_ptr()), (overlapping, b.as_mut_ptr())]) }.is_err());
    }
}
