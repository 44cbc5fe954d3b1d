//! The Linux side of the TAP PMD: /dev/net/tun, interface ioctls, and the virtio-net
//! header that carries offload state across the TAP boundary (`linux/virtio_net.h`).

use ironpath_pmd_sdk::linux::{cvt, ifreq};
pub use ironpath_pmd_sdk::linux::{iface_flags, is_up, mtu, set_hwaddr, set_iface_flag, set_mtu, Fd};
pub use ironpath_pmd_sdk::vnet::{VnetHdr, F_DATA_VALID, F_NEEDS_CSUM, GSO_TCPV4, GSO_TCPV6};
use std::io::{Error, Result};

const TUNSETIFF: libc::Ioctl = 0x4004_54ca;
const TUNSETOFFLOAD: libc::Ioctl = 0x4004_54d0;
const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
const IFF_MULTI_QUEUE: libc::c_short = 0x0100;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;

/// Open one queue of TAP `name` (created if missing) with virtio-net headers and,
/// if `offload`, checksum and TSO offloads towards us.
pub fn open_tap(name: &str, offload: bool) -> Result<Fd> {
    // SAFETY: plain open(2) of a NUL-terminated path.
    let fd = Fd::from_raw(cvt(unsafe {
        libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC)
    })?);
    let mut r = ifreq(name)?;
    r.ifr_ifru.ifru_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | IFF_MULTI_QUEUE;
    // SAFETY: TUNSETIFF takes an ifreq.
    cvt(unsafe { libc::ioctl(fd.raw(), TUNSETIFF, &mut r as *mut libc::ifreq) })?;
    let off: libc::c_uint = if offload { TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 } else { 0 };
    // SAFETY: TUNSETOFFLOAD takes the flags as an integer argument.
    cvt(unsafe { libc::ioctl(fd.raw(), TUNSETOFFLOAD, off as libc::c_ulong) })?;
    Ok(fd)
}

/// Read one frame (with its virtio-net header); `Err` with EAGAIN when none waits.
pub fn read(fd: &Fd, buf: &mut [u8]) -> Result<usize> {
    // SAFETY: `buf` is valid for writes of its length.
    let n = unsafe { libc::read(fd.raw(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Write one frame from `iov` (header first).
pub fn writev(fd: &Fd, iov: &[libc::iovec]) -> Result<usize> {
    // SAFETY: each iovec points to memory valid for reads of its length.
    let n = unsafe { libc::writev(fd.raw(), iov.as_ptr(), iov.len() as i32) };
    if n < 0 {
        Err(Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}
