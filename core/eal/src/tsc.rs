//! Time-stamp counter: cycle counts for per-packet cost (testpmd's
//! `--record-core-cycles`, graph node counters). These VMs have no hardware
//! performance counters, so the TSC is how the fast path measures itself.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Read the TSC (0 on targets without one).
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC exists on every x86_64 CPU and has no side effects.
        unsafe { std::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// A monotonic-clock reading and the TSC at that instant: the clock read is bracketed
/// by two TSC reads, retried until they are close (a thread preempted in between
/// would pair the clock with a TSC value far from it).
fn paired_sample() -> (Instant, u64) {
    let mut best = None;
    for _ in 0..20 {
        let c0 = rdtsc();
        let t = Instant::now();
        let c1 = rdtsc();
        let gap = c1.wrapping_sub(c0);
        let mid = c0.wrapping_add(gap / 2);
        if best.is_none_or(|(_, _, g)| gap < g) {
            best = Some((t, mid, gap));
        }
        if gap < 20_000 {
            break;
        }
    }
    let (t, c, _) = best.expect("at least one sample");
    (t, c)
}

/// TSC ticks per second, measured once against the monotonic clock over 20 ms (each
/// end a tight clock/TSC pair, so a loaded machine does not skew it).
pub fn tsc_hz() -> u64 {
    static HZ: OnceLock<u64> = OnceLock::new();
    *HZ.get_or_init(|| {
        let (t0, c0) = paired_sample();
        std::thread::sleep(Duration::from_millis(20));
        let (t1, c1) = paired_sample();
        let dt = t1.duration_since(t0).as_nanos().max(1);
        ((c1.wrapping_sub(c0) as u128 * 1_000_000_000) / dt) as u64
    })
}

#[cfg(all(test, not(loom)))]
mod tests {
    #[test]
    fn tsc_advances_at_a_plausible_rate() {
        let hz = super::tsc_hz();
        assert!((100_000_000..20_000_000_000).contains(&hz), "{hz}");
        let a = super::rdtsc();
        let b = super::rdtsc();
        assert!(b >= a);
    }
}
