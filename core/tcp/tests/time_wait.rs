//! [`TimeWait`] against the [`Connection`] it was made from: the same segments, at the
//! same times, get the same answers (a differential test over random segments near
//! the connection's sequence numbers and timestamps).
mod common;

use std::time::Duration;

use common::*;
use ironpath_tcp::testing::{Bytes, XorShift};
use ironpath_tcp::{Config, Connection, Segment, State, Time, TimeWait, TimeWaitReply};
use ironpath_wire::{TcpControl, TcpRepr};

/// Client `a` closes first (after a transfer) and ends in TIME-WAIT; returns its
/// connection there and the time.
fn in_time_wait(seed: u64, config: &Config) -> (Connection<Bytes>, Time) {
    let mut sim = Sim::symmetric(seed, LinkConfig::default());
    sim.handshake(config, config);
    transfer(&mut sim, 50_000, Duration::from_secs(10));
    sim.a.conn().close();
    let deadline = sim.now + Duration::from_secs(30);
    let reached = sim.run_until(deadline, |s| {
        if s.b.state() == State::CloseWait {
            while s.b.conn().recv().is_some() {}
            s.b.conn().close();
        }
        s.a.state() == State::TimeWait && s.b.state() == State::Closed
    });
    assert!(reached, "a reaches TIME-WAIT: {}", sim.a.state());
    let now = sim.now;
    (sim.a.conn().clone(), now)
}

/// The peer's FIN again (sequence number RCV.NXT - 1), acknowledging all we sent,
/// with timestamp `ts`.
fn old_fin(conn: &Connection<Bytes>, ts: Option<(u32, u32)>) -> TcpRepr {
    let info = conn.info();
    TcpRepr {
        src_port: conn.remote().port,
        dst_port: conn.local().port,
        seq_number: info.rcv_nxt.0.wrapping_sub(1),
        ack_number: Some(info.snd_max.0),
        control: TcpControl::Fin,
        window_len: 1000,
        max_seg_size: None,
        window_scale: None,
        sack_permitted: false,
        sack_ranges: [None; 3],
        timestamp: ts,
        payload_len: 0,
    }
}

/// What the connection sends for `repr`: its reply and what a dispatch right after
/// emits (a node does both in the same poll).
fn full_answer(conn: &mut Connection<Bytes>, now: Time, repr: &TcpRepr, payload: Option<Bytes>) -> Vec<Segment<Bytes>> {
    let mut out: Vec<_> = conn.process(now, repr, payload, 1).into_iter().collect();
    conn.dispatch(now, |s| {
        out.push(s);
        Ok::<(), ()>(())
    })
    .unwrap();
    out
}

fn compact_answer(tw: &mut TimeWait, now: Time, repr: &TcpRepr, plen: usize) -> (Vec<Segment<Bytes>>, bool) {
    match tw.process::<Bytes>(now, repr, plen) {
        TimeWaitReply::None => (Vec::new(), false),
        TimeWaitReply::Ack(s) => (vec![s], false),
        TimeWaitReply::Closed => (Vec::new(), true),
    }
}

fn same(a: &[Segment<Bytes>], b: &[Segment<Bytes>]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.repr == y.repr && x.src_addr == y.src_addr && x.dst_addr == y.dst_addr && x.payload.is_none()
        })
}

/// A random segment from the peer near `conn`'s numbers: sequence numbers around
/// RCV.NXT (old FINs, in and out of the window), ACKs around SND.NXT, each control,
/// timestamps around TS.Recent or none.
fn random_segment(rng: &mut XorShift, tw_rcv_nxt: u32, snd_max: u32, ts_recent: u32) -> (TcpRepr, usize) {
    let near = |rng: &mut XorShift, base: u32| -> u32 {
        match rng.below(4) {
            0 => base,
            1 => base.wrapping_sub(1),
            2 => base.wrapping_add(rng.below(4000) as u32).wrapping_sub(2000),
            _ => base.wrapping_add(rng.next_u64() as u32),
        }
    };
    let control = match rng.below(8) {
        0 => TcpControl::Syn,
        1 => TcpControl::Rst,
        2 | 3 => TcpControl::Fin,
        _ => TcpControl::None,
    };
    let plen = match rng.below(10) {
        0 | 1 => 1 + rng.below(1400) as usize,
        2 => 1,
        _ => 0,
    };
    let ack_number = (control != TcpControl::Syn || rng.chance(500_000)).then(|| near(rng, snd_max));
    let ack_number = if rng.chance(100_000) { None } else { ack_number };
    let timestamp = (!rng.chance(100_000)).then(|| (near(rng, ts_recent), 0));
    let repr = TcpRepr {
        src_port: 0,
        dst_port: 0,
        seq_number: near(rng, tw_rcv_nxt),
        ack_number,
        control,
        window_len: rng.below(65536) as u16,
        max_seg_size: None,
        window_scale: None,
        sack_permitted: false,
        sack_ranges: [None; 3],
        timestamp,
        payload_len: plen,
    };
    (repr, plen)
}

fn differential(seed: u64, config: &Config) -> (u64, u64) {
    let (conn0, now0) = in_time_wait(seed, config);
    let tw0 = conn0.time_wait().expect("a settled TIME-WAIT connection converts");
    let (mut conn, mut now, mut tw) = (conn0.clone(), now0, tw0.clone());
    assert_eq!(conn.poll_at(), Some(tw.expires()));
    let info = conn.info();
    let (local, remote) = (conn.local(), conn.remote());
    let mut rng = XorShift(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let (mut answered, mut steps) = (0, 0);
    let mut ts_peer = info.snd_max.0; // any start: only its distance to TS.Recent matters
    if info.timestamps {
        // TS.Recent is not exposed: take it from the ACK the connection sends now.
        let mut probe = conn.clone();
        let mut out = full_answer(&mut probe, now, &old_fin(&conn, Some((u32::MAX / 2, 0))), None);
        if let Some((_, ecr)) = out.pop().and_then(|s| s.repr.timestamp) {
            ts_peer = ecr;
        }
    }
    let mut restart = false;
    for _ in 0..400 {
        if restart {
            // Closed by a RST or expired: again from the start, with other segments.
            (conn, now, tw, restart) = (conn0.clone(), now0, tw0.clone(), false);
        }
        let span = if rng.chance(50_000) { 5_000 } else { 300 };
        now = now + Duration::from_millis(rng.below(span));
        if now >= tw.expires() {
            let mut done = Vec::new();
            conn.dispatch(now, |s| {
                done.push(s);
                Ok::<(), ()>(())
            })
            .unwrap();
            assert!(done.is_empty());
            assert_eq!(conn.state(), State::Closed, "TIME-WAIT ends when the compact one says");
            assert_eq!(conn.poll_at(), None);
            restart = true;
            continue;
        }
        let (mut repr, plen) = random_segment(&mut rng, info.rcv_nxt.0, info.snd_max.0, ts_peer);
        (repr.src_port, repr.dst_port) = (remote.port, local.port);
        if rng.chance(200_000) {
            // The peer's clock moves on.
            ts_peer = ts_peer.wrapping_add(rng.below(3000) as u32);
        }
        let payload = (plen > 0).then(|| Bytes::from(vec![7u8; plen]));
        let full = full_answer(&mut conn, now, &repr, payload);
        let (compact, closed) = compact_answer(&mut tw, now, &repr, plen);
        steps += 1;
        assert!(
            same(&full, &compact),
            "step {steps} at {now}: {repr:?}\n connection sent {:?}\n compact sent {:?}",
            full.iter().map(|s| s.repr).collect::<Vec<_>>(),
            compact.iter().map(|s| s.repr).collect::<Vec<_>>()
        );
        answered += u64::from(!full.is_empty());
        if let Some((_, ecr)) = full.last().and_then(|s| s.repr.timestamp) {
            // Our ACKs echo TS.Recent: aim near it again (ahead of it, the peer's
            // segments move it; just behind it, PAWS and reordered ACKs).
            if rng.chance(500_000) {
                ts_peer = ecr;
            }
        }
        assert_eq!(closed, conn.state() == State::Closed, "step {steps}: {repr:?}");
        if closed {
            restart = true;
            continue;
        }
        assert_eq!(conn.poll_at(), Some(tw.expires()), "step {steps}: {repr:?}");
    }
    (steps, answered)
}

#[test]
fn time_wait_answers_as_the_connection_did() {
    let plain = Config { window_scaling: false, timestamps: false, sack: false, ..Config::default() };
    let small = Config { recv_buffer: 4096, challenge_ack_limit: 3, ..Config::default() };
    let (mut steps, mut answered) = (0, 0);
    for seed in 1..=24 {
        let config = match seed % 3 {
            0 => Config::default(),
            1 => plain.clone(),
            _ => small.clone(),
        };
        let (s, a) = differential(seed, &config);
        steps += s;
        answered += a;
    }
    // The random segments reach the interesting cases: many are answered, many not.
    assert!(steps > 8000, "{steps} segments compared");
    assert!(answered > steps / 10 && answered < steps * 9 / 10, "{answered} of {steps} answered");
}

#[test]
fn a_retransmitted_fin_is_acknowledged_and_restarts_the_wait() {
    let (conn, now) = in_time_wait(3, &Config::default());
    let mut tw = conn.time_wait().unwrap();
    let first = tw.expires();
    let info = conn.info();
    let later = now + Duration::from_secs(20);
    // Its timestamp newer than anything the connection saw.
    let fin = old_fin(&conn, Some((u32::MAX / 2, 0)));
    let TimeWaitReply::Ack::<Bytes>(ack) = tw.process(later, &fin, 0) else { panic!("the FIN is acknowledged") };
    assert_eq!(ack.repr.ack_number, Some(info.rcv_nxt.0));
    assert_eq!(ack.repr.seq_number, info.snd_max.0);
    assert_eq!(tw.expires(), later + Duration::from_secs(60));
    assert!(tw.expires() > first);
    // A RST at RCV.NXT ends it.
    let rst = TcpRepr { control: TcpControl::Rst, seq_number: info.rcv_nxt.0, timestamp: None, ..fin };
    assert!(matches!(tw.process::<Bytes>(later, &rst, 0), TimeWaitReply::Closed));
}

#[test]
fn only_a_settled_connection_converts() {
    let mut sim = Sim::symmetric(5, LinkConfig::default());
    sim.handshake(&Config::default(), &Config::default());
    assert!(sim.a.conn().time_wait().is_none(), "ESTABLISHED has no TIME-WAIT form");
    let (conn, _) = in_time_wait(5, &Config::default());
    // Three cache lines (152 bytes here), against ~1 KiB for the connection.
    assert!(std::mem::size_of::<TimeWait>() <= 192, "{}", std::mem::size_of::<TimeWait>());
    assert!(std::mem::size_of::<TimeWait>() * 4 < std::mem::size_of::<Connection<Bytes>>());
    assert!(conn.time_wait().is_some());
}
