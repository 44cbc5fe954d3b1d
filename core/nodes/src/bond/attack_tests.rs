//! Adversarial tests of the bond: hostile PDUs and partners, floods, clock edge
//! cases, odd frames through the flow hash, and bond_tx under changing members.
//! Tests whose comment starts with "Fault" found one (each fixed since).

use super::lacp::{self, state, Info, Lacp, Mux, Pdu, Rx, Timing, PDU_FRAME};
use super::tests::{deliver, emit, fast, flow, Bench, HZ, SYS_A, SYS_B, SYS_C, TICK};
use super::*;
use crate::tests::{eth, ipv4, ipv6, udp, Rng};
use ironpath_graph::testing::idle;
use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};

const MS: u64 = HZ / 1000;
const SYS_D: [u8; 6] = [0x02, 0xdd, 0, 0, 0, 1];
/// What a partner that agrees to everything says of itself.
const GOOD: u8 =
    state::ACTIVITY | state::TIMEOUT | state::AGGREGATION | state::SYNC | state::COLLECTING | state::DISTRIBUTING;

fn lacpdu(src: [u8; 6], actor: &Info, partner: &Info) -> [u8; PDU_FRAME] {
    let mut f = [0; PDU_FRAME];
    lacp::write_lacpdu(&mut f, src, actor, partner);
    f
}

fn marker(port: u16, sys: [u8; 6], xid: u32) -> Vec<u8> {
    let mut m = vec![0u8; PDU_FRAME];
    m[..6].copy_from_slice(&lacp::SLOW_MAC);
    m[6..12].copy_from_slice(&sys);
    m[12..14].copy_from_slice(&lacp::ETH_SLOW.to_be_bytes());
    m[14..18].copy_from_slice(&[2, 1, 1, 16]);
    m[18..20].copy_from_slice(&port.to_be_bytes());
    m[20..26].copy_from_slice(&sys);
    m[26..30].copy_from_slice(&xid.to_be_bytes());
    m
}

fn id(p: &lacp::Port) -> (u16, [u8; 6], u16) {
    (p.partner.system_priority, p.partner.system, p.partner.key)
}

/// What must hold after every tick of the machines: a member carries traffic only
/// with a current, in-sync, collecting partner that is the aggregator's partner;
/// a member attached in any way is selected for the aggregate.
fn check_after_tick(l: &Lacp, what: &str) {
    for (k, p) in l.ports.iter().enumerate() {
        if l.distributing(k) {
            assert!(l.collecting(k), "{what}: member {k} distributes without collecting");
            assert_eq!(p.partner.state & state::COLLECTING, state::COLLECTING, "{what}: member {k}");
        }
        if p.mux == Mux::CollectingDistributing {
            assert_eq!(
                p.partner.state & state::SYNC,
                state::SYNC,
                "{what}: member {k} collecting without the partner's sync"
            );
            assert_eq!(p.rx, Rx::Current, "{what}: member {k} collecting with a partner not current");
            assert_eq!(
                p.partner.state & state::AGGREGATION,
                state::AGGREGATION,
                "{what}: member {k}: individual partner"
            );
        }
        if p.mux != Mux::Detached {
            assert!(p.selected, "{what}: member {k} attached ({:?}) without being selected", p.mux);
            assert_eq!(Some(id(p)), l.aggregate, "{what}: member {k} attached to another aggregate");
        }
        if p.selected {
            assert_eq!(Some(id(p)), l.aggregate, "{what}: member {k} selected for another aggregate");
        }
    }
}

/// Minimal valid LACPDU and marker frames, padded to 200 bytes.
fn base_frames() -> Vec<Vec<u8>> {
    let actor = Info { system_priority: 1, system: SYS_B, key: 2, port_priority: 3, port: 4, state: GOOD };
    let partner = Info { system_priority: 5, system: SYS_A, key: 6, port_priority: 7, port: 8, state: 0x3d };
    let mut l = lacpdu(SYS_B, &actor, &partner).to_vec();
    l.resize(200, 0);
    let mut m = marker(3, SYS_B, 0xdead_beef);
    m.resize(200, 0);
    let mut r = m.clone();
    r[16] = 2;
    vec![l, m, r]
}

#[test]
fn parse_takes_every_length_and_byte_without_panic_and_only_whole_pdus() {
    let mut a = Lacp::new(2, SYS_A, 100, 7, fast());
    let mut now = HZ;
    a.set_enabled(0, true, now);
    a.set_enabled(1, true, now);
    for base in base_frames() {
        for len in 0..=200 {
            let f = &base[..len];
            let r = lacp::parse(f);
            match r {
                Ok(Pdu::Lacp { .. }) => assert!(len >= 14 + 60, "a LACPDU taken from {len} bytes"),
                Ok(Pdu::MarkerInfo(_) | Pdu::MarkerResponse) => {
                    assert!(len >= 14 + 20, "a marker taken from {len} bytes")
                }
                Err(_) => {}
            }
            // All zeros of this length, and all ones.
            let _ = lacp::parse(&vec![0u8; len]);
            let _ = lacp::parse(&vec![0xffu8; len]);
            let mut z = vec![0u8; len];
            if len >= 14 {
                z[12..14].copy_from_slice(&lacp::ETH_SLOW.to_be_bytes());
            }
            let _ = lacp::parse(&z);
        }
        // Every byte value at every offset of the frame.
        for at in 0..PDU_FRAME + 4 {
            for v in 0..=255u8 {
                let mut g = base[..PDU_FRAME + 4].to_vec();
                g[at] = v;
                if let Ok(Pdu::Lacp { actor, partner }) = lacp::parse(&g) {
                    now += 1;
                    a.received((at + v as usize) % 2, &actor, &partner, now);
                    if v % 32 == 0 {
                        a.tick(now, |_, _, _| true);
                        check_after_tick(&a, "byte flip");
                    }
                }
            }
        }
    }
    a.tick(now, |_, _, _| true);
    check_after_tick(&a, "end");
}

/// LACPDUs that say they are longer/shorter in their TLVs, versions 0..255, and
/// the subtype bytes that are not LACP or marker.
#[test]
fn parse_checks_tlv_types_and_lengths_and_refuses_version_zero() {
    let base = &base_frames()[0];
    for v in 0..=255u8 {
        let mut g = base.clone();
        g[15] = v;
        assert_eq!(lacp::parse(&g).is_ok(), v != 0, "version {v}");
        let mut g = base.clone();
        g[14] = v;
        let r = lacp::parse(&g);
        match v {
            1 => assert!(matches!(r, Ok(Pdu::Lacp { .. }))),
            2 => assert!(r.is_err(), "a LACPDU body read as a marker: {r:?}"),
            _ => assert_eq!(r, Err(lacp::Bad::Unknown)),
        }
    }
    for at in [16, 17, 36, 37, 56, 57] {
        for v in 0..=255u8 {
            let mut g = base.clone();
            g[at] = v;
            if v != base[at] {
                assert_eq!(lacp::parse(&g), Err(lacp::Bad::Malformed), "byte {at} = {v}");
            }
        }
    }
}

/// Random frames of random length, and random LACPDU fields, into the machines:
/// no panic, and the invariants hold after every tick.
#[test]
fn random_pdus_and_fields_keep_the_invariants_after_every_tick() {
    for seed in 1..=4u64 {
        let mut rng = Rng(seed * 0x1234_5678_9abc);
        let mut a = Lacp::new(3, SYS_A, 100, 7, fast());
        let mut now = HZ;
        for i in 0..3 {
            a.set_enabled(i, true, now);
        }
        let base = base_frames();
        for _ in 0..20_000 {
            now += rng.next() % (HZ / 50);
            let i = (rng.next() % 3) as usize;
            match rng.next() % 6 {
                0 => {
                    let mut f = base[(rng.next() % 3) as usize].clone();
                    for _ in 0..(rng.next() % 6) {
                        let at = rng.next() as usize % f.len();
                        f[at] = rng.next() as u8;
                    }
                    let n = rng.next() as usize % 201;
                    if let Ok(Pdu::Lacp { actor, partner }) = lacp::parse(&f[..n]) {
                        a.received(i, &actor, &partner, now);
                    }
                }
                1 | 2 => {
                    // A partner of few identities whose fields and state bits vary,
                    // echoing our actor more often than not.
                    let r = rng.next();
                    let sys = [SYS_B, SYS_C, [0; 6], SYS_A][(r % 4) as usize];
                    let actor = Info {
                        system_priority: (r >> 8) as u16 % 2,
                        system: sys,
                        key: (r >> 16) as u16 % 2,
                        port_priority: 0,
                        port: (r >> 24) as u16 % 3,
                        state: (r >> 32) as u8 | if r & (1 << 60) != 0 { GOOD } else { 0 },
                    };
                    let mut partner = a.ports[i].actor;
                    if r & (1 << 61) != 0 {
                        partner.state ^= (r >> 40) as u8;
                    }
                    a.received(i, &actor, &partner, now);
                }
                3 => a.set_enabled(i, !rng.next().is_multiple_of(5), now),
                _ => {
                    a.tick(now, |_, _, _| true);
                    check_after_tick(&a, "random");
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Hostile partners against the pure machines.

/// How a hostile partner on member 1 speaks, PDU number `k`, seeing our actor
/// `us` on that member.
#[derive(Clone, Copy, Debug)]
enum Hostile {
    /// Claims our own system id.
    OurSystem,
    /// System 0, priority 0, key 0, port 0.
    Zero,
    /// The honest partner's identity (another port), AGGREGATION flipped each PDU.
    FlipAggregation,
    /// The honest partner's identity (another port), SYNC flipped each PDU.
    FlipSync,
    /// Two systems in turn.
    Alternate,
    /// Another system, agreeing to everything.
    Other,
    /// The honest partner's identity, but a different port number every PDU.
    PortHop,
}

const HOSTILES: [Hostile; 7] = [
    Hostile::OurSystem,
    Hostile::Zero,
    Hostile::FlipAggregation,
    Hostile::FlipSync,
    Hostile::Alternate,
    Hostile::Other,
    Hostile::PortHop,
];

impl Hostile {
    fn pdu(self, k: u64, us: &Info, honest: (u16, [u8; 6], u16)) -> (Info, Info) {
        let (hp, hs, hk) = honest;
        let mut partner = *us;
        let mut actor = Info { system_priority: hp, system: hs, key: hk, port_priority: 1, port: 77, state: GOOD };
        match self {
            Hostile::OurSystem => {
                actor.system = us.system;
                actor.system_priority = us.system_priority;
                actor.key = us.key;
            }
            Hostile::Zero => {
                actor = Info { system_priority: 0, system: [0; 6], key: 0, port_priority: 0, port: 0, state: GOOD }
            }
            Hostile::FlipAggregation => {
                if k % 2 == 1 {
                    actor.state &= !state::AGGREGATION;
                    partner.state ^= state::AGGREGATION;
                }
            }
            Hostile::FlipSync => {
                if k % 2 == 1 {
                    actor.state &= !(state::SYNC | state::COLLECTING | state::DISTRIBUTING);
                }
            }
            Hostile::Alternate => {
                actor.system = if k.is_multiple_of(2) { SYS_C } else { SYS_D };
            }
            Hostile::Other => actor.system = SYS_C,
            Hostile::PortHop => actor.port = 100 + (k % 50) as u16,
        }
        (actor, partner)
    }

    /// May member 1 join the honest partner's aggregate under this partner?
    fn may_join(self) -> bool {
        matches!(self, Hostile::FlipSync | Hostile::FlipAggregation)
    }
}

/// Member 0 on an honest partner (our own machines as system B), member 1 on a
/// hostile one sending `per_tick` PDUs every 100 ms: after every tick the
/// invariants hold, the honest member keeps carrying traffic from the moment it
/// first does, and member 1 carries traffic only with a partner that may join.
#[test]
fn hostile_partner_on_one_member_never_disturbs_the_honest_member() {
    for h in HOSTILES {
        for per_tick in [1u64, 7] {
            let mut a = Lacp::new(2, SYS_A, 100, 7, fast());
            let mut b = Lacp::new(1, SYS_B, 200, 9, fast());
            let mut now = HZ;
            a.set_enabled(0, true, now);
            a.set_enabled(1, true, now);
            b.set_enabled(0, true, now);
            let mut formed = false;
            let mut k = 0;
            for step in 0..200 {
                now += TICK;
                // The hostile partner starts after the honest aggregate formed.
                if step >= 40 {
                    for _ in 0..per_tick {
                        let (actor, partner) = h.pdu(k, &a.ports[1].actor, (200, SYS_B, 9));
                        a.received(1, &actor, &partner, now);
                        k += 1;
                    }
                }
                let fa = emit(&mut a, now, SYS_A);
                let fb = emit(&mut b, now, SYS_B);
                deliver(&mut b, &fa, now, &[true, false]);
                deliver(&mut a, &fb, now, &[true, false]);
                check_after_tick(&a, &format!("{h:?} x{per_tick}, step {step}"));
                if formed {
                    assert!(
                        a.distributing(0) && b.distributing(0),
                        "{h:?} x{per_tick}: the honest member stopped at {step}"
                    );
                    assert_eq!(a.aggregate, Some((200, SYS_B, 9)), "{h:?}: the aggregate moved");
                }
                formed |= a.distributing(0);
                if a.distributing(1) {
                    assert!(h.may_join(), "{h:?}: member 1 carries traffic to {:?}", a.ports[1].partner);
                }
            }
            assert!(formed, "{h:?}: the honest aggregate never formed");
            if matches!(h, Hostile::OurSystem) {
                assert_eq!(a.ports[1].received, 0, "our own system id taken");
            }
        }
    }
}

/// A partner that says a different system on each member, all agreeing to
/// everything: one aggregate, with the first member's partner; the others never
/// carry traffic.
#[test]
fn a_different_system_on_each_member_aggregates_one_member_only() {
    let mut a = Lacp::new(4, SYS_A, 100, 7, fast());
    let mut now = HZ;
    for i in 0..4 {
        a.set_enabled(i, true, now);
    }
    let systems = [SYS_B, SYS_C, SYS_D, [0; 6]];
    for step in 0..100 {
        now += TICK;
        for i in (0..4).rev() {
            let actor = Info { system_priority: 1, system: systems[i], key: 1, port_priority: 1, port: 1, state: GOOD };
            let us = a.ports[i].actor;
            a.received(i, &actor, &us, now);
        }
        a.tick(now, |_, _, _| true);
        check_after_tick(&a, &format!("step {step}"));
        let carrying: Vec<usize> = (0..4).filter(|&i| a.distributing(i)).collect();
        assert!(carrying.len() <= 1, "{carrying:?}");
    }
    assert_eq!((0..4).filter(|&i| a.distributing(i)).count(), 1);
}

/// 10,000 LACPDUs in one second, each a different view of us (NTT every time), on
/// each of 4 members: at most 3 LACPDUs in any second on any member, and after
/// the flood the steady rate comes back.
#[test]
fn a_lacpdu_flood_gets_at_most_three_lacpdus_a_second_per_member() {
    let mut a = Lacp::new(4, SYS_A, 100, 7, fast());
    let mut now = 0;
    for i in 0..4 {
        a.set_enabled(i, true, now);
    }
    let mut sent: Vec<Vec<u64>> = vec![Vec::new(); 4];
    for k in 0..10_000u64 {
        now += HZ / 10_000;
        let i = (k % 4) as usize;
        let actor =
            Info { system: SYS_B, key: 1, port: i as u16 + 1, state: GOOD ^ (k as u8 & 0x1f), ..Info::default() };
        let partner = Info { system: [k as u8; 6], state: k as u8, ..a.ports[i].actor };
        a.received(i, &actor, &partner, now);
        // Many ticks at the same instant, too.
        for _ in 0..3 {
            a.tick(now, |m, _, _| {
                sent[m].push(now);
                true
            });
        }
    }
    for (m, s) in sent.iter().enumerate() {
        for w in s.windows(4) {
            assert!(w[3] - w[0] >= HZ, "member {m}: four LACPDUs within a second: {w:?}");
        }
        assert!(!s.is_empty());
    }
}

#[test]
fn timers_at_zero_at_the_same_instant_and_after_a_huge_jump_do_not_panic_or_storm() {
    let mut a = Lacp::new(2, SYS_A, 100, 7, fast());
    let mut b = Lacp::new(2, SYS_B, 200, 9, fast());
    let all = [true, true];
    // Start at 0; a thousand ticks at 0.
    for i in 0..2 {
        a.set_enabled(i, true, 0);
        b.set_enabled(i, true, 0);
    }
    let mut n = 0;
    for _ in 0..1000 {
        n += emit(&mut a, 0, SYS_A).len();
    }
    assert!(n <= 6, "{n} LACPDUs at one instant on 2 members");
    // Form the aggregate, then the clock jumps by u64::MAX / 2, then runs on.
    let mut now = 0;
    let run = |a: &mut Lacp, b: &mut Lacp, now: &mut u64, ticks: usize| {
        for _ in 0..ticks {
            *now += TICK;
            let fa = emit(a, *now, SYS_A);
            let fb = emit(b, *now, SYS_B);
            deliver(b, &fa, *now, &all);
            deliver(a, &fb, *now, &all);
            check_after_tick(a, "jump");
        }
    };
    run(&mut a, &mut b, &mut now, 50);
    assert!(a.distributing(0) && a.distributing(1));
    now += u64::MAX / 2;
    run(&mut a, &mut b, &mut now, 50);
    assert!(a.distributing(0) && a.distributing(1), "{:#?}", a.ports);
}

/// `received` is refused on a member that is down, and `set_enabled` going down
/// and up at the same instant many times makes no LACPDU storm.
#[test]
fn a_member_flapping_at_one_instant_sends_at_most_three_lacpdus() {
    let mut a = Lacp::new(1, SYS_A, 100, 7, fast());
    let now = 5 * HZ;
    let mut n = 0;
    for k in 0..1000 {
        a.set_enabled(0, k % 2 == 0, now);
        let us = a.ports[0].actor;
        let ok = a.received(0, &Info { system: SYS_B, state: GOOD, ..Info::default() }, &us, now);
        assert_eq!(ok, k % 2 == 0);
        a.tick(now, |_, _, _| {
            n += 1;
            true
        });
        check_after_tick(&a, "flap");
    }
    assert!(n <= 3, "{n}");
}

/// Fault: between `received` (or `set_enabled`) and the next `tick`, a member stays
/// in CollectingDistributing and `distributing()` says yes although its partner
/// just withdrew its sync, or is now another system: the invariants the machines
/// keep after a tick (and which `tests::random_partners_keep_the_machines_consistent`
/// asserts after every step, `received` included) do not hold after `received`.
#[test]

fn distributing_is_withdrawn_as_soon_as_the_partner_withdraws_sync_or_changes_system() {
    let mut a = Lacp::new(1, SYS_A, 100, 7, fast());
    let mut b = Lacp::new(1, SYS_B, 200, 9, fast());
    let mut now = HZ;
    a.set_enabled(0, true, now);
    b.set_enabled(0, true, now);
    for _ in 0..50 {
        now += TICK;
        let fa = emit(&mut a, now, SYS_A);
        let fb = emit(&mut b, now, SYS_B);
        deliver(&mut b, &fa, now, &[true]);
        deliver(&mut a, &fb, now, &[true]);
    }
    assert!(a.distributing(0));
    let saved = a.clone();
    let us = a.ports[0].actor;
    // An honest partner going out of sync clears COLLECTING too: that stops us at once.
    let mut actor = b.ports[0].actor;
    actor.state &= !(state::SYNC | state::COLLECTING | state::DISTRIBUTING);
    now += 1;
    a.received(0, &actor, &us, now);
    assert!(!a.distributing(0));
    // A partner that withdraws SYNC but still says it collects.
    let mut a = saved.clone();
    let mut actor = b.ports[0].actor;
    actor.state &= !state::SYNC;
    a.received(0, &actor, &us, now);
    let sync_off = a.distributing(0);
    // Another system takes over the link, agreeing to everything.
    let mut a = saved;
    let other = Info { system: SYS_C, ..b.ports[0].actor };
    a.received(0, &other, &us, now);
    let other_system = a.distributing(0) && a.aggregate != Some(id(&a.ports[0]));
    // The mux moves at the next tick; until then the member neither collects nor
    // distributes.
    let not_selected = (a.collecting(0) || a.distributing(0)) && !a.ports[0].selected;
    assert!(
        !sync_off && !other_system && !not_selected,
        "right after received(): distributing with the partner's sync withdrawn: {sync_off}; \
         distributing to system {:02x?} while the aggregate is {:?}: {other_system}; in CollectingDistributing unselected: {not_selected}",
        a.ports[0].partner.system,
        a.aggregate
    );
}

// ---------------------------------------------------------------------------
// The nodes, over 16 in-process members with link and administrative flags.

/// In the view: every member marked distributing has a current, in-sync,
/// collecting partner that is the aggregator's partner.
fn check_view(v: &BondView, what: &str) {
    for (k, m) in v.members.iter().enumerate() {
        if !m.distributing {
            continue;
        }
        assert!(m.up, "{what}: member {k} distributes while down");
        let Some(p) = &m.lacp else { continue };
        assert_eq!(p.mux, Mux::CollectingDistributing, "{what}: member {k}");
        assert_eq!(p.rx, Rx::Current, "{what}: member {k}");
        assert_eq!(
            p.partner.state & (state::SYNC | state::COLLECTING),
            state::SYNC | state::COLLECTING,
            "{what}: member {k}"
        );
        assert_eq!(Some(id(p)), v.aggregate, "{what}: member {k} distributes to another system than the aggregate's");
    }
}

/// The honest partner (our machines as system B) answers what we sent this step,
/// on the members `wired`.
fn exchange(p: &mut Bench, b: &mut Lacp, wired: &[bool], dt: u64) -> Vec<(usize, Info)> {
    for (i, f) in emit(b, p.now, SYS_B) {
        if wired[i] {
            p.arrive(i, &f);
        }
    }
    p.poll(dt);
    let mut ours = Vec::new();
    for (m, &w) in wired.iter().enumerate().take(p.n) {
        for f in p.sent(m).1 {
            if let Ok(Pdu::Lacp { actor, partner }) = lacp::parse(&f) {
                if w {
                    b.received(m, &actor, &partner, p.now);
                }
                ours.push((m, actor));
            }
        }
    }
    ours
}

fn honest(n: usize, now: u64) -> Lacp {
    let mut b = Lacp::new(n, SYS_B, 200, 9, fast());
    for i in 0..n {
        b.set_enabled(i, true, now);
    }
    b
}

/// Through the nodes: member 0 on an honest partner, member 1 on each kind of
/// hostile partner (several PDUs per poll). Data keeps leaving on member 0 every
/// step; member 1 carries data only when its partner may join; after the bond's
/// next poll the view's invariants hold.
#[test]
fn node_hostile_partner_on_one_member_leaves_the_honest_member_carrying() {
    for h in HOSTILES {
        let mut p = Bench::new(2, "mode: lacp, lacp_rate: fast");
        let mut b = honest(2, p.now);
        b.set_enabled(1, false, p.now);
        let wired = [true, false];
        let mut us1 = Info::default();
        let mut k = 0;
        let frames: Vec<Vec<u8>> = (0..64).map(flow).collect();
        let mut formed_at = None;
        let mut no_member = 0;
        for step in 0..120 {
            if step >= 40 {
                for _ in 0..5 {
                    let (actor, partner) = h.pdu(k, &us1, (200, SYS_B, 9));
                    p.arrive(1, &lacpdu([2, 0xee, 0, 0, 0, 2], &actor, &partner));
                    k += 1;
                }
            }
            for (m, actor) in exchange(&mut p, &mut b, &wired, TICK) {
                if m == 1 {
                    us1 = actor;
                }
            }
            // Settle: the bond's next poll runs its machines on what it took.
            p.poll(1);
            let v = p.view();
            check_view(&v, &format!("{h:?} step {step}"));
            p.send(&frames);
            let (d0, d1) = (p.sent(0).0.len(), p.sent(1).0.len());
            if formed_at.is_some() {
                assert!(d0 > 0, "{h:?}: the honest member stopped carrying at step {step}");
                assert_eq!(v.aggregate, Some((200, SYS_B, 9)), "{h:?}");
            }
            if d0 > 0 && formed_at.is_none() {
                formed_at = Some(step);
            }
            if d1 > 0 {
                assert!(h.may_join(), "{h:?}: data on the hostile member at step {step}");
            }
            let dropped = p.tx_count("no_member") as usize - no_member;
            no_member += dropped;
            assert_eq!(d0 + d1 + dropped, 64, "{h:?} step {step}");
        }
        assert!(formed_at.is_some_and(|s| s < 40), "{h:?}: formed at {formed_at:?}");
    }
}

/// Fault (node): a LACPDU that withdraws the partner's sync, or puts another system
/// on the link, does not stop data on that member until the bond's next poll:
/// bond_tx keeps distributing on it meanwhile.
#[test]

fn node_stops_distributing_as_soon_as_the_partner_withdraws() {
    let mut p = Bench::new(2, "mode: lacp, lacp_rate: fast");
    let mut b = honest(2, p.now);
    let wired = [true, true];
    let mut us1 = Info::default();
    for _ in 0..60 {
        for (m, a) in exchange(&mut p, &mut b, &wired, TICK) {
            if m == 1 {
                us1 = a;
            }
        }
    }
    let frames: Vec<Vec<u8>> = (0..200).map(flow).collect();
    p.send(&frames);
    assert!(!p.sent(0).0.is_empty() && !p.sent(1).0.is_empty(), "both members carry");
    // Another system on member 1, agreeing to everything (a cable moved to another
    // switch, or a hostile partner).
    let other = Info { system: SYS_C, ..b.ports[1].actor };
    p.arrive(1, &lacpdu(SYS_C, &other, &us1));
    p.poll_rx(1);
    p.send(&frames);
    let after_change = p.sent(1).0.len();
    let v = p.view();
    let claims = v.members[1].distributing;
    assert!(
        after_change == 0 && !claims,
        "{after_change} frames sent on member 1 after its partner became {:02x?} (aggregate {:?}); view says distributing: {claims}",
        v.members[1].lacp.as_ref().map(|l| l.partner.system),
        v.aggregate
    );
}

/// Frames of every length 0..=130 with the slow EtherType, frames of 14 bytes,
/// VLAN-tagged LACPDUs and markers, on every member of a LACP bond: none reaches
/// the graph as LACP, none panics, the short ones are counted as refused, and the
/// machines take nothing from them.
#[test]
fn node_truncated_and_tagged_slow_frames_are_refused() {
    let mut p = Bench::new(2, "mode: lacp, lacp_rate: fast");
    p.poll(0);
    let actor = Info { system_priority: 1, system: SYS_B, key: 1, port_priority: 1, port: 1, state: GOOD };
    let good = lacpdu(SYS_B, &actor, &Info::default());
    let mut short = 0;
    for len in 0..=130usize {
        let mut f = good.to_vec();
        f.resize(len.max(PDU_FRAME), 0);
        f.truncate(len);
        for m in 0..2 {
            p.arrive(m, &f);
        }
        if (14..PDU_FRAME).contains(&len) {
            short += 2;
        }
        let out = p.poll(1);
        for (_, d) in &out {
            assert!(d.len() < 14 || d[12..14] != [0x88, 0x09], "a slow frame of {} bytes reached the graph", d.len());
        }
    }
    assert!(p.rx_count("lacpdu_refused") >= short, "{} refused of {short}", p.rx_count("lacpdu_refused"));
    // Only the frames of 124 bytes and more are whole LACPDUs (7 lengths x 2 members).
    assert_eq!(p.rx_count("lacpdu_in"), 14);
    // Tagged slow frames are not LACP.
    let before = p.rx_count("lacpdu_in");
    let tagged = crate::attack::frames::tagged(&good, 0x8100, 5);
    let qinq = crate::attack::frames::tagged(&tagged, 0x88a8, 7);
    let tagged_marker = crate::attack::frames::tagged(&marker(1, SYS_B, 1), 0x8100, 5);
    for f in [&tagged, &qinq, &tagged_marker] {
        for _ in 0..20 {
            p.arrive(0, f);
            p.arrive(1, f);
        }
    }
    for _ in 0..5 {
        p.poll(1);
    }
    assert_eq!(p.rx_count("lacpdu_in"), before);
    assert_eq!(p.rx_count("marker_replies"), 0);
    let (_, c0) = p.sent(0);
    assert!(c0.iter().all(|f| f[14] == lacp::SUBTYPE_LACP), "a marker response to a tagged frame");
    // Nothing left behind.
    p.rx.stop();
    p.tx.stop();
    assert_eq!(p.in_use(), p.queued() as u32);
}

/// 10,000 LACPDUs (a different view of us in each) and 10,000 marker PDUs in
/// one second on member 0, with bond_tx draining only every 50 ms: at most 3
/// LACPDUs and 5 marker responses in any second on the member (the markers by
/// the counter of responses made per poll window), control frames held stay
/// within two CTL_QUEUEs, the honest member 1 keeps its aggregate, and no mbuf
/// is lost.
#[test]
fn node_floods_are_rate_limited_and_bounded_and_leak_nothing() {
    let mut p = Bench::new(2, "mode: lacp, lacp_rate: fast");
    let baseline = p.in_use();
    let mut b = honest(2, p.now);
    b.set_enabled(0, false, p.now);
    let wired = [false, true];
    for _ in 0..60 {
        exchange(&mut p, &mut b, &wired, TICK);
    }
    assert!(p.view().members[1].distributing);
    let mut lacp_at: Vec<u64> = Vec::new();
    let mut marker_at: Vec<u64> = Vec::new();
    let mut ours = Info::default();
    let t0 = p.now;
    for ms in 0..1000u64 {
        for k in 0..10u64 {
            let n = ms * 10 + k;
            let actor = Info { system: SYS_C, key: 3, port: 1, state: GOOD ^ (n as u8 & 0x0e), ..Info::default() };
            let view = Info { key: n as u16, ..ours };
            p.arrive(0, &lacpdu(SYS_C, &actor, &view));
            p.arrive(0, &marker(1, SYS_C, n as u32));
        }
        // The honest partner on member 1.
        for (i, f) in emit(&mut b, p.now, SYS_B) {
            if wired[i] {
                p.arrive(i, &f);
            }
        }
        p.poll_rx(MS);
        assert!(p.shared.ctl.lock().unwrap().len() <= CTL_QUEUE);
        assert!(p.in_use() as usize <= p.queued() + 2 * CTL_QUEUE + 16, "{} mbufs in use", p.in_use());
        if ms % 50 == 0 {
            idle(&mut *p.tx, &p.tx_stats, p.now);
        }
        for m in 0..2 {
            for f in p.sent(m).1 {
                match lacp::parse(&f) {
                    Ok(Pdu::Lacp { actor, partner }) => {
                        if m == 0 {
                            lacp_at.push(p.now);
                            ours = actor;
                        } else {
                            b.received(1, &actor, &partner, p.now);
                        }
                    }
                    Ok(Pdu::MarkerResponse) => {
                        assert_eq!(m, 0);
                        marker_at.push(p.now);
                    }
                    r => panic!("member {m} sent {r:?}"),
                }
            }
        }
        assert!(p.view().members[1].distributing, "the honest member stopped at {ms} ms");
    }
    // bond_tx drains every 50 ms, so send times are late by up to 50 ms: a window
    // of 1 s + 50 ms.
    for w in lacp_at.windows(4) {
        assert!(w[3] - w[0] >= HZ - 50 * MS, "four LACPDUs within a second on member 0: {w:?}");
    }
    assert!(p.rx_count("marker_replies") <= 5 * 2, "{} marker responses in 1 s", p.rx_count("marker_replies"));
    assert!(marker_at.len() <= 10 && !marker_at.is_empty(), "{marker_at:?}");
    assert!(lacp_at.len() >= 2, "{lacp_at:?}");
    assert!(p.now - t0 >= HZ);
    // Quiet, drain, stop: every mbuf back.
    for _ in 0..20 {
        p.poll(TICK);
        let _ = (p.sent(0), p.sent(1));
    }
    assert_eq!(p.queued(), 0);
    p.rx.stop();
    p.tx.stop();
    assert_eq!(p.in_use(), baseline, "mbufs lost");
}

/// bond_tx never draining while 16 members get marker floods and LACP starts:
/// the control frames the bond holds stay bounded (64 handed over, 64 pending),
/// the rest are counted, and once bond_tx drains, all are sent or freed.
#[test]
fn node_control_frames_stay_bounded_when_bond_tx_does_not_drain() {
    let mut p = Bench::new(16, "mode: lacp, lacp_rate: fast");
    let baseline = p.in_use();
    for step in 0..30u32 {
        for m in 0..16 {
            for k in 0..4 {
                p.arrive(m, &marker(m as u16, SYS_C, step * 4 + k));
            }
        }
        p.poll_rx(MS);
        p.poll_rx(TICK);
        assert!(p.shared.ctl.lock().unwrap().len() <= CTL_QUEUE);
        assert!(p.in_use() as usize <= 2 * CTL_QUEUE + p.queued(), "{} mbufs held", p.in_use());
    }
    assert!(p.rx_count("ctl_full") > 0);
    idle(&mut *p.tx, &p.tx_stats, p.now);
    let sent: usize = (0..16).map(|m| p.sent(m).1.len()).sum();
    assert_eq!(sent, CTL_QUEUE);
    p.poll(1);
    p.poll(1);
    let more: usize = (0..16).map(|m| p.sent(m).1.len()).sum();
    // What was pending when bond_tx's queue was full was dropped and counted.
    assert!(more <= CTL_QUEUE, "{more}");
    p.rx.stop();
    p.tx.stop();
    assert_eq!(p.in_use(), baseline);
}

/// Fault: the marker limit is a fixed window that restarts with the first marker
/// a second after the last restart, so a requester gets 9 responses within
/// a millisecond: 1 at t, then 4 at t + 999 ms and 5 at t + 1 s.
#[test]

fn node_marker_responses_stay_at_five_in_any_second() {
    let mut p = Bench::new(1, "mode: lacp, lacp_rate: fast");
    p.poll(0);
    let mut at = Vec::new();
    let mut xid = 0;
    let mut burst = |p: &mut Bench, n: u32, dt: u64, at: &mut Vec<u64>| {
        for _ in 0..n {
            p.arrive(0, &marker(1, SYS_C, xid));
            xid += 1;
        }
        p.poll(dt);
        for f in p.sent(0).1 {
            if lacp::parse(&f) == Ok(Pdu::MarkerResponse) {
                at.push(p.now);
            }
        }
    };
    burst(&mut p, 1, 1, &mut at);
    burst(&mut p, 10, 999 * MS, &mut at);
    burst(&mut p, 10, MS, &mut at);
    for w in at.windows(6) {
        assert!(w[5] - w[0] >= HZ, "six marker responses within {} ms: {at:?}", (w[5] - w[0]) / MS);
    }
}

/// Markers on a member whose link is down, and in modes without LACP, are not
/// answered; markers with every TLV length are refused but for 16.
#[test]
fn node_markers_on_a_down_member_or_without_lacp_are_not_answered() {
    let mut p = Bench::new(2, "mode: lacp, lacp_rate: fast");
    p.link(1, false);
    p.poll(0);
    for k in 0..10 {
        p.arrive(1, &marker(1, SYS_C, k));
    }
    p.poll(1);
    assert!(p.sent(1).1.is_empty());
    assert_eq!(p.rx_count("marker_replies"), 0);
    for len in 0..=255u8 {
        let mut m = marker(1, SYS_C, 99);
        m[17] = len;
        p.arrive(0, &m);
        p.poll(HZ);
    }
    assert_eq!(p.rx_count("marker_replies"), 1);
    for mode in ["active_backup", "balance"] {
        let mut p = Bench::new(2, &format!("mode: {mode}"));
        p.poll(0);
        for k in 0..10 {
            p.arrive(0, &marker(1, SYS_C, k));
            p.arrive(1, &lacpdu(SYS_C, &Info { system: SYS_C, state: GOOD, ..Info::default() }, &Info::default()));
        }
        let out = p.poll(1);
        assert!(out.is_empty(), "{mode}: slow frames reached the graph");
        assert!(p.sent(0).1.is_empty() && p.sent(1).1.is_empty(), "{mode}: a control frame sent");
        // Without LACP every slow frame is another protocol's.
        assert_eq!(p.rx_count("slow_other"), 20, "{mode}");
        assert_eq!(p.rx_count("lacpdu_refused"), 0, "{mode}");
    }
}

/// The node with TSC 0 at its first poll, thousands of polls at one instant with
/// PDUs arriving, and small backward steps (cross-core TSC skew): no panic, no
/// LACPDU storm, and the aggregate forms and holds.
#[test]
fn node_clock_at_zero_same_instant_and_small_backward_steps() {
    let mut p = Bench::new(2, "mode: lacp, lacp_rate: fast");
    p.now = 0;
    let mut b = honest(2, 0);
    let wired = [true, true];
    let mut n = 0;
    for _ in 0..2000 {
        for (i, f) in emit(&mut b, p.now, SYS_B) {
            p.arrive(i, &f);
        }
        p.poll(0);
        n += p.sent(0).1.len() + p.sent(1).1.len();
    }
    assert!(n <= 6, "{n} LACPDUs at one instant");
    let mut rng = Rng(7);
    for step in 0..200 {
        // Forward a tick, sometimes back up to 5 ms.
        let dt = if rng.next().is_multiple_of(3) { (0u64).wrapping_sub(rng.next() % (5 * MS)) } else { TICK };
        exchange(&mut p, &mut b, &wired, dt);
        p.poll(1);
        check_view(&p.view(), &format!("step {step}"));
    }
    let v = p.view();
    assert!(v.members.iter().all(|m| m.distributing), "the aggregate did not hold");
}

/// The TSC jumping forward by u64::MAX / 2: no panic, and the aggregate is back
/// within the short timeout.
#[test]
fn node_clock_jumping_by_half_the_range_recovers() {
    let mut p = Bench::new(2, "mode: lacp, lacp_rate: fast");
    let mut b = honest(2, p.now);
    let wired = [true, true];
    for _ in 0..60 {
        exchange(&mut p, &mut b, &wired, TICK);
    }
    assert!(p.view().members.iter().all(|m| m.distributing));
    p.now += u64::MAX / 2;
    let mut back = None;
    for step in 0..100 {
        exchange(&mut p, &mut b, &wired, TICK);
        p.poll(1);
        check_view(&p.view(), "after the jump");
        if back.is_none() && p.view().members.iter().all(|m| m.distributing) && step > 0 {
            back = Some(step);
        }
    }
    assert!(back.is_some_and(|s| s <= 60), "{back:?}");
}

/// Fault: a TSC that steps back (10 s here) stalls the bond until the clock
/// catches up: `next_tick` lies in the future, so links are not read and the
/// active member's link going down is not seen; traffic is black-holed.
#[test]

fn node_fails_over_after_the_clock_steps_back() {
    let mut p = Bench::new(2, "mode: active_backup");
    p.now = 20 * HZ;
    p.poll(0);
    p.poll(TICK);
    p.now -= 10 * HZ;
    p.link(0, false);
    let frames: Vec<Vec<u8>> = (0..10).map(flow).collect();
    for _ in 0..10 {
        p.poll(TICK);
    }
    p.send(&frames);
    let (d0, d1) = (p.sent(0).0.len(), p.sent(1).0.len());
    assert_eq!((d0, d1), (0, 10), "1 s after the step back and the link loss, traffic still on the dead member");
}

/// Fault: a TSC near the top of its range overflows `now + ...` in the bond's and
/// the machines' timers (a panic in builds with overflow checks; in release the
/// timers wrap and fire at once, every poll).
#[test]

fn node_survives_a_tsc_near_the_top_of_its_range() {
    let mut p = Bench::new(2, "mode: lacp, lacp_rate: fast");
    let mut b = honest(2, 0);
    p.now = u64::MAX - 2 * HZ;
    for _ in 0..15 {
        // The partner's clock is its own.
        for (i, f) in emit(&mut b, 0, SYS_B) {
            p.arrive(i, &f);
        }
        p.poll(TICK);
    }
}

// ---------------------------------------------------------------------------
// The flow hash.

fn hash_all(f: &[u8]) {
    for h in [Hash::L2, Hash::L23, Hash::L34] {
        let x = flow_hash(f, h);
        assert_eq!(x, flow_hash(f, h), "not deterministic");
    }
}

fn templates() -> Vec<Vec<u8>> {
    let (s4, d4) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    let (s6, d6) = (Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1), Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2));
    let v4 = eth([2; 6], [4; 6], 0x0800, &ipv4(s4, d4, 17, 64, &udp(s4.into(), d4.into(), 1, 2, b"0123456789")));
    let v6 = eth([2; 6], [4; 6], 0x86dd, &ipv6(s6, d6, 6, 64, &[0u8; 24]));
    let tagged = |f: &[u8], tpid| crate::attack::frames::tagged(f, tpid, 9);
    let mut t =
        vec![v4.clone(), v6.clone(), tagged(&v4, 0x8100), tagged(&v6, 0x88a8), tagged(&tagged(&v4, 0x8100), 0x88a8)];
    for ihl in 0..16u8 {
        let mut f = v4.clone();
        f[14] = 0x40 | ihl;
        t.push(f);
    }
    t
}

#[test]
fn flow_hash_never_panics_on_any_length_or_byte() {
    for t in templates() {
        for len in 0..=t.len().min(80) {
            hash_all(&t[..len]);
            for at in 0..len {
                for v in [0u8, 1, 4, 5, 6, 0x11, 0x20, 0x3f, 0x40, 0x45, 0x4f, 0x60, 0x81, 0x86, 0x88, 0xa8, 0xdd, 0xff]
                {
                    let mut g = t[..len].to_vec();
                    g[at] = v;
                    hash_all(&g);
                }
            }
        }
    }
    let mut rng = Rng(3);
    for _ in 0..20_000 {
        let n = rng.next() as usize % 100;
        let f: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
        hash_all(&f);
        let mut g = f.clone();
        if n >= 14 {
            g[12..14].copy_from_slice(&[[0x08, 0x00], [0x86, 0xdd], [0x81, 0x00], [0x88, 0xa8]][n % 4]);
            if n > 14 {
                g[14] = 0x40 | (rng.next() as u8 & 0x0f);
            }
        }
        hash_all(&g);
    }
}

/// The fragments of one datagram (first with the UDP header, then offsets with any
/// bytes, last without MF) hash alike under l34, tagged or not, IPv4 and IPv6; and
/// distinct unfragmented flows (DF set) spread by their ports.
#[test]
fn flow_hash_keeps_fragments_of_a_flow_together() {
    let (s, d) = (Ipv4Addr::new(10, 1, 2, 3), Ipv4Addr::new(10, 9, 8, 7));
    let whole = ipv4(s, d, 17, 64, &udp(s.into(), d.into(), 4321, 53, &[7u8; 64]));
    let mut rng = Rng(11);
    for tag in [None, Some(0x8100u16), Some(0x88a8)] {
        let mut hashes = Vec::new();
        for (k, flags) in [(0u16, 0x2000u16), (3, 0x2000), (6, 0x2000), (9, 0)] {
            let mut ip = whole.clone();
            ip[6..8].copy_from_slice(&(flags | k).to_be_bytes());
            if k > 0 {
                for b in &mut ip[20..] {
                    *b = rng.next() as u8;
                }
            }
            let mut f = eth([2; 6], [4; 6], 0x0800, &ip);
            if let Some(t) = tag {
                f = crate::attack::frames::tagged(&f, t, 3);
            }
            hashes.push(flow_hash(&f, Hash::L34));
        }
        assert!(hashes.windows(2).all(|w| w[0] == w[1]), "{tag:?}: {hashes:x?}");
    }
    // IPv6: a fragment header (44) before UDP in the first, any bytes after it in the others.
    let (s6, d6) = (Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1), Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 9));
    let mut h6 = Vec::new();
    for k in 0..4u16 {
        let mut payload = vec![17u8, 0, 0, 0, 0, 0, 0, 1];
        payload[2..4].copy_from_slice(&((k * 8) << 3 | u16::from(k < 3)).to_be_bytes());
        if k == 0 {
            payload.extend_from_slice(&udp(s6.into(), d6.into(), 4321, 53, &[1; 16]));
        } else {
            payload.extend((0..24).map(|_| rng.next() as u8));
        }
        h6.push(flow_hash(&eth([2; 6], [4; 6], 0x86dd, &ipv6(s6, d6, 44, 64, &payload)), Hash::L34));
    }
    assert!(h6.windows(2).all(|w| w[0] == w[1]), "{h6:x?}");
    // Unfragmented with DF: the ports count.
    let mut seen = std::collections::HashSet::new();
    for port in 0..64u16 {
        let mut ip = ipv4(s, d, 17, 64, &udp(s.into(), d.into(), 1000 + port, 53, b"x"));
        ip[6] = 0x40;
        seen.insert(flow_hash(&eth([2; 6], [4; 6], 0x0800, &ip), Hash::L34));
    }
    assert_eq!(seen.len(), 64);
}

// ---------------------------------------------------------------------------
// bond_tx.

/// Bursts when no member is up (before the first poll, and with every link
/// down): all counted, all freed.
#[test]
fn bond_tx_with_no_member_up_drops_and_counts_everything() {
    let mut p = Bench::new(3, "mode: balance");
    let frames: Vec<Vec<u8>> = (0..256).map(flow).collect();
    p.send(&frames);
    assert_eq!(p.tx_count("no_member"), 256);
    for m in 0..3 {
        p.link(m, false);
    }
    p.poll(0);
    p.send(&frames);
    p.send(&[]);
    assert_eq!(p.tx_count("no_member"), 512);
    assert!((0..3).all(|m| p.sent(m).0.is_empty()));
    assert_eq!(p.in_use(), 0);
}

/// Members going up and down at random between bursts, in each mode: every
/// packet leaves on a member whose link was up at the bond's last tick (in
/// active_backup, on one member per burst) or is counted; flows of the members
/// that stay up stay where they were in balance.
#[test]
fn bond_tx_with_members_going_up_and_down_between_bursts() {
    for mode in ["balance", "active_backup"] {
        let mut p = Bench::new(4, &format!("mode: {mode}, hash: l34"));
        let mut rng = Rng(5);
        let frames: Vec<Vec<u8>> = (0..200).map(flow).collect();
        let mut total = 0;
        for step in 0..300 {
            let up: Vec<bool> = (0..4).map(|_| !rng.next().is_multiple_of(3)).collect();
            for (m, &u) in up.iter().enumerate() {
                p.link(m, u);
            }
            p.poll(TICK);
            let n = 1 + rng.next() as usize % 200;
            p.send(&frames[..n]);
            total += n;
            let got: Vec<usize> = (0..4).map(|m| p.sent(m).0.len()).collect();
            let carrying = got.iter().filter(|&&g| g > 0).count();
            for m in 0..4 {
                assert!(got[m] == 0 || up[m], "{mode} step {step}: data on down member {m}: {got:?} up {up:?}");
            }
            if mode == "active_backup" {
                assert!(carrying <= 1, "{mode} step {step}: {got:?}");
            }
            if up.iter().any(|&u| u) {
                assert_eq!(got.iter().sum::<usize>(), n, "{mode} step {step}: {got:?} up {up:?}");
            }
        }
        let sent: u64 = p.tx_count("sent");
        assert_eq!(sent + p.tx_count("no_member"), total as u64, "{mode}");
        assert_eq!(p.in_use(), 0);
    }
}

/// tx_mask with bits above the member count (written straight into the shared
/// state): bond_tx uses only its members, and a mask of such bits only means no
/// member.
#[test]
fn bond_tx_ignores_mask_bits_above_its_members() {
    let mut p = Bench::new(2, "mode: balance");
    p.poll(0);
    let frames: Vec<Vec<u8>> = (0..256).map(flow).collect();
    for (mask, want_members) in [(u64::MAX, 2usize), (1 << 63 | 1 << 16 | 1 << 2, 0), (1 << 1 | 1 << 40, 1), (0, 0)] {
        p.shared.tx_mask.store(mask, Ordering::Relaxed);
        p.send(&frames);
        let got: Vec<usize> = (0..MAX_MEMBERS).map(|m| p.sent(m).0.len()).collect();
        assert!(got[2..].iter().all(|&g| g == 0), "{mask:x}: {got:?}");
        assert_eq!(got.iter().filter(|&&g| g > 0).count(), want_members, "{mask:x}: {got:?}");
        if want_members == 0 {
            assert_eq!(got.iter().sum::<usize>(), 0);
        } else {
            assert_eq!(got.iter().sum::<usize>(), 256);
        }
    }
    assert_eq!(p.tx_count("no_member"), 512);
    assert_eq!(p.in_use(), 0);
}

/// MAX_BURST (256) packets of 256 flows over 16 members: all sent, every member
/// used, each flow on one member; half the members down: all sent on the others.
#[test]
fn bond_tx_spreads_a_full_burst_over_sixteen_members() {
    let mut p = Bench::new(16, "mode: balance, hash: l34");
    p.poll(0);
    let frames: Vec<Vec<u8>> = (0..MAX_BURST as u32).map(flow).collect();
    let mut home: HashMap<Vec<u8>, usize> = HashMap::new();
    for round in 0..3 {
        p.send(&frames);
        let mut used = 0;
        for m in 0..16 {
            let d = p.sent(m).0;
            used += usize::from(!d.is_empty());
            for f in d {
                let was = *home.entry(f).or_insert(m);
                assert_eq!(was, m, "round {round}: a flow moved");
            }
        }
        assert_eq!(used, 16, "round {round}");
    }
    assert_eq!(home.len(), MAX_BURST);
    for m in 0..8 {
        p.link(m, false);
    }
    p.poll(TICK);
    p.send(&frames);
    let mut n = 0;
    for m in 0..16 {
        let d = p.sent(m).0;
        assert!(m >= 8 || d.is_empty(), "member {m} is down");
        n += d.len();
    }
    assert_eq!(n, MAX_BURST);
    assert_eq!(p.in_use(), 0);
}

/// active_backup with links flapping at every tick (and between ticks): traffic
/// on one member at a time, only while its link was up at the last tick; frames
/// received only from the member carrying traffic.
#[test]
fn active_backup_with_links_flapping_every_tick_uses_one_member_at_a_time() {
    let mut p = Bench::new(3, "mode: active_backup");
    let mut rng = Rng(9);
    let frames: Vec<Vec<u8>> = (0..32).map(flow).collect();
    let mut up = [true; 3];
    for step in 0..500 {
        for (m, u) in up.iter_mut().enumerate() {
            *u = rng.next().is_multiple_of(2);
            p.link(m, *u);
        }
        p.poll(TICK);
        // Flap again without a tick: bond_tx must not notice.
        for m in 0..3 {
            p.link(m, rng.next().is_multiple_of(2));
        }
        let v = p.view();
        let active: Vec<usize> = (0..3).filter(|&m| v.members[m].distributing).collect();
        assert!(active.len() <= 1, "step {step}: {active:?}");
        for m in 0..3 {
            p.arrive(m, &flow(1000 + m as u32));
        }
        let got = p.poll(1);
        assert_eq!(got.len(), active.len(), "step {step}: received from {} members", got.len());
        p.send(&frames);
        let sent: Vec<usize> = (0..3).map(|m| p.sent(m).0.len()).collect();
        assert!(sent.iter().filter(|&&s| s > 0).count() <= 1, "step {step}: {sent:?}");
        for m in 0..3 {
            if sent[m] > 0 {
                assert!(up[m] && active == [m], "step {step}: on member {m}, up {up:?}, active {active:?}");
            }
        }
    }
    assert_eq!(p.in_use(), 0);
}

/// Fault: a member that is administratively down (`set interface state ... down`)
/// but whose link is up stays the active member: bond_tx gives it all traffic and
/// its port_tx drops everything (`admin_down`); there is no failover. The same in
/// balance for the flows hashed to it.
#[test]

fn an_administratively_down_member_does_not_carry_traffic() {
    for mode in ["active_backup", "balance"] {
        let mut p = Bench::new(2, &format!("mode: {mode}"));
        p.poll(0);
        p.admin(0, false);
        p.poll(TICK);
        p.poll(TICK);
        let frames: Vec<Vec<u8>> = (0..100).map(flow).collect();
        p.send(&frames);
        let delivered = p.sent(0).0.len() + p.sent(1).0.len();
        assert_eq!(delivered, 100, "{mode}: {delivered} of 100 sent; admin_down drops: {}", p.tx_count("admin_down"));
    }
}

/// Fault: when bond_tx's pool is empty (or its control queue full), the LACPDU the
/// machines asked for is lost and never retried: `Lacp::tick` clears NTT before
/// the node knows whether it could make the frame. With a slow-rate partner the
/// state change it carried (here our SYNC on attaching) waits for a periodic
/// LACPDU, 30 s, and so does the aggregate. (Linux keeps NTT when sending fails.)
#[test]

fn a_lacpdu_lost_to_an_empty_pool_is_sent_again_at_the_next_tick() {
    let slow = Timing { second: HZ, fast: false };
    let run = |starve: Option<(u64, u64)>| -> Option<u64> {
        let mut p = Bench::with_pool(1, "mode: lacp, lacp_rate: slow", 64);
        let mut b = Lacp::new(1, SYS_B, 200, 9, slow);
        b.set_enabled(0, true, p.now);
        let t0 = p.now;
        let mut held: Vec<Mbuf> = Vec::new();
        for _ in 0..400 {
            let t = p.now - t0;
            match starve {
                Some((from, to)) if (from..to).contains(&t) => {
                    while let Ok(m) = Mbuf::alloc(&p.env.pool) {
                        held.push(m);
                    }
                }
                _ => held.clear(),
            }
            exchange(&mut p, &mut b, &[true], TICK);
            p.poll(1);
            if p.view().members[0].distributing && b.distributing(0) {
                return Some(p.now - t0);
            }
        }
        None
    };
    let normal = run(None).expect("no aggregate with a slow partner");
    assert!(normal < 5 * HZ, "{normal}");
    // The pool is empty from 1.5 s to 6 s: our LACPDUs of that time are lost.
    let starved = run(Some((HZ + HZ / 2, 6 * HZ)));
    assert!(
        starved.is_some_and(|t| t < 8 * HZ),
        "the aggregate formed after {:?} s (in {} s with a pool): the lost LACPDU was not sent again",
        starved.map(|t| t / HZ),
        normal / HZ
    );
}

/// Fault: a member going down moves flows between the members that stay up.
/// bond_tx picks `table[(hash >> 32) * n >> 32]` over the members up, so every
/// boundary moves when `n` changes: with 3 members and member 0 down, the flows
/// of member 1 whose hash lies in [1/2, 2/3) move to member 2 (1/6 of all flows
/// reordered for nothing). `tests::balance_spreads_flows_and_keeps_each_flow_on_one_member`
/// asserts "its flows move, the others' stay" but only takes the middle member down,
/// the one case where it holds.
#[test]

fn a_member_going_down_moves_only_its_own_flows() {
    let mut p = Bench::new(3, "mode: balance, hash: l34");
    p.poll(0);
    let frames: Vec<Vec<u8>> = (0..3000).map(flow).collect();
    let mut home: HashMap<Vec<u8>, usize> = HashMap::new();
    for c in frames.chunks(200) {
        p.send(c);
    }
    for m in 0..3 {
        for f in p.sent(m).0 {
            home.insert(f, m);
        }
    }
    p.link(0, false);
    p.poll(TICK);
    for c in frames.chunks(200) {
        p.send(c);
    }
    let mut moved = 0;
    for m in 1..3 {
        for f in p.sent(m).0 {
            if home[&f] != 0 && home[&f] != m {
                moved += 1;
            }
        }
    }
    assert_eq!(moved, 0, "{moved} of 3000 flows moved between members 1 and 2, which stayed up");
}

/// Fault (limitation): under l23/l34 a frame with two VLAN tags (802.1ad + 802.1Q,
/// QinQ) is hashed by its MACs only (`flow_hash` reads one tag, then sees
/// EtherType 0x8100 and falls back to l2), so all the IP flows between two routers
/// over a QinQ trunk share one member.
#[test]

fn qinq_ip_flows_spread_under_l34() {
    let mut seen = std::collections::HashSet::new();
    for k in 0..64 {
        let f = crate::attack::frames::tagged(&crate::attack::frames::tagged(&flow(k), 0x8100, 10), 0x88a8, 20);
        seen.insert(flow_hash(&f, Hash::L34));
    }
    assert!(seen.len() > 1, "64 QinQ flows, {} hash", seen.len());
}
