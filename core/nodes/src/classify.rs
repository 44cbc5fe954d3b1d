//! `classify`: send each packet to a named next edge by ethertype and IP protocol
//! (VLAN tags skipped), recording `l2_len`/`l3_len` in the mbuf (unless an offload
//! still pending uses the ones the port set: a tunnel's GSO frame has them about its
//! inner headers). A class whose
//! edge is not connected falls back to the wider one: `icmp`/`tcp`/`udp` to `ipv4`
//! (or `ipv6`), those to `other`. Truncated or malformed headers and IPv4 headers
//! with a bad checksum are dropped and counted.

use crate::kind::NodeKind;
use ironpath_config::{Nexts, NodeSpec};
use ironpath_eal::abi;
use ironpath_eal::{Burst, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx, DROP};
use ironpath_wire::ethernet::{l3_offset, EtherType};
use ironpath_wire::ipv4::Ipv4Packet;
use ironpath_wire::ipv6::{upper_layer, Ipv6Packet};
use ironpath_wire::IpProtocol;

/// Flags whose offload uses `l2_len`/`l3_len`.
const OFFLOAD_STATE: u64 = abi::RX_L4_CKSUM_NONE
    | abi::RX_AGGREGATED
    | abi::TX_TCP_SEG
    | abi::TX_TCP_CKSUM
    | abi::TX_UDP_CKSUM
    | abi::TX_IP_CKSUM;

/// The next edges of `classify`, in index order.
pub const NEXTS: &[&str] = &["arp", "icmp", "tcp", "udp", "ipv4", "icmp6", "ipv6", "other"];
const ARP: usize = 0;
const ICMP: usize = 1;
const TCP: usize = 2;
const UDP: usize = 3;
const IPV4: usize = 4;
const ICMP6: usize = 5;
const IPV6: usize = 6;
const OTHER: usize = 7;

ironpath_graph::counters! {
    /// What `classify` counts.
    pub enum ClassifyCounter {
        Malformed("malformed", "packets dropped (truncated or bad header)"),
        BadIpChecksum("bad_ip_checksum", "packets dropped"),
        Vlan("vlan", "packets with a VLAN tag"),
    }
}

/// The classifier.
pub struct Classify {
    /// Next index per class for IPv4 L4 (icmp, tcp, udp, other-L4), IPv6 L4, and the rest.
    v4: [u16; 4],
    v6: [u16; 4],
    arp: u16,
    other: u16,
}

impl Classify {
    /// A classifier whose connected next edges are `connected` (names from [`NEXTS`]).
    pub fn new(connected: &[&str]) -> Self {
        let is = |k: usize| connected.contains(&NEXTS[k]);
        let pick = |chain: &[usize]| chain.iter().copied().find(|&k| is(k)).map_or(DROP, |k| k as u16);
        Self {
            v4: [
                pick(&[ICMP, IPV4, OTHER]),
                pick(&[TCP, IPV4, OTHER]),
                pick(&[UDP, IPV4, OTHER]),
                pick(&[IPV4, OTHER]),
            ],
            v6: [
                pick(&[ICMP6, IPV6, OTHER]),
                pick(&[TCP, IPV6, OTHER]),
                pick(&[UDP, IPV6, OTHER]),
                pick(&[IPV6, OTHER]),
            ],
            arp: pick(&[ARP, OTHER]),
            // Nothing connected for a class: the engine counts it as unconnected.
            other: OTHER as u16,
        }
    }

    /// The next index for one frame, and its L2 and L3 header lengths.
    #[inline(always)]
    fn one(&self, ol_flags: u64, frame: &[u8], pkt_len: usize, cx: &NodeCx<'_>) -> (u16, u8, u16) {
        let Ok((et, off)) = l3_offset(frame) else {
            cx.count(ClassifyCounter::Malformed, 1);
            return (DROP, 0, 0);
        };
        if off > 14 {
            cx.count(ClassifyCounter::Vlan, 1);
        }
        let l2 = off as u8;
        let l3 = &frame[off..];
        if pkt_len > frame.len() {
            // A chain (a GSO frame from the kernel, an aggregate): the headers are in
            // the first segment, the lengths count the whole packet.
            return match self.chained(et, l3, pkt_len - off, ol_flags) {
                Some((k, l3len)) => (k, l2, l3len),
                None => {
                    cx.count(ClassifyCounter::Malformed, 1);
                    (DROP, l2, 0)
                }
            };
        }
        match et {
            EtherType::IPV4 => {
                let Ok(ip) = Ipv4Packet::new_checked(l3) else {
                    cx.count(ClassifyCounter::Malformed, 1);
                    return (DROP, l2, 0);
                };
                if ol_flags & abi::RX_IP_CKSUM_GOOD == 0 && !ip.verify_checksum() {
                    cx.count(ClassifyCounter::BadIpChecksum, 1);
                    return (DROP, l2, 0);
                }
                (self.v4[l4_class(ip.next_header())], l2, ip.header_len() as u16)
            }
            EtherType::IPV6 => {
                let Ok(ip) = Ipv6Packet::new_checked(l3) else {
                    cx.count(ClassifyCounter::Malformed, 1);
                    return (DROP, l2, 0);
                };
                match upper_layer(&ip) {
                    Ok((proto, l4off)) => (self.v6[l4_class6(proto)], l2, l4off as u16),
                    Err(_) => {
                        cx.count(ClassifyCounter::Malformed, 1);
                        (DROP, l2, 0)
                    }
                }
            }
            EtherType::ARP => (self.arp, l2, 0),
            _ => (self.other, l2, 0),
        }
    }

    /// The class and L3 header length of a chained packet whose L3 header starts at
    /// `l3` (the rest of the first segment) and whose L3 length is `l3_total`; `None`
    /// if the header does not fit the first segment or the lengths disagree.
    fn chained(&self, et: EtherType, l3: &[u8], l3_total: usize, ol_flags: u64) -> Option<(u16, u16)> {
        match et {
            EtherType::IPV4 => {
                if l3.len() < 20 {
                    return None;
                }
                let ip = Ipv4Packet::new_unchecked(l3);
                let ihl = usize::from(ip.header_len());
                let total = usize::from(ip.total_len());
                if ip.version() != 4 || ihl < 20 || ihl > l3.len() || total < ihl || total > l3_total {
                    return None;
                }
                if ol_flags & abi::RX_IP_CKSUM_GOOD == 0 && !Ipv4Packet::new_unchecked(&l3[..ihl]).verify_checksum() {
                    return None;
                }
                Some((self.v4[l4_class(ip.next_header())], ihl as u16))
            }
            EtherType::IPV6 => {
                if l3.len() < 40 {
                    return None;
                }
                let ip = Ipv6Packet::new_unchecked(l3);
                if ip.version() != 6 || usize::from(ip.payload_len()) + 40 > l3_total {
                    return None;
                }
                // Extension headers are not walked across segments: such a chain goes
                // to the IPv6 class with the fixed header's length.
                let nh = ip.next_header();
                let k = match nh {
                    IpProtocol::TCP | IpProtocol::UDP | IpProtocol::ICMPV6 => self.v6[l4_class6(nh)],
                    _ => self.v6[3],
                };
                Some((k, 40))
            }
            EtherType::ARP => Some((self.arp, 0)),
            _ => Some((self.other, 0)),
        }
    }
}

#[inline(always)]
fn l4_class(p: IpProtocol) -> usize {
    match p {
        IpProtocol::ICMP => 0,
        IpProtocol::TCP => 1,
        IpProtocol::UDP => 2,
        _ => 3,
    }
}

#[inline(always)]
fn l4_class6(p: IpProtocol) -> usize {
    match p {
        IpProtocol::ICMPV6 => 0,
        IpProtocol::TCP => 1,
        IpProtocol::UDP => 2,
        _ => 3,
    }
}

impl Node for Classify {
    #[inline]
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, next: &mut [u16; MAX_BURST]) -> Dispatch {
        for (i, slot) in next.iter_mut().enumerate().take(pkts.len()) {
            pkts.prefetch_data(i + 4);
            let flags = pkts.header(i).ol_flags;
            let (k, l2, l3) = self.one(flags, pkts.data(i), pkts.pkt_len(i), cx);
            // Lengths an offload still pending relies on (where a partial checksum
            // starts, a GSO frame's headers), when the port gave them, are kept: they
            // may be the inner headers' of a tunnelled frame, not the outer ones seen
            // here. A port that gave none (a partial checksum without its start) gets
            // the ones found here.
            if flags & OFFLOAD_STATE == 0 || pkts.header(i).l2_len == 0 {
                let h = pkts.header_mut(i);
                h.l2_len = l2;
                h.l3_len = l3;
            }
            *slot = k;
        }
        Dispatch::Each
    }

    fn counters(&self) -> &'static [CounterSpec] {
        ClassifyCounter::SPECS
    }
}

/// `classify`: by ethertype and IP protocol.
pub const KIND: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "classify",
        doc: "by ethertype and IP protocol (VLAN tags skipped); an unconnected class falls back: icmp/tcp/udp -> ipv4 or ipv6 -> other",
        nexts: Nexts::Fixed(NEXTS),
        ..NodeSpec::DEFAULT
    },
    build: |b, _env| Ok(Box::new(Classify::new(b.connected))),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::*;
    use ironpath_graph::Dispatch;
    use ironpath_wire::arp::ArpOperation;
    use ironpath_wire::IpAddress;
    use std::net::Ipv4Addr;

    const GRE: u8 = 47;
    const HOPOPT: u8 = 0;
    const IPV6_NONXT: u8 = 59;

    /// A TCP header (SYN) with no payload; classify never reads past the IP header.
    fn tcp_hdr() -> Vec<u8> {
        let mut t = vec![0u8; 20];
        t[0..2].copy_from_slice(&40000u16.to_be_bytes());
        t[2..4].copy_from_slice(&80u16.to_be_bytes());
        t[12] = 5 << 4;
        t[13] = 0x02;
        t
    }

    fn ipv4_frame(proto: u8, payload: &[u8]) -> Vec<u8> {
        eth(US_MAC, PEER_MAC, 0x0800, &ipv4(PEER4, US4, proto, 64, payload))
    }

    fn udp4() -> Vec<u8> {
        ipv4_frame(17, &udp(IpAddress::V4(PEER4), IpAddress::V4(US4), 5000, 53, b"query"))
    }

    fn arp_frame() -> Vec<u8> {
        eth([0xff; 6], PEER_MAC, 0x0806, &arp(ArpOperation::Request, PEER_MAC, PEER4, [0; 6], US4))
    }

    fn icmp6_frame() -> Vec<u8> {
        ping6(US6, 1, b"abcdefgh")
    }

    /// TCP over IPv6 behind an 8-byte hop-by-hop header (a PadN option).
    fn tcp6_hbh() -> Vec<u8> {
        let mut p = vec![6, 0, 1, 4, 0, 0, 0, 0];
        p.extend_from_slice(&tcp_hdr());
        eth(US_MAC, PEER_MAC, 0x86dd, &ipv6(PEER6, US6, HOPOPT, 64, &p))
    }

    fn vlan(frame: &[u8], vid: u16) -> Vec<u8> {
        let mut f = frame[..12].to_vec();
        f.extend_from_slice(&0x8100u16.to_be_bytes());
        f.extend_from_slice(&vid.to_be_bytes());
        f.extend_from_slice(&frame[12..]);
        f
    }

    /// Run `c` on `frames` (with `ol_flags` on each); (next, l2_len, l3_len) per packet.
    fn classify(c: &mut Classify, st: &ironpath_graph::NodeStats, frames: &[Vec<u8>], ol: u64) -> Vec<(u16, u8, u16)> {
        let pool = pool(frames.len().max(1) as u32);
        let mut b = burst(&pool, frames);
        for i in 0..b.len() {
            b.header_mut(i).ol_flags |= ol;
        }
        let r = call(c, st, &mut b, 0);
        assert_eq!(r.dispatch, Dispatch::Each);
        let got = (0..b.len()).map(|i| (r.next[i], b.header(i).l2_len, b.header(i).l3_len)).collect();
        // The node changes no data, only the header lengths.
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(b.data(i), &f[..]);
        }
        b.free_all();
        assert_eq!(pool.stats().in_use, 0);
        got
    }

    /// A frame whose pending offload the port described (a tunnel's GSO frame: its
    /// checksum starts at the inner TCP header) keeps the port's lengths; one the port
    /// gave no lengths for gets the ones found here.
    #[test]
    fn the_lengths_a_pending_offload_uses_are_the_ports() {
        let mut c = Classify::new(NEXTS);
        let st = stats(&c);
        let pool = pool(2);
        let mut b = burst(&pool, &[udp4(), udp4()]);
        for i in 0..2 {
            b.header_mut(i).ol_flags |= abi::RX_L4_CKSUM_NONE | abi::RX_AGGREGATED;
        }
        (b.header_mut(0).l2_len, b.header_mut(0).l3_len) = (14, 70);
        let _ = call(&mut c, &st, &mut b, 0);
        let got: Vec<(u8, u16)> = (0..2).map(|i| (b.header(i).l2_len, b.header(i).l3_len)).collect();
        assert_eq!(got, [(14, 70), (14, 20)]);
        b.free_all();
    }

    #[test]
    fn each_protocol_goes_to_its_edge_with_header_lengths() {
        let mut c = Classify::new(NEXTS);
        let st = stats(&c);
        let mut opts = ipv4(PEER4, US4, 17, 64, &udp(IpAddress::V4(PEER4), IpAddress::V4(US4), 1, 2, b""));
        // IPv4 with 4 bytes of options (NOPs): IHL 6.
        opts.splice(20..20, [1, 1, 1, 1]);
        opts[0] = 0x46;
        let total = opts.len() as u16;
        opts[2..4].copy_from_slice(&total.to_be_bytes());
        opts[10..12].fill(0);
        let ck = !ironpath_wire::checksum::data(&opts[..24]);
        opts[10..12].copy_from_slice(&ck.to_be_bytes());
        let udp6 = eth(
            US_MAC,
            PEER_MAC,
            0x86dd,
            &ipv6(PEER6, US6, 17, 64, &udp(IpAddress::V6(PEER6), IpAddress::V6(US6), 1, 2, b"x")),
        );
        let frames = vec![
            arp_frame(),
            ping4(US4, 1, b"ping"),
            ipv4_frame(6, &tcp_hdr()),
            udp4(),
            ipv4_frame(GRE, &[0; 4]),
            icmp6_frame(),
            tcp6_hbh(),
            udp6,
            eth(US_MAC, PEER_MAC, 0x86dd, &ipv6(PEER6, US6, IPV6_NONXT, 64, b"")),
            vlan(&udp4(), 100),
            vlan(&vlan(&ping4(US4, 2, b""), 200), 100),
            eth(US_MAC, PEER_MAC, 0x0800, &opts),
            eth([0x01, 0x80, 0xc2, 0, 0, 0x0e], PEER_MAC, 0x88cc, &[0; 46]),
        ];
        let want: Vec<(u16, u8, u16)> = vec![
            (ARP as u16, 14, 0),
            (ICMP as u16, 14, 20),
            (TCP as u16, 14, 20),
            (UDP as u16, 14, 20),
            (IPV4 as u16, 14, 20),
            (ICMP6 as u16, 14, 40),
            (TCP as u16, 14, 48),
            (UDP as u16, 14, 40),
            (IPV6 as u16, 14, 40),
            (UDP as u16, 18, 20),
            (ICMP as u16, 22, 20),
            (UDP as u16, 14, 24),
            (OTHER as u16, 14, 0),
        ];
        assert_eq!(classify(&mut c, &st, &frames, 0), want);
        assert_eq!(counter(&st, "vlan"), 2);
        assert_eq!(counter(&st, "malformed"), 0);
        assert_eq!(counter(&st, "bad_ip_checksum"), 0);
    }

    /// A packet chained over segments (a kernel GSO frame, an aggregate) is classified
    /// from the headers in its first segment, its lengths checked against the whole.
    #[test]
    fn chained_packets_are_classified_by_the_headers_of_their_first_segment() {
        let p = pool(64);
        let mut c = Classify::new(NEXTS);
        let st = stats(&c);
        let mut payload = tcp_hdr();
        payload.extend(std::iter::repeat_n(7u8, 3000));
        let v4 = ipv4_frame(6, &payload);
        let v6 = eth(US_MAC, PEER_MAC, 0x86dd, &ipv6(PEER6, US6, 6, 64, &payload));
        let mut short = ipv4_frame(6, &payload);
        short.truncate(short.len() - 10); // IPv4 total length beyond the packet
        let mut b = Burst::new();
        for f in [&v4, &v6, &short] {
            let mut m = ironpath_eal::Mbuf::from_slice(&p, &f[..100]).unwrap();
            m.chain(ironpath_eal::Mbuf::from_slice(&p, &f[100..]).unwrap()).unwrap();
            b.push(m).unwrap();
        }
        let call = call(&mut c, &st, &mut b, 0);
        let got: Vec<(u16, u8, u16)> =
            (0..b.len()).map(|i| (call.next[i], b.header(i).l2_len, b.header(i).l3_len)).collect();
        assert_eq!(got, [(TCP as u16, 14, 20), (TCP as u16, 14, 40), (DROP, 14, 0)]);
        assert_eq!(counter(&st, "malformed"), 1);
        b.free_all();
    }

    #[test]
    fn every_truncation_is_dropped_as_malformed() {
        for full in [ping4(US4, 7, &[0x5a; 56]), icmp6_frame(), tcp6_hbh(), vlan(&udp4(), 9)] {
            let mut c = Classify::new(NEXTS);
            let st = stats(&c);
            let cut: Vec<Vec<u8>> = (0..full.len()).map(|n| full[..n].to_vec()).collect();
            let got = classify(&mut c, &st, &cut, 0);
            assert!(got.iter().all(|&(k, _, _)| k == DROP), "{got:?}");
            assert_eq!(counter(&st, "malformed"), full.len() as u64);
            assert_eq!(counter(&st, "bad_ip_checksum"), 0);
            // The whole frame passes.
            assert_ne!(classify(&mut c, &st, std::slice::from_ref(&full), 0)[0].0, DROP);
            assert_eq!(counter(&st, "malformed"), full.len() as u64);
        }
    }

    #[test]
    fn malformed_headers_are_dropped() {
        let mut c = Classify::new(NEXTS);
        let st = stats(&c);
        let mut short_ihl = ping4(US4, 1, b"");
        short_ihl[14] = 0x44; // IHL 16 bytes < 20
        let mut total_below_ihl = ping4(US4, 1, b"");
        total_below_ihl[16..18].copy_from_slice(&10u16.to_be_bytes());
        // Hop-by-hop after another extension header.
        let mut late_hbh = vec![HOPOPT, 0, 1, 4, 0, 0, 0, 0, 6, 0, 1, 4, 0, 0, 0, 0];
        late_hbh.extend_from_slice(&tcp_hdr());
        let late_hbh = eth(US_MAC, PEER_MAC, 0x86dd, &ipv6(PEER6, US6, 60, 64, &late_hbh));
        let triple_tag = vlan(&vlan(&vlan(&udp4(), 1), 2), 3);
        let frames = [short_ihl, total_below_ihl, late_hbh, triple_tag];
        let got = classify(&mut c, &st, &frames, 0);
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), [DROP; 4]);
        assert_eq!(counter(&st, "malformed"), 4);
    }

    #[test]
    fn bad_ipv4_checksum_is_dropped_unless_hardware_verified() {
        let mut bad = udp4();
        bad[24] ^= 0x01;
        let mut c = Classify::new(NEXTS);
        let st = stats(&c);
        assert_eq!(classify(&mut c, &st, &[bad.clone()], 0), [(DROP, 14, 0)]);
        assert_eq!(counter(&st, "bad_ip_checksum"), 1);
        // A NIC that says "bad" is no better than no flag: still checked in software.
        assert_eq!(classify(&mut c, &st, &[bad.clone()], abi::RX_IP_CKSUM_BAD), [(DROP, 14, 0)]);
        assert_eq!(counter(&st, "bad_ip_checksum"), 2);
        // Checked by the NIC: trusted.
        assert_eq!(classify(&mut c, &st, &[bad], abi::RX_IP_CKSUM_GOOD), [(UDP as u16, 14, 20)]);
        assert_eq!(counter(&st, "bad_ip_checksum"), 2);
        assert_eq!(counter(&st, "malformed"), 0);
    }

    #[test]
    fn unconnected_classes_fall_back() {
        let frames = vec![
            arp_frame(),
            ping4(US4, 1, b""),
            ipv4_frame(6, &tcp_hdr()),
            udp4(),
            ipv4_frame(GRE, &[]),
            icmp6_frame(),
            tcp6_hbh(),
            eth(US_MAC, PEER_MAC, 0x88cc, &[0; 46]),
        ];
        let nexts = |connected: &[&str]| {
            let mut c = Classify::new(connected);
            let st = stats(&c);
            classify(&mut c, &st, &frames, 0).into_iter().map(|g| g.0).collect::<Vec<_>>()
        };
        let (a, i4, o) = (ARP as u16, IPV4 as u16, OTHER as u16);
        assert_eq!(nexts(&["ipv4", "other"]), [o, i4, i4, i4, i4, o, o, o]);
        assert_eq!(nexts(&["other"]), [o; 8]);
        assert_eq!(nexts(&["arp", "icmp", "ipv6"]), [a, ICMP as u16, DROP, DROP, DROP, IPV6 as u16, IPV6 as u16, o]);
        assert_eq!(
            nexts(&["tcp", "udp", "icmp6"]),
            [DROP, DROP, TCP as u16, UDP as u16, DROP, ICMP6 as u16, TCP as u16, o]
        );
        // Nothing connected: `other` still names its edge (the engine counts it unconnected).
        assert_eq!(nexts(&[]), [DROP, DROP, DROP, DROP, DROP, DROP, DROP, o]);
    }

    #[test]
    fn broadcast_ipv4_is_classified_like_any_other() {
        let mut c = Classify::new(NEXTS);
        let st = stats(&c);
        let f = eth([0xff; 6], PEER_MAC, 0x0800, &ipv4(PEER4, Ipv4Addr::BROADCAST, 17, 1, &[0; 8]));
        assert_eq!(classify(&mut c, &st, &[f], 0), [(UDP as u16, 14, 20)]);
    }
}
