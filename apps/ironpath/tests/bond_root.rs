//! Needs root, DPDK 22.11's `dpdk-testpmd` (Debian `dpdk`), curl, ethtool and
//! python3: `configs/bond.yaml` (a LAN port bridged to a bond of two members, LACP)
//! against DPDK's `net_bonding` in mode 4 (802.3ad) over two veth pairs, DPDK
//! forwarding between its bond and a server's veth. The aggregate forms with both
//! sides naming the other as partner and distributing on both members, 16 HTTP
//! downloads spread over both members both ways; during a 100 MiB download the
//! member it comes in on is taken out (DPDK's `remove bonding slave`, its link
//! down): our side drops it within a second and the download ends on the other
//! member, SHA-256 equal. And `active_backup` with both members on a Linux bridge
//! (a switch without LACP): a download goes on when the active member's link goes
//! down. Interfaces and namespaces have unique names and are removed, pass or fail.

mod common;

use common::*;
use std::process::Command;
use std::time::{Duration, Instant};

/// The client namespace (198.18.90.1) on ironpath's `lan`; the server namespace
/// (198.18.90.2) on DPDK's `srv`; members `m0`/`m1` (ours) wired to `d0`/`d1`
/// (DPDK's).
struct Net {
    c: String,
    s: String,
    lan: String,
    srv: String,
    m: [String; 2],
    d: [String; 2],
}

impl Net {
    /// Names start with `ip{tag}`.
    fn new(tag: &str) -> Net {
        let id = std::process::id() % 100_000;
        let n = Net {
            c: format!("ip{tag}-c-{id}"),
            s: format!("ip{tag}-s-{id}"),
            lan: format!("ip{tag}{id}l"),
            srv: format!("ip{tag}{id}s"),
            m: [format!("ip{tag}{id}m0"), format!("ip{tag}{id}m1")],
            d: [format!("ip{tag}{id}d0"), format!("ip{tag}{id}d1")],
        };
        n.teardown();
        for (ns, dev, a) in [(&n.c, &n.lan, 1), (&n.s, &n.srv, 2)] {
            // The namespaces' ends checksum and segment in software: DPDK's af_packet
            // takes frames as they are.
            sh(&format!(
                "ip netns add {ns} && ip -n {ns} link set lo up && \
                 ip link add {dev} type veth peer name e0 netns {ns} && \
                 sysctl -qw net.ipv6.conf.{dev}.disable_ipv6=1 && ip link set {dev} up && \
                 ip -n {ns} addr add 198.18.90.{a}/24 dev e0 && ip -n {ns} link set e0 up && \
                 ip netns exec {ns} ethtool -K e0 tx off tso off gso off >/dev/null 2>&1; true"
            ));
        }
        for i in 0..2 {
            sh(&format!(
                "ip link add {m} type veth peer name {d} && \
                 sysctl -qw net.ipv6.conf.{m}.disable_ipv6=1 net.ipv6.conf.{d}.disable_ipv6=1 && \
                 ip link set {m} up && ip link set {d} up",
                m = n.m[i],
                d = n.d[i]
            ));
        }
        n
    }

    fn teardown(&self) {
        for l in [&self.lan, &self.srv, &self.m[0], &self.m[1]] {
            let _ = Command::new("ip").args(["link", "del", l]).output();
        }
        for ns in [&self.c, &self.s] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// One DPDK partner (its testpmd and ironpath) at a time: each loads both cores.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// DPDK's testpmd with a `net_bonding` of `mode` (4: 802.3ad, 2: balance) over
/// `d0`/`d1`, forwarding between the server's port (0) and the bond (3) only (its
/// members are the bond's), started.
fn dpdk_bond(n: &Net, mode: u8) -> Interactive {
    let id = std::process::id() % 100_000;
    // Line-buffered, so that each answer arrives as it is printed.
    let args: Vec<String> = [
        "-oL",
        "dpdk-testpmd",
        "--no-huge",
        "-m",
        "1024",
        "-l",
        "0-1",
        "-n",
        "1",
        "--no-pci",
        &format!("--file-prefix=ipb{mode}x{id}"),
        &format!("--vdev=net_af_packet0,iface={}", n.srv),
        &format!("--vdev=net_af_packet1,iface={}", n.d[0]),
        &format!("--vdev=net_af_packet2,iface={}", n.d[1]),
        &format!("--vdev=net_bonding0,mode={mode},slave=net_af_packet1,slave=net_af_packet2,xmit_policy=l34"),
        "--",
        "-i",
        "--total-num-mbufs=16384",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut dpdk = Interactive::spawn("stdbuf", &args);
    assert!(dpdk.wait_for("testpmd>", 1, 30), "DPDK's testpmd did not start:\n{}", dpdk.output());
    dpdk.ask("set portlist 0,3", "testpmd>");
    dpdk.ask("start", "testpmd>");
    dpdk
}

/// 16 HTTP downloads of 1 MiB from the server to the client, from source ports
/// spread over the range (DPDK's l34 hash folds a port's bits together, and
/// Linux's consecutive ports would often fold alike): all answered 200.
fn sixteen_downloads(n: &Net) {
    let o = in_ns(
        &n.c,
        30,
        "for i in $(seq 16); do curl -sS -o /dev/null --fail --local-port $((30000 + i * 1337)) \
         -w '%{http_code}\\n' http://198.18.90.2:8000/mid & done; wait",
    );
    assert_eq!(o.matches("200").count(), 16, "{o}");
}

/// A Python HTTP server in namespace `ns` on `addr`:8000 serving `dir`; killed on drop.
struct Http(std::process::Child);

impl Http {
    fn start(ns: &str, addr: &str, dir: &std::path::Path) -> Http {
        let c = Command::new("ip")
            .args(["netns", "exec", ns, "python3", "-m", "http.server", "8000", "--bind", addr, "--directory"])
            .arg(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        Http(c)
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `curl` in namespace `ns` fetching `url` into `to` at 8 MiB/s (so that a failover
/// lands in the middle of it), no retries.
fn slow_download(ns: &str, url: &str, to: &std::path::Path) -> std::process::Child {
    Command::new("ip")
        .args(["netns", "exec", ns, "curl", "-sS", "--fail", "--limit-rate", "8M", "-o"])
        .arg(to)
        .arg(url)
        .spawn()
        .unwrap()
}

/// Whether `curl` ended well within 40 s (killed otherwise).
fn finished(curl: &mut std::process::Child) -> bool {
    let t = Instant::now();
    loop {
        if let Some(s) = curl.try_wait().unwrap() {
            return s.success();
        }
        if t.elapsed() > Duration::from_secs(40) {
            let _ = curl.kill();
            let _ = curl.wait();
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Our members' lines of `show bond`: (link, collecting, distributing).
fn members(show: &str) -> Vec<(String, String, String)> {
    show.lines()
        .filter(|l| l.starts_with("m0 ") || l.starts_with("m1 "))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w[1].to_string(), w[2].to_string(), w[3].to_string())
        })
        .collect()
}

fn carrying(show: &str) -> usize {
    members(show).iter().filter(|m| m.0 == "up" && m.1 == "yes" && m.2 == "yes").count()
}

#[test]
fn lacp_with_dpdk_net_bonding_forms_spreads_flows_and_fails_over_under_a_download_root() {
    if !ready(&["dpdk-testpmd", "curl", "python3", "ethtool"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let n = Net::new("b");
    let mut dpdk = dpdk_bond(&n, 4);

    let env = [
        ("IRONPATH_PORT_LAN", n.lan.clone()),
        ("IRONPATH_PORT_M0", n.m[0].clone()),
        ("IRONPATH_PORT_M1", n.m[1].clone()),
    ];
    let mut run = Run::start(&config("bond.yaml"), &env, "bond");
    // DPDK's bond sends its LACPDUs when it transmits: the server's pings give it
    // reasons to.
    let pinger = Command::new("ip")
        .args(["netns", "exec", &n.s, "ping", "-q", "-i", "0.2", "-w", "25", "198.18.90.1"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let mut show = String::new();
    while t.elapsed() < Duration::from_secs(20) {
        show = run.ctl("show bond", true);
        if carrying(&show) == 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(carrying(&show), 2, "the aggregate did not form:\n{show}\nDPDK:\n{}", dpdk.output());
    // Both sides name the other as partner.
    let mac = |dev: &str| std::fs::read_to_string(format!("/sys/class/net/{dev}/address")).unwrap().trim().to_string();
    assert!(show.contains(&format!("aggregator partner: system {}", mac(&n.d[0]))), "{show}");
    // DPDK names us as its partner and distributes on both members (its machines
    // may be a tick behind ours).
    let t = Instant::now();
    let mut info = String::new();
    while t.elapsed() < Duration::from_secs(10) {
        info = dpdk.ask("show bonding lacp info 3", "Partner detail info");
        if info.matches("DISTRIBUTING").count() >= 4 {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(info.to_lowercase().contains(&mac(&n.m[0])), "DPDK's partner is not us:\n{info}");
    assert!(info.matches("DISTRIBUTING").count() >= 4, "DPDK does not distribute on both members:\n{info}");
    let conf = dpdk.ask("show bonding config 3", "Active Slaves");
    assert!(conf.contains("Active Slaves (2)"), "{conf}");
    // Flows spread over both members both ways: 16 parallel downloads.
    let dir = TempDir::new("bond-www");
    www(&dir.0, &[("big", 100 << 20), ("mid", 1 << 20)]);
    let http = Http::start(&n.s, "198.18.90.2", &dir.0);
    let before = run.latest();
    sixteen_downloads(&n);
    let after = run.latest();
    let moved = |port: &str, k: &str| {
        after["ports"][port][k].as_u64().unwrap_or(0) - before["ports"][port][k].as_u64().unwrap_or(0)
    };
    for m in ["m0", "m1"] {
        assert!(moved(m, "opackets") > 100 && moved(m, "ipackets") > 100, "{m} carried too little: {after}");
    }
    // A download through the bond; halfway, a member is taken out on DPDK's side
    // (`remove bonding slave`) and its link goes down.
    let got = dir.0.join("got");
    let mut curl = slow_download(&n.c, "http://198.18.90.2:8000/big", &got);
    std::thread::sleep(Duration::from_millis(1000));
    // The member the download comes in on is the one taken out.
    let (a, b) = (run.latest(), run.latest());
    let ib = |l: &serde_json::Value, m: &str| l["ports"][m]["ibytes"].as_u64().unwrap_or(0);
    let k = usize::from(ib(&b, "m1") - ib(&a, "m1") > ib(&b, "m0") - ib(&a, "m0"));
    let other = ["m0", "m1"][1 - k];
    let other_before = ib(&b, other);
    let removed = dpdk.ask(&format!("remove bonding slave {} 3", k + 1), "testpmd>");
    sh(&format!("ip link set {} down", n.d[k]));
    // DPDK's LACP may take the member out of the aggregate before our link poll
    // sees the carrier go: wait for both.
    let t = Instant::now();
    let gone = |show: &str| carrying(show) == 1 && members(show).get(k).is_some_and(|m| m.0 == "down");
    while t.elapsed() < Duration::from_secs(3) && !gone(&run.ctl("show bond", true)) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let failover = t.elapsed();
    let show = run.ctl("show bond", true);
    assert_eq!(members(&show)[k].0, "down", "{show}");
    assert_eq!(carrying(&show), 1, "the member did not leave:\n{show}");
    assert!(failover < Duration::from_secs(1), "our side took {failover:?} to drop the member");
    let ok = finished(&mut curl);
    drop(http);
    let _ = pinger.wait_with_output();
    assert!(ok, "the download did not survive the member going down:\n{show}\nDPDK: {removed}");
    assert_eq!(sha256(&got), sha256(&dir.0.join("big")), "100 MiB: SHA-256 differs");
    // The rest of it came in on the other member.
    let end = run.latest();
    let rest = ib(&end, other) - other_before;
    assert!(rest > 40 << 20, "{rest} bytes on {other} after the failover (k {k}): {a}\n{b}\n{end}");
    let last = run.latest();
    assert!(counter(&last, "bond0", "changes") >= 2, "{last}");
    let out = run.stop();
    assert!(out.contains("bond0"), "{out}");
    drop(dpdk.quit());
}

/// The server (198.18.91.2) behind a Linux bridge in namespace `sw` whose ports
/// `s0`/`s1` are wired to our members; the client (198.18.91.1) on `lan`.
struct Switched {
    c: String,
    sw: String,
    srv: String,
    lan: String,
    m: [String; 2],
}

impl Switched {
    fn new() -> Switched {
        let id = std::process::id() % 100_000;
        let n = Switched {
            c: format!("ipba-c-{id}"),
            sw: format!("ipba-sw-{id}"),
            srv: format!("ipba-s-{id}"),
            lan: format!("ipba{id}l"),
            m: [format!("ipba{id}m0"), format!("ipba{id}m1")],
        };
        n.teardown();
        let (c, sw, srv, lan) = (&n.c, &n.sw, &n.srv, &n.lan);
        sh(&format!(
            "ip netns add {c} && ip netns add {sw} && ip netns add {srv} && \
             ip -n {sw} link add br0 type bridge && ip -n {sw} link set br0 up && \
             ip link add {lan} type veth peer name e0 netns {c} && ip link set {lan} up && \
             sysctl -qw net.ipv6.conf.{lan}.disable_ipv6=1 && \
             ip -n {c} addr add 198.18.91.1/24 dev e0 && ip -n {c} link set e0 up && \
             ip -n {sw} link add s2 type veth peer name e0 netns {srv} && ip -n {sw} link set s2 master br0 up && \
             ip -n {srv} addr add 198.18.91.2/24 dev e0 && ip -n {srv} link set e0 up"
        ));
        for (i, m) in n.m.iter().enumerate() {
            sh(&format!(
                "ip link add {m} type veth peer name s{i} netns {sw} && sysctl -qw net.ipv6.conf.{m}.disable_ipv6=1 && \
                 ip link set {m} up && ip -n {sw} link set s{i} master br0 up"
            ));
        }
        n
    }

    fn teardown(&self) {
        for l in [&self.lan, &self.m[0], &self.m[1]] {
            let _ = Command::new("ip").args(["link", "del", l]).output();
        }
        for ns in [&self.c, &self.sw, &self.srv] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

impl Drop for Switched {
    fn drop(&mut self) {
        self.teardown();
    }
}

#[test]
fn active_backup_on_a_linux_bridge_fails_over_under_a_download_root() {
    if !ready(&["curl", "python3", "ping"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let n = Switched::new();
    let env = [
        ("IRONPATH_PORT_LAN", n.lan.clone()),
        ("IRONPATH_PORT_M0", n.m[0].clone()),
        ("IRONPATH_PORT_M1", n.m[1].clone()),
        ("IRONPATH_BOND_MODE", "active_backup".to_string()),
    ];
    let mut run = Run::start(&config("bond.yaml"), &env, "bond-ab");
    let o = in_ns(&n.c, 10, "ping -c 3 -i 0.2 -W 2 198.18.91.2");
    assert!(o.contains(" 3 received"), "{o}\n{}", run.output());
    let show = run.ctl("show bond", true);
    let m = members(&show);
    assert_eq!((m[0].2.as_str(), m[1].2.as_str()), ("yes", "no"), "m0 carries traffic, m1 waits:\n{show}");
    let dir = TempDir::new("bond-ab-www");
    www(&dir.0, &[("big", 100 << 20)]);
    let http = Http::start(&n.srv, "198.18.91.2", &dir.0);
    let got = dir.0.join("got");
    let mut curl = slow_download(&n.c, "http://198.18.91.2:8000/big", &got);
    std::thread::sleep(Duration::from_millis(1500));
    // The active member's switch port goes down: m1 takes over within a tick, and
    // the client's next frames teach the bridge where the client now is.
    let m1_before = run.latest()["ports"]["m1"]["ibytes"].as_u64().unwrap_or(0);
    sh(&format!("ip -n {} link set s0 down", n.sw));
    let t = Instant::now();
    let mut show = String::new();
    while t.elapsed() < Duration::from_secs(3) {
        show = run.ctl("show bond", true);
        if members(&show).get(1).is_some_and(|m| m.2 == "yes") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let failover = t.elapsed();
    let m = members(&show);
    assert_eq!((m[0].0.as_str(), m[1].2.as_str()), ("down", "yes"), "{show}");
    assert!(failover < Duration::from_secs(1), "failover took {failover:?}");
    let ok = finished(&mut curl);
    drop(http);
    assert!(ok, "the download did not survive the failover:\n{show}");
    assert_eq!(sha256(&got), sha256(&dir.0.join("big")), "100 MiB: SHA-256 differs");
    let last = run.latest();
    let rest = last["ports"]["m1"]["ibytes"].as_u64().unwrap_or(0) - m1_before;
    assert!(rest > 40 << 20, "{rest} bytes on m1 after the failover: {last}");
    assert!(counter(&last, "bond0", "not_collecting") > 0, "the backup's flooded copies were not refused: {last}");
    run.stop();
}

/// `balance` against DPDK's `net_bonding` in mode 2 (balance, l34): a static
/// aggregate, no LACP. Flows spread over both members both ways; slow frames never
/// come and nothing is refused.
#[test]
fn balance_with_dpdk_net_bonding_mode_2_spreads_flows_both_ways_root() {
    if !ready(&["dpdk-testpmd", "curl", "python3", "ethtool"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let n = Net::new("bb");
    let dpdk = dpdk_bond(&n, 2);
    let env = [
        ("IRONPATH_PORT_LAN", n.lan.clone()),
        ("IRONPATH_PORT_M0", n.m[0].clone()),
        ("IRONPATH_PORT_M1", n.m[1].clone()),
        ("IRONPATH_BOND_MODE", "balance".to_string()),
    ];
    let mut run = Run::start(&config("bond.yaml"), &env, "bond-balance");
    let show = run.ctl("show bond", true);
    assert_eq!(carrying(&show), 2, "{show}");
    let dir = TempDir::new("bond-bal-www");
    www(&dir.0, &[("mid", 1 << 20)]);
    let http = Http::start(&n.s, "198.18.90.2", &dir.0);
    let before = run.latest();
    sixteen_downloads(&n);
    let after = run.latest();
    drop(http);
    let moved = |port: &str, k: &str| {
        after["ports"][port][k].as_u64().unwrap_or(0) - before["ports"][port][k].as_u64().unwrap_or(0)
    };
    for m in ["m0", "m1"] {
        assert!(moved(m, "opackets") > 100 && moved(m, "ibytes") > 2 << 20, "{m} carried too little: {after}");
    }
    for c in ["lacpdu_in", "lacpdu_out", "slow_other", "not_collecting"] {
        assert_eq!(counter(&after, "bond0", c), 0, "{c}: {after}");
    }
    run.stop();
    drop(dpdk.quit());
}
