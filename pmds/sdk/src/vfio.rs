//! PCI functions through VFIO, for the drivers of real devices (`net_e1000`,
//! `net_virtio`; feature `vfio`): the checks that turn a misconfigured machine into a
//! message saying what to do ([`check_function`]), the open function with memory
//! space and bus mastering on ([`Function`]), and the IOMMU mappings that let the
//! device reach descriptor rings and mempools ([`Function::dma_map`], [`DmaMem`];
//! IOVA = VA, see "DMA and IOVA" in `docs/writing-a-pmd.md`).

use crate::abi::{self, errno};
use crate::PmdError;
use pci_driver::backends::vfio::VfioPciDevice;
use pci_driver::device::PciDevice;
use pci_driver::regions::Permissions;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

pub use pci_driver;

/// Where the kernel lists PCI functions.
pub const SYSFS_PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// Parse a PCI address (`0000:00:01.0` or `00:01.0`) into the long lower-case form.
pub use crate::util::pci::parse_addr as parse_pci_addr;

/// How to bind `addr` to vfio-pci, as shell commands.
fn bind_hint(addr: &str) -> String {
    format!(
        "bind it: echo vfio-pci > /sys/bus/pci/devices/{addr}/driver_override; \
         echo {addr} > /sys/bus/pci/drivers_probe"
    )
}

/// Check that the PCI function at `addr` can be opened through VFIO; returns its IOMMU
/// group. Each refusal names the device and what to do (`root` is
/// [`SYSFS_PCI_DEVICES`] outside tests).
pub fn check_function(root: &Path, addr: &str, ids: &[abi::PciId]) -> Result<u32, PmdError> {
    let dir = root.join(addr);
    if !dir.exists() {
        return Err(PmdError::new(errno::ENODEV, format!("no PCI device {addr} (lspci -D lists them)")));
    }
    let id = |f: &str| {
        std::fs::read_to_string(dir.join(f))
            .ok()
            .and_then(|t| u16::from_str_radix(t.trim().trim_start_matches("0x"), 16).ok())
    };
    let (vendor, device) = (id("vendor"), id("device"));
    let found = abi::PciId { vendor: vendor.unwrap_or(0), device: device.unwrap_or(0) };
    if !ids.contains(&found) {
        let want: Vec<String> = ids.iter().map(|i| format!("{:04x}:{:04x}", i.vendor, i.device)).collect();
        return Err(PmdError::new(
            errno::ENODEV,
            format!(
                "PCI device {addr} is {:04x}:{:04x}, not one this driver drives ({})",
                found.vendor,
                found.device,
                want.join(", ")
            ),
        ));
    }
    let Ok(group) = std::fs::read_link(dir.join("iommu_group")) else {
        return Err(PmdError::new(
            errno::ENODEV,
            format!(
                "PCI device {addr} has no IOMMU group: boot with intel_iommu=on iommu=pt \
                 (and an IOMMU in the VM: qemu -device intel-iommu,caching-mode=on)"
            ),
        ));
    };
    let group: u32 = group
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| PmdError::new(errno::ENODEV, format!("PCI device {addr}: unreadable iommu_group link")))?;
    match std::fs::read_link(dir.join("driver")) {
        Err(_) => {
            return Err(PmdError::new(
                errno::ENODEV,
                format!("PCI device {addr} is not bound to vfio-pci (it has no driver): {}", bind_hint(addr)),
            ))
        }
        Ok(d) if d.file_name().is_some_and(|n| n != "vfio-pci") => {
            let name = d.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            return Err(PmdError::new(
                errno::EBUSY,
                format!(
                    "PCI device {addr} is bound to {name}, not vfio-pci: unbind it (echo {addr} > \
                     /sys/bus/pci/devices/{addr}/driver/unbind), then {}",
                    bind_hint(addr)
                ),
            ));
        }
        Ok(_) => {}
    }
    if !Path::new(&format!("/dev/vfio/{group}")).exists() && root == Path::new(SYSFS_PCI_DEVICES) {
        return Err(PmdError::new(
            errno::ENODEV,
            format!("PCI device {addr}: /dev/vfio/{group} is missing (is the vfio-pci module loaded?)"),
        ));
    }
    Ok(group)
}

/// Mapped IOVA ranges of one device (IOVA = VA).
#[derive(Default)]
struct Maps {
    /// Page-aligned `[start, end)` ranges.
    ranges: Vec<Range<u64>>,
}

/// An open PCI function: the VFIO device and its IOMMU mappings. Queues and ring
/// memory hold it in an `Arc`, so it is closed last; dropping it removes every
/// mapping still in place.
pub struct Function {
    /// `DDDD:BB:DD.F`.
    pub addr: String,
    maps: Mutex<Maps>,
    /// Bumped whenever a mapping goes away, so TX queues drop their cached copies.
    map_gen: AtomicU64,
    dev: VfioPciDevice,
}

impl Function {
    /// Open the function at `addr` (checked by [`check_function`], which gave its
    /// IOMMU `group`), enable memory space and bus mastering.
    pub fn open(addr: &str, group: u32) -> Result<Function, PmdError> {
        let path = Path::new(SYSFS_PCI_DEVICES).join(addr);
        let dev = VfioPciDevice::open(&path).map_err(|e| {
            PmdError::new(
                errno::EBUSY,
                format!("PCI device {addr}: cannot open /dev/vfio/{group}: {e} (is another process using it?)"),
            )
        })?;
        let io = |what: &str, e: std::io::Error| PmdError::new(errno::EIO, format!("PCI device {addr}: {what}: {e}"));
        let cmd = dev.config().command();
        cmd.memory_space_enable().write(true).map_err(|e| io("enabling memory space", e))?;
        // The device reads descriptors and packets, and writes them, by DMA.
        cmd.bus_master_enable().write(true).map_err(|e| io("enabling bus mastering", e))?;
        Ok(Function { addr: addr.to_string(), maps: Mutex::new(Maps::default()), map_gen: AtomicU64::new(0), dev })
    }

    /// The VFIO device: config space, BARs, interrupts.
    pub fn device(&self) -> &VfioPciDevice {
        &self.dev
    }

    fn maps(&self) -> std::sync::MutexGuard<'_, Maps> {
        self.maps.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Make `[va, va + len)` reachable by the NIC at IOVA `iova` (page-aligned
    /// outwards). Ranges already mapped exactly are kept unless `remap`; mappings that
    /// overlap the new range without being equal are stale (two live regions never
    /// share addresses) and are removed first. `what` names the memory in errors.
    pub fn dma_map(&self, va: *const u8, iova: u64, len: u64, remap: bool, what: &str) -> Result<(), PmdError> {
        if va as u64 != iova {
            return Err(PmdError::invalid(format!(
                "{what}: IOVA {iova:#x} differs from its address {va:p}; the driver needs IOVA = VA"
            )));
        }
        let iommu = self.dev.iommu();
        let align = iommu.alignment().max(4096) as u64;
        let r = (iova & !(align - 1))..(iova + len).next_multiple_of(align);
        let mut maps = self.maps();
        if !remap && maps.ranges.contains(&r) {
            return Ok(());
        }
        if !iommu.valid_iova_ranges().iter().any(|v| v.start <= r.start && r.end <= v.end) {
            return Err(PmdError::new(
                errno::ERANGE,
                format!(
                    "{what} at IOVA {:#x}..{:#x} is outside the IOMMU's usable addresses {:x?}: with IOVA = VA \
                     the IOMMU needs a 48-bit address width (qemu -device intel-iommu,aw-bits=48)",
                    r.start,
                    r.end,
                    iommu.valid_iova_ranges()
                ),
            ));
        }
        let stale: Vec<Range<u64>> =
            maps.ranges.iter().filter(|m| m.start < r.end && r.start < m.end).cloned().collect();
        for m in &stale {
            // An error leaves nothing we can do better than try the new mapping.
            let _ = iommu.unmap(m.start, (m.end - m.start) as usize);
        }
        maps.ranges.retain(|m| !stale.contains(m));
        if !stale.is_empty() {
            self.map_gen.fetch_add(1, Ordering::Release);
        }
        // SAFETY: `va..va + len` is memory the caller guarantees stays allocated while
        // mapped (a host mempool region, kept by the host while a port that saw it is
        // open, or our own ring memory, unmapped before it is freed); the aligned range
        // only adds the rest of the first and last pages, which belong to the same
        // mapping (pools and rings are page-aligned and page-sized).
        unsafe { iommu.map(r.start, (r.end - r.start) as usize, r.start as *const u8, Permissions::ReadWrite) }
            .map_err(|e| PmdError::new(errno::EIO, format!("{what}: IOMMU mapping failed: {e}")))?;
        maps.ranges.push(r);
        Ok(())
    }

    /// Remove the mapping that covers `[iova, iova + len)`, if any.
    pub fn dma_unmap(&self, iova: u64, len: u64) {
        let mut maps = self.maps();
        if let Some(i) = maps.ranges.iter().position(|m| m.start <= iova && iova + len <= m.end) {
            let m = maps.ranges.swap_remove(i);
            self.map_gen.fetch_add(1, Ordering::Release);
            let _ = self.dev.iommu().unmap(m.start, (m.end - m.start) as usize);
        }
    }

    /// Map the region backing a host mempool (on first sight, or again with `remap`).
    ///
    /// # Safety
    /// `pool` is NULL or a live host pool.
    pub unsafe fn map_pool(&self, pool: *const abi::Mempool, remap: bool) -> Result<(), PmdError> {
        if pool.is_null() {
            return Err(PmdError::invalid("packet without a mempool"));
        }
        // SAFETY: a live host pool (caller's contract); these fields are immutable.
        let (va, iova, len, name) = unsafe {
            let p = &*pool;
            let name = if p.name.is_null() {
                "?".into()
            } else {
                std::ffi::CStr::from_ptr(p.name).to_string_lossy().into_owned()
            };
            (p.region_va.cast_const(), p.region_iova, p.region_len, name)
        };
        self.dma_map(va, iova, len, remap, &format!("mempool `{name}`"))
    }

    /// The mapped ranges and their generation (for a TX queue's cache).
    pub fn mapped(&self) -> (u64, Vec<Range<u64>>) {
        let maps = self.maps();
        (self.map_gen.load(Ordering::Acquire), maps.ranges.clone())
    }

    /// Current mapping generation (one atomic load).
    #[inline(always)]
    pub fn map_gen(&self) -> u64 {
        self.map_gen.load(Ordering::Acquire)
    }
}

impl Drop for Function {
    fn drop(&mut self) {
        let maps = std::mem::take(&mut *self.maps());
        for m in maps.ranges {
            let _ = self.dev.iommu().unmap(m.start, (m.end - m.start) as usize);
        }
    }
}

/// Zeroed, page-aligned memory the device reaches by DMA (descriptor rings), mapped
/// at IOVA = VA for its whole life.
pub struct DmaMem {
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
    f: std::sync::Arc<Function>,
}

// SAFETY: plain memory owned by one queue; moving it between threads moves ownership.
unsafe impl Send for DmaMem {}

impl DmaMem {
    /// Allocate `len` bytes (rounded up to pages) and map them for `f`.
    pub fn new(f: &std::sync::Arc<Function>, len: usize, what: &str) -> Result<DmaMem, PmdError> {
        let layout = std::alloc::Layout::from_size_align(len.max(1).next_multiple_of(4096), 4096)
            .map_err(|_| PmdError::invalid(format!("{what}: {len} bytes is too large")))?;
        // SAFETY: `layout` has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = std::ptr::NonNull::new(p)
            .ok_or_else(|| PmdError::new(errno::ENOMEM, format!("{what}: cannot allocate {len} bytes")))?;
        let m = DmaMem { ptr, layout, f: f.clone() };
        f.dma_map(p, p as u64, layout.size() as u64, false, what)?;
        Ok(m)
    }

    /// Start of the memory.
    #[inline(always)]
    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Its IOVA (the NIC's address for it).
    pub fn iova(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }
}

impl Drop for DmaMem {
    fn drop(&mut self) {
        // The NIC must not reach memory we give back to the allocator.
        self.f.dma_unmap(self.iova(), self.layout.size() as u64);
        // SAFETY: allocated in `new` with this layout; no one uses it any more (the
        // queue owning it is being dropped and the NIC's mapping is gone).
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const E1000: &[abi::PciId] = &[abi::PciId { vendor: 0x8086, device: 0x100e }];

    /// A fake sysfs tree with one function in it.
    struct FakeSysfs(std::path::PathBuf);

    impl FakeSysfs {
        fn new(tag: &str, device: &str) -> Self {
            let root = std::env::temp_dir().join(format!("ironpath-vfio-{tag}-{}", std::process::id()));
            let dir = root.join("0000:00:01.0");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("vendor"), "0x8086\n").unwrap();
            std::fs::write(dir.join("device"), format!("{device}\n")).unwrap();
            FakeSysfs(root)
        }
        fn link(&self, name: &str, to: &str) {
            std::os::unix::fs::symlink(to, self.0.join("0000:00:01.0").join(name)).unwrap();
        }
        fn check(&self, addr: &str) -> Result<u32, String> {
            check_function(&self.0, addr, E1000).map_err(|e| e.msg)
        }
    }

    impl Drop for FakeSysfs {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn refusals_say_what_to_do() {
        let s = FakeSysfs::new("refuse", "0x100e");
        assert_eq!(s.check("0000:00:09.0").unwrap_err(), "no PCI device 0000:00:09.0 (lspci -D lists them)");
        let e = s.check("0000:00:01.0").unwrap_err();
        assert!(e.starts_with("PCI device 0000:00:01.0 has no IOMMU group: boot with intel_iommu=on iommu=pt"), "{e}");
        s.link("iommu_group", "../../../kernel/iommu_groups/3");
        let e = s.check("0000:00:01.0").unwrap_err();
        assert_eq!(
            e,
            "PCI device 0000:00:01.0 is not bound to vfio-pci (it has no driver): bind it: echo vfio-pci > \
             /sys/bus/pci/devices/0000:00:01.0/driver_override; echo 0000:00:01.0 > /sys/bus/pci/drivers_probe"
        );
        s.link("driver", "../../../bus/pci/drivers/e1000");
        let e = s.check("0000:00:01.0").unwrap_err();
        assert!(e.starts_with("PCI device 0000:00:01.0 is bound to e1000, not vfio-pci: unbind it"), "{e}");
        std::fs::remove_file(s.0.join("0000:00:01.0/driver")).unwrap();
        s.link("driver", "../../../bus/pci/drivers/vfio-pci");
        assert_eq!(s.check("0000:00:01.0"), Ok(3));
    }

    #[test]
    fn other_devices_are_refused() {
        let s = FakeSysfs::new("other", "0x10d3");
        assert_eq!(
            s.check("0000:00:01.0").unwrap_err(),
            "PCI device 0000:00:01.0 is 8086:10d3, not one this driver drives (8086:100e)"
        );
    }
}
