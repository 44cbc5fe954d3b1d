//! Attacks on net_vhost: crafted rings and a hostile front end.
//!
//! Each test is an attack and what must hold against it: no panic, no hang, no
//! access outside the front end's memory, the fault counted, every mbuf back, and
//! other rings and devices going on. Tests named `child_*` are ignored: their parent
//! test runs them in a child process, so that a regression that kills the process
//! (a SIGBUS on the front end's memory) fails the test instead of the test run.

use crate::guest::{ring_off, Guest, GPA, QSIZE, SIZE, UVA};
use crate::mem::MemTable;
use crate::proto::{self, feat, req, Region, RingAddr, HDR_SIZE};
use crate::testkit::*;
use crate::vring::{Negotiated, Vring, MAX_RING};
use crate::Vhost;
use ironpath_pmd_sdk::abi;
use ironpath_pmd_sdk::ipc;
use ironpath_pmd_sdk::testing::{run_rx, run_tx, TestPool};
use ironpath_pmd_sdk::vnet::{VnetHdr, F_NEEDS_CSUM, GSO_TCPV4};
use ironpath_pmd_sdk::{Packet, Pmd, ProbeCtx, QueueStats};
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const NEXT: u16 = 1;
const WRITE: u16 = 2;
const INDIRECT: u16 = 4;

// ---------------------------------------------------------------------------
// Data path helpers (an in-process guest, as datapath_tests.rs has).
// ---------------------------------------------------------------------------

fn all_neg() -> Negotiated {
    Negotiated { hdr_len: 12, mrg: true, guest_csum: true, guest_tso: true, in_order: true }
}

/// The guest, our RX queue on its TX ring (1) and our TX queue on its RX ring (0).
fn setup(tp: &TestPool) -> (Guest, Q, Q) {
    let g = Guest::new();
    let mem = Arc::new(g.table());
    let mut rx = g.vring(1, mem.clone());
    let mut tx = g.vring(0, mem);
    rx.neg = all_neg();
    tx.neg = all_neg();
    (g, Q::new(rx, tp), Q::new(tx, tp))
}

/// A ring of `num` entries whose parts sit at region offsets `d`, `a`, `u`; `None`
/// when it does not translate.
fn ring_at(mem: &Arc<MemTable>, num: u32, d: u64, a: u64, u: u64) -> Option<Vring> {
    let mut v = Vring::default();
    v.num = num;
    v.addr = Some(RingAddr { desc: UVA + d, avail: UVA + a, used: UVA + u });
    v.mem = Some(mem.clone());
    v.started = true;
    v.enabled = true;
    v.neg = all_neg();
    v.translate().then_some(v)
}

fn desc_bytes(addr: u64, len: u32, flags: u16, next: u16) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&addr.to_le_bytes());
    b[8..12].copy_from_slice(&len.to_le_bytes());
    b[12..14].copy_from_slice(&flags.to_le_bytes());
    b[14..16].copy_from_slice(&next.to_le_bytes());
    b
}

/// Descriptor `i` of the table at region offset `table`.
fn wdesc(g: &Guest, table: u64, i: u32, addr: u64, len: u32, flags: u16, next: u16) {
    g.write(table + 16 * u64::from(i), &desc_bytes(addr, len, flags, next));
}

/// Available entry `pos` (free-running) of the ring at region offset `avail`.
fn wavail(g: &Guest, avail: u64, num: u32, pos: u16, head: u16) {
    g.write(avail + 4 + 2 * u64::from(u32::from(pos) % num), &head.to_le_bytes());
}

fn wu16(g: &Guest, o: u64, v: u16) {
    g.write(o, &v.to_le_bytes());
}

fn ru16(g: &Guest, o: u64) -> u16 {
    let b = g.read(o, 2);
    u16::from_le_bytes([b[0], b[1]])
}

fn frame(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

// ---------------------------------------------------------------------------
// Descriptor chains.
// ---------------------------------------------------------------------------

/// In a ring of 32768: a chain of `MAX_STEPS - 1` zero-length descriptors and one
/// buffer is taken; one of 32767 and a buffer (legal for the ring, more than a
/// chain may take) and one that loops back are refused after `MAX_STEPS` reads, so
/// a burst of 256 of them costs at most 256 × `MAX_STEPS` descriptor reads.
#[test]
fn dp_zero_length_chains_are_bounded_by_the_step_limit() {
    let tp = TestPool::new(512, 2048 + 128, 128);
    let g = Guest::new();
    let mem = Arc::new(g.table());
    let (d, a, u) = (0x20_0000u64, 0x28_0000u64, 0x29_0008u64);
    let num = MAX_RING;
    let mut q = Q::new(ring_at(&mem, num, d, a, u).expect("a 32768-entry ring fits"), &tp);
    let data = 0x30_0000u64;
    let mut pkt = vec![0u8; 12];
    pkt.extend(frame(60, 1));
    g.write(data, &pkt);
    let short = crate::vring::MAX_STEPS - 1;
    for i in 0..short {
        wdesc(&g, d, i, 0xdead_0000_0000, 0, NEXT, (i + 1) as u16);
    }
    wdesc(&g, d, short, GPA + data, 72, 0, 0);
    let mut idx = 0u16;
    let mut offer = |g: &Guest, n: u16| {
        for _ in 0..n {
            wavail(g, a, num, idx, 0);
            idx = idx.wrapping_add(1);
        }
        wu16(g, a + 2, idx);
    };
    offer(&g, 32);
    let got = run_rx(&mut q, 32, 0);
    assert_eq!(got.len(), 32, "a chain of MAX_STEPS descriptors is taken");
    assert!(got.iter().all(|p| p.len() == 60));
    drop(got);
    // 32767 zero-length descriptors, then the buffer: refused.
    for i in short..num - 1 {
        wdesc(&g, d, i, 0xdead_0000_0000, 0, NEXT, (i + 1) as u16);
    }
    wdesc(&g, d, num - 1, GPA + data, 72, 0, 0);
    offer(&g, 32);
    assert!(run_rx(&mut q, 32, 0).is_empty());
    assert_eq!(q.f.bad_desc.get(), 32);
    // The last descriptor loops back to the first: refused as well.
    wdesc(&g, d, num - 1, GPA + data, 72, NEXT, 0);
    offer(&g, 256);
    let t = Instant::now();
    let got = run_rx(&mut q, 256, 0);
    let loop_time = t.elapsed();
    assert!(got.is_empty());
    assert_eq!(q.f.bad_desc.get(), 32 + 256);
    assert!(!q.v.broken);
    assert_eq!(ru16(&g, u + 2), 32 + 32 + 256, "every chain went back");
    eprintln!("256 looping chains in one burst: {loop_time:?}");
    assert!(loop_time < Duration::from_secs(5));
    assert_eq!(tp.in_use(), 0);
}

/// Indirect tables: the ring's own table used as an indirect table (its
/// first entry is the indirect descriptor itself: nested, refused), a table over
/// the available ring, 1024 zero-length entries looping, 1025 entries, no entry,
/// a table across the region's end; a table of 1023 zero-length entries and one
/// buffer is taken.
#[test]
fn dp_indirect_tables_over_the_ring_looping_or_oversized_are_refused() {
    let tp = TestPool::new(256, 2048 + 128, 128);
    let (mut g, mut rx, _tx) = setup(&tp);
    let (d1, a1, ..) = ring_off(1);
    let head = 200u16;
    let t = Guest::buf_gpa(1, 100);
    let data = Guest::buf_gpa(1, 120);
    type Case<'a> = (&'static str, u64, Box<dyn Fn(&mut Guest) + 'a>);
    let cases: Vec<Case> = vec![
        (
            "the ring's own table, its first entry the indirect descriptor itself",
            1,
            Box::new(|g: &mut Guest| g.set_desc(1, head, GPA + d1 + 16 * u64::from(head), 16 * 56, INDIRECT, 0)),
        ),
        ("over the available ring", 1, Box::new(|g: &mut Guest| g.set_desc(1, head, GPA + a1, 16 * 32, INDIRECT, 0))),
        (
            "1024 zero-length entries in a loop",
            1,
            Box::new(|g: &mut Guest| {
                for i in 0..1024u32 {
                    wdesc(g, t - GPA, i, 0, 0, NEXT, ((i + 1) % 1024) as u16);
                }
                g.set_desc(1, head, t, 16 * 1024, INDIRECT, 0);
            }),
        ),
        (
            "1025 entries",
            1,
            Box::new(|g: &mut Guest| {
                for i in 0..1025u32 {
                    wdesc(g, t - GPA, i, 0, 0, NEXT, (i + 1) as u16);
                }
                g.set_desc(1, head, t, 16 * 1025, INDIRECT, 0);
            }),
        ),
        ("no entry", 1, Box::new(|g: &mut Guest| g.set_desc(1, head, t, 0, INDIRECT, 0))),
        ("across the region's end", 1, Box::new(|g: &mut Guest| g.set_desc(1, head, GPA + SIZE - 16, 32, INDIRECT, 0))),
        (
            "readable then writable inside the table",
            1,
            Box::new(|g: &mut Guest| {
                wdesc(g, t - GPA, 0, data, 50, NEXT, 1);
                wdesc(g, t - GPA, 1, data + 50, 50, WRITE, 0);
                g.set_desc(1, head, t, 32, INDIRECT, 0);
            }),
        ),
        (
            "1023 zero-length entries then the frame: more steps than a chain may take",
            1,
            Box::new(|g: &mut Guest| {
                for i in 0..1023u32 {
                    wdesc(g, t - GPA, i, u64::MAX, 0, NEXT, (i + 1) as u16);
                }
                let mut p = vec![0u8; 12];
                p.extend(frame(80, 3));
                g.write(data - GPA, &p);
                wdesc(g, t - GPA, 1023, data, 92, 0, 0);
                g.set_desc(1, head, t, 16 * 1024, INDIRECT, 0);
            }),
        ),
        (
            "254 zero-length entries then the frame",
            0,
            Box::new(|g: &mut Guest| {
                for i in 0..254u32 {
                    wdesc(g, t - GPA, i, u64::MAX, 0, NEXT, (i + 1) as u16);
                }
                let mut p = vec![0u8; 12];
                p.extend(frame(80, 3));
                g.write(data - GPA, &p);
                wdesc(g, t - GPA, 254, data, 92, 0, 0);
                g.set_desc(1, head, t, 16 * 255, INDIRECT, 0);
            }),
        ),
    ];
    for (what, want_bad, bad) in cases {
        let (bad_count, ok) = bad_then_good(&mut g, &mut rx, |g| {
            bad(g);
            g.push_avail(1, head);
        });
        assert_eq!((bad_count, ok), (want_bad, 1), "{what}");
    }
    assert_eq!(tp.in_use(), 0);
}

/// The header spread over 12 one-byte descriptors and the frame over many
/// small ones (up to 64 buffers) is taken whole; a frame over 65 one-byte
/// descriptors is refused.
#[test]
fn dp_header_and_frame_over_tiny_descriptors() {
    let tp = TestPool::new(256, 2048 + 128, 128);
    let (mut g, mut rx, _tx) = setup(&tp);
    let mut h = [0u8; 12];
    h[0] = 0;
    g.send(&h, &frame(52, 1), 1);
    g.send(&h, &frame(53, 2), 1);
    g.send(&h, &frame(300, 3), 6);
    let got = run_rx(&mut rx, 8, 0);
    let lens: Vec<u32> = got.iter().map(|p| p.len()).collect();
    assert_eq!(lens, vec![52, 300]);
    let mut b = Vec::new();
    got[1].copy_to(&mut b);
    assert_eq!(b, frame(300, 3));
    assert_eq!(rx.f.bad_desc.get(), 1);
    drop(got);
    assert_eq!(tp.in_use(), 0);
}

/// Lengths near the u32 limit in an 8 GiB region (a sparse memfd mapped as
/// the device maps it): two readable descriptors of 4 GiB are refused before a
/// byte is copied; a readable chain of exactly MAX_FRAME + 12 bytes is taken, one
/// byte more refused; writable chains of 64 overlapping 4 GiB descriptors (256 GiB
/// in all) take a packet and report its length.
#[test]
fn dp_lengths_near_the_u32_limit() {
    use crate::vring::MAX_FRAME;
    let tp = TestPool::new(256, 2048 + 128, 128);
    let big = 8u64 << 30;
    let mut g = Guest::new();
    let fd = ipc::memfd(c"big", big).unwrap();
    let map = ipc::Mapping::new(&fd, big).unwrap();
    drop((std::mem::replace(&mut g.fd, fd), std::mem::replace(&mut g.map, map)));
    let region = Region { gpa: GPA, size: big, uaddr: UVA, offset: 0 };
    let mem = Arc::new(MemTable::map(&[region], std::slice::from_ref(&g.fd), true).unwrap());
    let (d1, a1, u1, _) = ring_off(1);
    let (d0, a0, u0, _) = ring_off(0);
    let mut rx = Q::new(ring_at(&mem, QSIZE, d1, a1, u1).unwrap(), &tp);
    let mut tx = Q::new(ring_at(&mem, QSIZE, d0, a0, u0).unwrap(), &tp);
    let far = GPA + (4 << 20);
    g.set_desc(1, 0, far, u32::MAX, NEXT, 1);
    g.set_desc(1, 1, far + (4 << 30), u32::MAX, 0, 0);
    g.push_avail(1, 0);
    for (i, len) in [(2u16, MAX_FRAME as u32 + 12), (3, MAX_FRAME as u32 + 13)] {
        g.set_desc(1, i, far, len, 0, 0);
        g.push_avail(1, i);
    }
    let got = run_rx(&mut rx, 8, 0);
    assert_eq!(got.iter().map(|p| p.len()).collect::<Vec<_>>(), vec![MAX_FRAME as u32]);
    assert_eq!(rx.f.bad_desc.get(), 2);
    drop(got);
    for i in 0..64u16 {
        let last = i == 63;
        g.set_desc(0, i, far + u64::from(i), u32::MAX - 64, WRITE | if last { 0 } else { NEXT }, i + 1);
    }
    g.push_avail(0, 0);
    g.set_desc(0, 100, GPA + big - u64::from(u32::MAX), u32::MAX, WRITE, 0);
    g.push_avail(0, 100);
    let pkts = vec![tp.packet(&frame(1000, 1)), tp.packet(&frame(60_000, 2))];
    assert!(run_tx(&mut tx, pkts).is_empty());
    assert_eq!(g.used(0), vec![(0, 1012), (100, 60_012)]);
    assert_eq!((tx.f.bad_desc.get(), tx.f.too_long.get()), (0, 0));
    assert_eq!(tp.in_use(), 0);
}

// ---------------------------------------------------------------------------
// Ring indices.
// ---------------------------------------------------------------------------

/// The available index jumps by exactly `num` over garbage heads (all
/// counted and returned, the ring goes on), by `num - 1`, wraps at 65535, and goes
/// backwards (the ring breaks, counted, nothing moves).
#[test]
fn dp_available_index_games() {
    let tp = TestPool::new(512, 2048 + 128, 128);
    let (mut g, mut rx, _tx) = setup(&tp);
    let (_, a1, u1, _) = ring_off(1);
    for jump in [QSIZE as u16, QSIZE as u16 - 1] {
        let start = g.avail_idx[1];
        for k in 0..jump {
            wavail(&g, a1, QSIZE, start.wrapping_add(k), 0xffff - k);
        }
        let before = rx.f.bad_desc.get();
        g.set_avail_idx(1, start.wrapping_add(jump));
        let got = run_rx(&mut rx, 512, 0);
        assert!(got.is_empty() && !rx.v.broken, "jump {jump}");
        assert_eq!(rx.f.bad_desc.get() - before, u64::from(jump));
        assert_eq!(ru16(&g, u1 + 2), g.avail_idx[1]);
        let (b, ok) = bad_then_good(&mut g, &mut rx, |_| {});
        assert_eq!((b, ok), (0, 1));
    }
    // Wrap-around at 65535.
    rx.v.last_avail = 65530;
    g.set_avail_idx(1, 65530);
    for k in 0..12 {
        g.send(&[0; 12], &frame(90, k), 2048);
    }
    let got = run_rx(&mut rx, 64, 0);
    assert_eq!(got.len(), 12);
    assert_eq!(ru16(&g, u1 + 2), 6);
    drop(got);
    // Backwards by one: 65535 ahead, more than a ring: broken, counted.
    g.set_avail_idx(1, 5);
    assert!(run_rx(&mut rx, 64, 0).is_empty());
    assert!(rx.v.broken);
    assert_eq!(rx.f.bad_ring_index.get(), 1);
    assert_eq!(tp.in_use(), 0);
}

/// A ring of one entry works across wrap-arounds; a ring whose used ring
/// ends exactly at the region's end translates, one a byte further does not;
/// misaligned parts and sizes that are not a power of two up to 32768 are refused.
#[test]
fn dp_ring_of_one_entry_rings_at_the_region_end_and_misaligned_rings() {
    let tp = TestPool::new(64, 2048 + 128, 128);
    let g = Guest::new();
    let mem = Arc::new(g.table());
    let (d, a, u) = (0x30_0000u64, 0x30_0010u64, 0x30_0020u64);
    let mut q = Q::new(ring_at(&mem, 1, d, a, u).expect("one entry"), &tp);
    let data = 0x31_0000u64;
    for k in 0..5u16 {
        let mut p = vec![0u8; 12];
        p.extend(frame(70, k as u8));
        g.write(data, &p);
        wdesc(&g, d, 0, GPA + data, 82, 0, 0);
        wavail(&g, a, 1, k, 0);
        wu16(&g, a + 2, k + 1);
        let got = run_rx(&mut q, 8, 0);
        assert_eq!(got.len(), 1);
        let mut b = Vec::new();
        got[0].copy_to(&mut b);
        assert_eq!(b, frame(70, k as u8));
        assert_eq!(ru16(&g, u + 2), k + 1);
    }
    wu16(&g, a + 2, 7);
    assert!(run_rx(&mut q, 8, 0).is_empty() && q.v.broken, "two ahead of a ring of one");
    // A running ring grown (SET_VRING_NUM) beyond the memory its parts lie in: it
    // no longer translates and stops; bursts do nothing.
    let mut v = ring_at(&mem, 16, SIZE - 256, SIZE - 1024, SIZE - 768).expect("16 entries at the end");
    v.num = MAX_RING;
    assert!(!v.translate() && !v.ready());
    let mut q = Q::new(v, &tp);
    assert!(run_rx(&mut q, 8, 0).is_empty());
    // At the region's end (16 entries: used ring of 6 + 128 bytes).
    let end_used = SIZE - 136;
    assert!(ring_at(&mem, 16, 0x30_0000, 0x30_1000, end_used).is_some());
    assert!(ring_at(&mem, 16, 0x30_0000, 0x30_1000, SIZE - 132).is_none(), "2 bytes past the end");
    assert!(ring_at(&mem, 16, SIZE - 256, 0x30_1000, 0x30_2000).is_some());
    assert!(ring_at(&mem, 16, SIZE - 240, 0x30_1000, 0x30_2000).is_none());
    assert!(ring_at(&mem, 16, 0x30_0000, SIZE - 38, 0x30_2000).is_some());
    assert!(ring_at(&mem, 16, 0x30_0000, SIZE - 37, 0x30_2000).is_none());
    // Misaligned.
    assert!(ring_at(&mem, 16, 0x30_0008, 0x30_1000, 0x30_2000).is_none());
    assert!(ring_at(&mem, 16, 0x30_0000, 0x30_1001, 0x30_2000).is_none());
    assert!(ring_at(&mem, 16, 0x30_0000, 0x30_1000, 0x30_2002).is_none());
    // Sizes.
    for n in [0, 3, 48, 65536, u32::MAX] {
        assert!(ring_at(&mem, n, 0x30_0000, 0x30_1000, 0x30_2000).is_none(), "size {n}");
    }
    assert_eq!(tp.in_use(), 0);
}

// ---------------------------------------------------------------------------
// Rings that overlap each other, buffers over the rings.
// ---------------------------------------------------------------------------

/// The used ring placed on the available ring, or on the descriptor table;
/// the guest's receive buffers placed over its own rings so that what we copy in
/// rewrites the descriptors and indices we read next. Nothing escapes the memory,
/// every mbuf comes back.
#[test]
fn dp_used_ring_over_the_other_parts_and_buffers_over_the_rings() {
    let tp = TestPool::new(512, 2048 + 128, 128);
    for which in ["used on avail", "used on desc"] {
        let mut g = Guest::new();
        let mem = Arc::new(g.table());
        let (d1, a1, ..) = ring_off(1);
        let u = if which == "used on avail" { (a1 + 3) & !3 } else { d1 };
        let mut q = Q::new(ring_at(&mem, QSIZE, d1, a1, u).expect("translates"), &tp);
        for round in 0..20 {
            for k in 0..8 {
                g.send(&[0; 12], &frame(100, k), 2048);
            }
            let got = run_rx(&mut q, 32, 0);
            drop(got);
            if q.v.broken {
                q.v.broken = false;
                q.v.last_avail = g.avail_idx[1];
            }
            assert_eq!(tp.in_use(), 0, "{which} round {round}");
        }
    }
    // Our TX into buffers over the guest's own RX ring (descriptors, available and
    // used ring) and over its TX ring's table, merged: packets full of "descriptors"
    // pointing outside memory and indices far ahead.
    let (mut g, mut rx, mut tx) = setup(&tp);
    let (d0, a0, u0, _) = ring_off(0);
    let (d1, ..) = ring_off(1);
    let targets = [(d0, 4096u32), (a0, 512), (u0, 2048), (d1, 4096), (d0 + 4000, 96)];
    let mut evil = Vec::new();
    while evil.len() < 9000 {
        evil.extend_from_slice(&desc_bytes(GPA + SIZE - 8, 0x4000, WRITE | NEXT, 0x1234));
        evil.extend_from_slice(&0xfff0u16.to_le_bytes());
    }
    for round in 0..30u16 {
        for (k, &(o, len)) in targets.iter().enumerate() {
            let i = (round * 5 + k as u16) % QSIZE as u16;
            g.set_desc(0, i, GPA + o, len, WRITE, 0);
            g.push_avail(0, i);
        }
        let pkts: Vec<Packet> = (0..4).map(|k| tp.packet(&evil[k * 7..k * 7 + 3000 + k * 1000])).collect();
        drop(run_tx(&mut tx, pkts));
        let got = run_rx(&mut rx, 32, 0);
        drop(got);
        for (q, r) in [(&mut rx, 1), (&mut tx, 0)] {
            if q.v.broken {
                q.v.broken = false;
                q.v.last_avail = g.avail_idx[r];
            }
        }
        assert_eq!(tp.in_use(), 0, "round {round}");
    }
}

/// The guest rewrites its descriptors, available rings, indices and buffers
/// from another thread while we burst both ways (each field is read once; a torn
/// or changed value is only ever a bad chain or a broken ring).
#[test]
fn dp_a_guest_rewriting_its_rings_during_bursts() {
    let tp = TestPool::new(1024, 2048 + 128, 128);
    let (mut g, mut rx, mut tx) = setup(&tp);
    let base = g.map.ptr() as usize;
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let scribbler = std::thread::spawn(move || {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut writes = 0u64;
        while !s2.load(Ordering::Relaxed) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let r = (s >> 60) as usize & 1;
            let (d, a, u, _) = ring_off(r);
            let off = match s % 5 {
                0 => d + (s >> 8) % (16 * u64::from(QSIZE)),
                1 => a + (s >> 8) % (6 + 2 * u64::from(QSIZE)),
                2 => a + 2,
                3 => u + (s >> 8) % (6 + 8 * u64::from(QSIZE)),
                _ => (s >> 8) % (2 << 20),
            } & !1;
            let v = (s >> 16) as u16;
            // SAFETY: inside the guest's mapping, which outlives this thread (joined
            // below); a racy write to shared memory is what a guest does.
            unsafe { std::ptr::write_volatile((base + off as usize) as *mut u16, v) };
            writes += 1;
        }
        writes
    });
    let t = Instant::now();
    let (mut bursts, mut got_total) = (0u64, 0usize);
    while t.elapsed() < Duration::from_millis(1500) {
        for k in 0..4 {
            g.send(&[0; 12], &frame(300, k), 512);
        }
        g.post_rx(4, 2048);
        let got = run_rx(&mut rx, 32, 0);
        got_total += got.len();
        drop(run_tx(&mut tx, got));
        bursts += 1;
        for (q, r) in [(&mut rx, 1usize), (&mut tx, 0)] {
            if q.v.broken {
                q.v.broken = false;
                q.v.last_avail = g.avail_idx[r];
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let writes = scribbler.join().unwrap();
    eprintln!(
        "{bursts} bursts, {got_total} frames, {writes} guest writes; bad chains rx {} tx {}, broken rings rx {} tx {}",
        rx.f.bad_desc.get(),
        tx.f.bad_desc.get(),
        rx.f.bad_ring_index.get(),
        tx.f.bad_ring_index.get()
    );
    assert_eq!(tp.in_use(), 0, "every mbuf back");
}

// ---------------------------------------------------------------------------
// Our TX into the guest's RX ring.
// ---------------------------------------------------------------------------

/// A 64 KiB chained mbuf into 2 KiB guest buffers (33 merged chains) arrives
/// whole; the guest running out in the middle of a packet keeps it (nothing
/// published) until it posts more; a header split over two descriptors, a chain
/// mixing directions, checksum offsets from garbage l2/l3 lengths, and TSO to a
/// guest without TSO are each refused or ignored, counted.
#[test]
fn dp_tx_big_packets_short_guests_and_garbage_offload_fields() {
    let tp = TestPool::new(512, 2048 + 128, 128);
    let (mut g, _rx, mut tx) = setup(&tp);
    let (_, _, u0, _) = ring_off(0);
    let big = frame(65_536, 5);
    let p = tp.packet(&big);
    assert!(p.mbuf().nb_segs > 30, "a chained mbuf");
    g.post_rx(33, 2048);
    assert!(run_tx(&mut tx, vec![p]).is_empty());
    let back = g.recv();
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].1, big);
    assert_eq!(u16::from_le_bytes([back[0].0[10], back[0].0[11]]), 33);
    // The guest runs out in the middle: the packet stays, nothing is published.
    g.used(0);
    let used_before = ru16(&g, u0 + 2);
    g.post_rx(2, 1024);
    let left = run_tx(&mut tx, vec![tp.packet(&frame(3000, 1))]);
    assert_eq!(left.len(), 1);
    assert_eq!(tx.f.ring_full.get(), 1);
    assert_eq!(ru16(&g, u0 + 2), used_before);
    g.post_rx(1, 1024);
    assert!(run_tx(&mut tx, left).is_empty());
    assert_eq!(g.recv().pop().unwrap().1, frame(3000, 1));
    // A header split over two descriptors (6 + 2042 bytes): refused, counted.
    let before = tx.f.bad_desc.get();
    g.set_desc(0, 77, Guest::buf_gpa(0, 77), 6, WRITE | NEXT, 78);
    g.set_desc(0, 78, Guest::buf_gpa(0, 78), 2042, WRITE, 0);
    g.push_avail(0, 77);
    assert!(run_tx(&mut tx, vec![tp.packet(&frame(100, 1))]).is_empty());
    assert_eq!(tx.f.bad_desc.get(), before + 1);
    // Writable then readable.
    g.set_desc(0, 79, Guest::buf_gpa(0, 79), 100, WRITE | NEXT, 80);
    g.set_desc(0, 80, Guest::buf_gpa(0, 80), 100, 0, 0);
    g.push_avail(0, 79);
    assert!(run_tx(&mut tx, vec![tp.packet(&frame(150, 1))]).is_empty());
    assert_eq!(tx.f.bad_desc.get(), before + 2);
    g.used(0);
    // Garbage l2/l3 lengths asking for a checksum to a guest that will not
    // complete it: no offload beyond the packet, the packet arrives unchanged.
    tx.v.neg.guest_csum = false;
    for (l2, l3, len) in [(255u8, 65535u16, 200usize), (14, 20, 40), (14, 20, 36), (0, 0, 60), (200, 100, 400)] {
        let f = frame(len, 9);
        let mut p = tp.packet(&f);
        // SAFETY: our packet.
        let m = unsafe { p.mbuf_mut() };
        (m.l2_len, m.l3_len) = (l2, l3);
        m.ol_flags = abi::TX_UDP_CKSUM | abi::TX_TCP_CKSUM | abi::TX_IPV4;
        g.post_rx(1, 2048);
        assert!(run_tx(&mut tx, vec![p]).is_empty());
        let (h, got) = g.recv().pop().unwrap();
        assert_eq!(got.len(), len);
        assert_eq!(h[0] & F_NEEDS_CSUM, 0);
        if l2 as usize + l3 as usize + 18 > len {
            assert_eq!(got, f, "no checksum written beyond the packet ({l2}, {l3}, {len})");
        }
    }
    // TSO to a guest without TSO: dropped, counted.
    tx.v.neg.guest_tso = false;
    let mut p = tp.packet(&frame(3000, 1));
    // SAFETY: our packet.
    let m = unsafe { p.mbuf_mut() };
    (m.l2_len, m.l3_len, m.l4_len, m.tso_segsz) = (14, 20, 20, 1448);
    m.ol_flags = abi::TX_TCP_SEG | abi::TX_TCP_CKSUM | abi::TX_IPV4;
    assert!(run_tx(&mut tx, vec![p]).is_empty());
    assert_eq!(tx.f.too_long.get(), 1);
    assert_eq!(tp.in_use(), 0);
}

/// A guest RX chain made only of zero-length descriptors, after a good packet: it
/// has no first segment, and the header check must not read the previous
/// packet's (the chain scratch is reused across a burst): refused, counted, no
/// length underflow.
#[test]
fn dp_tx_a_first_chain_of_zero_length_descriptors_after_a_good_packet() {
    let tp = TestPool::new(64, 2048 + 128, 128);
    let (mut g, _rx, mut tx) = setup(&tp);
    g.set_desc(0, 0, Guest::buf_gpa(0, 0), 2048, WRITE, 0);
    g.set_desc(0, 1, Guest::buf_gpa(0, 1), 0, WRITE | NEXT, 2);
    g.set_desc(0, 2, Guest::buf_gpa(0, 2), 0, WRITE, 0);
    g.set_desc(0, 3, Guest::buf_gpa(0, 3), 2048, WRITE, 0);
    g.set_desc(0, 4, Guest::buf_gpa(0, 4), 2048, WRITE, 0);
    for h in [0, 1, 3, 4] {
        g.push_avail(0, h);
    }
    let pkts = vec![tp.packet(&frame(100, 1)), tp.packet(&frame(100, 2))];
    let left = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_tx(&mut tx, pkts)));
    let left = left.expect("tx_burst panicked on a first chain of zero-length descriptors");
    assert!(left.is_empty());
    assert_eq!(tx.f.bad_desc.get(), 1, "the zero-length first chain refused");
    assert_eq!(g.used(0), vec![(0, 112), (1, 0)]);
    assert_eq!(tp.in_use(), 0);
}

/// With merged buffers a packet may span at most 64 guest chains; one that needs
/// more (a 64 KiB frame into 1 KiB buffers, or any frame when a hostile guest posts
/// zero-length chains after a 12-byte one) is dropped and counted (`tx_too_long`),
/// its chains given back empty, and the packets behind it go.
#[test]
fn dp_tx_a_packet_needing_more_than_64_guest_chains_is_dropped_not_kept() {
    let tp = TestPool::new(512, 2048 + 128, 128);
    let (mut g, _rx, mut tx) = setup(&tp);
    g.post_rx(200, 1024);
    let big = tp.packet(&frame(65_536, 3));
    let small = tp.packet(&frame(100, 4));
    let mut left = vec![big, small];
    for _ in 0..3 {
        left = run_tx(&mut tx, left);
    }
    let stuck = left.len();
    let (full, long) = (tx.f.ring_full.get(), tx.f.too_long.get());
    drop(left);
    eprintln!("after 3 bursts with 200 guest buffers posted: {stuck} packets left, ring_full {full}, too_long {long}");
    assert_eq!(tp.in_use(), 0);
    assert!(
        stuck == 0 && full == 0,
        "a packet needing more than 64 guest chains stays in the burst forever and blocks the queue \
         ({stuck} packets left after 3 bursts, counted {full} times as ring_full with 200 buffers posted)"
    );
}

/// Bursts both ways on the device's queues, whatever the rings hold.
fn burst_both(d: &mut Dev) {
    for _ in 0..4 {
        let got = run_rx(&mut d.rx, 32, 0);
        drop(run_tx(&mut d.tx, got));
    }
}

fn eventfds() -> (OwnedFd, OwnedFd, OwnedFd) {
    (ipc::eventfd().unwrap(), ipc::eventfd().unwrap(), ipc::eventfd().unwrap())
}

/// A fresh front end sets up a fresh guest on `d` and 16 frames make the round
/// trip; then it leaves.
fn good_session(d: &mut Dev, what: &str) {
    // Like QEMU's `reconnect=`: a connection closed at once (another one was being
    // served) is tried again.
    let t = Instant::now();
    let mut fe = loop {
        let mut fe = FrontEnd::connect(&d.path);
        if fe.send(req::GET_FEATURES, 0, &[], &[]) && fe.reply().is_some() {
            break fe;
        }
        assert!(t.elapsed() < Duration::from_secs(5), "no session after: {what}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut g = Guest::new();
    let (kick, c0, c1) = eventfds();
    fe.setup(&g, &kick, [&c0, &c1]);
    wait("the link", || d.d.link().up == 1);
    assert_eq!(round_trip(&mut g, d, 16), 16, "the device forwards after: {what}");
    drop(fe);
    wait("the link down", || d.d.link().up == 0);
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut p = [0; 2];
    // SAFETY: pipe2 fills two descriptors, owned below.
    assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) }, 0);
    // SAFETY: new descriptors we own.
    unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) }
}

/// Whether every copy of the pipe's write end is closed (its read end sees EOF).
fn write_end_closed(r: &OwnedFd) -> bool {
    let mut b = [0u8; 16];
    // SAFETY: reads into a live buffer from a descriptor we hold (non-blocking).
    unsafe { libc::read(r.as_raw_fd(), b.as_mut_ptr().cast(), b.len()) == 0 }
}

fn memfd_raw(size: u64, flags: libc::c_uint) -> OwnedFd {
    // SAFETY: a C string; the result is checked.
    let fd = unsafe { libc::memfd_create(c"attack".as_ptr(), flags | libc::MFD_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: a new descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ftruncate on our descriptor.
    assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) }, 0);
    fd
}

fn open(path: &std::ffi::CStr, flags: libc::c_int) -> OwnedFd {
    // SAFETY: a C string; the result is checked.
    let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) };
    assert!(fd >= 0, "{path:?}");
    // SAFETY: a new descriptor we own.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// A front end that negotiated acknowledgements.
fn acking(path: &str) -> FrontEnd {
    let fe = FrontEnd::connect(path);
    assert!(fe.send(req::SET_PROTOCOL_FEATURES, 0, &proto::OFFERED_PROTOCOL.to_le_bytes(), &[]));
    fe
}

// ---------------------------------------------------------------------------
// Control socket: order, memory files, descriptors, sizes.
// ---------------------------------------------------------------------------

/// Requests in orders no front end should use, each on its own connection
/// while the queues burst between requests: ring addresses before the size and the
/// memory, kicks alone, a base far from the used index, RESET_OWNER and
/// GET_VRING_BASE in the middle of traffic, a ring grown beyond what a smaller
/// memory table then covers, features (header length) changed under queued frames.
/// The device (and another one) then serves a good front end.
#[test]
fn ctl_requests_in_any_order_then_a_good_front_end_is_served() {
    let tp = TestPool::new(1024, 2048 + 128, 128);
    let mut d = dev(&tp, "order");
    let mut other = dev(&tp, "order-other");
    let (kick, c0, c1) = eventfds();
    let mut ofe = FrontEnd::connect(&other.path);
    let mut og = Guest::new();
    ofe.setup(&og, &kick, [&c0, &c1]);
    wait("the other link", || other.d.link().up == 1);
    let num = |r: u32, n: u32| (req::SET_VRING_NUM, proto::state(r, n));
    let base = |r: u32, n: u32| (req::SET_VRING_BASE, proto::state(r, n));
    let addr = |r: u32| (req::SET_VRING_ADDR, proto::ring_addr(r, Guest::addr(r as usize)));
    let kick_nofd = |r: u64| (req::SET_VRING_KICK, (r | 0x100).to_le_bytes().to_vec());
    let enable = |r: u32| (req::SET_VRING_ENABLE, proto::state(r, 1));
    let mem = || (req::SET_MEM_TABLE, proto::mem_table(&[Guest::region()]));
    let small_mem = || (req::SET_MEM_TABLE, proto::mem_table(&[Region { size: (1 << 20) + 8192, ..Guest::region() }]));
    let get_base = |r: u32| (req::GET_VRING_BASE, proto::state(r, 0));
    let all = proto::OFFERED & !(1 << feat::GUEST_TSO4);
    let features = |f: u64| (req::SET_FEATURES, f.to_le_bytes().to_vec());
    let full = || {
        let mut v = vec![features(all), mem()];
        for r in 0..2u32 {
            v.extend([num(r, QSIZE), base(r, 0), addr(r), kick_nofd(u64::from(r)), enable(r)]);
        }
        v
    };
    let plain = |r: u32| (r, Vec::new());
    type Steps = Vec<(u32, Vec<u8>)>;
    let seqs: Vec<(&str, Steps)> = vec![
        (
            "addresses before size and memory",
            vec![addr(1), addr(0), kick_nofd(1), enable(1), mem(), num(1, QSIZE), kick_nofd(1), num(0, QSIZE)],
        ),
        ("kicks and enables alone", vec![kick_nofd(0), kick_nofd(1), enable(0), enable(1), get_base(1), get_base(0)]),
        ("a base far from the used index", [full(), vec![base(1, 40000), base(0, 65535)]].concat()),
        (
            "RESET_OWNER mid-traffic, then addresses",
            [full(), vec![plain(req::RESET_OWNER), addr(1), kick_nofd(1)]].concat(),
        ),
        (
            "GET_VRING_BASE mid-traffic, then a kick without a base",
            [full(), vec![get_base(1), get_base(0), kick_nofd(1), kick_nofd(0)]].concat(),
        ),
        (
            "a running ring grown, then a smaller memory table, then shrunk and kicked",
            [full(), vec![num(1, MAX_RING), small_mem(), num(1, QSIZE), kick_nofd(1), enable(1)]].concat(),
        ),
        ("header length changed under queued frames", [full(), vec![features(1 << feat::CSUM)]].concat()),
        ("memory replaced by the same file twice", [full(), vec![mem(), mem(), num(0, 2), num(0, QSIZE)]].concat()),
        ("everything twice", [full(), full()].concat()),
    ];
    for (what, steps) in seqs {
        let mut g = Guest::new();
        let disc = xstat(&d.d, "disconnects");
        let fe = FrontEnd::connect(&d.path);
        for (k, (r, p)) in steps.iter().enumerate() {
            let fds: Vec<RawFd> = if *r == req::SET_MEM_TABLE { vec![g.fd.as_raw_fd()] } else { vec![] };
            if !fe.send(*r, 0, p, &fds) {
                break;
            }
            // Frames both ways queued in the guest's rings between requests.
            if k % 3 == 0 {
                g.send(&[0; 12], &frame(150, k as u8), 512);
                g.post_rx(2, 1024);
            }
            std::thread::sleep(Duration::from_millis(2));
            burst_both(&mut d);
        }
        std::thread::sleep(Duration::from_millis(20));
        burst_both(&mut d);
        drop(fe);
        wait("the disconnection", || xstat(&d.d, "disconnects") > disc);
        burst_both(&mut d);
        assert_eq!(tp.in_use(), 0, "{what}");
        good_session(&mut d, what);
        assert_eq!(round_trip(&mut og, &mut other, 8), 8, "the other device, after: {what}");
        drop(g);
    }
    eprintln!(
        "rx_bad_desc {} rx_bad_ring_index {} tx_bad_desc {} protocol_errors {}",
        xstat(&d.d, "rx_bad_desc"),
        xstat(&d.d, "rx_bad_ring_index"),
        xstat(&d.d, "tx_bad_desc"),
        xstat(&d.d, "protocol_errors")
    );
    drop(ofe);
    d.d.stop().unwrap();
    other.d.stop().unwrap();
    assert_eq!(tp.in_use(), 0);
}

/// Memory "regions" in files that cannot back memory are refused (a failure
/// acknowledged): a pipe, a socket, /dev/zero, a directory, a file opened read-only,
/// a memfd sealed against writes, an eventfd; and tables that are wrong: a region
/// beyond its file, 8 regions with overlapping process addresses, 8 regions with
/// overlapping guest addresses. 8 disjoint regions of one file are taken.
#[test]
fn ctl_memory_files_that_cannot_back_memory_and_bad_tables_are_refused() {
    let tp = TestPool::new(256, 2048 + 128, 128);
    let mut d = dev(&tp, "memfds");
    let mut fe = acking(&d.path);
    let r1 = |size: u64| proto::mem_table(&[Region { gpa: GPA, size, uaddr: UVA, offset: 0 }]);
    let (pr, pw) = pipe();
    let mut sv = [0; 2];
    // SAFETY: socketpair fills two descriptors, owned below.
    let rc = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, sv.as_mut_ptr()) };
    assert_eq!(rc, 0);
    // SAFETY: new descriptors we own.
    let (s0, _s1) = unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) };
    let zero = open(c"/dev/zero", libc::O_RDWR);
    let dir = open(c"/tmp", libc::O_RDONLY | libc::O_DIRECTORY);
    let file_path = std::env::temp_dir().join(format!("vhost-atk-ro-{}", std::process::id()));
    std::fs::write(&file_path, vec![0u8; 1 << 16]).unwrap();
    let ro = std::fs::File::open(&file_path).unwrap();
    let sealed = memfd_raw(1 << 16, libc::MFD_ALLOW_SEALING);
    // SAFETY: fcntl on our descriptor.
    assert_eq!(unsafe { libc::fcntl(sealed.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_WRITE) }, 0);
    let efd = ipc::eventfd().unwrap();
    let cases: [(&str, RawFd, u64); 7] = [
        ("pipe", pw.as_raw_fd(), 4096),
        ("socket", s0.as_raw_fd(), 4096),
        ("/dev/zero", zero.as_raw_fd(), 4096),
        ("directory", dir.as_raw_fd(), 16),
        ("read-only file", ro.as_raw_fd(), 4096),
        ("write-sealed memfd", sealed.as_raw_fd(), 4096),
        ("eventfd", efd.as_raw_fd(), 8),
    ];
    for (what, fd, size) in cases {
        assert_eq!(fe.acked(req::SET_MEM_TABLE, &r1(size), &[fd]), Some(1), "{what}");
    }
    let g = Guest::new();
    let gfd = g.fd.as_raw_fd();
    let beyond = Region { offset: 4096, ..Guest::region() };
    assert_eq!(fe.acked(req::SET_MEM_TABLE, &proto::mem_table(&[beyond]), &[gfd]), Some(1), "beyond the file");
    let step = SIZE / 8;
    let eight = |f: &dyn Fn(u64) -> Region| (0..8).map(f).collect::<Vec<_>>();
    let over_uva = eight(&|i| Region { gpa: GPA + i * step, size: step, uaddr: UVA + i * step / 2, offset: i * step });
    let over_gpa = eight(&|i| Region { gpa: GPA + i * 4096, size: step, uaddr: UVA + i * step, offset: i * step });
    let good = eight(&|i| Region { gpa: GPA + i * step, size: step, uaddr: UVA + i * step, offset: i * step });
    assert_eq!(fe.acked(req::SET_MEM_TABLE, &proto::mem_table(&over_uva), &[gfd; 8]), Some(1));
    assert_eq!(fe.acked(req::SET_MEM_TABLE, &proto::mem_table(&over_gpa), &[gfd; 8]), Some(1));
    assert_eq!(fe.acked(req::SET_MEM_TABLE, &proto::mem_table(&good), &[gfd; 8]), Some(0));
    drop(fe);
    drop(pw);
    wait("every copy of the pipe closed", || write_end_closed(&pr));
    let _ = std::fs::remove_file(&file_path);
    good_session(&mut d, "refused memory files");
    d.d.stop().unwrap();
    assert_eq!(tp.in_use(), 0);
}

/// Descriptors the front end sends in excess or with the wrong request are
/// all closed (checked by the EOF of a pipe whose write end went in every one):
/// one with GET_FEATURES, 9 with a table of 8 regions, 100 with SET_OWNER (the
/// control buffer overflows), some riding on the payload's bytes, on SET_LOG_FD
/// and SET_VRING_ERR, and a kick descriptor kept until the connection ends.
#[test]
fn ctl_stray_and_excess_descriptors_are_all_closed() {
    let tp = TestPool::new(256, 2048 + 128, 128);
    let mut d = dev(&tp, "fds");
    let g = Guest::new();
    let (pr, pw) = pipe();
    let w = pw.as_raw_fd();
    let errors = |d: &Dev| xstat(&d.d, "protocol_errors");
    // Each on its own connection: the device closes it.
    let table8 = proto::mem_table(
        &(0..8)
            .map(|i| Region { gpa: GPA + i * 4096, size: 4096, uaddr: UVA + i * 4096, offset: i * 4096 })
            .collect::<Vec<_>>(),
    );
    let cases: Vec<(&str, Vec<u8>, Vec<RawFd>)> = vec![
        ("GET_FEATURES with one", proto::request(req::GET_FEATURES, 0, &[]), vec![w]),
        ("8 regions, 9 descriptors", proto::request(req::SET_MEM_TABLE, 0, &table8), vec![w; 9]),
        ("SET_OWNER with 100", proto::request(req::SET_OWNER, 0, &[]), vec![w; 100]),
        ("SET_VRING_CALL with two", proto::request(req::SET_VRING_CALL, 0, &0u64.to_le_bytes()), vec![w, w]),
        ("SET_VRING_KICK nofd with one", proto::request(req::SET_VRING_KICK, 0, &0x100u64.to_le_bytes()), vec![w]),
    ];
    for (what, bytes, fds) in cases {
        let before = errors(&d);
        let mut fe = FrontEnd::connect(&d.path);
        assert!(fe.send_raw(&bytes, &fds), "{what}");
        assert!(fe.closed(), "{what}");
        wait("the error count", || errors(&d) == before + 1);
    }
    // Kept by a live connection: kick, log and error descriptors, descriptors on
    // the payload's bytes, then the memory table refused with a failure.
    let mut fe = acking(&d.path);
    let hdr = proto::request(req::SET_VRING_ENABLE, 0, &proto::state(0, 0));
    assert!(fe.send_raw(&hdr[..HDR_SIZE], &[]));
    assert!(fe.send_raw(&hdr[HDR_SIZE..], &[w, w, w]));
    assert_eq!(fe.acked(req::SET_VRING_KICK, &0u64.to_le_bytes(), &[w]), Some(0));
    assert_eq!(fe.acked(req::SET_VRING_KICK, &1u64.to_le_bytes(), &[w]), Some(0));
    assert_eq!(fe.acked(req::SET_VRING_ERR, &0u64.to_le_bytes(), &[w]), Some(0));
    assert_eq!(fe.acked(req::SET_LOG_FD, &[0u8; 8], &[w]), Some(1));
    assert_eq!(fe.acked(req::SET_MEM_TABLE, &proto::mem_table(&[Guest::region()]), &[w]), Some(1));
    assert_eq!(fe.acked(req::SET_MEM_TABLE, &proto::mem_table(&[Guest::region()]), &[g.fd.as_raw_fd()]), Some(0));
    drop(pw);
    drop(fe);
    wait("every copy of the pipe closed", || write_end_closed(&pr));
    good_session(&mut d, "stray descriptors");
    d.d.stop().unwrap();
    assert_eq!(tp.in_use(), 0);
}

/// A payload of exactly 512 bytes (the limit) is read and the request
/// answered; 513 closes the connection; a header cut short then closed, and a
/// payload cut short then closed, end the connection without harm.
#[test]
fn ctl_payload_at_the_limit_and_messages_cut_short() {
    let tp = TestPool::new(256, 2048 + 128, 128);
    let mut d = dev(&tp, "limit");
    let mut fe = FrontEnd::connect(&d.path);
    assert!(fe.send(req::GET_FEATURES, 0, &[7u8; proto::MAX_PAYLOAD], &[]));
    assert_eq!(fe.reply().map(|p| p.len()), Some(8));
    assert!(fe.send(req::GET_FEATURES, 0, &[7u8; proto::MAX_PAYLOAD + 1], &[]));
    assert!(fe.closed());
    let fe = FrontEnd::connect(&d.path);
    assert!(fe.send_raw(&proto::request(req::GET_FEATURES, 0, &[])[..7], &[]));
    drop(fe);
    let fe = FrontEnd::connect(&d.path);
    assert!(fe.send_raw(&proto::request(req::SET_MEM_TABLE, 0, &[0u8; 100])[..50], &[]));
    drop(fe);
    good_session(&mut d, "messages cut short");
    d.d.stop().unwrap();
}

/// A flood of connections while one front end is served: each is closed
/// (counted), the served one keeps working; once it leaves, a new front end gets in.
#[test]
fn ctl_a_flood_of_connections() {
    let tp = TestPool::new(512, 2048 + 128, 128);
    let mut d = dev(&tp, "flood");
    let mut fe = FrontEnd::connect(&d.path);
    let mut g = Guest::new();
    let (kick, c0, c1) = eventfds();
    fe.setup(&g, &kick, [&c0, &c1]);
    wait("the link", || d.d.link().up == 1);
    let path = d.path.clone();
    let flood = std::thread::spawn(move || {
        let mut n = 0;
        for _ in 0..300 {
            if let Ok(s) = UnixStream::connect(&path) {
                let _ = (&s).write_all(&proto::request(req::RESET_OWNER, 0, &[]));
                n += 1;
            }
        }
        n
    });
    for _ in 0..10 {
        assert_eq!(round_trip(&mut g, &mut d, 8), 8);
    }
    let n = flood.join().unwrap();
    assert!(n > 0);
    assert_eq!(round_trip(&mut g, &mut d, 8), 8, "the served front end still works");
    drop(fe);
    // The backlog of closed connections drains; a good front end then gets in.
    let t = Instant::now();
    good_session(&mut d, "a flood of connections");
    eprintln!("{n} flood connections; refused {}; a new front end in after {:?}", xstat(&d.d, "refused"), t.elapsed());
    d.d.stop().unwrap();
    assert_eq!(tp.in_use(), 0);
}

/// The queues burst in another thread while the front end, again and again,
/// replaces the memory table (the old file dropped), a smaller table that no longer
/// holds a running ring, re-sets ring addresses and sizes, stops a ring with
/// GET_VRING_BASE, resets the owner and sets everything up again. Each change is
/// made under the ring's lock; no use after unmap (that would crash this test).
#[test]
fn ctl_bursts_while_the_front_end_changes_memory_and_rings() {
    let tp = TestPool::new(1024, 2048 + 128, 128);
    let d = dev(&tp, "remap");
    let Dev { d: mut vd, mut rx, mut tx, path } = d;
    let mut fe = FrontEnd::connect(&path);
    let mut g = Guest::new();
    let (kick, c0, c1) = eventfds();
    fe.setup(&g, &kick, [&c0, &c1]);
    wait("the link", || vd.link().up == 1);
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let bursts = std::thread::spawn(move || {
        let (mut n, mut frames) = (0u64, 0usize);
        while !s2.load(Ordering::Relaxed) {
            let got = run_rx(&mut rx, 32, 0);
            frames += got.len();
            drop(run_tx(&mut tx, got));
            n += 1;
        }
        (rx, tx, n, frames)
    });
    let kick_nofd = |r: u64| (r | 0x100).to_le_bytes();
    let (_, _, u1, _) = ring_off(1);
    let t = Instant::now();
    let mut iters = 0;
    while t.elapsed() < Duration::from_secs(4) {
        // The guest keeps sending while it has room.
        let used1 = u16::from_le_bytes(g.read(u1 + 2, 2).try_into().unwrap());
        if g.avail_idx[1].wrapping_sub(used1) < 100 {
            for k in 0..4 {
                g.send(&[0; 12], &frame(200, k), 2048);
            }
            g.post_rx(4, 2048);
        }
        match iters % 6 {
            0 => {
                // A new file holding a copy of the memory; the old one goes.
                let g3 = Guest::new();
                // SAFETY: both mappings are SIZE bytes.
                unsafe { std::ptr::copy_nonoverlapping(g.map.ptr(), g3.map.ptr(), SIZE as usize) };
                let old = (std::mem::replace(&mut g.fd, g3.fd), std::mem::replace(&mut g.map, g3.map));
                let table = proto::mem_table(&[Guest::region()]);
                assert_eq!(fe.acked(req::SET_MEM_TABLE, &table, &[g.fd.as_raw_fd()]), Some(0));
                drop(old);
            }
            1 => {
                let small = proto::mem_table(&[Region { size: 1 << 20, ..Guest::region() }]);
                assert_eq!(fe.acked(req::SET_MEM_TABLE, &small, &[g.fd.as_raw_fd()]), Some(0));
                std::thread::sleep(Duration::from_millis(1));
                let table = proto::mem_table(&[Guest::region()]);
                assert_eq!(fe.acked(req::SET_MEM_TABLE, &table, &[g.fd.as_raw_fd()]), Some(0));
                assert_eq!(fe.acked(req::SET_VRING_KICK, &kick_nofd(1), &[]), Some(0));
            }
            2 => {
                for r in 0..2u32 {
                    assert_eq!(
                        fe.acked(req::SET_VRING_ADDR, &proto::ring_addr(r, Guest::addr(r as usize)), &[]),
                        Some(0)
                    );
                }
            }
            3 => {
                assert_eq!(fe.acked(req::SET_VRING_NUM, &proto::state(1, 128), &[]), Some(0));
                std::thread::sleep(Duration::from_millis(1));
                assert_eq!(fe.acked(req::SET_VRING_NUM, &proto::state(1, QSIZE), &[]), Some(0));
            }
            4 => {
                assert!(fe.send(req::GET_VRING_BASE, 0, &proto::state(1, 0), &[]));
                let b = fe.reply().unwrap();
                let base = u32::from_le_bytes(b[4..8].try_into().unwrap());
                assert_eq!(fe.acked(req::SET_VRING_BASE, &proto::state(1, base), &[]), Some(0));
                assert_eq!(fe.acked(req::SET_VRING_KICK, &kick_nofd(1), &[]), Some(0));
            }
            _ => {
                let mut bases = [0u32; 2];
                for (r, b) in bases.iter_mut().enumerate() {
                    assert!(fe.send(req::GET_VRING_BASE, 0, &proto::state(r as u32, 0), &[]));
                    let p = fe.reply().unwrap();
                    *b = u32::from_le_bytes(p[4..8].try_into().unwrap());
                }
                assert!(fe.send(req::RESET_OWNER, 0, &[], &[]));
                let table = proto::mem_table(&[Guest::region()]);
                assert_eq!(fe.acked(req::SET_MEM_TABLE, &table, &[g.fd.as_raw_fd()]), Some(0));
                for r in 0..2u32 {
                    assert_eq!(fe.acked(req::SET_VRING_BASE, &proto::state(r, bases[r as usize]), &[]), Some(0));
                    assert_eq!(
                        fe.acked(req::SET_VRING_ADDR, &proto::ring_addr(r, Guest::addr(r as usize)), &[]),
                        Some(0)
                    );
                    assert_eq!(fe.acked(req::SET_VRING_KICK, &kick_nofd(u64::from(r)), &[]), Some(0));
                    assert_eq!(fe.acked(req::SET_VRING_ENABLE, &proto::state(r, 1), &[]), Some(0));
                }
            }
        }
        iters += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let (_rx, _tx, n, frames) = bursts.join().unwrap();
    eprintln!(
        "{iters} changes, {n} bursts, {frames} frames, rx_busy {} tx_busy {} rx_bad_desc {}",
        xstat(&vd, "rx_busy"),
        xstat(&vd, "tx_busy"),
        xstat(&vd, "rx_bad_desc")
    );
    assert!(frames > 0);
    drop(fe);
    vd.stop().unwrap();
    assert_eq!(tp.in_use(), 0);
}

// ---------------------------------------------------------------------------
// Faults of the control thread.
// ---------------------------------------------------------------------------

/// A front end that sends a header and then its payload one byte every 0.7 s is
/// given one second for the whole message, not one per read: the control thread
/// (and with it the guest's signals and `stop()`) is held no longer.
#[test]
fn ctl_a_trickled_payload_is_given_one_second_in_all() {
    let tp = TestPool::new(64, 2048 + 128, 128);
    let mut d = dev(&tp, "slow");
    let fe = FrontEnd::connect(&d.path);
    let s = fe.0.try_clone().unwrap();
    let trickle = std::thread::spawn(move || {
        let h = proto::request(req::GET_FEATURES, 0, &[0u8; 512]);
        let _ = (&s).write_all(&h[..HDR_SIZE]);
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(5000) {
            std::thread::sleep(Duration::from_millis(700));
            if (&s).write_all(&[0]).is_err() {
                break;
            }
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    d.d.stop().unwrap();
    let took = t.elapsed();
    trickle.join().unwrap();
    drop(fe);
    eprintln!("stop() took {took:?} while a front end trickled its payload");
    assert!(
        took < Duration::from_millis(1500),
        "a front end trickling its payload held the control thread: stop() took {took:?}"
    );
}

/// A header trickled one byte every 0.3 s is given 1 s in all (the header is
/// read with MSG_WAITALL, whose timeout counts over the call): the connection is
/// closed, counted, and `stop()` is quick.
#[test]
fn ctl_a_trickled_header_is_given_one_second() {
    let tp = TestPool::new(64, 2048 + 128, 128);
    let mut d = dev(&tp, "slowhdr");
    let mut fe = FrontEnd::connect(&d.path);
    let s = fe.0.try_clone().unwrap();
    let t = Instant::now();
    let trickle = std::thread::spawn(move || {
        for b in proto::request(req::GET_FEATURES, 0, &[]) {
            std::thread::sleep(Duration::from_millis(300));
            if (&s).write_all(&[b]).is_err() {
                break;
            }
        }
    });
    assert!(fe.closed());
    let closed_after = t.elapsed();
    wait("the error count", || xstat(&d.d, "protocol_errors") == 1);
    trickle.join().unwrap();
    let t = Instant::now();
    d.d.stop().unwrap();
    eprintln!("a trickled header: closed after {closed_after:?}; stop() {:?}", t.elapsed());
    assert!(closed_after < Duration::from_millis(1800));
    assert!(t.elapsed() < Duration::from_millis(500));
}

/// A front end that sends thousands of requests and never reads a reply:
/// once its socket is full, a reply waits 1 s and the connection is closed; `stop()`
/// waits at most about that.
#[test]
fn ctl_a_front_end_that_never_reads_its_replies() {
    let tp = TestPool::new(64, 2048 + 128, 128);
    let mut d = dev(&tp, "noread");
    let fe = FrontEnd::connect(&d.path);
    let s = fe.0.try_clone().unwrap();
    s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    let flood = std::thread::spawn(move || {
        let one = proto::request(req::GET_FEATURES, 0, &[]);
        let mut sent = 0;
        for _ in 0..50_000 {
            if (&s).write_all(&one).is_err() {
                break;
            }
            sent += 1;
        }
        sent
    });
    std::thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    d.d.stop().unwrap();
    let took = t.elapsed();
    let sent = flood.join().unwrap();
    eprintln!("{sent} requests sent, replies never read; stop() took {took:?}");
    drop(fe);
    assert!(took < Duration::from_millis(2500));
}

/// Listen on `path` with a backlog of 0 and fill it: a blocking connect(2) to it
/// then waits until the listener accepts or closes. Returns (listener, the
/// connection that fills the backlog).
fn full_backlog(path: &str) -> (OwnedFd, Vec<OwnedFd>) {
    let _ = std::fs::remove_file(path);
    // SAFETY: plain socket(2); the result is checked and owned.
    let l = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(l >= 0);
    // SAFETY: a new descriptor we own.
    let l = unsafe { OwnedFd::from_raw_fd(l) };
    // SAFETY: an all-zero sockaddr_un is valid.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as _;
    for (i, b) in path.bytes().enumerate() {
        a.sun_path[i] = b as _;
    }
    let alen = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    // SAFETY: `a` is a valid sockaddr_un of `alen` bytes.
    assert_eq!(unsafe { libc::bind(l.as_raw_fd(), (&a as *const libc::sockaddr_un).cast(), alen) }, 0);
    // SAFETY: listen on our socket.
    assert_eq!(unsafe { libc::listen(l.as_raw_fd(), 0) }, 0);
    let mut fill = Vec::new();
    loop {
        // SAFETY: as above.
        let s = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
        assert!(s >= 0);
        // SAFETY: a new descriptor we own.
        let s = unsafe { OwnedFd::from_raw_fd(s) };
        // SAFETY: as above.
        let r = unsafe { libc::connect(s.as_raw_fd(), (&a as *const libc::sockaddr_un).cast(), alen) };
        if r != 0 {
            break;
        }
        fill.push(s);
        assert!(fill.len() < 16);
    }
    (l, fill)
}

/// In client mode (`client=1`) the front end serves the socket. One whose listen
/// backlog is full and that never accepts is treated as absent (a non-blocking
/// connect, a failure counted, a retry 0.5 s later): `stop()` returns at once.
#[test]
fn ctl_a_client_facing_a_full_backlog_retries_and_still_stops() {
    let tp = TestPool::new(64, 2048 + 128, 128);
    let path = sock_path("client-backlog");
    let (l, fill) = full_backlog(&path);
    let d = dev_with(&tp, path.clone(), ",client=1");
    std::thread::sleep(Duration::from_millis(300));
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let Dev { d: mut vd, rx, tx, .. } = d;
    let stopper = std::thread::spawn(move || {
        let t = Instant::now();
        vd.stop().unwrap();
        let _ = done_tx.send(t.elapsed());
        vd
    });
    let stopped = done_rx.recv_timeout(Duration::from_secs(3));
    // Let the blocked connect go (the listener closes), so that the test ends.
    drop(l);
    drop(fill);
    let took = stopped.unwrap_or_else(|_| done_rx.recv().unwrap());
    let vd = stopper.join().unwrap();
    drop((vd, rx, tx));
    let _ = std::fs::remove_file(&path);
    eprintln!("stop() took {took:?} (returned only once the front end's listener closed)");
    assert!(
        took < Duration::from_secs(2),
        "a front end server with a full backlog blocked our connect: stop() took {took:?}"
    );
}

/// In server mode, `start()` probes a socket file already at `iface=` to tell a
/// live server from a stale file, without waiting: a server there whose backlog is
/// full and that never accepts is live (the path is refused at once).
#[test]
fn ctl_start_on_a_socket_whose_server_never_accepts_is_refused_at_once() {
    let tp = TestPool::new(64, 2048 + 128, 128);
    let path = sock_path("server-backlog");
    let (l, fill) = full_backlog(&path);
    let args = format!("iface={path}");
    let mut vd = Vhost::probe(&ProbeCtx { name: "net_vhost0", args: &args }).unwrap();
    let _rx = vd.rx_queue_setup(0, 256, tp.pool(), Arc::new(QueueStats::default())).unwrap();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let starter = std::thread::spawn(move || {
        let t = Instant::now();
        let r = vd.start().map_err(|e| e.msg);
        let _ = done_tx.send((t.elapsed(), r));
        vd
    });
    let res = done_rx.recv_timeout(Duration::from_secs(3));
    drop(l);
    drop(fill);
    let (took, r) = res.unwrap_or_else(|_| done_rx.recv().unwrap());
    let mut vd = starter.join().unwrap();
    vd.stop().unwrap();
    let _ = std::fs::remove_file(&path);
    eprintln!("start() took {took:?}: {r:?}");
    assert!(took < Duration::from_secs(2), "start() blocked {took:?} probing a server that never accepts");
}

/// A device whose `start()` was refused because another serves its path leaves
/// that live socket alone when it is stopped or dropped: only the device that
/// bound a socket file removes it.
#[test]
fn ctl_a_device_refused_its_socket_leaves_the_live_one_alone() {
    let tp = TestPool::new(256, 2048 + 128, 128);
    let mut a = dev(&tp, "shared-path");
    let args = format!("iface={}", a.path);
    let mut b = Vhost::probe(&ProbeCtx { name: "net_vhost1", args: &args }).unwrap();
    let e = b.start().unwrap_err();
    assert!(e.msg.contains("another process"), "{}", e.msg);
    drop(b);
    let exists = std::path::Path::new(&a.path).exists();
    let reach = UnixStream::connect(&a.path).is_ok();
    a.d.stop().unwrap();
    assert!(
        exists && reach,
        "dropping a device refused at start() deleted the socket of the device serving it (file exists: \
         {exists}, a front end can connect: {reach})"
    );
}

// ---------------------------------------------------------------------------
// Faults of the memory table.
// ---------------------------------------------------------------------------

const CHILD_ENV: &str = "VHOST_ATTACK_CHILD";

/// Run test `name` (ignored) alone in a child process of this test binary; its exit
/// status and output.
fn run_child(name: &str) -> (std::process::ExitStatus, String) {
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--include-ignored", "--test-threads=1", "--nocapture"])
        .env(CHILD_ENV, name)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    // A child killed by a signal leaves its socket file behind.
    if let Ok(dir) = std::fs::read_dir(std::env::temp_dir()) {
        for e in dir.flatten() {
            let n = e.file_name().to_string_lossy().to_string();
            if n.starts_with("vhost-atk-") && n.ends_with(&format!("-{pid}.sock")) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status, text)
}

fn is_child(name: &str) -> bool {
    std::env::var(CHILD_ENV).as_deref() == Ok(name)
}

/// The child of `mem_memory_that_could_shrink_is_refused_and_the_process_lives`: a
/// front end whose memory is a memfd made without MFD_ALLOW_SEALING (or a plain
/// file, or hugetlbfs: none can be sealed) is refused; it truncates the file, and a
/// burst finds nothing to touch.
#[test]
#[ignore = "run by mem_memory_that_could_shrink_is_refused_and_the_process_lives"]
fn child_truncated_memory() {
    if !is_child("attack_tests::child_truncated_memory") {
        return;
    }
    let tp = TestPool::new(256, 2048 + 128, 128);
    let mut d = dev(&tp, "child-trunc");
    let mut g = Guest::new();
    let fd = memfd_raw(SIZE, 0);
    let map = ipc::Mapping::new(&fd, SIZE).unwrap();
    drop((std::mem::replace(&mut g.fd, fd), std::mem::replace(&mut g.map, map)));
    let mut fe = FrontEnd::connect(&d.path);
    assert!(fe.send(req::SET_PROTOCOL_FEATURES, 0, &proto::OFFERED_PROTOCOL.to_le_bytes(), &[]));
    let table = proto::mem_table(&[Guest::region()]);
    // Refused by default (require-sealed=yes): the front end could cut it under us.
    assert_eq!(fe.acked(req::SET_MEM_TABLE, &table, &[g.fd.as_raw_fd()]), Some(1));
    println!("CHILD: memory refused, unsealed_regions = {}", xstat(&d.d, "unsealed_regions"));
    // SAFETY: ftruncate on our descriptor.
    assert_eq!(unsafe { libc::ftruncate(g.fd.as_raw_fd(), 0) }, 0);
    println!("CHILD: the front end truncated its file; a burst now");
    let got = run_rx(&mut d.rx, 32, 0);
    assert!(got.is_empty());
    println!("CHILD: the burst survived ({} frames)", got.len());
}

/// A region whose file cannot be sealed against shrinking (a memfd made without
/// MFD_ALLOW_SEALING, a regular file, hugetlbfs) would let the front end truncate
/// the file and make our next access to its memory raise SIGBUS: it is refused by
/// default (`require-sealed=yes`), and the process lives (run in a child, so that a
/// regression kills the child, not the test run).
#[test]
fn mem_memory_that_could_shrink_is_refused_and_the_process_lives() {
    let (st, out) = run_child("attack_tests::child_truncated_memory");
    use std::os::unix::process::ExitStatusExt as _;
    let lines: Vec<&str> = out.lines().filter(|l| l.contains("CHILD:")).collect();
    eprintln!("child: {st:?}\n{}", lines.join("\n"));
    assert!(
        st.success(),
        "the front end truncated its unsealed memory and the process died (signal {:?}, SIGBUS is {}): {}",
        st.signal(),
        libc::SIGBUS,
        lines.join(" | ")
    );
}

/// mem.rs `map` seals a region's file against shrinking before it reads its size:
/// a front end that shrinks the file meanwhile cannot leave a region counted as
/// sealed beyond the end of its file (SIGBUS at first access). Raced for 3 s.
#[test]
fn mem_the_file_is_sealed_before_its_size_is_read() {
    let size = 64u64 << 10;
    let region = Region { gpa: GPA, size, uaddr: UVA, offset: 0 };
    let t = Instant::now();
    let (mut tries, mut wins, mut short) = (0, 0, 0);
    while t.elapsed() < Duration::from_secs(3) && wins == 0 {
        tries += 1;
        let fd = memfd_raw(size, libc::MFD_ALLOW_SEALING);
        let raw = fd.as_raw_fd();
        let go = Arc::new(AtomicBool::new(true));
        let started = Arc::new(AtomicBool::new(false));
        let (go2, started2) = (go.clone(), started.clone());
        // Hold each size for a while, sweeping how long from try to try.
        let hold = 1 + tries % 64;
        let racer = std::thread::spawn(move || {
            // SAFETY: fcntl on a descriptor the main thread keeps open until this
            // thread is joined.
            let sealed = || unsafe { libc::fcntl(raw, libc::F_GET_SEALS) } & libc::F_SEAL_SHRINK != 0;
            started2.store(true, Ordering::Release);
            while go2.load(Ordering::Relaxed) {
                // SAFETY: as above.
                unsafe { libc::ftruncate(raw, size as libc::off_t) };
                for _ in 0..hold {
                    if sealed() {
                        return; // sealed while whole: this try is lost
                    }
                }
                // SAFETY: as above.
                if unsafe { libc::ftruncate(raw, 0) } != 0 {
                    return;
                }
                for _ in 0..hold {
                    if sealed() {
                        return; // sealed while empty
                    }
                }
            }
        });
        while !started.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        let r = MemTable::map(&[region], std::slice::from_ref(&fd), true);
        go.store(false, Ordering::Relaxed);
        racer.join().unwrap();
        match r {
            Ok(table) => {
                let now = ipc::file_size(&fd).unwrap();
                if table.unsealed == 0 && now < size {
                    wins += 1;
                    eprintln!("try {tries}: mapped, counted sealed, file now {now} bytes for a region of {size}");
                }
                drop(table);
            }
            Err(_) => short += 1,
        }
    }
    eprintln!("{tries} tries, {short} refused as short, {wins} sealed-but-short tables");
    assert_eq!(wins, 0, "a region counted as sealed lies beyond the end of its file (SIGBUS at first access)");
}

fn vm_size_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let l = s.lines().find(|l| l.starts_with("VmSize:")).unwrap();
    l.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Only a region is mapped, from its offset rounded down to the page, never the
/// file before it: a 4 KiB region at offset 1 TiB of a sparse memfd does not
/// reserve 1 TiB of our address space.
#[test]
fn mem_only_the_region_is_mapped_not_the_file_before_it() {
    let tp = TestPool::new(64, 2048 + 128, 128);
    let d = dev(&tp, "vasize");
    let far = 1u64 << 40;
    let fd = ipc::memfd(c"sparse", far + 4096).unwrap();
    let mut fe = acking(&d.path);
    let before = vm_size_kib();
    let region = Region { gpa: GPA, size: 4096, uaddr: UVA, offset: far };
    assert_eq!(fe.acked(req::SET_MEM_TABLE, &proto::mem_table(&[region]), &[fd.as_raw_fd()]), Some(0), "accepted");
    let grew = vm_size_kib().saturating_sub(before) << 10;
    drop(fe);
    let mut d = d;
    d.d.stop().unwrap();
    eprintln!("a 4 KiB region made the process map {} GiB more", grew >> 30);
    assert!(grew < 1 << 30, "a 4 KiB region reserved {} GiB of our address space", grew >> 30);
}

/// Garbage virtio-net headers from the guest (GSO with a segment size of 0,
/// header lengths and checksum starts beyond the frame, unknown GSO types), and the
/// same packets sent back to a guest that does not complete checksums (so we
/// complete them from the lengths the garbage set): no panic, nothing written
/// beyond the packets, every mbuf back.
#[test]
fn dp_garbage_vnet_headers_both_ways() {
    let tp = TestPool::new(512, 2048 + 128, 128);
    let (mut g, mut rx, mut tx) = setup(&tp);
    tx.v.neg.guest_csum = false;
    let mut s = 0x1234_5678_9abc_def1u64;
    let mut rnd = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    for round in 0..200 {
        for _ in 0..8 {
            let pick = |r: u64| -> u16 {
                match r % 4 {
                    0 => 0,
                    1 => (r >> 8) as u16,
                    2 => ((r >> 8) % 128) as u16,
                    _ => u16::MAX,
                }
            };
            let h = VnetHdr {
                flags: (rnd() % 4) as u8,
                gso_type: [0, GSO_TCPV4, 4, 5, 0x81, 3][(rnd() % 6) as usize],
                hdr_len: pick(rnd()),
                gso_size: pick(rnd()),
                csum_start: pick(rnd()),
                csum_offset: pick(rnd()),
            };
            let mut hb = [0u8; 12];
            hb[..10].copy_from_slice(&h.to_bytes());
            let len = 14 + (rnd() % 3000) as usize;
            g.send(&hb, &frame(len, round as u8), 700);
        }
        g.post_rx(16, 1024);
        let got = run_rx(&mut rx, 32, 0);
        drop(run_tx(&mut tx, got));
        g.used(1);
        for (_, f) in g.recv() {
            assert!(f.len() <= 3014);
        }
        if tx.v.broken || rx.v.broken {
            panic!("a ring broke in round {round}");
        }
    }
    assert_eq!(tp.in_use(), 0);
}

// ---------------------------------------------------------------------------
// Sleeping RX queues: woken by the guest's kick.
// ---------------------------------------------------------------------------

/// The guest TX ring's used flags (1: do not kick).
fn guest_tx_used_flags(g: &Guest) -> u16 {
    u16::from_le_bytes(g.read(ring_off(1).2, 2).try_into().unwrap())
}

/// An RX queue about to sleep asks the guest to kick its TX ring; the kick wakes the
/// queue's eventfd through the control thread and the frame is there; disarmed, the
/// guest is told not to kick again. A front end whose kick descriptor is a pipe
/// gets a queue that keeps polling (the pipe is never read).
#[test]
fn a_sleeping_rx_queue_is_woken_by_the_guests_kick_and_never_by_a_pipe() {
    use ironpath_pmd_sdk::RxQueue;
    let tp = TestPool::new(1024, 2048 + 128, 128);
    let mut d = dev(&tp, "wake");
    let mut fe = FrontEnd::connect(&d.path);
    let mut g = Guest::new();
    let (kick, c0, c1) = eventfds();
    fe.setup(&g, &kick, [&c0, &c1]);
    wait("the link", || d.d.link().up == 1);
    assert_eq!(guest_tx_used_flags(&g), 1, "polling: no kicks wanted");
    let wfd = d.rx.wake_fd().expect("a wake-up source");
    // The control thread wakes armed queues after each request, just after its
    // acknowledgement: let the last one pass.
    std::thread::sleep(Duration::from_millis(300));
    for round in 0..3 {
        assert!(d.rx.wake_arm(true), "round {round}: armed");
        assert_eq!(guest_tx_used_flags(&g), 0, "armed: kicks wanted");
        ipc::drain(wfd);
        assert!(!ipc::poll(&[wfd], 200)[0], "round {round}: woken with nothing sent");
        g.send(&[0; 12], &[round as u8; 100], 2048);
        ipc::poke(kick.as_raw_fd());
        assert!(ipc::poll(&[wfd], 2000)[0], "round {round}: the kick did not wake the queue");
        assert!(d.rx.wake_arm(false));
        assert_eq!(guest_tx_used_flags(&g), 1, "disarmed: no kicks wanted");
        assert_eq!(run_rx(&mut d.rx, 32, 0).len(), 1, "round {round}: the frame");
    }
    assert!(xstat(&d.d, "kick_wakeups") >= 3);
    // A kick that never empties (a semaphore eventfd filled once: each read takes 1)
    // wakes an armed queue once per arming, not without end.
    // SAFETY: plain eventfd(2); the descriptor is owned below.
    let sem = unsafe { OwnedFd::from_raw_fd(libc::eventfd(0, libc::EFD_SEMAPHORE | libc::EFD_NONBLOCK)) };
    assert!(fe.send(req::SET_VRING_KICK, 0, &1u64.to_le_bytes(), &[sem.as_raw_fd()]));
    std::thread::sleep(Duration::from_millis(300));
    let big = u64::MAX - 1;
    // SAFETY: writes 8 bytes from a live u64 to our eventfd.
    assert_eq!(unsafe { libc::write(sem.as_raw_fd(), (&big as *const u64).cast(), 8) }, 8);
    let before = xstat(&d.d, "kick_wakeups");
    assert!(d.rx.wake_arm(true));
    assert!(ipc::poll(&[wfd], 2000)[0], "the kick did not wake the queue");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(xstat(&d.d, "kick_wakeups"), before + 1, "one wake-up per arming");
    assert!(d.rx.wake_arm(false));
    drop(fe);
    wait("the link down", || d.d.link().up == 0);

    // A pipe as the kick: kept, never read; the queue cannot sleep.
    let mut fe = FrontEnd::connect(&d.path);
    let g = Guest::new();
    let (r, _w) = pipe();
    fe.setup(&g, &r, [&c0, &c1]);
    wait("the link", || d.d.link().up == 1);
    assert!(!d.rx.wake_arm(true), "armed on a pipe");
    assert_eq!(guest_tx_used_flags(&g), 1);
    assert_eq!(xstat(&d.d, "bad_kick_fds"), 2, "the pipe kicks both rings");
}
