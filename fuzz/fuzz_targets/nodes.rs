//! Arbitrary frames through the built-in nodes as a pipeline would chain them:
//! `classify` (every edge connected), then `arp` (ARP and IPv4 to resolve),
//! `icmp_echo` (ICMP and ICMPv6; its IPv4 replies go on to `arp`) and `macswap`
//! (the rest), then `arp` polled on with virtual time until it gives up.
//!
//! Input: byte 0 holds flags (bit 0: the NIC verified IP checksums, bit 1: it
//! verified L4 checksums); then frames, each a little-endian u16 length and its
//! bytes (cut to 4096 and to what is left), at most 256.
//!
//! No node may panic; every reply `icmp_echo` sends must carry valid checksums;
//! everything `arp` sends carries our MAC as source; and once the nodes are gone
//! no mbuf may be left in use.
#![no_main]
use ironpath_eal::abi;
use ironpath_eal::{Burst, Mbuf, MemPolicy, Mempool, MempoolConfig, MAX_BURST};
use ironpath_graph::testing::call;
use ironpath_graph::{Dispatch, Node, NodeStats};
use ironpath_nodes::arp::{Arp, ArpConfig};
use ironpath_nodes::classify::{Classify, NEXTS};
use ironpath_nodes::icmp::IcmpEcho;
use ironpath_nodes::simple::MacSwap;
use ironpath_wire::ipv6::upper_layer;
use ironpath_wire::{Icmpv4Packet, Icmpv6Packet, Ipv4Packet, Ipv6Packet};
use libfuzzer_sys::fuzz_target;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

const MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const MAX_FRAME: usize = 4096;
const RETRY_TSC: u64 = 10;

fn pool() -> &'static Mempool {
    static POOL: OnceLock<Mempool> = OnceLock::new();
    POOL.get_or_init(|| {
        Mempool::create(&MempoolConfig::new("fuzz-nodes", 2048).cache_size(0).policy(MemPolicy::NoHuge))
            .expect("create mempool")
    })
}

/// Run `node` on `pkts` and move what it sends on into `out[k]` (its next `k`);
/// drops, and packets for edges beyond `out`, are freed.
fn step(node: &mut dyn Node, st: &NodeStats, pkts: &mut Burst, now: u64, out: &mut [Burst]) {
    let c = call(node, st, pkts, now);
    match c.dispatch {
        Dispatch::All(k) => {
            let tags = [k; MAX_BURST];
            pkts.distribute(&tags, out);
        }
        Dispatch::Each => {
            pkts.distribute(&c.next[..], out);
        }
        Dispatch::Consumed => pkts.free_all(),
    }
}

/// A reply `icmp_echo` sent (the NIC did not vouch for the request's checksum).
fn check_icmp_reply(d: &[u8]) {
    match u16::from_be_bytes([d[12], d[13]]) {
        0x0800 => {
            let ip = Ipv4Packet::new_checked(&d[14..]).expect("reply parses");
            assert!(ip.verify_checksum(), "IPv4 header checksum of an echo reply");
            let icmp = Icmpv4Packet::new_checked(ip.payload()).expect("ICMP parses");
            assert!(icmp.verify_checksum(), "ICMP checksum of an echo reply");
        }
        0x86dd => {
            let ip = Ipv6Packet::new_checked(&d[14..]).expect("reply parses");
            let (_, off) = upper_layer(&ip).expect("reply walks");
            let end = 40 + usize::from(ip.payload_len());
            let icmp = Icmpv6Packet::new_checked(&d[14 + off..14 + end]).expect("ICMPv6 parses");
            assert!(icmp.verify_checksum(&ip.src_addr(), &ip.dst_addr()), "ICMPv6 checksum of a reply");
        }
        t => panic!("icmp_echo sent ethertype {t:#06x}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, mut rest)) = data.split_first() else { return };
    let pool = pool();
    let mut ol = 0;
    if flags & 1 != 0 {
        ol |= abi::RX_IP_CKSUM_GOOD;
    }
    if flags & 2 != 0 {
        ol |= abi::RX_L4_CKSUM_GOOD;
    }

    {
        let mut input = Burst::new();
        while rest.len() >= 2 && input.room() > 0 {
            let len = usize::from(u16::from_le_bytes([rest[0], rest[1]])).min(MAX_FRAME).min(rest.len() - 2);
            let Ok(mut m) = Mbuf::from_slice(pool, &rest[2..2 + len]) else { break };
            m.header_mut().ol_flags |= ol;
            let _ = input.push(m);
            rest = &rest[2 + len..];
        }

        let mut classify = Classify::new(NEXTS);
        let mut arp = Arp::new(
            ArpConfig {
                mac: MAC,
                addresses: vec![Ipv4Addr::new(198, 18, 0, 2), Ipv4Addr::new(198, 18, 0, 3)],
                hold: 4,
                retry_tsc: RETRY_TSC,
                max_tries: 2,
                max_entries: 8,
            },
            pool.clone(),
        );
        let mut icmp = IcmpEcho::new(
            vec![Ipv4Addr::new(198, 18, 0, 2)],
            vec![Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2), Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 3)],
            MAC,
        );
        let mut swap = MacSwap;
        let (cs, as_, is, ss) = (
            NodeStats::new(classify.counters()),
            NodeStats::new(arp.counters()),
            NodeStats::new(icmp.counters()),
            NodeStats::new(swap.counters()),
        );

        // classify: one burst per edge.
        let mut classes: Vec<Burst> = NEXTS.iter().map(|_| Burst::new()).collect();
        step(&mut classify, &cs, &mut input, 1, &mut classes);
        let [c_arp, c_icmp, c_tcp, c_udp, c_ipv4, c_icmp6, c_ipv6, c_other] = &mut classes[..] else {
            unreachable!("eight classes")
        };

        // icmp_echo: ICMP and ICMPv6; its output checked, then sent on to arp.
        let mut to_arp = [Burst::new()];
        for b in [c_icmp, c_icmp6] {
            let mut out = [Burst::new()];
            step(&mut icmp, &is, b, 2, &mut out);
            for i in 0..out[0].len() {
                if out[0].header(i).ol_flags & abi::RX_L4_CKSUM_GOOD == 0 {
                    check_icmp_reply(out[0].data(i));
                }
            }
            out[0].move_to(&mut to_arp[0]);
            out[0].free_all();
        }

        // arp: ARP frames, IPv4 to resolve (TCP, UDP, other IPv4, echo replies; IPv6
        // frames from icmp_echo are malformed to it, and counted).
        let mut sent = [Burst::new()];
        for b in [c_arp, c_tcp, c_udp, c_ipv4, &mut to_arp[0]] {
            step(&mut arp, &as_, b, 3, &mut sent);
            check_arp_output(&sent[0]);
            sent[0].free_all();
        }
        // Polled on: retries, then giving up on every neighbour.
        for k in 1..=4 {
            step(&mut arp, &as_, &mut Burst::new(), 3 + k * RETRY_TSC, &mut sent);
            check_arp_output(&sent[0]);
            sent[0].free_all();
        }

        // macswap: the rest.
        for b in [c_ipv6, c_other] {
            let mut out = [Burst::new()];
            step(&mut swap, &ss, b, 4, &mut out);
        }
    }
    assert_eq!(pool.stats().in_use, 0, "mbufs leaked");
});

/// Everything `arp` sends (replies, requests, resolved packets) comes from our MAC.
fn check_arp_output(b: &Burst) {
    for i in 0..b.len() {
        assert_eq!(&b.data(i)[6..12], &MAC, "arp output source MAC");
    }
}
