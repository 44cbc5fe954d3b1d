//! `classify`: send each packet to a named next edge by ethertype and IP protocol
//! (VLAN tags skipped), recording `l2_len`/`l3_len` in the mbuf. A class whose
//! edge is not connected falls back to the wider one: `icmp`/`tcp`/`udp` to `ipv4`
//! (or `ipv6`), those to `other`. Truncated or malformed headers and IPv4 headers
//! with a bad checksum are dropped and counted.

use ironpath_eal::abi;
use ironpath_eal::{Burst, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx, DROP};
use ironpath_wire::ethernet::{l3_offset, EtherType};
use ironpath_wire::ipv4::Ipv4Packet;
use ironpath_wire::ipv6::{upper_layer, Ipv6Packet};
use ironpath_wire::IpProtocol;

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

static COUNTERS: [CounterSpec; 3] = [
    CounterSpec { name: "malformed", unit: "packets dropped (truncated or bad header)" },
    CounterSpec { name: "bad_ip_checksum", unit: "packets dropped" },
    CounterSpec { name: "vlan", unit: "packets with a VLAN tag" },
];

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
    fn one(&self, ol_flags: u64, frame: &[u8], cx: &NodeCx<'_>) -> (u16, u8, u16) {
        let Ok((et, off)) = l3_offset(frame) else {
            cx.count(0, 1);
            return (DROP, 0, 0);
        };
        if off > 14 {
            cx.count(2, 1);
        }
        let l2 = off as u8;
        let l3 = &frame[off..];
        match et {
            EtherType::IPV4 => {
                let Ok(ip) = Ipv4Packet::new_checked(l3) else {
                    cx.count(0, 1);
                    return (DROP, l2, 0);
                };
                if ol_flags & abi::RX_IP_CKSUM_GOOD == 0 && !ip.verify_checksum() {
                    cx.count(1, 1);
                    return (DROP, l2, 0);
                }
                (self.v4[l4_class(ip.next_header())], l2, ip.header_len() as u16)
            }
            EtherType::IPV6 => {
                let Ok(ip) = Ipv6Packet::new_checked(l3) else {
                    cx.count(0, 1);
                    return (DROP, l2, 0);
                };
                match upper_layer(&ip) {
                    Ok((proto, l4off)) => (self.v6[l4_class6(proto)], l2, l4off as u16),
                    Err(_) => {
                        cx.count(0, 1);
                        (DROP, l2, 0)
                    }
                }
            }
            EtherType::ARP => (self.arp, l2, 0),
            _ => (self.other, l2, 0),
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
            let (k, l2, l3) = self.one(pkts.header(i).ol_flags, pkts.data(i), cx);
            let h = pkts.header_mut(i);
            h.l2_len = l2;
            h.l3_len = l3;
            *slot = k;
        }
        Dispatch::Each
    }

    fn counters(&self) -> &'static [CounterSpec] {
        &COUNTERS
    }
}
