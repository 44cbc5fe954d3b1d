//! ARP (RFC 826) in the router: requests and replies received on an interface teach
//! its neighbour table (a sender on the interface's subnets, when the request is for
//! us or the sender is already known), requests for our addresses are answered in
//! place, and [`request`] makes the frame that asks for a neighbour.

use super::{Iface, Router, RouterCounter as C};
use ironpath_eal::Mbuf;
use ironpath_graph::NodeCx;
use ironpath_wire::ethernet::HEADER_LEN as ETH;
use std::net::{IpAddr, Ipv4Addr};

impl Router {
    /// An ARP frame received on interface `k`.
    pub(super) fn arp(&mut self, cx: &NodeCx<'_>, mut m: Mbuf, k: usize) {
        let d = m.data();
        let Some(a) = d.get(ETH..ETH + 28) else { return cx.count(C::Malformed, 1) };
        if a[0..6] != [0, 1, 8, 0, 6, 4] {
            return cx.count(C::Malformed, 1);
        }
        cx.count(C::ArpIn, 1);
        let op = u16::from_be_bytes([a[6], a[7]]);
        let sha: [u8; 6] = a[8..14].try_into().unwrap_or_default();
        let spa = Ipv4Addr::new(a[14], a[15], a[16], a[17]);
        let tpa = Ipv4Addr::new(a[24], a[25], a[26], a[27]);
        let for_us = self.ifaces[k].v4.iter().any(|(x, _)| *x == tpa);
        let sender_ok = !spa.is_unspecified() && sha[0] & 1 == 0 && self.ifaces[k].on_subnet4(spa);
        if sender_ok && (for_us || self.ifaces[k].neigh.knows(IpAddr::V4(spa))) {
            self.learned(cx, k, IpAddr::V4(spa), sha);
        }
        if !(for_us && op == 1) {
            return;
        }
        let (mac, edge) = (self.ifaces[k].mac, self.ifaces[k].edge);
        let Ok(d) = m.data_mut() else { return cx.count(C::Malformed, 1) };
        d[0..6].copy_from_slice(&sha);
        d[6..12].copy_from_slice(&mac);
        let a = &mut d[ETH..ETH + 28];
        a[7] = 2;
        a[18..28].copy_from_slice(&[
            sha[0],
            sha[1],
            sha[2],
            sha[3],
            sha[4],
            sha[5],
            spa.octets()[0],
            spa.octets()[1],
            spa.octets()[2],
            spa.octets()[3],
        ]);
        a[8..14].copy_from_slice(&mac);
        a[14..18].copy_from_slice(&tpa.octets());
        cx.count(C::ArpReplies, 1);
        self.out.push_back((m, edge));
    }
}

/// A broadcast ARP request from `iface` (its first IPv4 address) for `target`; `None`
/// when the interface has no IPv4 address.
pub(super) fn request(iface: &Iface, target: Ipv4Addr) -> Option<Vec<u8>> {
    let (src, _) = iface.v4.first()?;
    let mut b = vec![0u8; 60];
    b[0..6].copy_from_slice(&[0xff; 6]);
    b[6..12].copy_from_slice(&iface.mac);
    b[12..14].copy_from_slice(&[0x08, 0x06]);
    b[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    b[22..28].copy_from_slice(&iface.mac);
    b[28..32].copy_from_slice(&src.octets());
    b[38..42].copy_from_slice(&target.octets());
    Some(b)
}
