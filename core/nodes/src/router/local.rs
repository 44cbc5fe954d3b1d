//! Local delivery: a packet to one of the router's addresses (or groups). Neighbour
//! solicitations and advertisements teach the neighbour table ([`super::nd`]); echo
//! requests and solicitations for our addresses are answered
//! ([`crate::icmp::IcmpEcho`]); everything else goes to the `local` edge when it is
//! connected, else is dropped and counted.

use super::nd::{NA, NS};
use super::{Router, RouterCounter as C};
use ironpath_eal::Mbuf;
use ironpath_graph::NodeCx;
use ironpath_wire::ethernet::HEADER_LEN as ETH;

impl Router {
    /// A packet to one of our addresses (or groups), received on interface `k`.
    pub(super) fn local(&mut self, cx: &NodeCx<'_>, mut m: Mbuf, k: usize) {
        let d = m.data();
        let icmp6 = if d.get(12..14) == Some(&[0x86, 0xdd]) { icmp6_of(d) } else { None };
        if let Some((ty @ (NS | NA), at)) = icmp6 {
            // A solicitation is answered only for this interface's addresses (no
            // proxy); an advertisement only teaches.
            match self.nd(cx, d, k, ty, at) {
                Some(target) if ty == NS && self.ifaces[k].owns6(target) => {}
                _ => return,
            }
        }
        let is_icmp4 = d.get(12..14) == Some(&[0x08, 0x00]) && d.get(ETH + 9) == Some(&1);
        if is_icmp4 || icmp6.is_some_and(|(ty, _)| ty == 128 || ty == NS) {
            match self.ifaces[k].echo.answer(&mut m) {
                Ok(c) => {
                    cx.count(if c == crate::icmp::IcmpCounter::NaSent { C::NaSent } else { C::EchoReplies }, 1);
                    self.out.push_back((m, self.ifaces[k].edge));
                }
                Err(crate::icmp::IcmpCounter::BadChecksum) => cx.count(C::BadChecksum, 1),
                Err(crate::icmp::IcmpCounter::Malformed) => cx.count(C::Malformed, 1),
                Err(_) => cx.count(C::LocalDropped, 1),
            }
            return;
        }
        match self.local_edge {
            Some(e) => {
                cx.count(C::Local, 1);
                self.out.push_back((m, e));
            }
            None => cx.count(C::LocalDropped, 1),
        }
    }
}

/// (type, offset) of an ICMPv6 message right after the IPv6 header (the shape of
/// every ND message and of what we answer).
fn icmp6_of(d: &[u8]) -> Option<(u8, usize)> {
    let at = ETH + 40;
    (d.get(ETH + 6) == Some(&58)).then_some(())?;
    d.get(at + 3)?;
    Some((d[at], at))
}
