//! What a new user sees first, through the built binary (no root, no NIC): the
//! shipped pipelines' port tables (totals and rates, bytes on ring ports, a quiet
//! stretch said once), the exit's `drops` lines naming why each node dropped,
//! `show runtime` columns that add up (a mirror counts what it was given), and the
//! command line: `--version`, app arguments before `--`, `--metrics` addresses,
//! did-you-mean, `-l` CPUs the process may not use (refused as DPDK refuses),
//! errors ending in a newline, a driver's failure in one line.

mod common;

use common::{is_root, skip, TempDir, BIN};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn ironpath(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let o = Command::new(BIN).args(args).envs(env.iter().copied()).output().expect("spawn ironpath");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

/// The port table's rows of `port`: (RX-packets, RX-bytes, TX-packets, RX-pps, RX-Mbit/s), as text.
fn port_rows(out: &str, port: &str) -> Vec<Vec<String>> {
    out.lines()
        .filter(|l| l.split_whitespace().next() == Some(port) && l.split_whitespace().count() == 10)
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// The `show runtime` row of `node`, split in words.
fn runtime_row(out: &str, node: &str) -> Vec<String> {
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(node) && l.split_whitespace().count() == 10)
        .unwrap_or_else(|| panic!("no runtime row {node}:\n{out}"))
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// The `drops` line of `node` at exit, if any.
fn drop_line<'a>(out: &'a str, node: &str) -> Option<&'a str> {
    let at = out.find("drops (node, packets, why):")?;
    out[at..].lines().skip(1).take_while(|l| l.starts_with("  ")).find(|l| l.split_whitespace().next() == Some(node))
}

const TABLE_HEADER: [&str; 10] =
    ["Name", "Port", "RX-packets", "RX-bytes", "TX-packets", "TX-bytes", "RX-pps", "TX-pps", "RX-Mbit/s", "TX-Mbit/s"];

#[test]
fn the_default_pipeline_is_healthy_and_its_table_has_totals_and_rates() {
    let cfg = repo().join("configs/default.yaml");
    let header = std::fs::read_to_string(&cfg).unwrap();
    assert!(header.contains("rate_pps: ${IRONPATH_RATE:-"), "the source has a rate");
    assert!(header.contains("no port drops") && header.contains("deliberate"), "the header explains drops");
    let (rc, out, err) =
        ironpath(&["run", cfg.to_str().unwrap(), "--duration", "3.2", "--no-huge", "--no-pin", "--no-telemetry"], &[]);
    assert_eq!(rc, 0, "{out}{err}");
    let headers: Vec<Vec<&str>> = out
        .lines()
        .filter(|l| l.starts_with("Name ") && l.contains("Port"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(headers.len() >= 3, "{out}");
    assert!(headers.iter().all(|h| h == &TABLE_HEADER), "{out}");
    // Totals never go down; the rates are of the last second.
    for port in ["p0", "p1"] {
        let rows = port_rows(&out, port);
        assert!(rows.len() >= 3, "{port}:\n{out}");
        let totals: Vec<u64> = rows.iter().map(|r| r[2].parse().unwrap()).collect();
        assert!(totals.windows(2).all(|w| w[0] <= w[1]), "{port} totals: {totals:?}\n{out}");
        assert!(*totals.last().unwrap() > 0, "{out}");
        let last_pps: f64 = rows.last().unwrap()[6].parse().unwrap();
        assert!(last_pps < *totals.last().unwrap() as f64, "a rate, not the total:\n{out}");
    }
    // No port drops, on an idle or a busy machine; the sink's drops are named deliberate.
    for tx in ["tx0", "tx1"] {
        assert_eq!(runtime_row(&out, tx)[6], "0", "{tx} dropped:\n{out}");
        assert!(drop_line(&out, tx).is_none(), "{out}");
    }
    let sink = drop_line(&out, "sink").unwrap_or_else(|| panic!("no drops line for the sink:\n{out}"));
    assert!(sink.contains("deliberate"), "{sink}");
    assert_eq!(sink.split_whitespace().nth(1), Some(runtime_row(&out, "sink")[6].as_str()), "{out}");
}

#[test]
fn a_port_that_drops_is_named_with_its_reason_at_exit() {
    // The default pipeline with small rings and no rate limit: p0's ring fills.
    let d = TempDir::new("first-run-drops");
    let text = std::fs::read_to_string(repo().join("configs/default.yaml")).unwrap().replace("size=16384", "size=64");
    let cfg = d.0.join("small-rings.yaml");
    std::fs::write(&cfg, text).unwrap();
    let (rc, out, err) = ironpath(
        &["run", cfg.to_str().unwrap(), "--duration", "1.5", "--no-huge", "--no-pin", "--no-telemetry"],
        &[("IRONPATH_RATE", "0")],
    );
    assert_eq!(rc, 0, "{out}{err}");
    let drops: u64 = runtime_row(&out, "tx0")[6].parse().unwrap();
    assert!(drops > 0, "{out}");
    let line = drop_line(&out, "tx0").unwrap_or_else(|| panic!("tx0's drops not explained:\n{out}"));
    assert!(line.contains(&format!("tx_full {drops}")) && line.contains("TX queue was full"), "{line}");
}

#[test]
fn http_loop_counts_ring_bytes_and_says_a_quiet_stretch_once() {
    let cfg = repo().join("configs/http-loop.yaml");
    let (rc, out, err) = ironpath(
        &["run", cfg.to_str().unwrap(), "--duration", "4.5", "--no-huge", "--no-pin", "--no-telemetry"],
        &[("IRONPATH_CONNS", "1"), ("IRONPATH_REQUESTS", "3")],
    );
    assert_eq!(rc, 0, "{out}{err}");
    let rows = port_rows(&out, "cport");
    assert!(!rows.is_empty(), "{out}");
    // 3 MiB came to the client: its RX bytes say so, and the first second's rate too.
    let rx_bytes: u64 = rows.last().unwrap()[3].parse().unwrap_or_else(|_| panic!("bytes counted:\n{out}"));
    assert!(rx_bytes > 3 << 20, "{out}");
    let first_mbit: f64 = rows[0][8].parse().unwrap();
    assert!(first_mbit > 0.0, "{out}");
    // The work ends within the first second or two: the quiet rest is one line, then
    // the final table (not rows of zeros).
    let quiet = out.lines().filter(|l| l.contains("no packet moved on any port")).count();
    assert_eq!(quiet, 1, "{out}");
    let zero_rows = rows.iter().filter(|r| r[6] == "0" && r[7] == "0").count();
    assert!(zero_rows <= 1, "only the final table may show a quiet second:\n{out}");
}

/// `show runtime` through the binary: a mirror's packets are what it was given; what
/// it sent on each edge is on a line of its own; Pkts/call = Packets / Calls.
#[test]
fn show_runtime_counts_a_mirror_by_what_it_received() {
    let d = TempDir::new("first-run-mirror");
    let cfg = d.0.join("mirror.yaml");
    std::fs::write(
        &cfg,
        "name: mirror-count
mempools:
  - {name: mp0, size: 4095}
lcores:
  - id: 0
nodes:
  - {name: gen, type: source, lcore: 0, params: {count: 1000, burst: 16}}
  - {name: m, type: mirror, lcore: 0}
  - {name: seen, type: counter, lcore: 0}
  - {name: end, type: drop, lcore: 0}
  - {name: copies, type: drop, lcore: 0}
edges:
  - {from: gen, to: m}
  - {from: m, next: out, to: seen}
  - {from: m, next: copy, to: copies}
  - {from: seen, to: end}
",
    )
    .unwrap();
    let (rc, out, err) =
        ironpath(&["run", cfg.to_str().unwrap(), "--duration", "1", "--no-huge", "--no-pin", "--no-telemetry"], &[]);
    assert_eq!(rc, 0, "{out}{err}");
    let m = runtime_row(&out, "m");
    assert_eq!(m[5], "1000", "the mirror counts what it received:\n{out}");
    for (edge, to) in [("out", "seen"), ("copy", "copies")] {
        let l = out.lines().find(|l| l.trim_start().starts_with(&format!("to {edge} -> {to}"))).unwrap_or_else(|| {
            panic!("no line for edge {edge}:\n{out}");
        });
        assert_eq!(l.split_whitespace().nth(4), Some("1000"), "{l}");
    }
    for node in ["gen", "m", "seen", "end", "copies"] {
        let r = runtime_row(&out, node);
        let num = |k: usize| -> f64 { r[k].parse().unwrap() };
        assert!(num(4) <= num(3), "Busy <= Calls: {r:?}");
        assert_eq!(format!("{:.2}", num(5) / num(3)), r[8], "{node}: Pkts/call = Packets / Calls\n{out}");
        assert_eq!(format!("{:.1}", num(5) / num(4)), r[9], "{node}: Pkts/busy = Packets / Busy\n{out}");
    }
    // The source is polled every walk, busy or not: its calls outnumber its busy calls.
    let gen = runtime_row(&out, "gen");
    assert!(gen[3].parse::<u64>().unwrap() > gen[4].parse::<u64>().unwrap(), "{out}");
}

/// What Debian's DPDK 22.11 `dpdk-testpmd --no-huge -m 256 -l 0-63 --vdev net_null0
/// -- -i` printed on a machine whose 2 CPUs were all the process could use (lines
/// 3-62 alike, its 70-line usage left out); its exit status was 1 and no port was
/// made.
const DPDK_L_0_63: &str = "\
EAL: Detected CPU lcores: 2
EAL: Detected NUMA nodes: 1
EAL: lcore 2 unavailable
EAL: lcore 3 unavailable
EAL: lcore 63 unavailable
EAL: invalid core list, please check specified cores are part of 0-1

Usage: dpdk-testpmd [options]
EAL: FATAL: Invalid 'command line' arguments.
EAL: Invalid 'command line' arguments.
EAL: Error - exiting with code: 1
  Cause: Cannot init EAL: Invalid argument
";

/// The CPUs this process may run on, from /proc/self/status (`0-1,4`).
fn cpus_allowed() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).unwrap().trim().to_owned()
}

fn assert_one_line_error(err: &str, what: &str) {
    assert!(err.ends_with('\n') && !err.ends_with("\n\n"), "{what}: ends with one newline: {err:?}");
    assert_eq!(err.lines().count(), 1, "{what}: one line: {err}");
}

#[test]
fn lcores_the_process_may_not_use_are_refused_as_dpdk_refuses() {
    // DPDK names each unavailable lcore, then the cores it may use, and exits 1.
    let dpdk_usable = DPDK_L_0_63.lines().find_map(|l| l.split("part of ").nth(1));
    assert_eq!(dpdk_usable, Some("0-1"));
    assert!(DPDK_L_0_63.contains("lcore 2 unavailable") && DPDK_L_0_63.contains("exiting with code: 1"));
    let allowed = cpus_allowed();
    let (rc, out, err) = ironpath(&["testpmd", "--no-huge", "-l", "0-127", "--vdev", "net_null0", "--", "-i"], &[]);
    assert_eq!(rc, 1, "{out}{err}");
    assert!(!out.contains("Port 0"), "no port is made:\n{out}");
    assert_one_line_error(&err, "-l 0-127");
    assert!(err.contains("unavailable"), "{err}");
    assert!(err.contains(&format!("may run on CPU(s) {allowed} only")), "the usable CPUs ({allowed}), as DPDK: {err}");
    // The CPUs it may use pass (the first of them: the main lcore only).
    let first = allowed.split([',', '-']).next().unwrap().to_owned();
    let (rc, out, err) = ironpath(&["testpmd", "--no-huge", "-l", &first, "--vdev", "net_null0", "--", "-i"], &[]);
    assert_eq!(rc, 0, "{out}{err}");
}

#[test]
fn version_app_arguments_before_the_separator_and_did_you_mean() {
    let (rc, out, _) = ironpath(&["--version"], &[]);
    assert_eq!(rc, 0);
    assert!(out.starts_with(&format!("ironpath {} (PMD plugin ABI 1.", env!("CARGO_PKG_VERSION"))), "{out}");
    assert!(out.ends_with(")\n"), "{out:?}");
    // `-i` is an application argument: it goes after `--`.
    let (rc, _, err) = ironpath(&["testpmd", "--no-huge", "-i"], &[]);
    assert_eq!(rc, 1);
    assert_one_line_error(&err, "-i before --");
    assert!(err.contains("unknown runtime argument `-i`; application arguments go after `--`"), "{err}");
    let cfg = repo().join("configs/default.yaml");
    let (rc, _, err) = ironpath(&["run", cfg.to_str().unwrap(), "--durration", "1"], &[]);
    assert_eq!(rc, 2);
    assert_one_line_error(&err, "--durration");
    assert!(err.contains("unknown option `--durration` (did you mean `--duration`?)"), "{err}");
    // A file error ends with its newline too.
    let (rc, _, err) = ironpath(&["run", "/nonexistent/pipeline.yaml"], &[]);
    assert_eq!(rc, 1);
    assert!(err.ends_with('\n') && !err.ends_with("\n\n"), "{err:?}");
}

/// A free TCP port on `ip` (bound, then let go).
fn free_port(ip: &str) -> Option<u16> {
    std::net::TcpListener::bind((ip, 0)).ok().and_then(|l| l.local_addr().ok()).map(|a| a.port())
}

#[test]
fn metrics_take_no_address_a_host_name_or_a_bracketed_ipv6_address() {
    let cfg = repo().join("configs/default.yaml");
    let mut cases = vec![];
    let p = free_port("0.0.0.0").unwrap();
    cases.push((format!(":{p}"), format!("metrics: http://0.0.0.0:{p}/metrics")));
    let p = free_port("127.0.0.1").unwrap();
    cases.push((format!("localhost:{p}"), format!(":{p}/metrics")));
    match free_port("::1") {
        Some(p) => cases.push((format!("[::1]:{p}"), format!("metrics: http://[::1]:{p}/metrics"))),
        None => skip("[::1]: no IPv6 loopback here"),
    }
    for (addr, want) in cases {
        let (rc, out, err) = ironpath(
            &["run", cfg.to_str().unwrap(), "--no-huge", "--no-pin", "--no-telemetry", "--stats-period", "0"]
                .into_iter()
                .chain(["--duration", "0.3", "--metrics", &addr])
                .collect::<Vec<_>>(),
            &[],
        );
        assert_eq!(rc, 0, "--metrics {addr}: {out}{err}");
        assert!(out.lines().any(|l| l.starts_with("metrics: http://") && l.ends_with(&want)), "{addr}: {out}");
    }
    for bad in ["9198", "::1:9198", "localhost:"] {
        let (rc, _, err) = ironpath(&["run", cfg.to_str().unwrap(), "--metrics", bad], &[]);
        assert_eq!(rc, 2, "{bad}");
        assert_one_line_error(&err, bad);
        assert!(err.contains("is not an ADDRESS:PORT"), "{err}");
    }
    // testpmd reads it the same way.
    let (rc, _, err) = ironpath(&["testpmd", "--no-huge", "--metrics", "nope:", "--", "-i"], &[]);
    assert_eq!(rc, 1);
    assert_one_line_error(&err, "testpmd --metrics");
}

#[test]
fn refused_device_arguments_keep_their_usage_line() {
    let (rc, _, err) = ironpath(&["testpmd", "--no-huge", "--vdev", "net_null0,sise=1", "--", "-i"], &[]);
    assert_eq!(rc, 1);
    assert!(err.contains("unknown device argument `sise` (did you mean `size`?)"), "{err}");
    assert!(err.contains("\n  usage: net_null0,size="), "the arguments were refused: their usage helps:\n{err}");
    assert!(err.ends_with('\n') && !err.ends_with("\n\n"), "{err:?}");
}

/// A driver that fails for a reason other than its arguments (no such interface):
/// one line, the driver's reason, no usage of the arguments, no "Bad arguments".
#[test]
fn a_failing_af_packet_port_is_one_line_root() {
    if !is_root() {
        skip("needs root (an af_packet socket)");
        return;
    }
    let (rc, out, err) =
        ironpath(&["testpmd", "--no-huge", "--vdev", "net_af_packet0,iface=doesnotexist", "--", "-i"], &[]);
    assert_eq!(rc, 1, "{out}{err}");
    assert_one_line_error(&err, "iface=doesnotexist");
    assert!(err.contains("iface=doesnotexist") && err.contains("No such device"), "{err}");
    assert!(!err.contains("usage") && !err.contains("Bad arguments"), "{err}");
    assert!(err.len() < 200, "{} characters: {err}", err.len());
    // The same port in a pipeline: one line, with the file's position.
    let cfg = repo().join("configs/l2-reflector.yaml");
    let (rc, out, err) = ironpath(
        &["run", cfg.to_str().unwrap(), "--no-huge", "--no-telemetry", "--duration", "1"],
        &[("IRONPATH_IFACE", "doesnotexist")],
    );
    assert_eq!(rc, 1, "{out}{err}");
    assert_one_line_error(&err, "run: iface=doesnotexist");
    assert!(err.contains("l2-reflector.yaml:") && err.contains("No such device") && !err.contains("usage"), "{err}");
    // And attached from the shell: the driver's line and DPDK's "Failed to attach
    // port", no "Bad arguments" and no usage.
    let mut child = Command::new(BIN)
        .args(["testpmd", "--no-huge", "--no-telemetry", "--vdev", "net_null0", "--", "-i"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn testpmd");
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"port attach net_af_packet1,iface=doesnotexist\nquit\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("(see `ip link`)\nFailed to attach port net_af_packet1,iface=doesnotexist\n"), "{out}");
    assert!(!out.contains("Bad arguments") && !out.contains("Usage"), "{out}");
}

/// A ring port without `bytes=1` counts packets only: its byte columns say `-`
/// (with a footnote), not 0.
#[test]
fn a_port_that_counts_no_bytes_shows_a_dash() {
    let d = TempDir::new("first-run-nobytes");
    let text = std::fs::read_to_string(repo().join("configs/default.yaml")).unwrap().replace(",bytes=1", "");
    let cfg = d.0.join("no-bytes.yaml");
    std::fs::write(&cfg, text).unwrap();
    let (rc, out, err) =
        ironpath(&["run", cfg.to_str().unwrap(), "--duration", "1.2", "--no-huge", "--no-pin", "--no-telemetry"], &[]);
    assert_eq!(rc, 0, "{out}{err}");
    let rows = port_rows(&out, "p1");
    let last = rows.last().unwrap_or_else(|| panic!("{out}"));
    assert!(last[2].parse::<u64>().unwrap() > 0, "{out}");
    assert_eq!((last[3].as_str(), last[5].as_str(), last[8].as_str()), ("-", "-", "-"), "{out}");
    assert!(out.contains("(-: the port's driver counts packets only"), "{out}");
}
