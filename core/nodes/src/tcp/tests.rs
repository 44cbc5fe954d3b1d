//! Two `tcp` nodes talking to each other through their frames, on a virtual clock:
//! the whole path (frame parsing, checksums, tables, timers, applications).

use super::*;
use crate::tests::{call, counter, eth, ipv4, pool, stats, PEER4, PEER_MAC, US4, US_MAC};
use ironpath_graph::NodeStats;

const HZ: u64 = 1_000_000_000;

fn cfg(mac: [u8; 6], addr: Ipv4Addr) -> TcpConfig {
    TcpConfig {
        mac,
        addresses: vec![IpAddress::V4(addr)],
        tcp: Config { nagle: false, ..Config::default() },
        listen: Vec::new(),
        connect: Vec::new(),
        max_connections: 1000,
        tsc_hz: HZ,
        isn_secret: [7; 16],
        tx_inflight_limit: 0,
        memory_limit: 0,
        max_time_wait: 262_144,
        limits: Default::default(),
    }
}

use std::net::Ipv4Addr;

fn server(pool: &Mempool, objects: &str) -> TcpNode {
    let mut c = cfg(US_MAC, US4);
    c.listen = vec![
        ListenCfg {
            port: 80,
            app: ServerApp::Http,
            backlog: 16,
            bytes: 0,
            root: None,
            objects: objects.into(),
            congestion: None,
            dotfiles: false,
        },
        ListenCfg {
            port: 7,
            app: ServerApp::Echo,
            backlog: 16,
            bytes: 0,
            root: None,
            objects: String::new(),
            congestion: None,
            dotfiles: false,
        },
    ];
    TcpNode::new(c, pool.clone()).unwrap()
}

fn client(pool: &Mempool, connect: Vec<ConnectCfg>) -> TcpNode {
    let mut c = cfg(PEER_MAC, PEER4);
    c.connect = connect;
    TcpNode::new(c, pool.clone()).unwrap()
}

fn get(path: &str, save: &std::path::Path, count: u32, requests: u64) -> ConnectCfg {
    ConnectCfg {
        to: IpAddress::V4(US4),
        port: 80,
        app: ClientApp::HttpGet,
        bytes: 0,
        path: path.into(),
        save: Some(save.to_owned()),
        count,
        requests,
        congestion: None,
    }
}

/// A client connection running `source` (`bytes`, 0 = forever) to our port `port`.
fn source_to(port: u16, bytes: u64) -> ConnectCfg {
    ConnectCfg {
        to: IpAddress::V4(US4),
        port,
        app: ClientApp::Source,
        bytes,
        path: String::new(),
        save: None,
        count: 1,
        requests: 1,
        congestion: None,
    }
}

/// A `discard` listener on `port`.
fn discard_on(port: u16, congestion: Option<ironpath_tcp::Congestion>) -> ListenCfg {
    ListenCfg {
        port,
        app: ServerApp::Discard,
        backlog: 16,
        bytes: 0,
        root: None,
        objects: String::new(),
        congestion,
        dotfiles: false,
    }
}

/// Runs both nodes for `rounds` polls 100 µs apart; `keep(direction, n)` decides
/// whether the n-th frame of a direction arrives (loss).
fn run(
    a: &mut TcpNode,
    b: &mut TcpNode,
    rounds: u64,
    mut keep: impl FnMut(usize, u64) -> bool,
) -> (NodeStats, NodeStats) {
    let (sa, sb) = (stats(a), stats(b));
    let mut to_b = Burst::new();
    let mut to_a = Burst::new();
    let mut n = [0u64; 2];
    for r in 0..rounds {
        let now = 1 + r * 100_000;
        let mut pa = std::mem::take(&mut to_a);
        call(a, &sa, &mut pa, now);
        for m in pa.drain() {
            n[0] += 1;
            if keep(0, n[0]) {
                let _ = to_b.push(m);
            }
        }
        let mut pb = std::mem::take(&mut to_b);
        call(b, &sb, &mut pb, now + 50_000);
        for m in pb.drain() {
            n[1] += 1;
            if keep(1, n[1]) {
                let _ = to_a.push(m);
            }
        }
    }
    (sa, sb)
}

/// `run`, with an `rx_aggregate` node (GRO, flush per burst) in front of `a`.
fn run_gro(a: &mut TcpNode, b: &mut TcpNode, rounds: u64) -> (NodeStats, NodeStats, NodeStats) {
    use crate::aggregate::{node::RxAggregate, AggrConfig, Aggregator, Flush, Mode};
    let cfg = AggrConfig {
        mode: Mode::Gro,
        max_bytes: 65535,
        max_segments: 64,
        max_flows: 64,
        max_held: 4096,
        flush: Flush::Burst,
        flush_tsc: 0,
        drop_bad: false,
        tso: false,
    };
    let mut gro = RxAggregate::new(Some(Aggregator::new(cfg, None)));
    let (sa, sb, sg) = (stats(a), stats(b), stats(&gro));
    let mut to_a = Burst::new();
    for r in 0..rounds {
        let now = 1 + r * 100_000;
        let mut pa = std::mem::take(&mut to_a);
        call(&mut gro, &sg, &mut pa, now);
        call(a, &sa, &mut pa, now);
        let mut pb = pa;
        call(b, &sb, &mut pb, now + 50_000);
        to_a = pb;
    }
    (sa, sb, sg)
}

fn pattern_bytes(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

#[test]
fn http_get_over_two_nodes_returns_every_mbuf() {
    let pool = pool(4096);
    let dir = std::env::temp_dir().join(format!("ipt-tcp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let save = dir.join("body");
    let mut s = server(&pool, "/empty=0,/obj=300000");
    let mut c = client(&pool, vec![get("/obj", &save, 1, 3)]);
    let (sc, ss) = run(&mut c, &mut s, 3000, |_, _| true);
    assert_eq!(counter(&sc, "http_requests"), 3, "client completed 3 requests");
    assert_eq!(counter(&ss, "http_requests"), 3);
    assert_eq!(counter(&sc, "http_errors") + counter(&ss, "http_errors"), 0);
    assert_eq!(counter(&sc, "clients_done"), 1);
    assert_eq!(counter(&ss, "bad_checksum") + counter(&sc, "bad_checksum"), 0);
    let body = std::fs::read(&save).unwrap();
    let one = pattern_bytes(300_000);
    assert_eq!(body.len(), 900_000);
    assert!(body.chunks(300_000).all(|c| c == one.as_slice()), "every body is the object");
    // What is left sits in TIME-WAIT, in the compact table: no connection, no
    // application and no mbuf held.
    assert_eq!(s.connections() + c.connections(), 0, "no connection left in the table");
    assert_eq!(s.in_time_wait() + c.in_time_wait(), 1, "the closing side waits in TIME-WAIT");
    assert!(s.slots.iter().chain(&c.slots).all(Option::is_none), "every slot is free");
    assert_eq!(pool.stats().in_use, 0, "no mbuf held once the transfer is over");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A server with an `http` listener on port 80 serving the files of `root`.
fn file_server(pool: &Mempool, root: &std::path::Path) -> TcpNode {
    let mut c = cfg(US_MAC, US4);
    c.listen = vec![ListenCfg {
        port: 80,
        app: ServerApp::Http,
        backlog: 16,
        bytes: 0,
        root: Some(root.to_owned()),
        objects: String::new(),
        congestion: None,
        dotfiles: false,
    }];
    // File I/O at the next poll, on this thread: deterministic.
    c.limits.file_threads = 0;
    TcpNode::new(c, pool.clone()).unwrap()
}

#[test]
fn a_file_is_read_piece_by_piece_and_served_whole_twice() {
    let pool = pool(4096);
    let dir = std::env::temp_dir().join(format!("ipt-tcp-file-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("www")).unwrap();
    // Not a multiple of the piece size, and not the pattern.
    let data: Vec<u8> = (0..3 * super::files::FILE_PIECE + 1234).map(|i| (i * 7 % 256) as u8).collect();
    std::fs::write(dir.join("www/f.bin"), &data).unwrap();
    let save = dir.join("body");
    let mut s = file_server(&pool, &dir.join("www"));
    let mut c = client(&pool, vec![get("/f.bin", &save, 1, 2)]);
    let (sc, ss) = run(&mut c, &mut s, 4000, |_, _| true);
    assert_eq!(counter(&sc, "http_requests"), 2);
    assert_eq!(counter(&sc, "http_errors") + counter(&ss, "http_errors"), 0);
    assert_eq!(std::fs::read(&save).unwrap(), [data.clone(), data].concat());
    assert_eq!(pool.stats().in_use, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_cut_short_while_sent_resets_the_connection() {
    let pool = pool(4096);
    let dir = std::env::temp_dir().join(format!("ipt-tcp-cut-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("www")).unwrap();
    let path = dir.join("www/f.bin");
    std::fs::write(&path, vec![5u8; 8 * super::files::FILE_PIECE]).unwrap();
    let save = dir.join("body");
    let mut s = file_server(&pool, &dir.join("www"));
    let mut c = client(&pool, vec![get("/f.bin", &save, 1, 1)]);
    // A few rounds: the response started (the send buffer holds a piece or so).
    let (sc1, ss1) = run(&mut c, &mut s, 5, |_, _| true);
    assert_eq!(counter(&sc1, "http_requests") + counter(&ss1, "http_errors"), 0, "not finished yet");
    std::fs::write(&path, b"short").unwrap();
    let (sc, ss) = run(&mut c, &mut s, 3000, |_, _| true);
    assert_eq!(counter(&ss, "http_errors"), 1, "the server saw the read fail");
    assert_eq!(counter(&sc, "http_requests"), 0, "the client did not take a short body as complete");
    assert!(std::fs::read(&save).unwrap().len() < 8 * super::files::FILE_PIECE);
    assert_eq!(s.connections(), 0, "the server's connection is gone");
    assert_eq!(pool.stats().in_use, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn gro_aggregates_are_taken_whole_and_acked_per_segment() {
    let pool = pool(4096);
    let dir = std::env::temp_dir().join(format!("ipt-tcp-gro-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let save = dir.join("body");
    let mut s = server(&pool, "/obj=400000");
    let mut c = client(&pool, vec![get("/obj", &save, 1, 2)]);
    let (sc, _, sg) = run_gro(&mut c, &mut s, 3000);
    assert_eq!(counter(&sc, "http_requests"), 2);
    assert_eq!(counter(&sc, "malformed") + counter(&sc, "bad_checksum"), 0);
    assert!(counter(&sg, "merged") > 0, "the aggregator merged segments");
    assert!(counter(&sc, "segs_in") < 2 * 400_000 / 1448, "aggregates arrive as one segment each");
    assert_eq!(std::fs::read(&save).unwrap(), [pattern_bytes(400_000), pattern_bytes(400_000)].concat());
    assert_eq!(pool.stats().in_use, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn transfers_complete_through_loss_with_retransmissions() {
    let pool = pool(8192);
    let dir = std::env::temp_dir().join(format!("ipt-tcp-loss-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let save = dir.join("body");
    let mut s = server(&pool, "/obj=500000");
    let mut c = client(&pool, vec![get("/obj", &save, 2, 1)]);
    // Lose 3% of the frames each way (a fixed pseudo-random choice).
    let (sc, ss) = run(&mut c, &mut s, 40_000, |dir, n| {
        (n.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ dir as u64).wrapping_mul(0xbf58_476d_1ce4_e5b9) >> 40 & 0xffff > 1966
    });
    assert_eq!(counter(&sc, "http_requests"), 2);
    assert!(counter(&ss, "retransmits") > 0, "the server resent what was lost");
    for i in 0..2 {
        assert_eq!(std::fs::read(dir.join(format!("body.{i}"))).unwrap(), pattern_bytes(500_000));
    }
    assert_eq!(pool.stats().in_use, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn source_into_echo_and_discard() {
    let pool = pool(4096);
    let mut s = server(&pool, "");
    let mut c = client(&pool, vec![source_to(7, 200_000)]);
    let (sc, ss) = run(&mut c, &mut s, 3000, |_, _| true);
    assert_eq!(counter(&sc, "app_bytes_out"), 200_000);
    assert_eq!(counter(&ss, "app_bytes_in"), 200_000, "the echo server read everything");
    assert_eq!(counter(&sc, "app_bytes_in"), 200_000, "and sent it all back");
    assert_eq!(counter(&sc, "clients_done"), 1);
    assert_eq!(s.connections() + c.connections(), 0, "no connection left in the table");
    assert_eq!(s.in_time_wait() + c.in_time_wait(), 1, "one side in TIME-WAIT");
}

/// A TCP frame from the peer to us (valid checksums unless `corrupt`).
fn segment(dst_port: u16, flags: u8, payload: &[u8], corrupt: bool) -> Vec<u8> {
    let mut t = vec![0u8; 20 + payload.len()];
    t[0..2].copy_from_slice(&40000u16.to_be_bytes());
    t[2..4].copy_from_slice(&dst_port.to_be_bytes());
    t[4..8].copy_from_slice(&1000u32.to_be_bytes());
    t[12] = 5 << 4;
    t[13] = flags;
    t[14..16].copy_from_slice(&8192u16.to_be_bytes());
    t[20..].copy_from_slice(payload);
    let mut p = TcpPacket::new_unchecked(&mut t[..]);
    p.fill_checksum(&IpAddress::V4(PEER4), &IpAddress::V4(US4));
    if corrupt {
        t[20] ^= 1;
    }
    eth(US_MAC, PEER_MAC, 0x0800, &ipv4(PEER4, US4, 6, 64, &t))
}

#[test]
fn refuses_bad_frames_and_resets_closed_ports() {
    let pool = pool(256);
    let mut s = server(&pool, "");
    let st = stats(&s);
    let mut frames = vec![
        segment(81, 0x02, &[], false),     // SYN to a closed port: RST
        segment(80, 0x18, b"xy", true),    // bad TCP checksum
        segment(80, 0x10, b"late", false), // ACK to a listener without connection: RST
    ];
    let mut short = segment(80, 0x02, &[], false);
    short.truncate(14 + 20 + 10); // TCP header cut
    frames.push(short);
    let mut bad_ip = segment(80, 0x02, &[], false);
    bad_ip[14 + 10] ^= 0xff; // IPv4 header checksum
    frames.push(bad_ip);
    let mut other = segment(80, 0x02, &[], false);
    other[14 + 19] = 9; // to 198.18.0.9: not ours
    Ipv4Packet::new_unchecked(&mut other[14..34]).fill_checksum();
    frames.push(other);
    let mut b = crate::tests::burst(&pool, &frames);
    call(&mut s, &st, &mut b, 1);
    assert_eq!(b.len(), 2, "two RSTs");
    for i in 0..2 {
        let d = b.data(i);
        assert_eq!(d[14 + 20 + 13] & 0x04, 0x04, "RST flag");
        assert_eq!(&d[0..6], &PEER_MAC, "to the MAC the segment came from");
        let tcp = TcpPacket::new_checked(&d[34..]).unwrap();
        assert!(tcp.verify_checksum(&IpAddress::V4(US4), &IpAddress::V4(PEER4)));
    }
    b.free_all();
    assert_eq!(counter(&st, "rst_sent"), 2);
    assert_eq!(counter(&st, "bad_checksum"), 2);
    assert_eq!(counter(&st, "malformed"), 1);
    assert_eq!(counter(&st, "not_ours"), 1);
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn an_mss_too_large_for_the_pool_is_refused() {
    let small = ironpath_eal::Mempool::create(
        &ironpath_eal::MempoolConfig::new("tcp-small", 64).data_room(1024).policy(ironpath_eal::MemPolicy::NoHuge),
    )
    .unwrap();
    let e = TcpNode::new(cfg(US_MAC, US4), small).err().unwrap();
    assert!(e.contains("mss 1460 does not fit"), "{e}");
}

/// A client `source` streams into a server `discard` for `rounds` polls 100 µs apart;
/// the client's frames go through a [`TxBatcher`] onto a device that finishes
/// `per_round` frames a round (a link of that rate) and hands each frame to the
/// server as it takes it. Returns (server app bytes read, client counters, batcher).
fn stream_through_batcher(
    bcfg: ironpath_eal::TxBatchConfig,
    limit: u64,
    rounds: u64,
    per_round: usize,
) -> (u64, NodeStats, ironpath_eal::TxBatchStats) {
    use ironpath_eal::port::testing::sink_txq;
    let pool = pool(8192);
    let mut sc = cfg_for_server();
    sc.listen = vec![discard_on(9, None)];
    let mut s = TcpNode::new(sc, pool.clone()).unwrap();
    let mut cc = cfg(PEER_MAC, PEER4);
    cc.tx_inflight_limit = limit;
    cc.connect = vec![source_to(9, 0)];
    let mut c = TcpNode::new(cc, pool.clone()).unwrap();
    let (q, dev) = sink_txq(512, true);
    let mut tb = ironpath_eal::TxBatcher::new(q, bcfg);
    let (stc, sts) = (stats(&c), stats(&s));
    let mut to_c = Burst::new();
    for r in 0..rounds {
        let now = 1 + r * 100_000;
        let mut pc = std::mem::take(&mut to_c);
        call(&mut c, &stc, &mut pc, now);
        tb.enqueue(&mut pc, now);
        tb.poll(now);
        dev.finish(per_round);
        let mut ps = Burst::new();
        for f in dev.take_log() {
            let _ = ps.push(Mbuf::from_slice(&pool, &f).unwrap());
        }
        call(&mut s, &sts, &mut ps, now + 50_000);
        to_c = ps;
    }
    (counter(&sts, "app_bytes_in"), stc, tb.stats())
}

fn cfg_for_server() -> TcpConfig {
    cfg(US_MAC, US4)
}

#[test]
fn completion_coalescing_collapses_a_limited_stream_and_the_defaults_do_not() {
    use ironpath_eal::{Completion, TxBatchConfig};
    const ROUNDS: u64 = 5000; // 0.5 s
    const PER_ROUND: usize = 8; // ~0.93 Gbit/s of 1514-byte frames
    let link = (ROUNDS as f64) * (PER_ROUND as f64) * 1448.0;
    let hz = HZ;
    let us = |n: u64| n * hz / 1_000_000;
    let defaults = TxBatchConfig {
        coalesce: 32,
        flush_tsc: us(100),
        flush_on_idle: true,
        completion: Completion::Immediate,
        retries: 0,
        hz,
    };
    let (good, gc, gt) = stream_through_batcher(defaults, 262_144, ROUNDS, PER_ROUND);
    let coalesced = TxBatchConfig { coalesce: 16, completion: Completion::Timer(us(10_000)), ..defaults };
    let (bad, bc, bt) = stream_through_batcher(coalesced, 262_144, ROUNDS, PER_ROUND);
    eprintln!(
        "defaults: {:.0}% of the link ({} throttled); timer 10 ms + coalesce 16: {:.0}% ({} throttled, {} completions)",
        100.0 * good as f64 / link,
        counter(&gc, "tsq_throttled"),
        100.0 * bad as f64 / link,
        counter(&bc, "tsq_throttled"),
        bt.completions
    );
    assert!(good as f64 > 0.8 * link, "defaults reach the link rate: {good} of {link}");
    assert!((bad as f64) < 0.3 * link, "10 ms completions hold the stream far below the link: {bad} of {link}");
    assert!(counter(&bc, "tsq_throttled") > 0);
    assert_eq!(gt.tx_full + bt.tx_full, 0, "the limit keeps the device ring from overflowing");
    // Without the limit nothing waits for completions, and nothing stops the sender
    // from overrunning the device's ring: drops, which the limit prevents.
    let (_, _, ft) = stream_through_batcher(defaults, 0, ROUNDS, PER_ROUND);
    assert!(ft.tx_full > 0, "no limit: the ring overflows");
}

/// A pure ACK of the server goes through a `tx_batch`-like batcher that would wait
/// 1 s for a batch of 32: with `flush_on_idle` it leaves on the same poll's idle
/// walk; without, it is still waiting after 10 polls.
#[test]
fn flush_on_idle_sends_a_lone_ack_within_one_poll() {
    use ironpath_eal::port::testing::sink_txq;
    use ironpath_eal::{Completion, TxBatchConfig, TxBatcher};
    for idle in [true, false] {
        let pool = pool(1024);
        let mut sc = cfg_for_server();
        sc.listen = vec![discard_on(9, None)];
        let mut s = TcpNode::new(sc, pool.clone()).unwrap();
        let mut c = client(&pool, vec![source_to(9, 0)]);
        let (q, dev) = sink_txq(1024, false);
        let bcfg = TxBatchConfig {
            coalesce: 32,
            flush_tsc: HZ,
            flush_on_idle: idle,
            completion: Completion::Immediate,
            retries: 0,
            hz: HZ,
        };
        let mut tb = TxBatcher::new(q, bcfg);
        let (stc, sts) = (stats(&c), stats(&s));
        let mut to_c = Burst::new();
        let mut lone_acks = 0;
        for r in 0..10u64 {
            let now = 1 + r * 1_000_000; // 1 ms apart: past the delayed-ACK timer
            let mut pc = std::mem::take(&mut to_c);
            call(&mut c, &stc, &mut pc, now);
            let mut ps = pc;
            call(&mut s, &sts, &mut ps, now + 10);
            let emitted = ps.len();
            let acks = (0..ps.len())
                .filter(|&i| {
                    // IPv4, TCP flags ACK only, no payload.
                    let d = ps.data(i);
                    let ip_len = usize::from(u16::from_be_bytes([d[16], d[17]]));
                    let thl = usize::from(d[14 + 20 + 12] >> 4) * 4;
                    d[14 + 20 + 13] == 0x10 && ip_len == 20 + thl
                })
                .count();
            tb.enqueue(&mut ps, now + 20);
            tb.poll(now + 20);
            // The lcore's walk found nothing else to do.
            tb.idle(now + 30);
            let out = dev.take_log();
            if idle {
                assert_eq!(out.len(), emitted, "round {r}: everything the server emitted left in the same poll");
            }
            lone_acks += acks;
            for f in out {
                let _ = to_c.push(Mbuf::from_slice(&pool, &f).unwrap());
            }
        }
        assert!(lone_acks > 0, "the server sent a pure ACK");
        if idle {
            assert!(counter(&sts, "app_bytes_in") > 0);
            assert!(tb.stats().flushes[ironpath_eal::FlushReason::Idle as usize] > 0);
        } else {
            // SYN-ACK and FIN are pushed; the pure ACK waits for 32 packets or 1 s.
            assert!(tb.stats().buffered > 0, "{:?}", tb.stats());
            assert_eq!(tb.stats().flushes[ironpath_eal::FlushReason::Idle as usize], 0);
        }
    }
}

#[test]
fn congestion_control_is_chosen_per_listener_and_per_connect() {
    use ironpath_tcp::Congestion;
    let pool = pool(1024);
    let mut sc = cfg_for_server();
    sc.listen = vec![discard_on(9, Some(Congestion::NewReno))];
    let mut s = TcpNode::new(sc, pool.clone()).unwrap();
    let mut c = client(&pool, vec![source_to(9, 0)]);
    run(&mut c, &mut s, 20, |_, _| true);
    let algo = |n: &TcpNode| n.slots.iter().flatten().map(|e| e.conn.info().congestion).collect::<Vec<_>>();
    assert_eq!(algo(&s), [Congestion::NewReno], "the listener's choice");
    assert_eq!(algo(&c), [Congestion::Cubic], "the node's default");
}

#[test]
fn keepalive_probes_an_idle_peer_and_resets_one_that_vanished() {
    let pool = pool(512);
    let mut c = cfg(US_MAC, US4);
    c.tcp.keepalive = Some(ironpath_tcp::Keepalive {
        idle: std::time::Duration::from_secs(1),
        interval: std::time::Duration::from_millis(200),
        probes: 2,
    });
    c.listen = vec![discard_on(9, None)];
    let mut b = TcpNode::new(c, pool.clone()).unwrap();
    // The client connects and sends nothing (its app only reads).
    let mut a = client(&pool, vec![ConnectCfg { app: ClientApp::Discard, ..source_to(9, 0) }]);
    // 3.5 s with the client answering: a probe after each quiet second, answered.
    let (_, sb) = run(&mut a, &mut b, 35_000, |_, _| true);
    assert_eq!(counter(&sb, "conns_opened"), 1);
    let probes = counter(&sb, "keepalive_probes");
    assert!((3..=4).contains(&probes), "{probes}");
    assert_eq!(counter(&sb, "conns_closed"), 0);
    // Then the client vanishes: two more probes 200 ms apart, then the reset. (`run`
    // starts its clock at 0 again: the first 3.5 s of this run repeat old times.)
    let (_, sb) = run(&mut a, &mut b, 60_000, |dir, _| dir != 0);
    assert_eq!(counter(&sb, "keepalive_probes"), 2);
    assert_eq!(counter(&sb, "keepalive_resets"), 1);
    assert_eq!(counter(&sb, "conns_failed"), 1);
    drop((a, b));
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn idle_timeout_resets_a_silent_connection() {
    let pool = pool(512);
    let mut c = cfg(US_MAC, US4);
    c.tcp.idle_timeout = Some(std::time::Duration::from_millis(500));
    c.listen = vec![discard_on(9, None)];
    let mut b = TcpNode::new(c, pool.clone()).unwrap();
    let mut a = client(&pool, vec![ConnectCfg { app: ClientApp::Discard, ..source_to(9, 0) }]);
    let (sa, sb) = run(&mut a, &mut b, 10_000, |_, _| true);
    assert_eq!(counter(&sb, "conns_opened"), 1);
    assert_eq!(counter(&sb, "idle_resets"), 1);
    assert_eq!(counter(&sa, "conns_failed"), 1, "the client got the RST");
    drop((a, b));
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn memory_limit_drops_out_of_order_data_first_and_the_transfer_still_completes() {
    let pool = pool(8192);
    let mut c = cfg(US_MAC, US4);
    c.memory_limit = 16 * 1024;
    // One peer: let it have the whole budget (limits_tests.rs has the peer's share).
    c.limits.peer_share = 100;
    c.listen = vec![discard_on(9, None)];
    let mut b = TcpNode::new(c, pool.clone()).unwrap();
    const N: u64 = 2_000_000;
    let mut a = client(&pool, vec![source_to(9, N)]);
    // Lose every 50th data frame to us: what follows each loss waits out of order,
    // and more than 16 KiB of it is over the limit. (Under pressure, the one peer
    // holds at most 7/8 of the budget, the rest left to newcomers: its own drops
    // come first.)
    let (_, sb) = run(&mut a, &mut b, 60_000, |dir, n| dir != 0 || n % 50 != 0);
    assert_eq!(counter(&sb, "app_bytes_in"), N, "every byte arrived, in order");
    let dropped = counter(&sb, "mem_dropped") + counter(&sb, "peer_mem_dropped");
    assert!(dropped > 0, "out-of-order data over the limit was dropped");
    assert_eq!(counter(&sb, "conns_closed"), 1);
    drop((a, b));
    assert_eq!(pool.stats().in_use, 0);

    // Without the limit the same run drops nothing for memory.
    let mut c = cfg(US_MAC, US4);
    c.listen = vec![discard_on(9, None)];
    let mut b = TcpNode::new(c, pool.clone()).unwrap();
    let mut a = client(&pool, vec![source_to(9, N)]);
    let (_, sb) = run(&mut a, &mut b, 30_000, |dir, n| dir != 0 || n % 50 != 0);
    assert_eq!(counter(&sb, "app_bytes_in"), N);
    assert_eq!(counter(&sb, "mem_dropped"), 0);
}

#[test]
fn tso_frames_carry_offload_state_and_cut_into_valid_segments() {
    use ironpath_wire::{Ipv4Packet, TcpControl, TcpPacket, TcpRepr};
    let pool = pool(256);
    let data = pattern_bytes(20_000);
    let repr = TcpRepr {
        src_port: 80,
        dst_port: 40_000,
        seq_number: 1_000_000,
        ack_number: Some(77),
        control: TcpControl::Psh,
        window_len: 500,
        max_seg_size: None,
        window_scale: None,
        sack_permitted: false,
        sack_ranges: [None; 3],
        timestamp: Some((5, 6)),
        payload_len: data.len(),
    };
    let (us, peer) = (IpAddress::V4(US4), IpAddress::V4(PEER4));
    let seg =
        Segment { src_addr: us, dst_addr: peer, repr, payload: Some(Chunk::from_vec(data.clone())), tso_segsz: 1436 };
    let m = build_frame(&pool, US_MAC, PEER_MAC, &seg, 9).expect("a TSO frame");
    let h = m.header();
    assert_eq!(
        h.ol_flags & (abi::TX_TCP_SEG | abi::TX_TCP_CKSUM | abi::TX_IPV4),
        abi::TX_TCP_SEG | abi::TX_TCP_CKSUM | abi::TX_IPV4
    );
    assert_eq!((h.l2_len, h.l3_len, h.l4_len, h.tso_segsz), (14, 20, 32, 1436));
    assert_eq!(m.pkt_len(), 14 + 20 + 32 + data.len());
    assert!(m.nb_segs() > 1, "the payload is chained");
    // The checksum field holds the pseudo-header sum over the whole TCP length.
    let bytes = m.to_vec();
    let want = checksum::fold(checksum::pseudo_header(&us, &peer, IpProtocol::TCP, (32 + data.len()) as u32));
    assert_eq!(u16::from_be_bytes([bytes[34 + 16], bytes[34 + 17]]), want);
    // Cut as the kernel would: valid segments of 1436 bytes carrying the data in order.
    let mut segs = Vec::new();
    crate::aggregate::gso::segment(m, &pool, 1436, &mut |s| segs.push(s)).map_err(|(_, e)| e).unwrap();
    assert_eq!(segs.len(), data.len().div_ceil(1436));
    let mut got = Vec::new();
    for (k, s) in segs.iter().enumerate() {
        let f = s.to_vec();
        let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
        assert!(ip.verify_checksum());
        let tcp = TcpPacket::new_checked(&f[34..]).unwrap();
        assert!(tcp.verify_checksum(&us, &peer), "segment {k}");
        assert_eq!(tcp.seq_number(), 1_000_000 + (k * 1436) as u32);
        got.extend_from_slice(&f[34 + 32..]);
    }
    assert_eq!(got, data);
    drop(segs);
    assert_eq!(pool.stats().in_use, 0);
}

/// The client closes first and waits in the compact TIME-WAIT table; its ACK of the
/// server's FIN is lost, so the server resends the FIN: TIME-WAIT answers it (the
/// server's side closes), restarts its 2 MSL, and then ends.
#[test]
fn time_wait_answers_a_resent_fin_and_then_ends() {
    let pool = pool(4096);
    let mut s = server(&pool, "");
    let mut cc = cfg(PEER_MAC, PEER4);
    cc.tcp.msl = std::time::Duration::from_secs(1);
    cc.connect = vec![source_to(7, 10_000)];
    let mut c = TcpNode::new(cc, pool.clone()).unwrap();
    let (sc, ss) = (stats(&c), stats(&s));
    let (mut to_s, mut to_c) = (Burst::new(), Burst::new());
    let (mut dropped, mut tw_start, mut tw_end) = (false, None, None);
    for r in 0..50_000u64 {
        let now = 1 + r * 100_000;
        let mut pc = std::mem::take(&mut to_c);
        call(&mut c, &sc, &mut pc, now);
        let last_ack = s.slots.iter().flatten().any(|e| e.conn.state() == State::LastAck);
        let mut frames: Vec<Mbuf> = pc.drain().collect();
        if last_ack && !dropped && c.in_time_wait() == 1 {
            dropped = true;
            frames.pop(); // the last one sent: the ACK of the server's FIN
        }
        for m in frames {
            let _ = to_s.push(m);
        }
        let mut ps = std::mem::take(&mut to_s);
        call(&mut s, &ss, &mut ps, now + 50_000);
        for m in ps.drain() {
            let _ = to_c.push(m);
        }
        match (c.in_time_wait(), tw_start, tw_end) {
            (1, None, _) => tw_start = Some(r),
            (0, Some(_), None) => tw_end = Some(r),
            _ => {}
        }
    }
    assert!(dropped, "the client's last ACK was dropped");
    assert!(counter(&ss, "retransmits") >= 1, "the server resent its FIN");
    assert_eq!(s.connections(), 0, "the ACK from TIME-WAIT closed the server's side");
    assert_eq!(counter(&ss, "conns_failed"), 0);
    let (start, end) = (tw_start.expect("TIME-WAIT began"), tw_end.expect("TIME-WAIT ended"));
    // 2 MSL is 2 s (20,000 rounds); the resent FIN came at least rto_min later and
    // restarted it.
    assert!(end - start > 22_000, "TIME-WAIT lasted {} rounds", end - start);
    assert!(end - start < 40_000, "TIME-WAIT lasted {} rounds", end - start);
    assert_eq!(counter(&sc, "conns_closed"), 1);
    assert_eq!(c.connections() + c.in_time_wait(), 0);
    assert_eq!(pool.stats().in_use, 0, "no mbuf held");
}
