//! A hostile peer against a `tcp` node, frame by frame on a virtual clock: small
//! out-of-order segments across many connections (the pool share holds, pieces are
//! collapsed, timeouts give every buffer back), request heads that never end, idle
//! keep-alive connections, forged sources, too many connections from one address,
//! and a web root with links and dot-files.

use super::*;
use crate::tests::{call, counter, eth, ipv4, ipv6, pool, stats, PEER4, PEER_MAC, US4, US6, US_MAC};
use ironpath_graph::NodeStats;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

/// TSC ticks per second of these tests (a virtual nanosecond clock).
const HZ: u64 = 1_000_000_000;

pub(super) fn limits() -> TcpLimits {
    TcpLimits {
        header_timeout: Some(Duration::from_secs(2)),
        keepalive_timeout: Some(Duration::from_secs(3)),
        // File I/O at the next poll, on this thread: deterministic.
        file_threads: 0,
        ..TcpLimits::default()
    }
}

pub(super) fn server_cfg(root: Option<std::path::PathBuf>, limits: TcpLimits) -> TcpConfig {
    TcpConfig {
        mac: US_MAC,
        addresses: vec![IpAddress::V4(US4), IpAddress::V6(US6)],
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
pub(super) struct Peer {
    mac: [u8; 6],
    ip: IpAddress,
    pub(super) port: u16,
    /// Next sequence number to send.
    pub(super) seq: u32,
    /// Next sequence number expected from the node.
    pub(super) ack: u32,
}

impl Peer {
    pub(super) fn new(ip: Ipv4Addr, port: u16) -> Peer {
        Peer { mac: PEER_MAC, ip: IpAddress::V4(ip), port, seq: 1_000_000 + u32::from(port) * 7919, ack: 0 }
    }

    fn new6(ip: Ipv6Addr, port: u16) -> Peer {
        Peer { ip: IpAddress::V6(ip), ..Peer::new(PEER4, port) }
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
        match self.ip {
            IpAddress::V4(ip) => {
                TcpPacket::new_unchecked(&mut t[..]).fill_checksum(&self.ip, &IpAddress::V4(US4));
                eth(US_MAC, mac, 0x0800, &ipv4(ip, US4, 6, 64, &t))
            }
            IpAddress::V6(ip) => {
                TcpPacket::new_unchecked(&mut t[..]).fill_checksum(&self.ip, &IpAddress::V6(US6));
                eth(US_MAC, mac, 0x86dd, &ipv6(ip, US6, 6, 64, &t))
            }
        }
    }

    pub(super) fn frame(&self, flags: u8, off: u32, payload: &[u8]) -> Vec<u8> {
        self.frame_from(self.mac, flags, off, payload)
    }
}

/// The node under test with its clock and stats.
pub(super) struct Bench {
    pool: Mempool,
    pub(super) node: TcpNode,
    st: NodeStats,
    pub(super) now: u64,
}

/// What the node sent: (destination MAC, flags, seq, ack, dst port, payload).
pub(super) type Sent = ([u8; 6], u8, u32, u32, u16, Vec<u8>);

impl Bench {
    pub(super) fn new(pool: Mempool, cfg: TcpConfig) -> Bench {
        let node = TcpNode::new(cfg, pool.clone()).unwrap();
        let st = stats(&node);
        Bench { pool, node, st, now: 1 }
    }

    /// Feeds `frames` (in bursts) at the current time and returns what the node sent.
    pub(super) fn feed(&mut self, frames: &[Vec<u8>]) -> Vec<Sent> {
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
    pub(super) fn advance(&mut self, d: Duration) -> Vec<Sent> {
        let end = self.now + d.as_nanos() as u64;
        let mut sent = Vec::new();
        while self.now < end {
            self.now += 10_000_000;
            sent.extend(self.feed(&[]));
        }
        sent
    }

    /// Opens a connection from `p` (SYN, SYN-ACK, ACK).
    pub(super) fn connect(&mut self, p: &mut Peer) -> bool {
        let out = self.feed(&[p.frame(0x02, 0, &[])]);
        let Some(synack) = out.iter().find(|s| s.4 == p.port && s.1 & 0x12 == 0x12) else { return false };
        p.seq = p.seq.wrapping_add(1);
        p.ack = synack.2.wrapping_add(1);
        self.feed(&[p.frame(0x10, 0, &[])]);
        true
    }

    pub(super) fn counter(&self, name: &str) -> u64 {
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
            let l4 = if d[12..14] == [0x86, 0xdd] { 54 } else { 34 };
            let tcp = TcpPacket::new_checked(&d[l4..]).unwrap();
            let payload = tcp.payload().to_vec();
            (mac, d[l4 + 13], tcp.seq_number(), tcp.ack_number(), tcp.dst_port(), payload)
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
        let mut out = b.feed(&[p.frame(0x18, 0, req.as_bytes())]);
        for _ in 0..2 {
            out.extend(b.feed(&[])); // a file's open, then its read, complete at the next poll
        }
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

/// Opens `p`'s connection in two steps: its SYN now (returns whether a SYN-ACK came),
/// its ACK with [`finish`].
fn syn(b: &mut Bench, p: &mut Peer) -> bool {
    let out = b.feed(&[p.frame(0x02, 0, &[])]);
    let Some(synack) = out.iter().find(|s| s.4 == p.port && s.1 & 0x12 == 0x12) else { return false };
    p.seq = p.seq.wrapping_add(1);
    p.ack = synack.2.wrapping_add(1);
    true
}

/// The handshake's last ACK of `p`; returns what the node sent.
fn finish(b: &mut Bench, p: &Peer) -> Vec<Sent> {
    b.feed(&[p.frame(0x10, 0, &[])])
}

#[test]
fn one_peer_over_its_share_is_pushed_back_and_another_peer_is_not() {
    let mut b = Bench::new(pool(4096), server_cfg(None, TcpLimits { header_timeout: None, ..limits() }));
    let attacker = Ipv4Addr::new(198, 18, 1, 1);
    let mut peers: Vec<Peer> = (0..40).map(|i| Peer::new(attacker, 40000 + i)).collect();
    for p in &mut peers {
        assert!(b.connect(p));
    }
    let plimit = b.node.peer_limit;
    assert!(plimit > 0 && plimit < b.node.mem_limit);
    // Full-sized segments beyond a hole: they cannot be collapsed away, and 40
    // connections x 100 of them would pin 8,000 packet buffers.
    let data = [b'x'; 1400];
    let mut max = 0;
    for round in 0..100u32 {
        let frames: Vec<Vec<u8>> = peers.iter().map(|p| p.frame(0x18, 1 + round * 1400, &data)).collect();
        b.feed(&frames);
        max = max.max(b.node.peers.usage(IpAddress::V4(attacker)).1);
    }
    assert!(max <= plimit + plimit / 4 + 4096, "the peer held {max}, its share is {plimit}");
    assert!(b.counter("peer_mem_dropped") > 0);
    assert_eq!(b.counter("mem_dropped"), 0, "the others' budget was not touched");
    // Its new connections are refused while it is over its share.
    assert!(!b.connect(&mut Peer::new(attacker, 45000)));
    assert_eq!(b.counter("peer_mem_refused"), 1);
    // Another peer connects and is answered.
    let mut c = Peer::new(PEER4, 50000);
    assert!(b.connect(&mut c));
    let out = b.feed(&[c.frame(0x18, 0, b"GET /obj HTTP/1.1\r\nHost: x\r\n\r\n")]);
    let body: usize = out.iter().filter(|s| s.4 == 50000).map(|s| s.5.len()).sum();
    assert!(body > 1000, "the response came ({body} bytes)");
}

#[test]
fn max_per_peer_counts_an_ipv6_64_as_one_peer() {
    let cap = TcpLimits { max_per_peer: 3, ..limits() };
    let mut b = Bench::new(pool(512), server_cfg(None, cap));
    let opened = (1..=5u16)
        .filter(|&i| b.connect(&mut Peer::new6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0x77, i), 41000 + i)))
        .count();
    assert_eq!(opened, 3, "five addresses of one /64 are one peer");
    assert_eq!(b.counter("peer_capped"), 2);
    assert!(b.connect(&mut Peer::new6(Ipv6Addr::new(0xfd00, 0, 0, 1, 0, 0, 0, 1), 41000)), "another /64 is not capped");
    assert_eq!(b.node.connections(), 4);
}

#[test]
fn handshakes_completed_by_syn_cookies_pass_the_same_limits() {
    let mut cfg = server_cfg(None, TcpLimits { max_per_peer: 2, ..limits() });
    cfg.listen[0].backlog = 1;
    cfg.max_connections = 3;
    let mut b = Bench::new(pool(512), cfg);
    let (a, c2, c3) = (PEER4, Ipv4Addr::new(198, 18, 0, 12), Ipv4Addr::new(198, 18, 0, 13));
    // The first SYN fills the backlog; the others are answered with cookies (nothing kept).
    let mut p: Vec<Peer> =
        [(a, 1), (a, 2), (a, 3), (c2, 4), (c3, 5)].iter().map(|&(ip, i)| Peer::new(ip, 43000 + i)).collect();
    for q in &mut p {
        assert!(syn(&mut b, q));
    }
    assert_eq!(b.counter("syn_cookies_sent"), 4);
    // The handshakes end: `a` holds two connections at most, the table three.
    let mut resets = Vec::new();
    for q in &p {
        let out = finish(&mut b, q);
        resets.extend(out.iter().filter(|s| s.4 == q.port && s.1 & 0x04 != 0).map(|s| s.4));
    }
    assert_eq!(b.counter("syn_cookies_valid"), 4);
    assert_eq!(b.counter("peer_capped"), 1, "the third connection of one address");
    // The table full, the fourth peer's handshake takes the place of the idlest
    // connection of the peer over its fair part (`a`, with two of three): dropped at
    // once, it gets a reset at its next segment.
    assert_eq!(b.counter("conns_reclaimed"), 1);
    assert_eq!(b.counter("syn_dropped"), 0);
    assert_eq!(b.node.connections(), 3);
    assert_eq!(resets, [43003], "the refused handshake is reset");
}

#[test]
fn pipelined_requests_are_parsed_a_bounded_number_ahead() {
    let mut b = Bench::new(pool(512), server_cfg(None, TcpLimits { max_pipeline: 4, ..limits() }));
    let mut p = Peer::new(PEER4, 44000);
    assert!(b.connect(&mut p));
    let reqs: Vec<u8> = b"GET /obj HTTP/1.1\r\nHost: x\r\n\r\n".repeat(20);
    let mut out = b.feed(&[p.frame(0x18, 0, &reqs)]);
    p.seq = p.seq.wrapping_add(reqs.len() as u32);
    let mut answered = 0;
    let mut rounds = 0;
    while answered < 20 && rounds < 20 {
        let data: Vec<&Sent> = out.iter().filter(|s| s.4 == 44000 && !s.5.is_empty()).collect();
        let heads: usize = data.iter().map(|s| s.5.windows(12).filter(|w| w == b"HTTP/1.1 200").count()).sum();
        assert!(heads <= 4, "{heads} responses out at once (max_pipeline 4)");
        answered += heads;
        // Acknowledge everything sent so far.
        if let Some(last) = data.iter().max_by_key(|s| s.2.wrapping_sub(p.ack) as i32 + s.5.len() as i32) {
            p.ack = last.2.wrapping_add(last.5.len() as u32);
        }
        out = b.feed(&[p.frame(0x10, 0, &[])]);
        rounds += 1;
    }
    assert_eq!(answered, 20);
    assert!(b.counter("pipeline_held") > 0);
    assert_eq!(b.counter("http_requests"), 20);
}

#[test]
fn under_memory_pressure_peers_keep_to_fair_parts_and_a_newcomer_is_taken() {
    let mut cfg = server_cfg(None, TcpLimits { header_timeout: None, peer_share: 100, ..limits() });
    cfg.memory_limit = 256 << 10;
    let mut b = Bench::new(pool(4096), cfg);
    let mut peers: Vec<Peer> = (0..8).map(|i| Peer::new(Ipv4Addr::new(198, 18, 2, i + 1), 40000)).collect();
    for p in &mut peers {
        assert!(b.connect(p));
    }
    // Out-of-order data the application can never read, as much as each peer may
    // send: under pressure, each keeps to 1/8 of 7/8 of the budget.
    let data = [b'y'; 1400];
    for round in 0..40u32 {
        let frames: Vec<Vec<u8>> = peers.iter().map(|p| p.frame(0x18, 1 + round * 1400, &data)).collect();
        b.feed(&frames);
    }
    let fair = (b.node.mem_limit - b.node.mem_limit / 8) / 8;
    for p in &peers {
        let held = b.node.peers.usage(p.ip).1;
        assert!(held <= fair + fair / 8 + 4096, "a peer holds {held}, its part is {fair}");
    }
    assert!(b.counter("peer_mem_dropped") > 0);
    assert!(b.node.held() < b.node.mem_limit, "{} of {}", b.node.held(), b.node.mem_limit);
    // A newcomer is taken at once and answered.
    let mut c = Peer::new(PEER4, 50002);
    assert!(b.connect(&mut c));
    assert_eq!((b.counter("mem_refused"), b.counter("peer_mem_refused")), (0, 0));
    let out = b.feed(&[c.frame(0x18, 0, b"GET /obj HTTP/1.1\r\nHost: x\r\n\r\n")]);
    assert!(out.iter().any(|s| s.4 == 50002 && s.5.starts_with(b"HTTP/1.1 200")));
}

#[test]
fn under_memory_pressure_stalled_holders_are_reset_before_a_newcomer_is_refused() {
    // One peer's many connections, its part the whole budget (alone, and peer_share
    // 100): the budget fills; stalled, the largest go first.
    let mut cfg = server_cfg(None, TcpLimits { header_timeout: None, peer_share: 100, ..limits() });
    cfg.memory_limit = 256 << 10;
    let mut b = Bench::new(pool(4096), cfg);
    let ip = Ipv4Addr::new(198, 18, 2, 1);
    let mut peers: Vec<Peer> = (0..8).map(|i| Peer::new(ip, 40000 + i)).collect();
    for p in &mut peers {
        assert!(b.connect(p));
    }
    let data = [b'y'; 1400];
    for round in 0..40u32 {
        let frames: Vec<Vec<u8>> = peers.iter().map(|p| p.frame(0x18, 1 + round * 1400, &data)).collect();
        b.feed(&frames);
    }
    assert!(b.node.held() >= b.node.mem_limit - b.node.mem_limit / 8, "{} of {}", b.node.held(), b.node.mem_limit);
    // Past a second without progress, the largest stalled holders go first and a
    // newcomer (another peer) is taken.
    b.advance(Duration::from_millis(1200));
    let mut c = Peer::new(PEER4, 50002);
    assert!(b.connect(&mut c), "{}", b.counter("mem_refused"));
    let out = b.feed(&[c.frame(0x18, 0, b"GET /obj HTTP/1.1\r\nHost: x\r\n\r\n")]);
    assert!(out.iter().any(|s| s.4 == 50002 && s.5.starts_with(b"HTTP/1.1 200")));
}

#[test]
fn a_full_connection_table_drops_the_idlest_connections_of_the_peers_over_their_part() {
    let mut cfg = server_cfg(None, TcpLimits { header_timeout: None, max_per_peer: 16, ..limits() });
    cfg.max_connections = 32;
    let mut b = Bench::new(pool(1024), cfg);
    let ip = |k: u8| Ipv4Addr::new(198, 18, 3, k);
    let open = |b: &mut Bench, k: u8, n: u16| -> Vec<Peer> {
        let mut v = Vec::new();
        for i in 0..n {
            let mut p = Peer::new(ip(k), 41000 + u16::from(k) * 100 + i);
            if b.connect(&mut p) {
                v.push(p);
            }
        }
        v
    };
    // x alone opens 16; y then only up to its part of 7/8 of the table once that is
    // reached (28 / 2 = 14); z two more: the table is full.
    let x = open(&mut b, 1, 16);
    let y = open(&mut b, 2, 16);
    let z = open(&mut b, 3, 2);
    assert_eq!((x.len(), y.len(), z.len()), (16, 14, 2));
    assert_eq!(b.counter("peer_capped"), 2);
    assert_eq!(b.node.connections(), 32);
    // One of x's connections makes progress later than the others.
    b.advance(Duration::from_millis(10));
    let out = b.feed(&[x[15].frame(0x18, 0, b"GET /obj HTTP/1.1\r\nHost: x\r\n\r\n")]);
    assert!(out.iter().any(|s| s.4 == x[15].port));
    // A newcomer: each peer over its part (28 / 3 = 9) loses its idlest; the
    // connection that made progress stays.
    let mut w = Peer::new(ip(4), 50003);
    assert!(b.connect(&mut w));
    assert_eq!(b.counter("conns_reclaimed"), 7 + 5);
    assert_eq!(b.node.connections(), 32 - 12 + 1);
    assert_eq!(b.node.peers.usage(IpAddress::V4(ip(1))).0, 9);
    assert!(b.node.flows.keys().any(|k| k.1.port == x[15].port), "the busy connection stays");
    // The table is out of pressure (21 of 32): x may open more, up to max_per_peer.
    assert!(b.connect(&mut Peer::new(ip(1), 42000)));
    assert_eq!(b.counter("peer_capped"), 2);
}

#[test]
fn a_streamed_file_costs_its_reader_the_pieces_in_flight_only() {
    use super::files::FILE_PIECE;
    let dir = std::env::temp_dir().join(format!("ironpath-stream-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let size = 16 * FILE_PIECE;
    std::fs::write(dir.join("big"), vec![7u8; size]).unwrap();
    let lim = TcpLimits { file_cache: FILE_PIECE as u64, ..limits() };
    let mut b = Bench::new(pool(4096), server_cfg(Some(dir.clone()), lim));
    let send_buffer = Config::default().send_buffer as u64;
    // Three clients (three peers), on ports 46000..46002.
    let mut readers: Vec<Peer> =
        (0..3).map(|i| Peer::new(Ipv4Addr::new(198, 18, 3, 1 + i), 46000 + u16::from(i))).collect();
    // What each reader was sent and has not taken yet: seq -> length.
    let mut unacked: Vec<std::collections::HashMap<u32, usize>> = vec![Default::default(); 3];
    let take = |out: &[Sent], unacked: &mut Vec<std::collections::HashMap<u32, usize>>| {
        for s in out.iter().filter(|s| !s.5.is_empty() && (46000..46003).contains(&s.4)) {
            unacked[usize::from(s.4 - 46000)].insert(s.2, s.5.len());
        }
    };
    for p in &mut readers {
        assert!(b.connect(p));
        let mut out = b.feed(&[p.frame(0x18, 0, b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")]);
        for _ in 0..2 {
            out.extend(b.feed(&[])); // the open, then the first read, complete at the next poll
        }
        p.seq = p.seq.wrapping_add(31);
        take(&out, &mut unacked);
    }
    // Each reader acknowledges what came in order, for most of the file.
    let (mut got, mut max_heap) = ([0usize; 3], 0);
    for _ in 0..2000 {
        b.now += 1_000_000;
        for (i, p) in readers.iter_mut().enumerate() {
            while let Some(n) = unacked[i].remove(&p.ack) {
                p.ack = p.ack.wrapping_add(n as u32);
                got[i] += n;
            }
        }
        let acks: Vec<Vec<u8>> = readers.iter().map(|p| p.frame(0x10, 0, &[])).collect();
        let out = b.feed(&acks);
        take(&out, &mut unacked);
        max_heap = max_heap.max(b.node.heap_held);
        if got.iter().all(|&g| g > size * 3 / 4) {
            break;
        }
    }
    let names =
        ["held_back", "http_errors", "alloc_failed", "tx_full", "peer_mem_dropped", "send_timeouts", "conns_closed"];
    let c: Vec<(&str, u64)> = names.iter().map(|n| (*n, b.counter(n))).collect();
    assert!(got.iter().all(|&g| g > size / 2), "{got:?} {c:?} heap {}", b.node.heap_held);
    // Never the file per reader: what each send buffer holds, and a piece or two.
    let bound = 3 * (send_buffer + 2 * FILE_PIECE as u64 + 4096);
    assert!(max_heap <= bound, "heap {max_heap} for 3 readers of a {size}-byte file (bound {bound})");
    assert!(max_heap > 0, "streamed pieces are charged");
    assert_eq!(b.counter("files_streamed"), 1, "one descriptor for the three requests");
    drop(b);
    std::fs::remove_dir_all(&dir).unwrap();
}
