//! Neighbour discovery (RFC 4861) in the router: solicitations and advertisements
//! teach an interface's neighbour table ([`Router::nd`]; a solicitation for one of
//! our addresses is then answered by [`super::local`]), [`solicitation`] makes the
//! frame that asks for a neighbour, and the IPv6 addresses ND works with (link-local,
//! the groups the router listens to).

use super::icmp::ipv6_header;
use super::{Iface, Router, RouterCounter as C};
use crate::icmp::fill_icmp6_checksum;
use ironpath_graph::NodeCx;
use ironpath_wire::ethernet::HEADER_LEN as ETH;
use ironpath_wire::icmpv6::{Icmpv6Packet, NdiscOption};
use ironpath_wire::ipv6::{self, Ipv6Packet};
use std::net::{IpAddr, Ipv6Addr};

/// ICMPv6 neighbour solicitation and advertisement (RFC 4861).
pub(super) const NS: u8 = 135;
pub(super) const NA: u8 = 136;
pub(super) const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
pub(super) const ALL_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);

pub(super) fn is_link_local(a: Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

/// fe80::/64 with the modified EUI-64 of `mac`.
pub(super) fn link_local(mac: [u8; 6]) -> Ipv6Addr {
    let mut o = [0u8; 16];
    o[0] = 0xfe;
    o[1] = 0x80;
    o[8..16].copy_from_slice(&[mac[0] ^ 2, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]]);
    Ipv6Addr::from(o)
}

impl Router {
    /// Learn from a neighbour solicitation (its source) or advertisement (its target)
    /// whose ICMPv6 message starts at `at` of frame `d`. Returns the message's target,
    /// or `None` (counted `malformed`) when the message fails RFC 4861's checks: hop
    /// limit 255, code 0, a whole message with a valid checksum, a unicast target,
    /// well-formed options.
    pub(super) fn nd(&mut self, cx: &NodeCx<'_>, d: &[u8], k: usize, ty: u8, at: usize) -> Option<Ipv6Addr> {
        let parsed = (|| {
            let ip = Ipv6Packet::new_checked(d.get(ETH..)?).ok()?;
            let end = ETH + ipv6::HEADER_LEN + usize::from(ip.payload_len());
            let msg = Icmpv6Packet::new_checked(d.get(at..end)?).ok()?;
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            let target = msg.target_addr();
            if ip.hop_limit() != 255 || msg.code() != 0 || target.is_multicast() || !msg.verify_checksum(&src, &dst) {
                return None;
            }
            // Link-layer address option: source in a solicitation, target in an advert.
            let mut lladdr = None;
            for opt in msg.ndisc_options() {
                match opt.ok()? {
                    NdiscOption::SourceLinkLayerAddr(a) if ty == NS => lladdr = Some(a.0),
                    NdiscOption::TargetLinkLayerAddr(a) if ty == NA => lladdr = Some(a.0),
                    _ => {}
                }
            }
            Some((src, target, lladdr))
        })();
        let Some((src, target, lladdr)) = parsed else {
            cx.count(C::Malformed, 1);
            return None;
        };
        cx.count(C::NdIn, 1);
        let (who, create) = if ty == NS { (src, self.ifaces[k].owns6(target)) } else { (target, false) };
        if let Some(mac) = lladdr {
            let usable = !who.is_unspecified() && mac[0] & 1 == 0;
            let on_link = is_link_local(who) || self.ifaces[k].on_subnet6(who);
            if usable && on_link && (create || self.ifaces[k].neigh.knows(IpAddr::V6(who))) {
                self.learned(cx, k, IpAddr::V6(who), mac);
            }
        }
        Some(target)
    }
}

/// A neighbour solicitation from `iface` (its first global IPv6 address, else its
/// link-local one) for `target`, sent to the target's solicited-node group.
pub(super) fn solicitation(iface: &Iface, target: Ipv6Addr) -> Vec<u8> {
    let src = iface.v6.first().map_or(iface.ll6, |a| a.0);
    let o = target.octets();
    let group = Ipv6Addr::from([0xff02, 0, 0, 0, 0, 1, 0xff00 | u16::from(o[13]), u16::from_be_bytes([o[14], o[15]])]);
    let mut b = vec![0u8; ETH + 40 + 32];
    b[0..6].copy_from_slice(&[0x33, 0x33, 0xff, o[13], o[14], o[15]]);
    b[6..12].copy_from_slice(&iface.mac);
    b[12..14].copy_from_slice(&[0x86, 0xdd]);
    ipv6_header(&mut b[ETH..ETH + 40], 32, 255, &src, &group);
    let c = ETH + 40;
    b[c] = NS;
    b[c + 8..c + 24].copy_from_slice(&o);
    b[c + 24] = 1;
    b[c + 25] = 1;
    b[c + 26..c + 32].copy_from_slice(&iface.mac);
    fill_icmp6_checksum(&mut b, c..c + 32, &src, &group);
    b
}
