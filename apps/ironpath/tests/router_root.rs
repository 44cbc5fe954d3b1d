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
    fn new() -> Hosts {
        let id = std::process::id() % 100_000;
        let h = Hosts {
            a: format!("ipr-a-{id}"),
            b: format!("ipr-b-{id}"),
            pa: format!("ipr{id}a"),
            pb: format!("ipr{id}b"),
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
        let o = Command::new("timeout")
            .args([&secs.to_string(), "ip", "netns", "exec", ns, "sh", "-c", cmd])
            .output()
            .unwrap();
        text(&o)
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
    let h = Hosts::new();
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
