//! Needs root and DPDK 22.11's `dpdk-testpmd` (Debian `dpdk`): our net_vhost against
//! DPDK's virtio-user (`net_virtio_user`), both ways round (ours the server and DPDK's
//! virtio-user the client; DPDK's `server=1` and ours the client): txonly on one
//! side, rxonly on the other, then the other way, every packet sent received; `io`
//! forwarding on both sides carries a pcap of 1000 frames of every size to us and
//! back unchanged; a front end killed mid-run takes the link down and its return
//! brings it back (our client reconnecting to a restarted DPDK server by itself),
//! every mbuf back in its pool at the end; two queue pairs both carry traffic.
//! DPDK's memory cannot be sealed against
//! shrinking: refused by default, accepted with `require-sealed=no`. DPDK runs
//! without hugepages, with its own file prefix; sockets are files in a directory of
//! the test's.

mod common;

use common::*;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// DPDK's testpmd with ports `vdevs`, forwarding on lcore 0 (1 with `other_core`).
fn dpdk(tag: &str, vdevs: &[String], mode: &str, other_core: bool) -> Interactive {
    let mut a = strings(&["-oL", "dpdk-testpmd", "-l", "0-1", "-n", "1", "--no-pci", "--no-huge", "-m", "512"]);
    a.extend(["--file-prefix".to_string(), format!("ipv-{tag}-{}", std::process::id())]);
    if other_core {
        a.extend(strings(&["--main-lcore", "1"]));
    }
    for v in vdevs {
        a.extend(["--vdev".to_string(), v.clone()]);
    }
    a.extend(strings(&["--", "-i", "--no-flush-rx", "--total-num-mbufs=8192", &format!("--forward-mode={mode}")]));
    Interactive::spawn("stdbuf", &a)
}

const OURS_UP: &str = "queue pair 0 ready: link up";
const OURS_GONE: &str = "front end gone: link down";

#[test]
fn ours_server_with_dpdks_virtio_user_both_ways_root() {
    if !ready(&["dpdk-testpmd"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("vhost-osdc");
    let s = dir.0.join("v.sock").display().to_string();
    let mut o = our_testpmd(&[format!("net_vhost0,iface={s},require-sealed=no")], "rxonly", false);
    let base = pool_in_use(&o.ask("show mempool", "get_fails"));
    let mut d = dpdk("osdc", &[format!("net_virtio_user0,path={s},queues=1")], "txonly", true);
    assert!(d.wait_for("testpmd>", 1, 15) && o.wait_for(OURS_UP, 1, 10), "{}\n{}", d.output(), o.output());
    both_ways(&mut d, &mut o, "DPDK's virtio-user and our vhost server");
    no_panic(&d.quit());
    assert!(o.wait_for(OURS_GONE, 1, 10), "{}", o.output());
    assert_eq!(pool_in_use(&o.ask("show mempool", "get_fails")), base, "every mbuf back");
    no_panic(&o.quit());
}

/// Two queue pairs (`queues=2`, `VHOST_USER_PROTOCOL_F_MQ`): DPDK's virtio-user
/// enables both through its control queue and spreads its flows; each of our RX
/// queues receives, and every packet sent is received.
#[test]
fn two_queue_pairs_with_dpdks_virtio_user_root() {
    if !ready(&["dpdk-testpmd"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("vhost-mq");
    let s = dir.0.join("v.sock").display().to_string();
    let mut o = our_testpmd_with(
        &[format!("net_vhost0,iface={s},queues=2,require-sealed=no")],
        "rxonly",
        false,
        &["--rxq=2", "--txq=2"],
    );
    let mut a = strings(&["-oL", "dpdk-testpmd", "-l", "0-1", "-n", "1", "--no-pci", "--no-huge", "-m", "512"]);
    a.extend([
        "--file-prefix".to_string(),
        format!("ipv-mq-{}", std::process::id()),
        "--main-lcore".into(),
        "1".into(),
    ]);
    a.extend(["--vdev".to_string(), format!("net_virtio_user0,path={s},queues=2")]);
    a.extend(strings(&["--", "-i", "--total-num-mbufs=8192", "--forward-mode=txonly", "--rxq=2", "--txq=2"]));
    a.push("--txonly-multi-flow".into());
    let mut d = Interactive::spawn("stdbuf", &a);
    assert!(d.wait_for("testpmd>", 1, 15) && o.wait_for(OURS_UP, 1, 10), "{}\n{}", d.output(), o.output());
    let (sent, got) = burst_of_traffic(&mut d, &mut o, 1500);
    assert!(sent > 10_000 && sent == got, "sent {sent}, received {got}\n{}", o.output());
    let x = o.ask("show port xstats 0", "tx_busy");
    assert!(xstat_of(&x, "rx_q0_packets") > 1000 && xstat_of(&x, "rx_q1_packets") > 1000, "both queues: {x}");
    no_panic(&d.quit());
    no_panic(&o.quit());
}

/// DPDK's memory (a memfd made without sealing, or hugetlbfs) could be cut under
/// us: refused by default, with the reason in the log and the link down.
#[test]
fn dpdks_unsealable_memory_is_refused_by_default_root() {
    if !ready(&["dpdk-testpmd"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("vhost-seal");
    let s = dir.0.join("v.sock").display().to_string();
    let mut o = our_testpmd(&[format!("net_vhost0,iface={s}")], "rxonly", false);
    let d = dpdk("seal", &[format!("net_virtio_user0,path={s},queues=1")], "txonly", true);
    assert!(
        o.wait_for("memory table refused: region 0: its file is not sealed against shrinking", 1, 15),
        "{}\n{}",
        o.output(),
        d.output()
    );
    let info = o.ask("show port info 0", "Link status");
    assert!(info.contains("Link status: down"), "{info}");
    no_panic(&d.quit());
    no_panic(&o.quit());
}

#[test]
fn dpdks_virtio_user_server_with_ours_client_both_ways_root() {
    if !ready(&["dpdk-testpmd"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("vhost-dsoc");
    let s = dir.0.join("v.sock").display().to_string();
    // DPDK's virtio-user server waits for its back end inside its probe.
    let mut d = dpdk("dsoc", &[format!("net_virtio_user0,path={s},server=1,queues=1")], "rxonly", false);
    let t = std::time::Instant::now();
    while !Path::new(&s).exists() {
        assert!(t.elapsed() < Duration::from_secs(15), "no socket from DPDK\n{}", d.output());
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut o = our_testpmd(&[format!("net_vhost0,iface={s},client=1,require-sealed=no")], "txonly", true);
    assert!(d.wait_for("testpmd>", 1, 15) && o.wait_for(OURS_UP, 1, 10), "{}\n{}", d.output(), o.output());
    both_ways(&mut o, &mut d, "our vhost client and DPDK's virtio-user server");
    no_panic(&o.quit());
    no_panic(&d.quit());
}

#[test]
fn io_forwarding_on_both_sides_brings_every_frame_back_unchanged_root() {
    if !ready(&["dpdk-testpmd"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("vhost-io");
    let s = dir.0.join("v.sock").display().to_string();
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
    let (inp, back) = (dir.0.join("in.pcap"), dir.0.join("back.pcap"));
    write_pcap(&inp, &frames);
    // Ours reflects what arrives on its one port back out of it.
    let mut o = our_testpmd(&[format!("net_vhost0,iface={s},require-sealed=no")], "io", false);
    let base = pool_in_use(&o.ask("show mempool", "get_fails"));
    o.ask("start", "testpmd>");
    let mut d = dpdk(
        "io",
        &[
            format!("net_pcap0,rx_pcap={},tx_pcap={}", inp.display(), back.display()),
            // Rings that hold the whole pcap: DPDK's io engine drops what a full ring
            // refuses, and the pcap comes at once.
            format!("net_virtio_user0,path={s},queues=1,queue_size=1024"),
        ],
        "io",
        true,
    );
    assert!(d.wait_for("testpmd>", 1, 15) && o.wait_for(OURS_UP, 1, 10), "{}\n{}", d.output(), o.output());
    // A TX burst a full ring refuses is retried (DPDK's io engine drops it otherwise),
    // for up to 100 ms: ours sleeps until the guest's kick wakes it (rx mode adaptive),
    // which on a loaded machine takes longer than DPDK's default 64 retries of 1 us.
    d.ask("set fwd io retry", "testpmd>");
    d.ask("set burst tx delay 100 retry 1000", "testpmd>");
    d.ask("start", "testpmd>");
    let t = std::time::Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        let st = o.ask("show port stats 0", "Tx-bps");
        if nic_stat(&st, "TX-packets:") >= 1000 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(500));
    let st = o.ask("show port stats 0", "Tx-bps");
    let dq = d.quit();
    no_panic(&dq);
    let x = o.ask("show port xstats 0", "tx_busy");
    assert_eq!((nic_stat(&st, "RX-packets:"), nic_stat(&st, "TX-packets:")), (1000, 1000), "{st}\n{x}\n{dq}");
    let got = read_pcap(&back);
    assert_eq!(got.len(), frames.len(), "every frame came back\n{st}\n{dq}");
    for (i, (g, f)) in got.iter().zip(&frames).enumerate() {
        assert_eq!(g, f, "frame {i} differs");
    }
    assert!(o.wait_for(OURS_GONE, 1, 10), "{}", o.output());
    // Idle between the frames (rx mode adaptive, the default), our lcore slept on
    // the port's wake-up source: DPDK's kicks woke it.
    let stop = o.ask("stop", "Done");
    let sleeps = stop.split("Rx mode adaptive: ").nth(1).and_then(|r| r.split_whitespace().next()?.parse::<u64>().ok());
    assert!(sleeps.is_some_and(|n| n > 0), "our lcore never slept:\n{stop}");
    assert_eq!(pool_in_use(&o.ask("show mempool", "get_fails")), base, "every mbuf back");
    no_panic(&o.quit());
}

#[test]
fn a_killed_front_end_takes_the_link_down_and_its_return_brings_it_back_root() {
    if !ready(&["dpdk-testpmd"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("vhost-kill");
    // Our server; DPDK's virtio-user client is killed and started again.
    let s = dir.0.join("a.sock").display().to_string();
    let mut o = our_testpmd(&[format!("net_vhost0,iface={s},require-sealed=no")], "rxonly", false);
    let base = pool_in_use(&o.ask("show mempool", "get_fails"));
    o.ask("start", "testpmd>");
    let client = || {
        let mut d = dpdk("kc", &[format!("net_virtio_user0,path={s},queues=1")], "txonly", true);
        assert!(d.wait_for("testpmd>", 1, 15), "{}", d.output());
        d.ask("start", "testpmd>");
        d
    };
    let mut d = client();
    assert!(o.wait_for(OURS_UP, 1, 10), "{}", o.output());
    std::thread::sleep(Duration::from_millis(800));
    d.kill();
    assert!(o.wait_for(OURS_GONE, 1, 10), "{}", o.output());
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
    assert!(o.wait_for(OURS_GONE, 2, 10), "{}", o.output());
    o.ask("stop", "Done");
    assert_eq!(pool_in_use(&o.ask("show mempool", "get_fails")), base, "every mbuf back");
    let x = o.ask("show port xstats 0", "tx_busy");
    assert_eq!((xstat_of(&x, "connects"), xstat_of(&x, "disconnects")), (2, 2), "{x}");
    assert_eq!(xstat_of(&x, "protocol_errors"), 0, "{x}");
    no_panic(&o.quit());

    // DPDK's virtio-user server is killed and started again: our client reconnects.
    let s = dir.0.join("b.sock").display().to_string();
    let server = || {
        let _ = std::fs::remove_file(&s);
        let d = dpdk("ks", &[format!("net_virtio_user0,path={s},server=1,queues=1")], "rxonly", false);
        let t = std::time::Instant::now();
        while !Path::new(&s).exists() {
            assert!(t.elapsed() < Duration::from_secs(15), "no socket from DPDK\n{}", d.output());
            std::thread::sleep(Duration::from_millis(50));
        }
        d
    };
    let mut d = server();
    let mut o = our_testpmd(&[format!("net_vhost0,iface={s},client=1,require-sealed=no")], "txonly", true);
    let base = pool_in_use(&o.ask("show mempool", "get_fails"));
    assert!(d.wait_for("testpmd>", 1, 15) && o.wait_for(OURS_UP, 1, 10), "{}\n{}", d.output(), o.output());
    d.ask("start", "testpmd>");
    o.ask("start", "testpmd>");
    std::thread::sleep(Duration::from_millis(500));
    d.kill();
    assert!(o.wait_for("front end gone: link down, reconnecting", 1, 10), "{}", o.output());
    let mut d = server();
    assert!(d.wait_for("testpmd>", 1, 15) && o.wait_for(OURS_UP, 2, 10), "{}\n{}", d.output(), o.output());
    d.ask("start", "testpmd>");
    std::thread::sleep(Duration::from_millis(800));
    let r = d.ask("show port stats 0", "Tx-bps");
    assert!(nic_stat(&r, "RX-packets:") > 10_000, "the restarted server receives\n{r}");
    o.ask("stop", "Done");
    assert_eq!(pool_in_use(&o.ask("show mempool", "get_fails")), base, "every mbuf back");
    let x = o.ask("show port xstats 0", "tx_busy");
    assert_eq!(xstat_of(&x, "connects"), 2, "{x}");
    no_panic(&o.quit());
    no_panic(&d.quit());
}
