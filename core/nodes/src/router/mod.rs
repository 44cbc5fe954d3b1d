//! `ip_router`: an IPv4 and IPv6 router between the ports its next edges lead to,
//! as a Linux router or VPP's ip4/ip6 lookup and rewrite nodes.
//!
//! * FIB: longest-prefix match ([`lpm`]) over connected subnets (from the
//!   interfaces' addresses), the router's own addresses, and configured routes
//!   (`via` a gateway, on the link of a `port`, or `unreachable`, `prohibit`,
//!   `blackhole`), from YAML records and a routes file. Looked up a burst at a time.
//! * Forwarding: TTL / hop limit decremented (the IPv4 checksum updated
//!   incrementally, RFC 1624), Ethernet addresses rewritten from the outgoing
//!   interface's neighbour table ([`neigh`]): ARP for IPv4, neighbour
//!   solicitation for IPv6. Packets for a neighbour being resolved wait in a
//!   bounded queue; what does not fit, or whose neighbour never answers, is dropped
//!   and counted. GSO aggregates keep their offload flags (the port segments them).
//! * Answers of its own: ARP and neighbour solicitations for its addresses, echo
//!   requests to any of its addresses (IPv4 and IPv6); ICMP time exceeded, destination
//!   unreachable (no route, unreachable and prohibit routes), fragmentation needed
//!   and packet too big, rate-limited by a token bucket. Other packets to the
//!   router go to the `local` edge when it is connected.
//! * Not forwarded, counted: martians (unspecified, loopback, multicast or class-E
//!   sources; loopback, "this network", class-E or link-local destinations; IPv6
//!   link-local either way; our own addresses as source), multicast, frames sent to
//!   another MAC, IPv4 packets larger than the outgoing MTU without DF (this router
//!   does not fragment).
//!
//! Everything runs on the node's lcore, no lock; the node is polled so neighbour
//! retries happen without traffic.

pub mod config;
pub mod icmp_budget;
pub mod lpm;
pub mod neigh;
#[cfg(test)]
mod tests;

use crate::icmp::{fill_icmp6_checksum, IcmpEcho};
use crate::kind::{param, NodeError, NodeKind, MEMPOOL};
use config::{router_cfg, IfaceCfg, RouteType, Target, INTERFACE, NEIGHBOUR, ROUTE};
use icmp_budget::{IcmpBudget, Limited};
use ironpath_config::{Nexts, NodeSpec, ParamKind, QueueUse};
use ironpath_eal::abi::{self, Mbuf as RawMbuf};
use ironpath_eal::{Burst, Mbuf, Mempool, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx, DROP};
use ironpath_wire::checksum;
use ironpath_wire::icmpv6::{Icmpv6Packet, NdiscOption};
use ironpath_wire::ipv6::{self, Ipv6Packet};
use ironpath_wire::IpProtocol;
use ironpath_wire::ethernet::HEADER_LEN as ETH;
use lpm::{key4, Lpm};
use neigh::{Held, NeighConfig, Neighbours};
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

ironpath_graph::counters! {
    /// What `ip_router` counts.
    pub enum RouterCounter {
        Forwarded("forwarded", "packets routed out of an interface"),
        Local("local", "packets to the router sent to the `local` edge"),
        LocalDropped("local_dropped", "packets to the router dropped (nothing answers them, `local` not connected)"),
        EchoReplies("echo_replies", "ICMP and ICMPv6 echo replies"),
        ArpIn("arp_in", "ARP packets received (answered, learned from, or neither)"),
        ArpReplies("arp_replies", "ARP replies"),
        ArpRequests("arp_requests", "ARP requests"),
        NdIn("nd_in", "neighbour solicitations and advertisements received (answered, learned from, or neither)"),
        NaSent("na_sent", "neighbour advertisements"),
        NsSent("ns_sent", "neighbour solicitations"),
        Learned("learned", "neighbour entries added or confirmed"),
        Evicted("evicted", "neighbour entries evicted (table full)"),
        Held("held", "packets held awaiting resolution"),
        HoldFull("hold_full", "packets dropped (the neighbour's hold queue full)"),
        ResolvingEvicted("resolving_evicted", "neighbours being resolved given up for a newer one (`resolving` reached: a scan), their held packets dropped"),
        Unresolved("unresolved", "packets dropped (no answer after max_tries, or their neighbour gave up its place: resolving_evicted)"),
        TtlExceeded("ttl_exceeded", "packets dropped (TTL or hop limit ran out)"),
        NoRoute("no_route", "packets dropped (no route)"),
        Rejected("rejected", "packets dropped by unreachable or prohibit routes"),
        Blackholed("blackholed", "packets dropped by blackhole routes"),
        TooBig("too_big", "packets dropped (larger than the outgoing MTU)"),
        Martian("martian", "packets dropped (addresses never routed)"),
        Multicast("multicast", "packets dropped (multicast is not routed)"),
        OtherHost("other_host", "packets dropped (sent to another MAC)"),
        NotIp("not_ip", "packets dropped (neither IPv4, IPv6 nor ARP)"),
        Malformed("malformed", "packets dropped (truncated or bad header)"),
        BadChecksum("bad_checksum", "packets dropped (IPv4 header or ICMP checksum)"),
        Foreign("foreign", "packets dropped (from a port that is not an interface)"),
        Copied("copied", "shared packets copied before rewriting"),
        IcmpSent("icmp_sent", "ICMP errors sent"),
        IcmpRateLimited("icmp_rate_limited", "ICMP errors not sent (the router's rate limit: icmp_rate, icmp_burst)"),
        IcmpPeerLimited("icmp_peer_limited", "ICMP errors not sent (their destination's rate limit: icmp_peer_rate, icmp_peer_burst)"),
        AllocFailed("alloc_failed", "packets not made (mempool empty)"),
    }
}

use RouterCounter as C;

/// Why a packet leaves the fast path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slow {
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
enum Step {
    Out(usize, [u8; 6]),
    Slow(Slow),
    Drop(RouterCounter),
}

/// The IP header fields the decisions need.
#[derive(Clone, Copy)]
struct Parsed {
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

/// A router interface.
pub struct Iface {
    edge: u16,
    mac: [u8; 6],
    /// The MAC in the low 48 bits of a little-endian word (a frame's first eight
    /// bytes are compared with it in one go).
    mac48: u64,
    v4: Vec<(Ipv4Addr, u8)>,
    v6: Vec<(Ipv6Addr, u8)>,
    /// fe80::/64 with the EUI-64 of the MAC.
    ll6: Ipv6Addr,
    mtu: usize,
    neigh: Neighbours,
    echo: IcmpEcho,
}

/// Settings besides the interfaces and routes.
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// Neighbour tables.
    pub neigh: NeighConfig,
    /// ICMP errors per second (0: none).
    pub icmp_rate: u64,
    /// ICMP errors sent back to back.
    pub icmp_burst: u64,
    /// ICMP errors per second to one destination (the source of the packets that
    /// caused them).
    pub icmp_peer_rate: u64,
    /// ICMP errors sent back to back to one destination.
    pub icmp_peer_burst: u64,
    /// TSC ticks per second.
    pub tsc_hz: u64,
    /// Bound on LPM plies.
    pub max_plies: usize,
    /// Key of the neighbour tables' hash (random in a pipeline).
    pub hash_key: [u8; 16],
}

/// A router's forwarding tables: the IPv4 and IPv6 FIBs and the targets their leaves
/// index (a route's kind, interface and gateway).
struct Fib {
    v4: Lpm,
    v6: Lpm,
    targets: Vec<Target>,
}

impl Fib {
    /// The tables of `cfg`'s routes; fails when they need more than `max_plies` plies.
    fn build(cfg: &config::RouterCfg, max_plies: usize) -> Result<Fib, String> {
        let mut targets = Vec::new();
        let mut index = |routes: &[(lpm::Prefix, Target)]| -> Vec<(lpm::Prefix, u32)> {
            routes
                .iter()
                .map(|(p, t)| {
                    let k = targets.iter().position(|x| x == t).unwrap_or_else(|| {
                        targets.push(*t);
                        targets.len() - 1
                    });
                    (*p, k as u32)
                })
                .collect()
        };
        let (r4, r6) = (index(&cfg.routes4), index(&cfg.routes6));
        let v4 = Lpm::build4(&r4, max_plies)?;
        let v6 = Lpm::build(&r6, max_plies.saturating_sub(v4.plies()))?;
        Ok(Fib { v4, v6, targets })
    }
}

/// The node.
pub struct Router {
    ifaces: Vec<Iface>,
    /// Interface index by input port id.
    by_port: Vec<u8>,
    fib4: Lpm,
    fib6: Lpm,
    /// What the FIBs' values index: a route's kind, interface and gateway.
    targets: Vec<Target>,
    local_edge: Option<u16>,
    /// Every address of the router (any interface), for "is it to us".
    local4: Vec<Ipv4Addr>,
    /// One bit per IPv4 address of the router (a multiplicative hash): most sources
    /// are told apart from ours without a scan.
    local4_bloom: u64,
    /// One bit per /16: are its sources martian ([`martian4_src`] depends on the
    /// top 16 bits only)?
    martian16: &'static [u64; 1 << 10],
    local6: Vec<Ipv6Addr>,
    pool: Mempool,
    /// Packets made or released outside the burst's flow, with their edge.
    out: VecDeque<(Mbuf, u16)>,
    /// The ICMP error budgets, the router's and per destination.
    icmp: IcmpBudget,
    scratch: Vec<IpAddr>,
    /// Per FIB target: what the fast path needs, with the gateway's MAC as last looked
    /// up.
    adj: Vec<Adj>,
    /// Per-burst work arrays, allocated once (out of `self` while a burst is worked).
    work: Option<Box<Work>>,
    /// Every packet takes every check (the fast path off: what tests compare it with).
    all_checks: bool,
    /// Bumped whenever a neighbour entry of any interface changes: a cached gateway
    /// MAC (`Adj::macs`) holds while it is unchanged.
    neigh_gen: u64,
}

/// What the fast path keeps per packet of a burst.
struct Work {
    /// IPv4 destinations of the packets on the fast path, the length their MTU check
    /// compares (the IP length; 1 for a GSO aggregate), their indexes in the burst,
    /// and their FIB root slots.
    a4: [u32; MAX_BURST],
    len4: [u16; MAX_BURST],
    idx4: [u8; MAX_BURST],
    leaf: [u32; MAX_BURST],
    /// Indexes of the packets every check is run on.
    general: [u8; MAX_BURST],
    slow: [Slow; MAX_BURST],
    /// What the packets that took every check were dropped for.
    drops: [u64; C::COUNT],
}

/// What a FIB entry needs on the fast path: a plain forward's interface, next edge
/// and MTU (0 for every other kind of route, so no packet passes its MTU check), its
/// gateway, and the Ethernet addresses a packet leaves with as last looked up.
struct Adj {
    /// The gateway's MAC then ours, valid while the neighbour tables are at
    /// generation `gen` and the TSC is before `until` (`gen` 0: never; an on-link
    /// route looks each destination up).
    macs: [u8; 12],
    gen: u64,
    until: u64,
    mtu: u32,
    iface: u16,
    edge: u16,
    gw: Option<IpAddr>,
}

const NOT_FORWARD: u16 = u16::MAX;

const NO_IFACE: u8 = u8::MAX;
const SLOW: u16 = DROP - 1;

impl Router {
    /// A router over `ifaces`, whose `k`th entry is `(config, port id, next edge, MAC)`.
    pub fn new(
        cfg: &config::RouterCfg,
        ports: &[(u16, u16, [u8; 6])],
        local_edge: Option<u16>,
        tune: Tuning,
        pool: Mempool,
    ) -> Result<Self, String> {
        let fib = Fib::build(cfg, tune.max_plies)?;
        Ok(Self::with_fib(cfg, fib, ports, local_edge, tune, pool))
    }

    /// [`Router::new`] with its forwarding tables built (from the same `cfg`). The
    /// tables are fields of the router: the fast path reads them through `self`, one
    /// load a packet less than through a shared pointer (6 instructions a packet in
    /// `benches/router.rs`).
    fn with_fib(
        cfg: &config::RouterCfg,
        fib: Fib,
        ports: &[(u16, u16, [u8; 6])],
        local_edge: Option<u16>,
        tune: Tuning,
        pool: Mempool,
    ) -> Self {
        let mut by_port = Vec::new();
        let mut ifaces = Vec::new();
        let local4: Vec<Ipv4Addr> = cfg.ifaces.iter().flat_map(|f| f.v4.iter().map(|a| a.0)).collect();
        let mut local6: Vec<Ipv6Addr> = cfg.ifaces.iter().flat_map(|f| f.v6.iter().map(|a| a.0)).collect();
        for (k, (f, &(port, edge, mac))) in cfg.ifaces.iter().zip(ports).enumerate() {
            if by_port.len() <= port as usize {
                by_port.resize(port as usize + 1, NO_IFACE);
            }
            by_port[port as usize] = k as u8;
            local6.push(link_local(mac));
            ifaces.push(Iface::new(f, edge, mac, tune.neigh, tune.hash_key));
        }
        for &(k, ip, mac) in &cfg.statics {
            if let Some(f) = ifaces.get_mut(k) {
                f.neigh.add_static(ip, mac);
            }
        }
        for f in &mut ifaces {
            let mut v6 = local6.clone();
            v6.push(f.ll6);
            f.echo = IcmpEcho::new(local4.clone(), v6, f.mac).router();
        }
        let Fib { v4: fib4, v6: fib6, targets } = fib;
        let adj = targets
            .iter()
            .map(|t| match *t {
                Target::Forward { iface, via } => Adj {
                    macs: [0; 12],
                    gen: 0,
                    until: 0,
                    mtu: ifaces[iface].mtu as u32,
                    iface: iface as u16,
                    edge: ifaces[iface].edge,
                    gw: via,
                },
                _ => Adj { macs: [0; 12], gen: 0, until: 0, mtu: 0, iface: NOT_FORWARD, edge: 0, gw: None },
            })
            .collect();
        Self {
            ifaces,
            by_port,
            fib4,
            fib6,
            targets,
            local_edge,
            local4_bloom: local4.iter().fold(0u64, |b, a| b | 1 << (u32::from(*a).wrapping_mul(0x9e37_79b1) >> 26)),
            local4,
            martian16: martian16(),
            local6,
            pool,
            out: VecDeque::new(),
            icmp: IcmpBudget::new(
                (tune.icmp_rate, tune.icmp_burst),
                (tune.icmp_peer_rate, tune.icmp_peer_burst),
                tune.tsc_hz,
                tune.hash_key,
            ),
            scratch: Vec::new(),
            adj,
            all_checks: false,
            neigh_gen: 1,
            work: Some(Box::new(Work {
                a4: [0; MAX_BURST],
                len4: [0; MAX_BURST],
                idx4: [0; MAX_BURST],
                leaf: [0; MAX_BURST],
                general: [0; MAX_BURST],
                slow: [Slow::Local; MAX_BURST],
                drops: [0; C::COUNT],
            })),
        }
    }

    /// The same router with its fast path off: every packet takes every check.
    pub fn all_checks(mut self) -> Self {
        self.all_checks = true;
        self
    }

    /// Forget what the router learned and holds at run time: neighbours (static ones
    /// stay) and the packets held for them, packets queued to leave, the ICMP error
    /// budget (full again), the gateways' MACs cached in the adjacencies. The router is
    /// as just built; its tables are not touched.
    pub fn forget(&mut self) {
        for f in &mut self.ifaces {
            f.neigh.forget();
        }
        self.out.clear();
        self.scratch.clear();
        self.icmp.refill();
        for a in &mut self.adj {
            (a.macs, a.gen, a.until) = ([0; 12], 0, 0);
        }
        self.neigh_gen = 1;
    }

    /// The IPv4 FIB (values index the router's targets).
    pub fn fib4(&self) -> &Lpm {
        &self.fib4
    }

    fn iface_of(&self, h: &RawMbuf) -> Option<usize> {
        match self.by_port.get(h.port as usize) {
            Some(&k) if k != NO_IFACE => Some(k as usize),
            _ => None,
        }
    }

    /// The common IPv4 packet, checked in one go: to our MAC, a 20-byte header with a
    /// good checksum, a plain unicast source, TTL above 1. Gives its destination and
    /// the length its MTU check compares (`Work::len4`); anything else (`None`) takes
    /// every check of [`Router::parse`].
    #[inline(always)]
    fn quick4(&self, h: &RawMbuf, d: &[u8], mac48: u64) -> Option<(u32, u16)> {
        let b: &[u8; ETH + 20] = d.first_chunk()?;
        let ne32 = |o: usize| u32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let le64 = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
        // Our MAC (the low six bytes), then EtherType 0x0800 and version 4, IHL 5.
        if (le64 ^ mac48) << 16 != 0 || u32::from_le(ne32(12)) & 0x00ff_ffff != 0x0045_0008 {
            return None;
        }
        let tl = u16::from_be_bytes([b[16], b[17]]);
        let flags = h.ol_flags;
        if ETH as u32 + u32::from(tl) > h.pkt_len || tl < 20 || b[22] <= 1 || flags & abi::RX_IP_CKSUM_BAD != 0 {
            return None;
        }
        let (src, dst) = (ne32(26), ne32(30));
        if flags & abi::RX_IP_CKSUM_GOOD == 0 {
            // The one's complement sum does not depend on byte order (native words),
            // and is the sum modulo 0xffff (2^16 = 1 there), 0xffff for a good header:
            // a nonzero multiple of 0xffff.
            let sum = u64::from(ne32(14)) + u64::from(ne32(18)) + u64::from(ne32(22)) + u64::from(src) + u64::from(dst);
            if sum % 0xffff != 0 || sum == 0 {
                return None;
            }
        }
        let src = u32::from_be(src);
        if self.martian16[(src >> 22) as usize] >> (src >> 16 & 63) & 1 != 0
            || (self.local4_bloom >> (src.wrapping_mul(0x9e37_79b1) >> 26) & 1 != 0 && self.local4.iter().any(|a| u32::from(*a) == src))
        {
            return None;
        }
        let len = if flags & (abi::RX_AGGREGATED | abi::TX_TCP_SEG) != 0 { 1 } else { tl };
        Some((u32::from_be(dst), len))
    }

    /// The Ethernet addresses (the next hop's, then ours) for FIB target `t` (a plain
    /// forward) and destination `dst`; a gateway's are cached in its [`Adj`].
    #[inline(never)]
    fn adj_lookup(&mut self, t: usize, dst: u32, now: u64) -> Option<[u8; 12]> {
        let a = &self.adj[t];
        let f = &self.ifaces[usize::from(a.iface)];
        let join = |mac: [u8; 6]| {
            let mut m = [0u8; 12];
            m[..6].copy_from_slice(&mac);
            m[6..].copy_from_slice(&f.mac);
            m
        };
        let Some(gw) = a.gw else {
            return f.neigh.lookup(IpAddr::V4(Ipv4Addr::from(dst)), now).map(join);
        };
        let (mac, until) = f.neigh.lookup_until(gw, now)?;
        let macs = join(mac);
        let gen = self.neigh_gen;
        let a = &mut self.adj[t];
        (a.macs, a.gen, a.until) = (macs, gen, until);
        Some(macs)
    }

    /// The IP header of a frame received on `from` (None: made by the router).
    fn parse(&self, h: &RawMbuf, d: &[u8], from: Option<usize>) -> Result<Parsed, Step> {
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
            || (h.ol_flags & abi::RX_IP_CKSUM_GOOD == 0 && !header_checksum_ok(&d[ETH..ETH + hl]))
        {
            return Err(Step::Drop(C::BadChecksum));
        }
        let src = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
        let dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
        // Destinations are classified by the FIB (our addresses, broadcasts, groups and
        // martian ranges have entries of their own); sources here.
        if from.is_some() && (martian4_src(src) || self.local4.contains(&Ipv4Addr::from(src))) {
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
        let p = Parsed { key: u128::from(dst), ip_len: 40 + plen as u32, ttl: ip[7], v6: true, df: true, group: eth_group };
        if from.is_none() {
            return Ok(p);
        }
        if dst.is_multicast() {
            // All-nodes, all-routers and solicited-node groups are ours; nothing else
            // multicast is routed.
            let s = dst.segments();
            let ours = s[0] == 0xff02
                && (dst == ALL_NODES || dst == ALL_ROUTERS || (s[1..5] == [0, 0, 0, 0] && s[5] == 1 && s[6] >> 8 == 0xff));
            return Err(if ours { Step::Slow(Slow::Local) } else { Step::Drop(C::Multicast) });
        }
        if src.is_multicast() || src.is_loopback() || self.local6.contains(&src) {
            return Err(Step::Drop(C::Martian));
        }
        if self.local6.contains(&dst) || self.ifaces.iter().any(|f| f.ll6 == dst) {
            return Err(Step::Slow(Slow::Local));
        }
        if src.is_unspecified() || dst.is_unspecified() || dst.is_loopback() || is_link_local(src) || is_link_local(dst) {
            return Err(Step::Drop(C::Martian));
        }
        Ok(p)
    }

    /// The step for a parsed packet whose FIB lookup gave `target`.
    #[inline]
    fn plan(&self, p: &Parsed, target: Option<u32>, h: &RawMbuf, made_here: bool, now: u64) -> Step {
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

    /// Route a packet we own (a copy, or one the router made); `made_here` keeps its
    /// TTL and sends no ICMP about it.
    fn route_owned(&mut self, cx: &NodeCx<'_>, mut m: Mbuf, from: Option<usize>, made_here: bool) {
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

    /// Everything off the fast path, for a packet we own.
    fn slow(&mut self, cx: &NodeCx<'_>, mut m: Mbuf, why: Slow, from: Option<usize>, made_here: bool) {
        match why {
            Slow::Copy => match m.deep_copy(&self.pool) {
                Ok(c) => {
                    cx.count(C::Copied, 1);
                    self.route_owned(cx, c, from, made_here);
                }
                Err(_) => cx.count(C::AllocFailed, 1),
            },
            Slow::Arp => {
                if let Some(k) = from {
                    self.arp(cx, m, k);
                }
            }
            Slow::Local => {
                if let Some(k) = from {
                    self.local(cx, m, k);
                }
            }
            Slow::Hold(k, nh) => {
                if !m.is_writable() {
                    return self.slow(cx, m, Slow::Copy, from, made_here);
                }
                if let Ok(d) = m.data_mut() {
                    rewrite(d, !made_here, None);
                }
                match self.ifaces[k].neigh.hold(nh, m, cx.now_tsc) {
                    Held::Yes { request, evicted } => {
                        cx.count(C::Held, 1);
                        if let Some(packets) = evicted {
                            cx.count(C::ResolvingEvicted, 1);
                            cx.count(C::Unresolved, packets);
                        }
                        if request {
                            self.solicit(cx, k, nh);
                        }
                    }
                    Held::QueueFull => cx.count(C::HoldFull, 1),
                }
            }
            Slow::TimeExceeded => {
                cx.count(C::TtlExceeded, 1);
                self.icmp_error(cx, &m, from, Icmp::TimeExceeded);
            }
            Slow::NoRoute => {
                cx.count(C::NoRoute, 1);
                self.icmp_error(cx, &m, from, Icmp::NoRoute);
            }
            Slow::Unreachable => {
                cx.count(C::Rejected, 1);
                self.icmp_error(cx, &m, from, Icmp::Unreachable);
            }
            Slow::Prohibit => {
                cx.count(C::Rejected, 1);
                self.icmp_error(cx, &m, from, Icmp::Prohibited);
            }
            Slow::TooBig(mtu) => {
                cx.count(C::TooBig, 1);
                self.icmp_error(cx, &m, from, Icmp::TooBig(mtu));
            }
        }
    }

    /// Release packets held for a neighbour now known.
    fn learned(&mut self, cx: &NodeCx<'_>, k: usize, ip: IpAddr, mac: [u8; 6]) {
        let (held, evicted) = self.ifaces[k].neigh.learn(ip, mac, cx.now_tsc);
        self.neigh_gen += 1;
        cx.count(C::Learned, 1);
        cx.count(C::Evicted, u64::from(evicted));
        let (src, edge) = (self.ifaces[k].mac, self.ifaces[k].edge);
        for mut m in held {
            if let Ok(d) = m.data_mut() {
                d[0..6].copy_from_slice(&mac);
                d[6..12].copy_from_slice(&src);
                cx.count(C::Forwarded, 1);
                self.out.push_back((m, edge));
            }
        }
    }

    fn arp(&mut self, cx: &NodeCx<'_>, mut m: Mbuf, k: usize) {
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
        a[18..28].copy_from_slice(&[sha[0], sha[1], sha[2], sha[3], sha[4], sha[5], spa.octets()[0], spa.octets()[1], spa.octets()[2], spa.octets()[3]]);
        a[8..14].copy_from_slice(&mac);
        a[14..18].copy_from_slice(&tpa.octets());
        cx.count(C::ArpReplies, 1);
        self.out.push_back((m, edge));
    }

    /// A packet to one of our addresses (or groups), received on interface `k`.
    fn local(&mut self, cx: &NodeCx<'_>, mut m: Mbuf, k: usize) {
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

    /// Learn from a neighbour solicitation (its source) or advertisement (its target)
    /// whose ICMPv6 message starts at `at` of frame `d`. Returns the message's target,
    /// or `None` (counted `malformed`) when the message fails RFC 4861's checks: hop
    /// limit 255, code 0, a whole message with a valid checksum, a unicast target,
    /// well-formed options.
    fn nd(&mut self, cx: &NodeCx<'_>, d: &[u8], k: usize, ty: u8, at: usize) -> Option<Ipv6Addr> {
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

    /// Ask for neighbour `ip` on interface `k`: an ARP request or a neighbour solicitation.
    fn solicit(&mut self, cx: &NodeCx<'_>, k: usize, ip: IpAddr) {
        let f = &self.ifaces[k];
        let frame = match ip {
            IpAddr::V4(t) => {
                let Some((src, _)) = f.v4.first() else { return };
                let mut b = vec![0u8; 60];
                b[0..6].copy_from_slice(&[0xff; 6]);
                b[6..12].copy_from_slice(&f.mac);
                b[12..14].copy_from_slice(&[0x08, 0x06]);
                b[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
                b[22..28].copy_from_slice(&f.mac);
                b[28..32].copy_from_slice(&src.octets());
                b[38..42].copy_from_slice(&t.octets());
                b
            }
            IpAddr::V6(t) => {
                let src = f.v6.first().map_or(f.ll6, |a| a.0);
                let o = t.octets();
                let group = Ipv6Addr::from([0xff02, 0, 0, 0, 0, 1, 0xff00 | u16::from(o[13]), u16::from_be_bytes([o[14], o[15]])]);
                let mut b = vec![0u8; ETH + 40 + 32];
                b[0..6].copy_from_slice(&[0x33, 0x33, 0xff, o[13], o[14], o[15]]);
                b[6..12].copy_from_slice(&f.mac);
                b[12..14].copy_from_slice(&[0x86, 0xdd]);
                ipv6_header(&mut b[ETH..ETH + 40], 32, 255, &src, &group);
                let c = ETH + 40;
                b[c] = 135;
                b[c + 8..c + 24].copy_from_slice(&o);
                b[c + 24] = 1;
                b[c + 25] = 1;
                b[c + 26..c + 32].copy_from_slice(&f.mac);
                fill_icmp6_checksum(&mut b, c..c + 32, &src, &group);
                b
            }
        };
        match Mbuf::from_slice(&self.pool, &frame) {
            Ok(m) => {
                cx.count(if ip.is_ipv4() { C::ArpRequests } else { C::NsSent }, 1);
                self.out.push_back((m, f.edge));
            }
            Err(_) => cx.count(C::AllocFailed, 1),
        }
    }

    /// Answer `orig` (received on `from`) with an ICMP error, routed back to its source.
    fn icmp_error(&mut self, cx: &NodeCx<'_>, orig: &Mbuf, from: Option<usize>, kind: Icmp) {
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

    /// Forward packet `i` (passed [`Router::quick4`]: IPv4 to `dst`, `len` for the MTU
    /// check) by the FIB leaf `leaf` when it is a plain forward whose next hop is
    /// resolved: rewritten in place, its next edge set. `false`: it takes every check.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn forward(&mut self, pkts: &mut Burst, next: &mut [u16; MAX_BURST], i: usize, leaf: u32, dst: u32, len: u16, now: u64) -> bool {
        let t = leaf.wrapping_sub(1) as usize;
        match self.adj.get(t) {
            // (Not a plain forward: MTU 0.)
            Some(a) if u32::from(len) <= a.mtu => {
                let edge = a.edge;
                // The cached MACs written straight from the adjacency (no copy).
                let looked_up;
                let macs = if a.gen == self.neigh_gen && now < a.until {
                    Some(&self.adj[t].macs)
                } else {
                    looked_up = self.adj_lookup(t, dst, now);
                    looked_up.as_ref()
                };
                match (macs, pkts.data_mut(i).and_then(|d| d.first_chunk_mut())) {
                    (Some(macs), Some(f)) => {
                        forward4(f, macs);
                        next[i] = edge;
                        true
                    }
                    _ => false,
                }
            }
            _ => false,
        }
    }

    /// The burst's fast path: plain IPv4 unicast to a resolved next hop is checked
    /// (its FIB root slot read, the next ply prefetched), then looked up and rewritten
    /// in place; every other packet takes every check ([`Router::general`]). Packets
    /// off both get `SLOW` and their reason in `w.slow`. Gives the packets forwarded
    /// and whether any packet took every check (what those dropped is in `w.drops`).
    fn fast(&mut self, w: &mut Work, pkts: &mut Burst, next: &mut [u16; MAX_BURST], now: u64) -> (u64, bool) {
        let n = pkts.len();
        let (mut nf, mut ng) = (0, 0);
        // The FIB root slots of every destination asked for at once (their loads
        // overlap; a slot read one packet at a time waits for the cache each time).
        for i in 0..n {
            if let Some(d) = pkts.data(i).get(ETH + 16..ETH + 20) {
                self.fib4.prefetch_root4(u32::from_be_bytes([d[0], d[1], d[2], d[3]]));
            }
        }
        // A burst mostly comes from one port: its interface looked up once (its MAC).
        let mut port = (u16::MAX, None);
        let mut forwarded = 0;
        for i in 0..n {
            let h = pkts.header(i);
            if h.port != port.0 {
                port = (h.port, self.iface_of(h).map(|k| self.ifaces[k].mac48).filter(|_| !self.all_checks));
            }
            let quick = match port.1 {
                Some(mac48) => self.quick4(h, pkts.data(i), mac48),
                None => None,
            };
            // (`nf`, `ng` <= `i` < MAX_BURST: the masks only spare bounds checks.)
            let sent = match quick {
                Some((dst, len)) => {
                    // A root slot that is a leaf (prefetched above) is forwarded now;
                    // one that leads to a ply waits for the ply's line (prefetched
                    // here) in the second pass.
                    let e = self.fib4.root4(dst);
                    if Lpm::is_leaf(e) {
                        self.forward(pkts, next, i, e, dst, len, now)
                    } else {
                        let j = nf & (MAX_BURST - 1);
                        w.a4[j] = dst;
                        w.len4[j] = len;
                        w.idx4[j] = i as u8;
                        w.leaf[j] = e;
                        nf += 1;
                        continue;
                    }
                }
                None => false,
            };
            if sent {
                forwarded += 1;
            } else {
                w.general[ng & (MAX_BURST - 1)] = i as u8;
                ng += 1;
            }
        }
        for j in 0..nf {
            let i = usize::from(w.idx4[j]);
            let dst = w.a4[j];
            let leaf = self.fib4.leaf4(dst, w.leaf[j]);
            if self.forward(pkts, next, i, leaf, dst, w.len4[j], now) {
                forwarded += 1;
            } else {
                w.general[ng & (MAX_BURST - 1)] = i as u8;
                ng += 1;
            }
        }
        if ng == 0 {
            return (forwarded, false);
        }
        w.drops = [0; C::COUNT];
        for g in 0..ng {
            let i = usize::from(w.general[g]);
            let (edge, out) = self.general(pkts, i, now, &mut w.slow, &mut w.drops);
            next[i] = edge;
            forwarded += out;
        }
        (forwarded, true)
    }

    /// Every check for packet `i`: its next edge (or `SLOW`, `DROP`) and whether it
    /// was forwarded.
    fn general(
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

    fn retry(&mut self, cx: &NodeCx<'_>) {
        let now = cx.now_tsc;
        let mut again = std::mem::take(&mut self.scratch);
        for k in 0..self.ifaces.len() {
            if !self.ifaces[k].neigh.resolving() {
                continue;
            }
            again.clear();
            let dropped = self.ifaces[k].neigh.retry(now, &mut again);
            cx.count(C::Unresolved, dropped);
            for ip in again.drain(..) {
                self.solicit(cx, k, ip);
            }
        }
        self.scratch = again;
    }
}

impl Node for Router {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, next: &mut [u16; MAX_BURST]) -> Dispatch {
        let now = cx.now_tsc;
        let Some(mut w) = self.work.take() else { return Dispatch::Consumed };
        let (forwarded, general) = self.fast(&mut w, pkts, next, now);
        cx.count(C::Forwarded, forwarded);
        if general {
            for (c, &n) in C::ALL.iter().zip(&w.drops) {
                if n > 0 {
                    cx.count(*c, n);
                }
            }
        }
        if next[..pkts.len()].contains(&SLOW) {
            let decided = *next;
            let mut keep = Burst::default();
            for (i, m) in pkts.drain().enumerate() {
                match decided[i] {
                    DROP => {}
                    SLOW => {
                        let from = self.iface_of(m.header());
                        self.slow(cx, m, w.slow[i], from, false);
                    }
                    e => {
                        next[keep.len()] = e;
                        let _ = keep.push(m);
                    }
                }
            }
            keep.move_to(pkts);
        }
        self.work = Some(w);
        if self.ifaces.iter().any(|f| f.neigh.resolving()) {
            self.retry(cx);
        }
        while let Some((m, e)) = self.out.pop_front() {
            let at = pkts.len();
            match pkts.push(m) {
                Ok(()) => next[at] = e,
                Err(m) => {
                    self.out.push_front((m, e));
                    break;
                }
            }
        }
        Dispatch::Each
    }

    fn counters(&self) -> &'static [CounterSpec] {
        RouterCounter::SPECS
    }
}

impl Iface {
    fn new(f: &IfaceCfg, edge: u16, mac: [u8; 6], neigh: NeighConfig, key: [u8; 16]) -> Self {
        Iface {
            edge,
            mac,
            mac48: u64::from_le_bytes([mac[0], mac[1], mac[2], mac[3], mac[4], mac[5], 0, 0]),
            v4: f.v4.clone(),
            v6: f.v6.clone(),
            ll6: link_local(mac),
            mtu: f.mtu,
            neigh: Neighbours::new(neigh, key),
            echo: IcmpEcho::new(Vec::new(), Vec::new(), mac),
        }
    }

    fn on_subnet4(&self, a: Ipv4Addr) -> bool {
        self.v4.iter().any(|(s, l)| lpm::Prefix::v4(*s, *l).covers(key4(a)))
    }

    fn on_subnet6(&self, a: Ipv6Addr) -> bool {
        self.v6.iter().any(|(s, l)| lpm::Prefix::v6(*s, *l).covers(u128::from(a)))
    }

    fn owns6(&self, a: Ipv6Addr) -> bool {
        a == self.ll6 || self.v6.iter().any(|(s, _)| *s == a)
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

/// ICMP errors the router sends.
#[derive(Clone, Copy)]
enum Icmp {
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

/// May an ICMP error answer this frame? Never about an ICMP error, a fragment
/// other than the first, or a packet sent to a group (RFC 1812 4.3.2.7, RFC 4443 2.4).
/// An IPv6 packet's extension headers are walked to find whether it is an ICMPv6
/// error; a chain that cannot be walked gets no answer either.
fn error_allowed(d: &[u8], v6: bool) -> bool {
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

/// (type, offset) of an ICMPv6 message right after the IPv6 header (the shape of
/// every ND message and of what we answer).
fn icmp6_of(d: &[u8]) -> Option<(u8, usize)> {
    let at = ETH + 40;
    (d.get(ETH + 6) == Some(&58)).then_some(())?;
    d.get(at + 3)?;
    Some((d[at], at))
}

fn ipv6_header(ip: &mut [u8], plen: u16, hop: u8, src: &Ipv6Addr, dst: &Ipv6Addr) {
    ip[0..4].copy_from_slice(&[0x60, 0, 0, 0]);
    ip[4..6].copy_from_slice(&plen.to_be_bytes());
    ip[6] = 58;
    ip[7] = hop;
    ip[8..24].copy_from_slice(&src.octets());
    ip[24..40].copy_from_slice(&dst.octets());
}

/// Forward a plain IPv4 packet in place ([`Router::quick4`] passed it: TTL above 1):
/// the Ethernet addresses `macs` (destination, source), TTL minus one with the
/// header checksum updated as [`rewrite`] does. RFC 1624's HC' = ~(~HC + ~m + m')
/// with m the (TTL, protocol) word and m' = m - 0x0100: ~m + m' is 0xfeff whatever
/// m, and one fold suffices (~HC + 0xfeff < 0x1ffff).
#[inline(always)]
fn forward4(f: &mut [u8; ETH + 20], macs: &[u8; 12]) {
    f[..12].copy_from_slice(macs);
    f[ETH + 8] -= 1;
    // (In little-endian words, byte-swapped as one's complement sums allow: 0xfffe.)
    let s = u32::from(!u16::from_le_bytes([f[ETH + 10], f[ETH + 11]])) + 0xfffe;
    let s = (s & 0xffff) + (s >> 16);
    f[ETH + 10..ETH + 12].copy_from_slice(&(!(s as u16)).to_le_bytes());
}

/// Forward in place: TTL / hop limit minus one (the IPv4 checksum updated, RFC 1624)
/// when `decrement`, and the Ethernet addresses `(dst, src)` when known.
#[inline(always)]
fn rewrite(d: &mut [u8], decrement: bool, macs: Option<([u8; 6], [u8; 6])>) {
    if decrement {
        if d[12] == 0x86 {
            d[ETH + 7] = d[ETH + 7].wrapping_sub(1);
        } else {
            // TTL is the high byte of the word at offset 8 (TTL, protocol): RFC 1624's
            // HC' = ~(~HC + ~m + m'), two folds of three 16-bit words.
            let old = u16::from_be_bytes([d[ETH + 8], d[ETH + 9]]);
            let new = old.wrapping_sub(0x0100);
            d[ETH + 8] = (new >> 8) as u8;
            let hc = u16::from_be_bytes([d[ETH + 10], d[ETH + 11]]);
            let s = u32::from(!hc) + u32::from(!old) + u32::from(new);
            let s = (s & 0xffff) + (s >> 16);
            let s = (s & 0xffff) + (s >> 16);
            d[ETH + 10..ETH + 12].copy_from_slice(&(!(s as u16)).to_be_bytes());
        }
    }
    if let Some((dst, src)) = macs {
        d[0..6].copy_from_slice(&dst);
        d[6..12].copy_from_slice(&src);
    }
}

/// ICMPv6 neighbour solicitation and advertisement (RFC 4861).
const NS: u8 = 135;
const NA: u8 = 136;
const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
const ALL_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);

fn is_link_local(a: Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

/// fe80::/64 with the modified EUI-64 of `mac`.
fn link_local(mac: [u8; 6]) -> Ipv6Addr {
    let mut o = [0u8; 16];
    o[0] = 0xfe;
    o[1] = 0x80;
    o[8..16].copy_from_slice(&[mac[0] ^ 2, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]]);
    Ipv6Addr::from(o)
}

/// Never a source: "this network" (0/8), loopback, multicast, class E and broadcast,
/// link-local.
#[inline(always)]
/// The bitmap of [`Router::martian16`]: one bit per /16, set where [`martian4_src`]
/// holds (whole /8s and one /16, set as ranges); made once, shared by every router.
fn martian16() -> &'static [u64; 1 << 10] {
    static MAP: std::sync::OnceLock<Box<[u64; 1 << 10]>> = std::sync::OnceLock::new();
    MAP.get_or_init(martian16_map)
}

fn martian16_map() -> Box<[u64; 1 << 10]> {
    let mut m = Box::new([0u64; 1 << 10]);
    let mut set = |from: u32, to: u32| (from..to).for_each(|x| m[(x >> 6) as usize] |= 1 << (x & 63));
    set(0, 1 << 8); // 0/8
    set(127 << 8, 128 << 8); // 127/8
    set(224 << 8, 1 << 16); // 224/3: multicast and reserved
    set(0xa9fe, 0xa9ff); // 169.254/16
    m
}

fn martian4_src(a: u32) -> bool {
    let o = a >> 24;
    o == 0 || o == 127 || o >= 224 || a >> 16 == 0xa9fe
}

/// Sum an IPv4 header's 16-bit words (any length); `true` when the checksum holds.
#[inline(always)]
fn header_checksum_ok(h: &[u8]) -> bool {
    let mut sum = 0u64;
    let mut words = h.chunks_exact(4);
    for w in &mut words {
        sum += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    for w in words.remainder().chunks(2) {
        sum += u64::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
    }
    fold64(sum) == 0xffff
}

/// A sum of 32-bit words folded to 16 bits (one's complement, end-around carries).
#[inline(always)]
fn fold64(sum: u64) -> u64 {
    let s = (sum & 0xffff_ffff) + (sum >> 32);
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    (s & 0xffff) + (s >> 16)
}

/// `ip_router`.
pub const KIND: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "ip_router",
        doc: "an IPv4/IPv6 router between the ports its edges lead to: longest-prefix match, TTL, neighbour resolution (ARP, ND), ICMP errors",
        params: &[
            param("interfaces", ParamKind::Records(INTERFACE), true, None, "the router's interfaces: a port and its addresses each"),
            param("routes", ParamKind::Records(ROUTE), false, Some("[]"), "static routes (connected subnets are added from the interfaces)"),
            param("routes_file", ParamKind::Path, false, None, "more routes, one per line: PREFIX via ADDRESS [port NAME] | PREFIX port NAME | PREFIX unreachable|prohibit|blackhole"),
            param(
                "static_neighbours",
                ParamKind::Records(NEIGHBOUR),
                false,
                Some("[]"),
                "permanent neighbour entries (as ip neigh add ... permanent): never resolved, aged or evicted",
            ),
            MEMPOOL,
            param("icmp_rate", ParamKind::Uint { min: 0, max: 1_000_000 }, false, Some("1000"), "ICMP errors per second (0: none)"),
            param("icmp_burst", ParamKind::Uint { min: 1, max: 100_000 }, false, Some("50"), "ICMP errors sent back to back"),
            param("icmp_peer_rate", ParamKind::Uint { min: 0, max: 1_000_000 }, false, Some("10"), "ICMP errors per second to one destination (the source of the packets that caused them), so that one host cannot spend the whole budget (0: none)"),
            param("icmp_peer_burst", ParamKind::Uint { min: 1, max: 100_000 }, false, Some("10"), "ICMP errors sent back to back to one destination"),
            param("hold", ParamKind::Uint { min: 1, max: 256 }, false, Some("8"), "packets held per neighbour being resolved"),
            param("retry", ParamKind::Duration, false, Some("1s"), "time between requests for one neighbour"),
            param("max_tries", ParamKind::Uint { min: 1, max: 100 }, false, Some("3"), "requests before giving up on a neighbour"),
            param("reachable", ParamKind::Duration, false, Some("60s"), "a neighbour entry is used this long after it was confirmed, then resolved again"),
            param("neighbours", ParamKind::Uint { min: 1, max: 1 << 20 }, false, Some("4096"), "neighbour entries per interface (the least recently confirmed of a sample is evicted)"),
            param("resolving", ParamKind::Uint { min: 1, max: 1 << 16 }, false, Some("256"), "neighbours being resolved at once per interface (beyond it, the one asked about longest ago gives up its place: a scan cannot lock new neighbours out)"),
            param("max_plies", ParamKind::Uint { min: 1, max: 1 << 22 }, false, Some("262144"), "bound on the FIB's 1 KiB plies (a build that needs more is refused)"),
        ],
        nexts: Nexts::PortsAnd(&["local"]),
        source: true,
        sink: false,
        queue: QueueUse::None,
        ends_loops: false,
        check: Some(|p| router_cfg(p).map(drop)),
    },
    build: |b, env| {
        let p = b.params();
        let cfg = router_cfg(p.raw()).map_err(|(_, reason)| NodeError::Param { param: "interfaces", reason })?;
        let edge = |name: &str| b.connected.iter().position(|c| *c == name).map(|i| i as u16);
        let mut ports = Vec::new();
        for f in &cfg.ifaces {
            let e = edge(&f.port).ok_or_else(|| NodeError::Param {
                param: "interfaces",
                reason: format!("interface `{}` has no next edge `{}` (connect it to the port's transmit node)", f.port, f.port),
            })?;
            ports.push((env.port_id(&f.port)?, e, env.port_mac(&f.port)?));
        }
        if let Some(stray) = b.connected.iter().find(|c| **c != "local" && !cfg.ifaces.iter().any(|f| f.port == **c)) {
            return Err(NodeError::Param {
                param: "interfaces",
                reason: format!("next edge `{stray}` is not one of the router's interfaces"),
            });
        }
        let hz = env.tsc_hz();
        let tune = Tuning {
            neigh: NeighConfig {
                max_entries: p.int("neighbours")?,
                max_pending: p.int("resolving")?,
                hold: p.int("hold")?,
                retry_tsc: p.tsc("retry", hz)?,
                max_tries: p.int("max_tries")?,
                reachable_tsc: p.tsc("reachable", hz)?,
            },
            icmp_rate: p.uint("icmp_rate")?,
            icmp_burst: p.uint("icmp_burst")?,
            icmp_peer_rate: p.uint("icmp_peer_rate")?,
            icmp_peer_burst: p.uint("icmp_peer_burst")?,
            tsc_hz: hz,
            max_plies: p.int("max_plies")?,
            hash_key: {
                let mut k = [0u8; 16];
                crate::hash::random_secret(&mut k)?;
                k
            },
        };
        let first_port = cfg.ifaces.first().map(|f| f.port.as_str());
        let pool = env.mempool(p.raw().mempool("mempool"), first_port)?;
        let r = Router::new(&cfg, &ports, edge("local"), tune, pool)
            .map_err(|reason| NodeError::Param { param: "max_plies", reason })?;
        Ok(Box::new(r))
    },
};

/// Route types, for the YAML reference.
pub const ROUTE_TYPES: &[&str] = <RouteType as ironpath_config::Choice>::NAMES;
