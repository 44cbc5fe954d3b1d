//! ACL lookups, ours, measured alone: random rule sets of 10, 1,000 and 10,000 rules
//! (IPv4 prefixes, ports, protocols; `ironpath_nodes::acl::sample`) are compiled,
//! then random keys are looked up (timed with the TSC, keys made beforehand). The
//! packet parse is not timed: this is the classifier's cost against the rule count.
//!
//! One line `RESULT rules=N ns_per_lookup=... cycles_per_lookup=... linear_ns=... trees=...
//! depth=... leaf_slots=... build_ms=...` per rule count (`linear_ns`: a first-match scan
//! of the same rules, for scale).
#![forbid(unsafe_code)]

use ironpath_eal::tsc;
use ironpath_nodes::acl::sample::{random_key, random_rules, Lcg};
use ironpath_nodes::acl::Classifier;
use std::hint::black_box;
use std::time::Instant;

fn main() {
    let mut g = Lcg(7);
    let keys: Vec<[u128; 5]> = (0..1 << 16).map(|_| random_key(&mut g)).collect();
    for n in [10usize, 1_000, 10_000] {
        let rules = random_rules(&mut g, n, false);
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
        // Warm up, then time 4 million lookups.
        let mut hits = 0usize;
        for k in &keys {
            hits += usize::from(c.lookup(black_box(k)).is_some());
        }
        let rounds = 64;
        let t0 = tsc::rdtsc();
        let w = Instant::now();
        for _ in 0..rounds {
            for k in &keys {
                hits += usize::from(c.lookup(black_box(k)).is_some());
            }
        }
        let cycles = tsc::rdtsc().wrapping_sub(t0);
        let lookups = (rounds * keys.len()) as f64;
        println!(
            "RESULT rules={n} ns_per_lookup={:.1} cycles_per_lookup={:.1} linear_ns={linear_ns:.1} trees={} depth={} leaf_slots={} build_ms={build_ms:.1} hits={}",
            w.elapsed().as_secs_f64() * 1e9 / lookups,
            cycles as f64 / lookups,
            c.trees(),
            c.depth(),
            c.leaf_slots(),
            black_box(hits) / (rounds + 1),
        );
    }
}
