//! What net_vhost takes from a front end and its guest (`pmds/vhost/src/{proto,mem,
//! vring}.rs`, included as they are): vhost-user requests through the parser, then
//! the guest's memory, rings and descriptors through both data paths.
//!
//! Input: a first byte (how many request records follow, and the ring's size), the
//! records (request id, descriptor count, payload length, payload), then up to 64 KiB
//! of guest memory: the descriptor table at 0, the available ring at 8 KiB, the used
//! ring at 12 KiB, buffers anywhere (the memory is one region at guest address
//! 0x10000).
//!
//! No panic; a parsed memory table never holds an empty or wrapping region; the
//! rings never publish more entries than the guest offered; every mbuf goes back
//! to its pool; a ring whose index ran more than a ring ahead stops.
#![no_main]
use ironpath_pmd_sdk::testing::{run_rx, run_tx, TestPool};
use ironpath_pmd_sdk::{Pool, RxBurst, RxQueue, TxBurst, TxQueue};
use libfuzzer_sys::fuzz_target;

#[path = "../../pmds/vhost/src/mem.rs"]
#[allow(dead_code)]
mod mem;
#[path = "../../pmds/vhost/src/proto.rs"]
#[allow(dead_code)]
mod proto;
#[path = "../../pmds/vhost/src/vring.rs"]
#[allow(dead_code)]
mod vring;

use vring::{Faults, Negotiated, Vring};

const GPA: u64 = 0x1_0000;
const MEM: usize = 64 * 1024;

struct Q(Vring, Pool, Faults);

impl RxQueue for Q {
    fn rx_burst(&mut self, burst: &mut RxBurst<'_>) {
        if self.0.ready() {
            self.0.dequeue(burst, &self.1, &self.2);
        }
    }
}

impl TxQueue for Q {
    fn tx_burst(&mut self, burst: &mut TxBurst<'_>) {
        if self.0.ready() {
            self.0.enqueue(burst, &self.2);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&cfg, mut rest)) = data.split_first() else { return };
    for _ in 0..cfg & 7 {
        if rest.len() < 3 {
            return;
        }
        let (req, nfds, len) = (u32::from(rest[0] & 31), usize::from(rest[1] & 15), usize::from(rest[2]) * 2);
        let p = &rest[3..];
        let p = &p[..len.min(p.len())];
        if let Ok(proto::Msg::MemTable(rs)) = proto::parse(req, p, nfds) {
            assert!(rs.iter().all(|r| r.size > 0 && r.gpa.checked_add(r.size).is_some()));
        }
        rest = &rest[(3 + len).min(rest.len())..];
    }
    // The guest's memory, 16-aligned.
    let mut words = vec![0u128; MEM / 16];
    // SAFETY: `words` is MEM bytes of plain integers.
    let bytes = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), MEM) };
    let n = rest.len().min(MEM);
    bytes[..n].copy_from_slice(&rest[..n]);
    let region = proto::Region { gpa: GPA, size: MEM as u64, uaddr: GPA, offset: 0 };
    // SAFETY: `words` outlives the table (dropped at the end of this run).
    let table = std::sync::Arc::new(unsafe { mem::MemTable::from_raw(&[(region, bytes.as_mut_ptr())]) }.unwrap());
    let num = 1u32 << (cfg >> 3 & 7);
    let tp = TestPool::new(128, 2048 + 128, 128);
    let neg = Negotiated {
        hdr_len: if cfg & 0x40 != 0 { 10 } else { 12 },
        mrg: cfg & 0x80 != 0,
        guest_csum: cfg & 1 != 0,
        guest_tso: cfg & 2 != 0,
        in_order: cfg & 4 != 0,
    };
    let ring = |avail_at: u64| {
        let mut v = Vring::default();
        v.num = num;
        v.addr = Some(proto::RingAddr { desc: GPA, avail: GPA + avail_at, used: GPA + avail_at + 4096 });
        v.mem = Some(table.clone());
        (v.started, v.enabled, v.neg) = (true, true, neg);
        assert!(v.translate());
        Q(v, tp.pool(), Faults::default())
    };
    let mut rx = ring(8192);
    let got = run_rx(&mut rx, 32, 0);
    assert!(got.len() <= num as usize);
    // Our TX into a guest RX ring over the same memory (its own rings at 16 KiB).
    let mut tx = ring(16384);
    let left = run_tx(&mut tx, got);
    drop(left);
    assert_eq!(tp.in_use(), 0, "every mbuf back");
    for q in [&rx, &tx] {
        assert!(!q.0.broken || q.2.bad_ring_index.get() > 0);
    }
});
