//! ACL lookups, ours, measured alone: random rule sets of 10, 1,000 and 10,000 rules
//! (IPv4 prefixes, ports, protocols; `ironpath_nodes::acl::sample`) are compiled,
//! then random keys are looked up (timed with the TSC, keys made beforehand). The
//! packet parse is not timed: this is the classifier's cost against the rule count.
//!
//! One line `RESULT rules=N ns_per_lookup=... cycles_per_lookup=... linear_ns=... trees=...
//! depth=... leaf_slots=... build_ms=...` per rule count (`linear_ns`: a first-match scan
//! of the same rules, for scale).
//!
//! With `ACL_DENSE=1`, the rules overlap heavily (prefixes from /8, open ranges).
//!
//! With `ACL_EXPORT=DIR`, each rule set and the keys are also written in ClassBench
//! form, as DPDK's `dpdk-test-acl` reads them (`DIR/rules-N.txt`, `DIR/trace.txt`),
//! with our first matches for every key (`DIR/match-N.txt`, the rule's index or
//! `4294967295` for none): `ci/bench-acl` runs `rte_acl` on the same input and checks
//! it agrees.
#![forbid(unsafe_code)]

use ironpath_eal::tsc;
use ironpath_nodes::acl::sample::{random_key, random_rules, Lcg};
use ironpath_nodes::acl::trie::{v4_key, V4Key, MISS};
use ironpath_nodes::acl::{Classifier, Rule};
use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Instant;

/// The IPv4 address in a v4-mapped key.
fn v4(k: u128) -> u32 {
    k as u32
}

/// `a.b.c.d/len` of a v4-mapped `[lo, hi]` prefix range (`0.0.0.0/0` for any).
fn prefix(r: (u128, u128)) -> String {
    if r == (0, u128::MAX) {
        return "0.0.0.0/0".into();
    }
    let len = 32 - (v4(r.1) - v4(r.0)).count_ones();
    format!("{}/{len}", std::net::Ipv4Addr::from(v4(r.0)))
}

/// One ClassBench rule line: `@src/len dst/len slo : shi dlo : dhi proto/mask`.
fn classbench(r: &Rule) -> String {
    let [src, dst, proto, sp, dp] = r.ranges;
    let proto = if proto == (0, 255) { "0/0x00".to_string() } else { format!("{}/0xff", proto.0) };
    format!("@{} {} {} : {} {} : {} {proto}\n", prefix(src), prefix(dst), sp.0, sp.1, dp.0, dp.1)
}

fn export(dir: &str, keys: &[[u128; 5]], n: usize, rules: &[Rule], c: &Classifier) {
    let mut t = String::new();
    for k in keys {
        let _ = writeln!(t, "{} {} {} {} {}", v4(k[0]), v4(k[1]), k[3], k[4], k[2]);
    }
    std::fs::write(format!("{dir}/trace.txt"), t).expect("write trace.txt");
    std::fs::write(format!("{dir}/rules-{n}.txt"), rules.iter().map(classbench).collect::<String>())
        .expect("write rules");
    let m: String = keys.iter().map(|k| format!("{}\n", c.lookup(k).map_or(u32::MAX, |i| i as u32))).collect();
    std::fs::write(format!("{dir}/match-{n}.txt"), m).expect("write matches");
}

/// Keys per `lookup_burst` call (the node's burst).
const BURST: usize = 32;

fn main() {
    let mut g = Lcg(7);
    let keys: Vec<[u128; 5]> = (0..1 << 16).map(|_| random_key(&mut g)).collect();
    let dir = std::env::var("ACL_EXPORT").ok();
    // ACL_DENSE=1: rule sets that overlap heavily (the tests' `dense`), for build
    // time and memory when the tries split or give way to the trees.
    let dense = std::env::var_os("ACL_DENSE").is_some();
    for n in [10usize, 1_000, 10_000] {
        let rules = random_rules(&mut g, n, dense);
        if let Some(d) = &dir {
            export(d, &keys, n, &rules, &Classifier::new(rules.clone()));
        }
        // The first-match linear scan the tree replaces, on 4096 of the keys.
        let w = Instant::now();
        let mut lin = 0usize;
        for k in &keys[..4096] {
            lin += usize::from(
                rules.iter().any(|r| r.ranges.iter().zip(black_box(k)).all(|(&(lo, hi), &x)| lo <= x && x <= hi)),
            );
        }
        let linear_ns = w.elapsed().as_secs_f64() * 1e9 / 4096.0;
        let _ = black_box(lin);
        let t = Instant::now();
        let c = Classifier::new(rules);
        let build_ms = t.elapsed().as_secs_f64() * 1e3;
        // Warm up, then time 4 million lookups: in bursts of 32 keys, as the node
        // looks them up, and one key at a time.
        let mut found = [None; BURST];
        let mut burst = |hits: &mut usize| {
            for ks in keys.chunks(BURST) {
                c.lookup_burst(black_box(ks), &mut found);
                *hits += found.iter().filter(|f| f.is_some()).count();
            }
        };
        let mut hits = 0usize;
        burst(&mut hits);
        let rounds = 64;
        let t0 = tsc::rdtsc();
        let w = Instant::now();
        for _ in 0..rounds {
            burst(&mut hits);
        }
        let cycles = tsc::rdtsc().wrapping_sub(t0);
        let ns = w.elapsed().as_secs_f64() * 1e9;
        let t1 = tsc::rdtsc();
        for _ in 0..rounds / 4 {
            for k in &keys {
                hits += usize::from(c.lookup(black_box(k)).is_some());
            }
        }
        let single = tsc::rdtsc().wrapping_sub(t1) as f64 / (rounds / 4 * keys.len()) as f64;
        // The tries alone, on keys packed beforehand (as rte_acl's are).
        let packed: Vec<V4Key> = keys.iter().filter_map(v4_key).collect();
        let mut best = [0u32; BURST];
        let t2 = tsc::rdtsc();
        for _ in 0..rounds {
            for ks in packed.chunks(BURST) {
                c.lookup_v4_burst(black_box(ks), &mut best);
                hits += best.iter().filter(|&&b| b != MISS).count();
            }
        }
        let packed_cycles = tsc::rdtsc().wrapping_sub(t2) as f64 / (rounds * packed.len()) as f64;
        let lookups = (rounds * keys.len()) as f64;
        let (nodes, bytes) = c.trie_size();
        println!(
            "RESULT rules={n} ns_per_lookup={:.1} cycles_per_lookup={:.1} packed_cycles={packed_cycles:.1} single_cycles={single:.1} linear_ns={linear_ns:.1} tries={} trie_nodes={nodes} trie_kib={} trees={} depth={} leaf_slots={} build_ms={build_ms:.1} hits={}",
            ns / lookups,
            cycles as f64 / lookups,
            c.tries(),
            bytes / 1024,
            c.trees(),
            c.depth(),
            c.leaf_slots(),
            black_box(hits) / (2 * rounds + 1 + rounds / 4),
        );
    }
}
