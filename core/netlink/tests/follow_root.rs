//! Needs root and `ip` (and `bird` for the BIRD test): each test makes a network
//! namespace of its own with a veth pair (d0: 198.18.0.1/24, fd00::1/64; d1: its peer), follows
//! its main table, changes the kernel's tables with `ip` (or BIRD), and checks each
//! change arrives as an event within a second (BIRD: a few). The namespace (and
//! BIRD, and its directory) go away even when an assertion fails.

use std::net::IpAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use ironpath_netlink::{FollowCfg, Follower, KernelEvent, KernelNeigh, KernelRoute, RouteKind};

#[path = "../../../ci/skip.rs"]
mod skip_log;
use skip_log::skip;

const WAIT: Duration = Duration::from_secs(1);

fn ready(tools: &[&str]) -> bool {
    if !rustix::process::geteuid().is_root() {
        skip("needs root");
        return false;
    }
    for t in tools {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            skip(&format!("needs {t} (package {})", if *t == "ip" { "iproute2" } else { "bird2" }));
            return false;
        }
    }
    true
}

/// A network namespace with a veth pair `d0`/`d1` up, `d0` with 198.18.0.1/24 and fd00::1/64;
/// deleted on drop.
struct Ns(String);

impl Ns {
    fn new(tag: &str) -> Ns {
        let ns = Ns(format!("ipnl{tag}{}", std::process::id()));
        let _ = Command::new("ip").args(["netns", "del", &ns.0]).stderr(Stdio::null()).status();
        sh(&["ip", "netns", "add", &ns.0]);
        ns.ip("link set lo up");
        ns.ip("link add d0 type veth peer name d1");
        ns.ip("link set d1 up");
        ns.ip("link set d0 up");
        ns.ip("addr add 198.18.0.1/24 dev d0");
        ns.ip("-6 addr add fd00::1/64 dev d0 nodad");
        ns
    }

    /// `ip -n NS ARGS`, which must succeed.
    fn ip(&self, args: &str) {
        let mut cmd = vec!["ip", "-n", &self.0];
        cmd.extend(args.split_whitespace());
        sh(&cmd);
    }

    fn follow(&self) -> (Follower, Receiver<KernelEvent>) {
        let (tx, rx) = channel();
        let f = Follower::start(FollowCfg { netns: Some(self.0.clone()), table: 254 }, move |e| {
            let _ = tx.send(e);
        })
        .expect("start the follower");
        (f, rx)
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn sh(cmd: &[&str]) {
    let out = Command::new(cmd[0]).args(&cmd[1..]).output().expect("run a command");
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// The first event within `within` that `want` accepts; the events before it are
/// returned too (to check what must not have come).
fn wait_for(
    rx: &Receiver<KernelEvent>,
    within: Duration,
    want: impl Fn(&KernelEvent) -> bool,
) -> (KernelEvent, Vec<KernelEvent>) {
    let end = Instant::now() + within;
    let mut before = Vec::new();
    loop {
        let left = end.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(e) if want(&e) => return (e, before),
            Ok(e) => before.push(e),
            Err(_) => panic!("no such event within {within:?}; got {before:#?}"),
        }
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn route_is(r: &KernelRoute, dst: &str, len: u8) -> bool {
    r.dst == ip(dst) && r.len == len
}

fn snapshot(rx: &Receiver<KernelEvent>, within: Duration) -> (Vec<KernelRoute>, Vec<KernelNeigh>) {
    match wait_for(rx, within, |e| matches!(e, KernelEvent::Snapshot { .. })).0 {
        KernelEvent::Snapshot { routes, neighs } => (routes, neighs),
        _ => unreachable!(),
    }
}

#[test]
fn follow_ip_route_root() {
    if !ready(&["ip"]) {
        return;
    }
    let ns = Ns::new("");
    ns.ip("neigh add 198.18.0.7 lladdr 02:00:00:00:00:07 dev d0 nud permanent");
    ns.ip("-6 neigh add fd00::7 lladdr 02:00:00:00:00:08 dev d0 nud permanent");
    let (f, rx) = ns.follow();

    let (routes, neighs) = snapshot(&rx, 3 * WAIT);
    let n4 = neighs.iter().find(|n| n.addr == ip("198.18.0.7")).expect("IPv4 neighbour in the snapshot");
    assert_eq!((n4.mac, n4.ifname.as_deref(), n4.reachable), ([2, 0, 0, 0, 0, 7], Some("d0"), true));
    let n6 = neighs.iter().find(|n| n.addr == ip("fd00::7")).expect("IPv6 neighbour in the snapshot");
    assert_eq!(n6.mac, [2, 0, 0, 0, 0, 8]);
    let c4 = routes.iter().find(|r| route_is(r, "198.18.0.0", 24)).expect("connected IPv4 route in the snapshot");
    assert_eq!((c4.kind, c4.gateway, c4.oif.as_deref(), c4.table), (RouteKind::Unicast, None, Some("d0"), 254));
    let c6 = routes.iter().find(|r| route_is(r, "fd00::", 64)).expect("connected IPv6 route in the snapshot");
    assert_eq!(c6.oif.as_deref(), Some("d0"));
    // Local routes live in table 255: never delivered.
    assert!(!routes.iter().any(|r| r.dst == ip("198.18.0.1")), "{routes:#?}");

    ns.ip("route add 198.19.5.0/24 via 198.18.0.2 metric 7");
    let (e, _) = wait_for(&rx, WAIT, |e| matches!(e, KernelEvent::RouteAdd(r) if route_is(r, "198.19.5.0", 24)));
    let KernelEvent::RouteAdd(r) = e else { unreachable!() };
    assert_eq!(
        (r.kind, r.gateway, r.oif.as_deref(), r.metric),
        (RouteKind::Unicast, Some(ip("198.18.0.2")), Some("d0"), 7)
    );

    ns.ip("route del 198.19.5.0/24 via 198.18.0.2 metric 7");
    wait_for(&rx, WAIT, |e| matches!(e, KernelEvent::RouteDel(r) if route_is(r, "198.19.5.0", 24)));

    ns.ip("route add blackhole 198.19.6.0/24");
    let (e, _) = wait_for(&rx, WAIT, |e| matches!(e, KernelEvent::RouteAdd(r) if route_is(r, "198.19.6.0", 24)));
    let KernelEvent::RouteAdd(r) = e else { unreachable!() };
    assert_eq!((r.kind, r.gateway), (RouteKind::Blackhole, None));

    ns.ip("-6 route add fd00:5::/64 via fd00::2");
    let (e, _) = wait_for(&rx, WAIT, |e| matches!(e, KernelEvent::RouteAdd(r) if route_is(r, "fd00:5::", 64)));
    let KernelEvent::RouteAdd(r) = e else { unreachable!() };
    assert_eq!((r.gateway, r.oif.as_deref()), (Some(ip("fd00::2")), Some("d0")));

    // A route of table 100, then a marker in main: the first never arrives.
    let ignored_before = f.stats().ignored_table;
    ns.ip("route add 198.19.7.0/24 via 198.18.0.2 table 100");
    ns.ip("route add unreachable 198.19.8.0/24");
    let (e, before) = wait_for(&rx, WAIT, |e| matches!(e, KernelEvent::RouteAdd(r) if route_is(r, "198.19.8.0", 24)));
    assert!(matches!(e, KernelEvent::RouteAdd(KernelRoute { kind: RouteKind::Unreachable, .. })));
    assert!(
        !before.iter().any(|e| matches!(e, KernelEvent::RouteAdd(r) if r.table == 100)),
        "a route of table 100 delivered: {before:#?}"
    );
    assert!(f.stats().ignored_table > ignored_before, "{:?}", f.stats());

    ns.ip("neigh add 198.18.0.9 lladdr 02:00:00:00:00:09 dev d0 nud permanent");
    let (e, _) = wait_for(&rx, WAIT, |e| matches!(e, KernelEvent::NeighAdd(n) if n.addr == ip("198.18.0.9")));
    let KernelEvent::NeighAdd(n) = e else { unreachable!() };
    assert_eq!((n.mac, n.ifname.as_deref(), n.reachable), ([2, 0, 0, 0, 0, 9], Some("d0"), true));
    ns.ip("-6 neigh add fd00::9 lladdr 02:00:00:00:00:0a dev d0 nud permanent");
    wait_for(&rx, WAIT, |e| matches!(e, KernelEvent::NeighAdd(n) if n.addr == ip("fd00::9") && n.reachable));
    ns.ip("neigh del 198.18.0.9 dev d0");
    wait_for(&rx, WAIT, |e| matches!(e, KernelEvent::NeighDel(n) if n.addr == ip("198.18.0.9")));

    let s = f.stats();
    assert_eq!((s.snapshots, s.resyncs, s.malformed, s.dump_errors), (1, 0, 0, 0), "{s:?}");

    // The interface goes down: the kernel drops the IPv4 routes through it without a
    // notification each, so a new snapshot comes, without them.
    ns.ip("link set d0 down");
    let (routes, neighs) = snapshot(&rx, 2 * WAIT);
    assert!(!routes.iter().any(|r| route_is(r, "198.18.0.0", 24)), "{routes:#?}");
    assert!(
        routes.iter().any(|r| route_is(r, "198.19.6.0", 24)),
        "the blackhole has no interface and stays: {routes:#?}"
    );
    assert!(!neighs.iter().any(|n| n.addr == ip("fd00::9")), "{neighs:#?}");
    assert!(f.stats().link_resyncs >= 1, "{:?}", f.stats());

    let t = Instant::now();
    drop(f);
    eprintln!("follower stopped in {:?}", t.elapsed());
}

#[test]
fn follow_bad_namespace() {
    let err = Follower::start(FollowCfg { netns: Some("/nonexistent/ns".into()), table: 254 }, |_| {});
    assert!(err.is_err());
    let err = Follower::start(FollowCfg { netns: Some("..".into()), table: 254 }, |_| {});
    assert_eq!(err.err().map(|e| e.kind()), Some(std::io::ErrorKind::InvalidInput));
}

/// BIRD and its directory, removed on drop.
struct Bird {
    child: Child,
    dir: std::path::PathBuf,
}

impl Bird {
    fn stop(&mut self) {
        // SIGTERM lets BIRD withdraw what it exported.
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32);
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let end = Instant::now() + Duration::from_secs(3);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Bird {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn follow_bird_root() {
    if !ready(&["ip", "bird"]) {
        return;
    }
    let ns = Ns::new("b");
    let (f, rx) = ns.follow();
    snapshot(&rx, 3 * WAIT);

    let dir = std::env::temp_dir().join(format!("ipnl-bird-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    let conf = dir.join("bird.conf");
    std::fs::write(
        &conf,
        "router id 198.18.0.1;\n\
         protocol device { }\n\
         protocol kernel k4 { ipv4 { export all; }; }\n\
         protocol kernel k6 { ipv6 { export all; }; }\n\
         protocol static s4 { ipv4; route 198.19.9.0/24 via 198.18.0.2; route 198.19.10.0/24 blackhole; }\n\
         protocol static s6 { ipv6; route fd00:9::/64 via fd00::2; }\n",
    )
    .unwrap();
    let (sock, pid) = (dir.join("bird.ctl"), dir.join("bird.pid"));
    let child = Command::new("ip")
        .args(["netns", "exec", &ns.0, "bird", "-f", "-c"])
        .arg(&conf)
        .arg("-s")
        .arg(&sock)
        .arg("-P")
        .arg(&pid)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn bird");
    let mut bird = Bird { child, dir };

    // BIRD installs its routes in an order of its own: collect the adds.
    let within = 5 * WAIT;
    let end = Instant::now() + within;
    let mut added: Vec<KernelRoute> = Vec::new();
    let want = [("198.19.9.0", 24), ("198.19.10.0", 24), ("fd00:9::", 64)];
    while !want.iter().all(|(d, l)| added.iter().any(|r| route_is(r, d, *l))) {
        match rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
            Ok(KernelEvent::RouteAdd(r)) => added.push(r),
            Ok(_) => {}
            Err(_) => panic!("BIRD's routes not all delivered within {within:?}: {added:#?}"),
        }
    }
    let find = |d: &str, l: u8| added.iter().find(|r| route_is(r, d, l)).unwrap();
    let r = find("198.19.9.0", 24);
    assert_eq!((r.kind, r.gateway, r.oif.as_deref()), (RouteKind::Unicast, Some(ip("198.18.0.2")), Some("d0")));
    assert_eq!(find("198.19.10.0", 24).kind, RouteKind::Blackhole);
    assert_eq!(find("fd00:9::", 64).gateway, Some(ip("fd00::2")));

    bird.stop();
    wait_for(&rx, within, |e| matches!(e, KernelEvent::RouteDel(r) if route_is(r, "198.19.9.0", 24)));
    assert_eq!(f.stats().malformed, 0);
}

/// A burst of routes while the callback is stalled: the socket overruns, the kernel
/// reports ENOBUFS, and the follower's next snapshot (plus the deltas after it)
/// still adds up to the kernel's table.
#[test]
fn follow_overrun_resync_root() {
    if !ready(&["ip"]) {
        return;
    }
    const N: usize = 40_000;
    let ns = Ns::new("o");
    let (tx, rx) = channel();
    let stalled = std::sync::atomic::AtomicBool::new(false);
    let f = Follower::start(FollowCfg { netns: Some(ns.0.clone()), table: 254 }, move |e| {
        // The first route of the burst holds the thread long enough for the burst
        // to overflow the socket's buffer.
        if matches!(&e, KernelEvent::RouteAdd(r) if r.kind == RouteKind::Blackhole)
            && !stalled.swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            std::thread::sleep(Duration::from_millis(1500));
        }
        let _ = tx.send(e);
    })
    .expect("start the follower");
    snapshot(&rx, 3 * WAIT);

    let batch = std::env::temp_dir().join(format!("ipnl-batch-{}", std::process::id()));
    let lines: String = (0..N).map(|i| format!("route add blackhole 198.19.{}.{}/32\n", i / 256, i % 256)).collect();
    std::fs::write(&batch, lines).unwrap();
    let out = Command::new("ip").args(["-n", &ns.0, "-batch"]).arg(&batch).output().unwrap();
    let _ = std::fs::remove_file(&batch);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // The table as the events describe it.
    let mut table = std::collections::HashSet::new();
    let end = Instant::now() + Duration::from_secs(15);
    let burst = |r: &KernelRoute| r.kind == RouteKind::Blackhole && r.len == 32;
    while table.len() < N {
        match rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
            Ok(KernelEvent::Snapshot { routes, .. }) => {
                table = routes.iter().filter(|r| burst(r)).map(|r| r.dst).collect();
            }
            Ok(KernelEvent::RouteAdd(r)) if burst(&r) => {
                table.insert(r.dst);
            }
            Ok(KernelEvent::RouteDel(r)) => {
                table.remove(&r.dst);
            }
            Ok(_) => {}
            Err(_) => panic!("{} of {N} routes after 15 s; {:?}", table.len(), f.stats()),
        }
    }
    let s = f.stats();
    eprintln!("{s:?}");
    assert!(s.resyncs >= 1 && s.snapshots >= 2, "the burst did not overrun the socket: {s:?}");
}

/// Without root or a namespace: the process's own tables, read by any user.
#[test]
fn follow_own_namespace() {
    let (tx, rx) = channel();
    let f = Follower::start(FollowCfg { netns: None, table: 254 }, move |e| {
        let _ = tx.send(e);
    })
    .expect("start the follower");
    snapshot(&rx, 3 * WAIT);
    assert_eq!((f.stats().snapshots, f.stats().malformed), (1, 0));
}
