//! The Linux side of the TAP PMD: /dev/net/tun, interface ioctls, and the virtio-net
//! header that carries offload state across the TAP boundary (`linux/virtio_net.h`).

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

/// An owned file descriptor, closed on drop.
pub struct Fd(i32);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: we own the descriptor and close it once.
        unsafe { libc::close(self.0) };
    }
}

fn cvt(rc: i32) -> Result<i32> {
    if rc < 0 {
        Err(Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn ifreq(name: &str) -> Result<libc::ifreq> {
    // SAFETY: zeroed ifreq is valid.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.is_empty() || name.len() >= r.ifr_name.len() {
        return Err(Error::from_raw_os_error(libc::EINVAL));
    }
    for (d, s) in r.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(r)
}

/// Open one queue of TAP `name` (created if missing) with virtio-net headers and,
/// if `offload`, checksum and TSO offloads towards us.
pub fn open_tap(name: &str, offload: bool) -> Result<Fd> {
    // SAFETY: plain open(2) of a NUL-terminated path.
    let fd =
        Fd(cvt(unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) })?);
    let mut r = ifreq(name)?;
    r.ifr_ifru.ifru_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | IFF_MULTI_QUEUE;
    // SAFETY: TUNSETIFF takes an ifreq.
    cvt(unsafe { libc::ioctl(fd.0, TUNSETIFF, &mut r as *mut libc::ifreq) })?;
    let off: libc::c_uint = if offload { TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 } else { 0 };
    // SAFETY: TUNSETOFFLOAD takes the flags as an integer argument.
    cvt(unsafe { libc::ioctl(fd.0, TUNSETOFFLOAD, off as libc::c_ulong) })?;
    Ok(fd)
}

/// Read one frame (with its virtio-net header); `Err` with EAGAIN when none waits.
pub fn read(fd: &Fd, buf: &mut [u8]) -> Result<usize> {
    // SAFETY: `buf` is valid for writes of its length.
    let n = unsafe { libc::read(fd.0, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Write one frame from `iov` (header first).
pub fn writev(fd: &Fd, iov: &[libc::iovec]) -> Result<usize> {
    // SAFETY: each iovec points to memory valid for reads of its length.
    let n = unsafe { libc::writev(fd.0, iov.as_ptr(), iov.len() as i32) };
    if n < 0 {
        Err(Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

fn ioctl(req: libc::Ioctl, r: &mut libc::ifreq) -> Result<()> {
    // SAFETY: plain datagram socket for interface ioctls.
    let s = Fd(cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?);
    // SAFETY: `r` is a valid ifreq for interface ioctls.
    cvt(unsafe { libc::ioctl(s.0, req, r as *mut libc::ifreq) })?;
    Ok(())
}

/// The interface's MTU.
pub fn mtu(name: &str) -> Result<u32> {
    let mut r = ifreq(name)?;
    ioctl(libc::SIOCGIFMTU, &mut r)?;
    // SAFETY: SIOCGIFMTU fills `ifru_mtu`.
    Ok(unsafe { r.ifr_ifru.ifru_mtu } as u32)
}

/// Set the interface's MTU.
pub fn set_mtu(name: &str, mtu: u16) -> Result<()> {
    let mut r = ifreq(name)?;
    r.ifr_ifru.ifru_mtu = i32::from(mtu);
    ioctl(libc::SIOCSIFMTU, &mut r)
}

/// Set the kernel side's MAC address.
pub fn set_hwaddr(name: &str, mac: [u8; 6]) -> Result<()> {
    let mut r = ifreq(name)?;
    // SAFETY: writing the `ifru_hwaddr` member of a zeroed ifreq.
    unsafe {
        r.ifr_ifru.ifru_hwaddr.sa_family = libc::ARPHRD_ETHER;
        for (d, s) in r.ifr_ifru.ifru_hwaddr.sa_data.iter_mut().zip(mac) {
            *d = s as libc::c_char;
        }
    }
    ioctl(libc::SIOCSIFHWADDR, &mut r)
}

/// Set (`on`) or clear one `IFF_*` flag of the interface (`IFF_UP`,
/// `IFF_ALLMULTI`), the others unchanged.
pub fn set_iface_flag(name: &str, flag: i32, on: bool) -> Result<()> {
    let mut r = ifreq(name)?;
    ioctl(libc::SIOCGIFFLAGS, &mut r)?;
    // SAFETY: SIOCGIFFLAGS filled the `ifru_flags` member; we write it back changed.
    unsafe {
        let f = i32::from(r.ifr_ifru.ifru_flags);
        r.ifr_ifru.ifru_flags = (if on { f | flag } else { f & !flag }) as libc::c_short;
    }
    ioctl(libc::SIOCSIFFLAGS, &mut r)
}

/// The interface's flags (`IFF_*`).
pub fn iface_flags(name: &str) -> Result<i32> {
    let mut r = ifreq(name)?;
    ioctl(libc::SIOCGIFFLAGS, &mut r)?;
    // SAFETY: SIOCGIFFLAGS fills `ifru_flags`.
    Ok(i32::from(unsafe { r.ifr_ifru.ifru_flags }))
}

/// Whether the interface is up (false when it is in another namespace).
pub fn is_up(name: &str) -> bool {
    let Ok(mut r) = ifreq(name) else { return false };
    // SAFETY: SIOCGIFFLAGS fills `ifru_flags`.
    ioctl(libc::SIOCGIFFLAGS, &mut r).is_ok() && (i32::from(unsafe { r.ifr_ifru.ifru_flags }) & libc::IFF_UP) != 0
}
