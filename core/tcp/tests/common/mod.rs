//! A deterministic network for two TCP engines: links with delay, jitter (reordering),
//! seeded loss and duplication, an optional bottleneck rate with a drop-tail queue,
//! outages and targeted drops; a virtual clock; every segment goes through
//! `TcpRepr::emit` and `TcpRepr::parse` (checksums verified) on the way.
#![allow(dead_code)]

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::net::Ipv4Addr;
use std::time::Duration;

use ironpath_tcp::testing::{Bytes, XorShift};
use ironpath_tcp::{rst_reply, Config, Connection, Endpoint, IsnGenerator, Listener, Payload, Segment, State, Time};
use ironpath_wire::{IpAddress, TcpControl, TcpPacket, TcpRepr};

pub const CLIENT_PORT: u16 = 40000;
pub const SERVER_PORT: u16 = 80;

pub fn client_addr() -> IpAddress {
    IpAddress::V4(Ipv4Addr::new(10, 0, 0, 1))
}

pub fn server_addr() -> IpAddress {
    IpAddress::V4(Ipv4Addr::new(10, 0, 0, 2))
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Properties of one direction of a link.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    /// One-way propagation delay.
    pub delay: Duration,
    /// Extra random delay in `0..jitter` per packet (reorders packets).
    pub jitter: Duration,
    /// Loss probability in parts per million.
    pub loss_ppm: u32,
    /// Duplication probability in parts per million.
    pub dup_ppm: u32,
    /// Bottleneck rate in bytes per second (0: unlimited).
    pub rate: u64,
    /// Drop-tail: packets that would wait longer than this in the bottleneck queue.
    pub max_queue_delay: Duration,
    /// Interrupt coalescing at the receiver: arrivals are rounded up to a multiple of
    /// this (zero: off), so back-to-back packets arrive in one burst.
    pub batch: Duration,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            delay: ms(5),
            jitter: Duration::ZERO,
            loss_ppm: 0,
            dup_ppm: 0,
            rate: 0,
            max_queue_delay: ms(100),
            batch: Duration::ZERO,
        }
    }
}

/// One segment as it crossed (or was dropped by) a link.
#[derive(Debug, Clone)]
pub struct Sent {
    pub at: Time,
    pub repr: TcpRepr,
    pub dropped: bool,
}

impl Sent {
    pub fn seq(&self) -> u32 {
        self.repr.seq_number
    }

    pub fn is_data(&self) -> bool {
        self.repr.payload_len > 0
    }
}

struct InFlight {
    at: Time,
    id: u64,
    src: IpAddress,
    dst: IpAddress,
    bytes: Vec<u8>,
}

impl PartialEq for InFlight {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.id) == (other.at, other.id)
    }
}

impl Eq for InFlight {}

impl PartialOrd for InFlight {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for InFlight {
    /// Reversed: the heap pops the earliest first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.id).cmp(&(self.at, self.id))
    }
}

/// Decides whether to drop a segment: `(segment, index among data segments sent)`.
pub type DropFilter = Box<dyn FnMut(&TcpRepr, u64) -> bool>;

/// One direction.
pub struct Link {
    pub cfg: LinkConfig,
    rng: XorShift,
    queue: BinaryHeap<InFlight>,
    next_id: u64,
    busy_until: Time,
    /// Everything sent into the link, in order.
    pub log: Vec<Sent>,
    /// Outages: everything sent in `[from, to)` is lost.
    pub down: Vec<(Time, Time)>,
    pub filter: Option<DropFilter>,
    data_segments: u64,
    pub lost: u64,
    pub duplicated: u64,
}

impl Link {
    pub fn new(cfg: LinkConfig, seed: u64) -> Self {
        Link {
            cfg,
            rng: XorShift(seed | 1),
            queue: BinaryHeap::new(),
            next_id: 0,
            busy_until: Time::ZERO,
            log: Vec::new(),
            down: Vec::new(),
            filter: None,
            data_segments: 0,
            lost: 0,
            duplicated: 0,
        }
    }

    pub fn send(&mut self, now: Time, seg: Segment<Bytes>) {
        let payload = seg.payload.map(|p| p.to_vec()).unwrap_or_default();
        assert_eq!(seg.repr.payload_len, payload.len(), "payload_len matches the payload");
        let mut bytes = vec![0u8; seg.repr.buffer_len()];
        let header_len = seg.repr.header_len();
        bytes[header_len..].copy_from_slice(&payload);
        seg.repr.emit(&mut TcpPacket::new_unchecked(&mut bytes[..]), &seg.src_addr, &seg.dst_addr);
        let is_data = !payload.is_empty();
        let index = self.data_segments;
        if is_data {
            self.data_segments += 1;
        }
        let mut dropped = self.down.iter().any(|&(from, to)| now >= from && now < to);
        if let Some(filter) = self.filter.as_mut() {
            dropped |= filter(&seg.repr, index);
        }
        dropped |= self.rng.chance(self.cfg.loss_ppm);
        let mut depart = now;
        if self.cfg.rate > 0 && !dropped {
            let start = self.busy_until.max(now);
            if start - now > self.cfg.max_queue_delay {
                dropped = true;
            } else {
                let tx = Duration::from_nanos((bytes.len() as u64 + 40) * 1_000_000_000 / self.cfg.rate);
                self.busy_until = start + tx;
                depart = self.busy_until;
            }
        }
        self.log.push(Sent { at: now, repr: seg.repr, dropped });
        if dropped {
            self.lost += 1;
            return;
        }
        let copies = if self.rng.chance(self.cfg.dup_ppm) { 2 } else { 1 };
        self.duplicated += copies - 1;
        for _ in 0..copies {
            let jitter = if self.cfg.jitter.is_zero() {
                Duration::ZERO
            } else {
                Duration::from_micros(self.rng.below(self.cfg.jitter.as_micros() as u64))
            };
            let mut at = depart + self.cfg.delay + jitter;
            if !self.cfg.batch.is_zero() {
                let batch = self.cfg.batch.as_micros() as u64;
                at = Time::from_micros(at.micros().div_ceil(batch) * batch);
            }
            self.queue.push(InFlight {
                at,
                id: self.next_id,
                src: seg.src_addr,
                dst: seg.dst_addr,
                bytes: bytes.clone(),
            });
            self.next_id += 1;
        }
    }

    pub fn next_at(&self) -> Option<Time> {
        self.queue.peek().map(|p| p.at)
    }

    fn pop_due(&mut self, now: Time) -> Option<InFlight> {
        if self.next_at()? <= now {
            self.queue.pop()
        } else {
            None
        }
    }

    /// Data segments logged, dropped ones included.
    pub fn data(&self) -> impl Iterator<Item = &Sent> {
        self.log.iter().filter(|s| s.is_data())
    }
}

/// A received segment after parsing.
pub struct Received {
    pub src: IpAddress,
    pub dst: IpAddress,
    pub repr: TcpRepr,
    pub payload: Option<Bytes>,
    pub segs: u16,
}

fn parse(p: &InFlight) -> Received {
    let packet = TcpPacket::new_checked(&p.bytes[..]).expect("well-formed segment");
    let repr = TcpRepr::parse(&packet, &p.src, &p.dst, true).expect("segment parses and its checksum verifies");
    let payload = (!packet.payload().is_empty()).then(|| Bytes::from(packet.payload()));
    Received { src: p.src, dst: p.dst, repr, payload, segs: 1 }
}

/// Merges runs of contiguous data segments with identical headers as GRO does.
fn gro(segments: Vec<Received>, max_segs: u16) -> Vec<Received> {
    let mut out: Vec<Received> = Vec::new();
    for seg in segments {
        if let Some(last) = out.last_mut() {
            let mergeable = last.payload.is_some()
                && seg.payload.is_some()
                && last.repr.control == TcpControl::None
                && matches!(seg.repr.control, TcpControl::None | TcpControl::Psh)
                && last.repr.ack_number == seg.repr.ack_number
                && last.repr.window_len == seg.repr.window_len
                && last.repr.timestamp == seg.repr.timestamp
                && last.repr.sack_ranges == seg.repr.sack_ranges
                && last.repr.seq_number.wrapping_add(last.repr.payload_len as u32) == seg.repr.seq_number
                && last.segs < max_segs;
            if mergeable {
                let payload = seg.payload.expect("checked");
                last.repr.payload_len += payload.len();
                last.repr.control = seg.repr.control;
                last.payload.as_mut().expect("checked").append(payload);
                last.segs += 1;
                continue;
            }
        }
        out.push(seg);
    }
    out
}

/// One end: an optional connection and an optional listener.
pub struct Host {
    pub addr: IpAddress,
    pub conn: Option<Connection<Bytes>>,
    pub listener: Option<Listener<Bytes>>,
    /// Merge received segments (GRO) up to this many, 1 = off.
    pub gro: u16,
    /// Aggregates delivered (GRO on).
    pub aggregates: u64,
}

impl Host {
    fn new(addr: IpAddress) -> Self {
        Host { addr, conn: None, listener: None, gro: 1, aggregates: 0 }
    }

    pub fn conn(&mut self) -> &mut Connection<Bytes> {
        self.conn.as_mut().expect("a connection")
    }

    pub fn state(&self) -> State {
        self.conn.as_ref().map_or(State::Closed, Connection::state)
    }

    fn poll_at(&self) -> Option<Time> {
        let c = self.conn.as_ref().and_then(Connection::poll_at);
        let l = self.listener.as_ref().and_then(Listener::poll_at);
        c.into_iter().chain(l).min()
    }

    fn receive(&mut self, now: Time, seg: Received, out: &mut Link) {
        let matches = |c: &Connection<Bytes>| {
            c.remote() == Endpoint::new(seg.src, seg.repr.src_port) && c.local().port == seg.repr.dst_port
        };
        let conn_matches = self.conn.as_ref().is_some_and(matches);
        let conn_open = conn_matches && self.state() != State::Closed;
        let listening = self.listener.as_ref().is_some_and(|l| l.port() == seg.repr.dst_port);
        let reply = if conn_open || (conn_matches && !listening) {
            self.conn().process(now, &seg.repr, seg.payload, seg.segs)
        } else if let (true, Some(listener)) = (listening, self.listener.as_mut()) {
            let reply = listener.process(now, seg.src, seg.dst, &seg.repr, seg.payload, seg.segs);
            if self.conn.as_ref().is_none_or(|c| c.state() == State::Closed) {
                if let Some(conn) = listener.accept() {
                    self.conn = Some(conn);
                }
            }
            reply
        } else {
            let len = seg.payload.as_ref().map_or(0, Payload::len);
            rst_reply(seg.src, seg.dst, &seg.repr, len)
        };
        if let Some(reply) = reply {
            out.send(now, reply);
        }
    }

    fn dispatch(&mut self, now: Time, out: &mut Link) {
        if let Some(conn) = self.conn.as_mut() {
            conn.dispatch(now, |seg| {
                out.send(now, seg);
                Ok::<(), ()>(())
            })
            .expect("emit never fails");
            conn.check_invariants().unwrap_or_else(|e| panic!("at {now}: {e}"));
        }
        if let Some(listener) = self.listener.as_mut() {
            listener
                .dispatch(now, |seg| {
                    out.send(now, seg);
                    Ok::<(), ()>(())
                })
                .expect("emit never fails");
            if self.conn.as_ref().is_none_or(|c| c.state() == State::Closed) {
                if let Some(conn) = listener.accept() {
                    self.conn = Some(conn);
                }
            }
        }
    }
}

/// Two hosts, two links, one clock. `a` is the client (10.0.0.1), `b` the server.
pub struct Sim {
    pub now: Time,
    pub a: Host,
    pub b: Host,
    /// a -> b.
    pub ab: Link,
    /// b -> a.
    pub ba: Link,
    pub isn: IsnGenerator,
    /// Times the test wants `run_until`'s condition checked at.
    alarms: Vec<Time>,
}

impl Sim {
    pub fn new(seed: u64, ab: LinkConfig, ba: LinkConfig) -> Self {
        Sim {
            now: Time::from_secs(1),
            a: Host::new(client_addr()),
            b: Host::new(server_addr()),
            ab: Link::new(ab, seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            ba: Link::new(ba, seed.wrapping_mul(0xc2b2_ae3d_27d4_eb4f)),
            isn: IsnGenerator::new(seed.to_le_bytes().repeat(2).try_into().expect("16 bytes")),
            alarms: Vec::new(),
        }
    }

    /// A symmetric link.
    pub fn symmetric(seed: u64, link: LinkConfig) -> Self {
        Sim::new(seed, link.clone(), link)
    }

    /// `b` listens on port 80 and `a` connects to it.
    pub fn client_server(&mut self, client: &Config, server: &Config) {
        self.b.listener = Some(Listener::new(SERVER_PORT, 16, server.clone(), self.isn).expect("listener"));
        let local = Endpoint::new(self.a.addr, CLIENT_PORT);
        let remote = Endpoint::new(self.b.addr, SERVER_PORT);
        self.a.conn = Some(Connection::connect(self.now, local, remote, client, &self.isn).expect("connect"));
    }

    /// Both hosts established (runs at most 10 s).
    pub fn handshake(&mut self, client: &Config, server: &Config) {
        self.client_server(client, server);
        let deadline = self.now + Duration::from_secs(10);
        let done = self.run_until(deadline, |s| s.a.state() == State::Established && s.b.state() == State::Established);
        assert!(done, "handshake did not complete: {:?} {:?}", self.a.state(), self.b.state());
    }

    /// Advances to the next event and handles it. False when nothing is scheduled.
    pub fn step(&mut self) -> bool {
        let alarm = self.alarms.iter().copied().min();
        let next = [self.ab.next_at(), self.ba.next_at(), self.a.poll_at(), self.b.poll_at(), alarm];
        let Some(next) = next.into_iter().flatten().min() else { return false };
        self.now = self.now.max(next);
        let now = self.now;
        self.alarms.retain(|&t| t > now);
        let mut to_b = Vec::new();
        while let Some(p) = self.ab.pop_due(now) {
            to_b.push(parse(&p));
        }
        let mut to_a = Vec::new();
        while let Some(p) = self.ba.pop_due(now) {
            to_a.push(parse(&p));
        }
        if self.b.gro > 1 {
            let before = to_b.len();
            to_b = gro(to_b, self.b.gro);
            self.b.aggregates += (before - to_b.len()) as u64;
        }
        for seg in to_b {
            self.b.receive(now, seg, &mut self.ba);
        }
        for seg in to_a {
            self.a.receive(now, seg, &mut self.ab);
        }
        self.a.dispatch(now, &mut self.ab);
        self.b.dispatch(now, &mut self.ba);
        true
    }

    /// Makes `step` stop at `at` (for application actions at a given time).
    pub fn wake_at(&mut self, at: Time) {
        self.alarms.push(at);
    }

    /// Steps until `done` holds (checked before each step) or `deadline` passes.
    pub fn run_until(&mut self, deadline: Time, mut done: impl FnMut(&mut Sim) -> bool) -> bool {
        loop {
            if done(self) {
                return true;
            }
            if self.now > deadline || !self.step() {
                return done(self);
            }
        }
    }

    /// Segment delivered straight to `b`'s connection (bypassing the link); its reply.
    pub fn inject_b(&mut self, repr: &TcpRepr, payload: Option<Bytes>, segs: u16) -> Option<Segment<Bytes>> {
        let now = self.now;
        let reply = self.b.conn().process(now, repr, payload, segs);
        self.b.conn().check_invariants().unwrap();
        reply
    }
}

/// The test stream: byte `i` of every transfer.
pub fn stream_byte(i: u64) -> u8 {
    (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 57) as u8 ^ (i as u8)
}

pub fn stream(from: u64, len: usize) -> Vec<u8> {
    (from..from + len as u64).map(stream_byte).collect()
}

/// An application that writes `total` bytes of the test stream in chunks of random
/// sizes, and one that reads and checks them.
pub struct Bulk {
    pub total: u64,
    pub written: u64,
    pub read: u64,
    pending: Option<Bytes>,
    rng: XorShift,
    /// Read only when this is true (to build a zero window).
    pub reading: bool,
}

impl Bulk {
    pub fn new(total: u64, seed: u64) -> Self {
        Bulk { total, written: 0, read: 0, pending: None, rng: XorShift(seed | 1), reading: true }
    }

    /// Writes as much as the sender takes.
    pub fn write(&mut self, conn: &mut Connection<Bytes>) {
        loop {
            let chunk = match self.pending.take() {
                Some(p) => p,
                None => {
                    if self.written >= self.total {
                        return;
                    }
                    let len = (1 + self.rng.below(64 * 1024)).min(self.total - self.written) as usize;
                    let chunk = Bytes::from(stream(self.written, len));
                    self.written += len as u64;
                    chunk
                }
            };
            match conn.send(chunk.clone()) {
                Ok(n) if n == chunk.len() => {}
                Ok(n) => {
                    self.pending = Some(chunk.slice(n, chunk.len() - n));
                    return;
                }
                Err(_) => {
                    self.pending = Some(chunk);
                    return;
                }
            }
        }
    }

    /// Reads everything available and checks it against the stream.
    pub fn read(&mut self, conn: &mut Connection<Bytes>) {
        if !self.reading {
            return;
        }
        while let Some(p) = conn.recv() {
            let got = p.to_vec();
            assert_eq!(got, stream(self.read, got.len()), "data differs at stream offset {}", self.read);
            self.read += got.len() as u64;
        }
    }

    pub fn done(&self) -> bool {
        self.read == self.total && self.pending.is_none() && self.written == self.total
    }
}

/// Transfers `total` bytes a -> b over an established connection. Returns the time
/// it took, or panics after `limit`.
pub fn transfer(sim: &mut Sim, total: u64, limit: Duration) -> Duration {
    let start = sim.now;
    let mut bulk = Bulk::new(total, total ^ 0x5eed);
    let deadline = start + limit;
    let done = sim.run_until(deadline, |s| {
        if let Some(c) = s.a.conn.as_mut() {
            bulk.write(c);
        }
        if let Some(c) = s.b.conn.as_mut() {
            bulk.read(c);
        }
        bulk.done()
    });
    assert!(
        done,
        "transfer of {total} bytes stalled at {} read by {} (client {:?} {:?}, server {:?})",
        bulk.read,
        sim.now,
        sim.a.conn.as_ref().map(|c| c.info()),
        sim.a.conn.as_ref().map(|c| *c.counters()),
        sim.b.conn.as_ref().map(|c| *c.counters()),
    );
    sim.now - start
}
