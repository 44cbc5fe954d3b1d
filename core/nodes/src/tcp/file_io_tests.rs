//! The `tcp` node serving files through its file-I/O threads, frame by frame: a slow
//! file holds up no other connection, pipelined responses keep their order while one
//! waits for its file, a connection that goes while its I/O is under way leaves
//! nothing charged nor open, the request queue is bounded per peer and per node, a
//! cached file costs no I/O, and I/O slower than `header_timeout` is a 503.

use super::limits_tests::{limits, server_cfg, Bench, Peer, Sent};
use super::*;
use crate::tests::pool;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

fn www(tag: &str, files: &[(&str, &[u8])]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ironpath-fileio-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, data) in files {
        std::fs::write(dir.join(name), data).unwrap();
    }
    dir
}

/// A client: its endpoint and what it received, in order.
struct Client {
    p: Peer,
    got: Vec<u8>,
}

impl Client {
    fn new(ip: Ipv4Addr, port: u16) -> Client {
        Client { p: Peer::new(ip, port), got: Vec::new() }
    }

    /// Its request for each of `paths`, in one segment.
    fn get(&mut self, paths: &[&str]) -> Vec<u8> {
        let req: String = paths.iter().map(|p| format!("GET {p} HTTP/1.1\r\nHost: x\r\n\r\n")).collect();
        let f = self.p.frame(0x18, 0, req.as_bytes());
        self.p.seq = self.p.seq.wrapping_add(req.len() as u32);
        f
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.got).into_owned()
    }
}

/// Hands each client what the node sent it, in order (acknowledged with its next frame).
fn take(out: &[Sent], clients: &mut [&mut Client]) {
    for s in out.iter().filter(|s| !s.5.is_empty()) {
        for c in clients.iter_mut().filter(|c| c.p.port == s.4 && c.p.ack == s.2) {
            c.got.extend_from_slice(&s.5);
            c.p.ack = c.p.ack.wrapping_add(s.5.len() as u32);
        }
    }
}

/// `n` polls, each with an ACK from every client of what it received so far; what
/// they sent handed to `clients`.
fn polls(b: &mut Bench, n: usize, clients: &mut [&mut Client]) {
    for _ in 0..n {
        let acks: Vec<Vec<u8>> = clients.iter().map(|c| c.p.frame(0x10, 0, &[])).collect();
        let out = b.feed(&acks);
        take(&out, clients);
    }
}

fn io(b: &Bench) -> &super::files::Io {
    b.node.env.io.as_ref().expect("file I/O")
}

#[test]
fn a_request_for_a_slow_file_holds_up_no_other_connection() {
    let dir = www("slow", &[("slow", b"SLOW-BODY"), ("fast", b"FAST-BODY")]);
    let lim = TcpLimits { file_threads: 2, ..limits() };
    let mut b = Bench::new(pool(512), server_cfg(Some(dir.clone()), lim));
    // The threads: as a file on a disk that does not answer.
    io(&b).exec.hold().name("slow", true);
    let (mut a, mut o, mut f) = (
        Client::new(Ipv4Addr::new(198, 18, 0, 1), 43001),
        Client::new(Ipv4Addr::new(198, 18, 0, 1), 43002),
        Client::new(Ipv4Addr::new(198, 18, 0, 1), 43003),
    );
    for c in [&mut a, &mut o, &mut f] {
        assert!(b.connect(&mut c.p));
    }
    let out = b.feed(&[a.get(&["/slow"])]);
    take(&out, &mut [&mut a, &mut o, &mut f]);
    let out = b.feed(&[o.get(&["/obj"])]);
    take(&out, &mut [&mut a, &mut o, &mut f]);
    assert!(o.text().starts_with("HTTP/1.1 200"), "an object, at once: {}", o.text());
    let out = b.feed(&[f.get(&["/fast"])]);
    take(&out, &mut [&mut a, &mut o, &mut f]);
    // The other thread opens and reads the other file meanwhile.
    let t = Instant::now();
    while !f.text().ends_with("FAST-BODY") && t.elapsed() < Duration::from_secs(5) {
        polls(&mut b, 1, &mut [&mut a, &mut o, &mut f]);
        std::thread::sleep(Duration::from_micros(200));
    }
    assert!(f.text().starts_with("HTTP/1.1 200") && f.text().ends_with("FAST-BODY"), "{}", f.text());
    assert!(a.got.is_empty(), "the slow file's request waits: {}", a.text());
    assert!(b.counter("file_io") >= 3, "the slow open, the fast open and read");
    io(&b).exec.hold().name("slow", false);
    let t = Instant::now();
    while !a.text().ends_with("SLOW-BODY") && t.elapsed() < Duration::from_secs(5) {
        polls(&mut b, 1, &mut [&mut a, &mut o, &mut f]);
        std::thread::sleep(Duration::from_micros(200));
    }
    assert!(a.text().starts_with("HTTP/1.1 200") && a.text().ends_with("SLOW-BODY"), "{}", a.text());
    assert_eq!(b.counter("http_errors"), 0);
    drop(b);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn pipelined_responses_keep_their_order_while_one_waits_for_its_file() {
    let dir = www("order", &[("slow", b"SLOW-BODY"), ("fast", b"FAST-BODY")]);
    let mut b = Bench::new(pool(512), server_cfg(Some(dir.clone()), limits()));
    io(&b).exec.hold().name("slow", true);
    let (mut a, mut c) =
        (Client::new(Ipv4Addr::new(198, 18, 0, 1), 43101), Client::new(Ipv4Addr::new(198, 18, 0, 1), 43102));
    assert!(b.connect(&mut a.p) && b.connect(&mut c.p));
    let out = b.feed(&[a.get(&["/slow", "/obj", "/fast"]), c.get(&["/fast"])]);
    take(&out, &mut [&mut a, &mut c]);
    polls(&mut b, 4, &mut [&mut a, &mut c]);
    assert!(c.text().ends_with("FAST-BODY"), "another connection is answered meanwhile: {}", c.text());
    assert!(a.got.is_empty(), "nothing goes before the first response: {}", a.text());
    assert!(b.counter("file_io_conn_held") > 0, "the later requests wait unparsed");
    io(&b).exec.hold().name("slow", false);
    polls(&mut b, 4, &mut [&mut a, &mut c]);
    let text = a.text();
    let (slow, fast) = (text.find("SLOW-BODY").expect("slow"), text.find("FAST-BODY").expect("fast"));
    assert_eq!(text.matches("HTTP/1.1 200").count(), 3, "{text}");
    assert!(slow < fast && text[slow..fast].contains("HTTP/1.1 200"), "slow, the object, then fast: {text}");
    drop(b);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_connection_gone_before_its_io_completes_leaves_nothing_charged_nor_open() {
    use super::files::FILE_PIECE;
    let big = vec![3u8; 4 * FILE_PIECE];
    let dir = www("gone", &[("big", &big), ("other", b"other")]);
    // Streamed (over the cache): its pieces are charged to the connection that reads.
    let lim = TcpLimits { file_cache: 0, ..limits() };
    let mut b = Bench::new(pool(512), server_cfg(Some(dir.clone()), lim));
    io(&b).exec.hold().reads(true);
    let mut a = Client::new(Ipv4Addr::new(198, 18, 0, 1), 43201);
    assert!(b.connect(&mut a.p));
    let out = b.feed(&[a.get(&["/big"])]);
    take(&out, &mut [&mut a]);
    polls(&mut b, 2, &mut [&mut a]);
    assert!(a.got.is_empty(), "the head waits for the body's first bytes: {}", a.text());
    assert_eq!(io(&b).exec.outstanding(), 1, "its first piece is being read");
    assert!(b.node.memory_held() > FILE_PIECE as u64, "and charged to it: {}", b.node.memory_held());
    // The peer resets the connection while the read is under way.
    b.feed(&[a.p.frame(0x04, 0, &[])]);
    assert_eq!(b.node.connections(), 0);
    assert_eq!(b.node.memory_held(), 0, "uncharged with the connection");
    assert_eq!(b.node.peers.len(), 1, "its peer stays while its read is outstanding");
    io(&b).exec.hold().reads(false);
    polls(&mut b, 2, &mut []);
    assert_eq!(b.node.peers.len(), 0, "the completion dropped, the peer forgotten");
    assert_eq!(b.node.env.sites[0].files.descriptors(), 0, "the body went with the read");
    assert_eq!(io(&b).exec.open_files(), 0, "and the threads closed its file");
    // An open under way when its connection goes: the file is still opened (and cached).
    io(&b).exec.hold().name("other", true);
    let mut c = Client::new(Ipv4Addr::new(198, 18, 0, 1), 43202);
    assert!(b.connect(&mut c.p));
    b.feed(&[c.get(&["/other"])]);
    b.feed(&[c.p.frame(0x04, 0, &[])]);
    io(&b).exec.hold().name("other", false);
    polls(&mut b, 2, &mut []);
    assert_eq!((b.node.connections(), b.node.peers.len(), b.node.memory_held()), (0, 0, 0));
    assert_eq!(io(&b).exec.outstanding(), 0);
    drop(b);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn file_requests_are_bounded_per_peer_and_per_node_and_all_answered_later() {
    let names: Vec<String> = (0..8).map(|i| format!("f{i}")).collect();
    let files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), n.as_bytes())).collect();
    let dir = www("bound", &files);
    // Four outstanding at most, one a peer (25%).
    let lim = TcpLimits { file_io_queue: 4, ..limits() };
    let mut b = Bench::new(pool(1024), server_cfg(Some(dir.clone()), lim));
    for n in &names {
        io(&b).exec.hold().name(n, true);
    }
    // One peer with three connections, five peers with one.
    let mut clients: Vec<Client> = (0..3).map(|i| Client::new(Ipv4Addr::new(198, 18, 0, 1), 43301 + i)).collect();
    clients.extend((0..5).map(|i| Client::new(Ipv4Addr::new(198, 18, 5, 1 + i as u8), 43401 + i)));
    for (c, n) in clients.iter_mut().zip(&names) {
        assert!(b.connect(&mut c.p));
        b.feed(&[c.get(&[&format!("/{n}")])]);
    }
    assert_eq!(io(&b).exec.outstanding(), 4, "the node's bound");
    assert!(b.counter("file_io_peer_full") > 0, "the peer's second and third wait");
    assert!(b.counter("file_io_full") > 0, "the last peers wait for room");
    for n in &names {
        io(&b).exec.hold().name(n, false);
    }
    let mut refs: Vec<&mut Client> = clients.iter_mut().collect();
    polls(&mut b, 20, &mut refs);
    for (c, n) in clients.iter().zip(&names) {
        assert!(c.text().starts_with("HTTP/1.1 200") && c.text().ends_with(n.as_str()), "{n}: {}", c.text());
    }
    assert_eq!(b.counter("http_errors"), 0);
    drop(b);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_cached_file_costs_no_io_and_io_slower_than_header_timeout_is_a_503() {
    let dir = www("timeout", &[("f", b"cached file"), ("slow", b"slow")]);
    let mut b = Bench::new(pool(512), server_cfg(Some(dir.clone()), limits()));
    let mut a = Client::new(Ipv4Addr::new(198, 18, 0, 1), 43501);
    assert!(b.connect(&mut a.p));
    for i in 0..50 {
        let out = b.feed(&[a.get(&["/f"])]);
        take(&out, &mut [&mut a]);
        if i == 0 {
            polls(&mut b, 2, &mut [&mut a]);
        }
    }
    assert_eq!(a.text().matches("cached file").count(), 50, "{}", a.text());
    assert_eq!(b.counter("file_io"), 2, "an open and a read, then hits from memory");
    io(&b).exec.hold().name("slow", true);
    a.got.clear();
    let out = b.feed(&[a.get(&["/slow"])]);
    take(&out, &mut [&mut a]);
    let out = b.advance(Duration::from_millis(2500));
    take(&out, &mut [&mut a]);
    assert!(a.text().starts_with("HTTP/1.1 503"), "{}", a.text());
    assert_eq!(b.counter("file_io_timeouts"), 1);
    assert_eq!(b.counter("fd_exhausted"), 0, "not a lack of descriptors");
    io(&b).exec.hold().name("slow", false);
    a.got.clear();
    let out = b.feed(&[a.get(&["/obj"])]);
    take(&out, &mut [&mut a]);
    assert!(a.text().starts_with("HTTP/1.1 200"), "the connection goes on: {}", a.text());
    drop(b);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_piece_slower_than_header_timeout_resets_the_response() {
    use super::files::FILE_PIECE;
    let big = vec![5u8; 3 * FILE_PIECE];
    let dir = www("late", &[("big", &big)]);
    let mut b = Bench::new(pool(1024), server_cfg(Some(dir.clone()), limits()));
    let mut a = Client::new(Ipv4Addr::new(198, 18, 0, 1), 43601);
    assert!(b.connect(&mut a.p));
    let out = b.feed(&[a.get(&["/big"])]);
    take(&out, &mut [&mut a]);
    polls(&mut b, 3, &mut [&mut a]);
    assert!(a.text().starts_with("HTTP/1.1 200"), "{}", &a.text()[..a.text().len().min(40)]);
    // The disk stops answering: the next piece does not come.
    io(&b).exec.hold().reads(true);
    let mut rst = false;
    for _ in 0..400 {
        b.now += 10_000_000;
        let acks = [a.p.frame(0x10, 0, &[])];
        let out = b.feed(&acks);
        rst |= out.iter().any(|s| s.4 == a.p.port && s.1 & 0x04 != 0);
        take(&out, &mut [&mut a]);
    }
    assert!(rst, "reset: a body cut short must not look complete");
    assert!(a.got.len() < 3 * FILE_PIECE);
    assert_eq!(b.counter("file_io_timeouts"), 1);
    assert_eq!(b.node.connections(), 0);
    io(&b).exec.hold().reads(false);
    polls(&mut b, 2, &mut []);
    assert_eq!((b.node.peers.len(), b.node.memory_held(), io(&b).exec.outstanding()), (0, 0, 0));
    drop(b);
    std::fs::remove_dir_all(&dir).unwrap();
}
