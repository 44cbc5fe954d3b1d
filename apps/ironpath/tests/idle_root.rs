//! Needs root (and ping, curl): an idle pipeline costs almost nothing. The shipped
//! `configs/arp-icmp.yaml` and `configs/http-server.yaml` run on a veth in their
//! default rx mode (adaptive: the lcore sleeps on its af_packet socket once its
//! queues stay empty, `ironpath_eal::sleep`); at rest for 10 s the whole process
//! uses under 2% of a CPU (its user and system time from /proc), then it answers
//! ping and serves 1 MiB (sha256 equal), and a burst of 100 echo requests sent at
//! once after a quiet spell is answered whole. With `--rx-mode poll` the same
//! process takes a whole CPU at rest (the comparison that shows the test can fail).
//!
//! Namespaces and veth pairs have unique names, use 198.18.0.0/15 and fd00::/8, and
//! are removed pass or fail.

mod common;

use common::*;
use std::time::{Duration, Instant};

/// CPU time (user + system, all threads) of process `pid`, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after ") ".
    let rest = stat.rsplit_once(") ").map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 here.
    let hz = sh("getconf CLK_TCK").trim().parse::<f64>().unwrap_or(100.0);
    (ticks(11) + ticks(12)) / hz
}

/// The share of one CPU process `pid` used over `secs` seconds.
fn cpu_share(pid: u32, secs: u64) -> f64 {
    let (c0, t0) = (cpu_seconds(pid), Instant::now());
    std::thread::sleep(Duration::from_secs(secs));
    (cpu_seconds(pid) - c0) / t0.elapsed().as_secs_f64()
}

/// Replies to a burst of `n` echo requests sent back to back (ping's preload).
fn burst_answered(v: &Veth, n: u32) -> u32 {
    let (count, preload) = (n.to_string(), n.to_string());
    let o = v.exec_for(15, &["ping", "-q", "-c", &count, "-l", &preload, "-i", "0.2", "-W", "2", &v.ours4()]);
    let t = text(&o);
    t.split(", ").find_map(|p| p.strip_suffix(" received")).and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// `configs/arp-icmp.yaml`'s variables for `v`'s port, its capture in `cap`.
fn arp_icmp_env(v: &Veth, cap: &TempDir) -> [(&'static str, String); 4] {
    [
        ("IRONPATH_IFACE", v.port.clone()),
        ("IRONPATH_IPV4", v.ours4()),
        ("IRONPATH_IPV6", v.ours6()),
        ("IRONPATH_CAPTURE", cap.0.join("replies.pcap").display().to_string()),
    ]
}

fn runtime_line(run: &Run) -> String {
    run.ctl("show runtime", true).lines().filter(|l| l.contains("rx mode")).collect::<Vec<_>>().join("\n")
}

#[test]
fn arp_icmp_at_rest_sleeps_and_answers_a_burst_after_it() {
    if !ready(&["ping"]) {
        return;
    }
    let v = Veth::new("idl", 61);
    let cap = TempDir::new("idle-cap");
    let env = arp_icmp_env(&v, &cap);
    let mut run = Run::start(&config("arp-icmp.yaml"), &env, "idle-arp");
    assert_eq!(pings_answered(&v), 5, "{}", run.output());
    std::thread::sleep(Duration::from_secs(1));
    let share = cpu_share(run.pid(), 10);
    let line = runtime_line(&run);
    eprintln!("arp-icmp at rest: {:.2}% of a CPU; {line}", share * 100.0);
    assert!(share < 0.02, "at rest the process used {:.1}% of a CPU\n{line}", share * 100.0);
    assert!(line.contains("rx mode adaptive"), "{line}");
    // After the quiet spell: one ping, then 100 at once, every one answered.
    assert_eq!(pings_answered(&v), 5, "{}", run.output());
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(burst_answered(&v, 100), 100, "{}", runtime_line(&run));
    let line = runtime_line(&run);
    let woken: u64 = line
        .split("woken by a queue ")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(woken > 0, "the queue's wake-up source woke the lcore: {line}");
    run.stop();
}

#[test]
fn http_server_at_rest_sleeps_then_serves_a_file_whole() {
    if !ready(&["ping", "curl"]) {
        return;
    }
    let v = Veth::new("idh", 62);
    let root = TempDir::new("idle-www");
    www(&root.0, &[("one.bin", 1 << 20)]);
    let mut run = http_server(&v, &root.0, &[], "idle-http");
    assert_eq!(pings_answered(&v), 5, "{}", run.output());
    std::thread::sleep(Duration::from_secs(1));
    let share = cpu_share(run.pid(), 10);
    let line = runtime_line(&run);
    eprintln!("http-server at rest: {:.2}% of a CPU; {line}", share * 100.0);
    assert!(share < 0.02, "at rest the process used {:.1}% of a CPU\n{line}", share * 100.0);
    let got = root.0.join("got.bin");
    let url = format!("http://{}/one.bin", v.ours4());
    let o = v.exec_for(30, &["curl", "-sS", "--max-time", "20", "-o", got.to_str().unwrap(), &url]);
    assert!(o.status.success(), "curl: {}\n{}", text(&o), run.output());
    assert_eq!(sha256(&got), sha256(&root.0.join("one.bin")));
    run.stop();
}

#[test]
fn poll_mode_keeps_a_cpu_busy_at_rest() {
    if !ready(&["ping"]) {
        return;
    }
    let v = Veth::new("idp", 63);
    let cap = TempDir::new("idle-cap-poll");
    // The file's lcore says poll: the same pipeline, spinning.
    let cfg = cap.0.join("arp-icmp-poll.yaml");
    let text_cfg =
        std::fs::read_to_string(config("arp-icmp.yaml")).unwrap().replace("  - id: 0", "  - {id: 0, rx_mode: poll}");
    std::fs::write(&cfg, text_cfg).unwrap();
    let env = arp_icmp_env(&v, &cap);
    let mut run = Run::start(&cfg, &env, "idle-poll");
    assert_eq!(pings_answered(&v), 5, "{}", run.output());
    let share = cpu_share(run.pid(), 3);
    assert!(share > 0.5, "a polling lcore used only {:.1}% of a CPU", share * 100.0);
    assert!(!run.ctl("show runtime", true).contains("rx mode"), "poll shows no sleep line");
    run.stop();
}
