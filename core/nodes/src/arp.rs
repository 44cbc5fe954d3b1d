//! `arp`: answers ARP requests for our IPv4 addresses, learns neighbours, and
//! resolves the destination MAC of IPv4 packets we send.
//!
//! Two kinds of input arrive on the same node:
//! * ARP frames (from `classify`): a request for one of our addresses is turned
//!   into the reply in place; a reply (or a request from a neighbour we wait for)
//!   fills the neighbour cache and releases the packets held for it;
//! * IPv4 frames to send (from a node producing traffic): the destination MAC is
//!   set from the cache; an unknown neighbour gets an ARP request (retried every
//!   `retry`, up to `max_tries`) and its packets are held, at most `hold` each;
//!   held packets of a neighbour that never answers are dropped and counted.
//!
//! Everything runs on the node's lcore: no lock. The node is polled so retries
//! and timeouts happen without traffic.

use ironpath_eal::{Burst, Mbuf, Mempool, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx};
use ironpath_wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use ironpath_wire::ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr, HEADER_LEN};
use ironpath_wire::ipv4::Ipv4Packet;
use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;

static COUNTERS: [CounterSpec; 10] = [
    CounterSpec { name: "replies_sent", unit: "ARP replies" },
    CounterSpec { name: "requests_sent", unit: "ARP requests" },
    CounterSpec { name: "learned", unit: "neighbour entries added or updated" },
    CounterSpec { name: "resolved", unit: "IPv4 packets sent with a cached MAC" },
    CounterSpec { name: "held", unit: "IPv4 packets held awaiting resolution" },
    CounterSpec { name: "hold_full", unit: "packets dropped (hold queue full)" },
    CounterSpec { name: "unresolved", unit: "packets dropped (no reply after max_tries)" },
    CounterSpec { name: "malformed", unit: "packets dropped" },
    CounterSpec { name: "ignored", unit: "ARP packets not for us" },
    CounterSpec { name: "alloc_failed", unit: "ARP requests not sent (mempool empty)" },
];
const REPLIES: usize = 0;
const REQUESTS: usize = 1;
const LEARNED: usize = 2;
const RESOLVED: usize = 3;
const HELD: usize = 4;
const HOLD_FULL: usize = 5;
const UNRESOLVED: usize = 6;
const MALFORMED: usize = 7;
const IGNORED: usize = 8;
const ALLOC_FAILED: usize = 9;

/// Settings of an `arp` node.
#[derive(Clone, Debug)]
pub struct ArpConfig {
    /// Our MAC (the port's).
    pub mac: [u8; 6],
    /// The IPv4 addresses we answer for; the first is the sender of our requests.
    pub addresses: Vec<Ipv4Addr>,
    /// Packets held per unresolved neighbour.
    pub hold: usize,
    /// TSC ticks between requests for one neighbour.
    pub retry_tsc: u64,
    /// Requests sent before giving up on a neighbour.
    pub max_tries: u32,
    /// Most neighbour entries (the oldest is evicted beyond it).
    pub max_entries: usize,
}

struct Pending {
    held: VecDeque<Mbuf>,
    last_request: u64,
    tries: u32,
}

/// The node.
pub struct Arp {
    cfg: ArpConfig,
    pool: Mempool,
    cache: HashMap<Ipv4Addr, ([u8; 6], u64)>,
    pending: HashMap<Ipv4Addr, Pending>,
    out: Burst,
}

impl Arp {
    /// A node that allocates its requests from `pool`.
    pub fn new(cfg: ArpConfig, pool: Mempool) -> Self {
        Self { cfg, pool, cache: HashMap::new(), pending: HashMap::new(), out: Burst::new() }
    }

    /// The cached MAC of `ip`.
    pub fn lookup(&self, ip: Ipv4Addr) -> Option<[u8; 6]> {
        self.cache.get(&ip).map(|e| e.0)
    }

    fn learn(&mut self, cx: &NodeCx<'_>, ip: Ipv4Addr, mac: [u8; 6]) {
        if ip.is_unspecified() || mac[0] & 1 != 0 {
            return;
        }
        if !self.cache.contains_key(&ip) && self.cache.len() >= self.cfg.max_entries {
            if let Some(oldest) = self.cache.iter().min_by_key(|(_, v)| v.1).map(|(k, _)| *k) {
                self.cache.remove(&oldest);
            }
        }
        self.cache.insert(ip, (mac, cx.now_tsc));
        cx.count(LEARNED, 1);
        if let Some(p) = self.pending.remove(&ip) {
            for m in p.held {
                self.send_resolved(cx, m, mac);
            }
        }
    }

    fn send_resolved(&mut self, cx: &NodeCx<'_>, mut m: Mbuf, mac: [u8; 6]) {
        let ours = self.cfg.mac;
        if let Ok(d) = m.data_mut() {
            d[0..6].copy_from_slice(&mac);
            d[6..12].copy_from_slice(&ours);
            if self.out.push(m).is_ok() {
                cx.count(RESOLVED, 1);
                return;
            }
        }
        cx.count(MALFORMED, 1);
    }

    fn handle_arp(&mut self, cx: &NodeCx<'_>, mut m: Mbuf) {
        let repr = match ArpPacket::new_checked(&m.data()[HEADER_LEN..]).and_then(|p| ArpRepr::parse(&p)) {
            Ok(r) => r,
            Err(_) => {
                cx.count(MALFORMED, 1);
                return;
            }
        };
        let for_us = self.cfg.addresses.contains(&repr.target_protocol_addr);
        // RFC 826: update an entry we have (or wait for); add one when the packet is for us.
        let sender = repr.source_protocol_addr;
        if for_us || self.cache.contains_key(&sender) || self.pending.contains_key(&sender) {
            self.learn(cx, sender, repr.source_hardware_addr.0);
        }
        if !(for_us && repr.operation == ArpOperation::Request) {
            cx.count(IGNORED, u64::from(!for_us));
            return;
        }
        let reply = ArpRepr {
            operation: ArpOperation::Reply,
            source_hardware_addr: EthernetAddress(self.cfg.mac),
            source_protocol_addr: repr.target_protocol_addr,
            target_hardware_addr: repr.source_hardware_addr,
            target_protocol_addr: repr.source_protocol_addr,
        };
        let Ok(d) = m.data_mut() else {
            cx.count(MALFORMED, 1);
            return;
        };
        let mut f = EthernetFrame::new_unchecked(&mut d[..]);
        f.set_dst_addr(repr.source_hardware_addr);
        f.set_src_addr(EthernetAddress(self.cfg.mac));
        reply.emit(&mut ArpPacket::new_unchecked(&mut d[HEADER_LEN..]));
        if self.out.push(m).is_ok() {
            cx.count(REPLIES, 1);
        }
    }

    fn request(&mut self, cx: &NodeCx<'_>, target: Ipv4Addr) {
        let Ok(mut m) = Mbuf::alloc(&self.pool) else {
            cx.count(ALLOC_FAILED, 1);
            return;
        };
        let Ok(d) = m.append(60) else {
            cx.count(ALLOC_FAILED, 1);
            return;
        };
        d.fill(0);
        let eth = EthernetRepr {
            src_addr: EthernetAddress(self.cfg.mac),
            dst_addr: EthernetAddress::BROADCAST,
            ethertype: EtherType::ARP,
        };
        eth.emit(&mut EthernetFrame::new_unchecked(&mut d[..]));
        ArpRepr {
            operation: ArpOperation::Request,
            source_hardware_addr: EthernetAddress(self.cfg.mac),
            source_protocol_addr: self.cfg.addresses.first().copied().unwrap_or(Ipv4Addr::UNSPECIFIED),
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: target,
        }
        .emit(&mut ArpPacket::new_unchecked(&mut d[HEADER_LEN..]));
        if self.out.push(m).is_ok() {
            cx.count(REQUESTS, 1);
        }
    }

    fn resolve(&mut self, cx: &NodeCx<'_>, m: Mbuf) {
        let dst = match Ipv4Packet::new_checked(&m.data()[HEADER_LEN..]) {
            Ok(ip) => ip.dst_addr(),
            Err(_) => {
                cx.count(MALFORMED, 1);
                return;
            }
        };
        if dst.is_broadcast() {
            return self.send_resolved(cx, m, [0xff; 6]);
        }
        if dst.is_multicast() {
            let o = dst.octets();
            return self.send_resolved(cx, m, [0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]]);
        }
        if let Some(mac) = self.lookup(dst) {
            return self.send_resolved(cx, m, mac);
        }
        let first = !self.pending.contains_key(&dst);
        let p = self.pending.entry(dst).or_insert_with(|| Pending {
            held: VecDeque::new(),
            last_request: cx.now_tsc,
            tries: 1,
        });
        if p.held.len() < self.cfg.hold {
            p.held.push_back(m);
            cx.count(HELD, 1);
        } else {
            cx.count(HOLD_FULL, 1);
        }
        if first {
            self.request(cx, dst);
        }
    }

    fn retry(&mut self, cx: &NodeCx<'_>) {
        let now = cx.now_tsc;
        let mut again = Vec::new();
        let (retry, max) = (self.cfg.retry_tsc, self.cfg.max_tries);
        self.pending.retain(|ip, p| {
            if now.wrapping_sub(p.last_request) < retry {
                return true;
            }
            if p.tries >= max {
                cx.count(UNRESOLVED, p.held.len() as u64);
                return false;
            }
            p.tries += 1;
            p.last_request = now;
            again.push(*ip);
            true
        });
        for ip in again {
            self.request(cx, ip);
        }
    }
}

impl Node for Arp {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        if !pkts.is_empty() {
            for m in pkts.drain() {
                let d = m.data();
                if d.len() < HEADER_LEN {
                    cx.count(MALFORMED, 1);
                    continue;
                }
                match EtherType(u16::from_be_bytes([d[12], d[13]])) {
                    EtherType::ARP => self.handle_arp(cx, m),
                    EtherType::IPV4 => self.resolve(cx, m),
                    _ => cx.count(MALFORMED, 1),
                }
            }
        }
        if !self.pending.is_empty() {
            self.retry(cx);
        }
        self.out.move_to(pkts);
        Dispatch::All(0)
    }

    fn counters(&self) -> &'static [CounterSpec] {
        &COUNTERS
    }
}
