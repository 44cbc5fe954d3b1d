//! `vxlan` alone: bursts of 32 frames through the node, timed with the TSC around
//! each call (the bursts are made before each call and freed after it, untimed).
//! Decapsulation: VXLAN packets (VNI 100, from the one remote) carrying 64-byte inner
//! UDP/IPv4 frames of 1,024 flows; encapsulation: the same inner frames, their
//! destination MAC learned behind the remote (one copy each, no flooding).
//!
//! One line `RESULT case=NAME cycles_per_packet=... ns_per_packet=...` per case.
#![forbid(unsafe_code)]

use ironpath_eal::{tsc, Burst, Mbuf, MemPolicy, Mempool, MempoolConfig};
use ironpath_graph::testing::call;
use ironpath_graph::{Node, NodeStats};
use ironpath_nodes::vxlan::{Vxlan, VxlanConfig};
use std::net::Ipv4Addr;
use std::time::Instant;

const BURST: usize = 32;
const ROUNDS: usize = 4096;
const LOCAL: [u8; 4] = [198, 18, 60, 1];
const REMOTE: [u8; 4] = [198, 18, 60, 2];
const UNDER_MAC: [u8; 6] = [0x02, 0, 0, 0, 9, 9];
const B_MAC: [u8; 6] = [0x02, 0, 0, 0, 7, 2];

/// A 64-byte UDP/IPv4 inner frame of flow `k`, to `B_MAC`.
fn inner(k: u16) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&B_MAC);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 7, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&46u16.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[198, 18, 70, 1]);
    f[30..34].copy_from_slice(&[198, 18, 70, 2]);
    f[34..36].copy_from_slice(&k.to_be_bytes());
    f[36..38].copy_from_slice(&53u16.to_be_bytes());
    f[38..40].copy_from_slice(&26u16.to_be_bytes());
    f
}

/// `inner` as VXLAN from the remote to us, outer UDP checksum 0.
fn outer(inner: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 50];
    f[0..6].copy_from_slice(&UNDER_MAC);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x0a]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((36 + inner.len()) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&REMOTE);
    f[30..34].copy_from_slice(&LOCAL);
    f[34..36].copy_from_slice(&49200u16.to_be_bytes());
    f[36..38].copy_from_slice(&4789u16.to_be_bytes());
    f[38..40].copy_from_slice(&((16 + inner.len()) as u16).to_be_bytes());
    f[42] = 0x08;
    f[46..49].copy_from_slice(&[0, 0, 100]);
    f.extend_from_slice(inner);
    let sum = !ironpath_wire::checksum::data(&f[14..34]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    f
}

fn burst(pool: &Mempool, frames: &[Vec<u8>], port: u16) -> Burst {
    let mut b = Burst::new();
    for f in frames {
        let mut m = Mbuf::from_slice(pool, f).expect("mbuf");
        m.header_mut().port = port;
        assert!(b.push(m).is_ok());
    }
    b
}

/// Cycles per packet of `node` on bursts of `frames` from `port`, best of 5.
fn time(node: &mut Vxlan, st: &NodeStats, pool: &Mempool, frames: &[Vec<u8>], port: u16) -> f64 {
    let mut best = f64::MAX;
    let mut now = 1;
    for _ in 0..5 {
        let mut cycles = 0u64;
        for r in 0..ROUNDS {
            let at = (r * BURST) % (frames.len() - BURST);
            let mut b = burst(pool, &frames[at..at + BURST], port);
            now += 1000;
            let t0 = tsc::rdtsc();
            let c = call(node, st, &mut b, now);
            cycles += tsc::rdtsc().wrapping_sub(t0);
            assert_eq!(b.len(), BURST, "{:?}", c.dispatch);
            b.free_all();
        }
        best = best.min(cycles as f64 / (ROUNDS * BURST) as f64);
    }
    best
}

fn main() {
    let pool = Mempool::create(&MempoolConfig::new("bench-vxlan", 8192).policy(MemPolicy::NoHuge)).expect("pool");
    let cfg = VxlanConfig {
        vni: 100,
        local: Ipv4Addr::from(LOCAL),
        remotes: vec![Ipv4Addr::from(REMOTE)],
        udp_port: 4789,
        mtu: 1500,
        max_macs: 4096,
        age_us: 300_000_000,
    };
    let inners: Vec<Vec<u8>> = (0..1024).map(inner).collect();
    let outers: Vec<Vec<u8>> = inners.iter().map(|f| outer(f)).collect();
    let mut node = Vxlan::new(cfg, 0, UNDER_MAC, pool.clone(), 1_000_000_000, [7; 16]);
    let st = NodeStats::new(node.counters());
    // B's MAC learned behind the remote (a frame from it decapsulated).
    let mut back = inner(0);
    back[0..6].copy_from_slice(&[0x02, 0, 0, 0, 7, 1]);
    back[6..12].copy_from_slice(&B_MAC);
    let mut b = burst(&pool, &[outer(&back)], 0);
    let _ = call(&mut node, &st, &mut b, 1);
    b.free_all();
    let (t0, w) = (tsc::rdtsc(), Instant::now());
    let decap = time(&mut node, &st, &pool, &outers, 0);
    let encap = time(&mut node, &st, &pool, &inners, 1);
    let ns = w.elapsed().as_secs_f64() * 1e9 / tsc::rdtsc().wrapping_sub(t0) as f64;
    for (name, c) in [("decap-64", decap), ("encap-64", encap)] {
        println!("RESULT case={name} cycles_per_packet={c:.1} ns_per_packet={:.2}", c * ns);
    }
    let get = |n: &str| st.extra_by_name(n).unwrap_or(0);
    assert_eq!(get("flooded"), 0, "every encapsulated frame went to its learned remote");
    assert!(get("decapsulated") > 0 && get("encapsulated") > 0);
}
