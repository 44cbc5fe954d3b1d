//! ICMP errors the router sends (RFC 1812, RFC 4443): time exceeded, destination
//! unreachable, fragmentation needed and packet too big, for IPv4 and IPv6. Each
//! quotes as much of the packet as fits, goes through the rate limits
//! ([`super::icmp_budget`]) and is routed back to the packet's source as a packet the
//! router made. Echo replies are [`crate::icmp::IcmpEcho`]'s ([`super::local`]).

use super::icmp_budget::Limited;
use super::{Router, RouterCounter as C};
use crate::icmp::fill_icmp6_checksum;
use ironpath_eal::Mbuf;
use ironpath_graph::NodeCx;
use ironpath_wire::checksum;
use ironpath_wire::ethernet::HEADER_LEN as ETH;
use ironpath_wire::ipv6;
use ironpath_wire::IpProtocol;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// ICMP errors the router sends.
#[derive(Clone, Copy)]
pub(super) enum Icmp {
    TimeExceeded,
    NoRoute,
    Unreachable,
    Prohibited,
    TooBig(usize),
}

impl Icmp {
    /// (type, code, the 4 bytes after the checksum) for IPv4 or IPv6.
    fn type_code(self, v6: bool) -> (u8, u8, u32) {
        match (self, v6) {
            (Icmp::TimeExceeded, false) => (11, 0, 0),
            (Icmp::TimeExceeded, true) => (3, 0, 0),
            (Icmp::NoRoute, false) => (3, 0, 0),
            (Icmp::NoRoute, true) => (1, 0, 0),
            (Icmp::Unreachable, false) => (3, 1, 0),
            (Icmp::Unreachable, true) => (1, 3, 0),
            (Icmp::Prohibited, false) => (3, 13, 0),
            (Icmp::Prohibited, true) => (1, 1, 0),
            (Icmp::TooBig(mtu), false) => (3, 4, mtu.min(0xffff) as u32),
            (Icmp::TooBig(mtu), true) => (2, 0, mtu as u32),
        }
    }
}

impl Router {
    /// Answer `orig` (received on `from`) with an ICMP error, routed back to its source.
    pub(super) fn icmp_error(&mut self, cx: &NodeCx<'_>, orig: &Mbuf, from: Option<usize>, kind: Icmp) {
        let Some(k) = from else { return };
        let d = orig.data();
        let v6 = d[12..14] == [0x86, 0xdd];
        if !error_allowed(d, v6) {
            return;
        }
        let to = if v6 {
            d.get(ETH + 8..ETH + 24).map(|a| IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(a).unwrap_or_default())))
        } else {
            d.get(ETH + 12..ETH + 16).map(|a| IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3])))
        };
        let Some(to) = to else { return };
        match self.icmp.allow(to, cx.now_tsc) {
            Ok(()) => {}
            Err(Limited::Router) => return cx.count(C::IcmpRateLimited, 1),
            Err(Limited::Peer) => return cx.count(C::IcmpPeerLimited, 1),
        }
        let f = &self.ifaces[k];
        // As much of the original as fits in 576 (IPv4) or 1280 (IPv6) bytes.
        let (hdr, max) = if v6 { (48, 1280) } else { (28, 576) };
        let ip_len = if v6 {
            40 + usize::from(u16::from_be_bytes([d[ETH + 4], d[ETH + 5]]))
        } else {
            usize::from(u16::from_be_bytes([d[ETH + 2], d[ETH + 3]]))
        };
        let quote = ip_len.min(max - hdr);
        let mut b = vec![0u8; ETH + hdr + quote];
        orig.copy_to(ETH, &mut b[ETH + hdr..]);
        b[12..14].copy_from_slice(if v6 { &[0x86, 0xdd] } else { &[0x08, 0x00] });
        let (ty, code, rest) = kind.type_code(v6);
        let c = ETH + hdr - 8;
        b[c] = ty;
        b[c + 1] = code;
        b[c + 4..c + 8].copy_from_slice(&rest.to_be_bytes());
        if v6 {
            let src = f.v6.first().map_or(f.ll6, |a| a.0);
            let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&d[ETH + 8..ETH + 24]).unwrap_or_default());
            ipv6_header(&mut b[ETH..ETH + 40], (8 + quote) as u16, 64, &src, &dst);
            let end = b.len();
            fill_icmp6_checksum(&mut b, c..end, &src, &dst);
        } else {
            let Some((src, _)) = f.v4.first() else { return };
            let ip = &mut b[ETH..ETH + 20];
            ip[0] = 0x45;
            ip[1] = 0xc0;
            ip[2..4].copy_from_slice(&((28 + quote) as u16).to_be_bytes());
            ip[8] = 64;
            ip[9] = 1;
            ip[12..16].copy_from_slice(&src.octets());
            ip[16..20].copy_from_slice(&d[ETH + 12..ETH + 16]);
            let s = !checksum::data(&b[ETH..ETH + 20]);
            b[ETH + 10..ETH + 12].copy_from_slice(&s.to_be_bytes());
            let s = !checksum::data(&b[c..]);
            b[c + 2..c + 4].copy_from_slice(&s.to_be_bytes());
        }
        match Mbuf::from_slice(&self.pool, &b) {
            Ok(m) => {
                cx.count(C::IcmpSent, 1);
                self.route_owned(cx, m, None, true);
            }
            Err(_) => cx.count(C::AllocFailed, 1),
        }
    }
}

/// May an ICMP error answer this frame? Never about an ICMP error, a fragment
/// other than the first, or a packet sent to a group (RFC 1812 4.3.2.7, RFC 4443 2.4).
/// An IPv6 packet's extension headers are walked to find whether it is an ICMPv6
/// error; a chain that cannot be walked gets no answer either.
pub(crate) fn error_allowed(d: &[u8], v6: bool) -> bool {
    if v6 {
        let Some(ip) = d.get(ETH..) else { return false };
        return match ipv6::transport_at_hand(ip) {
            Ok(t) if t.later_fragment => false,
            Ok(t) if t.protocol == IpProtocol::ICMPV6 => ip.get(t.offset).is_some_and(|&ty| ty >= 128),
            Ok(_) => true,
            Err(_) => false,
        };
    }
    let Some(ip) = d.get(ETH..ETH + 20) else { return false };
    let hl = usize::from(ip[0] & 0x0f) * 4;
    let frag_off = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
    if frag_off != 0 {
        return false;
    }
    if ip[9] == 1 {
        return matches!(d.get(ETH + hl), Some(0 | 8 | 13 | 14 | 15 | 16 | 17 | 18));
    }
    true
}

/// The IPv6 header of an ICMPv6 message the router makes.
pub(crate) fn ipv6_header(ip: &mut [u8], plen: u16, hop: u8, src: &Ipv6Addr, dst: &Ipv6Addr) {
    ip[0..4].copy_from_slice(&[0x60, 0, 0, 0]);
    ip[4..6].copy_from_slice(&plen.to_be_bytes());
    ip[6] = 58;
    ip[7] = hop;
    ip[8..24].copy_from_slice(&src.octets());
    ip[24..40].copy_from_slice(&dst.octets());
}
