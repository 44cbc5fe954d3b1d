//! Scripted state-machine cases: crafted segments into an established connection
//! (RFC 5961 challenge ACKs, PAWS, ACK acceptability, delayed ACKs, aggregates), the
//! listener, SYN-SENT, and the API's errors.
mod common;

use std::time::Duration;

use common::*;
use ironpath_tcp::testing::Bytes;
use ironpath_tcp::{
    Config, ConnError, Connection, Endpoint, IsnGenerator, Listener, Payload, Segment, SendError, SeqNum, State, Time,
};
use ironpath_wire::{TcpControl, TcpRepr};

fn no_ts() -> Config {
    Config { timestamps: false, ..Config::default() }
}

/// An established pair with nothing in flight.
fn established(config: &Config) -> Sim {
    let mut sim = Sim::symmetric(1, LinkConfig::default());
    sim.handshake(config, config);
    let deadline = sim.now + Duration::from_secs(1);
    sim.run_until(deadline, |s| s.ab.next_at().is_none() && s.ba.next_at().is_none() && s.now > Time::from_secs(1));
    sim
}

/// A segment from the client to the server at the client's current sequence numbers.
fn from_client(sim: &mut Sim) -> TcpRepr {
    let info = sim.a.conn().info();
    let last_ts = sim.ab.log.last().and_then(|s| s.repr.timestamp);
    TcpRepr {
        src_port: CLIENT_PORT,
        dst_port: SERVER_PORT,
        seq_number: info.snd_nxt.0,
        ack_number: Some(info.rcv_nxt.0),
        control: TcpControl::None,
        window_len: 1000,
        max_seg_size: None,
        window_scale: None,
        sack_permitted: false,
        sack_ranges: [None; 3],
        timestamp: last_ts.map(|(tsval, tsecr)| (tsval.wrapping_add(1), tsecr)),
        payload_len: 0,
    }
}

fn data(len: usize) -> Option<Bytes> {
    Some(Bytes::from(stream(0, len)))
}

fn drain(conn: &mut Connection<Bytes>, now: Time) -> Vec<Segment<Bytes>> {
    let mut out = vec![];
    conn.dispatch(now, |s| {
        out.push(s);
        Ok::<(), ()>(())
    })
    .unwrap();
    out
}

fn drain_listener(listener: &mut Listener<Bytes>, now: Time) -> Vec<Segment<Bytes>> {
    let mut out = vec![];
    listener
        .dispatch(now, |s| {
            out.push(s);
            Ok::<(), ()>(())
        })
        .unwrap();
    out
}

fn is_pure_ack(seg: &Segment<Bytes>, ack: SeqNum) -> bool {
    seg.repr.control == TcpControl::None && seg.repr.ack_number == Some(ack.0) && seg.payload.is_none()
}

#[test]
fn rst_exact_resets_in_window_challenges_outside_ignored() {
    let mut sim = established(&no_ts());
    let rcv_nxt = sim.b.conn().info().rcv_nxt;
    let mut rst = from_client(&mut sim);
    rst.control = TcpControl::Rst;
    rst.ack_number = None;

    rst.seq_number = (rcv_nxt + 100u32).0;
    let reply = sim.inject_b(&rst, None, 1).expect("challenge ACK");
    assert!(is_pure_ack(&reply, rcv_nxt));
    assert_eq!(sim.b.conn().counters().challenge_acks, 1);
    assert_eq!(sim.b.state(), State::Established);

    rst.seq_number = (rcv_nxt + 10_000_000u32).0;
    assert!(sim.inject_b(&rst, None, 1).is_none());
    rst.seq_number = (rcv_nxt - 1u32).0;
    assert!(sim.inject_b(&rst, None, 1).is_none());
    assert_eq!(sim.b.conn().counters().out_of_window, 2);
    assert_eq!(sim.b.state(), State::Established);

    rst.seq_number = rcv_nxt.0;
    assert!(sim.inject_b(&rst, None, 1).is_none());
    assert_eq!(sim.b.state(), State::Closed);
    assert_eq!(sim.b.conn().error(), Some(ConnError::Reset));
    assert_eq!(sim.b.conn().poll_at(), None);
}

#[test]
fn syn_in_established_gets_a_challenge_ack() {
    let mut sim = established(&no_ts());
    let rcv_nxt = sim.b.conn().info().rcv_nxt;
    for seq in [rcv_nxt, rcv_nxt + 5u32, rcv_nxt + 3_000_000_000u32] {
        let mut syn = from_client(&mut sim);
        syn.control = TcpControl::Syn;
        syn.ack_number = None;
        syn.seq_number = seq.0;
        let reply = sim.inject_b(&syn, None, 1).expect("challenge ACK");
        assert!(is_pure_ack(&reply, rcv_nxt));
    }
    assert_eq!(sim.b.conn().counters().challenge_acks, 3);
    assert_eq!(sim.b.state(), State::Established);
}

#[test]
fn ack_acceptability_rfc5961() {
    let mut sim = established(&no_ts());
    let info = sim.b.conn().info();
    // Beyond SND.NXT: challenge ACK, data not taken.
    let mut seg = from_client(&mut sim);
    seg.ack_number = Some((info.snd_nxt + 1000u32).0);
    let reply = sim.inject_b(&seg, data(100), 1).expect("ACK");
    assert!(is_pure_ack(&reply, info.rcv_nxt));
    assert_eq!(sim.b.conn().recv_queue(), 0);
    // Far below SND.UNA - MAX.SND.WND (blind injection): the same.
    seg.ack_number = Some((info.snd_una - 0x4000_0000u32).0);
    assert!(sim.inject_b(&seg, data(100), 1).is_some());
    assert_eq!(sim.b.conn().recv_queue(), 0);
    assert_eq!(sim.b.conn().counters().challenge_acks, 2);
    // An old ACK within the peer's window is fine: the data is taken.
    seg.ack_number = Some((info.snd_una - 10u32).0);
    sim.inject_b(&seg, data(100), 1);
    assert_eq!(sim.b.conn().recv_queue(), 100);
    // No ACK bit: dropped.
    let mut bare = from_client(&mut sim);
    bare.seq_number = (info.rcv_nxt + 100u32).0;
    bare.ack_number = None;
    assert!(sim.inject_b(&bare, data(10), 1).is_none());
    assert_eq!(sim.b.conn().recv_queue(), 100);
}

#[test]
fn challenge_acks_are_rate_limited() {
    let config = Config { challenge_ack_limit: 3, ..no_ts() };
    let mut sim = established(&config);
    let rcv_nxt = sim.b.conn().info().rcv_nxt;
    let mut rst = from_client(&mut sim);
    rst.control = TcpControl::Rst;
    rst.seq_number = (rcv_nxt + 1u32).0;
    let replies = (0..5).filter(|_| sim.inject_b(&rst, None, 1).is_some()).count();
    assert_eq!(replies, 3);
    assert_eq!(sim.b.conn().counters().challenge_acks_suppressed, 2);
    sim.now = sim.now + Duration::from_secs(1);
    assert!(sim.inject_b(&rst, None, 1).is_some(), "a new second, a new budget");
}

#[test]
fn paws_rejects_old_timestamps() {
    let mut sim = established(&Config::default());
    let rcv_nxt = sim.b.conn().info().rcv_nxt;
    let mut seg = from_client(&mut sim);
    let (tsval, tsecr) = seg.timestamp.unwrap();
    seg.timestamp = Some((tsval.wrapping_sub(10), tsecr));
    let reply = sim.inject_b(&seg, data(100), 1).expect("ACK of a PAWS reject");
    assert!(is_pure_ack(&reply, rcv_nxt));
    assert_eq!(sim.b.conn().counters().paws_drops, 1);
    assert_eq!(sim.b.conn().recv_queue(), 0);
    // Without a timestamp on a connection that has them: dropped silently.
    seg.timestamp = None;
    assert!(sim.inject_b(&seg, data(100), 1).is_none());
    assert_eq!(sim.b.conn().counters().paws_drops, 2);
    // A current timestamp: taken, and echoed in the ACK.
    seg.timestamp = Some((tsval.wrapping_add(5), tsecr));
    sim.inject_b(&seg, data(100), 1);
    assert_eq!(sim.b.conn().recv_queue(), 100);
    let now = sim.now + Duration::from_secs(1);
    let acks = drain(sim.b.conn(), now);
    assert_eq!(acks.len(), 1);
    assert_eq!(acks[0].repr.timestamp.unwrap().1, tsval.wrapping_add(5));
}

#[test]
fn delayed_ack_timer_and_every_second_segment() {
    let mut sim = established(&no_ts());
    let now = sim.now;
    let rcv_nxt = sim.b.conn().info().rcv_nxt;
    let mut seg = from_client(&mut sim);
    // One segment: no ACK before the 40 ms delay.
    assert!(sim.inject_b(&seg, data(1448), 1).is_none());
    assert_eq!(sim.b.conn().poll_at(), Some(now + ms(40)));
    assert!(drain(sim.b.conn(), now + ms(39)).is_empty());
    let acks = drain(sim.b.conn(), now + ms(40));
    assert_eq!(acks.len(), 1);
    assert!(is_pure_ack(&acks[0], rcv_nxt + 1448u32));
    // Two segments: the second is ACKed at once.
    seg.seq_number = (rcv_nxt + 1448u32).0;
    assert!(sim.inject_b(&seg, data(1448), 1).is_none());
    seg.seq_number = (rcv_nxt + 2896u32).0;
    let reply = sim.inject_b(&seg, data(1448), 1).expect("ACK of the second segment");
    assert!(is_pure_ack(&reply, rcv_nxt + 4344u32));
    assert_eq!(sim.b.conn().poll_at(), None);
    // An aggregate of two original segments counts as two; one big segment as one.
    let segs_in = sim.b.conn().counters().segs_in;
    seg.seq_number = (rcv_nxt + 4344u32).0;
    assert!(sim.inject_b(&seg, data(2896), 2).is_some());
    assert_eq!(sim.b.conn().counters().segs_in, segs_in + 2);
    seg.seq_number = (rcv_nxt + 7240u32).0;
    assert!(sim.inject_b(&seg, data(2896), 1).is_none());
    // Out of order: an ACK at once, with a SACK block.
    let expected = rcv_nxt + 10136u32;
    seg.seq_number = (expected + 1000u32).0;
    let reply = sim.inject_b(&seg, data(500), 3).expect("duplicate ACK");
    assert_eq!(reply.repr.ack_number, Some(expected.0));
    assert_eq!(reply.repr.sack_ranges[0], Some(((expected + 1000u32).0, (expected + 1500u32).0)));
    assert_eq!(sim.b.conn().counters().ooo_segments, 3);
    // Filling the hole: an ACK at once, covering both.
    seg.seq_number = expected.0;
    let reply = sim.inject_b(&seg, data(1000), 1).expect("ACK of the hole");
    assert_eq!(reply.repr.ack_number, Some((expected + 1500u32).0));
    assert_eq!(reply.repr.sack_ranges, [None; 3]);
}

#[test]
fn fin_drops_out_of_order_data_beyond_it() {
    let mut sim = established(&no_ts());
    let rcv_nxt = sim.b.conn().info().rcv_nxt;
    let mut seg = from_client(&mut sim);
    seg.seq_number = (rcv_nxt + 10u32).0;
    assert!(sim.inject_b(&seg, data(100), 1).is_some(), "duplicate ACK");
    seg.seq_number = rcv_nxt.0;
    seg.control = TcpControl::Fin;
    let reply = sim.inject_b(&seg, data(5), 1).expect("ACK of the FIN");
    assert_eq!(reply.repr.ack_number, Some((rcv_nxt + 6u32).0));
    assert_eq!(reply.repr.sack_ranges, [None; 3]);
    assert_eq!(sim.b.state(), State::CloseWait);
    assert_eq!(sim.b.conn().recv_queue(), 5);
    assert_eq!(sim.b.conn().counters().bytes_dropped, 100, "all of it lay beyond the FIN");
}

#[test]
fn data_beyond_the_window_is_cut() {
    let small = Config { recv_buffer: 4096, ..no_ts() };
    let mut sim = Sim::symmetric(2, LinkConfig::default());
    sim.handshake(&no_ts(), &small);
    let rcv_nxt = sim.b.conn().info().rcv_nxt;
    assert_eq!(sim.b.conn().info().rcv_wnd, 4096);
    let seg = from_client(&mut sim);
    let reply = sim.inject_b(&seg, data(6000), 1).expect("ACK: data was dropped");
    assert_eq!(reply.repr.ack_number, Some((rcv_nxt + 4096u32).0));
    assert_eq!(reply.repr.window_len, 0);
    assert_eq!(sim.b.conn().recv_queue(), 4096);
    assert_eq!(sim.b.conn().counters().bytes_dropped, 6000 - 4096);
    // Zero window: data at RCV.NXT is dropped and ACKed; the ACK field still counts.
    let mut more = from_client(&mut sim);
    more.seq_number = (rcv_nxt + 4096u32).0;
    let reply = sim.inject_b(&more, data(10), 1).expect("ACK");
    assert_eq!(reply.repr.window_len, 0);
    assert_eq!(sim.b.conn().recv_queue(), 4096);
    // Reading opens the window by more than the SWS threshold: a window update.
    while sim.b.conn().recv().is_some() {}
    let segs = drain(sim.b.conn(), sim.now);
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].repr.window_len, 4096);
    assert_eq!(sim.b.conn().counters().window_updates, 1);
}

#[test]
fn the_handshake_is_not_followed_by_a_window_update() {
    // The SYN-ACK's window is unscaled (at most 65,535); the 4 MiB buffer's window
    // rides on the server's next ACK. Answering the handshake's last ACK with a pure
    // window update cost a frame per connection.
    let big = Config { recv_buffer: 4 << 20, ..Config::default() };
    let mut sim = established(&big);
    assert_eq!(sim.ba.log.len(), 1, "the server sent only its SYN-ACK: {:?}", sim.ba.log);
    assert_eq!(sim.b.conn().counters().window_updates, 0);
    assert!(drain(sim.b.conn(), sim.now).is_empty());
    // Data from the client is acknowledged (after the ACK delay) with the large window.
    let seg = from_client(&mut sim);
    assert!(sim.inject_b(&seg, data(100), 1).is_none(), "one segment: a delayed ACK");
    let deadline = sim.now + Duration::from_secs(1);
    sim.run_until(deadline, |s| s.ba.log.len() > 1);
    let ack = &sim.ba.log[1].repr;
    let scale = sim.ba.log[0].repr.window_scale.expect("the SYN-ACK offered a window scale");
    assert!(usize::from(ack.window_len) << scale > 65535, "{ack:?} (scale {scale})");
}

#[test]
fn listener_backlog_rst_and_accept() {
    let isn = IsnGenerator::new([3; 16]);
    let no_cookies = Config { syn_cookies: false, ..Config::default() };
    let mut listener = Listener::<Bytes>::new(80, 2, no_cookies, isn).unwrap();
    let now = Time::from_secs(1);
    let syn = |port: u16| TcpRepr {
        src_port: port,
        dst_port: 80,
        seq_number: 1000,
        ack_number: None,
        control: TcpControl::Syn,
        window_len: 65535,
        max_seg_size: Some(1460),
        window_scale: Some(2),
        sack_permitted: true,
        sack_ranges: [None; 3],
        timestamp: None,
        payload_len: 0,
    };
    for port in [1000, 1001, 1002] {
        assert!(listener.process(now, client_addr(), server_addr(), &syn(port), None, 1).is_none());
    }
    assert_eq!(listener.pending(), 2);
    assert_eq!(listener.counters().backlog_drops, 1);
    assert!(listener.accept().is_none(), "no handshake completed yet");
    let synacks = drain_listener(&mut listener, now);
    assert_eq!(synacks.len(), 2);
    let synack = &synacks[0].repr;
    assert_eq!((synack.control, synack.ack_number, synack.dst_port), (TcpControl::Syn, Some(1001), 1000));
    assert_eq!((synack.window_scale, synack.sack_permitted, synack.timestamp), (Some(3), true, None));
    // A retransmitted SYN gets the SYN-ACK again.
    listener.process(now, client_addr(), server_addr(), &syn(1000), None, 1);
    let again = drain_listener(&mut listener, now);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].repr.seq_number, synack.seq_number);
    // The handshake's ACK: the connection is ready to accept, with the data it carried.
    let ack = TcpRepr {
        control: TcpControl::Psh,
        seq_number: 1001,
        ack_number: Some(synack.seq_number.wrapping_add(1)),
        max_seg_size: None,
        window_scale: None,
        sack_permitted: false,
        ..syn(1000)
    };
    listener.process(now, client_addr(), server_addr(), &ack, data(10), 1);
    let mut conn = listener.accept().expect("established");
    assert_eq!(conn.state(), State::Established);
    assert_eq!(conn.remote(), Endpoint::new(client_addr(), 1000));
    assert_eq!(conn.recv().unwrap().len(), 10);
    assert_eq!(conn.info().snd_wnd, 65535 << 2);
    assert_eq!(listener.pending(), 1);
    // Unknown 4-tuples: an ACK gets a RST at SEG.ACK, a RST nothing, data without ACK nothing.
    let stray = TcpRepr { src_port: 2000, ..ack };
    let rst = listener.process(now, client_addr(), server_addr(), &stray, None, 1).expect("RST");
    assert_eq!(
        (rst.repr.control, rst.repr.seq_number, rst.repr.ack_number),
        (TcpControl::Rst, stray.ack_number.unwrap(), None)
    );
    let stray_rst = TcpRepr { control: TcpControl::Rst, ..stray };
    assert!(listener.process(now, client_addr(), server_addr(), &stray_rst, None, 1).is_none());
    let no_ack = TcpRepr { ack_number: None, control: TcpControl::None, ..stray };
    assert!(listener.process(now, client_addr(), server_addr(), &no_ack, data(5), 1).is_none());
    assert_eq!(listener.counters().resets, 1);
    // The other half-open connection times out: SYN-ACK retransmissions, then gone.
    let mut t = now;
    while listener.pending() > 0 {
        t = listener.poll_at().unwrap().max(t);
        listener.dispatch(t, |_| Ok::<_, ()>(())).unwrap();
    }
    assert_eq!(listener.counters().dropped, 1);
    assert!(t - now >= Duration::from_secs(63));
}

#[test]
fn syn_sent_checks_the_ack() {
    let isn = IsnGenerator::new([4; 16]);
    let now = Time::from_secs(1);
    let local = Endpoint::new(client_addr(), 1234);
    let remote = Endpoint::new(server_addr(), 80);
    let mut conn = Connection::<Bytes>::connect(now, local, remote, &Config::default(), &isn).unwrap();
    assert_eq!(conn.poll_at(), Some(Time::ZERO));
    let syn = drain(&mut conn, now).pop().unwrap();
    let iss = syn.repr.seq_number;
    assert_eq!(syn.repr.control, TcpControl::Syn);
    let mut seg = TcpRepr {
        src_port: 80,
        dst_port: 1234,
        seq_number: 555,
        ack_number: Some(iss),
        control: TcpControl::Syn,
        window_len: 100,
        max_seg_size: None,
        window_scale: None,
        sack_permitted: false,
        sack_ranges: [None; 3],
        timestamp: None,
        payload_len: 0,
    };
    // ACK of something other than our SYN: RST <SEQ=SEG.ACK>, state unchanged.
    let rst = conn.process(now, &seg, None, 1).expect("RST");
    assert_eq!((rst.repr.control, rst.repr.seq_number), (TcpControl::Rst, iss));
    seg.control = TcpControl::Rst;
    assert!(conn.process(now, &seg, None, 1).is_none());
    seg.ack_number = None;
    assert!(conn.process(now, &seg, None, 1).is_none(), "a RST without ACK is ignored");
    assert_eq!(conn.state(), State::SynSent);
    seg.ack_number = Some(iss.wrapping_add(1));
    conn.process(now, &seg, None, 1);
    assert_eq!((conn.state(), conn.error()), (State::Closed, Some(ConnError::Refused)));
}

#[test]
fn send_buffer_limit_and_errors() {
    let small = Config { send_buffer: 1000, ..no_ts() };
    let mut sim = Sim::symmetric(3, LinkConfig::default());
    sim.handshake(&small, &no_ts());
    let conn = sim.a.conn();
    assert_eq!(conn.send(Bytes::from(vec![1u8; 1500])), Ok(1000));
    assert_eq!(conn.send(Bytes::from(vec![1u8; 10])), Err(SendError::BufferFull));
    assert_eq!(conn.send(Bytes::default()), Ok(0));
    assert_eq!((conn.send_queue(), conn.send_free()), (1000, 0));
    conn.close();
    assert_eq!(conn.send(Bytes::from(vec![1u8; 10])), Err(SendError::InvalidState(State::FinWait1)));
    assert!(!conn.may_send());
    assert_eq!(SendError::BufferFull.to_string(), "send buffer full");
    assert_eq!(SendError::InvalidState(State::FinWait1).to_string(), "cannot send in state FIN-WAIT-1");
    // The queued data and the FIN still go out, in one segment.
    let segs = drain(sim.a.conn(), sim.now);
    assert_eq!(segs.len(), 1);
    assert_eq!((segs[0].repr.control, segs[0].repr.payload_len), (TcpControl::Fin, 1000));
}

#[test]
fn emit_errors_keep_the_segment() {
    let mut sim = established(&no_ts());
    let now = sim.now;
    let conn = sim.a.conn();
    conn.send(Bytes::from(vec![7u8; 3000])).unwrap();
    let before = conn.info();
    let mut calls = 0;
    let r = conn.dispatch(now, |_| {
        calls += 1;
        Err("tx ring full")
    });
    assert_eq!((r, calls), (Err("tx ring full"), 1));
    assert_eq!(conn.info().snd_nxt, before.snd_nxt, "nothing counts as sent");
    assert_eq!(conn.poll_at(), Some(Time::ZERO));
    let segs = drain(conn, now);
    // Two full segments; Nagle holds the 80-byte tail while they are unacknowledged.
    assert_eq!(segs.iter().map(|s| s.repr.payload_len).collect::<Vec<_>>(), [1460, 1460]);
    assert_eq!(segs[0].repr.seq_number, before.snd_nxt.0);
    assert_eq!(conn.poll_at(), Some(now + Duration::from_millis(200)), "the RTO is what is left");
}

#[test]
fn closed_connection_answers_with_rst() {
    let mut sim = established(&no_ts());
    sim.b.conn().abort();
    let seg = from_client(&mut sim);
    let rst = sim.inject_b(&seg, data(10), 1).expect("RST");
    assert_eq!((rst.repr.control, rst.repr.seq_number), (TcpControl::Rst, seg.ack_number.unwrap()));
    // The abort's own RST is still due, once.
    let segs = drain(sim.b.conn(), sim.now);
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].repr.control, TcpControl::Rst);
    assert!(drain(sim.b.conn(), sim.now).is_empty());
    assert_eq!(sim.b.conn().poll_at(), None);
}

#[test]
fn close_in_each_state() {
    let isn = IsnGenerator::new([5; 16]);
    let local = Endpoint::new(client_addr(), 1);
    let remote = Endpoint::new(server_addr(), 2);
    let mut conn = Connection::<Bytes>::connect(Time::ZERO, local, remote, &Config::default(), &isn).unwrap();
    conn.close();
    assert_eq!((conn.state(), conn.error()), (State::Closed, None), "close in SYN-SENT deletes the TCB");
    assert!(Connection::<Bytes>::connect(
        Time::ZERO,
        Endpoint::new(client_addr(), 0),
        remote,
        &Config::default(),
        &isn
    )
    .is_err());
    let v6 = Endpoint::new("::1".parse::<std::net::Ipv6Addr>().unwrap().into(), 5);
    assert!(Connection::<Bytes>::connect(Time::ZERO, local, v6, &Config::default(), &isn).is_err());
    assert!(Listener::<Bytes>::new(0, 1, Config::default(), isn).is_err());
    assert!(Listener::<Bytes>::new(80, 0, Config::default(), isn).is_err());
    // Payload trait helpers.
    assert!(Bytes::default().is_empty());
}

/// The server has 20 segments in flight; the client's duplicate ACKs grow the window
/// (as Linux's do while its application reads). With SACK blocks reporting new data
/// they still count (RFC 6675's DupAck): the third one triggers the fast retransmit.
/// Without new SACK information a changed window disqualifies them (RFC 5681).
#[test]
fn duplicate_acks_with_new_sack_blocks_count_even_when_the_window_grows() {
    for with_sack in [true, false] {
        let mut sim = established(&Config::default());
        assert!(sim.b.conn().info().sack, "SACK negotiated");
        let now = sim.now;
        let mss = sim.b.conn().info().smss as usize;
        sim.b.conn().send(Bytes::from(stream(0, 20 * mss))).unwrap();
        let sent = drain(sim.b.conn(), now);
        assert!(sent.len() >= 10, "{} segments in flight", sent.len());
        let una = sim.b.conn().info().snd_una;
        for k in 1..=3u32 {
            let mut seg = from_client(&mut sim);
            seg.ack_number = Some(una.0);
            seg.window_len = 1000 + 100 * k as u16;
            if with_sack {
                let left = una.0.wrapping_add(k * mss as u32);
                seg.sack_ranges = [Some((left, left.wrapping_add(mss as u32))), None, None];
            }
            sim.inject_b(&seg, None, 1);
        }
        let c = *sim.b.conn().counters();
        if with_sack {
            assert_eq!((c.dup_acks, c.fast_retransmits), (3, 1), "{c:?}");
            let again = drain(sim.b.conn(), now);
            assert_eq!(again.first().map(|s| s.repr.seq_number), Some(una.0), "the head is resent");
        } else {
            assert_eq!((c.dup_acks, c.fast_retransmits), (0, 0), "{c:?}");
        }
    }
}

/// Reordered ACKs: a pure duplicate ACK whose timestamp is a little older than the
/// latest one is a loss signal, not an old duplicate; PAWS lets it through.
#[test]
fn paws_lets_a_reordered_pure_duplicate_ack_through() {
    let mut sim = established(&Config::default());
    let now = sim.now;
    let mss = sim.b.conn().info().smss as usize;
    sim.b.conn().send(Bytes::from(stream(0, 10 * mss))).unwrap();
    drain(sim.b.conn(), now);
    let una = sim.b.conn().info().snd_una;
    let mut seg = from_client(&mut sim);
    seg.ack_number = Some(una.0);
    let (tsval, tsecr) = seg.timestamp.unwrap();
    seg.timestamp = Some((tsval.wrapping_add(5), tsecr));
    sim.inject_b(&seg, None, 1); // a window update (the window changed): not a duplicate
    assert_eq!(sim.b.conn().counters().dup_acks, 0);
    seg.timestamp = Some((tsval.wrapping_add(3), tsecr));
    sim.inject_b(&seg, None, 1);
    let c = *sim.b.conn().counters();
    assert_eq!((c.paws_drops, c.dup_acks), (0, 1), "the reordered one counts: {c:?}");
    // Data with an old timestamp is still refused.
    seg.timestamp = Some((tsval.wrapping_add(1), tsecr));
    sim.inject_b(&seg, data(10), 1);
    assert_eq!(sim.b.conn().counters().paws_drops, 1);
}

/// A full backlog answers SYNs with cookies: the SYN-ACK's ISS carries the peer's MSS
/// and a keyed hash, nothing is kept; the handshake's last ACK with a valid cookie makes
/// the connection (MSS kept, no other option); a forged or stale one gets a RST.
#[test]
fn syn_cookies_when_the_backlog_is_full() {
    let isn = IsnGenerator::new([4; 16]);
    let mut listener = Listener::<Bytes>::new(80, 1, Config::default(), isn).unwrap();
    let now = Time::from_secs(100);
    let syn = |port: u16, seq: u32| TcpRepr {
        src_port: port,
        dst_port: 80,
        seq_number: seq,
        ack_number: None,
        control: TcpControl::Syn,
        window_len: 29200,
        max_seg_size: Some(1400),
        window_scale: Some(7),
        sack_permitted: true,
        sack_ranges: [None; 3],
        timestamp: Some((7, 0)),
        payload_len: 0,
    };
    assert!(listener.process(now, client_addr(), server_addr(), &syn(1000, 5000), None, 1).is_none());
    assert_eq!(listener.pending(), 1, "the backlog is full");
    let synack = listener.process(now, client_addr(), server_addr(), &syn(1001, 9000), None, 1).expect("cookie");
    let r = synack.repr;
    assert_eq!((r.control, r.ack_number, r.dst_port), (TcpControl::Syn, Some(9001), 1001));
    assert_eq!((r.max_seg_size.is_some(), r.window_scale, r.sack_permitted, r.timestamp), (true, None, false, None));
    assert_eq!(listener.pending(), 1, "no state kept");
    assert_eq!(listener.counters().cookies_sent, 1);
    // The last ACK (with data) completes it.
    let ack = TcpRepr {
        seq_number: 9001,
        ack_number: Some(r.seq_number.wrapping_add(1)),
        control: TcpControl::Psh,
        max_seg_size: None,
        window_scale: None,
        sack_permitted: false,
        timestamp: None,
        ..syn(1001, 0)
    };
    listener.process(now + Duration::from_millis(10), client_addr(), server_addr(), &ack, data(20), 1);
    assert_eq!(listener.counters().cookies_valid, 1);
    let mut conn = listener.accept().expect("a connection from the cookie");
    assert_eq!(conn.state(), State::Established);
    assert_eq!(conn.remote(), Endpoint::new(client_addr(), 1001));
    assert_eq!(conn.recv().unwrap().len(), 20);
    let info = conn.info();
    assert_eq!((info.smss, info.snd_wnd, info.window_scale, info.timestamps), (1400, 29200, None, false));
    // A forged cookie (another ISS), and a right one two periods (128 s) later: RST.
    let forged = TcpRepr { src_port: 1002, ack_number: Some(r.seq_number ^ 0x55), ..ack };
    let rst = listener.process(now, client_addr(), server_addr(), &forged, None, 1).expect("RST");
    assert_eq!(rst.repr.control, TcpControl::Rst);
    let late = now + Duration::from_secs(129);
    listener.process(late, client_addr(), server_addr(), &syn(1003, 7000), None, 1).expect("cookie");
    let stale = TcpRepr { src_port: 1001, ..ack };
    assert_eq!(
        listener.process(late, client_addr(), server_addr(), &stale, None, 1).map(|s| s.repr.control),
        Some(TcpControl::Rst)
    );
    assert_eq!(listener.counters().cookies_invalid, 2);
}
