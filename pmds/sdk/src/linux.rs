//! Linux network interfaces as kernel-backed drivers (af_packet, tap) use them: an
//! owned descriptor and the interface ioctls (index, MTU, flags, MAC address).

use std::ffi::CString;
use std::io::{Error, Result};

/// An owned file descriptor, closed on drop.
#[derive(Debug)]
pub struct Fd(i32);

impl Fd {
    /// Own `fd` (from a system call that returned it).
    pub fn from_raw(fd: i32) -> Self {
        Self(fd)
    }

    /// The descriptor number, for system calls.
    pub fn raw(&self) -> i32 {
        self.0
    }
}

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: we own the descriptor and close it once.
        unsafe { libc::close(self.0) };
    }
}

/// A system call's return value: `Err` with `errno` when negative.
pub fn cvt(rc: i32) -> Result<i32> {
    if rc < 0 {
        Err(Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// An `ifreq` naming interface `name` (empty or too long: `EINVAL`).
pub fn ifreq(name: &str) -> Result<libc::ifreq> {
    // SAFETY: an all-zero ifreq is valid.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.is_empty() || name.len() >= r.ifr_name.len() {
        return Err(Error::from_raw_os_error(libc::EINVAL));
    }
    for (d, s) in r.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(r)
}

/// One interface ioctl (`SIOC*IF*`) on `r`, through a throw-away datagram socket.
pub fn ioctl(req: libc::Ioctl, r: &mut libc::ifreq) -> Result<()> {
    // SAFETY: plain socket(2) call; the descriptor is owned by `Fd`.
    let s = Fd(cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?);
    // SAFETY: `r` is a valid ifreq for the interface ioctls.
    cvt(unsafe { libc::ioctl(s.0, req, r as *mut libc::ifreq) })?;
    Ok(())
}

/// Interface index of `name`.
pub fn ifindex(name: &str) -> Result<i32> {
    let c = CString::new(name).map_err(|_| Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: a valid NUL-terminated name.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        Err(Error::last_os_error())
    } else {
        Ok(i as i32)
    }
}

/// The interface's MTU.
pub fn mtu(name: &str) -> Result<u32> {
    let mut r = ifreq(name)?;
    ioctl(libc::SIOCGIFMTU, &mut r)?;
    // SAFETY: SIOCGIFMTU fills the `ifru_mtu` member.
    Ok(unsafe { r.ifr_ifru.ifru_mtu } as u32)
}

/// Set the interface's MTU.
pub fn set_mtu(name: &str, mtu: u16) -> Result<()> {
    let mut r = ifreq(name)?;
    r.ifr_ifru.ifru_mtu = i32::from(mtu);
    ioctl(libc::SIOCSIFMTU, &mut r)
}

/// The interface's MAC address.
pub fn hwaddr(name: &str) -> Result<[u8; 6]> {
    let mut r = ifreq(name)?;
    ioctl(libc::SIOCGIFHWADDR, &mut r)?;
    // SAFETY: SIOCGIFHWADDR fills the `ifru_hwaddr` member.
    let d = unsafe { r.ifr_ifru.ifru_hwaddr.sa_data };
    Ok([d[0] as u8, d[1] as u8, d[2] as u8, d[3] as u8, d[4] as u8, d[5] as u8])
}

/// Set the interface's MAC address.
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

/// The interface's flags (`IFF_*`).
pub fn iface_flags(name: &str) -> Result<i32> {
    let mut r = ifreq(name)?;
    ioctl(libc::SIOCGIFFLAGS, &mut r)?;
    // SAFETY: SIOCGIFFLAGS fills the `ifru_flags` member.
    Ok(i32::from(unsafe { r.ifr_ifru.ifru_flags }))
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

/// Whether the interface is up (false when it cannot be asked, e.g. it lives in
/// another namespace).
pub fn is_up(name: &str) -> bool {
    iface_flags(name).is_ok_and(|f| f & libc::IFF_UP != 0)
}

/// Whether the interface is up and has carrier.
pub fn is_running(name: &str) -> bool {
    iface_flags(name).is_ok_and(|f| f & libc::IFF_UP != 0 && f & libc::IFF_RUNNING != 0)
}

/// The link of interface `name` as a port reports it: up while the kernel says it is
/// running, at the speed it reports (`/sys/class/net/NAME/speed`; 0 when it has none,
/// as a veth), full duplex.
pub fn link(name: &str) -> crate::abi::Link {
    let speed = std::fs::read_to_string(format!("/sys/class/net/{name}/speed"))
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .filter(|s| *s > 0)
        .unwrap_or(0) as u32;
    crate::abi::Link { speed_mbps: speed, up: u8::from(is_running(name)), full_duplex: 1, autoneg: 0, reserved: 0 }
}

/// Promiscuous mode on interface `ifindex` held by AF_PACKET socket `fd`
/// (`PACKET_MR_PROMISC` membership): the kernel counts one promiscuous user while
/// the socket holds it, and drops it when the socket closes, however the process
/// ends, so the interface is never left promiscuous.
pub fn promisc_membership(fd: &Fd, ifindex: i32, on: bool) -> Result<()> {
    // SAFETY: zeroed packet_mreq is valid.
    let mut mr: libc::packet_mreq = unsafe { std::mem::zeroed() };
    mr.mr_ifindex = ifindex;
    mr.mr_type = libc::PACKET_MR_PROMISC as u16;
    let opt = if on { libc::PACKET_ADD_MEMBERSHIP } else { libc::PACKET_DROP_MEMBERSHIP };
    // SAFETY: `mr` is a valid packet_mreq of the size given.
    cvt(unsafe {
        libc::setsockopt(
            fd.0,
            libc::SOL_PACKET,
            opt,
            (&mr as *const libc::packet_mreq).cast(),
            std::mem::size_of::<libc::packet_mreq>() as u32,
        )
    })?;
    Ok(())
}

/// An AF_PACKET socket that receives nothing (protocol 0): a holder for memberships
/// such as [`promisc_membership`].
pub fn membership_socket() -> Result<Fd> {
    // SAFETY: plain socket(2) call; the descriptor is owned by `Fd`.
    Ok(Fd(cvt(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_answers_and_bad_names_are_refused() {
        assert!(ifindex("lo").unwrap() > 0);
        assert!(mtu("lo").unwrap() >= 1500);
        assert!(is_up("lo"));
        assert_eq!(ifreq("").unwrap_err().raw_os_error(), Some(libc::EINVAL));
        assert_eq!(ifreq("a-name-longer-than-ifnamsiz").unwrap_err().raw_os_error(), Some(libc::EINVAL));
        assert!(mtu("no-such-if0").is_err());
    }
}
