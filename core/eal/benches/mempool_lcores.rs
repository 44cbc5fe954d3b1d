//! Mempool get+put measured as DPDK's `mempool_perf_autotest` measures it: K pinned
//! lcores (CPUs 0..K) loop at the same time for a fixed time, each getting 32
//! objects in one bulk and putting them back in one bulk; the rate R is objects
//! got+put per second summed over the K lcores, and the figure is
//! `K * 1e9 / R` ns per object per core (what `ci/bench/dpdk-core.sh` computes
//! from DPDK's `rate_persec`). Median of several repetitions.
//!
//! `cargo bench -p ironpath-eal --bench mempool_lcores [-- --secs S --reps N]`
//! (default 2 s, 5 repetitions). Prints a table; used by `ci/bench-core` for the
//! two-core mempool rows, so both sides are measured the same way.

use ironpath_eal::abi::Mbuf as RawMbuf;
use ironpath_eal::lcore;
use ironpath_eal::{CachePadded, MemPolicy, Mempool, MempoolConfig};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BULK: usize = 32;

fn run(pool: &Arc<CachePadded<Mempool>>, cores: u32, secs: f64) -> f64 {
    let start = Arc::new(CachePadded(AtomicBool::new(false)));
    let stop = Arc::new(CachePadded(AtomicBool::new(false)));
    let mut hs = Vec::new();
    for lc in 0..cores {
        let (p, s1, s2) = (pool.clone(), start.clone(), stop.clone());
        hs.push(
            lcore::launch(lc, true, move || {
                let mut objs = [std::ptr::null_mut::<RawMbuf>(); BULK];
                while !s1.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                let mut n = 0u64;
                // Check the flag every 256 iterations only (DPDK's inner loop is
                // 65536 objects between clock reads).
                while !s2.load(Ordering::Relaxed) {
                    for _ in 0..256 {
                        if p.get_bulk(&mut objs).is_ok() {
                            // SAFETY: objects from this pool, returned once.
                            unsafe { p.put_bulk(&objs) };
                            n += BULK as u64;
                        }
                    }
                }
                n
            })
            .expect("launch lcore"),
        );
    }
    std::thread::sleep(Duration::from_millis(50));
    let t = Instant::now();
    start.store(true, Ordering::Release);
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    let total: u64 = hs.into_iter().map(|h| h.join().expect("lcore")).sum();
    let rate = total as f64 / t.elapsed().as_secs_f64();
    f64::from(cores) * 1e9 / rate
}

fn main() {
    let mut secs = 2.0;
    let mut reps = 5;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--secs" => secs = args.next().and_then(|v| v.parse().ok()).expect("--secs S"),
            "--reps" => reps = args.next().and_then(|v| v.parse().ok()).expect("--reps N"),
            _ => {} // cargo bench passes --bench
        }
    }
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    println!("| mempool get+put bulk 32 (n_keep=32) | cores | ns/object/core (median of {reps} x {secs} s) |");
    println!("|---|---|---|");
    for cache in [512u32, 0] {
        for cores in [1u32, 2] {
            if cores > ncpu {
                continue;
            }
            // As DPDK's test: a pool much larger than what the lcores hold.
            let cfg = MempoolConfig::new("perf", 131_071).cache_size(cache).policy(MemPolicy::PreferHuge);
            let pool = Arc::new(CachePadded(Mempool::create(&cfg).expect("pool")));
            let mut v: Vec<f64> = (0..reps).map(|_| run(&pool, cores, secs)).collect();
            v.sort_by(f64::total_cmp);
            let what = if cache == 0 { "no cache".to_string() } else { format!("cache {cache}") };
            println!("| {what} | {cores} | {:.2} (min {:.2}, max {:.2}) |", v[v.len() / 2], v[0], v[v.len() - 1]);
        }
    }
}
