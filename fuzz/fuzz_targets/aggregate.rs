//! Arbitrary frames through receive aggregation (GRO and LRO, burst and timeout
//! flush) and then GSO. Input: byte 0 selects the mode and settings, byte 1 the
//! checksum flags the "NIC" claims (bits 0-1: none, IP good, L4 good or L4
//! partial; bit 2 adds IP good; bit 4 makes the aggregates TSO packets, `tso`);
//! then frames, each a little-endian u16 length and its bytes (cut to 9000 and to
//! what is left), at most 256, fed in bursts of up to 32.
//!
//! No panic; every aggregate carries valid IPv4 and TCP checksums (those the
//! "NIC" did not vouch for; with `tso`, the TCP checksum field the pseudo-header sum
//! and the TSO flags) and consistent lengths, and is cut as a port would cut it; the aggregator accounts for
//! every packet (in = out when nothing is held, minus merged segments plus
//! aggregates); once everything is freed no mbuf is in use.
#![no_main]
use ironpath_eal::abi;
use ironpath_eal::{Burst, Mbuf, MemPolicy, Mempool, MempoolConfig};
use ironpath_nodes::aggregate::gso::segment;
use ironpath_nodes::aggregate::{AggrConfig, Aggregator, Flush, Mode};
use ironpath_wire::ipv4::Ipv4Packet;
use ironpath_wire::ipv6::Ipv6Packet;
use ironpath_wire::tcp::TcpPacket;
use ironpath_wire::{checksum, IpAddress, IpProtocol};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

fn pools() -> &'static (Mempool, Mempool) {
    static P: OnceLock<(Mempool, Mempool)> = OnceLock::new();
    P.get_or_init(|| {
        let small = Mempool::create(&MempoolConfig::new("fz-agg", 4096).cache_size(0).policy(MemPolicy::NoHuge));
        let big =
            Mempool::create(&MempoolConfig::new("fz-lro", 64).cache_size(0).data_room(65535).policy(MemPolicy::NoHuge));
        (small.expect("pool"), big.expect("lro pool"))
    })
}

/// An aggregate's headers and checksums are right (IPv4 or IPv6, no extension
/// header). Each checksum is checked unless the "NIC" claimed the segments' good
/// (`ip_claimed`, `l4_claimed`): then the aggregator trusts them (as with a real
/// NIC; it corrects the fields rather than summing again) and a lie in the input
/// stays a lie.
fn check_aggregate(m: &Mbuf, ip_claimed: bool, l4_claimed: bool, tso: bool) {
    let d = m.to_vec();
    let h = m.header();
    let l2 = usize::from(h.l2_len);
    let l3 = usize::from(h.l3_len);
    if tso {
        // The TCP checksum is partial: the pseudo-header sum over the TCP length.
        let v6 = d[l2] >> 4 == 6;
        let flags = abi::TX_TCP_SEG | abi::TX_TCP_CKSUM | if v6 { abi::TX_IPV6 } else { abi::TX_IPV4 };
        assert_eq!(h.ol_flags & flags, flags, "TSO flags");
        let (src, dst) = if v6 {
            let ip = Ipv6Packet::new_checked(&d[l2..]).expect("aggregate IPv6 parses");
            (IpAddress::V6(ip.src_addr()), IpAddress::V6(ip.dst_addr()))
        } else {
            let ip = Ipv4Packet::new_checked(&d[l2..]).expect("aggregate IPv4 parses");
            assert!(ip.verify_checksum() || ip_claimed, "aggregate IPv4 checksum");
            (IpAddress::V4(ip.src_addr()), IpAddress::V4(ip.dst_addr()))
        };
        let tcp_len = (d.len() - l2 - l3) as u32;
        let pseudo = checksum::fold(checksum::pseudo_header(&src, &dst, IpProtocol::TCP, tcp_len));
        assert_eq!(u16::from_be_bytes([d[l2 + l3 + 16], d[l2 + l3 + 17]]), pseudo, "TSO pseudo-header sum");
        return;
    }
    if d[l2] >> 4 == 4 {
        let ip = Ipv4Packet::new_checked(&d[l2..]).expect("aggregate IPv4 parses");
        assert!(ip.verify_checksum() || ip_claimed, "aggregate IPv4 checksum");
        assert_eq!(usize::from(ip.total_len()) + l2, d.len(), "IPv4 total length");
        let tcp = TcpPacket::new_checked(&d[l2 + l3..]).expect("aggregate TCP parses");
        let ok = tcp.verify_checksum(&IpAddress::V4(ip.src_addr()), &IpAddress::V4(ip.dst_addr()));
        assert!(ok || l4_claimed, "aggregate TCP checksum");
    } else {
        let ip = Ipv6Packet::new_checked(&d[l2..]).expect("aggregate IPv6 parses");
        assert_eq!(usize::from(ip.payload_len()) + 40 + l2, d.len(), "IPv6 payload length");
        let tcp = TcpPacket::new_checked(&d[l2 + 40..]).expect("aggregate TCP parses");
        let ok = tcp.verify_checksum(&IpAddress::V6(ip.src_addr()), &IpAddress::V6(ip.dst_addr()));
        assert!(ok || l4_claimed, "aggregate TCP checksum");
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let (small, big) = pools();
    let sel = data[0];
    let tso = data[1] & 16 != 0;
    let cfg = AggrConfig {
        mode: if sel & 1 == 0 { Mode::Gro } else { Mode::Lro },
        flush: if sel & 2 == 0 { Flush::Burst } else { Flush::Timeout },
        flush_tsc: 3,
        max_segments: [64, 2, 5, 16][usize::from(sel >> 2 & 3)],
        max_flows: [64, 1, 3, 8][usize::from(sel >> 4 & 3)],
        max_held: if data[1] & 8 != 0 { 64 } else { 4096 },
        max_bytes: if sel & 0x40 == 0 { 65535 } else { 3000 },
        drop_bad: sel & 0x80 != 0,
        tso,
    };
    let flags = [0, abi::RX_IP_CKSUM_GOOD, abi::RX_L4_CKSUM_GOOD, abi::RX_L4_CKSUM_NONE][usize::from(data[1] & 3)]
        | if data[1] & 4 != 0 { abi::RX_IP_CKSUM_GOOD } else { 0 };
    let mut frames = Vec::new();
    let mut rest = &data[2..];
    while rest.len() >= 2 && frames.len() < 256 {
        let n = usize::from(u16::from_le_bytes([rest[0], rest[1]])).min(9000).min(rest.len() - 2);
        frames.push(&rest[2..2 + n]);
        rest = &rest[2 + n..];
    }
    let mut agg = Aggregator::new(cfg, Some(big.clone()));
    let mut outs: Vec<Mbuf> = Vec::new();
    let mut now = 0;
    let mut fed = 0u64;
    for chunk in frames.chunks(32) {
        let mut b = Burst::new();
        for f in chunk {
            let Ok(mut m) = Mbuf::from_slice(small, f) else { continue };
            m.header_mut().ol_flags = flags;
            if b.push(m).is_ok() {
                fed += 1;
            }
        }
        now += 1;
        agg.process(&mut b, now);
        outs.extend(b.drain());
    }
    for _ in 0..3 {
        let mut b = Burst::new();
        now += 10;
        agg.process(&mut b, now);
        outs.extend(b.drain());
    }
    assert_eq!(agg.held(), 0);
    let s = agg.stats;
    assert_eq!(s.packets_in, fed);
    assert_eq!(s.packets_out, outs.len() as u64);
    assert_eq!(s.packets_in - s.dropped - s.merged + s.aggregates, s.packets_out, "{s:?}");
    for m in outs {
        if m.header().ol_flags & abi::RX_AGGREGATED != 0 {
            check_aggregate(&m, flags & abi::RX_IP_CKSUM_GOOD != 0, flags & abi::RX_L4_CKSUM_GOOD != 0, tso);
        }
        // A TSO packet is cut at its own segment size (as `TxFixup` does).
        let mss = if m.header().ol_flags & abi::TX_TCP_SEG != 0 { m.header().tso_segsz } else { 0 };
        let _ = segment(m, small, mss, &mut |seg| drop(seg)).map_err(|(m, _)| drop(m));
    }
    drop(agg);
    assert_eq!(small.stats().in_use, 0, "leak");
    assert_eq!(big.stats().in_use, 0, "LRO leak");
});
