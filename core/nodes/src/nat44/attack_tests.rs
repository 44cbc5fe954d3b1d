//! Attacks on `nat44`: crafted frames and hostile peers on both sides.

use super::table::flags;
use super::*;
use crate::attack::frames::{l3, tagged, tcp};
use crate::tests::{call, counter, eth, ipv4, pool, stats, Rng, PEER_MAC, US_MAC};
use ironpath_graph::NodeStats;
use ironpath_wire::checksum::update16;
use ironpath_wire::{checksum, IpProtocol, TcpControl};

use super::tests::{
    cfg, dump, icmp_error, node, parts, ping, run, run_ol, tcp_frame, udp_frame, v4, A, B, HZ, LAN, PUB, PUB2, R, S,
    WAN,
};

const C: Ipv4Addr = Ipv4Addr::new(198, 18, 70, 4);
const T: Ipv4Addr = Ipv4Addr::new(198, 18, 72, 77);
const V: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 9);

fn inside_net() -> (u32, u8) {
    (u32::from(Ipv4Addr::new(198, 18, 70, 0)), 24)
}

fn is_inside(a: Ipv4Addr) -> bool {
    let (n, l) = inside_net();
    in_prefix(u32::from(a), n, l)
}

/// Run packets already built (chained, shared): every segment of what goes on.
fn run_mbufs(n: &mut Nat44, st: &NodeStats, now: u64, ms: Vec<Mbuf>) -> Vec<Vec<u8>> {
    let mut b = Burst::new();
    for m in ms {
        assert!(b.push(m).is_ok());
    }
    let c = call(n, st, &mut b, now);
    let kept = |i: usize| match c.dispatch {
        Dispatch::All(e) => e == OUT,
        Dispatch::Each => c.next[i] == OUT,
        Dispatch::Consumed => false,
    };
    let out =
        (0..b.len()).filter(|&i| kept(i)).map(|i| b.segments(i).flat_map(|s| s.iter().copied()).collect()).collect();
    b.free_all();
    out
}

/// Recompute the IPv4 header checksum of the header at `ip`.
fn fix_ip(ip: &mut [u8]) {
    let ihl = usize::from(ip[0] & 15) * 4;
    ip[10..12].fill(0);
    let s = !checksum::data(&ip[..ihl]);
    ip[10..12].copy_from_slice(&s.to_be_bytes());
}

/// Set a frame's TTL, its IPv4 checksum fixed.
fn with_ttl(mut f: Vec<u8>, ttl: u8) -> Vec<u8> {
    f[22] = ttl;
    fix_ip(&mut f[14..]);
    f
}

/// The transport checksum of `l4` (its field zeroed first) for these addresses.
fn l4_checksum(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, l4: &mut [u8]) {
    let at = match proto {
        6 => 16,
        17 => 6,
        _ => 2,
    };
    l4[at..at + 2].fill(0);
    let s = if proto == 1 {
        !checksum::data(l4)
    } else {
        let s = !checksum::fold(
            checksum::pseudo_header_v4(&src, &dst, IpProtocol(proto), l4.len() as u16) + checksum::sum(l4),
        );
        if s == 0 && proto == 17 {
            0xffff
        } else {
            s
        }
    };
    l4[at..at + 2].copy_from_slice(&s.to_be_bytes());
}

/// An IPv4 packet with options `opts` (a multiple of 4 bytes), DF set, id `id`.
fn ip_opts(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, ttl: u8, opts: &[u8], id: u16, l4: &[u8]) -> Vec<u8> {
    assert!(opts.len().is_multiple_of(4) && opts.len() <= 40);
    let ihl = 20 + opts.len();
    let mut h = vec![0u8; ihl];
    h[0] = 0x40 | (ihl / 4) as u8;
    h[1] = 0x10;
    h[2..4].copy_from_slice(&((ihl + l4.len()) as u16).to_be_bytes());
    h[4..6].copy_from_slice(&id.to_be_bytes());
    h[6] = 0x40;
    h[8] = ttl;
    h[9] = proto;
    h[12..16].copy_from_slice(&src.octets());
    h[16..20].copy_from_slice(&dst.octets());
    h[20..].copy_from_slice(opts);
    fix_ip(&mut h);
    h.extend_from_slice(l4);
    h
}

/// Make a quote's checksums right again after changing it: its IPv4 header's, and
/// its transport one when it is quoted whole.
fn fix_quote(q: &mut [u8]) {
    let ihl = usize::from(q[0] & 15) * 4;
    if q[0] >> 4 != 4 || ihl < 20 || q.len() < ihl {
        return;
    }
    fix_ip(q);
    let total = usize::from(u16::from_be_bytes([q[2], q[3]]));
    if total < ihl || q.len() < total {
        return;
    }
    let (src, dst) = (Ipv4Addr::new(q[12], q[13], q[14], q[15]), Ipv4Addr::new(q[16], q[17], q[18], q[19]));
    let proto = q[9];
    let l4 = &mut q[ihl..total];
    match proto {
        6 if l4.len() >= 20 => l4_checksum(src, dst, 6, l4),
        17 if l4.len() >= 8 && l4[6..8] != [0, 0] => l4_checksum(src, dst, 17, l4),
        1 if l4.len() >= 8 => l4_checksum(src, dst, 1, l4),
        _ => {}
    }
}

/// The quoted packet's source and destination (ports or echo id) of an ICMP error.
fn quote_of(f: &[u8]) -> (u8, (Ipv4Addr, u16), (Ipv4Addr, u16)) {
    let (off, _) = l3(f).unwrap();
    let ihl = usize::from(f[off] & 15) * 4;
    let q = &f[off + ihl + 8..];
    let qihl = usize::from(q[0] & 15) * 4;
    let t = &q[qihl..];
    let p = |at: usize| u16::from_be_bytes([t[at], t[at + 1]]);
    let (a, b) = if q[9] == 1 { (p(4), p(4)) } else { (p(0), p(2)) };
    (q[9], (Ipv4Addr::new(q[12], q[13], q[14], q[15]), a), (Ipv4Addr::new(q[16], q[17], q[18], q[19]), b))
}

fn dst_of(f: &[u8]) -> Ipv4Addr {
    let (off, _) = l3(f).unwrap();
    Ipv4Addr::new(f[off + 16], f[off + 17], f[off + 18], f[off + 19])
}

fn src_of(f: &[u8]) -> Ipv4Addr {
    let (off, _) = l3(f).unwrap();
    Ipv4Addr::new(f[off + 12], f[off + 13], f[off + 14], f[off + 15])
}

// ---------------------------------------------------------------------------------
// 1. Outside attacker: spoofed ICMP errors.
// ---------------------------------------------------------------------------------

/// Errors from the outside quoting guessed mappings: the wrong remote, the wrong
/// outer destination, broken quotes (IHL, cut short, a fragment, an error quoting an
/// error), another host's echo id with the wrong remote. None reaches an inside
/// host; only the exact session's error goes to its own host, checksums right.
#[test]
fn spoofed_icmp_errors_from_outside_never_reach_a_wrong_host() {
    let p = pool(128);
    let mut c = cfg();
    c.addresses = vec![PUB, PUB2];
    let (mut n, st) = node(&p, c);
    let out = run(
        &mut n,
        &st,
        &p,
        1,
        &[(LAN, udp_frame((A, 6000), (S, 53), b"probe")), (LAN, ping(B, S, false, 77)), (LAN, ping(A, S, false, 77))],
    );
    assert_eq!(out.len(), 3, "{}", dump(&st));
    let (_, ua, _) = parts(&out[0]);
    let (_, eb, _) = parts(&out[1]);
    let (_, ea, _) = parts(&out[2]);
    let other = if ua.0 == PUB { PUB2 } else { PUB };
    let good = udp_frame(ua, (S, 53), b"probe")[14..].to_vec();
    let mut bad: Vec<(&str, Vec<u8>)> = Vec::new();
    bad.push(("wrong remote port", icmp_error(R, ua.0, 3, 3, &udp_frame(ua, (S, 54), b"probe")[14..])));
    bad.push(("wrong remote address", icmp_error(R, ua.0, 3, 3, &udp_frame(ua, (T, 53), b"probe")[14..])));
    bad.push(("wrong outer destination", icmp_error(R, other, 3, 3, &good)));
    let mut q = good.clone();
    q[0] = 0x44;
    bad.push(("quoted IHL 4", icmp_error(R, ua.0, 3, 3, &q)));
    let mut q = good.clone();
    q[0] = 0x4f;
    bad.push(("quoted IHL 15, quote shorter", icmp_error(R, ua.0, 3, 3, &q)));
    bad.push(("quote cut to 4 transport bytes", icmp_error(R, ua.0, 3, 3, &good[..24])));
    bad.push(("quote cut to the IP header", icmp_error(R, ua.0, 11, 0, &good[..20])));
    let mut q = good.clone();
    q[6..8].copy_from_slice(&[0x00, 0x01]);
    fix_ip(&mut q);
    bad.push(("quoted non-first fragment", icmp_error(R, ua.0, 3, 3, &q)));
    let inner = icmp_error(ua.0, S, 3, 3, &good);
    bad.push(("an error quoting an error", icmp_error(R, ua.0, 3, 3, &inner[14..])));
    bad.push(("B's echo id, wrong remote", icmp_error(R, eb.0, 11, 0, &ping(eb.0, T, false, eb.1)[14..])));
    bad.push(("A's echo id, wrong remote", icmp_error(R, ea.0, 11, 0, &ping(ea.0, T, false, ea.1)[14..])));
    bad.push((
        "a UDP quote on the port of a TCP forward",
        icmp_error(R, PUB, 3, 3, &udp_frame((PUB, 8080), (S, 53), b"x")[14..]),
    ));
    for (what, f) in &bad {
        let got = run(&mut n, &st, &p, 2, &[(WAN, f.clone())]);
        assert!(got.is_empty() || got == [f.clone()], "{what}: changed: {}", dump(&st));
        n.table().check();
    }
    // The real sessions' errors reach their own hosts, whole quote or 28 bytes.
    for (q, host, inside) in [
        (good.clone(), A, (A, 6000)),
        (good[..28].to_vec(), A, (A, 6000)),
        (ping(eb.0, S, false, eb.1)[14..].to_vec(), B, (B, 77)),
        (ping(ea.0, S, false, ea.1)[14..].to_vec(), A, (A, 77)),
    ] {
        let f = icmp_error(R, ua.0, 11, 0, &q);
        // The outer destination is the address of the quoted source.
        let mut f = f;
        let to = quote_of(&f).1 .0.octets();
        f[30..34].copy_from_slice(&to);
        fix_ip(&mut f[14..]);
        let got = run(&mut n, &st, &p, 3, &[(WAN, f)]);
        assert_eq!(got.len(), 1, "{}", dump(&st));
        parts(&got[0]);
        assert_eq!(dst_of(&got[0]), host);
        assert_eq!(quote_of(&got[0]).1, inside);
    }
    assert_eq!(p.stats().in_use, 0);
}

/// A corrupted ICMP error (its checksum wrong) must not leave with a checksum made
/// right: the NAT would certify damaged bytes. Incremental updates keep a wrong
/// checksum wrong for TCP and UDP; the ICMP error path computes it afresh.
#[test]
fn a_corrupted_icmp_error_does_not_leave_with_a_valid_checksum() {
    let p = pool(64);
    let mut c = cfg();
    c.forwards.push(Forward {
        proto: UDP,
        outside: Endpoint::new(u32::from(PUB), 5000),
        inside: Endpoint::new(u32::from(B), 5000),
    });
    let (mut n, st) = node(&p, c);
    let out = run(&mut n, &st, &p, 1, &[(LAN, udp_frame((A, 6000), (S, 53), b"probe-probe"))]);
    let mut e = icmp_error(R, PUB, 3, 3, &out[0][14..]);
    let last = e.len() - 1;
    e[last] ^= 0x5a;
    let got = run(&mut n, &st, &p, 2, &[(WAN, e)]);
    for f in &got {
        assert_ne!(checksum::data(&f[34..]), 0xffff, "inbound: a corrupted ICMP error left with a valid ICMP checksum");
    }
    let inb = run(&mut n, &st, &p, 3, &[(WAN, udp_frame((S, 7000), (PUB, 5000), b"hi there"))]);
    assert_eq!(parts(&inb[0]).2, (B, 5000));
    let mut e = icmp_error(B, S, 3, 3, &inb[0][14..]);
    let last = e.len() - 1;
    e[last] ^= 0x5a;
    let got = run(&mut n, &st, &p, 4, &[(LAN, e)]);
    for f in &got {
        assert_ne!(
            checksum::data(&f[34..]),
            0xffff,
            "outbound: a corrupted ICMP error left with a valid ICMP checksum"
        );
    }
}

/// An inside host's ICMP error about a session goes back to that session's remote;
/// one addressed elsewhere (a victim) is not relayed from the outside address (the
/// inbound path checks the outer destination against the quote; the outbound must too).
#[test]
fn an_icmp_error_from_inside_goes_only_to_the_quoted_remote() {
    let p = pool(64);
    let mut c = cfg();
    c.forwards.push(Forward {
        proto: UDP,
        outside: Endpoint::new(u32::from(PUB), 5000),
        inside: Endpoint::new(u32::from(B), 5000),
    });
    let (mut n, st) = node(&p, c);
    let inb = run(&mut n, &st, &p, 1, &[(WAN, udp_frame((S, 7000), (PUB, 5000), b"hi"))]);
    assert_eq!(parts(&inb[0]).2, (B, 5000));
    let ok = run(&mut n, &st, &p, 2, &[(LAN, icmp_error(B, S, 3, 3, &inb[0][14..]))]);
    assert_eq!(ok.len(), 1);
    assert_eq!((src_of(&ok[0]), dst_of(&ok[0])), (PUB, S));
    let hostile = run(&mut n, &st, &p, 3, &[(LAN, icmp_error(A, V, 3, 3, &inb[0][14..]))]);
    assert!(
        hostile.is_empty(),
        "an error quoting B's session relayed from {:?} to victim {:?}",
        src_of(&hostile[0]),
        dst_of(&hostile[0])
    );
}

/// Random changes to the quote of ICMP errors (both ways, sessions live): whatever
/// leaves has every checksum right, and an error reaches an inside host only when
/// that host's mapping and session are what it quotes.
#[test]
fn mutated_quotes_never_reach_a_host_that_does_not_own_them() {
    let p = pool(128);
    let mut c = cfg();
    c.forwards.push(Forward {
        proto: UDP,
        outside: Endpoint::new(u32::from(PUB), 5000),
        inside: Endpoint::new(u32::from(B), 5000),
    });
    let (mut n, st) = node(&p, c);
    let mut seeds = Vec::new();
    for (h, port) in [(A, 6000u16), (B, 6000), (C, 6001)] {
        let out =
            run(&mut n, &st, &p, 1, &[(LAN, udp_frame((h, port), (S, 53), b"probe")), (LAN, ping(h, S, false, 9))]);
        for f in out {
            seeds.push((WAN, icmp_error(R, PUB, 11, 0, &f[14..])));
        }
    }
    let inb = run(&mut n, &st, &p, 1, &[(WAN, udp_frame((S, 7000), (PUB, 5000), b"hi"))]);
    seeds.push((LAN, icmp_error(B, S, 3, 3, &inb[0][14..])));
    let mut rng = Rng(0x0bad_cafe_dead_beef);
    for round in 0..4000u64 {
        let (port, mut f) = seeds[rng.below(seeds.len() as u64) as usize].clone();
        for _ in 0..1 + rng.below(3) {
            // Within the quote's header and first transport bytes.
            let k = 42 + rng.below(28) as usize;
            f[k] = rng.next() as u8;
        }
        fix_quote(&mut f[42..]);
        f[36..38].fill(0);
        let s = !checksum::data(&f[34..]);
        f[36..38].copy_from_slice(&s.to_be_bytes());
        let got = run(&mut n, &st, &p, 2 + round, &[(port, f.clone())]);
        for g in &got {
            if *g == f {
                continue;
            }
            parts(g);
            let (proto, qs, qd) = quote_of(g);
            if port == WAN {
                let host = dst_of(g);
                assert!(is_inside(host));
                assert_eq!(qs.0, host, "the quote's source is the host it goes to");
                let remote = Endpoint::new(u32::from(qd.0), if proto == 1 { 0 } else { qd.1 });
                assert!(n.table().has_session(proto, Endpoint::new(u32::from(qs.0), qs.1), remote), "{g:?}");
            } else {
                assert_eq!(src_of(g), PUB);
                assert_eq!(qd.0, PUB);
            }
        }
    }
    n.table().check();
    assert_eq!(p.stats().in_use, 0);
}

// ---------------------------------------------------------------------------------
// 2. Outside TCP.
// ---------------------------------------------------------------------------------

/// Segments from the outside that match no session (another remote port or
/// address) cannot move an established session's state, whatever the filtering;
/// only the session's own remote can.
#[test]
fn outside_segments_without_a_session_cannot_move_a_sessions_state() {
    for filtering in [Filtering::EndpointIndependent, Filtering::AddressDependent, Filtering::AddressPortDependent] {
        let p = pool(64);
        let (mut n, st) = node(&p, NatConfig { filtering, ..cfg() });
        let syn = run(&mut n, &st, &p, 1, &[(LAN, tcp_frame((A, 40000), (S, 80), TcpControl::Syn, None, true))]);
        let pa = parts(&syn[0]).1;
        run(&mut n, &st, &p, 2, &[(WAN, tcp_frame((S, 80), pa, TcpControl::Syn, Some(1001), true))]);
        run(&mut n, &st, &p, 3, &[(LAN, tcp_frame((A, 40000), (S, 80), TcpControl::None, Some(1001), false))]);
        assert_eq!(n.table().per_class(), [0, 0, 0, 1], "{filtering:?}: established");
        for (from, ctl) in [
            ((S, 81), TcpControl::Rst),
            ((S, 81), TcpControl::Fin),
            ((S, 81), TcpControl::None),
            ((T, 80), TcpControl::Rst),
            ((T, 80), TcpControl::Fin),
            ((S, 81), TcpControl::Psh),
        ] {
            let got = run(&mut n, &st, &p, 4, &[(WAN, tcp_frame(from, pa, ctl, Some(5), false))]);
            assert!(got.is_empty(), "{filtering:?}: {from:?} {ctl:?} let in");
            assert_eq!(n.table().per_class(), [0, 0, 0, 1], "{filtering:?}: {from:?} {ctl:?} moved the session");
            n.table().check();
        }
        // The session's own remote may reset it.
        let got = run(&mut n, &st, &p, 5, &[(WAN, tcp_frame((S, 80), pa, TcpControl::Rst, Some(5), false))]);
        assert_eq!(parts(&got[0]).2, (A, 40000));
        assert_eq!(n.table().per_class(), [0, 0, 1, 0]);
        assert_eq!(p.stats().in_use, 0);
    }
}

/// A SYN flood from many remotes at a static forward: its inside host holds at most
/// its bound, the rest counted; other hosts keep their sessions and open new ones.
#[test]
fn a_syn_flood_at_a_forward_is_bounded_by_its_host_and_spares_the_others() {
    let p = pool(256);
    let (mut n, st) = node(&p, NatConfig { per_host: 20, max_sessions: 100, ..cfg() });
    run(&mut n, &st, &p, 1, &[(LAN, udp_frame((A, 5353), (S, 53), b"q"))]);
    for k in 0..20u16 {
        let frames: Vec<(u16, Vec<u8>)> = (0..25u16)
            .map(|i| {
                let j = k * 25 + i;
                let src = Ipv4Addr::from(0xcb00_7100 | u32::from(j % 256));
                (WAN, tcp_frame((src, 1024 + j), (PUB, 8080), TcpControl::Syn, None, true))
            })
            .collect();
        run(&mut n, &st, &p, 2 + u64::from(k), &frames);
        n.table().check();
    }
    assert_eq!(n.table().host_sessions(u32::from(B)), 20);
    assert_eq!(counter(&st, "host_limit") + 20, 500, "{}", dump(&st));
    assert_eq!(n.table().host_sessions(u32::from(A)), 1, "A's session untouched");
    assert_eq!(counter(&st, "reclaimed"), 0);
    let got = run(
        &mut n,
        &st,
        &p,
        100,
        &[(LAN, udp_frame((A, 5354), (T, 53), b"q")), (LAN, udp_frame((C, 1), (T, 53), b"q"))],
    );
    assert_eq!(got.len(), 2, "other hosts still open sessions: {}", dump(&st));
    assert!(got.iter().all(|g| parts(g).1 .0 == PUB));
    let back = run(&mut n, &st, &p, 101, &[(WAN, udp_frame((S, 53), (PUB, 5353), b"a"))]);
    assert_eq!(parts(&back[0]).2, (A, 5353));
    assert_eq!(p.stats().in_use, 0);
}

// ---------------------------------------------------------------------------------
// 3. Hostile inside hosts.
// ---------------------------------------------------------------------------------

/// One host opening flows to many destinations from many ports: exactly its bound,
/// the rest counted; another host still gets sessions; the total within bounds.
#[test]
fn an_inside_flood_gets_exactly_its_bound() {
    let p = pool(256);
    let (mut n, st) = node(&p, NatConfig { per_host: 64, max_sessions: 500, ..cfg() });
    let mut rng = Rng(7);
    for k in 0..40u16 {
        let frames: Vec<(u16, Vec<u8>)> = (0..25u16)
            .map(|i| {
                let dst = Ipv4Addr::from(0xcb00_7100 | rng.below(256) as u32);
                let sport = 20000 + k * 25 + i;
                let f = match rng.below(3) {
                    0 => udp_frame((A, sport), (dst, 53), b"q"),
                    1 => tcp_frame((A, sport), (dst, 80), TcpControl::Syn, None, false),
                    _ => ping(A, dst, false, sport),
                };
                (LAN, f)
            })
            .collect();
        run(&mut n, &st, &p, 1 + u64::from(k), &frames);
    }
    n.table().check();
    assert_eq!(n.table().host_sessions(u32::from(A)), 64);
    assert_eq!(counter(&st, "host_limit"), 1000 - 64, "{}", dump(&st));
    assert!(n.table().mappings() <= 64 + 1);
    let got = run(&mut n, &st, &p, 100, &[(LAN, udp_frame((B, 1), (S, 53), b"q"))]);
    assert_eq!(parts(&got[0]).1 .0, PUB, "another host still gets a session");
    assert!(n.table().sessions() <= 500);
    assert_eq!(p.stats().in_use, 0);
}

/// Many spoofed sources inside the inside network: the total stays bounded, every
/// session beyond it reclaims an older one (counted), the indexes agree.
#[test]
fn spoofed_inside_sources_keep_the_total_bounded() {
    let p = pool(256);
    let (mut n, st) = node(&p, NatConfig { per_host: 4, max_sessions: 300, ..cfg() });
    for h in 1..255u32 {
        let src = Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 70, 0)) | h);
        let frames: Vec<(u16, Vec<u8>)> = (0..6u16).map(|k| (LAN, udp_frame((src, 3000 + k), (S, 53), b"q"))).collect();
        run(&mut n, &st, &p, u64::from(h), &frames);
        if h.is_multiple_of(16) {
            n.table().check();
        }
    }
    n.table().check();
    assert_eq!(n.table().sessions(), 300);
    assert_eq!(counter(&st, "created"), 254 * 4);
    assert_eq!(counter(&st, "reclaimed"), 254 * 4 - 300, "{}", dump(&st));
    assert_eq!(counter(&st, "host_limit"), 254 * 2);
    assert_eq!(p.stats().in_use, 0);
}

/// Sources that are in no inside network (spoofed by an inside host) are not inside
/// hosts: translating them lets one host open sessions under any number of
/// addresses, past its own bound, and push out everybody's sessions.
#[test]
fn sources_outside_the_inside_networks_open_no_sessions() {
    let p = pool(256);
    let (mut n, st) = node(&p, NatConfig { per_host: 4, max_sessions: 50, ..cfg() });
    run(&mut n, &st, &p, 1, &[(LAN, udp_frame((B, 5353), (S, 53), b"q"))]);
    for k in 0..100u32 {
        let src = Ipv4Addr::from(0x0a00_0000 + k);
        run(&mut n, &st, &p, 2 + u64::from(k), &[(LAN, udp_frame((src, 4000), (S, 53), b"q"))]);
    }
    let leaked = n.table().sessions() - n.table().host_sessions(u32::from(B)) as usize;
    assert_eq!(leaked, 0, "sessions for spoofed sources outside the inside networks: {}", dump(&st));
    assert_eq!(n.table().host_sessions(u32::from(B)), 1, "B's session pushed out by spoofed hosts");
}

/// Paired pooling: the ports of one outside address run out (counted), the other
/// address's hosts keep getting ports; freed ports come back.
#[test]
fn ports_run_out_on_one_address_only() {
    let p = pool(64);
    let mut c = cfg();
    c.addresses = vec![PUB, PUB2];
    c.max_sessions = 200_000;
    c.per_host = 200_000;
    let (mut n, st) = node(&p, c);
    // Hosts by outside address.
    let mut on: [Vec<Ipv4Addr>; 2] = [Vec::new(), Vec::new()];
    for h in 10..40u8 {
        let src = Ipv4Addr::new(198, 18, 70, h);
        let out = run(&mut n, &st, &p, 1, &[(LAN, udp_frame((src, 1), (S, 53), b"q"))]);
        let a = parts(&out[0]).1 .0;
        on[usize::from(a == PUB2)].push(src);
    }
    assert!(!on[0].is_empty() && !on[1].is_empty(), "both addresses used");
    let (hog, addr) = (on[0][0], PUB);
    let mut ev = Events::default();
    let mut k = 2u16;
    while n.table.free_ports(u32::from(addr), UDP) > 0 {
        n.table
            .outbound(UDP, Endpoint::new(u32::from(hog), k), Endpoint::new(u32::from(S), 53), 0, 2, &mut ev)
            .expect("a port");
        k += 1;
    }
    n.table().check();
    let got = run(&mut n, &st, &p, 3, &[(LAN, udp_frame((on[0][1], 7), (S, 53), b"q"))]);
    assert!(got.is_empty());
    assert_eq!(counter(&st, "ports_exhausted"), 1);
    let got = run(&mut n, &st, &p, 3, &[(LAN, udp_frame((on[1][0], 7), (S, 53), b"q"))]);
    assert_eq!(parts(&got[0]).1 .0, PUB2, "the other address has ports");
    // TCP and ICMP ports of the same address are another pool.
    let got = run(&mut n, &st, &p, 3, &[(LAN, ping(on[0][1], S, false, 3))]);
    assert_eq!(parts(&got[0]).1 .0, PUB);
    run(&mut n, &st, &p, 4 + 301 * HZ, &[]);
    run(&mut n, &st, &p, 4 + 301 * HZ, &[]);
    for _ in 0..300 {
        run(&mut n, &st, &p, 4 + 301 * HZ, &[]);
    }
    assert_eq!(n.table().sessions(), 0, "{}", dump(&st));
    assert_eq!(n.table().free_ports(u32::from(PUB), UDP), 65536 - 1024);
    let got = run(&mut n, &st, &p, 5 + 301 * HZ, &[(LAN, udp_frame((on[0][1], 7), (S, 53), b"q"))]);
    assert_eq!(parts(&got[0]).1, (PUB, 1024), "ports come back (the inside port 7 is below the dynamic range)");
    n.table().check();
}

// ---------------------------------------------------------------------------------
// 4. Checksums under random rewrites.
// ---------------------------------------------------------------------------------

/// Swap a frame's addresses and ports (sums unchanged); an echo request becomes a
/// reply and back (its checksum updated).
fn turn_around(f: &mut [u8]) {
    let ip = 14;
    let ihl = usize::from(f[ip] & 15) * 4;
    let l4 = ip + ihl;
    for k in 0..4 {
        f.swap(ip + 12 + k, ip + 16 + k);
    }
    match f[ip + 9] {
        6 | 17 => {
            f.swap(l4, l4 + 2);
            f.swap(l4 + 1, l4 + 3);
        }
        _ => {
            let (old, new) = if f[l4] == 8 { (0x0800, 0x0000) } else { (0x0000, 0x0800) };
            f[l4] = (new >> 8) as u8;
            let cs = update16(u16::from_be_bytes([f[l4 + 2], f[l4 + 3]]), old, new);
            f[l4 + 2..l4 + 4].copy_from_slice(&cs.to_be_bytes());
        }
    }
}

/// Random TCP, UDP and echo packets (random addresses, ports, flags, payload
/// lengths odd and even, IP options, UDP without checksum, partial checksums) out
/// and back: every checksum verifies by computing it again, and the answer to the
/// translated packet, translated back, is the original's exact bytes turned around.
#[test]
fn random_packets_out_and_back_keep_checksums_and_bytes() {
    let p = pool(64);
    let (mut n, st) = node(
        &p,
        NatConfig { per_host: 100_000, max_sessions: 100_000, filtering: Filtering::AddressPortDependent, ..cfg() },
    );
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for round in 0..3000u64 {
        let host = Ipv4Addr::new(198, 18, 70, 1 + rng.below(250) as u8);
        let remote = loop {
            let a = Ipv4Addr::from(rng.next() as u32);
            if !is_inside(a) && a != PUB && !a.is_unspecified() {
                break a;
            }
        };
        let (sport, dport) = (rng.next() as u16, rng.next() as u16);
        let plen = rng.below(102) as usize;
        let payload = rng.bytes(plen);
        let proto = [6u8, 17, 1][rng.below(3) as usize];
        let mut l4 = match proto {
            6 => {
                let words = rng.below(11) as usize;
                let mut t = vec![0u8; 20 + 4 * words];
                t[0..2].copy_from_slice(&sport.to_be_bytes());
                t[2..4].copy_from_slice(&dport.to_be_bytes());
                t[4..12].copy_from_slice(&rng.bytes(8));
                t[12] = ((5 + words) << 4) as u8;
                t[13] = rng.next() as u8 & 0x3f;
                t[14..16].copy_from_slice(&rng.bytes(2));
                t[20..].fill(1);
                t.extend_from_slice(&payload);
                t
            }
            17 => {
                let mut u = vec![0u8; 8];
                u[0..2].copy_from_slice(&sport.to_be_bytes());
                u[2..4].copy_from_slice(&dport.to_be_bytes());
                u[4..6].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
                u.extend_from_slice(&payload);
                u
            }
            _ => {
                let mut e = vec![8u8, 0, 0, 0];
                e.extend_from_slice(&sport.to_be_bytes());
                e.extend_from_slice(&rng.bytes(2));
                e.extend_from_slice(&payload);
                e
            }
        };
        l4_checksum(host, remote, proto, &mut l4);
        let no_udp_sum = proto == 17 && rng.below(6) == 0;
        if no_udp_sum {
            l4[6..8].fill(0);
        }
        let partial = proto != 1 && !no_udp_sum && rng.below(4) == 0;
        let at = if proto == 6 { 16 } else { 6 };
        let pseudo = |s: Ipv4Addr, d: Ipv4Addr, len: usize| {
            checksum::fold(checksum::pseudo_header_v4(&s, &d, IpProtocol(proto), len as u16))
        };
        if partial {
            let ps = pseudo(host, remote, l4.len());
            l4[at..at + 2].copy_from_slice(&ps.to_be_bytes());
        }
        let opts: Vec<u8> = {
            let k = rng.below(11) as usize * 4;
            let mut o = vec![1u8; k];
            if k > 0 {
                o[k - 1] = 0;
            }
            o
        };
        let ttl = 2 + rng.below(254) as u8;
        let orig = eth(US_MAC, PEER_MAC, 0x0800, &ip_opts(host, remote, proto, ttl, &opts, rng.next() as u16, &l4));
        let ol = if partial { abi::RX_L4_CKSUM_NONE } else { 0 };
        let out = run_ol(&mut n, &st, &p, round, &[(LAN, orig.clone())], ol);
        assert_eq!(out.len(), 1, "round {round}: {}", dump(&st));
        let mut f = out[0].clone();
        let l4at = 14 + 20 + opts.len();
        if partial {
            let got = u16::from_be_bytes([f[l4at + at], f[l4at + at + 1]]);
            assert_eq!(got, pseudo(PUB, remote, l4.len()), "round {round}: partial sum of the new addresses");
        } else {
            let (pr, src, dst) = parts(&f);
            assert_eq!(pr, proto);
            assert_eq!(src.0, PUB);
            assert_eq!(dst.0, remote);
            if proto != 1 {
                assert_eq!(dst.1, dport);
            }
        }
        if no_udp_sum {
            assert_eq!(&f[l4at + 6..l4at + 8], &[0, 0], "no checksum stays none");
        }
        assert_eq!(f[22], ttl, "TTL untouched");
        assert_eq!(f.len(), orig.len());
        turn_around(&mut f);
        let back = run_ol(&mut n, &st, &p, round, &[(WAN, f)], ol);
        assert_eq!(back.len(), 1, "round {round}: {}", dump(&st));
        let mut g = back[0].clone();
        if !partial {
            parts(&g);
        }
        turn_around(&mut g);
        assert_eq!(g, orig, "round {round}: proto {proto} partial {partial}: out and back is the original");
        if round % 500 == 0 {
            n.table().check();
        }
    }
    n.table().check();
    assert_eq!(p.stats().in_use, 0);
}

// ---------------------------------------------------------------------------------
// 5. Malformed frames.
// ---------------------------------------------------------------------------------

/// IPv4 headers that lie: each dropped and counted as malformed, from either side.
#[test]
fn lying_ipv4_headers_are_dropped_and_counted() {
    let p = pool(64);
    let (mut n, st) = node(&p, cfg());
    let out = run(&mut n, &st, &p, 1, &[(LAN, udp_frame((A, 6000), (S, 53), b"probe"))]);
    let pa = parts(&out[0]).1;
    type Edit = (&'static str, fn(&mut Vec<u8>));
    let edits: Vec<Edit> = vec![
        ("IHL 4", |f| f[14] = 0x44),
        ("IHL 0", |f| f[14] = 0x40),
        ("version 6 in IPv4", |f| f[14] = 0x65),
        ("total length past the frame", |f| {
            let t = (f.len() - 14 + 1) as u16;
            f[16..18].copy_from_slice(&t.to_be_bytes());
        }),
        ("total length below the header", |f| f[16..18].copy_from_slice(&19u16.to_be_bytes())),
        ("total length of the header alone", |f| f[16..18].copy_from_slice(&20u16.to_be_bytes())),
        ("total length 4 bytes into UDP", |f| f[16..18].copy_from_slice(&24u16.to_be_bytes())),
        ("frame shorter than the IP header", |f| f.truncate(14 + 19)),
        ("IHL 15 past the total", |f| f[14] = 0x4f),
        ("total length zero", |f| f[16..18].fill(0)),
    ];
    let mut k = 0;
    for (what, edit) in &edits {
        for (port, mut f) in [(LAN, udp_frame((A, 6000), (S, 53), b"probe")), (WAN, udp_frame((S, 53), pa, b"answer"))]
        {
            edit(&mut f);
            let got = run(&mut n, &st, &p, 2, &[(port, f)]);
            k += 1;
            assert!(got.is_empty(), "{what} from port {port} went on");
            assert_eq!(counter(&st, "malformed"), k, "{what} from port {port}: {}", dump(&st));
        }
    }
    n.table().check();
    assert_eq!(p.stats().in_use, 0);
}

/// A TCP header whose data offset is below 20 bytes or runs past the segment: the
/// lengths disagree, the segment is malformed (dropped, counted), not translated.
#[test]
fn tcp_data_offset_past_the_segment_is_malformed() {
    let p = pool(64);
    let (mut n, st) = node(&p, NatConfig { mss_clamp: 1200, ..cfg() });
    for (what, doff) in
        [("data offset 15 in a 25-byte segment", 0xf0u8), ("data offset 4", 0x40), ("data offset 0", 0x00)]
    {
        let mut t = tcp((v4(A), v4(S)), (40000, 80), (1, None), TcpControl::Syn, false, b"hello");
        t[12] = doff;
        l4_checksum(A, S, 6, &mut t);
        let f = eth(US_MAC, PEER_MAC, 0x0800, &ipv4(A, S, 6, 64, &t));
        let before = counter(&st, "malformed");
        let got = run(&mut n, &st, &p, 1, &[(LAN, f)]);
        assert!(
            got.is_empty() && counter(&st, "malformed") == before + 1,
            "{what}: translated and sent on ({})",
            dump(&st)
        );
    }
}

/// A UDP length field that disagrees with the IP length (zero, below 8, past the
/// packet): malformed, dropped and counted.
#[test]
fn udp_length_disagreeing_with_ip_is_malformed() {
    let p = pool(64);
    let (mut n, st) = node(&p, cfg());
    for len in [0u16, 7, 200] {
        let mut f = udp_frame((A, 6000), (S, 53), b"probe");
        f[38..40].copy_from_slice(&len.to_be_bytes());
        let before = counter(&st, "malformed");
        let got = run(&mut n, &st, &p, 1, &[(LAN, f)]);
        assert!(
            got.is_empty() && counter(&st, "malformed") == before + 1,
            "UDP length {len}: translated and sent on ({})",
            dump(&st)
        );
    }
}

/// A SYN with `options` (padded to a multiple of 4 with EOL) from the inside.
fn syn_with_options(sport: u16, options: &[u8]) -> Vec<u8> {
    let mut o = options.to_vec();
    while !o.len().is_multiple_of(4) {
        o.push(0);
    }
    let mut t = tcp((v4(A), v4(S)), (sport, 80), (1, None), TcpControl::Syn, false, b"");
    t[12] = (((20 + o.len()) / 4) << 4) as u8;
    t.extend_from_slice(&o);
    l4_checksum(A, S, 6, &mut t);
    eth(US_MAC, PEER_MAC, 0x0800, &ipv4(A, S, 6, 64, &t))
}

/// SYNs with bogus option lengths (MSS of length 0, 1, 3, 255, an option running
/// past the header, MSS after EOL) with `mss_clamp` set: no panic, nothing clamped,
/// the options untouched, the checksum right. Then random option bytes: the checksum
/// stays right, only an MSS option's value changes, never above the clamp.
#[test]
fn bogus_tcp_options_in_syns_with_mss_clamp() {
    let p = pool(64);
    let (mut n, st) = node(&p, NatConfig { mss_clamp: 1200, per_host: 100_000, max_sessions: 100_000, ..cfg() });
    let cases: &[(&str, &[u8], bool)] = &[
        ("MSS length 0", &[2, 0, 0x05, 0xb4], false),
        ("MSS length 1", &[2, 1, 0x05, 0xb4], false),
        ("MSS length 3", &[2, 3, 0x05, 0xb4], false),
        ("MSS length 255", &[2, 255, 0x05, 0xb4], false),
        ("an option running past the header", &[1, 8, 10, 1, 2, 3, 4, 5], false),
        ("MSS after EOL", &[0, 0, 0, 0, 2, 4, 0x05, 0xb4], false),
        ("MSS at the very end", &[1, 1, 2, 4, 0x05, 0xb4], true),
        ("MSS cut by the header end", &[1, 1, 1, 1, 1, 1, 2, 4], false),
        ("two MSS options", &[2, 4, 0x05, 0xb4, 2, 4, 0x05, 0xb4], true),
        ("MSS below the clamp", &[2, 4, 0x02, 0x00], false),
        ("length byte past the header", &[1, 1, 1, 3], false),
    ];
    for (k, (what, opts, clamped)) in cases.iter().enumerate() {
        let f = syn_with_options(30000 + k as u16, opts);
        let before = counter(&st, "mss_clamped");
        let got = run(&mut n, &st, &p, 1, &[(LAN, f.clone())]);
        assert_eq!(got.len(), 1, "{what}");
        assert_eq!(parts(&got[0]).1 .0, PUB, "{what}");
        assert_eq!(counter(&st, "mss_clamped") - before, u64::from(*clamped), "{what}");
        if !clamped {
            assert_eq!(&got[0][54..], &f[54..], "{what}: options untouched");
        } else {
            let o = &got[0][54..];
            let at = o.windows(2).position(|w| w == [2, 4]).unwrap();
            assert_eq!(&o[at + 2..at + 4], &1200u16.to_be_bytes(), "{what}");
        }
    }
    let mut rng = Rng(42);
    for round in 0..3000u16 {
        let len = rng.below(41) as usize;
        let mut opts = rng.bytes(len);
        // Plenty of MSS options and NOPs at random places.
        for _ in 0..rng.below(3) {
            if opts.len() >= 4 {
                let at = rng.below(opts.len() as u64 - 3) as usize;
                opts[at..at + 4].copy_from_slice(&[2, 4, rng.next() as u8, rng.next() as u8]);
            }
        }
        for b in opts.iter_mut() {
            if rng.below(4) == 0 {
                *b = 1;
            }
        }
        let f = syn_with_options(rng.next() as u16, &opts);
        let partial = rng.below(4) == 0;
        let mut g = f.clone();
        if partial {
            let pseudo = checksum::fold(checksum::pseudo_header_v4(&A, &S, IpProtocol::TCP, (g.len() - 34) as u16));
            g[50..52].copy_from_slice(&pseudo.to_be_bytes());
        }
        let got =
            run_ol(&mut n, &st, &p, 2 + u64::from(round), &[(LAN, g)], if partial { abi::RX_L4_CKSUM_NONE } else { 0 });
        assert_eq!(got.len(), 1);
        let o = &got[0];
        assert_eq!(src_of(o), PUB);
        if partial {
            let pseudo = checksum::fold(checksum::pseudo_header_v4(&PUB, &S, IpProtocol::TCP, (o.len() - 34) as u16));
            assert_eq!(u16::from_be_bytes([o[50], o[51]]), pseudo, "round {round}: partial");
        } else {
            parts(o);
        }
        // Only the values of MSS options may change, to the clamp.
        for i in (54..o.len()).filter(|&i| o[i] != f[i]) {
            let clamped =
                |v: usize| v >= 56 && o[v - 2] == 2 && o[v - 1] == 4 && o.get(v..v + 2) == Some(&[0x04, 0xb0][..]);
            assert!(clamped(i) || clamped(i - 1), "round {round}: byte {i} changed outside an MSS value");
        }
    }
    assert_eq!(p.stats().in_use, 0);
}

/// A SYN carrying the MSS option twice: receivers such as Linux take the last one,
/// so clamping only the first lets the unclamped value through. Every MSS option
/// must end at most `mss_clamp`.
#[test]
fn every_mss_option_of_a_syn_is_clamped() {
    let p = pool(64);
    let (mut n, st) = node(&p, NatConfig { mss_clamp: 1200, ..cfg() });
    let f = syn_with_options(30000, &[2, 4, 0x05, 0xb4, 1, 1, 2, 4, 0x23, 0x28]);
    let got = run(&mut n, &st, &p, 1, &[(LAN, f)]);
    parts(&got[0]);
    let o = &got[0][54..];
    for at in [2, 8] {
        let mss = u16::from_be_bytes([o[at], o[at + 1]]);
        assert!(mss <= 1200, "an MSS option left at {mss} (mss_clamp 1200): {:?}", &o[..12]);
    }
}

/// VLAN-tagged frames (one tag, two tags) are translated behind their tags,
/// checksums right, tags kept.
#[test]
fn vlan_tagged_frames_are_translated_behind_their_tags() {
    let p = pool(64);
    let (mut n, st) = node(&p, cfg());
    let one = tagged(&udp_frame((A, 6000), (S, 53), b"q"), 0x8100, 10);
    let two = tagged(&tagged(&tcp_frame((A, 40000), (S, 80), TcpControl::Syn, None, true), 0x8100, 10), 0x88a8, 20);
    let got = run(&mut n, &st, &p, 1, &[(LAN, one.clone()), (LAN, two.clone())]);
    assert_eq!(got.len(), 2);
    assert_eq!(parts(&got[0]), (17, (PUB, 6000), (S, 53)));
    assert_eq!(&got[0][..18], &one[..18], "tag kept");
    assert_eq!(parts(&got[1]), (6, (PUB, 40000), (S, 80)));
    assert_eq!(&got[1][..22], &two[..22], "tags kept");
    let back = run(&mut n, &st, &p, 2, &[(WAN, tagged(&udp_frame((S, 53), (PUB, 6000), b"a"), 0x8100, 10))]);
    assert_eq!(parts(&back[0]), (17, (S, 53), (A, 6000)));
    assert_eq!(p.stats().in_use, 0);
}

/// Chained packets: headers in the first segment are translated with the payload
/// in the next (checksums right over all of it); headers cut by a segment boundary
/// are dropped, never sent untranslated; every mbuf back.
#[test]
fn chained_packets_are_translated_or_dropped_never_leaked() {
    let p = pool(64);
    let (mut n, st) = node(&p, cfg());
    let chained = |f: &[u8], cut: usize, port: u16| {
        let mut m = Mbuf::from_slice(&p, &f[..cut]).unwrap();
        m.chain(Mbuf::from_slice(&p, &f[cut..]).unwrap()).unwrap();
        m.header_mut().port = port;
        m
    };
    let payload: Vec<u8> = (0..101u8).collect();
    let u = udp_frame((A, 6000), (S, 53), &payload);
    let t = tcp_frame((A, 40000), (S, 80), TcpControl::Syn, None, true);
    let got = run_mbufs(&mut n, &st, 1, vec![chained(&u, 42, LAN), chained(&u, 60, LAN), chained(&t, 74, LAN)]);
    assert_eq!(got.len(), 3, "{}", dump(&st));
    for g in &got {
        assert_eq!(parts(g).1 .0, PUB);
    }
    // Cut in the IP header, in the UDP header, in the TCP header.
    let before = counter(&st, "malformed");
    let got = run_mbufs(&mut n, &st, 2, vec![chained(&u, 24, LAN), chained(&u, 38, LAN), chained(&t, 44, LAN)]);
    assert!(got.is_empty(), "{got:?}");
    assert_eq!(counter(&st, "malformed"), before + 3);
    // An error whose quote is cut: not translated to a wrong host.
    let e = icmp_error(R, PUB, 11, 0, &udp_frame((PUB, 6000), (S, 53), &payload)[14..]);
    let got = run_mbufs(&mut n, &st, 3, vec![chained(&e, 50, WAN), chained(&e, 70, WAN)]);
    for g in &got {
        assert!(g == &e || dst_of(g) == A, "{g:?}");
        if g != &e {
            parts(g);
        }
    }
    n.table().check();
    assert_eq!(p.stats().in_use, 0);
}

/// A shared packet is copied before it is rewritten: the other holder's bytes stay
/// as they were; without a buffer for the copy it is dropped and counted; no leak.
#[test]
fn shared_packets_are_copied_before_rewrite() {
    let p = pool(8);
    let (mut n, st) = node(&p, cfg());
    let f = udp_frame((A, 6000), (S, 53), b"probe");
    let mut m = Mbuf::from_slice(&p, &f).unwrap();
    m.header_mut().port = LAN;
    let keep = m.share();
    let got = run_mbufs(&mut n, &st, 1, vec![m]);
    assert_eq!(parts(&got[0]).1, (PUB, 6000));
    assert_eq!(keep.data(), &f[..], "the other holder's packet untouched");
    assert_eq!(keep.refcnt(), 1);
    drop(keep);
    assert_eq!(p.stats().in_use, 0);
    // The pool empty: no copy.
    let mut m = Mbuf::from_slice(&p, &f).unwrap();
    m.header_mut().port = LAN;
    let keep = m.share();
    let hold = Mbuf::alloc_bulk(&p, 7).unwrap();
    let got = run_mbufs(&mut n, &st, 2, vec![m]);
    assert!(got.is_empty());
    assert_eq!(counter(&st, "no_mbuf"), 1);
    assert_eq!(keep.data(), &f[..]);
    drop(hold);
    drop(keep);
    assert_eq!(p.stats().in_use, 0);
    // A shared tail segment only.
    let mut m = Mbuf::from_slice(&p, &f[..42]).unwrap();
    let tail = Mbuf::from_slice(&p, &f[42..]).unwrap();
    let keep = tail.share();
    m.chain(tail).unwrap();
    m.header_mut().port = LAN;
    let got = run_mbufs(&mut n, &st, 3, vec![m]);
    assert_eq!(parts(&got[0]).1, (PUB, 6000));
    assert_eq!(keep.data(), &f[42..]);
    drop(keep);
    assert_eq!(p.stats().in_use, 0);
}

// ---------------------------------------------------------------------------------
// 6. Hairpinning abuse.
// ---------------------------------------------------------------------------------

/// An inside host sending to its own mapping, to a forward pointing back at
/// itself, from the forward's own endpoint: translated both ways, checksums right,
/// the tables consistent after every step.
#[test]
fn self_hairpins_keep_the_tables_consistent() {
    let p = pool(64);
    let mut c = cfg();
    c.forwards = vec![Forward {
        proto: TCP,
        outside: Endpoint::new(u32::from(PUB), 8080),
        inside: Endpoint::new(u32::from(A), 80),
    }];
    let (mut n, st) = node(&p, c);
    let out = run(&mut n, &st, &p, 1, &[(LAN, udp_frame((A, 5000), (S, 53), b"q"))]);
    assert_eq!(parts(&out[0]).1, (PUB, 5000));
    n.table().check();
    let me = run(&mut n, &st, &p, 2, &[(LAN, udp_frame((A, 5000), (PUB, 5000), b"me"))]);
    assert_eq!(parts(&me[0]), (17, (PUB, 5000), (A, 5000)));
    n.table().check();
    // Another port of A to its own mapping: filtered (A:5000 never sent to it).
    let got = run(&mut n, &st, &p, 3, &[(LAN, udp_frame((A, 5001), (PUB, 5000), b"x"))]);
    assert!(got.is_empty());
    n.table().check();
    let syn = run(&mut n, &st, &p, 4, &[(LAN, tcp_frame((A, 41000), (PUB, 8080), TcpControl::Syn, None, true))]);
    let (_, src, dst) = parts(&syn[0]);
    assert_eq!((src.0, dst), (PUB, (A, 80)));
    n.table().check();
    let sa = run(&mut n, &st, &p, 5, &[(LAN, tcp_frame((A, 80), src, TcpControl::Syn, Some(1001), true))]);
    assert_eq!(parts(&sa[0]), (6, (PUB, 8080), (A, 41000)));
    n.table().check();
    let own = run(&mut n, &st, &p, 6, &[(LAN, tcp_frame((A, 80), (PUB, 8080), TcpControl::Syn, None, true))]);
    assert_eq!(parts(&own[0]), (6, (PUB, 8080), (A, 80)));
    n.table().check();
    run(&mut n, &st, &p, 7 + 7441 * HZ, &[]);
    assert_eq!(n.table().sessions(), 0);
    n.table().check();
    assert_eq!(p.stats().in_use, 0);
}

/// A hairpinned packet's source is the sender's mapping: that mapping must still
/// exist when the packet leaves (its port not freed for someone else), even when
/// making the target's session reclaims the oldest one.
#[test]
fn a_hairpin_never_sends_from_a_mapping_it_just_freed() {
    let p = pool(64);
    let (mut n, st) = node(&p, NatConfig { max_sessions: 1, per_host: 1, ..cfg() });
    let syn = run(&mut n, &st, &p, 1, &[(LAN, tcp_frame((A, 41000), (PUB, 8080), TcpControl::Syn, None, true))]);
    n.table().check();
    if let Some(f) = syn.first() {
        let (_, src, dst) = parts(f);
        assert_eq!(dst, (B, 80));
        let m = n.table().by_outside(TCP, Endpoint::new(u32::from(src.0), src.1)).map(|m| m.inside);
        assert_eq!(
            m,
            Some(Endpoint::new(u32::from(A), 41000)),
            "the hairpin left from {src:?}, a mapping it freed ({})",
            dump(&st)
        );
    }
}

/// An ICMP error about a hairpinned packet (the target refuses it) goes back to the
/// sender through both translations (RFC 5508 section 6), not to the router as is.
#[test]
fn icmp_errors_about_hairpinned_packets_reach_the_sender() {
    let p = pool(64);
    let mut c = cfg();
    c.forwards.push(Forward {
        proto: UDP,
        outside: Endpoint::new(u32::from(PUB), 5000),
        inside: Endpoint::new(u32::from(B), 5000),
    });
    let (mut n, st) = node(&p, c);
    let hp = run(&mut n, &st, &p, 1, &[(LAN, udp_frame((A, 6000), (PUB, 5000), b"x"))]);
    let (_, src, dst) = parts(&hp[0]);
    assert_eq!((src.0, dst), (PUB, (B, 5000)));
    let e = run(&mut n, &st, &p, 2, &[(LAN, icmp_error(B, src.0, 3, 3, &hp[0][14..]))]);
    assert_eq!(e.len(), 1);
    parts(&e[0]);
    assert_eq!(dst_of(&e[0]), A, "the error goes to the sender, not to the router's address");
    assert_eq!(quote_of(&e[0]).1, (A, 6000));
}

// ---------------------------------------------------------------------------------
// 7. Time.
// ---------------------------------------------------------------------------------

/// A session lives to exactly its idle timeout: one tick before, a packet still
/// refreshes it; at the timeout it is gone, its port free, and the remote's packet no
/// longer comes in.
#[test]
fn sessions_end_exactly_at_their_timeout() {
    let p = pool(64);
    let (mut n, st) = node(&p, cfg());
    let t0 = 1;
    run(&mut n, &st, &p, t0, &[(LAN, udp_frame((A, 6000), (S, 53), b"q"))]);
    let to = 300 * HZ;
    let t1 = t0 + to - 1;
    let got = run(&mut n, &st, &p, t1, &[(WAN, udp_frame((S, 53), (PUB, 6000), b"a"))]);
    assert_eq!(parts(&got[0]).2, (A, 6000), "alive one tick before its timeout");
    run(&mut n, &st, &p, t1 + to - 1, &[]);
    assert_eq!(n.table().sessions(), 1, "refreshed by the answer");
    let late = udp_frame((S, 53), (PUB, 6000), b"a");
    let got = run(&mut n, &st, &p, t1 + to, &[(WAN, late.clone())]);
    assert!(got.is_empty() || got == [late], "gone at its timeout: not translated");
    assert_eq!(n.table().sessions(), 0);
    assert_eq!(counter(&st, "expired"), 1);
    assert_eq!(n.table().free_ports(u32::from(PUB), UDP), 65536 - 1024);
    n.table().check();
}

/// Time jumping by huge steps, to the end of the 64-bit clock: no panic, sessions
/// expire, new ones work at the very end of time; a clock going back expires nothing.
#[test]
fn huge_time_steps_expire_and_never_panic() {
    let p = pool(64);
    let (mut n, st) = node(&p, cfg());
    run(&mut n, &st, &p, 5, &[(LAN, udp_frame((A, 6000), (S, 53), b"q")), (LAN, ping(A, S, false, 1))]);
    run(&mut n, &st, &p, u64::MAX / 2, &[]);
    assert_eq!(n.table().sessions(), 0);
    assert_eq!(counter(&st, "expired"), 2);
    let t = u64::MAX - 1;
    run(&mut n, &st, &p, t, &[(LAN, ping(A, S, false, 2)), (LAN, udp_frame((A, 6000), (S, 53), b"q"))]);
    run(&mut n, &st, &p, t, &[(LAN, tcp_frame((A, 40000), (S, 80), TcpControl::Syn, None, true))]);
    let back =
        run(&mut n, &st, &p, u64::MAX, &[(WAN, ping(S, PUB, true, 2)), (WAN, udp_frame((S, 53), (PUB, 6000), b"a"))]);
    assert_eq!(back.len(), 2);
    assert_eq!(parts(&back[0]).2, (A, 2));
    assert_eq!(parts(&back[1]).2, (A, 6000));
    n.table().check();
    run(&mut n, &st, &p, 0, &[]);
    assert_eq!(n.table().sessions(), 3, "a clock going back expires nothing");
    assert_eq!(p.stats().in_use, 0);
}

/// Timeouts are kept in TSC ticks: on a 3 GHz TSC, RFC 5382's 2 h 4 min for an
/// established TCP session (the default) and a day must both hold (no overflow
/// turning them into less).
#[test]
fn long_timeouts_hold_on_a_fast_tsc() {
    for (established_us, idle_s) in [(7_440_000_000u64, 7_000u64), (86_400_000_000, 80_000)] {
        let p = pool(64);
        let hz = 3_000_000_000u64;
        let mut c = cfg();
        c.timeout_us[3] = established_us;
        let mut n = Nat44::new(c, WAN, p.clone(), hz, [7; 16]).expect("built");
        let st = stats(&n);
        let syn = run(&mut n, &st, &p, 1, &[(LAN, tcp_frame((A, 40000), (S, 80), TcpControl::Syn, None, true))]);
        let pa = parts(&syn[0]).1;
        run(&mut n, &st, &p, 2, &[(WAN, tcp_frame((S, 80), pa, TcpControl::Syn, Some(1001), true))]);
        run(&mut n, &st, &p, 3, &[(LAN, tcp_frame((A, 40000), (S, 80), TcpControl::None, Some(1001), false))]);
        assert_eq!(n.table().per_class(), [0, 0, 0, 1]);
        let got =
            run(&mut n, &st, &p, 3 + idle_s * hz, &[(WAN, tcp_frame((S, 80), pa, TcpControl::Psh, Some(1001), false))]);
        let to_a = got.first().map(|f| parts(f).2);
        assert_eq!(
            to_a,
            Some((A, 40000)),
            "timeout {} s: an established session idle {idle_s} s ended ({})",
            established_us / 1_000_000,
            dump(&st)
        );
    }
}

/// After a close both ways, a new SYN on the same endpoints starts a new
/// connection in the same session (TIME_WAIT reuse), which gets established again.
#[test]
fn a_new_syn_reuses_a_closed_session() {
    let p = pool(64);
    let (mut n, st) = node(&p, cfg());
    let hs = |n: &mut Nat44, t: u64| {
        let syn = run(n, &st, &p, t, &[(LAN, tcp_frame((A, 40000), (S, 80), TcpControl::Syn, None, true))]);
        let pa = parts(&syn[0]).1;
        let sa = run(n, &st, &p, t + 1, &[(WAN, tcp_frame((S, 80), pa, TcpControl::Syn, Some(1001), true))]);
        assert_eq!(parts(&sa[0]).2, (A, 40000));
        run(n, &st, &p, t + 2, &[(LAN, tcp_frame((A, 40000), (S, 80), TcpControl::None, Some(1001), false))]);
        pa
    };
    let pa = hs(&mut n, 1);
    assert_eq!(n.table().per_class(), [0, 0, 0, 1]);
    run(&mut n, &st, &p, 4, &[(LAN, tcp_frame((A, 40000), (S, 80), TcpControl::Fin, Some(1001), false))]);
    run(&mut n, &st, &p, 5, &[(WAN, tcp_frame((S, 80), pa, TcpControl::Fin, Some(1001), false))]);
    run(&mut n, &st, &p, 6, &[(LAN, tcp_frame((A, 40000), (S, 80), TcpControl::None, Some(1002), false))]);
    assert_eq!(n.table().per_class(), [0, 0, 1, 0], "closed");
    assert_eq!(hs(&mut n, 10), pa, "the same mapping");
    assert_eq!(n.table().per_class(), [0, 0, 0, 1], "established again");
    assert_eq!(n.table().sessions(), 1);
    // After a RST too, and the remote may be the one to reopen.
    run(&mut n, &st, &p, 20, &[(WAN, tcp_frame((S, 80), pa, TcpControl::Rst, Some(1), false))]);
    assert_eq!(n.table().per_class(), [0, 0, 1, 0]);
    let got = run(&mut n, &st, &p, 21, &[(WAN, tcp_frame((S, 80), pa, TcpControl::Syn, None, true))]);
    assert_eq!(parts(&got[0]).2, (A, 40000));
    n.table().check();
}

/// A session past its idle timeout is over, even when more sessions expired at once
/// than one burst's expiry budget: a packet of it must not come in.
#[test]
fn a_session_past_its_timeout_lets_nothing_in_whatever_the_expiry_budget() {
    let p = pool(256);
    let (mut n, st) = node(&p, NatConfig { per_host: 10_000, max_sessions: 10_000, ..cfg() });
    for k in 0..10u16 {
        let frames: Vec<(u16, Vec<u8>)> =
            (0..30u16).map(|i| (LAN, udp_frame((A, 10000 + k * 30 + i), (S, 53), b"q"))).collect();
        run(&mut n, &st, &p, 1, &frames);
    }
    assert_eq!(n.table().sessions(), 300);
    let late = 1 + 301 * HZ;
    let late_frame = udp_frame((S, 53), (PUB, 10299), b"late");
    let got = run(&mut n, &st, &p, late, &[(WAN, late_frame.clone())]);
    // Untranslated (to the router's own address) at most: never to A.
    assert!(
        got.iter().all(|f| *f == late_frame),
        "a session idle 301 s (timeout 300 s) let a packet in ({})",
        dump(&st)
    );
}

/// A port comes back when its mapping's sessions expire, and another host gets it
/// (its own inside port kept).
#[test]
fn expired_ports_are_reusable() {
    let p = pool(64);
    let (mut n, st) = node(&p, cfg());
    let a = run(
        &mut n,
        &st,
        &p,
        1,
        &[(LAN, udp_frame((A, 5353), (S, 53), b"q")), (LAN, udp_frame((B, 5353), (S, 53), b"q"))],
    );
    assert_eq!(parts(&a[0]).1, (PUB, 5353));
    assert_ne!(parts(&a[1]).1, (PUB, 5353));
    run(&mut n, &st, &p, 2 + 300 * HZ, &[]);
    assert_eq!(n.table().sessions(), 0);
    let b = run(&mut n, &st, &p, 3 + 300 * HZ, &[(LAN, udp_frame((B, 5353), (S, 53), b"q"))]);
    assert_eq!(parts(&b[0]).1, (PUB, 5353), "B now keeps its port");
    let back = run(&mut n, &st, &p, 4 + 300 * HZ, &[(WAN, udp_frame((S, 53), (PUB, 5353), b"a"))]);
    assert_eq!(parts(&back[0]).2, (B, 5353));
    n.table().check();
}

/// A packet from the outside whose TTL expires at the router (1 or 0) is not
/// translated either (the module's rule): translated, the router's time exceeded
/// would quote the inside host's address and port to the outside.
#[test]
fn inbound_packets_whose_ttl_expires_are_not_translated() {
    let p = pool(64);
    let (mut n, st) = node(&p, cfg());
    run(&mut n, &st, &p, 1, &[(LAN, udp_frame((A, 6000), (S, 53), b"q"))]);
    for ttl in [1u8, 0] {
        let got = run(&mut n, &st, &p, 2, &[(WAN, with_ttl(udp_frame((S, 53), (PUB, 6000), b"a"), ttl))]);
        for g in &got {
            assert_ne!(dst_of(g), A, "TTL {ttl}: translated to the inside host ({})", dump(&st));
        }
    }
}

/// `flags` is used by the state tests above through `TcpControl`; the raw flag
/// values agree with the frames the builders make.
#[test]
fn frame_builders_set_the_flags_the_table_reads() {
    let f = tcp_frame((A, 1), (S, 2), TcpControl::Syn, None, false);
    assert_eq!(f[47] & (flags::SYN | flags::ACK), flags::SYN);
    let f = tcp_frame((A, 1), (S, 2), TcpControl::Rst, Some(1), false);
    assert_ne!(f[47] & flags::RST, 0);
}
