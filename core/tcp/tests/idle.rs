//! Keep-alive probes, the idle timeout and the FIN-WAIT-2 timeout, on the simulated
//! link (virtual time).
mod common;

use std::time::Duration;

use common::*;
use ironpath_tcp::{Config, ConnError, Keepalive, State, Time};
use ironpath_wire::TcpControl;

fn ka(idle: u64, interval: u64, probes: u32) -> Config {
    Config {
        keepalive: Some(Keepalive { idle: Duration::from_secs(idle), interval: Duration::from_secs(interval), probes }),
        ..Config::default()
    }
}

fn established(client: &Config, server: &Config) -> Sim {
    let mut sim = Sim::symmetric(7, LinkConfig::default());
    sim.handshake(client, server);
    sim
}

/// When the last segment of the handshake was sent: the connection is quiet from then
/// on (no window update follows it).
fn quiet_since(sim: &Sim) -> Time {
    sim.ab.log.iter().chain(sim.ba.log.iter()).map(|s| s.at).max().expect("the handshake sent segments")
}

/// Segments `a` sent at or after `from` whose sequence number is one below `snd_una`
/// and that carry no data: keep-alive probes.
fn probes_sent(sim: &Sim, from: Time, una: u32) -> Vec<Time> {
    sim.ab
        .log
        .iter()
        .filter(|s| s.at >= from && !s.is_data() && s.repr.control == TcpControl::None)
        .filter(|s| s.repr.seq_number == una.wrapping_sub(1))
        .map(|s| s.at)
        .collect()
}

#[test]
fn keepalive_probes_an_idle_peer_that_answers_and_the_connection_stays() {
    let mut sim = established(&ka(10, 2, 3), &Config::default());
    let t0 = sim.now;
    let una = sim.a.conn().info().snd_una.0;
    let quiet = quiet_since(&sim);
    sim.run_until(t0 + Duration::from_secs(35), |_| false);
    assert_eq!((sim.a.state(), sim.b.state()), (State::Established, State::Established));
    // (`run_until` handles the first event past its deadline too: a fourth probe.)
    let probes: Vec<Time> =
        probes_sent(&sim, t0, una).into_iter().filter(|&t| t < t0 + Duration::from_secs(35)).collect();
    // One probe per quiet 10 s, each answered (the answer restarts the idle time).
    assert_eq!(probes.len(), 3, "{probes:?}");
    for (k, at) in probes.iter().enumerate() {
        let expect = quiet + Duration::from_secs(10 * (k as u64 + 1));
        assert!(*at >= expect && *at < expect + Duration::from_millis(100), "probe {k} at {at}, expected ~{expect}");
    }
    assert!(sim.a.conn().counters().keepalive_probes >= 3);
    // The server answered each with an ACK.
    let answers = sim.ba.log.iter().filter(|s| s.at > t0 + Duration::from_secs(9)).count();
    assert!(answers >= 3, "{answers}");
}

#[test]
fn keepalive_resets_a_peer_that_went_away() {
    let mut sim = established(&ka(10, 2, 3), &Config::default());
    let t0 = sim.now;
    let una = sim.a.conn().info().snd_una.0;
    let quiet = quiet_since(&sim);
    // The server vanishes: nothing `a` sends reaches it any more.
    sim.ab.down.push((t0, Time::from_secs(1_000)));
    sim.run_until(t0 + Duration::from_secs(60), |s| s.a.state() == State::Closed);
    assert_eq!(sim.a.state(), State::Closed);
    assert_eq!(sim.a.conn().error(), Some(ConnError::KeepaliveTimeout));
    let probes = probes_sent(&sim, t0, una);
    assert_eq!(probes.len(), 3, "{probes:?}");
    // Probes at 10, 12, 14 s; the reset at 16 s (three intervals unanswered).
    let closed_at = sim.ab.log.last().map(|s| s.at).unwrap();
    assert_eq!(sim.ab.log.last().unwrap().repr.control, TcpControl::Rst, "a RST tells the peer, if it is there");
    let expect = quiet + Duration::from_secs(16);
    assert!(closed_at >= expect && closed_at < expect + Duration::from_millis(100), "{closed_at} vs {expect}");
}

#[test]
fn keepalive_is_off_by_default_and_waits_while_data_is_outstanding() {
    let mut sim = established(&Config::default(), &Config::default());
    let t0 = sim.now;
    sim.run_until(t0 + Duration::from_secs(3 * 3600), |_| false);
    assert_eq!(sim.a.conn().counters().keepalive_probes, 0);
    assert_eq!((sim.a.state(), sim.b.state()), (State::Established, State::Established));
    assert!(sim.ab.log.iter().all(|s| s.at < t0 + Duration::from_secs(1)), "an idle pair sends nothing");

    // Data outstanding to a vanished peer: retransmissions, not probes, end it.
    let mut sim = established(&ka(10, 2, 3), &Config::default());
    let t0 = sim.now;
    sim.ab.down.push((t0, Time::from_secs(100_000)));
    sim.a.conn().send(ironpath_tcp::testing::Bytes::from(stream(0, 1000))).unwrap();
    sim.run_until(t0 + Duration::from_secs(60), |_| false);
    assert_eq!(sim.a.conn().counters().keepalive_probes, 0);
    assert!(sim.a.conn().counters().rto_timeouts >= 3);
}

#[test]
fn idle_timeout_resets_a_quiet_connection_and_traffic_keeps_it() {
    let server = Config { idle_timeout: Some(Duration::from_secs(5)), ..Config::default() };
    // Traffic every second for 12 s: the timer never fires.
    let mut sim = established(&Config::default(), &server);
    let t0 = sim.now;
    for k in 1..=12u64 {
        let at = t0 + Duration::from_secs(k);
        sim.wake_at(at);
        sim.run_until(at, |s| s.now >= at);
        sim.a.conn().send(ironpath_tcp::testing::Bytes::from(stream(k, 10))).unwrap();
    }
    sim.run_until(sim.now + Duration::from_secs(1), |_| false);
    assert_eq!(sim.b.state(), State::Established);
    // Then quiet: reset 5 s after the last segment from the client.
    let quiet = sim.now;
    sim.run_until(quiet + Duration::from_secs(10), |s| s.b.state() == State::Closed);
    assert_eq!(sim.b.state(), State::Closed);
    assert_eq!(sim.b.conn().error(), Some(ConnError::IdleTimeout));
    sim.run_until(sim.now + Duration::from_secs(1), |s| s.a.state() == State::Closed);
    assert_eq!(sim.a.conn().error(), Some(ConnError::Reset), "the client got the RST");
}

#[test]
fn fin_wait2_times_out_when_the_peer_never_closes() {
    let client = Config { fin_wait2_timeout: Some(Duration::from_secs(3)), ..Config::default() };
    let mut sim = established(&client, &Config::default());
    sim.a.conn().close();
    sim.run_until(sim.now + Duration::from_secs(1), |s| s.a.state() == State::FinWait2);
    assert_eq!((sim.a.state(), sim.b.state()), (State::FinWait2, State::CloseWait));
    let t = sim.now;
    sim.run_until(t + Duration::from_secs(10), |s| s.a.state() == State::Closed);
    assert_eq!(sim.a.conn().error(), Some(ConnError::IdleTimeout));
    assert!(sim.now >= t + Duration::from_millis(2_900) && sim.now < t + Duration::from_secs(4), "{} {}", sim.now, t);
    sim.run_until(sim.now + Duration::from_secs(1), |s| s.b.state() == State::Closed);
    assert_eq!(sim.b.conn().error(), Some(ConnError::Reset));

    // Without the timeout FIN-WAIT-2 lasts (the peer may send for as long as it likes).
    let client = Config { fin_wait2_timeout: None, ..Config::default() };
    let mut sim = established(&client, &Config::default());
    sim.a.conn().close();
    sim.run_until(sim.now + Duration::from_secs(600), |_| false);
    assert_eq!(sim.a.state(), State::FinWait2);
}
