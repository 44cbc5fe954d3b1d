//! `ironpath-nodes`: the built-in graph nodes and their catalog.
//!
//! It owns:
//! * [`CATALOG`]: every node type's parameters and next edges, which `core/config`
//!   checks pipeline files against;
//! * the nodes: `port_rx`/`port_tx` ([`port`]), [`classify`], [`arp`] (replies and
//!   neighbour resolution), [`icmp`] (`icmp_echo`: echo and IPv6 neighbour
//!   solicitation), `macswap`/`counter`/`drop` ([`simple`]), [`capture`]
//!   (`pcap_capture`), [`source`] (a traffic generator);
//! * [`make`]: one node from its validated configuration, with the ports, queues
//!   and pools it needs from an [`Env`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod arp;
pub mod capture;
mod catalog;
pub mod classify;
pub mod doc;
pub mod icmp;
pub mod port;
pub mod simple;
pub mod source;

pub use catalog::CATALOG;

use ironpath_config::NodeCfg;
use ironpath_eal::{Mempool, RxQ, TxQ};
use ironpath_graph::{Node, NodeDecl};
use std::net::IpAddr;

/// What building a node needs from the application: port queues, MACs, pools.
pub trait Env {
    /// The receive queue `queue` of port `port` (each queue to one node only).
    fn rx_queue(&mut self, port: &str, queue: u16) -> Result<RxQ, String>;
    /// The transmit queue `queue` of port `port` (each queue to one node only).
    fn tx_queue(&mut self, port: &str, queue: u16) -> Result<TxQ, String>;
    /// The MAC address of port `port`.
    fn port_mac(&self, port: &str) -> Result<[u8; 6], String>;
    /// Pool `name`, or else the pool of port `port`, or else the first pool.
    fn mempool(&self, name: Option<&str>, port: Option<&str>) -> Result<Mempool, String>;
    /// TSC ticks per second.
    fn tsc_hz(&self) -> u64;
}

/// Build the node `cfg` describes; `connected` names its next edges that lead somewhere.
pub fn make(cfg: &NodeCfg, connected: &[&str], env: &mut dyn Env) -> Result<NodeDecl, String> {
    let spec = CATALOG
        .iter()
        .find(|s| s.type_name == cfg.type_name)
        .ok_or_else(|| format!("unknown node type `{}`", cfg.type_name))?;
    let p = &cfg.params;
    let uint = |k: &str| p.uint(k).unwrap_or(0);
    let node: Box<dyn Node> = match spec.type_name {
        "port_rx" => {
            let port = p.port("port").unwrap_or_default();
            Box::new(port::PortRx::new(env.rx_queue(port, uint("queue") as u16)?, uint("burst") as usize))
        }
        "port_tx" => {
            let port = p.port("port").unwrap_or_default();
            Box::new(port::PortTx::new(env.tx_queue(port, uint("queue") as u16)?, uint("retries") as u32))
        }
        "classify" => Box::new(classify::Classify::new(connected)),
        "arp" => {
            let port = p.port("port").unwrap_or_default();
            let addresses: Vec<_> = p
                .ip_list("addresses")
                .unwrap_or_default()
                .iter()
                .filter_map(|a| match a {
                    IpAddr::V4(v) => Some(*v),
                    IpAddr::V6(_) => None,
                })
                .collect();
            if addresses.is_empty() {
                return Err(
                    "`addresses` holds no IPv4 address (ARP is IPv4 only; IPv6 neighbours are answered by icmp_echo)"
                        .into(),
                );
            }
            let hz = env.tsc_hz();
            let cfg = arp::ArpConfig {
                mac: env.port_mac(port)?,
                addresses,
                hold: uint("hold") as usize,
                retry_tsc: (p.duration_us("retry").unwrap_or(1_000_000) as u128 * hz as u128 / 1_000_000) as u64,
                max_tries: uint("max_tries") as u32,
                max_entries: uint("max_entries") as usize,
            };
            Box::new(arp::Arp::new(cfg, env.mempool(p.mempool("mempool"), Some(port))?))
        }
        "icmp_echo" => {
            let port = p.port("port").unwrap_or_default();
            let (mut v4, mut v6) = (Vec::new(), Vec::new());
            for a in p.ip_list("addresses").unwrap_or_default() {
                match a {
                    IpAddr::V4(v) => v4.push(*v),
                    IpAddr::V6(v) => v6.push(*v),
                }
            }
            Box::new(icmp::IcmpEcho::new(v4, v6, env.port_mac(port)?))
        }
        "macswap" => Box::new(simple::MacSwap),
        "counter" => Box::new(simple::CounterNode),
        "drop" => Box::new(simple::DropNode),
        "pcap_capture" => {
            let file = p.path("file").unwrap_or_else(|| std::path::Path::new(""));
            let c = capture::Capture::create(file, uint("snaplen") as usize, uint("max_packets"))
                .map_err(|e| format!("cannot create `{}`: {e}", file.display()))?;
            Box::new(c)
        }
        "source" => {
            let sc = source::SourceConfig {
                size: uint("size") as usize,
                burst: uint("burst") as usize,
                flows: uint("flows") as u32,
                src_mac: p.mac("src_mac").unwrap_or_default(),
                dst_mac: p.mac("dst_mac").unwrap_or_default(),
                src_ip: p.ipv4("src_ip").unwrap_or(std::net::Ipv4Addr::UNSPECIFIED),
                dst_ip: p.ipv4("dst_ip").unwrap_or(std::net::Ipv4Addr::UNSPECIFIED),
                rate_pps: uint("rate_pps"),
                count: uint("count"),
            };
            let pool = env.mempool(p.mempool("mempool"), None)?;
            let room = usize::from(pool.data_room()).saturating_sub(usize::from(ironpath_eal::abi::PKTMBUF_HEADROOM));
            if sc.size > room {
                return Err(format!(
                    "size {} does not fit mempool `{}` (data room {} minus headroom {}); raise its data_room",
                    sc.size,
                    pool.name(),
                    pool.data_room(),
                    ironpath_eal::abi::PKTMBUF_HEADROOM
                ));
            }
            Box::new(source::Source::new(sc, pool, env.tsc_hz()))
        }
        other => return Err(format!("node type `{other}` has no constructor")),
    };
    Ok(NodeDecl {
        name: cfg.name.clone(),
        type_name: cfg.type_name.clone(),
        lcore: cfg.lcore,
        nexts: spec.nexts.names().iter().map(|s| s.to_string()).collect(),
        source: spec.source,
        node,
    })
}
