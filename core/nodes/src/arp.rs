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

use crate::kind::{NodeError, NodeKind, MEMPOOL, PORT};
use ironpath_config::{Nexts, NodeSpec, ParamKind, ParamSpec};
use ironpath_eal::{Burst, Mbuf, Mempool, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx, SleepPlan};
use ironpath_wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use ironpath_wire::ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr, HEADER_LEN};
use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;

ironpath_graph::counters! {
    /// What `arp` counts.
    pub enum ArpCounter {
        RepliesSent("replies_sent", "ARP replies"),
        RequestsSent("requests_sent", "ARP requests"),
        Learned("learned", "neighbour entries added or updated"),
        Resolved("resolved", "IPv4 packets sent with a cached MAC"),
        Held("held", "IPv4 packets held awaiting resolution"),
        HoldFull("hold_full", "packets dropped (hold queue full)"),
        Unresolved("unresolved", "packets dropped (no reply after max_tries)"),
        Malformed("malformed", "packets dropped"),
        Ignored("ignored", "ARP packets neither answered nor learned from (not for us, or a reply that teaches nothing)"),
        AllocFailed("alloc_failed", "ARP requests not sent (mempool empty)"),
    }
}

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
    /// Packets to send (replies, requests, resolved packets); what does not fit
    /// in this call's burst leaves on the next poll.
    out: VecDeque<Mbuf>,
}

impl Arp {
    /// A node that allocates its requests from `pool`.
    pub fn new(cfg: ArpConfig, pool: Mempool) -> Self {
        Self { cfg, pool, cache: HashMap::new(), pending: HashMap::new(), out: VecDeque::new() }
    }

    /// The cached MAC of `ip`.
    pub fn lookup(&self, ip: Ipv4Addr) -> Option<[u8; 6]> {
        self.cache.get(&ip).map(|e| e.0)
    }

    /// Add or update the entry of `ip`; false when the sender cannot be learned (an
    /// unspecified address, a group MAC).
    fn learn(&mut self, cx: &NodeCx<'_>, ip: Ipv4Addr, mac: [u8; 6]) -> bool {
        if ip.is_unspecified() || mac[0] & 1 != 0 {
            return false;
        }
        if !self.cache.contains_key(&ip) && self.cache.len() >= self.cfg.max_entries {
            // The least recently confirmed of a few (the map's order is random enough
            // and a peer cannot choose which): a constant cost per learned entry, where
            // a scan of the whole table would let a flood of senders cost
            // `max_entries` steps a packet.
            if let Some(oldest) = self.cache.iter().take(8).min_by_key(|(_, v)| v.1).map(|(k, _)| *k) {
                self.cache.remove(&oldest);
            }
        }
        self.cache.insert(ip, (mac, cx.now_tsc));
        cx.count(ArpCounter::Learned, 1);
        if let Some(p) = self.pending.remove(&ip) {
            for m in p.held {
                self.send_resolved(cx, m, mac);
            }
        }
        true
    }

    fn send_resolved(&mut self, cx: &NodeCx<'_>, mut m: Mbuf, mac: [u8; 6]) {
        let ours = self.cfg.mac;
        let d = m.data();
        if d.len() >= 12 && d[0..6] == mac && d[6..12] == ours {
            // Already addressed (a sender that knows its neighbour): nothing to write,
            // so a frame another holder still references passes as it is.
            self.out.push_back(m);
            cx.count(ArpCounter::Resolved, 1);
            return;
        }
        if !m.is_writable() {
            // Shared (e.g. `tcp` keeps a reference to see its completion): address a copy.
            match Mbuf::from_slice(&self.pool, &m.to_vec()) {
                Ok(c) => m = c,
                Err(_) => {
                    cx.count(ArpCounter::AllocFailed, 1);
                    return;
                }
            }
        }
        if let Ok(d) = m.data_mut() {
            d[0..6].copy_from_slice(&mac);
            d[6..12].copy_from_slice(&ours);
            self.out.push_back(m);
            cx.count(ArpCounter::Resolved, 1);
            return;
        }
        cx.count(ArpCounter::Malformed, 1);
    }

    fn handle_arp(&mut self, cx: &NodeCx<'_>, mut m: Mbuf) {
        let repr = match ArpPacket::new_checked(&m.data()[HEADER_LEN..]).and_then(|p| ArpRepr::parse(&p)) {
            Ok(r) => r,
            Err(_) => {
                cx.count(ArpCounter::Malformed, 1);
                return;
            }
        };
        let for_us = self.cfg.addresses.contains(&repr.target_protocol_addr);
        // RFC 826: update an entry we have (or wait for); add one when the packet is for us.
        let sender = repr.source_protocol_addr;
        let mut learned = false;
        if for_us || self.cache.contains_key(&sender) || self.pending.contains_key(&sender) {
            learned = self.learn(cx, sender, repr.source_hardware_addr.0);
        }
        if !(for_us && repr.operation == ArpOperation::Request) {
            // Not a request we answer: counted as learned from, or else ignored.
            cx.count(ArpCounter::Ignored, u64::from(!learned));
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
            cx.count(ArpCounter::Malformed, 1);
            return;
        };
        let mut f = EthernetFrame::new_unchecked(&mut d[..]);
        f.set_dst_addr(repr.source_hardware_addr);
        f.set_src_addr(EthernetAddress(self.cfg.mac));
        reply.emit(&mut ArpPacket::new_unchecked(&mut d[HEADER_LEN..]));
        self.out.push_back(m);
        cx.count(ArpCounter::RepliesSent, 1);
    }

    fn request(&mut self, cx: &NodeCx<'_>, target: Ipv4Addr) {
        let Ok(mut m) = Mbuf::alloc(&self.pool) else {
            cx.count(ArpCounter::AllocFailed, 1);
            return;
        };
        let Ok(d) = m.append(60) else {
            cx.count(ArpCounter::AllocFailed, 1);
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
        self.out.push_back(m);
        cx.count(ArpCounter::RequestsSent, 1);
    }

    fn resolve(&mut self, cx: &NodeCx<'_>, m: Mbuf) {
        // Only the destination is needed, from the first buffer (a TSO packet's
        // payload is chained after it, so its IP length exceeds that buffer).
        let dst = match m.data().get(HEADER_LEN..HEADER_LEN + 20) {
            Some(ip) if ip[0] >> 4 == 4 && ip[0] & 0x0f >= 5 => Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]),
            _ => {
                cx.count(ArpCounter::Malformed, 1);
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
            cx.count(ArpCounter::Held, 1);
        } else {
            cx.count(ArpCounter::HoldFull, 1);
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
                cx.count(ArpCounter::Unresolved, p.held.len() as u64);
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

impl Arp {
    /// What the lcore waits for before it sleeps: replies to send now, the next
    /// request for a neighbour being resolved.
    fn plan_sleep(&self, now: u64, plan: &mut SleepPlan) {
        plan.quiet();
        if !self.out.is_empty() {
            plan.until(now);
        }
        for p in self.pending.values() {
            plan.until(p.last_request.wrapping_add(self.cfg.retry_tsc));
        }
    }
}

impl Node for Arp {
    fn sleep(&mut self, cx: &mut NodeCx<'_>, plan: &mut SleepPlan) {
        self.plan_sleep(cx.now_tsc, plan);
    }

    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        if !pkts.is_empty() {
            for m in pkts.drain() {
                let d = m.data();
                if d.len() < HEADER_LEN {
                    cx.count(ArpCounter::Malformed, 1);
                    continue;
                }
                match EtherType(u16::from_be_bytes([d[12], d[13]])) {
                    EtherType::ARP => self.handle_arp(cx, m),
                    EtherType::IPV4 => self.resolve(cx, m),
                    _ => cx.count(ArpCounter::Malformed, 1),
                }
            }
        }
        if !self.pending.is_empty() {
            self.retry(cx);
        }
        while let Some(m) = self.out.pop_front() {
            if let Err(m) = pkts.push(m) {
                self.out.push_front(m);
                break;
            }
        }
        Dispatch::All(0)
    }

    fn counters(&self) -> &'static [CounterSpec] {
        ArpCounter::SPECS
    }
}

/// `arp`: ARP replies and IPv4 neighbour resolution.
pub const KIND: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "arp",
        doc: "answer ARP for our addresses; resolve the MAC of IPv4 packets sent through it (neighbour cache, held packets)",
        params: &[
            PORT,
            ParamSpec::new("addresses", ParamKind::IpList).required().doc("our IPv4 addresses (the first is the sender of our requests)"),
            MEMPOOL,
            ParamSpec::new("hold", ParamKind::Uint { min: 0, max: 256 }).default("8").doc("packets held per unresolved neighbour"),
            ParamSpec::new("retry", ParamKind::Duration).default("1s").doc("time between requests for one neighbour"),
            ParamSpec::new("max_tries", ParamKind::Uint { min: 1, max: 100 }).default("3").doc("requests before giving up"),
            ParamSpec::new("max_entries", ParamKind::Uint { min: 1, max: 1_000_000 }).default("1024").doc("neighbour cache size"),
        ],
        nexts: Nexts::Fixed(&["out"]),
        source: true,
        ..NodeSpec::DEFAULT
    },
    build: |b, env| {
        let p = b.params();
        let port = p.port("port")?;
        let addresses: Vec<Ipv4Addr> = p
            .ip_list("addresses")?
            .iter()
            .filter_map(|a| match a {
                std::net::IpAddr::V4(v) => Some(*v),
                std::net::IpAddr::V6(_) => None,
            })
            .collect();
        if addresses.is_empty() {
            return Err(NodeError::Param {
                param: "addresses",
                reason: "holds no IPv4 address (ARP is IPv4 only; IPv6 neighbours are answered by icmp_echo)".into(),
            });
        }
        let cfg = ArpConfig {
            mac: env.port_mac(port)?,
            addresses,
            hold: p.int("hold")?,
            retry_tsc: p.tsc("retry", env.tsc_hz())?,
            max_tries: p.int("max_tries")?,
            max_entries: p.int("max_entries")?,
        };
        Ok(Box::new(Arp::new(cfg, env.mempool(p.raw().mempool("mempool"), Some(port))?)))
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::*;
    use ironpath_graph::NodeStats;
    use ironpath_wire::IpAddress;

    const OTHER4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 3);
    const NEIGH_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x77];

    fn node(pool: &Mempool, hold: usize, max_entries: usize) -> Arp {
        let cfg =
            ArpConfig { mac: US_MAC, addresses: vec![US4, OTHER4], hold, retry_tsc: 1000, max_tries: 3, max_entries };
        Arp::new(cfg, pool.clone())
    }

    fn arp_frame(dst: [u8; 6], op: ArpOperation, sha: [u8; 6], spa: Ipv4Addr, tha: [u8; 6], tpa: Ipv4Addr) -> Vec<u8> {
        let mut f = eth(dst, sha, 0x0806, &arp(op, sha, spa, tha, tpa));
        f.resize(60, 0); // Ethernet padding
        f
    }

    /// A UDP/IPv4 frame from us to `dst`, destination MAC not yet known (zero).
    fn to_send(dst: Ipv4Addr, tag: u8) -> Vec<u8> {
        let u = udp(IpAddress::V4(US4), IpAddress::V4(dst), 7000, 7, &[tag; 18]);
        eth([0; 6], [0; 6], 0x0800, &ipv4(US4, dst, 17, 64, &u))
    }

    /// `to_send` as it must leave the node: MACs filled in.
    fn sent(frame: &[u8], dst_mac: [u8; 6]) -> Vec<u8> {
        let mut f = frame.to_vec();
        f[0..6].copy_from_slice(&dst_mac);
        f[6..12].copy_from_slice(&US_MAC);
        f
    }

    /// Our request for `target`.
    fn request_for(target: Ipv4Addr) -> Vec<u8> {
        arp_frame([0xff; 6], ArpOperation::Request, US_MAC, US4, [0; 6], target)
    }

    /// Run the node once; every output goes to edge 0. Returns the output frames.
    fn run(a: &mut Arp, st: &NodeStats, pool: &Mempool, frames: &[Vec<u8>], now: u64) -> Vec<Vec<u8>> {
        let mut b = burst(pool, frames);
        let c = call(a, st, &mut b, now);
        assert_eq!(c.dispatch, ironpath_graph::Dispatch::All(0));
        outputs(&c, &mut b).into_iter().map(|(_, d)| d).collect()
    }

    #[test]
    fn request_for_our_address_becomes_the_reply_in_place() {
        let pool = pool(16);
        let mut a = node(&pool, 4, 16);
        let st = stats(&a);
        for ours in [US4, OTHER4] {
            let req = arp_frame([0xff; 6], ArpOperation::Request, PEER_MAC, PEER4, [0; 6], ours);
            let out = run(&mut a, &st, &pool, &[req], 10);
            let want = arp_frame(PEER_MAC, ArpOperation::Reply, US_MAC, ours, PEER_MAC, PEER4);
            // Ethernet dst = requester, src = us; ARP op 2, sender = us/ours, target = requester.
            assert_eq!(out, [want]);
            assert_eq!(&out[0][0..6], &PEER_MAC);
            assert_eq!(&out[0][6..12], &US_MAC);
            assert_eq!(&out[0][20..22], &[0, 2]);
        }
        assert_eq!(counter(&st, "replies_sent"), 2);
        assert_eq!(counter(&st, "learned"), 2);
        assert_eq!(counter(&st, "ignored"), 0);
        assert_eq!(a.lookup(PEER4), Some(PEER_MAC));
        drop(a);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn a_shared_frame_passes_untouched_when_addressed_and_as_a_copy_when_not() {
        let pool = pool(16);
        let mut a = node(&pool, 4, 16);
        let st = stats(&a);
        a.cache.insert(PEER4, (NEIGH_MAC, 0));
        for (frame, copied) in [(sent(&to_send(PEER4, 1), NEIGH_MAC), false), (to_send(PEER4, 2), true)] {
            let mut b = burst(&pool, std::slice::from_ref(&frame));
            let keep = b.share(0); // another holder (tcp's completion reference)
            let c = call(&mut a, &st, &mut b, 5);
            assert_eq!(b.len(), 1);
            assert_eq!(b.data(0), &sent(&frame, NEIGH_MAC)[..]);
            assert_eq!(keep.data(), &frame[..], "the other holder's bytes are never written");
            assert_eq!(keep.refcnt() == 1, copied, "a copy leaves the original to its other holder");
            let _ = outputs(&c, &mut b);
        }
        assert_eq!(counter(&st, "resolved"), 2);
        assert_eq!(counter(&st, "malformed"), 0);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn request_for_another_address_is_ignored_and_freed() {
        let pool = pool(16);
        let mut a = node(&pool, 4, 16);
        let st = stats(&a);
        let req = arp_frame([0xff; 6], ArpOperation::Request, PEER_MAC, PEER4, [0; 6], Ipv4Addr::new(198, 18, 0, 9));
        assert!(run(&mut a, &st, &pool, &[req], 10).is_empty());
        assert_eq!(counter(&st, "ignored"), 1);
        assert_eq!(counter(&st, "replies_sent"), 0);
        // Not for us and not awaited: not learned (RFC 826 merge only).
        assert_eq!(counter(&st, "learned"), 0);
        assert_eq!(a.lookup(PEER4), None);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn held_packet_leaves_once_the_neighbour_replies() {
        let pool = pool(16);
        let mut a = node(&pool, 4, 16);
        let st = stats(&a);
        let p1 = to_send(PEER4, 1);
        let out = run(&mut a, &st, &pool, std::slice::from_ref(&p1), 100);
        assert_eq!(out, [request_for(PEER4)]);
        assert_eq!((counter(&st, "requests_sent"), counter(&st, "held")), (1, 1));
        assert_eq!(pool.stats().in_use, 1, "the packet is held");

        // A second packet for the same neighbour is held too, without a second request.
        let p2 = to_send(PEER4, 2);
        assert!(run(&mut a, &st, &pool, std::slice::from_ref(&p2), 200).is_empty());
        assert_eq!((counter(&st, "requests_sent"), counter(&st, "held")), (1, 2));

        let reply = arp_frame(US_MAC, ArpOperation::Reply, PEER_MAC, PEER4, US_MAC, US4);
        let out = run(&mut a, &st, &pool, &[reply], 300);
        assert_eq!(out, [sent(&p1, PEER_MAC), sent(&p2, PEER_MAC)], "held packets, in order");
        assert_eq!(counter(&st, "learned"), 1);
        assert_eq!(counter(&st, "resolved"), 2);
        assert_eq!(counter(&st, "replies_sent"), 0);
        assert_eq!(counter(&st, "ignored"), 0);
        assert_eq!(a.lookup(PEER4), Some(PEER_MAC));

        // Now cached: sent at once.
        let p3 = to_send(PEER4, 3);
        assert_eq!(run(&mut a, &st, &pool, std::slice::from_ref(&p3), 400), [sent(&p3, PEER_MAC)]);
        assert_eq!(counter(&st, "resolved"), 3);
        assert_eq!(counter(&st, "requests_sent"), 1);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn a_request_from_an_awaited_neighbour_releases_its_packets() {
        let pool = pool(16);
        let mut a = node(&pool, 4, 16);
        let st = stats(&a);
        let p = to_send(PEER4, 1);
        run(&mut a, &st, &pool, std::slice::from_ref(&p), 1);
        // The neighbour asks for someone else: still, we learn its MAC (we wait for it).
        let req = arp_frame([0xff; 6], ArpOperation::Request, NEIGH_MAC, PEER4, [0; 6], Ipv4Addr::new(198, 18, 0, 9));
        assert_eq!(run(&mut a, &st, &pool, &[req], 2), [sent(&p, NEIGH_MAC)]);
        assert_eq!((counter(&st, "learned"), counter(&st, "ignored")), (1, 0), "learned from, not ignored");
        assert_eq!(a.lookup(PEER4), Some(NEIGH_MAC));
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn hold_queue_is_bounded() {
        let pool = pool(16);
        let mut a = node(&pool, 2, 16);
        let st = stats(&a);
        let frames: Vec<_> = (0..5).map(|k| to_send(PEER4, k)).collect();
        assert_eq!(run(&mut a, &st, &pool, &frames, 1), [request_for(PEER4)]);
        assert_eq!(counter(&st, "held"), 2);
        assert_eq!(counter(&st, "hold_full"), 3);
        assert_eq!(pool.stats().in_use, 2);
        let reply = arp_frame(US_MAC, ArpOperation::Reply, PEER_MAC, PEER4, US_MAC, US4);
        let out = run(&mut a, &st, &pool, &[reply], 2);
        assert_eq!(out, [sent(&frames[0], PEER_MAC), sent(&frames[1], PEER_MAC)], "the first two are kept");
        assert_eq!(pool.stats().in_use, 0);

        // hold 0: nothing is held, but the neighbour is still asked for.
        let mut a = node(&pool, 0, 16);
        let st = stats(&a);
        assert_eq!(run(&mut a, &st, &pool, &[to_send(OTHER4, 1)], 1), [request_for(OTHER4)]);
        assert_eq!((counter(&st, "held"), counter(&st, "hold_full")), (0, 1));
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn retries_every_retry_tsc_then_gives_up() {
        let pool = pool(16);
        let mut a = node(&pool, 4, 16);
        let st = stats(&a);
        let frames = [to_send(PEER4, 1), to_send(PEER4, 2)];
        assert_eq!(run(&mut a, &st, &pool, &frames, 5_000), [request_for(PEER4)]);
        // Polled with no input (the node is a source): virtual time drives it.
        let mut requests_at = vec![];
        for now in (5_000..12_000).step_by(100) {
            let out = run(&mut a, &st, &pool, &[], now);
            assert!(out.iter().all(|f| *f == request_for(PEER4)), "only requests at {now}");
            if !out.is_empty() {
                requests_at.push(now);
            }
            assert_eq!(pool.stats().in_use, if now < 8_000 { 2 } else { 0 }, "at {now}");
        }
        assert_eq!(requests_at, [6_000, 7_000], "retries at retry_tsc, max_tries 3 in all");
        assert_eq!(counter(&st, "requests_sent"), 3);
        assert_eq!(counter(&st, "unresolved"), 2);
        assert_eq!(counter(&st, "held"), 2);
        assert_eq!(a.lookup(PEER4), None);
        // A later packet starts over.
        assert_eq!(run(&mut a, &st, &pool, &[to_send(PEER4, 3)], 20_000), [request_for(PEER4)]);
        assert_eq!(counter(&st, "requests_sent"), 4);
        drop(a);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn broadcast_and_multicast_destinations_need_no_arp() {
        let pool = pool(16);
        let mut a = node(&pool, 4, 16);
        let st = stats(&a);
        let cases = [
            (Ipv4Addr::BROADCAST, [0xff; 6]),
            (Ipv4Addr::new(224, 0, 0, 251), [0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb]),
            (Ipv4Addr::new(239, 200, 1, 2), [0x01, 0x00, 0x5e, 0x48, 0x01, 0x02]),
        ];
        let frames: Vec<_> = cases.iter().map(|(ip, _)| to_send(*ip, 1)).collect();
        let out = run(&mut a, &st, &pool, &frames, 1);
        let want: Vec<_> = frames.iter().zip(&cases).map(|(f, (_, mac))| sent(f, *mac)).collect();
        assert_eq!(out, want);
        assert_eq!(counter(&st, "resolved"), 3);
        assert_eq!(counter(&st, "requests_sent"), 0);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn malformed_frames_are_counted_and_freed() {
        let pool = pool(16);
        let mut a = node(&pool, 4, 16);
        let st = stats(&a);
        let good = arp_frame([0xff; 6], ArpOperation::Request, PEER_MAC, PEER4, [0; 6], US4);
        let mut hlen8 = good.clone();
        hlen8[18] = 8;
        let mut ptype_v6 = good.clone();
        ptype_v6[16..18].copy_from_slice(&0x86ddu16.to_be_bytes());
        let frames = vec![
            good[..13].to_vec(),                     // shorter than Ethernet
            good[..14 + 27].to_vec(),                // ARP cut short
            hlen8,                                   // not Ethernet/IPv4 ARP
            ptype_v6,                                // not Ethernet/IPv4 ARP
            to_send(PEER4, 1)[..14 + 19].to_vec(),   // IPv4 cut short
            eth(US_MAC, PEER_MAC, 0x86dd, &[0; 40]), // not ARP nor IPv4
        ];
        assert!(run(&mut a, &st, &pool, &frames, 1).is_empty());
        assert_eq!(counter(&st, "malformed"), frames.len() as u64);
        assert_eq!(counter(&st, "requests_sent") + counter(&st, "replies_sent"), 0);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn cache_evicts_the_oldest_and_ignores_multicast_senders() {
        let pool = pool(16);
        let mut a = node(&pool, 4, 2);
        let st = stats(&a);
        let ips = [Ipv4Addr::new(198, 18, 1, 1), Ipv4Addr::new(198, 18, 1, 2), Ipv4Addr::new(198, 18, 1, 3)];
        for (k, ip) in ips.iter().enumerate() {
            let mac = [0x02, 0, 0, 0, 1, k as u8];
            let req = arp_frame([0xff; 6], ArpOperation::Request, mac, *ip, [0; 6], US4);
            assert_eq!(run(&mut a, &st, &pool, &[req], 10 * (k as u64 + 1)).len(), 1);
        }
        assert_eq!(a.lookup(ips[0]), None, "oldest evicted");
        assert_eq!(a.lookup(ips[1]), Some([0x02, 0, 0, 0, 1, 1]));
        assert_eq!(a.lookup(ips[2]), Some([0x02, 0, 0, 0, 1, 2]));
        // A multicast sender MAC is never cached (but the request is answered).
        let ip = Ipv4Addr::new(198, 18, 1, 4);
        let req = arp_frame([0xff; 6], ArpOperation::Request, [0x03, 0, 0, 0, 0, 1], ip, [0; 6], US4);
        assert_eq!(run(&mut a, &st, &pool, &[req], 50).len(), 1);
        assert_eq!(a.lookup(ip), None);
        assert_eq!(counter(&st, "learned"), 3);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn empty_pool_counts_alloc_failed_and_retries_later() {
        let pool = pool(1);
        let mut a = node(&pool, 4, 16);
        let st = stats(&a);
        // The only mbuf is the packet to send: no room for the request.
        assert!(run(&mut a, &st, &pool, &[to_send(PEER4, 1)], 1).is_empty());
        assert_eq!(counter(&st, "alloc_failed"), 1);
        assert_eq!(counter(&st, "requests_sent"), 0);
        drop(a);
        assert_eq!(pool.stats().in_use, 0);
    }
}
