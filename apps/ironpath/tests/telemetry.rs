//! Telemetry with the real clients: DPDK's `dpdk-telemetry.py` (Debian `dpdk`)
//! through a pipe on the v2 socket, and `promtool check metrics` (Debian
//! `prometheus`) on a scrape, against `ironpath run configs/default.yaml` and
//! `ironpath testpmd`; the figures they show equal the final counters.

mod common;

use common::{tools_ready, BIN};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Runs `dpdk-telemetry.py -f prefix` with `cmds` on its stdin; one JSON value per
/// command, keyed by the command's path.
fn telemetry(prefix: &str, cmds: &[&str]) -> Vec<Value> {
    let mut c = Command::new("dpdk-telemetry.py")
        .args(["-f", prefix])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = cmds.join("\n");
    input.push('\n');
    c.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let o = c.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "dpdk-telemetry.py: {out}{}", String::from_utf8_lossy(&o.stderr));
    let values: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}\nall:\n{out}")))
        .collect();
    assert_eq!(values.len(), cmds.len(), "one reply per command:\n{out}");
    for (v, c) in values.iter().zip(cmds) {
        let key = c.split(',').next().unwrap();
        assert!(v.get(key).is_some(), "reply to {c} is keyed by {key}: {v}");
    }
    values
}

/// Scrapes `addr` and runs `promtool check metrics` on it; returns the text.
fn scrape_and_check(addr: &str) -> String {
    let o = Command::new("curl").args(["-sf", &format!("http://{addr}/metrics")]).output().unwrap();
    assert!(o.status.success(), "curl {addr}");
    let text = String::from_utf8(o.stdout).unwrap();
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let o = p.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "promtool check metrics:\n{}{}\n{text}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    text
}

/// The value of sample `name{labels}` in a scrape.
fn sample(text: &str, name_labels: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name_labels)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no sample {name_labels}"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Reads lines from the child's stdout (on a thread) until `pred` matches one.
fn wait_line(lines: &std::sync::mpsc::Receiver<String>, all: &mut String, pred: impl Fn(&str) -> bool) {
    let end = Instant::now() + Duration::from_secs(20);
    while Instant::now() < end {
        if let Ok(l) = lines.recv_timeout(Duration::from_millis(100)) {
            all.push_str(&l);
            all.push('\n');
            if pred(&l) {
                return;
            }
        }
    }
    panic!("no such line in:\n{all}");
}

fn spawn_lines(out: std::process::ChildStdout) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

#[test]
fn dpdk_telemetry_and_promtool_read_a_pipeline_run() {
    if !tools_ready(&["dpdk-telemetry.py", "promtool", "curl"]) {
        return;
    }
    let prefix = format!("ironpath-test-run-{}", std::process::id());
    let maddr = format!("127.0.0.1:{}", free_port());
    // 100 000 packets, then the source stops: the counters are final long before
    // the run ends and telemetry must show exactly what the run prints at exit.
    let mut child = Command::new(BIN)
        .args(["run", "configs/default.yaml", "--no-huge", "--no-pin", "--duration", "6", "--stats-period", "0"])
        .args(["--file-prefix", &prefix, "--metrics", &maddr])
        .env("IRONPATH_COUNT", "100000")
        .current_dir(repo())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = spawn_lines(child.stdout.take().unwrap());
    let mut all = String::new();
    wait_line(&lines, &mut all, |l| l.starts_with("metrics: "));
    std::thread::sleep(Duration::from_secs(2));
    let cmds = [
        "/",
        "/info",
        "/help,/ethdev/stats",
        "/eal/params",
        "/ethdev/list",
        "/ethdev/info,0",
        "/ethdev/stats,0",
        "/ethdev/stats,1",
        "/ethdev/xstats,0",
        "/mempool/list",
        "/mempool/info,mp0",
        "/ironpath/graph",
        "/ironpath/tcp",
        "/no/such/command",
    ];
    let v = telemetry(&prefix, &cmds);
    let metrics = scrape_and_check(&maddr);
    let pid = child.id();
    assert!(child.wait().unwrap().success());
    while let Ok(l) = lines.recv_timeout(Duration::from_millis(500)) {
        all.push_str(&l);
        all.push('\n');
    }
    assert!(v[0]["/"].as_array().unwrap().iter().any(|c| c == "/ethdev/stats"), "{}", v[0]);
    assert_eq!(v[1]["/info"]["pid"].as_u64(), Some(u64::from(pid)));
    assert!(v[2]["/help"]["/ethdev/stats"].as_str().unwrap().contains("port_id"));
    assert!(v[3]["/eal/params"].as_array().unwrap().iter().any(|a| a == "configs/default.yaml"));
    assert_eq!(v[4]["/ethdev/list"], serde_json::json!([0, 1]));
    assert_eq!(v[5]["/ethdev/info"]["label"], "p0");
    assert_eq!(v[5]["/ethdev/info"]["dev_started"], 1);
    assert_eq!(v[9]["/mempool/list"], serde_json::json!(["mp0"]));
    assert_eq!(v[10]["/mempool/info"]["size"], 16383);
    assert_eq!(v[13]["/no/such/command"], Value::Null);
    // The final port lines: `port p0 RX-packets: N RX-bytes: N TX-packets: N ...`.
    for (i, name) in ["p0", "p1"].iter().enumerate() {
        let line = all
            .lines()
            .find(|l| l.split_whitespace().take(2).eq(["port", name]))
            .unwrap_or_else(|| panic!("no final line of {name}:\n{all}"));
        let w: Vec<&str> = line.split_whitespace().collect();
        let rx: u64 = w[3].parse().unwrap();
        let tx: u64 = w[7].parse().unwrap();
        let s = &v[6 + i]["/ethdev/stats"];
        assert_eq!((s["ipackets"].as_u64(), s["opackets"].as_u64()), (Some(rx), Some(tx)), "{name}: {line}");
        assert_eq!(sample(&metrics, &format!("ironpath_port_rx_packets_total{{port=\"{name}\"}}")), rx);
        assert_eq!(sample(&metrics, &format!("ironpath_port_tx_packets_total{{port=\"{name}\"}}")), tx);
    }
    // What came back to p0 is what the reflector sent (the ring drops the rest of
    // the source's line-rate burst: tx0's tx_full).
    assert!(v[6]["/ethdev/stats"]["ipackets"].as_u64().unwrap() > 0);
    // Graph: the sink's packets as the exit table prints them.
    let g = &v[11]["/ironpath/graph"]["nodes"];
    assert_eq!(g["back"]["counters"]["packets"], v[6]["/ethdev/stats"]["ipackets"], "{g}");
    assert_eq!(g["gen"]["packets"], 100000);
    assert_eq!(sample(&metrics, "ironpath_node_packets_total{node=\"gen\",lcore=\"0\"}"), 100000);
    assert_eq!(sample(&metrics, "ironpath_mempool_size_mbufs{pool=\"mp0\"}"), 16383);
    // The socket is gone with the process.
    assert!(!Path::new(&format!("/var/run/dpdk/{prefix}/dpdk_telemetry.v2")).exists());
    let _ = std::fs::remove_dir(format!("/var/run/dpdk/{prefix}"));
}

#[test]
fn dpdk_telemetry_and_promtool_read_testpmd() {
    if !tools_ready(&["dpdk-telemetry.py", "promtool", "curl"]) {
        return;
    }
    let prefix = format!("ironpath-test-tp-{}", std::process::id());
    let maddr = format!("127.0.0.1:{}", free_port());
    let mut child = Command::new(BIN)
        .args(["testpmd", "-l", "0-1", "--no-huge", "--vdev", "net_null0,size=64", "--vdev", "net_null1,size=64"])
        .args(["--file-prefix", &prefix, "--metrics", &maddr, "--", "-i"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = spawn_lines(child.stdout.take().unwrap());
    let mut all = String::new();
    wait_line(&lines, &mut all, |l| l.starts_with("metrics: "));
    writeln!(stdin, "start").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    writeln!(stdin, "stop").unwrap();
    wait_line(&lines, &mut all, |l| l.starts_with("Done."));
    let v =
        telemetry(&prefix, &["/ethdev/list", "/ethdev/stats,0", "/ethdev/stats,1", "/mempool/list", "/ethdev/info,0"]);
    let metrics = scrape_and_check(&maddr);
    writeln!(stdin, "show port stats all").unwrap();
    writeln!(stdin, "quit").unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    while let Ok(l) = lines.recv_timeout(Duration::from_millis(500)) {
        all.push_str(&l);
        all.push('\n');
    }
    assert!(status.success(), "{all}");
    assert_eq!(v[0]["/ethdev/list"], serde_json::json!([0, 1]));
    assert_eq!(v[3]["/mempool/list"], serde_json::json!(["mb_pool_0"]));
    assert_eq!(v[4]["/ethdev/info"]["name"], "net_null0");
    // `show port stats all` after stop: "RX-packets: N  RX-missed: ..." per port.
    let rx: Vec<u64> = all
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("RX-packets:"))
        .map(|r| r.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    let rx = &rx[rx.len() - 2..];
    assert!(rx[0] > 0, "{all}");
    for i in 0..2 {
        assert_eq!(v[1 + i]["/ethdev/stats"]["ipackets"].as_u64(), Some(rx[i]), "port {i}\n{all}");
        assert_eq!(sample(&metrics, &format!("ironpath_port_rx_packets_total{{port=\"net_null{i}\"}}")), rx[i]);
    }
}
