//! Core data-structure benchmarks: mempool get+put bulk 32 (with and without the
//! per-lcore cache), MPMC ring and SPSC ring enqueue+dequeue bursts of 32; one thread
//! and two threads. Each iteration moves 32 objects; throughput is in objects.
//!
//! `ci/bench-core` runs these next to DPDK's `ring_perf_autotest` and
//! `mempool_perf_autotest` and prints ns per object side by side.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ironpath_eal::abi::Mbuf as RawMbuf;
use ironpath_eal::lcore;
use ironpath_eal::mpmc::MpmcRing;
use ironpath_eal::spsc::spsc_ring;
use ironpath_eal::{CachePadded, MemPolicy, Mempool, MempoolConfig};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BURST: usize = 32;

fn pool(cache: u32) -> Mempool {
    Mempool::create(&MempoolConfig::new("bench", 8192).cache_size(cache).policy(MemPolicy::PreferHuge)).unwrap()
}

fn mempool_one_thread(c: &mut Criterion, cache: u32, name: &str) {
    let p = pool(cache);
    let mut g = c.benchmark_group("mempool");
    g.throughput(Throughput::Elements(BURST as u64));
    g.bench_function(name, |b| {
        let mut objs = [std::ptr::null_mut::<RawMbuf>(); BURST];
        b.iter(|| {
            p.get_bulk(&mut objs).unwrap();
            // SAFETY: objects from this pool, returned once.
            unsafe { p.put_bulk(black_box(&objs)) };
        })
    });
    g.finish();
}

/// Both threads get/put on the same pool; the time is the main thread's.
fn mempool_two_threads(c: &mut Criterion, cache: u32, name: &str) {
    // Every shared object on its own cache lines: small heap objects otherwise sit
    // together and a write to one (a flag) would slow reads of another (the handle).
    let p = Arc::new(CachePadded(pool(cache)));
    let mut g = c.benchmark_group("mempool");
    g.throughput(Throughput::Elements(BURST as u64));
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let stop = Arc::new(CachePadded(AtomicBool::new(false)));
            let ready = Arc::new(CachePadded(AtomicBool::new(false)));
            let (p2, s2, r2) = (p.clone(), stop.clone(), ready.clone());
            let other = std::thread::spawn(move || {
                // Pinned like DPDK's lcores: the two threads on two different CPUs.
                let _ = lcore::pin_to_cpu(1, 1);
                lcore::register_thread().unwrap();
                let mut objs = [std::ptr::null_mut::<RawMbuf>(); BURST];
                let mut started = false;
                while !s2.load(Ordering::Relaxed) {
                    if p2.get_bulk(&mut objs).is_ok() {
                        // SAFETY: objects from this pool, returned once.
                        unsafe { p2.put_bulk(&objs) };
                    }
                    // Once only: a store per loop would bounce a line the other thread
                    // may share with the pool handle (small heap objects sit together).
                    if !started {
                        r2.store(true, Ordering::Relaxed);
                        started = true;
                    }
                }
            });
            // Time only while the other thread is really contending.
            while !ready.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
            let mut objs = [std::ptr::null_mut::<RawMbuf>(); BURST];
            let t = Instant::now();
            for _ in 0..iters {
                p.get_bulk(&mut objs).unwrap();
                // SAFETY: objects from this pool, returned once.
                unsafe { p.put_bulk(black_box(&objs)) };
            }
            let d = t.elapsed();
            stop.store(true, Ordering::Relaxed);
            other.join().unwrap();
            d
        })
    });
    g.finish();
}

fn rings(c: &mut Criterion) {
    let mut g = c.benchmark_group("ring");
    g.throughput(Throughput::Elements(BURST as u64));
    let r = MpmcRing::<*mut RawMbuf>::new(1024).unwrap();
    let objs = [std::ptr::null_mut::<RawMbuf>(); BURST];
    let mut out = [std::ptr::null_mut::<RawMbuf>(); BURST];
    g.bench_function("mpmc_burst32_1t", |b| {
        b.iter(|| {
            r.enqueue_burst(black_box(&objs));
            r.dequeue_burst(black_box(&mut out));
        })
    });
    let (mut p, mut cn) = spsc_ring(1024);
    g.bench_function("spsc_burst32_1t", |b| {
        b.iter(|| {
            p.enqueue_burst(black_box(&objs));
            cn.dequeue_burst(black_box(&mut out));
        })
    });
    // Two threads: a producer thread enqueues as fast as it can; the measured thread
    // dequeues `iters` bursts of 32.
    let r = Arc::new(MpmcRing::<usize>::new(2048).unwrap());
    g.bench_function("mpmc_burst32_2t", |b| {
        b.iter_custom(|iters| {
            let stop = Arc::new(AtomicBool::new(false));
            let (r2, s2) = (r.clone(), stop.clone());
            let prod = std::thread::spawn(move || {
                let _ = lcore::pin_to_cpu(1, 1);
                let objs = [1usize; BURST];
                while !s2.load(Ordering::Relaxed) {
                    r2.enqueue_burst(&objs);
                }
            });
            let mut out = [0usize; BURST];
            // Start the clock once the producer runs (a full ring says so).
            while r.len() < r.capacity() / 2 {
                std::hint::spin_loop();
            }
            let t = Instant::now();
            let mut got = 0u64;
            while got < iters * BURST as u64 {
                got += r.dequeue_burst(&mut out) as u64;
            }
            let d = t.elapsed();
            stop.store(true, Ordering::Relaxed);
            prod.join().unwrap();
            while r.dequeue_burst(&mut out) > 0 {}
            d
        })
    });
    g.bench_function("spsc_burst32_2t", |b| {
        b.iter_custom(|iters| {
            let (mut p, mut cn) = spsc_ring(2048);
            let stop = Arc::new(AtomicBool::new(false));
            let s2 = stop.clone();
            let prod = std::thread::spawn(move || {
                let _ = lcore::pin_to_cpu(1, 1);
                let objs = [std::ptr::dangling_mut::<RawMbuf>(); BURST];
                while !s2.load(Ordering::Relaxed) {
                    p.enqueue_burst(&objs);
                }
            });
            let mut out = [std::ptr::null_mut::<RawMbuf>(); BURST];
            while cn.count() < 1024 {
                std::hint::spin_loop();
            }
            let t = Instant::now();
            let mut got = 0u64;
            while got < iters * BURST as u64 {
                got += cn.dequeue_burst(&mut out) as u64;
            }
            let d = t.elapsed();
            stop.store(true, Ordering::Relaxed);
            prod.join().unwrap();
            d
        })
    });
    g.finish();
}

fn all(c: &mut Criterion) {
    // The measuring thread is an lcore, so the per-lcore cache applies.
    if lcore::lcore_id() == lcore::LCORE_ID_ANY {
        lcore::register_thread().unwrap();
    }
    // The measuring thread on CPU 0, helpers on CPU 1 (as DPDK's -l 0-1).
    let _ = lcore::pin_to_cpu(0, 0);
    // Cache 512 as in DPDK's mempool_perf_autotest "with cache" runs.
    mempool_one_thread(c, 512, "get_put_bulk32_cache_1t");
    mempool_one_thread(c, 0, "get_put_bulk32_nocache_1t");
    mempool_two_threads(c, 512, "get_put_bulk32_cache_2t");
    mempool_two_threads(c, 0, "get_put_bulk32_nocache_2t");
    rings(c);
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = all
}
criterion_main!(benches);
