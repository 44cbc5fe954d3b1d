use super::*;
use crate::tests::PoolEnv;
use crate::tests::{
    burst, call, counter, eth, ipv4, ipv6, outputs, pool, stats, udp, PEER4, PEER6, PEER_MAC, US4, US6, US_MAC,
};
use ironpath_graph::NodeStats;
use ironpath_util::testing::XorShift;
use ironpath_wire::IpAddress;

/// RFC 2697 and RFC 2698 as their text reads, one clock tick at a time: each tick
/// brings `rate` tokens (a token being 1/hz of a bit or packet), the committed bucket
/// first and (srTCM) its overflow to the excess bucket, one token at a time up to
/// each bucket's size; a packet of `b` tokens is then coloured by comparing
/// `T - b >= 0` for each bucket, as the RFCs write it.
struct Model {
    trtcm: bool,
    cir: i128,
    pir: i128,
    cbs: i128,
    ebs: i128,
    tc: i128,
    te: i128,
    t: u64,
}

impl Model {
    fn new(trtcm: bool, cir: u64, pir: u64, cbs: u64, ebs: u64) -> Model {
        let i = |v: u64| i128::from(v);
        Model { trtcm, cir: i(cir), pir: i(pir), cbs: i(cbs), ebs: i(ebs), tc: i(cbs), te: i(ebs), t: 0 }
    }

    fn tick(&mut self) {
        if self.trtcm {
            // Tc incremented CIR times per second up to CBS; Tp PIR times up to PBS.
            self.tc = (self.tc + self.cir).min(self.cbs);
            self.te = (self.te + self.pir).min(self.ebs);
        } else {
            // "If Tc is less than CBS, Tc is incremented by one, else if Te is less
            // than EBS, Te is incremented by one, else neither": CIR times a second.
            let to_c = self.cir.min(self.cbs - self.tc);
            self.tc += to_c;
            self.te = (self.te + self.cir - to_c).min(self.ebs);
        }
    }

    fn packet(&mut self, at: u64, b: u64, pre: Color) -> Color {
        while self.t < at {
            self.t += 1;
            self.tick();
        }
        let b = i128::from(b);
        if self.trtcm {
            if pre == Color::Red || self.te - b < 0 {
                Color::Red
            } else if pre == Color::Yellow || self.tc - b < 0 {
                self.te -= b;
                Color::Yellow
            } else {
                self.te -= b;
                self.tc -= b;
                Color::Green
            }
        } else if pre == Color::Green && self.tc - b >= 0 {
            self.tc -= b;
            Color::Green
        } else if pre != Color::Red && self.te - b >= 0 {
            self.te -= b;
            Color::Yellow
        } else {
            Color::Red
        }
    }
}

/// Random profiles and packet sequences: every packet's colour and both buckets' token
/// counts after it equal the model's, colour-blind and colour-aware, in both units.
#[test]
fn meters_match_the_rfcs_token_for_token() {
    let mut rng = XorShift(0x2697_2698);
    let hz = 1000;
    for case in 0..400 {
        let trtcm = case % 2 == 1;
        let unit = if case % 4 < 2 { RateUnit::Bps } else { RateUnit::Pps };
        let algorithm = if trtcm { Algorithm::Trtcm } else { Algorithm::Srtcm };
        let (cir, cbs) = (1 + rng.below(200_000), 1 + rng.below(4000));
        let (pir, ebs) = (cir + rng.below(200_000), rng.below(4000) + u64::from(trtcm));
        let p = Profile::new(algorithm, unit, cir, cbs, pir, ebs, hz).expect("profile");
        let scale = p.per_unit;
        let mut model = Model::new(trtcm, cir, if trtcm { pir } else { 0 }, cbs * scale, ebs * scale);
        let mut m = Meter::full(&p, 0);
        let mut now = 0;
        let aware = case % 3 == 0;
        for k in 0..300 {
            now += rng.below(if k % 50 == 0 { 5000 } else { 20 });
            let (segs, bytes) = (1 + rng.below(3), 60 + rng.below(1500));
            let cost = p.cost(segs, bytes);
            let pre = if aware { *rng.pick(&[Color::Green, Color::Yellow, Color::Red]) } else { Color::Green };
            let got = m.mark(&p, now, cost, pre);
            let want = model.packet(now, cost, pre);
            assert_eq!(got, want, "case {case} packet {k}");
            assert_eq!(m.tokens(), (model.tc as u64, model.te as u64), "case {case} packet {k}");
            if aware {
                assert!(got >= pre, "never better than it came");
            }
        }
    }
}

/// A long idle time fills the buckets to their size, never past it, and a rate near
/// the largest accepted does not overflow the arithmetic.
#[test]
fn buckets_stop_at_their_size_after_any_idle_time() {
    for algorithm in [Algorithm::Srtcm, Algorithm::Trtcm] {
        let p = Profile::new(algorithm, RateUnit::Bps, MAX_RATE, MAX_BURST_SIZE, MAX_RATE, MAX_BURST_SIZE, MAX_HZ)
            .expect("the largest settings fit");
        let mut m = Meter::full(&p, 0);
        assert_eq!(m.mark(&p, 1, p.cost(1, 1500), Color::Green), Color::Green);
        assert_eq!(m.mark(&p, u64::MAX, 0, Color::Green), Color::Green);
        assert_eq!(m.tokens(), (p.cbs, p.ebs));
        // Time going backwards (another lcore's clock) adds nothing.
        let before = m.tokens();
        assert_eq!(m.mark(&p, 5, 0, Color::Green), Color::Green);
        assert_eq!(m.tokens(), before);
    }
}

#[test]
fn dscp_lists_parse_and_bad_ones_are_refused() {
    assert_eq!(parse_dscps("10, 12-14 ,63"), Ok(1 << 10 | 1 << 12 | 1 << 13 | 1 << 14 | 1 << 63));
    assert_eq!(parse_dscps(""), Ok(0));
    for bad in ["64", "x", "14-12", "1-"] {
        assert!(parse_dscps(bad).is_err(), "{bad}");
    }
}

const HZ: u64 = 1_000_000_000;

fn yaml(params: &str) -> String {
    format!("lcores: [{{id: 0}}]\nnodes:\n  - {{name: pol, type: policer, lcore: 0, params: {params}}}\n")
}

/// A `policer` built from YAML `params`, through validation (defaults filled in) and
/// the kind's constructor.
fn build(p: &Mempool, params: &str) -> ironpath_graph::NodeDecl {
    let catalog = ironpath_config::Catalog { nodes: &[KIND.spec], drivers: None };
    let pipe = ironpath_config::parse_str(&yaml(params), std::path::Path::new("p.yaml"), &catalog)
        .unwrap_or_else(|e| panic!("{params}: {e}"));
    crate::make_from(&[&KIND], &pipe.nodes[0], &[], &mut PoolEnv(p.clone())).unwrap_or_else(|e| panic!("{params}: {e}"))
}

/// A UDP/IPv4 frame from `sport` with `len` payload bytes and DSCP `dscp` (ECN 01).
fn udp4(sport: u16, len: usize, dscp: u8) -> Vec<u8> {
    let u = udp(IpAddress::V4(PEER4), IpAddress::V4(US4), sport, 9, &vec![0x5a; len]);
    let mut ip = ipv4(PEER4, US4, 17, 64, &u);
    ip[1] = dscp << 2 | 0x01;
    ip[10..12].copy_from_slice(&[0, 0]);
    let sum = !checksum::data(&ip[..20]);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    eth(US_MAC, PEER_MAC, 0x0800, &ip)
}

/// A UDP/IPv6 frame with traffic class `dscp << 2 | 2`.
fn udp6(len: usize, dscp: u8) -> Vec<u8> {
    let u = udp(IpAddress::V6(PEER6), IpAddress::V6(US6), 7, 9, &vec![0x5a; len]);
    let mut ip = ipv6(PEER6, US6, 17, 64, &u);
    set_dscp(&mut ip, false, 0, dscp);
    ip[1] |= 0x20;
    eth(US_MAC, PEER_MAC, 0x86dd, &ip)
}

/// Run `node` on `frames` at `now`: where each went, and their bytes.
fn run(node: &mut dyn Node, st: &NodeStats, p: &Mempool, frames: &[Vec<u8>], now: u64) -> Vec<(u16, Vec<u8>)> {
    let mut b = burst(p, frames);
    let c = call(node, st, &mut b, now);
    outputs(&c, &mut b)
}

/// Offered at twice the committed rate for a virtual 10 s, what leaves is the
/// committed rate plus the burst, to the byte, and red is dropped.
#[test]
fn at_twice_the_cir_the_cir_and_the_burst_leave() {
    let p = pool(64);
    // 8 Mbit/s: 1 MB/s; 1000-byte frames every 0.5 ms is 2 MB/s.
    let mut d = build(&p, "{cir: 8000000, cbs: 3000}");
    let st = stats(&*d.node);
    let f = eth(US_MAC, PEER_MAC, 0x0800, &[0; 986]);
    assert_eq!(f.len(), 1000);
    let mut passed = 0u64;
    for k in 0..20_000u64 {
        let out = run(&mut *d.node, &st, &p, std::slice::from_ref(&f), k * 500_000);
        passed += out.iter().filter(|(e, _)| *e == OUT).count() as u64;
    }
    // 10 s at 1 MB/s less the last half millisecond, plus the 3000-byte burst.
    let want = (10_000_000 - 500 + 3000) / 1000;
    assert_eq!(passed, want);
    assert_eq!(counter(&st, "green"), want);
    assert_eq!(counter(&st, "green_bytes"), want * 1000);
    assert_eq!(counter(&st, "red") + want, 20_000);
    assert_eq!(counter(&st, "dropped"), 20_000 - want);
    assert_eq!(p.stats().in_use, 0);
}

/// trTCM in packets/s, colour-blind: greens at the CIR, yellows up to the PIR,
/// remarked; reds dropped.
#[test]
fn trtcm_in_packets_remarks_yellow_and_drops_red() {
    let p = pool(64);
    let mut d = build(
        &p,
        "{algorithm: trtcm, rate_unit: pps, cir: 1000, cbs: 1, pir: 2000, pbs: 1, yellow: remark, yellow_dscp: 10}",
    );
    let st = stats(&*d.node);
    // 4000 packets/s for 1 s, one per call.
    let f = udp4(1, 100, 0);
    let mut yellow_seen = 0;
    for k in 0..4000u64 {
        for (e, bytes) in run(&mut *d.node, &st, &p, std::slice::from_ref(&f), k * 250_000) {
            if e == OUT && bytes[15] >> 2 == 10 {
                yellow_seen += 1;
                assert_eq!(bytes[15] & 3, 1, "ECN kept");
                assert_eq!(checksum::data(&bytes[14..34]), 0xffff, "IPv4 header checksum right");
            }
        }
    }
    assert_eq!(counter(&st, "green"), 1000);
    assert_eq!(counter(&st, "yellow"), 1000);
    assert_eq!(yellow_seen, 1000);
    assert_eq!(counter(&st, "red"), 2000);
    assert_eq!(counter(&st, "remarked"), 1000);
}

/// Colour-aware: a packet that arrives red stays red with tokens to spare, one that
/// arrives yellow is at best yellow; remarks set IPv4 and IPv6 DSCPs (ECN kept);
/// a frame that is not IP goes on unchanged, counted.
#[test]
fn color_aware_keeps_the_arrival_colour_and_remarks_both_families() {
    let p = pool(64);
    let mut d = build(
        &p,
        "{cir: 1000000000, cbs: 1000000, ebs: 1000000, color_aware: true, yellow_in: \"10\", red_in: \"12-14\", \
         green: remark, green_dscp: 46, yellow: remark, yellow_dscp: 18, red: remark, red_dscp: 0}",
    );
    let st = stats(&*d.node);
    let other = eth(US_MAC, PEER_MAC, 0x88b5, &[1; 50]);
    let frames = vec![udp4(1, 20, 0), udp4(2, 20, 10), udp4(3, 20, 13), udp6(20, 10), udp6(20, 0), other.clone()];
    let out = run(&mut *d.node, &st, &p, &frames, 1);
    let dscps: Vec<u8> = out[..3].iter().map(|(_, b)| b[15] >> 2).collect();
    assert_eq!(dscps, [46, 18, 0]);
    for (_, b) in &out[..3] {
        assert_eq!(b[15] & 3, 1, "ECN kept");
        assert_eq!(checksum::data(&b[14..34]), 0xffff, "IPv4 header checksum right");
    }
    let tc = |b: &[u8]| (b[14] & 0x0f) << 4 | b[15] >> 4;
    assert_eq!([tc(&out[3].1), tc(&out[4].1)], [18 << 2 | 2, 46 << 2 | 2], "traffic class: DSCP set, ECN kept");
    assert_eq!(out[5], (OUT, other));
    assert!(out.iter().all(|(e, _)| *e == OUT));
    assert_eq!(
        [
            counter(&st, "green"),
            counter(&st, "yellow"),
            counter(&st, "red"),
            counter(&st, "remarked"),
            counter(&st, "not_ip")
        ],
        [3, 2, 1, 5, 1]
    );
    assert_eq!(p.stats().in_use, 0);
}

/// A shared packet is remarked in a copy; the other holder's bytes stay; without a
/// buffer for the copy the packet is dropped, counted.
#[test]
fn a_shared_packet_is_remarked_in_a_copy() {
    let p = pool(8);
    let mut d = build(&p, "{cir: 1000000000, cbs: 100000, green: remark, green_dscp: 8}");
    let st = stats(&*d.node);
    let f = udp4(1, 20, 0);
    let mut b = burst(&p, &[f.clone(), f.clone()]);
    let kept = b.share(1);
    let c = call(&mut *d.node, &st, &mut b, 1);
    let out = outputs(&c, &mut b);
    assert!(out.iter().all(|(e, b)| *e == OUT && b[15] >> 2 == 8), "{out:?}");
    assert_eq!(kept.data(), &f[..], "the other holder's packet is untouched");
    assert_eq!((counter(&st, "copied"), counter(&st, "remarked")), (1, 2));
    // A pool with no buffer left: the shared packet is dropped.
    let tiny = pool(2);
    let mut d = build(&tiny, "{cir: 1000000000, cbs: 100000, green: remark, green_dscp: 8}");
    let st = stats(&*d.node);
    let mut b = burst(&tiny, std::slice::from_ref(&f));
    let kept2 = b.share(0);
    let other = ironpath_eal::Mbuf::from_slice(&tiny, &f).expect("the last buffer");
    let c = call(&mut *d.node, &st, &mut b, 1);
    let out = outputs(&c, &mut b);
    assert_eq!(out, [(DROP, f.clone())]);
    assert_eq!(counter(&st, "no_mbuf"), 1);
    drop((kept, kept2, other));
    assert_eq!((p.stats().in_use, tiny.stats().in_use), (0, 0));
}

/// Per flow, each flow has its own meter: a flood from one flow takes nothing from
/// another.
#[test]
fn per_flow_meters_keep_a_flood_from_the_other_flows() {
    let p = pool(64);
    let mut d = build(&p, "{rate_unit: pps, cir: 100, cbs: 10, per: flow, flows: 4096}");
    let st = stats(&*d.node);
    let (flood, quiet) = (udp4(1000, 20, 0), udp4(2000, 20, 0));
    let mut quiet_passed = 0;
    for k in 0..1000u64 {
        // 10 ms steps: the flood sends 32 per step, the quiet flow 1 (100/s: its CIR).
        let mut frames = vec![flood.clone(); 31];
        frames.push(quiet.clone());
        let out = run(&mut *d.node, &st, &p, &frames, k * 10_000_000);
        quiet_passed += u64::from(out[31].0 == OUT);
    }
    assert_eq!(quiet_passed, 1000, "the quiet flow keeps its rate");
    assert!(counter(&st, "red") > 29_000, "the flood is held to its own CIR");
    assert_eq!(p.stats().in_use, 0);
}

/// The meters are made when the node is built: 6,400 flows (and 64 DSCPs) later,
/// there are as many as it was given.
#[test]
fn the_flow_table_is_the_size_it_was_given() {
    let p = pool(64);
    let key = [7; 16];
    for (per, flows, want) in [(Per::Node, 9, 1), (Per::Flow, 4096, 4096), (Per::Dscp, 9, 64)] {
        let cfg = PolicerConfig {
            algorithm: Algorithm::Srtcm,
            unit: RateUnit::Bps,
            cir: 1000,
            cbs: 1000,
            pir: 0,
            ebs: 0,
            aware: None,
            per,
            flows,
            actions: [ColorAction::Pass, ColorAction::Pass, ColorAction::Drop],
            dscp: [0; 3],
        };
        let mut node = Policer::new(&cfg, HZ, key, p.clone()).expect("node");
        let st = stats(&node);
        for k in 0..200u16 {
            let frames: Vec<Vec<u8>> = (0..32).map(|j| udp4(k * 32 + j, 20, (j % 64) as u8)).collect();
            run(&mut node, &st, &p, &frames, u64::from(k));
        }
        assert_eq!(node.meters().len(), want, "{per:?}");
    }
}

/// Per DSCP, each value has its own meter.
#[test]
fn per_dscp_meters_are_separate() {
    let p = pool(64);
    let mut d = build(&p, "{rate_unit: pps, cir: 1, cbs: 1, per: dscp}");
    let st = stats(&*d.node);
    let frames: Vec<Vec<u8>> = (0..20u8).map(|k| udp4(1, 20, k)).collect();
    let out = run(&mut *d.node, &st, &p, &frames, 1);
    assert!(out.iter().all(|(e, _)| *e == OUT), "one packet per DSCP: each its own bucket");
    let out = run(&mut *d.node, &st, &p, &frames, 2);
    assert!(out.iter().all(|(e, _)| *e == DROP), "each bucket spent");
}

/// A TSO frame costs its segments: in packets, one per segment; in bytes, its own plus
/// the headers each further segment repeats. A frame costing more than cbs is never
/// green, counted.
#[test]
fn a_tso_frame_costs_its_segments() {
    let p = pool(8);
    let f = eth(US_MAC, PEER_MAC, 0x0800, &[0; 20 + 20 + 4000]);
    let mut b = burst(&p, std::slice::from_ref(&f));
    let h = b.header_mut(0);
    h.ol_flags |= abi::TX_TCP_SEG;
    (h.l2_len, h.l3_len, h.l4_len, h.tso_segsz) = (14, 20, 20, 1000);
    assert_eq!(wire_cost(b.header(0)), (4, 4054 + 3 * 54));
    b.header_mut(0).tso_segsz = 1448;
    assert_eq!(wire_cost(b.header(0)), (3, 4054 + 2 * 54));
    b.free_all();
    let mut d = build(&p, "{rate_unit: pps, cir: 1, cbs: 2}");
    let st = stats(&*d.node);
    let mut b = burst(&p, std::slice::from_ref(&f));
    let h = b.header_mut(0);
    h.ol_flags |= abi::TX_TCP_SEG;
    (h.l2_len, h.l3_len, h.l4_len, h.tso_segsz) = (14, 20, 20, 1000);
    let c = call(&mut *d.node, &st, &mut b, 1);
    assert_eq!(outputs(&c, &mut b)[0].0, DROP, "4 segments do not fit a burst of 2");
    assert_eq!((counter(&st, "above_cbs"), counter(&st, "red")), (1, 1));
    assert_eq!(p.stats().in_use, 0);
}

#[test]
fn settings_that_do_not_fit_together_are_refused_at_the_parameter() {
    let catalog = ironpath_config::Catalog { nodes: &[KIND.spec], drivers: None };
    for (params, wrong) in [
        ("{cir: 1000, cbs: 1000, pir: 2000}", "pir"),
        ("{cir: 1000, cbs: 1000, pbs: 2000}", "pbs"),
        ("{algorithm: trtcm, cir: 1000, cbs: 1000, pbs: 10}", "pir"),
        ("{algorithm: trtcm, cir: 1000, cbs: 1000, pir: 1000}", "pbs"),
        ("{algorithm: trtcm, cir: 1000, cbs: 1000, pir: 999, pbs: 10}", "pir"),
        ("{algorithm: trtcm, cir: 1000, cbs: 1000, pir: 2000, pbs: 10, ebs: 10}", "ebs"),
        ("{cir: 1000, cbs: 1000, yellow_in: \"10\"}", "yellow_in"),
        ("{cir: 1000, cbs: 1000, color_aware: true, red_in: \"64\"}", "red_in"),
        ("{cir: 1000, cbs: 1000, color_aware: true, yellow_in: \"10-12\", red_in: \"12\"}", "red_in"),
        ("{cir: 1000, cbs: 1000, red: remark}", "red_dscp"),
        ("{cir: 1000, cbs: 1000, green_dscp: 10}", "green_dscp"),
    ] {
        // Refused by the pipeline check, at the parameter, as `run` would refuse it.
        let e = ironpath_config::parse_str(&yaml(params), std::path::Path::new("p.yaml"), &catalog)
            .expect_err(params)
            .to_string();
        assert!(e.contains(&format!("`{wrong}`: ")) && e.contains("p.yaml:3:"), "{params}: {e}");
    }
    for (params, word) in [("{cir: 0, cbs: 10}", "cir"), ("{cir: 10, cbs: 100000001}", "cbs"), ("{cbs: 10}", "cir")] {
        let e = ironpath_config::parse_str(&yaml(params), std::path::Path::new("p.yaml"), &catalog)
            .expect_err(params)
            .to_string();
        assert!(e.contains(word), "{params}: {e}");
    }
}

#[test]
fn built_from_yaml_with_the_spec_defaults() {
    let p = pool(8);
    let d = build(&p, "{cir: 1000000, cbs: 1514}");
    assert_eq!(d.nexts, ["out"]);
    let catalog = ironpath_config::Catalog { nodes: &[KIND.spec], drivers: None };
    let pipe = ironpath_config::parse_str(&yaml("{cir: 1000000, cbs: 1514}"), std::path::Path::new("p.yaml"), &catalog)
        .expect("valid");
    let cfg = PolicerConfig::from_params(Values(&pipe.nodes[0].params)).expect("settings");
    assert_eq!(
        (cfg.algorithm, cfg.unit, cfg.ebs, cfg.per, cfg.flows, cfg.actions, cfg.aware),
        (
            Algorithm::Srtcm,
            RateUnit::Bps,
            0,
            Per::Node,
            1024,
            [ColorAction::Pass, ColorAction::Pass, ColorAction::Drop],
            None
        )
    );
}

/// Random IPv4 headers (any IHL, options, TOS) behind zero, one or two VLAN tags, and
/// random IPv6 headers: a remark sets the DSCP and nothing else but the IPv4 header
/// checksum, which still verifies over the whole header; the ECN bits are kept.
#[test]
fn a_remark_changes_the_dscp_bits_and_the_checksum_only() {
    let mut rng = XorShift(0x5eed_d5c9);
    for case in 0..3000 {
        let v4 = case % 2 == 0;
        let mut f = rng.bytes(12);
        let tags = rng.below(3) as usize;
        for _ in 0..tags {
            let tpid = *rng.pick(&[0x8100u16, 0x88a8]);
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&rng.bytes(2));
        }
        f.extend_from_slice(&(if v4 { 0x0800u16 } else { 0x86dd }).to_be_bytes());
        let off = f.len();
        let ihl = if v4 { 5 + rng.below(11) as usize } else { 10 };
        let len = ihl * 4 + rng.below(30) as usize;
        let mut ip = rng.bytes(len);
        if v4 {
            ip[0] = 0x40 | ihl as u8;
            ip[10..12].copy_from_slice(&[0, 0]);
            let sum = !checksum::data(&ip[..ihl * 4]);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
        } else {
            ip[0] = 0x60 | ip[0] & 0x0f;
        }
        f.extend_from_slice(&ip);
        assert_eq!(ip_header(&f), Some((v4, off)), "case {case}");
        let want = rng.below(64) as u8;
        let before = f.clone();
        set_dscp(&mut f, v4, off, want);
        assert_eq!(dscp_of(&f, v4, off), want, "case {case}");
        // What may differ: the DSCP bits and (IPv4) the checksum.
        let mask: &[(usize, u8)] = if v4 { &[(1, 0xfc), (10, 0xff), (11, 0xff)] } else { &[(0, 0x0f), (1, 0xc0)] };
        for (k, (a, b)) in before.iter().zip(&f).enumerate() {
            let m = mask.iter().find(|(at, _)| off + at == k).map_or(0, |(_, m)| *m);
            assert_eq!(a & !m, b & !m, "case {case}: byte {k} changed beyond the DSCP");
        }
        if v4 {
            assert_eq!(checksum::data(&f[off..off + ihl * 4]), 0xffff, "case {case}: checksum");
        }
    }
}

/// Offload metadata no sender would set (segment size 1, header lengths at their
/// largest, header lengths above the packet's, 0 or 65535 aggregated segments, a
/// packet length of 4 GiB): the cost saturates, nothing overflows or panics, and the
/// node meters and counts such packets as any.
#[test]
fn hostile_offload_metadata_neither_overflows_nor_panics() {
    let tso = abi::TX_TCP_SEG;
    let agg = abi::RX_AGGREGATED;
    let p = pool(8);
    let mut b = burst(&p, &[udp4(1, 20, 0)]);
    let mut cost = |flags: u64, len: u32, lens: (u8, u16, u8), segsz: u16, aggr: u16| {
        let h = b.header_mut(0);
        (h.ol_flags, h.pkt_len, h.tso_segsz, h.aggr_segs) = (flags, len, segsz, aggr);
        (h.l2_len, h.l3_len, h.l4_len) = lens;
        wire_cost(b.header(0))
    };
    assert_eq!(cost(tso, 65535, (14, 20, 20), 1, 0), (65535 - 54, 65535 + (65535 - 55) * 54));
    assert_eq!(cost(tso, 100, (255, u16::MAX, 255), 1, 0), (1, 100), "headers longer than the packet");
    assert_eq!(cost(tso, 1000, (14, 20, 20), 0, 0), (1, 1000), "no segment size: one segment");
    assert_eq!(cost(agg, 1000, (14, 20, 20), 0, 0), (1, 1000), "0 aggregated segments count as one");
    assert_eq!(cost(agg, 1000, (14, 20, 20), 0, u16::MAX), (65535, 1000 + 65534 * 54));
    assert_eq!(cost(tso | agg, 1000, (14, 20, 20), 0, 3), (3, 1000 + 2 * 54), "no segment size: the aggregate's");
    assert_eq!(cost(0, 0, (0, 0, 0), 0, 0), (1, 0));
    let (segs, bytes) = cost(tso, u32::MAX, (255, u16::MAX, 255), 1, 0);
    assert_eq!(segs, u64::from(u32::MAX) - 66045);
    assert_eq!(bytes, u64::from(u32::MAX) + (segs - 1) * 66045);
    for unit in [RateUnit::Bps, RateUnit::Pps] {
        let prof = Profile::new(Algorithm::Trtcm, unit, MAX_RATE, MAX_BURST_SIZE, MAX_RATE, MAX_BURST_SIZE, MAX_HZ)
            .expect("profile");
        assert_eq!(prof.cost(u64::MAX, u64::MAX), u64::MAX, "saturates");
        let mut m = Meter::full(&prof, 0);
        assert_eq!(m.mark(&prof, 1, u64::MAX, Color::Green), Color::Red);
        assert_eq!(m.tokens(), (prof.cbs, prof.ebs), "a red packet takes nothing");
    }
    // Through the node, in both units: the 4 GiB packet is red, the one of 0 bytes
    // (no token in bytes) green; bytes are counted as costed.
    for (params, green) in [("{cir: 8000, cbs: 1000}", 1), ("{rate_unit: pps, cir: 1, cbs: 1}", 1)] {
        let mut d = build(&p, params);
        let st = stats(&*d.node);
        let mut b = burst(&p, &[udp4(1, 20, 0), udp4(2, 20, 0)]);
        let h = b.header_mut(0);
        (h.ol_flags, h.pkt_len, h.tso_segsz, h.l2_len, h.l3_len, h.l4_len) = (tso, u32::MAX, 1, 255, u16::MAX, 255);
        let h = b.header_mut(1);
        (h.ol_flags, h.pkt_len, h.aggr_segs) = (agg, 0, 0);
        let c = call(&mut *d.node, &st, &mut b, 1);
        let lens: Vec<u32> = (0..b.len()).map(|i| b.header(i).pkt_len).collect();
        assert_eq!(lens, [u32::MAX, 0], "{params}: the metadata is left as it came");
        // Give the packets back their true lengths before they are freed.
        for i in 0..b.len() {
            b.header_mut(i).pkt_len = u32::from(b.header(i).data_len);
        }
        let out = outputs(&c, &mut b);
        assert_eq!([out[0].0, out[1].0], [DROP, OUT], "{params}");
        assert_eq!([counter(&st, "red"), counter(&st, "green"), counter(&st, "above_cbs")], [1, green, 1], "{params}");
        assert_eq!(counter(&st, "red_bytes"), bytes, "{params}");
    }
    b.free_all();
    assert_eq!(p.stats().in_use, 0);
}

/// Frames too short for their headers, with three VLAN tags, with an IP version that
/// is not their EtherType's, or whose IP header is in the second segment: metered
/// (colour-aware, per DSCP) and sent on unchanged, counted `not_ip`, never a panic.
#[test]
fn frames_cut_short_or_odd_are_metered_but_left_unchanged() {
    let p = pool(64);
    let mut d = build(
        &p,
        "{cir: 1000000000, cbs: 1000000, ebs: 1000000, color_aware: true, yellow_in: \"1-62\", red_in: \"63\", \
         per: dscp, green: remark, green_dscp: 63, yellow: remark, yellow_dscp: 63, red: remark, red_dscp: 1}",
    );
    let st = stats(&*d.node);
    let v4 = udp4(1, 20, 63);
    let v6 = udp6(20, 63);
    let mut tagged3 = v4[..12].to_vec();
    for _ in 0..3 {
        tagged3.extend_from_slice(&[0x81, 0x00, 0, 5]);
    }
    tagged3.extend_from_slice(&v4[12..]);
    let mut v4_as_v6 = v4.clone();
    v4_as_v6[12..14].copy_from_slice(&[0x86, 0xdd]);
    let mut v6_as_v4 = v6.clone();
    v6_as_v4[12..14].copy_from_slice(&[0x08, 0x00]);
    let frames = vec![
        vec![],
        v4[..13].to_vec(),
        v4[..14].to_vec(),
        v4[..33].to_vec(),
        v6[..53].to_vec(),
        [&v4[..12], &[0x81, 0x00, 0]].concat(),
        [&v4[..12], &[0x88, 0xa8, 0, 5, 0x81, 0x00, 0, 6, 0x08, 0x00], &v4[14..33]].concat(),
        tagged3,
        v4_as_v6,
        v6_as_v4,
    ];
    let out = run(&mut *d.node, &st, &p, &frames, 1);
    assert_eq!(out, frames.iter().map(|f| (OUT, f.clone())).collect::<Vec<_>>());
    // The IP header in the second segment.
    let mut m = Mbuf::from_slice(&p, &v4[..14]).expect("mbuf");
    m.chain(Mbuf::from_slice(&p, &v4[14..]).expect("mbuf")).expect("chain");
    let mut b = Burst::new();
    assert!(b.push(m).is_ok());
    let c = call(&mut *d.node, &st, &mut b, 2);
    assert_eq!(b.segments(0).flatten().copied().collect::<Vec<u8>>(), v4);
    assert_eq!(outputs(&c, &mut b)[0].0, OUT);
    let n = frames.len() as u64 + 1;
    assert_eq!([counter(&st, "not_ip"), counter(&st, "green"), counter(&st, "remarked")], [n, n, 0]);
    assert_eq!(p.stats().in_use, 0);
}

/// A burst of green (remarked), yellow (remarked) and red (dropped) packets, half of
/// them shared, with buffers for only two copies: each packet keeps its place, every
/// edge is `out` or the drop (no colour left in an edge), the copies are remarked,
/// the other holders' bytes untouched, and every buffer comes back. With nothing
/// dropped the node sends the burst on whole.
#[test]
fn shared_remarked_and_dropped_packets_keep_their_order_and_buffers() {
    const N: usize = 24;
    // The burst's packets, the two copies, nothing more.
    let p = pool(N as u32 + 2);
    let mut d = build(
        &p,
        "{rate_unit: pps, cir: 1, cbs: 8, ebs: 8, green: remark, green_dscp: 46, yellow: remark, yellow_dscp: 10}",
    );
    let st = stats(&*d.node);
    let frames: Vec<Vec<u8>> = (0..N as u16).map(|k| udp4(1000 + k, 20, 0)).collect();
    let mut b = burst(&p, &frames);
    let kept: Vec<Mbuf> = (0..N).filter(|i| i % 2 == 1).map(|i| b.share(i)).collect();
    let c = call(&mut *d.node, &st, &mut b, 1);
    assert!(matches!(c.dispatch, Dispatch::Each));
    let out = outputs(&c, &mut b);
    assert_eq!(out.len(), N);
    let mut copies = 0;
    for (i, (e, bytes)) in out.iter().enumerate() {
        assert_eq!(bytes[34..36], (1000 + i as u16).to_be_bytes(), "packet {i} in its place");
        assert!(*e == OUT || *e == DROP, "packet {i}: edge {e:#x}");
        let want = match i {
            0..8 => Some(46),
            8..16 => Some(10),
            _ => None,
        };
        match want {
            None => assert_eq!(*e, DROP, "packet {i}: red"),
            Some(_) if i % 2 == 1 && copies == 2 => assert_eq!((*e, &bytes[..]), (DROP, &frames[i][..]), "no buffer"),
            Some(w) => {
                copies += i % 2;
                assert_eq!((*e, bytes[15] >> 2, bytes[15] & 3), (OUT, w, 1), "packet {i}");
                assert_eq!(checksum::data(&bytes[14..34]), 0xffff, "packet {i}");
            }
        }
    }
    for (k, m) in kept.iter().enumerate() {
        assert_eq!(m.data(), &frames[2 * k + 1][..], "the other holder's packet {k}");
    }
    assert_eq!([counter(&st, "copied"), counter(&st, "no_mbuf"), counter(&st, "remarked")], [2, 6, 10]);
    assert_eq!([counter(&st, "green"), counter(&st, "yellow"), counter(&st, "red")], [8, 8, 8]);
    drop(kept);
    assert_eq!(p.stats().in_use, 0);
    // Nothing dropped, shared or not: the whole burst goes out.
    let mut d = build(&p, "{cir: 1000000000, cbs: 1000000, green: remark, green_dscp: 46}");
    let st = stats(&*d.node);
    let mut b = burst(&p, &frames[..4]);
    let kept = b.share(2);
    let c = call(&mut *d.node, &st, &mut b, 1);
    assert!(matches!(c.dispatch, Dispatch::All(OUT)));
    assert!(outputs(&c, &mut b).iter().all(|(e, b)| *e == OUT && b[15] >> 2 == 46));
    drop(kept);
    assert_eq!((counter(&st, "copied"), p.stats().in_use), (1, 0));
}
