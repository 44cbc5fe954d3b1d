//! Every check: the path of each packet the fast path ([`super::fast`]) does not
//! take, and of every packet the router owns (a copy, one it made). A frame is parsed
//! ([`Router::parse`]: addresses, header, checksum, martians), looked up in the FIB,
//! and its [`Step`] planned ([`Router::plan`]): out of an interface (rewritten in
//! place, [`rewrite`]), to the control plane ([`Slow`], [`super::control`]), or
//! dropped and counted.

use super::config::Target;
use super::lpm::Lpm;
use super::nd::{is_link_local, ALL_NODES, ALL_ROUTERS};
use super::{Router, RouterCounter, RouterCounter as C, SLOW};
use ironpath_eal::abi::{self, Mbuf as RawMbuf};
use ironpath_eal::{Burst, Mbuf, MAX_BURST};
use ironpath_graph::{NodeCx, DROP};
use ironpath_wire::checksum;
use ironpath_wire::ethernet::HEADER_LEN as ETH;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why a packet leaves the forwarding paths for the control plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Slow {
    Arp,
    Local,
    TimeExceeded,
    NoRoute,
    Unreachable,
    Prohibit,
    TooBig(usize),
    Hold(usize, IpAddr),
    Copy,
}

/// What to do with one packet.
#[derive(Clone, Copy, Debug)]
pub(super) enum Step {
    Out(usize, [u8; 6]),
    Slow(Slow),
    Drop(RouterCounter),
}

/// The IP header fields the decisions need.
#[derive(Clone, Copy)]
pub(super) struct Parsed {
    key: u128,
    ip_len: u32,
    /// TTL / hop limit.
    ttl: u8,
    v6: bool,
    df: bool,
    /// Sent to an Ethernet group address (only the router's own traffic may be).
    group: bool,
}

impl Parsed {
    fn dst(&self) -> IpAddr {
        if self.v6 {
            IpAddr::V6(Ipv6Addr::from(self.key))
        } else {
            IpAddr::V4(Ipv4Addr::from((self.key >> 96) as u32))
        }
    }
}

impl Router {
    /// The IP header of a frame received on `from` (None: made by the router).
    pub(super) fn parse(&self, h: &RawMbuf, d: &[u8], from: Option<usize>) -> Result<Parsed, Step> {
        if d.len() < ETH {
            return Err(Step::Drop(C::Malformed));
        }
        let eth_group = d[0] & 1 != 0;
        if let Some(k) = from {
            if !eth_group && d[0..6] != self.ifaces[k].mac {
                return Err(Step::Drop(C::OtherHost));
            }
        }
        match u16::from_be_bytes([d[12], d[13]]) {
            0x0800 => self.parse4(h, d, from, eth_group),
            0x86dd => self.parse6(h, d, from, eth_group),
            0x0806 if from.is_some() => Err(Step::Slow(Slow::Arp)),
            _ => Err(Step::Drop(C::NotIp)),
        }
    }

    fn parse4(&self, h: &RawMbuf, d: &[u8], from: Option<usize>, eth_group: bool) -> Result<Parsed, Step> {
        let Some(ip) = d.get(ETH..ETH + 20) else { return Err(Step::Drop(C::Malformed)) };
        let hl = usize::from(ip[0] & 0x0f) * 4;
        let tl = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        if ip[0] >> 4 != 4 || hl < 20 || tl < hl || ETH + tl > h.pkt_len as usize || d.len() < ETH + hl {
            return Err(Step::Drop(C::Malformed));
        }
        if h.ol_flags & abi::RX_IP_CKSUM_BAD != 0
            || (h.ol_flags & abi::RX_IP_CKSUM_GOOD == 0 && checksum::data(&d[ETH..ETH + hl]) != 0xffff)
        {
            return Err(Step::Drop(C::BadChecksum));
        }
        let src = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
        let dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
        // Destinations are classified by the FIB (our addresses, broadcasts, groups and
        // martian ranges have entries of their own); sources here.
        // Our own address as source is refused on the interface that has it (a
        // neighbour claiming to be us); from another interface it is a NAT's
        // translation of an inside packet (`nat44` in front of the router).
        let ours_here = |k: usize| self.ifaces[k].v4.iter().any(|(a, _)| u32::from(*a) == src);
        if from.is_some_and(|k| martian4_src(src) || ours_here(k)) {
            return Err(Step::Drop(C::Martian));
        }
        Ok(Parsed {
            key: u128::from(dst) << 96,
            ip_len: tl as u32,
            ttl: ip[8],
            v6: false,
            df: ip[6] & 0x40 != 0,
            group: eth_group,
        })
    }

    fn parse6(&self, h: &RawMbuf, d: &[u8], from: Option<usize>, eth_group: bool) -> Result<Parsed, Step> {
        let Some(ip) = d.get(ETH..ETH + 40) else { return Err(Step::Drop(C::Malformed)) };
        let plen = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
        if ip[0] >> 4 != 6 || ETH + 40 + plen > h.pkt_len as usize {
            return Err(Step::Drop(C::Malformed));
        }
        let src = Ipv6Addr::from(<[u8; 16]>::try_from(&ip[8..24]).unwrap_or_default());
        let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&ip[24..40]).unwrap_or_default());
        let p =
            Parsed { key: u128::from(dst), ip_len: 40 + plen as u32, ttl: ip[7], v6: true, df: true, group: eth_group };
        if from.is_none() {
            return Ok(p);
        }
        if dst.is_multicast() {
            // All-nodes, all-routers and solicited-node groups are ours; nothing else
            // multicast is routed.
            let s = dst.segments();
            let ours = s[0] == 0xff02
                && (dst == ALL_NODES
                    || dst == ALL_ROUTERS
                    || (s[1..5] == [0, 0, 0, 0] && s[5] == 1 && s[6] >> 8 == 0xff));
            return Err(if ours { Step::Slow(Slow::Local) } else { Step::Drop(C::Multicast) });
        }
        if src.is_multicast() || src.is_loopback() || self.local6.contains(&src) {
            return Err(Step::Drop(C::Martian));
        }
        if self.local6.contains(&dst) || self.ifaces.iter().any(|f| f.ll6 == dst) {
            return Err(Step::Slow(Slow::Local));
        }
        if src.is_unspecified() || dst.is_unspecified() || dst.is_loopback() || is_link_local(src) || is_link_local(dst)
        {
            return Err(Step::Drop(C::Martian));
        }
        Ok(p)
    }

    /// The step for a parsed packet whose FIB lookup gave `target`.
    #[inline]
    pub(super) fn plan(&self, p: &Parsed, target: Option<u32>, h: &RawMbuf, made_here: bool, now: u64) -> Step {
        let Some(t) = target.and_then(|t| self.targets.get(t as usize)) else {
            return if made_here {
                Step::Drop(C::NoRoute)
            } else if p.group {
                Step::Drop(C::OtherHost)
            } else {
                Step::Slow(Slow::NoRoute)
            };
        };
        match *t {
            Target::Local if made_here => Step::Drop(C::LocalDropped),
            Target::Local => Step::Slow(Slow::Local),
            Target::Multicast => Step::Drop(C::Multicast),
            Target::Martian if made_here => Step::Drop(C::NoRoute),
            Target::Martian => Step::Drop(C::Martian),
            // Only the router's own traffic may come to an Ethernet group address.
            _ if p.group && !made_here => Step::Drop(C::OtherHost),
            _ if p.ttl <= 1 && !made_here => Step::Slow(Slow::TimeExceeded),
            Target::Forward { iface, via } => {
                let f = &self.ifaces[iface];
                let gso = h.ol_flags & (abi::RX_AGGREGATED | abi::TX_TCP_SEG) != 0;
                if p.ip_len as usize > f.mtu && !gso {
                    return if p.df && !made_here { Step::Slow(Slow::TooBig(f.mtu)) } else { Step::Drop(C::TooBig) };
                }
                let nh = via.unwrap_or_else(|| p.dst());
                match f.neigh.lookup(nh, now) {
                    Some(mac) => Step::Out(iface, mac),
                    None => Step::Slow(Slow::Hold(iface, nh)),
                }
            }
            Target::Blackhole => Step::Drop(C::Blackholed),
            Target::Unreachable if made_here => Step::Drop(C::Rejected),
            Target::Unreachable => Step::Slow(Slow::Unreachable),
            Target::Prohibit if made_here => Step::Drop(C::Rejected),
            Target::Prohibit => Step::Slow(Slow::Prohibit),
        }
    }

    fn fib(&self, v6: bool) -> &Lpm {
        if v6 {
            &self.fib6
        } else {
            &self.fib4
        }
    }

    /// Every check for packet `i`: its next edge (or `SLOW`, `DROP`) and whether it
    /// was forwarded.
    pub(super) fn general(
        &self,
        pkts: &mut Burst,
        i: usize,
        now: u64,
        slow: &mut [Slow; MAX_BURST],
        drops: &mut [u64; C::COUNT],
    ) -> (u16, u64) {
        let h = pkts.header(i);
        let from = self.iface_of(h);
        let step = match from {
            None => Step::Drop(C::Foreign),
            Some(_) => match self.parse(h, pkts.data(i), from) {
                Ok(p) => {
                    let t = self.fib(p.v6).lookup(p.key);
                    self.plan(&p, t, h, false, now)
                }
                Err(s) => s,
            },
        };
        match step {
            Step::Out(k, mac) => {
                let f = &self.ifaces[k];
                match pkts.data_mut(i) {
                    Some(d) => {
                        rewrite(d, true, Some((mac, f.mac)));
                        (f.edge, 1)
                    }
                    None => (settle(Step::Slow(Slow::Copy), slow, i, drops), 0),
                }
            }
            s => (settle(s, slow, i, drops), 0),
        }
    }

    /// Route a packet we own (a copy, or one the router made); `made_here` keeps its
    /// TTL and sends no ICMP about it.
    pub(super) fn route_owned(&mut self, cx: &NodeCx<'_>, mut m: Mbuf, from: Option<usize>, made_here: bool) {
        let step = match self.parse(m.header(), m.data(), from) {
            Ok(p) => {
                let t = self.fib(p.v6).lookup(p.key);
                self.plan(&p, t, m.header(), made_here, cx.now_tsc)
            }
            Err(s) => s,
        };
        match step {
            Step::Out(k, mac) => {
                let (src, edge) = (self.ifaces[k].mac, self.ifaces[k].edge);
                match m.data_mut() {
                    Ok(d) => {
                        rewrite(d, !made_here, Some((mac, src)));
                        cx.count(C::Forwarded, 1);
                        self.out.push_back((m, edge));
                    }
                    Err(_) => cx.count(C::Malformed, 1),
                }
            }
            Step::Slow(Slow::Copy) => cx.count(C::Malformed, 1),
            Step::Slow(s) => self.slow(cx, m, s, from, made_here),
            Step::Drop(c) => cx.count(c, 1),
        }
    }
}

/// Record a packet's step off the fast path; its next edge.
fn settle(s: Step, slow: &mut [Slow; MAX_BURST], i: usize, drops: &mut [u64; C::COUNT]) -> u16 {
    match s {
        Step::Slow(w) => {
            slow[i] = w;
            SLOW
        }
        Step::Drop(c) => {
            drops[c as usize] += 1;
            DROP
        }
        Step::Out(..) => DROP,
    }
}

/// Forward in place: TTL / hop limit minus one (the IPv4 checksum updated, RFC 1624:
/// [`checksum::update16`] of the (TTL, protocol) word) when `decrement`, and the
/// Ethernet addresses `(dst, src)` when known.
#[inline(always)]
pub(super) fn rewrite(d: &mut [u8], decrement: bool, macs: Option<([u8; 6], [u8; 6])>) {
    if decrement {
        if d[12] == 0x86 {
            d[ETH + 7] = d[ETH + 7].wrapping_sub(1);
        } else {
            let old = u16::from_be_bytes([d[ETH + 8], d[ETH + 9]]);
            let new = old.wrapping_sub(0x0100);
            d[ETH + 8] = (new >> 8) as u8;
            let old_cksum = u16::from_be_bytes([d[ETH + 10], d[ETH + 11]]);
            let new_cksum = checksum::update16(old_cksum, old, new);
            d[ETH + 10..ETH + 12].copy_from_slice(&new_cksum.to_be_bytes());
        }
    }
    if let Some((dst, src)) = macs {
        d[0..6].copy_from_slice(&dst);
        d[6..12].copy_from_slice(&src);
    }
}

/// Never a source: "this network" (0/8), loopback, multicast, class E and broadcast,
/// link-local (what [`super::fast::martian16`] maps per /16).
pub(super) fn martian4_src(a: u32) -> bool {
    let o = a >> 24;
    o == 0 || o == 127 || o >= 224 || a >> 16 == 0xa9fe
}
