//! net_memif between processes, no root needed: two ironpath testpmds pass traffic
//! both ways over one memif connection (every packet sent is received, the mbufs all
//! come back, the server's link follows the client), and a hand-written hostile peer
//! (`tools/memif_peer.py`) as client and as server: each bad handshake is refused
//! with its reason, bad descriptors and ring indexes are counted and dropped, and
//! valid traffic keeps flowing around them; regions that could shrink are refused,
//! a sealed one cannot be truncated; a pipe is refused as an interrupt descriptor; a
//! peer whose interrupt eventfd would block any write (blocking, counter at its
//! maximum) is signalled while the lcore keeps walking another port; one that
//! signals our ring again and again with nothing in it is set aside and still
//! served; a server's secret keeps out clients without it; two `ironpath run`s in
//! rx mode `interrupt` (a paced source and a reflector) sleep and are woken by memif
//! traffic, nothing lost, the reflector woken by its memif queue alone, also after
//! its peer restarts. Sockets are in the abstract namespace, named per test and
//! process.

mod common;

use common::*;
use std::sync::Mutex;
use std::time::Duration;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Our testpmd with one memif port (`args` after the driver name).
fn ours(args: &str, mode: &str, other_core: bool) -> Interactive {
    our_testpmd(&[format!("net_memif0,{args}")], mode, other_core)
}

#[test]
fn two_ironpath_processes_pass_traffic_both_ways_over_memif() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = memif_sock("pair");
    let mut server = ours(&format!("role=server,socket={s},id=5"), "rxonly", false);
    let mut client = ours(&format!("role=client,socket={s},id=5,rsize=9,bsize=1024"), "txonly", true);
    assert!(server.wait_for("connected to net_memif0", 1, 10), "{}", server.output());
    assert!(client.wait_for("connected to net_memif0", 1, 10), "{}", client.output());
    let base =
        (pool_in_use(&server.ask("show mempool", "get_fails")), pool_in_use(&client.ask("show mempool", "get_fails")));
    let (sent, got) = burst_of_traffic(&mut client, &mut server, 1500);
    assert!(sent > 10_000, "client to server: {sent} sent\n{}", client.output());
    assert_eq!(sent, got, "client to server: every packet sent is received");
    // The other way on the same connection.
    server.send("set fwd txonly");
    client.send("set fwd rxonly");
    let (sent, got) = burst_of_traffic(&mut server, &mut client, 1500);
    assert!(sent > 10_000, "server to client: {sent} sent\n{}", server.output());
    assert_eq!(sent, got, "server to client: every packet sent is received");
    // Frames of 1500 bytes span two 1024-byte buffers (chained descriptors).
    server.send("set txpkts 1500");
    let (sent, got) = burst_of_traffic(&mut server, &mut client, 500);
    assert!(sent > 1_000 && sent == got, "1500-byte frames: {sent} sent, {got} received");
    let c = client.ask("show port stats 0", "Tx-bps");
    assert!(nic_stat(&c, "RX-bytes:") >= 1500 * got, "{c}");
    let after =
        (pool_in_use(&server.ask("show mempool", "get_fails")), pool_in_use(&client.ask("show mempool", "get_fails")));
    assert_eq!(after, base, "every mbuf back in its pool");
    let x = client.ask("show port xstats 0", "tx_ring_full");
    assert_eq!((xstat_of(&x, "rx_bad_desc"), xstat_of(&x, "rx_bad_ring_index")), (0, 0), "{x}");
    // Each receiver sleeps while idle (testpmd's rx mode `adaptive`, the default)
    // and so asks for interrupts: the sender's first bursts signal it, and the
    // receiver's control thread wakes its queue.
    let y = server.ask("show port xstats 0", "tx_ring_full");
    for (who, v) in [("client", &x), ("server", &y)] {
        assert!(xstat_of(v, "interrupts_sent") >= 1 && xstat_of(v, "rx_wakeups") >= 1, "{who}:\n{v}");
        assert_eq!(xstat_of(v, "interrupts_failed"), 0, "{who}:\n{v}");
    }
    // The client leaves: the server's link goes down, saying why.
    let out = client.quit();
    assert!(!out.contains("panicked"), "{out}");
    assert!(server.wait_for("the client disconnected: Device stopped", 1, 10), "{}", server.output());
    let info = server.ask("show port info 0", "Link status");
    assert!(info.contains("Link status: down"), "{info}");
    let x = server.ask("show port xstats 0", "tx_ring_full");
    assert_eq!((xstat_of(&x, "connects"), xstat_of(&x, "disconnects"), xstat_of(&x, "connected")), (1, 1, 0), "{x}");
    let out = server.quit();
    assert!(!out.contains("panicked"), "{out}");
}

fn peer(args: &[&str]) -> (bool, String) {
    let tool = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tools/memif_peer.py");
    let o =
        std::process::Command::new("timeout").arg("30").arg("python3").arg(tool).args(args).output().expect("python3");
    (o.status.success(), text(&o))
}

#[test]
fn a_hostile_memif_client_is_refused_or_counted_and_never_trusted() {
    if !tools_ready(&["python3"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = memif_sock("hostile");
    let at = format!("@{s}");
    let mut server = ours(&format!("role=server,socket={s},id=2"), "io", false);
    server.ask("start", "testpmd>");
    std::thread::sleep(Duration::from_millis(300));
    // Regions that could shrink under us are refused by default (require-sealed=yes);
    // one the server sealed cannot be truncated; a pipe is no interrupt fd; a ring
    // that asks for interrupts is signalled.
    for scenario in [
        "big-region",
        "no-fd",
        "ring-outside",
        "bad-cookie",
        "short",
        "unknown",
        "data",
        "stall",
        "unsealable",
        "seal-locked",
        "truncate",
        "pipe-kick",
        "kick",
        "spam",
    ] {
        let (ok, out) = peer(&["client", &at, "2", scenario]);
        assert!(ok, "scenario {scenario}:\n{out}\nserver:\n{}", server.output());
    }
    // A client for an id the socket does not serve.
    let stranger = ours(&format!("role=client,socket={s},id=3"), "rxonly", true);
    assert!(stranger.wait_for("the server refused us: ID not found", 1, 10), "{}", stranger.output());
    drop(stranger);
    // After all that, an honest client connects and traffic flows.
    let mut client = ours(&format!("role=client,socket={s},id=2"), "txonly", true);
    assert!(client.wait_for("connected to", 1, 10), "{}", client.output());
    client.ask("start", "testpmd>");
    std::thread::sleep(Duration::from_millis(300));
    client.ask("stop", "Done");
    let c = client.ask("show port stats 0", "Tx-bps");
    assert!(nic_stat(&c, "TX-packets:") > 1000, "{c}");
    drop(client);
    let x = server.ask("show port xstats 0", "tx_ring_full");
    let out = server.quit();
    assert!(!out.contains("panicked"), "{out}");
    for reason in [
        "Region larger than its file",
        "Missing region fd",
        "Ring outside its region",
        "Wrong ring cookie",
        "Invalid message size",
        "Unknown message type",
        "Too many connections waiting",
        "Region not sealed against shrinking",
        "Interrupt fd not an eventfd",
    ] {
        assert!(out.contains(reason), "the server logs \"{reason}\":\n{out}");
    }
    // The hostile client's memfd allowed sealing: the server sealed it itself; the
    // unsealable ones were refused, not accepted.
    assert_eq!(xstat_of(&x, "unsealed_regions"), 0, "{x}");
    assert_eq!(xstat_of(&x, "bad_interrupt_fds"), 1, "{x}");
    assert!(xstat_of(&x, "interrupts_sent") >= 1, "{x}");
    assert_eq!(xstat_of(&x, "interrupts_failed"), 0, "{x}");
    // The lcore sleeps between the scenarios (rx mode adaptive): woken through the
    // relay; a client signalling for nothing is set aside, not relayed.
    assert!(xstat_of(&x, "rx_wakeups") >= 1, "{x}");
    assert!(xstat_of(&x, "rx_interrupts_throttled") >= 1, "{x}");
    assert_eq!(xstat_of(&x, "rx_bad_desc"), 26, "{x}");
    assert_eq!(xstat_of(&x, "tx_bad_desc"), 10, "{x}");
    assert!(xstat_of(&x, "rx_bad_ring_index") >= 1, "{x}");
    assert!(xstat_of(&x, "refused") >= 9, "{x}");
    assert_eq!(xstat_of(&x, "waiting_overflow"), 2, "{x}");
    assert!(xstat_of(&x, "handshake_timeouts") >= 4, "{x}");
}

/// `key` (`RX-packets:`) of port `port` now.
fn stat_now(t: &mut Interactive, port: u16, key: &str) -> u64 {
    nic_stat(&t.ask(&format!("show port stats {port}"), "Tx-bps"), key)
}

#[test]
fn a_peer_whose_interrupt_eventfd_would_block_does_not_stop_the_lcore() {
    if !tools_ready(&["python3"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = memif_sock("kick");
    // One forwarding lcore walks both ports: null0's packets go out on memif0 (whose
    // peer asks for interrupts on an eventfd that would block any write), memif0's
    // into null0.
    let mut t = our_testpmd(&[format!("net_memif0,role=server,socket={s}"), "net_null0".to_string()], "io", false);
    t.ask("start", "testpmd>");
    let at = format!("@{s}");
    let tool = std::thread::spawn(move || peer(&["client", &at, "0", "saturated-kick"]));
    assert!(t.wait_for("connected to hostile0", 1, 10), "{}", t.output());
    // While the peer is connected (3 s), the lcore keeps walking null0 as well.
    std::thread::sleep(Duration::from_millis(500));
    let a = stat_now(&mut t, 1, "RX-packets:");
    std::thread::sleep(Duration::from_millis(1000));
    let b = stat_now(&mut t, 1, "RX-packets:");
    let (ok, out) = tool.join().unwrap();
    assert!(ok, "{out}\ntestpmd:\n{}", t.output());
    assert!(b > a + 10_000, "the other port on the lcore stalled: {a} -> {b}\n{}", t.output());
    let x = t.ask("show port xstats 0", "tx_ring_full");
    assert!(xstat_of(&x, "interrupts_sent") >= 1, "{x}");
    assert_eq!(xstat_of(&x, "interrupts_failed"), 0, "{x}");
    t.ask("stop", "Done");
    let out = t.quit();
    assert!(!out.contains("panicked"), "{out}");
}

#[test]
fn a_memif_server_with_a_secret_refuses_clients_without_it() {
    if !tools_ready(&["python3"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = memif_sock("secret");
    let at = format!("@{s}");
    let mut server = ours(&format!("role=server,socket={s},id=3,secret=pw"), "rxonly", false);
    std::thread::sleep(Duration::from_millis(300));
    for scenario in ["no-secret", "wrong-secret"] {
        let (ok, out) = peer(&["client", &at, "3", scenario]);
        assert!(ok, "scenario {scenario}:\n{out}\nserver:\n{}", server.output());
    }
    let wrong = ours(&format!("role=client,socket={s},id=3,secret=px"), "rxonly", true);
    assert!(wrong.wait_for("the server refused us: Incorrect secret", 1, 10), "{}", wrong.output());
    drop(wrong);
    let none = ours(&format!("role=client,socket={s},id=3"), "rxonly", true);
    assert!(none.wait_for("the server refused us: Secret required", 1, 10), "{}", none.output());
    drop(none);
    assert!(!server.output().contains("connected to"), "{}", server.output());
    let right = ours(&format!("role=client,socket={s},id=3,secret=pw"), "rxonly", true);
    assert!(right.wait_for("connected to", 1, 10), "{}", right.output());
    assert!(server.wait_for("connected to", 1, 10), "{}", server.output());
    drop(right);
    let x = server.ask("show port xstats 0", "tx_ring_full");
    assert!(xstat_of(&x, "refused") >= 4, "{x}");
    assert_eq!(xstat_of(&x, "connects"), 1, "{x}");
    let out = server.quit();
    assert!(!out.contains("panicked"), "{out}");
    for reason in ["Secret required", "Incorrect secret"] {
        assert!(out.contains(&format!("refused a client: {reason}")), "{out}");
    }
}

#[test]
fn a_hostile_memif_server_is_counted_and_refused() {
    if !tools_ready(&["python3"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = memif_sock("hserver");
    let at = format!("@{s}");
    let tool = std::thread::spawn(move || peer(&["server", &at, "data"]));
    std::thread::sleep(Duration::from_millis(300));
    let mut client = ours(&format!("role=client,socket={s},rsize=8"), "rxonly", true);
    client.ask("start", "testpmd>");
    let (ok, out) = tool.join().unwrap();
    assert!(ok, "{out}\nclient:\n{}", client.output());
    assert!(client.wait_for("refused the server: Incompatible memif version", 1, 10), "{}", client.output());
    client.ask("stop", "Done");
    let c = client.ask("show port stats 0", "Tx-bps");
    let x = client.ask("show port xstats 0", "tx_ring_full");
    let out = client.quit();
    assert!(!out.contains("panicked"), "{out}");
    assert!(out.contains("the server disconnected: hostile server going"), "{out}");
    assert_eq!(nic_stat(&c, "RX-packets:"), 5, "the 5 good packets\n{c}");
    assert_eq!(xstat_of(&x, "rx_bad_desc"), 5, "{x}");
    assert!(xstat_of(&x, "rx_bad_ring_index") >= 1, "{x}");
    assert!(xstat_of(&x, "refused") >= 1 && xstat_of(&x, "peer_disconnects") >= 1, "{x}");
}

#[test]
fn a_killed_server_comes_back_and_the_client_reconnects_with_two_queue_pairs() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = memif_sock("restart");
    // Two queue pairs on both sides: the txonly side sends on both queues.
    let two = |args: String, mode: &str, other_core: bool| {
        our_testpmd_with(&[format!("net_memif0,{args}")], mode, other_core, &["--rxq=2", "--txq=2"])
    };
    let server = || two(format!("role=server,socket={s}"), "rxonly", false);
    let mut srv = server();
    let mut cli = two(format!("role=client,socket={s}"), "txonly", true);
    assert!(cli.wait_for("connected to", 1, 10), "{}", cli.output());
    let base = pool_in_use(&cli.ask("show mempool", "get_fails"));
    let (sent, got) = burst_of_traffic(&mut cli, &mut srv, 1000);
    assert!(sent > 10_000 && sent == got, "before: {sent} sent, {got} received");
    let x = srv.ask("show port xstats 0", "tx_ring_full");
    assert!(xstat_of(&x, "rx_q0_packets") > 0 && xstat_of(&x, "rx_q1_packets") > 0, "both rings carry\n{x}");
    // SIGKILL: no DISCONNECT, the socket just closes.
    srv.kill();
    assert!(cli.wait_for("link down, reconnecting", 1, 10), "{}", cli.output());
    let info = cli.ask("show port info 0", "Link status");
    assert!(info.contains("Link status: down"), "{info}");
    let mut srv = server();
    assert!(cli.wait_for("connected to", 2, 10), "the client reconnects by itself\n{}", cli.output());
    let (sent, got) = burst_of_traffic(&mut cli, &mut srv, 1000);
    assert!(sent > 10_000 && sent == got, "after: {sent} sent, {got} received");
    assert_eq!(pool_in_use(&cli.ask("show mempool", "get_fails")), base, "every mbuf back");
    let x = cli.ask("show port xstats 0", "tx_ring_full");
    assert_eq!((xstat_of(&x, "connects"), xstat_of(&x, "disconnects")), (2, 1), "{x}");
    let out = cli.quit();
    assert!(!out.contains("panicked"), "{out}");
    let out = srv.quit();
    assert!(!out.contains("panicked"), "{out}");
}

/// `key` (`RX-packets:`) of port `port` in the last `show port stats all` of `out`.
fn port_stat(out: &str, port: u16, key: &str) -> u64 {
    let head = format!("NIC statistics for port {port} ");
    let at = out.rfind(&head).unwrap_or_else(|| panic!("no stats of port {port} in:\n{out}"));
    // This port's block only (`nic_stat` reads the last block of what it is given).
    let block = &out[at..];
    let end = block[head.len()..].find("NIC statistics for port").map_or(block.len(), |e| e + head.len());
    nic_stat(&block[..end], key)
}

#[test]
fn two_server_ports_share_one_socket_each_with_its_own_id() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = memif_sock("shared");
    let servers =
        [format!("net_memif0,role=server,socket={s},id=0"), format!("net_memif1,role=server,socket={s},id=1")];
    let mut srv = our_testpmd(&servers, "rxonly", false);
    // The clients in the other order: each INIT reaches the port with its id.
    let clients =
        [format!("net_memif0,role=client,socket={s},id=1"), format!("net_memif1,role=client,socket={s},id=0")];
    let mut cli = our_testpmd(&clients, "txonly", true);
    assert!(srv.wait_for("connected to", 2, 10), "{}", srv.output());
    assert!(cli.wait_for("connected to", 2, 10), "{}", cli.output());
    // A third client for id 0 finds it taken; one for id 7 finds no such interface.
    let late = ours(&format!("role=client,socket={s},id=0"), "rxonly", true);
    assert!(late.wait_for("the server refused us: Already connected", 1, 10), "{}", late.output());
    drop(late);
    let stranger = ours(&format!("role=client,socket={s},id=7"), "rxonly", true);
    assert!(stranger.wait_for("the server refused us: ID not found", 1, 10), "{}", stranger.output());
    drop(stranger);
    // A second port of the same id on the socket is refused when it starts.
    let dup = [format!("net_memif0,role=server,socket={s},id=1")];
    let out = our_testpmd(&dup, "rxonly", false).quit();
    assert!(out.contains("is already served") || out.contains("Address already in use"), "{out}");
    srv.ask("start", "testpmd>");
    cli.ask("start", "testpmd>");
    std::thread::sleep(Duration::from_millis(800));
    cli.ask("stop", "Done");
    std::thread::sleep(Duration::from_millis(300));
    let c = cli.ask("show port stats all", "NIC statistics for port 1");
    std::thread::sleep(Duration::from_millis(200));
    let r = srv.ask("show port stats all", "NIC statistics for port 1");
    std::thread::sleep(Duration::from_millis(200));
    let (c, r) = (c + &cli.output(), r + &srv.output());
    // Client port 0 (id 1) feeds server port 1; client port 1 (id 0) feeds server port 0.
    let (a, b) = (port_stat(&c, 0, "TX-packets:"), port_stat(&c, 1, "TX-packets:"));
    assert!(a > 1000 && b > 1000, "both clients send: {a} {b}");
    assert_eq!(
        (port_stat(&r, 1, "RX-packets:"), port_stat(&r, 0, "RX-packets:")),
        (a, b),
        "each id's traffic on its port"
    );
    let out = cli.quit();
    assert!(!out.contains("panicked"), "{out}");
    let out = srv.quit();
    assert!(!out.contains("panicked"), "{out}");
}

/// A memif reflector (server): every frame back with its MACs swapped, on lcore 1.
const REFLECTOR: &str = "\
name: memif-wake-reflector
mempools: [{name: pkts, size: 4095, cache: 64}]
ports:
  - {name: m, driver: net_memif, args: 'role=server,socket=SOCK'}
lcores:
  - {id: 1, rx_mode: interrupt}
nodes:
  - {name: rx, type: port_rx, lcore: 1, params: {port: m}}
  - {name: swap, type: macswap, lcore: 1}
  - {name: tx, type: port_tx, lcore: 1, params: {port: m}}
edges:
  - {from: rx, to: swap}
  - {from: swap, to: tx}
";

/// A memif client sending 600 frames at 400 a second (2.5 ms apart: the lcore
/// sleeps between them) and counting what comes back, on lcore 0.
const PACED: &str = "\
name: memif-wake-source
mempools: [{name: pkts, size: 4095, cache: 64}]
ports:
  - {name: m, driver: net_memif, args: 'role=client,socket=SOCK'}
lcores:
  - {id: 0, rx_mode: interrupt}
nodes:
  - {name: gen, type: source, lcore: 0, params: {rate_pps: 400, count: 600}}
  - {name: tx, type: port_tx, lcore: 0, params: {port: m}}
  - {name: rx, type: port_rx, lcore: 0, params: {port: m}}
  - {name: back, type: counter, lcore: 0}
  - {name: sink, type: drop, lcore: 0}
edges:
  - {from: gen, to: tx}
  - {from: rx, to: back}
  - {from: back, to: sink}
";

/// `show runtime`'s "rx mode interrupt: N sleeps (woken by a queue K, ...": (N, K).
fn sleeps_and_queue_wakeups(runtime: &str) -> (u64, u64) {
    let line = runtime
        .lines()
        .find_map(|l| l.trim().strip_prefix("rx mode interrupt: "))
        .unwrap_or_else(|| panic!("no rx mode line in:\n{runtime}"));
    let num = |after: &str| -> u64 {
        let at = line.find(after).unwrap_or_else(|| panic!("no `{after}` in {line}")) + after.len();
        line[at..].split(|c: char| !c.is_ascii_digit()).next().and_then(|n| n.parse().ok()).unwrap()
    };
    (num(""), num("woken by a queue "))
}

/// Runs the paced source against the reflector until it is done and every frame it
/// sent came back; returns what it sent.
fn paced_round(cfg: &std::path::Path, tag: &str) -> u64 {
    let mut src = Run::start(cfg, &[], tag);
    let node_packets = |l: &serde_json::Value, n: &str| l["nodes"][n]["packets"].as_u64().unwrap_or(0);
    let last =
        src.wait_for(15, |l| node_packets(l, "gen") == 600 && node_packets(l, "back") == counter(l, "tx", "sent"));
    let (made, sent, back) = (node_packets(&last, "gen"), counter(&last, "tx", "sent"), node_packets(&last, "back"));
    let (sleeps, by_queue) = sleeps_and_queue_wakeups(&src.ctl("show runtime", true));
    let out = src.stop();
    assert!(!out.contains("panicked"), "{out}");
    assert_eq!(made, 600, "{tag}: the source is done\n{last}");
    // A few frames may go before the link is up (dropped by port_tx, counted).
    assert!(sent >= 550, "{tag}: {sent} of 600 sent over memif\n{last}\n{out}");
    assert_eq!(back, sent, "{tag}: every frame sent came back\n{last}\n{out}");
    // Between frames it sleeps; the replies wake it (or its pacing timer does).
    assert!(sleeps >= 100 && by_queue > 0, "{tag}: {sleeps} sleeps, {by_queue} woken by a queue\n{out}");
    sent
}

#[test]
fn two_ironpath_runs_in_interrupt_mode_are_woken_by_memif_traffic() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let sock = memif_sock("wake");
    let dir = TempDir::new("memif-wake");
    let write = |name: &str, yaml: &str| {
        let p = dir.0.join(name);
        std::fs::write(&p, yaml.replace("SOCK", &sock)).unwrap();
        p
    };
    let (reflector, paced) = (write("reflector.yaml", REFLECTOR), write("paced.yaml", PACED));
    let mut refl = Run::start(&reflector, &[], "memif-wake-refl");
    let first = paced_round(&paced, "memif-wake-a");
    // The client stops and a new one connects: the reflector, asleep, is woken by the
    // connection, moves to it and is woken by its traffic again.
    let second = paced_round(&paced, "memif-wake-b");
    let runtime = refl.ctl("show runtime", true);
    let (sleeps, by_queue) = sleeps_and_queue_wakeups(&runtime);
    let last = refl.latest();
    let out = refl.stop();
    assert!(!out.contains("panicked"), "{out}");
    let got = last["nodes"]["rx"]["packets"].as_u64().unwrap_or(0);
    assert_eq!(got, first + second, "the reflector got every frame\n{last}");
    // Its only wake-up source is the memif queue (no timers): each frame it reflected
    // after a sleep came through the relay.
    assert!(sleeps >= 200 && by_queue >= 200, "reflector: {sleeps} sleeps, {by_queue} woken by a queue\n{runtime}");
}
