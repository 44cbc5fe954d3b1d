//! `icmp_echo`: answers ICMP echo requests (IPv4) and ICMPv6 echo requests and
//! neighbour solicitations (IPv6) addressed to our addresses, rewriting each
//! request into its reply in place. Everything else is dropped and counted.

use ironpath_eal::abi;
use ironpath_eal::{Burst, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx, DROP};
use ironpath_wire::checksum;
use ironpath_wire::ethernet::{EtherType, HEADER_LEN};
use ironpath_wire::ipv4::Ipv4Packet;
use ironpath_wire::ipv6::{upper_layer, Ipv6Packet};
use ironpath_wire::IpProtocol;
use std::net::{Ipv4Addr, Ipv6Addr};

static COUNTERS: [CounterSpec; 8] = [
    CounterSpec { name: "echo_replies", unit: "ICMP echo replies" },
    CounterSpec { name: "echo6_replies", unit: "ICMPv6 echo replies" },
    CounterSpec { name: "na_sent", unit: "neighbour advertisements" },
    CounterSpec { name: "not_ours", unit: "packets dropped (other destination)" },
    CounterSpec { name: "not_echo", unit: "packets dropped (other ICMP types)" },
    CounterSpec { name: "bad_checksum", unit: "packets dropped" },
    CounterSpec { name: "malformed", unit: "packets dropped" },
    CounterSpec { name: "shared", unit: "packets dropped (data shared, cannot rewrite)" },
];
const ECHO: usize = 0;
const ECHO6: usize = 1;
const NA: usize = 2;
const NOT_OURS: usize = 3;
const NOT_ECHO: usize = 4;
const BAD_CKSUM: usize = 5;
const MALFORMED: usize = 6;
const SHARED: usize = 7;

/// Length of a neighbour advertisement frame with a target link-layer address option.
const NA_FRAME_LEN: usize = HEADER_LEN + 40 + 32;

/// The node.
pub struct IcmpEcho {
    v4: Vec<Ipv4Addr>,
    v6: Vec<Ipv6Addr>,
    mac: [u8; 6],
}

enum Verdict {
    /// Reply written in place; the frame keeps its length.
    Reply(usize),
    /// Reply written; the frame now has this length.
    Resized(usize, usize),
    Drop(usize),
}

impl IcmpEcho {
    /// Answer for these addresses, with `mac` as our link-layer address.
    pub fn new(v4: Vec<Ipv4Addr>, v6: Vec<Ipv6Addr>, mac: [u8; 6]) -> Self {
        Self { v4, v6, mac }
    }

    fn one(&self, d: &mut [u8], l4_good: bool) -> Verdict {
        if d.len() < HEADER_LEN {
            return Verdict::Drop(MALFORMED);
        }
        match EtherType(u16::from_be_bytes([d[12], d[13]])) {
            EtherType::IPV4 => self.v4_echo(d, l4_good),
            EtherType::IPV6 => self.v6(d, l4_good),
            _ => Verdict::Drop(MALFORMED),
        }
    }

    fn v4_echo(&self, d: &mut [u8], l4_good: bool) -> Verdict {
        let (hl, tl, dst) = match Ipv4Packet::new_checked(&d[HEADER_LEN..]) {
            Ok(ip) if ip.next_header() == IpProtocol::ICMP && !ip.more_frags() && ip.frag_offset() == 0 => {
                (ip.header_len() as usize, ip.total_len() as usize, ip.dst_addr())
            }
            Ok(_) => return Verdict::Drop(NOT_ECHO),
            Err(_) => return Verdict::Drop(MALFORMED),
        };
        if !self.v4.contains(&dst) {
            return Verdict::Drop(NOT_OURS);
        }
        let icmp = HEADER_LEN + hl..HEADER_LEN + tl;
        if icmp.len() < 8 {
            return Verdict::Drop(MALFORMED);
        }
        if d[icmp.start] != 8 || d[icmp.start + 1] != 0 {
            return Verdict::Drop(NOT_ECHO);
        }
        if !l4_good && checksum::data(&d[icmp.clone()]) != 0xffff {
            return Verdict::Drop(BAD_CKSUM);
        }
        swap_macs(d);
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
        Verdict::Reply(ECHO)
    }

    fn v6(&self, d: &mut [u8], l4_good: bool) -> Verdict {
        let (src, dst, plen, hop, off) = match Ipv6Packet::new_checked(&d[HEADER_LEN..]) {
            Ok(ip) => match upper_layer(&ip) {
                Ok((IpProtocol::ICMPV6, off)) => {
                    (ip.src_addr(), ip.dst_addr(), ip.payload_len() as usize, ip.hop_limit(), off)
                }
                Ok(_) => return Verdict::Drop(NOT_ECHO),
                Err(_) => return Verdict::Drop(MALFORMED),
            },
            Err(_) => return Verdict::Drop(MALFORMED),
        };
        let icmp = HEADER_LEN + off..HEADER_LEN + 40 + plen;
        if icmp.start >= icmp.end || icmp.len() < 8 || icmp.end > d.len() {
            return Verdict::Drop(MALFORMED);
        }
        let ty = d[icmp.start];
        if ty != 128 && ty != 135 {
            return Verdict::Drop(NOT_ECHO);
        }
        if !l4_good {
            let sum = checksum::pseudo_header_v6(&src, &dst, IpProtocol::ICMPV6, icmp.len() as u32)
                + checksum::sum(&d[icmp.clone()]);
            if checksum::fold(sum) != 0xffff {
                return Verdict::Drop(BAD_CKSUM);
            }
        }
        if ty == 128 {
            if !self.v6.contains(&dst) {
                return Verdict::Drop(NOT_OURS);
            }
            swap_macs(d);
            {
                let mut ip = Ipv6Packet::new_unchecked(&mut d[HEADER_LEN..]);
                ip.set_src_addr(dst);
                ip.set_dst_addr(src);
                ip.set_hop_limit(64);
            }
            d[icmp.start] = 129;
            fill_icmp6_checksum(d, icmp, &dst, &src);
            return Verdict::Reply(ECHO6);
        }
        // Neighbour solicitation: hop limit 255, target at offset 8.
        if hop != 255 || icmp.len() < 24 || d[icmp.start + 1] != 0 {
            return Verdict::Drop(MALFORMED);
        }
        let mut t = [0u8; 16];
        t.copy_from_slice(&d[icmp.start + 8..icmp.start + 24]);
        let target = Ipv6Addr::from(t);
        if !self.v6.contains(&target) || src.is_unspecified() {
            // Not ours, or duplicate address detection (nothing to answer).
            return Verdict::Drop(NOT_OURS);
        }
        // Source link-layer address option (type 1), else the frame's source MAC.
        let mut peer_mac = [0u8; 6];
        peer_mac.copy_from_slice(&d[6..12]);
        let mut o = icmp.start + 24;
        while o + 8 <= icmp.end {
            let (ot, ol) = (d[o], d[o + 1] as usize * 8);
            if ol == 0 || o + ol > icmp.end {
                return Verdict::Drop(MALFORMED);
            }
            if ot == 1 && ol == 8 {
                peer_mac.copy_from_slice(&d[o + 2..o + 8]);
            }
            o += ol;
        }
        if d.len() < NA_FRAME_LEN {
            return Verdict::Resized(NA, NA_FRAME_LEN);
        }
        self.write_na(d, src, target, peer_mac);
        Verdict::Resized(NA, NA_FRAME_LEN)
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
        icmp[4] = 0x60; // solicited + override
        icmp[8..24].copy_from_slice(&target.octets());
        icmp[24] = 2; // target link-layer address option, 8 bytes
        icmp[25] = 1;
        icmp[26..32].copy_from_slice(&self.mac);
        fill_icmp6_checksum(d, c..c + 32, &target, &to);
    }
}

fn swap_macs(d: &mut [u8]) {
    let mut a = [0u8; 6];
    a.copy_from_slice(&d[0..6]);
    d.copy_within(6..12, 0);
    d[6..12].copy_from_slice(&a);
}

fn fill_icmp6_checksum(d: &mut [u8], icmp: std::ops::Range<usize>, src: &Ipv6Addr, dst: &Ipv6Addr) {
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
                None => Verdict::Drop(SHARED),
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
                            cx.count(MALFORMED, 1);
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
        &COUNTERS
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
