use super::*;
use crate::attack::frames::{tagged, tcp};
use crate::tests::{burst, call, counter, eth, ipv4, ipv6, pool, stats, udp, PEER_MAC, US_MAC};
use ironpath_graph::NodeStats;
use ironpath_wire::{IpAddress, IpProtocol, TcpControl};

const HZ: u64 = 1_000_000_000;
/// Our underlay port's id and MAC.
const UNDER: u16 = 0;
const UNDER_MAC: [u8; 6] = [0x02, 0, 0, 0, 9, 9];
const LOCAL: Ipv4Addr = Ipv4Addr::new(198, 18, 60, 1);
const R1: Ipv4Addr = Ipv4Addr::new(198, 18, 60, 2);
const R2: Ipv4Addr = Ipv4Addr::new(198, 18, 60, 3);
/// Inner hosts: A behind us, B behind a remote.
const A4: Ipv4Addr = Ipv4Addr::new(198, 18, 70, 1);
const B4: Ipv4Addr = Ipv4Addr::new(198, 18, 70, 2);
const B_MAC: [u8; 6] = [0x02, 0, 0, 0, 7, 2];

pub(super) fn cfg() -> VxlanConfig {
    VxlanConfig {
        vni: 100,
        local: LOCAL,
        remotes: vec![R1, R2],
        udp_port: 4789,
        mtu: 1500,
        max_macs: 64,
        age_us: 300_000_000,
    }
}

fn dump(st: &NodeStats) -> String {
    VxlanCounter::SPECS.iter().map(|c| format!("{}={} ", c.name, counter(st, c.name))).collect()
}

fn node(p: &Mempool, c: VxlanConfig) -> (Vxlan, NodeStats) {
    let v = Vxlan::new(c, UNDER, UNDER_MAC, p.clone(), HZ, [3; 16]);
    let st = stats(&v);
    (v, st)
}

/// B speaks from behind R1: the node learns B_MAC there (it sends ICMP errors only
/// as from a destination learned behind a remote); the frame it decapsulates freed.
fn learn_b(v: &mut Vxlan, st: &NodeStats, p: &Mempool) {
    let hello = eth(US_MAC, B_MAC, 0x0800, &ipv4(B4, A4, 17, 64, &[0; 8]));
    let out = run(v, st, p, &[(UNDER, vxlan(R1, 100, &hello, false))]);
    assert_eq!(out.len(), 1, "B's frame decapsulated");
}

/// An inner UDP/IPv4 frame A -> B (`dst_mac`) with `len` payload bytes.
fn inner(dst_mac: [u8; 6], len: usize) -> Vec<u8> {
    let u = udp(IpAddress::V4(A4), IpAddress::V4(B4), 5000, 53, &vec![0x42; len]);
    eth(dst_mac, US_MAC, 0x0800, &ipv4(A4, B4, 17, 64, &u))
}

/// `inner` as VXLAN (VNI `vni`) from `src` to us, outer UDP checksum `csum` (0: none).
fn vxlan(src: Ipv4Addr, vni: u32, inner: &[u8], with_csum: bool) -> Vec<u8> {
    let mut v = vec![0x08, 0, 0, 0];
    v.extend_from_slice(&(vni << 8).to_be_bytes());
    v.extend_from_slice(inner);
    let mut u = udp(IpAddress::V4(src), IpAddress::V4(LOCAL), 40000, 4789, &v);
    if !with_csum {
        u[6..8].fill(0);
    }
    eth(UNDER_MAC, PEER_MAC, 0x0800, &ipv4(src, LOCAL, 17, 64, &u))
}

/// An inner UDP/IPv4 frame A -> B whose checksum holds only the pseudo-header sum
/// (a partial checksum, to be completed).
fn partial_udp() -> Vec<u8> {
    let mut f = inner(B_MAC, 100);
    let len = (f.len() - 34) as u16;
    let pseudo = checksum::fold(checksum::pseudo_header_v4(&A4, &B4, IpProtocol::UDP, len));
    f[40..42].copy_from_slice(&pseudo.to_be_bytes());
    f
}

/// `f` (IPv4) with its DF bit set or cleared.
fn with_df(mut f: Vec<u8>, df: bool) -> Vec<u8> {
    f[20] = if df { f[20] | 0x40 } else { f[20] & !0x40 };
    f[24..26].fill(0);
    let s = !checksum::data(&f[14..34]);
    f[24..26].copy_from_slice(&s.to_be_bytes());
    f
}

/// Every packet left in `b` after `c`: its edge and all its bytes (every segment).
fn outputs(c: &ironpath_graph::testing::Call, b: &mut Burst) -> Vec<(u16, Vec<u8>)> {
    let out = (0..b.len())
        .map(|i| {
            let e = match c.dispatch {
                Dispatch::All(k) => k,
                Dispatch::Each => c.next[i],
                Dispatch::Consumed => DROP,
            };
            (e, b.segments(i).flatten().copied().collect())
        })
        .collect();
    b.free_all();
    out
}

/// Run the node on `frames`, each from port `port`: every packet it sends (edge and
/// bytes), the queue drained.
fn run(v: &mut Vxlan, st: &NodeStats, p: &Mempool, frames: &[(u16, Vec<u8>)]) -> Vec<(u16, Vec<u8>)> {
    let fr: Vec<Vec<u8>> = frames.iter().map(|(_, f)| f.clone()).collect();
    let mut b = burst(p, &fr);
    for (i, (port, _)) in frames.iter().enumerate() {
        b.header_mut(i).port = *port;
    }
    let mut out = Vec::new();
    let mut now = 1;
    loop {
        let c = call(v, st, &mut b, now);
        now += 1;
        let got = outputs(&c, &mut b);
        if got.is_empty() {
            return out;
        }
        out.extend(got);
    }
}

/// The parts of an encapsulated packet: (outer source port, destination address, VNI,
/// inner frame), its outer headers checked.
fn outer(f: &[u8]) -> (u16, Ipv4Addr, u32, Vec<u8>) {
    assert_eq!(&f[6..12], &UNDER_MAC);
    assert_eq!(&f[12..14], &[0x08, 0x00]);
    let ip = &f[14..34];
    assert_eq!(checksum::data(ip), 0xffff, "outer IPv4 checksum");
    assert_eq!(ip[6] & 0x40, 0x40, "DF");
    assert_eq!(usize::from(u16::from_be_bytes([ip[2], ip[3]])), f.len() - 14);
    assert_eq!(&ip[12..16], &LOCAL.octets());
    let udp = &f[34..42];
    let sport = u16::from_be_bytes([udp[0], udp[1]]);
    assert!(sport >= 49152);
    assert_eq!(u16::from_be_bytes([udp[2], udp[3]]), 4789);
    assert_eq!(usize::from(u16::from_be_bytes([udp[4], udp[5]])), f.len() - 34);
    assert_eq!(f[42], 0x08);
    let vni = u32::from_be_bytes([0, f[46], f[47], f[48]]);
    (sport, Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]), vni, f[50..].to_vec())
}

#[test]
fn unknown_destinations_flood_and_learned_ones_go_to_their_remote() {
    let p = pool(64);
    let (mut v, st) = node(&p, cfg());
    let f = inner(B_MAC, 100);
    let out = run(&mut v, &st, &p, &[(1, f.clone())]);
    assert_eq!(out.len(), 2, "one copy per remote");
    let mut dsts = Vec::new();
    for (e, b) in &out {
        assert_eq!(*e, UNDERLAY);
        let (_, dst, vni, inn) = outer(b);
        assert_eq!((vni, &inn), (100, &f));
        dsts.push(dst);
    }
    assert_eq!(dsts, [R1, R2]);
    assert_eq!((counter(&st, "flooded"), counter(&st, "encapsulated")), (1, 2));
    // B answers from behind R2: learned, and what goes to B goes to R2 only.
    let back = eth(US_MAC, B_MAC, 0x0800, &ipv4(B4, A4, 17, 64, &[0; 8]));
    let out = run(&mut v, &st, &p, &[(UNDER, vxlan(R2, 100, &back, false))]);
    assert_eq!(out, [(INNER, back.clone())]);
    assert_eq!((counter(&st, "learned"), v.learned()), (1, 1));
    let out = run(&mut v, &st, &p, &[(1, f.clone()), (1, f.clone())]);
    assert_eq!(out.len(), 2);
    assert!(out.iter().all(|(e, b)| *e == UNDERLAY && outer(b).1 == R2));
    // One flow, one source port.
    assert_eq!(outer(&out[0].1).0, outer(&out[1].1).0);
    assert_eq!(p.stats().in_use, 0);
}

#[test]
fn decap_takes_only_our_vni_from_our_remotes() {
    let p = pool(64);
    let (mut v, st) = node(&p, cfg());
    let f = inner(US_MAC, 64);
    let arp = eth([0xff; 6], PEER_MAC, 0x0806, &[0; 28]);
    let other_port = {
        let u = udp(IpAddress::V4(R1), IpAddress::V4(LOCAL), 1, 53, &[0; 20]);
        eth(UNDER_MAC, PEER_MAC, 0x0800, &ipv4(R1, LOCAL, 17, 64, &u))
    };
    let mut bad_csum = vxlan(R1, 100, &f, true);
    let last = bad_csum.len() - 1;
    bad_csum[last] ^= 1;
    let mut no_i_flag = vxlan(R1, 100, &f, false);
    no_i_flag[42] = 0;
    let mut fragment = vxlan(R1, 100, &f, false);
    fragment[20] = 0x20;
    let frames = vec![
        (UNDER, vxlan(R1, 100, &f, false)),
        (UNDER, vxlan(R1, 100, &f, true)),
        (UNDER, vxlan(R1, 200, &f, false)),
        (UNDER, vxlan(Ipv4Addr::new(198, 18, 60, 99), 100, &f, false)),
        (UNDER, arp.clone()),
        (UNDER, other_port.clone()),
        (UNDER, bad_csum),
        (UNDER, no_i_flag),
        (UNDER, fragment),
        (UNDER, vxlan(R1, 100, &f[..13], false)),
    ];
    let out = run(&mut v, &st, &p, &frames);
    let want =
        vec![(INNER, f.clone()), (INNER, f.clone()), (OTHER, frames[2].1.clone()), (OTHER, arp), (OTHER, other_port)];
    assert_eq!(out, want);
    let names = ["decapsulated", "other_vni", "unknown_remote", "other", "bad_checksum", "fragment", "malformed"];
    let got: Vec<u64> = names.iter().map(|c| counter(&st, c)).collect();
    assert_eq!(got, [2, 1, 1, 2, 1, 1, 2]);
    assert_eq!(p.stats().in_use, 0);
}

#[test]
fn encapsulated_then_decapsulated_is_the_frame_that_went_in() {
    let p = pool(64);
    let (mut a, sa) = node(&p, cfg());
    // The far VTEP: R1 with us as its remote.
    let far = VxlanConfig { local: R1, remotes: vec![LOCAL], ..cfg() };
    let (mut b, sb) = node(&p, far);
    for f in [inner(B_MAC, 0), inner(B_MAC, 1400), tagged(&inner([0xff; 6], 10), 0x8100, 7)] {
        let out = run(&mut a, &sa, &p, &[(1, f.clone())]);
        let (_, outer_frame) = out.into_iter().find(|(_, b)| outer(b).1 == R1).expect("to R1");
        // The outer destination MAC as an `arp` node would set it.
        let mut o = outer_frame;
        o[..6].copy_from_slice(&UNDER_MAC);
        o[26..30].copy_from_slice(&LOCAL.octets());
        o[30..34].copy_from_slice(&R1.octets());
        // Addresses swapped for the far side: fix the checksum.
        o[24..26].fill(0);
        let s = !checksum::data(&o[14..34]);
        o[24..26].copy_from_slice(&s.to_be_bytes());
        let back = run(&mut b, &sb, &p, &[(UNDER, o)]);
        assert_eq!(back, [(INNER, f)]);
    }
    assert_eq!(p.stats().in_use, 0);
}

#[test]
fn too_big_gets_the_icmp_error_its_family_needs() {
    let p = pool(64);
    let (mut v, st) = node(&p, cfg());
    learn_b(&mut v, &st, &p);
    // 1450 bytes of IPv4 fit (1500 less 50); 1451 do not.
    let fits = inner(B_MAC, 1450 - 28);
    let big = with_df(inner(B_MAC, 1451 - 28), false);
    let big_df = with_df(big.clone(), true);
    let u6 = udp(IpAddress::V6(Ipv6Addr::LOCALHOST), IpAddress::V6(Ipv6Addr::LOCALHOST), 1, 2, &[0; 1500]);
    let (a6, b6) = ("fd00:70::1".parse().unwrap(), "fd00:70::2".parse().unwrap());
    let big6 = eth(B_MAC, US_MAC, 0x86dd, &ipv6(a6, b6, 17, 64, &u6));
    let out = run(&mut v, &st, &p, &[(1, fits), (1, big), (1, big_df.clone()), (1, big6.clone())]);
    assert_eq!(
        out.iter().filter(|(e, _)| *e == UNDERLAY).count(),
        1,
        "the one that fits, to B's remote {} {:?}",
        dump(&st),
        out.iter().map(|(e, b)| (*e, b.len())).collect::<Vec<_>>()
    );
    let errs: Vec<&Vec<u8>> = out.iter().filter(|(e, _)| *e == INNER).map(|(_, b)| b).collect();
    assert_eq!(errs.len(), 2);
    let e4 = errs[0];
    assert_eq!((&e4[..6], &e4[6..12]), (&US_MAC[..], &B_MAC[..]), "back to the sender, from its destination");
    assert_eq!(checksum::data(&e4[14..34]), 0xffff);
    assert_eq!((&e4[26..30], &e4[30..34]), (&B4.octets()[..], &A4.octets()[..]));
    assert_eq!((e4[34], e4[35]), (3, 4), "fragmentation needed");
    assert_eq!(u16::from_be_bytes([e4[40], e4[41]]), 1450, "next-hop MTU");
    assert_eq!(checksum::data(&e4[34..]), 0xffff, "ICMP checksum");
    assert_eq!(&e4[42..62], &big_df[14..34], "the packet's header quoted");
    let e6 = errs[1];
    assert_eq!((e6[54], u32::from_be_bytes([e6[58], e6[59], e6[60], e6[61]])), (2, 1450), "packet too big");
    assert_eq!(&e6[22..38], &big6[38..54], "from the packet's destination");
    assert_eq!(counter(&st, "too_big"), 3);
    assert_eq!(counter(&st, "icmp_sent"), 2);
    assert_eq!(p.stats().in_use, 0);
}

/// A TSO frame leaves as encapsulated segments, each a whole TCP segment with its
/// checksum; a frame whose segments would not fit gets one ICMP error (DF is set).
#[test]
fn a_tso_frame_leaves_as_encapsulated_segments() {
    let p = pool(256);
    let c = VxlanConfig { remotes: vec![R1], ..cfg() };
    let (mut v, st) = node(&p, c);
    learn_b(&mut v, &st, &p);
    let payload: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    let seg =
        tcp((IpAddress::V4(A4), IpAddress::V4(B4)), (80, 5000), (1000, Some(1)), TcpControl::None, false, &payload);
    let f = eth(B_MAC, US_MAC, 0x0800, &ipv4(A4, B4, 6, 64, &seg));
    let mut b = burst(&p, std::slice::from_ref(&f));
    let h = b.header_mut(0);
    h.port = 1;
    h.ol_flags |= abi::TX_TCP_SEG | abi::TX_TCP_CKSUM;
    (h.l2_len, h.l3_len, h.l4_len, h.tso_segsz) = (14, 20, 20, 1000);
    let c = call(&mut v, &st, &mut b, 1);
    let mut out = outputs(&c, &mut b);
    out.extend(run(&mut v, &st, &p, &[]));
    assert_eq!(out.len(), 3, "{}", dump(&st));
    let mut got = Vec::new();
    for (e, o) in &out {
        assert_eq!(*e, UNDERLAY);
        let (_, _, _, inn) = outer(o);
        assert_eq!(checksum::data(&inn[14..34]), 0xffff, "inner IPv4 checksum");
        let len = inn.len() - 34;
        let pseudo = checksum::pseudo_header_v4(&A4, &B4, IpProtocol::TCP, len as u16) + checksum::sum(&inn[34..]);
        assert_eq!(checksum::fold(pseudo), 0xffff, "inner TCP checksum");
        got.extend_from_slice(&inn[54..]);
    }
    assert_eq!(got, payload);
    // Segments of 1460 would be 1514-byte frames: too long for 1500 once encapsulated.
    let mut b = burst(&p, std::slice::from_ref(&f));
    let h = b.header_mut(0);
    h.port = 1;
    h.ol_flags |= abi::TX_TCP_SEG;
    (h.l2_len, h.l3_len, h.l4_len, h.tso_segsz) = (14, 20, 20, 1460);
    let c = call(&mut v, &st, &mut b, 2);
    let out = outputs(&c, &mut b);
    assert_eq!(out.len(), 1, "one error for the frame, not one per segment");
    assert_eq!((out[0].0, out[0].1[34], out[0].1[35]), (INNER, 3, 4));
    assert_eq!(u16::from_be_bytes([out[0].1[40], out[0].1[41]]), 1450);
    assert_eq!((counter(&st, "too_big"), counter(&st, "icmp_sent")), (1, 1));
    assert_eq!(p.stats().in_use, 0);
}

/// A tunnel's GSO frame from the kernel keeps its offload state, now about the inner
/// frame's headers.
#[test]
fn a_tunnel_gso_frame_keeps_its_offloads_relative_to_the_inner_frame() {
    let p = pool(64);
    let (mut v, st) = node(&p, cfg());
    let f = inner(US_MAC, 1400);
    let o = vxlan(R1, 100, &f, false);
    let mut b = burst(&p, std::slice::from_ref(&o));
    let h = b.header_mut(0);
    h.port = UNDER;
    h.ol_flags |= abi::RX_AGGREGATED | abi::RX_L4_CKSUM_NONE;
    (h.l2_len, h.l3_len, h.l4_len, h.tso_segsz) = (14, 70, 8, 1000);
    let c = call(&mut v, &st, &mut b, 1);
    let _ = c;
    let out = run(&mut v, &st, &p, &[]);
    assert!(out.is_empty());
    let h = b.header(0);
    assert_eq!(b.data(0), &f[..]);
    assert_eq!((h.l2_len, h.l3_len, h.l4_len, h.tso_segsz), (14, 20, 8, 1000));
    assert_ne!(h.ol_flags & abi::RX_AGGREGATED, 0);
    b.free_all();
    assert_eq!(p.stats().in_use, 0);
}

/// A tag the inner port stripped is put back before the frame is encapsulated.
#[test]
fn a_stripped_inner_tag_travels_in_the_tunnel() {
    let p = pool(64);
    let (mut v, st) = node(&p, VxlanConfig { remotes: vec![R1], ..cfg() });
    let f = inner(B_MAC, 20);
    let mut b = burst(&p, std::slice::from_ref(&f));
    let h = b.header_mut(0);
    (h.port, h.vlan_tci) = (1, 42);
    h.ol_flags |= RX_VLAN_STRIPPED;
    let c = call(&mut v, &st, &mut b, 1);
    let out = outputs(&c, &mut b);
    assert_eq!(out.len(), 1, "{}", dump(&st));
    assert_eq!(outer(&out[0].1).3, tagged(&f, 0x8100, 42));
    assert_eq!(p.stats().in_use, 0);
}

/// The learned table holds max_macs; a peer making up source MACs gets no more.
#[test]
fn the_learned_table_is_bounded() {
    let p = pool(64);
    let (mut v, st) = node(&p, VxlanConfig { max_macs: 16, ..cfg() });
    for k in 0..40u8 {
        let f = eth(US_MAC, [0x02, 0, 0, 1, 0, k], 0x0800, &ipv4(B4, A4, 17, 64, &[0; 8]));
        run(&mut v, &st, &p, &[(UNDER, vxlan(R1, 100, &f, false))]);
    }
    assert_eq!(v.learned(), 16);
    assert_eq!(counter(&st, "table_full"), 24);
    assert_eq!(p.stats().in_use, 0);
}

#[test]
fn settings_that_do_not_fit_are_refused_at_the_parameter() {
    let catalog = ironpath_config::Catalog { nodes: &[KIND.spec], drivers: None };
    for (params, wrong) in [
        ("{port: p, local: 198.18.0.1, remotes: [198.18.0.1], vni: 1}", "remotes"),
        ("{port: p, local: 198.18.0.1, remotes: [224.0.0.1], vni: 1}", "remotes"),
        ("{port: p, local: 198.18.0.1, remotes: [\"fd00::1\"], vni: 1}", "remotes"),
        ("{port: p, local: \"fd00::1\", remotes: [198.18.0.2], vni: 1}", "local"),
    ] {
        let yaml = format!(
            "ports: [{{name: p, driver: net_null}}]\nlcores: [{{id: 0}}]\nnodes:\n  - {{name: v, type: vxlan, lcore: 0, params: {params}}}\n"
        );
        let e =
            ironpath_config::parse_str(&yaml, std::path::Path::new("v.yaml"), &catalog).expect_err(params).to_string();
        assert!(e.contains(&format!("`{wrong}`: ")) && e.contains("v.yaml:4:"), "{params}: {e}");
    }
}

/// Run the node once on `b` (its metadata set by the caller), then drain its queue.
fn run_burst(v: &mut Vxlan, st: &NodeStats, p: &Mempool, b: &mut Burst) -> Vec<(u16, Vec<u8>)> {
    let c = call(v, st, b, 1);
    let mut out = outputs(&c, b);
    out.extend(run(v, st, p, &[]));
    out
}

/// The outer headers in the first segment, the inner Ethernet header cut by its end
/// (as after a header split): decapsulated or dropped, never a panic.
#[test]
fn a_vxlan_frame_whose_inner_header_spans_segments_is_no_panic() {
    let p = pool(64);
    let (mut v, st) = node(&p, cfg());
    let f = inner(US_MAC, 64);
    let o = vxlan(R1, 100, &f, false);
    for cut in 50..=64 {
        let mut m = Mbuf::from_slice(&p, &o[..cut]).expect("mbuf");
        m.chain(Mbuf::from_slice(&p, &o[cut..]).expect("mbuf")).expect("chain");
        m.header_mut().port = UNDER;
        let mut b = Burst::new();
        assert!(b.push(m).is_ok());
        let out = run_burst(&mut v, &st, &p, &mut b);
        assert!(out.is_empty() || out == [(INNER, f.clone())], "cut at {cut}: {}", dump(&st));
    }
    assert_eq!(p.stats().in_use, 0);
}

/// A packet too big sent to a group (link-layer or IP broadcast or multicast) or from
/// an address that is not one host's gets no ICMP error (RFC 1812 4.3.2.7, RFC 4443
/// 2.4): the error would go to many hosts, or come from a group address.
#[test]
fn no_icmp_error_answers_a_group_or_a_source_that_is_no_host() {
    let p = pool(64);
    let (mut v, st) = node(&p, cfg());
    let big4 = |dst_mac: [u8; 6], src: Ipv4Addr, dst: Ipv4Addr| {
        let u = udp(IpAddress::V4(src), IpAddress::V4(dst), 5000, 53, &[0x42; 1500]);
        with_df(eth(dst_mac, US_MAC, 0x0800, &ipv4(src, dst, 17, 64, &u)), true)
    };
    let big6 = |dst_mac: [u8; 6], src: Ipv6Addr, dst: Ipv6Addr| {
        let u = udp(IpAddress::V6(src), IpAddress::V6(dst), 5000, 53, &[0x42; 1500]);
        eth(dst_mac, US_MAC, 0x86dd, &ipv6(src, dst, 17, 64, &u))
    };
    let (a6, b6): (Ipv6Addr, Ipv6Addr) = ("fd00:70::1".parse().unwrap(), "fd00:70::2".parse().unwrap());
    let frames = [
        big4([0xff; 6], A4, Ipv4Addr::BROADCAST),
        big4([0x01, 0, 0x5e, 0, 0, 5], A4, Ipv4Addr::new(224, 0, 0, 5)),
        big4([0xff; 6], A4, B4),
        big4(B_MAC, Ipv4Addr::UNSPECIFIED, B4),
        big4(B_MAC, Ipv4Addr::new(224, 0, 0, 9), B4),
        big6([0x33, 0x33, 0, 0, 0, 1], a6, "ff02::1".parse().unwrap()),
        big6(B_MAC, Ipv6Addr::UNSPECIFIED, b6),
        big6(B_MAC, "ff02::1".parse().unwrap(), b6),
    ];
    let mut sent = Vec::new();
    for (k, f) in frames.iter().enumerate() {
        let out = run(&mut v, &st, &p, &[(1, f.clone())]);
        if out.iter().any(|(e, _)| *e == INNER) {
            sent.push(k);
        }
    }
    assert_eq!(sent, [0usize; 0], "ICMP errors sent for these frames; {}", dump(&st));
    assert_eq!(counter(&st, "too_big"), frames.len() as u64);
    assert_eq!(p.stats().in_use, 0);
}

/// An inner TCP frame of `payload` bytes A -> B with DF.
fn tcp_frame(payload: &[u8]) -> Vec<u8> {
    let seg =
        tcp((IpAddress::V4(A4), IpAddress::V4(B4)), (80, 5000), (1000, Some(1)), TcpControl::None, false, payload);
    with_df(eth(B_MAC, US_MAC, 0x0800, &ipv4(A4, B4, 6, 64, &seg)), true)
}

/// A TSO frame whose port stripped its tag: its segments carry the tag once
/// encapsulated, so they are measured with it: one error for the frame (not one per
/// segment), on its VLAN, with the next-hop MTU of a tagged frame (1500 - 54).
#[test]
fn a_tso_frame_with_a_stripped_tag_is_measured_with_its_tag() {
    let p = pool(256);
    let (mut v, st) = node(&p, VxlanConfig { remotes: vec![R1], ..cfg() });
    learn_b(&mut v, &st, &p);
    // Untagged, 14 + 20 + 20 + 1410 + 36 = 1500 fits; tagged, 1504 does not.
    for segsz in [1410u16, 1460] {
        let mut b = burst(&p, &[tcp_frame(&vec![7; 1410 * 3])]);
        let h = b.header_mut(0);
        (h.port, h.vlan_tci) = (1, 42);
        h.ol_flags |= abi::TX_TCP_SEG | abi::TX_TCP_CKSUM | RX_VLAN_STRIPPED;
        (h.l2_len, h.l3_len, h.l4_len, h.tso_segsz) = (14, 20, 20, segsz);
        let out = run_burst(&mut v, &st, &p, &mut b);
        let errs: Vec<&Vec<u8>> = out.iter().filter(|(e, _)| *e == INNER).map(|(_, f)| f).collect();
        assert_eq!((out.len(), errs.len()), (1, 1), "segsz {segsz}: one error, no segment; {}", dump(&st));
        assert_eq!(&errs[0][12..16], &[0x81, 0x00, 0, 42], "segsz {segsz}: the error on the frame's VLAN");
        assert_eq!(u16::from_be_bytes([errs[0][44], errs[0][45]]), 1446, "segsz {segsz}: next-hop MTU");
    }
    assert_eq!(p.stats().in_use, 0);
}

/// An aggregate made by receive aggregation (`rx_aggregate`: checksums complete,
/// `tso_segsz` its MSS) is cut back into its segments, each of which fits: not
/// dropped as too big with an error to a sender whose packets all fit.
#[test]
fn a_received_aggregate_leaves_as_its_segments() {
    let p = pool(256);
    let (mut v, st) = node(&p, VxlanConfig { remotes: vec![R1], ..cfg() });
    let payload: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    let mut b = burst(&p, &[tcp_frame(&payload)]);
    let h = b.header_mut(0);
    h.port = 1;
    h.ol_flags |= abi::RX_AGGREGATED | abi::RX_L4_CKSUM_GOOD | abi::RX_IP_CKSUM_GOOD;
    (h.l2_len, h.l3_len, h.l4_len, h.tso_segsz) = (14, 20, 20, 1000);
    h.packet_type = abi::ptype::L2_ETHER | abi::ptype::L3_IPV4 | abi::ptype::L4_TCP;
    let out = run_burst(&mut v, &st, &p, &mut b);
    assert_eq!(out.len(), 3, "{}", dump(&st));
    let mut got = Vec::new();
    for (e, o) in &out {
        assert_eq!(*e, UNDERLAY);
        got.extend_from_slice(&outer(o).3[54..]);
    }
    assert_eq!(got, payload);
    assert_eq!(counter(&st, "too_big"), 0);
    assert_eq!(p.stats().in_use, 0);
}

/// A shared inner frame (a mirror's or a flood's reference) asking for its checksum
/// is copied and completed, the other holder's bytes untouched, not dropped.
#[test]
fn a_shared_inner_frame_with_a_partial_checksum_is_copied_and_completed() {
    let p = pool(64);
    let (mut v, st) = node(&p, cfg());
    let f = partial_udp();
    let len = (f.len() - 34) as u16;
    let mut b = burst(&p, std::slice::from_ref(&f));
    let h = b.header_mut(0);
    h.port = 1;
    h.ol_flags |= abi::TX_UDP_CKSUM;
    (h.l2_len, h.l3_len) = (14, 20);
    h.packet_type = abi::ptype::L2_ETHER | abi::ptype::L3_IPV4 | abi::ptype::L4_UDP;
    let keep = b.share(0);
    let out = run_burst(&mut v, &st, &p, &mut b);
    assert_eq!(keep.data(), &f[..], "the other holder's bytes");
    drop(keep);
    assert_eq!(out.len(), 2, "flooded to both remotes; {}", dump(&st));
    for (_, o) in &out {
        let inn = outer(o).3;
        let sum = checksum::pseudo_header_v4(&A4, &B4, IpProtocol::UDP, len) + checksum::sum(&inn[34..]);
        assert_eq!(checksum::fold(sum), 0xffff, "inner UDP checksum");
    }
    assert_eq!(p.stats().in_use, 0);
}

/// Outer headers that disagree (IHL short or past the UDP header, UDP and IP lengths
/// apart, lengths past the frame's end, zero, 65535) are dropped as malformed; IPv4
/// options, Ethernet padding and outer tags are no reason to drop.
#[test]
fn outer_lengths_that_disagree_are_malformed_options_padding_and_tags_are_not() {
    let p = pool(64);
    let (mut v, st) = node(&p, cfg());
    let f = inner(US_MAC, 64);
    let good = vxlan(R1, 100, &f, false);
    let set = |at: usize, val: u16| {
        let mut o = good.clone();
        o[at..at + 2].copy_from_slice(&val.to_be_bytes());
        o
    };
    let (total, udp_len) = (good.len() as u16 - 14, good.len() as u16 - 34);
    let mut ihl15 = good.clone();
    ihl15[14] = 0x4f;
    let mut ihl4 = good.clone();
    ihl4[14] = 0x44;
    let mut both_long = set(16, total + 1);
    both_long[38..40].copy_from_slice(&(udp_len + 1).to_be_bytes());
    let mut huge = set(16, 0xffff);
    huge[38..40].copy_from_slice(&(0xffff - 20u16).to_be_bytes());
    let mut zero = set(16, 20);
    zero[38..40].fill(0);
    let bad = [
        ihl15,
        ihl4,
        set(16, total + 1),
        set(16, total - 1),
        set(38, udp_len + 1),
        set(38, udp_len - 1),
        both_long,
        huge,
        zero,
        good[..good.len() - 1].to_vec(),
    ];
    for (k, o) in bad.iter().enumerate() {
        // Dropped, or (a UDP header read elsewhere, not to our port) passed on whole.
        let out = run(&mut v, &st, &p, &[(UNDER, o.clone())]);
        assert!(out.is_empty() || out == [(OTHER, o.clone())], "bad {k}");
    }
    let (malformed, other) = (counter(&st, "malformed"), counter(&st, "other"));
    assert_eq!(malformed + other, bad.len() as u64, "{}", dump(&st));
    assert!(malformed >= bad.len() as u64 - 1, "{}", dump(&st));
    let mut options = good.clone();
    options.splice(34..34, [1, 1, 1, 0]);
    options[14] = 0x46;
    options[16..18].copy_from_slice(&(total + 4).to_be_bytes());
    let mut padded = good.clone();
    padded.extend_from_slice(&[0; 20]);
    let qinq = tagged(&tagged(&good, 0x8100, 5), 0x88a8, 6);
    for o in [options, padded, tagged(&good, 0x8100, 5), qinq] {
        assert_eq!(run(&mut v, &st, &p, &[(UNDER, o)]), [(INNER, f.clone())], "{}", dump(&st));
    }
    assert_eq!(p.stats().in_use, 0);
}

/// A decapsulated frame carries no state about the outer headers (a stripped outer
/// tag, checksum flags, header lengths, the outer packet type), and a shared
/// underlay frame is copied, not cut under its other holder.
#[test]
fn a_decapsulated_frame_forgets_the_outer_headers_and_a_shared_one_is_copied() {
    let p = pool(64);
    let (mut v, st) = node(&p, cfg());
    let f = eth(US_MAC, B_MAC, 0x0806, &[0; 28]);
    let o = vxlan(R1, 100, &f, true);
    let mut b = burst(&p, std::slice::from_ref(&o));
    let h = b.header_mut(0);
    (h.port, h.vlan_tci) = (UNDER, 7);
    h.ol_flags |= RX_VLAN_STRIPPED | abi::RX_L4_CKSUM_GOOD | abi::RX_IP_CKSUM_GOOD | abi::RX_RSS_HASH;
    (h.l2_len, h.l3_len, h.l4_len) = (14, 20, 8);
    h.packet_type = abi::ptype::L2_ETHER | abi::ptype::L3_IPV4 | abi::ptype::L4_UDP;
    let keep = b.share(0);
    let c = call(&mut v, &st, &mut b, 1);
    assert_eq!((b.len(), c.next[0], b.data(0)), (1, INNER, &f[..]), "{}", dump(&st));
    let h = b.header(0);
    assert_eq!(h.ol_flags & !abi::RX_RSS_HASH, 0);
    assert_eq!((h.vlan_tci, h.l2_len, h.l3_len, h.l4_len, h.tso_segsz), (0, 0, 0, 0, 0));
    assert_eq!(h.packet_type & !abi::ptype::L2_ETHER, 0, "not the outer UDP");
    assert_eq!(keep.data(), &o[..], "the other holder's frame");
    drop(keep);
    b.free_all();
    assert_eq!(p.stats().in_use, 0);
}

/// An encapsulated packet asks nothing of the port: the inner frame's requests (a
/// partial checksum, a stripped tag) were done here, the outer checksum is written.
#[test]
fn an_encapsulated_packet_asks_nothing_of_the_port() {
    let p = pool(64);
    let (mut v, st) = node(&p, cfg());
    let f = partial_udp();
    let len = (f.len() - 34) as u16;
    let mut b = burst(&p, std::slice::from_ref(&f));
    let h = b.header_mut(0);
    (h.port, h.vlan_tci) = (1, 9);
    h.ol_flags |= abi::TX_UDP_CKSUM | RX_VLAN_STRIPPED | abi::RX_RSS_HASH;
    (h.l2_len, h.l3_len, h.l4_len) = (14, 20, 8);
    h.packet_type = abi::ptype::L2_ETHER | abi::ptype::L3_IPV4 | abi::ptype::L4_UDP;
    let c = call(&mut v, &st, &mut b, 1);
    assert_eq!(b.len(), 2, "{}", dump(&st));
    for i in 0..2 {
        let h = b.header(i);
        assert_eq!(c.next[i], UNDERLAY);
        assert_eq!(h.ol_flags & !abi::RX_RSS_HASH, 0, "no request of the port");
        assert_eq!((h.vlan_tci, h.l2_len, h.l3_len, h.l4_len, h.tso_segsz), (0, 14, 20, 8, 0));
        let inn = outer(&b.segments(i).flatten().copied().collect::<Vec<u8>>()).3;
        assert_eq!(&inn[12..16], &[0x81, 0, 0, 9], "the tag put back");
        let sum = checksum::pseudo_header_v4(&A4, &B4, IpProtocol::UDP, len) + checksum::sum(&inn[38..]);
        assert_eq!(checksum::fold(sum), 0xffff, "inner UDP checksum completed");
    }
    b.free_all();
    assert_eq!(p.stats().in_use, 0);
}

/// No ICMP error answers an ICMP error or a fragment other than the first, tagged or
/// not, in either family; an echo request too big is answered.
#[test]
fn no_icmp_error_answers_an_error_or_a_later_fragment() {
    let p = pool(64);
    let (mut v, st) = node(&p, cfg());
    learn_b(&mut v, &st, &p);
    let (a6, b6): (Ipv6Addr, Ipv6Addr) = ("fd00:70::1".parse().unwrap(), "fd00:70::2".parse().unwrap());
    let v4 = |proto: u8, first: u8, frag: u16| {
        let mut body = vec![0u8; 1500];
        body[0] = first;
        let mut f = with_df(eth(B_MAC, US_MAC, 0x0800, &ipv4(A4, B4, proto, 64, &body)), true);
        f[20..22].copy_from_slice(&(0x4000 | frag).to_be_bytes());
        f
    };
    let unreachable6 = eth(B_MAC, US_MAC, 0x86dd, &ipv6(a6, b6, 58, 64, &[1; 1500]));
    let mut later6 = vec![17, 0, 0, 8, 0, 0, 0, 1];
    later6.extend_from_slice(&[0; 1500]);
    let later6 = eth(B_MAC, US_MAC, 0x86dd, &ipv6(a6, b6, 44, 64, &later6));
    let quiet = [v4(1, 3, 0), v4(1, 11, 0), v4(17, 0, 100), tagged(&v4(1, 3, 0), 0x8100, 3), unreachable6, later6];
    for (k, f) in quiet.iter().enumerate() {
        assert_eq!(run(&mut v, &st, &p, &[(1, f.clone())]), [], "frame {k}");
    }
    let out = run(&mut v, &st, &p, &[(1, v4(1, 8, 0))]);
    assert_eq!(out.iter().map(|(e, _)| *e).collect::<Vec<_>>(), [INNER], "{}", dump(&st));
    assert_eq!((counter(&st, "too_big"), counter(&st, "icmp_sent")), (quiet.len() as u64 + 1, 1));
    assert_eq!(p.stats().in_use, 0);
}

/// A remote cannot get multicast, broadcast or zero source MACs learned; it can move
/// a MAC learned behind another (the remotes are trusted VTEPs), which is counted.
#[test]
fn group_and_zero_source_macs_are_not_learned_and_a_move_is_counted() {
    let p = pool(64);
    let (mut v, st) = node(&p, cfg());
    let from = |src: [u8; 6]| eth(US_MAC, src, 0x0800, &ipv4(B4, A4, 17, 64, &[0; 8]));
    for src in [[0xff; 6], [0x01, 0, 0x5e, 0, 0, 1], [0x33, 0x33, 0, 0, 0, 1], [0; 6]] {
        assert_eq!(run(&mut v, &st, &p, &[(UNDER, vxlan(R1, 100, &from(src), false))]).len(), 1);
    }
    assert_eq!((v.learned(), counter(&st, "learned")), (0, 0));
    run(&mut v, &st, &p, &[(UNDER, vxlan(R2, 100, &from(B_MAC), false))]);
    run(&mut v, &st, &p, &[(UNDER, vxlan(R1, 100, &from(B_MAC), false))]);
    assert_eq!((v.learned(), counter(&st, "learned")), (1, 2));
    let out = run(&mut v, &st, &p, &[(1, inner(B_MAC, 10))]);
    assert_eq!(out.iter().map(|(_, o)| outer(o).1).collect::<Vec<_>>(), [R1]);
    assert_eq!(p.stats().in_use, 0);
}

/// Flooding to 64 remotes a burst of broadcasts makes more copies than the node
/// holds: the output stays at MAX_QUEUED, the rest is counted, nothing is leaked.
#[test]
fn a_flood_to_many_remotes_stays_within_the_queue() {
    let p = pool(2600);
    let remotes = (0..64u8).map(|k| Ipv4Addr::new(198, 18, 61, k + 1)).collect();
    let (mut v, st) = node(&p, VxlanConfig { remotes, ..cfg() });
    let frames: Vec<Vec<u8>> = (0..32).map(|_| inner([0xff; 6], 10)).collect();
    let mut b = burst(&p, &frames);
    for i in 0..32 {
        b.header_mut(i).port = 1;
    }
    let c = call(&mut v, &st, &mut b, 1);
    assert_eq!(outputs(&c, &mut b).len(), MAX_BURST);
    assert_eq!(v.out.len(), MAX_QUEUED - MAX_BURST);
    assert_eq!(counter(&st, "queue_full"), 32 * 64 - MAX_QUEUED as u64);
    assert_eq!(run(&mut v, &st, &p, &[]).len(), MAX_QUEUED - MAX_BURST);
    assert_eq!(p.stats().in_use, 0);
}

/// With an underlay MTU of 65535, an inner frame of 65499 bytes fills the outer IPv4
/// total length exactly (no u16 overflow); one byte more is too big.
#[test]
fn the_largest_frame_fills_the_outer_lengths_exactly() {
    let p = pool(256);
    let (mut v, st) = node(&p, VxlanConfig { remotes: vec![R1], mtu: 65535, ..cfg() });
    let f = eth(B_MAC, US_MAC, 0x88b5, &vec![0x5a; 65499 - 14]);
    let out = run(&mut v, &st, &p, &[(1, f.clone())]);
    assert_eq!(out.len(), 1, "{}", dump(&st));
    assert_eq!(out[0].1.len(), 65535 + 14);
    assert_eq!(outer(&out[0].1).3, f);
    let mut g = f.clone();
    g.push(0);
    assert_eq!(run(&mut v, &st, &p, &[(1, g)]), []);
    assert_eq!(counter(&st, "too_big"), 1);
    assert_eq!(p.stats().in_use, 0);
}
