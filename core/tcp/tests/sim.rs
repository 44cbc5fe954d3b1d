//! Deterministic simulations: two engines over simulated links (seeded loss, jitter,
//! duplication, bottleneck, outages) with a virtual clock.
mod common;

use std::time::Duration;

use common::*;
use ironpath_tcp::{Config, ConnError, Connection, Endpoint, State, Time};
use ironpath_wire::TcpControl;

fn cfg() -> Config {
    Config::default()
}

#[test]
fn handshake_negotiates_options() {
    let mut sim = Sim::symmetric(1, LinkConfig::default());
    sim.handshake(&cfg(), &cfg());
    for host in [&mut sim.a, &mut sim.b] {
        let info = host.conn().info();
        assert_eq!(info.window_scale, Some((3, 3)));
        assert!(info.timestamps && info.sack);
        assert_eq!(info.smss, 1460 - 12);
        assert_eq!(info.cwnd, 10 * 1448);
        assert!(info.srtt.is_some(), "the handshake gives an RTT sample");
    }
    // SYN, SYN-ACK, ACK, and nothing else (the server's first window update aside).
    assert_eq!(sim.ab.log[0].repr.control, TcpControl::Syn);
    assert_eq!(sim.ba.log[0].repr.control, TcpControl::Syn);
    assert!(sim.ba.log[0].repr.ack_number.is_some());
    assert_eq!(sim.ab.log[1].repr.control, TcpControl::None);
    let srtt = sim.a.conn().info().srtt.unwrap();
    assert!(srtt >= ms(10) && srtt <= ms(11), "RTT of two 5 ms hops: {srtt:?}");
}

#[test]
fn handshake_without_options() {
    let plain = Config { window_scaling: false, timestamps: false, sack: false, ..cfg() };
    let mut sim = Sim::symmetric(2, LinkConfig::default());
    sim.handshake(&cfg(), &plain);
    let info = sim.a.conn().info();
    assert_eq!((info.window_scale, info.timestamps, info.sack, info.smss), (None, false, false, 1460));
    // Without window scaling the window stays within 64 KiB, and data still flows.
    transfer(&mut sim, 300_000, Duration::from_secs(30));
    assert!(sim.a.conn().info().snd_wnd <= 65535);
    assert!(sim.a.conn().info().srtt.is_some(), "RTT from timed segments (Karn)");
}

#[test]
fn bulk_10mb_byte_for_byte() {
    let link = LinkConfig { delay: ms(5), rate: 125_000_000, max_queue_delay: ms(50), ..LinkConfig::default() };
    let mut sim = Sim::symmetric(3, link);
    sim.handshake(&cfg(), &cfg());
    let took = transfer(&mut sim, 10 * 1024 * 1024, Duration::from_secs(60));
    let client = *sim.a.conn().counters();
    let server = *sim.b.conn().counters();
    assert_eq!(client.retransmits, 0, "{client:?}");
    assert_eq!(client.rto_timeouts, 0);
    assert_eq!(server.bytes_in, 10 * 1024 * 1024);
    assert_eq!(client.bytes_out, 10 * 1024 * 1024);
    // A 256 KiB window over a 10 ms RTT: about 25 MB/s, so well under 2 s.
    assert!(took < Duration::from_secs(2), "took {took:?}");
    // Delayed ACKs: about one ACK per two segments.
    let data_segments = sim.ab.data().count() as u64;
    let acks = sim.ba.log.len() as u64;
    assert!(acks * 2 <= data_segments + 20 && acks * 3 >= data_segments, "{acks} ACKs for {data_segments} segments");
}

#[test]
fn bulk_with_loss_reordering_and_duplication() {
    let link = LinkConfig {
        delay: ms(10),
        jitter: ms(3),
        loss_ppm: 10_000,
        dup_ppm: 5_000,
        rate: 12_500_000,
        ..LinkConfig::default()
    };
    let mut sim = Sim::symmetric(4, link);
    sim.handshake(&cfg(), &cfg());
    let total = 2 * 1024 * 1024;
    let took = transfer(&mut sim, total, Duration::from_secs(120));
    let c = *sim.a.conn().counters();
    let s = *sim.b.conn().counters();
    assert!(c.retransmits > 0 && c.fast_retransmits > 0, "{c:?}");
    assert!(s.ooo_segments > 0, "{s:?}");
    assert!(c.dup_acks > 0);
    assert!(sim.ab.duplicated > 0 && sim.ab.lost > 0);
    // 2 MiB at no less than 100 KB/s.
    assert!(took < Duration::from_secs(21), "took {took:?}, client {c:?}");
}

#[test]
fn no_stall_with_one_percent_loss_each_way() {
    for seed in 10..16 {
        let link = LinkConfig { delay: ms(15), jitter: ms(1), loss_ppm: 10_000, ..LinkConfig::default() };
        let mut sim = Sim::symmetric(seed, link);
        sim.handshake(&cfg(), &cfg());
        let total = 1024 * 1024;
        let took = transfer(&mut sim, total, Duration::from_secs(300));
        let c = *sim.a.conn().counters();
        assert!(c.retransmits > 0, "seed {seed}: {c:?}");
        // Proportional bound: at least 100 KB/s on a 30 ms RTT with 1% loss.
        assert!(took < Duration::from_millis(total / 100), "seed {seed}: {took:?} {c:?}");
    }
}

/// Both congestion controls complete a 4 MiB transfer over a 1%-loss, 30 ms-RTT path
/// (at least 100 KB/s), repairing losses by fast retransmit.
#[test]
fn cubic_and_newreno_both_complete_through_loss() {
    use ironpath_tcp::Congestion;
    for algo in [Congestion::Cubic, Congestion::NewReno] {
        let c = Config { congestion: algo, ..cfg() };
        let link = LinkConfig { delay: ms(15), jitter: ms(1), loss_ppm: 10_000, ..LinkConfig::default() };
        let mut sim = Sim::symmetric(21, link);
        sim.handshake(&c, &c);
        assert_eq!(sim.a.conn().info().congestion, algo);
        let total = 4 * 1024 * 1024;
        let took = transfer(&mut sim, total, Duration::from_secs(600));
        let k = *sim.a.conn().counters();
        assert!(k.fast_retransmits > 0, "{algo:?}: {k:?}");
        assert!(took < Duration::from_millis(total / 100), "{algo:?}: {took:?} {k:?}");
        let info = sim.a.conn().info();
        assert!(info.ssthresh >= 2 * info.smss, "{algo:?}: {info:?}");
    }
}

#[test]
fn transfer_across_the_sequence_number_wrap() {
    let mut sim = Sim::symmetric(19, LinkConfig { jitter: ms(2), loss_ppm: 5_000, ..LinkConfig::default() });
    // Open at the time that puts the client's ISS 100 kB below 2^32.
    let local = Endpoint::new(client_addr(), CLIENT_PORT);
    let remote = Endpoint::new(server_addr(), SERVER_PORT);
    let f = sim.isn.isn(Time::ZERO, &local, &remote).0;
    let ticks = (u32::MAX - 100_000).wrapping_sub(f);
    sim.now = Time::from_micros(4 * u64::from(ticks));
    sim.handshake(&cfg(), &cfg());
    let iss = sim.ab.log[0].seq();
    assert!(iss > u32::MAX - 100_001 && iss < u32::MAX - 90_000, "ISS {iss}");
    transfer(&mut sim, 1024 * 1024, Duration::from_secs(60));
    assert!(sim.a.conn().info().snd_una.0 < 2_000_000, "wrapped");
    assert!(sim.a.conn().counters().retransmits > 0);
}

#[test]
fn gro_aggregates_count_as_original_segments() {
    let link = LinkConfig { rate: 125_000_000, batch: Duration::from_micros(50), ..LinkConfig::default() };
    let mut sim = Sim::symmetric(5, link);
    sim.b.gro = 8;
    sim.handshake(&cfg(), &cfg());
    transfer(&mut sim, 4 * 1024 * 1024, Duration::from_secs(60));
    let s = *sim.b.conn().counters();
    let data_segments = sim.ab.data().count() as u64;
    assert!(sim.b.aggregates > 100, "the link aggregated: {}", sim.b.aggregates);
    // segs_in counts original segments; each aggregate of two or more is ACKed at once,
    // so the sender sees fewer ACKs but its cwnd still grew normally.
    assert!(s.segs_in >= data_segments);
    assert!(sim.a.conn().info().cwnd > 100 * 1448);
}

fn close_both(sim: &mut Sim, limit: Duration) -> (Vec<State>, Vec<State>) {
    let (mut sa, mut sb) = (vec![sim.a.state()], vec![sim.b.state()]);
    let deadline = sim.now + limit;
    sim.run_until(deadline, |s| {
        if sa.last() != Some(&s.a.state()) {
            sa.push(s.a.state());
        }
        if sb.last() != Some(&s.b.state()) {
            sb.push(s.b.state());
        }
        // The server closes once it has read the client's FIN.
        if s.b.state() == State::CloseWait {
            while s.b.conn().recv().is_some() {}
            if !s.b.conn().may_recv() {
                s.b.conn().close();
            }
        }
        s.a.state() == State::Closed && s.b.state() == State::Closed
    });
    (sa, sb)
}

#[test]
fn active_close_and_passive_close_with_time_wait() {
    let mut sim = Sim::symmetric(6, LinkConfig::default());
    sim.handshake(&cfg(), &cfg());
    transfer(&mut sim, 100_000, Duration::from_secs(10));
    sim.a.conn().close();
    assert_eq!(sim.a.state(), State::FinWait1);
    let mut tw_at = None;
    let mut cw_at = None;
    let (sa, sb) = {
        let (mut sa, mut sb) = (vec![sim.a.state()], vec![sim.b.state()]);
        let deadline = sim.now + Duration::from_secs(120);
        sim.run_until(deadline, |s| {
            if sa.last() != Some(&s.a.state()) {
                sa.push(s.a.state());
                if s.a.state() == State::TimeWait {
                    tw_at = Some(s.now);
                }
            }
            if sb.last() != Some(&s.b.state()) {
                sb.push(s.b.state());
            }
            // The server closes a while after the client's FIN (not in the same
            // segment as its ACK).
            if s.b.state() == State::CloseWait {
                assert!(!s.b.conn().may_recv());
                let since = *cw_at.get_or_insert_with(|| {
                    s.wake_at(s.now + ms(100));
                    s.now
                });
                if s.now - since >= ms(100) {
                    s.b.conn().close();
                }
            }
            s.a.state() == State::Closed && s.b.state() == State::Closed
        });
        (sa, sb)
    };
    use State::*;
    assert_eq!(sa, [FinWait1, FinWait2, TimeWait, Closed]);
    assert_eq!(sb, [Established, CloseWait, LastAck, Closed]);
    assert_eq!(sim.now - tw_at.unwrap(), Duration::from_secs(60), "TIME-WAIT lasts 2 MSL");
    assert_eq!(sim.a.conn().error(), None);
    assert_eq!(sim.b.conn().error(), None);
}

#[test]
fn simultaneous_close_goes_through_closing() {
    let mut sim = Sim::symmetric(7, LinkConfig::default());
    sim.handshake(&cfg(), &cfg());
    sim.a.conn().close();
    sim.b.conn().close();
    let (sa, sb) = close_both(&mut sim, Duration::from_secs(120));
    use State::*;
    assert_eq!(sa, [FinWait1, Closing, TimeWait, Closed]);
    assert_eq!(sb, [FinWait1, Closing, TimeWait, Closed]);
}

#[test]
fn simultaneous_open() {
    let mut sim = Sim::symmetric(8, LinkConfig { delay: ms(20), ..LinkConfig::default() });
    let a = Endpoint::new(client_addr(), 5000);
    let b = Endpoint::new(server_addr(), 6000);
    let isn = sim.isn;
    sim.a.conn = Some(Connection::connect(sim.now, a, b, &cfg(), &isn).unwrap());
    sim.b.conn = Some(Connection::connect(sim.now, b, a, &cfg(), &isn).unwrap());
    let mut seen_syn_received = false;
    let deadline = sim.now + Duration::from_secs(5);
    assert!(sim.run_until(deadline, |s| {
        seen_syn_received |= s.a.state() == State::SynReceived;
        s.a.state() == State::Established && s.b.state() == State::Established
    }));
    assert!(seen_syn_received, "crossing SYNs go through SYN-RECEIVED");
    assert_eq!(sim.a.conn().info().window_scale, Some((3, 3)));
    transfer(&mut sim, 200_000, Duration::from_secs(10));
}

#[test]
fn zero_window_probes_then_window_update() {
    let small = Config { recv_buffer: 16 * 1024, ..cfg() };
    let mut sim = Sim::symmetric(9, LinkConfig::default());
    sim.handshake(&cfg(), &small);
    let total = 200_000;
    let mut bulk = Bulk::new(total, 1);
    bulk.reading = false;
    // The server does not read: the window closes and the client probes.
    let deadline = sim.now + Duration::from_secs(20);
    sim.run_until(deadline, |s| {
        bulk.write(s.a.conn());
        false
    });
    let c = *sim.a.conn().counters();
    assert_eq!(sim.a.conn().info().snd_wnd, 0);
    assert_eq!(sim.b.conn().recv_queue(), 16 * 1024, "the whole buffer and no more");
    assert!(c.zero_window_probes >= 3, "{c:?}");
    assert_eq!(c.rto_timeouts, 0, "a zero window is not a loss");
    // Probe intervals back off: 200 ms (RTO floor), 400, 800, ...
    let probes: Vec<Time> = sim.ab.data().filter(|s| s.repr.payload_len == 1).map(|s| s.at).collect();
    let gaps: Vec<u64> = probes.windows(2).map(|w| (w[1] - w[0]).as_millis() as u64).collect();
    assert!(gaps.windows(2).all(|g| g[1] >= g[0]), "probe intervals grow: {gaps:?}");
    assert!(gaps.len() >= 2 && gaps[1] >= 2 * gaps[0] - 1, "probe intervals double: {gaps:?}");
    // Reading reopens the window with an update, and the transfer completes.
    bulk.reading = true;
    let deadline = sim.now + Duration::from_secs(30);
    assert!(sim.run_until(deadline, |s| {
        bulk.write(s.a.conn());
        bulk.read(s.b.conn());
        bulk.done()
    }));
    assert!(sim.b.conn().counters().window_updates >= 1);
}

#[test]
fn rto_backs_off_while_link_is_down_then_recovers() {
    let mut sim = Sim::symmetric(11, LinkConfig::default());
    sim.handshake(&cfg(), &cfg());
    transfer(&mut sim, 50_000, Duration::from_secs(5));
    let down_from = sim.now;
    let down_to = down_from + Duration::from_secs(20);
    sim.ab.down.push((down_from, down_to));
    sim.ba.down.push((down_from, down_to));
    let took = transfer(&mut sim, 500_000, Duration::from_secs(120));
    let c = *sim.a.conn().counters();
    assert!(c.rto_timeouts >= 5, "{c:?}");
    // The oldest unacknowledged segment is resent at doubling intervals while the link is down.
    // The first segment resent by the retransmission timer (the final ACKs of the
    // first transfer were lost too, so it may predate the outage).
    let first = sim.ab.data().find(|s| s.at > down_from + ms(100)).unwrap().seq();
    let resends: Vec<Time> = sim.ab.data().filter(|s| s.seq() == first).map(|s| s.at).collect();
    let gaps: Vec<u128> = resends.windows(2).map(|w| (w[1] - w[0]).as_millis()).collect();
    assert!(gaps.len() >= 5, "{gaps:?}");
    for g in gaps.windows(2).take(4) {
        assert!(g[1] >= 2 * g[0] - 2 && g[1] <= 2 * g[0] + 2, "RTO doubles: {gaps:?}");
    }
    assert!(took > Duration::from_secs(20) && took < Duration::from_secs(60), "{took:?}");
}

#[test]
fn sack_blocks_describe_the_out_of_order_queue() {
    let mut sim = Sim::symmetric(12, LinkConfig::default());
    sim.handshake(&cfg(), &cfg());
    // Drop the 20th data segment once.
    sim.ab.filter = Some(Box::new(|_, index| index == 20));
    transfer(&mut sim, 200_000, Duration::from_secs(10));
    let lost = sim.ab.data().find(|s| s.dropped).unwrap().clone();
    let hole_end = lost.seq().wrapping_add(lost.repr.payload_len as u32);
    // Every ACK that still misses the segment reports the data beyond it, newest first.
    let mut reported = 0;
    for ack in &sim.ba.log {
        if ack.repr.ack_number != Some(lost.seq()) {
            continue;
        }
        let Some((left, right)) = ack.repr.sack_ranges[0] else { continue };
        assert_eq!(left, hole_end, "the block starts after the hole");
        assert!(right.wrapping_sub(left) > 0 && right.wrapping_sub(left) % 1448 == 0);
        assert_eq!(ack.repr.sack_ranges[1], None, "one hole, one block");
        reported += 1;
    }
    assert!(reported >= 3, "dup ACKs with SACK: {reported}");
    let after = sim.ba.log.iter().find(|a| a.repr.ack_number.is_some_and(|n| n.wrapping_sub(lost.seq()) as i32 > 0));
    assert_eq!(after.unwrap().repr.sack_ranges, [None; 3], "no blocks once the hole is filled");
}

#[test]
fn fast_retransmit_repairs_a_single_loss() {
    let mut sim = Sim::symmetric(13, LinkConfig::default());
    sim.handshake(&cfg(), &cfg());
    sim.ab.filter = Some(Box::new(|_, index| index == 30));
    transfer(&mut sim, 500_000, Duration::from_secs(10));
    let c = *sim.a.conn().counters();
    assert_eq!((c.fast_retransmits, c.retransmits, c.rto_timeouts, c.partial_acks), (1, 1, 0, 0), "{c:?}");
    assert!(c.dup_acks >= 3);
    let info = sim.a.conn().info();
    assert!(!info.in_recovery);
    assert!(info.ssthresh < u32::MAX, "the loss set ssthresh");
}

#[test]
fn newreno_partial_ack_repairs_two_losses_in_one_window() {
    let mut sim = Sim::symmetric(14, LinkConfig::default());
    sim.handshake(&cfg(), &cfg());
    sim.ab.filter = Some(Box::new(|_, index| index == 30 || index == 34));
    transfer(&mut sim, 500_000, Duration::from_secs(10));
    let c = *sim.a.conn().counters();
    assert_eq!((c.fast_retransmits, c.partial_acks, c.retransmits, c.rto_timeouts), (1, 1, 2, 0), "{c:?}");
}

#[test]
fn syn_retransmits_with_backoff_then_times_out() {
    let mut sim = Sim::symmetric(15, LinkConfig::default());
    sim.ab.down.push((Time::ZERO, Time::from_secs(1_000_000)));
    sim.client_server(&cfg(), &cfg());
    let start = sim.now;
    let deadline = start + Duration::from_secs(600);
    assert!(sim.run_until(deadline, |s| s.a.state() == State::Closed));
    assert_eq!(sim.a.conn().error(), Some(ConnError::TimedOut));
    let sent: Vec<u128> = sim.ab.log.iter().map(|s| (s.at - start).as_millis()).collect();
    assert_eq!(sent, [0, 1000, 3000, 7000, 15000, 31000, 63000]);
    // The seventh timeout gives up; the RTO is capped at 60 s.
    assert_eq!(sim.now - start, Duration::from_secs(123));
}

#[test]
fn connect_to_closed_port_is_refused() {
    let mut sim = Sim::symmetric(16, LinkConfig::default());
    let local = Endpoint::new(client_addr(), CLIENT_PORT);
    let remote = Endpoint::new(server_addr(), 9);
    sim.a.conn = Some(Connection::connect(sim.now, local, remote, &cfg(), &sim.isn).unwrap());
    let deadline = sim.now + Duration::from_secs(5);
    assert!(sim.run_until(deadline, |s| s.a.state() == State::Closed));
    assert_eq!(sim.a.conn().error(), Some(ConnError::Refused));
}

#[test]
fn abort_resets_the_peer() {
    let mut sim = Sim::symmetric(17, LinkConfig::default());
    sim.handshake(&cfg(), &cfg());
    sim.a.conn().abort();
    assert_eq!(sim.a.conn().error(), Some(ConnError::Aborted));
    let deadline = sim.now + Duration::from_secs(5);
    assert!(sim.run_until(deadline, |s| s.b.state() == State::Closed));
    assert_eq!(sim.b.conn().error(), Some(ConnError::Reset));
    assert_eq!(sim.ab.log.last().unwrap().repr.control, TcpControl::Rst);
}

#[test]
fn lost_final_ack_restarts_time_wait() {
    // The server closes first and ends in TIME-WAIT; its ACK of the client's FIN is
    // lost, the client resends the FIN from LAST-ACK, and TIME-WAIT starts over.
    let mut sim = Sim::symmetric(18, LinkConfig::default());
    sim.handshake(&cfg(), &cfg());
    sim.b.conn().close();
    let deadline = sim.now + Duration::from_secs(200);
    let (mut tw_at, mut closed_at) = (None, None);
    sim.run_until(deadline, |s| {
        if s.a.state() == State::CloseWait {
            let fin_ack = s.a.conn().info().snd_nxt.0.wrapping_add(1);
            let mut once = true;
            s.ba.filter = Some(Box::new(move |repr, _| {
                let hit = once && repr.ack_number == Some(fin_ack);
                once &= !hit;
                hit
            }));
            s.a.conn().close();
        }
        if tw_at.is_none() && s.b.state() == State::TimeWait {
            tw_at = Some(s.now);
        }
        if closed_at.is_none() && s.b.state() == State::Closed {
            closed_at = Some(s.now);
        }
        s.a.state() == State::Closed && s.b.state() == State::Closed
    });
    assert_eq!((sim.a.state(), sim.b.state()), (State::Closed, State::Closed));
    assert_eq!(sim.a.conn().error(), None);
    assert_eq!(sim.a.conn().counters().retransmits, 1, "the client resent its FIN");
    assert_eq!(sim.b.conn().counters().out_of_window, 1, "the resent FIN is old news");
    let time_wait = closed_at.unwrap() - tw_at.unwrap();
    assert!(time_wait >= Duration::from_millis(60_200) && time_wait < Duration::from_secs(62), "{time_wait:?}");
}

#[test]
fn tso_sends_whole_mss_multiples_and_the_stream_arrives_intact() {
    let tso = Config { tso_max: 65_000, ..cfg() };
    // Clean: most data leaves in large segments.
    let link = LinkConfig { delay: ms(5), rate: 125_000_000, max_queue_delay: ms(50), ..LinkConfig::default() };
    let mut sim = Sim::symmetric(3, link);
    sim.handshake(&tso, &cfg());
    transfer(&mut sim, 10 * 1024 * 1024, Duration::from_secs(60));
    let smss = sim.a.conn().info().smss as usize;
    let sizes: Vec<usize> = sim.ab.data().map(|s| s.repr.payload_len).collect();
    let big = sizes.iter().filter(|&&n| n > smss).count();
    assert!(big * 2 > sizes.len(), "mostly TSO segments: {big} of {}", sizes.len());
    assert!(sizes.iter().all(|&n| n <= 65_000), "{sizes:?}");
    assert_eq!(sim.a.conn().counters().retransmits, 0);
    // Lossy: a lost TSO segment is resent (one MSS first), and the stream is intact.
    let link = LinkConfig { delay: ms(10), jitter: ms(2), loss_ppm: 50_000, ..LinkConfig::default() };
    let mut sim = Sim::symmetric(5, link);
    sim.handshake(&tso, &cfg());
    transfer(&mut sim, 4 * 1024 * 1024, Duration::from_secs(300));
    assert!(sim.a.conn().counters().retransmits > 0);
    assert!(sim.b.conn().counters().bytes_in >= 4 * 1024 * 1024);
}
