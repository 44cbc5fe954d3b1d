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
//!   link-local either way; an address of the receiving interface as source),
//!   multicast, frames sent to
//!   another MAC, IPv4 packets larger than the outgoing MTU without DF (this router
//!   does not fragment).
//!
//! Everything runs on the node's lcore, no lock; the node is polled so neighbour
//! retries happen without traffic.
//!
//! Files: this one holds the node (its state, its construction, one burst's flow)
//! and its kind; `fast` the fast path; `checks` every check; `control` what leaves
//! both (the dispatch, neighbour resolution), with `arp`, `nd`, `icmp` (errors) and
//! `local` (delivery, echo); [`lpm`] the FIB, [`neigh`] the neighbour tables,
//! [`icmp_budget`] the ICMP rate limits, [`config`] the parameters.

mod arp;
mod checks;
pub mod config;
mod control;
mod ctl;
mod fast;
pub(crate) mod icmp;
pub mod icmp_budget;
pub mod kernel;
mod local;
pub mod lpm;
mod nd;
pub mod neigh;
#[cfg(test)]
mod tests;

use crate::icmp::IcmpEcho;
use crate::kind::{NodeError, NodeKind, MEMPOOL};
use config::{router_cfg, IfaceCfg, RouteType, Target, INTERFACE, NEIGHBOUR, ROUTE};
use fast::{Adj, Work};
use icmp_budget::IcmpBudget;
use ironpath_config::{Nexts, NodeSpec, ParamKind, ParamSpec};
use ironpath_eal::abi::Mbuf as RawMbuf;
use ironpath_eal::{Burst, Mbuf, Mempool, MAX_BURST};
use ironpath_graph::{Controller, CounterSpec, Dispatch, Msg, Node, NodeCx, SleepPlan, DROP};
use lpm::{key4, Lpm};
use nd::link_local;
use neigh::{NeighConfig, Neighbours};
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

/// A router interface.
pub struct Iface {
    edge: u16,
    mac: [u8; 6],
    /// The MAC in the low 48 bits of a little-endian word (a frame's first eight
    /// bytes are compared with it in one go).
    mac48: u64,
    v4: Vec<(Ipv4Addr, u8)>,
    /// A bit per address of `v4` (hashed): most sources are told apart from them
    /// without a scan.
    bloom4: u64,
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
        Self::build_with(cfg, max_plies, None)
    }

    /// [`Fib::build`] with an IPv4 root of `v4_root_bits` (16 or 24) whatever the
    /// routes and the kernel's huge pages; `None`: as [`Lpm::build4`] chooses.
    fn build_with(cfg: &config::RouterCfg, max_plies: usize, v4_root_bits: Option<u32>) -> Result<Fib, String> {
        Self::of_routes(&cfg.routes4, &cfg.routes6, max_plies, v4_root_bits)
    }

    /// The tables of these routes (a prefix given twice takes the later target).
    fn of_routes(
        routes4: &[(lpm::Prefix, Target)],
        routes6: &[(lpm::Prefix, Target)],
        max_plies: usize,
        v4_root_bits: Option<u32>,
    ) -> Result<Fib, String> {
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
        let (r4, r6) = (index(routes4), index(routes6));
        let v4 = match v4_root_bits {
            Some(bits) => Lpm::build_with(&r4, max_plies, bits)?,
            None => Lpm::build4(&r4, max_plies)?,
        };
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
    /// One bit per /16: are its sources martian ([`checks::martian4_src`] depends on
    /// the top 16 bits only)?
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
    /// The control-plane half, until the graph takes it ([`Node::controller`]).
    ctl: Option<ctl::RouterCtl>,
}

/// A port that is no interface (in `Router::by_port`).
const NO_IFACE: u8 = u8::MAX;
/// The next edge of a packet for the control plane (its reason in `Work::slow`).
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
        let mut r = Self::with_fib(cfg, fib, ports, local_edge, tune, pool);
        let links: Vec<(u32, u16)> = r.ifaces.iter().map(|f| (f.mtu as u32, f.edge)).collect();
        let tables = ctl::Tables::new(cfg, links, tune.max_plies)?;
        r.ctl = Some(ctl::RouterCtl {
            tables: std::sync::Arc::new(std::sync::Mutex::new(tables)),
            follow: None,
            following: None,
        });
        Ok(r)
    }

    /// [`Router::new`] with DIR-24-8's 24-bit IPv4 root whatever the routes and the
    /// kernel's huge pages (what [`Lpm::build4`] chooses by).
    #[cfg(test)]
    fn with_wide_root(
        cfg: &config::RouterCfg,
        ports: &[(u16, u16, [u8; 6])],
        local_edge: Option<u16>,
        tune: Tuning,
        pool: Mempool,
    ) -> Result<Self, String> {
        let fib = Fib::build_with(cfg, tune.max_plies, Some(24))?;
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
                // At most MAX_PERMANENT per interface: the configuration was checked.
                f.neigh.add_static(ip, mac);
            }
        }
        for f in &mut ifaces {
            let mut v6 = local6.clone();
            v6.push(f.ll6);
            f.echo = IcmpEcho::new(local4.clone(), v6, f.mac).router();
        }
        let Fib { v4: fib4, v6: fib6, targets } = fib;
        let links: Vec<(u32, u16)> = ifaces.iter().map(|f| (f.mtu as u32, f.edge)).collect();
        let adj = targets.iter().map(|t| Adj::new(t, &links)).collect();
        Self {
            ifaces,
            by_port,
            fib4,
            fib6,
            targets,
            local_edge,
            martian16: fast::martian16(),
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
            work: Some(Work::new()),
            ctl: None,
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
        for adj in &mut self.adj {
            adj.forget();
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

    fn controller(&mut self) -> Option<Box<dyn Controller>> {
        self.ctl.take().map(|c| Box::new(c) as Box<dyn Controller>)
    }

    fn sleep(&mut self, cx: &mut NodeCx<'_>, plan: &mut SleepPlan) {
        // Requests and errors waiting to go; the next request for a neighbour
        // being resolved.
        plan.quiet();
        if !self.out.is_empty() {
            plan.until(cx.now_tsc);
        }
        for f in &self.ifaces {
            if let Some(t) = f.neigh.next_retry() {
                plan.until(t);
            }
        }
    }

    fn apply(&mut self, cx: &mut NodeCx<'_>, msg: Msg) -> Msg {
        let msg = match msg.downcast::<ctl::FibSwap>() {
            Ok(mut s) => {
                std::mem::swap(&mut self.fib4, &mut s.v4);
                std::mem::swap(&mut self.fib6, &mut s.v6);
                std::mem::swap(&mut self.targets, &mut s.targets);
                std::mem::swap(&mut self.adj, &mut s.adj);
                return s;
            }
            Err(m) => m,
        };
        match msg.downcast::<ctl::NeighChange>() {
            Ok(c) => Box::new(self.neigh_change(cx, *c)),
            Err(m) => m,
        }
    }
}

impl Router {
    /// `ip neighbor add|del`, on the lcore.
    fn neigh_change(&mut self, cx: &NodeCx<'_>, c: ctl::NeighChange) -> Result<(), String> {
        match c {
            ctl::NeighChange::Add { iface, ip, mac } => {
                if !self.ifaces.get_mut(iface).ok_or("no such interface")?.neigh.add_static(ip, mac) {
                    return Err(format!(
                        "the interface holds {} permanent neighbour entries, the most it takes",
                        neigh::MAX_PERMANENT
                    ));
                }
                self.learned(cx, iface, ip, mac);
                Ok(())
            }
            ctl::NeighChange::Del { iface, ip } => {
                let found = self.ifaces.get_mut(iface).ok_or("no such interface")?.neigh.remove(ip);
                self.neigh_gen += 1;
                if found {
                    Ok(())
                } else {
                    Err(format!("no neighbour entry for {ip} on that port"))
                }
            }
        }
    }
}

impl Iface {
    fn new(f: &IfaceCfg, edge: u16, mac: [u8; 6], neigh: NeighConfig, key: [u8; 16]) -> Self {
        Iface {
            edge,
            mac,
            mac48: u64::from_le_bytes([mac[0], mac[1], mac[2], mac[3], mac[4], mac[5], 0, 0]),
            v4: f.v4.clone(),
            bloom4: f.v4.iter().fold(0u64, |b, (a, _)| b | 1 << (u32::from(*a).wrapping_mul(0x9e37_79b1) >> 26)),
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

/// `ip_router`.
pub const KIND: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "ip_router",
        doc: "an IPv4/IPv6 router between the ports its edges lead to: longest-prefix match, TTL, neighbour resolution (ARP, ND), ICMP errors",
        params: &[
            ParamSpec::new("interfaces", ParamKind::Records(INTERFACE)).required().doc("the router's interfaces: a port and its addresses each"),
            ParamSpec::new("routes", ParamKind::Records(ROUTE)).default("[]").doc("static routes (connected subnets are added from the interfaces)"),
            ParamSpec::new("routes_file", ParamKind::Path).doc("more routes, one per line: PREFIX via ADDRESS [port NAME] | PREFIX port NAME | PREFIX unreachable|prohibit|blackhole"),
            ParamSpec::new("static_neighbours", ParamKind::Records(NEIGHBOUR)).default("[]").doc("permanent neighbour entries (as ip neigh add ... permanent): never resolved, aged or evicted"),
            MEMPOOL,
            ParamSpec::new("icmp_rate", ParamKind::Uint { min: 0, max: 1_000_000 }).default("1000").doc("ICMP errors per second (0: none)"),
            ParamSpec::new("icmp_burst", ParamKind::Uint { min: 1, max: 100_000 }).default("50").doc("ICMP errors sent back to back"),
            ParamSpec::new("icmp_peer_rate", ParamKind::Uint { min: 0, max: 1_000_000 }).default("10").doc("ICMP errors per second to one destination (the source of the packets that caused them), so that one host cannot spend the whole budget (0: none)"),
            ParamSpec::new("icmp_peer_burst", ParamKind::Uint { min: 1, max: 100_000 }).default("10").doc("ICMP errors sent back to back to one destination"),
            ParamSpec::new("hold", ParamKind::Uint { min: 1, max: 256 }).default("8").doc("packets held per neighbour being resolved"),
            ParamSpec::new("retry", ParamKind::Duration).default("1s").doc("time between requests for one neighbour"),
            ParamSpec::new("max_tries", ParamKind::Uint { min: 1, max: 100 }).default("3").doc("requests before giving up on a neighbour"),
            ParamSpec::new("reachable", ParamKind::Duration).default("60s").doc("a neighbour entry is used this long after it was confirmed, then resolved again"),
            ParamSpec::new("neighbours", ParamKind::Uint { min: 1, max: 1 << 20 }).default("4096").doc("neighbour entries per interface (the least recently confirmed of a sample is evicted)"),
            ParamSpec::new("resolving", ParamKind::Uint { min: 1, max: 1 << 16 }).default("256").doc("neighbours being resolved at once per interface (beyond it, the one asked about longest ago gives up its place: a scan cannot lock new neighbours out)"),
            ParamSpec::new("max_plies", ParamKind::Uint { min: 1, max: 1 << 22 }).default("262144").doc("bound on the FIB's 1 KiB plies (a build that needs more is refused)"),
            ParamSpec::new("follow_table", ParamKind::Uint { min: 0, max: 0xffff_ffff }).default("0").doc("follow this Linux routing table (254: main) over rtnetlink, as VPP's linux-cp: its routes (via a gateway on one of the router's subnets, on-link through a device named as a port, blackhole, unreachable, prohibit) and resolved neighbours join the FIB as they change (0: none)"),
            ParamSpec::new("follow_netns", ParamKind::Str).doc("the network namespace of `follow_table`: a name under /var/run/netns or a path (default or empty: ironpath's own)"),
        ],
        nexts: Nexts::PortsAnd(&["local"]),
        source: true,
        check: Some(|p| router_cfg(p).map(drop)),
        ..NodeSpec::DEFAULT
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
        let mut r = Router::new(&cfg, &ports, edge("local"), tune, pool)
            .map_err(|reason| NodeError::Param { param: "max_plies", reason })?;
        let table: u32 = p.int("follow_table")?;
        if table != 0 {
            if let Some(c) = r.ctl.as_mut() {
                let netns = p.raw().str("follow_netns").filter(|n| !n.is_empty()).map(str::to_owned);
                c.follow = Some(kernel::KernelCfg { table, netns });
            }
        }
        Ok(Box::new(r))
    },
};

/// Route types, for the YAML reference.
pub const ROUTE_TYPES: &[&str] = <RouteType as ironpath_config::Choice>::NAMES;
