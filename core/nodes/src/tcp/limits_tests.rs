//! A hostile peer against a `tcp` node, frame by frame on a virtual clock: small
//! out-of-order segments across many connections (the pool share holds, pieces are
//! collapsed, timeouts give every buffer back), request heads that never end, idle
//! keep-alive connections, forged sources, too many connections from one address,
//! and a web root with links and dot-files.

use super::*;
use crate::tests::{call, counter, eth, ipv4, pool, stats, PEER4, PEER_MAC, US4, US_MAC};
use ironpath_graph::NodeStats;
use std::net::Ipv4Addr;
use std::time::Duration;

/// TSC ticks per second of these tests (a virtual nanosecond clock).
const HZ: u64 = 1_000_000_000;

fn limits() -> TcpLimits {
    TcpLimits {
        header_timeout: Some(Duration::from_secs(2)),
        keepalive_timeout: Some(Duration::from_secs(3)),
        ..TcpLimits::default()
    }
}

fn server_cfg(root: Option<std::path::PathBuf>, limits: TcpLimits) -> TcpConfig {
    TcpConfig {
        mac: US_MAC,
        addresses: vec![IpAddress::V4(US4)],
        tcp: Config { send_timeout: Some(Duration::from_secs(4)), ..Config::default() },
        listen: vec![ListenCfg {
            port: 80,
            app: ServerApp::Http,
            backlog: 1024,
            bytes: 0,
            root,
            objects: "/empty=0,/obj=1000".into(),
            congestion: None,
            dotfiles: false,
        }],
        connect: Vec::new(),
        max_connections: 10_000,
        tsc_hz: HZ,
        isn_secret: [9; 16],
        tx_inflight_limit: 0,
        memory_limit: 0,
        max_time_wait: 1000,
        limits,
    }
}

/// One scripted TCP endpoint (no options: no timestamps, SACK or window scaling).
struct Peer {
    mac: [u8; 6],
    ip: Ipv4Addr,
    port: u16,
    /// Next sequence number to send.
    seq: u32,
    /// Next sequence number expected from the node.
    ack: u32,
}

impl Peer {
    fn new(ip: Ipv4Addr, port: u16) -> Peer {
        Peer { mac: PEER_MAC, ip, port, seq: 1_000_000 + u32::from(port) * 7919, ack: 0 }
    }

    /// A frame from this peer (or from `mac`, forged) with `flags`, at `seq` + `off`.
    fn frame_from(&self, mac: [u8; 6], flags: u8, off: u32, payload: &[u8]) -> Vec<u8> {
        let mut t = vec![0u8; 20 + payload.len()];
        t[0..2].copy_from_slice(&self.port.to_be_bytes());
        t[2..4].copy_from_slice(&80u16.to_be_bytes());
        t[4..8].copy_from_slice(&self.seq.wrapping_add(off).to_be_bytes());
        t[8..12].copy_from_slice(&self.ack.to_be_bytes());
        t[12] = 5 << 4;
        t[13] = flags;
        t[14..16].copy_from_slice(&65535u16.to_be_bytes());
        t[20..].copy_from_slice(payload);
        TcpPacket::new_unchecked(&mut t[..]).fill_checksum(&IpAddress::V4(self.ip), &IpAddress::V4(US4));
        eth(US_MAC, mac, 0x0800, &ipv4(self.ip, US4, 6, 64, &t))
    }

    fn frame(&self, flags: u8, off: u32, payload: &[u8]) -> Vec<u8> {
        self.frame_from(self.mac, flags, off, payload)
    }
}

/// The node under test with its clock and stats.
struct Bench {
    pool: Mempool,
    node: TcpNode,
    st: NodeStats,
    now: u64,
}

/// What the node sent: (destination MAC, flags, seq, ack, dst port, payload).
type Sent = ([u8; 6], u8, u32, u32, u16, Vec<u8>);

impl Bench {
    fn new(pool: Mempool, cfg: TcpConfig) -> Bench {
        let node = TcpNode::new(cfg, pool.clone()).unwrap();
        let st = stats(&node);
        Bench { pool, node, st, now: 1 }
    }

    /// Feeds `frames` (in bursts) at the current time and returns what the node sent.
    fn feed(&mut self, frames: &[Vec<u8>]) -> Vec<Sent> {
        let mut sent = Vec::new();
        for chunk in frames.chunks(32) {
            let mut b = crate::tests::burst(&self.pool, chunk);
            call(&mut self.node, &self.st, &mut b, self.now);
            sent.extend(drain(&mut b));
        }
        if frames.is_empty() {
            let mut b = Burst::new();
            call(&mut self.node, &self.st, &mut b, self.now);
            sent.extend(drain(&mut b));
        }
        sent
    }

    /// Advances the clock by `d` in 10 ms polls; returns what was sent.
    fn advance(&mut self, d: Duration) -> Vec<Sent> {
        let end = self.now + d.as_nanos() as u64;
        let mut sent = Vec::new();
        while self.now < end {
            self.now += 10_000_000;
            sent.extend(self.feed(&[]));
        }
        sent
    }

    /// Opens a connection from `p` (SYN, SYN-ACK, ACK).
    fn connect(&mut self, p: &mut Peer) -> bool {
        let out = self.feed(&[p.frame(0x02, 0, &[])]);
        let Some(synack) = out.iter().find(|s| s.4 == p.port && s.1 & 0x12 == 0x12) else { return false };
        p.seq = p.seq.wrapping_add(1);
        p.ack = synack.2.wrapping_add(1);
        self.feed(&[p.frame(0x10, 0, &[])]);
        true
    }

    fn counter(&self, name: &str) -> u64 {
        counter(&self.st, name)
    }

    fn in_use(&self) -> u32 {
        self.pool.stats().in_use
    }
}

fn drain(b: &mut Burst) -> Vec<Sent> {
    let out = (0..b.len())
        .map(|i| {
            let d = b.data(i);
            let mut mac = [0u8; 6];
            mac.copy_from_slice(&d[0..6]);
            let tcp = TcpPacket::new_checked(&d[34..]).unwrap();
            let payload = tcp.payload().to_vec();
            (mac, d[34 + 13], tcp.seq_number(), tcp.ack_number(), tcp.dst_port(), payload)
        })
        .collect();
    b.free_all();
    out
}

#[test]
fn small_out_of_order_segments_from_many_connections_stay_within_the_pool_share() {
    let size = 4096;
    let mut b = Bench::new(pool(size), server_cfg(None, limits()));
    let mut peers: Vec<Peer> = (0..40).map(|i| Peer::new(Ipv4Addr::new(198, 18, 1, i + 1), 40000)).collect();
    for p in &mut peers {
        assert!(b.connect(p));
    }
    let base = b.in_use();
    let share = size / 2;
    let mut max = 0;
    // Each connection: 200 one-byte segments just beyond a one-byte hole (8,000
    // packet buffers if held as they came: twice the pool).
    for round in 0..200u32 {
        let frames: Vec<Vec<u8>> = peers.iter().map(|p| p.frame(0x18, 2 + round, b"x")).collect();
        b.feed(&frames);
        max = max.max(b.in_use());
    }
    assert!(max <= share, "in use {max} of {size} (share {share})");
    assert!(b.counter("rcv_collapsed") > 0);
    let held_before = b.node.rx_held;
    assert!(held_before > 0);
    // A request still gets its answer while the attack holds its memory.
    let mut c = Peer::new(PEER4, 50000);
    assert!(b.connect(&mut c));
    let out = b.feed(&[c.frame(0x18, 0, b"GET /obj HTTP/1.1\r\nHost: x\r\n\r\n")]);
    let body: usize = out.iter().filter(|s| s.4 == 50000).map(|s| s.5.len()).sum();
    assert!(body > 1000, "the response came ({body} bytes)");
    // The header timeout ends the attackers' connections; their buffers come back.
    b.advance(Duration::from_secs(3));
    assert!(b.counter("header_timeouts") >= 40, "{}", b.counter("header_timeouts"));
    assert_eq!(b.node.rx_held, 0);
    assert!(b.in_use() <= base, "in use {} after the timeouts, {base} before the attack", b.in_use());
    // Unanswered, their FINs end with the send timeout.
    b.advance(Duration::from_secs(5));
    assert!(b.counter("send_timeouts") >= 40, "{}", b.counter("send_timeouts"));
    drop(b.node);
    assert_eq!(b.pool.stats().in_use, 0);
}

#[test]
fn a_head_that_never_ends_gets_408_and_an_idle_keepalive_connection_is_closed() {
    let mut b = Bench::new(pool(512), server_cfg(None, limits()));
    // Slowloris: a header byte every 500 ms.
    let mut slow = Peer::new(PEER4, 40001);
    assert!(b.connect(&mut slow));
    let head = b"GET / HTTP/1.1\r\nHost: x\r\nX-a: b\r\n";
    let mut sent408 = false;
    for (i, byte) in head.iter().enumerate() {
        let out = b.feed(&[slow.frame(0x18, i as u32, &[*byte])]);
        let out: Vec<Sent> = out.into_iter().chain(b.advance(Duration::from_millis(500))).collect();
        if out.iter().any(|s| s.5.starts_with(b"HTTP/1.1 408")) {
            sent408 = true;
            // The head began with the connection: closed 2 s after it opened.
            assert!((2..=4).contains(&i), "closed after {i} bytes");
            break;
        }
    }
    assert!(sent408);
    assert_eq!(b.counter("header_timeouts"), 1);
    // Keep-alive: one request answered, then silence.
    let mut ka = Peer::new(PEER4, 40002);
    assert!(b.connect(&mut ka));
    let req = b"GET /empty HTTP/1.1\r\nHost: x\r\n\r\n";
    let out = b.feed(&[ka.frame(0x18, 0, req)]);
    let resp = out.iter().find(|s| s.4 == 40002 && !s.5.is_empty()).expect("a response");
    assert!(resp.5.starts_with(b"HTTP/1.1 200"));
    ka.seq = ka.seq.wrapping_add(req.len() as u32);
    ka.ack = resp.2.wrapping_add(resp.5.len() as u32);
    b.feed(&[ka.frame(0x10, 0, &[])]);
    let out = b.advance(Duration::from_millis(2500));
    assert!(!out.iter().any(|s| s.4 == 40002 && s.1 & 0x01 != 0), "no FIN before keepalive_timeout");
    let out = b.advance(Duration::from_millis(1000));
    assert!(out.iter().any(|s| s.4 == 40002 && s.1 & 0x01 != 0), "FIN after keepalive_timeout");
    assert_eq!(b.counter("keepalive_timeouts"), 1);
}

#[test]
fn a_forged_segment_does_not_redirect_a_connection() {
    let mut b = Bench::new(pool(512), server_cfg(None, limits()));
    let mut c = Peer::new(PEER4, 40003);
    assert!(b.connect(&mut c));
    let evil = [0x02, 0, 0, 0, 0, 0x66];
    // Off-path guesses with the client's address and ports, from another MAC.
    let forged: Vec<Vec<u8>> = (0..8u32)
        .map(|i| {
            let mut f = c.frame_from(evil, 0x18, 0x4000_0000 + i * 1000, b"GET /obj HTTP/1.1\r\n\r\n");
            f[14 + 20 + 8..14 + 20 + 12].copy_from_slice(&0x1234_5678u32.to_be_bytes());
            let mut t = f[34..].to_vec();
            TcpPacket::new_unchecked(&mut t[..]).fill_checksum(&IpAddress::V4(PEER4), &IpAddress::V4(US4));
            f[34..].copy_from_slice(&t);
            f
        })
        .collect();
    let out = b.feed(&forged);
    assert!(out.iter().all(|s| s.0 == PEER_MAC), "answers go to the client, not the forger");
    assert!(b.counter("neigh_refused") > 0);
    // And so does the real client's response.
    let out = b.feed(&[c.frame(0x18, 0, b"GET /obj HTTP/1.1\r\nHost: x\r\n\r\n")]);
    let data: Vec<&Sent> = out.iter().filter(|s| !s.5.is_empty()).collect();
    assert!(!data.is_empty());
    assert!(data.iter().all(|s| s.0 == PEER_MAC));
    // A SYN from a new address names its MAC (no connection to protect).
    let mut n = Peer::new(Ipv4Addr::new(198, 18, 0, 77), 40004);
    n.mac = evil;
    assert!(b.connect(&mut n));
}

#[test]
fn one_address_holds_at_most_max_per_peer_connections() {
    let cap = TcpLimits { max_per_peer: 3, ..limits() };
    let mut b = Bench::new(pool(512), server_cfg(None, cap));
    let opened: usize = (0..5).filter(|i| b.connect(&mut Peer::new(PEER4, 41000 + i))).count();
    assert_eq!(opened, 3);
    assert_eq!(b.counter("peer_capped"), 2);
    assert!(b.connect(&mut Peer::new(Ipv4Addr::new(198, 18, 0, 9), 41000)), "another address is not capped");
}

#[test]
fn neighbour_entries_are_bounded_and_evicted_when_unused() {
    let cap = TcpLimits { max_neighbours: 16, ..limits() };
    let mut b = Bench::new(pool(512), server_cfg(None, cap));
    let mut c = Peer::new(PEER4, 40005);
    assert!(b.connect(&mut c));
    // SYNs from 100 addresses (their handshakes are left unfinished).
    let syns: Vec<Vec<u8>> =
        (0..100u8).map(|i| Peer::new(Ipv4Addr::new(198, 19, 0, i), 40006).frame(0x02, 0, &[])).collect();
    b.feed(&syns);
    assert!(b.node.wire.neigh.len() <= 16 + 1);
    assert!(b.counter("neigh_evicted") > 0);
    assert_eq!(b.node.wire.neigh.get(&IpAddress::V4(PEER4)), Some(&PEER_MAC), "an address with a connection stays");
}

#[test]
fn files_are_served_from_beneath_the_root_only() {
    let dir = std::env::temp_dir().join(format!("ironpath-beneath-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let root = dir.join("www");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::write(dir.join("secret"), "outside").unwrap();
    std::fs::write(root.join("sub/page"), "inside").unwrap();
    std::fs::write(root.join(".git/config"), "git").unwrap();
    std::fs::write(root.join(".env"), "env").unwrap();
    let link = |target: &str, name: &str| std::os::unix::fs::symlink(target, root.join(name)).unwrap();
    link("/etc/passwd", "passwd");
    link("../secret", "up");
    link(&dir.join("secret").display().to_string(), "abs");
    link("sub/page", "inner");
    link("sub", "subdir");
    let mut b = Bench::new(pool(512), server_cfg(Some(root.clone()), limits()));
    let mut status = |path: &str, port: u16| {
        let mut p = Peer::new(PEER4, port);
        assert!(b.connect(&mut p));
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
        let out = b.feed(&[p.frame(0x18, 0, req.as_bytes())]);
        let resp: Vec<u8> = out.iter().filter(|s| s.4 == port).flat_map(|s| s.5.clone()).collect();
        let text = String::from_utf8_lossy(&resp).into_owned();
        (text.get(9..12).unwrap_or("").to_owned(), text)
    };
    for (path, code, port) in [
        ("/sub/page", "200", 42001),
        ("/inner", "200", 42002),
        ("/subdir/page", "200", 42003),
        ("/passwd", "404", 42004),
        ("/up", "404", 42005),
        ("/abs", "404", 42006),
        ("/.git/config", "404", 42007),
        ("/.env", "404", 42008),
        ("/sub/%2e%2e/../secret", "403", 42009),
    ] {
        let (got, text) = status(path, port);
        assert_eq!(got, code, "{path}: {text}");
        assert!(!text.contains("outside") && !text.contains("root:") && !text.contains("git\n"), "{path}: {text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn keepalive_requests_do_not_pile_up_timer_entries() {
    let mut b = Bench::new(pool(512), server_cfg(None, TcpLimits::default()));
    let mut p = Peer::new(PEER4, 40009);
    assert!(b.connect(&mut p));
    let req = b"GET /empty HTTP/1.1\r\nHost: x\r\n\r\n";
    for _ in 0..1000 {
        let out = b.feed(&[p.frame(0x18, 0, req)]);
        let resp = out.iter().find(|s| s.4 == 40009 && !s.5.is_empty()).expect("a response");
        p.seq = p.seq.wrapping_add(req.len() as u32);
        p.ack = resp.2.wrapping_add(resp.5.len() as u32);
        // The response acknowledged: the connection is idle, its keep-alive clock runs.
        b.feed(&[p.frame(0x10, 0, &[])]);
        b.now += 10_000_000;
    }
    // Each request moved the keep-alive deadline 75 s on and the send timeout 4 s:
    // one entry waits for them (the engine's shorter timers leave a few more).
    assert!(b.node.timers.len() < 100, "{} timer entries after 1000 requests", b.node.timers.len());
}
