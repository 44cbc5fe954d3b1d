//! Needs root and DPDK 22.11's `dpdk-testpmd` (Debian `dpdk`): net_memif against
//! DPDK's net_memif, both ways round (ours server / DPDK client, DPDK server / ours
//! client) and with DPDK's zero-copy client: txonly on one side, rxonly on the
//! other, then the other way, every packet sent received; `io` forwarding through a
//! chain DPDK -> ours -> DPDK carries a pcap of 1000 frames of every size unchanged;
//! a peer killed mid-run takes the link down, and when it comes back the link comes
//! up and traffic resumes (our client reconnecting to a restarted DPDK server), every
//! mbuf back in its pool at the end; DPDK's zero-copy client (unsealable hugepage
//! regions) is refused by default and served with `require-sealed=no`. A socket is
//! its owner's: a client run as `nobody` gets no HELLO while root's connects
//! (`allow-uid=` admits it), a path socket is created 0600, and our client leaves a
//! server run by `nobody`. Sockets are in the abstract namespace, named per test and
//! process; DPDK runs with its own file prefix, without hugepages (except its
//! zero-copy client, in memory).

mod common;

use common::*;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// DPDK's testpmd with ports `vdevs`; `zero_copy` runs it in hugepage memory with
/// single-file segments (what its zero-copy memif needs).
fn dpdk(tag: &str, vdevs: &[String], mode: &str, other_core: bool, zero_copy: bool) -> Interactive {
    // Line-buffered: DPDK prints with stdio, which holds a pipe's output back.
    let mut a = strings(&["-oL", "dpdk-testpmd", "-l", "0-1", "-n", "1", "--no-pci", "--log-level=pmd.net.memif:info"]);
    if other_core {
        a.extend(strings(&["--main-lcore", "1"]));
    }
    if zero_copy {
        a.extend(strings(&["--in-memory", "--single-file-segments", "-m", "256"]));
    } else {
        a.extend(strings(&["--no-huge", "-m", "512", "--file-prefix", &format!("ipm-{tag}-{}", std::process::id())]));
    }
    for v in vdevs {
        a.extend(["--vdev".to_string(), v.clone()]);
    }
    // --no-flush-rx: `start` must not drain a pcap port's file before forwarding.
    a.extend(strings(&["--", "-i", "--no-flush-rx", "--total-num-mbufs=8192", &format!("--forward-mode={mode}")]));
    Interactive::spawn("stdbuf", &a)
}

const DPDK_UP: &str = "memif_connect(): Connected.";
const OURS_UP: &str = "connected to";

#[test]
fn ours_server_with_dpdk_client_both_ways_root() {
    if !ready(&["dpdk-testpmd"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = memif_sock("osdc");
    let mut o = our_testpmd(&[format!("net_memif0,role=server,socket={s},id=1")], "rxonly", false);
    let mut d = dpdk("osdc", &[format!("net_memif0,role=client,socket={s},id=1")], "txonly", true, false);
    assert!(d.wait_for(DPDK_UP, 1, 15) && o.wait_for(OURS_UP, 1, 5), "{}\n{}", d.output(), o.output());
    assert!(o.output().contains("(DPDK 22.11"), "the client's name is logged: {}", o.output());
    both_ways(&mut d, &mut o, "DPDK client and our server");
    no_panic(&d.quit());
    assert!(o.wait_for("link down", 1, 10), "{}", o.output());
    no_panic(&o.quit());
}

#[test]
fn dpdk_server_with_ours_client_both_ways_root() {
    if !ready(&["dpdk-testpmd"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = memif_sock("dsoc");
    let mut d = dpdk("dsoc", &[format!("net_memif0,role=server,socket={s},id=4")], "rxonly", false, false);
    assert!(d.wait_for("testpmd>", 1, 15), "{}", d.output());
    let mut o = our_testpmd(&[format!("net_memif0,role=client,socket={s},id=4")], "txonly", true);
    assert!(d.wait_for(DPDK_UP, 1, 15) && o.wait_for(OURS_UP, 1, 5), "{}\n{}", d.output(), o.output());
    both_ways(&mut o, &mut d, "our client and DPDK's server");
    no_panic(&o.quit());
    assert!(d.wait_for("Disconnect received: Device stopped", 1, 10), "{}", d.output());
    no_panic(&d.quit());
}

/// Hugepages for DPDK's zero-copy client, put back as they were on drop.
struct Hugepages(String);

impl Hugepages {
    fn at_least(n: u64) -> Hugepages {
        let p = "/proc/sys/vm/nr_hugepages";
        let was = std::fs::read_to_string(p).unwrap_or_default().trim().to_string();
        if was.parse::<u64>().unwrap_or(0) < n {
            let _ = std::fs::write(p, n.to_string());
        }
        Hugepages(was)
    }
}

impl Drop for Hugepages {
    fn drop(&mut self) {
        let _ = std::fs::write("/proc/sys/vm/nr_hugepages", &self.0);
    }
}

#[test]
fn ours_server_with_dpdks_zero_copy_client_both_ways_root() {
    if !ready(&["dpdk-testpmd"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let _hp = Hugepages::at_least(160);
    let s = memif_sock("zc");
    let o = our_testpmd(&[format!("net_memif0,role=server,socket={s},id=0")], "rxonly", false);
    let d = dpdk("zc", &[format!("net_memif0,role=client,socket={s},id=0,zero-copy=yes")], "txonly", true, true);
    assert!(
        d.wait_for("Region not sealed against shrinking", 1, 15),
        "refused by default (require-sealed=yes)\n{}\n{}",
        d.output(),
        o.output()
    );
    no_panic(&d.quit());
    no_panic(&o.quit());
    let mut o = our_testpmd(&[format!("net_memif0,role=server,socket={s},id=0,require-sealed=no")], "rxonly", false);
    let mut d = dpdk("zc", &[format!("net_memif0,role=client,socket={s},id=0,zero-copy=yes")], "txonly", true, true);
    assert!(d.wait_for(DPDK_UP, 1, 15) && o.wait_for(OURS_UP, 1, 5), "{}\n{}", d.output(), o.output());
    both_ways(&mut d, &mut o, "DPDK's zero-copy client and our server");
    // The client exposed its hugepage memory as regions beyond region 0.
    let x = o.ask("show port xstats 0", "tx_ring_full");
    assert_eq!((xstat_of(&x, "rx_bad_desc"), xstat_of(&x, "tx_bad_desc")), (0, 0), "{x}");
    // Its hugepage regions cannot be sealed: accepted with require-sealed=no, counted.
    assert!(xstat_of(&x, "unsealed_regions") >= 1, "{x}");
    no_panic(&d.quit());
    no_panic(&o.quit());
}

#[test]
fn io_forwarding_through_dpdk_ours_dpdk_keeps_every_payload_root() {
    if !ready(&["dpdk-testpmd"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("memif-chain");
    let (a, b) = (memif_sock("chain-a"), memif_sock("chain-b"));
    // 1000 frames, 60 to 1514 bytes, each payload distinct.
    let frames: Vec<Vec<u8>> = (0..1000u32)
        .map(|i| {
            let len = 60 + (i as usize * 37) % 1455;
            let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x88, 0xb5];
            f.extend((0..len - 14).map(|j| (i as usize * 7 + j) as u8));
            f[14..18].copy_from_slice(&i.to_be_bytes());
            f
        })
        .collect();
    let (inp, out, empty, back) =
        (dir.0.join("in.pcap"), dir.0.join("out.pcap"), dir.0.join("empty.pcap"), dir.0.join("back.pcap"));
    write_pcap(&inp, &frames);
    write_pcap(&empty, &[]);
    let mut o = our_testpmd(
        &[format!("net_memif0,role=server,socket={a}"), format!("net_memif1,role=server,socket={b}")],
        "io",
        false,
    );
    let mut dst = dpdk(
        "chain-dst",
        &[
            format!("net_memif0,role=client,socket={b}"),
            format!("net_pcap0,rx_pcap={},tx_pcap={}", empty.display(), out.display()),
        ],
        "io",
        true,
        false,
    );
    assert!(dst.wait_for(DPDK_UP, 1, 15), "{}", dst.output());
    let mut src = dpdk(
        "chain-src",
        &[
            format!("net_pcap0,rx_pcap={},tx_pcap={}", inp.display(), back.display()),
            format!("net_memif0,role=client,socket={a}"),
        ],
        "io",
        true,
        false,
    );
    assert!(src.wait_for(DPDK_UP, 1, 15) && o.wait_for(OURS_UP, 2, 5), "{}\n{}", src.output(), o.output());
    o.ask("start", "testpmd>");
    dst.ask("start", "testpmd>");
    src.ask("start", "testpmd>");
    let t = std::time::Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        let s = o.ask("show port stats 1", "Tx-bps");
        if nic_stat(&s, "TX-packets:") >= 1000 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(300));
    let ostats = o.ask("show port stats all", "Tx-bps");
    let (so, d, oo) = (src.quit(), dst.quit(), o.quit());
    for x in [&so, &d, &oo] {
        no_panic(x);
    }
    let got = read_pcap(&out);
    assert_eq!(got.len(), frames.len(), "every frame arrived\nours:\n{ostats}\n{oo}\nsource:\n{so}\ndestination:\n{d}");
    for (i, (g, f)) in got.iter().zip(&frames).enumerate() {
        assert_eq!(g, f, "frame {i} differs");
    }
}

#[test]
fn a_killed_peer_takes_the_link_down_and_its_return_brings_it_back_root() {
    if !ready(&["dpdk-testpmd"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // Our server; DPDK's client is killed and started again.
    let s = memif_sock("kc");
    let mut o = our_testpmd(&[format!("net_memif0,role=server,socket={s}")], "rxonly", false);
    let base = pool_in_use(&o.ask("show mempool", "get_fails"));
    o.ask("start", "testpmd>");
    let client = || {
        let mut d = dpdk("kc", &[format!("net_memif0,role=client,socket={s}")], "txonly", true, false);
        assert!(d.wait_for(DPDK_UP, 1, 15), "{}", d.output());
        d.ask("start", "testpmd>");
        d
    };
    let mut d = client();
    assert!(o.wait_for(OURS_UP, 1, 5));
    std::thread::sleep(Duration::from_millis(800));
    d.kill();
    assert!(o.wait_for("link down", 1, 10), "{}", o.output());
    let info = o.ask("show port info 0", "Link status");
    assert!(info.contains("Link status: down"), "{info}");
    let before = nic_stat(&o.ask("show port stats 0", "Tx-bps"), "RX-packets:");
    assert!(before > 10_000, "traffic before the kill: {before}");
    let d = client();
    assert!(o.wait_for(OURS_UP, 2, 10), "{}", o.output());
    std::thread::sleep(Duration::from_millis(800));
    let after = nic_stat(&o.ask("show port stats 0", "Tx-bps"), "RX-packets:");
    assert!(after > before + 10_000, "traffic resumed: {before} -> {after}");
    no_panic(&d.quit());
    assert!(o.wait_for("link down", 2, 10), "{}", o.output());
    o.ask("stop", "Done");
    assert_eq!(pool_in_use(&o.ask("show mempool", "get_fails")), base, "every mbuf back");
    let x = o.ask("show port xstats 0", "tx_ring_full");
    assert_eq!((xstat_of(&x, "connects"), xstat_of(&x, "disconnects")), (2, 2), "{x}");
    no_panic(&o.quit());

    // DPDK's server is killed and started again: our client reconnects by itself.
    let s = memif_sock("ks");
    let server = || {
        let mut d = dpdk("ks", &[format!("net_memif0,role=server,socket={s}")], "rxonly", false, false);
        assert!(d.wait_for("testpmd>", 1, 15), "{}", d.output());
        d.ask("start", "testpmd>");
        d
    };
    let mut d = server();
    let mut o = our_testpmd(&[format!("net_memif0,role=client,socket={s}")], "txonly", true);
    let base = pool_in_use(&o.ask("show mempool", "get_fails"));
    assert!(o.wait_for(OURS_UP, 1, 10), "{}", o.output());
    o.ask("start", "testpmd>");
    std::thread::sleep(Duration::from_millis(500));
    d.kill();
    assert!(o.wait_for("link down, reconnecting", 1, 10), "{}", o.output());
    let mut d = server();
    assert!(o.wait_for(OURS_UP, 2, 10), "{}", o.output());
    std::thread::sleep(Duration::from_millis(800));
    let r = d.ask("show port stats 0", "Tx-bps");
    assert!(nic_stat(&r, "RX-packets:") > 10_000, "the restarted server receives\n{r}");
    o.ask("stop", "Done");
    assert_eq!(pool_in_use(&o.ask("show mempool", "get_fails")), base, "every mbuf back");
    let x = o.ask("show port xstats 0", "tx_ring_full");
    assert_eq!(xstat_of(&x, "connects"), 2, "{x}");
    no_panic(&o.quit());
    no_panic(&d.quit());
}

#[test]
fn the_memif_bridge_pipeline_carries_a_kernel_ping_to_dpdks_icmpecho_root() {
    if !ready(&["dpdk-testpmd"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let v = Veth::new("mb", 61);
    let s = memif_sock("bridge");
    let mut run = Run::start(
        &config("memif-bridge.yaml"),
        &[("IRONPATH_IFACE", v.port.clone()), ("IRONPATH_MEMIF_SOCKET", s.clone())],
        "memif-bridge",
    );
    let mut d = dpdk("bridge", &[format!("net_memif0,role=client,socket={s}")], "icmpecho", true, false);
    assert!(d.wait_for(DPDK_UP, 1, 15), "{}", d.output());
    d.ask("start", "testpmd>");
    let answered = pings_answered(&v);
    let dout = d.quit();
    let out = run.stop();
    no_panic(&out);
    assert_eq!(answered, 5, "ping through memif to DPDK's icmpecho\nironpath:\n{out}\nDPDK:\n{dout}");
    assert!(out.contains("connected to net_memif0 (DPDK 22.11"), "{out}");
}

/// The hostile peer (`tools/memif_peer.py`) run as user and group `uid`, from a copy
/// any user can read: (whether every check held, its output).
fn peer_as(uid: u32, dir: &TempDir, args: &[&str]) -> (bool, String) {
    let tool = dir.0.join("memif_peer.py");
    if !tool.exists() {
        std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tools/memif_peer.py"), &tool).unwrap();
    }
    let id = uid.to_string();
    let o = std::process::Command::new("timeout")
        .args(["30", "setpriv", &format!("--reuid={id}"), &format!("--regid={id}"), "--clear-groups"])
        .args(["/usr/bin/python3", tool.to_str().unwrap()])
        .args(args)
        .output()
        .expect("setpriv");
    (o.status.success(), text(&o))
}

const NOBODY: u32 = 65534;

#[test]
fn a_memif_socket_admits_its_owner_and_root_only_root() {
    if !ready(&["setpriv"]) || !Path::new("/usr/bin/python3").exists() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("memif-owner");
    // An abstract socket has no file to guard it: credentials decide.
    let s = memif_sock("owner");
    let mut o = our_testpmd(&[format!("net_memif0,role=server,socket={s}")], "io", false);
    o.ask("start", "testpmd>");
    std::thread::sleep(Duration::from_millis(300));
    let (ok, out) = peer_as(NOBODY, &dir, &["client", &format!("@{s}"), "0", "not-owner"]);
    assert!(ok, "{out}\n{}", o.output());
    assert!(o.wait_for(&format!("refused a connection from uid {NOBODY}"), 1, 5), "{}", o.output());
    // The owner (root, as this test) connects.
    let (ok, out) = peer_as(0, &dir, &["client", &format!("@{s}"), "0", "kick"]);
    assert!(ok, "{out}\n{}", o.output());
    let x = o.ask("show port xstats 0", "tx_ring_full");
    assert_eq!((xstat_of(&x, "refused_users"), xstat_of(&x, "connects")), (1, 1), "{x}");
    no_panic(&o.quit());

    // allow-uid admits one more user.
    let s = memif_sock("allow");
    let mut o = our_testpmd(&[format!("net_memif0,role=server,socket={s},allow-uid={NOBODY}")], "io", false);
    o.ask("start", "testpmd>");
    std::thread::sleep(Duration::from_millis(300));
    let (ok, out) = peer_as(NOBODY, &dir, &["client", &format!("@{s}"), "0", "kick"]);
    assert!(ok, "allow-uid={NOBODY}: {out}\n{}", o.output());
    no_panic(&o.quit());

    // A path socket is created 0600: the file refuses other users before we must.
    let path = dir.0.join("m.sock");
    let p = path.display().to_string();
    let mut o = our_testpmd(&[format!("net_memif0,role=server,socket={p},socket-abstract=no")], "io", false);
    o.ask("start", "testpmd>");
    std::thread::sleep(Duration::from_millis(300));
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&path).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
    assert_eq!(mode, 0o600, "socket file mode {mode:o}");
    let (ok, out) = peer_as(NOBODY, &dir, &["client", &p, "0", "not-owner"]);
    assert!(ok && out.contains("EACCES"), "{out}\n{}", o.output());
    let (ok, out) = peer_as(0, &dir, &["client", &p, "0", "kick"]);
    assert!(ok, "{out}\n{}", o.output());
    no_panic(&o.quit());

    // Our client leaves a server run by another user without INIT (a squatter of the
    // name would otherwise get our traffic and memory).
    let s = memif_sock("squat");
    let at = format!("@{s}");
    let d2 = TempDir::new("memif-squat");
    let squat = std::thread::spawn(move || peer_as(NOBODY, &d2, &["server", &at, "squat"]));
    std::thread::sleep(Duration::from_millis(500));
    let c = our_testpmd(&[format!("net_memif0,role=client,socket={s}")], "rxonly", true);
    let (ok, out) = squat.join().unwrap();
    assert!(ok, "{out}\n{}", c.output());
    assert!(c.wait_for(&format!("runs as uid {NOBODY}"), 1, 5), "{}", c.output());
    no_panic(&c.quit());
}
