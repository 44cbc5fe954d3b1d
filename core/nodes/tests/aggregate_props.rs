//! Property tests of receive aggregation: random flows (IPv4 and IPv6), segment
//! sizes, PSH marks, ACK changes, pure ACKs, checksum flags set by the "NIC" on
//! some packets and not others, interleaving, reordering and loss (seeded,
//! reproducible).
//! After GRO and after LRO every flow's bytes are exactly the input's, every
//! output has valid checksums, and GRO -> GSO gives back the input segments byte
//! for byte. No mbuf leaks.

use ironpath_eal::{abi, Burst, Mbuf, MemPolicy, Mempool, MempoolConfig, MAX_BURST};
use ironpath_nodes::aggregate::gso::segment;
use ironpath_nodes::aggregate::{AggrConfig, Aggregator, Flush, Mode};
use ironpath_util::testing::XorShift;
use ironpath_wire::ipv4::Ipv4Packet;
use ironpath_wire::tcp::TcpPacket;
use ironpath_wire::{checksum, IpAddress, IpProtocol};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

struct FlowSpec {
    v6: bool,
    n: u32,
    seq0: u32,
    id0: u16,
    mss: usize,
    data: Vec<u8>,
    /// The ACK number moves on every `ack_every` segments.
    ack_every: usize,
}

fn addrs(f: &FlowSpec) -> (IpAddress, IpAddress) {
    if f.v6 {
        (
            IpAddress::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1 + f.n as u16)),
            IpAddress::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 1, 2)),
        )
    } else {
        (IpAddress::V4(Ipv4Addr::new(198, 18, 1, 1 + f.n as u8)), IpAddress::V4(Ipv4Addr::new(198, 18, 0, 2)))
    }
}

/// PSH on a segment.
const PSH: u8 = 1;
/// A pure ACK (no payload) at a segment's sequence number.
const PURE_ACK: u8 = 2;

/// Segment `k` of flow `f`: Ethernet + IP + TCP (NOP NOP timestamp) + payload,
/// every checksum valid, IPv4 ID = id0 + k.
fn frame(f: &FlowSpec, k: usize, how: u8) -> Vec<u8> {
    let psh = how & PSH != 0;
    let off = k * f.mss;
    let pl = if how & PURE_ACK != 0 { &[][..] } else { &f.data[off..(off + f.mss).min(f.data.len())] };
    let l3 = if f.v6 { 40 } else { 20 };
    let l4 = 32;
    let mut d = vec![0u8; 14 + l3 + l4 + pl.len()];
    d[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    d[6..12].copy_from_slice(&[2, 0, 0, 0, 1, f.n as u8]);
    let (src, dst) = addrs(f);
    match (src, dst) {
        (IpAddress::V4(s), IpAddress::V4(t)) => {
            d[12..14].copy_from_slice(&[0x08, 0x00]);
            let ip = &mut d[14..34];
            ip[0] = 0x45;
            ip[2..4].copy_from_slice(&((l3 + l4 + pl.len()) as u16).to_be_bytes());
            ip[4..6].copy_from_slice(&f.id0.wrapping_add(k as u16).to_be_bytes());
            ip[6] = 0x40; // DF
            ip[8] = 64;
            ip[9] = 6;
            ip[12..16].copy_from_slice(&s.octets());
            ip[16..20].copy_from_slice(&t.octets());
            Ipv4Packet::new_unchecked(&mut d[14..34]).fill_checksum();
        }
        (IpAddress::V6(s), IpAddress::V6(t)) => {
            d[12..14].copy_from_slice(&[0x86, 0xdd]);
            let ip = &mut d[14..54];
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&((l4 + pl.len()) as u16).to_be_bytes());
            ip[6] = 6;
            ip[7] = 64;
            ip[8..24].copy_from_slice(&s.octets());
            ip[24..40].copy_from_slice(&t.octets());
        }
        _ => unreachable!(),
    }
    let t = 14 + l3;
    let tcp = &mut d[t..];
    tcp[0..2].copy_from_slice(&(40000 + f.n as u16).to_be_bytes());
    tcp[2..4].copy_from_slice(&5201u16.to_be_bytes());
    tcp[4..8].copy_from_slice(&f.seq0.wrapping_add(off as u32).to_be_bytes());
    let ack = 0x1234_5678u32.wrapping_add((k / f.ack_every) as u32 * 1000);
    tcp[8..12].copy_from_slice(&ack.to_be_bytes());
    tcp[12] = (l4 as u8 / 4) << 4;
    tcp[13] = 0x10 | if psh { 0x08 } else { 0 };
    tcp[14..16].copy_from_slice(&502u16.to_be_bytes());
    tcp[20..32].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9]);
    tcp[l4..].copy_from_slice(pl);
    TcpPacket::new_unchecked(&mut d[t..]).fill_checksum(&src, &dst);
    d
}

/// (flow, seq) -> payload, for every TCP packet; checks every checksum on the way.
fn payloads(pkts: &[Vec<u8>]) -> BTreeMap<(u16, u32), Vec<u8>> {
    let mut m = BTreeMap::new();
    for d in pkts {
        let v6 = d[12] == 0x86;
        let l3 = if v6 { 40 } else { 20 };
        let (src, dst) = if v6 {
            let a = Ipv6Addr::from(<[u8; 16]>::try_from(&d[22..38]).unwrap());
            let b = Ipv6Addr::from(<[u8; 16]>::try_from(&d[38..54]).unwrap());
            (IpAddress::V6(a), IpAddress::V6(b))
        } else {
            let ip = Ipv4Packet::new_checked(&d[14..]).unwrap();
            assert!(ip.verify_checksum(), "bad IPv4 checksum");
            assert_eq!(usize::from(ip.total_len()) + 14, d.len(), "IPv4 length");
            (IpAddress::V4(ip.src_addr()), IpAddress::V4(ip.dst_addr()))
        };
        if v6 {
            assert_eq!(usize::from(u16::from_be_bytes([d[18], d[19]])) + 54, d.len(), "IPv6 length");
        }
        let tcp = TcpPacket::new_checked(&d[14 + l3..]).unwrap();
        assert!(tcp.verify_checksum(&src, &dst), "bad TCP checksum");
        let mut seq = tcp.seq_number();
        // Split into single bytes-per-seq runs so merged and unmerged compare equal.
        for chunk in tcp.payload().chunks(1) {
            m.insert((tcp.src_port(), seq), chunk.to_vec());
            seq = seq.wrapping_add(1);
        }
    }
    m
}

struct Case {
    flows: Vec<FlowSpec>,
    /// (flow, segment index, PSH | PURE_ACK) in arrival order.
    order: Vec<(usize, usize, u8)>,
    /// Whether the "NIC" flagged each packet's checksums good (they are all valid).
    good: Vec<bool>,
}

fn make_case(rng: &mut XorShift) -> Case {
    let nflows = 1 + rng.below(6) as usize;
    let mut flows = Vec::new();
    for n in 0..nflows {
        let mss = [536, 1000, 1448, 1440, 7, 1 + rng.below(1500) as usize][rng.below(6) as usize];
        let len = 1 + rng.below(40_000) as usize;
        let data = (0..len).map(|_| rng.next_u64() as u8).collect();
        flows.push(FlowSpec {
            v6: rng.below(2) == 1,
            n: n as u32,
            seq0: rng.next_u64() as u32,
            id0: rng.next_u64() as u16,
            mss,
            data,
            ack_every: [usize::MAX, 7, 3][rng.below(3) as usize],
        });
    }
    let mut per_flow: Vec<Vec<(usize, usize, u8)>> = flows
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut v = Vec::new();
            for k in 0..f.data.len().div_ceil(f.mss) {
                if rng.below(25) == 0 {
                    v.push((i, k, PURE_ACK));
                }
                v.push((i, k, if rng.below(10) == 0 { PSH } else { 0 }));
            }
            v
        })
        .collect();
    // Loss (about 3%), then local reordering (swap neighbours about 5%).
    for v in &mut per_flow {
        v.retain(|_| rng.below(33) != 0);
        for j in 1..v.len() {
            if rng.below(20) == 0 {
                v.swap(j - 1, j);
            }
        }
    }
    // Interleave flows at random.
    let mut order = Vec::new();
    let mut idx = vec![0usize; per_flow.len()];
    while order.len() < per_flow.iter().map(Vec::len).sum::<usize>() {
        let f = rng.below(per_flow.len() as u64) as usize;
        if idx[f] < per_flow[f].len() {
            order.push(per_flow[f][idx[f]]);
            idx[f] += 1;
        }
    }
    // Checksum flags: none, all, or some packets (a flow may see both).
    let flagging = rng.below(3);
    let good = order.iter().map(|_| flagging == 1 || (flagging == 2 && rng.below(2) == 0)).collect();
    Case { flows, order, good }
}

fn pools() -> (Mempool, Mempool) {
    let small = Mempool::create(&MempoolConfig::new("agg", 16383).cache_size(0).policy(MemPolicy::NoHuge)).unwrap();
    let big = Mempool::create(&MempoolConfig::new("lro", 512).cache_size(0).data_room(65535).policy(MemPolicy::NoHuge))
        .unwrap();
    (small, big)
}

/// Feed the case in bursts of `burst`, collecting outputs as flat byte vectors
/// (and as mbufs in `keep` when given).
fn run(
    agg: &mut Aggregator,
    case: &Case,
    pool: &Mempool,
    burst: usize,
    mut keep: Option<&mut Vec<Mbuf>>,
) -> Vec<Vec<u8>> {
    let frames: Vec<Vec<u8>> = case.order.iter().map(|&(f, k, p)| frame(&case.flows[f], k, p)).collect();
    let mut out = Vec::new();
    let mut now = 0u64;
    let mut collect = |b: &mut Burst, out: &mut Vec<Vec<u8>>| {
        for m in b.drain() {
            out.push(m.to_vec());
            if let Some(k) = keep.as_deref_mut() {
                k.push(m);
            }
        }
    };
    for (chunk, good) in frames.chunks(burst).zip(case.good.chunks(burst)) {
        let mut b = Burst::new();
        for (f, &g) in chunk.iter().zip(good) {
            let mut m = Mbuf::from_slice(pool, f).unwrap();
            if g {
                m.header_mut().ol_flags |= abi::RX_IP_CKSUM_GOOD | abi::RX_L4_CKSUM_GOOD;
            }
            b.push(m).unwrap();
        }
        now += 10;
        agg.process(&mut b, now);
        collect(&mut b, &mut out);
        // What flows hold between bursts stays within max_held (plus the packets
        // waiting for room in the next burst).
        let held_in_flows = agg.held() - agg.pending();
        assert!(held_in_flows <= agg.config().max_held.max(burst), "{held_in_flows} held");
    }
    // Drain what is held (timeout mode), then any overflow.
    for _ in 0..4 {
        let mut b = Burst::new();
        now += 1_000_000;
        agg.process(&mut b, now);
        collect(&mut b, &mut out);
    }
    assert_eq!(agg.held(), 0);
    out
}

fn cfg(mode: Mode, flush: Flush, rng: &mut XorShift) -> AggrConfig {
    AggrConfig {
        mode,
        max_bytes: [65535, 16384, 3000][rng.below(3) as usize],
        max_segments: [64, 8, 2][rng.below(3) as usize],
        max_flows: [64, 3][rng.below(2) as usize],
        max_held: [4096, 40][rng.below(2) as usize],
        flush,
        flush_tsc: 25,
        drop_bad: false,
        tso: false,
    }
}

#[test]
fn gro_and_lro_keep_every_byte_of_every_flow_with_valid_checksums() {
    let (pool, big) = pools();
    for seed in 1..=60u64 {
        let mut rng = XorShift(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let case = make_case(&mut rng);
        let input: Vec<Vec<u8>> = case.order.iter().map(|&(f, k, p)| frame(&case.flows[f], k, p)).collect();
        let want = payloads(&input);
        for (mode, flush) in [
            (Mode::Gro, Flush::Burst),
            (Mode::Lro, Flush::Burst),
            (Mode::Gro, Flush::Timeout),
            (Mode::Lro, Flush::Timeout),
        ] {
            let c = cfg(mode, flush, &mut rng);
            let mut agg = Aggregator::new(c, Some(big.clone()));
            let burst = [32, 256, 1, 7][rng.below(4) as usize].min(MAX_BURST);
            let out = run(&mut agg, &case, &pool, burst, None);
            let got = payloads(&out);
            assert!(got == want, "seed {seed} {mode:?} {flush:?} {c:?}: streams differ");
            assert!(out.len() <= input.len());
            let s = agg.stats;
            assert_eq!(s.packets_in as usize, input.len());
            assert_eq!(s.packets_out as usize, out.len(), "seed {seed} {mode:?}");
            assert_eq!(s.packets_in - s.merged + s.aggregates, s.packets_out, "seed {seed} {mode:?} {s:?}");
        }
        assert_eq!(pool.stats().in_use, 0, "seed {seed}: leak");
        assert_eq!(big.stats().in_use, 0, "seed {seed}: LRO leak");
    }
}

/// With `tso`, an aggregate leaves as a TSO packet: `TX_TCP_SEG | TX_TCP_CKSUM`, its
/// MSS and header lengths, and in its TCP checksum field the pseudo-header sum over
/// its whole TCP length (what the port or the kernel completes per segment).
fn assert_tso_form(m: &Mbuf, seed: u64) {
    let h = m.header();
    let d = m.to_vec();
    let (l2, l3) = (usize::from(h.l2_len), usize::from(h.l3_len));
    let v6 = d[l2] >> 4 == 6;
    let want_flags = abi::TX_TCP_SEG | abi::TX_TCP_CKSUM | if v6 { abi::TX_IPV6 } else { abi::TX_IPV4 };
    assert_eq!(h.ol_flags & want_flags, want_flags, "seed {seed}: flags {:#x}", h.ol_flags);
    assert_eq!(h.ol_flags & abi::RX_L4_CKSUM_GOOD, 0, "seed {seed}: the checksum is partial now");
    let tcp_len = d.len() - l2 - l3;
    let (src, dst) = if v6 {
        let a = |o: usize| IpAddress::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&d[o..o + 16]).unwrap()));
        (a(l2 + 8), a(l2 + 24))
    } else {
        let a = |o: usize| IpAddress::V4(Ipv4Addr::new(d[o], d[o + 1], d[o + 2], d[o + 3]));
        (a(l2 + 12), a(l2 + 16))
    };
    let pseudo = checksum::fold(checksum::pseudo_header(&src, &dst, IpProtocol::TCP, tcp_len as u32));
    let field = u16::from_be_bytes([d[l2 + l3 + 16], d[l2 + l3 + 17]]);
    assert_eq!(field, pseudo, "seed {seed}: the TCP checksum field holds the pseudo-header sum");
}

#[test]
fn gro_then_gso_gives_back_the_input_segments_byte_for_byte() {
    let (pool, _) = pools();
    let (mut merged_any, mut tso_any) = (0, 0);
    for seed in 100..=160u64 {
        let mut rng = XorShift(seed.wrapping_mul(0x2545_f491_4f6c_dd1d));
        let case = make_case(&mut rng);
        let mut c = cfg(Mode::Gro, if seed % 2 == 0 { Flush::Burst } else { Flush::Timeout }, &mut rng);
        // Every third seed marks the aggregates for TSO: cut by a port (here as
        // `TxFixup` does for one without TSO), they come back the same.
        c.tso = seed % 3 == 0;
        let mut agg = Aggregator::new(c, None);
        let mut kept = Vec::new();
        run(&mut agg, &case, &pool, 64, Some(&mut kept));
        merged_any += agg.stats.aggregates;
        let mut segs = Vec::new();
        for m in kept {
            if m.header().ol_flags & abi::RX_AGGREGATED != 0 && c.tso {
                assert_tso_form(&m, seed);
                tso_any += 1;
            }
            let mss = if c.tso { m.header().tso_segsz } else { 0 };
            match segment(m, &pool, mss, &mut |s| segs.push(s.to_vec())) {
                Ok(_) => {}
                Err((m, _)) => segs.push(m.to_vec()),
            }
        }
        // Input segments, sorted per flow by sequence: exactly what GSO produced.
        let mut want: Vec<Vec<u8>> = case.order.iter().map(|&(f, k, p)| frame(&case.flows[f], k, p)).collect();
        let key = |d: &Vec<u8>| {
            let l3 = if d[12] == 0x86 { 40 } else { 20 };
            let t = 14 + l3;
            (u16::from_be_bytes([d[t], d[t + 1]]), u32::from_be_bytes(d[t + 4..t + 8].try_into().unwrap()), d.clone())
        };
        want.sort_by_key(key);
        segs.sort_by_key(key);
        assert_eq!(segs.len(), want.len(), "seed {seed}");
        for (g, w) in segs.iter().zip(&want) {
            assert!(g == w, "seed {seed}: segment differs\n got {g:02x?}\nwant {w:02x?}");
        }
        assert_eq!(pool.stats().in_use, 0, "seed {seed}: leak");
    }
    assert!(merged_any > 100, "the cases must exercise merging ({merged_any} aggregates)");
    assert!(tso_any > 20, "and TSO marking ({tso_any} aggregates)");
}

#[test]
fn bad_checksums_and_malformed_headers_are_never_merged() {
    let (pool, _) = pools();
    let f = FlowSpec { v6: false, n: 1, seq0: 1000, id0: 7, mss: 100, data: vec![0xab; 400], ack_every: usize::MAX };
    let mut frames: Vec<Vec<u8>> = (0..4).map(|k| frame(&f, k, 0)).collect();
    frames[1][70] ^= 0xff; // payload byte (after 14 + 20 + 32): TCP checksum now wrong
    frames[3].truncate(40); // cut inside the TCP header (IPv4 total length now too big)
    let mut agg = Aggregator::new(AggrConfig::default(), None);
    let mut b = Burst::new();
    for d in &frames {
        b.push(Mbuf::from_slice(&pool, d).unwrap()).unwrap();
    }
    agg.process(&mut b, 1);
    assert_eq!(b.len(), 4, "nothing merged: 0 | bad | 2 | malformed");
    assert_eq!((agg.stats.bad_checksum, agg.stats.malformed, agg.stats.aggregates), (1, 1, 0));
    for i in 0..4 {
        assert_eq!(b.header(i).ol_flags & abi::RX_AGGREGATED, 0);
    }
    drop(b);
    let mut agg = Aggregator::new(AggrConfig { drop_bad: true, ..AggrConfig::default() }, None);
    let mut b = Burst::new();
    for d in &frames {
        b.push(Mbuf::from_slice(&pool, d).unwrap()).unwrap();
    }
    agg.process(&mut b, 1);
    assert_eq!((b.len(), agg.stats.dropped), (2, 2));
    drop(b);
    assert_eq!(pool.stats().in_use, 0);
}

/// A TCP segment of a held flow that is not merged (an aggregate already, as a GSO
/// frame the kernel hands over; a bad checksum; IPv4 options; a VLAN tag the port
/// took off) leaves after what the
/// flow held, never before it: the flow's order is kept.
#[test]
fn a_segment_of_a_held_flow_that_is_not_merged_leaves_after_the_flow() {
    let (pool, _) = pools();
    let f = FlowSpec { v6: false, n: 1, seq0: 1000, id0: 7, mss: 100, data: vec![0xab; 600], ack_every: usize::MAX };
    for case in 0..4 {
        let mut frames: Vec<Vec<u8>> = (0..6).map(|k| frame(&f, k, 0)).collect();
        match case {
            0 | 3 => {}
            1 => frames[2][70] ^= 0xff, // payload byte (after 14 + 20 + 32): TCP checksum now wrong
            _ => {
                // Four NOP option bytes: IHL 6, the total length and checksum fixed.
                let d = &mut frames[2];
                d.splice(34..34, [1, 1, 1, 1]);
                d[14] = 0x46;
                let len = u16::from_be_bytes([d[16], d[17]]) + 4;
                d[16..18].copy_from_slice(&len.to_be_bytes());
                Ipv4Packet::new_unchecked(&mut d[14..]).fill_checksum();
            }
        }
        let mut agg = Aggregator::new(AggrConfig::default(), None);
        let mut b = Burst::new();
        for (k, d) in frames.iter().enumerate() {
            let mut m = Mbuf::from_slice(&pool, d).unwrap();
            if k == 2 {
                // An aggregate already; a VLAN tag the port took off (not in the
                // bytes that key the flow: never merged).
                m.header_mut().ol_flags |= [abi::RX_AGGREGATED, 0, 0, abi::RX_VLAN_STRIPPED][case];
            }
            b.push(m).unwrap();
        }
        agg.process(&mut b, 1);
        let seqs: Vec<u32> = (0..b.len())
            .map(|i| {
                let d = b.data(i);
                let t = 14 + usize::from(d[14] & 0x0f) * 4;
                u32::from_be_bytes(d[t + 4..t + 8].try_into().unwrap())
            })
            .collect();
        assert_eq!(seqs, [1000, 1200, 1300], "case {case}: 0+1 merged, 2 alone, then 3+4+5, in order");
        drop(b);
    }
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn an_aggregate_carries_its_segment_count_mss_and_flags() {
    let (pool, big) = pools();
    for mode in [Mode::Gro, Mode::Lro] {
        let f = FlowSpec {
            v6: true,
            n: 3,
            seq0: u32::MAX - 150,
            id0: 0,
            mss: 100,
            data: (0..=255).collect(),
            ack_every: usize::MAX,
        };
        let mut agg = Aggregator::new(AggrConfig { mode, ..AggrConfig::default() }, Some(big.clone()));
        let mut b = Burst::new();
        for k in 0..3 {
            b.push(Mbuf::from_slice(&pool, &frame(&f, k, if k == 2 { PSH } else { 0 })).unwrap()).unwrap();
        }
        agg.process(&mut b, 1);
        assert_eq!(b.len(), 1, "{mode:?}: one aggregate across the sequence wrap");
        let h = b.header(0);
        assert_ne!(h.ol_flags & abi::RX_AGGREGATED, 0);
        assert_eq!((h.aggr_segs, h.tso_segsz, h.pkt_len), (3, 100, 14 + 40 + 32 + 256));
        assert_eq!(agg.stats.flush_end, 1, "PSH on the last segment ends the aggregate");
        let v: Vec<u8> = b.segments(0).flatten().copied().collect();
        assert_eq!(v[14 + 40 + 13] & 0x08, 0x08, "PSH kept");
        if mode == Mode::Lro {
            assert_eq!(h.nb_segs, 1, "LRO: one contiguous buffer");
        } else {
            assert_eq!(h.nb_segs, 3, "GRO: a chain");
        }
        payloads(&[v]);
    }
    assert_eq!(pool.stats().in_use, 0);
    assert_eq!(big.stats().in_use, 0);
}

/// Payload sums at odd offsets, a run joined behind a segment that came late, and
/// an aggregate whose first segment's TCP checksum field is not whole: IPv4
/// segments of 7 bytes (every other one starts at an odd offset of the aggregate's
/// payload) arriving 1, 2, 0, 3, ... in one burst, the last with PSH. Segment 0
/// comes after 1 and 2 and becomes their run's head (the run of two joined behind
/// it at offset 7). Its checksum flags are "good" (its sums read from the headers),
/// or `RX_L4_CKSUM_NONE` with a field that is not a checksum (a kernel peer's
/// partial checksum: the aggregate's is then summed from its headers and every
/// payload sum). Either way one aggregate with valid checksums comes out.
#[test]
fn odd_offsets_a_late_head_and_a_partial_first_checksum_give_one_valid_aggregate() {
    const GOOD: u64 = abi::RX_IP_CKSUM_GOOD | abi::RX_L4_CKSUM_GOOD;
    let (pool, big) = pools();
    for mode in [Mode::Gro, Mode::Lro] {
        for head_flags in [GOOD, abi::RX_IP_CKSUM_GOOD | abi::RX_L4_CKSUM_NONE] {
            let f = FlowSpec {
                v6: false,
                n: 5,
                seq0: 1000,
                id0: 77,
                mss: 7,
                data: (0..7 * 20).map(|i| (i * 37 + 11) as u8).collect(),
                ack_every: usize::MAX,
            };
            let order: Vec<usize> = [1, 2, 0].into_iter().chain(3..20).collect();
            let mut agg = Aggregator::new(AggrConfig { mode, ..AggrConfig::default() }, Some(big.clone()));
            let mut b = Burst::new();
            for &k in &order {
                let mut d = frame(&f, k, if k == 19 { PSH } else { 0 });
                let mut flags = GOOD;
                if k == 0 {
                    flags = head_flags;
                    if head_flags & abi::RX_L4_CKSUM_NONE != 0 {
                        d[14 + 20 + 16..14 + 20 + 18].copy_from_slice(&[0xde, 0xad]);
                    }
                }
                let mut m = Mbuf::from_slice(&pool, &d).unwrap();
                m.header_mut().ol_flags |= flags;
                b.push(m).unwrap();
            }
            agg.process(&mut b, 1);
            let what = format!("{mode:?}, first segment's flags {head_flags:#x}");
            assert_eq!(b.len(), 1, "{what}: one aggregate");
            assert_eq!(agg.stats.reordered, 1, "{what}: segment 0 came late");
            assert_eq!(b.header(0).aggr_segs, 20, "{what}");
            let v: Vec<u8> = b.segments(0).flatten().copied().collect();
            let got = payloads(&[v]); // (checks both checksums)
            let want = payloads(&(0..20).map(|k| frame(&f, k, 0)).collect::<Vec<_>>());
            assert!(got == want, "{what}: bytes differ");
        }
    }
    assert_eq!(pool.stats().in_use, 0);
    assert_eq!(big.stats().in_use, 0);
}
