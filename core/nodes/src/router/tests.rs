//! The router against hand-made frames: two interfaces, hosts a (on p0) and b (on p1).

use super::checks::martian4_src;
use super::config::{IfaceCfg, RouterCfg};
use super::fast::{martian16, martian16_map};
use super::*;
use crate::tests::{arp, burst, call, counter, eth, icmp4_echo, icmp6, ipv4, ipv6, pool, stats, udp};
use ironpath_eal::abi;
use ironpath_graph::NodeStats;
use ironpath_wire::arp::ArpOperation;
use ironpath_wire::checksum;
use ironpath_wire::icmpv6::{Icmpv6Packet, Icmpv6Repr};
use ironpath_wire::IpAddress;

const R0: [u8; 6] = [0x02, 0, 0, 0, 1, 0];
const R1: [u8; 6] = [0x02, 0, 0, 0, 1, 1];
const A_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const B_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];
const A4: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 2);
const B4: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 2);
const R0_4: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 1);
const R1_4: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 1);
const A6: Ipv6Addr = Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 2);
const B6: Ipv6Addr = Ipv6Addr::new(0xfd00, 2, 0, 0, 0, 0, 0, 2);
const R0_6: Ipv6Addr = Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 1);
const R1_6: Ipv6Addr = Ipv6Addr::new(0xfd00, 2, 0, 0, 0, 0, 0, 1);
const HZ: u64 = 1_000_000;

fn router(pool: &Mempool, icmp_burst: u64) -> Router {
    router_with(pool, icmp_burst, &[])
}

/// [`router`] with more routes.
fn router_with(pool: &Mempool, icmp_burst: u64, more: &[String]) -> Router {
    let (cfg, tune) = config_with(icmp_burst, more);
    Router::new(&cfg, &[(0, 0, R0), (1, 1, R1)], Some(2), tune, pool.clone()).unwrap()
}

/// [`router_with`] with a 24-bit IPv4 root, whatever the kernel's huge pages.
fn wide_router_with(pool: &Mempool, icmp_burst: u64, more: &[String]) -> Router {
    let (cfg, tune) = config_with(icmp_burst, more);
    let r = Router::with_wide_root(&cfg, &[(0, 0, R0), (1, 1, R1)], Some(2), tune, pool.clone()).unwrap();
    assert_eq!(r.fib4().root_bits(), 24);
    r
}

/// The configuration of [`router_with`].
fn config_with(icmp_burst: u64, more: &[String]) -> (RouterCfg, Tuning) {
    let ifaces = vec![
        IfaceCfg::new("p0", &["198.18.1.1/24", "fd00:1::1/64"]).unwrap(),
        IfaceCfg { mtu: 1400, ..IfaceCfg::new("p1", &["198.18.2.1/24", "fd00:2::1/64"]).unwrap() },
    ];
    let mut routes = vec![
        "198.18.3.0/24 via 198.18.2.2",
        "fd00:3::/64 via fd00:2::2",
        "198.18.9.0/24 unreachable",
        "198.18.10.0/24 blackhole",
        "198.18.11.0/24 prohibit",
    ];
    routes.extend(more.iter().map(String::as_str));
    let cfg = RouterCfg::new(ifaces, &routes).unwrap();
    let tune = Tuning {
        neigh: NeighConfig {
            max_entries: 64,
            max_pending: 4,
            hold: 2,
            retry_tsc: HZ,
            max_tries: 3,
            reachable_tsc: 60 * HZ,
        },
        icmp_rate: 1,
        icmp_burst,
        icmp_peer_rate: 1000,
        icmp_peer_burst: 1000,
        tsc_hz: HZ,
        max_plies: 1024,
        hash_key: [9; 16],
    };
    (cfg, tune)
}

/// Run the router on frames received on `port`; returns (edge, frame) of what it sends.
fn run(r: &mut Router, st: &NodeStats, pool: &Mempool, port: u16, frames: &[Vec<u8>], now: u64) -> Vec<(u16, Vec<u8>)> {
    let mut b = burst(pool, frames);
    for i in 0..b.len() {
        b.header_mut(i).port = port;
    }
    let c = call(r, st, &mut b, now);
    sent(&c, &mut b)
}

/// What leaves the node (dropped packets left in the burst are not sent).
fn sent(c: &ironpath_graph::testing::Call, b: &mut Burst) -> Vec<(u16, Vec<u8>)> {
    crate::tests::outputs(c, b).into_iter().filter(|(e, _)| *e != DROP).collect()
}

fn dump(st: &NodeStats) -> String {
    RouterCounter::SPECS
        .iter()
        .filter_map(|c| Some((c.name, st.extra_by_name(c.name)?)))
        .filter(|c| c.1 > 0)
        .map(|(n, v)| format!("{n}={v} "))
        .collect()
}

fn udp4(src_mac: [u8; 6], dst_mac: [u8; 6], src: Ipv4Addr, dst: Ipv4Addr, ttl: u8) -> Vec<u8> {
    let u = udp(IpAddress::V4(src), IpAddress::V4(dst), 4000, 33434, &[7; 32]);
    eth(dst_mac, src_mac, 0x0800, &ipv4(src, dst, 17, ttl, &u))
}

fn udp6(src_mac: [u8; 6], dst_mac: [u8; 6], src: Ipv6Addr, dst: Ipv6Addr, hop: u8, len: usize) -> Vec<u8> {
    let u = udp(IpAddress::V6(src), IpAddress::V6(dst), 4000, 33434, &vec![7; len]);
    eth(dst_mac, src_mac, 0x86dd, &ipv6(src, dst, 17, hop, &u))
}

/// `f` forwarded: TTL / hop limit one less (checksum recomputed from scratch), MACs set.
fn forwarded(f: &[u8], dst_mac: [u8; 6], src_mac: [u8; 6]) -> Vec<u8> {
    let mut g = f.to_vec();
    g[0..6].copy_from_slice(&dst_mac);
    g[6..12].copy_from_slice(&src_mac);
    if g[12] == 0x08 {
        g[22] -= 1;
        g[24..26].fill(0);
        let c = !checksum::data(&g[14..34]);
        g[24..26].copy_from_slice(&c.to_be_bytes());
    } else {
        g[21] -= 1;
    }
    g
}

fn arp_reply(from_mac: [u8; 6], from: Ipv4Addr, to_mac: [u8; 6], to: Ipv4Addr) -> Vec<u8> {
    let mut f = eth(to_mac, from_mac, 0x0806, &arp(ArpOperation::Reply, from_mac, from, to_mac, to));
    f.resize(60, 0);
    f
}

fn na(from_mac: [u8; 6], from: Ipv6Addr, to_mac: [u8; 6], to: Ipv6Addr) -> Vec<u8> {
    let repr = Icmpv6Repr::NeighborAdvert {
        flags: ironpath_wire::icmpv6::NeighborFlags::SOLICITED | ironpath_wire::icmpv6::NeighborFlags::OVERRIDE,
        target_addr: from,
        lladdr: Some(ironpath_wire::ethernet::EthernetAddress(from_mac)),
    };
    eth(to_mac, from_mac, 0x86dd, &ipv6(from, to, 58, 255, &icmp6(repr, from, to, &[])))
}

/// Teach the router a's and b's MACs (a and b answer its requests).
fn resolve_both(r: &mut Router, st: &NodeStats, pool: &Mempool) {
    run(r, st, pool, 0, &[arp_reply(A_MAC, A4, R0, R0_4)], 0);
    run(r, st, pool, 1, &[arp_reply(B_MAC, B4, R1, R1_4)], 0);
    // Not awaited: replies create nothing; asked for, they do.
    for k in 0..2 {
        r.ifaces[k].neigh.learn(
            if k == 0 { IpAddr::V4(A4) } else { IpAddr::V4(B4) },
            if k == 0 { A_MAC } else { B_MAC },
            0,
        );
        r.ifaces[k].neigh.learn(
            if k == 0 { IpAddr::V6(A6) } else { IpAddr::V6(B6) },
            if k == 0 { A_MAC } else { B_MAC },
            0,
        );
    }
}

#[test]
fn a_packet_waits_for_arp_then_leaves_with_ttl_checksum_and_macs_rewritten() {
    let pool = pool(64);
    let mut r = router(&pool, 10);
    let st = stats(&r);
    let p = udp4(A_MAC, R0, A4, B4, 64);
    let out = run(&mut r, &st, &pool, 0, std::slice::from_ref(&p), 1);
    // Held; an ARP request for b leaves p1.
    assert_eq!(out.len(), 1);
    let (edge, req) = &out[0];
    assert_eq!(*edge, 1);
    assert_eq!(&req[0..6], &[0xff; 6]);
    assert_eq!(&req[6..12], &R1);
    assert_eq!(&req[12..14], &[0x08, 0x06]);
    assert_eq!(&req[28..32], &R1_4.octets(), "asked from p1's address");
    assert_eq!(&req[38..42], &B4.octets());
    assert_eq!((counter(&st, "held"), counter(&st, "arp_requests")), (1, 1));
    // b answers: the packet leaves with its TTL one less.
    let out = run(&mut r, &st, &pool, 1, &[arp_reply(B_MAC, B4, R1, R1_4)], 2);
    assert_eq!(out, [(1, forwarded(&p, B_MAC, R1))]);
    // Now known: straight through, also to a host behind b (via b).
    let q = udp4(A_MAC, R0, A4, Ipv4Addr::new(198, 18, 3, 7), 9);
    let out = run(&mut r, &st, &pool, 0, &[p.clone(), q.clone()], 3);
    assert_eq!(out, [(1, forwarded(&p, B_MAC, R1)), (1, forwarded(&q, B_MAC, R1))]);
    assert_eq!(counter(&st, "forwarded"), 3);
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn ipv6_waits_for_neighbour_discovery_and_decrements_the_hop_limit() {
    let pool = pool(64);
    let mut r = router(&pool, 10);
    let st = stats(&r);
    let p = udp6(A_MAC, R0, A6, Ipv6Addr::new(0xfd00, 3, 0, 0, 0, 0, 0, 9), 64, 40);
    let out = run(&mut r, &st, &pool, 0, std::slice::from_ref(&p), 1);
    assert_eq!(out.len(), 1);
    let (edge, ns) = &out[0];
    assert_eq!(*edge, 1);
    assert_eq!(&ns[0..6], &[0x33, 0x33, 0xff, 0, 0, 2], "solicited-node group of fd00:2::2");
    assert_eq!(ns[20], 58);
    assert_eq!(ns[21], 255);
    assert_eq!(ns[54], 135);
    assert_eq!(&ns[62..78], &B6.octets());
    assert_eq!(&ns[80..86], &R1, "our MAC in the source link-layer option");
    assert!(icmp6_checksum_ok(ns, 54..ns.len(), &R1_6, &"ff02::1:ff00:2".parse().unwrap()));
    assert_eq!(counter(&st, "ns_sent"), 1);
    let out = run(&mut r, &st, &pool, 1, &[na(B_MAC, B6, R1, R1_6)], 2);
    assert_eq!(out, [(1, forwarded(&p, B_MAC, R1))]);
    assert_eq!(counter(&st, "learned"), 1);
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn the_router_answers_arp_solicitations_and_pings_for_its_addresses() {
    let pool = pool(64);
    let mut r = router(&pool, 10);
    let st = stats(&r);
    // ARP for p0's address: answered, a learned.
    let mut req = eth([0xff; 6], A_MAC, 0x0806, &arp(ArpOperation::Request, A_MAC, A4, [0; 6], R0_4));
    req.resize(60, 0);
    let out = run(&mut r, &st, &pool, 0, &[req.clone()], 1);
    let mut want = eth(A_MAC, R0, 0x0806, &arp(ArpOperation::Reply, R0, R0_4, A_MAC, A4));
    want.resize(60, 0);
    assert_eq!(out, [(0, want)]);
    assert_eq!(r.ifaces[0].neigh.lookup(IpAddr::V4(A4), 2), Some(A_MAC));
    // ARP on p0 for p1's address: not answered (no proxy ARP).
    let mut other = eth([0xff; 6], A_MAC, 0x0806, &arp(ArpOperation::Request, A_MAC, A4, [0; 6], R1_4));
    other.resize(60, 0);
    assert!(run(&mut r, &st, &pool, 0, &[other], 1).is_empty());
    // Pings to both of the router's addresses from a, answered out of p0.
    for dst in [R0_4, R1_4] {
        let ping = eth(R0, A_MAC, 0x0800, &ipv4(A4, dst, 1, 1, &icmp4_echo(false, 1, 2, b"hello")));
        let out = run(&mut r, &st, &pool, 0, &[ping], 2);
        let reply = eth(A_MAC, R0, 0x0800, &ipv4(dst, A4, 1, 64, &icmp4_echo(true, 1, 2, b"hello")));
        assert_eq!(out, [(0, reply)], "TTL 1 is fine for the router's own address");
    }
    // A neighbour solicitation for fd00:1::1 gets an advertisement with the router flag.
    let ns = Icmpv6Repr::NeighborSolicit {
        target_addr: R0_6,
        lladdr: Some(ironpath_wire::ethernet::EthernetAddress(A_MAC)),
    };
    let group: Ipv6Addr = "ff02::1:ff00:1".parse().unwrap();
    let f = eth([0x33, 0x33, 0xff, 0, 0, 1], A_MAC, 0x86dd, &ipv6(A6, group, 58, 255, &icmp6(ns, A6, group, &[])));
    let out = run(&mut r, &st, &pool, 0, &[f], 3);
    assert_eq!(out.len(), 1);
    let (edge, adv) = &out[0];
    assert_eq!((*edge, &adv[0..6], &adv[6..12]), (0, &A_MAC[..], &R0[..]));
    assert_eq!((adv[54], adv[58]), (136, 0xe0), "router + solicited + override");
    assert_eq!(r.ifaces[0].neigh.lookup(IpAddr::V6(A6), 4), Some(A_MAC), "the solicitation's sender learned");
    // Echo to the router's IPv6 address.
    let repr = Icmpv6Repr::EchoRequest { ident: 1, seq_no: 1, data_len: 4 };
    let ping = eth(R0, A_MAC, 0x86dd, &ipv6(A6, R1_6, 58, 64, &icmp6(repr, A6, R1_6, b"ping")));
    let out = run(&mut r, &st, &pool, 0, &[ping], 4);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1[54], 129);
    assert_eq!(counter(&st, "echo_replies"), 3);
    assert_eq!(counter(&st, "arp_replies"), 1);
    assert_eq!(counter(&st, "na_sent"), 1);
    // Anything else to the router goes to `local`.
    let to_us = udp4(A_MAC, R0, A4, R0_4, 64);
    assert_eq!(run(&mut r, &st, &pool, 0, std::slice::from_ref(&to_us), 5), [(2, to_us)]);
    assert_eq!(pool.stats().in_use, 0);
}

/// The ICMP error in `f` (type, code, the 4 bytes after the checksum) with its
/// checksum checked, and the start of the quoted packet.
fn icmp4_error(f: &[u8]) -> (u8, u8, u32, &[u8]) {
    assert_eq!(&f[12..14], &[0x08, 0x00]);
    assert_eq!(checksum::data(&f[14..34]), 0xffff, "IP checksum");
    assert_eq!(checksum::data(&f[34..]), 0xffff, "ICMP checksum");
    (f[34], f[35], u32::from_be_bytes([f[38], f[39], f[40], f[41]]), &f[42..])
}

#[test]
fn ttl_expiry_no_route_rejects_and_too_big_answer_icmp_errors_to_the_sender() {
    let pool = pool(64);
    let mut r = router(&pool, 10);
    let st = stats(&r);
    resolve_both(&mut r, &st, &pool);
    let to = |dst: Ipv4Addr, ttl: u8| udp4(A_MAC, R0, A4, dst, ttl);
    let cases = [
        (to(B4, 1), (11, 0, 0), "ttl_exceeded"),
        (to(Ipv4Addr::new(203, 0, 113, 1), 64), (3, 0, 0), "no_route"),
        (to(Ipv4Addr::new(198, 18, 9, 1), 64), (3, 1, 0), "rejected"),
        (to(Ipv4Addr::new(198, 18, 11, 1), 64), (3, 13, 0), "rejected"),
    ];
    for (f, (ty, code, rest), what) in cases {
        let before = counter(&st, what);
        let out = run(&mut r, &st, &pool, 0, std::slice::from_ref(&f), 10);
        assert_eq!(out.len(), 1, "{what}");
        let (edge, e) = &out[0];
        assert_eq!((*edge, &e[0..6], &e[6..12]), (0, &A_MAC[..], &R0[..]), "back to a");
        assert_eq!(&e[26..30], &R0_4.octets(), "from the receiving interface");
        assert_eq!(&e[30..34], &A4.octets());
        let (t, c, x, quote) = icmp4_error(e);
        assert_eq!((t, c, x), (ty, code, rest), "{what}");
        assert_eq!(quote, &f[14..], "the whole (short) original quoted");
        assert_eq!(counter(&st, what), before + 1);
    }
    // Blackhole: silent.
    assert!(run(&mut r, &st, &pool, 0, &[to(Ipv4Addr::new(198, 18, 10, 1), 64)], 10).is_empty());
    assert_eq!(counter(&st, "blackholed"), 1);
    // Larger than p1's MTU (1400) with DF: fragmentation needed, with the MTU.
    let u = udp(IpAddress::V4(A4), IpAddress::V4(B4), 1, 2, &[0; 1400]);
    let mut big = eth(R0, A_MAC, 0x0800, &ipv4(A4, B4, 17, 64, &u));
    big[20] = 0x40;
    big[24..26].fill(0);
    let c = !checksum::data(&big[14..34]);
    big[24..26].copy_from_slice(&c.to_be_bytes());
    let out = run(&mut r, &st, &pool, 0, &[big.clone()], 10);
    let (t, c, x, quote) = icmp4_error(&out[0].1);
    assert_eq!((t, c, x), (3, 4, 1400));
    assert_eq!(quote.len(), 576 - 28, "quoted up to 576 bytes in all");
    // Without DF: dropped (this router does not fragment).
    big[20] = 0;
    big[24..26].fill(0);
    let c = !checksum::data(&big[14..34]);
    big[24..26].copy_from_slice(&c.to_be_bytes());
    assert!(run(&mut r, &st, &pool, 0, &[big], 10).is_empty());
    assert_eq!(counter(&st, "too_big"), 2);
    // IPv6: hop limit 1 -> time exceeded (type 3), too big -> packet too big (type 2).
    let out = run(&mut r, &st, &pool, 0, &[udp6(A_MAC, R0, A6, B6, 1, 8), udp6(A_MAC, R0, A6, B6, 64, 1400)], 10);
    let types: Vec<_> =
        out.iter().map(|(e, f)| (*e, f[54], u32::from_be_bytes([f[58], f[59], f[60], f[61]]))).collect();
    assert_eq!(types, [(0, 3, 0), (0, 2, 1400)]);
    for (_, f) in &out {
        assert!(icmp6_checksum_ok(f, 54..f.len(), &R0_6, &A6));
        assert!(f.len() <= 14 + 1280);
    }
    assert_eq!(counter(&st, "icmp_sent"), 7);
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn icmp_errors_are_rate_limited_and_never_about_icmp_errors() {
    let pool = pool(64);
    let mut r = router(&pool, 2);
    let st = stats(&r);
    resolve_both(&mut r, &st, &pool);
    let f = udp4(A_MAC, R0, A4, Ipv4Addr::new(203, 0, 113, 1), 64);
    let frames = vec![f.clone(); 5];
    assert_eq!(run(&mut r, &st, &pool, 0, &frames, 10).len(), 2, "burst of 2");
    assert_eq!(counter(&st, "icmp_rate_limited"), 3);
    // One token per second (icmp_rate 1 at HZ ticks per second).
    assert_eq!(run(&mut r, &st, &pool, 0, &frames, 10 + HZ).len(), 1);
    assert_eq!(counter(&st, "no_route"), 10);
    // An ICMP error with no route is dropped without an answer, whatever the budget.
    let err = eth(R0, A_MAC, 0x0800, &ipv4(A4, Ipv4Addr::new(203, 0, 113, 1), 1, 64, &[3, 1, 0xfc, 0xfe, 0, 0, 0, 0]));
    assert!(run(&mut r, &st, &pool, 0, &[err], 100 * HZ).is_empty());
    assert_eq!(counter(&st, "icmp_sent"), 3);
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn martians_multicast_other_hosts_and_malformed_frames_are_dropped_and_counted() {
    let pool = pool(64);
    let mut r = router(&pool, 10);
    let st = stats(&r);
    resolve_both(&mut r, &st, &pool);
    let mut bad_sum = udp4(A_MAC, R0, A4, B4, 64);
    bad_sum[24] ^= 1;
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (udp4(A_MAC, R0, Ipv4Addr::new(127, 0, 0, 1), B4, 64), "martian"),
        (udp4(A_MAC, R0, Ipv4Addr::new(224, 0, 0, 1), B4, 64), "martian"),
        (udp4(A_MAC, R0, R0_4, B4, 64), "martian"),
        (udp4(A_MAC, R0, A4, Ipv4Addr::new(127, 0, 0, 1), 64), "martian"),
        (udp4(A_MAC, R0, A4, Ipv4Addr::new(169, 254, 1, 1), 64), "martian"),
        (udp4(A_MAC, R0, A4, Ipv4Addr::new(0, 1, 2, 3), 64), "martian"),
        (udp6(A_MAC, R0, "fe80::1".parse().unwrap(), B6, 64, 8), "martian"),
        (udp6(A_MAC, R0, A6, "::1".parse().unwrap(), 64, 8), "martian"),
        (udp4(A_MAC, R0, A4, Ipv4Addr::new(239, 1, 1, 1), 64), "multicast"),
        (udp6(A_MAC, [0x33, 0x33, 0, 0, 0, 0x42], A6, "ff05::42".parse().unwrap(), 64, 8), "multicast"),
        (udp4(A_MAC, B_MAC, A4, B4, 64), "other_host"),
        (udp4(A_MAC, [0xff; 6], A4, B4, 64), "other_host"),
        (bad_sum, "bad_checksum"),
        (udp4(A_MAC, R0, A4, B4, 64)[..30].to_vec(), "malformed"),
        (eth(R0, A_MAC, 0x88cc, &[0; 46]), "not_ip"),
    ];
    for (f, what) in cases {
        let before = counter(&st, what);
        assert!(run(&mut r, &st, &pool, 0, std::slice::from_ref(&f), 5).is_empty(), "{what}: {f:02x?}");
        assert_eq!(counter(&st, what), before + 1, "{what}");
    }
    // Our address on the other interface as source: a NAT in front translated an
    // inside packet to it; forwarded.
    assert_eq!(run(&mut r, &st, &pool, 0, &[udp4(A_MAC, R0, R1_4, B4, 64)], 5).len(), 1);
    assert_eq!(counter(&st, "forwarded"), 1);
    // From a port that is not an interface.
    assert!(run(&mut r, &st, &pool, 7, &[udp4(A_MAC, R0, A4, B4, 64)], 5).is_empty());
    assert_eq!(counter(&st, "foreign"), 1);
    assert_eq!(counter(&st, "forwarded"), 1);
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn held_packets_are_bounded_and_dropped_when_the_neighbour_never_answers() {
    let pool = pool(64);
    let mut r = router(&pool, 10);
    let st = stats(&r);
    let frames: Vec<_> = (0..4).map(|_| udp4(A_MAC, R0, A4, B4, 64)).collect();
    let out = run(&mut r, &st, &pool, 0, &frames, 0);
    assert_eq!(out.len(), 1, "one request");
    assert_eq!((counter(&st, "held"), counter(&st, "hold_full")), (2, 2));
    // Retried each second (the node is polled), then given up after 3 requests.
    let mut requests = 1;
    for s in 1..6 {
        requests += run(&mut r, &st, &pool, 0, &[], s * HZ).len();
    }
    assert_eq!(requests, 3);
    assert_eq!(counter(&st, "unresolved"), 2);
    // Too many neighbours at once (resolving = 4): each one beyond takes the place
    // of the one asked about longest ago, whose packet is dropped.
    let many: Vec<_> = (10..16).map(|k| udp4(A_MAC, R0, A4, Ipv4Addr::new(198, 18, 2, k), 64)).collect();
    assert_eq!(run(&mut r, &st, &pool, 0, &many, 10 * HZ).len(), 6, "a request for each");
    assert_eq!(counter(&st, "resolving_evicted"), 2);
    assert_eq!(counter(&st, "unresolved"), 4);
    drop(r);
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn shared_packets_are_copied_before_rewriting() {
    let pool = pool(64);
    let mut r = router(&pool, 10);
    let st = stats(&r);
    resolve_both(&mut r, &st, &pool);
    let p = udp4(A_MAC, R0, A4, B4, 64);
    let mut b = burst(&pool, std::slice::from_ref(&p));
    b.header_mut(0).port = 0;
    let keep = b.share(0);
    let c = call(&mut r, &st, &mut b, 1);
    assert_eq!(sent(&c, &mut b), [(1, forwarded(&p, B_MAC, R1))], "{}", dump(&st));
    assert_eq!(keep.data(), &p[..], "the other holder's bytes are untouched");
    assert_eq!(counter(&st, "copied"), 1);
    drop(keep);
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn bad_routes_are_refused_with_the_reason() {
    let ifaces = vec![IfaceCfg::new("p0", &["198.18.1.1/24"]).unwrap()];
    let e = RouterCfg::new(ifaces, &["169.254.169.254/32 via 198.18.1.9"]).unwrap_err();
    assert!(e.contains("inside 169.254.0.0/16: it is never routed"), "{e}");
    let ifaces = || vec![IfaceCfg::new("p0", &["198.18.1.1/24", "fd00:1::1/64"]).unwrap()];
    for (route, want) in [
        ("198.18.3.1/24 via 198.18.1.2", "bits set past the length (the prefix is 198.18.3.0/24)"),
        ("198.18.3.0/33 via 198.18.1.2", "the length must be 0..=32"),
        ("198.18.3.0/24 via 198.18.7.2", "gateway 198.18.7.2 is on no interface's subnet"),
        ("198.18.3.0/24 via fd00:1::2", "not of the prefix's family"),
        ("198.18.3.0/24 port p9", "port `p9` is not a router interface"),
        ("198.18.3.0/24", "needs `via` or `port`"),
        ("198.18.3.0/24 unreachable via 198.18.1.2", "takes neither"),
        ("198.18.3.0/24 towards 198.18.1.2", "unknown word `towards`"),
    ] {
        let e = RouterCfg::new(ifaces(), &[route]).err().unwrap_or_else(|| panic!("{route} accepted"));
        assert!(e.contains(want), "{route}: {e}");
    }
    let e = RouterCfg::new(ifaces(), &["0.0.0.0/0 via 198.18.1.2", "0.0.0.0/0 via 198.18.1.3"]).err().unwrap();
    assert!(e.contains("already routed by route 0"), "{e}");
    // ::/0 and 0.0.0.0/0 are two routes.
    assert!(RouterCfg::new(ifaces(), &["0.0.0.0/0 via 198.18.1.2", "::/0 via fd00:1::2"]).is_ok());
}

#[test]
fn a_gso_aggregate_larger_than_the_mtu_is_forwarded_whole() {
    let pool = pool(64);
    let mut r = router(&pool, 10);
    let st = stats(&r);
    resolve_both(&mut r, &st, &pool);
    let u = udp(IpAddress::V4(A4), IpAddress::V4(B4), 1, 2, &[0; 1500]);
    let big = eth(R0, A_MAC, 0x0800, &ipv4(A4, B4, 17, 64, &u));
    let mut b = burst(&pool, std::slice::from_ref(&big));
    b.header_mut(0).ol_flags |= abi::RX_AGGREGATED;
    b.header_mut(0).port = 0;
    let c = call(&mut r, &st, &mut b, 1);
    assert_eq!(sent(&c, &mut b), [(1, forwarded(&big, B_MAC, R1))], "{}", dump(&st));
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn a_static_neighbour_needs_no_resolution_and_ignores_the_wire() {
    let pool = pool(64);
    let ifaces =
        vec![IfaceCfg::new("p0", &["198.18.1.1/24"]).unwrap(), IfaceCfg::new("p1", &["198.18.2.1/24"]).unwrap()];
    let mut cfg = RouterCfg::new(ifaces, &[]).unwrap();
    cfg.statics.push((1, IpAddr::V4(B4), B_MAC));
    let tune = Tuning {
        neigh: NeighConfig { max_entries: 4, max_pending: 4, hold: 2, retry_tsc: HZ, max_tries: 3, reachable_tsc: HZ },
        icmp_rate: 1,
        icmp_burst: 1,
        icmp_peer_rate: 1000,
        icmp_peer_burst: 1000,
        tsc_hz: HZ,
        max_plies: 64,
        hash_key: [0; 16],
    };
    let mut r = Router::new(&cfg, &[(0, 0, R0), (1, 1, R1)], None, tune, pool.clone()).unwrap();
    let st = stats(&r);
    let p = udp4(A_MAC, R0, A4, B4, 64);
    // Long after any learned entry would have aged, and after a reply claiming another MAC.
    run(&mut r, &st, &pool, 1, &[arp_reply([0x02, 0, 0, 0, 0, 0x66], B4, R1, R1_4)], 10);
    let out = run(&mut r, &st, &pool, 0, std::slice::from_ref(&p), 100 * HZ);
    assert_eq!(out, [(1, forwarded(&p, B_MAC, R1))]);
    assert_eq!(counter(&st, "arp_requests"), 0);
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn the_fast_path_decides_as_every_check_does() {
    // A /16 route: its root slot is a leaf, forwarded in the fast path's first pass;
    // /24s: their root slots lead to plies, forwarded in its second.
    fast_path_matches_every_check(&["100.64.0.0/16 via 198.18.2.2".to_string()], router_with);
}

#[test]
fn the_fast_path_decides_as_every_check_does_with_a_wide_root() {
    // /24s under 256 /16s: a 24-bit root (forced: the router takes it only where the
    // kernel gives huge pages), whose slots answer /24s themselves; a /28 under one
    // of them needs a ply.
    let mut more: Vec<String> = (0..=255).map(|k| format!("10.{k}.1.0/24 via 198.18.2.2")).collect();
    more.push("10.7.1.16/28 unreachable".to_string());
    more.push("100.64.0.0/16 via 198.18.2.2".to_string());
    fast_path_matches_every_check(&more, wide_router_with);
}

/// The fast path against every check, each on a router that `router` builds.
fn fast_path_matches_every_check(more: &[String], router: fn(&Mempool, u64, &[String]) -> Router) {
    let pool = pool(512);
    let mut fast = router(&pool, 1000, more);
    let mut slow = router(&pool, 1000, more).all_checks();
    let (sf, ss) = (stats(&fast), stats(&slow));
    resolve_both(&mut fast, &sf, &pool);
    resolve_both(&mut slow, &ss, &pool);
    let mut g = crate::acl::sample::Lcg(3);
    let dsts = [
        B4,
        A4,
        R0_4,
        R1_4,
        Ipv4Addr::new(198, 18, 3, 9),
        Ipv4Addr::new(198, 18, 9, 1),
        Ipv4Addr::new(198, 18, 10, 1),
        Ipv4Addr::new(198, 18, 11, 1),
        Ipv4Addr::new(203, 0, 113, 1),
        Ipv4Addr::new(198, 18, 2, 255),
        Ipv4Addr::new(255, 255, 255, 255),
        Ipv4Addr::new(224, 0, 0, 5),
        Ipv4Addr::new(127, 0, 0, 1),
        Ipv4Addr::new(0, 1, 2, 3),
        Ipv4Addr::new(169, 254, 0, 1),
        Ipv4Addr::new(198, 18, 2, 77),
        Ipv4Addr::new(100, 64, 3, 3),
        Ipv4Addr::new(10, 7, 1, 9),
        Ipv4Addr::new(10, 7, 1, 20),
        Ipv4Addr::new(10, 7, 2, 1),
    ];
    let srcs = [A4, R1_4, Ipv4Addr::new(127, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(0, 0, 0, 0)];
    for round in 0..200u64 {
        let frames: Vec<Vec<u8>> = (0..32)
            .map(|_| {
                let r = g.next_u64();
                let dst = dsts[(r % dsts.len() as u64) as usize];
                let src = srcs[((r >> 8) % srcs.len() as u64) as usize];
                let ttl = [0, 1, 2, 64][((r >> 16) % 4) as usize];
                let mac = [R0, B_MAC, [0xff; 6]][((r >> 20) % 3) as usize];
                let len = [8, 1400, 1500][((r >> 24) % 3) as usize];
                let u = udp(IpAddress::V4(src), IpAddress::V4(dst), 1, 2, &vec![0; len]);
                let mut f = eth(mac, A_MAC, 0x0800, &ipv4(src, dst, 17, ttl, &u));
                match (r >> 28) % 8 {
                    0 => f[24] ^= 0x10, // bad checksum
                    1 => f[20] = 0x40,  // DF (checksum now wrong too)
                    2 => f.truncate(30),
                    _ => {}
                }
                f
            })
            .collect();
        let now = 10 + round;
        let a = run(&mut fast, &sf, &pool, 0, &frames, now);
        let b = run(&mut slow, &ss, &pool, 0, &frames, now);
        assert_eq!(a, b, "round {round}");
    }
    for c in RouterCounter::SPECS {
        assert_eq!(sf.extra_by_name(c.name), ss.extra_by_name(c.name), "counter {}", c.name);
    }
    assert!(counter(&sf, "forwarded") > 100, "{}", dump(&sf));
    drop((fast, slow));
    assert_eq!(pool.stats().in_use, 0);
}

/// Whether the ICMPv6 message at `r` of frame `f` carries a valid checksum.
fn icmp6_checksum_ok(f: &[u8], r: std::ops::Range<usize>, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
    Icmpv6Packet::new_unchecked(&f[r]).verify_checksum(src, dst)
}

/// A neighbour solicitation from a for `target`, to `dst`, on p0.
fn ns_from_a(target: Ipv6Addr, dst: Ipv6Addr, dst_mac: [u8; 6]) -> Vec<u8> {
    let ns = Icmpv6Repr::NeighborSolicit {
        target_addr: target,
        lladdr: Some(ironpath_wire::ethernet::EthernetAddress(A_MAC)),
    };
    eth(dst_mac, A_MAC, 0x86dd, &ipv6(A6, dst, 58, 255, &icmp6(ns, A6, dst, &[])))
}

#[test]
fn short_and_cut_neighbour_messages_are_counted_and_routing_goes_on() {
    let pool = pool(64);
    let mut r = router(&pool, 10);
    let st = stats(&r);
    resolve_both(&mut r, &st, &pool);
    let all_nodes: Ipv6Addr = "ff02::1".parse().unwrap();
    let mut bad = Vec::new();
    // The 58-byte solicitation: an ICMPv6 body of 4 bytes, to all nodes and to us.
    for (dst, mac) in [(all_nodes, [0x33, 0x33, 0, 0, 0, 1]), (R0_6, R0)] {
        for ty in [135u8, 136] {
            let f = eth(mac, A_MAC, 0x86dd, &ipv6(A6, dst, 58, 255, &[ty, 0, 0, 0]));
            assert_eq!(f.len(), 58);
            bad.push(f);
        }
    }
    // Every cut of a valid solicitation and advertisement (payload length kept: the
    // frame is shorter than its header says), and with the payload length cut too.
    let group: Ipv6Addr = "ff02::1:ff00:1".parse().unwrap();
    let whole = [ns_from_a(R0_6, group, [0x33, 0x33, 0xff, 0, 0, 1]), na(A_MAC, A6, R0, R0_6)];
    for f in &whole {
        for len in 54..f.len() {
            bad.push(f[..len].to_vec());
            let mut g = f[..len].to_vec();
            g[18..20].copy_from_slice(&((len - 54) as u16).to_be_bytes());
            bad.push(g);
        }
    }
    // Options that run past the end, and a zero-length option.
    for (at, v) in [(79, 3u8), (79, 0)] {
        let mut f = whole[0].clone();
        f[at] = v;
        bad.push(f);
    }
    let n = bad.len() as u64;
    for f in &bad {
        let out = run(&mut r, &st, &pool, 0, std::slice::from_ref(f), 1);
        let answered = out.iter().any(|(e, _)| *e != 2);
        assert!(!answered, "a bad ND message of {} bytes answered: {:02x?} -> {out:02x?}", f.len(), f);
    }
    // Each is counted: malformed, or (an empty ICMPv6 message to us) given to `local`.
    assert_eq!(counter(&st, "malformed") + counter(&st, "local"), n, "{}", dump(&st));
    // The router still answers and forwards, both families.
    let out = run(&mut r, &st, &pool, 0, &whole[..1], 2);
    assert_eq!((out.len(), out[0].1[54]), (1, 136), "a valid solicitation is answered");
    let (p4, p6) = (udp4(A_MAC, R0, A4, B4, 64), udp6(A_MAC, R0, A6, B6, 64, 8));
    let out = run(&mut r, &st, &pool, 0, &[p4.clone(), p6.clone()], 3);
    assert_eq!(out, [(1, forwarded(&p4, B_MAC, R1)), (1, forwarded(&p6, B_MAC, R1))]);
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn icmpv6_errors_behind_extension_headers_get_no_error_back() {
    let pool = pool(64);
    let mut r = router(&pool, 100);
    let st = stats(&r);
    resolve_both(&mut r, &st, &pool);
    let far: Ipv6Addr = "fd00:9::1".parse().unwrap(); // no route
                                                      // An ICMPv6 destination-unreachable behind a destination-options header, an
                                                      // echo request behind the same header, and a later fragment.
    let with_opts = |body: &[u8]| {
        let mut p = vec![58, 0, 1, 4, 0, 0, 0, 0];
        p.extend_from_slice(body);
        eth(R0, A_MAC, 0x86dd, &ipv6(A6, far, 60, 64, &p))
    };
    let error = with_opts(&[1, 0, 0, 0, 0, 0, 0, 0]);
    let echo = with_opts(&[128, 0, 0, 0, 0, 1, 0, 1]);
    let mut later = vec![17, 0, 0, 0x10, 0, 0, 0, 1];
    later.extend_from_slice(&[0; 16]);
    let later = eth(R0, A_MAC, 0x86dd, &ipv6(A6, far, 44, 64, &later));
    let out = run(&mut r, &st, &pool, 0, &[error, echo, later], 1);
    assert_eq!(out.len(), 1, "only the echo request gets an unreachable: {}", dump(&st));
    assert_eq!(out[0].1[54], 1);
    assert_eq!(counter(&st, "no_route"), 3);
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn the_martian_bitmap_is_the_predicate() {
    let m = martian16_map();
    assert_eq!(&*m, martian16());
    for x in 0..1u32 << 16 {
        assert_eq!(m[(x >> 6) as usize] >> (x & 63) & 1 == 1, martian4_src(x << 16), "/16 {x:#06x}");
    }
}

#[test]
fn forget_leaves_the_router_as_built() {
    let pool = pool(64);
    let mut r = router(&pool, 2);
    let st = stats(&r);
    resolve_both(&mut r, &st, &pool);
    r.ifaces[1].neigh.add_static(IpAddr::V4(Ipv4Addr::new(198, 18, 2, 9)), [9; 6]);
    // A packet held for a neighbour being resolved, and an ICMP budget spent.
    run(&mut r, &st, &pool, 0, &[udp4(A_MAC, R0, A4, Ipv4Addr::new(198, 18, 2, 77), 64)], 1);
    run(&mut r, &st, &pool, 0, &vec![udp4(A_MAC, R0, A4, Ipv4Addr::new(203, 0, 113, 1), 64); 3], 2);
    assert!(pool.stats().in_use > 0, "a held packet");
    r.forget();
    assert_eq!(pool.stats().in_use, 0, "held packets freed");
    assert_eq!(r.ifaces[0].neigh.lookup(IpAddr::V4(A4), 3), None, "learned entries forgotten");
    assert_eq!(r.ifaces[1].neigh.lookup(IpAddr::V4(Ipv4Addr::new(198, 18, 2, 9)), 3), Some([9; 6]), "static kept");
    // The ICMP budget is full again: two errors in a burst (held: a is forgotten).
    let (sent, limited) = (counter(&st, "icmp_sent"), counter(&st, "icmp_rate_limited"));
    run(&mut r, &st, &pool, 0, &vec![udp4(A_MAC, R0, A4, Ipv4Addr::new(203, 0, 113, 1), 64); 3], 4);
    assert_eq!((counter(&st, "icmp_sent") - sent, counter(&st, "icmp_rate_limited") - limited), (2, 1));
    drop(r);
    assert_eq!(pool.stats().in_use, 0);
}

/// One host sending TTL-1 packets as fast as it can spends its own ICMP budget, not
/// the router's: another host's traceroute still gets its time-exceeded messages.
#[test]
fn one_flooding_host_cannot_spend_the_other_hosts_icmp_errors() {
    let pool = pool(256);
    let mut r = router(&pool, 50);
    r.icmp = super::icmp_budget::IcmpBudget::new((1000, 50), (1, 3), HZ, [9; 16]);
    let st = stats(&r);
    resolve_both(&mut r, &st, &pool);
    let flood: Vec<_> = (0..64).map(|_| udp4(A_MAC, R0, A4, Ipv4Addr::new(198, 18, 3, 7), 1)).collect();
    let mut now = 10;
    for _ in 0..10 {
        run(&mut r, &st, &pool, 0, &flood, now);
        now += 1;
    }
    assert_eq!(counter(&st, "icmp_sent"), 3, "the flooder's burst");
    assert_eq!(counter(&st, "icmp_peer_limited"), 640 - 3);
    // b (on p1) traces through the router: each probe is answered.
    let probe = udp4(B_MAC, R1, B4, Ipv4Addr::new(198, 18, 1, 99), 1);
    let out = run(&mut r, &st, &pool, 1, &[probe.clone(), probe.clone(), probe], now);
    assert_eq!(out.len(), 3, "{}", dump(&st));
    assert!(out.iter().all(|(e, f)| *e == 1 && f[34] == 11), "time exceeded, back out of p1");
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn routes_and_neighbours_change_while_the_router_runs_and_bad_commands_change_nothing() {
    let pool = pool(64);
    crate::tests::running(Box::new(router(&pool, 8)), &["p0", "p1", "local"], |info| {
        let cmd = |line: &str| info.control(&line.split_whitespace().collect::<Vec<_>>()).expect("a router command");
        let ok = |line: &str| cmd(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let shown = ok("show ip route");
        assert!(shown.contains("198.18.3.0/24 via 198.18.2.2 port p1"), "{shown}");
        assert!(shown.contains("FIB version 0"), "{shown}");
        let out = ok("ip route add 198.19.0.0/16 via 198.18.1.9");
        assert!(out.contains("198.19.0.0/16 via 198.18.1.9 port p0: added"), "{out}");
        assert!(ok("ip route replace 198.19.0.0/16 via 198.18.2.9").contains("replaced"));
        assert!(ok("ip route add fd00:9::/48 blackhole").contains("added"));
        assert!(ok("ip route del 198.18.3.0/24").contains("removed"));
        for (bad, why) in [
            ("ip route add 198.19.0.0/33 via 198.18.1.9", "length"),
            ("ip route add 198.19.0.1/16 via 198.18.1.9", "bits set past"),
            ("ip route add 198.19.0.0/16 via 203.0.113.1", "on no interface's subnet"),
            ("ip route add 198.19.0.0/16 via 198.18.1.9 port p7", "not a router interface"),
            ("ip route add 198.19.0.0/16 via fd00:1::9", "family"),
            ("ip route add 198.18.1.0/24 blackhole", "connected subnet"),
            ("ip route del 198.18.1.1/32", "router's own"),
            ("ip route add 127.0.0.0/16 via 198.18.1.9", "never routed"),
            ("ip route add 224.0.0.0/24 via 198.18.1.9", "never routed"),
            ("ip route del 198.18.3.0/24", "no route"),
            ("ip neighbor add 198.18.2.7 lladdr 02:00:00:00:00:zz port p1", "not a MAC"),
            ("ip neighbor add 198.18.1.7 lladdr 02:00:00:00:00:07 port p1", "not on a subnet"),
            ("ip neighbor del 198.18.2.7 port p1", "no neighbour entry"),
        ] {
            let e = cmd(bad).expect_err(bad);
            assert!(e.contains(why), "{bad}: {e}");
        }
        let shown = ok("show ip route");
        assert!(shown.contains("198.19.0.0/16 via 198.18.2.9 port p1"), "{shown}");
        assert!(shown.contains("fd00:9::/48 blackhole"), "{shown}");
        assert!(!shown.contains("198.18.3.0/24"), "{shown}");
        assert!(shown.contains("FIB version 4"), "{shown}");
        assert!(ok("ip neighbor add 198.18.2.7 lladdr 02:00:00:00:00:07 port p1").contains("added"));
        assert!(ok("ip neighbor del 198.18.2.7 port p1").contains("removed"));
        assert!(info.control(&["acl", "rule", "add"]).is_none(), "not a router command");
    });
}

#[test]
fn a_fib_handed_over_routes_the_next_burst_and_the_old_one_comes_back() {
    let pool = pool(64);
    let (cfg, tune) = config_with(8, &[]);
    let mut r = Router::new(&cfg, &[(0, 0, R0), (1, 1, R1)], Some(2), tune, pool.clone()).unwrap();
    let st = stats(&r);
    resolve_both(&mut r, &st, &pool);
    let ctl = r.ctl.take().unwrap();
    let to = Ipv4Addr::new(198, 19, 0, 5);
    let p = udp4(A_MAC, R0, A4, to, 64);
    // No route yet: an ICMP unreachable goes back out of p0.
    let out = run(&mut r, &st, &pool, 0, std::slice::from_ref(&p), 10);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 0, "{out:?}");
    let swap = {
        let mut t = ctl.tables.lock().unwrap();
        t.set(true, lpm::Prefix::v4(to, 16), Some(config::Target::Forward { iface: 1, via: Some(IpAddr::V4(B4)) }))
            .unwrap();
        t.build().unwrap()
    };
    let old = ironpath_graph::testing::apply(&mut r, &st, Box::new(swap));
    let old = old.downcast::<ctl::FibSwap>().expect("the old FIB comes back");
    assert_eq!(old.v4.lookup(lpm::key4(to)), None);
    let out = run(&mut r, &st, &pool, 0, std::slice::from_ref(&p), 20);
    assert_eq!(out, [(1, forwarded(&p, B_MAC, R1))]);
    drop(old);
    assert_eq!(pool.stats().in_use, 0);
}
