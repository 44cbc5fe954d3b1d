//! The metrics endpoint (`--metrics ADDR:PORT`): `GET /metrics` over HTTP/1.1, one
//! request per connection. Every client has its own thread, so a slow or silent one
//! delays nobody else, and every resource a client holds is bounded:
//!
//! * at most [`MAX_CLIENTS`] connections at once, and at most [`MAX_PER_PEER`] of
//!   one peer (an IPv4 address, an IPv6 /64); past either, a newcomer gets the slot
//!   of the oldest connection (the peer's own, if the peer is at its bound) that has
//!   not finished sending its request, which is closed (`evicted`), or, if every
//!   one of those is waiting for its answer, is closed at once (`limit`). A peer
//!   that opens connection after connection only pushes out its own;
//! * the whole request head within [`HEAD_DEADLINE`] of the connection (a byte now
//!   and then does not extend it) and at most [`MAX_HEAD`] bytes: else `408` or
//!   `431` and closed (`deadline`, `too_large`);
//! * the reply written within [`WRITE_DEADLINE`] (else closed: `deadline`);
//! * the figures come from the thread that owns the ports through a bounded queue
//!   it polls; a full queue or no answer within the server's answer timeout gives
//!   `503` (`unanswered`). Nothing here touches an lcore.
//!
//! Each bound counts when it bites ([`super::counters`]); the counts are in every
//! scrape as `ironpath_telemetry_refused_total{endpoint="metrics",reason=...}`.

use super::counters::{Counters, Event};
use super::server::{ask, Ask, Request};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv6Addr, Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Connections held at once.
pub const MAX_CLIENTS: usize = 16;
/// Connections one peer holds at once.
pub const MAX_PER_PEER: usize = 4;
/// Longest request head (bytes, up to and with its empty line).
pub const MAX_HEAD: usize = 8192;
/// Time from the connection to the end of the request head.
pub const HEAD_DEADLINE: Duration = Duration::from_secs(3);
/// Time to write a reply.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(5);
/// Time to write a refusal (`408`, `431`) before closing.
const REFUSAL_DEADLINE: Duration = Duration::from_millis(500);

/// Why a client's exchange ended early.
#[derive(Debug, PartialEq, Eq)]
enum Cut {
    /// The client closed or reset the connection, or it was evicted.
    Closed,
    /// A deadline passed.
    Deadline,
    /// The head was longer than [`MAX_HEAD`].
    TooLarge,
}

/// A connection the endpoint holds.
struct Held {
    id: u64,
    peer: Option<IpAddr>,
    /// A second handle, to close it when it is evicted.
    stream: TcpStream,
    since: Instant,
    /// Waiting for the owning thread's answer: not evicted then.
    asking: Arc<AtomicBool>,
}

type Slots = Arc<Mutex<Vec<Held>>>;

fn lock(slots: &Slots) -> MutexGuard<'_, Vec<Held>> {
    // A client thread cannot panic while holding it; if one did, the list is
    // still consistent.
    slots.lock().unwrap_or_else(|e| e.into_inner())
}

/// Accepts scrapers on `l` until `stop`; questions go on `tx`.
pub(super) fn serve(l: TcpListener, tx: SyncSender<Request>, stop: Arc<AtomicBool>, counters: Arc<Counters>) {
    let slots: Slots = Arc::default();
    let mut next_id = 0u64;
    for s in l.incoming() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let Ok(s) = s else {
            // Out of descriptors or memory: wait rather than spin.
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        counters.count(Event::HttpClient);
        next_id += 1;
        let id = next_id;
        let Some(asking) = admit(&slots, &s, id, &counters) else { continue };
        let (tx, slots2, counters2) = (tx.clone(), slots.clone(), counters.clone());
        let spawned = std::thread::Builder::new().name("metrics-client".into()).spawn(move || {
            client(s, &asking, &tx, &counters2);
            lock(&slots2).retain(|h| h.id != id);
        });
        if spawned.is_err() {
            lock(&slots).retain(|h| h.id != id);
        }
    }
}

/// Whom a connection is charged to: its IPv4 address or its IPv6 /64.
fn peer_of(s: &TcpStream) -> Option<IpAddr> {
    Some(match s.peer_addr().ok()?.ip().to_canonical() {
        IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a) & !u128::from(u64::MAX))),
        v4 => v4,
    })
}

/// Gives `s` a slot; if all are taken, or its peer holds [`MAX_PER_PEER`], the
/// oldest connection (of that peer, in the second case) still sending its request
/// is evicted. `None` if none can be (`s` is then closed).
fn admit(slots: &Slots, s: &TcpStream, id: u64, counters: &Counters) -> Option<Arc<AtomicBool>> {
    let peer = peer_of(s);
    let mut held = lock(slots);
    let at_peer_bound = held.iter().filter(|h| h.peer == peer).count() >= MAX_PER_PEER;
    if at_peer_bound || held.len() >= MAX_CLIENTS {
        let victim = held
            .iter()
            .enumerate()
            .filter(|(_, h)| !h.asking.load(Ordering::Acquire) && (!at_peer_bound || h.peer == peer))
            .min_by_key(|(_, h)| h.since)
            .map(|(i, _)| i);
        let Some(i) = victim else {
            counters.count(Event::HttpLimit);
            return None;
        };
        // Its thread's read or write fails at once; it ends and frees nothing
        // more (the slot is gone already).
        let _ = held.swap_remove(i).stream.shutdown(Shutdown::Both);
        counters.count(Event::HttpEvicted);
    }
    let asking = Arc::new(AtomicBool::new(false));
    let stream = s.try_clone().ok()?;
    held.push(Held { id, peer, stream, since: Instant::now(), asking: asking.clone() });
    Some(asking)
}

/// Where the head in `buf` ends (just after its empty line), if it does.
pub fn head_len(buf: &[u8]) -> Option<usize> {
    buf.windows(2).enumerate().find_map(|(i, w)| match w {
        [b'\n', b'\n'] => Some(i + 2),
        [b'\n', b'\r'] if buf.get(i + 2) == Some(&b'\n') => Some(i + 3),
        _ => None,
    })
}

/// Reads the request head from `s` by `deadline`.
fn read_head(mut s: &TcpStream, deadline: Instant) -> Result<Vec<u8>, Cut> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 2048];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Cut::Deadline);
        }
        s.set_read_timeout(Some(left)).map_err(|_| Cut::Closed)?;
        let n = match s.read(&mut buf) {
            Ok(0) => return Err(Cut::Closed),
            Ok(n) => n,
            Err(e) => match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => return Err(Cut::Deadline),
                std::io::ErrorKind::Interrupted => continue,
                _ => return Err(Cut::Closed),
            },
        };
        // The end may straddle two reads: look from two bytes back.
        let from = head.len().saturating_sub(2);
        head.extend_from_slice(&buf[..n]);
        match head_len(&head[from..]) {
            Some(end) if from + end <= MAX_HEAD => {
                head.truncate(from + end);
                return Ok(head);
            }
            Some(_) => return Err(Cut::TooLarge),
            None if head.len() >= MAX_HEAD => return Err(Cut::TooLarge),
            None => {}
        }
    }
}

/// Writes all of `data` to `s` by `deadline`.
fn write_by(mut s: &TcpStream, mut data: &[u8], deadline: Instant) -> Result<(), Cut> {
    while !data.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Cut::Deadline);
        }
        s.set_write_timeout(Some(left)).map_err(|_| Cut::Closed)?;
        match s.write(data) {
            Ok(0) => return Err(Cut::Closed),
            Ok(n) => data = &data[n..],
            Err(e) => match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => return Err(Cut::Deadline),
                std::io::ErrorKind::Interrupted => {}
                _ => return Err(Cut::Closed),
            },
        }
    }
    Ok(())
}

fn reply(status: &str, ctype: &str, body: &str, with_body: bool) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if with_body {
        r.extend_from_slice(body.as_bytes());
    }
    r
}

/// One client: its head, its answer, closed.
fn client(s: TcpStream, asking: &AtomicBool, tx: &SyncSender<Request>, counters: &Counters) {
    let head = match read_head(&s, Instant::now() + HEAD_DEADLINE) {
        Ok(h) => h,
        Err(Cut::Closed) => return,
        Err(cut) => {
            let (event, status) = match cut {
                Cut::TooLarge => (Event::HttpTooLarge, "431 Request Header Fields Too Large"),
                _ => (Event::HttpDeadline, "408 Request Timeout"),
            };
            counters.count(event);
            let r = reply(status, "text/plain", "", false);
            let _ = write_by(&s, &r, Instant::now() + REFUSAL_DEADLINE);
            return;
        }
    };
    let (method, path, openmetrics) = parse_head(&String::from_utf8_lossy(&head));
    let (status, ctype, body) = match (method.as_str(), path.as_str()) {
        ("GET" | "HEAD", "/metrics") => {
            asking.store(true, Ordering::Release);
            let answer = ask(tx, Ask::Metrics { openmetrics, counts: counters.snapshot() });
            asking.store(false, Ordering::Release);
            match answer {
                Some(b) if openmetrics => ("200 OK", "application/openmetrics-text; version=1.0.0; charset=utf-8", b),
                Some(b) => ("200 OK", "text/plain; version=0.0.4; charset=utf-8", b),
                None => {
                    counters.count(Event::HttpUnanswered);
                    ("503 Service Unavailable", "text/plain", "the process did not answer in time\n".into())
                }
            }
        }
        ("GET" | "HEAD", _) => ("404 Not Found", "text/plain", "metrics are at /metrics\n".into()),
        _ => ("405 Method Not Allowed", "text/plain", "GET /metrics\n".into()),
    };
    let r = reply(status, ctype, &body, method != "HEAD");
    if write_by(&s, &r, Instant::now() + WRITE_DEADLINE) == Err(Cut::Deadline) {
        counters.count(Event::HttpDeadline);
    }
    let _ = s.shutdown(Shutdown::Write);
}

/// A scrape's request head: method, path (query cut off), and whether the
/// scraper accepts OpenMetrics.
pub fn parse_head(head: &str) -> (String, String, bool) {
    let mut lines = head.lines();
    let mut words = lines.next().unwrap_or("").split_whitespace();
    let method = words.next().unwrap_or("").to_string();
    let path = words.next().unwrap_or("").split('?').next().unwrap_or("").to_string();
    let openmetrics = lines.any(|h| {
        h.split_once(':')
            .is_some_and(|(k, v)| k.eq_ignore_ascii_case("accept") && v.contains("application/openmetrics-text"))
    });
    (method, path, openmetrics)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::sync_channel;

    #[test]
    fn heads_end_at_their_empty_line() {
        assert_eq!(head_len(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nbody"), Some(27));
        assert_eq!(head_len(b"GET / HTTP/1.0\n\n"), Some(16));
        assert_eq!(head_len(b"GET / HTTP/1.1\r\nHost: a\r\n"), None);
        assert_eq!(head_len(b"\n\r"), None);
        let (m, p, om) =
            parse_head("GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: application/openmetrics-text\r\n\r\n");
        assert_eq!((m.as_str(), p.as_str(), om), ("GET", "/metrics", true));
        let (m, p, om) = parse_head("");
        assert_eq!((m.as_str(), p.as_str(), om), ("", "", false));
    }

    /// An endpoint on a free port with an owning thread answering every scrape
    /// `ok`.
    fn endpoint() -> (std::net::SocketAddr, Arc<Counters>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (tx, rx) = sync_channel::<Request>(64);
        let counters = Arc::new(Counters::default());
        let c2 = counters.clone();
        std::thread::spawn(move || serve(l, tx, Arc::new(AtomicBool::new(false)), c2));
        std::thread::spawn(move || {
            while let Ok(r) = rx.recv() {
                r.reply("ok\n".into());
            }
        });
        (addr, counters)
    }

    fn scrape(addr: std::net::SocketAddr) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    /// A connection to `to` from `127.0.0.N`: another peer for each `n`.
    fn connect_from(n: u8, to: std::net::SocketAddr) -> TcpStream {
        use rustix::net::{AddressFamily, SocketType};
        let fd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
        rustix::net::bind(&fd, &std::net::SocketAddrV4::new(std::net::Ipv4Addr::new(127, 0, 0, n), 0)).unwrap();
        rustix::net::connect(&fd, &to).unwrap();
        TcpStream::from(fd)
    }

    /// Whether the server closed `s` (within 2 s).
    fn closed(mut s: &TcpStream) -> bool {
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        matches!(s.read(&mut [0u8; 16]), Ok(0) | Err(_))
    }

    /// Whether `s` is still held open (nothing to read for 100 ms).
    fn open(mut s: &TcpStream) -> bool {
        s.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        matches!(s.read(&mut [0u8; 16]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }

    #[test]
    fn a_full_house_of_silent_clients_makes_room_for_a_scrape() {
        let (addr, counters) = endpoint();
        let silent: Vec<TcpStream> = (0..MAX_CLIENTS as u8)
            .map(|i| {
                let s = connect_from(10 + i, addr);
                std::thread::sleep(Duration::from_millis(10));
                s
            })
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        let t = Instant::now();
        let r = scrape(addr);
        assert!(r.starts_with("HTTP/1.1 200 OK") && r.ends_with("ok\n"), "{r}");
        assert!(t.elapsed() < HEAD_DEADLINE, "answered before any deadline passed");
        assert_eq!(counters.snapshot().get(Event::HttpEvicted), 1);
        // The one evicted is the oldest.
        assert!(closed(&silent[0]));
        assert!(silent[1..].iter().all(open));
    }

    #[test]
    fn a_peer_past_its_bound_pushes_out_its_own_oldest() {
        let (addr, counters) = endpoint();
        let other = connect_from(2, addr);
        std::thread::sleep(Duration::from_millis(20));
        let mine: Vec<TcpStream> = (0..MAX_PER_PEER + 2)
            .map(|_| {
                let s = connect_from(3, addr);
                std::thread::sleep(Duration::from_millis(20));
                s
            })
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(counters.snapshot().get(Event::HttpEvicted), 2);
        assert!(closed(&mine[0]) && closed(&mine[1]));
        assert!(mine[2..].iter().all(open));
        // Older than all of them, another peer's connection stays.
        assert!(open(&other));
    }

    #[test]
    fn a_head_that_does_not_end_is_cut_at_its_size_or_its_deadline() {
        let (addr, counters) = endpoint();
        let mut big = TcpStream::connect(addr).unwrap();
        let _ = big.write_all(&[b'a'; MAX_HEAD + 10]);
        big.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut r = String::new();
        let _ = big.read_to_string(&mut r);
        assert!(r.starts_with("HTTP/1.1 431 "), "{r}");
        assert_eq!(counters.snapshot().get(Event::HttpTooLarge), 1);

        let t = Instant::now();
        let mut slow = TcpStream::connect(addr).unwrap();
        slow.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        let mut r = Vec::new();
        // A byte every 300 ms: the deadline is from the connection, not the last byte.
        while t.elapsed() < HEAD_DEADLINE * 2 {
            if slow.write_all(b"G").is_err() {
                break;
            }
            match slow.read_to_end(&mut r) {
                Ok(_) => break,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
        }
        assert!(String::from_utf8_lossy(&r).starts_with("HTTP/1.1 408 "), "{r:?}");
        assert!(t.elapsed() < HEAD_DEADLINE + Duration::from_secs(1), "{:?}", t.elapsed());
        assert_eq!(counters.snapshot().get(Event::HttpDeadline), 1);
    }
}
