//! Included (`#[path]`) by the test crates that skip tests: how a skipped test is
//! reported, the same everywhere.

/// Records that the running test is skipped and why: one line on stderr and one
/// in `$IRONPATH_SKIP_LOG` (ci/test.sh counts them). Under
/// `IRONPATH_REQUIRE_ALL=1` (CI, which installs everything and runs as root) a skip
/// is a failure.
pub fn skip(why: &str) {
    let name = std::thread::current().name().unwrap_or("?").to_string();
    assert!(std::env::var_os("IRONPATH_REQUIRE_ALL").is_none(), "{name} {why}, and IRONPATH_REQUIRE_ALL is set");
    eprintln!("SKIPPED {name}: {why}");
    if let Some(log) = std::env::var_os("IRONPATH_SKIP_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(log) {
            let _ = writeln!(f, "{name}: {why}");
        }
    }
}
