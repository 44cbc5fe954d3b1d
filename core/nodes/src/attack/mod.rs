//! The attack corpus: what every node kind must survive before it is done
//! (docs/graph.md, "Writing a node"; DESIGN.md, "Trust boundaries").
//!
//! [`Subject::of`] builds a node of any kind from [`CONFIGS`] (small bounds, so that
//! they bite) with in-process ports, and [`Subject::attack`] sends it frames in
//! bursts at advancing virtual time, checking after every call that
//!
//! * it did not panic (a panic fails the test, naming the kind);
//! * every packet it was given is accounted for: still in the burst for a declared
//!   edge (or [`DROP`]), held by the node, or gone with a counter that moved (its
//!   own counters, its drops, or a packet a port sent);
//! * what it holds stays bounded ([`HELD_MAX`] packets of the input, [`OWN_MAX`]
//!   of its own pool), also under floods of new flows, addresses and MACs;
//!
//! and [`Subject::finish`] runs time on for an hour of idle walks, stops the node and
//! checks that no packet of either pool is left in use.
//!
//! The frames are [`corpus::standard`] (valid frames of every protocol the nodes
//! parse, every truncation of each, bad lengths and checksums, extension-header
//! chains, fragments, VLAN stacks, runts, jumbos) and [`corpus::flood`]. The test
//! at the end of this file runs every kind of [`crate::KINDS`] through them; the
//! `node_kinds` fuzz target feeds the same subjects arbitrary frames.

pub mod corpus;
pub mod frames;

use crate::{Env, NodeKind};
use ironpath_config::{Nexts, NodeSpec};
use ironpath_eal::port::testing::{feed_rxq, sink_txq, FeedDevice, SinkDevice};
use ironpath_eal::{Burst, Mbuf, MemPolicy, Mempool, MempoolConfig, RxQ, TxQ};
use ironpath_graph::testing::{call, idle};
use ironpath_graph::{Dispatch, Node, NodeStats, DROP};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// The MACs of the ports `p0`, `p1`, `p2`.
pub const OUR_MACS: [[u8; 6]; 3] = [[0x02, 0, 0, 0, 1, 0], [0x02, 0, 0, 0, 1, 1], [0x02, 0, 0, 0, 1, 2]];
/// A peer on `p0`.
pub const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
/// Our IPv4 address on `p0` (198.18.1.1/24).
pub const OUR4: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 1);
/// The peer's IPv4 address.
pub const PEER4: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 2);
/// A host on `p1`'s subnet (198.18.2.0/24).
pub const REMOTE4: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 2);
/// A host behind a gateway (198.18.5.0/24 via 198.18.2.2).
pub const ROUTED4: Ipv4Addr = Ipv4Addr::new(198, 18, 5, 9);
/// Our IPv6 address on `p0` (fd00:1::1/64).
pub const OUR6: Ipv6Addr = Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 1);
/// The peer's IPv6 address.
pub const PEER6: Ipv6Addr = Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 2);
/// A host on `p1`'s subnet (fd00:2::/64).
pub const REMOTE6: Ipv6Addr = Ipv6Addr::new(0xfd00, 2, 0, 0, 0, 0, 0, 2);

/// Packets of the input a node may hold at any time under attack.
pub const HELD_MAX: u64 = 2048;
/// Packets of its own pool (4096 buffers) a node may hold at any time under attack.
pub const OWN_MAX: u64 = 2048;
/// Virtual TSC ticks per second.
pub const HZ: u64 = 1_000_000_000;

/// The configuration each node kind is attacked with: its params (YAML flow
/// mapping) and, for kinds whose next edges are its ports, the edges connected.
/// A new kind must add its line (the test below fails without it).
pub const CONFIGS: &[(&str, &str, &[&str])] = &[
    ("port_rx", "{port: p0, burst: 64}", &[]),
    ("port_tx", "{port: p0}", &[]),
    ("tx_batch", "{port: p0, coalesce: 16, completion: {every: 64}}", &[]),
    ("classify", "{}", &[]),
    ("arp", "{port: p0, addresses: [198.18.1.1], hold: 2, max_tries: 2, retry: 10ms, max_entries: 64}", &[]),
    ("icmp_echo", "{port: p0, addresses: [198.18.1.1, fd00:1::1]}", &[]),
    ("macswap", "{}", &[]),
    ("drop", "{}", &[]),
    ("counter", "{}", &[]),
    ("l2_bridge", "{max_entries: 256, age_s: 60}", &["p0", "p1", "p2"]),
    (
        "l2_bridge",
        "{max_entries: 64, vlan_aware: true, members: [{port: p1, vlans: \"0,10,100\"}]}",
        &["p0", "p1", "p2"],
    ),
    ("pcap_capture", "{file: /dev/null, snaplen: 128}", &[]),
    ("mirror", "{mode: share}", &[]),
    ("mirror", "{mode: copy}", &[]),
    ("handoff", "{}", &["w0", "w1", "w2", "w3"]),
    (
        "acl",
        "{rules: [{action: deny, proto: udp, dport: \"53\"}, {action: count, src: 198.18.0.0/15}, \
         {action: permit, proto: tcp, dport: 80-443}, {action: deny, src: fd00::/8, proto: tcp}], default: deny}",
        &[],
    ),
    ("vlan", "{action: push, vid: 10}", &[]),
    ("vlan", "{action: pop, untagged: drop}", &[]),
    ("vlan", "{action: rewrite, vid: 20, match_vid: 10}", &[]),
    (
        "ip_router",
        "{interfaces: [{port: p0, addresses: \"198.18.1.1/24 fd00:1::1/64\"}, \
         {port: p1, addresses: \"198.18.2.1/24 fd00:2::1/64\", mtu: 1280}], \
         routes: [{prefix: 198.18.5.0/24, via: 198.18.2.2}, {prefix: 198.18.6.0/24, type: unreachable}, \
         {prefix: \"fd00:5::/64\", via: \"fd00:2::2\"}], \
         neighbours: 64, resolving: 16, hold: 2, retry: 10ms, max_tries: 2, icmp_burst: 10}",
        &["p0", "p1", "local"],
    ),
    ("rx_aggregate", "{mode: gro, max_flows: 16, max_held: 256, flush: timeout, flush_us: 1ms}", &[]),
    ("rx_aggregate", "{mode: lro, max_flows: 8, lro_mempool: big}", &[]),
    ("gso", "{mss: 536}", &[]),
    ("impair", "{loss: 10%, duplicate: 10%, corrupt: 10%, delay: 1ms, jitter: 1ms, max_held: 512}", &[]),
    (
        "tcp",
        "{port: p0, addresses: [198.18.1.1, fd00:1::1], max_connections: 128, max_per_peer: 16, \
         memory_limit: 1048576, max_time_wait: 64, max_neighbours: 64, seed: 7, time_wait: 1s, \
         header_timeout: 2s, send_timeout: 2s, keepalive_timeout: 2s, \
         listen: [{port: 80, app: http, objects: \"/a=100,/b=100000\", backlog: 32}, {port: 7, app: echo}, \
         {port: 9, app: discard}], connect: [{to: 198.18.1.2, port: 80, app: http_get, requests: 3}]}",
        &[],
    ),
    ("source", "{burst: 8, count: 64, flows: 4}", &[]),
    (
        "policer",
        "{algorithm: trtcm, cir: 1000000, cbs: 3000, pir: 2000000, pbs: 6000, color_aware: true, \
         yellow_in: \"10,12\", red_in: \"14-16\", per: flow, flows: 64, yellow: remark, yellow_dscp: 12}",
        &[],
    ),
    (
        "policer",
        "{rate_unit: pps, cir: 1000, cbs: 8, ebs: 8, per: dscp, green: remark, green_dscp: 46, \
         yellow: remark, yellow_dscp: 0, red: pass}",
        &[],
    ),
    ("bond", "{members: [{port: p0}, {port: p1}], mode: lacp, lacp_rate: fast}", &[]),
    ("bond", "{members: [{port: p0}, {port: p1}, {port: p2}], mode: active_backup}", &[]),
    ("bond_tx", "{bond: b}", &[]),
    (
        "vxlan",
        "{port: p0, local: 198.18.1.1, remotes: [198.18.1.2, 198.18.2.2], vni: 100, max_macs: 64, mtu: 1400}",
        &[],
    ),
    (
        "nat44",
        "{outside: p0, addresses: [198.18.1.1], inside: \"198.18.2.0/24 198.18.5.0/24\", filtering: endpoint-independent, \
         max_sessions: 256, max_sessions_per_host: 32, mss_clamp: 1200, udp_timeout: 2s, tcp_transitory: 2s, \
         forwards: [{proto: tcp, port: 80, to: 198.18.2.2}, {proto: udp, port: 5353, to: 198.18.5.9, to_port: 53}]}",
        &[],
    ),
];

/// In-process ports `p0`..`p2` (ids 0..2), one pool for what nodes make (and one of
/// large buffers, `big`, made when a node asks for it).
struct AttackEnv {
    own: Mempool,
    big: std::cell::OnceCell<Mempool>,
    feeds: Vec<Arc<FeedDevice>>,
    sinks: Vec<Arc<SinkDevice>>,
    shared: std::collections::HashMap<String, Arc<dyn std::any::Any + Send + Sync>>,
}

/// The node a kind with a [`ironpath_config::ParamKind::Node`] parameter refers to,
/// by the referred type: built first, on the same ports, and called once so that
/// it is running (a `bond_tx` needs its `bond`).
const REFERRED: &[(&str, &str)] = &[(
    "bond",
    "{name: b, type: bond, lcore: 0, params: {members: [{port: p0}, {port: p1}, {port: p2}], mode: balance}}",
)];

fn port_index(port: &str) -> Result<u16, String> {
    match port {
        "p0" => Ok(0),
        "p1" => Ok(1),
        "p2" => Ok(2),
        _ => Err(format!("no port `{port}`")),
    }
}

impl Env for AttackEnv {
    fn rx_queue(&mut self, port: &str, _queue: u16) -> Result<RxQ, String> {
        let (q, dev) = feed_rxq(port_index(port)?);
        self.feeds.push(dev);
        Ok(q)
    }
    fn tx_queue(&mut self, port: &str, _queue: u16) -> Result<TxQ, String> {
        port_index(port)?;
        // Room for a few bursts: a full queue is part of the attack.
        let (q, dev) = sink_txq(128, false);
        self.sinks.push(dev);
        Ok(q)
    }
    fn port_mac(&self, port: &str) -> Result<[u8; 6], String> {
        Ok(OUR_MACS[usize::from(port_index(port)?)])
    }
    fn port_id(&self, port: &str) -> Result<u16, String> {
        port_index(port)
    }
    fn mempool(&self, name: Option<&str>, _: Option<&str>) -> Result<Mempool, String> {
        if name == Some("big") {
            let big = || {
                let cfg =
                    MempoolConfig::new("attack-big", 64).cache_size(0).data_room(u16::MAX).policy(MemPolicy::NoHuge);
                Mempool::create(&cfg).expect("create mempool")
            };
            return Ok(self.big.get_or_init(big).clone());
        }
        Ok(self.own.clone())
    }
    fn tsc_hz(&self) -> u64 {
        HZ
    }
    fn shared(
        &mut self,
        key: &str,
        make: &mut dyn FnMut() -> Arc<dyn std::any::Any + Send + Sync>,
    ) -> Option<Arc<dyn std::any::Any + Send + Sync>> {
        Some(self.shared.entry(key.to_owned()).or_insert_with(make).clone())
    }
}

/// A node under attack, with what it was built with.
pub struct Subject {
    /// Its type and params (for messages).
    pub what: String,
    node: Box<dyn Node>,
    stats: NodeStats,
    nexts: usize,
    source: bool,
    /// Pool of the frames sent to it, each in one buffer (so a packet is one buffer
    /// and the accounting is exact).
    input: Mempool,
    /// Pool of frames sent to it as chains of 2 KiB buffers (jumbo frames).
    chained: Mempool,
    /// Pools it makes packets from.
    own: Vec<Mempool>,
    env: AttackEnv,
    /// The nodes it refers to (its `bond`), kept alive with it.
    _helpers: Vec<Box<dyn Node>>,
    /// Virtual TSC.
    now: u64,
    /// Calls so far.
    pub calls: u64,
    /// Input buffers that left circulation, counter moves, and buffers beyond the
    /// first of the packets given (chains), over the calls so far.
    gone: u64,
    counted: u64,
    extra_buffers: u64,
}

/// A pool of `n` packet buffers without a cache (so `in_use` is exact).
fn pool(name: &str, n: u32) -> Mempool {
    Mempool::create(&MempoolConfig::new(name, n).cache_size(0).policy(MemPolicy::NoHuge)).expect("create mempool")
}

impl Subject {
    /// A node of `kind` (registered in `kinds`) built from `params` through the
    /// pipeline check and the kind's constructor, with `connected` next edges (all its
    /// declared ones when empty), frames from `input`.
    pub fn of(kind: &NodeKind, params: &str, connected: &[&str], input: &Inputs) -> Subject {
        let type_name = kind.spec.type_name;
        let referred: Vec<(&NodeKind, &str)> = kind
            .spec
            .params
            .iter()
            .filter_map(|p| match p.kind {
                ironpath_config::ParamKind::Node(t) => {
                    let k = crate::KINDS.iter().find(|k| k.spec.type_name == t).expect("a referred kind");
                    let line = REFERRED.iter().find(|r| r.0 == t).expect("REFERRED has the referred kind").1;
                    Some((*k, line))
                }
                _ => None,
            })
            .collect();
        let specs: Vec<NodeSpec> = std::iter::once(kind.spec).chain(referred.iter().map(|r| r.0.spec)).collect();
        let catalog = ironpath_config::Catalog { nodes: &specs, drivers: None };
        let more: String = referred.iter().map(|r| format!("  - {}\n", r.1)).collect();
        let yaml = format!(
            "mempools: [{{name: pkts, size: 4096}}, {{name: big, size: 64, data_room: 65535}}]\nports:\n  - {{name: p0, driver: net_null}}\n  - {{name: p1, \
             driver: net_null}}\n  - {{name: p2, driver: net_null}}\nlcores: [{{id: 0}}]\nnodes:\n  - {{name: n, \
             type: {type_name}, lcore: 0, params: {params}}}\n{more}"
        );
        let what = format!("{type_name} {params}");
        let pipe = ironpath_config::parse_str(&yaml, std::path::Path::new("attack.yaml"), &catalog)
            .unwrap_or_else(|e| panic!("{what}: the attack configuration is refused: {e}"));
        let declared: Vec<&str> = match kind.spec.nexts {
            Nexts::Fixed(names) => names.to_vec(),
            _ => Vec::new(),
        };
        let connected: Vec<&str> = if connected.is_empty() { declared } else { connected.to_vec() };
        let mut env = AttackEnv {
            own: pool("attack-own", 4096),
            big: std::cell::OnceCell::new(),
            feeds: Vec::new(),
            sinks: Vec::new(),
            shared: std::collections::HashMap::new(),
        };
        let mut helpers = Vec::new();
        for (i, (k, _)) in referred.iter().enumerate() {
            let mut h = crate::make_from(&[*k], &pipe.nodes[1 + i], &["out"], &mut env)
                .unwrap_or_else(|e| panic!("{what}: its {} not built: {e}", k.spec.type_name))
                .node;
            let st = NodeStats::new(h.counters()).with_gauges(h.gauges());
            let mut b = Burst::new();
            call(&mut *h, &st, &mut b, HZ);
            b.free_all();
            helpers.push(h);
        }
        let decl = crate::make_from(&[kind], &pipe.nodes[0], &connected, &mut env)
            .unwrap_or_else(|e| panic!("{what}: not built: {e}"));
        let stats = NodeStats::new(decl.node.counters()).with_gauges(decl.node.gauges());
        Subject {
            what,
            nexts: decl.nexts.len(),
            source: decl.source,
            node: decl.node,
            stats,
            input: input.whole.clone(),
            chained: input.chained.clone(),
            own: [Some(env.own.clone()), env.big.get().cloned()].into_iter().flatten().collect(),
            env,
            _helpers: helpers,
            now: HZ,
            calls: 0,
            gone: 0,
            counted: 0,
            extra_buffers: 0,
        }
    }

    /// Every counter the node moves when it takes a packet out of circulation: its
    /// own, its drops, and what its ports sent.
    fn accounted(&self) -> u64 {
        let own: u64 = self.stats.extra().map(|(_, v)| v).fold(0, u64::wrapping_add);
        let sent: u64 = self.env.sinks.iter().map(|s| s.logged() as u64).sum();
        own.wrapping_add(self.stats.drops.get()).wrapping_add(sent)
    }

    /// The node's input packets (buffers): queued at its ports or held by it.
    fn input_in_use(&self) -> u64 {
        u64::from(self.input.in_use()) + u64::from(self.chained.in_use())
    }

    /// One call with `frames` (received on `port`), `step` virtual ticks after the
    /// last; a source takes them from its port instead. Checks the call. With
    /// `chained`, the frames come in chains of 2 KiB buffers (the accounting allows a
    /// packet's buffers beyond the first).
    pub fn call(&mut self, frames: &[&[u8]], port: u16, step: u64, chained: bool) {
        self.now += step;
        let mut b = Burst::new();
        let pool = if chained { &self.chained } else { &self.input };
        for f in frames {
            let Ok(mut m) = Mbuf::from_slice(pool, f) else { break };
            m.header_mut().port = port;
            // A packet of n buffers leaves circulation as n: one counted, n - 1 allowed.
            self.extra_buffers += u64::from(m.header().nb_segs.saturating_sub(1));
            if self.source && !self.env.feeds.is_empty() {
                self.env.feeds[0].push(m);
            } else if b.push(m).is_err() {
                break;
            }
        }
        let given = b.len() as u64;
        let before_in = self.input_in_use();
        let before_counts = self.accounted();
        let first: Vec<u8> = frames.first().map_or(Vec::new(), |f| f[..f.len().min(64)].to_vec());
        let (node, stats, now) = (&mut self.node, &self.stats, self.now);
        let c = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(&mut **node, stats, &mut b, now))) {
            Ok(c) => c,
            Err(p) => {
                let msg =
                    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned());
                panic!(
                    "{}: panicked ({}) on a burst of {} frame(s) from port {port}, the first starting {first:02x?}",
                    self.what,
                    msg.unwrap_or_default(),
                    frames.len()
                )
            }
        };
        self.calls += 1;
        let what = &self.what;
        let outputs = b.len();
        match c.dispatch {
            Dispatch::All(k) => {
                assert!(k == DROP || usize::from(k) < self.nexts, "{what}: All({k}) of {} nexts", self.nexts)
            }
            Dispatch::Each => {
                for (i, &k) in c.next[..outputs].iter().enumerate() {
                    assert!(
                        k == DROP || usize::from(k) < self.nexts,
                        "{what}: packet {i} to next {k} of {}",
                        self.nexts
                    );
                }
            }
            Dispatch::Consumed => {}
        }
        for i in 0..outputs {
            assert!(b.pkt_len(i) > 0 || b.header(i).nb_segs > 0, "{what}: an output without a buffer");
        }
        // Packets of the input that left circulation moved a counter, in this call or
        // before (a packet sent is counted when the port takes it, and may come back
        // to the pool only when its completion is reported).
        let after_in = self.input_in_use();
        self.gone += before_in.saturating_sub(after_in);
        self.counted += self.accounted().wrapping_sub(before_counts);
        assert!(
            self.gone <= self.counted + self.extra_buffers,
            "{what}: {} input buffers left circulation with {} counter moves and {} buffers of chains beyond their \
             first (this call was given {given}; call {}; counters: {}drops={})",
            self.gone,
            self.counted,
            self.extra_buffers,
            self.calls,
            self.counters(),
            self.stats.drops.get()
        );
        b.free_all();
        self.check_bounds();
    }

    /// What the node holds is within [`HELD_MAX`] and [`OWN_MAX`].
    pub fn check_bounds(&self) {
        let held = self.input_in_use() - self.env.feeds.iter().map(|f| f.queued() as u64).sum::<u64>();
        let own: u64 = self.own.iter().map(|p| u64::from(p.in_use())).sum();
        assert!(held <= HELD_MAX, "{}: holds {held} input packets (bound {HELD_MAX})", self.what);
        assert!(own <= OWN_MAX, "{}: holds {own} packets of its own pool (bound {OWN_MAX})", self.what);
    }

    /// Send `frames` in bursts of up to `burst`, `step` ticks apart, round-robin over
    /// ports 0, 0, 1, 0, 7 (7: no port of the node); `chained` as in [`Subject::call`].
    pub fn attack(&mut self, frames: &[Vec<u8>], burst: usize, step: u64, chained: bool) {
        const PORTS: [u16; 5] = [0, 0, 1, 0, 7];
        for (k, chunk) in frames.chunks(burst.max(1)).enumerate() {
            let refs: Vec<&[u8]> = chunk.iter().map(Vec::as_slice).collect();
            self.call(&refs, PORTS[k % PORTS.len()], step, chained);
        }
    }

    /// Run time on for an hour of empty calls and idle walks (timers fire, held
    /// packets leave or are dropped), stop the node, and check that no packet of the
    /// input or of its pool is left in use.
    pub fn finish(mut self) {
        for k in 0..3600 {
            self.call(&[], 0, HZ / 4, false);
            idle(&mut *self.node, &self.stats, self.now);
            if k % 8 == 0 {
                self.call(&[], 0, HZ / 2, false);
            }
        }
        self.node.stop();
        let what = self.what.clone();
        let (input, chained, own) = (self.input.clone(), self.chained.clone(), self.own.clone());
        drop(self);
        assert_eq!(input.stats().in_use + chained.stats().in_use, 0, "{what}: input packets left in use after stop");
        for p in own {
            assert_eq!(p.stats().in_use, 0, "{what}: packets of its own pool left in use after stop");
        }
    }

    /// The node's counters (for messages).
    pub fn counters(&self) -> String {
        self.stats.extra().filter(|(_, v)| *v > 0).map(|(s, v)| format!("{}={v} ", s.name)).collect()
    }
}

/// The subject of line `i` of [`CONFIGS`] (a kind of [`crate::KINDS`]), with frames
/// from `input`.
pub fn subject(i: usize, input: &Inputs) -> Subject {
    let (t, params, connected) = CONFIGS[i];
    let kind = crate::KINDS.iter().find(|k| k.spec.type_name == t).expect("CONFIGS names kinds of the registry");
    Subject::of(kind, params, connected, input)
}

/// The pools the attack's frames come from.
#[derive(Clone)]
pub struct Inputs {
    /// Buffers that hold any frame of the corpus whole.
    pub whole: Mempool,
    /// 2 KiB buffers: jumbo frames come as chains.
    pub chained: Mempool,
}

impl Inputs {
    /// New pools (4096 whole buffers, 8192 for chains).
    pub fn new() -> Inputs {
        Self::sized(4096, 8192)
    }

    /// New pools of `whole` buffers that hold any frame and `chained` 2 KiB ones.
    pub fn sized(whole: u32, chained: u32) -> Inputs {
        let cfg =
            MempoolConfig::new("attack-input", whole).cache_size(0).data_room(9216 + 128).policy(MemPolicy::NoHuge);
        Inputs { whole: Mempool::create(&cfg).expect("create mempool"), chained: pool("attack-chained", chained) }
    }

    /// Buffers in use in either pool.
    pub fn in_use(&self) -> u32 {
        self.whole.stats().in_use + self.chained.stats().in_use
    }
}

impl Default for Inputs {
    fn default() -> Self {
        Self::new()
    }
}

/// The protocol groups of [`corpus::valid`] the fuzz seeds are cut into: a name and
/// whether a frame belongs.
type Group = (&'static str, fn(&[u8]) -> bool);

/// Which frames of the corpus start which seed (`fuzz/seeds/TARGET/NAME`).
pub const SEED_GROUPS: &[Group] = &[
    ("arp", |f| frames::l3(f).is_some_and(|(_, t)| t == 0x0806)),
    ("ipv4", |f| {
        frames::l3(f).is_some_and(|(at, t)| t == 0x0800 && f.get(at + 6).is_some_and(|b| b & 0x3f == 0))
            && f[12] != 0x81
            && f[12] != 0x88
    }),
    ("ipv4-frag-opts-errors", |f| {
        frames::l3(f).is_some_and(|(at, t)| {
            t == 0x0800 && (f[at] != 0x45 || f.get(at + 6).is_some_and(|b| b & 0x3f != 0) || f.get(at + 9) == Some(&1))
        })
    }),
    ("nd", |f| {
        frames::l3(f).is_some_and(|(at, t)| {
            t == 0x86dd && f.get(at + 6) == Some(&58) && f.get(at + 40).is_some_and(|b| (133..=137).contains(b))
        })
    }),
    ("ipv6-ext-frag", |f| {
        frames::l3(f)
            .is_some_and(|(at, t)| t == 0x86dd && f.get(at + 6).is_some_and(|b| matches!(b, 0 | 43 | 44 | 51 | 60)))
    }),
    ("ipv6", |f| {
        frames::l3(f).is_some_and(|(at, t)| t == 0x86dd && f.get(at + 6).is_some_and(|b| matches!(b, 6 | 17 | 58)))
    }),
    ("vlan", |f| matches!(f.get(12..14), Some([0x81, 0x00] | [0x88, 0xa8]))),
    ("other", |f| frames::l3(f).is_some_and(|(_, t)| !matches!(t, 0x0800 | 0x86dd | 0x0806))),
];

/// The committed fuzz seeds, as bytes: per target and group of [`SEED_GROUPS`], the
/// group's frames of [`corpus::valid`] up to 256 bytes (a seed sets how long
/// the fuzzer's inputs may grow) in the target's input format
/// (`node_kinds`: one seed per subject of [`CONFIGS`] and group).
pub fn fuzz_seeds() -> Vec<(String, Vec<u8>)> {
    let valid = corpus::valid();
    let mut out = Vec::new();
    for (group, member) in SEED_GROUPS {
        let frames: Vec<&Vec<u8>> = valid.iter().filter(|f| f.len() <= 256 && member(f)).take(32).collect();
        let le = |f: &Vec<u8>| (f.len() as u16).to_le_bytes();
        // node_kinds: subject, then one burst (count, step, flags: port 0, whole buffers).
        for (i, (kind, ..)) in CONFIGS.iter().enumerate() {
            let mut b = vec![i as u8, frames.len() as u8, 1, 0];
            for f in &frames {
                b.extend_from_slice(&le(f));
                b.extend_from_slice(f);
            }
            out.push((format!("node_kinds/{i:02}-{kind}-{group}"), b));
        }
        // ip_router: one burst (count, step), each frame flagged as from port 0.
        let mut b = vec![frames.len() as u8, 1];
        for f in &frames {
            b.push(0);
            b.extend_from_slice(&le(f));
            b.extend_from_slice(f);
        }
        out.push((format!("ip_router/{group}"), b));
        // l2_forward: one burst (count, step), each frame from port 0.
        let mut b = vec![frames.len() as u8, 1];
        for f in &frames {
            b.push(0);
            b.extend_from_slice(&le(f));
            b.extend_from_slice(f);
        }
        out.push((format!("l2_forward/{group}"), b));
        // nodes: flags (no checksum verified by a NIC), then the frames.
        let mut b = vec![0];
        for f in &frames {
            b.extend_from_slice(&le(f));
            b.extend_from_slice(f);
        }
        out.push((format!("nodes/{group}"), b));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fuzz/seeds holds [`fuzz_seeds`] (`IRONPATH_WRITE_SEEDS=1` writes them).
    #[test]
    fn the_fuzz_seeds_are_the_corpus() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
        let write = std::env::var_os("IRONPATH_WRITE_SEEDS").is_some();
        let seeds = fuzz_seeds();
        for (name, bytes) in &seeds {
            let path = root.join(name);
            if write {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, bytes).unwrap();
            }
            let have = std::fs::read(&path).unwrap_or_default();
            assert!(
                &have == bytes,
                "{} is not the corpus's (IRONPATH_WRITE_SEEDS=1 cargo test ... writes it)",
                path.display()
            );
        }
        for (group, member) in SEED_GROUPS {
            assert!(corpus::valid().iter().any(|f| member(f)), "no frame of group {group}");
        }
    }

    #[test]
    fn every_kind_has_an_attack_configuration() {
        for k in crate::KINDS {
            assert!(
                CONFIGS.iter().any(|(t, ..)| *t == k.spec.type_name),
                "node kind `{}` has no line in attack::CONFIGS: a node is not done until it passes the attack corpus",
                k.spec.type_name
            );
        }
    }

    #[test]
    fn the_corpus_holds_what_it_says() {
        let v = corpus::valid();
        assert!(v.len() >= 35, "{}", v.len());
        let all = corpus::standard();
        assert!(all.len() > 20 * v.len(), "{}", all.len());
        // Each valid frame is what it claims: its IP lengths already agree.
        for f in &v {
            let mut g = f.clone();
            frames::fix_ip_lengths(&mut g);
            assert_eq!(&g, f, "a valid frame whose lengths do not agree: {f:02x?}");
        }
        let flood = corpus::flood(1, 64);
        let macs: std::collections::HashSet<&[u8]> = flood.iter().map(|f| &f[6..12]).collect();
        assert_eq!(macs.len(), 64, "each flood frame has a new source MAC");
    }

    /// Every node kind through the standard corpus, a flood, and an hour of
    /// timers: no panic, every packet accounted for, bounded state, nothing leaked.
    #[test]
    fn every_node_kind_passes_the_attack_corpus() {
        let input = Inputs::new();
        let standard = corpus::standard();
        let flood = corpus::flood(0x5eed, 20_000);
        for i in 0..CONFIGS.len() {
            let mut s = subject(i, &input);
            s.attack(&standard, 32, HZ / 1000, false);
            s.attack(&flood, 32, HZ / 10_000, false);
            // Jumbo frames as chains; bursts of one and of 256.
            s.attack(&standard, 32, HZ / 1000, true);
            s.attack(&standard[..standard.len() / 4], 1, 1, false);
            s.attack(&flood[..4096], 256, HZ / 100, false);
            eprintln!("{}: {} calls, {}", s.what, s.calls, s.counters());
            s.finish();
        }
        assert_eq!(input.in_use(), 0);
    }
}
