//! `ip_router` alone, on the fast path: 1,000 and 100,000 random IPv4 routes (/16 to
//! /24, each via one of four gateways on four interfaces, gateways resolved first),
//! bursts of 32 UDP frames to random destinations inside the routes, timed with the
//! TSC around each call of the node (the frames are readdressed between calls,
//! untimed). Also the FIB alone on the same destinations, looked up as the router's
//! fast path does: every root slot prefetched (`Lpm::prefetch_root4`), each read
//! (`Lpm::root4`, the next ply prefetched), and the plies below the slots that are
//! not leaves read in a second pass (`Lpm::leaf4`).
//!
//! One line `RESULT routes=N cycles_per_packet=... ns_per_packet=... lookup_cycles=...
//! plies=... build_ms=... forwarded=...` per table size.
#![forbid(unsafe_code)]

use ironpath_eal::{tsc, Burst, Mbuf, MemPolicy, Mempool, MempoolConfig};
use ironpath_graph::testing::call;
use ironpath_graph::{Node, NodeStats};
use ironpath_nodes::acl::sample::Lcg;
use ironpath_nodes::router::config::{IfaceCfg, RouterCfg};
use ironpath_nodes::router::lpm::Lpm;
use ironpath_nodes::router::neigh::NeighConfig;
use ironpath_nodes::router::{Router, Tuning};
use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::Instant;

const IN_MAC: [u8; 6] = [0x02, 0, 0, 0, 1, 0];
const BURST: usize = 32;
const BURSTS: usize = 256;

fn frame(dst: Ipv4Addr) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&IN_MAC);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x0a]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&46u16.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[198, 18, 0, 2]);
    f[30..34].copy_from_slice(&dst.octets());
    fix(&mut f);
    f
}

/// Address the frame to the router again, TTL 64, checksum recomputed.
fn fix(f: &mut [u8]) {
    f[0..6].copy_from_slice(&IN_MAC);
    f[22] = 64;
    f[24..26].fill(0);
    let mut s = 0u32;
    for w in f[14..34].chunks(2) {
        s += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    f[24..26].copy_from_slice(&(!(s as u16)).to_be_bytes());
}

fn main() {
    let pool = Mempool::create(&MempoolConfig::new("bench-router", 16384).cache_size(0).policy(MemPolicy::NoHuge))
        .expect("mempool");
    for n in [1_000usize, 100_000] {
        let mut g = Lcg(n as u64);
        let mut ifaces = vec![IfaceCfg::new("in", &["198.18.0.1/24"]).expect("iface")];
        for k in 1..=4 {
            ifaces.push(IfaceCfg::new(&format!("o{k}"), &[&format!("198.19.{k}.1/24")]).expect("iface"));
        }
        let mut seen = std::collections::HashSet::new();
        let mut routes = Vec::new();
        let mut prefixes = Vec::new();
        while routes.len() < n {
            let len = 16 + (g.next_u64() % 9) as u8;
            let a = (g.next_u64() as u32 % 0xdf00_0000 + 0x0100_0000) & (u32::MAX << (32 - len));
            if (a >> 24) == 198 || !seen.insert((a, len)) {
                continue;
            }
            let k = 1 + routes.len() % 4;
            routes.push(format!("{}/{len} via 198.19.{k}.2", Ipv4Addr::from(a)));
            prefixes.push((a, len));
        }
        let lines: Vec<&str> = routes.iter().map(String::as_str).collect();
        let cfg = RouterCfg::new(ifaces, &lines).expect("routes");
        let tune = Tuning {
            neigh: NeighConfig {
                max_entries: 64,
                max_pending: 64,
                hold: 8,
                retry_tsc: u64::MAX / 4,
                max_tries: 3,
                reachable_tsc: u64::MAX / 4,
            },
            icmp_rate: 1000,
            icmp_burst: 50,
            icmp_peer_rate: 10,
            icmp_peer_burst: 10,
            tsc_hz: tsc::tsc_hz(),
            max_plies: 1 << 20,
            hash_key: [9; 16],
        };
        let ports: Vec<(u16, u16, [u8; 6])> = (0..5u16).map(|k| (k, k, [0x02, 0, 0, 0, 1, k as u8])).collect();
        let t = Instant::now();
        let mut r = Router::new(&cfg, &ports, None, tune, pool.clone()).expect("router");
        let build_ms = t.elapsed().as_secs_f64() * 1e3;
        let st = NodeStats::new(r.counters());
        // The gateways answer the router's ARP requests (one packet to each first).
        for k in 1..=4u8 {
            let mut b = Burst::new();
            let f = frame(Ipv4Addr::from(prefixes[usize::from(k) - 1].0));
            let mut m = Mbuf::from_slice(&pool, &f).expect("mbuf");
            m.header_mut().port = 0;
            let _ = b.push(m);
            let _ = call(&mut r, &st, &mut b, 1);
            b.free_all();
            let mut reply = vec![0u8; 60];
            reply[0..6].copy_from_slice(&[0x02, 0, 0, 0, 1, k]);
            reply[6..12].copy_from_slice(&[0x02, 0, 0, 0, 2, k]);
            reply[12..14].copy_from_slice(&[0x08, 0x06]);
            reply[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 2]);
            reply[22..28].copy_from_slice(&[0x02, 0, 0, 0, 2, k]);
            reply[28..32].copy_from_slice(&[198, 19, k, 2]);
            reply[32..38].copy_from_slice(&[0x02, 0, 0, 0, 1, k]);
            reply[38..42].copy_from_slice(&[198, 19, k, 1]);
            let mut m = Mbuf::from_slice(&pool, &reply).expect("mbuf");
            m.header_mut().port = u16::from(k);
            let _ = b.push(m);
            let _ = call(&mut r, &st, &mut b, 2);
            b.free_all();
        }
        let dsts: Vec<Ipv4Addr> = (0..BURST * BURSTS)
            .map(|_| {
                let (a, len) = prefixes[g.next_u64() as usize % prefixes.len()];
                Ipv4Addr::from(a | (g.next_u64() as u32 & !(u32::MAX << (32 - len))))
            })
            .collect();
        let mut bursts: Vec<Burst> = dsts
            .chunks(BURST)
            .map(|c| {
                let mut b = Burst::new();
                for d in c {
                    let mut m = Mbuf::from_slice(&pool, &frame(*d)).expect("mbuf");
                    m.header_mut().port = 0;
                    let _ = b.push(m);
                }
                b
            })
            .collect();
        let (mut cycles, mut packets) = (0u64, 0u64);
        let w = Instant::now();
        let mut timed = 0f64;
        for round in 0..64 {
            for b in bursts.iter_mut() {
                for i in 0..b.len() {
                    fix(b.data_mut(i).expect("ours"));
                }
                let t0 = tsc::rdtsc();
                let w0 = Instant::now();
                let c = call(&mut r, &st, b, 3);
                let t1 = tsc::rdtsc();
                if round > 0 {
                    timed += w0.elapsed().as_secs_f64();
                    cycles += t1.wrapping_sub(t0);
                    packets += b.len() as u64;
                }
                black_box(c.next[0]);
            }
        }
        let _ = w;
        // The FIB alone, in the router's order.
        let keys: Vec<u32> = dsts.iter().map(|d| u32::from(*d)).collect();
        let fib = r.fib4();
        let mut leaves = [0u32; BURST];
        let t0 = tsc::rdtsc();
        for _ in 0..64 {
            for burst in keys.chunks(BURST) {
                let burst = black_box(burst);
                for a in burst {
                    fib.prefetch_root4(*a);
                }
                let mut later = 0;
                for (i, a) in burst.iter().enumerate() {
                    let e = fib.root4(*a);
                    leaves[i] = e;
                    later |= u32::from(!Lpm::is_leaf(e)) << i;
                }
                while later != 0 {
                    let i = later.trailing_zeros() as usize;
                    leaves[i] = fib.leaf4(burst[i], leaves[i]);
                    later &= later - 1;
                }
                black_box(&leaves);
            }
        }
        let lookup = tsc::rdtsc().wrapping_sub(t0) as f64 / (64 * keys.len()) as f64;
        println!(
            "RESULT routes={n} cycles_per_packet={:.1} ns_per_packet={:.1} lookup_cycles={lookup:.1} plies={} build_ms={build_ms:.1} forwarded={}",
            cycles as f64 / packets as f64,
            timed * 1e9 / packets as f64,
            r.fib4().plies(),
            st.extra_by_name("forwarded").unwrap_or(0),
        );
        for b in bursts.iter_mut() {
            b.free_all();
        }
    }
}
