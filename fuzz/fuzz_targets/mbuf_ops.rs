//! Sequences of mbuf operations checked against a model of the bytes each handle
//! sees: alloc (chains when longer than a buffer), share, indirect slice and clone,
//! external buffers, chain, adj, keep, trim, append, prepend, free (by drop and by
//! `free_bulk_raw`). Handles made by `share` alias one packet: the model aliases
//! them too, so a change through one is seen through the other. An operation the
//! API refuses must change nothing.
//!
//! Input: a sequence of records, each an opcode byte and three argument bytes.
//! After every operation every live handle's bytes, length and segment count equal
//! the model's (compared segment by segment, without a copy); at the end, with every handle dropped, the pool holds all its
//! objects again and every external owner has been released.
#![no_main]
use ironpath_eal::mbuf::free_bulk_raw;
use ironpath_eal::{Mbuf, MemPolicy, Mempool, MempoolConfig};
use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};

const POOL_SIZE: u32 = 96;
const MAX_HANDLES: usize = 16;

fn pool() -> &'static Mempool {
    static POOL: OnceLock<Mempool> = OnceLock::new();
    // 128 bytes of headroom and 128 of data: chains come quickly.
    POOL.get_or_init(|| {
        Mempool::create(
            &MempoolConfig::new("fuzz-mbuf", POOL_SIZE).cache_size(0).data_room(256).policy(MemPolicy::NoHuge),
        )
        .expect("create mempool")
    })
}

/// An external buffer's owner; its `Arc` count tells whether the mbufs released it.
struct Owner(Arc<Vec<u8>>);

impl AsRef<[u8]> for Owner {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// A live handle and the model packet it sees (`share` makes two handles of one).
struct Handle {
    m: Mbuf,
    obj: usize,
}

struct Model {
    handles: Vec<Handle>,
    /// Bytes of each packet ever made (aliases share an index).
    objs: Vec<Vec<u8>>,
    owners: Vec<Arc<Vec<u8>>>,
}

impl Model {
    fn add(&mut self, m: Mbuf, bytes: Vec<u8>) {
        if self.handles.len() < MAX_HANDLES {
            self.objs.push(bytes);
            self.handles.push(Handle { m, obj: self.objs.len() - 1 });
        }
    }

    /// Every live handle sees its packet's bytes, length and segment count.
    fn check(&self) {
        for i in 0..self.handles.len() {
            self.check_one(i);
        }
    }

    fn check_one(&self, i: usize) {
        let h = &self.handles[i];
        let want = &self.objs[h.obj];
        assert_eq!(h.m.pkt_len(), want.len(), "handle {i}: length");
        // Segment by segment against the model (no copy of the packet).
        let (mut at, mut n) = (0, 0);
        for seg in h.m.segments() {
            assert!(at + seg.len() <= want.len(), "handle {i}: segment lengths");
            assert_eq!(seg, &want[at..at + seg.len()], "handle {i}: bytes at {at}");
            at += seg.len();
            n += 1;
        }
        assert_eq!(at, want.len(), "handle {i}: segment lengths");
        assert_eq!(n, h.m.nb_segs(), "handle {i}: segment count");
    }

    /// Index of handle `b % len`, if any.
    fn pick(&self, b: u8) -> Option<usize> {
        (!self.handles.is_empty()).then(|| usize::from(b) % self.handles.len())
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

fuzz_target!(|data: &[u8]| {
    let p = pool();
    let mut md = Model { handles: Vec::new(), objs: Vec::new(), owners: Vec::new() };
    for rec in data.chunks_exact(4).take(256) {
        let (op, a, b, c) = (rec[0] % 14, rec[1], rec[2], rec[3]);
        match op {
            0 => {
                let bytes = pattern(usize::from(a) + usize::from(b & 1) * 256, c);
                if let Ok(m) = Mbuf::from_slice(p, &bytes) {
                    md.add(m, bytes);
                }
            }
            1 => {
                if let Some(i) = md.pick(a) {
                    if md.handles.len() < MAX_HANDLES {
                        let h = Handle { m: md.handles[i].m.share(), obj: md.handles[i].obj };
                        md.handles.push(h);
                    }
                }
            }
            2 => {
                if let Some(i) = md.pick(a) {
                    let want = md.objs[md.handles[i].obj].clone();
                    let (off, len) = (usize::from(b), usize::from(c));
                    match md.handles[i].m.slice_indirect(p, off, len) {
                        Ok(s) => {
                            assert!(off + len <= want.len(), "slice beyond the packet accepted");
                            md.add(s, want[off..off + len].to_vec());
                        }
                        Err(_) => {}
                    }
                }
            }
            3 => {
                if let Some(i) = md.pick(a) {
                    let want = md.objs[md.handles[i].obj].clone();
                    if let Ok(s) = md.handles[i].m.clone_indirect(p) {
                        md.add(s, want);
                    }
                }
            }
            4 => {
                let buf = Arc::new(pattern(usize::from(a) * 8 + 1, c));
                let (off, len) = (usize::from(b) * 4, usize::from(c) * 2);
                let ok = off + len <= buf.len();
                match Mbuf::external(p, Owner(Arc::clone(&buf)), off, len) {
                    Ok(m) => {
                        assert!(ok, "external range beyond the owner accepted");
                        md.add(m, buf[off..off + len].to_vec());
                    }
                    Err(_) => {}
                }
                md.owners.push(buf);
            }
            5 => {
                // Chain handle b behind handle a (two distinct handles).
                let (Some(i), Some(j)) = (md.pick(a), md.pick(b)) else { continue };
                if i == j {
                    continue;
                }
                let tail = md.handles.remove(j);
                let i = if j < i { i - 1 } else { i };
                let tail_bytes = md.objs[tail.obj].clone();
                if md.handles[i].m.chain(tail.m).is_ok() {
                    let o = md.handles[i].obj;
                    md.objs[o].extend_from_slice(&tail_bytes);
                }
            }
            6 => {
                if let Some(i) = md.pick(a) {
                    drop(md.handles.remove(i));
                }
            }
            7 => {
                if let Some(i) = md.pick(a) {
                    let h = md.handles.remove(i);
                    // SAFETY: the handle's reference is given up here and never used again.
                    unsafe { free_bulk_raw(&[h.m.into_raw()]) };
                }
            }
            8 => {
                if let Some(i) = md.pick(a) {
                    if md.handles[i].m.adj(usize::from(b)).is_ok() {
                        let o = md.handles[i].obj;
                        md.objs[o].drain(..usize::from(b));
                    }
                }
            }
            9 => {
                if let Some(i) = md.pick(a) {
                    if md.handles[i].m.trim(usize::from(b)).is_ok() {
                        let o = md.handles[i].obj;
                        let keep = md.objs[o].len() - usize::from(b);
                        md.objs[o].truncate(keep);
                    }
                }
            }
            10 => {
                if let Some(i) = md.pick(a) {
                    if let Ok(d) = md.handles[i].m.append(usize::from(b)) {
                        d.fill(c);
                        let o = md.handles[i].obj;
                        md.objs[o].extend(std::iter::repeat_n(c, usize::from(b)));
                    }
                }
            }
            11 => {
                if let Some(i) = md.pick(a) {
                    if let Ok(d) = md.handles[i].m.prepend(usize::from(b)) {
                        d.fill(c);
                        let o = md.handles[i].obj;
                        md.objs[o].splice(0..0, std::iter::repeat_n(c, usize::from(b)));
                    }
                }
            }
            12 => {
                if let Some(i) = md.pick(a) {
                    let (off, len) = (usize::from(b), usize::from(c));
                    if md.handles[i].m.keep(off, len).is_ok() {
                        let o = md.handles[i].obj;
                        md.objs[o] = md.objs[o][off..off + len].to_vec();
                    }
                }
            }
            _ => {
                // Write through data_mut: only a packet nobody else sees may change.
                if let Some(i) = md.pick(a) {
                    if let Ok(d) = md.handles[i].m.data_mut() {
                        let n = d.len().min(usize::from(b));
                        d[..n].fill(c);
                        let o = md.handles[i].obj;
                        md.objs[o][..n].fill(c);
                    }
                }
            }
        }
        md.check();
    }
    md.handles.clear();
    assert_eq!(p.stats().in_use, 0, "every object back in the pool");
    for o in &md.owners {
        assert_eq!(Arc::strong_count(o), 1, "an external owner was not released");
    }
});
