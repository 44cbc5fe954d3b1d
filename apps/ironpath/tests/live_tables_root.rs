//! Needs root, curl, ping and python3: `configs/router.yaml`'s tables changed with
//! `ironpath ctl` while traffic crosses it. Host `a` (198.18.54.2) is on the router's
//! port a; on port b a LAN (a Linux bridge in namespace `lan`) holds two gateways, g1
//! (198.18.55.2) and g2 (198.18.55.3), each with a link to server `s`, which holds
//! 198.18.56.2 (the file's route for 198.18.56.0/24 goes via g1). During a download
//! from s, `ip route add` moves the subnet to g2 (g2 then carries it; the file
//! arrives whole), `ip route del` makes it unreachable (ICMP seen by a), an `acl rule
//! add deny` stops a ping at once and `acl rule del` lets it through again, and `set
//! interface state` takes port b down and up. Every namespace has a unique name and
//! is removed, pass or fail.

mod common;

use common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Net {
    ns: Vec<String>,
    /// The router's veth ends, in the root namespace.
    pa: String,
    pb: String,
}

impl Net {
    /// The hosts of a test named `tag` (one letter: the tests of this file run at once).
    fn new(tag: &str) -> Net {
        let id = std::process::id() % 100_000;
        let name = |n: &str| format!("ip{tag}-{n}-{id}");
        let n = Net {
            ns: ["a", "lan", "g1", "g2", "s"].iter().map(|n| name(n)).collect(),
            pa: format!("ip{tag}{id}a"),
            pb: format!("ip{tag}{id}b"),
        };
        n.teardown();
        let (a, lan, g1, g2, s) = (&n.ns[0], &n.ns[1], &n.ns[2], &n.ns[3], &n.ns[4]);
        let (pa, pb) = (&n.pa, &n.pb);
        let quiet = "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv4.conf.all.rp_filter=0 \
                     net.ipv4.conf.default.rp_filter=0";
        let mut script = String::new();
        for ns in &n.ns {
            script += &format!("ip netns add {ns} && ip netns exec {ns} {quiet} && ip -n {ns} link set lo up && ");
        }
        script += &format!(
            "ip link add {pa} type veth peer name e0 netns {a} && ip link add {pb} type veth peer name uplink netns {lan} && \
             sysctl -qw net.ipv6.conf.{pa}.disable_ipv6=1 net.ipv6.conf.{pb}.disable_ipv6=1 && \
             ip link set {pa} up && ip link set {pb} up && \
             ip -n {a} addr add 198.18.54.2/24 dev e0 && ip -n {a} link set e0 up && \
             ip -n {a} route add default via 198.18.54.1 && \
             ip -n {lan} link add br0 type bridge && ip -n {lan} link set br0 up && \
             ip -n {lan} link set uplink master br0 && ip -n {lan} link set uplink up && \
             ip -n {s} addr add 198.18.56.2/32 dev lo && "
        );
        for (g, addr, net) in [(g1, "198.18.55.2", 58), (g2, "198.18.55.3", 59)] {
            script += &format!(
                "ip link add {g}l type veth peer name e0 netns {g} && ip link set {g}l netns {lan} && \
                 ip -n {lan} link set {g}l master br0 && ip -n {lan} link set {g}l up && \
                 ip -n {g} addr add {addr}/24 dev e0 && ip -n {g} link set e0 up && \
                 ip -n {g} link add e1 type veth peer name n{net} netns {s} && \
                 ip -n {g} addr add 198.18.{net}.1/24 dev e1 && ip -n {g} link set e1 up && \
                 ip -n {s} addr add 198.18.{net}.2/24 dev n{net} && ip -n {s} link set n{net} up && \
                 ip netns exec {g} sysctl -qw net.ipv4.ip_forward=1 && \
                 ip -n {g} route add 198.18.54.0/24 via 198.18.55.1 && \
                 ip -n {g} route add 198.18.56.0/24 via 198.18.{net}.2 && "
            );
        }
        // The server answers through g1 whichever gateway brought the request.
        script += &format!("ip -n {s} route add 198.18.54.0/24 via 198.18.58.1");
        sh(&script);
        n
    }

    fn teardown(&self) {
        for l in [&self.pa, &self.pb] {
            let _ = Command::new("ip").args(["link", "del", l]).output();
        }
        for ns in &self.ns {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }

    fn in_ns(&self, ns: &str, secs: u32, cmd: &str) -> String {
        common::in_ns(ns, secs, cmd)
    }

    /// Bytes g2's LAN interface received.
    fn g2_rx(&self) -> u64 {
        let o = self.in_ns(&self.ns[3], 5, "cat /sys/class/net/e0/statistics/rx_bytes");
        o.trim().parse().unwrap_or_else(|_| panic!("rx_bytes of g2: {o}"))
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// Replies to `n` pings from `ns` to `dst` at `interval`.
fn replies(net: &Net, ns: &str, dst: &str, n: u32, interval: &str) -> u32 {
    let o = net.in_ns(ns, 5 + n, &format!("ping -c {n} -i {interval} -W 1 {dst}"));
    o.split(" received").next().and_then(|s| s.rsplit(", ").next()).and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

#[test]
fn routes_acl_rules_and_interface_state_change_under_traffic_root() {
    if !ready(&["curl", "ping", "python3"]) {
        return;
    }
    let net = Net::new("t");
    let (a, s) = (net.ns[0].clone(), net.ns[4].clone());
    let env = [("IRONPATH_PORT_A", net.pa.clone()), ("IRONPATH_PORT_B", net.pb.clone())];
    let run = Run::start(&config("router.yaml"), &env, "tables");
    assert_eq!(replies(&net, &a, "198.18.56.2", 3, "0.2"), 3, "s through g1:\n{}", run.output());

    // s downloads 60 MiB from a, paced at 20 MB/s: about 3 s on the wire, the data
    // through the route that moves.
    let dir = TempDir::new("tables");
    www(&dir.0, &[("big", 60 << 20)]);
    let mut http = Command::new("ip")
        .args(["netns", "exec", &a, "python3", "-m", "http.server", "8000", "--bind", "198.18.54.2", "--directory"])
        .arg(&dir.0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let got = dir.0.join("got");
    let t = Instant::now();
    let from_s = "curl --interface 198.18.56.2 -sS --fail";
    while net.in_ns(&s, 3, &format!("{from_s} -o /dev/null -w '%{{http_code}}' http://198.18.54.2:8000/")) != "200" {
        assert!(t.elapsed() < Duration::from_secs(10), "the server does not answer");
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut curl = Command::new("timeout")
        .args(["60", "ip", "netns", "exec", &s, "sh", "-c"])
        .arg(format!("{from_s} --limit-rate 20M -o {} http://198.18.54.2:8000/big", got.display()))
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let before = net.g2_rx();
    let out = run.ctl("ip route add 198.18.56.0/24 via 198.18.55.3", true);
    assert!(out.contains("198.18.56.0/24 via 198.18.55.3 port b: replaced"), "{out}");
    assert!(run.ctl("show ip route", true).contains("198.18.56.0/24 via 198.18.55.3 port b"));
    std::thread::sleep(Duration::from_millis(1000));
    let moved = net.g2_rx() - before;
    assert!(moved > 5 << 20, "the download moved to g2: {moved} bytes there in 1 s");
    assert!(curl.wait().unwrap().success(), "the download went on across the change");
    let _ = http.kill();
    let _ = http.wait();
    assert_eq!(sha256(&got), sha256(&dir.0.join("big")), "60 MiB across a route change: SHA-256 differs");

    // Deleted, the subnet is unreachable: the router says so.
    let out = run.ctl("ip route del 198.18.56.0/24", true);
    assert!(out.contains("removed"), "{out}");
    let o = net.in_ns(&a, 5, "ping -c 1 -W 2 198.18.56.2");
    assert!(o.contains("Destination Net Unreachable"), "{o}");
    // Bad input changes nothing.
    for bad in ["ip route add 198.18.56.0/24 via 198.18.99.1", "ip route add 198.18.56.0/24 via 198.18.55.3 port z"] {
        run.ctl(bad, false);
    }
    run.ctl("ip route add 198.18.56.0/24 via 198.18.55.2", true);
    assert_eq!(replies(&net, &a, "198.18.56.2", 3, "0.2"), 3, "back through g1");

    // An acl rule denies a flow from the next burst on, and deleting it lets it through.
    let ping = Command::new("ip")
        .args(["netns", "exec", &a, "ping", "-c", "40", "-i", "0.05", "-W", "1", "198.18.55.2"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let denied = counter(&run.latest(), "fw", "denied");
    let out = run.ctl("acl rule add at 0 deny proto icmp dst 198.18.55.2/32", true);
    assert!(out.contains("rule 0 added: 3 rules"), "{out}");
    std::thread::sleep(Duration::from_millis(400));
    let during = counter(&run.latest(), "fw", "denied") - denied;
    assert!(during >= 3, "pings denied while the rule is in: {during}");
    assert!(run.ctl("show acl", true).contains("0: deny dst 198.18.55.2/32 proto 1"));
    run.ctl("acl rule del 0", true);
    let o = ping.wait_with_output().unwrap();
    let o = String::from_utf8_lossy(&o.stdout);
    let got: u32 = o
        .split(" received")
        .next()
        .and_then(|s| s.rsplit(", ").next())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    assert!((10..40).contains(&got), "some pings answered before and after the rule, none while it was in: {o}");
    assert_eq!(replies(&net, &a, "198.18.55.2", 3, "0.2"), 3, "the rule is gone");

    // Port b administratively down: nothing crosses it, counted; up again: it does.
    run.ctl("set interface state b down", true);
    assert!(run.ctl("show interface b", true).contains("admin down"));
    assert_eq!(replies(&net, &a, "198.18.55.2", 3, "0.2"), 0, "port b is down");
    assert!(counter(&run.latest(), "tx_b", "admin_down") >= 3);
    let shown = run.ctl("show interface b", true);
    assert!(shown.contains("drops: admin_down (tx_b)"), "the port's own nodes' drops: {shown}");
    run.ctl("set interface state b up", true);
    assert_eq!(replies(&net, &a, "198.18.55.2", 3, "0.2"), 3, "port b is up again");
}

/// Waits up to 3 s for `show ip route` to satisfy `ok`.
fn route_shown(run: &Run, ok: impl Fn(&str) -> bool) -> String {
    let t = Instant::now();
    loop {
        let shown = run.ctl("show ip route", true);
        if ok(&shown) || t.elapsed() > Duration::from_secs(3) {
            return shown;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The kernel of namespace `k` holds a table the router follows (`follow_table`):
/// `ip route add` there moves 198.18.56.0/24 to g2, `ip route del` gives the file's
/// route (through g1) back, a kernel `unreachable` route is answered, a BIRD static
/// route (when bird is installed) moves the subnet to g2 again, and BIRD's exit
/// withdraws it.
#[test]
fn the_router_follows_a_kernel_table_and_bird_root() {
    if !ready(&["ping"]) {
        return;
    }
    let net = Net::new("k");
    let k = format!("ipk-k-{}", std::process::id() % 100_000);
    let _ = Command::new("ip").args(["netns", "del", &k]).output();
    sh(&format!(
        "ip netns add {k} && ip -n {k} link set lo up && ip -n {k} link add kv0 type veth peer name kv1 && \
         ip -n {k} addr add 198.18.55.100/24 dev kv0 && ip -n {k} link set kv0 up && ip -n {k} link set kv1 up"
    ));
    struct Ns(String);
    impl Drop for Ns {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
        }
    }
    let _k = Ns(k.clone());
    let a = net.ns[0].clone();
    let env = [
        ("IRONPATH_PORT_A", net.pa.clone()),
        ("IRONPATH_PORT_B", net.pb.clone()),
        ("IRONPATH_FOLLOW_TABLE", "254".to_string()),
        ("IRONPATH_FOLLOW_NETNS", k.clone()),
    ];
    let run = Run::start(&config("router.yaml"), &env, "follow");
    let shown = route_shown(&run, |s| s.contains("following kernel table 254"));
    assert!(shown.contains(&format!("namespace {k}")), "{shown}");
    assert_eq!(replies(&net, &a, "198.18.56.2", 2, "0.2"), 2, "s through g1 (the file's route)");

    sh(&format!("ip -n {k} route add 198.18.56.0/24 via 198.18.55.3"));
    let shown = route_shown(&run, |s| s.contains("198.18.56.0/24 via 198.18.55.3 port b  (kernel)"));
    assert!(shown.contains("198.18.56.0/24 via 198.18.55.3 port b  (kernel)"), "{shown}");
    let before = net.g2_rx();
    assert_eq!(replies(&net, &a, "198.18.56.2", 20, "0.01"), 20, "s through g2");
    assert!(net.g2_rx() - before >= 20 * 84, "the pings crossed g2");

    // Withdrawn, the kernel's route gives the file's back (through g1).
    let file_route = "198.18.56.0/24 via 198.18.55.2 port b\n";
    sh(&format!("ip -n {k} route del 198.18.56.0/24 via 198.18.55.3"));
    let shown = route_shown(&run, |s| s.contains(file_route));
    assert!(shown.contains(file_route), "the file's route is back: {shown}");
    assert_eq!(replies(&net, &a, "198.18.56.2", 2, "0.2"), 2, "s through g1 again");
    // A kernel `unreachable` route: the router answers for it.
    sh(&format!("ip -n {k} route add unreachable 198.18.56.0/24"));
    let shown = route_shown(&run, |s| s.contains("198.18.56.0/24 unreachable  (kernel)"));
    assert!(shown.contains("198.18.56.0/24 unreachable  (kernel)"), "{shown}");
    let o = net.in_ns(&a, 5, "ping -c 1 -W 2 198.18.56.2");
    assert!(o.contains("Destination Host Unreachable"), "{o}");
    sh(&format!("ip -n {k} route del unreachable 198.18.56.0/24"));
    assert!(route_shown(&run, |s| s.contains(file_route)).contains(file_route));

    if !have("bird") {
        eprintln!("SKIPPED part: needs bird (package bird2)");
        return;
    }
    // BIRD's static route through g2, exported to the kernel's table, then withdrawn
    // when BIRD exits.
    let dir = TempDir::new("bird");
    let conf = dir.0.join("bird.conf");
    std::fs::write(
        &conf,
        "router id 198.18.55.100;\nprotocol device { }\nprotocol kernel k4 { ipv4 { export all; }; }\n\
         protocol static s4 { ipv4; route 198.18.56.0/24 via 198.18.55.3; }\n",
    )
    .unwrap();
    let mut bird = Command::new("ip")
        .args(["netns", "exec", &k, "bird", "-f", "-c"])
        .arg(&conf)
        .arg("-s")
        .arg(dir.0.join("bird.ctl"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let bird_route = "198.18.56.0/24 via 198.18.55.3 port b  (kernel)";
    let shown = route_shown(&run, |s| s.contains(bird_route));
    // A second round half a second later if the first falls short: a transient right
    // after BIRD starts (seen once in CI, with the other test of this file loading the
    // machine) is not what this checks.
    let through_g2 = shown.contains(bird_route)
        && (0..2).any(|round| {
            if round > 0 {
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            let before = net.g2_rx();
            replies(&net, &a, "198.18.56.2", 20, "0.01") == 20 && net.g2_rx() - before >= 20 * 84
        });
    let _ = Command::new("kill").args(["-TERM", &bird.id().to_string()]).status();
    let _ = bird.wait();
    assert!(shown.contains(bird_route), "BIRD's route: {shown}");
    assert!(through_g2, "the pings follow BIRD's route through g2");
    let shown = route_shown(&run, |s| s.contains(file_route));
    assert!(shown.contains(file_route), "BIRD withdrew its route on exit, the file's is back: {shown}");
}
