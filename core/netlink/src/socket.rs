//! The rtnetlink socket: opened in the calling thread's network namespace, bound to
//! the route, neighbour and link notification groups, sending dump requests and
//! receiving datagrams from the kernel only.

use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;

use rustix::net::netlink::SocketAddrNetlink;
use rustix::net::sockopt::{self, Timeout};
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};

/// Notification groups (`RTMGRP_*` of `linux/rtnetlink.h`): links, neighbours, IPv4
/// and IPv6 routes.
const GROUPS: u32 = 0x1 | 0x4 | 0x40 | 0x400;
/// The receive buffer asked for: room for a burst of notifications (a routing daemon
/// installing a full table) before the kernel has to drop and report ENOBUFS.
const RCVBUF: usize = 8 << 20;
/// The receive buffer of this process: larger than any datagram the kernel sends
/// (dump replies are at most a few tens of KiB).
const BUF: usize = 256 << 10;
/// How long one `recv` waits, so that the thread sees its stop flag this often.
pub(crate) const POLL: Duration = Duration::from_millis(50);

pub(crate) const RTM_GETLINK: u16 = 18;
pub(crate) const RTM_GETROUTE: u16 = 26;
pub(crate) const RTM_GETNEIGH: u16 = 30;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x100 | 0x200;

/// What one `recv` brought.
pub(crate) enum Recv<'a> {
    /// A datagram from the kernel.
    Data(&'a [u8]),
    /// Nothing within [`POLL`] (or a signal interrupted the wait).
    Nothing,
    /// The kernel dropped notifications (ENOBUFS), or a datagram did not fit the
    /// buffer: what was missed must be read again by a dump.
    Lost,
    /// A datagram from another process (a port id other than the kernel's): dropped.
    Foreign,
}

pub(crate) struct Socket {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
}

impl Socket {
    /// Opens and binds a socket in the calling thread's network namespace.
    pub(crate) fn open() -> io::Result<Socket> {
        let fd = rustix::net::socket_with(AddressFamily::NETLINK, SocketType::RAW, SocketFlags::CLOEXEC, None)?;
        // The forced size needs CAP_NET_ADMIN; without it the kernel caps the size
        // at net.core.rmem_max.
        if sockopt::set_socket_recv_buffer_size_force(&fd, RCVBUF).is_err() {
            sockopt::set_socket_recv_buffer_size(&fd, RCVBUF)?;
        }
        rustix::net::bind(&fd, &SocketAddrNetlink::new(0, GROUPS))?;
        sockopt::set_socket_timeout(&fd, Timeout::Recv, Some(POLL))?;
        Ok(Socket { fd, seq: 0, buf: vec![0; BUF] })
    }

    /// Sends a dump request of `kind` (`RTM_GET*`) for `family`; returns its
    /// sequence number, which the replies and the closing `NLMSG_DONE` carry.
    pub(crate) fn request_dump(&mut self, kind: u16, family: u8) -> io::Result<u32> {
        self.seq = self.seq.wrapping_add(1).max(1);
        // The family is the first byte of every rtnetlink request header; the rest
        // is zero (no filter). `struct ifinfomsg` is 16 bytes, `rtmsg` and `ndmsg` 12.
        let body_len = if kind == RTM_GETLINK { 16 } else { 12 };
        let len = 16 + body_len;
        let mut m = Vec::with_capacity(len);
        m.extend_from_slice(&(len as u32).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
        m.extend_from_slice(&self.seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.push(family);
        m.resize(len, 0);
        rustix::net::sendto(&self.fd, &m, SendFlags::empty(), &SocketAddrNetlink::new(0, 0))?;
        Ok(self.seq)
    }

    /// Waits up to [`POLL`] for one datagram.
    pub(crate) fn recv(&mut self) -> io::Result<Recv<'_>> {
        match rustix::net::recvfrom(&self.fd, &mut self.buf[..], RecvFlags::TRUNC) {
            Ok((_, len, _)) if len > BUF => Ok(Recv::Lost),
            Ok((_, len, from)) => {
                let kernel = from.and_then(|a| SocketAddrNetlink::try_from(a).ok()).is_some_and(|a| a.pid() == 0);
                Ok(if kernel { Recv::Data(&self.buf[..len]) } else { Recv::Foreign })
            }
            Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => Ok(Recv::Nothing),
            Err(rustix::io::Errno::NOBUFS) => Ok(Recv::Lost),
            Err(e) => Err(e.into()),
        }
    }
}
