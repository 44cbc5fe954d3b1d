//! `policer` alone: bursts of 32 UDP/IPv4 frames (64 bytes, 1,024 flows, DSCPs 0..63)
//! through the node, timed with the TSC around each call, at a virtual clock of 1 GHz
//! advancing 1 µs per burst (32 Mpps offered, 16.4 Gbit/s of frames: some packets of
//! each burst over the committed rate). Red packets pass (`red: pass`) so the same
//! frames are used again; the cost of calling an empty node the same way is measured
//! alike and taken off.
//!
//! One line `RESULT case=NAME cycles_per_packet=... ns_per_packet=... green=... yellow=...
//! red=...` per configuration: srTCM colour-blind with one meter (the common case), the
//! same at a rate every packet fits, trTCM colour-aware per flow (1,024 meters) with
//! yellow remarked, and srTCM per DSCP (64 meters).
#![forbid(unsafe_code)]

use ironpath_eal::{tsc, Burst, Mbuf, MemPolicy, Mempool, MempoolConfig, MAX_BURST};
use ironpath_graph::testing::call;
use ironpath_graph::{Dispatch, Node, NodeCx, NodeStats};
use ironpath_nodes::policer::{Algorithm, ColorAction, Per, Policer, PolicerConfig, RateUnit};
use std::hint::black_box;
use std::time::Instant;

const BURST: usize = 32;
const BURSTS: usize = 32;
const HZ: u64 = 1_000_000_000;

/// A 64-byte UDP/IPv4 frame of flow `k` (its source port) with DSCP `dscp`.
fn frame(k: u16, dscp: u8) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 1, 0]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x0a]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[15] = dscp << 2;
    f[16..18].copy_from_slice(&46u16.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[198, 18, 0, 2]);
    f[30..34].copy_from_slice(&[198, 18, 1, 2]);
    f[34..36].copy_from_slice(&k.to_be_bytes());
    f[36..38].copy_from_slice(&9u16.to_be_bytes());
    f[38..40].copy_from_slice(&26u16.to_be_bytes());
    f
}

/// A node that sends every packet on: the cost of the call itself.
struct Empty;

impl Node for Empty {
    fn process(&mut self, _: &mut NodeCx<'_>, pkts: &mut Burst, _: &mut [u16; MAX_BURST]) -> Dispatch {
        black_box(pkts.len());
        Dispatch::All(0)
    }
}

/// Cycles per packet of `node` over `bursts`, best of 5 rounds.
fn time(node: &mut dyn Node, st: &NodeStats, bursts: &mut [Burst], now: &mut u64) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..5 {
        let mut cycles = 0u64;
        for _ in 0..128 {
            for b in bursts.iter_mut() {
                *now += 1000;
                let t0 = tsc::rdtsc();
                let c = call(node, st, b, *now);
                cycles += tsc::rdtsc().wrapping_sub(t0);
                black_box(c.dispatch);
            }
        }
        best = best.min(cycles as f64 / (128 * BURSTS * BURST) as f64);
    }
    best
}

fn main() {
    let pool = Mempool::create(&MempoolConfig::new("bench-policer", 16_384).policy(MemPolicy::NoHuge)).expect("pool");
    let mut bursts: Vec<Burst> = (0..BURSTS)
        .map(|i| {
            let mut b = Burst::new();
            for j in 0..BURST {
                let k = (i * BURST + j) as u16;
                let m = Mbuf::from_slice(&pool, &frame(k % 1024, (k % 64) as u8)).expect("mbuf");
                assert!(b.push(m).is_ok());
            }
            b
        })
        .collect();
    let mut now = 0u64;
    let empty_st = NodeStats::new(&[]);
    let base = time(&mut Empty, &empty_st, &mut bursts, &mut now);
    let hz_start = tsc::rdtsc();
    let w = Instant::now();
    let cfg = |algorithm, cir: u64, pir: u64, aware, per, yellow| PolicerConfig {
        algorithm,
        unit: RateUnit::Bps,
        cir,
        cbs: 3000,
        pir,
        ebs: if algorithm == Algorithm::Trtcm { 6000 } else { 3000 },
        aware,
        per,
        flows: 1024,
        actions: [ColorAction::Pass, yellow, ColorAction::Pass],
        dscp: [0, 10, 0],
    };
    let cases = [
        ("srtcm-blind-one-meter", cfg(Algorithm::Srtcm, 10_000_000_000, 0, None, Per::Node, ColorAction::Pass)),
        ("srtcm-blind-all-green", cfg(Algorithm::Srtcm, 100_000_000_000, 0, None, Per::Node, ColorAction::Pass)),
        (
            "trtcm-aware-per-flow-remark",
            cfg(Algorithm::Trtcm, 10_000, 20_000, Some((1 << 10 | 1 << 12, 1 << 14)), Per::Flow, ColorAction::Remark),
        ),
        ("srtcm-per-dscp", cfg(Algorithm::Srtcm, 100_000_000, 0, None, Per::Dscp, ColorAction::Pass)),
    ];
    for (name, c) in cases {
        let mut node = Policer::new(&c, HZ, [7; 16], pool.clone()).expect("policer");
        let st = NodeStats::new(node.counters());
        let cycles = time(&mut node, &st, &mut bursts, &mut now) - base;
        let get = |n: &str| st.extra_by_name(n).unwrap_or(0);
        println!(
            "RESULT case={name} cycles_per_packet={cycles:.1} ns_per_packet={:.2} green={} yellow={} red={}",
            cycles * w.elapsed().as_secs_f64() * 1e9 / tsc::rdtsc().wrapping_sub(hz_start) as f64,
            get("green"),
            get("yellow"),
            get("red"),
        );
    }
    for mut b in bursts {
        b.free_all();
    }
}
