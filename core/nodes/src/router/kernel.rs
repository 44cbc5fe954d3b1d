//! Following a Linux routing table (`follow_table`, `follow_netns`), as VPP's
//! linux-cp plugin does: `ip route add` in that namespace, or a routing daemon
//! writing to that table (BIRD's kernel protocol), drives the router's FIB.
//!
//! An [`ironpath_netlink::Follower`] delivers the table (a snapshot, then each
//! change, and a new snapshot whenever it may have missed one) on its own thread; an
//! applier thread here takes every event queued, applies them all to the route
//! table, then rebuilds and hands the FIBs over once ([`Tables::publish`]), at most
//! every [`MIN_GAP`] and at most one part in [`DUTY`] of the time: a churn of
//! changes costs one rebuild per batch, not one per change, and never a whole CPU.
//! Neither thread is an lcore.
//!
//! How a kernel route maps: via a gateway on one of the router's subnets, forward
//! there; on-link through an interface named as one of the router's ports, forward
//! on that port; blackhole, unreachable and prohibit as themselves. A kernel route
//! replaces the file's route of the same prefix (which comes back when the kernel's
//! goes); with several metrics for one prefix the lowest wins. What does not map (a gateway on no subnet of the
//! router, a device the router does not have, a prefix the router owns: its
//! connected subnets and addresses) is left out and counted (`show ip route`).
//! Neighbours the kernel has resolved on one of the router's subnets become
//! permanent entries of that interface, and go when the kernel drops them.

use super::config::Target;
use super::ctl::{NeighChange, Tables};
use super::lpm::Prefix;
use ironpath_graph::Remote;
use ironpath_netlink::{FollowCfg, Follower, KernelEvent, KernelNeigh, KernelRoute, RouteKind};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The least time between two rebuilds of the FIB for kernel changes.
pub const MIN_GAP: Duration = Duration::from_millis(5);
/// Rebuilds for kernel changes take at most one part in this many of the time (the
/// gap after a rebuild is this many times as long as it took): a churn of routes
/// cannot keep a CPU rebuilding, nor the memory bus and the caches it shares with
/// the lcores busy.
pub const DUTY: u32 = 10;

/// Neighbour changes handed to the lcore per round of the applier (the rest wait
/// for the next round, after the routes that came meanwhile).
const NEIGH_PER_ROUND: usize = 64;

/// What the router follows.
#[derive(Clone, Debug)]
pub struct KernelCfg {
    /// The table (254: main).
    pub table: u32,
    /// A namespace name (`ip netns`) or path; `None`: the process's own.
    pub netns: Option<String>,
}

/// What the kernel contributed to the route table, and what it could not.
#[derive(Debug, Default)]
pub(super) struct KernelState {
    /// Per prefix: the kernel's routes by metric (the lowest is installed).
    routes: HashMap<(bool, Prefix), BTreeMap<u32, Target>>,
    /// The routes (from the file or a command) a kernel route replaced, put back
    /// when the kernel's goes.
    under: HashMap<(bool, Prefix), Target>,
    /// Neighbours installed from the kernel: (interface, address).
    neighs: HashSet<(usize, IpAddr)>,
    /// Routes left out (by reason) and FIBs handed over for kernel changes.
    pub(super) no_gateway: u64,
    pub(super) no_device: u64,
    pub(super) owned: u64,
    pub(super) rebuilds: u64,
    pub(super) failed: u64,
    /// Why the last rebuild failed, while the FIB is behind the table.
    pub(super) behind: Option<String>,
    /// Neighbours the router's interface had no room for ([`super::neigh::MAX_PERMANENT`]).
    pub(super) neigh_refused: u64,
}

impl KernelState {
    /// Is `prefix` (IPv4 when `v4`) the kernel's?
    pub(super) fn has(&self, v4: bool, prefix: Prefix) -> bool {
        self.routes.contains_key(&(v4, prefix))
    }
}

/// The follower and the applier of one router.
pub(super) struct Following {
    pub(super) cfg: KernelCfg,
    follower: Follower,
}

impl Following {
    /// Its counters, for `show ip route`.
    pub(super) fn describe(&self, k: &KernelState) -> String {
        let s = self.follower.stats();
        format!(
            "following kernel table {} ({}): {} snapshots, {} changes, {} resyncs; left out: {} gateway on no subnet, {} unknown device, {} the router's own, {} neighbours (interface full); {} FIB rebuilds, {} failed{}\n",
            self.cfg.table,
            self.cfg.netns.as_deref().map_or("this process's namespace".to_string(), |n| format!("namespace {n}")),
            s.snapshots,
            s.events,
            s.resyncs + s.link_resyncs,
            k.no_gateway,
            k.no_device,
            k.owned,
            k.neigh_refused,
            k.rebuilds,
            k.failed,
            k.behind.as_deref().map_or(String::new(), |why| format!("; the FIB is behind the table until the next change: {why}"))
        )
    }
}

/// Start following: the follower's socket is opened now (its error returned), the
/// applier hands the FIBs to the node through `remote` until the graph stops.
pub(super) fn follow(cfg: KernelCfg, tables: Arc<Mutex<Tables>>, remote: Remote) -> std::io::Result<Following> {
    let (tx, rx) = mpsc::channel::<KernelEvent>();
    let follower = Follower::start(FollowCfg { netns: cfg.netns.clone(), table: cfg.table }, move |e| {
        let _ = tx.send(e);
    })?;
    std::thread::Builder::new().name("router-kernel".into()).spawn(move || apply_loop(&rx, &tables, &remote))?;
    Ok(Following { cfg, follower })
}

fn apply_loop(rx: &mpsc::Receiver<KernelEvent>, tables: &Mutex<Tables>, remote: &Remote) {
    let mut dirty = false;
    let mut neighs: VecDeque<NeighChange> = VecDeque::new();
    let mut last = Instant::now() - MIN_GAP;
    let mut gap = MIN_GAP;
    loop {
        let first = if dirty || !neighs.is_empty() {
            rx.recv_timeout(Duration::from_millis(100))
        } else {
            rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
        };
        let mut events = match first {
            Ok(e) => vec![e],
            Err(RecvTimeoutError::Timeout) => Vec::new(),
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let wait = gap.saturating_sub(last.elapsed());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        events.extend(rx.try_iter());
        let mut t = tables.lock().unwrap_or_else(|e| e.into_inner());
        for e in events {
            dirty |= apply(&mut t, e, &mut neighs);
        }
        if remote.closed() {
            return;
        }
        if dirty {
            last = Instant::now();
            // A table the FIB cannot hold (too many plies) waits for the next change;
            // a node that did not answer is asked again next round.
            let handed =
                t.build().map_err(|e| (false, e)).and_then(|swap| t.hand_over(remote, swap).map_err(|e| (true, e)));
            match handed {
                Ok(()) => {
                    t.kernel.rebuilds += 1;
                    t.kernel.behind = None;
                    dirty = false;
                }
                Err((again, why)) => {
                    t.kernel.failed += 1;
                    t.kernel.behind = Some(why);
                    dirty = again;
                }
            }
            gap = MIN_GAP.max(last.elapsed() * DUTY);
        }
        drop(t);
        // Neighbours after the routes (a route's gateway may be among them); one
        // message each, kept for the next round when the lcore does not answer.
        for _ in 0..NEIGH_PER_ROUND {
            let Some(&c) = neighs.front() else { break };
            match remote.call(Box::new(c)) {
                Ok(answer) => {
                    neighs.pop_front();
                    if let (NeighChange::Add { iface, ip, .. }, Ok(r)) = (c, answer.downcast::<Result<(), String>>()) {
                        if r.is_err() {
                            let mut t = tables.lock().unwrap_or_else(|e| e.into_inner());
                            t.kernel.neighs.remove(&(iface, ip));
                            t.kernel.neigh_refused += 1;
                        }
                    }
                }
                Err(_) => break,
            }
        }
    }
}

/// Apply one event to the route table (and queue neighbour changes); true when the
/// routes changed.
fn apply(t: &mut Tables, e: KernelEvent, neighs: &mut VecDeque<NeighChange>) -> bool {
    match e {
        KernelEvent::Snapshot { routes, neighs: kn } => {
            let old: Vec<(bool, Prefix)> = t.kernel.routes.keys().copied().collect();
            for (v4, p) in old {
                let under = t.kernel.under.remove(&(v4, p));
                let _ = t.set(v4, p, under);
            }
            t.kernel.routes.clear();
            for r in &routes {
                route(t, r, true);
            }
            let wanted: HashSet<(usize, IpAddr)> =
                kn.iter().filter_map(|n| neigh_of(t, n).map(|(k, _)| (k, n.addr))).collect();
            let stale: Vec<(usize, IpAddr)> = t.kernel.neighs.difference(&wanted).copied().collect();
            for (iface, ip) in stale {
                t.kernel.neighs.remove(&(iface, ip));
                neighs.push_back(NeighChange::Del { iface, ip });
            }
            for n in &kn {
                neigh(t, n, true, neighs);
            }
            true
        }
        KernelEvent::RouteAdd(r) => route(t, &r, true),
        KernelEvent::RouteDel(r) => route(t, &r, false),
        KernelEvent::NeighAdd(n) => {
            neigh(t, &n, true, neighs);
            false
        }
        KernelEvent::NeighDel(n) => {
            neigh(t, &n, false, neighs);
            false
        }
    }
}

/// The router's target for a kernel route, or why it has none.
fn target_of(t: &Tables, r: &KernelRoute) -> Result<Target, &'static str> {
    // The route's device, when it is one of the router's ports (an IPv6 route via a
    // link-local gateway names it).
    let port = r.oif.as_deref().filter(|d| t.iface(d).is_ok());
    Ok(match r.kind {
        RouteKind::Blackhole => Target::Blackhole,
        RouteKind::Unreachable => Target::Unreachable,
        RouteKind::Prohibit => Target::Prohibit,
        RouteKind::Unicast => match (r.gateway, port) {
            (Some(gw), _) if gw.is_ipv4() != r.dst.is_ipv4() => return Err("gateway"),
            (Some(gw), Some(dev)) => t.forward(Some(gw), Some(dev)).map_err(|_| "gateway")?,
            (Some(gw), None) => t.forward(Some(gw), None).map_err(|_| "gateway")?,
            (None, Some(dev)) => t.forward(None, Some(dev)).map_err(|_| "device")?,
            (None, None) => return Err("device"),
        },
    })
}

/// Add or remove kernel route `r`; true when the table changed. A route the router
/// cannot map withdraws what the kernel had at that prefix and metric (a kernel
/// `replace` to it sends no delete).
fn route(t: &mut Tables, r: &KernelRoute, add: bool) -> bool {
    let v4 = r.dst.is_ipv4();
    let prefix = super::config::prefix_of(r.dst, r.len);
    let key = (v4, prefix);
    let target = if add {
        match target_of(t, r) {
            Ok(target) => Some(target),
            Err(why) => {
                match why {
                    "gateway" => t.kernel.no_gateway += 1,
                    _ => t.kernel.no_device += 1,
                }
                None
            }
        }
    } else {
        None
    };
    let had = t.kernel.routes.contains_key(&key);
    match target {
        Some(target) => {
            if !had {
                if let Some(cur) = t.get(v4, prefix) {
                    t.kernel.under.insert(key, cur);
                }
            }
            t.kernel.routes.entry(key).or_default().insert(r.metric, target);
        }
        None => {
            let Some(m) = t.kernel.routes.get_mut(&key) else { return false };
            if m.remove(&r.metric).is_none() {
                return false;
            }
            if m.is_empty() {
                t.kernel.routes.remove(&key);
            }
        }
    }
    let best = match t.kernel.routes.get(&key) {
        Some(m) => m.values().next().copied(),
        None => t.kernel.under.remove(&key),
    };
    let before = t.get(v4, prefix);
    match t.set(v4, prefix, best) {
        Ok(_) => before != best,
        Err(_) => {
            t.kernel.routes.remove(&key);
            t.kernel.under.remove(&key);
            t.kernel.owned += 1;
            false
        }
    }
}

/// The router interface of a kernel neighbour: the one whose subnet holds it.
fn neigh_of(t: &Tables, n: &KernelNeigh) -> Option<(usize, [u8; 6])> {
    let k = super::config::on_link(t.ifaces(), n.addr)?;
    (n.reachable && n.mac != [0; 6]).then_some((k, n.mac))
}

fn neigh(t: &mut Tables, n: &KernelNeigh, add: bool, out: &mut VecDeque<NeighChange>) {
    match (add, neigh_of(t, n)) {
        (true, Some((iface, mac))) => {
            t.kernel.neighs.insert((iface, n.addr));
            out.push_back(NeighChange::Add { iface, ip: n.addr, mac });
        }
        _ => {
            let Some(iface) = super::config::on_link(t.ifaces(), n.addr) else { return };
            if t.kernel.neighs.remove(&(iface, n.addr)) {
                out.push_back(NeighChange::Del { iface, ip: n.addr });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::config::{IfaceCfg, RouterCfg};

    fn tables() -> Tables {
        let ifaces = vec![
            IfaceCfg::new("p0", &["198.18.1.1/24", "fd00:1::1/64"]).unwrap(),
            IfaceCfg::new("p1", &["198.18.2.1/24"]).unwrap(),
        ];
        let cfg = RouterCfg::new(ifaces, &["0.0.0.0/0 via 198.18.1.9", "198.19.0.0/16 via 198.18.2.9"]).unwrap();
        Tables::new(&cfg, vec![(1500, 0), (1500, 1)], 1 << 16).unwrap()
    }

    fn kr(dst: &str, len: u8, gw: Option<&str>, oif: Option<&str>, metric: u32) -> KernelRoute {
        KernelRoute {
            dst: dst.parse().unwrap(),
            len,
            kind: RouteKind::Unicast,
            gateway: gw.map(|g| g.parse().unwrap()),
            oif: oif.map(str::to_owned),
            table: 254,
            metric,
        }
    }

    fn target(t: &Tables, dst: &str, len: u8) -> Option<Target> {
        let a: IpAddr = dst.parse().unwrap();
        t.get(a.is_ipv4(), crate::router::config::prefix_of(a, len))
    }

    #[test]
    fn the_files_route_comes_back_when_the_kernels_goes_and_the_lowest_metric_wins() {
        let mut t = tables();
        let mut n = VecDeque::new();
        let file = target(&t, "0.0.0.0", 0);
        assert!(apply(&mut t, KernelEvent::RouteAdd(kr("0.0.0.0", 0, Some("198.18.2.7"), None, 50)), &mut n));
        assert_eq!(
            target(&t, "0.0.0.0", 0),
            Some(Target::Forward { iface: 1, via: Some("198.18.2.7".parse().unwrap()) })
        );
        assert!(apply(&mut t, KernelEvent::RouteAdd(kr("0.0.0.0", 0, Some("198.18.1.7"), None, 10)), &mut n));
        assert_eq!(
            target(&t, "0.0.0.0", 0),
            Some(Target::Forward { iface: 0, via: Some("198.18.1.7".parse().unwrap()) })
        );
        assert!(apply(&mut t, KernelEvent::RouteDel(kr("0.0.0.0", 0, None, None, 10)), &mut n));
        assert_eq!(
            target(&t, "0.0.0.0", 0),
            Some(Target::Forward { iface: 1, via: Some("198.18.2.7".parse().unwrap()) })
        );
        assert!(apply(&mut t, KernelEvent::RouteDel(kr("0.0.0.0", 0, None, None, 50)), &mut n));
        assert_eq!(target(&t, "0.0.0.0", 0), file, "the file's default route is back");
        // A snapshot without the kernel's routes puts the file's back too.
        apply(&mut t, KernelEvent::RouteAdd(kr("198.19.0.0", 16, Some("198.18.1.7"), None, 0)), &mut n);
        apply(&mut t, KernelEvent::Snapshot { routes: vec![], neighs: vec![] }, &mut n);
        assert_eq!(
            target(&t, "198.19.0.0", 16),
            Some(Target::Forward { iface: 1, via: Some("198.18.2.9".parse().unwrap()) })
        );
    }

    #[test]
    fn a_replace_to_what_cannot_map_withdraws_and_never_routed_ranges_and_link_local_gateways() {
        let mut t = tables();
        let mut n = VecDeque::new();
        apply(&mut t, KernelEvent::RouteAdd(kr("203.0.113.0", 24, Some("198.18.1.7"), None, 0)), &mut n);
        assert!(target(&t, "203.0.113.0", 24).is_some());
        // `ip route replace` to a gateway on no subnet of the router: no delete comes.
        assert!(apply(&mut t, KernelEvent::RouteAdd(kr("203.0.113.0", 24, Some("192.0.2.1"), None, 0)), &mut n));
        assert_eq!(target(&t, "203.0.113.0", 24), None);
        assert_eq!(t.kernel.no_gateway, 1);
        // Never routed: refused, counted.
        for (dst, len) in [("169.254.169.254", 32), ("127.0.0.0", 16), ("224.0.0.0", 24)] {
            assert!(!apply(&mut t, KernelEvent::RouteAdd(kr(dst, len, Some("198.18.1.7"), None, 0)), &mut n));
        }
        assert_eq!(t.kernel.owned, 3);
        // IPv6 through a link-local gateway on a router port (as RA and routing daemons do).
        assert!(apply(&mut t, KernelEvent::RouteAdd(kr("::", 0, Some("fe80::1"), Some("p0"), 1024)), &mut n));
        assert_eq!(target(&t, "::", 0), Some(Target::Forward { iface: 0, via: Some("fe80::1".parse().unwrap()) }));
        // An IPv4 route via an IPv6 gateway is not mapped.
        assert!(!apply(&mut t, KernelEvent::RouteAdd(kr("203.0.114.0", 24, Some("fd00:1::7"), Some("p0"), 0)), &mut n));
    }
}
