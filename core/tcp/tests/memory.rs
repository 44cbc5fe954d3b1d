//! Receive memory charged by the buffers payloads pin (truesize): collapse of small
//! pieces, pruning of the out-of-order queue, the window offered at the observed
//! payload-to-memory ratio; the send timeout; which segments count as accepted.
mod common;

use std::time::Duration;

use common::*;
use ironpath_tcp::testing::Bytes;
use ironpath_tcp::{Config, ConnError, Payload, SeqNum, State, Time};
use ironpath_wire::{TcpControl, TcpRepr};

/// A packet buffer's size: what each received piece pins, however small.
const BUF: usize = 2048;

fn cfg(recv_buffer: usize) -> Config {
    Config { timestamps: false, recv_buffer, ..Config::default() }
}

fn established(client: &Config, server: &Config) -> Sim {
    let mut sim = Sim::symmetric(3, LinkConfig::default());
    sim.handshake(client, server);
    let deadline = sim.now + Duration::from_secs(1);
    sim.run_until(deadline, |s| s.ab.next_at().is_none() && s.ba.next_at().is_none());
    sim
}

/// A segment from the client at stream offset `off` (from `base`) carrying `len`
/// bytes of the test stream in a packet buffer.
fn seg_at(sim: &mut Sim, base: SeqNum, off: u64, len: usize) -> (TcpRepr, Option<Bytes>) {
    let info = sim.a.conn().info();
    let repr = TcpRepr {
        src_port: CLIENT_PORT,
        dst_port: SERVER_PORT,
        seq_number: (base + off as u32).0,
        ack_number: Some(info.rcv_nxt.0),
        control: TcpControl::None,
        window_len: 1000,
        max_seg_size: None,
        window_scale: None,
        sack_permitted: false,
        sack_ranges: [None; 3],
        timestamp: None,
        payload_len: len,
    };
    (repr, Some(Bytes::in_buffer(&stream(off, len), BUF)))
}

fn read_all(sim: &mut Sim) -> Vec<u8> {
    let mut got = Vec::new();
    while let Some(p) = sim.b.conn().recv() {
        p.copy_into(&mut got);
    }
    got
}

#[test]
fn one_byte_segments_beyond_a_hole_are_collapsed_not_held_in_buffers() {
    let limit = 64 << 10;
    let mut sim = established(&cfg(1 << 20), &cfg(limit));
    let base = sim.b.conn().info().rcv_nxt;
    // 600 one-byte segments just beyond a one-byte hole: 600 buffers (1.2 MiB) if held
    // as they came, 20 times the limit.
    for i in 1..=600u64 {
        let (repr, p) = seg_at(&mut sim, base, i, 1);
        sim.inject_b(&repr, p, 1);
        let mem = sim.b.conn().recv_mem();
        assert!(mem <= limit + BUF, "segment {i}: {mem} bytes held, limit {limit}");
    }
    let c = *sim.b.conn().counters();
    assert!(c.rcv_collapsed > 0, "{c:?}");
    assert_eq!(c.rcv_mem_drops, 0, "collapsed runs make room: nothing dropped ({c:?})");
    // The hole fills: every byte is there, in order.
    let (repr, p) = seg_at(&mut sim, base, 0, 1);
    sim.inject_b(&repr, p, 1);
    let got = read_all(&mut sim);
    assert_eq!(got, stream(0, 601));
    assert_eq!(sim.b.conn().recv_mem(), 0);
}

#[test]
fn under_pressure_the_out_of_order_queue_is_pruned_from_the_top() {
    let limit = 32 << 10;
    let mut sim = established(&cfg(1 << 20), &cfg(limit));
    let base = sim.b.conn().info().rcv_nxt;
    // Full-sized pieces with gaps between them (nothing to collapse: each fills most
    // of its buffer): 16 fit the limit.
    for i in 0..40u64 {
        let (repr, p) = seg_at(&mut sim, base, 2000 + i * 1500, 1448);
        sim.inject_b(&repr, p, 1);
        assert!(sim.b.conn().recv_mem() <= limit + BUF);
    }
    let c = *sim.b.conn().counters();
    // The later ones found no room (nothing beyond them to prune): dropped.
    assert!(c.rcv_mem_drops > 0, "{c:?}");
    let pruned_before = c.ooo_pruned;
    // A segment below the queued ones prunes the highest to make room.
    let (repr, p) = seg_at(&mut sim, base, 500, 1448);
    sim.inject_b(&repr, p, 1);
    let c = *sim.b.conn().counters();
    assert_eq!(c.ooo_pruned, pruned_before + 1448, "{c:?}");
    // The hole before it fills: what was kept is delivered, in order.
    let (repr, p) = seg_at(&mut sim, base, 0, 500);
    sim.inject_b(&repr, p, 1);
    let got = read_all(&mut sim);
    assert_eq!(got, stream(0, 1948));
}

#[test]
fn the_window_offered_is_scaled_by_the_memory_full_segments_take() {
    let limit = 256 << 10;
    let mut sim = established(&cfg(1 << 20), &cfg(limit));
    let base = sim.b.conn().info().rcv_nxt;
    let smss = sim.b.conn().info().smss as usize;
    let mut off = 0;
    let mut last_window = 0;
    // The application reads nothing: in-order full segments until the window closes.
    for _ in 0..400 {
        let (repr, p) = seg_at(&mut sim, base, off, smss);
        if let Some(r) = sim.inject_b(&repr, p, 1) {
            last_window = usize::from(r.repr.window_len) << sim.b.conn().info().window_scale.map_or(0, |w| w.0);
        }
        off += smss as u64;
        if sim.b.conn().info().rcv_wnd == 0 && last_window == 0 {
            break;
        }
    }
    let c = *sim.b.conn().counters();
    // Taken as offered: the window closed before the memory did, nothing was copied
    // or dropped, and the memory held stayed within the buffer.
    assert_eq!((c.rcv_mem_drops, c.rcv_collapsed), (0, 0), "{c:?}");
    let held = sim.b.conn().recv_queue();
    let mem = sim.b.conn().recv_mem();
    assert!(mem <= limit, "{mem}");
    assert!(held <= limit * smss / BUF + smss, "{held} bytes taken, more than the memory holds");
    assert!(held >= limit * smss / BUF - 2 * smss, "{held} bytes taken: the window closed early");
    assert_eq!(read_all(&mut sim), stream(0, held));
}

#[test]
fn a_peer_that_keeps_a_zero_window_is_reset_after_the_send_timeout() {
    let client = Config { send_timeout: Some(Duration::from_secs(5)), ..cfg(1 << 20) };
    let mut sim = established(&client, &cfg(8192));
    let t0 = sim.now;
    // The server's application never reads: its window closes, then it answers the
    // persist probes with a zero window.
    sim.a.conn().send(Bytes::from(stream(0, 100_000))).unwrap();
    let done = sim.run_until(t0 + Duration::from_secs(60), |s| s.a.state() == State::Closed);
    assert!(done, "still {:?}", sim.a.state());
    assert_eq!(sim.a.conn().error(), Some(ConnError::SendTimeout));
    assert!(sim.a.conn().counters().zero_window_probes > 0);
    let closed_at = sim.now;
    assert!(closed_at >= t0 + Duration::from_secs(5) && closed_at < t0 + Duration::from_secs(7), "{closed_at}");
}

#[test]
fn a_slow_reader_that_keeps_taking_data_is_not_timed_out() {
    let client = Config { send_timeout: Some(Duration::from_secs(2)), ..cfg(1 << 20) };
    let mut sim = established(&client, &cfg(8192));
    let t0 = sim.now;
    sim.a.conn().send(Bytes::from(stream(0, 200_000))).unwrap();
    let mut got = 0;
    // One 4 KiB read a second: far slower than the timeout between reads would allow
    // for the whole transfer, but each read lets data through.
    let mut at = t0;
    while got < 40_000 {
        at = at + Duration::from_secs(1);
        sim.wake_at(at);
        sim.run_until(at, |_| false);
        let mut n = 0;
        while n < 4096 {
            let Some(p) = sim.b.conn().recv() else { break };
            n += p.len();
        }
        got += n;
        assert_ne!(sim.a.state(), State::Closed, "reset after {got} bytes at {}", sim.now);
    }
}

/// Reads `per_sec` bytes a second from the server side for up to `secs` seconds while
/// the client has 1 MB to send; returns the bytes read when the client closed (or the
/// end).
fn trickle(sim: &mut Sim, per_sec: usize, secs: u64) -> usize {
    let t0 = sim.now;
    sim.a.conn().send(Bytes::from(stream(0, 1_000_000))).unwrap();
    let (mut got, mut at) = (0, t0);
    while at < t0 + Duration::from_secs(secs) && sim.a.state() != State::Closed {
        at = at + Duration::from_secs(1);
        sim.wake_at(at);
        sim.run_until(at, |_| false);
        let mut n = 0;
        while n < per_sec {
            let Some(p) = sim.b.conn().recv() else { break };
            n += p.len();
        }
        got += n;
    }
    got
}

#[test]
fn a_reader_below_the_minimum_rate_is_reset_and_one_above_it_is_not() {
    // 8 KiB/s over 2 s periods: each period must see 16 KiB acknowledged.
    let client = Config { send_timeout: Some(Duration::from_secs(2)), send_min_rate: 8192, ..cfg(1 << 20) };
    let mut slow = established(&client, &cfg(8192));
    let got = trickle(&mut slow, 4096, 20);
    assert_eq!(slow.a.state(), State::Closed, "a 4 KiB/s reader outlived 20 s ({got} bytes)");
    assert_eq!(slow.a.conn().error(), Some(ConnError::SendTooSlow));
    assert!(got < 40_000, "reset after {got} bytes");
    let mut fast = established(&client, &cfg(65536));
    let got = trickle(&mut fast, 32768, 10);
    assert_ne!(fast.a.state(), State::Closed, "a 32 KiB/s reader was reset after {got} bytes");
    assert!(got > 200_000, "{got}");
}

#[test]
fn only_segments_that_pass_the_sequence_and_ack_checks_are_accepted() {
    let mut sim = established(&cfg(1 << 20), &cfg(1 << 20));
    let base = sim.b.conn().info().rcv_nxt;
    let (good, p) = seg_at(&mut sim, base, 0, 10);
    sim.inject_b(&good, p, 1);
    assert!(sim.b.conn().accepted());
    // Out of the window (a blind guess): not accepted.
    let (mut forged, p) = seg_at(&mut sim, base, 0, 10);
    forged.seq_number = base.0.wrapping_add(0x4000_0000);
    sim.inject_b(&forged, p, 1);
    assert!(!sim.b.conn().accepted());
    // In the window but acknowledging data never sent: not accepted either.
    let (mut bad_ack, p) = seg_at(&mut sim, base, 10, 10);
    bad_ack.ack_number = Some(bad_ack.ack_number.unwrap().wrapping_add(0x1000_0000));
    sim.inject_b(&bad_ack, p, 1);
    assert!(!sim.b.conn().accepted());
    let _ = Time::ZERO;
}
