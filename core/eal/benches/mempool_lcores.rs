//! Mempool get+put measured as DPDK's `mempool_perf_autotest` measures it: K pinned
//! lcores (CPUs 0..K) loop at the same time for a fixed time, each getting 32
//! objects in one bulk and putting them back in one bulk; the rate R is objects
//! got+put per second summed over the K lcores, and the figure is
//! `K * 1e9 / R` ns per object per core (what `ci/bench/dpdk-core.sh` computes
//! from DPDK's `rate_persec`). Median of several repetitions.
//!
//! `cargo bench -p ironpath-eal --bench mempool_lcores [-- --secs S --reps N --pool SIZE
//! --cache 0|512 --only ring|mempool --ring-iters N]` (default 2 s, 5 repetitions, DPDK's
//! pool size, both caches, 2^18 ring bulks a side). Prints two tables; `ci/bench-core`
//! takes its mempool rows and its two-core ring rows (MPMC and SPSC) from here, so both sides are
//! measured the same way (the rings as `ring_perf_autotest`'s core-pair test, see
//! `ring_pair` and `spsc_pair`).

use ironpath_eal::abi::Mbuf as RawMbuf;
use ironpath_eal::lcore;
use ironpath_eal::mpmc::MpmcRing;
use ironpath_eal::spsc::spsc_ring;
use ironpath_eal::{CachePadded, MemPolicy, Mempool, MempoolConfig};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BULK: usize = 32;
/// DPDK 22.11's `MEMPOOL_SIZE` for its EAL's lcore count (`-l 0-1` in `ci/bench/dpdk-core.sh`):
/// `lcores * (MAX_KEEP 512 + RTE_MEMPOOL_CACHE_MAX_SIZE 512) - 1`. The same pool serves the
/// 1- and 2-core passes there, so it does here. The pool size matters on the no-cache rows:
/// its ring (2048 slots, 16 KiB of pointers) stays in L1/L2, where a 128 Ki-object ring's
/// 1 MiB streams through L2.
const POOL_SIZE: u32 = 2 * (512 + 512) - 1;

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

/// Bulks per thread in one ring measurement (DPDK's 2^15 is a few milliseconds here;
/// 2^18 is about a tenth of a second, long enough to ride out one scheduler tick).
const RING_ITERS: u64 = 1 << 18;

/// DPDK 22.11's `ring_perf_autotest` core-pair test (`run_on_core_pair`): lcore 0
/// runs `enq` and lcore 1 runs `deq` until each has moved `iters` x 32 objects,
/// starting together and each timing its own loop; each call moves up to 32 and
/// returns how many (0: the ring refused, retried after a pause). The figure is the
/// enqueuer's ns per object plus the dequeuer's (the CPU time one object costs,
/// summed over both cores).
fn core_pair<E, D>(iters: u64, enq: E, deq: D) -> f64
where
    E: FnMut(usize) -> usize + Send + 'static,
    D: FnMut(usize) -> usize + Send + 'static,
{
    let ready = Arc::new(CachePadded(AtomicU32::new(0)));
    let total = iters * BULK as u64;
    let e = pair_side(0, ready.clone(), total, enq);
    let d = pair_side(1, ready, total, deq);
    [e, d].into_iter().map(|h| h.join().expect("lcore")).sum()
}

/// One side of [`core_pair`] on lcore `lc`: its ns per object.
fn pair_side<F>(lc: u32, ready: Arc<CachePadded<AtomicU32>>, total: u64, mut step: F) -> lcore::LcoreHandle<f64>
where
    F: FnMut(usize) -> usize + Send + 'static,
{
    lcore::launch(lc, true, move || {
        ready.fetch_add(1, Ordering::AcqRel);
        while ready.load(Ordering::Acquire) != 2 {
            std::hint::spin_loop();
        }
        let t = Instant::now();
        let mut moved = 0u64;
        while moved < total {
            let n = step((total - moved).min(BULK as u64) as usize);
            if n == 0 {
                std::hint::spin_loop();
            }
            moved += n as u64;
        }
        t.elapsed().as_secs_f64() * 1e9 / total as f64
    })
    .expect("launch lcore")
}

/// The two-core MPMC ring figure as `ring_perf_autotest` (MP/MC bulk): bulks of 32
/// through a 4096-slot ring, as DPDK's.
fn ring_pair(iters: u64) -> f64 {
    let r = Arc::new(CachePadded(MpmcRing::<usize>::new(4096).expect("ring")));
    let r2 = r.clone();
    let objs = [0usize; BULK];
    let mut out = [0usize; BULK];
    core_pair(
        iters,
        move |_| if r.enqueue_bulk(&objs) { BULK } else { 0 },
        move |_| if r2.dequeue_bulk(&mut out) { BULK } else { 0 },
    )
}

/// The two-core SPSC ring figure: the inter-lcore SPSC ring (4096 slots) in bursts
/// of 32 (a burst that moved fewer goes on with the rest), against DPDK's SP/SC
/// core-pair line.
fn spsc_pair(iters: u64) -> f64 {
    /// The pointers moved: placeholders, never dereferenced.
    struct Ptrs([*mut RawMbuf; BULK]);
    // SAFETY: the pointers are dangling or null and only copied, never dereferenced.
    unsafe impl Send for Ptrs {}
    let (mut p, mut c) = spsc_ring(4096);
    let objs = Ptrs([std::ptr::dangling_mut(); BULK]);
    let mut out = Ptrs([std::ptr::null_mut(); BULK]);
    // (`&objs` / `&mut out` whole: a closure capturing only the field would hold the
    // array, which is not `Send`.)
    core_pair(
        iters,
        move |want| {
            let o = &objs;
            p.enqueue_burst(&o.0[..want])
        },
        move |want| {
            let o = &mut out;
            c.dequeue_burst(&mut o.0[..want])
        },
    )
}

fn main() {
    let mut secs = 2.0;
    let mut reps = 5;
    let mut pool_size = POOL_SIZE;
    let mut only_cache: Option<u32> = None;
    let mut ring_iters = RING_ITERS;
    let mut only: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--secs" => secs = args.next().and_then(|v| v.parse().ok()).expect("--secs S"),
            "--pool" => pool_size = args.next().and_then(|v| v.parse().ok()).expect("--pool N"),
            "--cache" => only_cache = Some(args.next().and_then(|v| v.parse().ok()).expect("--cache N")),
            "--only" => only = args.next(),
            "--ring-iters" => ring_iters = args.next().and_then(|v| v.parse().ok()).expect("--ring-iters N"),
            "--reps" => reps = args.next().and_then(|v| v.parse().ok()).expect("--reps N"),
            _ => {} // cargo bench passes --bench
        }
    }
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let mempool = only.as_deref() != Some("ring");
    if mempool {
        println!("| mempool get+put bulk 32 (n_keep=32) | cores | ns/object/core (median of {reps} x {secs} s) |");
        println!("|---|---|---|");
    }
    for cache in [512u32, 0].into_iter().filter(|c| mempool && only_cache.is_none_or(|o| o == *c)) {
        for cores in [1u32, 2] {
            if cores > ncpu {
                continue;
            }
            let cfg = MempoolConfig::new("perf", pool_size).cache_size(cache).policy(MemPolicy::PreferHuge);
            let pool = Arc::new(CachePadded(Mempool::create(&cfg).expect("pool")));
            let mut v: Vec<f64> = (0..reps).map(|_| run(&pool, cores, secs)).collect();
            v.sort_by(f64::total_cmp);
            let what = if cache == 0 { "no cache".to_string() } else { format!("cache {cache}") };
            println!("| {what} | {cores} | {:.2} (min {:.2}, max {:.2}) |", v[v.len() / 2], v[0], v[v.len() - 1]);
        }
    }
    if ncpu >= 2 && only.as_deref() != Some("mempool") && only_cache.is_none() {
        let n = reps.max(9);
        let mut v: Vec<f64> = (0..n).map(|_| ring_pair(ring_iters)).collect();
        v.sort_by(f64::total_cmp);
        println!();
        println!("| ring bulk 32 (SPSC: bursts of 32), enqueue on lcore 0, dequeue on lcore 1 | cores | ns/object, enqueuer + dequeuer (median of {n}) |");
        println!("|---|---|---|");
        println!("| ring mpmc | 2 | {:.2} (min {:.2}, max {:.2}) |", v[v.len() / 2], v[0], v[v.len() - 1]);
        let mut v: Vec<f64> = (0..n).map(|_| spsc_pair(ring_iters)).collect();
        v.sort_by(f64::total_cmp);
        println!("| ring spsc | 2 | {:.2} (min {:.2}, max {:.2}) |", v[v.len() / 2], v[0], v[v.len() - 1]);
    }
}
