//! `icmp_echo`: answers ICMP echo requests (IPv4) and ICMPv6 echo requests and
//! neighbour solicitations (IPv6) addressed to our addresses, rewriting each
//! request into its reply in place. Everything else is dropped and counted.

use crate::kind::{NodeKind, PORT};
use ironpath_config::{Nexts, NodeSpec, ParamKind, ParamSpec};
use ironpath_eal::abi;
use ironpath_eal::{Burst, Mbuf, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx, DROP};
use ironpath_wire::checksum;
use ironpath_wire::ethernet::{EtherType, HEADER_LEN};
use ironpath_wire::ipv4::Ipv4Packet;
use ironpath_wire::ipv6::{upper_layer, Ipv6Packet};
use ironpath_wire::IpProtocol;
use std::net::{Ipv4Addr, Ipv6Addr};

ironpath_graph::counters! {
    /// What `icmp_echo` counts.
    pub enum IcmpCounter {
        EchoReplies("echo_replies", "ICMP echo replies"),
        Echo6Replies("echo6_replies", "ICMPv6 echo replies"),
        NaSent("na_sent", "neighbour advertisements"),
        NotOurs("not_ours", "packets dropped (other destination)"),
        NotEcho("not_echo", "packets dropped (other ICMP types)"),
        BadChecksum("bad_checksum", "packets dropped"),
        Malformed("malformed", "packets dropped"),
        Shared("shared", "packets dropped (data shared, cannot rewrite)"),
    }
}

/// Length of a neighbour advertisement frame with a target link-layer address option.
const NA_FRAME_LEN: usize = HEADER_LEN + 40 + 32;

/// The node.
pub struct IcmpEcho {
    v4: Vec<Ipv4Addr>,
    v6: Vec<Ipv6Addr>,
    mac: [u8; 6],
    /// Flags of our advertisements: solicited + override, and router for a router.
    na_flags: u8,
}

enum Verdict {
    /// Reply written in place; the frame keeps its length.
    Reply(IcmpCounter),
    /// Reply written; the frame now has this length.
    Resized(IcmpCounter, usize),
    Drop(IcmpCounter),
}

impl IcmpEcho {
    /// Answer for these addresses, with `mac` as our link-layer address.
    pub fn new(v4: Vec<Ipv4Addr>, v6: Vec<Ipv6Addr>, mac: [u8; 6]) -> Self {
        Self { v4, v6, mac, na_flags: 0x60 }
    }

    /// The same, answering as a router: advertisements carry the router flag.
    pub fn router(mut self) -> Self {
        self.na_flags |= 0x80;
        self
    }

    /// Answer one frame we own (a router's local ICMP): `Ok` when `m` became the
    /// reply (to the frame's sender), `Err` with the reason it was not answered.
    pub fn answer(&self, m: &mut Mbuf) -> Result<IcmpCounter, IcmpCounter> {
        let l4_good = m.header().ol_flags & abi::RX_L4_CKSUM_GOOD != 0;
        if m.nb_segs() != 1 {
            return Err(IcmpCounter::Malformed);
        }
        let Ok(d) = m.data_mut() else { return Err(IcmpCounter::Shared) };
        match self.one(d, l4_good) {
            Verdict::Reply(k) => Ok(k),
            Verdict::Drop(k) => Err(k),
            Verdict::Resized(k, len) => {
                let na = if d.len() >= NA_FRAME_LEN { None } else { self.na_from_request(d) };
                let cur = m.data_len();
                let resized = if len > cur { m.append(len - cur).map(drop) } else { m.trim(cur - len) };
                match (resized, na, m.data_mut()) {
                    (Ok(()), Some((to, target, mac)), Ok(buf)) => self.write_na(buf, to, target, mac),
                    (Ok(()), None, Ok(_)) if cur >= NA_FRAME_LEN => {}
                    _ => return Err(IcmpCounter::Malformed),
                }
                Ok(k)
            }
        }
    }

    fn one(&self, d: &mut [u8], l4_good: bool) -> Verdict {
        if d.len() < HEADER_LEN {
            return Verdict::Drop(IcmpCounter::Malformed);
        }
        match EtherType(u16::from_be_bytes([d[12], d[13]])) {
            EtherType::IPV4 => self.v4_echo(d, l4_good),
            EtherType::IPV6 => self.v6(d, l4_good),
            _ => Verdict::Drop(IcmpCounter::Malformed),
        }
    }

    fn v4_echo(&self, d: &mut [u8], l4_good: bool) -> Verdict {
        let (hl, tl, dst) = match Ipv4Packet::new_checked(&d[HEADER_LEN..]) {
            Ok(ip) if ip.next_header() == IpProtocol::ICMP && !ip.more_frags() && ip.frag_offset() == 0 => {
                (ip.header_len() as usize, ip.total_len() as usize, ip.dst_addr())
            }
            Ok(_) => return Verdict::Drop(IcmpCounter::NotEcho),
            Err(_) => return Verdict::Drop(IcmpCounter::Malformed),
        };
        if !self.v4.contains(&dst) {
            return Verdict::Drop(IcmpCounter::NotOurs);
        }
        let icmp = HEADER_LEN + hl..HEADER_LEN + tl;
        if icmp.len() < 8 {
            return Verdict::Drop(IcmpCounter::Malformed);
        }
        if d[icmp.start] != 8 || d[icmp.start + 1] != 0 {
            return Verdict::Drop(IcmpCounter::NotEcho);
        }
        if !l4_good && checksum::data(&d[icmp.clone()]) != 0xffff {
            return Verdict::Drop(IcmpCounter::BadChecksum);
        }
        self.reply_macs(d);
        {
            let mut ip = Ipv4Packet::new_unchecked(&mut d[HEADER_LEN..]);
            let src = ip.src_addr();
            ip.set_src_addr(dst);
            ip.set_dst_addr(src);
            ip.set_hop_limit(64);
            ip.fill_checksum();
        }
        // Type 8 -> 0: one 16-bit word changes; RFC 1624 incremental update.
        let c = icmp.start;
        let old = u16::from_be_bytes([d[c + 2], d[c + 3]]);
        d[c] = 0;
        let new = checksum::update16(old, 0x0800, 0x0000);
        d[c + 2..c + 4].copy_from_slice(&new.to_be_bytes());
        Verdict::Reply(IcmpCounter::EchoReplies)
    }

    fn v6(&self, d: &mut [u8], l4_good: bool) -> Verdict {
        let (src, dst, plen, hop, off) = match Ipv6Packet::new_checked(&d[HEADER_LEN..]) {
            Ok(ip) => match upper_layer(&ip) {
                Ok((IpProtocol::ICMPV6, off)) => {
                    (ip.src_addr(), ip.dst_addr(), ip.payload_len() as usize, ip.hop_limit(), off)
                }
                Ok(_) => return Verdict::Drop(IcmpCounter::NotEcho),
                Err(_) => return Verdict::Drop(IcmpCounter::Malformed),
            },
            Err(_) => return Verdict::Drop(IcmpCounter::Malformed),
        };
        let icmp = HEADER_LEN + off..HEADER_LEN + 40 + plen;
        if icmp.start >= icmp.end || icmp.len() < 8 || icmp.end > d.len() {
            return Verdict::Drop(IcmpCounter::Malformed);
        }
        let ty = d[icmp.start];
        if ty != 128 && ty != 135 {
            return Verdict::Drop(IcmpCounter::NotEcho);
        }
        if !l4_good {
            let sum = checksum::pseudo_header_v6(&src, &dst, IpProtocol::ICMPV6, icmp.len() as u32)
                + checksum::sum(&d[icmp.clone()]);
            if checksum::fold(sum) != 0xffff {
                return Verdict::Drop(IcmpCounter::BadChecksum);
            }
        }
        if ty == 128 {
            if !self.v6.contains(&dst) {
                return Verdict::Drop(IcmpCounter::NotOurs);
            }
            self.reply_macs(d);
            {
                let mut ip = Ipv6Packet::new_unchecked(&mut d[HEADER_LEN..]);
                ip.set_src_addr(dst);
                ip.set_dst_addr(src);
                ip.set_hop_limit(64);
            }
            d[icmp.start] = 129;
            fill_icmp6_checksum(d, icmp, &dst, &src);
            return Verdict::Reply(IcmpCounter::Echo6Replies);
        }
        // Neighbour solicitation: hop limit 255, target at offset 8.
        if hop != 255 || icmp.len() < 24 || d[icmp.start + 1] != 0 {
            return Verdict::Drop(IcmpCounter::Malformed);
        }
        let mut t = [0u8; 16];
        t.copy_from_slice(&d[icmp.start + 8..icmp.start + 24]);
        let target = Ipv6Addr::from(t);
        if !self.v6.contains(&target) || src.is_unspecified() {
            // Not ours, or duplicate address detection (nothing to answer).
            return Verdict::Drop(IcmpCounter::NotOurs);
        }
        // Source link-layer address option (type 1), else the frame's source MAC.
        let mut peer_mac = [0u8; 6];
        peer_mac.copy_from_slice(&d[6..12]);
        let mut o = icmp.start + 24;
        while o + 8 <= icmp.end {
            let (ot, ol) = (d[o], d[o + 1] as usize * 8);
            if ol == 0 || o + ol > icmp.end {
                return Verdict::Drop(IcmpCounter::Malformed);
            }
            if ot == 1 && ol == 8 {
                peer_mac.copy_from_slice(&d[o + 2..o + 8]);
            }
            o += ol;
        }
        if d.len() < NA_FRAME_LEN {
            return Verdict::Resized(IcmpCounter::NaSent, NA_FRAME_LEN);
        }
        self.write_na(d, src, target, peer_mac);
        Verdict::Resized(IcmpCounter::NaSent, NA_FRAME_LEN)
    }

    /// Address a reply in place: to the sender's MAC, from ours. (Not a swap: the
    /// request may have been sent to a broadcast or multicast MAC, which must never
    /// become a source address.)
    fn reply_macs(&self, d: &mut [u8]) {
        d.copy_within(6..12, 0);
        d[6..12].copy_from_slice(&self.mac);
    }

    /// Write a solicited neighbour advertisement for `target` to `to` at the start of `d`.
    fn write_na(&self, d: &mut [u8], to: Ipv6Addr, target: Ipv6Addr, peer_mac: [u8; 6]) {
        d[0..6].copy_from_slice(&peer_mac);
        d[6..12].copy_from_slice(&self.mac);
        d[12..14].copy_from_slice(&EtherType::IPV6.0.to_be_bytes());
        let ip = &mut d[HEADER_LEN..HEADER_LEN + 40];
        ip[0..4].copy_from_slice(&[0x60, 0, 0, 0]);
        ip[4..6].copy_from_slice(&32u16.to_be_bytes());
        ip[6] = IpProtocol::ICMPV6.0;
        ip[7] = 255;
        ip[8..24].copy_from_slice(&target.octets());
        ip[24..40].copy_from_slice(&to.octets());
        let c = HEADER_LEN + 40;
        let icmp = &mut d[c..c + 32];
        icmp.fill(0);
        icmp[0] = 136;
        icmp[4] = self.na_flags; // solicited + override (+ router)
        icmp[8..24].copy_from_slice(&target.octets());
        icmp[24] = 2; // target link-layer address option, 8 bytes
        icmp[25] = 1;
        icmp[26..32].copy_from_slice(&self.mac);
        fill_icmp6_checksum(d, c..c + 32, &target, &to);
    }
}

/// Write the ICMPv6 checksum of the message at `icmp` in `d` (pseudo-header `src`, `dst`).
pub(crate) fn fill_icmp6_checksum(d: &mut [u8], icmp: std::ops::Range<usize>, src: &Ipv6Addr, dst: &Ipv6Addr) {
    d[icmp.start + 2] = 0;
    d[icmp.start + 3] = 0;
    let sum =
        checksum::pseudo_header_v6(src, dst, IpProtocol::ICMPV6, icmp.len() as u32) + checksum::sum(&d[icmp.clone()]);
    let c = !checksum::fold(sum);
    d[icmp.start + 2..icmp.start + 4].copy_from_slice(&c.to_be_bytes());
}

impl Node for IcmpEcho {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, next: &mut [u16; MAX_BURST]) -> Dispatch {
        for (i, slot) in next.iter_mut().enumerate().take(pkts.len()) {
            let l4_good = pkts.header(i).ol_flags & abi::RX_L4_CKSUM_GOOD != 0;
            let v = match pkts.data_mut(i) {
                Some(d) => self.one(d, l4_good),
                None => Verdict::Drop(IcmpCounter::Shared),
            };
            *slot = match v {
                Verdict::Reply(k) => {
                    cx.count(k, 1);
                    0
                }
                Verdict::Resized(k, len) => {
                    // Solicitation target, sender and MAC were read above; re-read them
                    // from the (unchanged) request before the frame is resized.
                    let d = pkts.data(i);
                    let na = if d.len() >= NA_FRAME_LEN { None } else { Some(self.na_from_request(d)) };
                    match (na, pkts.set_len(i, len)) {
                        (None, Some(_)) => {
                            cx.count(k, 1);
                            0
                        }
                        (Some(Some((to, target, mac))), Some(buf)) => {
                            self.write_na(buf, to, target, mac);
                            cx.count(k, 1);
                            0
                        }
                        _ => {
                            cx.count(IcmpCounter::Malformed, 1);
                            DROP
                        }
                    }
                }
                Verdict::Drop(k) => {
                    cx.count(k, 1);
                    DROP
                }
            };
        }
        Dispatch::Each
    }

    fn counters(&self) -> &'static [CounterSpec] {
        IcmpCounter::SPECS
    }
}

impl IcmpEcho {
    /// (sender, target, sender MAC) of a neighbour solicitation already validated by `v6`.
    fn na_from_request(&self, d: &[u8]) -> Option<(Ipv6Addr, Ipv6Addr, [u8; 6])> {
        let ip = Ipv6Packet::new_checked(&d[HEADER_LEN..]).ok()?;
        let (_, off) = upper_layer(&ip).ok()?;
        let c = HEADER_LEN + off;
        let end = (HEADER_LEN + 40 + ip.payload_len() as usize).min(d.len());
        let target: [u8; 16] = d.get(c + 8..c + 24)?.try_into().ok()?;
        let mut mac: [u8; 6] = d[6..12].try_into().ok()?;
        let mut o = c + 24;
        while o + 8 <= end {
            let (ot, ol) = (d[o], d[o + 1] as usize * 8);
            if ol == 0 {
                break;
            }
            if ot == 1 && ol == 8 {
                mac.copy_from_slice(&d[o + 2..o + 8]);
            }
            o += ol;
        }
        Some((ip.src_addr(), Ipv6Addr::from(target), mac))
    }
}

/// `icmp_echo`: echo replies and IPv6 neighbour advertisements.
pub const KIND: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "icmp_echo",
        doc: "answer ICMP/ICMPv6 echo requests and IPv6 neighbour solicitations for our addresses, in place",
        params: &[PORT, ParamSpec::new("addresses", ParamKind::IpList).required().doc("our IPv4 and IPv6 addresses")],
        nexts: Nexts::Fixed(&["out"]),
        ..NodeSpec::DEFAULT
    },
    build: |b, env| {
        let p = b.params();
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        for a in p.ip_list("addresses")? {
            match a {
                std::net::IpAddr::V4(v) => v4.push(*v),
                std::net::IpAddr::V6(v) => v6.push(*v),
            }
        }
        Ok(Box::new(IcmpEcho::new(v4, v6, env.port_mac(p.port("port")?)?)))
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::*;
    use ironpath_eal::{Mbuf, Mempool};
    use ironpath_graph::NodeStats;
    use ironpath_wire::icmpv6::{Icmpv6Packet, Icmpv6Repr, NeighborFlags};
    use ironpath_wire::{EthernetAddress, IpAddress};

    const SLLA: [u8; 6] = [0x02, 0, 0, 0, 0, 0x22];
    /// Solicited-node multicast address of fd00::2 and its MAC.
    const SNMA: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 2);
    const SNMA_MAC: [u8; 6] = [0x33, 0x33, 0xff, 0, 0, 2];
    const DATA: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz!";

    fn node() -> IcmpEcho {
        IcmpEcho::new(vec![Ipv4Addr::new(198, 18, 0, 9), US4], vec![US6], US_MAC)
    }

    /// Run the node once on `frames` with `ol` in every mbuf's flags.
    fn run(n: &mut IcmpEcho, st: &NodeStats, pool: &Mempool, frames: &[Vec<u8>], ol: u64) -> Vec<(u16, Vec<u8>)> {
        let mut b = burst(pool, frames);
        for i in 0..b.len() {
            b.header_mut(i).ol_flags |= ol;
        }
        let c = call(n, st, &mut b, 0);
        assert_eq!(c.dispatch, ironpath_graph::Dispatch::Each);
        outputs(&c, &mut b)
    }

    fn request4(ttl: u8, seq: u16, data: &[u8]) -> Vec<u8> {
        eth(US_MAC, PEER_MAC, 0x0800, &ipv4(PEER4, US4, 1, ttl, &icmp4_echo(false, 0x1234, seq, data)))
    }

    fn reply4(seq: u16, data: &[u8]) -> Vec<u8> {
        eth(PEER_MAC, US_MAC, 0x0800, &ipv4(US4, PEER4, 1, 64, &icmp4_echo(true, 0x1234, seq, data)))
    }

    /// A neighbour solicitation for `target` from `src` to `dst`, hop limit `hop`,
    /// followed by the raw `opts`.
    fn ns(src: Ipv6Addr, dst: Ipv6Addr, hop: u8, target: Ipv6Addr, opts: &[u8]) -> Vec<u8> {
        let mut m = vec![135, 0, 0, 0, 0, 0, 0, 0];
        m.extend_from_slice(&target.octets());
        m.extend_from_slice(opts);
        Icmpv6Packet::new_unchecked(&mut m[..]).fill_checksum(&src, &dst);
        eth(SNMA_MAC, PEER_MAC, 0x86dd, &ipv6(src, dst, 58, hop, &m))
    }

    fn slla(mac: [u8; 6]) -> Vec<u8> {
        let mut o = vec![1, 1];
        o.extend_from_slice(&mac);
        o
    }

    /// The advertisement we must send for a solicitation from the peer.
    fn na(dst_mac: [u8; 6]) -> Vec<u8> {
        let repr = Icmpv6Repr::NeighborAdvert {
            flags: NeighborFlags::SOLICITED | NeighborFlags::OVERRIDE,
            target_addr: US6,
            lladdr: Some(EthernetAddress(US_MAC)),
        };
        eth(dst_mac, US_MAC, 0x86dd, &ipv6(US6, PEER6, 58, 255, &icmp6(repr, US6, PEER6, &[])))
    }

    fn check_na(f: &[u8], dst_mac: [u8; 6]) {
        assert_eq!(f.len(), NA_FRAME_LEN);
        assert_eq!(&f[0..6], &dst_mac);
        assert_eq!(&f[6..12], &US_MAC);
        let ip = Ipv6Packet::new_checked(&f[14..]).expect("ipv6");
        assert_eq!((ip.src_addr(), ip.dst_addr(), ip.hop_limit(), ip.payload_len()), (US6, PEER6, 255, 32));
        let icmp = Icmpv6Packet::new_checked(&f[54..]).expect("icmpv6");
        let repr = Icmpv6Repr::parse(&icmp, &US6, &PEER6, true).expect("valid NA, checksum included");
        assert_eq!(
            repr,
            Icmpv6Repr::NeighborAdvert {
                flags: NeighborFlags::SOLICITED | NeighborFlags::OVERRIDE,
                target_addr: US6,
                lladdr: Some(EthernetAddress(US_MAC)),
            }
        );
        assert_eq!(f, &na(dst_mac)[..]);
    }

    #[test]
    fn ipv4_echo_request_becomes_the_reply() {
        let pool = pool(8);
        let mut n = node();
        let st = stats(&n);
        let out = run(&mut n, &st, &pool, &[request4(17, 1, DATA)], 0);
        assert_eq!(out.len(), 1);
        let (next, f) = &out[0];
        assert_eq!(*next, 0);
        let ip = Ipv4Packet::new_checked(&f[14..]).expect("ipv4");
        assert!(ip.verify_checksum());
        assert_eq!((ip.src_addr(), ip.dst_addr(), ip.ttl()), (US4, PEER4, 64));
        let icmp = ironpath_wire::Icmpv4Packet::new_checked(ip.payload()).expect("icmp");
        assert!(icmp.verify_checksum());
        assert_eq!(
            ironpath_wire::Icmpv4Repr::parse(&icmp, true),
            Ok(ironpath_wire::Icmpv4Repr::EchoReply { ident: 0x1234, seq_no: 1, data_len: DATA.len() })
        );
        assert_eq!(f, &reply4(1, DATA));
        assert_eq!(counter(&st, "echo_replies"), 1);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn ipv4_reply_checksum_matches_a_full_recomputation_for_every_sequence_number() {
        // Every ICMP checksum value occurs: the incremental update must never differ
        // from the checksum of the reply computed from scratch.
        let pool = pool(256);
        let mut n = node();
        let st = stats(&n);
        for chunk in (0..=u16::MAX).collect::<Vec<_>>().chunks(256) {
            let frames: Vec<_> = chunk.iter().map(|&s| request4(64, s, b"odd")).collect();
            let out = run(&mut n, &st, &pool, &frames, 0);
            for (&s, (next, f)) in chunk.iter().zip(&out) {
                assert_eq!((*next, f), (0, &reply4(s, b"odd")), "seq {s}");
            }
        }
        assert_eq!(counter(&st, "echo_replies"), 65536);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn reply_source_mac_is_ours_even_for_a_broadcast_request() {
        let pool = pool(8);
        let mut n = node();
        let st = stats(&n);
        let mut req = request4(64, 5, DATA);
        req[0..6].fill(0xff);
        let mut req6 = ping6(US6, 5, DATA);
        req6[0..6].copy_from_slice(&[0x33, 0x33, 0, 0, 0, 1]);
        let out = run(&mut n, &st, &pool, &[req, req6], 0);
        assert_eq!(out[0], (0, reply4(5, DATA)));
        assert_eq!(out[1].0, 0);
        assert_eq!(&out[1].1[0..12], &[PEER_MAC, US_MAC].concat()[..]);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn ipv4_packets_not_answered_are_dropped_by_reason() {
        let pool = pool(16);
        let mut n = node();
        let st = stats(&n);
        let not_ours = eth(US_MAC, PEER_MAC, 0x0800, &ipv4(PEER4, PEER4, 1, 64, &icmp4_echo(false, 1, 1, DATA)));
        let echo_reply = eth(US_MAC, PEER_MAC, 0x0800, &ipv4(PEER4, US4, 1, 64, &icmp4_echo(true, 1, 1, DATA)));
        let mut timestamp = icmp4_echo(false, 1, 1, &[0; 12]);
        timestamp[0] = 13;
        let timestamp = eth(US_MAC, PEER_MAC, 0x0800, &ipv4(PEER4, US4, 1, 64, &timestamp));
        let mut code1 = request4(64, 1, DATA);
        code1[35] = 1;
        let u = udp(IpAddress::V4(PEER4), IpAddress::V4(US4), 1, 7, DATA);
        let udp = eth(US_MAC, PEER_MAC, 0x0800, &ipv4(PEER4, US4, 17, 64, &u));
        let mut fragment = request4(64, 1, DATA);
        fragment[20] |= 0x20; // more fragments
        let mut bad_cksum = request4(64, 1, DATA);
        *bad_cksum.last_mut().unwrap() ^= 0x80;
        let mut icmp_too_short = request4(64, 1, b"");
        icmp_too_short[16..18].copy_from_slice(&24u16.to_be_bytes()); // ICMP: 4 bytes
        let frames = vec![
            not_ours,
            echo_reply,
            timestamp,
            code1,
            udp,
            fragment,
            bad_cksum,
            icmp_too_short,
            request4(64, 1, DATA)[..40].to_vec(), // IPv4 total length beyond the frame
            request4(64, 1, DATA)[..13].to_vec(), // no Ethernet header
            eth(US_MAC, PEER_MAC, 0x0806, &[0; 28]),
        ];
        let out = run(&mut n, &st, &pool, &frames, 0);
        assert!(out.iter().all(|(k, _)| *k == DROP), "{out:?}");
        // Dropped frames are left unchanged.
        for ((_, f), want) in out.iter().zip(&frames) {
            assert_eq!(f, want);
        }
        assert_eq!(counter(&st, "not_ours"), 1);
        assert_eq!(counter(&st, "not_echo"), 5);
        assert_eq!(counter(&st, "bad_checksum"), 1);
        assert_eq!(counter(&st, "malformed"), 4);
        assert_eq!(counter(&st, "echo_replies"), 0);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn hardware_verified_l4_checksum_is_trusted() {
        let pool = pool(8);
        let mut n = node();
        let st = stats(&n);
        let mut bad = request4(64, 1, DATA);
        *bad.last_mut().unwrap() ^= 0x80;
        let out = run(&mut n, &st, &pool, &[bad], abi::RX_L4_CKSUM_GOOD);
        assert_eq!(out[0].0, 0);
        assert_eq!((counter(&st, "echo_replies"), counter(&st, "bad_checksum")), (1, 0));
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn shared_packets_are_not_rewritten() {
        let pool = pool(8);
        let mut n = node();
        let st = stats(&n);
        let m = Mbuf::from_slice(&pool, &request4(64, 1, DATA)).expect("mbuf");
        let mut b = ironpath_eal::Burst::new();
        assert!(b.push(m.share()).is_ok());
        let c = call(&mut n, &st, &mut b, 0);
        assert_eq!(outputs(&c, &mut b), [(DROP, request4(64, 1, DATA))]);
        assert_eq!(m.data(), &request4(64, 1, DATA)[..]);
        assert_eq!(counter(&st, "shared"), 1);
        drop(m);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn ipv6_echo_request_becomes_the_reply() {
        let pool = pool(8);
        let mut n = node();
        let st = stats(&n);
        let out = run(&mut n, &st, &pool, &[ping6(US6, 9, DATA)], 0);
        let (next, f) = &out[0];
        assert_eq!(*next, 0);
        let ip = Ipv6Packet::new_checked(&f[14..]).expect("ipv6");
        assert_eq!((ip.src_addr(), ip.dst_addr(), ip.hop_limit()), (US6, PEER6, 64));
        let icmp = Icmpv6Packet::new_checked(&f[54..]).expect("icmpv6");
        assert!(icmp.verify_checksum(&US6, &PEER6));
        let repr = Icmpv6Repr::EchoReply { ident: 0x4321, seq_no: 9, data_len: DATA.len() };
        assert_eq!(Icmpv6Repr::parse(&icmp, &US6, &PEER6, true), Ok(repr));
        let want = eth(PEER_MAC, US_MAC, 0x86dd, &ipv6(US6, PEER6, 58, 64, &icmp6(repr, US6, PEER6, DATA)));
        assert_eq!(f, &want);
        assert_eq!(counter(&st, "echo6_replies"), 1);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn ipv6_packets_not_answered_are_dropped_by_reason() {
        let pool = pool(16);
        let mut n = node();
        let st = stats(&n);
        let mut bad = ping6(US6, 1, DATA);
        *bad.last_mut().unwrap() ^= 1;
        let u = udp(IpAddress::V6(PEER6), IpAddress::V6(US6), 1, 7, DATA);
        let udp6 = eth(US_MAC, PEER_MAC, 0x86dd, &ipv6(PEER6, US6, 17, 64, &u));
        let reply = Icmpv6Repr::EchoReply { ident: 1, seq_no: 1, data_len: 0 };
        let reply = eth(US_MAC, PEER_MAC, 0x86dd, &ipv6(PEER6, US6, 58, 64, &icmp6(reply, PEER6, US6, &[])));
        let frames = vec![
            ping6(PEER6, 1, DATA),              // not ours
            bad,                                // bad checksum
            udp6,                               // not ICMPv6
            reply,                              // not a request
            ping6(US6, 1, DATA)[..60].to_vec(), // payload length beyond the frame
            ping6(US6, 1, b"")[..14 + 40 + 4].to_vec(),
        ];
        let mut short = ping6(US6, 1, b"");
        short[18..20].copy_from_slice(&4u16.to_be_bytes()); // ICMPv6 message of 4 bytes
        let frames = [frames, vec![short]].concat();
        let out = run(&mut n, &st, &pool, &frames, 0);
        assert!(out.iter().all(|(k, _)| *k == DROP), "{out:?}");
        assert_eq!(counter(&st, "not_ours"), 1);
        assert_eq!(counter(&st, "bad_checksum"), 1);
        assert_eq!(counter(&st, "not_echo"), 2);
        assert_eq!(counter(&st, "malformed"), 3);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn solicitation_with_source_lladdr_gets_an_advertisement_to_that_address() {
        let pool = pool(8);
        let mut n = node();
        let st = stats(&n);
        let req = ns(PEER6, SNMA, 255, US6, &slla(SLLA));
        assert_eq!(req.len(), NA_FRAME_LEN);
        let out = run(&mut n, &st, &pool, &[req], 0);
        assert_eq!(out[0].0, 0);
        check_na(&out[0].1, SLLA);
        assert_eq!(counter(&st, "na_sent"), 1);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn solicitation_without_options_is_answered_by_growing_the_frame() {
        let pool = pool(8);
        let mut n = node();
        let st = stats(&n);
        let req = ns(PEER6, SNMA, 255, US6, &[]);
        assert_eq!(req.len(), NA_FRAME_LEN - 8);
        let out = run(&mut n, &st, &pool, &[req], 0);
        assert_eq!(out[0].0, 0);
        // No source link-layer option: the frame's source MAC.
        check_na(&out[0].1, PEER_MAC);
        assert_eq!(counter(&st, "na_sent"), 1);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn longer_solicitation_is_answered_by_shrinking_the_frame() {
        let pool = pool(8);
        let mut n = node();
        let st = stats(&n);
        // A nonce option (type 14) after the source link-layer address.
        let opts = [slla(SLLA), vec![14, 1, 1, 2, 3, 4, 5, 6]].concat();
        let req = ns(PEER6, SNMA, 255, US6, &opts);
        // The same solicitation without options, with an SLLA option first in a short frame.
        let short = ns(PEER6, SNMA, 255, US6, &[vec![14, 1, 9, 9, 9, 9, 9, 9], slla(SLLA)].concat());
        let out = run(&mut n, &st, &pool, &[req, short], 0);
        check_na(&out[0].1, SLLA);
        check_na(&out[1].1, SLLA);
        assert_eq!(counter(&st, "na_sent"), 2);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn solicitations_not_answered_are_dropped() {
        let pool = pool(16);
        let mut n = node();
        let st = stats(&n);
        let mut bad_cksum = ns(PEER6, SNMA, 255, US6, &slla(SLLA));
        bad_cksum[60] ^= 1;
        let frames = vec![
            ns(Ipv6Addr::UNSPECIFIED, SNMA, 255, US6, &[]),       // DAD: not_ours
            ns(PEER6, SNMA, 255, PEER6, &slla(SLLA)),             // other target: not_ours
            ns(PEER6, SNMA, 64, US6, &slla(SLLA)),                // hop limit not 255: malformed
            ns(PEER6, SNMA, 255, US6, &[1, 0, 0, 0, 0, 0, 0, 0]), // zero option length: malformed
            ns(PEER6, SNMA, 255, US6, &[1, 2, 0, 0, 0, 0, 0, 0]), // option beyond the message: malformed
            bad_cksum,                                            // bad_checksum
        ];
        let out = run(&mut n, &st, &pool, &frames, 0);
        assert!(out.iter().all(|(k, _)| *k == DROP), "{out:?}");
        assert_eq!(counter(&st, "not_ours"), 2);
        assert_eq!(counter(&st, "malformed"), 3);
        assert_eq!(counter(&st, "bad_checksum"), 1);
        assert_eq!(counter(&st, "na_sent"), 0);
        assert_eq!(pool.stats().in_use, 0);
    }
}
