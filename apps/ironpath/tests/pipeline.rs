//! `ironpath run` / `ironpath check` / the shell's pipeline commands, on ring ports
//! (no NIC, no root): the shipped default runs; a two-lcore pipeline forwards N
//! packets with none lost or reordered within a flow; errors name file:line:col.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_ironpath");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ironpath-pipe-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(BIN).args(args).output().expect("spawn ironpath");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

/// A counter of node `node` from the `show runtime` table: the line under the node
/// whose first word is `name`.
fn node_counter(out: &str, node: &str, name: &str) -> u64 {
    let start = out
        .lines()
        .position(|l| l.split_whitespace().next() == Some(node))
        .unwrap_or_else(|| panic!("no node {node} in:\n{out}"));
    for l in out.lines().skip(start + 1) {
        if !l.starts_with("    ") {
            break;
        }
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.first() == Some(&name) {
            return w[1..].iter().find_map(|x| x.parse().ok()).unwrap_or_else(|| panic!("no number in `{l}`"));
        }
    }
    panic!("no counter {name} under {node} in:\n{out}")
}

#[test]
fn shipped_configs_validate_and_the_default_runs() {
    let cfgs = repo().join("configs");
    let files: Vec<String> = std::fs::read_dir(&cfgs)
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| p.ends_with(".yaml"))
        .collect();
    assert!(files.len() >= 3);
    let mut args = vec!["check"];
    args.extend(files.iter().map(String::as_str));
    let (rc, out, err) = run(&args);
    assert_eq!(rc, 0, "{out}{err}");
    let d = tmpdir("default");
    let json = d.join("stats.jsonl");
    let cfg = cfgs.join("default.yaml");
    let (rc, out, err) =
        run(&["run", cfg.to_str().unwrap(), "--duration", "2.5", "--no-huge", "--stats-json", json.to_str().unwrap()]);
    assert_eq!(rc, 0, "{out}{err}");
    assert!(out.contains("RX-pps"), "{out}");
    let swapped = node_counter(&out, "tx1", "sent");
    assert!(swapped > 0, "{out}");
    assert_eq!(node_counter(&out, "back", "packets"), node_counter(&out, "sink", "dropped"));
    // Drops counted by reason: the edge into the drop node.
    assert_eq!(node_counter(&out, "sink", "from"), node_counter(&out, "sink", "dropped"), "{out}");
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&json).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(lines.len() >= 2, "{lines:?}");
    assert!(lines[1]["ports"]["p1"]["rx_pps"].as_f64().unwrap() > 0.0, "{:?}", lines[1]);
    assert!(lines[1]["nodes"]["swap"]["packets"].as_u64().unwrap() > 0);
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn stats_json_lines_can_be_read_while_the_run_goes_on() {
    // Benchmarks tail the file during a run: a line must reach the file in its second,
    // not when a buffer fills or the run ends.
    let cfg = repo().join("configs/default.yaml");
    let d = tmpdir("json-live");
    let json = d.join("stats.jsonl");
    let mut child = Command::new(BIN)
        .args(["run", cfg.to_str().unwrap(), "--duration", "6", "--no-huge", "--stats-period", "0"])
        .arg("--stats-json")
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Lines come a second apart and a buffered writer would show three or more at once
    // (lines of ~2.5 KB in an 8 KiB buffer): the first look at a non-empty file sees one.
    let mut first = 0;
    while child.try_wait().unwrap().is_none() {
        let text = std::fs::read_to_string(&json).unwrap_or_default();
        first = text.lines().filter(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()).count();
        if first > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let running = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(d);
    assert!(running, "no JSON line readable before the run ended");
    assert!(first <= 2, "{first} lines appeared at once: the file is not written line by line");
}

#[test]
fn http_loop_client_and_server_finish_every_request_and_return_every_mbuf() {
    let cfg = repo().join("configs/http-loop.yaml");
    let d = tmpdir("http-loop");
    let json = d.join("stats.jsonl");
    let o = Command::new(BIN)
        .args(["run", cfg.to_str().unwrap(), "--duration", "6", "--no-huge", "--stats-json", json.to_str().unwrap()])
        .env("IRONPATH_CONNS", "3")
        .env("IRONPATH_REQUESTS", "20")
        .output()
        .unwrap();
    let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{out}");
    assert_eq!(node_counter(&out, "client", "http_requests"), 60, "{out}");
    assert_eq!(node_counter(&out, "server", "http_requests"), 60, "{out}");
    assert_eq!(node_counter(&out, "client", "clients_done"), 3, "{out}");
    // 60 bodies of 1 MiB and 60 response heads (about 100 bytes each).
    let got = node_counter(&out, "client", "app_bytes_in");
    assert!((60 << 20..(60 << 20) + 60 * 200).contains(&got), "{got} bytes: {out}");
    let last: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&json).unwrap().lines().last().unwrap()).unwrap();
    assert_eq!(last["mempools"]["pkts"]["in_use"].as_u64(), Some(0), "mbufs held after the transfers: {last}");
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn two_lcores_forward_n_packets_none_lost_none_reordered() {
    const N: u64 = 100_000;
    const FLOWS: u16 = 8;
    let d = tmpdir("order");
    let cap = d.join("out.pcap");
    let yaml = format!(
        "mempools: [{{name: mp, size: 32767, cache: 256}}]
ports:
  - {{name: a, driver: net_ring, args: 'link=order-{pid},size=65536'}}
  - {{name: b, driver: net_ring, args: 'link=order-{pid},size=65536'}}
lcores: [{{id: 0}}, {{id: 1}}]
nodes:
  - {{name: gen, type: source, lcore: 0, params: {{count: {N}, flows: {FLOWS}, rate_pps: 250000}}}}
  - {{name: txa, type: port_tx, lcore: 0, params: {{port: a, retries: 1000}}}}
  - {{name: rxb, type: port_rx, lcore: 0, params: {{port: b}}}}
  - {{name: swap, type: macswap, lcore: 1}}
  - {{name: txb, type: port_tx, lcore: 1, params: {{port: b, retries: 1000}}}}
  - {{name: rxa, type: port_rx, lcore: 0, params: {{port: a}}}}
  - {{name: cap, type: pcap_capture, lcore: 0, params: {{file: {cap}}}}}
  - {{name: end, type: counter, lcore: 0}}
  - {{name: sink, type: drop, lcore: 0}}
edges:
  - {{from: gen, to: txa}}
  - {{from: rxb, to: swap, ring_size: 65536}}
  - {{from: swap, to: txb}}
  - {{from: rxa, to: cap}}
  - {{from: cap, to: end}}
  - {{from: end, to: sink}}
",
        pid = std::process::id(),
        cap = cap.display()
    );
    let f = d.join("order.yaml");
    std::fs::write(&f, yaml).unwrap();
    let (rc, out, err) = run(&["run", f.to_str().unwrap(), "--duration", "3", "--no-huge", "--stats-period", "0"]);
    assert_eq!(rc, 0, "{out}{err}");
    assert_eq!(node_counter(&out, "gen", "generated"), N, "{out}");
    assert_eq!(node_counter(&out, "end", "packets"), N, "{out}");
    assert!(out.contains("ring_tx"), "the rxb -> swap edge crosses lcores through a ring:\n{out}");
    // Per flow (UDP source port), sequence numbers strictly increase; all N arrive.
    let pkts = ironpath_pcapfile::read(&cap).unwrap();
    assert_eq!(pkts.len() as u64, N);
    let mut last: std::collections::HashMap<u16, u64> = Default::default();
    let mut seen = vec![false; N as usize];
    for p in &pkts {
        let d = &p.data;
        let sport = u16::from_be_bytes([d[34], d[35]]);
        let seq = u64::from_be_bytes(d[42..50].try_into().unwrap());
        if let Some(&prev) = last.get(&sport) {
            assert!(seq > prev, "flow {sport}: {seq} after {prev}");
        }
        last.insert(sport, seq);
        assert!(!seen[seq as usize], "duplicate {seq}");
        seen[seq as usize] = true;
    }
    assert_eq!(last.len(), FLOWS as usize);
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn handoff_spreads_flows_over_lcores_and_keeps_each_flows_order() {
    const N: u64 = 60_000;
    const FLOWS: u16 = 32;
    let d = tmpdir("handoff");
    let cap = |n: &str| d.join(format!("{n}.pcap"));
    let yaml = format!(
        "mempools: [{{name: mp, size: 32767, cache: 256}}]
lcores: [{{id: 0}}, {{id: 1}}, {{id: 2}}]
nodes:
  - {{name: gen, type: source, lcore: 0, params: {{count: {N}, flows: {FLOWS}, rate_pps: 200000}}}}
  - {{name: ho, type: handoff, lcore: 0}}
  - {{name: a, type: pcap_capture, lcore: 1, params: {{file: {a}}}}}
  - {{name: b, type: pcap_capture, lcore: 2, params: {{file: {b}}}}}
  - {{name: da, type: drop, lcore: 1}}
  - {{name: db, type: drop, lcore: 2}}
edges:
  - {{from: gen, to: ho}}
  - {{from: ho, next: w0, to: a, ring_size: 65536}}
  - {{from: ho, next: w1, to: b, ring_size: 65536}}
  - {{from: a, to: da}}
  - {{from: b, to: db}}
",
        a = cap("a").display(),
        b = cap("b").display()
    );
    let f = d.join("handoff.yaml");
    std::fs::write(&f, yaml).unwrap();
    let (rc, out, err) = run(&["run", f.to_str().unwrap(), "--duration", "3", "--no-huge", "--stats-period", "0"]);
    assert_eq!(rc, 0, "{out}{err}");
    assert_eq!(node_counter(&out, "ho", "ip"), N, "{out}");
    let mut flows_of = Vec::new();
    let mut total = 0;
    for name in ["a", "b"] {
        let pkts = ironpath_pcapfile::read(&cap(name)).unwrap();
        total += pkts.len();
        let mut last: std::collections::HashMap<u16, u64> = Default::default();
        for p in &pkts {
            let sport = u16::from_be_bytes([p.data[34], p.data[35]]);
            let seq = u64::from_be_bytes(p.data[42..50].try_into().unwrap());
            if let Some(&prev) = last.get(&sport) {
                assert!(seq > prev, "worker {name}, flow {sport}: {seq} after {prev}");
            }
            last.insert(sport, seq);
        }
        flows_of.push(last.keys().copied().collect::<std::collections::HashSet<_>>());
    }
    assert_eq!(total as u64, N, "{out}");
    assert!(flows_of[0].is_disjoint(&flows_of[1]), "a flow went to both workers: {flows_of:?}");
    assert!(!flows_of[0].is_empty() && !flows_of[1].is_empty(), "{flows_of:?}");
    assert_eq!(flows_of[0].len() + flows_of[1].len(), FLOWS as usize);
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn acl_rules_from_yaml_deny_count_and_permit_in_order() {
    const N: u64 = 8_000;
    let d = tmpdir("acl");
    // 8 flows: UDP source ports 1024..=1031 to port 9. Ports 1024-1025 are denied,
    // 1026 counted, the rest fall to the default (deny), except what the last rule
    // permits (1024-1031: shadowed for 1024-1026 by the rules before it).
    let yaml = format!(
        "lcores: [{{id: 0}}]
nodes:
  - {{name: gen, type: source, lcore: 0, params: {{count: {N}, flows: 8, rate_pps: 100000}}}}
  - name: acl
    type: acl
    lcore: 0
    params:
      default: deny
      rules:
        - {{action: deny, proto: udp, sport: 1024-1025}}
        - {{action: count, src: 198.18.0.0/15, sport: \"1026\"}}
        - {{action: permit, proto: udp, sport: 1024-1029, dport: \"9\"}}
  - {{name: end, type: counter, lcore: 0}}
  - {{name: sink, type: drop, lcore: 0}}
edges:
  - {{from: gen, to: acl}}
  - {{from: acl, to: end}}
  - {{from: end, to: sink}}
"
    );
    let f = d.join("acl.yaml");
    std::fs::write(&f, &yaml).unwrap();
    let (rc, out, err) = run(&["run", f.to_str().unwrap(), "--duration", "2", "--no-huge", "--stats-period", "0"]);
    assert_eq!(rc, 0, "{out}{err}");
    let per_flow = N / 8;
    assert_eq!(node_counter(&out, "acl", "denied"), 2 * per_flow, "{out}");
    assert_eq!(node_counter(&out, "acl", "counted"), per_flow, "{out}");
    assert_eq!(node_counter(&out, "acl", "permitted"), 3 * per_flow, "{out}");
    assert_eq!(node_counter(&out, "acl", "default_deny"), 2 * per_flow, "{out}");
    assert_eq!(node_counter(&out, "end", "packets"), 4 * per_flow, "{out}");
    // A bad rule is refused by `check` with the rule and the field named.
    std::fs::write(&f, yaml.replace("198.18.0.0/15", "198.18.0.1/15")).unwrap();
    let (rc, out, err) = run(&["check", f.to_str().unwrap()]);
    assert_ne!(rc, 0, "{out}{err}");
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn mirror_shares_or_copies_every_packet_and_returns_every_mbuf() {
    const N: u64 = 20_000;
    let d = tmpdir("mirror");
    let cap = |n: &str| d.join(format!("{n}.pcap"));
    let json = d.join("stats.jsonl");
    // gen -> m1 (share) -> m2 (copy) -> B; m1's references -> A; m2's copies -> swap -> C.
    let yaml = format!(
        "mempools: [{{name: mp, size: 8191, cache: 0}}]
lcores: [{{id: 0}}]
nodes:
  - {{name: gen, type: source, lcore: 0, params: {{count: {N}, flows: 4, rate_pps: 100000}}}}
  - {{name: m1, type: mirror, lcore: 0}}
  - {{name: m2, type: mirror, lcore: 0, params: {{mode: copy}}}}
  - {{name: swap, type: macswap, lcore: 0}}
  - {{name: a, type: pcap_capture, lcore: 0, params: {{file: {a}}}}}
  - {{name: b, type: pcap_capture, lcore: 0, params: {{file: {b}}}}}
  - {{name: c, type: pcap_capture, lcore: 0, params: {{file: {c}}}}}
  - {{name: sink, type: drop, lcore: 0}}
edges:
  - {{from: gen, to: m1}}
  - {{from: m1, next: out, to: m2}}
  - {{from: m1, next: copy, to: a}}
  - {{from: m2, next: out, to: b}}
  - {{from: m2, next: copy, to: swap}}
  - {{from: swap, to: c}}
  - {{from: a, to: sink}}
  - {{from: b, to: sink}}
  - {{from: c, to: sink}}
",
        a = cap("a").display(),
        b = cap("b").display(),
        c = cap("c").display()
    );
    let f = d.join("mirror.yaml");
    std::fs::write(&f, yaml).unwrap();
    let (rc, out, err) = run(&[
        "run",
        f.to_str().unwrap(),
        "--duration",
        "2",
        "--no-huge",
        "--stats-period",
        "1",
        "--stats-json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{out}{err}");
    assert_eq!(node_counter(&out, "gen", "generated"), N, "{out}");
    assert_eq!(node_counter(&out, "m1", "mirrored"), N, "{out}");
    assert_eq!(node_counter(&out, "m2", "mirrored"), N, "{out}");
    let [a, b, c] = ["a", "b", "c"].map(|n| ironpath_pcapfile::read(&cap(n)).unwrap());
    assert_eq!((a.len(), b.len(), c.len()), (N as usize, N as usize, N as usize));
    for ((a, b), c) in a.iter().zip(&b).zip(&c) {
        assert_eq!(a.data, b.data, "a shared reference carries the original bytes");
        let swapped = [&a.data[6..12], &a.data[..6], &a.data[12..]].concat();
        assert_eq!(c.data, swapped, "the copy's own buffer was rewritten, the original not");
    }
    let last: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&json).unwrap().lines().last().unwrap()).unwrap();
    assert_eq!(last["mempools"]["mp"]["in_use"].as_u64(), Some(0), "{last}");
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn errors_name_file_line_column_and_runtime_failures_point_at_the_entry() {
    let d = tmpdir("errors");
    let f = d.join("bad.yaml");
    std::fs::write(
        &f,
        "ports:\n  - {name: p0, driver: net_ring, rx_queue: 2}\nlcores: [{id: 0}]\nnodes:\n  - {name: a, type: port_rx, lcore: 3, params: {port: p0}}\n  - {name: b, type: macswapp, lcore: 0}\nedges:\n  - {from: a, to: nowhere}\n",
    )
    .unwrap();
    let (rc, _, err) = run(&["check", f.to_str().unwrap()]);
    assert_eq!(rc, 1);
    let file = f.display().to_string();
    for want in ["rx_queue", "did you mean `rx_queues`", "lcore 3", "macswapp", "`macswap`", "nowhere"] {
        assert!(err.contains(want), "missing `{want}` in:\n{err}");
    }
    for l in err.lines().filter(|l| l.contains("error:")) {
        let rest = l.strip_prefix(&format!("{file}:")).unwrap_or_else(|| panic!("no file prefix: {l}"));
        let mut it = rest.split(':');
        it.next().unwrap().parse::<u32>().unwrap_or_else(|_| panic!("no line: {l}"));
        it.next().unwrap().parse::<u32>().unwrap_or_else(|_| panic!("no column: {l}"));
    }
    // Valid file, but the device refuses its arguments: the message names the port entry.
    let g = d.join("badarg.yaml");
    std::fs::write(
        &g,
        "ports:\n  - name: p0\n    driver: net_ring\n    args: sise=64\nlcores: [{id: 0}]\nnodes:\n  - {name: a, type: port_rx, lcore: 0, params: {port: p0}}\n  - {name: z, type: drop, lcore: 0}\nedges:\n  - {from: a, to: z}\n",
    )
    .unwrap();
    let (rc, out, err) = run(&["run", g.to_str().unwrap(), "--duration", "1", "--no-huge"]);
    assert_eq!(rc, 1, "{out}{err}");
    assert!(err.contains(&format!("{}:2:5: error: port `p0`", g.display())), "{err}");
    assert!(err.contains("sise"), "{err}");
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn shell_loads_a_pipeline_and_shows_graph_runtime_and_trace() {
    let cfg = repo().join("configs/default.yaml");
    let mut child = Command::new(BIN)
        .args(["testpmd", "-l", "0-1", "--no-huge", "--", "-i"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let script = format!(
        "pipeline load {}\n@sleep 1\nshow graph\nshow runtime\ntrace on swap 3\n@sleep 0.5\nshow trace\nstart\npipeline stop\nquit\n",
        cfg.display()
    );
    let feeder = std::thread::spawn(move || {
        for line in script.lines() {
            if let Some(s) = line.strip_prefix("@sleep ") {
                std::thread::sleep(Duration::from_secs_f64(s.parse().unwrap()));
            } else {
                writeln!(stdin, "{line}").unwrap();
            }
        }
    });
    feeder.join().unwrap();
    let o = child.wait_with_output().unwrap();
    let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("pipeline `default` running"), "{out}");
    assert!(out.contains("lcore 1 (cpu 1):") && out.contains("rxb") || out.contains("rx1 [port_rx]"), "{out}");
    assert!(out.contains("out -> tx1"), "show graph lists edges:\n{out}");
    assert!(out.contains("Cycles/pkt"), "{out}");
    let traces = out
        .lines()
        .filter(|l| l.starts_with("lcore 1 swap: +") && l.contains(" ns -> ") && l.contains("len 64"))
        .count();
    assert_eq!(traces, 3, "{out}");
    assert!(out.contains("pipeline stop first"), "start is refused while a pipeline runs:\n{out}");
    assert!(out.contains("pipeline stopped"), "{out}");
}

/// `ironpath run ... | head -2` and a testpmd whose reader goes away end as Ctrl-C
/// would: no panic ("failed printing to stdout"), ports stopped, status 0.
#[test]
fn a_closed_stdout_ends_the_run_cleanly() {
    let cfg = repo().join("configs/default.yaml");
    let t0 = std::time::Instant::now();
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{BIN}' run '{}' --no-huge --no-pin --duration 60 | head -2; echo \"status ${{PIPESTATUS:-}}\"",
            cfg.display()
        ))
        .output()
        .unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(out.lines().count(), 3, "two lines through head, then ours:\n{out}\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    // It stops at the first table after the reader left, not at --duration.
    assert!(t0.elapsed() < Duration::from_secs(30), "still ran {:?}", t0.elapsed());
    // The run's own status, through a pipe that keeps it.
    let o = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "set -o pipefail; '{BIN}' run '{}' --no-huge --no-pin --duration 60 | head -1 >/dev/null",
            cfg.display()
        ))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // testpmd reading commands from a pipe, printing into a closed one.
    let o = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "(echo 'show port summary all'; sleep 1; for i in $(seq 200); do echo 'show port stats all'; done; sleep 30) \
             | '{BIN}' testpmd --no-huge -l 0 --vdev net_null0 -- -i | head -3 >/dev/null; exit ${{PIPESTATUS[1]}}"
        ))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{:?} {err}", o.status);
    assert!(!err.contains("panicked"), "{err}");
}

/// Everything `run` refuses, `check` refuses first, at the same file:line:column:
/// a loop on one lcore, a loop through rings that no node ends (or only through an
/// edge on which it passes packets on), two nodes on one
/// queue, a queue the port does not have, device arguments the driver refuses.
#[test]
fn check_refuses_everything_run_refuses() {
    let d = tmpdir("check-vs-run");
    let head = "ports:\n  - {name: p0, driver: net_ring}\nlcores: [{id: 0}, {id: 1}]\n";
    let cases: &[(&str, String, &str)] = &[
        (
            "loop1",
            format!(
                "{head}nodes:\n  - {{name: a, type: macswap, lcore: 0}}\n  - {{name: b, type: macswap, lcore: 0}}\n\
                 edges:\n  - {{from: a, to: b}}\n  - {{from: b, to: a}}\n"
            ),
            ":9:5: error: edges between nodes on lcore 0 form a loop: a -> b -> a",
        ),
        (
            "loop2",
            format!(
                "{head}nodes:\n  - {{name: a, type: macswap, lcore: 0}}\n  - {{name: b, type: macswap, lcore: 1}}\n\
                 edges:\n  - {{from: a, to: b}}\n  - {{from: b, to: a}}\n"
            ),
            ":9:5: error: edges form a loop through rings: a -> b -> a; its packets would circulate forever",
        ),
        (
            // `vxlan` ends the loops through its `inner` and `underlay` edges (a
            // bridge and its tunnel: configs/vxlan-bridges.yaml), not through `other`,
            // which passes packets on unchanged.
            "loop3",
            format!(
                "{head}nodes:\n  - {{name: a, type: vxlan, lcore: 0, params: {{port: p0, local: 198.18.0.1, remotes: 198.18.0.2, vni: 1}}}}\n  \
                 - {{name: b, type: macswap, lcore: 1}}\n\
                 edges:\n  - {{from: a, next: other, to: b}}\n  - {{from: b, to: a}}\n"
            ),
            ":9:5: error: edges form a loop through rings: a -> b -> a; its packets would circulate forever",
        ),
        (
            "rxclash",
            format!(
                "{head}nodes:\n  - {{name: r0, type: port_rx, lcore: 0, params: {{port: p0}}}}\n  \
                 - {{name: r1, type: port_rx, lcore: 1, params: {{port: p0}}}}\n  - {{name: z, type: drop, lcore: 0}}\n\
                 edges:\n  - {{from: r0, to: z}}\n  - {{from: r1, to: z}}\n"
            ),
            ":6:5: error: node `r1` takes RX queue 0 of port `p0`, which node `r0` (line 5) takes already",
        ),
        (
            "txclash",
            format!(
                "{head}nodes:\n  - {{name: t0, type: port_tx, lcore: 0, params: {{port: p0}}}}\n  \
                 - {{name: t1, type: port_tx, lcore: 1, params: {{port: p0, queue: 0}}}}\n"
            ),
            ":6:67: error: node `t1` takes TX queue 0 of port `p0`, which node `t0` (line 5) takes already",
        ),
        (
            "noqueue",
            format!(
                "{head}nodes:\n  - {{name: r0, type: port_rx, lcore: 0, params: {{port: p0, queue: 1}}}}\n  \
                 - {{name: z, type: drop, lcore: 0}}\nedges:\n  - {{from: r0, to: z}}\n"
            ),
            ":5:67: error: node `r0`: port `p0` has 1 RX queue(s) (rx_queues: 1 at line 2); queue 1 does not exist",
        ),
        (
            "devargs",
            "ports:\n  - {name: p0, driver: net_null, args: size=3}\nlcores: [{id: 0}]\nnodes:\n  \
             - {name: r0, type: port_rx, lcore: 0, params: {port: p0}}\n  - {name: z, type: drop, lcore: 0}\n\
             edges:\n  - {from: r0, to: z}\n"
                .to_string(),
            ":2:5: error: port `p0`: net_null0: device argument `size=3` is out of range: accepted 14..=9000",
        ),
    ];
    for (name, text, want) in cases {
        let f = d.join(format!("{name}.yaml"));
        std::fs::write(&f, text).unwrap();
        let want = format!("{}{want}", f.display());
        let (rc, out, err) = run(&["check", f.to_str().unwrap()]);
        assert_eq!(rc, 1, "check {name} said ok:\n{out}{err}");
        assert!(err.contains(&want), "check {name}: missing `{want}` in:\n{err}");
        let (rc, out, err) = run(&["run", f.to_str().unwrap(), "--duration", "1", "--no-huge", "--no-telemetry"]);
        assert_eq!(rc, 1, "run {name} ran:\n{out}{err}");
        assert!(err.contains(&want), "run {name}: missing `{want}` in:\n{err}");
    }
    let _ = std::fs::remove_dir_all(d);
}

/// Drops add up: in the final counters of the shipped configs that need no NIC,
/// every node that passes packets on or frees them (ports, classify, counters,
/// reflectors, sinks, sources) has packets in = passed on (edges, or sent by the
/// port) + Drops. (`tcp`, `arp`, `icmp_echo`, `rx_aggregate`, `gso` and `impair`
/// end, hold, merge or make packets: their own counters account for those.)
#[test]
fn drops_add_up_on_the_shipped_configs() {
    let d = tmpdir("balance");
    for (cfg, env) in [("default.yaml", Some("100000")), ("default.yaml", None), ("http-loop.yaml", None)] {
        let json = d.join("s.jsonl");
        let mut c = Command::new(BIN);
        c.args(["run", repo().join("configs").join(cfg).to_str().unwrap(), "--no-huge", "--no-pin", "--no-telemetry"])
            .args(["--duration", "2", "--stats-period", "0", "--stats-json", json.to_str().unwrap()]);
        if let Some(n) = env {
            // N packets as fast as they go: all made within the run.
            c.env("IRONPATH_COUNT", n).env("IRONPATH_RATE", "0");
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{cfg}: {}", String::from_utf8_lossy(&o.stderr));
        let text = std::fs::read_to_string(&json).unwrap();
        let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(last["final"], true, "{cfg}: the last line has the final counters");
        let mut checked = 0;
        for (name, n) in last["nodes"].as_object().unwrap() {
            let ty = n["type"].as_str().unwrap();
            if !["port_rx", "port_tx", "tx_batch", "classify", "counter", "macswap", "drop", "source"].contains(&ty) {
                continue;
            }
            let get = |k: &str| n[k].as_u64().unwrap();
            let sent = n["counters"]["sent"].as_u64().unwrap_or(0);
            assert_eq!(get("packets"), get("passed_on") + sent + get("drops"), "{cfg} ({env:?}): node {name}: {n}");
            checked += 1;
        }
        assert!(checked >= 5, "{cfg}: {checked} nodes checked");
        if env.is_some() {
            // The source stops after N; whatever tx0 drops (tx_full: none while the
            // rings hold the whole pool) the Drops column says.
            assert_eq!(last["nodes"]["gen"]["packets"], 100000);
            let tx0 = &last["nodes"]["tx0"];
            assert_eq!(tx0["drops"], tx0["counters"]["tx_full"]);
            assert_eq!(last["nodes"]["sink"]["drops"], last["nodes"]["sink"]["packets"]);
        }
    }
    let _ = std::fs::remove_dir_all(d);
}

/// The tcp nodes' connection-state gauges: 3 client connections mid-transfer are
/// ESTABLISHED on both nodes; once done the closing side holds them in TIME-WAIT.
#[test]
fn tcp_states_are_counted_as_gauges() {
    let d = tmpdir("tcp-states");
    for (requests, at_end) in [("3000", false), ("2", true)] {
        let json = d.join("s.jsonl");
        let o = Command::new(BIN)
            .args(["run", repo().join("configs/http-loop.yaml").to_str().unwrap(), "--no-huge", "--no-telemetry"])
            .args(["--duration", "2", "--stats-period", "0", "--stats-json", json.to_str().unwrap()])
            .env("IRONPATH_CONNS", "3")
            .env("IRONPATH_REQUESTS", requests)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = std::fs::read_to_string(&json).unwrap();
        let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        let g = |node: &str, k: &str| first["nodes"][node]["gauges"][k].as_u64().unwrap();
        if at_end {
            // The server closes after the last request; the client's FIN answers.
            assert_eq!(g("server", "time_wait") + g("client", "time_wait"), 3, "{}", first["nodes"]);
            assert_eq!(g("server", "established") + g("client", "established"), 0);
        } else {
            assert_eq!((g("client", "established"), g("server", "established")), (3, 3), "{}", first["nodes"]);
        }
    }
    let _ = std::fs::remove_dir_all(d);
}
