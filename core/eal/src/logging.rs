//! The process's one logger: every crate logs through the `log` facade and this
//! logger writes the records to stderr as `ironpath: LEVEL: message`, filtered by
//! level the way DPDK's `--log-level` filters its log types.
//!
//! A level is one of DPDK's names or numbers: `emergency` (1), `alert` (2),
//! `critical` (3) and `error` (4) show errors only, `warning` (5), `notice` (6) and
//! `info` (7) add warnings and notices, `debug` (8) shows everything. A rule
//! `PATTERN:LEVEL` sets the level of the log targets that match PATTERN (a target
//! is the Rust module path, e.g. `ironpath_nodes::tcp`, or `pmd.NAME` for a
//! plugin's messages); `*` in a pattern matches any run of characters. A plain
//! `LEVEL` sets the default. The default level is `notice` (DPDK's too).

use log::{Level, LevelFilter, Log, Metadata, Record};
use std::io::Write;
use std::sync::RwLock;

/// The level names `--log-level` accepts, lowest (fewest messages) first.
pub const LEVELS: &str = "emergency, alert, critical, error, warning, notice, info, debug (or 1-8)";

struct Filter {
    default: LevelFilter,
    /// `(pattern, level)`, later rules win.
    rules: Vec<(String, LevelFilter)>,
}

static FILTER: RwLock<Filter> = RwLock::new(Filter { default: LevelFilter::Info, rules: Vec::new() });

struct StderrLogger;

static LOGGER: StderrLogger = StderrLogger;

/// Installs the logger (once; later calls do nothing) at the default level.
pub fn init() {
    if log::set_logger(&LOGGER).is_ok() {
        update_max();
    }
}

/// Parses one DPDK level name or number.
pub fn parse_level(s: &str) -> Result<LevelFilter, String> {
    Ok(match s.trim().to_ascii_lowercase().as_str() {
        "1" | "emergency" | "emerg" | "2" | "alert" | "3" | "critical" | "crit" | "4" | "error" | "err" => {
            LevelFilter::Error
        }
        "5" | "warning" | "warn" => LevelFilter::Warn,
        "6" | "notice" | "7" | "info" => LevelFilter::Info,
        "8" | "debug" => LevelFilter::Debug,
        other => return Err(format!("`{other}` is not a log level: accepted {LEVELS}")),
    })
}

/// Applies one `--log-level` value: `LEVEL` (the default) or `PATTERN:LEVEL`.
pub fn set_level(spec: &str) -> Result<(), String> {
    let (pattern, level) = match spec.rsplit_once(':') {
        Some((p, l)) if !p.is_empty() => (Some(p.to_string()), parse_level(l)?),
        _ => (None, parse_level(spec)?),
    };
    {
        let mut f = FILTER.write().unwrap_or_else(|e| e.into_inner());
        match pattern {
            Some(p) => f.rules.push((p, level)),
            None => f.default = level,
        }
    }
    update_max();
    Ok(())
}

fn update_max() {
    let f = FILTER.read().unwrap_or_else(|e| e.into_inner());
    let max = f.rules.iter().map(|r| r.1).fold(f.default, Ord::max);
    log::set_max_level(max);
}

/// Whether `pattern` (with `*` wildcards) matches all of `s`.
fn glob(pattern: &str, s: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == s,
        Some((head, tail)) => {
            let Some(rest) = s.strip_prefix(head) else { return false };
            // `*` takes 0..=len bytes; try every cut on a character boundary.
            rest.char_indices().map(|(i, _)| i).chain([rest.len()]).any(|i| glob(tail, &rest[i..]))
        }
    }
}

fn level_for(target: &str) -> LevelFilter {
    let f = FILTER.read().unwrap_or_else(|e| e.into_inner());
    f.rules.iter().rev().find(|(p, _)| glob(p, target)).map_or(f.default, |r| r.1)
}

impl Log for StderrLogger {
    fn enabled(&self, m: &Metadata) -> bool {
        m.level() <= level_for(m.target())
    }

    fn log(&self, r: &Record) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let lvl = match r.level() {
            Level::Error => "error",
            Level::Warn => "warning",
            Level::Info => "info",
            Level::Debug | Level::Trace => "debug",
        };
        // A closed stderr loses the message; it is no reason to stop the data plane.
        let _ = writeln!(std::io::stderr().lock(), "ironpath: {lvl}: {}", r.args());
    }

    fn flush(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_patterns() {
        assert_eq!(parse_level("8").unwrap(), LevelFilter::Debug);
        assert_eq!(parse_level("NOTICE").unwrap(), LevelFilter::Info);
        assert_eq!(parse_level("critical").unwrap(), LevelFilter::Error);
        let e = parse_level("loud").unwrap_err();
        assert!(e.contains("`loud` is not a log level: accepted emergency, alert"), "{e}");
        assert!(glob("pmd.*", "pmd.net_tap"));
        assert!(glob("*tcp*", "ironpath_nodes::tcp::apps"));
        assert!(!glob("pmd.*", "ironpath_eal::port"));
        assert!(glob("ironpath_eal::port", "ironpath_eal::port"));
        set_level("pmd.*:debug").unwrap();
        set_level("warning").unwrap();
        assert_eq!(level_for("pmd.net_null"), LevelFilter::Debug);
        assert_eq!(level_for("ironpath_eal::memory"), LevelFilter::Warn);
        assert_eq!(log::max_level(), LevelFilter::Debug);
        assert!(set_level("pmd.*:loud").is_err());
    }
}
