//! `ironpath-nodes`: the built-in graph nodes and their registry.
//!
//! Each node kind is one value, a [`NodeKind`] defined in its own module: its
//! catalog entry (parameters with their defaults, next edges, scheduling) and its
//! constructor. [`KINDS`] lists them once; [`CATALOG`], which `core/config`
//! checks pipeline files against, and the node reference of
//! `docs/pipeline-yaml.md` ([`doc`]) are derived from that list.
//!
//! The nodes: `port_rx`/`port_tx` ([`port`]), [`classify`], [`arp`] (replies and
//! neighbour resolution), [`icmp`] (`icmp_echo`: echo and IPv6 neighbour
//! solicitation), `macswap`/`counter`/`drop` ([`simple`]), [`capture`]
//! (`pcap_capture`), [`mirror`], [`handoff`], [`acl`], [`l2_bridge`],
//! [`vlan`] (802.1Q/802.1ad tag push, pop and rewrite), [`policer`] (RFC 2697/2698
//! meters with pass, drop or DSCP remark per colour), [`vxlan`] (a VXLAN tunnel
//! endpoint), [`router`] (`ip_router`:
//! IPv4/IPv6 longest-prefix match, neighbour resolution, ICMP errors), [`source`] (a traffic
//! generator), [`txbatch`] (`tx_batch`),
//! [`aggregate`] (`rx_aggregate`, `gso`), [`impair`], [`tcp`]. [`make`] builds one
//! node from its validated configuration, with the ports, queues and pools it
//! needs from an [`Env`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(any(test, feature = "test-utils"))]
pub mod attack;
pub mod doc;
#[cfg(test)]
mod example;
mod hash;
pub mod kind;
pub mod offload;

pub use kind::{Build, NodeError, NodeKind};

use ironpath_config::{Nexts, NodeCfg, NodeSpec};
use ironpath_eal::{Mempool, RxQ, TxQ};
use ironpath_graph::NodeDecl;

/// The registry, one line per module: `module: KIND, ...;` declares the module
/// (`pub mod module;`, its file `src/module.rs` or `src/module/mod.rs`) and lists
/// the node kinds it defines. [`KINDS`] and [`CATALOG`] (their specs) both come from
/// this list, in the order the documentation shows them.
macro_rules! kinds {
    ($($module:ident: $($($seg:ident)::+),+;)*) => {
        $(pub mod $module;)*
        /// Every node kind, in the order the documentation lists them.
        pub static KINDS: &[&NodeKind] = &[$($(&$module::$($seg)::+),+),*];
        /// Every node kind's spec (what `core/config` checks pipeline files against).
        pub static CATALOG: &[NodeSpec] = &[$($($module::$($seg)::+.spec),+),*];
    };
}

kinds! {
    port: PORT_RX, PORT_TX;
    txbatch: KIND;
    classify: KIND;
    arp: KIND;
    icmp: KIND;
    simple: MACSWAP, DROP, COUNTER;
    l2_bridge: KIND;
    capture: KIND;
    mirror: KIND;
    handoff: KIND;
    acl: KIND;
    vlan: KIND;
    policer: KIND;
    vxlan: KIND;
    nat44: KIND;
    bond: BOND, BOND_TX;
    router: KIND;
    aggregate: node::RX_AGGREGATE, node::GSO;
    impair: KIND;
    tcp: KIND;
    source: KIND;
}

/// What building a node needs from the application: port queues, MACs, pools.
pub trait Env {
    /// The receive queue `queue` of port `port` (each queue to one node only).
    fn rx_queue(&mut self, port: &str, queue: u16) -> Result<RxQ, String>;
    /// The transmit queue `queue` of port `port` (each queue to one node only).
    fn tx_queue(&mut self, port: &str, queue: u16) -> Result<TxQ, String>;
    /// The MAC address of port `port`.
    fn port_mac(&self, port: &str) -> Result<[u8; 6], String>;
    /// The id of port `port` (what its received packets carry in `port`).
    fn port_id(&self, port: &str) -> Result<u16, String>;
    /// The TX offloads port `port` can do (`abi::TX_*`); 0 by default.
    fn port_tx_offloads(&self, _port: &str) -> u64 {
        0
    }
    /// Pool `name`, or else the pool of port `port`, or else the first pool.
    fn mempool(&self, name: Option<&str>, port: Option<&str>) -> Result<Mempool, String>;
    /// TSC ticks per second.
    fn tsc_hz(&self) -> u64;

    /// The administrative state flag of `port` (true: up), read by its port nodes
    /// once per burst; `None`: always up.
    fn admin_state(&self, _port: &str) -> Option<std::sync::Arc<std::sync::atomic::AtomicBool>> {
        None
    }

    /// The link state flag of `port` (true: up), kept current by the application
    /// (every 100 ms) while the pipeline runs; `None`: taken as always up.
    fn link_state(&mut self, _port: &str) -> Option<std::sync::Arc<std::sync::atomic::AtomicBool>> {
        None
    }

    /// The object the nodes of one pipeline share under `key` (a bond's `bond` and
    /// `bond_tx`): the first asked for makes it with `make`. `None` where the
    /// application keeps no such objects (each node then has its own).
    fn shared(
        &mut self,
        _key: &str,
        _make: &mut dyn FnMut() -> std::sync::Arc<dyn std::any::Any + Send + Sync>,
    ) -> Option<std::sync::Arc<dyn std::any::Any + Send + Sync>> {
        None
    }
}

/// Build the node `cfg` describes; `connected` names its next edges that lead somewhere.
pub fn make(cfg: &NodeCfg, connected: &[&str], env: &mut dyn Env) -> Result<NodeDecl, NodeError> {
    make_from(KINDS, cfg, connected, env)
}

/// As [`make`], with the kind looked up in `kinds` (a test's own registry).
pub fn make_from(
    kinds: &[&NodeKind],
    cfg: &NodeCfg,
    connected: &[&str],
    env: &mut dyn Env,
) -> Result<NodeDecl, NodeError> {
    let kind = kinds
        .iter()
        .find(|k| k.spec.type_name == cfg.type_name)
        .ok_or_else(|| NodeError::UnknownType(cfg.type_name.clone()))?;
    let node = (kind.build)(&Build { cfg, connected }, env)?;
    Ok(NodeDecl {
        name: cfg.name.clone(),
        type_name: cfg.type_name.clone(),
        lcore: cfg.lcore,
        nexts: match kind.spec.nexts {
            Nexts::Fixed(names) => names.iter().map(|s| s.to_string()).collect(),
            // One per port its edges connect, in the order the node was given them.
            Nexts::Ports | Nexts::PortsAnd(_) => connected.iter().map(|s| s.to_string()).collect(),
        },
        source: kind.spec.source,
        node,
        port: port_role(kind, cfg),
    })
}

/// The port a node of a queue-using kind (`port_rx`, `port_tx` ...) serves.
fn port_role(kind: &NodeKind, cfg: &NodeCfg) -> Option<(String, ironpath_graph::PortRole)> {
    let role = match kind.spec.queue {
        ironpath_config::QueueUse::Rx => ironpath_graph::PortRole::Rx,
        ironpath_config::QueueUse::Tx => ironpath_graph::PortRole::Tx,
        _ => return None,
    };
    match cfg.params.get("port") {
        Some(ironpath_config::ParamValue::Port(p)) => Some((p.clone(), role)),
        _ => None,
    }
}

/// Fixtures shared by the node tests (frame builders, a pool, one-call helpers), and
/// the catalog's own checks.
#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ironpath_eal::{Burst, MemPolicy, MempoolConfig};
    use ironpath_graph::testing::{self, Call};
    use ironpath_graph::{Dispatch, Node, NodeStats};
    use ironpath_wire::icmpv6::Icmpv6Repr;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// Runs `node` (with next edges `nexts`, none connected) alone in a graph on a
    /// thread of its own, as an lcore, while `f` sends it table commands through
    /// the graph's controllers.
    pub(crate) fn running(node: Box<dyn Node>, nexts: &[&str], f: impl FnOnce(&ironpath_graph::GraphInfo)) {
        let decl = ironpath_graph::NodeDecl {
            name: "node".into(),
            type_name: "test".into(),
            lcore: 0,
            nexts: nexts.iter().map(|n| n.to_string()).collect(),
            source: false,
            node,
            port: None,
        };
        let mut g = ironpath_graph::build(vec![decl], &[], &[(0, None)]).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut lc = g.lcores.pop().unwrap();
        let t = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    lc.run_once();
                }
                lc
            })
        };
        f(&g.info);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        drop(t.join().unwrap());
    }

    /// A table command's answer (`None`: no node took it).
    pub(crate) fn ctl(info: &ironpath_graph::GraphInfo, line: &str) -> Option<Result<String, String>> {
        info.control(&line.split_whitespace().collect::<Vec<_>>())
    }

    /// Our MAC (the node's port).
    pub(crate) const US_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
    /// The neighbour's MAC.
    pub(crate) const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
    /// Our IPv4 address.
    pub(crate) const US4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
    /// The neighbour's IPv4 address.
    pub(crate) const PEER4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    /// Our IPv6 address.
    pub(crate) const US6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
    /// The neighbour's IPv6 address.
    pub(crate) const PEER6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);

    /// A private pool of `n` mbufs without cache, so `in_use` is exact.
    /// A small deterministic generator for the random tests (xorshift; the seed must
    /// not be zero).
    pub(crate) struct Rng(pub(crate) u64);

    impl Rng {
        pub(crate) fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        /// A number below `m`.
        pub(crate) fn below(&mut self, m: u64) -> u64 {
            self.next() % m
        }

        /// `n` random bytes.
        pub(crate) fn bytes(&mut self, n: usize) -> Vec<u8> {
            (0..n).map(|_| self.next() as u8).collect()
        }

        /// One of `xs`.
        pub(crate) fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
            xs[(self.next() % xs.len() as u64) as usize]
        }
    }

    pub(crate) fn pool(n: u32) -> Mempool {
        Mempool::create(&MempoolConfig::new("nodes-test", n).cache_size(0).policy(MemPolicy::NoHuge))
            .expect("create mempool")
    }

    /// A burst holding copies of `frames`.
    pub(crate) fn burst(pool: &Mempool, frames: &[Vec<u8>]) -> Burst {
        let mut b = Burst::new();
        for f in frames {
            let m = ironpath_eal::Mbuf::from_slice(pool, f).expect("mbuf");
            assert!(b.push(m).is_ok(), "burst full");
        }
        b
    }

    /// Stats for `node`'s declared counters.
    pub(crate) fn stats(node: &dyn Node) -> NodeStats {
        NodeStats::new(node.counters()).with_gauges(node.gauges())
    }

    /// Run `node` once on `pkts` at TSC `now`.
    pub(crate) fn call(node: &mut dyn Node, st: &NodeStats, pkts: &mut Burst, now: u64) -> Call {
        testing::call(node, st, pkts, now)
    }

    /// The value of counter `name` (which must be declared).
    pub(crate) fn counter(st: &NodeStats, name: &str) -> u64 {
        st.extra_by_name(name).unwrap_or_else(|| panic!("no counter `{name}`"))
    }

    /// Every packet's next edge (as the engine reads `dispatch`) and bytes; the
    /// burst is freed.
    pub(crate) fn outputs(c: &Call, pkts: &mut Burst) -> Vec<(u16, Vec<u8>)> {
        let out = (0..pkts.len())
            .map(|i| {
                let next = match c.dispatch {
                    Dispatch::All(k) => k,
                    Dispatch::Each => c.next[i],
                    Dispatch::Consumed => ironpath_graph::DROP,
                };
                (next, pkts.data(i).to_vec())
            })
            .collect();
        pkts.free_all();
        out
    }

    pub(crate) use crate::attack::frames::{arp, eth, icmp4_echo, icmp6, ipv4, ipv6, udp};

    /// A full Ethernet/IPv4/ICMP echo request from the peer to `dst`.
    pub(crate) fn ping4(dst: Ipv4Addr, seq_no: u16, data: &[u8]) -> Vec<u8> {
        eth(US_MAC, PEER_MAC, 0x0800, &ipv4(PEER4, dst, 1, 64, &icmp4_echo(false, 0x1234, seq_no, data)))
    }

    /// A full Ethernet/IPv6/ICMPv6 echo request from the peer to `dst`.
    pub(crate) fn ping6(dst: Ipv6Addr, seq_no: u16, data: &[u8]) -> Vec<u8> {
        let repr = Icmpv6Repr::EchoRequest { ident: 0x4321, seq_no, data_len: data.len() };
        eth(US_MAC, PEER_MAC, 0x86dd, &ipv6(PEER6, dst, 58, 64, &icmp6(repr, PEER6, dst, data)))
    }

    /// An [`Env`] with one pool (every node's) and no port, a 1 GHz clock.
    pub(crate) struct PoolEnv(pub(crate) Mempool);

    impl Env for PoolEnv {
        fn rx_queue(&mut self, port: &str, _: u16) -> Result<RxQ, String> {
            Err(format!("no port `{port}`"))
        }
        fn tx_queue(&mut self, port: &str, _: u16) -> Result<TxQ, String> {
            Err(format!("no port `{port}`"))
        }
        fn port_mac(&self, port: &str) -> Result<[u8; 6], String> {
            Err(format!("no port `{port}`"))
        }
        fn port_id(&self, port: &str) -> Result<u16, String> {
            Err(format!("no port `{port}`"))
        }
        fn mempool(&self, _: Option<&str>, _: Option<&str>) -> Result<Mempool, String> {
            Ok(self.0.clone())
        }
        fn tsc_hz(&self) -> u64 {
            1_000_000_000
        }
    }

    /// An [`Env`] without ports or pools (for nodes that need neither).
    struct NoEnv;

    impl Env for NoEnv {
        fn rx_queue(&mut self, port: &str, _: u16) -> Result<RxQ, String> {
            Err(format!("no port `{port}`"))
        }
        fn tx_queue(&mut self, port: &str, _: u16) -> Result<TxQ, String> {
            Err(format!("no port `{port}`"))
        }
        fn port_mac(&self, port: &str) -> Result<[u8; 6], String> {
            Err(format!("no port `{port}`"))
        }
        fn port_id(&self, port: &str) -> Result<u16, String> {
            Err(format!("no port `{port}`"))
        }
        fn mempool(&self, _: Option<&str>, _: Option<&str>) -> Result<Mempool, String> {
            Err("no mempool".into())
        }
        fn tsc_hz(&self) -> u64 {
            1_000_000_000
        }
    }

    /// The example node kind of docs/graph.md, registered in a registry of its own,
    /// goes from YAML (its default filled in by the validation) to a running node.
    #[test]
    fn the_example_kind_builds_from_yaml_and_runs() {
        let kinds: &[&NodeKind] = &[&example::KIND];
        let catalog = ironpath_config::Catalog { nodes: &[example::KIND.spec], drivers: None };
        let yaml = "lcores: [{id: 0}]\nnodes:\n  - {name: s3, type: sample, lcore: 0, params: {every: 3}}\n  - {name: s, type: sample, lcore: 0}\n";
        let p = ironpath_config::parse_str(yaml, std::path::Path::new("s.yaml"), &catalog).expect("valid");
        assert_eq!(p.nodes[1].params.uint("every"), Some(10), "the spec's default");
        let mut d = make_from(kinds, &p.nodes[0], &[], &mut NoEnv).expect("built");
        assert_eq!(d.nexts, ["out"]);
        let pool = pool(16);
        let st = stats(&*d.node);
        let frames: Vec<Vec<u8>> = (0..7u8).map(|k| eth(US_MAC, PEER_MAC, 0x0800, &[k; 46])).collect();
        let mut pkts = burst(&pool, &frames);
        let c = call(&mut *d.node, &st, &mut pkts, 0);
        let out = outputs(&c, &mut pkts);
        assert_eq!(out, [(0, frames[2].clone()), (0, frames[5].clone())]);
        assert_eq!((counter(&st, "passed"), counter(&st, "dropped")), (2, 5));
        assert!(matches!(make(&p.nodes[0], &[], &mut NoEnv), Err(NodeError::UnknownType(t)) if t == "sample"));
        assert_eq!(pool.stats().in_use, 0);
    }

    /// docs/graph.md shows `src/example.rs` whole: the documentation's example is
    /// the code built and tested here.
    #[test]
    fn docs_show_the_example_node_as_built() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let doc = std::fs::read_to_string(root.join("../../docs/graph.md")).expect("docs/graph.md");
        let code = std::fs::read_to_string(root.join("src/example.rs")).expect("example.rs");
        let block = format!("```rust\n{code}```\n");
        assert!(doc.contains(&block), "docs/graph.md must hold core/nodes/src/example.rs verbatim in a rust block");
    }

    /// `classify` built from the catalog sends each class of packet to the next edge
    /// its spec names for it: the spec's edge order is the node's index order (the
    /// edges connected in another order).
    #[test]
    fn catalog_classify_sends_each_class_to_the_edge_of_its_name() {
        use ironpath_wire::arp::ArpOperation;
        use ironpath_wire::IpAddress;
        let yaml = "lcores: [{id: 0}]\nnodes:\n  - {name: c, type: classify, lcore: 0}\n";
        let catalog = ironpath_config::Catalog { nodes: CATALOG, drivers: None };
        let p = ironpath_config::parse_str(yaml, std::path::Path::new("c.yaml"), &catalog).expect("valid");
        let mut connected: Vec<&str> = classify::NEXTS.to_vec();
        connected.reverse();
        let mut d = make(&p.nodes[0], &connected, &mut NoEnv).expect("built");
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("arp", eth([0xff; 6], PEER_MAC, 0x0806, &arp(ArpOperation::Request, PEER_MAC, PEER4, [0; 6], US4))),
            ("icmp", ping4(US4, 1, b"ping")),
            ("tcp", eth(US_MAC, PEER_MAC, 0x0800, &ipv4(PEER4, US4, 6, 64, &[0x50; 20]))),
            (
                "udp",
                eth(
                    US_MAC,
                    PEER_MAC,
                    0x0800,
                    &ipv4(PEER4, US4, 17, 64, &udp(IpAddress::V4(PEER4), IpAddress::V4(US4), 1, 2, b"")),
                ),
            ),
            ("ipv4", eth(US_MAC, PEER_MAC, 0x0800, &ipv4(PEER4, US4, 47, 64, &[0; 4]))),
            ("icmp6", ping6(US6, 1, b"ping")),
            ("ipv6", eth(US_MAC, PEER_MAC, 0x86dd, &ipv6(PEER6, US6, 59, 64, b""))),
            ("other", eth([0x01, 0x80, 0xc2, 0, 0, 0x0e], PEER_MAC, 0x88cc, &[0; 46])),
        ];
        let pool = pool(16);
        let st = stats(&*d.node);
        let frames: Vec<Vec<u8>> = cases.iter().map(|(_, f)| f.clone()).collect();
        let mut pkts = burst(&pool, &frames);
        let c = call(&mut *d.node, &st, &mut pkts, 0);
        let out = outputs(&c, &mut pkts);
        for ((want, _), (edge, _)) in cases.iter().zip(&out) {
            assert_eq!(d.nexts.get(usize::from(*edge)).map(String::as_str), Some(*want), "edge {edge}");
        }
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn the_catalog_lists_the_basic_kinds() {
        let names: Vec<_> = CATALOG.iter().map(|s| s.type_name).collect();
        for n in [
            "port_rx",
            "port_tx",
            "classify",
            "arp",
            "icmp_echo",
            "macswap",
            "pcap_capture",
            "drop",
            "counter",
            "source",
        ] {
            assert!(names.contains(&n), "{n} missing from CATALOG");
        }
    }
}
