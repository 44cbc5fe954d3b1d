//! The e1000 through VFIO: BAR 0 and the interrupt ([`Irq`]) on top of the SDK's
//! [`Function`] (the checks, bus mastering and the IOMMU mappings that let the NIC
//! reach descriptor rings and mempools, IOVA = VA).

use crate::irq::Irq;
use crate::regs::Regs;
use ironpath_pmd_sdk::abi::errno;
use ironpath_pmd_sdk::vfio::pci_driver::device::PciDevice;
use ironpath_pmd_sdk::vfio::pci_driver::regions::{MappedOwningPciRegion, PciRegion, Permissions};
pub use ironpath_pmd_sdk::vfio::{check_function, parse_pci_addr, DmaMem, Function, SYSFS_PCI_DEVICES};
use ironpath_pmd_sdk::PmdError;
use std::sync::Arc;

/// BAR 0 must cover every register this driver touches (the 82540EM's is 128 KiB).
const MIN_BAR0_LEN: usize = 0x6000;

/// An open e1000: BAR 0, its interrupt, and the function. Queues hold it in an
/// `Arc`, so it is closed last.
pub struct Nic {
    /// BAR 0 registers (points into `_bar0`).
    pub regs: Regs,
    // Drop order: the interrupt's eventfd detached first, then the BAR mapping, then
    // the function (whose last holder's drop removes the mappings and closes it).
    /// The interrupt on an eventfd (`None`: VFIO could not give it; the RX queue is
    /// then polled in every rx mode).
    pub irq: Option<Irq>,
    _bar0: MappedOwningPciRegion,
    /// The PCI function (descriptor ring memory holds it too).
    pub f: Arc<Function>,
}

impl std::ops::Deref for Nic {
    type Target = Function;
    fn deref(&self) -> &Function {
        &self.f
    }
}

impl Nic {
    /// Open the function at `addr` (checked by [`check_function`]), map BAR 0 and
    /// route the interrupt to an eventfd (the device's mask, IMS, decides when it
    /// fires).
    pub fn open(addr: &str, group: u32) -> Result<Nic, PmdError> {
        let f = Arc::new(Function::open(addr, group)?);
        let io = |what: &str, e: std::io::Error| PmdError::new(errno::EIO, format!("PCI device {addr}: {what}: {e}"));
        let bar =
            f.device().bar(0).ok_or_else(|| PmdError::new(errno::ENODEV, format!("PCI device {addr} has no BAR 0")))?;
        if !bar.is_mappable() || (bar.len() as usize) < MIN_BAR0_LEN {
            return Err(PmdError::new(
                errno::ENODEV,
                format!("PCI device {addr}: BAR 0 ({} bytes) is not a mappable register window", bar.len()),
            ));
        }
        let bar0 = bar.map(.., Permissions::ReadWrite).map_err(|e| io("mapping BAR 0", e))?;
        // SAFETY: `bar0` maps BAR 0 for `bar0.len()` bytes and is kept in the `Nic`
        // next to `regs` (dropped after every user of `regs`: users hold the `Arc<Nic>`).
        let regs = unsafe { Regs::new(bar0.as_mut_ptr(), bar0.len()) };
        let irq = match Irq::attach(group, addr) {
            Ok(irq) => Some(irq),
            Err(e) => {
                ironpath_pmd_sdk::log(
                    1,
                    &format!(
                        "net_e1000 {addr}: no interrupt through VFIO ({e}): its RX queue is polled in every rx mode"
                    ),
                );
                None
            }
        };
        Ok(Nic { regs, irq, _bar0: bar0, f })
    }
}

impl Drop for Nic {
    fn drop(&mut self) {
        // Quiesce: no receive, no transmit, no interrupt (the function's mappings go
        // with its last holder).
        self.regs.write(crate::regs::RCTL, 0);
        self.regs.write(crate::regs::TCTL, 0);
        self.regs.write(crate::regs::IMC, u32::MAX);
    }
}
