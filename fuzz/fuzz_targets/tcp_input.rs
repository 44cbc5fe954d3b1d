//! Arbitrary segments, time steps and application calls against `ironpath-tcp`: a
//! listener and an established connection (client and server engines joined by two
//! lossy, reorderable in-memory queues, on a virtual clock).
//!
//! Input: byte 0 picks the configuration (timestamps, SACK, window scaling, Nagle,
//! buffer sizes); then operations, each an opcode byte and its operands:
//! forged segments into the server connection (fields relative to its sequence
//! numbers, so they land near the window) or into the listener, raw bytes parsed by
//! `ironpath_wire` and fed to the server, deliveries (with drops, reordering and
//! duplication) between the engines, time steps, and send/recv/close/abort. Some
//! configurations run short keep-alive, idle and FIN-WAIT-2 timers, some TSO.
//!
//! Checked after every operation: no panic; `check_invariants` (snd_una <= snd_nxt <=
//! snd_max in sequence space, buffers within their limits, the out-of-order queue
//! sorted and disjoint, a timer covering outstanding data); `dispatch` never emits an
//! unbounded burst and leaves `poll_at` in the future; emitted segments re-parse; in
//! TIME-WAIT the server connection answers every segment as its compact [`TimeWait`]
//! form does (both fed the same segments).
#![no_main]
use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::time::Duration;

use ironpath_tcp::testing::Bytes;
use ironpath_tcp::{
    Config, Connection, Endpoint, IsnGenerator, Keepalive, Listener, Payload, Segment, State, Time, TimeWait,
    TimeWaitReply,
};
use ironpath_wire::{IpAddress, TcpControl, TcpPacket, TcpRepr};
use libfuzzer_sys::fuzz_target;

const CLIENT: u16 = 40000;
const SERVER: u16 = 80;
const MAX_QUEUE: usize = 512;
const MAX_BURST: usize = 20_000;

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes([self.u8()?, self.u8()?]))
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes([self.u8()?, self.u8()?, self.u8()?, self.u8()?]))
    }

    fn bytes(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
}

fn client_addr() -> IpAddress {
    IpAddress::V4(Ipv4Addr::new(10, 0, 0, 1))
}

fn server_addr() -> IpAddress {
    IpAddress::V4(Ipv4Addr::new(10, 0, 0, 2))
}

/// Emits and re-parses a segment: what the engine produces must be valid on the wire.
fn check_wire(seg: &Segment<Bytes>) {
    assert_eq!(seg.repr.payload_len, seg.payload.as_ref().map_or(0, Payload::len));
    let mut buf = vec![0u8; seg.repr.buffer_len()];
    let header_len = seg.repr.header_len();
    if let Some(p) = &seg.payload {
        buf[header_len..].copy_from_slice(&p.to_vec());
    }
    seg.repr.emit(&mut TcpPacket::new_unchecked(&mut buf[..]), &seg.src_addr, &seg.dst_addr);
    let packet = TcpPacket::new_checked(&buf[..]).expect("emitted segment is well-formed");
    let parsed = TcpRepr::parse(&packet, &seg.src_addr, &seg.dst_addr, true).expect("emitted segment parses");
    assert_eq!(parsed.seq_number, seg.repr.seq_number);
}

fn dispatch(conn: &mut Connection<Bytes>, now: Time, out: &mut VecDeque<Segment<Bytes>>) {
    let mut n = 0;
    conn.dispatch(now, |seg| {
        check_wire(&seg);
        n += 1;
        assert!(n < MAX_BURST, "runaway dispatch");
        if out.len() < MAX_QUEUE {
            out.push_back(seg);
        }
        Ok::<(), ()>(())
    })
    .unwrap();
    if let Some(t) = conn.poll_at() {
        assert!(t > now, "poll_at {t} not after dispatch at {now} in {}", conn.state());
    }
}

struct World {
    now: Time,
    client: Connection<Bytes>,
    server: Option<Connection<Bytes>>,
    listener: Listener<Bytes>,
    to_server: VecDeque<Segment<Bytes>>,
    to_client: VecDeque<Segment<Bytes>>,
    last_client_ts: Option<(u32, u32)>,
    /// The server connection's compact TIME-WAIT form, fed the same segments.
    shadow: Option<TimeWait>,
}

impl World {
    fn new(config: &Config) -> Self {
        let isn = IsnGenerator::new([9; 16]);
        let now = Time::from_secs(1);
        let listener = Listener::new(SERVER, 4, config.clone(), isn).expect("listener");
        let local = Endpoint::new(client_addr(), CLIENT);
        let remote = Endpoint::new(server_addr(), SERVER);
        let client = Connection::connect(now, local, remote, config, &isn).expect("connect");
        let mut w = World {
            now,
            client,
            server: None,
            listener,
            to_server: VecDeque::new(),
            to_client: VecDeque::new(),
            last_client_ts: None,
            shadow: None,
        };
        // Handshake over a perfect network.
        for _ in 0..4 {
            w.dispatch_all();
            while w.deliver_one(false) {}
        }
        w
    }

    fn check(&self) {
        self.client.check_invariants().unwrap();
        if let Some(s) = &self.server {
            s.check_invariants().unwrap();
        }
    }

    fn dispatch_all(&mut self) {
        dispatch(&mut self.client, self.now, &mut self.to_server);
        if let Some(s) = self.server.as_mut() {
            dispatch(s, self.now, &mut self.to_client);
        }
        let mut n = 0;
        let now = self.now;
        let to_client = &mut self.to_client;
        self.listener
            .dispatch(now, |seg| {
                check_wire(&seg);
                n += 1;
                assert!(n < MAX_BURST, "runaway listener dispatch");
                if to_client.len() < MAX_QUEUE {
                    to_client.push_back(seg);
                }
                Ok::<(), ()>(())
            })
            .unwrap();
        self.accept();
    }

    fn accept(&mut self) {
        if self.server.as_ref().is_none_or(|s| s.state() == State::Closed) {
            if let Some(conn) = self.listener.accept() {
                self.server = Some(conn);
            }
        }
    }

    /// Moves one segment across; `to_client` picks the direction.
    fn deliver_one(&mut self, to_client: bool) -> bool {
        let now = self.now;
        if to_client {
            let Some(seg) = self.to_client.pop_front() else { return false };
            if let Some(reply) = self.client.process(now, &seg.repr, seg.payload, 1) {
                check_wire(&reply);
                self.to_server.push_back(reply);
            }
        } else {
            let Some(seg) = self.to_server.pop_front() else { return false };
            self.last_client_ts = seg.repr.timestamp.or(self.last_client_ts);
            self.server_input(&seg.repr, seg.payload, 1);
        }
        true
    }

    /// A segment from the client's address to the server: its connection if it has one
    /// for these ports, else the listener.
    fn server_input(&mut self, repr: &TcpRepr, payload: Option<Bytes>, segs: u16) {
        let now = self.now;
        if self.server.as_ref().is_some_and(|s| s.state() == State::TimeWait && repr.src_port == CLIENT) {
            return self.time_wait_input(repr, payload, segs);
        }
        self.shadow = None;
        let reply = match self.server.as_mut() {
            Some(s) if s.state() != State::Closed && repr.src_port == CLIENT => s.process(now, repr, payload, segs),
            _ => {
                let r = self.listener.process(now, client_addr(), server_addr(), repr, payload, segs);
                self.accept();
                r
            }
        };
        if let Some(reply) = reply {
            check_wire(&reply);
            if self.to_client.len() < MAX_QUEUE {
                self.to_client.push_back(reply);
            }
        }
    }

    /// A segment for the server connection in TIME-WAIT: its answer (the reply and
    /// what a dispatch right after sends) must be what the compact [`TimeWait`] made
    /// from it answers, and both must end at the same time.
    fn time_wait_input(&mut self, repr: &TcpRepr, payload: Option<Bytes>, segs: u16) {
        let now = self.now;
        let s = self.server.as_mut().expect("in TIME-WAIT");
        if self.shadow.is_none() {
            self.shadow = s.time_wait();
        }
        if let Some(tw) = self.shadow.as_ref().filter(|tw| now >= tw.expires()) {
            let mut sent = 0;
            s.dispatch(now, |_| {
                sent += 1;
                Ok::<(), ()>(())
            })
            .unwrap();
            assert_eq!((sent, s.state()), (0, State::Closed), "TIME-WAIT ends at {}", tw.expires());
            self.shadow = None;
            return self.server_input(repr, payload, segs);
        }
        let plen = payload.as_ref().map_or(0, Payload::len);
        let mut full: Vec<Segment<Bytes>> = s.process(now, repr, payload, segs).into_iter().collect();
        s.dispatch(now, |seg| {
            full.push(seg);
            Ok::<(), ()>(())
        })
        .unwrap();
        if let Some(tw) = self.shadow.as_mut() {
            let compact: Vec<Segment<Bytes>> = match tw.process(now, repr, plen) {
                TimeWaitReply::None => Vec::new(),
                TimeWaitReply::Ack(seg) => vec![seg],
                TimeWaitReply::Closed => {
                    assert_eq!(s.state(), State::Closed, "a RST closes both");
                    Vec::new()
                }
            };
            let reprs = |v: &[Segment<Bytes>]| v.iter().map(|x| (x.repr, x.src_addr, x.dst_addr)).collect::<Vec<_>>();
            assert_eq!(reprs(&full), reprs(&compact), "answers to {repr:?}");
            if s.state() == State::Closed {
                self.shadow = None;
            } else {
                assert_eq!(s.poll_at(), Some(tw.expires()));
            }
        }
        for seg in full {
            check_wire(&seg);
            if self.to_client.len() < MAX_QUEUE {
                self.to_client.push_back(seg);
            }
        }
    }

    /// A segment with fields near the server connection's sequence numbers.
    fn forge(&mut self, input: &mut Input<'_>) -> Option<(TcpRepr, Option<Bytes>, u16)> {
        let flags = input.u8()?;
        let more = input.u8()?;
        let (rcv_nxt, snd_una, snd_nxt) = match &self.server {
            Some(s) => {
                let i = s.info();
                (i.rcv_nxt.0, i.snd_una.0, i.snd_nxt.0)
            }
            None => (0, 0, 0),
        };
        let seq_off = input.u16()? as i16 as i32 * if more & 1 != 0 { 64 } else { 1 };
        let ack_off = input.u16()? as i16 as i32;
        let seq = if more & 2 != 0 { input.u32()? } else { rcv_nxt.wrapping_add(seq_off as u32) };
        let ack_base = if more & 4 != 0 { snd_nxt } else { snd_una };
        let control = match flags & 7 {
            0 | 1 => TcpControl::None,
            2 => TcpControl::Psh,
            3 => TcpControl::Fin,
            4 => TcpControl::Rst,
            5 => TcpControl::Syn,
            _ => TcpControl::None,
        };
        let timestamp = match (flags >> 3) & 3 {
            0 => None,
            1 => self.last_client_ts.map(|(v, e)| (v.wrapping_add(u32::from(more >> 4)), e)),
            2 => self.last_client_ts.map(|(v, e)| (v.wrapping_sub(u32::from(more >> 4)), e)),
            _ => Some((input.u32()?, input.u32()?)),
        };
        let mut sack_ranges = [None; 3];
        if flags & 0x20 != 0 {
            let l = snd_una.wrapping_add(u32::from(input.u16()?));
            sack_ranges[0] = Some((l, l.wrapping_add(u32::from(input.u16()?))));
        }
        let len = if flags & 0x40 != 0 { usize::from(input.u16()? % 4096) } else { usize::from(more >> 5) * 100 };
        let payload = (len > 0).then(|| Bytes::from(vec![more; len]));
        let segs = if flags & 0x80 != 0 { u16::from(input.u8()? % 64) } else { 1 };
        let repr = TcpRepr {
            src_port: CLIENT,
            dst_port: SERVER,
            seq_number: seq,
            ack_number: (flags & 1 == 0 || control == TcpControl::Rst && more & 8 != 0)
                .then(|| ack_base.wrapping_add(ack_off as u32)),
            control,
            window_len: input.u16()?,
            max_seg_size: (control == TcpControl::Syn).then_some(u16::from(more) * 8),
            window_scale: (control == TcpControl::Syn && more & 8 != 0).then_some(more & 15),
            sack_permitted: control == TcpControl::Syn && more & 16 != 0,
            sack_ranges,
            timestamp,
            payload_len: len,
        };
        Some((repr, payload, segs))
    }

    fn step(&mut self, input: &mut Input<'_>) -> Option<()> {
        let op = input.u8()?;
        match op % 12 {
            0 | 1 => {
                let (repr, payload, segs) = self.forge(input)?;
                self.server_input(&repr, payload, segs);
            }
            2 => {
                // A forged segment from another client port: the listener's job.
                let (mut repr, payload, segs) = self.forge(input)?;
                repr.src_port = 1 + (input.u16()? % 8);
                let reply = self.listener.process(self.now, client_addr(), server_addr(), &repr, payload, segs);
                if let Some(reply) = reply {
                    check_wire(&reply);
                }
                self.accept();
            }
            3 => {
                // Raw bytes through the wire parser.
                let len = usize::from(input.u8()?);
                let bytes = input.bytes(len).to_vec();
                if let Ok(packet) = TcpPacket::new_checked(&bytes[..]) {
                    if let Ok(repr) = TcpRepr::parse(&packet, &client_addr(), &server_addr(), false) {
                        let payload = (!packet.payload().is_empty()).then(|| Bytes::from(packet.payload()));
                        let repr = TcpRepr { src_port: CLIENT, dst_port: SERVER, ..repr };
                        self.server_input(&repr, payload, 1);
                    }
                }
            }
            4 | 5 => {
                // Deliver up to n segments each way; bits drop, reorder, duplicate.
                let n = input.u8()?;
                for i in 0..(n & 31) {
                    let ctl = input.u8().unwrap_or(0);
                    let to_client = ctl & 1 != 0;
                    let queue = if to_client { &mut self.to_client } else { &mut self.to_server };
                    match ctl >> 5 {
                        0 => {
                            queue.pop_front();
                        }
                        1 if queue.len() > 1 => queue.swap(0, 1 + usize::from(i) % (queue.len() - 1)),
                        2 => {
                            if let Some(front) = queue.front().cloned() {
                                if queue.len() < MAX_QUEUE {
                                    queue.push_back(front);
                                }
                            }
                        }
                        _ => {}
                    }
                    self.deliver_one(to_client);
                }
            }
            6 => {
                // Time passes: up to ~65 s, or exactly to the next deadline.
                let dt = input.u16()?;
                let next =
                    [self.client.poll_at(), self.server.as_ref().and_then(|s| s.poll_at()), self.listener.poll_at()]
                        .into_iter()
                        .flatten()
                        .min();
                self.now = match next {
                    Some(t) if dt & 1 == 0 => self.now.max(t),
                    _ => self.now + Duration::from_millis(u64::from(dt)),
                };
            }
            7 => {
                let len = usize::from(input.u16()?) * 8;
                let data = Bytes::from(vec![op; len]);
                let _ = self.client.send(data.clone());
                if let Some(s) = self.server.as_mut() {
                    let _ = s.send(data.slice(0, len / 2));
                }
            }
            8 => {
                while self.client.recv().is_some() {}
                if let Some(s) = self.server.as_mut() {
                    let n = input.u8()?;
                    for _ in 0..n {
                        if s.recv().is_none() {
                            break;
                        }
                    }
                }
            }
            9 => match input.u8()? % 4 {
                0 => self.client.close(),
                1 => {
                    if let Some(s) = self.server.as_mut() {
                        s.close();
                    }
                }
                2 => self.client.abort(),
                _ => {
                    if let Some(s) = self.server.as_mut() {
                        s.abort();
                    }
                }
            },
            10 => {
                // The server closes first and the client answers: over a perfect
                // network the server ends in TIME-WAIT, where the segments forged next
                // also go to its compact form.
                if let Some(s) = self.server.as_mut() {
                    s.close();
                }
                for _ in 0..6 {
                    self.dispatch_all();
                    while self.deliver_one(true) || self.deliver_one(false) {}
                    if self.client.state() == State::CloseWait {
                        self.client.close();
                    }
                }
            }
            _ => {}
        }
        self.check();
        self.dispatch_all();
        self.check();
        Some(())
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let Some(knobs) = input.u8() else { return };
    let config = Config {
        timestamps: knobs & 1 != 0,
        sack: knobs & 2 != 0,
        window_scaling: knobs & 4 != 0,
        nagle: knobs & 8 != 0,
        recv_buffer: if knobs & 16 != 0 { 4096 } else { 256 * 1024 },
        send_buffer: if knobs & 32 != 0 { 3000 } else { 64 * 1024 },
        max_ooo_segments: if knobs & 64 != 0 { 4 } else { 64 },
        ack_delay: if knobs & 128 != 0 { Duration::ZERO } else { Duration::from_millis(40) },
        challenge_ack_limit: 1000,
        ..Config::default()
    };
    // Nagle with a small out-of-order queue also turns on short keep-alive, idle and
    // FIN-WAIT-2 timers (the byte has no bit left).
    let short_timers = knobs & 0x48 == 0x48;
    let config = Config {
        keepalive: short_timers.then_some(Keepalive {
            idle: Duration::from_secs(1),
            interval: Duration::from_millis(100),
            probes: 3,
        }),
        idle_timeout: short_timers.then_some(Duration::from_secs(5)),
        fin_wait2_timeout: Some(Duration::from_secs(if short_timers { 2 } else { 60 })),
        // Timestamps without delayed ACKs also send TSO-sized segments.
        tso_max: if knobs & 0x81 == 0x81 { 16 * 1024 } else { 0 },
        ..config
    };
    let mut world = World::new(&config);
    world.check();
    for _ in 0..2000 {
        if world.step(&mut input).is_none() {
            break;
        }
    }
    // Everything settles at a fixed time: delivering everything both ends emit ends
    // (no ACK storm) with only timers left.
    for _ in 0..64 {
        world.dispatch_all();
        let mut exchanged = 0;
        while world.deliver_one(true) || world.deliver_one(false) {
            exchanged += 1;
            assert!(exchanged < 100_000, "the engines answer each other forever (ACK storm)");
        }
        world.check();
    }
});
