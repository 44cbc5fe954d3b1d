//! The frames every node kind must survive: valid frames of each protocol a node of
//! this crate parses, every truncation of each (with and without its IP lengths
//! made to agree), bad lengths and checksums, extension-header chains, fragments,
//! VLAN stacks, runts and jumbo frames; and floods of new flows, addresses and MACs.

use super::frames::{arp, eth, fix_ip_lengths, icmp4_echo, icmp6, ipv4, ipv6, l3, tagged, tcp, udp};
use super::{OUR4, OUR6, OUR_MACS, PEER4, PEER6, PEER_MAC, REMOTE4, REMOTE6, ROUTED4};
use ironpath_util::testing::XorShift;
use ironpath_wire::arp::ArpOperation;
use ironpath_wire::ethernet::EthernetAddress;
use ironpath_wire::icmpv6::{Icmpv6Repr, NeighborFlags};
use ironpath_wire::tcp::TcpControl;
use ironpath_wire::IpAddress;
use std::net::{Ipv4Addr, Ipv6Addr};

const BROADCAST: [u8; 6] = [0xff; 6];

fn v4(a: Ipv4Addr) -> IpAddress {
    IpAddress::V4(a)
}

fn v6(a: Ipv6Addr) -> IpAddress {
    IpAddress::V6(a)
}

fn udp4(src: Ipv4Addr, dst: Ipv4Addr, ttl: u8, len: usize) -> Vec<u8> {
    ipv4(src, dst, 17, ttl, &udp(v4(src), v4(dst), 4000, 53, &vec![0x5a; len]))
}

fn udp6_behind(src: Ipv6Addr, dst: Ipv6Addr, first: u8, ext: &[u8]) -> Vec<u8> {
    let mut p = ext.to_vec();
    p.extend_from_slice(&udp(v6(src), v6(dst), 4000, 53, &[0x5a; 24]));
    ipv6(src, dst, first, 64, &p)
}

/// `f` with its IPv4 total length and header checksum made right after an edit.
fn fixed(mut f: Vec<u8>) -> Vec<u8> {
    fix_ip_lengths(&mut f);
    f
}

/// A valid frame of each protocol and shape the nodes parse, as a peer on port 0
/// sends them (to our MAC, or to a group where the protocol says so).
pub fn valid() -> Vec<Vec<u8>> {
    let us = OUR_MACS[0];
    let to_us = |ethertype: u16, p: &[u8]| eth(us, PEER_MAC, ethertype, p);
    let syn4 = tcp((v4(PEER4), v4(OUR4)), (40000, 80), (1000, None), TcpControl::Syn, true, &[]);
    let data4 =
        tcp((v4(PEER4), v4(OUR4)), (40000, 80), (1001, Some(1)), TcpControl::Psh, false, b"GET / HTTP/1.1\r\n\r\n");
    let rst4 = tcp((v4(PEER4), v4(OUR4)), (40000, 80), (1001, None), TcpControl::Rst, false, &[]);
    let syn6 = tcp((v6(PEER6), v6(OUR6)), (40000, 80), (7, None), TcpControl::Syn, true, &[]);
    let quoted = udp4(OUR4, PEER4, 64, 8);
    let mut unreach4 = vec![3, 3, 0, 0, 0, 0, 0, 0];
    unreach4.extend_from_slice(&quoted[..28]);
    let c = !ironpath_wire::checksum::data(&unreach4);
    unreach4[2..4].copy_from_slice(&c.to_be_bytes());
    let mut options4 = udp4(PEER4, OUR4, 64, 8);
    // IHL 7: a router-alert option and padding before the UDP header.
    options4.splice(20..20, [0x94, 0x04, 0, 0, 0x01, 0x01, 0x01, 0x00]);
    options4[0] = 0x47;
    let mut first_frag = udp4(PEER4, REMOTE4, 64, 40);
    first_frag[6] = 0x20; // more fragments
    let mut later_frag = udp4(PEER4, REMOTE4, 64, 40);
    later_frag[6..8].copy_from_slice(&6u16.to_be_bytes()); // offset 48 bytes
    let solicited: Ipv6Addr = "ff02::1:ff00:1".parse().unwrap_or(Ipv6Addr::UNSPECIFIED);
    let ns = Icmpv6Repr::NeighborSolicit { target_addr: OUR6, lladdr: Some(EthernetAddress(PEER_MAC)) };
    let na = Icmpv6Repr::NeighborAdvert {
        flags: NeighborFlags::SOLICITED | NeighborFlags::OVERRIDE,
        target_addr: PEER6,
        lladdr: Some(EthernetAddress(PEER_MAC)),
    };
    let echo6 = Icmpv6Repr::EchoRequest { ident: 1, seq_no: 1, data_len: 16 };
    let all_routers: Ipv6Addr = "ff02::2".parse().unwrap_or(Ipv6Addr::UNSPECIFIED);
    let mut rs = vec![133, 0, 0, 0, 0, 0, 0, 0, 1, 1];
    rs.extend_from_slice(&PEER_MAC);
    let mut unreach6 = vec![1, 4, 0, 0, 0, 0, 0, 0];
    unreach6.extend_from_slice(&udp6_behind(OUR6, PEER6, 17, &[])[..48]);
    let hbh_dst = [60, 0, 1, 4, 0, 0, 0, 0, 17, 0, 1, 4, 0, 0, 0, 0];
    let atomic = [17, 0, 0, 0, 0, 0, 0, 9];
    let later6 = [17, 0, 0, 0x30, 0, 0, 0, 9];
    let ah = [17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1];
    let routing = [17, 2, 0, 0, 0, 0, 0, 0, 0xfd, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    let long_chain: Vec<u8> =
        (0..9).flat_map(|k| [if k == 8 { 17 } else { 60 }, 0, 1, 4, 0, 0, 0, 0]).collect::<Vec<u8>>();
    let ping4 = ipv4(PEER4, OUR4, 1, 64, &icmp4_echo(false, 7, 1, &[0x61; 32]));
    // Slow protocols: a LACPDU from an active, aggregating partner that knows no
    // one yet, and a marker request.
    use crate::bond::lacp;
    let peer = lacp::Info { system_priority: 1, system: PEER_MAC, key: 9, port_priority: 255, port: 1, state: 0x3f };
    let mut lacpdu = [0u8; lacp::PDU_FRAME];
    lacp::write_lacpdu(&mut lacpdu, PEER_MAC, &peer, &lacp::Info::default());
    let mut marker = [0u8; lacp::PDU_FRAME];
    lacp::write_marker_response(&mut marker, PEER_MAC, &[2, 16, 0, 1, 2, 0, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0]);
    marker[16] = 1;
    let mut frames = vec![
        eth(BROADCAST, PEER_MAC, 0x0806, &arp(ArpOperation::Request, PEER_MAC, PEER4, [0; 6], OUR4)),
        to_us(0x0806, &arp(ArpOperation::Reply, PEER_MAC, PEER4, us, OUR4)),
        eth(BROADCAST, PEER_MAC, 0x0806, &arp(ArpOperation::Request, PEER_MAC, PEER4, [0; 6], PEER4)),
        to_us(0x0800, &ping4),
        to_us(0x0800, &ipv4(PEER4, ROUTED4, 1, 64, &icmp4_echo(false, 7, 2, &[0x61; 32]))),
        to_us(0x0800, &udp4(PEER4, OUR4, 64, 32)),
        to_us(0x0800, &udp4(PEER4, REMOTE4, 64, 32)),
        to_us(0x0800, &udp4(PEER4, ROUTED4, 1, 32)),
        to_us(0x0800, &ipv4(PEER4, OUR4, 6, 64, &syn4)),
        to_us(0x0800, &ipv4(PEER4, OUR4, 6, 64, &data4)),
        to_us(0x0800, &ipv4(PEER4, OUR4, 6, 64, &rst4)),
        to_us(0x0800, &ipv4(PEER4, OUR4, 1, 64, &unreach4)),
        fixed(to_us(0x0800, &options4)),
        fixed(to_us(0x0800, &first_frag)),
        fixed(to_us(0x0800, &later_frag)),
        eth(BROADCAST, PEER_MAC, 0x0800, &udp4(PEER4, Ipv4Addr::new(198, 18, 1, 255), 64, 16)),
        to_us(0x86dd, &ipv6(PEER6, OUR6, 58, 64, &icmp6(echo6, PEER6, OUR6, &[0x62; 16]))),
        eth(
            [0x33, 0x33, 0xff, 0, 0, 1],
            PEER_MAC,
            0x86dd,
            &ipv6(PEER6, solicited, 58, 255, &icmp6(ns, PEER6, solicited, &[])),
        ),
        to_us(0x86dd, &ipv6(PEER6, OUR6, 58, 255, &icmp6(na, PEER6, OUR6, &[]))),
        eth([0x33, 0x33, 0, 0, 0, 2], PEER_MAC, 0x86dd, &ipv6(PEER6, all_routers, 58, 255, &rs)),
        to_us(0x86dd, &udp6_behind(PEER6, REMOTE6, 17, &[])),
        to_us(0x86dd, &ipv6(PEER6, OUR6, 6, 64, &syn6)),
        to_us(0x86dd, &ipv6(PEER6, OUR6, 58, 64, &unreach6)),
        to_us(0x86dd, &udp6_behind(PEER6, OUR6, 0, &hbh_dst)),
        to_us(0x86dd, &udp6_behind(PEER6, REMOTE6, 44, &atomic)),
        to_us(0x86dd, &udp6_behind(PEER6, REMOTE6, 44, &later6)),
        to_us(0x86dd, &udp6_behind(PEER6, REMOTE6, 51, &ah)),
        to_us(0x86dd, &udp6_behind(PEER6, REMOTE6, 43, &routing)),
        to_us(0x86dd, &udp6_behind(PEER6, REMOTE6, 60, &long_chain)),
        eth([0x01, 0x80, 0xc2, 0, 0, 0x0e], PEER_MAC, 0x88cc, &[2, 7, 4, 0, 0, 0, 0, 0, 1, 0, 0]),
        lacpdu.to_vec(),
        marker.to_vec(),
        to_us(0x0800, &udp4(PEER4, REMOTE4, 64, 1472)),
        to_us(0x0800, &udp4(PEER4, REMOTE4, 64, 8972)),
    ];
    // VXLAN (VNI 100, and 200) from the peer to us, carrying a broadcast ARP, a ping
    // and an IPv6 SYN.
    let vxlan = |vni: u32, inner: &[u8]| {
        let mut v = vec![0x08, 0, 0, 0];
        v.extend_from_slice(&(vni << 8).to_be_bytes());
        v.extend_from_slice(inner);
        to_us(0x0800, &ipv4(PEER4, OUR4, 17, 64, &udp(v4(PEER4), v4(OUR4), 49200, 4789, &v)))
    };
    let inner_arp =
        eth(BROADCAST, [0x02, 0, 0, 0, 7, 1], 0x0806, &arp(ArpOperation::Request, PEER_MAC, PEER4, [0; 6], OUR4));
    frames.extend([
        vxlan(100, &inner_arp),
        vxlan(100, &to_us(0x0800, &ping4)),
        vxlan(100, &to_us(0x86dd, &ipv6(PEER6, OUR6, 6, 64, &syn6))),
        vxlan(200, &inner_arp),
    ]);
    // VLAN stacks: one 802.1Q tag, QinQ, and three tags.
    let plain = to_us(0x0800, &udp4(PEER4, OUR4, 64, 32));
    let one = tagged(&plain, 0x8100, 10);
    let two = tagged(&one, 0x88a8, 100);
    let three = tagged(&two, 0x88a8, 200);
    frames.extend([one, two, three, tagged(&to_us(0x0800, &ping4), 0x8100, 0)]);
    frames
}

/// Every frame of `valid` cut at every length (long frames at fewer places), once
/// as cut and once with its IP lengths made to agree with the cut.
pub fn truncations(valid: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for f in valid {
        let cuts: Vec<usize> =
            if f.len() <= 256 { (0..f.len()).collect() } else { (0..160).chain((160..f.len()).step_by(509)).collect() };
        for n in cuts {
            out.push(f[..n].to_vec());
            let mut g = f[..n].to_vec();
            fix_ip_lengths(&mut g);
            if g != f[..n] {
                out.push(g);
            }
        }
    }
    out
}

/// Each valid IP frame with lengths that lie, headers out of range and checksums
/// broken; and frames with group or zero source MACs, to other hosts.
pub fn malformed(valid: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for f in valid {
        let Some((at, ethertype)) = l3(f) else { continue };
        let mut variant = |edit: &dyn Fn(&mut Vec<u8>)| {
            let mut g = f.clone();
            edit(&mut g);
            out.push(g);
        };
        match ethertype {
            0x0800 if f.len() >= at + 20 => {
                for tl in [0u16, 19, 20, 21, 0xffff] {
                    variant(&|g| g[at + 2..at + 4].copy_from_slice(&tl.to_be_bytes()));
                }
                for vihl in [0x40u8, 0x44, 0x4f, 0x65, 0x00] {
                    variant(&|g| g[at] = vihl);
                }
                variant(&|g| g[at + 8] = 0); // TTL 0
                variant(&|g| g[at + 10] ^= 0xff); // header checksum
                variant(&|g| g[at + 6] = 0x3f); // fragment offset at its largest, MF
                variant(&|g| {
                    let l = g.len();
                    g[l - 1] ^= 0x55; // payload (and the L4 checksum) broken
                });
            }
            0x86dd if f.len() >= at + 40 => {
                for pl in [0u16, 1, 7, 8, 0xffff] {
                    variant(&|g| g[at + 4..at + 6].copy_from_slice(&pl.to_be_bytes()));
                }
                variant(&|g| g[at] = 0x40); // version 4 in an IPv6 ethertype
                variant(&|g| g[at + 7] = 0); // hop limit 0
                variant(&|g| {
                    let l = g.len();
                    g[l - 1] ^= 0x55;
                });
                for nh in [0u8, 43, 44, 51, 60, 59, 6, 17, 58] {
                    variant(&|g| g[at + 6] = nh); // the chain says something else
                }
            }
            0x0806 if f.len() >= at + 8 => {
                variant(&|g| g[at + 4] = 16); // hardware length not 6
                variant(&|g| g[at + 7] = 9); // unknown operation
            }
            _ => {}
        }
        let mut g = f.clone();
        g[6] = 0x01; // group source MAC
        out.push(g);
        let mut g = f.clone();
        g[..6].copy_from_slice(&[0x02, 0, 0, 0, 0x77, 0x77]); // another host
        out.push(g);
    }
    // Runts and nonsense.
    out.extend([vec![], vec![0xff], vec![0; 13], vec![0xff; 14], vec![0; 60], vec![0xff; 1514]]);
    out
}

/// The standard corpus: [`valid`], its [`truncations`], and the [`malformed`]
/// variants.
pub fn standard() -> Vec<Vec<u8>> {
    let v = valid();
    let mut all = v.clone();
    all.extend(truncations(&v));
    all.extend(malformed(&v));
    all
}

/// `n` frames that each bring something new a node might keep state for: a source
/// MAC, an IPv4 source (in 198.18.0.0/15) or an IPv6 one (a new /64 or a new
/// address in ours), a flow's ports, a destination on a connected subnet (a
/// neighbour to resolve), a TCP handshake, an ARP or ND sender, a VLAN id.
pub fn flood(seed: u64, n: usize) -> Vec<Vec<u8>> {
    let mut rng = XorShift(seed);
    let us = OUR_MACS[0];
    (0..n)
        .map(|i| {
            let r = rng.next_u64();
            let mut mac = r.to_be_bytes();
            mac[0] = (mac[0] & 0xfe) | 0x02;
            let mac: [u8; 6] = [mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]];
            let src4 = Ipv4Addr::new(198, 18 + (r >> 48 & 1) as u8, (r >> 40) as u8, (r >> 32) as u8 | 1);
            let on_link4 = Ipv4Addr::new(198, 18, 2, (r >> 24) as u8 | 1);
            let iid = rng.next_u64();
            let src6 =
                Ipv6Addr::from(u128::from(0xfd00_0001_0000_0000u64 | (r >> 16 & 0xffff)) << 64 | u128::from(iid));
            let on_link6 = Ipv6Addr::from(0xfd00_0002_0000_0000_0000_0000_0000_0000u128 | u128::from(iid));
            let (sp, dp) = ((r >> 8) as u16 | 1024, [80u16, 53, 7, 9, (r >> 20) as u16 | 1][i % 5]);
            match i % 8 {
                0 => eth(us, mac, 0x0800, &udp4(src4, on_link4, 64, 16)),
                1 => {
                    let syn = tcp((v4(src4), v4(OUR4)), (sp, 80), (r as u32, None), TcpControl::Syn, true, &[]);
                    eth(us, mac, 0x0800, &ipv4(src4, OUR4, 6, 64, &syn))
                }
                2 => eth(BROADCAST, mac, 0x0806, &arp(ArpOperation::Request, mac, src4, [0; 6], OUR4)),
                3 => {
                    let group = Ipv6Addr::from(0xff02_0000_0000_0000_0000_0001_ff00_0001u128);
                    let ns = Icmpv6Repr::NeighborSolicit { target_addr: OUR6, lladdr: Some(EthernetAddress(mac)) };
                    eth(
                        [0x33, 0x33, 0xff, 0, 0, 1],
                        mac,
                        0x86dd,
                        &ipv6(src6, group, 58, 255, &icmp6(ns, src6, group, &[])),
                    )
                }
                4 => eth(us, mac, 0x86dd, &udp6_behind(src6, on_link6, 17, &[])),
                5 => {
                    let seg =
                        tcp((v4(src4), v4(REMOTE4)), (sp, dp), (r as u32, Some(1)), TcpControl::None, false, &[7; 100]);
                    eth(us, mac, 0x0800, &ipv4(src4, REMOTE4, 6, 64, &seg))
                }
                6 => tagged(&eth(us, mac, 0x0800, &udp4(src4, OUR4, 64, 16)), 0x8100, (r >> 4) as u16 & 0xfff),
                _ => {
                    let syn = tcp((v6(src6), v6(OUR6)), (sp, 80), (r as u32, None), TcpControl::Syn, true, &[]);
                    eth(us, mac, 0x86dd, &ipv6(src6, OUR6, 6, 64, &syn))
                }
            }
        })
        .collect()
}
