use super::table::{flags, seen, tcp_class};
use super::*;
use crate::attack::frames::{l3, tcp};
use crate::tests::{burst, call, counter, eth, icmp4_echo, ipv4, outputs, pool, stats, udp, PEER_MAC, US_MAC};
use ironpath_graph::NodeStats;
use ironpath_wire::{checksum, IpAddress, IpProtocol, TcpControl};

pub(super) const HZ: u64 = 1_000_000_000;
/// The outside port's id (the inside one is 1).
pub(super) const WAN: u16 = 0;
pub(super) const LAN: u16 = 1;
pub(super) const PUB: Ipv4Addr = Ipv4Addr::new(198, 18, 71, 1);
pub(super) const PUB2: Ipv4Addr = Ipv4Addr::new(198, 18, 71, 9);
/// Inside hosts.
pub(super) const A: Ipv4Addr = Ipv4Addr::new(198, 18, 70, 2);
pub(super) const B: Ipv4Addr = Ipv4Addr::new(198, 18, 70, 3);
/// A server outside, and a router on the way to it.
pub(super) const S: Ipv4Addr = Ipv4Addr::new(198, 18, 72, 2);
pub(super) const R: Ipv4Addr = Ipv4Addr::new(198, 18, 71, 254);

pub(super) fn cfg() -> NatConfig {
    NatConfig {
        addresses: vec![PUB],
        inside: vec![(u32::from(Ipv4Addr::new(198, 18, 70, 0)), 24)],
        filtering: Filtering::AddressPortDependent,
        forwards: vec![Forward {
            proto: TCP,
            outside: Endpoint::new(u32::from(PUB), 8080),
            inside: Endpoint::new(u32::from(B), 80),
        }],
        max_sessions: 1000,
        per_host: 100,
        timeout_us: [300_000_000, 60_000_000, 240_000_000, 7_440_000_000],
        mss_clamp: 0,
    }
}

pub(super) fn node(p: &Mempool, c: NatConfig) -> (Nat44, NodeStats) {
    let n = Nat44::new(c, WAN, p.clone(), HZ, [7; 16]).expect("built");
    let st = stats(&n);
    (n, st)
}

pub(super) fn dump(st: &NodeStats) -> String {
    NatCounter::SPECS
        .iter()
        .map(|c| format!("{}={} ", c.name, counter(st, c.name)))
        .filter(|s| !s.ends_with("=0 "))
        .collect()
}

/// Run `frames` (each from a port) through at time `now`: the frames that go on.
pub(super) fn run(n: &mut Nat44, st: &NodeStats, p: &Mempool, now: u64, frames: &[(u16, Vec<u8>)]) -> Vec<Vec<u8>> {
    run_ol(n, st, p, now, frames, 0)
}

/// [`run`] with offload flags `ol` on every packet.
pub(super) fn run_ol(
    n: &mut Nat44,
    st: &NodeStats,
    p: &Mempool,
    now: u64,
    frames: &[(u16, Vec<u8>)],
    ol: u64,
) -> Vec<Vec<u8>> {
    let fr: Vec<Vec<u8>> = frames.iter().map(|(_, f)| f.clone()).collect();
    let mut b = burst(p, &fr);
    for (i, (port, _)) in frames.iter().enumerate() {
        b.header_mut(i).port = *port;
        b.header_mut(i).ol_flags |= ol;
    }
    let c = call(n, st, &mut b, now);
    outputs(&c, &mut b)
        .into_iter()
        .filter_map(|(e, f)| {
            assert!(e == OUT || e == DROP, "edge {e}");
            (e == OUT).then_some(f)
        })
        .collect()
}

/// The frame's protocol, source and destination (ports, or the echo id, or for an
/// ICMP error the quoted packet's ports), every checksum verified by computing it
/// again (those of an ICMP error's quote too).
pub(super) fn parts(f: &[u8]) -> (u8, (Ipv4Addr, u16), (Ipv4Addr, u16)) {
    let (off, et) = l3(f).expect("an L3 header");
    assert_eq!(et, 0x0800);
    let ip = &f[off..];
    let ihl = usize::from(ip[0] & 15) * 4;
    assert_eq!(checksum::data(&ip[..ihl]), 0xffff, "IPv4 checksum");
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let l4 = &ip[ihl..total];
    let (src, dst) = (Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]), Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]));
    let proto = ip[9];
    let p = |b: &[u8], at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
    match proto {
        6 | 17 => {
            if !(proto == 17 && l4[6..8] == [0, 0]) {
                let s = checksum::pseudo_header_v4(&src, &dst, IpProtocol(proto), l4.len() as u16) + checksum::sum(l4);
                assert_eq!(checksum::fold(s), 0xffff, "{proto} checksum");
            }
            (proto, (src, p(l4, 0)), (dst, p(l4, 2)))
        }
        _ => {
            assert_eq!(checksum::data(l4), 0xffff, "ICMP checksum");
            if matches!(l4[0], 3 | 4 | 11 | 12) && l4.len() >= 28 {
                let q = &l4[8..];
                verify_quote(q);
                let qihl = usize::from(q[0] & 15) * 4;
                let t = &q[qihl..];
                let (a, b) = if q[9] == 1 { (p(t, 4), p(t, 4)) } else { (p(t, 0), p(t, 2)) };
                return (proto, (src, a), (dst, b));
            }
            let id = p(l4, 4);
            (proto, (src, id), (dst, id))
        }
    }
}

/// Checks the quote of an ICMP error: its IPv4 header checksum, and its transport
/// checksum when it is quoted whole.
pub(super) fn verify_quote(q: &[u8]) {
    if q.len() < 20 || q[0] >> 4 != 4 {
        return;
    }
    let ihl = usize::from(q[0] & 15) * 4;
    if ihl < 20 || q.len() < ihl {
        return;
    }
    assert_eq!(checksum::data(&q[..ihl]), 0xffff, "quoted IPv4 checksum");
    let total = usize::from(u16::from_be_bytes([q[2], q[3]]));
    if total < ihl || q.len() < total {
        return;
    }
    let (src, dst) = (Ipv4Addr::new(q[12], q[13], q[14], q[15]), Ipv4Addr::new(q[16], q[17], q[18], q[19]));
    let l4 = &q[ihl..total];
    match q[9] {
        6 | 17 if l4.len() >= if q[9] == 6 { 20 } else { 8 } && !(q[9] == 17 && l4[6..8] == [0, 0]) => {
            let s = checksum::pseudo_header_v4(&src, &dst, IpProtocol(q[9]), l4.len() as u16) + checksum::sum(l4);
            assert_eq!(checksum::fold(s), 0xffff, "quoted {} checksum", q[9]);
        }
        1 if l4.len() >= 8 => assert_eq!(checksum::data(l4), 0xffff, "quoted ICMP checksum"),
        _ => {}
    }
}

pub(super) fn v4(a: Ipv4Addr) -> IpAddress {
    IpAddress::V4(a)
}

pub(super) fn udp_frame(src: (Ipv4Addr, u16), dst: (Ipv4Addr, u16), payload: &[u8]) -> Vec<u8> {
    let u = udp(v4(src.0), v4(dst.0), src.1, dst.1, payload);
    eth(US_MAC, PEER_MAC, 0x0800, &ipv4(src.0, dst.0, 17, 64, &u))
}

pub(super) fn tcp_frame(
    src: (Ipv4Addr, u16),
    dst: (Ipv4Addr, u16),
    c: TcpControl,
    ack: Option<u32>,
    options: bool,
) -> Vec<u8> {
    let t = tcp((v4(src.0), v4(dst.0)), (src.1, dst.1), (1000, ack), c, options, b"hello");
    eth(US_MAC, PEER_MAC, 0x0800, &ipv4(src.0, dst.0, 6, 64, &t))
}

pub(super) fn ping(src: Ipv4Addr, dst: Ipv4Addr, reply: bool, id: u16) -> Vec<u8> {
    eth(US_MAC, PEER_MAC, 0x0800, &ipv4(src, dst, 1, 64, &icmp4_echo(reply, id, 1, b"abcdefgh")))
}

#[test]
fn udp_out_and_back_with_the_inside_port_kept_and_checksums_right() {
    let p = pool(64);
    let (mut n, st) = node(&p, cfg());
    let out = run(&mut n, &st, &p, 1, &[(LAN, udp_frame((A, 5353), (S, 53), b"query"))]);
    assert_eq!(out.len(), 1, "{}", dump(&st));
    assert_eq!(parts(&out[0]), (17, (PUB, 5353), (S, 53)), "port preserved");
    let back = run(&mut n, &st, &p, 2, &[(WAN, udp_frame((S, 53), (PUB, 5353), b"answer"))]);
    assert_eq!(parts(&back[0]), (17, (S, 53), (A, 5353)));
    // Another remote endpoint: filtered (address and port dependent).
    assert!(run(&mut n, &st, &p, 3, &[(WAN, udp_frame((S, 54), (PUB, 5353), b"x"))]).is_empty());
    // Another destination from the same inside endpoint: the same mapping.
    let out = run(&mut n, &st, &p, 4, &[(LAN, udp_frame((A, 5353), (S, 54), b"q2"))]);
    assert_eq!(parts(&out[0]).1, (PUB, 5353), "endpoint-independent mapping");
    let back = run(&mut n, &st, &p, 5, &[(WAN, udp_frame((S, 54), (PUB, 5353), b"x"))]);
    assert_eq!(parts(&back[0]).2, (A, 5353));
    assert_eq!((counter(&st, "out"), counter(&st, "in"), counter(&st, "filtered")), (2, 2, 1), "{}", dump(&st));
    assert_eq!((n.table().sessions(), n.table().mappings()), (2, 2), "one dynamic mapping and the forward");
    assert_eq!(p.stats().in_use, 0);
}

#[test]
fn a_second_host_on_the_same_port_gets_another_and_udp_without_checksum_keeps_none() {
    let p = pool(64);
    let (mut n, st) = node(&p, cfg());
    let mut f = udp_frame((B, 5353), (S, 53), b"q");
    f[40..42].fill(0);
    let a = run(&mut n, &st, &p, 1, &[(LAN, udp_frame((A, 5353), (S, 53), b"q")), (LAN, f)]);
    let (pa, pb) = (parts(&a[0]).1, parts(&a[1]).1);
    assert_eq!(pa, (PUB, 5353));
    assert_eq!(pb.0, PUB);
    assert!(pb.1 >= 1024 && pb.1 != 5353);
    assert_eq!(&a[1][40..42], &[0, 0], "no checksum stays none");
}

#[test]
fn filtering_choices_decide_who_may_send_in() {
    for (f, same_addr, other_addr) in [
        (Filtering::EndpointIndependent, true, true),
        (Filtering::AddressDependent, true, false),
        (Filtering::AddressPortDependent, false, false),
    ] {
        let p = pool(64);
        let (mut n, st) = node(&p, NatConfig { filtering: f, ..cfg() });
        run(&mut n, &st, &p, 1, &[(LAN, udp_frame((A, 4000), (S, 53), b"q"))]);
        let got = run(&mut n, &st, &p, 2, &[(WAN, udp_frame((S, 99), (PUB, 4000), b"x"))]);
        assert_eq!(got.len() == 1, same_addr, "{f:?}: another port of the same remote");
        let got = run(&mut n, &st, &p, 3, &[(WAN, udp_frame((R, 53), (PUB, 4000), b"x"))]);
        assert_eq!(got.len() == 1, other_addr, "{f:?}: another remote");
        if other_addr {
            assert_eq!(parts(&got[0]).2, (A, 4000));
        }
    }
}

#[test]
fn tcp_states_follow_the_handshake_and_close() {
    use seen::*;
    assert_eq!(tcp_class(SYN_OUT), Class::TcpTransitory);
    assert_eq!(tcp_class(SYN_OUT | SYN_IN), Class::TcpTransitory, "no ACK yet");
    assert_eq!(tcp_class(SYN_OUT | SYN_IN | ACK_OUT), Class::TcpEstablished);
    assert_eq!(tcp_class(SYN_OUT | SYN_IN | ACK_OUT | FIN_OUT), Class::TcpEstablished, "half closed");
    assert_eq!(tcp_class(SYN_OUT | SYN_IN | ACK_OUT | FIN_OUT | FIN_IN), Class::TcpTransitory);
    assert_eq!(tcp_class(SYN_OUT | SYN_IN | ACK_OUT | RST), Class::TcpTransitory);
    assert_eq!(tcp_class(ACK_OUT), Class::TcpTransitory, "mid-stream, one way");
    assert_eq!(tcp_class(ACK_OUT | ACK_IN), Class::TcpEstablished, "mid-stream, both ways");
    assert_eq!(tcp_class(SYN_IN), Class::TcpTransitory, "an inbound SYN alone (a flood) stays transitory");
    let p = pool(64);
    let (mut n, st) = node(&p, cfg());
    let syn = run(&mut n, &st, &p, 1, &[(LAN, tcp_frame((A, 40000), (S, 80), TcpControl::Syn, None, true))]);
    assert_eq!(parts(&syn[0]).1, (PUB, 40000));
    assert_eq!(n.table().per_class(), [0, 0, 1, 0]);
    let sa = run(&mut n, &st, &p, 2, &[(WAN, tcp_frame((S, 80), (PUB, 40000), TcpControl::Syn, Some(1001), true))]);
    assert_eq!(parts(&sa[0]).2, (A, 40000));
    run(&mut n, &st, &p, 3, &[(LAN, tcp_frame((A, 40000), (S, 80), TcpControl::None, Some(1001), false))]);
    assert_eq!(n.table().per_class(), [0, 0, 0, 1], "established");
    run(&mut n, &st, &p, 4, &[(LAN, tcp_frame((A, 40000), (S, 80), TcpControl::Fin, Some(1001), false))]);
    run(&mut n, &st, &p, 5, &[(WAN, tcp_frame((S, 80), (PUB, 40000), TcpControl::Fin, Some(1001), false))]);
    assert_eq!(n.table().per_class(), [0, 0, 1, 0], "closing");
    // Transitory: gone after 240 s idle.
    run(&mut n, &st, &p, 5 + 241 * HZ, &[]);
    assert_eq!(n.table().sessions(), 0);
    assert_eq!(n.table().mappings(), 1, "the forward stays");
    // An unsolicited ACK from outside opens nothing, to a mapping or a forward.
    let x =
        run(&mut n, &st, &p, 6 + 241 * HZ, &[(WAN, tcp_frame((S, 80), (PUB, 8080), TcpControl::None, Some(1), false))]);
    assert!(x.is_empty());
    assert_eq!(counter(&st, "not_syn"), 1, "{}", dump(&st));
    n.table().check();
}

#[test]
fn a_static_forward_is_reached_from_outside_and_answers_from_its_port() {
    let p = pool(64);
    let (mut n, st) = node(&p, cfg());
    let syn = run(&mut n, &st, &p, 1, &[(WAN, tcp_frame((S, 33000), (PUB, 8080), TcpControl::Syn, None, true))]);
    assert_eq!(parts(&syn[0]), (6, (S, 33000), (B, 80)));
    let sa = run(&mut n, &st, &p, 2, &[(LAN, tcp_frame((B, 80), (S, 33000), TcpControl::Syn, Some(1001), true))]);
    assert_eq!(parts(&sa[0]), (6, (PUB, 8080), (S, 33000)));
    n.table().check();
}

#[test]
fn echo_requests_go_out_with_an_id_and_replies_come_back() {
    let p = pool(64);
    let (mut n, st) = node(&p, cfg());
    let out = run(&mut n, &st, &p, 1, &[(LAN, ping(A, S, false, 77)), (LAN, ping(B, S, false, 77))]);
    let (ida, idb) = (parts(&out[0]).1, parts(&out[1]).1);
    assert_eq!(ida, (PUB, 77));
    assert_ne!(idb.1, 77, "another id for the second host");
    let back = run(&mut n, &st, &p, 2, &[(WAN, ping(S, PUB, true, idb.1)), (WAN, ping(S, PUB, true, 77))]);
    assert_eq!(parts(&back[0]).2, (B, 77));
    assert_eq!(parts(&back[1]).2, (A, 77));
    // An echo request to the outside address is the router's; one from the inside
    // of another kind (a reply, a timestamp) is not translated.
    let mine = ping(S, PUB, false, 5);
    assert_eq!(run(&mut n, &st, &p, 3, &[(WAN, mine.clone())]), [mine]);
    assert!(run(&mut n, &st, &p, 4, &[(LAN, ping(A, S, true, 9))]).is_empty());
    assert_eq!(counter(&st, "unsupported"), 1);
    // 60 s later the query sessions are gone.
    run(&mut n, &st, &p, 2 + 60 * HZ, &[]);
    assert_eq!(n.table().sessions(), 0);
}

/// An ICMP error from `from` to `to` quoting `quoted` (an IP packet), type/code.
pub(super) fn icmp_error(from: Ipv4Addr, to: Ipv4Addr, ty: u8, code: u8, quoted: &[u8]) -> Vec<u8> {
    let mut m = vec![ty, code, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(quoted);
    let s = !checksum::data(&m);
    m[2..4].copy_from_slice(&s.to_be_bytes());
    eth(US_MAC, PEER_MAC, 0x0800, &ipv4(from, to, 1, 64, &m))
}

#[test]
fn icmp_errors_are_translated_with_what_they_quote_both_ways() {
    let p = pool(64);
    let (mut n, st) = node(&p, cfg());
    let out = run(&mut n, &st, &p, 1, &[(LAN, udp_frame((A, 6000), (S, 33434), b"probe"))]);
    // A router on the way: time exceeded, quoting the translated packet (28 bytes, as
    // many routers do, and whole).
    for q in [&out[0][14..42], &out[0][14..]] {
        let e = run(&mut n, &st, &p, 2, &[(WAN, icmp_error(R, PUB, 11, 0, q))]);
        assert_eq!(e.len(), 1, "{}", dump(&st));
        let f = &e[0];
        assert_eq!(checksum::data(&f[14..34]), 0xffff);
        assert_eq!(&f[30..34], &A.octets(), "outer destination: the inside host");
        assert_eq!(checksum::data(&f[34..]), 0xffff, "ICMP checksum");
        let qi = &f[42..62];
        assert_eq!(checksum::data(qi), 0xffff, "quoted IPv4 checksum");
        assert_eq!(&qi[12..16], &A.octets());
        assert_eq!(u16::from_be_bytes([f[62], f[63]]), 6000);
        if f.len() > 70 {
            let (src, dst) = (A, S);
            let u = &f[62..];
            let s = checksum::pseudo_header_v4(&src, &dst, IpProtocol::UDP, u.len() as u16) + checksum::sum(u);
            assert_eq!(checksum::fold(s), 0xffff, "quoted UDP checksum");
        }
    }
    // An error quoting a packet of the mapping to another remote (no session):
    // dropped; one quoting no mapping is the router's, passed.
    let stray = udp_frame((PUB, 6000), (S, 9999), b"probe");
    assert!(run(&mut n, &st, &p, 3, &[(WAN, icmp_error(R, PUB, 3, 3, &stray[14..]))]).is_empty());
    assert_eq!(counter(&st, "no_session"), 1);
    let other = icmp_error(R, PUB, 3, 3, &udp_frame((PUB, 6001), (S, 33434), b"probe")[14..]);
    assert_eq!(run(&mut n, &st, &p, 3, &[(WAN, other.clone())]), [other]);
    // The forward's host refuses a datagram: its port unreachable goes out as from
    // the outside address, quoting the packet as the remote sent it.
    let mut nf = cfg();
    nf.forwards.push(Forward {
        proto: UDP,
        outside: Endpoint::new(u32::from(PUB), 5000),
        inside: Endpoint::new(u32::from(B), 5000),
    });
    let (mut n, st) = node(&p, nf);
    let inb = run(&mut n, &st, &p, 1, &[(WAN, udp_frame((S, 7000), (PUB, 5000), b"hi"))]);
    assert_eq!(parts(&inb[0]).2, (B, 5000));
    let e = run(&mut n, &st, &p, 2, &[(LAN, icmp_error(B, S, 3, 3, &inb[0][14..]))]);
    let f = &e[0];
    assert_eq!(&f[26..30], &PUB.octets(), "outer source: the outside address");
    assert_eq!(checksum::data(&f[34..]), 0xffff);
    assert_eq!(&f[42 + 16..42 + 20], &PUB.octets(), "the quote as the remote sent it");
    assert_eq!(u16::from_be_bytes([f[64], f[65]]), 5000);
    assert_eq!(counter(&st, "icmp_errors"), 1);
    assert_eq!(p.stats().in_use, 0);
}

#[test]
fn hairpinning_reaches_a_forward_from_the_inside() {
    let p = pool(64);
    let (mut n, st) = node(&p, cfg());
    let syn = run(&mut n, &st, &p, 1, &[(LAN, tcp_frame((A, 41000), (PUB, 8080), TcpControl::Syn, None, false))]);
    assert_eq!(syn.len(), 1, "{}", dump(&st));
    let (_, src, dst) = parts(&syn[0]);
    assert_eq!(src.0, PUB, "from the outside address");
    assert_eq!(dst, (B, 80));
    let sa = run(&mut n, &st, &p, 2, &[(LAN, tcp_frame((B, 80), src, TcpControl::Syn, Some(1001), false))]);
    assert_eq!(parts(&sa[0]), (6, (PUB, 8080), (A, 41000)));
    assert_eq!(counter(&st, "hairpin"), 2);
    // To the outside address unmapped: the router's (passed as is).
    let ssh = tcp_frame((A, 41001), (PUB, 22), TcpControl::Syn, None, false);
    assert_eq!(run(&mut n, &st, &p, 3, &[(LAN, ssh.clone())]), [ssh]);
}

#[test]
fn inside_networks_ttl_one_and_non_ip_pass_unchanged_fragments_do_not_leak() {
    let p = pool(64);
    let (mut n, st) = node(&p, cfg());
    let local = udp_frame((A, 1), (B, 2), b"x");
    let mut ttl1 = udp_frame((A, 1), (S, 2), b"x");
    ttl1[22] = 1;
    let s = !checksum::data(&{
        let mut h = ttl1[14..34].to_vec();
        h[10..12].fill(0);
        h
    });
    ttl1[24..26].copy_from_slice(&s.to_be_bytes());
    let arp = eth([0xff; 6], PEER_MAC, 0x0806, &[0; 28]);
    let got = run(&mut n, &st, &p, 1, &[(LAN, local.clone()), (LAN, ttl1.clone()), (LAN, arp.clone())]);
    assert_eq!(got, [local, ttl1, arp]);
    let mut frag = udp_frame((A, 1), (S, 2), b"x");
    frag[20] |= 0x20;
    assert!(run(&mut n, &st, &p, 2, &[(LAN, frag)]).is_empty());
    let gre = eth(US_MAC, PEER_MAC, 0x0800, &ipv4(A, S, 47, 64, &[0; 8]));
    assert!(run(&mut n, &st, &p, 3, &[(LAN, gre)]).is_empty());
    assert_eq!((counter(&st, "fragment"), counter(&st, "unsupported"), counter(&st, "ttl_expiring")), (1, 1, 1));
    assert_eq!(n.table().sessions(), 0);
}

#[test]
fn one_host_at_its_bound_leaves_the_others_their_sessions() {
    let p = pool(256);
    let (mut n, st) = node(&p, NatConfig { per_host: 10, max_sessions: 30, ..cfg() });
    for k in 0..50u16 {
        run(&mut n, &st, &p, 1 + u64::from(k), &[(LAN, udp_frame((A, 10000 + k), (S, 53), b"q"))]);
    }
    assert_eq!(n.table().host_sessions(u32::from(A)), 10);
    assert_eq!(counter(&st, "host_limit"), 40);
    let got = run(&mut n, &st, &p, 100, &[(LAN, udp_frame((B, 1), (S, 53), b"q"))]);
    assert_eq!(got.len(), 1, "another host still gets a session");
    // Hosts enough to fill the table: the oldest idle sessions (A's) make room.
    for h in 0..3u8 {
        for k in 0..10u16 {
            let src = Ipv4Addr::new(198, 18, 70, 10 + h);
            let now = 200 + u64::from(h) * 10 + u64::from(k);
            run(&mut n, &st, &p, now, &[(LAN, udp_frame((src, k + 2000), (S, 53), b"q"))]);
        }
    }
    assert_eq!(n.table().sessions(), 30);
    assert_eq!(counter(&st, "reclaimed"), 11, "{}", dump(&st));
    assert_eq!(n.table().host_sessions(u32::from(A)), 0, "A's were the oldest");
    n.table().check();
}

#[test]
fn partial_checksums_stay_partial_and_complete_right() {
    let p = pool(64);
    let (mut n, st) = node(&p, cfg());
    let mut f = tcp_frame((A, 40000), (S, 80), TcpControl::Psh, Some(5), false);
    let len = (f.len() - 34) as u16;
    let pseudo = checksum::fold(checksum::pseudo_header_v4(&A, &S, IpProtocol::TCP, len));
    f[50..52].copy_from_slice(&pseudo.to_be_bytes());
    let mut b = burst(&p, &[f]);
    b.header_mut(0).port = LAN;
    b.header_mut(0).ol_flags |= abi::RX_L4_CKSUM_NONE;
    let c = call(&mut n, &st, &mut b, 1);
    let out = outputs(&c, &mut b);
    let mut g = out[0].1.clone();
    // What a port completing it computes: the sum over the segment with the field.
    let want = checksum::fold(checksum::pseudo_header_v4(&PUB, &S, IpProtocol::TCP, len));
    assert_eq!(u16::from_be_bytes([g[50], g[51]]), want, "the pseudo-header sum of the new addresses");
    let s = !checksum::data(&g[34..]);
    g[50..52].copy_from_slice(&s.to_be_bytes());
    assert_eq!(parts(&g).1, (PUB, 40000));
}

#[test]
fn mss_is_clamped_in_syns_with_the_checksum_kept_right() {
    let p = pool(64);
    let (mut n, st) = node(&p, NatConfig { mss_clamp: 1400, ..cfg() });
    let out = run(&mut n, &st, &p, 1, &[(LAN, tcp_frame((A, 40000), (S, 80), TcpControl::Syn, None, true))]);
    parts(&out[0]);
    let opts = &out[0][54..];
    assert_eq!(&opts[..4], &[2, 4, 0x05, 0x78], "MSS 1400");
    assert_eq!(counter(&st, "mss_clamped"), 1);
    // An MSS at an odd offset (after one NOP).
    let mut t = tcp((v4(A), v4(S)), (40001, 80), (1, None), TcpControl::Syn, false, b"");
    t[12] = 0x70;
    t.extend_from_slice(&[1, 2, 4, 0x05, 0xb4, 1, 1, 1]);
    t[16..18].fill(0);
    let s = checksum::pseudo_header_v4(&A, &S, IpProtocol::TCP, t.len() as u16) + checksum::sum(&t);
    let s = !checksum::fold(s);
    t[16..18].copy_from_slice(&s.to_be_bytes());
    let f = eth(US_MAC, PEER_MAC, 0x0800, &ipv4(A, S, 6, 64, &t));
    let out = run(&mut n, &st, &p, 2, &[(LAN, f)]);
    parts(&out[0]);
    assert_eq!(&out[0][55..59], &[2, 4, 0x05, 0x78]);
}

#[test]
fn ports_run_out_per_address_and_come_back() {
    let p = pool(64);
    let mut c = cfg();
    c.addresses = vec![PUB, PUB2];
    c.max_sessions = 200_000;
    c.per_host = 200_000;
    let (mut n, st) = node(&p, c);
    let addr = {
        let out = run(&mut n, &st, &p, 1, &[(LAN, udp_frame((A, 1), (S, 53), b"q"))]);
        parts(&out[0]).1 .0
    };
    let mut ev = Events::default();
    let mut t = n.table;
    let a = u32::from(A);
    let mut k = 2u16;
    while t.free_ports(u32::from(addr), UDP) > 0 {
        t.outbound(UDP, Endpoint::new(a, k), Endpoint::new(u32::from(S), 53), 0, 2, &mut ev).expect("a port");
        k += 1;
    }
    assert_eq!(
        t.outbound(UDP, Endpoint::new(a, k), Endpoint::new(u32::from(S), 53), 0, 2, &mut ev),
        Err(Refused::PortsExhausted),
        "paired pooling: the host's address only"
    );
    assert_eq!(t.mappings(), 65535 - 1024 + 1 + 1, "every dynamic port, and the forward");
    t.check();
    t.expire(2 + 301 * HZ, usize::MAX);
    assert_eq!((t.sessions(), t.mappings()), (0, 1), "the forward stays");
    assert_eq!(t.free_ports(u32::from(addr), UDP), 65536 - 1024);
    t.check();
}

/// The table against a model: random packets both ways from a few hosts to a few
/// remotes, time passing; after each step every index agrees with the sessions, no
/// bound is passed, a mapping keeps its outside endpoint while it lives, and what
/// comes in is what the filtering lets in.
#[test]
fn the_table_keeps_its_promises_under_random_traffic() {
    use std::collections::{HashMap, HashSet};
    for seed in 1..=6u64 {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut rnd = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let filtering = [Filtering::EndpointIndependent, Filtering::AddressDependent, Filtering::AddressPortDependent]
            [seed as usize % 3];
        let limits = Limits { max_sessions: 40, per_host: 12, timeout: [300, 60, 240, 7440] };
        let mut t = Table::new(vec![1000, 1001], limits, filtering, [seed as u8; 16]);
        t.add_forward(TCP, Endpoint::new(1000, 80), Endpoint::new(1, 8080)).unwrap();
        let mut mapped: HashMap<(u8, Endpoint), Endpoint> = HashMap::new();
        // What each mapping's inside endpoint sent to (while its sessions live).
        let mut now = 0u64;
        for _ in 0..3000 {
            now += rnd(20);
            let mut ev = Events::default();
            t.expire(now, usize::MAX);
            // Forget mappings that ended.
            mapped.retain(|(p, i), o| t.by_inside(*p, *i).is_some_and(|m| m.outside == *o));
            let proto = [UDP, TCP, ICMP][rnd(3) as usize];
            let host = 1 + rnd(5) as u32;
            let inside = Endpoint::new(host, if proto == ICMP { rnd(3) as u16 + 1 } else { 2000 + rnd(6) as u16 });
            let remote = Endpoint::new(50 + rnd(3) as u32, if proto == ICMP { 0 } else { 53 + rnd(2) as u16 });
            let fl =
                [flags::SYN, flags::SYN | flags::ACK, flags::ACK, flags::FIN | flags::ACK, flags::RST][rnd(5) as usize];
            if rnd(2) == 0 {
                let before: HashSet<Endpoint> = t.by_inside(proto, inside).map(|m| m.outside).into_iter().collect();
                if let Ok(o) = t.outbound(proto, inside, remote, fl, now, &mut ev) {
                    if let Some(b) = before.iter().next() {
                        assert_eq!(*b, o, "a live mapping keeps its outside endpoint");
                    }
                    assert!(o.addr == 1000 || o.addr == 1001);
                    mapped.insert((proto, inside), o);
                    assert!(t.has_session(proto, inside, remote));
                }
            } else if let Some(&(p, i)) = mapped.keys().nth(rnd(mapped.len().max(1) as u64) as usize) {
                let o = mapped[&(p, i)];
                let remote = if p == ICMP { Endpoint::new(remote.addr, 0) } else { remote };
                let had = t.has_session(p, i, remote);
                let same_addr = [0, 53, 54].iter().any(|&port| t.has_session(p, i, Endpoint::new(remote.addr, port)));
                let fixed = t.by_inside(p, i).is_some_and(|m| m.fixed);
                let r = t.inbound(p, o, remote, fl, now, &mut ev);
                match r {
                    Ok(got) => {
                        assert_eq!(got, i);
                        let may = had
                            || fixed
                            || match filtering {
                                Filtering::EndpointIndependent => true,
                                Filtering::AddressDependent => same_addr,
                                Filtering::AddressPortDependent => false,
                            };
                        assert!(may, "{filtering:?} let in {remote:?} to {i:?} (had {had})");
                    }
                    Err(Refused::Filtered) => assert!(!had && !fixed && filtering != Filtering::EndpointIndependent),
                    Err(_) => {}
                }
            }
            t.check();
        }
    }
}

/// Bytes from a peer, random or cut from real frames, both ways: never a panic,
/// every mbuf back.
#[test]
fn random_and_cut_frames_never_panic() {
    let p = pool(256);
    let (mut n, st) = node(&p, NatConfig { filtering: Filtering::EndpointIndependent, mss_clamp: 1200, ..cfg() });
    let mut x = 0x1234_5678_9abc_def1u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let seeds = [
        udp_frame((A, 5353), (S, 53), b"query"),
        tcp_frame((A, 40000), (S, 80), TcpControl::Syn, None, true),
        tcp_frame((S, 80), (PUB, 40000), TcpControl::Syn, Some(1), true),
        ping(A, S, false, 1),
        icmp_error(R, PUB, 11, 0, &udp_frame((PUB, 5353), (S, 53), b"q")[14..]),
        icmp_error(B, S, 3, 3, &udp_frame((S, 1), (B, 5000), b"q")[14..]),
    ];
    for round in 0..20_000u64 {
        let mut f = seeds[(rnd() % seeds.len() as u64) as usize].clone();
        match rnd() % 4 {
            0 => {
                let k = (rnd() % f.len() as u64) as usize;
                f.truncate(k.max(1));
            }
            1 => {
                for _ in 0..1 + rnd() % 4 {
                    let k = (rnd() % f.len() as u64) as usize;
                    f[k] = rnd() as u8;
                }
            }
            2 => {
                // Lengths and header lengths set wrong.
                let k = [16, 17, 14, 46, 38, 42, 43][(rnd() % 7) as usize];
                if k < f.len() {
                    f[k] = rnd() as u8;
                }
            }
            _ => {}
        }
        let port = if rnd() % 2 == 0 { WAN } else { LAN };
        run(&mut n, &st, &p, round * 1000, &[(port, f)]);
        if round % 1000 == 0 {
            n.table().check();
        }
    }
    assert_eq!(p.stats().in_use, 0);
}

#[test]
fn the_control_commands_show_and_change_the_tables() {
    let p = pool(64);
    let (mut n, st) = node(&p, cfg());
    // The engine's clock is the TSC: the session made now.
    let now = ironpath_eal::tsc::rdtsc();
    run(&mut n, &st, &p, now, &[(LAN, udp_frame((A, 5353), (S, 53), b"q"))]);
    crate::tests::running(Box::new(n), &["out"], |g| {
        let show = crate::tests::ctl(g, "show nat44").unwrap().unwrap();
        assert!(show.contains("198.18.70.2:5353"), "{show}");
        assert!(show.contains("forward tcp 198.18.71.1:8080 -> 198.18.70.3:80"), "{show}");
        let r = crate::tests::ctl(g, "nat44 forward add udp 198.18.71.1:5353 198.18.70.3:53").unwrap();
        assert!(r.unwrap_err().contains("in use"), "a port a mapping holds");
        let r = crate::tests::ctl(g, "nat44 forward add udp 198.18.71.1:53 198.18.70.3:53").unwrap();
        assert!(r.is_ok(), "{r:?}");
        let r = crate::tests::ctl(g, "nat44 forward add udp 198.18.71.1:54 198.18.72.3:53").unwrap();
        assert!(r.unwrap_err().contains("inside network"));
        let r = crate::tests::ctl(g, "nat44 forward del udp 198.18.71.1:53").unwrap();
        assert!(r.is_ok());
        let r = crate::tests::ctl(g, "nat44 session flush").unwrap().unwrap();
        assert!(r.starts_with("1 sessions"), "{r}");
        let r = crate::tests::ctl(g, "nat44 forward add sctp 198.18.71.1:53 198.18.70.3:53").unwrap();
        assert!(r.is_err());
    });
}
