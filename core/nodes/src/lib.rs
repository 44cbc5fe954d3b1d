//! `ironpath-nodes`: the built-in graph nodes and their catalog.
//!
//! It owns:
//! * [`CATALOG`]: every node type's parameters and next edges, which `core/config`
//!   checks pipeline files against;
//! * the nodes: `port_rx`/`port_tx` ([`port`]), [`classify`], [`arp`] (replies and
//!   neighbour resolution), [`icmp`] (`icmp_echo`: echo and IPv6 neighbour
//!   solicitation), `macswap`/`counter`/`drop` ([`simple`]), [`capture`]
//!   (`pcap_capture`), [`source`] (a traffic generator);
//! * [`txbatch`] (`tx_batch`): batched TX with bounded delay and explicit completions;
//! * [`make`]: one node from its validated configuration, with the ports, queues
//!   and pools it needs from an [`Env`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod aggregate;
pub mod arp;
pub mod capture;
mod catalog;
pub mod classify;
pub mod doc;
pub mod icmp;
pub mod impair;
pub mod offload;
pub mod port;
pub mod simple;
pub mod source;
pub mod tcp;
pub mod txbatch;

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
    /// The TX offloads port `port` can do (`abi::TX_*`); 0 by default.
    fn port_tx_offloads(&self, _port: &str) -> u64 {
        0
    }
    /// Pool `name`, or else the pool of port `port`, or else the first pool.
    fn mempool(&self, name: Option<&str>, port: Option<&str>) -> Result<Mempool, String>;
    /// TSC ticks per second.
    fn tsc_hz(&self) -> u64;
}

/// The `tcp` node of validated parameters `p`.
fn make_tcp(node: &NodeCfg, env: &mut dyn Env) -> Result<tcp::TcpNode, String> {
    let p = &node.params;
    use std::time::Duration;
    let port = p.port("port").unwrap_or_default();
    let uint = |k: &str| p.uint(k).unwrap_or(0);
    let dur = |k: &str| Duration::from_micros(p.duration_us(k).unwrap_or(0));
    let flag = |k: &str| p.bool(k).unwrap_or(false);
    let algo = |v: Option<&str>| match v {
        Some("newreno") => Some(ironpath_tcp::Congestion::NewReno),
        Some(_) => Some(ironpath_tcp::Congestion::Cubic),
        None => None,
    };
    let addresses: Vec<ironpath_wire::IpAddress> =
        p.ip_list("addresses").unwrap_or_default().iter().map(|a| (*a).into()).collect();
    let cfg = ironpath_tcp::Config {
        mss: uint("mss") as u16,
        send_buffer: uint("send_buffer") as usize,
        recv_buffer: uint("recv_buffer") as usize,
        initial_window: uint("initial_window") as u32,
        rto_min: dur("rto_min"),
        rto_initial: dur("rto_initial"),
        ack_delay: dur("ack_delay"),
        msl: dur("time_wait") / 2,
        nagle: flag("nagle"),
        timestamps: flag("timestamps"),
        window_scaling: flag("window_scaling"),
        sack: flag("sack"),
        congestion: algo(p.str("congestion")).unwrap_or_default(),
        syn_cookies: p.bool("syn_cookies").unwrap_or(true),
        keepalive: (!dur("keepalive_idle").is_zero()).then(|| ironpath_tcp::Keepalive {
            idle: dur("keepalive_idle"),
            interval: dur("keepalive_interval"),
            probes: uint("keepalive_probes") as u32,
        }),
        idle_timeout: Some(dur("idle_timeout")).filter(|d| !d.is_zero()),
        fin_wait2_timeout: Some(dur("fin_wait2_timeout")).filter(|d| !d.is_zero()),
        send_timeout: Some(dur("send_timeout")).filter(|d| !d.is_zero()),
        // TSO when the port can cut segments: up to 64 KiB of payload per packet
        // (IPv4's total length leaves 65535 - 20 - 60 for the data).
        tso_max: if flag("tso") && env.port_tx_offloads(port) & ironpath_eal::abi::TX_TCP_SEG != 0 {
            65_000
        } else {
            0
        },
        ..ironpath_tcp::Config::default()
    };
    let listen = p
        .records("listen")
        .unwrap_or_default()
        .iter()
        .map(|r| tcp::ListenCfg {
            port: r.uint("port").unwrap_or(0) as u16,
            app: r.str("app").unwrap_or("discard").to_owned(),
            backlog: r.uint("backlog").unwrap_or(1024) as usize,
            bytes: r.uint("bytes").unwrap_or(0),
            root: r.path("root").map(|x| x.to_owned()),
            objects: r.str("objects").unwrap_or("").to_owned(),
            congestion: algo(r.str("congestion")),
            dotfiles: r.bool("dotfiles").unwrap_or(false),
        })
        .collect();
    let connect = p
        .records("connect")
        .unwrap_or_default()
        .iter()
        .map(|r| tcp::ConnectCfg {
            to: r.ip_list("to").and_then(|l| l.first().copied()).map(Into::into).unwrap_or(addresses[0]),
            port: r.uint("port").unwrap_or(0) as u16,
            app: r.str("app").unwrap_or("discard").to_owned(),
            bytes: r.uint("bytes").unwrap_or(0),
            path: r.str("path").unwrap_or("/").to_owned(),
            save: r.path("save").map(|x| x.to_owned()),
            count: r.uint("count").unwrap_or(1) as u32,
            requests: r.uint("requests").unwrap_or(1),
            congestion: algo(r.str("congestion")),
        })
        .collect();
    let mut secret = [0u8; 16];
    match uint("seed") {
        0 => random_secret(&mut secret)?,
        s => {
            log::warn!(
                "tcp node `{}`: a fixed `seed` ({s}) makes initial sequence numbers, SYN cookies and \
                 hash keys predictable to anyone who knows it; use it for tests only",
                node.name
            );
            secret[..8].copy_from_slice(&s.to_le_bytes());
        }
    }
    let tc = tcp::TcpConfig {
        mac: env.port_mac(port)?,
        addresses,
        tcp: cfg,
        listen,
        connect,
        max_connections: uint("max_connections") as usize,
        tsc_hz: env.tsc_hz(),
        isn_secret: secret,
        tx_inflight_limit: uint("tx_inflight_limit"),
        memory_limit: uint("memory_limit"),
        max_time_wait: uint("max_time_wait") as usize,
        limits: tcp::TcpLimits {
            pool_share: uint("pool_share") as u32,
            max_per_peer: uint("max_per_peer") as u32,
            max_neighbours: uint("max_neighbours") as usize,
            header_timeout: Some(dur("header_timeout")).filter(|d| !d.is_zero()),
            keepalive_timeout: Some(dur("keepalive_timeout")).filter(|d| !d.is_zero()),
        },
    };
    tcp::TcpNode::new(tc, env.mempool(p.mempool("mempool"), Some(port))?)
}

/// Fills `secret` from the kernel's random source (`getrandom(2)`, blocking only
/// until the kernel's pool is first seeded, at boot).
fn random_secret(secret: &mut [u8]) -> Result<(), String> {
    let mut got = 0;
    while got < secret.len() {
        match rustix::rand::getrandom(&mut secret[got..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => got += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(format!("cannot read random bytes for the TCP secrets (getrandom): {e}")),
        }
    }
    Ok(())
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
            let fixup = offload::TxFixup::new(env.port_tx_offloads(port), env.mempool(None, Some(port))?);
            Box::new(port::PortTx::new(env.tx_queue(port, uint("queue") as u16)?, uint("retries") as u32, fixup))
        }
        "tx_batch" => {
            let port = p.port("port").unwrap_or_default();
            let hz = env.tsc_hz();
            let us = |v: u64| ironpath_eal::txbatch::us_to_tsc(v, hz);
            let completion = match p.variant("completion") {
                Some(("every", Some(n))) => ironpath_eal::Completion::Every(n as u32),
                Some(("timer_us", Some(t))) => ironpath_eal::Completion::Timer(us(t)),
                _ => ironpath_eal::Completion::Immediate,
            };
            let cfg = ironpath_eal::TxBatchConfig {
                coalesce: uint("coalesce") as usize,
                flush_tsc: us(p.duration_us("flush_us").unwrap_or(100)),
                flush_on_idle: p.bool("flush_on_idle").unwrap_or(true),
                completion,
                retries: uint("retries") as u32,
                hz,
            };
            let q = env.tx_queue(port, uint("queue") as u16)?;
            let fixup = offload::TxFixup::new(env.port_tx_offloads(port), env.mempool(None, Some(port))?);
            Box::new(txbatch::TxBatch::new(ironpath_eal::TxBatcher::new(q, cfg), hz, fixup))
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
        "rx_aggregate" => {
            use aggregate::{AggrConfig, Aggregator, Flush, Mode};
            let mode = match p.str("mode").unwrap_or("gro") {
                "lro" => Mode::Lro,
                "off" => return Ok(decl(cfg, spec, Box::new(aggregate::node::RxAggregate::new(None)))),
                _ => Mode::Gro,
            };
            let lro_pool = match (mode, p.mempool("lro_mempool")) {
                (Mode::Lro, None) => return Err("mode lro needs `lro_mempool` (a mempool of large buffers)".into()),
                (_, Some(name)) => Some(env.mempool(Some(name), None)?),
                _ => None,
            };
            let ac = AggrConfig {
                mode,
                max_bytes: uint("max_bytes") as u32,
                max_segments: uint("max_segments") as u16,
                max_flows: uint("max_flows") as usize,
                max_held: uint("max_held") as usize,
                flush: if p.str("flush") == Some("timeout") { Flush::Timeout } else { Flush::Burst },
                flush_tsc: (u128::from(p.duration_us("flush_us").unwrap_or(100)) * u128::from(env.tsc_hz()) / 1_000_000)
                    as u64,
                drop_bad: p.str("bad") == Some("drop"),
            };
            Box::new(aggregate::node::RxAggregate::new(Some(Aggregator::new(ac, lro_pool))))
        }
        "gso" => Box::new(aggregate::node::Gso::new(env.mempool(p.mempool("mempool"), None)?, uint("mss") as u16)),
        "impair" => {
            let pct = |k: &str| impair::parse_ppm(p.str(k).unwrap_or("0%")).map_err(|e| format!("`{k}`: {e}"));
            let hz = u128::from(env.tsc_hz());
            let us = |k: &str| (u128::from(p.duration_us(k).unwrap_or(0)) * hz / 1_000_000) as u64;
            let ic = impair::ImpairConfig {
                seed: uint("seed"),
                loss_ppm: pct("loss")?,
                duplicate_ppm: pct("duplicate")?,
                corrupt_ppm: pct("corrupt")?,
                delay_tsc: us("delay"),
                jitter_tsc: us("jitter"),
                max_held: uint("max_held") as usize,
            };
            Box::new(impair::Impair::new(ic, env.mempool(p.mempool("mempool"), None)?))
        }
        "tcp" => Box::new(make_tcp(cfg, env)?),
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
    Ok(decl(cfg, spec, node))
}

fn decl(cfg: &NodeCfg, spec: &ironpath_config::NodeSpec, node: Box<dyn Node>) -> NodeDecl {
    NodeDecl {
        name: cfg.name.clone(),
        type_name: cfg.type_name.clone(),
        lcore: cfg.lcore,
        nexts: spec.nexts.names().iter().map(|s| s.to_string()).collect(),
        source: spec.source,
        node,
    }
}

/// Fixtures shared by the node tests (frame builders, a pool, one-call helpers), and
/// the catalog's own checks.
#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ironpath_eal::{Burst, MemPolicy, MempoolConfig};
    use ironpath_graph::testing::{self, Call};
    use ironpath_graph::{Dispatch, NodeStats};
    use ironpath_wire::arp::{ArpOperation, ArpPacket, ArpRepr};
    use ironpath_wire::ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
    use ironpath_wire::icmpv4::{Icmpv4Packet, Icmpv4Repr};
    use ironpath_wire::icmpv6::{Icmpv6Packet, Icmpv6Repr};
    use ironpath_wire::ipv4::{Ipv4Packet, Ipv4Repr};
    use ironpath_wire::ipv6::{Ipv6Packet, Ipv6Repr};
    use ironpath_wire::udp::{UdpPacket, UdpRepr};
    use ironpath_wire::{IpAddress, IpProtocol};
    use std::net::{Ipv4Addr, Ipv6Addr};

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

    /// An Ethernet frame.
    pub(crate) fn eth(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + payload.len()];
        EthernetRepr {
            dst_addr: EthernetAddress(dst),
            src_addr: EthernetAddress(src),
            ethertype: EtherType(ethertype),
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
        f[14..].copy_from_slice(payload);
        f
    }

    /// An ARP packet (28 bytes, no Ethernet header).
    pub(crate) fn arp(op: ArpOperation, sha: [u8; 6], spa: Ipv4Addr, tha: [u8; 6], tpa: Ipv4Addr) -> Vec<u8> {
        let mut p = vec![0u8; 28];
        ArpRepr {
            operation: op,
            source_hardware_addr: EthernetAddress(sha),
            source_protocol_addr: spa,
            target_hardware_addr: EthernetAddress(tha),
            target_protocol_addr: tpa,
        }
        .emit(&mut ArpPacket::new_unchecked(&mut p[..]));
        p
    }

    /// An IPv4 packet (20-byte header, valid checksum, TTL `ttl`).
    pub(crate) fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, ttl: u8, payload: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; 20 + payload.len()];
        Ipv4Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: IpProtocol(proto),
            payload_len: payload.len(),
            hop_limit: ttl,
        }
        .emit(&mut Ipv4Packet::new_unchecked(&mut p[..]));
        p[20..].copy_from_slice(payload);
        p
    }

    /// An ICMP echo request (`reply`: an echo reply) with a valid checksum.
    pub(crate) fn icmp4_echo(reply: bool, ident: u16, seq_no: u16, data: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; 8 + data.len()];
        p[8..].copy_from_slice(data);
        let data_len = data.len();
        let repr = if reply {
            Icmpv4Repr::EchoReply { ident, seq_no, data_len }
        } else {
            Icmpv4Repr::EchoRequest { ident, seq_no, data_len }
        };
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut p[..]));
        p
    }

    /// A UDP datagram with a valid checksum for these addresses.
    pub(crate) fn udp(src: IpAddress, dst: IpAddress, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; 8 + payload.len()];
        p[8..].copy_from_slice(payload);
        UdpRepr { src_port: sport, dst_port: dport, payload_len: payload.len() }.emit(
            &mut UdpPacket::new_unchecked(&mut p[..]),
            &src,
            &dst,
        );
        p
    }

    /// An IPv6 packet whose payload (extension headers included) is `payload`.
    pub(crate) fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, hop: u8, payload: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; 40 + payload.len()];
        Ipv6Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: IpProtocol(next),
            payload_len: payload.len(),
            hop_limit: hop,
        }
        .emit(&mut Ipv6Packet::new_unchecked(&mut p[..]));
        p[40..].copy_from_slice(payload);
        p
    }

    /// An ICMPv6 message for `repr` (echo `data` after the header) with a valid checksum.
    pub(crate) fn icmp6(repr: Icmpv6Repr, src: Ipv6Addr, dst: Ipv6Addr, data: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; repr.buffer_len().max(8 + data.len())];
        p[8..8 + data.len()].copy_from_slice(data);
        repr.emit(&mut Icmpv6Packet::new_unchecked(&mut p[..]), &src, &dst);
        p
    }

    /// A full Ethernet/IPv4/ICMP echo request from the peer to `dst`.
    pub(crate) fn ping4(dst: Ipv4Addr, seq_no: u16, data: &[u8]) -> Vec<u8> {
        eth(US_MAC, PEER_MAC, 0x0800, &ipv4(PEER4, dst, 1, 64, &icmp4_echo(false, 0x1234, seq_no, data)))
    }

    /// A full Ethernet/IPv6/ICMPv6 echo request from the peer to `dst`.
    pub(crate) fn ping6(dst: Ipv6Addr, seq_no: u16, data: &[u8]) -> Vec<u8> {
        let repr = Icmpv6Repr::EchoRequest { ident: 0x4321, seq_no, data_len: data.len() };
        eth(US_MAC, PEER_MAC, 0x86dd, &ipv6(PEER6, dst, 58, 64, &icmp6(repr, PEER6, dst, data)))
    }

    #[test]
    fn catalog_classify_nexts_are_the_nodes_nexts() {
        let spec = CATALOG.iter().find(|s| s.type_name == "classify").expect("classify in catalog");
        assert_eq!(spec.nexts.names(), classify::NEXTS);
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
