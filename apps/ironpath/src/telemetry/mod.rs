//! Telemetry of a running `ironpath run` or `ironpath testpmd`, read by the tools
//! DPDK users and services already have:
//!
//! * a Unix socket speaking DPDK's telemetry v2 protocol at DPDK's path for the
//!   file prefix ([`server`]), so `dpdk-telemetry.py -f PREFIX` connects
//!   unchanged; it answers DPDK's `/ethdev/*`, `/mempool/*`, `/eal/params`, `/info`
//!   and `/help`, and ironpath's `/ironpath/graph`, `/ironpath/tcp` and
//!   `/ironpath/telemetry`; it lives in a runtime directory only our user can
//!   enter ([`rundir`], where other sockets of the process go too);
//! * `--metrics ADDR:PORT`: the same figures as a Prometheus / OpenMetrics text
//!   endpoint ([`http`], rendered by [`metrics`]), which no client can hold up
//!   for the others.
//!
//! Both read counters the data plane keeps anyway: nothing is pushed from the fast
//! path. A request is answered by the thread that owns the ports (they are not
//! shared between threads): it collects [`Figures`] and renders them. Every bound
//! a client can hit is counted ([`counters`]).

pub mod counters;
pub mod http;
pub mod metrics;
pub mod rundir;
pub mod server;

use ironpath_eal::abi::{Link, Stats};
use ironpath_eal::port::PortInfo;
use ironpath_eal::{Eal, Mempool, MempoolStats, PortId, PortState};
use ironpath_graph::GraphInfo;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// Largest reply (bytes) a client is told to expect (`max_output_len`); longer
/// replies are refused with an error object.
pub const MAX_OUTPUT_LEN: usize = 64 * 1024;

/// One port's figures.
pub struct PortFig {
    /// The name users know it by (the file's port name, or the device name).
    pub label: String,
    /// Everything `show port info` shows.
    pub info: PortInfo,
    /// Link, if the driver reports it.
    pub link: Option<Link>,
    /// Basic counters.
    pub stats: Stats,
    /// Extended counters.
    pub xstats: Vec<(String, u64)>,
    /// Administrative state (true: up), which `set interface state` changes.
    pub admin: Arc<std::sync::atomic::AtomicBool>,
}

/// One mempool's figures.
pub struct PoolFig {
    /// Name.
    pub name: String,
    /// Counters.
    pub stats: MempoolStats,
    /// Bytes per object.
    pub elt_size: usize,
    /// Per-lcore cache size.
    pub cache_size: u32,
    /// Data room per mbuf.
    pub data_room: u16,
    /// What backs its memory.
    pub mem: ironpath_eal::MemKind,
    /// Bytes of its memory region.
    pub bytes: usize,
}

/// Everything a telemetry request may ask about, collected at one instant by the
/// thread that owns the ports.
pub struct Figures {
    /// `ironpath run` or `ironpath testpmd`.
    pub app: &'static str,
    /// The command-line arguments (`/eal/params`).
    pub params: Vec<String>,
    /// Ports.
    pub ports: Vec<PortFig>,
    /// Mempools.
    pub pools: Vec<PoolFig>,
    /// The running graph, if any.
    pub graph: Option<Arc<GraphInfo>>,
}

impl Figures {
    /// Collects the figures of `ports` (id and label) and `pools`.
    pub fn collect(
        app: &'static str,
        params: &[String],
        eal: &Eal,
        ports: &[(PortId, String)],
        pools: &[(String, Mempool)],
        graph: Option<Arc<GraphInfo>>,
    ) -> Figures {
        let ports = ports
            .iter()
            .filter_map(|(id, label)| {
                let p = eal.port(*id).ok()?;
                Some(PortFig {
                    label: label.clone(),
                    info: p.info(),
                    link: p.link().ok(),
                    stats: p.stats().unwrap_or_default(),
                    xstats: p.xstats().unwrap_or_default(),
                    admin: p.admin_flag(),
                })
            })
            .collect();
        let pools = pools
            .iter()
            .map(|(name, m)| PoolFig {
                name: name.clone(),
                stats: m.stats(),
                elt_size: m.elt_size(),
                cache_size: m.cache_size(),
                data_room: m.data_room(),
                mem: m.mem_kind(),
                bytes: m.region().2,
            })
            .collect();
        Figures { app, params: params.to_vec(), ports, pools, graph }
    }

    fn port(&self, param: &str) -> Option<&PortFig> {
        let id: u16 = param.trim().parse().ok()?;
        self.ports.iter().find(|p| p.info.id == id)
    }
}

/// The commands and their help, as `/` and `/help` list them.
pub const COMMANDS: &[(&str, &str)] = &[
    ("/", "Returns list of available commands, Takes no parameters"),
    ("/info", "Returns DPDK Telemetry information. Takes no parameters"),
    ("/help", "Returns help text for a command. Parameters: string command"),
    ("/eal/params", "Returns EAL commandline parameters used. Takes no parameters"),
    ("/ethdev/list", "Returns list of available ethdev ports. Takes no parameters"),
    ("/ethdev/info", "Returns the device info for a port. Parameters: int port_id"),
    ("/ethdev/stats", "Returns the common stats for a port. Parameters: int port_id"),
    ("/ethdev/xstats", "Returns the extended stats for a port. Parameters: int port_id"),
    ("/ethdev/link_status", "Returns the link status for a port. Parameters: int port_id"),
    ("/mempool/list", "Returns list of available mempool. Takes no parameters"),
    ("/mempool/info", "Returns mempool info. Parameters: pool_name"),
    (
        "/ironpath/graph",
        "Returns every graph node: lcore, calls, busy calls, packets, drops, cycles/packet and its own counters. Takes no parameters",
    ),
    (
        "/ironpath/lcores",
        "Returns every lcore: rx mode, walks, packets in, busy cycles, sleeps, wake-ups by source, seconds asleep. Takes no parameters",
    ),
    (
        "/ironpath/tcp",
        "Returns every tcp node's connections by state and its counters. Takes no parameters",
    ),
    (
        "/ironpath/telemetry",
        "Returns the telemetry endpoints' clients and what they refused, by reason. Takes no parameters",
    ),
];

/// The `/info` object (also sent on connection).
pub fn info() -> Value {
    json!({
        "version": concat!("ironpath ", env!("CARGO_PKG_VERSION")),
        "pid": std::process::id(),
        "max_output_len": MAX_OUTPUT_LEN,
    })
}

/// Whether `cmd` is one the socket answers (the others get `null`).
pub fn known(cmd: &str) -> bool {
    COMMANDS.iter().any(|(c, _)| *c == cmd)
}

/// The value of command `cmd` with parameter `param` (`null` for an unknown
/// command or a bad parameter, as DPDK answers).
pub fn answer(f: &Figures, cmd: &str, param: &str) -> Value {
    match cmd {
        "/" => COMMANDS.iter().map(|(c, _)| Value::from(*c)).collect(),
        "/info" => info(),
        "/help" => {
            let c = if param.is_empty() { "/help" } else { param };
            match COMMANDS.iter().find(|(n, _)| *n == c) {
                Some((n, h)) => json!({ *n: h }),
                None => Value::Null,
            }
        }
        "/eal/params" => f.params.iter().map(|s| Value::from(s.as_str())).collect(),
        "/ethdev/list" => f.ports.iter().map(|p| Value::from(p.info.id)).collect(),
        "/ethdev/info" => f.port(param).map_or(Value::Null, ethdev_info),
        "/ethdev/stats" => f.port(param).map_or(Value::Null, |p| ethdev_stats(&p.stats)),
        "/ethdev/xstats" => f.port(param).map_or(Value::Null, |p| {
            p.xstats.iter().map(|(k, v)| (k.clone(), Value::from(*v))).collect::<Map<_, _>>().into()
        }),
        "/ethdev/link_status" => f.port(param).map_or(Value::Null, |p| match p.link {
            Some(l) if l.up != 0 => json!({"status": "UP", "speed": l.speed_mbps,
                "duplex": if l.full_duplex != 0 { "full-duplex" } else { "half-duplex" }}),
            _ => json!({"status": "DOWN"}),
        }),
        "/mempool/list" => f.pools.iter().map(|p| Value::from(p.name.as_str())).collect(),
        "/mempool/info" => f.pools.iter().find(|p| p.name == param).map_or(Value::Null, mempool_info),
        "/ironpath/graph" => graph(f),
        "/ironpath/lcores" => lcores(f),
        "/ironpath/tcp" => tcp(f),
        _ => Value::Null,
    }
}

fn ethdev_info(p: &PortFig) -> Value {
    let i = &p.info;
    let started = i.state == PortState::Started;
    json!({
        "name": i.name,
        "port_id": i.id,
        "label": p.label,
        "driver": i.driver,
        "devargs": i.devargs,
        "state": 1,
        "dev_started": u8::from(started),
        "dev_configured": u8::from(i.state != PortState::Probed),
        "nb_rx_queues": i.nb_rxq,
        "nb_tx_queues": i.nb_txq,
        "mtu": i.dev_info.mtu,
        "min_mtu": i.dev_info.min_mtu,
        "max_mtu": i.dev_info.max_mtu,
        "max_rx_pktlen": i.dev_info.max_rx_pktlen,
        "mac_addr": i.mac.as_ref().map(crate::testpmd::display::mac).unwrap_or_default(),
        "promiscuous": i.promisc.map(u8::from),
        "all_multicast": i.allmulti.map(u8::from),
        "rx_mbuf_alloc_fail": p.stats.rx_nombuf,
        "rx_offloads": format!("0x{:x}", i.dev_info.rx_offload_capa),
        "tx_offloads": format!("0x{:x}", i.dev_info.tx_offload_capa),
    })
}

fn ethdev_stats(s: &Stats) -> Value {
    json!({
        "ipackets": s.ipackets, "opackets": s.opackets, "ibytes": s.ibytes, "obytes": s.obytes,
        "imissed": s.imissed, "ierrors": s.ierrors, "oerrors": s.oerrors, "rx_nombuf": s.rx_nombuf,
        "q_ipackets": s.q_ipackets.to_vec(), "q_opackets": s.q_opackets.to_vec(),
        "q_ibytes": s.q_ibytes.to_vec(), "q_obytes": s.q_obytes.to_vec(), "q_errors": s.q_errors.to_vec(),
    })
}

fn mempool_info(p: &PoolFig) -> Value {
    json!({
        "name": p.name,
        "size": p.stats.size,
        "populated_size": p.stats.size,
        "cache_size": p.cache_size,
        "elt_size": p.elt_size,
        "data_room": p.data_room,
        "avail_count": p.stats.available,
        "in_use_count": p.stats.in_use,
        "total_cache_count": p.stats.in_caches,
        "get_fails": p.stats.get_fails,
        "ops_name": "ironpath_mpmc",
    })
}

fn counters_of(n: &ironpath_graph::NodeInfo) -> Map<String, Value> {
    n.stats.extra().map(|(spec, v)| (spec.name.to_owned(), v.into())).collect()
}

fn gauges_of(n: &ironpath_graph::NodeInfo) -> Map<String, Value> {
    n.stats.gauges().map(|(spec, v)| (spec.name.to_owned(), v.into())).collect()
}

fn graph(f: &Figures) -> Value {
    let Some(g) = &f.graph else { return json!({}) };
    let mut nodes = Map::new();
    for n in &g.nodes {
        let s = n.stats.snapshot();
        nodes.insert(
            n.name.clone(),
            json!({"type": n.type_name, "lcore": n.lcore, "calls": s.calls, "busy_calls": s.busy_calls, "packets": s.packets,
                "passed_on": g.passed_on(&n.name), "drops": s.drops,
                "cycles_per_packet": (s.cycles_per_packet() * 100.0).round() / 100.0,
                "panics": n.stats.panics.get(), "panic_drops": n.stats.panic_drops.get(),
                "fenced": n.stats.fenced.get() != 0, "fenced_drops": n.stats.fenced_drops.get(),
                "first_panic": n.stats.first_panic.get(), "counters": counters_of(n), "gauges": gauges_of(n)}),
        );
    }
    json!({ "nodes": nodes })
}

fn lcores(f: &Figures) -> Value {
    let Some(g) = &f.graph else { return json!({}) };
    let hz = ironpath_eal::tsc::tsc_hz().max(1) as f64;
    let mut out = Map::new();
    for (lc, st) in &g.lcore_stats {
        out.insert(
            lc.to_string(),
            json!({"rx_mode": st.rx_mode().name(), "walks": st.walks.get(), "busy_walks": st.busy_walks.get(),
                "received": st.received.get(), "busy_cycles": st.busy_cycles.get(), "sleeps": st.sleeps.get(),
                "wakeups": {"rx": st.wake_rx.get(), "doorbell": st.wake_bell.get(), "timer": st.wake_timer.get()},
                "asleep_seconds": (st.asleep_cycles.get() as f64 / hz * 1000.0).round() / 1000.0,
                "kept_polling": st.kept_polling.get()}),
        );
    }
    Value::Object(out)
}

fn tcp(f: &Figures) -> Value {
    let Some(g) = &f.graph else { return json!({}) };
    let mut out = Map::new();
    for n in g.nodes.iter().filter(|n| n.type_name == "tcp") {
        let c = counters_of(n);
        let get = |k: &str| c.get(k).and_then(Value::as_u64).unwrap_or(0);
        let open = get("conns_opened").saturating_sub(get("conns_closed"));
        out.insert(n.name.clone(), json!({"connections_open": open, "states": gauges_of(n), "counters": c}));
    }
    out.into()
}
