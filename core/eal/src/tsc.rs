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

/// TSC ticks per second, measured once against the monotonic clock (20 ms).
pub fn tsc_hz() -> u64 {
    static HZ: OnceLock<u64> = OnceLock::new();
    *HZ.get_or_init(|| {
        let t0 = Instant::now();
        let c0 = rdtsc();
        std::thread::sleep(Duration::from_millis(20));
        let c1 = rdtsc();
        let dt = t0.elapsed().as_nanos().max(1);
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
