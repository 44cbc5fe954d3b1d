//! Needs root, ping, traceroute, curl, wrk, nginx and python3: `configs/nat44.yaml`
//! as a NAT router between an inside LAN (two hosts behind a Linux bridge, 198.18.80.0/24)
//! and an outside network (a Linux router at 198.18.82.2 with a host behind it,
//! 198.18.83.2), the kernels' offloads on. Pings out; traceroute through the NAT (the
//! outside router's time exceeded and the far host's port unreachable translated
//! back); DNS-like UDP queries answered, the server seeing the outside address; a
//! refused datagram's ICMP error back to the socket; 100 MiB by HTTP (SHA-256 equal);
//! `wrk -c 1000` without errors; the port forward reached from outside and by
//! hairpinning from inside; one host opening 100,000 flows held at its bound while
//! the other still connects; UDP sessions gone on their timer. The namespaces have
//! unique names and are removed, pass or fail.

mod common;

use common::*;
use std::process::Command;
use std::time::Duration;

/// The namespaces: `in1` (198.18.80.2) and `in2` (198.18.80.3) behind the bridge of
/// `sw`, whose port `lan` is ironpath's inside; `out` (198.18.82.2, a router) on
/// ironpath's outside `wan`, and `far` (198.18.83.2) behind `out`.
struct Net {
    in1: String,
    in2: String,
    sw: String,
    out: String,
    far: String,
    lan: String,
    wan: String,
}

impl Net {
    fn new() -> Net {
        let id = std::process::id() % 100_000;
        let ns = |n: &str| format!("ipn-{n}-{id}");
        let n = Net {
            in1: ns("in1"),
            in2: ns("in2"),
            sw: ns("sw"),
            out: ns("out"),
            far: ns("far"),
            lan: format!("ipn{id}l"),
            wan: format!("ipn{id}w"),
        };
        n.teardown();
        for x in [&n.in1, &n.in2, &n.sw, &n.out, &n.far] {
            sh(&format!("ip netns add {x} && ip -n {x} link set lo up"));
        }
        let (sw, out, far) = (&n.sw, &n.out, &n.far);
        sh(&format!(
            "ip -n {sw} link add br0 type bridge && ip -n {sw} link set br0 up && \
             ip link add {lan} type veth peer name s0 netns {sw} && ip -n {sw} link set s0 master br0 up && \
             sysctl -qw net.ipv6.conf.{lan}.disable_ipv6=1 && ip link set {lan} up",
            lan = n.lan
        ));
        for (i, host) in [(1, &n.in1), (2, &n.in2)] {
            sh(&format!(
                "ip -n {sw} link add s{i} type veth peer name e0 netns {host} && ip -n {sw} link set s{i} master br0 up && \
                 ip -n {host} addr add 198.18.80.{a}/24 dev e0 && ip -n {host} link set e0 up && \
                 ip -n {host} route add default via 198.18.80.1",
                a = i + 1
            ));
        }
        sh(&format!(
            "ip link add {wan} type veth peer name e0 netns {out} && sysctl -qw net.ipv6.conf.{wan}.disable_ipv6=1 && \
             ip link set {wan} up && ip -n {out} addr add 198.18.82.2/24 dev e0 && ip -n {out} link set e0 up && \
             ip -n {out} link add f0 type veth peer name e0 netns {far} && \
             ip -n {out} addr add 198.18.83.1/24 dev f0 && ip -n {out} link set f0 up && \
             ip -n {far} addr add 198.18.83.2/24 dev e0 && ip -n {far} link set e0 up && \
             ip -n {far} route add default via 198.18.83.1 && \
             ip netns exec {out} sysctl -qw net.ipv4.ip_forward=1",
            wan = n.wan
        ));
        n
    }

    fn teardown(&self) {
        for l in [&self.lan, &self.wan] {
            let _ = Command::new("ip").args(["link", "del", l]).output();
        }
        for ns in [&self.in1, &self.in2, &self.sw, &self.out, &self.far] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// A process stopped with SIGTERM, then killed, even if the test fails (nginx's
/// master would leave its worker behind on SIGKILL).
struct Bg(std::process::Child);

impl Drop for Bg {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.0.id().to_string()]).status();
        let t = std::time::Instant::now();
        while self.0.try_wait().ok().flatten().is_none() && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn bg(ns: &str, args: &[&str]) -> Bg {
    Bg(Command::new("ip")
        .args(["netns", "exec", ns])
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap())
}

/// A UDP server answering each datagram with the address and port it came from.
const ECHO_FROM: &str = "import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
while True:
    d, a = s.recvfrom(2048)
    s.sendto(('%s:%d ' % a).encode() + d, a)
";

/// `n` queries from one socket, each answered: prints the answers' first words.
const QUERIES: &str = "import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
seen = set()
for i in range(int(sys.argv[3])):
    s.sendto(b'q%d' % i, (sys.argv[1], int(sys.argv[2])))
    d, _ = s.recvfrom(2048)
    assert d.split()[1] == b'q%d' % i
    seen.add(d.split()[0].decode())
print(' '.join(sorted(seen)), 'answered')
";

/// A connected UDP socket to a closed port: the port unreachable must come back.
const REFUSED: &str = "import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
s.connect(('198.18.83.2', 9))
s.send(b'x')
try:
    s.recv(100)
    print('answered')
except ConnectionRefusedError:
    print('refused')
except socket.timeout:
    print('timeout')
";

/// 100,000 flows: datagrams from one socket to 50,000 ports of two hosts.
const FLOOD: &str = "import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
n = 0
for host in ('198.18.82.2', '198.18.83.2'):
    for port in range(10000, 60000):
        try:
            s.sendto(b'f', (host, port))
            n += 1
        except OSError:
            pass
print(n, 'sent')
";

fn nat_counter(line: &serde_json::Value, name: &str) -> u64 {
    line["nodes"]["nat"]["counters"][name].as_u64().unwrap_or(0)
}

/// The `sessions: N of M (...)` line of `show nat44`: N.
fn sessions(show: &str) -> u64 {
    show.lines()
        .find_map(|l| l.strip_prefix("sessions: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no sessions line: {show}"))
}

#[test]
fn inside_hosts_reach_out_through_the_nat_and_a_forward_reaches_in_root() {
    if !ready(&["traceroute", "curl", "wrk", "nginx", "python3"]) {
        return;
    }
    let n = Net::new();
    let dir = TempDir::new("nat-files");
    let env = [
        ("IRONPATH_PORT_LAN", n.lan.clone()),
        ("IRONPATH_PORT_WAN", n.wan.clone()),
        ("IRONPATH_NAT_UDP_TIMEOUT", "3s".to_owned()),
    ];
    let mut run = Run::start(&config("nat44.yaml"), &env, "nat");

    // Ping out, to the outside router and past it.
    for (ns, dst) in [(&n.in1, "198.18.82.2"), (&n.in2, "198.18.83.2"), (&n.in1, "198.18.80.1")] {
        let o = in_ns(ns, 10, &format!("ping -c 3 -i 0.2 -W 2 {dst}"));
        assert!(o.contains(" 3 received"), "ping {dst} from {ns}: {o}\n{}", run.output());
    }

    // traceroute (UDP): hop 1 ironpath (a TTL-1 packet is not translated), hop 2 the
    // outside router's time exceeded, hop 3 the far host's port unreachable, both
    // sent to the outside address and translated back with what they quote.
    let o = in_ns(&n.in1, 30, "traceroute -n -q 1 -w 2 -m 5 198.18.83.2");
    let hops: Vec<Option<&str>> = o.lines().skip(1).map(|l| l.split_whitespace().nth(1)).collect();
    assert_eq!(hops, [Some("198.18.80.1"), Some("198.18.82.2"), Some("198.18.83.2")], "{o}");

    // DNS-like queries: each answered, the server saw the outside address.
    std::fs::write(dir.0.join("echo.py"), ECHO_FROM).unwrap();
    std::fs::write(dir.0.join("q.py"), QUERIES).unwrap();
    std::fs::write(dir.0.join("refused.py"), REFUSED).unwrap();
    std::fs::write(dir.0.join("flood.py"), FLOOD).unwrap();
    let py = |f: &str| dir.0.join(f).display().to_string();
    let _echo = bg(&n.far, &["python3", &py("echo.py"), "198.18.83.2", "5300"]);
    std::thread::sleep(Duration::from_millis(500));
    for ns in [&n.in1, &n.in2] {
        let o = in_ns(ns, 20, &format!("python3 {} 198.18.83.2 5300 100", py("q.py")));
        assert!(o.starts_with("198.18.82.1:") && o.trim_end().ends_with("answered"), "{o}");
        assert_eq!(o.split_whitespace().count(), 2, "one outside endpoint per socket (endpoint-independent): {o}");
    }
    // A datagram to a closed port: the far host's port unreachable reaches the socket.
    let o = in_ns(&n.in1, 10, &format!("python3 {}", py("refused.py")));
    assert_eq!(o.trim(), "refused", "{o}");

    // 100 MiB from the outside router's HTTP server to an inside host.
    download_100mib(&n.out, &n.in1, "198.18.82.2", "nat");

    // wrk with 1,000 connections through the NAT to nginx outside.
    let www = dir.0.join("www");
    std::fs::create_dir_all(&www).unwrap();
    www_files(&www);
    let conf = dir.0.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "daemon off; worker_processes 1; worker_rlimit_nofile 8192; pid {d}/nginx.pid; error_log {d}/error.log;
events {{ worker_connections 4096; }}
http {{ access_log off; client_body_temp_path {d}; proxy_temp_path {d}; fastcgi_temp_path {d};
  uwsgi_temp_path {d}; scgi_temp_path {d};
  server {{ listen 198.18.82.2:8080 backlog=4096; root {www}; }} }}
",
            d = dir.0.display(),
            www = www.display()
        ),
    )
    .unwrap();
    let _nginx = bg(&n.out, &["nginx", "-c", conf.to_str().unwrap()]);
    std::thread::sleep(Duration::from_millis(700));
    let o = in_ns(&n.in1, 30, "ulimit -n 8192; wrk -t 2 -c 1000 -d 3 --timeout 5 http://198.18.82.2:8080/small");
    assert!(o.contains("Requests/sec") && !o.contains("Socket errors") && !o.contains("Non-2xx"), "wrk:\n{o}");

    // The forward: outside port 8080 of the NAT to in2's port 8000, from outside and
    // (hairpinned) from in1.
    let _web = bg(
        &n.in2,
        &["python3", "-m", "http.server", "8000", "--bind", "198.18.80.3", "--directory", www.to_str().unwrap()],
    );
    std::thread::sleep(Duration::from_millis(700));
    for ns in [&n.out, &n.in1] {
        let o = in_ns(ns, 10, "curl -sS --fail --retry 3 --retry-connrefused -o /dev/null -w '%{http_code}' http://198.18.82.1:8080/small");
        assert_eq!(o.trim(), "200", "the forward from {ns}: {o}");
    }

    // One host opens 100,000 flows: held at its bound (4,096 sessions), the rest
    // dropped and counted; the other host still connects.
    let show = run.ctl("show nat44", true);
    let before = sessions(&show);
    let o = in_ns(&n.in1, 60, &format!("python3 {}", py("flood.py")));
    assert!(o.contains("100000 sent"), "{o}");
    let show = run.ctl("show nat44", true);
    let after = sessions(&show);
    assert!(after <= before + 4096, "in1 holds no more than its bound: {before} -> {after}\n{show}");
    let line = run.latest();
    assert!(nat_counter(&line, "host_limit") >= 50_000, "{line}");
    let o = in_ns(&n.in2, 20, "curl -sS --fail -o /dev/null -w '%{http_code}' http://198.18.82.2:8080/small");
    assert_eq!(o.trim(), "200", "in2 while in1 is at its bound: {o}");
    let o = in_ns(&n.in2, 20, &format!("python3 {} 198.18.83.2 5300 10", py("q.py")));
    assert!(o.trim_end().ends_with("answered"), "{o}");

    // UDP sessions end 3 s after their last datagram (udp_timeout).
    std::thread::sleep(Duration::from_secs(4));
    let show = run.ctl("show nat44", true);
    let udp: u64 = show
        .lines()
        .find_map(|l| l.strip_prefix("sessions: "))
        .and_then(|l| l.split('(').nth(1))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|k| k.parse().ok())
        .unwrap_or(u64::MAX);
    assert_eq!(udp, 0, "{show}");
    let line = run.latest();
    assert!(nat_counter(&line, "expired") >= after - before, "the flood's sessions expired: {line}");
    // in1 opens flows again.
    let o = in_ns(&n.in1, 20, &format!("python3 {} 198.18.83.2 5300 10", py("q.py")));
    assert!(o.trim_end().ends_with("answered"), "{o}");
    assert_eq!(nat_counter(&line, "malformed"), 0, "{line}");
    let out = run.stop();
    assert!(out.contains("nat44"), "{out}");
}

/// A small page for wrk and the forward.
fn www_files(dir: &std::path::Path) {
    std::fs::write(dir.join("small"), vec![b'x'; 512]).unwrap();
}
