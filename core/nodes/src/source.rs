//! `source`: a traffic generator (as testpmd's `txonly`): UDP/IPv4 frames of a
//! fixed size from a template, spread over `flows` UDP source ports, at an optional
//! rate (token bucket on the TSC) and up to an optional count. The first 8 payload
//! bytes carry a sequence number (big-endian, per source), so receivers can check
//! loss and order; checksums stay valid (RFC 1624 updates). An empty mempool is
//! counted (`alloc_failed`), never fatal.

use crate::kind::{NodeError, NodeKind, MEMPOOL};
use ironpath_config::{Nexts, NodeSpec, ParamKind, ParamSpec};
use ironpath_eal::{Burst, Mempool, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx, SleepPlan};
use ironpath_wire::checksum;
use ironpath_wire::ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr, HEADER_LEN};
use ironpath_wire::ipv4::{Ipv4Packet, Ipv4Repr};
use ironpath_wire::udp::{UdpPacket, UdpRepr};
use ironpath_wire::{IpAddress, IpProtocol};
use std::net::Ipv4Addr;

ironpath_graph::counters! {
    /// What `source` counts.
    pub enum SourceCounter {
        Generated("generated", "packets"),
        AllocFailed("alloc_failed", "bursts not generated (mempool empty)"),
    }
}

/// Settings of a `source` node.
#[derive(Clone, Debug)]
pub struct SourceConfig {
    /// Frame length without FCS (>= 42).
    pub size: usize,
    /// Packets per poll.
    pub burst: usize,
    /// Distinct UDP source ports (flows).
    pub flows: u32,
    /// Ethernet source.
    pub src_mac: [u8; 6],
    /// Ethernet destination.
    pub dst_mac: [u8; 6],
    /// IPv4 source.
    pub src_ip: Ipv4Addr,
    /// IPv4 destination.
    pub dst_ip: Ipv4Addr,
    /// Packets per second (0: as fast as possible).
    pub rate_pps: u64,
    /// Packets in all (0: no limit).
    pub count: u64,
}

/// Bytes of the sequence number at the start of the UDP payload.
pub const SEQ_LEN: usize = 8;

/// UDP source port of flow 0.
const BASE_PORT: u16 = 1024;

/// The node.
pub struct Source {
    cfg: SourceConfig,
    pool: Mempool,
    template: Vec<u8>,
    /// UDP checksum of the template (flow 0).
    udp_cksum: u16,
    flow: u32,
    sent: u64,
    tokens: f64,
    last_tsc: u64,
    ticks_per_pkt: f64,
}

impl Source {
    /// A generator allocating from `pool`; `tsc_hz` converts the rate to ticks.
    pub fn new(cfg: SourceConfig, pool: Mempool, tsc_hz: u64) -> Self {
        let size = cfg.size.max(HEADER_LEN + 20 + 8);
        let mut t = vec![0u8; size];
        let payload_len = size - HEADER_LEN - 20 - 8;
        EthernetRepr {
            src_addr: EthernetAddress(cfg.src_mac),
            dst_addr: EthernetAddress(cfg.dst_mac),
            ethertype: EtherType::IPV4,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut t[..]));
        Ipv4Repr {
            src_addr: cfg.src_ip,
            dst_addr: cfg.dst_ip,
            next_header: IpProtocol::UDP,
            payload_len: 8 + payload_len,
            hop_limit: 64,
        }
        .emit(&mut Ipv4Packet::new_unchecked(&mut t[HEADER_LEN..]));
        for (k, b) in t[HEADER_LEN + 28..].iter_mut().enumerate() {
            *b = k as u8;
        }
        let mut udp = UdpPacket::new_unchecked(&mut t[HEADER_LEN + 20..]);
        UdpRepr { src_port: BASE_PORT, dst_port: 9, payload_len }.emit(
            &mut udp,
            &IpAddress::V4(cfg.src_ip),
            &IpAddress::V4(cfg.dst_ip),
        );
        let udp_cksum = udp.checksum();
        let ticks_per_pkt = if cfg.rate_pps == 0 { 0.0 } else { tsc_hz as f64 / cfg.rate_pps as f64 };
        Self { cfg, pool, template: t, udp_cksum, flow: 0, sent: 0, tokens: 0.0, last_tsc: 0, ticks_per_pkt }
    }

    /// Packets generated so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }
}

impl Node for Source {
    fn sleep(&mut self, cx: &mut NodeCx<'_>, plan: &mut SleepPlan) {
        if self.cfg.count != 0 && self.sent >= self.cfg.count {
            return plan.quiet();
        }
        // Paced: until the next packet's token; unpaced: it has work now.
        let wait = if self.ticks_per_pkt > 0.0 { ((1.0 - self.tokens.fract()) * self.ticks_per_pkt) as u64 } else { 0 };
        plan.until(cx.now_tsc.wrapping_add(wait));
    }

    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        let mut want = self.cfg.burst.min(pkts.room()) as u64;
        if self.cfg.count != 0 {
            want = want.min(self.cfg.count - self.sent);
        }
        if self.ticks_per_pkt > 0.0 {
            if self.last_tsc == 0 {
                self.last_tsc = cx.now_tsc;
            }
            let burst = self.cfg.burst as f64;
            self.tokens = (self.tokens + cx.now_tsc.wrapping_sub(self.last_tsc) as f64 / self.ticks_per_pkt).min(burst);
            self.last_tsc = cx.now_tsc;
            want = want.min(self.tokens as u64);
        }
        if want == 0 {
            return Dispatch::All(0);
        }
        let start = pkts.len();
        if pkts.alloc(&self.pool, want as usize).is_err() {
            cx.count(SourceCounter::AllocFailed, 1);
            return Dispatch::All(0);
        }
        let len = self.template.len();
        let u = HEADER_LEN + 20;
        let has_seq = len >= u + 8 + SEQ_LEN;
        let mut seq = self.sent;
        for i in start..pkts.len() {
            let port = BASE_PORT.wrapping_add((self.flow % self.cfg.flows.max(1)) as u16);
            self.flow = self.flow.wrapping_add(1);
            let Some(d) = pkts.set_len(i, len) else { continue };
            d.copy_from_slice(&self.template);
            let mut c = self.udp_cksum;
            if port != BASE_PORT {
                d[u..u + 2].copy_from_slice(&port.to_be_bytes());
                c = checksum::update16(c, BASE_PORT, port);
            }
            if has_seq {
                let new = seq.to_be_bytes();
                c = checksum::update_bytes(c, &self.template[u + 8..u + 8 + SEQ_LEN], &new);
                d[u + 8..u + 8 + SEQ_LEN].copy_from_slice(&new);
            }
            seq += 1;
            // A computed UDP checksum of zero is sent as 0xffff (zero means "none").
            let c = if c == 0 { 0xffff } else { c };
            d[u + 6..u + 8].copy_from_slice(&c.to_be_bytes());
        }
        let n = (pkts.len() - start) as u64;
        self.sent += n;
        self.tokens -= n as f64;
        cx.count(SourceCounter::Generated, n);
        Dispatch::All(0)
    }

    fn counters(&self) -> &'static [CounterSpec] {
        SourceCounter::SPECS
    }
}

/// `source`: a traffic generator.
pub const KIND: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "source",
        doc: "generate UDP/IPv4 frames (as testpmd's txonly), at a rate and up to a count",
        params: &[
            MEMPOOL,
            ParamSpec::new("size", ParamKind::Uint { min: 42, max: 9000 }).default("60").doc("frame bytes without FCS"),
            ParamSpec::new("burst", ParamKind::Uint { min: 1, max: 256 }).default("32").doc("packets per poll"),
            ParamSpec::new("flows", ParamKind::Uint { min: 1, max: 65535 })
                .default("1")
                .doc("distinct UDP source ports"),
            ParamSpec::new("src_mac", ParamKind::Mac).default("02:00:00:00:00:01").doc("Ethernet source"),
            ParamSpec::new("dst_mac", ParamKind::Mac).default("02:00:00:00:00:02").doc("Ethernet destination"),
            ParamSpec::new("src_ip", ParamKind::Ipv4).default("198.18.0.1").doc("IPv4 source"),
            ParamSpec::new("dst_ip", ParamKind::Ipv4).default("198.18.0.2").doc("IPv4 destination"),
            ParamSpec::new("rate_pps", ParamKind::Uint { min: 0, max: 1_000_000_000 })
                .default("0")
                .doc("packets per second (0: unlimited)"),
            ParamSpec::new("count", ParamKind::Uint { min: 0, max: u64::MAX })
                .default("0")
                .doc("packets in all (0: unlimited)"),
        ],
        nexts: Nexts::Fixed(&["out"]),
        source: true,
        ..NodeSpec::DEFAULT
    },
    build: |b, env| {
        let p = b.params();
        let sc = SourceConfig {
            size: p.int("size")?,
            burst: p.int("burst")?,
            flows: p.int("flows")?,
            src_mac: p.mac("src_mac")?,
            dst_mac: p.mac("dst_mac")?,
            src_ip: p.ipv4("src_ip")?,
            dst_ip: p.ipv4("dst_ip")?,
            rate_pps: p.uint("rate_pps")?,
            count: p.uint("count")?,
        };
        let pool = env.mempool(p.raw().mempool("mempool"), None)?;
        let room = usize::from(pool.data_room()).saturating_sub(usize::from(ironpath_eal::abi::PKTMBUF_HEADROOM));
        if sc.size > room {
            return Err(NodeError::Param {
                param: "size",
                reason: format!(
                    "{} does not fit mempool `{}` (data room {} minus headroom {}); raise its data_room",
                    sc.size,
                    pool.name(),
                    pool.data_room(),
                    ironpath_eal::abi::PKTMBUF_HEADROOM
                ),
            });
        }
        let hz = env.tsc_hz();
        Ok(Box::new(Source::new(sc, pool, hz)))
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::*;
    use ironpath_graph::NodeStats;

    fn cfg(size: usize, burst: usize, flows: u32, rate_pps: u64, count: u64) -> SourceConfig {
        SourceConfig {
            size,
            burst,
            flows,
            src_mac: US_MAC,
            dst_mac: PEER_MAC,
            src_ip: US4,
            dst_ip: PEER4,
            rate_pps,
            count,
        }
    }

    /// Packet `k` as it must be generated: computed from scratch, not incrementally.
    fn expected(c: &SourceConfig, k: u64) -> Vec<u8> {
        let mut payload: Vec<u8> = (0..c.size - 42).map(|j| j as u8).collect();
        if payload.len() >= SEQ_LEN {
            payload[..SEQ_LEN].copy_from_slice(&k.to_be_bytes());
        }
        let port = BASE_PORT + (k % u64::from(c.flows)) as u16;
        let u = udp(IpAddress::V4(c.src_ip), IpAddress::V4(c.dst_ip), port, 9, &payload);
        eth(c.dst_mac, c.src_mac, 0x0800, &ipv4(c.src_ip, c.dst_ip, 17, 64, &u))
    }

    /// Poll once (an empty input burst, as the engine does for a source).
    fn poll(s: &mut Source, st: &NodeStats, now: u64) -> Vec<Vec<u8>> {
        let mut b = Burst::new();
        let c = call(s, st, &mut b, now);
        assert_eq!(c.dispatch, Dispatch::All(0));
        outputs(&c, &mut b).into_iter().map(|(_, f)| f).collect()
    }

    #[test]
    fn count_limit_stops_exactly() {
        let pool = pool(64);
        let mut s = Source::new(cfg(60, 32, 1, 0, 70), pool.clone(), 1_000_000);
        let st = stats(&s);
        let sizes: Vec<usize> = (0..5).map(|t| poll(&mut s, &st, t).len()).collect();
        assert_eq!(sizes, [32, 32, 6, 0, 0]);
        assert_eq!((s.sent(), counter(&st, "generated")), (70, 70));
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn every_packet_has_its_sequence_number_flow_and_valid_checksums() {
        // 65536 packets over 7 flows: the UDP checksum takes (nearly) every value, so an
        // incremental update that differs from a full computation would show.
        let pool = pool(256);
        let c = cfg(60, 256, 7, 0, 0);
        let mut s = Source::new(c.clone(), pool.clone(), 1_000_000);
        let st = stats(&s);
        let mut k = 0u64;
        for t in 0..256 {
            let out = poll(&mut s, &st, t);
            assert_eq!(out.len(), 256);
            for f in out {
                let ip = Ipv4Packet::new_checked(&f[14..]).expect("ipv4");
                assert!(ip.verify_checksum());
                let u = UdpPacket::new_checked(ip.payload()).expect("udp");
                assert!(
                    u.checksum() != 0 && u.verify_checksum(&IpAddress::V4(US4), &IpAddress::V4(PEER4)),
                    "packet {k}"
                );
                assert_eq!(f, expected(&c, k), "packet {k}");
                k += 1;
            }
        }
        assert_eq!(counter(&st, "generated"), 65536);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn frames_of_other_sizes() {
        // 42: no payload; 49: no room for the sequence number; 1514: a full frame.
        for size in [42, 49, 50, 1514] {
            let pool = pool(32);
            let c = cfg(size, 8, 3, 0, 16);
            let mut s = Source::new(c.clone(), pool.clone(), 1_000_000);
            let st = stats(&s);
            let out = [poll(&mut s, &st, 1), poll(&mut s, &st, 2), poll(&mut s, &st, 3)].concat();
            assert_eq!(out.len(), 16);
            for (k, f) in out.iter().enumerate() {
                assert_eq!(f.len(), size);
                assert_eq!(*f, expected(&c, k as u64), "size {size} packet {k}");
            }
            assert_eq!(pool.stats().in_use, 0);
        }
    }

    #[test]
    fn rate_follows_virtual_time() {
        let pool = pool(64);
        let (hz, rate, burst) = (1_000_000u64, 1000u64, 32usize);
        let mut s = Source::new(cfg(60, burst, 1, rate, 0), pool.clone(), hz);
        let st = stats(&s);
        let start = 1_000u64;
        let mut total = 0u64;
        for now in (start..=start + hz).step_by(100) {
            total += poll(&mut s, &st, now).len() as u64;
            let allowed = (now - start) * rate / hz + burst as u64;
            assert!(total <= allowed, "{total} packets by tick {now} (at most {allowed})");
        }
        // One second at 1000 pps (a token may be lost to float rounding).
        assert!((999..=1000).contains(&total), "{total}");
        assert_eq!(s.sent(), total);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn idle_time_earns_at_most_one_burst() {
        let pool = pool(64);
        let mut s = Source::new(cfg(60, 16, 1, 1000, 0), pool.clone(), 1_000_000);
        let st = stats(&s);
        assert!(poll(&mut s, &st, 5).is_empty(), "no tokens yet");
        // Ten seconds later: 10000 packets' worth of tokens, capped at one burst.
        assert_eq!(poll(&mut s, &st, 10_000_005).len(), 16);
        assert!(poll(&mut s, &st, 10_000_006).is_empty());
        assert_eq!(poll(&mut s, &st, 10_002_006).len(), 2);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn empty_pool_is_counted_not_fatal() {
        let pool = pool(40);
        let mut s = Source::new(cfg(60, 32, 1, 0, 0), pool.clone(), 1_000_000);
        let st = stats(&s);
        let mut first = Burst::new();
        assert!(call(&mut s, &st, &mut first, 1).dispatch == Dispatch::All(0));
        assert_eq!(first.len(), 32);
        // 8 mbufs left: a burst of 32 is all or nothing.
        assert!(poll(&mut s, &st, 2).is_empty());
        assert_eq!((counter(&st, "alloc_failed"), counter(&st, "generated")), (1, 32));
        assert_eq!(pool.stats().in_use, 32);
        first.free_all();
        // The sequence continues where it stopped.
        let next = poll(&mut s, &st, 3);
        assert_eq!(next.len(), 32);
        assert_eq!(next[0], expected(&cfg(60, 32, 1, 0, 0), 32));
        assert_eq!(pool.stats().in_use, 0);
    }
}
