//! Needs root: the af_packet PMD against the Linux kernel across a veth pair. Each
//! test makes its own namespace and veth pair (unique names), gives the kernel end an
//! address in 198.18.0.0/15, and removes everything on exit, pass or fail.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_ironpath");

fn sh(cmd: &str) -> String {
    let o = Command::new("sh").arg("-c").arg(cmd).output().expect("sh");
    assert!(o.status.success(), "`{cmd}` failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A namespace `ns` holding veth end `peer` (198.18.<n>.1/24); the other end `port`
/// stays here for ironpath. IPv6 is off on both ends so the kernel sends nothing
/// unasked.
struct Veth {
    ns: String,
    port: String,
    peer: String,
    peer_ip: String,
    our_ip: String,
}

impl Veth {
    fn new(tag: &str, n: u8) -> Veth {
        let id = std::process::id() % 100_000;
        let v = Veth {
            ns: format!("ipt-{tag}-{id}"),
            port: format!("ip{tag}{id}a"),
            peer: format!("ip{tag}{id}b"),
            peer_ip: format!("198.18.{n}.1"),
            our_ip: format!("198.18.{n}.2"),
        };
        v.teardown();
        sh(&format!(
            "ip netns add {ns} && ip link add {p} type veth peer name {q} && ip link set {q} netns {ns} && \
             sysctl -qw net.ipv6.conf.{p}.disable_ipv6=1 && \
             ip netns exec {ns} sysctl -qw net.ipv6.conf.{q}.disable_ipv6=1 && \
             ip link set {p} up && ip netns exec {ns} ip addr add {ip}/24 dev {q} && \
             ip netns exec {ns} ip link set {q} up && ip netns exec {ns} ip link set lo up",
            ns = v.ns,
            p = v.port,
            q = v.peer,
            ip = v.peer_ip
        ));
        v
    }

    fn teardown(&self) {
        let _ = Command::new("ip").args(["link", "del", &self.port]).output();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
    }

    fn peer_stat(&self, what: &str) -> u64 {
        sh(&format!("ip netns exec {} cat /sys/class/net/{}/statistics/{what}", self.ns, self.peer))
            .trim()
            .parse()
            .unwrap()
    }

    /// rxonly answers no ARP: tell the kernel our MAC for `our_ip`.
    fn static_neighbour(&self) {
        sh(&format!(
            "ip netns exec {} ip neigh replace {} lladdr {} dev {} nud permanent",
            self.ns,
            self.our_ip,
            self.port_mac(),
            self.peer
        ));
    }

    fn port_mac(&self) -> String {
        sh(&format!("cat /sys/class/net/{}/address", self.port)).trim().to_string()
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// testpmd on the veth's port end, driven through stdin.
struct Testpmd {
    child: Child,
}

impl Testpmd {
    fn start(port: &str, app: &str) -> Testpmd {
        Self::start_args(&format!("net_af_packet0,iface={port}"), app)
    }

    fn start_args(vdev: &str, app: &str) -> Testpmd {
        let child = Command::new(BIN)
            .args(["testpmd", "-l", "0-1", "--no-huge", "--vdev", vdev, "--", "-i"])
            .args(app.split_whitespace())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn testpmd");
        Testpmd { child }
    }

    fn cmd(&mut self, line: &str) {
        writeln!(self.child.stdin.as_mut().unwrap(), "{line}").unwrap();
    }

    /// Quit and return all output (killed after 30 s).
    fn finish(mut self) -> String {
        self.cmd("quit");
        let t = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            if t.elapsed() > Duration::from_secs(30) {
                let _ = self.child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let o = self.child.wait_with_output().unwrap();
        format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
    }
}

fn num_after(s: &str, from: &str, key: &str) -> u64 {
    let i = s.rfind(from).unwrap_or_else(|| panic!("`{from}` not in:\n{s}"));
    let j = s[i..].find(key).unwrap_or_else(|| panic!("`{key}` not after `{from}` in:\n{s}"));
    s[i + j + key.len()..].split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn kernel_ping_gets_replies_from_icmpecho_root() {
    if !common::ready(&[]) {
        return;
    }
    let v = Veth::new("e", 1);
    let mut t = Testpmd::start(&v.port, "--forward-mode=icmpecho");
    t.cmd("start");
    std::thread::sleep(Duration::from_millis(500));
    let ping = Command::new("ip")
        .args(["netns", "exec", &v.ns, "ping", "-c", "5", "-i", "0.2", "-W", "2", "-w", "10", &v.our_ip])
        .output()
        .unwrap();
    t.cmd("stop");
    let out = t.finish();
    let p = String::from_utf8_lossy(&ping.stdout);
    assert!(p.contains("5 packets transmitted, 5 received"), "ping:\n{p}\ntestpmd:\n{out}");
    // The kernel learned our MAC from the ARP reply.
    let neigh = sh(&format!("ip netns exec {} ip neigh show {}", v.ns, v.our_ip));
    assert!(neigh.contains(&v.port_mac()), "{neigh}");
}

#[test]
fn txonly_bursts_arrive_in_the_kernel_counters_exactly_root() {
    if !common::ready(&[]) {
        return;
    }
    let v = Veth::new("t", 2);
    let before = v.peer_stat("rx_packets");
    // Exactly 4 bursts of 32 txonly packets, then nothing more is sent (rxonly).
    let mut t = Testpmd::start(&v.port, "--forward-mode=rxonly");
    t.cmd("start tx_first 4");
    std::thread::sleep(Duration::from_millis(800));
    t.cmd("stop");
    t.cmd("show port stats 0");
    let out = t.finish();
    let sent = num_after(&out, "NIC statistics for port 0", "TX-packets:");
    assert_eq!(sent, 128, "{out}");
    let got = v.peer_stat("rx_packets") - before;
    assert_eq!(got, 128, "the kernel counted {got} of 128:\n{out}");
}

#[test]
fn rxonly_counts_exactly_what_the_kernel_sent_root() {
    if !common::ready(&[]) {
        return;
    }
    rxonly_counts(Veth::new("r", 3), "");
}

/// The same through a TPACKET_V2 frame ring, which hands each frame over at once.
#[test]
fn rxonly_counts_exactly_what_the_kernel_sent_through_a_frame_ring_root() {
    if !common::ready(&[]) {
        return;
    }
    rxonly_counts(Veth::new("f", 7), ",rx_ring=frames,framecnt=64");
}

/// 1000 pings (every 2 ms) from the kernel, all counted as received, none missed.
fn rxonly_counts(v: Veth, args: &str) {
    v.static_neighbour();
    let mut t = Testpmd::start_args(&format!("net_af_packet0,iface={}{args}", v.port), "--forward-mode=rxonly");
    t.cmd("start");
    std::thread::sleep(Duration::from_millis(500));
    let before = v.peer_stat("tx_packets");
    let ping = Command::new("timeout")
        .args(["30", "ip", "netns", "exec", &v.ns, "ping", "-q", "-c", "1000", "-i", "0.002", "-W", "1", &v.our_ip])
        .output()
        .unwrap();
    let sent = v.peer_stat("tx_packets") - before;
    std::thread::sleep(Duration::from_millis(300));
    t.cmd("stop");
    t.cmd("show port stats 0");
    let out = t.finish();
    assert!(String::from_utf8_lossy(&ping.stdout).contains("1000 packets transmitted"), "{ping:?}");
    assert_eq!(sent, 1000, "the kernel sent {sent}");
    let got = num_after(&out, "NIC statistics for port 0", "RX-packets:");
    let missed = num_after(&out, "NIC statistics for port 0", "RX-missed:");
    assert_eq!((got, missed), (1000, 0), "{out}");
}

/// `kernel_rx=0`: the kernel owns our address too, yet while the port lives its stack
/// gets none of the pings (no replies) and we count every one; once testpmd exits,
/// the drop program is gone and the kernel answers again.
#[test]
fn kernel_rx_0_keeps_frames_from_the_kernel_stack_until_the_port_closes_root() {
    if !common::ready(&[]) {
        return;
    }
    let v = Veth::new("k", 9);
    sh(&format!("ip addr add {}/24 dev {}", v.our_ip, v.port));
    v.static_neighbour();
    let ping = |n: &str| {
        let o = Command::new("timeout")
            .args(["30", "ip", "netns", "exec", &v.ns, "ping", "-c", n, "-i", "0.01", "-W", "1", &v.our_ip])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert!(ping("3").contains("3 received"), "the kernel answers before: {}", ping("1"));
    let mut t = Testpmd::start_args(&format!("net_af_packet0,iface={},kernel_rx=0", v.port), "--forward-mode=rxonly");
    t.cmd("start");
    std::thread::sleep(Duration::from_millis(500));
    let during = ping("50");
    std::thread::sleep(Duration::from_millis(300));
    t.cmd("stop");
    t.cmd("show port stats 0");
    let out = t.finish();
    assert!(during.contains("50 packets transmitted, 0 received"), "the kernel answered: {during}");
    let got = num_after(&out, "NIC statistics for port 0", "RX-packets:");
    assert!(got >= 50, "testpmd saw {got} of 50 echo requests:\n{out}");
    let after = ping("3");
    assert!(after.contains("3 received"), "the kernel answers again once the port closed: {after}");
}

#[test]
fn two_queue_pairs_with_fanout_count_every_packet_root() {
    if !common::ready(&[]) {
        return;
    }
    let v = Veth::new("q", 6);
    v.static_neighbour();
    let mut t = Testpmd::start_args(
        &format!("net_af_packet0,iface={},qpairs=2", v.port),
        "--forward-mode=rxonly --rxq=2 --txq=2",
    );
    t.cmd("start");
    std::thread::sleep(Duration::from_millis(500));
    let before = v.peer_stat("tx_packets");
    // Several flows (UDP ports) so the hash fanout has something to spread.
    for port in 9000..9016 {
        sh(&format!(
            "ip netns exec {} bash -c 'for i in 1 2 3 4 5 6 7 8; do echo x > /dev/udp/{}/{port}; done'",
            v.ns, v.our_ip
        ));
    }
    let sent = v.peer_stat("tx_packets") - before;
    std::thread::sleep(Duration::from_millis(300));
    t.cmd("stop");
    t.cmd("show port stats 0");
    t.cmd("show port info 0");
    let out = t.finish();
    assert_eq!(sent, 128, "the kernel sent {sent}");
    assert!(out.contains("Current number of RX queues: 2"), "{out}");
    let got = num_after(&out, "NIC statistics for port 0", "RX-packets:");
    assert_eq!(got, 128, "{out}");
}

/// The kernel does what the shell asks of an af_packet port: `set allmulti` is the
/// interface's ALLMULTI flag, `set link-down|link-up` its UP flag, `mac_addr add`
/// a unicast filter (a veth has no filter table: the kernel turns promiscuous),
/// `port config mtu` its MTU.
#[test]
fn allmulti_link_mac_and_mtu_go_through_the_kernel_root() {
    if !common::ready(&[]) {
        return;
    }
    let v = Veth::new("m", 12);
    let flags = || sh(&format!("ip -d link show dev {}", v.port));
    let before = flags();
    assert!(!before.contains("ALLMULTI"), "{before}");
    let mut t = Testpmd::start(&v.port, "");
    let step = |t: &mut Testpmd, cmd: &str| {
        t.cmd(cmd);
        std::thread::sleep(Duration::from_millis(300));
    };
    step(&mut t, "set allmulti 0 on");
    let on = flags();
    step(&mut t, "set allmulti 0 off");
    let off = flags();
    step(&mut t, "set link-down port 0");
    let down = flags();
    step(&mut t, "set link-up port 0");
    let up = flags();
    step(&mut t, "port stop 0");
    step(&mut t, "port config mtu 0 1400");
    let mtu = flags();
    step(&mut t, "port start 0");
    step(&mut t, "mac_addr add 0 02:00:00:00:12:34");
    let added = flags();
    step(&mut t, "mac_addr remove 0 02:00:00:00:12:34");
    let removed = flags();
    let out = t.finish();
    assert!(on.contains("ALLMULTI"), "{on}\n{out}");
    assert!(!off.contains("ALLMULTI"), "{off}\n{out}");
    assert!(!down.contains(",UP") && !down.contains("<UP"), "{down}\n{out}");
    assert!(up.contains("UP"), "{up}\n{out}");
    assert!(mtu.contains("mtu 1400"), "{mtu}\n{out}");
    let promiscuity = |s: &str| -> u32 {
        s.split("promiscuity ").nth(1).and_then(|r| r.split_whitespace().next()).unwrap().parse().unwrap()
    };
    assert!(promiscuity(&added) > promiscuity(&removed), "added:\n{added}\nremoved:\n{removed}\n{out}");
    assert!(!out.contains("error") && !out.contains("failed"), "{out}");
    assert!(out.matches("Port 0:").count() >= 2, "started again after `port stop`: {out}");
}

/// RSS as testpmd shows it: with two queue pairs the kernel's flow hash (addresses
/// and TCP/UDP ports) spreads flows, and it cannot be narrowed; one queue: none.
#[test]
fn rss_hash_shows_the_kernel_flow_hash_root() {
    if !common::ready(&[]) {
        return;
    }
    let v = Veth::new("r", 13);
    let mut t = Testpmd::start_args(&format!("net_af_packet0,iface={},qpairs=2", v.port), "--rxq=2 --txq=2");
    t.cmd("show port 0 rss-hash");
    t.cmd("port config all rss ip");
    t.cmd("port config all rss all");
    let out = t.finish();
    assert!(out.contains("RSS functions:\n  ipv4 ipv4-tcp ipv4-udp ipv6 ipv6-tcp ipv6-udp \n"), "{out}");
    assert!(
        out.contains("rss_hf 0x104\nPort 0: Operation not supported: rss_hf 0x104: the kernel's flow hash"),
        "{out}"
    );
    assert!(out.contains("testpmd> port config all rss all\nrss_hf 0xd34\n"), "{out}");
}
