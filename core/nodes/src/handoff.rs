//! `handoff`: spread packets across lcores by flow, as VPP's worker handoff does.
//!
//! Each packet's flow picks one of the node's connected next edges `w0` .. `w15`,
//! which lead to nodes on other lcores (the engine joins lcores with ring edges). A
//! flow is the addresses, the protocol and, for TCP, UDP and SCTP, the ports (IPv4
//! and IPv6, after up to two VLAN tags; the ports of a fragmented IPv4 datagram are
//! left out, so that all its fragments go one way); a frame that is not IP is hashed
//! by its MAC addresses. With `symmetric: true` (the default) both directions of a
//! connection take the same edge, so one lcore sees all of it (a TCP termination, a
//! stateful firewall). Packets of one flow always take the same edge, and a ring
//! keeps its order, so each flow's packets leave their worker in the order they came.
//! The hash is keyed with 128 random bits: a peer cannot aim its flows at one worker.
//! A ring that is full drops at the edge (counted by the engine's ring statistics);
//! with no next edge connected, every packet is dropped.

use crate::hash::{random_secret, KeyedState};
use crate::kind::NodeKind;
use ironpath_config::{Nexts, NodeSpec, ParamKind, ParamSpec};
use ironpath_eal::{Burst, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx};
use ironpath_wire::ethernet::{l3_offset, EtherType};
use std::hash::{BuildHasher, Hasher};

/// The next edges a handoff may connect (in index order).
pub const NEXTS: &[&str] =
    &["w0", "w1", "w2", "w3", "w4", "w5", "w6", "w7", "w8", "w9", "w10", "w11", "w12", "w13", "w14", "w15"];

ironpath_graph::counters! {
    /// What `handoff` counts.
    pub enum HandoffCounter {
        Ip("ip", "packets spread by their IP flow"),
        NotIp("not_ip", "packets spread by their MAC addresses (not IP, or a header cut short)"),
    }
}

/// The node.
pub struct Handoff {
    /// Next-edge indices of the connected workers.
    workers: Vec<u16>,
    symmetric: bool,
    key: KeyedState,
}

impl Handoff {
    /// A handoff to next edges `workers`, both directions of a flow alike when
    /// `symmetric`, its hash keyed with `key`.
    pub fn new(workers: &[u16], symmetric: bool, key: [u8; 16]) -> Self {
        Self { workers: workers.to_vec(), symmetric, key: KeyedState::new(key) }
    }
}

/// A flow's fields in a frame: (lower endpoint, higher endpoint, protocol), an
/// endpoint being (address, port); `None` if the frame is not IP.
fn flow_hash(frame: &[u8], symmetric: bool, key: &KeyedState) -> Option<u64> {
    let (ethertype, off) = l3_offset(frame).ok()?;
    let ip = frame.get(off..)?;
    let (src, dst, proto, l4): (&[u8], &[u8], u8, Option<&[u8]>) = match ethertype {
        EtherType::IPV4 => {
            let ihl = usize::from(ip.first()? & 0x0f) * 4;
            if ip.len() < 20 || ihl < 20 {
                return None;
            }
            let fragmented = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
            (&ip[12..16], &ip[16..20], ip[9], if fragmented { None } else { ip.get(ihl..) })
        }
        EtherType::IPV6 => {
            if ip.len() < 40 {
                return None;
            }
            (&ip[8..24], &ip[24..40], ip[6], ip.get(40..))
        }
        _ => return None,
    };
    let ports = match (proto, l4) {
        (6 | 17 | 132, Some(l4)) if l4.len() >= 4 => {
            [u16::from_be_bytes([l4[0], l4[1]]), u16::from_be_bytes([l4[2], l4[3]])]
        }
        _ => [0, 0],
    };
    let (mut a, mut b) = ((src, ports[0]), (dst, ports[1]));
    if symmetric && b < a {
        std::mem::swap(&mut a, &mut b);
    }
    let mut h = key.build_hasher();
    h.write(a.0);
    h.write_u16(a.1);
    h.write(b.0);
    h.write_u16(b.1);
    h.write_u8(proto);
    Some(h.finish())
}

/// The hash of a frame's MAC addresses (both orders alike when `symmetric`).
pub(crate) fn mac_hash(frame: &[u8], symmetric: bool, key: &KeyedState) -> u64 {
    let (mut a, mut b) = (frame.get(..6).unwrap_or(&[]), frame.get(6..12).unwrap_or(&[]));
    if symmetric && b < a {
        std::mem::swap(&mut a, &mut b);
    }
    let mut h = key.build_hasher();
    h.write(a);
    h.write(b);
    h.finish()
}

impl Node for Handoff {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, next: &mut [u16; MAX_BURST]) -> Dispatch {
        let n = self.workers.len() as u64;
        if n == 0 {
            // No worker connected: nowhere to send (the engine counts the drops).
            return Dispatch::All(ironpath_graph::DROP);
        }
        let (mut ip, mut not_ip) = (0, 0);
        for (i, nx) in next.iter_mut().enumerate().take(pkts.len()) {
            let d = pkts.data(i);
            let h = match flow_hash(d, self.symmetric, &self.key) {
                Some(h) => {
                    ip += 1;
                    h
                }
                None => {
                    not_ip += 1;
                    mac_hash(d, self.symmetric, &self.key)
                }
            };
            // The high bits of h * n: an even split without a division.
            *nx = self.workers[((u128::from(h) * u128::from(n)) >> 64) as usize];
        }
        cx.count(HandoffCounter::Ip, ip);
        if not_ip > 0 {
            cx.count(HandoffCounter::NotIp, not_ip);
        }
        Dispatch::Each
    }

    fn counters(&self) -> &'static [CounterSpec] {
        HandoffCounter::SPECS
    }
}

/// `handoff`.
pub const KIND: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "handoff",
        doc: "spread packets across the connected next edges w0..w15 (nodes on other lcores) by flow hash, each flow's order kept",
        params: &[ParamSpec::new("symmetric", ParamKind::Bool).default("true").doc("both directions of a connection to the same edge")],
        nexts: Nexts::Fixed(NEXTS),
        ..NodeSpec::DEFAULT
    },
    build: |b, _env| {
        let workers: Vec<u16> =
            NEXTS.iter().enumerate().filter(|(_, n)| b.connected.contains(n)).map(|(i, _)| i as u16).collect();
        let mut key = [0u8; 16];
        random_secret(&mut key)?;
        Ok(Box::new(Handoff::new(&workers, b.params().bool("symmetric")?, key)))
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{burst, call, counter, eth, ipv4, pool, stats, PEER4, PEER_MAC, US4, US_MAC};
    use std::net::Ipv4Addr;

    fn udp4(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16) -> Vec<u8> {
        let mut udp = [sport.to_be_bytes(), dport.to_be_bytes(), 8u16.to_be_bytes(), [0, 0]].concat();
        udp.extend_from_slice(&[0; 8]);
        eth(US_MAC, PEER_MAC, 0x0800, &ipv4(src, dst, 17, 64, &udp))
    }

    fn handoff(workers: &[u16], symmetric: bool) -> Handoff {
        Handoff::new(workers, symmetric, [9; 16])
    }

    /// The next edge of each frame.
    fn nexts(h: &mut Handoff, frames: &[Vec<u8>]) -> Vec<u16> {
        let p = pool(512);
        let st = stats(h);
        let mut b = burst(&p, frames);
        let c = call(h, &st, &mut b, 0);
        let v = c.next[..b.len()].to_vec();
        b.free_all();
        v
    }

    #[test]
    fn a_flow_always_takes_one_edge_both_directions_too() {
        let mut h = handoff(&[0, 1, 2, 3], true);
        let fwd: Vec<Vec<u8>> = (0..64).map(|i| udp4(PEER4, US4, 1000 + i, 53)).collect();
        let rev: Vec<Vec<u8>> = (0..64).map(|i| udp4(US4, PEER4, 53, 1000 + i)).collect();
        let (a, b) = (nexts(&mut h, &fwd), nexts(&mut h, &rev));
        assert_eq!(a, b, "symmetric: replies go where requests went");
        assert_eq!(nexts(&mut h, &fwd), a, "the same flows, the same edges");
        let mut d = handoff(&[0, 1, 2, 3], false);
        assert_ne!(nexts(&mut d, &fwd), nexts(&mut d, &rev), "directional: the two directions are two flows");
    }

    #[test]
    fn flows_spread_over_the_connected_edges_only() {
        let mut h = handoff(&[1, 5, 9], true);
        let frames: Vec<Vec<u8>> = (0..240).map(|i| udp4(PEER4, US4, 2000 + i, 80)).collect();
        let got = nexts(&mut h, &frames);
        for w in [1, 5, 9] {
            let k = got.iter().filter(|&&x| x == w).count();
            assert!((40..=120).contains(&k), "edge {w} took {k} of 240 flows: {got:?}");
        }
        assert!(got.iter().all(|x| [1, 5, 9].contains(x)));
    }

    #[test]
    fn fragments_of_a_datagram_and_non_ip_frames_stay_together() {
        let mut h = handoff(&[0, 1, 2, 3, 4, 5, 6, 7], true);
        // The first fragment (MF set) carries ports, the others do not: all go one way.
        let mut first = udp4(PEER4, US4, 4000, 53);
        first[14 + 6] = 0x20; // MF
        let mut later = udp4(PEER4, US4, 0x1234, 0x5678); // bytes past the header are payload
        later[14 + 6] = 0x00;
        later[14 + 7] = 0x10; // offset 16 x 8
        let frames: Vec<Vec<u8>> = (0..16).map(|i| if i % 2 == 0 { first.clone() } else { later.clone() }).collect();
        let got = nexts(&mut h, &frames);
        assert!(got.iter().all(|&x| x == got[0]), "{got:?}");
        let arp = eth([0xff; 6], PEER_MAC, 0x0806, &[0; 28]);
        let runt = vec![1u8; 5];
        let p = pool(16);
        let st = stats(&h);
        let mut b = burst(&p, &[arp.clone(), arp, runt]);
        let c = call(&mut h, &st, &mut b, 0);
        assert_eq!(c.next[0], c.next[1]);
        assert_eq!(counter(&st, "not_ip"), 3);
        b.free_all();
    }
}
