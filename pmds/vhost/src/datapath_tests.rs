//! The data path against an in-process guest ([`crate::guest`]): traffic both ways,
//! merged buffers, offloads, and the hostile guest's tricks, each counted.

use crate::guest::{Guest, BUF, GPA, QSIZE, SIZE};
use crate::proto::feat;
use crate::testkit::{bad_then_good, Q};
use crate::vring::{checksum_from, Faults, Negotiated};
use ironpath_pmd_sdk::abi;
use ironpath_pmd_sdk::testing::{run_rx, run_tx, TestPool};
use ironpath_pmd_sdk::vnet::{VnetHdr, F_NEEDS_CSUM, GSO_TCPV4};
use ironpath_pmd_sdk::Packet;
use std::sync::Arc;

const NEXT: u16 = 1;
const WRITE: u16 = 2;
const INDIRECT: u16 = 4;

fn neg(features: u64) -> Negotiated {
    let has = |b| crate::proto::has(features, b);
    Negotiated {
        hdr_len: 12,
        mrg: has(feat::MRG_RXBUF),
        guest_csum: has(feat::GUEST_CSUM),
        guest_tso: has(feat::GUEST_TSO4) && has(feat::GUEST_TSO6),
        in_order: has(feat::IN_ORDER),
    }
}

/// The guest, our RX queue on its TX ring and our TX queue on its RX ring.
fn setup(tp: &TestPool, features: u64) -> (Guest, Q, Q) {
    let g = Guest::new();
    let mem = Arc::new(g.table());
    let mut rx = g.vring(1, mem.clone());
    let mut tx = g.vring(0, mem);
    rx.neg = neg(features);
    tx.neg = neg(features);
    let q = |v| Q { v, pool: tp.pool(), f: Arc::new(Faults::default()) };
    (g, q(rx), q(tx))
}

fn frame(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

const ALL: u64 = crate::proto::OFFERED;

#[test]
fn frames_cross_both_ways_whole_with_merged_buffers() {
    let tp = TestPool::new(512, 2048 + 128, 128);
    let (mut g, mut rx, mut tx) = setup(&tp, ALL);
    let lens = [60usize, 64, 1514, 2036, 2037, 4000, 9000, 60000];
    for (k, &len) in lens.iter().enumerate() {
        g.send(&[0; 12], &frame(len, k as u8), if k % 2 == 0 || len > 20_000 { 2048 } else { 700 });
    }
    let got = run_rx(&mut rx, 32, 3);
    assert_eq!(got.len(), lens.len());
    for (k, p) in got.iter().enumerate() {
        let mut b = Vec::new();
        p.copy_to(&mut b);
        assert_eq!(b, frame(lens[k], k as u8), "frame {k}");
        assert_eq!(p.mbuf().port, 3);
    }
    // Every TX chain went back to the guest.
    assert_eq!(g.used(1).len(), lens.len());
    // Back to the guest, in 1024-byte buffers: merged.
    g.post_rx(200, 1024);
    let left = run_tx(&mut tx, got);
    assert!(left.is_empty());
    let back = g.recv();
    assert_eq!(back.len(), lens.len());
    for (k, (h, f)) in back.iter().enumerate() {
        assert_eq!(*f, frame(lens[k], k as u8), "frame {k} back");
        let nbuf = u16::from_le_bytes([h[10], h[11]]) as usize;
        assert_eq!(nbuf, (lens[k] + 12).div_ceil(1024));
    }
    assert_eq!(tp.in_use(), 0, "every mbuf back");
    assert_eq!((rx.f.bad_desc.get(), tx.f.bad_desc.get()), (0, 0));
}

/// Whatever a receive buffer held, a small packet leaves exactly its header (no
/// offload, one buffer) and frame in it: buffers that are zero (fresh), all ones
/// (another packet's header, as far from ours as can be) or already right. (A
/// header written only where it differs, as DPDK's vhost writes it, must pass.)
#[test]
fn a_receive_buffer_ends_with_the_packets_header_whatever_it_held() {
    let tp = TestPool::new(64, 2048 + 128, 128);
    let (mut g, _rx, mut tx) = setup(&tp, ALL);
    let want = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0];
    for held in [None, Some([0xffu8; 12]), Some(want)] {
        if let Some(h) = held {
            for i in 0..QSIZE as u16 {
                g.write(Guest::buf_gpa(0, i) - GPA, &h);
            }
        }
        g.post_rx(4, 2048);
        let pkts = (0..4).map(|k| tp.packet(&frame(60 + k, k as u8))).collect();
        assert!(run_tx(&mut tx, pkts).is_empty());
        let back = g.recv();
        assert_eq!(back.len(), 4);
        for (k, (h, f)) in back.into_iter().enumerate() {
            assert_eq!(h, want, "buffer held {held:?}: packet {k}'s header");
            assert_eq!(f, frame(60 + k, k as u8));
        }
    }
    assert_eq!(tp.in_use(), 0);
}

#[test]
fn in_order_a_burst_of_guest_chains_goes_back_as_its_last_used_entry() {
    for in_order in [false, true] {
        let tp = TestPool::new(64, 2048 + 128, 128);
        let f = if in_order { ALL } else { ALL & !(1 << feat::IN_ORDER) };
        let (mut g, mut rx, _tx) = setup(&tp, f);
        for k in 0..3 {
            g.send(&[0; 12], &frame(100, k), 2048);
        }
        assert_eq!(run_rx(&mut rx, 32, 0).len(), 3);
        // Chains 0, 1, 2 (one descriptor each); the guest's used ring was zeroed. In
        // order, one entry: the last chain's id in the batch's first slot.
        let want = if in_order { vec![(2, 0), (0, 0), (0, 0)] } else { vec![(0, 0), (1, 0), (2, 0)] };
        assert_eq!(g.used(1), want, "in_order {in_order}");
        assert_eq!(tp.in_use(), 0);
    }
}

#[test]
fn a_full_guest_ring_keeps_the_packets_and_one_too_small_buffer_drops_one() {
    let tp = TestPool::new(64, 2048 + 128, 128);
    let (mut g, _rx, mut tx) = setup(&tp, ALL);
    let pkts: Vec<Packet> = (0..4).map(|k| tp.packet(&frame(1000, k))).collect();
    // No buffer posted: nothing taken, counted.
    let left = run_tx(&mut tx, pkts);
    assert_eq!((left.len(), tx.f.ring_full.get()), (4, 1));
    // Two buffers: two packets go, two stay.
    g.post_rx(2, 2048);
    let left = run_tx(&mut tx, left);
    assert_eq!((left.len(), g.recv().len()), (2, 2));
    // Without merged buffers a packet longer than its buffer is dropped, the
    // buffer returned empty.
    tx.v.neg.mrg = false;
    g.post_rx(1, 512);
    let left = run_tx(&mut tx, left);
    assert_eq!((left.len(), tx.f.too_long.get()), (1, 1));
    assert_eq!(g.used(0), vec![(2, 0)]);
    drop(left);
    assert_eq!(tp.in_use(), 0);
}

#[test]
fn offloads_map_both_ways_and_a_checksum_the_guest_refused_is_completed_here() {
    let tp = TestPool::new(64, 2048 + 128, 128);
    let (mut g, mut rx, mut tx) = setup(&tp, ALL);
    // A guest TSO frame with a partial checksum.
    let h = VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: GSO_TCPV4,
        hdr_len: 66,
        gso_size: 1448,
        csum_start: 34,
        csum_offset: 16,
    };
    let mut hb = [0u8; 12];
    hb[..10].copy_from_slice(&h.to_bytes());
    g.send(&hb, &frame(66 + 1448 * 3, 1), 2048);
    let got = run_rx(&mut rx, 8, 0);
    let m = got[0].mbuf();
    assert_ne!(m.ol_flags & abi::RX_AGGREGATED, 0);
    assert_ne!(m.ol_flags & abi::RX_L4_CKSUM_NONE, 0);
    assert_eq!((m.tso_segsz, m.aggr_segs), (1448, 3));
    drop(got);
    // Our partial UDP checksum to a guest without GUEST_CSUM: completed here.
    tx.v.neg = neg(ALL & !(1 << feat::GUEST_CSUM));
    let mut f = frame(600, 9);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    // The checksum field holds the pseudo-header's sum; zero here, so the completed
    // UDP part alone sums to all ones.
    f[40..42].copy_from_slice(&[0, 0]);
    let mut p = tp.packet(&f);
    // SAFETY: our packet, not shared.
    let m = unsafe { p.mbuf_mut() };
    (m.l2_len, m.l3_len) = (14, 20);
    m.ol_flags = abi::TX_UDP_CKSUM | abi::TX_IPV4;
    m.packet_type = abi::ptype::L4_UDP;
    g.post_rx(4, 2048);
    assert!(run_tx(&mut tx, vec![p]).is_empty());
    let (hdr, got) = g.recv().pop().unwrap();
    assert_eq!(hdr[0] & F_NEEDS_CSUM, 0, "no partial checksum left for the guest");
    assert_eq!(&got[..40], &f[..40]);
    assert_ne!(&got[40..42], &f[40..42]);
    // The completed checksum sums to zero over the UDP part.
    assert_eq!(checksum_from([&got[..]].into_iter(), 34), 0xffff);
    assert_eq!(&got[42..], &f[42..]);
    // A TSO packet to a guest that takes none: dropped, counted.
    tx.v.neg = neg(ALL & !(1 << feat::GUEST_TSO4));
    let mut p = tp.packet(&frame(3000, 1));
    // SAFETY: as above.
    let m = unsafe { p.mbuf_mut() };
    (m.l2_len, m.l3_len, m.l4_len, m.tso_segsz) = (14, 20, 20, 1448);
    m.ol_flags = abi::TX_TCP_SEG | abi::TX_TCP_CKSUM | abi::TX_IPV4;
    assert!(run_tx(&mut tx, vec![p]).is_empty());
    assert_eq!(tx.f.too_long.get(), 1);
    assert_eq!(tp.in_use(), 0);
}

#[test]
fn a_hostile_guests_chains_are_counted_and_dropped_and_the_ring_goes_on() {
    let tp = TestPool::new(256, 2048 + 128, 128);
    let (mut g, mut rx, _tx) = setup(&tp, ALL);
    let head = 200u16;
    type Case<'a> = (&'static str, Box<dyn Fn(&mut Guest) + 'a>);
    let cases: Vec<Case> = vec![
        ("outside memory", Box::new(|g: &mut Guest| g.set_desc(1, head, GPA + SIZE, 100, 0, 0))),
        ("below memory", Box::new(|g: &mut Guest| g.set_desc(1, head, 0, 100, 0, 0))),
        ("crossing the end", Box::new(|g: &mut Guest| g.set_desc(1, head, GPA + SIZE - 50, 100, 0, 0))),
        ("wrapping", Box::new(|g: &mut Guest| g.set_desc(1, head, u64::MAX - 10, 100, 0, 0))),
        ("huge length", Box::new(|g: &mut Guest| g.set_desc(1, head, GPA, u32::MAX, 0, 0))),
        (
            "loop",
            Box::new(|g: &mut Guest| {
                g.set_desc(1, head, Guest::buf_gpa(1, 0), 64, NEXT, head + 1);
                g.set_desc(1, head + 1, Guest::buf_gpa(1, 1), 64, NEXT, head);
            }),
        ),
        ("next out of the table", Box::new(|g: &mut Guest| g.set_desc(1, head, Guest::buf_gpa(1, 0), 64, NEXT, 9999))),
        ("writable TX buffer", Box::new(|g: &mut Guest| g.set_desc(1, head, Guest::buf_gpa(1, 0), 100, WRITE, 0))),
        ("short of a header", Box::new(|g: &mut Guest| g.set_desc(1, head, Guest::buf_gpa(1, 0), 11, 0, 0))),
        ("indirect table outside", Box::new(|g: &mut Guest| g.set_desc(1, head, GPA + SIZE, 64, INDIRECT, 0))),
        (
            "indirect length not of 16",
            Box::new(|g: &mut Guest| g.set_desc(1, head, Guest::buf_gpa(1, 5), 40, INDIRECT, 0)),
        ),
        (
            "indirect with next",
            Box::new(|g: &mut Guest| g.set_desc(1, head, Guest::buf_gpa(1, 5), 32, INDIRECT | NEXT, 1)),
        ),
        (
            "nested indirect",
            Box::new(|g: &mut Guest| {
                let t = Guest::buf_gpa(1, 5);
                g.write(t - GPA, &{
                    let mut d = [0u8; 16];
                    d[..8].copy_from_slice(&t.to_le_bytes());
                    d[8..12].copy_from_slice(&16u32.to_le_bytes());
                    d[12..14].copy_from_slice(&INDIRECT.to_le_bytes());
                    d
                });
                g.set_desc(1, head, t, 16, INDIRECT, 0);
            }),
        ),
        (
            "indirect loop",
            Box::new(|g: &mut Guest| {
                let t = Guest::buf_gpa(1, 5);
                for i in 0..2u16 {
                    let mut d = [0u8; 16];
                    d[..8].copy_from_slice(&Guest::buf_gpa(1, 6).to_le_bytes());
                    d[8..12].copy_from_slice(&64u32.to_le_bytes());
                    d[12..14].copy_from_slice(&NEXT.to_le_bytes());
                    d[14..16].copy_from_slice(&(1 - i).to_le_bytes());
                    g.write(t - GPA + 16 * u64::from(i), &d);
                }
                g.set_desc(1, head, t, 32, INDIRECT, 0);
            }),
        ),
        (
            "a chain of 65 buffers",
            Box::new(|g: &mut Guest| {
                for i in 0..65u16 {
                    g.set_desc(1, 100 + i, Guest::buf_gpa(1, i), 20, if i < 64 { NEXT } else { 0 }, 101 + i);
                }
            }),
        ),
    ];
    for (what, bad) in cases {
        let (bad_count, ok) = bad_then_good(&mut g, &mut rx, |g| {
            bad(g);
            let h = if what == "a chain of 65 buffers" { 100 } else { head };
            g.push_avail(1, h);
        });
        assert_eq!((bad_count, ok), (1, 1), "{what}");
    }
    // A head beyond the table.
    let (bad_count, ok) = bad_then_good(&mut g, &mut rx, |g| g.push_avail(1, QSIZE as u16 + 3));
    assert_eq!((bad_count, ok), (1, 1));
    // Indirect tables done right are taken.
    let (bad_count, ok) = bad_then_good(&mut g, &mut rx, |g| {
        let t = Guest::buf_gpa(1, 5);
        let data = Guest::buf_gpa(1, 6);
        g.write(data - GPA, &[0u8; 12]);
        g.write(data - GPA + 12, &frame(88, 7));
        let mut d = [0u8; 32];
        d[..8].copy_from_slice(&data.to_le_bytes());
        d[8..12].copy_from_slice(&12u32.to_le_bytes());
        d[12..14].copy_from_slice(&NEXT.to_le_bytes());
        d[14..16].copy_from_slice(&1u16.to_le_bytes());
        d[16..24].copy_from_slice(&(data + 12).to_le_bytes());
        d[24..28].copy_from_slice(&88u32.to_le_bytes());
        g.write(t - GPA, &d);
        g.set_desc(1, head, t, 32, INDIRECT, 0);
        g.push_avail(1, head);
    });
    assert_eq!((bad_count, ok), (0, 1));
    assert_eq!(tp.in_use(), 0);
    // An available index far ahead breaks the ring, counted, until it is set up again.
    let idx = g.avail_idx[1];
    g.set_avail_idx(1, idx.wrapping_add(QSIZE as u16 + 1));
    assert!(run_rx(&mut rx, 32, 0).is_empty());
    assert!(rx.v.broken && rx.f.bad_ring_index.get() == 1);
    assert!(run_rx(&mut rx, 32, 0).is_empty());
    assert_eq!(tp.in_use(), 0);
}

#[test]
fn a_hostile_guests_rx_buffers_are_counted_and_the_packet_dropped() {
    let tp = TestPool::new(64, 2048 + 128, 128);
    let (mut g, _rx, mut tx) = setup(&tp, ALL);
    let bads: [(u64, u32, u16); 4] = [
        (GPA + SIZE, 2048, WRITE),
        (Guest::buf_gpa(0, 0), 2048, 0),
        (u64::MAX - 4, 2048, WRITE),
        (Guest::buf_gpa(0, 0), 4, WRITE),
    ];
    for (k, &(addr, len, flags)) in bads.iter().enumerate() {
        g.set_desc(0, 10, addr, len, flags, 0);
        g.push_avail(0, 10);
        let left = run_tx(&mut tx, vec![tp.packet(&frame(100, 1))]);
        assert!(left.is_empty());
        assert_eq!(tx.f.bad_desc.get(), k as u64 + 1);
        assert_eq!(g.used(0), vec![(10, 0)], "returned empty");
    }
    assert_eq!(tp.in_use(), 0);
}

/// Random bytes over the rings and the descriptors, then bursts both ways: no
/// panic, and every mbuf comes back.
#[test]
fn random_rings_never_crash_and_every_mbuf_comes_back() {
    let tp = TestPool::new(512, 2048 + 128, 128);
    let (mut g, mut rx, mut tx) = setup(&tp, ALL);
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    for round in 0..300 {
        for _ in 0..64 {
            let r = (rnd() % 2) as usize;
            let i = (rnd() % u64::from(QSIZE)) as u16;
            let addr = match rnd() % 4 {
                0 => rnd(),
                1 => Guest::buf_gpa(r, (rnd() % 256) as u16),
                2 => GPA + rnd() % SIZE,
                _ => Guest::buf_gpa(r, i),
            };
            let len = if rnd() % 3 == 0 { rnd() as u32 } else { (rnd() % u64::from(BUF)) as u32 };
            g.set_desc(r, i, addr, len, (rnd() % 8) as u16, (rnd() % 300) as u16);
            if rnd() % 2 == 0 {
                g.push_avail(r, (rnd() % 300) as u16);
            }
        }
        if round % 50 == 49 {
            let v = rnd() as u16;
            g.set_avail_idx((rnd() % 2) as usize, v);
        }
        let got = run_rx(&mut rx, 32, 0);
        drop(run_tx(&mut tx, got));
        // A broken ring is set up again, as a front end would.
        for (q, r) in [(&mut rx, 1), (&mut tx, 0)] {
            if q.v.broken {
                q.v.broken = false;
                q.v.last_avail = g.avail_idx[r];
            }
        }
        assert_eq!(tp.in_use(), 0, "round {round}");
    }
}

/// Not a check: a steady io loop (32 frames of 64 bytes each way per round, with
/// the features DPDK's virtio-user takes) to count the data path's instructions per
/// packet, e.g. `ITERS=1000 valgrind --tool=callgrind
/// --toggle-collect='ironpath_pmd_vhost::vring::Vring::enqueue' <test binary>
/// --ignored io_loop_for_callgrind` (divide by ITERS x 32).
#[test]
#[ignore]
fn io_loop_for_callgrind() {
    let tp = TestPool::new(512, 2048 + 128, 128);
    let (mut g, mut rx, mut tx) = setup(&tp, 0x950008000);
    let f = frame(64, 1);
    let iters: usize = std::env::var("ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
    for _ in 0..iters {
        for _ in 0..32 {
            g.send(&[0; 12], &f, 2048);
        }
        let got = run_rx(&mut rx, 32, 3);
        assert_eq!(got.len(), 32);
        g.post_rx(32, 2048);
        assert!(run_tx(&mut tx, got).is_empty());
        g.used(1);
        assert_eq!(g.used(0).len(), 32);
    }
}
