//! The router's control-plane half: `ip route add|del`, `ip neighbor add|del` and
//! `show ip route` at run time, from `ironpath ctl` (and the kernel's table when the
//! router follows one).
//!
//! The controller keeps the whole route table (the connected subnets, the router's
//! own addresses, the addresses never routed, and the routes from the pipeline file
//! and later commands). A route change rebuilds both FIBs from it on the control
//! thread and hands them to the node ([`FibSwap`]); the node's lcore swaps them in
//! between two bursts and hands the old ones back, freed here. A neighbour change is
//! a small message the lcore applies to its own tables ([`NeighChange`]). What a
//! command gets wrong (a malformed prefix, an unknown port, a gateway on no subnet, a
//! table over its ply bound, a change to a connected or own address) is refused with
//! one line and changes nothing.

use super::config::{self, addr_of, line_of, on_link, route_line, target_of, IfaceCfg, RouterCfg, Target};
use super::fast::Adj;
use super::lpm::{Lpm, Prefix};
use super::Fib;
use ironpath_graph::{Controller, Remote};
use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A new pair of FIBs and what their leaves index, handed to the lcore; it comes back
/// holding the ones it replaced.
pub(super) struct FibSwap {
    pub(super) v4: Lpm,
    pub(super) v6: Lpm,
    pub(super) targets: Vec<Target>,
    pub(super) adj: Vec<Adj>,
}

/// A neighbour entry to add (permanent, as `ip neigh add ... nud permanent`) or remove
/// on interface `iface`; the lcore answers `Result<(), String>`.
#[derive(Clone, Copy)]
pub(super) enum NeighChange {
    /// Add or replace.
    Add { iface: usize, ip: IpAddr, mac: [u8; 6] },
    /// Remove (a permanent or a learned entry).
    Del { iface: usize, ip: IpAddr },
}

/// Most lines `show ip route` prints.
const SHOW_MAX: usize = 1000;

/// The route table a controller (and a kernel follower) changes.
pub(super) struct Tables {
    ifaces: Vec<IfaceCfg>,
    /// Per family (IPv4 first), prefix (length, bits) to target: ordered so that
    /// `show ip route` lists by length then address, and rebuilding is deterministic.
    routes: [BTreeMap<(u8, u128), Target>; 2],
    /// Entries the router makes itself (connected subnets, its addresses, never
    /// routed ranges): not changed by commands.
    fixed: HashSet<(bool, Prefix)>,
    /// Per interface: MTU and next edge (for the adjacencies).
    links: Vec<(u32, u16)>,
    max_plies: usize,
    /// Routes rebuilt and handed over, for `show ip route`'s header.
    pub(super) versions: u64,
    /// What a followed kernel table put in it.
    pub(super) kernel: super::kernel::KernelState,
}

impl Tables {
    /// The tables of a router built from `cfg`.
    pub(super) fn new(cfg: &RouterCfg, links: Vec<(u32, u16)>, max_plies: usize) -> Result<Tables, String> {
        let auto = RouterCfg::new(cfg.ifaces.clone(), &[])?;
        let fixed =
            auto.routes4.iter().map(|(p, _)| (true, *p)).chain(auto.routes6.iter().map(|(p, _)| (false, *p))).collect();
        let map = |r: &[(Prefix, Target)]| r.iter().map(|(p, t)| ((p.len, p.bits), *t)).collect();
        Ok(Tables {
            ifaces: cfg.ifaces.clone(),
            routes: [map(&cfg.routes4), map(&cfg.routes6)],
            fixed,
            links,
            max_plies,
            versions: 0,
            kernel: Default::default(),
        })
    }

    fn family(v4: bool) -> usize {
        usize::from(!v4)
    }

    /// The route of `prefix` (IPv4 when `v4`) is now `target` (`None`: removed).
    /// Refuses the router's own entries.
    pub(super) fn set(&mut self, v4: bool, prefix: Prefix, target: Option<Target>) -> Result<Option<Target>, String> {
        if self.fixed.contains(&(v4, prefix)) {
            let what = match self.routes[Self::family(v4)].get(&(prefix.len, prefix.bits)) {
                Some(Target::Local) => "one of the router's own addresses",
                Some(Target::Forward { .. }) => "a connected subnet",
                Some(Target::Multicast) => "multicast (never routed)",
                _ => "an address range never routed",
            };
            return Err(format!(
                "{}/{} is {what}: it is not changed by route commands",
                addr_of(prefix, v4),
                prefix.len
            ));
        }
        if target.is_some() {
            if let Some(range) = config::never_routed(addr_of(prefix, v4), prefix.len) {
                return Err(format!("{}/{} is inside {range}, which is never routed", addr_of(prefix, v4), prefix.len));
            }
        }
        let table = &mut self.routes[Self::family(v4)];
        Ok(match target {
            Some(t) => table.insert((prefix.len, prefix.bits), t),
            None => table.remove(&(prefix.len, prefix.bits)),
        })
    }

    /// The route of `prefix` now.
    pub(super) fn get(&self, v4: bool, prefix: Prefix) -> Option<Target> {
        self.routes[Self::family(v4)].get(&(prefix.len, prefix.bits)).copied()
    }

    /// Both FIBs built from the table, with their adjacencies.
    pub(super) fn build(&self) -> Result<FibSwap, String> {
        let list = |k: usize| -> Vec<(Prefix, Target)> {
            self.routes[k].iter().map(|(&(len, bits), t)| (Prefix { bits, len }, *t)).collect()
        };
        let Fib { v4, v6, targets } = Fib::of_routes(&list(0), &list(1), self.max_plies, None)?;
        let adj = targets.iter().map(|t| Adj::new(t, &self.links)).collect();
        Ok(FibSwap { v4, v6, targets, adj })
    }

    /// Rebuild and hand the FIBs to the node; what they replaced is freed here.
    pub(super) fn publish(&mut self, remote: &Remote) -> Result<(), String> {
        let swap = self.build()?;
        self.hand_over(remote, swap)
    }

    /// Hand FIBs [`Tables::build`] made to the node.
    pub(super) fn hand_over(&mut self, remote: &Remote, swap: FibSwap) -> Result<(), String> {
        let old = remote.call(Box::new(swap))?;
        if old.downcast::<FibSwap>().is_err() {
            return Err("the node did not take the new FIB (it panicked): the route table and the FIB differ".into());
        }
        self.versions += 1;
        Ok(())
    }

    /// The interfaces.
    pub(super) fn ifaces(&self) -> &[IfaceCfg] {
        &self.ifaces
    }

    /// Routes in all (IPv4, IPv6).
    pub(super) fn counts(&self) -> (usize, usize) {
        (self.routes[0].len(), self.routes[1].len())
    }

    /// The interface named `port`.
    pub(super) fn iface(&self, port: &str) -> Result<usize, String> {
        self.ifaces.iter().position(|f| f.port == port).ok_or_else(|| {
            let all: Vec<_> = self.ifaces.iter().map(|f| f.port.as_str()).collect();
            format!("port `{port}` is not a router interface (interfaces: {})", all.join(", "))
        })
    }

    /// The interface a gateway `via` is on, or `port`'s.
    pub(super) fn forward(&self, via: Option<IpAddr>, port: Option<&str>) -> Result<Target, String> {
        let iface = match (via, port) {
            (_, Some(p)) => self.iface(p)?,
            (Some(v), None) => {
                on_link(&self.ifaces, v).ok_or(format!("gateway {v} is on no interface's subnet (give `port`)"))?
            }
            (None, None) => return Err("a forward route needs `via ADDRESS` or `port NAME`".into()),
        };
        Ok(Target::Forward { iface, via })
    }

    fn describe(&self, t: &Target) -> String {
        match *t {
            Target::Forward { iface, via: Some(v) } => format!("via {v} port {}", self.ifaces[iface].port),
            Target::Forward { iface, via: None } => format!("port {}", self.ifaces[iface].port),
            Target::Local => "local".into(),
            Target::Unreachable => "unreachable".into(),
            Target::Prohibit => "prohibit".into(),
            Target::Blackhole => "blackhole".into(),
            Target::Multicast => "multicast (not routed)".into(),
            Target::Martian => "martian (never routed)".into(),
        }
    }

    /// `show ip route`: every route, IPv4 then IPv6, shortest prefixes first.
    fn show(&self) -> String {
        let (n4, n6) = self.counts();
        let mut s = format!("{n4} IPv4 and {n6} IPv6 routes (FIB version {})\n", self.versions);
        let mut shown = 0;
        for (k, v4) in [(0, true), (1, false)] {
            for (&(len, bits), t) in &self.routes[k] {
                if shown == SHOW_MAX {
                    s.push_str(&format!("... {} more\n", n4 + n6 - SHOW_MAX));
                    return s;
                }
                shown += 1;
                let p = Prefix { bits, len };
                let fixed = if self.fixed.contains(&(v4, p)) {
                    "  (router)"
                } else if self.kernel.has(v4, p) {
                    "  (kernel)"
                } else {
                    ""
                };
                s.push_str(&format!("{}/{len} {}{fixed}\n", addr_of(Prefix { bits, len }, v4), self.describe(t)));
            }
        }
        s
    }
}

/// The controller of one `ip_router`.
pub(super) struct RouterCtl {
    pub(super) tables: Arc<Mutex<Tables>>,
    /// The kernel table to follow, once the graph is built.
    pub(super) follow: Option<super::kernel::KernelCfg>,
    pub(super) following: Option<super::kernel::Following>,
}

const GRAMMAR: &[(&str, &str)] = &[
    (
        "ip route add <PREFIX> via <ADDR> [port <NAME>]",
        "route PREFIX through gateway ADDR (also `port NAME`, or `blackhole|unreachable|prohibit`); replaces its route",
    ),
    ("ip route replace <PREFIX> via <ADDR> [port <NAME>]", "as `ip route add`"),
    ("ip route del <PREFIX>", "remove PREFIX's route"),
    ("show ip route", "the route table: connected, the router's own and added routes"),
    ("ip neighbor add <ADDR> lladdr <MAC> port <NAME>", "a permanent neighbour entry on interface NAME"),
    ("ip neighbor del <ADDR> port <NAME>", "remove a neighbour entry (permanent or learned)"),
];

impl Controller for RouterCtl {
    fn grammar(&self) -> &'static [(&'static str, &'static str)] {
        GRAMMAR
    }

    fn accepts(&self, words: &[&str]) -> bool {
        matches!(words, ["ip", "route" | "neighbor" | "neighbour" | "neigh", ..] | ["show", "ip", "route", ..])
    }

    fn attached(&mut self, remote: &Remote) -> Result<(), String> {
        if let Some(cfg) = self.follow.take() {
            let what =
                format!("kernel table {} of {}", cfg.table, cfg.netns.as_deref().unwrap_or("this process's namespace"));
            let f = super::kernel::follow(cfg, self.tables.clone(), remote.clone())
                .map_err(|e| format!("follow_table: cannot follow {what}: {e}"))?;
            self.following = Some(f);
        }
        Ok(())
    }

    fn command(&mut self, words: &[&str], remote: &Remote) -> Result<String, String> {
        let mut t = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        match words {
            ["show", "ip", "route"] => {
                let mut s = self.following.as_ref().map(|f| f.describe(&t.kernel)).unwrap_or_default();
                s.push_str(&t.show());
                Ok(s)
            }
            ["ip", "route", op @ ("add" | "replace"), rest @ ..] if !rest.is_empty() => {
                let (prefix, v4, target) = parse_route(&t, &rest.join(" "), op)?;
                let before = t.set(v4, prefix, Some(target))?;
                publish(&mut t, remote, v4, prefix, before, Some(target))
            }
            ["ip", "route", "del" | "delete", p] => {
                let (a, len) = config::parse_cidr(p, true)?;
                let prefix = config::prefix_of(a, len);
                let before = t.set(a.is_ipv4(), prefix, None)?;
                if before.is_none() {
                    return Err(format!("no route for {a}/{len}"));
                }
                publish(&mut t, remote, a.is_ipv4(), prefix, before, None)
            }
            ["ip", "neighbor" | "neighbour" | "neigh", "add", addr, "lladdr", mac, "port" | "dev", port] => {
                let (iface, ip) = neighbour(&t, addr, port)?;
                let mac = ironpath_config::parse_mac(mac)
                    .ok_or(format!("`{mac}` is not a MAC address (aa:bb:cc:dd:ee:ff)"))?;
                drop(t);
                neigh_call(remote, NeighChange::Add { iface, ip, mac })?;
                Ok(format!("neighbour {ip} lladdr {mac} port {port}: added (permanent)", mac = fmt_mac(mac)))
            }
            ["ip", "neighbor" | "neighbour" | "neigh", "del" | "delete", addr, "port" | "dev", port] => {
                let (iface, ip) = neighbour(&t, addr, port)?;
                drop(t);
                neigh_call(remote, NeighChange::Del { iface, ip })?;
                Ok(format!("neighbour {ip} port {port}: removed"))
            }
            _ => Err(format!(
                "usage: {}",
                GRAMMAR.iter().map(|(g, _)| *g).filter(|g| g.starts_with(words[0])).collect::<Vec<_>>().join(" | ")
            )),
        }
    }
}

/// Hand the rebuilt FIBs over; on failure the table takes back its old route, so
/// the table and the FIB the node uses stay the same.
fn publish(
    t: &mut Tables,
    remote: &Remote,
    v4: bool,
    prefix: Prefix,
    before: Option<Target>,
    after: Option<Target>,
) -> Result<String, String> {
    let start = Instant::now();
    if let Err(e) = t.publish(remote) {
        t.set(v4, prefix, before).expect("the prefix was just changed");
        return Err(e);
    }
    let what = match (before, after) {
        (None, Some(_)) => "added",
        (Some(_), Some(_)) => "replaced",
        _ => "removed",
    };
    let (n4, n6) = t.counts();
    let route = match after {
        Some(target) => format!("{}/{} {}", addr_of(prefix, v4), prefix.len, t.describe(&target)),
        None => format!("{}/{}", addr_of(prefix, v4), prefix.len),
    };
    Ok(format!(
        "{route}: {what} ({n4} IPv4 and {n6} IPv6 routes; FIB rebuilt and in force in {:.1} ms)",
        start.elapsed().as_secs_f64() * 1e3
    ))
}

/// `PREFIX via ADDR [port NAME] | PREFIX port NAME | PREFIX blackhole|...`.
fn parse_route(t: &Tables, line: &str, op: &str) -> Result<(Prefix, bool, Target), String> {
    let parts = route_line(line)?;
    let r = line_of(parts, format!("ip route {op}"), None).map_err(|e| e.1)?;
    let target = target_of(&t.ifaces, &r).map_err(|e| e.1)?;
    Ok((config::prefix_of(r.prefix.0, r.prefix.1), r.prefix.0.is_ipv4(), target))
}

/// A neighbour's interface and address, checked as `static_neighbours` are.
fn neighbour(t: &Tables, addr: &str, port: &str) -> Result<(usize, IpAddr), String> {
    let ip: IpAddr = addr.parse().map_err(|_| format!("`{addr}` is not an IPv4 or IPv6 address"))?;
    let k = t.iface(port)?;
    let link_local = matches!(ip, IpAddr::V6(v) if v.segments()[0] & 0xffc0 == 0xfe80);
    if !link_local && on_link(&t.ifaces[k..=k], ip).is_none() {
        return Err(format!("{ip} is not on a subnet of interface `{port}`"));
    }
    Ok((k, ip))
}

fn neigh_call(remote: &Remote, change: NeighChange) -> Result<(), String> {
    let answer = remote.call(Box::new(change))?;
    match answer.downcast::<Result<(), String>>() {
        Ok(r) => *r,
        Err(_) => Err("the node did not take the change (it panicked)".into()),
    }
}

fn fmt_mac(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}
