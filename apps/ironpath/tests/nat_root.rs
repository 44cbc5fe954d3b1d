//! Needs root, ping, traceroute, curl, wrk, nginx and python3: `configs/nat44.yaml`
//! as a NAT router between an inside LAN (two hosts behind a Linux bridge, 198.18.80.0/24)
//! and an outside network (a Linux router at 198.18.82.2 with a host behind it,
//! 198.18.83.2), the kernels' offloads on. Pings out; traceroute through the NAT (the
//! outside router's time exceeded and the far host's port unreachable translated
//! back); DNS-like UDP queries answered, the server seeing the outside address; a
//! refused datagram's ICMP error back to the socket; 100 MiB by HTTP (SHA-256 equal);
//! `wrk -c 1000` without errors; the port forward reached from outside and by
//! hairpinning from inside; one host opening 100,000 flows held at its bound while
//! the other still connects; UDP sessions gone on their timer. And the same traffic
//! through `nat44` and Linux's nftables masquerade: the same endpoints seen by the
//! servers, sessions matching `conntrack`'s entries by protocol and TCP state. The
//! namespaces have unique names and are removed, pass or fail.

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
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
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

/// One at a time: the comparison below and the test above each load the machine.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// An inside host (198.18.80.2) behind a NAT router (198.18.80.1 inside,
/// 198.18.82.1 outside) and an outside server (198.18.82.2): namespaces `tag-in`,
/// `tag-out` and, for the kernel's router, `tag-r` (else ironpath on `lan`/`wan`).
struct Twin {
    inside: String,
    outside: String,
    router: Option<String>,
    lan: String,
    wan: String,
}

impl Twin {
    fn new(tag: &str, kernel: bool) -> Twin {
        let id = std::process::id() % 100_000;
        let t = Twin {
            inside: format!("ip{tag}-in-{id}"),
            outside: format!("ip{tag}-out-{id}"),
            router: kernel.then(|| format!("ip{tag}-r-{id}")),
            lan: format!("ip{tag}{id}l"),
            wan: format!("ip{tag}{id}w"),
        };
        t.teardown();
        let (i, o, lan, wan) = (&t.inside, &t.outside, &t.lan, &t.wan);
        sh(&format!("ip netns add {i} && ip netns add {o} && ip -n {i} link set lo up && ip -n {o} link set lo up"));
        sh(&format!(
            "ip link add {lan} type veth peer name e0 netns {i} && ip link add {wan} type veth peer name e0 netns {o} && \
             ip -n {i} addr add 198.18.80.2/24 dev e0 && ip -n {i} link set e0 up && \
             ip -n {i} route add default via 198.18.80.1 && \
             ip -n {o} addr add 198.18.82.2/24 dev e0 && ip -n {o} link set e0 up"
        ));
        match &t.router {
            Some(r) => sh(&format!(
                "ip netns add {r} && ip link set {lan} netns {r} && ip link set {wan} netns {r} && \
                 ip -n {r} addr add 198.18.80.1/24 dev {lan} && ip -n {r} addr add 198.18.82.1/24 dev {wan} && \
                 ip -n {r} link set {lan} up && ip -n {r} link set {wan} up && ip -n {r} link set lo up && \
                 ip netns exec {r} sysctl -qw net.ipv4.ip_forward=1 && \
                 ip netns exec {r} nft 'add table ip nat; add chain ip nat post {{ type nat hook postrouting priority 100; }}; \
                 add rule ip nat post oifname {wan} masquerade'"
            )),
            None => sh(&format!(
                "sysctl -qw net.ipv6.conf.{lan}.disable_ipv6=1 net.ipv6.conf.{wan}.disable_ipv6=1 && \
                 ip link set {lan} up && ip link set {wan} up"
            )),
        };
        t
    }

    fn teardown(&self) {
        for l in [&self.lan, &self.wan] {
            let _ = Command::new("ip").args(["link", "del", l]).output();
        }
        for ns in [Some(&self.inside), Some(&self.outside), self.router.as_ref()].into_iter().flatten() {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

impl Drop for Twin {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// The same traffic through both NATs: from fixed local ports, 4 UDP queries (the
/// answer names the endpoint the server saw) and 3 TCP connections held open
/// (their peers named likewise), then a ping; prints what the server saw, waits
/// for `open` to exist, closes the connections, and waits for `closed`.
const SAME_TRAFFIC: &str = "import socket, sys, os, time, subprocess
seen = []
for p in range(42001, 42005):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(('198.18.80.2', p))
    s.settimeout(2)
    s.sendto(b'q', ('198.18.82.2', 5300))
    seen.append('udp ' + s.recvfrom(100)[0].split()[0].decode())
conns = []
for p in range(41001, 41004):
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    c.bind(('198.18.80.2', p))
    c.settimeout(2)
    c.connect(('198.18.82.2', 5301))
    seen.append('tcp ' + c.recv(100).decode().strip())
    conns.append(c)
subprocess.run(['ping', '-c', '2', '-i', '0.2', '-q', '198.18.82.2'], stdout=subprocess.DEVNULL, check=True)
print(' '.join(sorted(seen)), flush=True)
d = sys.argv[1]
while not os.path.exists(d + '/open'):
    time.sleep(0.05)
for c in conns:
    c.shutdown(socket.SHUT_WR)
    c.recv(100)
    c.close()
time.sleep(0.5)
open(d + '/closed', 'w').close()
";

/// A TCP server that tells each client the endpoint it saw, then closes when the
/// client does.
const TCP_FROM: &str = "import socket, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('198.18.82.2', 5301))
s.listen(16)
def serve(c, a):
    c.sendall(('%s:%d\\n' % a).encode())
    while c.recv(100):
        pass
    c.close()
while True:
    c, a = s.accept()
    threading.Thread(target=serve, args=(c, a), daemon=True).start()
";

/// Sessions by protocol and TCP class: (udp, icmp, tcp open, tcp closing).
type Classes = (u64, u64, u64, u64);

/// Linux's view: `conntrack -L` in the router's namespace.
fn conntrack_classes(router: &str) -> (Classes, String) {
    let o = in_ns(router, 5, "conntrack -L -n 2>/dev/null");
    let mut c = (0, 0, 0, 0);
    for l in o.lines() {
        match l.split_whitespace().next() {
            Some("udp") => c.0 += 1,
            Some("icmp") => c.1 += 1,
            Some("tcp") if l.contains("ESTABLISHED") => c.2 += 1,
            Some("tcp") => c.3 += 1,
            _ => {}
        }
    }
    (c, o)
}

/// Ours: the classes of the `sessions:` line of `show nat44`.
fn nat_classes(show: &str) -> Classes {
    let l = show.lines().find_map(|l| l.strip_prefix("sessions: ")).unwrap_or("");
    let n = |what: &str| -> u64 {
        let words: Vec<&str> = l.split(['(', ',', ')']).collect();
        words.iter().find_map(|w| w.trim().strip_suffix(what)).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
    };
    (n(" udp"), n(" icmp"), n(" tcp-established"), n(" tcp-transitory"))
}

/// Runs SAME_TRAFFIC from the inside host of `t`; returns what the servers saw and
/// the session classes (`classes`) with the connections open and after they closed.
fn same_traffic(
    t: &Twin,
    dir: &std::path::Path,
    classes: &dyn Fn() -> (Classes, String),
) -> (String, [(Classes, String); 2]) {
    let py = |f: &str| dir.join(f).display().to_string();
    let _udp = bg(&t.outside, &["python3", &py("echo.py"), "198.18.82.2", "5300"]);
    let _tcp = bg(&t.outside, &["python3", &py("tcp.py")]);
    std::thread::sleep(Duration::from_millis(500));
    let _ = std::fs::remove_file(dir.join("open"));
    let _ = std::fs::remove_file(dir.join("closed"));
    let mut child = Command::new("ip")
        .args(["netns", "exec", &t.inside, "timeout", "20", "python3", &py("same.py"), &dir.display().to_string()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    std::io::BufRead::read_line(&mut out, &mut seen).unwrap();
    let open = classes();
    std::fs::write(dir.join("open"), "").unwrap();
    let t0 = std::time::Instant::now();
    while !dir.join("closed").exists() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let closed = classes();
    let _ = child.kill();
    let _ = child.wait();
    (seen, [open, closed])
}

/// The same traffic through `nat44` and through Linux's nftables masquerade: the
/// servers see the same endpoints (the outside address, each source port kept), and
/// the NAT's sessions match conntrack's entries by protocol and TCP state (4 UDP,
/// 1 ICMP and 3 established TCP while the connections are open; the TCP ones
/// closing, TIME_WAIT in conntrack, transitory in ours, once closed).
#[test]
fn nat44_and_nftables_masquerade_agree_on_the_same_traffic_root() {
    if !ready(&["python3", "ping", "nft", "conntrack"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("nat-twins");
    std::fs::write(dir.0.join("echo.py"), ECHO_FROM).unwrap();
    std::fs::write(dir.0.join("tcp.py"), TCP_FROM).unwrap();
    std::fs::write(dir.0.join("same.py"), SAME_TRAFFIC).unwrap();
    let kernel = Twin::new("k", true);
    let router = kernel.router.clone().unwrap();
    let (k_seen, k) = same_traffic(&kernel, &dir.0, &|| conntrack_classes(&router));
    drop(kernel);
    let ours = Twin::new("o", false);
    let env = [("IRONPATH_PORT_LAN", ours.lan.clone()), ("IRONPATH_PORT_WAN", ours.wan.clone())];
    let mut run = Run::start(&config("nat44.yaml"), &env, "nat-twin");
    let show = || {
        let s = run.ctl("show nat44", true);
        (nat_classes(&s), s)
    };
    let (o_seen, o) = same_traffic(&ours, &dir.0, &show);
    run.stop();
    let expected_seen: Vec<String> = (41001..41004)
        .map(|p| format!("tcp 198.18.82.1:{p}"))
        .chain((42001..42005).map(|p| format!("udp 198.18.82.1:{p}")))
        .collect();
    assert_eq!(
        k_seen.split_whitespace().collect::<Vec<_>>().chunks(2).map(|w| w.join(" ")).collect::<Vec<_>>(),
        expected_seen,
        "kernel: {k_seen}"
    );
    assert_eq!(o_seen, k_seen, "the servers saw other endpoints through nat44 than through the kernel");
    assert_eq!(k[0].0, (4, 1, 3, 0), "conntrack with the connections open:\n{}", k[0].1);
    assert_eq!(o[0].0, k[0].0, "nat44 with the connections open:\n{}\nconntrack:\n{}", o[0].1, k[0].1);
    assert_eq!(k[1].0, (4, 1, 0, 3), "conntrack once closed:\n{}", k[1].1);
    assert_eq!(o[1].0, k[1].0, "nat44 once closed:\n{}\nconntrack:\n{}", o[1].1, k[1].1);
}
