//! The `ip_router` settings from the pipeline file: interfaces with their
//! addresses, and routes (YAML records and a routes file), checked and resolved
//! into the FIBs' entries. Every error names where it is written.

use super::lpm::Prefix;
use ironpath_config::{Choice, Loc, ParamKind, ParamSpec, Params};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

ironpath_config::choice! {
    /// What a route does with the packets it matches.
    pub enum RouteType {
        /// Forward to `via` or, without one, to the destination on the link of `port`.
        Forward = "forward",
        /// Drop and answer ICMP destination unreachable (host unreachable / no route).
        Unreachable = "unreachable",
        /// Drop and answer ICMP administratively prohibited.
        Prohibit = "prohibit",
        /// Drop silently.
        Blackhole = "blackhole",
    }
}

/// Fields of an `interfaces` record.
pub const INTERFACE: &[ParamSpec] = &[
    ParamSpec::new("port", ParamKind::Port).required().doc("the port (one of the router's next edges)"),
    ParamSpec::new("addresses", ParamKind::Str)
        .required()
        .doc("its addresses with prefix lengths, space- or comma-separated: 198.18.1.1/24 fd00:1::1/64"),
    ParamSpec::new("mtu", ParamKind::Uint { min: 68, max: 65535 }).default("1500").doc("largest IP packet sent on it"),
];

/// Fields of a `routes` record.
pub const ROUTE: &[ParamSpec] = &[
    ParamSpec::new("prefix", ParamKind::Str)
        .required()
        .doc("the destination: 198.18.3.0/24, fd00:3::/64, 0.0.0.0/0, ::/0"),
    ParamSpec::new("via", ParamKind::Str).doc("the next hop's address (on one of the interfaces' subnets)"),
    ParamSpec::new("port", ParamKind::Port).doc("the interface (for a route without `via`: destinations on its link)"),
    ParamSpec::new("type", ParamKind::Enum(RouteType::NAMES))
        .default("forward")
        .doc("forward, unreachable, prohibit or blackhole"),
];

/// Fields of a `static_neighbours` record.
pub const NEIGHBOUR: &[ParamSpec] = &[
    ParamSpec::new("port", ParamKind::Port).required().doc("the interface"),
    ParamSpec::new("address", ParamKind::Str)
        .required()
        .doc("the neighbour's IPv4 or IPv6 address (on the interface's subnet)"),
    ParamSpec::new("mac", ParamKind::Mac).required().doc("its MAC address"),
];

/// One interface.
#[derive(Debug, Clone)]
pub struct IfaceCfg {
    /// Port name.
    pub port: String,
    /// IPv4 addresses and prefix lengths.
    pub v4: Vec<(Ipv4Addr, u8)>,
    /// IPv6 addresses and prefix lengths.
    pub v6: Vec<(Ipv6Addr, u8)>,
    /// MTU.
    pub mtu: usize,
}

/// Where a FIB entry sends packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Out of interface `iface`, to `via` or (None) to the destination itself.
    Forward {
        /// Interface index.
        iface: usize,
        /// The gateway.
        via: Option<IpAddr>,
    },
    /// One of our addresses.
    Local,
    /// Dropped with ICMP unreachable.
    Unreachable,
    /// Dropped with ICMP administratively prohibited.
    Prohibit,
    /// Dropped silently.
    Blackhole,
    /// A multicast group (not routed).
    Multicast,
    /// Never routed (loopback, "this network", class E, link-local).
    Martian,
}

/// The whole setting, resolved.
#[derive(Debug, Clone)]
pub struct RouterCfg {
    /// Interfaces in file order.
    pub ifaces: Vec<IfaceCfg>,
    /// FIB entries (connected, local and configured), IPv4 and IPv6.
    pub routes4: Vec<(Prefix, Target)>,
    /// IPv6 entries.
    pub routes6: Vec<(Prefix, Target)>,
    /// Permanent neighbours: interface index, address, MAC.
    pub statics: Vec<(usize, IpAddr, [u8; 6])>,
}

type Error = (Option<Loc>, String);

/// `a.b.c.d/len` or `x::y/len`; `strict` refuses host bits past the length.
pub fn parse_cidr(s: &str, strict: bool) -> Result<(IpAddr, u8), String> {
    let (a, len) = s.split_once('/').ok_or_else(|| format!("`{s}`: expected ADDRESS/LENGTH"))?;
    let a: IpAddr = a.trim().parse().map_err(|_| format!("`{s}`: `{a}` is not an IPv4 or IPv6 address"))?;
    let max = if a.is_ipv4() { 32 } else { 128 };
    let len: u8 =
        len.trim().parse().ok().filter(|l| *l <= max).ok_or_else(|| format!("`{s}`: the length must be 0..={max}"))?;
    if strict && prefix_of(a, len).bits != prefix_of(a, max).bits {
        return Err(format!(
            "`{s}`: bits set past the length (the prefix is {}/{len})",
            addr_of(prefix_of(a, len), a.is_ipv4())
        ));
    }
    Ok((a, len))
}

/// The LPM prefix of an address.
pub fn prefix_of(a: IpAddr, len: u8) -> Prefix {
    match a {
        IpAddr::V4(v) => Prefix::v4(v, len),
        IpAddr::V6(v) => Prefix::v6(v, len),
    }
}

pub(super) fn addr_of(p: Prefix, v4: bool) -> IpAddr {
    if v4 {
        IpAddr::V4(Ipv4Addr::from((p.bits >> 96) as u32))
    } else {
        IpAddr::V6(Ipv6Addr::from(p.bits))
    }
}

/// A route as written, before its interface is found.
pub(super) struct RouteLine {
    pub(super) prefix: (IpAddr, u8),
    pub(super) via: Option<IpAddr>,
    pub(super) port: Option<String>,
    pub(super) kind: RouteType,
    pub(super) at: String,
    pub(super) loc: Option<Loc>,
}

/// One line of a routes file: `PREFIX via ADDRESS [port NAME]`, `PREFIX port NAME`,
/// or `PREFIX unreachable|prohibit|blackhole`.
pub(super) fn route_line(line: &str) -> Result<(String, Option<String>, Option<String>, RouteType), String> {
    let mut w = line.split_whitespace();
    let prefix = w.next().ok_or("empty line")?.to_owned();
    let (mut via, mut port, mut kind) = (None, None, RouteType::Forward);
    while let Some(word) = w.next() {
        match word {
            "via" => via = Some(w.next().ok_or("`via` needs an address")?.to_owned()),
            "port" | "dev" => port = Some(w.next().ok_or("`port` needs a port name")?.to_owned()),
            "unreachable" => kind = RouteType::Unreachable,
            "prohibit" => kind = RouteType::Prohibit,
            "blackhole" => kind = RouteType::Blackhole,
            other => {
                return Err(format!(
                    "unknown word `{other}`; accepted: via ADDRESS, port NAME, unreachable, prohibit, blackhole"
                ))
            }
        }
    }
    Ok((prefix, via, port, kind))
}

/// Read and resolve the router's parameters (what `check` and the constructor share).
pub fn router_cfg(p: &Params) -> Result<RouterCfg, Error> {
    let mut ifaces = Vec::new();
    for (i, r) in p.records("interfaces").unwrap_or(&[]).iter().enumerate() {
        let port = r.port("port").unwrap_or_default().to_owned();
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        let text = r.str("addresses").unwrap_or_default();
        for a in text.split(|c: char| c == ',' || c.is_whitespace()).filter(|a| !a.is_empty()) {
            match parse_cidr(a, false).map_err(|e| (r.loc("addresses"), format!("interface {i} (`{port}`): {e}")))? {
                (IpAddr::V4(a), l) => v4.push((a, l)),
                (IpAddr::V6(a), l) => v6.push((a, l)),
            }
        }
        if v4.is_empty() && v6.is_empty() {
            return Err((r.loc("addresses"), format!("interface {i} (`{port}`): no address")));
        }
        if ifaces.iter().any(|f: &IfaceCfg| f.port == port) {
            return Err((r.loc("port"), format!("interface {i}: port `{port}` is given twice")));
        }
        ifaces.push(IfaceCfg { port, v4, v6, mtu: r.uint("mtu").unwrap_or(1500) as usize });
    }
    if ifaces.is_empty() {
        return Err((p.loc("interfaces"), "`interfaces` is empty: a router needs at least one interface".into()));
    }
    let mut lines = Vec::new();
    for (i, r) in p.records("routes").unwrap_or(&[]).iter().enumerate() {
        let at = format!("route {i}");
        let prefix = r.str("prefix").unwrap_or_default();
        lines.push(line_of(
            (
                prefix.to_owned(),
                r.str("via").map(str::to_owned),
                r.port("port").map(str::to_owned),
                r.choice("type").unwrap_or(RouteType::Forward),
            ),
            at,
            r.loc("prefix"),
        )?);
    }
    if let Some(path) = p.path("routes_file") {
        let loc = p.loc("routes_file");
        let text = std::fs::read_to_string(path).map_err(|e| (loc, format!("routes_file {}: {e}", path.display())))?;
        for (n, l) in text.lines().enumerate() {
            let l = l.split('#').next().unwrap_or_default().trim();
            if l.is_empty() {
                continue;
            }
            let at = format!("{}:{}", path.display(), n + 1);
            let parts = route_line(l).map_err(|e| (loc, format!("{at}: {e}")))?;
            lines.push(line_of(parts, at, loc)?);
        }
    }
    let mut cfg = resolve(ifaces, lines)?;
    let mut per_iface_statics = std::collections::HashMap::new();
    for (i, r) in p.records("static_neighbours").unwrap_or(&[]).iter().enumerate() {
        let (port, text) = (r.port("port").unwrap_or_default(), r.str("address").unwrap_or_default());
        let at = format!("static neighbour {i}");
        let a: IpAddr = text.parse().map_err(|_| (r.loc("address"), format!("{at}: `{text}` is not an address")))?;
        let k = cfg
            .ifaces
            .iter()
            .position(|f| f.port == port)
            .ok_or_else(|| (r.loc("port"), format!("{at}: port `{port}` is not a router interface")))?;
        let link_local = matches!(a, IpAddr::V6(v) if v.segments()[0] & 0xffc0 == 0xfe80);
        if !link_local && on_link(&cfg.ifaces[k..=k], a).is_none() {
            return Err((r.loc("address"), format!("{at}: {a} is not on a subnet of interface `{port}`")));
        }
        let per_iface = per_iface_statics.entry(k).or_insert_with(std::collections::HashSet::new);
        if per_iface.insert(a) && per_iface.len() > super::neigh::MAX_PERMANENT {
            return Err((
                r.loc("address"),
                format!(
                    "{at}: interface `{port}` has {} static neighbours, the most it takes",
                    super::neigh::MAX_PERMANENT
                ),
            ));
        }
        cfg.statics.push((k, a, r.mac("mac").unwrap_or_default()));
    }
    Ok(cfg)
}

pub(super) fn line_of(
    (prefix, via, port, kind): (String, Option<String>, Option<String>, RouteType),
    at: String,
    loc: Option<Loc>,
) -> Result<RouteLine, Error> {
    let prefix = parse_cidr(&prefix, true).map_err(|e| (loc, format!("{at}: {e}")))?;
    let via = via
        .map(|v| v.parse::<IpAddr>().map_err(|_| (loc, format!("{at}: `via {v}` is not an address"))))
        .transpose()?;
    if let Some(v) = via {
        if v.is_ipv4() != prefix.0.is_ipv4() {
            return Err((loc, format!("{at}: `via {v}` is not of the prefix's family")));
        }
    }
    if kind != RouteType::Forward && (via.is_some() || port.is_some()) {
        return Err((loc, format!("{at}: a {} route takes neither `via` nor `port`", kind.name())));
    }
    if kind == RouteType::Forward && via.is_none() && port.is_none() {
        return Err((loc, format!("{at}: a forward route needs `via` or `port`")));
    }
    Ok(RouteLine { prefix, via, port, kind, at, loc })
}

fn resolve(ifaces: Vec<IfaceCfg>, lines: Vec<RouteLine>) -> Result<RouterCfg, Error> {
    let (mut routes4, mut routes6) = (Vec::new(), Vec::new());
    let mut push = |a: IpAddr, len: u8, t: Target| {
        let e = (prefix_of(a, len), t);
        if a.is_ipv4() {
            routes4.push(e)
        } else {
            routes6.push(e)
        }
    };
    // Connected subnets, then our own addresses (longer, so they win).
    for (k, f) in ifaces.iter().enumerate() {
        let subnets =
            f.v4.iter().map(|(a, l)| (IpAddr::V4(*a), *l)).chain(f.v6.iter().map(|(a, l)| (IpAddr::V6(*a), *l)));
        for (a, l) in subnets {
            push(a, l, Target::Forward { iface: k, via: None });
        }
    }
    // What is never forwarded, whatever the routes: classified by the same lookup.
    for &(a, len, t) in NEVER_ROUTED {
        push(IpAddr::V4(Ipv4Addr::from(a)), len, t);
    }
    for f in &ifaces {
        for (a, l) in &f.v4 {
            if *l < 31 {
                push(IpAddr::V4(Ipv4Addr::from(u32::from(*a) | (u32::MAX >> l))), 32, Target::Local);
            }
        }
    }
    for f in &ifaces {
        for a in f.v4.iter().map(|(a, _)| IpAddr::V4(*a)).chain(f.v6.iter().map(|(a, _)| IpAddr::V6(*a))) {
            push(a, if a.is_ipv4() { 32 } else { 128 }, Target::Local);
        }
    }
    let mut seen = std::collections::HashMap::new();
    for r in lines {
        if let Some(first) = seen.insert((r.prefix.0.is_ipv4(), prefix_of(r.prefix.0, r.prefix.1)), r.at.clone()) {
            return Err((r.loc, format!("{}: {}/{} is already routed by {first}", r.at, r.prefix.0, r.prefix.1)));
        }
        if let Some(why) = never_routed(r.prefix.0, r.prefix.1) {
            return Err((
                r.loc,
                format!("{}: {}/{} is inside {why}: it is never routed", r.at, r.prefix.0, r.prefix.1),
            ));
        }
        let t = target_of(&ifaces, &r)?;
        push(r.prefix.0, r.prefix.1, t);
    }
    Ok(RouterCfg { ifaces, routes4, routes6, statics: Vec::new() })
}

/// The FIB target of a route line: its kind, or the interface its gateway is on (or
/// its `port`).
pub(super) fn target_of(ifaces: &[IfaceCfg], r: &RouteLine) -> Result<Target, Error> {
    Ok(match r.kind {
        RouteType::Unreachable => Target::Unreachable,
        RouteType::Prohibit => Target::Prohibit,
        RouteType::Blackhole => Target::Blackhole,
        RouteType::Forward => {
            let named = match &r.port {
                Some(name) => Some(ifaces.iter().position(|f| f.port == *name).ok_or_else(|| {
                    let all: Vec<_> = ifaces.iter().map(|f| format!("`{}`", f.port)).collect();
                    (
                        r.loc,
                        format!("{}: port `{name}` is not a router interface (interfaces: {})", r.at, all.join(", ")),
                    )
                })?),
                None => None,
            };
            let iface = match (r.via, named) {
                (_, Some(k)) => k,
                (Some(v), None) => on_link(ifaces, v).ok_or_else(|| {
                    (r.loc, format!("{}: gateway {v} is on no interface's subnet (give `port`)", r.at))
                })?,
                (None, None) => unreachable!("checked by line_of"),
            };
            Target::Forward { iface, via: r.via }
        }
    })
}

/// The IPv4 ranges never forwarded, whatever the routes (the FIB classifies them
/// with entries of their own, which no route may paint over).
const NEVER_ROUTED: &[([u8; 4], u8, Target)] = &[
    ([0, 0, 0, 0], 8, Target::Martian),
    ([127, 0, 0, 0], 8, Target::Martian),
    ([169, 254, 0, 0], 16, Target::Martian),
    ([224, 0, 0, 0], 4, Target::Multicast),
    ([240, 0, 0, 0], 4, Target::Martian),
    ([255, 255, 255, 255], 32, Target::Local),
];

/// The never-routed range (`this network 0.0.0.0/8`, ...) that holds prefix
/// `a/len`, if any: a route there would forward what must not be.
pub(super) fn never_routed(a: IpAddr, len: u8) -> Option<String> {
    let IpAddr::V4(v) = a else { return None };
    NEVER_ROUTED.iter().find_map(|&(n, l, _)| {
        (len >= l && Prefix::v4(Ipv4Addr::from(n), l).covers(super::lpm::key4(v)))
            .then(|| format!("{}/{l}", Ipv4Addr::from(n)))
    })
}

/// The interface whose subnet holds `a`.
pub(super) fn on_link(ifaces: &[IfaceCfg], a: IpAddr) -> Option<usize> {
    ifaces.iter().position(|f| match a {
        IpAddr::V4(v) => f.v4.iter().any(|(s, l)| Prefix::v4(*s, *l).covers(super::lpm::key4(v))),
        IpAddr::V6(v) => f.v6.iter().any(|(s, l)| Prefix::v6(*s, *l).covers(u128::from(v))),
    })
}

impl RouterCfg {
    /// A setting from interfaces and route lines in the routes file's grammar (tests,
    /// fuzzing, benchmarks).
    pub fn new(ifaces: Vec<IfaceCfg>, routes: &[&str]) -> Result<RouterCfg, String> {
        let mut lines = Vec::new();
        for (i, l) in routes.iter().enumerate() {
            let at = format!("route {i}");
            let parts = route_line(l).map_err(|e| format!("{at}: {e}"))?;
            lines.push(line_of(parts, at, None).map_err(|e| e.1)?);
        }
        resolve(ifaces, lines).map_err(|e| e.1)
    }
}

impl IfaceCfg {
    /// An interface on `port` with these `ADDRESS/LENGTH`s and MTU 1500.
    pub fn new(port: &str, addresses: &[&str]) -> Result<IfaceCfg, String> {
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        for a in addresses {
            match parse_cidr(a, false)? {
                (IpAddr::V4(a), l) => v4.push((a, l)),
                (IpAddr::V6(a), l) => v6.push((a, l)),
            }
        }
        Ok(IfaceCfg { port: port.to_owned(), v4, v6, mtu: 1500 })
    }
}
