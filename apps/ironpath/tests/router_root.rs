//! Needs root, ping, traceroute, curl and python3: `configs/router.yaml` routing
//! between two namespaces in two subnets (198.18.54.0/24 + fd00:54::/64 and
//! 198.18.55.0/24 + fd00:55::/64), the kernels' offloads on. Ping both ways in both
//! families, traceroute shows the router as hop 1 (time exceeded), 100 MiB by HTTP
//! with SHA-256 equal, ICMP unreachable for an unrouted prefix and an unreachable
//! route, and the ACL in front drops (and counts) what its rule denies. The
//! namespaces have unique names and are removed, pass or fail.

mod common;

use common::*;
use std::process::Command;
use std::time::Duration;

/// Namespaces `a` (198.18.54.2) and `b` (198.18.55.2), each with a default route
/// through the router; the router's veth ends (`pa`, `pb`) stay in the root namespace.
struct Hosts {
    a: String,
    b: String,
    pa: String,
    pb: String,
}

impl Hosts {
    /// Hosts of a test named `tag` (one letter: the tests of this file run at once).
    fn new(tag: &str) -> Hosts {
        let id = std::process::id() % 100_000;
        let h = Hosts {
            a: format!("ipr-a{tag}-{id}"),
            b: format!("ipr-b{tag}-{id}"),
            pa: format!("ipr{tag}{id}a"),
            pb: format!("ipr{tag}{id}b"),
        };
        h.teardown();
        for (ns, port, net) in [(&h.a, &h.pa, 54), (&h.b, &h.pb, 55)] {
            sh(&format!(
                "ip netns add {ns} && ip link add {port} type veth peer name e0 netns {ns} && \
                 sysctl -qw net.ipv6.conf.{port}.disable_ipv6=1 && ip link set {port} up && \
                 ip -n {ns} addr add 198.18.{net}.2/24 dev e0 && \
                 ip -n {ns} -6 addr add fd00:{net}::2/64 dev e0 nodad && \
                 ip -n {ns} link set e0 up && ip -n {ns} link set lo up && \
                 ip -n {ns} route add default via 198.18.{net}.1 && \
                 ip -n {ns} -6 route add default via fd00:{net}::1",
            ));
        }
        h
    }

    fn teardown(&self) {
        for l in [&self.pa, &self.pb] {
            let _ = Command::new("ip").args(["link", "del", l]).output();
        }
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }

    fn in_ns(&self, ns: &str, secs: u32, cmd: &str) -> String {
        common::in_ns(ns, secs, cmd)
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        self.teardown();
    }
}

fn node_counter(line: &serde_json::Value, node: &str, name: &str) -> u64 {
    line["nodes"][node]["counters"][name].as_u64().unwrap_or_else(|| panic!("no counter {node}.{name}: {line}"))
}

#[test]
fn the_router_pings_traces_carries_100_mib_answers_unreachable_and_filters_root() {
    if !ready(&["ping", "traceroute", "curl", "python3"]) {
        return;
    }
    let h = Hosts::new("r");
    let env = [("IRONPATH_PORT_A", h.pa.clone()), ("IRONPATH_PORT_B", h.pb.clone())];
    let mut run = Run::start(&config("router.yaml"), &env, "router");

    // Ping across the router, both families, both ways; and the router itself.
    for (ns, dst) in [
        (&h.a, "198.18.55.2"),
        (&h.a, "fd00:55::2"),
        (&h.b, "198.18.54.2"),
        (&h.b, "fd00:54::2"),
        (&h.a, "198.18.55.1"),
        (&h.b, "fd00:55::1"),
    ] {
        let o = h.in_ns(ns, 10, &format!("ping -c 3 -i 0.2 -W 2 {dst}"));
        assert!(o.contains(" 3 received"), "ping {dst} from {ns}: {o}");
    }

    // traceroute: hop 1 is the router (its time exceeded), hop 2 the destination.
    for (flag, router, dst) in [("-4", "198.18.54.1", "198.18.55.2"), ("-6", "fd00:54::1", "fd00:55::2")] {
        let o = h.in_ns(&h.a, 20, &format!("traceroute {flag} -n -q 1 -w 2 -m 4 {dst}"));
        let hops: Vec<Vec<&str>> = o.lines().skip(1).map(|l| l.split_whitespace().collect()).collect();
        assert!(hops.len() >= 2, "traceroute {dst}: {o}");
        assert_eq!(hops[0].get(1), Some(&router), "hop 1 is the router: {o}");
        assert_eq!(hops[1].get(1), Some(&dst), "hop 2 is the destination: {o}");
    }

    // An unrouted prefix and an `unreachable` route answer ICMP unreachable.
    for (dst, want) in [
        ("198.18.99.1", "Destination Net Unreachable"),
        ("198.18.57.1", "Destination Host Unreachable"),
        ("fd00:99::1", "No route"),
    ] {
        let o = h.in_ns(&h.a, 10, &format!("ping -c 1 -W 2 {dst}"));
        assert!(o.contains(want), "ping {dst}: {o}");
    }

    // 100 MiB by HTTP from b to a, across the router.
    download_100mib(&h.b, &h.a, "198.18.55.2", "router");

    // The ACL denies UDP to port 9: five datagrams dropped and counted, none routed.
    let before = run.latest();
    h.in_ns(
        &h.a,
        10,
        "python3 -c \"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); \
         [s.sendto(b'x', ('198.18.55.2', 9)) for _ in range(5)]\"",
    );
    std::thread::sleep(Duration::from_millis(500));
    let after = run.latest();
    assert_eq!(node_counter(&after, "fw", "denied") - node_counter(&before, "fw", "denied"), 5, "{after}");

    assert!(node_counter(&after, "router", "forwarded") > 1000, "{after}");
    assert!(node_counter(&after, "router", "ttl_exceeded") >= 2, "{after}");
    assert!(node_counter(&after, "router", "no_route") >= 2, "{after}");
    assert!(node_counter(&after, "router", "rejected") >= 1, "{after}");
    assert!(after["ports"]["a"]["obytes"].as_u64().unwrap_or(0) > 100 << 20, "{after}");
    let out = run.stop();
    assert!(out.contains("ip_router"), "{out}");
}

fn tool(name: &str) -> String {
    format!("{}/tests/tools/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// `ping -c n` from `ns` to `dst`: how many replies came back.
fn replies(h: &Hosts, ns: &str, dst: &str, n: u32, interval: &str) -> u32 {
    let o = h.in_ns(ns, 5 + n, &format!("ping -c {n} -i {interval} -W 1 {dst}"));
    o.split(" received").next().and_then(|s| s.rsplit(", ").next()).and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

/// The attacks of "Hostile network, part 2" on the router, each followed by traffic
/// that must still cross it: (1) 58-byte neighbour solicitations and advertisements
/// (a 4-byte ICMPv6 body) to all nodes and to the router, and every cut of a whole
/// solicitation, which once made the node panic and stop routing for good; (2) UDP
/// to the port the ACL denies, behind a hop-by-hop, a destination-options and an
/// atomic fragment header (the ACL read the ports at byte 40 and let them through);
/// (3) a scan of a connected /64 at 1,500 addresses a second, which filled the
/// table of neighbours being resolved and lost a new neighbour's first pings.
#[test]
fn crafted_neighbour_messages_extension_headers_and_a_scan_neither_stop_nor_pass_the_router_root() {
    if !ready(&["ping", "python3"]) {
        return;
    }
    let h = Hosts::new("x");
    let env = [("IRONPATH_PORT_A", h.pa.clone()), ("IRONPATH_PORT_B", h.pb.clone())];
    let mut run = Run::start(&config("router.yaml"), &env, "router-attacks");
    let across = |when: &str| {
        for dst in ["198.18.55.2", "fd00:55::2"] {
            assert_eq!(replies(&h, &h.a, dst, 3, "0.2"), 3, "ping {dst} {when}");
        }
    };
    across("before the attacks");
    let router_mac = std::fs::read_to_string(format!("/sys/class/net/{}/address", h.pa)).unwrap().trim().to_string();
    let a_mac = h.in_ns(&h.a, 5, "cat /sys/class/net/e0/address").trim().to_string();

    // (1) Short and cut neighbour discovery messages.
    let before = run.latest();
    for (dst_mac, dst) in [("33:33:00:00:00:01", "ff02::1"), (router_mac.as_str(), "fd00:54::1")] {
        let o =
            h.in_ns(&h.a, 10, &format!("python3 {} e0 short-nd {dst_mac} {a_mac} fd00:54::2 {dst}", tool("frames.py")));
        assert!(o.trim().parse::<u32>().is_ok_and(|n| n > 60), "frames.py: {o}");
    }
    std::thread::sleep(Duration::from_millis(300));
    across("after the short neighbour messages");
    let after = run.latest();
    assert_eq!(after["nodes"]["router"]["panics"].as_u64(), Some(0), "{after}");
    let bad = node_counter(&after, "router", "malformed") - node_counter(&before, "router", "malformed");
    assert!(bad >= 60, "the cut messages are counted malformed: {bad}");

    // (2) UDP behind extension headers to the denied port (9) is denied as plain UDP
    // is; to port 10 it crosses the router.
    let listener = format!(
        "ip netns exec {} timeout 8 python3 -c \"
import socket, select, time
socks = []
for p in (9, 10):
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.bind(('::', p)); socks.append(s)
got = {{9: 0, 10: 0}}
end = time.time() + 4
while time.time() < end:
    r, _, _ = select.select(socks, [], [], 0.2)
    for s in r:
        s.recv(100); got[s.getsockname()[1]] += 1
print(got[9], got[10])
\"",
        h.b
    );
    let listen =
        std::process::Command::new("sh").args(["-c", &listener]).stdout(std::process::Stdio::piped()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let before = run.latest();
    for port in [9, 10] {
        let o = h.in_ns(
            &h.a,
            10,
            &format!("python3 {} e0 udp6-ext {router_mac} {a_mac} fd00:54::2 fd00:55::2 {port}", tool("frames.py")),
        );
        assert_eq!(o.trim(), "4", "frames.py: {o}");
    }
    let got = String::from_utf8_lossy(&listen.wait_with_output().unwrap().stdout).trim().to_string();
    assert_eq!(
        got, "0 4",
        "datagrams received on ports 9 and 10 behind no, hop-by-hop, destination-options and fragment headers"
    );
    let after = run.latest();
    assert_eq!(node_counter(&after, "fw", "denied") - node_counter(&before, "fw", "denied"), 4, "{after}");

    // (3) A scan of fd00:55::/64 while a new neighbour appears: its pings are answered.
    let before = run.latest();
    let scan = std::process::Command::new("ip")
        .args(["netns", "exec", &h.a, "python3", &tool("frames.py"), "-", "scan6", "fd00:55::", "6", "1500"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    h.in_ns(&h.b, 5, "ip -6 addr add fd00:55::77/64 dev e0 nodad");
    let got = replies(&h, &h.a, "fd00:55::77", 12, "0.25");
    let sent = String::from_utf8_lossy(&scan.wait_with_output().unwrap().stdout).trim().to_string();
    let after = run.latest();
    let evicted =
        node_counter(&after, "router", "resolving_evicted") - node_counter(&before, "router", "resolving_evicted");
    assert!(
        got >= 11,
        "{got} of 12 pings to a new neighbour answered during a scan ({sent} scan datagrams, {evicted} evicted)"
    );
    assert!(evicted > 0, "the scan filled the table of neighbours being resolved: {after}");
    across("after the scan");
    assert_eq!(after["nodes"]["router"]["panics"].as_u64(), Some(0), "{after}");
    run.stop();
}
