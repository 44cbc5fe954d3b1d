use super::*;
use crate::tests::{burst, call, counter, eth, ipv4, ipv6, pool, stats, udp, PEER_MAC, US_MAC};
use crate::attack::frames::{tagged, tcp};
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

fn cfg() -> VxlanConfig {
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
    let want = vec![(INNER, f.clone()), (INNER, f.clone()), (OTHER, frames[2].1.clone()), (OTHER, arp), (OTHER, other_port)];
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
    // 1450 bytes of IPv4 fit (1500 less 50); 1451 do not.
    let fits = inner(B_MAC, 1450 - 28);
    let big = with_df(inner(B_MAC, 1451 - 28), false);
    let big_df = with_df(big.clone(), true);
    let u6 = udp(IpAddress::V6(Ipv6Addr::LOCALHOST), IpAddress::V6(Ipv6Addr::LOCALHOST), 1, 2, &[0; 1500]);
    let (a6, b6) = ("fd00:70::1".parse().unwrap(), "fd00:70::2".parse().unwrap());
    let big6 = eth(B_MAC, US_MAC, 0x86dd, &ipv6(a6, b6, 17, 64, &u6));
    let out = run(&mut v, &st, &p, &[(1, fits), (1, big), (1, big_df.clone()), (1, big6.clone())]);
    assert_eq!(out.iter().filter(|(e, _)| *e == UNDERLAY).count(), 2, "the one that fits, flooded {} {:?}", dump(&st), out.iter().map(|(e, b)| (*e, b.len())).collect::<Vec<_>>());
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
    let payload: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    let seg = tcp((IpAddress::V4(A4), IpAddress::V4(B4)), (80, 5000), (1000, Some(1)), TcpControl::None, false, &payload);
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
        let e = ironpath_config::parse_str(&yaml, std::path::Path::new("v.yaml"), &catalog).expect_err(params).to_string();
        assert!(e.contains(&format!("`{wrong}`: ")) && e.contains("v.yaml:4:"), "{params}: {e}");
    }
}
