//! Needs root, arping, ping and tshark: the shipped ARP + ICMP pipeline
//! (`configs/arp-icmp.yaml`) on an af_packet port answers the kernel's `arping`,
//! `ping` and `ping -6` across a veth pair, and its pcap_capture file opens in
//! tshark with every checksum valid. The test makes its own namespace and veth
//! (unique names, 198.18.0.0/15 and fd00::/8 addresses) and removes them on exit,
//! pass or fail.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_ironpath");

fn sh(cmd: &str) -> String {
    let o = Command::new("sh").arg("-c").arg(cmd).output().expect("sh");
    assert!(o.status.success(), "`{cmd}` failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Namespace `ns` with veth end `peer` (198.18.9.1/24, fd00:9::1/64); the other end
/// `port` stays here, without addresses, for ironpath.
struct Veth {
    ns: String,
    port: String,
    peer: String,
}

impl Veth {
    fn new(tag: &str) -> Veth {
        let id = std::process::id() % 100_000;
        let v = Veth { ns: format!("ipt-p{tag}-{id}"), port: format!("ipp{tag}{id}a"), peer: format!("ipp{tag}{id}b") };
        v.teardown();
        sh(&format!(
            "ip netns add {ns} && ip link add {p} type veth peer name {q} && ip link set {q} netns {ns} && \
             sysctl -qw net.ipv6.conf.{p}.disable_ipv6=1 && ip link set {p} up && \
             ip netns exec {ns} ip addr add 198.18.9.1/24 dev {q} && \
             ip netns exec {ns} ip -6 addr add fd00:9::1/64 dev {q} nodad && \
             ip netns exec {ns} ip link set {q} up && ip netns exec {ns} ip link set lo up",
            ns = v.ns,
            p = v.port,
            q = v.peer,
        ));
        v
    }

    fn teardown(&self) {
        let _ = Command::new("ip").args(["link", "del", &self.port]).output();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
    }

    fn exec(&self, cmd: &[&str]) -> Output {
        let mut args = vec!["30", "ip", "netns", "exec", &self.ns];
        args.extend_from_slice(cmd);
        Command::new("timeout").args(args).output().unwrap()
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// `ironpath run` in the background; stopped with SIGINT (a clean stop) on drop.
struct Run(Child);

impl Run {
    fn stop(mut self) -> String {
        let _ = Command::new("kill").args(["-INT", &self.0.id().to_string()]).status();
        let t = Instant::now();
        while self.0.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let o = self.0.wait_with_output().unwrap();
        text(&o)
    }
}

#[test]
fn arping_ping_and_ping6_get_answers_and_the_capture_is_valid_root() {
    if !common::ready(&["arping", "ping", "tshark"]) {
        return;
    }
    let v = Veth::new("a");
    let cap = std::env::temp_dir().join(format!("ironpath-arp-icmp-{}.pcap", std::process::id()));
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/arp-icmp.yaml");
    let child = Command::new(BIN)
        .args(["run", cfg.to_str().unwrap(), "--no-huge", "--duration", "60", "--stats-period", "0"])
        .env("IRONPATH_IFACE", &v.port)
        .env("IRONPATH_CAPTURE", &cap)
        .env("IRONPATH_IPV4", "198.18.9.2")
        .env("IRONPATH_IPV6", "fd00:9::2")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let run = Run(child);
    std::thread::sleep(Duration::from_millis(700));
    let arping = v.exec(&["arping", "-c", "3", "-w", "1", "-i", &v.peer, "198.18.9.2"]);
    let ping = v.exec(&["ping", "-c", "3", "-i", "0.2", "-W", "2", "198.18.9.2"]);
    let ping6 = v.exec(&["ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", "fd00:9::2"]);
    let out = run.stop();
    let (a, p4, p6) = (text(&arping), text(&ping), text(&ping6));
    let ctx = format!("arping:\n{a}\nping:\n{p4}\nping6:\n{p6}\nironpath:\n{out}");
    assert!(arping.status.success() && a.matches("198.18.9.2").count() >= 3, "{ctx}");
    assert!(p4.contains("3 packets transmitted, 3 received"), "{ctx}");
    assert!(p6.contains("3 packets transmitted, 3 received"), "{ctx}");
    assert!(out.contains("replies_sent") && out.contains("echo_replies") && out.contains("na_sent"), "{ctx}");

    // Every reply was captured; tshark finds no bad checksum and nothing malformed.
    let fields = sh(&format!(
        "tshark -n -r {} -o ip.check_checksum:TRUE -T fields -e frame.protocols -e ip.checksum.status \
         -e icmp.checksum.status -e icmpv6.checksum.status -e arp.opcode -e icmp.type -e icmpv6.type",
        cap.display()
    ));
    let rows: Vec<Vec<&str>> = fields.lines().map(|l| l.split('\t').collect()).collect();
    let count = |col: usize, want: &str| rows.iter().filter(|r| r.get(col) == Some(&want)).count();
    assert!(count(4, "2") >= 3, "ARP replies in the capture:\n{fields}");
    assert_eq!(count(5, "0"), 3, "ICMP echo replies:\n{fields}");
    assert_eq!(count(6, "129"), 3, "ICMPv6 echo replies:\n{fields}");
    assert!(count(6, "136") >= 1, "neighbour advertisements:\n{fields}");
    for r in &rows {
        assert!(!r[0].contains("malformed") && !r[0].contains("_ws.expert"), "malformed: {r:?}");
        for c in 1..=3 {
            // Status 1 = good, 2 = unverified (not an IP/ICMP frame); 0 = bad.
            assert_ne!(r.get(c), Some(&"0"), "bad checksum in {r:?}\n{fields}");
        }
    }
    // The checksums were verified, not skipped: IPv4 header and ICMP of each echo
    // reply, ICMPv6 of each echo reply and advertisement.
    let good = |col: usize| rows.iter().filter(|r| r.get(col).is_some_and(|s| s.split(',').all(|x| x == "1"))).count();
    assert!(good(1) >= 3 && good(2) >= 3 && good(3) >= 4, "unverified checksums:\n{fields}");
    let _ = std::fs::remove_file(cap);
}

#[test]
fn impair_nodes_lose_delay_and_reorder_both_ways_root() {
    if !common::ready(&["ping"]) {
        return;
    }
    let v = Veth::new("i");
    let dir = std::env::temp_dir().join(format!("ironpath-impair-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The ARP/ICMP responder with an impair node on each side: 20% loss and
    // 5 ms +- 2 ms delay on receive, 20% loss and 5 ms +- 2 ms on transmit.
    let yaml = dir.join("impaired.yaml");
    std::fs::write(
        &yaml,
        format!(
            "ports:
  - {{name: wire, driver: net_af_packet, args: 'iface={p}'}}
lcores: [{{id: 0}}]
nodes:
  - {{name: rx, type: port_rx, lcore: 0, params: {{port: wire}}}}
  - {{name: bad_in, type: impair, lcore: 0, params: {{seed: 11, loss: 20%, delay: 5ms, jitter: 2ms}}}}
  - {{name: cls, type: classify, lcore: 0}}
  - {{name: arp, type: arp, lcore: 0, params: {{port: wire, addresses: 198.18.9.2}}}}
  - {{name: icmp, type: icmp_echo, lcore: 0, params: {{port: wire, addresses: [198.18.9.2]}}}}
  - {{name: bad_out, type: impair, lcore: 0, params: {{seed: 12, loss: 20%, delay: 5ms, jitter: 2ms}}}}
  - {{name: tx, type: port_tx, lcore: 0, params: {{port: wire}}}}
edges:
  - {{from: rx, to: bad_in}}
  - {{from: bad_in, to: cls}}
  - {{from: cls, next: arp, to: arp}}
  - {{from: cls, next: icmp, to: icmp}}
  - {{from: arp, to: bad_out}}
  - {{from: icmp, to: bad_out}}
  - {{from: bad_out, to: tx}}
",
            p = v.port
        ),
    )
    .unwrap();
    let child = Command::new(BIN)
        .args(["run", yaml.to_str().unwrap(), "--no-huge", "--duration", "60", "--stats-period", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let run = Run(child);
    std::thread::sleep(Duration::from_millis(700));
    // A static neighbour entry: the RTTs then show the impairment, not ARP retries.
    let mac = sh(&format!("cat /sys/class/net/{}/address", v.port)).trim().to_string();
    sh(&format!("ip netns exec {} ip neigh replace 198.18.9.2 lladdr {mac} dev {} nud permanent", v.ns, v.peer));
    // Sixteen echoes preloaded (sent at once, whatever the machine's load does to
    // ping's 2 ms pacing) so the jitter has packets close enough to reorder.
    let ping = v.exec(&["ping", "-c", "300", "-l", "16", "-i", "0.002", "-W", "1", "198.18.9.2"]);
    let out = run.stop();
    let p = text(&ping);
    let _ = std::fs::remove_dir_all(&dir);
    // Received fraction about 0.8 * 0.8 = 64% (ARP losses only delay the start).
    let got: u32 =
        p.split(" received").next().and_then(|s| s.rsplit(' ').next()).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!((120..=250).contains(&got), "{got} of 300 replies:\n{p}\n{out}");
    // Two delays of 5 +- 2 ms: no reply faster than 6 ms, the median at least
    // 8 ms (only lower bounds: a loaded machine adds delay, never removes it), and
    // replies overtake each other (jitter reorders).
    let mut rtts: Vec<f64> =
        p.lines().filter_map(|l| l.split("time=").nth(1)?.split(' ').next()?.parse().ok()).collect();
    let seqs: Vec<u32> =
        p.lines().filter_map(|l| l.split("icmp_seq=").nth(1)?.split(' ').next()?.parse().ok()).collect();
    rtts.sort_by(f64::total_cmp);
    assert!(rtts[0] >= 6.0 && rtts[rtts.len() / 2] >= 8.0, "rtts {rtts:?}");
    assert!(seqs.windows(2).any(|w| w[0] > w[1]), "no reordering seen: {seqs:?}");
    for c in ["lost", "delayed"] {
        assert!(out.contains(c), "{out}");
    }
}
