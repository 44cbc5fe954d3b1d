//! Needs root: reserves 2 MiB hugepages through `/proc/sys/vm/nr_hugepages`, checks a
//! pool lands on them, then sets the reservation to 0 and checks the fallback to
//! ordinary pages warns exactly once per process. The original reservation is
//! restored even when an assertion fails.

use ironpath_eal::memory::{hugepages_free, MemRegion};
use ironpath_eal::{MemKind, MemPolicy, Mempool, MempoolConfig};

#[path = "../../../ci/skip.rs"]
mod skip_log;
use skip_log::skip;

const NR: &str = "/proc/sys/vm/nr_hugepages";
const CHILD_ENV: &str = "IRONPATH_HUGEPAGE_TEST_CHILD";

struct Restore(String);

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = std::fs::write(NR, &self.0);
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn pool(name: &str) -> Mempool {
    Mempool::create(&MempoolConfig::new(name, 8192).policy(MemPolicy::PreferHuge)).unwrap()
}

/// Kernel page size of the mapping that contains `addr`, from /proc/self/smaps.
fn kernel_page_kb(addr: usize) -> Option<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut inside = false;
    for line in smaps.lines() {
        if let Some((range, _)) = line.split_once(' ') {
            if let Some((a, b)) = range.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                    inside = (a..b).contains(&addr);
                    continue;
                }
            }
        }
        if inside {
            if let Some(v) = line.strip_prefix("KernelPageSize:") {
                return v.trim().trim_end_matches("kB").trim().parse().ok();
            }
        }
    }
    None
}

#[test]
fn pool_uses_hugepages_when_reserved_and_falls_back_with_one_warning() {
    if std::env::var_os(CHILD_ENV).is_some() {
        // Child mode: three pools without hugepages; the parent counts the warnings
        // (printed by the process's logger, as in `ironpath`).
        ironpath_eal::logging::init();
        for i in 0..3 {
            let p = pool(&format!("c{i}"));
            assert_eq!(p.mem_kind(), MemKind::Normal);
        }
        assert!(MemRegion::fallback_warned());
        return;
    }
    if !is_root() {
        skip(&format!("needs root to change {NR}"));
        return;
    }
    let _restore = Restore(std::fs::read_to_string(NR).unwrap().trim().to_string());

    std::fs::write(NR, "64").unwrap();
    let before = hugepages_free();
    assert!(before >= 16, "kernel gave only {before} hugepages");
    let p = pool("huge");
    assert_eq!(p.mem_kind(), MemKind::Hugepages);
    let (va, _iova, len) = p.region();
    assert_eq!(kernel_page_kb(va as usize), Some(2048), "smaps must show 2 MiB pages for the pool");
    let used = before - hugepages_free();
    assert_eq!(used, len / (2 << 20), "every page of the pool is a faulted-in hugepage");
    drop(p);
    assert_eq!(hugepages_free(), before, "pages returned when the pool goes");

    std::fs::write(NR, "0").unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "pool_uses_hugepages_when_reserved_and_falls_back_with_one_warning", "--nocapture"])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stderr}");
    let warnings = stderr.matches("ironpath: warning: no free 2 MiB hugepages").count();
    assert_eq!(warnings, 1, "exactly one warning for three pools:\n{stderr}");
}
