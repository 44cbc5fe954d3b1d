//! The Linux side of the TAP PMD: /dev/net/tun, interface ioctls, and the virtio-net
//! header that carries offload state across the TAP boundary (`linux/virtio_net.h`).

use ironpath_pmd_sdk::abi::{self, ptype, Mbuf};
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

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`.
pub const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_F_DATA_VALID`.
pub const F_DATA_VALID: u8 = 2;
/// `VIRTIO_NET_HDR_GSO_TCPV4`.
pub const GSO_TCPV4: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_TCPV6`.
pub const GSO_TCPV6: u8 = 4;

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

/// Whether the interface is up (false when it is in another namespace).
pub fn is_up(name: &str) -> bool {
    let Ok(mut r) = ifreq(name) else { return false };
    // SAFETY: SIOCGIFFLAGS fills `ifru_flags`.
    ioctl(libc::SIOCGIFFLAGS, &mut r).is_ok() && (i32::from(unsafe { r.ifr_ifru.ifru_flags }) & libc::IFF_UP) != 0
}

/// `struct virtio_net_hdr` (little-endian on the wire of a TAP on x86).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    /// `F_NEEDS_CSUM`, `F_DATA_VALID`.
    pub flags: u8,
    /// `GSO_*` (0 = none).
    pub gso_type: u8,
    /// Length of the headers to copy into each segment.
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Where checksumming starts.
    pub csum_start: u16,
    /// Where the checksum goes, from `csum_start`.
    pub csum_offset: u16,
}

fn le16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

impl VnetHdr {
    /// Size on the wire.
    pub const LEN: usize = 10;

    /// Split a read into header and frame; `None` for a short read.
    pub fn split(b: &[u8]) -> Option<(VnetHdr, &[u8])> {
        if b.len() < Self::LEN + 14 {
            return None;
        }
        let h = VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: le16(b, 2),
            gso_size: le16(b, 4),
            csum_start: le16(b, 6),
            csum_offset: le16(b, 8),
        };
        Some((h, &b[Self::LEN..]))
    }

    /// Encode.
    pub fn to_bytes(self) -> [u8; 10] {
        let mut b = [0u8; 10];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        b
    }

    /// Offload state of a received frame into the mbuf's flags and lengths.
    pub fn to_mbuf(self, m: &mut Mbuf) {
        let mut fl = 0;
        let l2 = 14u16;
        if self.flags & F_NEEDS_CSUM != 0 {
            fl |= abi::RX_L4_CKSUM_NONE;
            m.l2_len = l2 as u8;
            m.l3_len = self.csum_start.saturating_sub(l2);
            m.packet_type |= match self.csum_offset {
                16 => ptype::L4_TCP,
                6 => ptype::L4_UDP,
                _ => 0,
            };
        } else if self.flags & F_DATA_VALID != 0 {
            fl |= abi::RX_L4_CKSUM_GOOD;
        }
        match self.gso_type & 0x7f {
            GSO_TCPV4 | GSO_TCPV6 if self.gso_size > 0 => {
                fl |= abi::RX_AGGREGATED;
                m.tso_segsz = self.gso_size;
                m.packet_type |=
                    ptype::L4_TCP | if self.gso_type & 0x7f == GSO_TCPV4 { ptype::L3_IPV4 } else { ptype::L3_IPV6 };
                m.l4_len = self.hdr_len.saturating_sub(self.csum_start).min(255) as u8;
                let payload = m.pkt_len.saturating_sub(u32::from(self.hdr_len));
                m.aggr_segs = payload.div_ceil(u32::from(self.gso_size)).min(u32::from(u16::MAX)) as u16;
            }
            _ => {}
        }
        m.ol_flags |= fl;
    }

    /// The header that asks the kernel for the offloads an outgoing mbuf needs.
    pub fn from_mbuf(m: &Mbuf) -> VnetHdr {
        let f = m.ol_flags;
        let start = u16::from(m.l2_len) + m.l3_len;
        let udp = f & abi::TX_UDP_CKSUM != 0 || (m.packet_type & ptype::L4_UDP != 0 && f & abi::TX_TCP_CKSUM == 0);
        let mut h = VnetHdr::default();
        let segment = (f & abi::TX_TCP_SEG != 0 || f & abi::RX_AGGREGATED != 0) && m.tso_segsz > 0 && start > 0;
        if segment {
            let v4 = f & abi::TX_IPV4 != 0 || m.packet_type & ptype::L3_IPV4 != 0;
            h.gso_type = if v4 { GSO_TCPV4 } else { GSO_TCPV6 };
            h.gso_size = m.tso_segsz;
            h.hdr_len = start + u16::from(m.l4_len.max(20));
        }
        let partial = f & (abi::TX_TCP_CKSUM | abi::TX_UDP_CKSUM | abi::RX_L4_CKSUM_NONE) != 0;
        if (segment || partial) && start > 0 {
            h.flags = F_NEEDS_CSUM;
            h.csum_start = start;
            h.csum_offset = if udp && !segment { 6 } else { 16 };
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_short_reads_are_refused() {
        let h = VnetHdr { flags: 1, gso_type: GSO_TCPV4, hdr_len: 66, gso_size: 1448, csum_start: 34, csum_offset: 16 };
        let mut b = h.to_bytes().to_vec();
        b.extend_from_slice(&[0u8; 60]);
        let (g, frame) = VnetHdr::split(&b).unwrap();
        assert_eq!((g, frame.len()), (h, 60));
        assert!(VnetHdr::split(&[0u8; 12]).is_none());
    }
}
