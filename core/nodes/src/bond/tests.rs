//! The bond: LACP between two of our machines and against hostile partners, the
//! PDU formats, and the two nodes built from YAML over in-process member queues
//! (failover, spreading, LACP through the nodes, the control frames).

use super::lacp::{self, state, Info, Lacp, Mux, Pdu, Timing, PDU_FRAME};
use super::*;
use crate::tests::{eth, ipv4, pool, udp, Rng};
use ironpath_eal::port::testing::{feed_rxq, sink_txq, FeedDevice, SinkDevice};
use ironpath_eal::TxQ;
use ironpath_graph::testing::{apply, call, idle};
use ironpath_graph::NodeStats;
use std::collections::HashMap;
use std::net::Ipv4Addr;

pub(super) const HZ: u64 = 1_000_000_000;
pub(super) const TICK: u64 = HZ / 10;
pub(super) const SYS_A: [u8; 6] = [0x02, 0xaa, 0, 0, 0, 1];
pub(super) const SYS_B: [u8; 6] = [0x02, 0xbb, 0, 0, 0, 1];
pub(super) const SYS_C: [u8; 6] = [0x02, 0xcc, 0, 0, 0, 1];

pub(super) fn fast() -> Timing {
    Timing { second: HZ, fast: true }
}

/// PDUs one side sent this tick: (member, frame).
pub(super) fn emit(l: &mut Lacp, now: u64, src: [u8; 6]) -> Vec<(usize, [u8; PDU_FRAME])> {
    let mut out = Vec::new();
    l.tick(now, |i, a, p| {
        let mut f = [0; PDU_FRAME];
        lacp::write_lacpdu(&mut f, src, a, p);
        out.push((i, f));
        true
    });
    out
}

pub(super) fn deliver(l: &mut Lacp, frames: &[(usize, [u8; PDU_FRAME])], now: u64, wired: &[bool]) {
    for (i, f) in frames {
        if !wired[*i] {
            continue;
        }
        let Ok(Pdu::Lacp { actor, partner }) = lacp::parse(f) else { panic!("our own LACPDU does not parse") };
        l.received(*i, &actor, &partner, now);
    }
}

/// Two bonds wired member to member, run for `secs` in 100 ms ticks: `a_up` and
/// `b_up` are the link states each side sees, `wired` which wires carry frames.
struct Wire {
    a: Lacp,
    b: Lacp,
    now: u64,
}

impl Wire {
    fn new(n: usize) -> Wire {
        let mut w = Wire { a: Lacp::new(n, SYS_A, 100, 7, fast()), b: Lacp::new(n, SYS_B, 200, 9, fast()), now: HZ };
        for i in 0..n {
            w.a.set_enabled(i, true, w.now);
            w.b.set_enabled(i, true, w.now);
        }
        w
    }

    fn run(&mut self, secs: f64, a_up: &[bool], b_up: &[bool], wired: &[bool], mut check: impl FnMut(&Wire)) {
        let end = self.now + (secs * HZ as f64) as u64;
        while self.now < end {
            self.now += TICK;
            for i in 0..a_up.len() {
                self.a.set_enabled(i, a_up[i], self.now);
                self.b.set_enabled(i, b_up[i], self.now);
            }
            let fa = emit(&mut self.a, self.now, SYS_A);
            let fb = emit(&mut self.b, self.now, SYS_B);
            deliver(&mut self.b, &fa, self.now, wired);
            deliver(&mut self.a, &fb, self.now, wired);
            check(self);
        }
    }

    fn carrying(l: &Lacp) -> Vec<bool> {
        (0..l.ports.len()).map(|i| l.distributing(i)).collect()
    }
}

#[test]
fn two_bonds_aggregate_every_member_and_agree_on_each_other() {
    let mut w = Wire::new(3);
    let all = [true; 3];
    w.run(5.0, &all, &all, &all, |_| {});
    assert_eq!(Wire::carrying(&w.a), all, "{:#?}", w.a.ports);
    assert_eq!(Wire::carrying(&w.b), all);
    assert_eq!(w.a.aggregate, Some((200, SYS_B, 9)));
    assert_eq!(w.b.aggregate, Some((100, SYS_A, 7)));
    for p in w.a.ports.iter().chain(&w.b.ports) {
        assert_eq!(p.mux, Mux::CollectingDistributing);
        let bits = state::ACTIVITY | state::TIMEOUT | state::AGGREGATION | state::SYNC | state::COLLECTING;
        assert_eq!(p.actor.state & bits, bits, "{}", lacp::state_words(p.actor.state));
        assert_eq!(p.partner.state & bits, bits, "{}", lacp::state_words(p.partner.state));
    }
    // Steady state: one LACPDU a second each way per member (fast rate), no more.
    let sent: u64 = w.a.ports.iter().map(|p| p.sent).sum();
    w.run(10.0, &all, &all, &all, |_| {});
    let more = w.a.ports.iter().map(|p| p.sent).sum::<u64>() - sent;
    assert!((27..=33).contains(&more), "{more} LACPDUs in 10 s on 3 members");
}

#[test]
fn a_member_whose_partner_falls_silent_leaves_and_rejoins_when_it_speaks_again() {
    let mut w = Wire::new(2);
    let all = [true; 2];
    w.run(5.0, &all, &all, &all, |_| {});
    // Wire 1 stops carrying frames; A sees its link go down at once, B (a partner
    // whose driver reports no link change, as DPDK's af_packet) only the silence.
    let t0 = w.now;
    let mut b_left = None;
    w.run(8.0, &[true, false], &all, &[true, false], |w| {
        assert!(!w.a.distributing(1), "A sends on a member whose link is down");
        assert!(w.a.distributing(0) && w.b.distributing(0), "the other member stopped");
        if b_left.is_none() && !w.b.distributing(1) {
            b_left = Some(w.now - t0);
        }
    });
    let left = b_left.expect("B kept a silent member");
    assert!(left <= 3 * HZ + TICK, "B kept the silent member {left} ns (short timeout 3 s)");
    assert_eq!(w.b.ports[1].rx, lacp::Rx::Defaulted);
    w.run(6.0, &all, &all, &all, |_| {});
    assert_eq!(Wire::carrying(&w.a), all);
    assert_eq!(Wire::carrying(&w.b), all);
}

#[test]
fn a_member_whose_partner_is_another_system_stays_out_of_the_aggregate() {
    let mut a = Lacp::new(2, SYS_A, 100, 7, fast());
    let mut b = Lacp::new(1, SYS_B, 200, 9, fast());
    let mut c = Lacp::new(1, SYS_C, 1, 9, fast());
    let mut now = HZ;
    for l in [&mut a, &mut b, &mut c] {
        for i in 0..l.ports.len() {
            l.set_enabled(i, true, now);
        }
    }
    for _ in 0..60 {
        now += TICK;
        let fa = emit(&mut a, now, SYS_A);
        let fb = emit(&mut b, now, SYS_B);
        let fc = emit(&mut c, now, SYS_C);
        // a's member 0 is wired to b, member 1 to c.
        for (i, f) in &fa {
            let Ok(Pdu::Lacp { actor, partner }) = lacp::parse(f) else { panic!() };
            if *i == 0 {
                b.received(0, &actor, &partner, now);
            } else {
                c.received(0, &actor, &partner, now);
            }
        }
        for (k, frames) in [(0, &fb), (1, &fc)] {
            for (_, f) in frames {
                let Ok(Pdu::Lacp { actor, partner }) = lacp::parse(f) else { panic!() };
                a.received(k, &actor, &partner, now);
            }
        }
    }
    assert!(a.distributing(0) && b.distributing(0));
    assert!(!a.distributing(1) && !a.collecting(1) && a.ports[1].mux == Mux::Detached);
    assert!(!c.distributing(0), "c aggregated with a member a keeps out");
    assert_eq!(a.aggregate, Some((200, SYS_B, 9)));
}

#[test]
fn a_partner_that_changes_its_view_every_frame_gets_three_lacpdus_a_second() {
    let mut a = Lacp::new(1, SYS_A, 100, 7, fast());
    let mut now = HZ;
    a.set_enabled(0, true, now);
    let mut sent = Vec::new();
    for k in 0..10_000u64 {
        now += HZ / 1000;
        // Every millisecond a LACPDU that sees us wrongly (NTT each time).
        let actor = Info { system: SYS_B, key: (k % 3) as u16 + 1, port: 1, state: state::ACTIVITY, ..Info::default() };
        let partner = Info { system: [k as u8; 6], ..Info::default() };
        a.received(0, &actor, &partner, now);
        a.tick(now, |_, _, _| {
            sent.push(now);
            true
        });
    }
    for w in sent.windows(4) {
        assert!(w[3] - w[0] >= HZ, "four LACPDUs within a second: {w:?}");
    }
    assert!(sent.len() >= 25, "{}", sent.len());
}

#[test]
fn our_own_lacpdu_looped_back_is_refused() {
    let mut a = Lacp::new(2, SYS_A, 100, 7, fast());
    a.set_enabled(0, true, HZ);
    let f = emit(&mut a, HZ, SYS_A);
    let Ok(Pdu::Lacp { actor, partner }) = lacp::parse(&f[0].1) else { panic!() };
    assert!(!a.received(0, &actor, &partner, HZ));
    assert_eq!(a.ports[0].rx, lacp::Rx::Expired);
}

#[test]
fn pdus_parse_as_written_and_malformed_ones_are_refused() {
    let actor = Info { system_priority: 1, system: SYS_A, key: 2, port_priority: 3, port: 4, state: 0x3d };
    let partner = Info { system_priority: 5, system: SYS_B, key: 6, port_priority: 7, port: 8, state: 0x47 };
    let mut f = [0; PDU_FRAME];
    lacp::write_lacpdu(&mut f, [2, 0, 0, 0, 0, 9], &actor, &partner);
    assert_eq!(&f[..6], &lacp::SLOW_MAC);
    assert_eq!(lacp::parse(&f), Ok(Pdu::Lacp { actor, partner }));
    // Later versions are read by their version 1 fields.
    let mut v2 = f;
    v2[15] = 2;
    assert_eq!(lacp::parse(&v2), Ok(Pdu::Lacp { actor, partner }));
    for (at, v) in [(16, 2), (17, 19), (36, 1), (37, 21), (56, 0), (57, 15), (15, 0), (12, 0x08)] {
        let mut g = f;
        g[at] = v;
        assert_eq!(lacp::parse(&g), Err(lacp::Bad::Malformed), "byte {at} = {v}");
    }
    for n in 0..60 {
        assert_eq!(lacp::parse(&f[..14 + n]), Err(lacp::Bad::Malformed), "{n} bytes of PDU");
    }
    let mut oam = f;
    oam[14] = 3;
    assert_eq!(lacp::parse(&oam), Err(lacp::Bad::Unknown));
    // Marker: the response carries the request's fields, TLV type 2.
    let mut m = [0; PDU_FRAME];
    m[12..14].copy_from_slice(&lacp::ETH_SLOW.to_be_bytes());
    m[14..18].copy_from_slice(&[2, 1, 1, 16]);
    m[18..32].copy_from_slice(&[0, 5, 2, 1, 2, 3, 4, 5, 0xde, 0xad, 0xbe, 0xef, 0, 0]);
    let Ok(Pdu::MarkerInfo(tlv)) = lacp::parse(&m) else { panic!() };
    let mut r = [0; PDU_FRAME];
    lacp::write_marker_response(&mut r, SYS_A, &tlv);
    assert_eq!(&r[14..18], &[2, 1, 2, 16]);
    assert_eq!(&r[18..32], &m[18..32]);
    assert_eq!(lacp::parse(&r), Ok(Pdu::MarkerResponse));
}

/// Random and mutated PDUs from a hostile partner on random members, with links
/// flapping: no panic, and the machines' invariants hold after every step.
#[test]
fn random_partners_keep_the_machines_consistent() {
    for seed in 1..=6u64 {
        let mut rng = Rng(seed * 0x9e37_79b9);
        let mut a = Lacp::new(4, SYS_A, 100, 7, fast());
        let mut b = Wire::new(4).b;
        let mut now = HZ;
        for _ in 0..20_000 {
            now += rng.next() % (HZ / 20);
            let i = (rng.next() % 4) as usize;
            match rng.next() % 8 {
                0 => a.set_enabled(i, !rng.next().is_multiple_of(4), now),
                1..=3 => {
                    let mut f = [0u8; PDU_FRAME];
                    let frames = emit(&mut b, now, SYS_B);
                    if let Some((_, g)) = frames.first() {
                        f = *g;
                    }
                    for _ in 0..(rng.next() % 4) {
                        let at = 14 + (rng.next() as usize % 110);
                        f[at] = rng.next() as u8;
                    }
                    let n = 14 + (rng.next() as usize % 111);
                    if let Ok(Pdu::Lacp { actor, partner }) = lacp::parse(&f[..n]) {
                        a.received(i, &actor, &partner, now);
                    }
                }
                _ => a.tick(now, |_, _, _| true),
            }
            for (k, p) in a.ports.iter().enumerate() {
                assert!(!a.distributing(k) || a.collecting(k));
                if p.mux == Mux::CollectingDistributing {
                    assert_eq!(p.partner.state & state::SYNC, state::SYNC, "collecting without the partner's sync");
                    assert!(p.selected);
                }
                if p.selected {
                    let id = (p.partner.system_priority, p.partner.system, p.partner.key);
                    assert_eq!(Some(id), a.aggregate, "a member selected for another aggregate");
                }
            }
        }
    }
}

/// What the node tests build bonds with: members `m0`..`m15` on in-process queues,
/// link and administrative flags the test sets, and the objects the two nodes share.
pub(super) struct Env16 {
    pub(super) pool: Mempool,
    feeds: HashMap<String, Arc<FeedDevice>>,
    sinks: HashMap<String, Arc<SinkDevice>>,
    txqs: HashMap<String, TxQ>,
    links: HashMap<String, Arc<AtomicBool>>,
    admin: HashMap<String, Arc<AtomicBool>>,
    shared: HashMap<String, Arc<dyn Any + Send + Sync>>,
}

pub(super) fn index(port: &str) -> Result<u16, String> {
    port.strip_prefix('m')
        .and_then(|n| n.parse::<u16>().ok())
        .filter(|&n| (n as usize) < MAX_MEMBERS)
        .ok_or_else(|| format!("no port `{port}`"))
}

impl crate::Env for Env16 {
    fn rx_queue(&mut self, port: &str, _: u16) -> Result<RxQ, String> {
        let (q, dev) = feed_rxq(index(port)?);
        self.feeds.insert(port.into(), dev);
        Ok(q)
    }
    fn tx_queue(&mut self, port: &str, _: u16) -> Result<TxQ, String> {
        index(port)?;
        self.txqs.remove(port).ok_or_else(|| format!("no TX queue of `{port}` left"))
    }
    fn port_mac(&self, port: &str) -> Result<[u8; 6], String> {
        Ok([0x02, 0x0a, 0, 0, 0, index(port)? as u8])
    }
    fn port_id(&self, port: &str) -> Result<u16, String> {
        index(port)
    }
    fn mempool(&self, _: Option<&str>, _: Option<&str>) -> Result<Mempool, String> {
        Ok(self.pool.clone())
    }
    fn tsc_hz(&self) -> u64 {
        HZ
    }
    fn admin_state(&self, port: &str) -> Option<Arc<AtomicBool>> {
        self.admin.get(port).cloned()
    }
    fn link_state(&mut self, port: &str) -> Option<Arc<AtomicBool>> {
        Some(self.links.entry(port.into()).or_insert_with(|| Arc::new(AtomicBool::new(true))).clone())
    }
    fn shared(
        &mut self,
        key: &str,
        make: &mut dyn FnMut() -> Arc<dyn Any + Send + Sync>,
    ) -> Option<Arc<dyn Any + Send + Sync>> {
        Some(self.shared.entry(key.into()).or_insert_with(make).clone())
    }
}

/// A bond `b` of `n` members and its bond_tx `t`.
pub(super) struct Bench {
    pub(super) env: Env16,
    /// The pool of the frames that arrive (so that the bond's pool can be emptied).
    pub(super) feed_pool: Mempool,
    pub(super) n: usize,
    pub(super) rx: Box<dyn Node>,
    pub(super) rx_stats: NodeStats,
    pub(super) tx: Box<dyn Node>,
    pub(super) tx_stats: NodeStats,
    pub(super) shared: Arc<Shared>,
    pub(super) now: u64,
}

impl Bench {
    pub(super) fn new(n: usize, params: &str) -> Bench {
        Bench::with_pool(n, params, 4096)
    }

    pub(super) fn with_pool(n: usize, params: &str, mbufs: u32) -> Bench {
        let list: Vec<String> = (0..n).map(|i| format!("{{port: m{i}}}")).collect();
        let ports: String = (0..MAX_MEMBERS).map(|i| format!("  - {{name: m{i}, driver: net_null}}\n")).collect();
        let yaml = format!(
            "ports:\n{ports}lcores: [{{id: 0}}]\nnodes:\n  - {{name: t, type: bond_tx, lcore: 0, params: {{bond: b}}}}\n  - {{name: b, type: bond, lcore: 0, params: {{members: [{}], {params}}}}}\n",
            list.join(", ")
        );
        let catalog = ironpath_config::Catalog { nodes: &[BOND.spec, BOND_TX.spec], drivers: None };
        let pipe = ironpath_config::parse_str(&yaml, std::path::Path::new("bond.yaml"), &catalog)
            .unwrap_or_else(|e| panic!("{yaml}: {e}"));
        let mut env = Env16 {
            pool: pool(mbufs),
            feeds: HashMap::new(),
            sinks: HashMap::new(),
            txqs: HashMap::new(),
            links: HashMap::new(),
            admin: HashMap::new(),
            shared: HashMap::new(),
        };
        for i in 0..MAX_MEMBERS {
            let (q, dev) = sink_txq(100_000, false);
            env.txqs.insert(format!("m{i}"), q);
            env.sinks.insert(format!("m{i}"), dev);
            env.admin.insert(format!("m{i}"), Arc::new(AtomicBool::new(true)));
        }
        let tx = crate::make_from(&[&BOND, &BOND_TX], &pipe.nodes[0], &[], &mut env).unwrap().node;
        let rx = crate::make_from(&[&BOND, &BOND_TX], &pipe.nodes[1], &["out"], &mut env).unwrap().node;
        let shared = env.shared["bond:b"].clone().downcast::<Shared>().expect("the bond's shared state");
        let (rx_stats, tx_stats) =
            (NodeStats::new(rx.counters()).with_gauges(rx.gauges()), NodeStats::new(tx.counters()));
        Bench { env, feed_pool: pool(4096), n, rx, rx_stats, tx, tx_stats, shared, now: HZ }
    }

    pub(super) fn arrive(&self, m: usize, frame: &[u8]) {
        self.arrive_as(m, frame, m as u16);
    }

    /// `frame` arriving on member `m`, the driver having written `port` as its port.
    pub(super) fn arrive_as(&self, m: usize, frame: &[u8], port: u16) {
        let mut b = Mbuf::from_slice(&self.feed_pool, frame).unwrap();
        b.header_mut().port = port;
        self.env.feeds[&format!("m{m}")].push(b);
    }

    /// One poll of the bond `dt` after the last, without bond_tx.
    pub(super) fn poll_rx(&mut self, dt: u64) -> Vec<(u16, Vec<u8>)> {
        self.now = self.now.wrapping_add(dt);
        let mut b = Burst::new();
        call(&mut *self.rx, &self.rx_stats, &mut b, self.now);
        let out = (0..b.len()).map(|i| (b.header(i).port, b.data(i).to_vec())).collect();
        b.free_all();
        out
    }

    /// One poll of the bond, then bond_tx idle (it sends the control frames).
    pub(super) fn poll(&mut self, dt: u64) -> Vec<(u16, Vec<u8>)> {
        let out = self.poll_rx(dt);
        idle(&mut *self.tx, &self.tx_stats, self.now);
        out
    }

    pub(super) fn send(&mut self, frames: &[Vec<u8>]) {
        let mut b = crate::tests::burst(&self.env.pool, frames);
        call(&mut *self.tx, &self.tx_stats, &mut b, self.now);
        assert!(b.is_empty(), "bond_tx left packets in its burst");
    }

    /// What member `m` sent: (data frames, control frames).
    pub(super) fn sent(&self, m: usize) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        self.env.sinks[&format!("m{m}")].take_log().into_iter().partition(|f| f.len() < 14 || f[12..14] != [0x88, 0x09])
    }

    pub(super) fn link(&self, m: usize, up: bool) {
        self.env.links[&format!("m{m}")].store(up, Ordering::Relaxed);
    }

    pub(super) fn admin(&self, m: usize, up: bool) {
        self.env.admin[&format!("m{m}")].store(up, Ordering::Relaxed);
    }

    pub(super) fn rx_count(&self, name: &str) -> u64 {
        self.rx_stats.extra_by_name(name).unwrap_or_else(|| panic!("no counter {name}"))
    }

    pub(super) fn tx_count(&self, name: &str) -> u64 {
        self.tx_stats.extra_by_name(name).unwrap_or_else(|| panic!("no counter {name}"))
    }

    pub(super) fn view(&mut self) -> BondView {
        let v = apply(&mut *self.rx, &self.rx_stats, Box::new(ShowBond));
        *v.downcast::<BondView>().expect("show bond")
    }

    /// Mbufs in use in both pools.
    pub(super) fn in_use(&self) -> u32 {
        self.env.pool.in_use() + self.feed_pool.in_use()
    }

    /// Frames still waiting in the members' receive queues.
    pub(super) fn queued(&self) -> usize {
        self.env.feeds.values().map(|f| f.queued()).sum()
    }
}

pub(super) fn flow(k: u32) -> Vec<u8> {
    let src = Ipv4Addr::from(0xc612_0000 + k);
    let dst = Ipv4Addr::new(198, 19, 0, 1);
    eth(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        0x0800,
        &ipv4(src, dst, 17, 64, &udp(src.into(), dst.into(), 1000 + k as u16, 53, b"q")),
    )
}

#[test]
fn active_backup_carries_traffic_on_one_member_and_fails_over_within_a_tick() {
    let mut p = Bench::new(2, "mode: active_backup");
    p.poll(0);
    p.arrive(0, &flow(1));
    p.arrive(1, &flow(2));
    let got = p.poll(1);
    assert_eq!(got.len(), 1, "only the active member's frame comes in");
    assert_eq!(got[0].0, 0, "received frames carry the bond's port (its first member's)");
    assert_eq!(p.rx_count("not_collecting"), 1);
    let frames: Vec<Vec<u8>> = (0..64).map(flow).collect();
    p.send(&frames);
    assert_eq!((p.sent(0).0.len(), p.sent(1).0.len()), (64, 0));
    // The active member's link goes down: the next tick moves traffic to m1.
    p.link(0, false);
    p.poll(TICK);
    p.send(&frames);
    assert_eq!((p.sent(0).0.len(), p.sent(1).0.len()), (0, 64));
    p.arrive(1, &flow(3));
    assert_eq!(p.poll(1).len(), 1);
    // m0 comes back: m1 stays active (no failback, as Linux without a primary).
    p.link(0, true);
    p.poll(TICK);
    p.send(&frames);
    assert_eq!((p.sent(0).0.len(), p.sent(1).0.len()), (0, 64));
    // Both down: nothing carries traffic, and that is counted.
    p.link(0, false);
    p.link(1, false);
    p.poll(TICK);
    p.send(&frames);
    assert_eq!(p.tx_count("no_member"), 64);
    assert_eq!(p.rx_count("changes"), 3, "m0, then m1, then none");
}

#[test]
fn balance_spreads_flows_and_keeps_each_flow_on_one_member() {
    let mut p = Bench::new(3, "mode: balance, hash: l34");
    p.poll(0);
    let frames: Vec<Vec<u8>> = (0..3000).map(flow).collect();
    let mut first: HashMap<Vec<u8>, usize> = HashMap::new();
    for round in 0..2 {
        for c in frames.chunks(200) {
            p.send(c);
        }
        for m in 0..3 {
            let (data, _) = p.sent(m);
            assert!((700..=1300).contains(&data.len()), "member {m}: {} of 3000 flows", data.len());
            for f in data {
                let was = first.entry(f).or_insert(m);
                assert_eq!(*was, m, "a flow moved between members (round {round})");
            }
        }
    }
    // One member down: its flows move, the others' stay.
    p.link(1, false);
    p.poll(TICK);
    p.send(&frames[..200]);
    assert!(p.sent(1).0.is_empty());
    let (d0, d2) = (p.sent(0).0, p.sent(2).0);
    assert_eq!(d0.len() + d2.len(), 200);
    for (m, d) in [(0, d0), (2, d2)] {
        for f in d {
            let was = first[&f];
            assert!(was == m || was == 1, "a flow of member {was} moved to {m}");
        }
    }
}

/// Our two nodes against a partner made of our own machines: LACPDUs leave
/// through bond_tx, the partner's are taken out of the graph, data flows once
/// both agree, and marker PDUs are answered.
#[test]
fn lacp_through_the_nodes_forms_the_aggregate_with_a_partner() {
    let mut p = Bench::new(2, "mode: lacp, lacp_rate: fast, system_priority: 10, key: 3");
    let mut partner = Lacp::new(2, SYS_B, 20, 5, fast());
    for i in 0..2 {
        partner.set_enabled(i, true, p.now);
    }
    let mut data_in = 0;
    for _ in 0..60 {
        p.arrive(0, &flow(9));
        for f in emit(&mut partner, p.now, SYS_B) {
            p.arrive(f.0, &f.1);
        }
        data_in += p.poll(TICK).len();
        for m in 0..2 {
            for f in p.sent(m).1 {
                let Ok(Pdu::Lacp { actor, partner: us }) = lacp::parse(&f) else { panic!("{f:02x?}") };
                assert_eq!(&f[6..12], &[2, 0x0a, 0, 0, 0, m as u8], "a LACPDU from the member's own MAC");
                assert_eq!(
                    (actor.system, actor.system_priority, actor.key, actor.port),
                    ([2, 0x0a, 0, 0, 0, 0], 10, 3, m as u16 + 1)
                );
                partner.received(m, &actor, &us, p.now);
            }
        }
    }
    assert!(partner.distributing(0) && partner.distributing(1), "{:#?}", partner.ports);
    assert_eq!(partner.aggregate, Some((10, [2, 0x0a, 0, 0, 0, 0], 3)));
    assert!(data_in > 10 && p.rx_count("not_collecting") > 10, "data before and after the aggregate formed");
    let frames: Vec<Vec<u8>> = (0..400).map(flow).collect();
    for c in frames.chunks(200) {
        p.send(c);
    }
    let (a, b) = (p.sent(0).0.len(), p.sent(1).0.len());
    assert!(a + b == 400 && a > 100 && b > 100, "{a} + {b}");
    assert!(
        p.rx_count("lacpdu_in") >= 12 && p.rx_count("lacpdu_out") >= 12,
        "{} in, {} out",
        p.rx_count("lacpdu_in"),
        p.rx_count("lacpdu_out")
    );
    // A marker on m1 is answered on m1 with the same fields; the sixth within a
    // second is not.
    let mut m = vec![0u8; PDU_FRAME];
    m[..6].copy_from_slice(&lacp::SLOW_MAC);
    m[12..14].copy_from_slice(&lacp::ETH_SLOW.to_be_bytes());
    m[14..18].copy_from_slice(&[2, 1, 1, 16]);
    m[18..24].copy_from_slice(&[0, 2, 2, 0xbb, 0, 0]);
    for _ in 0..6 {
        p.arrive(1, &m);
    }
    p.poll(1);
    let answers: Vec<Vec<u8>> = p.sent(1).1.into_iter().filter(|f| f[14] == 2).collect();
    assert_eq!(answers.len(), 5);
    assert_eq!(&answers[0][18..24], &m[18..24]);
    assert_eq!(answers[0][16], 2);
    assert_eq!(p.rx_count("marker_limited"), 1);
    // The partner falls silent: the bond stops sending within the short timeout
    // (3 s) and counts what it cannot carry.
    for _ in 0..35 {
        p.poll(TICK);
        let _ = p.sent(0);
        let _ = p.sent(1);
    }
    p.send(&frames[..10]);
    assert_eq!(p.tx_count("no_member"), 10);
}

#[test]
fn the_flow_hash_reads_any_frame_of_the_corpus() {
    for f in crate::attack::corpus::standard() {
        for h in [Hash::L2, Hash::L23, Hash::L34] {
            let _ = flow_hash(&f, h);
        }
    }
    // Fragments of one datagram hash alike under l34 (ports only in the first).
    let mut a = flow(1);
    let b = a.clone();
    assert_eq!(flow_hash(&a, Hash::L34), flow_hash(&b, Hash::L34));
    a[14 + 6] = 0x20;
    let mut c = a.clone();
    c[14 + 20..14 + 24].copy_from_slice(&[9, 9, 9, 9]);
    assert_eq!(flow_hash(&a, Hash::L34), flow_hash(&c, Hash::L34));
}

#[test]
fn bond_tx_counts_as_port_tx_first() {
    let ours: Vec<&str> = BondTxCounter::SPECS.iter().map(|s| s.name).collect();
    let port: Vec<&str> = crate::port::TxCounter::SPECS.iter().map(|s| s.name).collect();
    assert_eq!(&ours[..port.len()], &port[..], "bond_tx hands its counters to the members' port_tx senders");
}

#[test]
fn check_refuses_a_bond_tx_without_its_bond_and_a_member_taken_twice() {
    let catalog =
        ironpath_config::Catalog { nodes: &[BOND.spec, BOND_TX.spec, crate::port::PORT_RX.spec], drivers: None };
    let parse = |nodes: &str| {
        let yaml = format!(
            "ports: [{{name: m0, driver: net_null}}, {{name: m1, driver: net_null}}]\nlcores: [{{id: 0}}]\nnodes:\n{nodes}"
        );
        ironpath_config::parse_str(&yaml, std::path::Path::new("b.yaml"), &catalog).map(drop).map_err(|e| e.to_string())
    };
    let e = parse("  - {name: t, type: bond_tx, lcore: 0, params: {bond: b0}}\n").unwrap_err();
    assert!(e.contains("no `bond` node named `b0`"), "{e}");
    let e = parse(
        "  - {name: b, type: bond, lcore: 0, params: {members: [{port: m0}, {port: m1}]}}\n  - {name: r, type: port_rx, lcore: 0, params: {port: m1}}\n",
    )
    .unwrap_err();
    assert!(e.contains("RX queue 0 of port `m1`"), "{e}");
    let e = parse("  - {name: b, type: bond, lcore: 0, params: {members: [{port: m0}, {port: m0}]}}\n").unwrap_err();
    assert!(e.contains("member twice"), "{e}");
    let e = parse(
        "  - {name: b, type: bond, lcore: 0, params: {members: [{port: m0}]}}\n  - {name: t, type: bond_tx, lcore: 0, params: {bond: b}}\n  - {name: u, type: bond_tx, lcore: 0, params: {bond: b}}\n",
    )
    .unwrap_err();
    assert!(e.contains("has a `bond_tx` already"), "{e}");
}

/// A member is known by the queue a frame came from, not by the port id its driver
/// wrote (a ring or memif port may carry another port's).
#[test]
fn a_frame_belongs_to_the_member_it_was_received_on() {
    let mut p = Bench::new(2, "mode: active_backup");
    p.poll(0);
    p.arrive_as(0, &flow(1), 7);
    p.arrive_as(1, &flow(2), 0);
    let got = p.poll(1);
    assert_eq!(got.len(), 1, "only the active member's frame");
    assert_eq!((got[0].0, &got[0].1), (0, &flow(1)), "the bond's port on m0's frame");
    assert_eq!(p.rx_count("not_collecting"), 1, "m1's frame, though it says port 0");
}
