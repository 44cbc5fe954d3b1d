//! PCI addresses for `-a/--allow`: `DDDD:BB:DD.F` (or `BB:DD.F`, domain 0), and the
//! vendor/device ids the kernel shows for them in sysfs. The EAL uses these to hand an
//! allowed PCI function to the driver that claims its ids (ABI 1.1 `PmdEntry::pci_ids`);
//! the driver itself opens the function (VFIO) and says what is wrong with it.

use ironpath_abi::PciId;
use std::path::Path;

/// Where the kernel lists PCI functions.
pub const SYSFS_PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// Parse a PCI address into the long form `DDDD:BB:DD.F` (lower case), or `None` if
/// `s` is not one (so `-a net_null0` stays a device name).
pub use ironpath_util::pci::parse_addr;

/// Why an allowed PCI address cannot be given to a driver.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PciError {
    /// Nothing at that address.
    #[error("-a {addr}: no PCI device {addr} (lspci -D lists them)")]
    NoDevice {
        /// The address.
        addr: String,
    },
    /// The ids in sysfs cannot be read.
    #[error("-a {addr}: cannot read the ids of PCI device {addr} in {dir}: {why}")]
    Ids {
        /// The address.
        addr: String,
        /// Its sysfs directory.
        dir: String,
        /// The error.
        why: String,
    },
}

/// The vendor and device id of the PCI function at `addr` (long form), from
/// `root/ADDR/{vendor,device}` (`root` is [`SYSFS_PCI_DEVICES`] outside tests).
pub fn read_ids(root: &Path, addr: &str) -> Result<PciId, PciError> {
    let dir = root.join(addr);
    if !dir.exists() {
        return Err(PciError::NoDevice { addr: addr.to_string() });
    }
    let read = |f: &str| -> Result<u16, String> {
        let t = std::fs::read_to_string(dir.join(f)).map_err(|e| format!("{f}: {e}"))?;
        let t = t.trim();
        u16::from_str_radix(t.trim_start_matches("0x"), 16).map_err(|_| format!("{f}: `{t}` is not a hex id"))
    };
    let ids = read("vendor").and_then(|vendor| Ok(PciId { vendor, device: read("device")? }));
    ids.map_err(|why| PciError::Ids { addr: addr.to_string(), dir: dir.display().to_string(), why })
}

/// `8086:100e`.
pub fn fmt_id(id: PciId) -> String {
    format!("{:04x}:{:04x}", id.vendor, id.device)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn ids_from_sysfs() {
        let root = std::env::temp_dir().join(format!("ironpath-pci-{}", std::process::id()));
        let dev = root.join("0000:00:01.0");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(dev.join("vendor"), "0x8086\n").unwrap();
        std::fs::write(dev.join("device"), "0x100e\n").unwrap();
        assert_eq!(read_ids(&root, "0000:00:01.0"), Ok(PciId { vendor: 0x8086, device: 0x100e }));
        let e = read_ids(&root, "0000:00:09.0").unwrap_err();
        assert_eq!(e.to_string(), "-a 0000:00:09.0: no PCI device 0000:00:09.0 (lspci -D lists them)");
        std::fs::write(dev.join("device"), "zz\n").unwrap();
        assert!(read_ids(&root, "0000:00:01.0").unwrap_err().to_string().contains("`zz` is not a hex id"));
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(fmt_id(PciId { vendor: 0x8086, device: 0x100e }), "8086:100e");
    }
}
