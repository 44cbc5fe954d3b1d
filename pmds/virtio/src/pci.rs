//! The virtio 1.x PCI transport ("modern"): the vendor capabilities that say where
//! the common, notification and device configuration structures lie (in which BAR,
//! at which offset), and the accesses to them. The BARs are mapped once; every
//! access is a volatile read or write at an offset checked against the structure's
//! length when the capabilities were read.

use ironpath_pmd_sdk::abi::errno;
use ironpath_pmd_sdk::vfio::pci_driver::device::PciDevice;
use ironpath_pmd_sdk::vfio::pci_driver::regions::{MappedOwningPciRegion, PciRegion, Permissions};
use ironpath_pmd_sdk::vfio::Function;
use ironpath_pmd_sdk::PmdError;

/// Capability types (`cfg_type`).
const CAP_COMMON: u8 = 1;
const CAP_NOTIFY: u8 = 2;
const CAP_DEVICE: u8 = 4;
/// PCI capability id of the vendor-specific capabilities virtio uses.
const CAP_VENDOR: u8 = 0x09;

/// Common configuration offsets (virtio 1.x, 4.1.4.3).
pub mod common {
    pub const DFSELECT: usize = 0;
    pub const DF: usize = 4;
    pub const GFSELECT: usize = 8;
    pub const GF: usize = 12;
    pub const MSIX: usize = 16;
    pub const NUM_QUEUES: usize = 18;
    pub const STATUS: usize = 20;
    pub const Q_SELECT: usize = 22;
    pub const Q_SIZE: usize = 24;
    pub const Q_MSIX: usize = 26;
    pub const Q_ENABLE: usize = 28;
    pub const Q_NOFF: usize = 30;
    pub const Q_DESC: usize = 32;
    pub const Q_AVAIL: usize = 40;
    pub const Q_USED: usize = 48;
    /// The structure's length.
    pub const LEN: usize = 56;
}

/// Device status bits.
pub mod status {
    pub const ACKNOWLEDGE: u8 = 1;
    pub const DRIVER: u8 = 2;
    pub const DRIVER_OK: u8 = 4;
    pub const FEATURES_OK: u8 = 8;
    pub const FAILED: u8 = 128;
}

/// One structure in a mapped BAR.
#[derive(Clone, Copy, Debug)]
struct Window {
    ptr: *mut u8,
    len: usize,
}

impl Window {
    fn at(&self, off: usize, n: usize) -> *mut u8 {
        assert!(off + n <= self.len, "virtio structure access out of its window");
        // SAFETY: inside the window, itself inside a mapped BAR (checked when found).
        unsafe { self.ptr.add(off) }
    }
}

/// The transport of one device.
pub struct Transport {
    common: Window,
    notify: Window,
    notify_mult: u32,
    device: Window,
    /// The mapped BARs the windows point into (kept alive with them).
    _bars: Vec<MappedOwningPciRegion>,
}

// SAFETY: the windows point into BAR mappings the transport owns; MMIO accesses are
// volatile and the device serialises them.
unsafe impl Send for Transport {}
// SAFETY: as above; each queue writes only its own notification address.
unsafe impl Sync for Transport {}

fn bad(addr: &str, what: &str) -> PmdError {
    PmdError::new(errno::ENODEV, format!("PCI device {addr}: {what}"))
}

impl Transport {
    /// Find the capabilities and map their BARs.
    pub fn new(f: &Function) -> Result<Transport, PmdError> {
        let cfg = f.device().config();
        let io = |e: std::io::Error| bad(&f.addr, &format!("config space: {e}"));
        let mut ptr = cfg.read_u8(0x34).map_err(io)? & 0xfc;
        let mut found: [Option<(u8, u32, u32, u32)>; 5] = [None; 5];
        // A list of at most 48 capabilities (the config space holds no more).
        for _ in 0..48 {
            if ptr < 0x40 {
                break;
            }
            let p = u64::from(ptr);
            let id = cfg.read_u8(p).map_err(io)?;
            if id == CAP_VENDOR {
                let kind = cfg.read_u8(p + 3).map_err(io)?;
                let bar = cfg.read_u8(p + 4).map_err(io)?;
                let off = cfg.read_le_u32(p + 8).map_err(io)?;
                let len = cfg.read_le_u32(p + 12).map_err(io)?;
                let mult = if kind == CAP_NOTIFY { cfg.read_le_u32(p + 16).map_err(io)? } else { 0 };
                let k = usize::from(kind);
                if (1..5).contains(&k) && found[k].is_none() && bar < 6 {
                    found[k] = Some((bar, off, len, mult));
                }
            }
            ptr = cfg.read_u8(p + 1).map_err(io)? & 0xfc;
        }
        let need = |k: u8, what: &str| {
            found[usize::from(k)]
                .ok_or_else(|| bad(&f.addr, &format!("no virtio {what} capability (not a virtio 1.x device?)")))
        };
        let (c, n, d) = (need(CAP_COMMON, "common")?, need(CAP_NOTIFY, "notify")?, need(CAP_DEVICE, "device")?);
        let mut bars: Vec<(u8, MappedOwningPciRegion)> = Vec::new();
        let mut window = |(bar, off, len, _): (u8, u32, u32, u32), min: usize| -> Result<Window, PmdError> {
            if !bars.iter().any(|(b, _)| *b == bar) {
                let r = f.device().bar(usize::from(bar)).ok_or_else(|| bad(&f.addr, &format!("no BAR {bar}")))?;
                let m =
                    r.map(.., Permissions::ReadWrite).map_err(|e| bad(&f.addr, &format!("mapping BAR {bar}: {e}")))?;
                bars.push((bar, m));
            }
            let m = &bars.iter().find(|(b, _)| *b == bar).expect("just mapped").1;
            let (off, len) = (off as usize, len as usize);
            if len < min || off.checked_add(len).is_none_or(|e| e > m.len()) {
                return Err(bad(&f.addr, &format!("virtio structure at BAR {bar} {off:#x}+{len:#x} outside the BAR")));
            }
            // SAFETY: `off + len <= m.len()`: inside the mapping.
            Ok(Window { ptr: unsafe { m.as_mut_ptr().add(off) }, len })
        };
        let common = window(c, common::LEN)?;
        let notify = window(n, 2)?;
        let device = window(d, 6)?;
        Ok(Transport { common, notify, notify_mult: n.3, device, _bars: bars.into_iter().map(|(_, m)| m).collect() })
    }

    pub fn r8(&self, off: usize) -> u8 {
        // SAFETY: inside the common window (checked by `at`).
        unsafe { std::ptr::read_volatile(self.common.at(off, 1)) }
    }
    pub fn w8(&self, off: usize, v: u8) {
        // SAFETY: as above.
        unsafe { std::ptr::write_volatile(self.common.at(off, 1), v) }
    }
    pub fn r16(&self, off: usize) -> u16 {
        // SAFETY: as above; the structure's fields are naturally aligned.
        u16::from_le(unsafe { std::ptr::read_volatile(self.common.at(off, 2).cast::<u16>()) })
    }
    pub fn w16(&self, off: usize, v: u16) {
        // SAFETY: as above.
        unsafe { std::ptr::write_volatile(self.common.at(off, 2).cast::<u16>(), v.to_le()) }
    }
    pub fn r32(&self, off: usize) -> u32 {
        // SAFETY: as above.
        u32::from_le(unsafe { std::ptr::read_volatile(self.common.at(off, 4).cast::<u32>()) })
    }
    pub fn w32(&self, off: usize, v: u32) {
        // SAFETY: as above.
        unsafe { std::ptr::write_volatile(self.common.at(off, 4).cast::<u32>(), v.to_le()) }
    }
    /// A 64-bit field, written as two 32-bit halves (low first), as the spec allows.
    pub fn w64(&self, off: usize, v: u64) {
        self.w32(off, v as u32);
        self.w32(off + 4, (v >> 32) as u32);
    }

    /// Byte `off` of the device-specific configuration.
    pub fn dev8(&self, off: usize) -> u8 {
        // SAFETY: inside the device window (checked by `at`).
        unsafe { std::ptr::read_volatile(self.device.at(off, 1)) }
    }

    /// The 16-bit field at `off` of the device-specific configuration (`None` when
    /// the device's structure is too short to hold it).
    pub fn dev16(&self, off: usize) -> Option<u16> {
        if !(self.device.ptr as usize + off).is_multiple_of(2) || off + 2 > self.device.len {
            return None;
        }
        // SAFETY: inside the device window (checked above and by `at`), aligned.
        Some(u16::from_le(unsafe { std::ptr::read_volatile(self.device.at(off, 2).cast::<u16>()) }))
    }

    /// The 32-bit field at `off` of the device-specific configuration (`None` when
    /// the device's structure is too short to hold it).
    pub fn dev32(&self, off: usize) -> Option<u32> {
        if !(self.device.ptr as usize + off).is_multiple_of(4) || off + 4 > self.device.len {
            return None;
        }
        // SAFETY: as `dev16`.
        Some(u32::from_le(unsafe { std::ptr::read_volatile(self.device.at(off, 4).cast::<u32>()) }))
    }

    /// Byte `off` of the device-specific configuration, `None` past its end.
    pub fn dev8_opt(&self, off: usize) -> Option<u8> {
        (off < self.device.len).then(|| self.dev8(off))
    }

    /// The device's features.
    pub fn device_features(&self) -> u64 {
        self.w32(common::DFSELECT, 0);
        let lo = u64::from(self.r32(common::DF));
        self.w32(common::DFSELECT, 1);
        lo | u64::from(self.r32(common::DF)) << 32
    }

    /// Tell the device the features we use.
    pub fn set_driver_features(&self, f: u64) {
        self.w32(common::GFSELECT, 0);
        self.w32(common::GF, f as u32);
        self.w32(common::GFSELECT, 1);
        self.w32(common::GF, (f >> 32) as u32);
    }

    /// Reset the device and wait (up to 1 s) until it says so.
    pub fn reset(&self) -> bool {
        self.w8(common::STATUS, 0);
        let t = std::time::Instant::now();
        while self.r8(common::STATUS) != 0 {
            if t.elapsed() > std::time::Duration::from_secs(1) {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        true
    }

    /// Add `bits` to the device status.
    pub fn add_status(&self, bits: u8) {
        let s = self.r8(common::STATUS);
        self.w8(common::STATUS, s | bits);
    }

    /// Where queue `q`'s notifications are written (its `queue_notify_off` read while
    /// it is selected).
    pub fn notify_addr(&self, notify_off: u16) -> Option<*mut u16> {
        let off = usize::from(notify_off).checked_mul(self.notify_mult as usize)?;
        if off + 2 > self.notify.len {
            return None;
        }
        Some(self.notify.at(off, 2).cast())
    }
}
