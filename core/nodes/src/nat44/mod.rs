//! `nat44`: source NAT (masquerade) of inside hosts behind one or more outside IPv4
//! addresses, with static port forwards, as Linux's nftables `masquerade` and `dnat`
//! with conntrack, or VPP's `nat44-ed`.
//!
//! The node sits in front of an `ip_router` and tells the two sides apart by the port
//! a packet arrived on. From the `outside` port, a TCP or UDP packet to one of the
//! outside `addresses` whose port is mapped, or an ICMP echo reply whose id is, has
//! its destination translated back to the inside endpoint; other packets pass
//! unchanged (to the router's own address, routed traffic). From any other port, a
//! packet to an `inside` network passes unchanged; any other TCP, UDP or ICMP echo
//! request from an inside network has its source translated to an outside address
//! and port (or query id), creating the mapping and session on its first packet.
//! Everything else from the inside toward the outside (sources in no inside network,
//! other protocols and ICMP messages, fragments) is dropped and counted: no
//! untranslated inside address leaks out, and no host takes sessions under made-up
//! addresses.
//!
//! Behaviour (RFC 4787, 5382, 5508): endpoint-independent mapping (an inside endpoint
//! keeps its outside endpoint whatever it talks to), the inside port kept where it is
//! free, paired address pooling (a host's sessions all use one outside address);
//! `filtering` endpoint-independent, address-dependent or address-and-port-dependent
//! (the default: only endpoints the inside sent to answer, as Linux does); TCP state
//! tracked per session (established after both SYNs and the opener's ACK,
//! transitory while opening, after FIN both ways and after a RST); ICMP errors
//! translated both ways, their quoted packet too (RFC 5508), only for an existing
//! session, to the remote of that session, and with a checksum that verified;
//! hairpinning (an inside host reaching another through an outside address and
//! port, both translations applied, and an error about such a packet back to its
//! sender); TCP's MSS options lowered in SYNs (`mss_clamp`). Checksums are updated
//! incrementally; a checksum the kernel left partial stays partial. A session past
//! its timeout is over for the packet that finds it, even before the sweep (at most
//! 256 sessions a burst) reaches it.
//!
//! A packet whose TTL would expire at the router (1 or 0) is not translated, either
//! way: the router's time exceeded then reaches the sender quoting what it sent
//! (traceroute through the NAT). Other ICMP errors the router itself makes about a
//! translated packet go to the address it was translated to, as from a separate NAT
//! box in front of a router.
//!
//! Bounds: `max_sessions` in all (when full, the oldest idle session is reclaimed),
//! `max_sessions_per_host` for each inside host (a session counts against its inside
//! host whichever side opened it; at the bound the host opens nothing more until one
//! of its sessions ends: a flood from one host cannot take the others' sessions or
//! ports); idle timeouts per class (defaults: RFC 4787's 5 minutes for UDP, RFC
//! 5382's 2 h 4 min for established TCP and 4 minutes for transitory TCP, RFC 5508's
//! 60 s for ICMP queries).

#[cfg(test)]
mod attack_tests;
mod packet;
mod table;
#[cfg(test)]
mod tests;

pub use table::{Class, Endpoint, Filtering, FilteringName, Limits, Refused, Table};

use crate::hash::random_secret;
use crate::kind::{NodeKind, Values};
use crate::router::config::parse_cidr;
use crate::NodeError;
use ironpath_config::{Choice, Nexts, NodeSpec, ParamKind, ParamSpec};
use ironpath_eal::abi;
use ironpath_eal::{Burst, Mbuf, Mempool, MAX_BURST};
use ironpath_graph::{Controller, CounterSpec, Dispatch, Msg, Node, NodeCx, Remote, DROP};
use ironpath_wire::ethernet::{l3_offset, EtherType};
use packet::{Ip, Sum, L4};
use std::net::{IpAddr, Ipv4Addr};
use table::{Events, ICMP, TCP, UDP};

ironpath_graph::counters! {
    /// What `nat44` counts.
    pub enum NatCounter {
        Out("out", "packets from the inside translated (source)"),
        In("in", "packets from the outside translated back (destination)"),
        Hairpin("hairpin", "packets from the inside to an outside address and port, translated both ways"),
        IcmpErrors("icmp_errors", "ICMP errors translated with the packet they quote"),
        Passed("passed", "packets passed unchanged (not IPv4, to an inside network, to the outside addresses unmapped, routed)"),
        Created("created", "sessions created"),
        Mapped("mapped", "mappings created (an inside endpoint given an outside one)"),
        Expired("expired", "sessions ended by their idle timer"),
        Reclaimed("reclaimed", "sessions ended early: the table held max_sessions, the oldest idle one made room"),
        TableFull("table_full", "packets dropped: the table held max_sessions, all in use this instant"),
        NotInside("not_inside", "packets from the inside whose source is in no inside network, dropped (a spoofed source would take sessions as another host)"),
        HostLimit("host_limit", "packets dropped: their inside host holds max_sessions_per_host"),
        PortsExhausted("ports_exhausted", "packets dropped: no free port on the host's outside address"),
        Filtered("filtered", "packets from the outside dropped by the filtering (a mapping, but not to this remote)"),
        NotSyn("not_syn", "TCP segments from the outside that would open a session without SYN, dropped"),
        Unsupported("unsupported", "packets from the inside that cannot be translated (other protocols, ICMP other than echo and errors), dropped"),
        Fragment("fragment", "IPv4 fragments that would need translation, dropped (not reassembled)"),
        Malformed("malformed", "IPv4 packets cut short or whose lengths disagree, dropped"),
        NoSession("no_session", "ICMP errors quoting no packet of a session, dropped"),
        TtlExpiring("ttl_expiring", "packets left untranslated: their TTL expires at the router"),
        MssClamped("mss_clamped", "SYNs whose MSS option was lowered to mss_clamp"),
        NoMbuf("no_mbuf", "packets dropped: no buffer for a copy of a shared packet"),
    }
}

/// Next edge: every packet that goes on.
pub const OUT: u16 = 0;
/// Outside addresses at most.
pub const MAX_ADDRESSES: usize = 64;
/// Sessions expired per burst at most (the rest on the next bursts).
const EXPIRE_BUDGET: usize = 256;

/// A static forward, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forward {
    /// TCP or UDP.
    pub proto: u8,
    /// The outside endpoint.
    pub outside: Endpoint,
    /// The inside endpoint.
    pub inside: Endpoint,
}

/// The node's settings, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NatConfig {
    /// Outside addresses.
    pub addresses: Vec<Ipv4Addr>,
    /// Inside networks (address, prefix length).
    pub inside: Vec<(u32, u8)>,
    /// The filtering.
    pub filtering: Filtering,
    /// Static forwards.
    pub forwards: Vec<Forward>,
    /// Sessions at most.
    pub max_sessions: usize,
    /// Sessions per inside host at most.
    pub per_host: u32,
    /// Idle timeouts per class, µs.
    pub timeout_us: [u64; 4],
    /// The largest MSS a SYN may carry (0: not clamped).
    pub mss_clamp: u16,
}

ironpath_config::choice! {
    /// A forward's protocol.
    pub enum ForwardProto {
        /// TCP.
        Tcp = "tcp",
        /// UDP.
        Udp = "udp",
    }
}

/// Fields of a `forwards` record.
pub const FORWARD: &[ParamSpec] = &[
    ParamSpec::new("proto", ParamKind::Enum(ForwardProto::NAMES)).required().doc("tcp or udp"),
    ParamSpec::new("port", ParamKind::Uint { min: 1, max: 65535 }).required().doc("the outside port"),
    ParamSpec::new("to", ParamKind::Ipv4).required().doc("the inside host"),
    ParamSpec::new("to_port", ParamKind::Uint { min: 0, max: 65535 })
        .default("0")
        .doc("its port (0: the same as `port`)"),
    ParamSpec::new("address", ParamKind::Ipv4).doc("the outside address (one of `addresses`; default: the first)"),
];

impl NatConfig {
    /// The settings from the validated parameters.
    pub fn from_params(p: Values<'_>) -> Result<Self, NodeError> {
        let refuse = |param, reason: String| Err(NodeError::Param { param, reason });
        let mut addresses = Vec::new();
        for a in p.ip_list("addresses")? {
            match a {
                IpAddr::V4(a) if a.is_multicast() || a.is_broadcast() || a.is_unspecified() || a.is_loopback() => {
                    return refuse("addresses", format!("{a} is not a unicast address"))
                }
                IpAddr::V4(a) if !addresses.contains(a) => addresses.push(*a),
                IpAddr::V4(_) => {}
                IpAddr::V6(a) => return refuse("addresses", format!("{a}: nat44 translates to IPv4 addresses")),
            }
        }
        if addresses.len() > MAX_ADDRESSES {
            return refuse("addresses", format!("{} addresses; at most {MAX_ADDRESSES}", addresses.len()));
        }
        let mut inside = Vec::new();
        for w in p.str("inside")?.split(|c: char| c == ',' || c.is_whitespace()).filter(|w| !w.is_empty()) {
            match parse_cidr(w, true) {
                Ok((IpAddr::V4(a), len)) => inside.push((u32::from(a), len)),
                Ok(_) => return refuse("inside", format!("`{w}`: inside networks are IPv4")),
                Err(e) => return refuse("inside", e),
            }
        }
        if inside.is_empty() {
            return refuse("inside", "give the inside networks (198.18.0.0/24, space- or comma-separated)".into());
        }
        for a in &addresses {
            if inside.iter().any(|&(n, l)| in_prefix(u32::from(*a), n, l)) {
                return refuse("addresses", format!("{a} is in an inside network"));
            }
        }
        let mut forwards: Vec<Forward> = Vec::new();
        for r in p.records("forwards")? {
            let r = Values(r);
            let proto = match r.choice::<ForwardProto>("proto")? {
                ForwardProto::Tcp => TCP,
                ForwardProto::Udp => UDP,
            };
            let port: u16 = r.int("port")?;
            let to = r.ipv4("to")?;
            let to_port = match r.int::<u16>("to_port")? {
                0 => port,
                x => x,
            };
            let addr = match r.raw().ipv4("address") {
                Some(a) if !addresses.contains(&a) => {
                    return refuse("forwards", format!("{a} is not one of `addresses`"))
                }
                Some(a) => a,
                None => addresses[0],
            };
            if !inside.iter().any(|&(n, l)| in_prefix(u32::from(to), n, l)) {
                return refuse("forwards", format!("{to} is not in an inside network"));
            }
            let f = Forward {
                proto,
                outside: Endpoint::new(u32::from(addr), port),
                inside: Endpoint::new(u32::from(to), to_port),
            };
            if forwards.iter().any(|g| g.proto == proto && (g.outside == f.outside || g.inside == f.inside)) {
                return refuse("forwards", format!("two forwards of {addr}:{port} or to {to}:{to_port}"));
            }
            forwards.push(f);
        }
        let max_sessions: usize = p.int("max_sessions")?;
        let per_host: u32 = p.int("max_sessions_per_host")?;
        if per_host as usize > max_sessions {
            return refuse("max_sessions_per_host", format!("{per_host} is more than max_sessions ({max_sessions})"));
        }
        let t = |name| -> Result<u64, NodeError> {
            let us = p.duration_us(name)?;
            if us < 1_000_000 {
                return Err(NodeError::Param { param: name, reason: "at least 1s".into() });
            }
            Ok(us)
        };
        Ok(NatConfig {
            addresses,
            inside,
            filtering: p.choice::<FilteringName>("filtering")?.into(),
            forwards,
            max_sessions,
            per_host,
            timeout_us: [t("udp_timeout")?, t("icmp_timeout")?, t("tcp_transitory")?, t("tcp_established")?],
            mss_clamp: p.int("mss_clamp")?,
        })
    }
}

/// Whether `a` is in `net`/`len`.
fn in_prefix(a: u32, net: u32, len: u8) -> bool {
    len == 0 || (a ^ net) >> (32 - u32::from(len)) == 0
}

/// The counts of one call, by counter.
type Counts = [u64; NatCounter::COUNT];

fn count(n: &mut Counts, c: NatCounter) {
    n[usize::from(c)] += 1;
}

/// What becomes of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Keep,
    Drop,
}

/// The node.
pub struct Nat44 {
    cfg: NatConfig,
    /// The outside port's id.
    outside: u16,
    pool: Mempool,
    table: Table,
    work: Vec<Mbuf>,
    ctl: Option<NatCtl>,
}

impl Nat44 {
    /// A NAT as `cfg` says whose outside port has id `outside`, copies of shared
    /// packets from `pool`, a TSC of `hz`, its tables keyed from `key`.
    pub fn new(cfg: NatConfig, outside: u16, pool: Mempool, hz: u64, key: [u8; 16]) -> Result<Self, NodeError> {
        // In 128 bits: 7,440 s in µs times a 3 GHz TSC is past 2^64.
        let tick = |us: u64| (u128::from(us) * u128::from(hz) / 1_000_000).min(u128::from(u64::MAX)) as u64;
        let limits =
            Limits { max_sessions: cfg.max_sessions, per_host: cfg.per_host, timeout: cfg.timeout_us.map(tick) };
        let mut table = Table::new(cfg.addresses.iter().map(|a| u32::from(*a)).collect(), limits, cfg.filtering, key);
        for f in &cfg.forwards {
            table.add_forward(f.proto, f.outside, f.inside).map_err(NodeError::Refused)?;
        }
        let ctl = NatCtl { hz };
        Ok(Nat44 { cfg, outside, pool, table, work: Vec::with_capacity(MAX_BURST), ctl: Some(ctl) })
    }

    /// The translation table.
    pub fn table(&self) -> &Table {
        &self.table
    }

    fn is_inside_net(&self, a: u32) -> bool {
        self.cfg.inside.iter().any(|&(n, l)| in_prefix(a, n, l))
    }

    /// One packet (its first segment `d`, writable).
    fn handle(
        &mut self,
        d: &mut [u8],
        ol: u64,
        pkt_len: usize,
        from_outside: bool,
        now: u64,
        n: &mut Counts,
    ) -> Verdict {
        let Ok((EtherType::IPV4, off)) = l3_offset(d) else {
            count(n, NatCounter::Passed);
            return Verdict::Keep;
        };
        let Some(ip) = packet::ip(d, off, pkt_len) else {
            count(n, NatCounter::Malformed);
            return Verdict::Drop;
        };
        let sum = if ol & (abi::RX_L4_CKSUM_NONE | abi::TX_TCP_CKSUM | abi::TX_UDP_CKSUM) != 0 {
            Sum::Partial
        } else {
            Sum::Full
        };
        if from_outside {
            self.inbound(d, &ip, sum, now, n)
        } else {
            self.outbound(d, &ip, sum, now, n)
        }
    }

    /// A packet from the outside.
    fn inbound(&mut self, d: &mut [u8], ip: &Ip, sum: Sum, now: u64, n: &mut Counts) -> Verdict {
        if !self.table.is_outside(ip.dst) {
            count(n, NatCounter::Passed);
            return Verdict::Keep;
        }
        if ip.fragment {
            count(n, NatCounter::Fragment);
            return Verdict::Drop;
        }
        if ip.ttl <= 1 {
            // The router answers time exceeded to the sender, quoting the packet as
            // it was sent (not an inside address).
            count(n, NatCounter::TtlExpiring);
            return Verdict::Keep;
        }
        let Some(l4) = packet::l4(d, ip) else {
            count(n, NatCounter::Malformed);
            return Verdict::Drop;
        };
        let mut ev = Events::default();
        let (proto, outside, remote, flags) = match l4 {
            L4::Ports { sport, dport, flags } => {
                (ip.proto, Endpoint::new(ip.dst, dport), Endpoint::new(ip.src, sport), flags)
            }
            L4::Echo { ty: 0, id } => (ICMP, Endpoint::new(ip.dst, id), Endpoint::new(ip.src, 0), 0),
            L4::Error => return self.error_inbound(d, ip, n),
            // Echo requests and anything else to our addresses: the router's.
            _ => {
                count(n, NatCounter::Passed);
                return Verdict::Keep;
            }
        };
        let r = self.table.inbound(proto, outside, remote, flags, now, &mut ev);
        self.events(ev, n);
        match r {
            Ok(inside) => {
                if proto == TCP && flags & table::flags::SYN != 0 {
                    self.clamp(d, ip, sum, n);
                }
                packet::rewrite(d, ip, None, Some(inside), sum);
                count(n, NatCounter::In);
                Verdict::Keep
            }
            Err(Refused::NoMapping) => {
                count(n, NatCounter::Passed);
                Verdict::Keep
            }
            Err(e) => self.refused(e, n),
        }
    }

    fn refused(&self, e: Refused, n: &mut Counts) -> Verdict {
        count(
            n,
            match e {
                Refused::NoMapping => NatCounter::Passed,
                Refused::Filtered => NatCounter::Filtered,
                Refused::HostLimit => NatCounter::HostLimit,
                Refused::PortsExhausted => NatCounter::PortsExhausted,
                Refused::NotSyn => NatCounter::NotSyn,
                Refused::TableFull => NatCounter::TableFull,
            },
        );
        Verdict::Drop
    }

    fn events(&self, ev: Events, n: &mut Counts) {
        n[usize::from(NatCounter::Created)] += ev.created;
        n[usize::from(NatCounter::Mapped)] += ev.mapped;
        n[usize::from(NatCounter::Reclaimed)] += ev.reclaimed;
        n[usize::from(NatCounter::Expired)] += ev.expired;
    }

    fn clamp(&self, d: &mut [u8], ip: &Ip, sum: Sum, n: &mut Counts) {
        if self.cfg.mss_clamp > 0 && packet::clamp_mss(d, ip, self.cfg.mss_clamp, sum) {
            count(n, NatCounter::MssClamped);
        }
    }

    /// A packet from the inside.
    fn outbound(&mut self, d: &mut [u8], ip: &Ip, sum: Sum, now: u64, n: &mut Counts) -> Verdict {
        if self.is_inside_net(ip.dst) {
            count(n, NatCounter::Passed);
            return Verdict::Keep;
        }
        if !self.is_inside_net(ip.src) {
            count(n, NatCounter::NotInside);
            return Verdict::Drop;
        }
        let to_us = self.table.is_outside(ip.dst);
        if ip.fragment {
            if to_us {
                count(n, NatCounter::Passed);
                return Verdict::Keep;
            }
            count(n, NatCounter::Fragment);
            return Verdict::Drop;
        }
        let Some(l4) = packet::l4(d, ip) else {
            count(n, NatCounter::Malformed);
            return Verdict::Drop;
        };
        // To an outside address: hairpinned if it is mapped, else the router's own.
        let hairpin = match l4 {
            L4::Ports { dport, .. } if to_us => {
                let m = self.table.by_outside(ip.proto, Endpoint::new(ip.dst, dport));
                if m.is_none() {
                    count(n, NatCounter::Passed);
                    return Verdict::Keep;
                }
                true
            }
            // An error about a hairpinned packet (sent to the outside address it
            // came from).
            L4::Error if to_us => return self.error_outbound(d, ip, n),
            _ if to_us => {
                count(n, NatCounter::Passed);
                return Verdict::Keep;
            }
            _ => false,
        };
        if ip.ttl <= 1 && !hairpin {
            // The router answers time exceeded to the sender as it is.
            count(n, NatCounter::TtlExpiring);
            return Verdict::Keep;
        }
        let mut ev = Events::default();
        let (proto, inside, remote, flags) = match l4 {
            L4::Ports { sport, dport, flags } => {
                (ip.proto, Endpoint::new(ip.src, sport), Endpoint::new(ip.dst, dport), flags)
            }
            L4::Echo { ty: 8, id } => (ICMP, Endpoint::new(ip.src, id), Endpoint::new(ip.dst, 0), 0),
            L4::Error => return self.error_outbound(d, ip, n),
            _ => {
                count(n, NatCounter::Unsupported);
                return Verdict::Drop;
            }
        };
        let r = self.table.outbound(proto, inside, remote, flags, now, &mut ev);
        let outside = match r {
            Ok(o) => o,
            Err(e) => {
                self.events(ev, n);
                return self.refused(e, n);
            }
        };
        let mut dst = None;
        if hairpin {
            // Back in through the mapping of the destination, as from `outside`.
            match self.table.inbound(proto, remote, outside, flags, now, &mut ev) {
                Ok(i) => dst = Some(i),
                Err(e) => {
                    self.events(ev, n);
                    return self.refused(if e == Refused::NoMapping { Refused::Filtered } else { e }, n);
                }
            }
        }
        self.events(ev, n);
        if proto == TCP && flags & table::flags::SYN != 0 {
            self.clamp(d, ip, sum, n);
        }
        packet::rewrite(d, ip, Some(outside), dst, sum);
        count(n, if hairpin { NatCounter::Hairpin } else { NatCounter::Out });
        Verdict::Keep
    }

    /// An ICMP error from the outside to an outside address: about a packet of ours
    /// sent out (its source one of our endpoints) when a session has it.
    fn error_inbound(&mut self, d: &mut [u8], ip: &Ip, n: &mut Counts) -> Verdict {
        let Some(q) = packet::quoted(d, ip) else {
            count(n, NatCounter::NoSession);
            return Verdict::Drop;
        };
        let Some(m) = self.table.by_outside(q.proto, q.src).copied() else {
            // Not about a translated packet: the router's own.
            count(n, NatCounter::Passed);
            return Verdict::Keep;
        };
        if !packet::icmp_sum_ok(d, ip) {
            // Its checksum is computed again: a damaged one must not leave as sound.
            count(n, NatCounter::Malformed);
            return Verdict::Drop;
        }
        if q.src.addr != ip.dst || !self.table.has_session(q.proto, m.inside, remote_of(&q, q.dst)) {
            count(n, NatCounter::NoSession);
            return Verdict::Drop;
        }
        packet::rewrite_error(d, ip, &q, None, Some(m.inside.addr), Some(m.inside), None);
        count(n, NatCounter::IcmpErrors);
        Verdict::Keep
    }

    /// An ICMP error from the inside: about a packet that came in through a mapping
    /// (the quoted destination is the inside endpoint), to the remote it came from;
    /// when that remote is an outside address, from another inside host (hairpinned),
    /// both translations are undone.
    fn error_outbound(&mut self, d: &mut [u8], ip: &Ip, n: &mut Counts) -> Verdict {
        let Some(q) = packet::quoted(d, ip) else {
            count(n, NatCounter::NoSession);
            return Verdict::Drop;
        };
        if !packet::icmp_sum_ok(d, ip) {
            count(n, NatCounter::Malformed);
            return Verdict::Drop;
        }
        let t = &self.table;
        let target = t
            .by_inside(q.proto, q.dst)
            .copied()
            .filter(|m| ip.dst == q.src.addr && t.has_session(q.proto, m.inside, remote_of(&q, q.src)));
        let Some(target) = target else {
            count(n, NatCounter::NoSession);
            return Verdict::Drop;
        };
        if t.is_outside(ip.dst) {
            let sender = t
                .by_outside(q.proto, q.src)
                .copied()
                .filter(|s| t.has_session(q.proto, s.inside, remote_of(&q, target.outside)));
            let Some(sender) = sender else {
                count(n, NatCounter::NoSession);
                return Verdict::Drop;
            };
            packet::rewrite_error(
                d,
                ip,
                &q,
                Some(target.outside.addr),
                Some(sender.inside.addr),
                Some(sender.inside),
                Some(target.outside),
            );
        } else {
            packet::rewrite_error(d, ip, &q, Some(target.outside.addr), None, None, Some(target.outside));
        }
        count(n, NatCounter::IcmpErrors);
        Verdict::Keep
    }
}

/// The remote endpoint `e` of a quoted packet as sessions key it (an ICMP query's
/// remote has no id).
fn remote_of(q: &packet::Quoted, e: Endpoint) -> Endpoint {
    if q.proto == ICMP {
        Endpoint::new(e.addr, 0)
    } else {
        e
    }
}

/// A change of the node's tables, made by its lcore between two bursts.
enum NatChange {
    AddForward(Forward),
    DelForward(u8, Endpoint),
    Flush,
    /// Sessions from the `usize`-th on (a page), at a time.
    Show(usize, u64),
}

/// What the lcore answers a [`NatChange`].
enum NatAnswer {
    Done(Result<String, String>),
    Shown(String, Vec<table::SessionView>),
}

/// Sessions one [`NatChange::Show`] copies out at most.
const SHOW_PAGE: usize = 256;
/// Sessions `show nat44` lists at most.
const SHOW_MAX: usize = 4096;

fn proto_name(p: u8) -> &'static str {
    match p {
        TCP => "tcp",
        UDP => "udp",
        _ => "icmp",
    }
}

impl Nat44 {
    fn change(&mut self, c: NatChange) -> NatAnswer {
        NatAnswer::Done(match c {
            NatChange::AddForward(f) => {
                if !self.is_inside_net(f.inside.addr) {
                    Err(format!("{}: not in an inside network", Ipv4Addr::from(f.inside.addr)))
                } else {
                    self.table
                        .add_forward(f.proto, f.outside, f.inside)
                        .map(|()| format!("forward {} {} -> {} added", proto_name(f.proto), f.outside, f.inside))
                }
            }
            NatChange::DelForward(p, o) => self.table.del_forward(p, o),
            NatChange::Flush => Ok(format!("{} sessions flushed", self.table.flush())),
            NatChange::Show(from, now) => {
                let t = &self.table;
                let c = t.per_class();
                let mut s = format!(
                    "addresses: {}\ninside: {}\nfiltering: {}\nsessions: {} of {} ({} udp, {} icmp, {} tcp-transitory, {} tcp-established), {} mappings, {} hosts (at most {} sessions each)\n",
                    self.cfg.addresses.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", "),
                    self.cfg.inside.iter().map(|(a, l)| format!("{}/{l}", Ipv4Addr::from(*a))).collect::<Vec<_>>().join(", "),
                    match self.cfg.filtering {
                        Filtering::EndpointIndependent => "endpoint-independent",
                        Filtering::AddressDependent => "address-dependent",
                        Filtering::AddressPortDependent => "address-port-dependent",
                    },
                    t.sessions(),
                    t.limits().max_sessions,
                    c[0],
                    c[1],
                    c[2],
                    c[3],
                    t.mappings(),
                    t.hosts(),
                    t.limits().per_host,
                );
                for (p, o, i) in t.forwards() {
                    s.push_str(&format!("forward {} {o} -> {i}\n", proto_name(p)));
                }
                return NatAnswer::Shown(s, t.view(from, SHOW_PAGE, now));
            }
        })
    }
}

/// The commands of a `nat44` node.
const NAT_GRAMMAR: &[(&str, &str)] = &[
    (
        "nat44 forward add tcp|udp <OUTSIDE-IPV4>:<PORT> <INSIDE-IPV4>:<PORT>",
        "forward an outside port to an inside host",
    ),
    ("nat44 forward del tcp|udp <OUTSIDE-IPV4>:<PORT>", "remove a forward and its sessions"),
    ("nat44 session flush", "end every session (static forwards stay)"),
    ("show nat44", "addresses, bounds, forwards and sessions (protocol, inside, outside, remote, class, seconds idle)"),
];

/// The control-plane half of a `nat44` node.
struct NatCtl {
    hz: u64,
}

fn endpoint(w: &str) -> Result<Endpoint, String> {
    let (a, p) = w.rsplit_once(':').ok_or_else(|| format!("`{w}`: expected IPV4:PORT"))?;
    let a: Ipv4Addr = a.parse().map_err(|_| format!("`{a}` is not an IPv4 address"))?;
    let p: u16 = p.parse().ok().filter(|p| *p > 0).ok_or_else(|| format!("`{p}`: a port is 1..=65535"))?;
    Ok(Endpoint::new(u32::from(a), p))
}

fn proto_word(w: &str) -> Result<u8, String> {
    match w {
        "tcp" => Ok(TCP),
        "udp" => Ok(UDP),
        _ => Err(format!("`{w}`: tcp or udp")),
    }
}

impl Controller for NatCtl {
    fn grammar(&self) -> &'static [(&'static str, &'static str)] {
        NAT_GRAMMAR
    }

    fn accepts(&self, words: &[&str]) -> bool {
        matches!(words, ["nat44", ..] | ["show", "nat44", ..])
    }

    fn command(&mut self, words: &[&str], remote: &Remote) -> Result<String, String> {
        let ask = |c: NatChange| -> Result<NatAnswer, String> {
            match remote.call(Box::new(c))?.downcast::<NatAnswer>() {
                Ok(a) => Ok(*a),
                Err(_) => Err("the node did not take the change (it panicked): nothing changed".into()),
            }
        };
        let change = match words {
            ["nat44", "forward", "add", p, o, i] => {
                NatChange::AddForward(Forward { proto: proto_word(p)?, outside: endpoint(o)?, inside: endpoint(i)? })
            }
            ["nat44", "forward", "del" | "delete", p, o] => NatChange::DelForward(proto_word(p)?, endpoint(o)?),
            ["nat44", "session", "flush"] => NatChange::Flush,
            ["show", "nat44"] => {
                let now = ironpath_eal::tsc::rdtsc();
                let (mut head, mut all) = (String::new(), Vec::new());
                while all.len() < SHOW_MAX {
                    let NatAnswer::Shown(h, page) = ask(NatChange::Show(all.len(), now))? else { break };
                    let more = page.len() == SHOW_PAGE;
                    head = h;
                    all.extend(page);
                    if !more {
                        break;
                    }
                }
                let mut s = head;
                if !all.is_empty() {
                    s.push_str(&format!(
                        "{:<5} {:<21} {:<21} {:<21} {:<16} {}\n",
                        "proto", "inside", "outside", "remote", "state", "idle (s)"
                    ));
                }
                for v in &all {
                    s.push_str(&format!(
                        "{:<5} {:<21} {:<21} {:<21} {:<16} {:.1}\n",
                        proto_name(v.proto),
                        v.inside.to_string(),
                        v.outside.to_string(),
                        v.remote.to_string(),
                        v.class.name(),
                        v.idle as f64 / self.hz.max(1) as f64
                    ));
                }
                return Ok(s);
            }
            _ => return Err(format!("usage: {}", NAT_GRAMMAR.iter().map(|g| g.0).collect::<Vec<_>>().join(" | "))),
        };
        match ask(change)? {
            NatAnswer::Done(r) => r,
            NatAnswer::Shown(..) => Err("the node answered another change".into()),
        }
    }
}

impl Node for Nat44 {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, next: &mut [u16; MAX_BURST]) -> Dispatch {
        let now = cx.now_tsc;
        let mut n: Counts = [0; NatCounter::COUNT];
        n[usize::from(NatCounter::Expired)] += self.table.expire(now, EXPIRE_BUDGET) as u64;
        let d = if (0..pkts.len()).all(|i| pkts.data_mut(i).is_some()) {
            // Every packet ours to write: rewritten where it is.
            let mut all = true;
            for (i, nx) in next.iter_mut().enumerate().take(pkts.len()) {
                let h = pkts.header(i);
                let (ol, len, from_outside) = (h.ol_flags, h.pkt_len as usize, h.port == self.outside);
                let v = match pkts.data_mut(i) {
                    Some(d) => self.handle(d, ol, len, from_outside, now, &mut n),
                    None => Verdict::Drop,
                };
                *nx = if v == Verdict::Keep { OUT } else { DROP };
                all &= v == Verdict::Keep;
            }
            if all {
                Dispatch::All(OUT)
            } else {
                Dispatch::Each
            }
        } else {
            self.copying(pkts, now, &mut n)
        };
        for c in NatCounter::ALL {
            let k = n[usize::from(c)];
            if k > 0 {
                cx.count(c, k);
            }
        }
        d
    }

    fn counters(&self) -> &'static [CounterSpec] {
        NatCounter::SPECS
    }

    fn controller(&mut self) -> Option<Box<dyn Controller>> {
        self.ctl.take().map(|c| Box::new(c) as Box<dyn Controller>)
    }

    fn apply(&mut self, cx: &mut NodeCx<'_>, msg: Msg) -> Msg {
        match msg.downcast::<NatChange>() {
            Ok(c) => {
                let k = self.table.expire(cx.now_tsc, usize::MAX) as u64;
                if k > 0 {
                    cx.count(NatCounter::Expired, k);
                }
                Box::new(self.change(*c))
            }
            Err(m) => m,
        }
    }
}

impl Nat44 {
    /// A burst holding shared packets: each of those copied first (a copy of its own
    /// to rewrite), what is dropped taken out.
    fn copying(&mut self, pkts: &mut Burst, now: u64, n: &mut Counts) -> Dispatch {
        let mut work = std::mem::take(&mut self.work);
        pkts.take_into(&mut work);
        for mut m in work.drain(..) {
            if !m.is_writable() {
                m = match m.deep_copy(&self.pool) {
                    Ok(c) => c,
                    Err(_) => {
                        count(n, NatCounter::NoMbuf);
                        continue;
                    }
                };
            }
            let (ol, len, port) = {
                let h = m.header();
                (h.ol_flags, h.pkt_len as usize, h.port)
            };
            let v = match m.data_mut() {
                Ok(d) => self.handle(d, ol, len, port == self.outside, now, n),
                Err(_) => Verdict::Drop,
            };
            if v == Verdict::Keep {
                // The burst held every one of these packets: there is room.
                let _ = pkts.push(m);
            }
        }
        self.work = work;
        Dispatch::All(OUT)
    }
}

/// `nat44`.
pub const KIND: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "nat44",
        doc: "source NAT of inside hosts behind outside IPv4 addresses (endpoint-independent mapping, TCP/UDP/ICMP, ICMP errors, hairpinning, static forwards), bounded per host and in all; in front of an ip_router",
        params: &[
            ParamSpec::new("outside", ParamKind::Port).required().doc("the outside port: packets received on it are translated back; packets from every other port are the inside's"),
            ParamSpec::new("addresses", ParamKind::IpList).required().doc("the outside IPv4 addresses inside hosts are translated to (at most 64; each host keeps one)"),
            ParamSpec::new("inside", ParamKind::Str).required().doc("the inside networks, space- or comma-separated (198.18.70.0/24): packets from the inside to them are not translated"),
            ParamSpec::new("filtering", ParamKind::Enum(FilteringName::NAMES)).default("address-port-dependent").doc("who may send in through a mapping: any remote (endpoint-independent), remotes at an address the inside sent to (address-dependent), or only the endpoints it sent to (address-port-dependent)"),
            ParamSpec::new("forwards", ParamKind::Records(FORWARD)).default("[]").doc("static forwards (DNAT): an outside port to an inside host and port"),
            ParamSpec::new("max_sessions", ParamKind::Uint { min: 1, max: 1 << 22 }).default("65536").doc("sessions at most (when full, the oldest idle one is reclaimed)"),
            ParamSpec::new("max_sessions_per_host", ParamKind::Uint { min: 1, max: 1 << 22 }).default("4096").doc("sessions of one inside host at most (beyond, its new flows are dropped)"),
            ParamSpec::new("udp_timeout", ParamKind::Duration).default("300s").doc("a UDP session ends after this long idle (RFC 4787: at least 2 minutes)"),
            ParamSpec::new("icmp_timeout", ParamKind::Duration).default("60s").doc("an ICMP query session ends after this long idle (RFC 5508: at least 60 s)"),
            ParamSpec::new("tcp_transitory", ParamKind::Duration).default("240s").doc("a TCP session opening, closing or reset ends after this long idle (RFC 5382: at least 4 minutes)"),
            ParamSpec::new("tcp_established", ParamKind::Duration).default("7440s").doc("an established TCP session ends after this long idle (RFC 5382: at least 2 h 4 min)"),
            ParamSpec::new("mss_clamp", ParamKind::Uint { min: 0, max: 65535 }).default("0").doc("lower the MSS option of TCP SYNs to this (0: left alone)"),
            crate::kind::MEMPOOL,
        ],
        nexts: Nexts::Fixed(&["out"]),
        check: Some(|p| crate::kind::refused_at(p, NatConfig::from_params(Values(p)))),
        ..NodeSpec::DEFAULT
    },
    build: |b, env| {
        let p = b.params();
        let cfg = NatConfig::from_params(p)?;
        let port = p.port("outside")?;
        let mut key = [0u8; 16];
        random_secret(&mut key)?;
        let pool = env.mempool(p.raw().mempool("mempool"), Some(port))?;
        Ok(Box::new(Nat44::new(cfg, env.port_id(port)?, pool, env.tsc_hz(), key)?))
    },
};
