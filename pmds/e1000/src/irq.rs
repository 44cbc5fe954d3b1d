//! The device's interrupt as an eventfd of ours, through VFIO (`linux/vfio.h`): the
//! RX queue's wake-up source for rx modes `adaptive` and `interrupt`.
//!
//! * `VFIO_DEVICE_GET_IRQ_INFO` says which interrupts the function has: MSI is taken
//!   when there is one, else INTx (QEMU's e1000, like the real 82540EM, has INTx only).
//! * `VFIO_DEVICE_SET_IRQS` with `DATA_EVENTFD | ACTION_TRIGGER` has the kernel signal
//!   our eventfd on each interrupt.
//! * INTx is level-triggered, so VFIO masks it after signalling (`AUTOMASKED`) until we
//!   unmask it (`DATA_NONE | ACTION_UNMASK`), which [`Irq::unmask`] does each time the
//!   queue is armed; an interrupt still pending then is signalled again at once. MSI
//!   needs no unmask.
//!
//! `pci-driver` keeps its device descriptor to itself and has no unmask, so we open
//! the device a second time through its group, which VFIO allows: the interrupt state
//! is the device's, whichever descriptor sets it. The group's descriptor is the one of
//! this process whose link is `/dev/vfio/GROUP` (a group opens only once, and our
//! `Nic` holds it).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `_IO(VFIO_TYPE, VFIO_BASE + n)`: VFIO's ioctls carry no size or direction.
const fn vfio_io(n: u32) -> libc::Ioctl {
    (((b';' as u32) << 8) | (100 + n)) as libc::Ioctl
}
const VFIO_GROUP_GET_DEVICE_FD: libc::Ioctl = vfio_io(6);
const VFIO_DEVICE_GET_IRQ_INFO: libc::Ioctl = vfio_io(9);
const VFIO_DEVICE_SET_IRQS: libc::Ioctl = vfio_io(10);

const VFIO_IRQ_INFO_EVENTFD: u32 = 1 << 0;
const VFIO_IRQ_INFO_AUTOMASKED: u32 = 1 << 2;
const VFIO_IRQ_SET_DATA_NONE: u32 = 1 << 0;
const VFIO_IRQ_SET_DATA_EVENTFD: u32 = 1 << 2;
const VFIO_IRQ_SET_ACTION_UNMASK: u32 = 1 << 4;
const VFIO_IRQ_SET_ACTION_TRIGGER: u32 = 1 << 5;
/// `VFIO_PCI_INTX_IRQ_INDEX`, `VFIO_PCI_MSI_IRQ_INDEX`.
const INTX: u32 = 0;
const MSI: u32 = 1;

/// `struct vfio_irq_info`.
#[repr(C)]
#[derive(Default)]
struct IrqInfo {
    argsz: u32,
    flags: u32,
    index: u32,
    count: u32,
}

/// `struct vfio_irq_set` with room for one eventfd in `data`.
#[repr(C)]
struct IrqSet {
    argsz: u32,
    flags: u32,
    index: u32,
    start: u32,
    count: u32,
    data: [i32; 1],
}

/// The device's interrupt, signalled on an eventfd of ours.
pub struct Irq {
    /// Our own descriptor of the VFIO device.
    dev: OwnedFd,
    /// Signalled by the kernel on each interrupt; never read (the host waits on it
    /// edge-triggered).
    efd: OwnedFd,
    /// [`INTX`] or [`MSI`].
    index: u32,
    /// VFIO masks the interrupt after each signal (INTx): [`Irq::unmask`] unmasks it.
    automasked: bool,
}

impl Irq {
    /// Route the interrupt of the function at `addr` (in VFIO group `group`, opened
    /// by this process) to a new eventfd. The device's own mask (IMS) stays as it is.
    pub fn attach(group: u32, addr: &str) -> io::Result<Irq> {
        let dev = open_device(group, addr)?;
        let info = |index| {
            let mut i = IrqInfo { argsz: std::mem::size_of::<IrqInfo>() as u32, index, ..Default::default() };
            // SAFETY: `dev` is a VFIO device descriptor; the kernel writes at most
            // `argsz` bytes into `i`, a live `struct vfio_irq_info`.
            let rc = unsafe { libc::ioctl(dev.as_raw_fd(), VFIO_DEVICE_GET_IRQ_INFO, &mut i as *mut IrqInfo) };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(i)
        };
        let usable = |i: &IrqInfo| i.count > 0 && i.flags & VFIO_IRQ_INFO_EVENTFD != 0;
        let msi = info(MSI)?;
        let chosen = if usable(&msi) { msi } else { info(INTX)? };
        if !usable(&chosen) {
            return Err(io::Error::new(io::ErrorKind::Unsupported, "the function has neither MSI nor INTx"));
        }
        // SAFETY: plain system call; the result is checked.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `efd` is a new descriptor nobody else owns.
        let efd = unsafe { OwnedFd::from_raw_fd(efd) };
        let irq = Irq { dev, efd, index: chosen.index, automasked: chosen.flags & VFIO_IRQ_INFO_AUTOMASKED != 0 };
        irq.set(VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER, 1, irq.efd.as_raw_fd())?;
        Ok(irq)
    }

    /// The eventfd the interrupt signals.
    pub fn fd(&self) -> RawFd {
        self.efd.as_raw_fd()
    }

    /// `"INTx"` or `"MSI"`.
    pub fn kind(&self) -> &'static str {
        if self.index == MSI {
            "MSI"
        } else {
            "INTx"
        }
    }

    /// Let the next interrupt through: unmask INTx (VFIO masked it when it last
    /// signalled; one still pending is signalled again at once). Nothing for MSI.
    pub fn unmask(&self) -> io::Result<()> {
        if !self.automasked {
            return Ok(());
        }
        self.set(VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_UNMASK, 1, -1)
    }

    /// Signal the eventfd ourselves (when the interrupt cannot be trusted to).
    pub fn kick(&self) {
        let one = 1u64;
        // Our own non-blocking eventfd: a full counter means a signal is pending anyway.
        // SAFETY: writes the 8 bytes of a live u64 to a descriptor we own.
        let _ = unsafe { libc::write(self.efd.as_raw_fd(), (&raw const one).cast(), 8) };
    }

    /// `VFIO_DEVICE_SET_IRQS` on vector 0 of our index: `count` 0 or 1, `fd` the
    /// eventfd with `DATA_EVENTFD`.
    fn set(&self, flags: u32, count: u32, fd: RawFd) -> io::Result<()> {
        let data_len = if flags & VFIO_IRQ_SET_DATA_EVENTFD != 0 { 4 } else { 0 };
        let s = IrqSet {
            argsz: (std::mem::size_of::<IrqSet>() - 4 + data_len) as u32,
            flags,
            index: self.index,
            start: 0,
            count,
            data: [fd],
        };
        // SAFETY: `dev` is a VFIO device descriptor; `s` is a `struct vfio_irq_set`
        // followed by `argsz - 20` bytes of data (0, or one eventfd), which the kernel
        // only reads.
        let rc = unsafe { libc::ioctl(self.dev.as_raw_fd(), VFIO_DEVICE_SET_IRQS, &s as *const IrqSet) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Irq {
    fn drop(&mut self) {
        // Detach the eventfd before it closes (closing the last device descriptor
        // would too; `pci-driver` may hold its own a little longer).
        let _ = self.set(VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER, 0, -1);
    }
}

/// A new descriptor of the VFIO device `addr`, asked of its group's descriptor, the
/// one of this process linked to `/dev/vfio/GROUP`.
fn open_device(group: u32, addr: &str) -> io::Result<OwnedFd> {
    let want = format!("/dev/vfio/{group}");
    let not_open = || io::Error::new(io::ErrorKind::NotFound, format!("{want} is not open in this process"));
    let gfd = std::fs::read_dir("/proc/self/fd")?
        .filter_map(Result::ok)
        .find(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.as_os_str() == want.as_str()))
        .and_then(|e| e.file_name().to_str()?.parse::<RawFd>().ok())
        .ok_or_else(not_open)?;
    let name = CString::new(addr).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: the ioctl reads the NUL-terminated name and returns a new descriptor (or
    // fails, with ENOTTY should `gfd` have been closed and reused meanwhile).
    let fd = unsafe { libc::ioctl(gfd, VFIO_GROUP_GET_DEVICE_FD, name.as_ptr()) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor (opened close-on-exec by VFIO) that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_and_layouts_match_linux() {
        // From linux/vfio.h: VFIO_TYPE ';' (0x3b), VFIO_BASE 100.
        assert_eq!(VFIO_GROUP_GET_DEVICE_FD, 0x3b6a);
        assert_eq!(VFIO_DEVICE_GET_IRQ_INFO, 0x3b6d);
        assert_eq!(VFIO_DEVICE_SET_IRQS, 0x3b6e);
        assert_eq!(std::mem::size_of::<IrqInfo>(), 16);
        assert_eq!(std::mem::offset_of!(IrqSet, data), 20);
    }

    #[test]
    fn a_group_this_process_has_not_opened_is_named() {
        let e = Irq::attach(999_999, "0000:00:01.0").err().expect("no such group");
        assert_eq!(e.to_string(), "/dev/vfio/999999 is not open in this process");
    }
}
