//! A virtio-net driver's side of the rings, for the tests: guest memory in a memfd
//! (one region), two split rings (queue pair 0: RX ring 0, TX ring 1) and their
//! buffers, and the vhost-user requests a front end sends. The hostile tests write
//! whatever they like into the same memory.

use crate::mem::MemTable;
use crate::proto::{self, req, Region, RingAddr};
use crate::vring::Vring;
use ironpath_pmd_sdk::ipc::{self, Mapping};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

/// Guest physical address of the region's first byte.
pub const GPA: u64 = 0x1_0000;
/// The front end's process address of the same byte.
pub const UVA: u64 = 0x7f00_0000_0000;
/// Region size.
pub const SIZE: u64 = 4 << 20;
/// Ring entries.
pub const QSIZE: u32 = 256;
/// Each buffer's size.
pub const BUF: u32 = 2048;

const NEXT: u16 = 1;
const WRITE: u16 = 2;

/// A guest.
pub struct Guest {
    pub fd: OwnedFd,
    pub map: Mapping,
    /// Next free-running avail index per ring, and the used index read so far.
    pub avail_idx: [u16; 2],
    pub used_seen: [u16; 2],
    /// Next buffer slot per ring (each descriptor owns buffer `i` of its ring).
    next_desc: [u16; 2],
}

/// Where ring `r`'s parts and buffers sit (offsets in the region).
pub fn ring_off(r: usize) -> (u64, u64, u64, u64) {
    let base = r as u64 * (1 << 20);
    let desc = base;
    let avail = desc + 16 * u64::from(QSIZE);
    let used = (avail + 6 + 2 * u64::from(QSIZE) + 3) & !3;
    let bufs = base + 64 * 1024;
    (desc, avail, used, bufs)
}

impl Guest {
    pub fn new() -> Guest {
        let fd = ipc::memfd(c"guest", SIZE).unwrap();
        let map = Mapping::new(&fd, SIZE).unwrap();
        Guest { fd, map, avail_idx: [0; 2], used_seen: [0; 2], next_desc: [0; 2] }
    }

    pub fn region() -> Region {
        Region { gpa: GPA, size: SIZE, uaddr: UVA, offset: 0 }
    }

    /// The bytes at region offset `o`.
    pub fn at(&self, o: u64) -> *mut u8 {
        assert!(o < SIZE);
        // SAFETY: inside the mapping.
        unsafe { self.map.ptr().add(o as usize) }
    }

    pub fn write(&self, o: u64, b: &[u8]) {
        assert!(o + b.len() as u64 <= SIZE);
        // SAFETY: inside the mapping (checked).
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), self.at(o), b.len()) };
    }

    pub fn read(&self, o: u64, n: usize) -> Vec<u8> {
        assert!(o + n as u64 <= SIZE);
        let mut v = vec![0u8; n];
        // SAFETY: inside the mapping (checked).
        unsafe { std::ptr::copy_nonoverlapping(self.at(o), v.as_mut_ptr(), n) };
        v
    }

    fn idx(&self, o: u64) -> &AtomicU16 {
        // SAFETY: a 2-aligned index inside the mapping.
        unsafe { &*self.at(o).cast::<AtomicU16>() }
    }

    /// The table the back end maps, in-process.
    pub fn table(&self) -> MemTable {
        // SAFETY: the mapping outlives the tables of every test that uses it.
        unsafe { MemTable::from_raw(&[(Self::region(), self.map.ptr())]) }.unwrap()
    }

    pub fn addr(r: usize) -> RingAddr {
        let (d, a, u, _) = ring_off(r);
        RingAddr { desc: UVA + d, avail: UVA + a, used: UVA + u }
    }

    /// A ring of the back end, set up on this guest as the requests would.
    pub fn vring(&self, r: usize, mem: Arc<MemTable>) -> Vring {
        let mut v = Vring::default();
        (v.num, v.addr, v.mem) = (QSIZE, Some(Self::addr(r)), Some(mem));
        v.started = true;
        v.enabled = true;
        assert!(v.translate());
        v
    }

    /// Write descriptor `i` of ring `r`.
    pub fn set_desc(&self, r: usize, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
        let (d, ..) = ring_off(r);
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&addr.to_le_bytes());
        b[8..12].copy_from_slice(&len.to_le_bytes());
        b[12..14].copy_from_slice(&flags.to_le_bytes());
        b[14..16].copy_from_slice(&next.to_le_bytes());
        self.write(d + 16 * u64::from(i), &b);
    }

    /// Make head `head` available on ring `r`.
    pub fn push_avail(&mut self, r: usize, head: u16) {
        let (_, a, ..) = ring_off(r);
        let slot = u32::from(self.avail_idx[r]) % QSIZE;
        self.write(a + 4 + 2 * u64::from(slot), &head.to_le_bytes());
        self.avail_idx[r] = self.avail_idx[r].wrapping_add(1);
        self.idx(a + 2).store(self.avail_idx[r], Ordering::Release);
    }

    /// Set the available index of ring `r` outright.
    pub fn set_avail_idx(&mut self, r: usize, v: u16) {
        let (_, a, ..) = ring_off(r);
        self.avail_idx[r] = v;
        self.idx(a + 2).store(v, Ordering::Release);
    }

    /// The guest's address of buffer `i` of ring `r`.
    pub fn buf_gpa(r: usize, i: u16) -> u64 {
        GPA + ring_off(r).3 + u64::from(i % QSIZE as u16) * u64::from(BUF)
    }

    /// Send `frame` with header `hdr` (12 bytes) on the TX ring (1), in chunks of
    /// `chunk` bytes chained (header and frame in one stream).
    pub fn send(&mut self, hdr: &[u8; 12], frame: &[u8], chunk: usize) {
        let mut all = hdr.to_vec();
        all.extend_from_slice(frame);
        let parts: Vec<&[u8]> = all.chunks(chunk.min(BUF as usize)).collect();
        let head = self.next_desc[1];
        for (k, p) in parts.iter().enumerate() {
            let i = self.next_desc[1] % QSIZE as u16;
            self.next_desc[1] = self.next_desc[1].wrapping_add(1);
            let g = Self::buf_gpa(1, i);
            self.write(g - GPA, p);
            let last = k + 1 == parts.len();
            let next = self.next_desc[1] % QSIZE as u16;
            self.set_desc(1, i, g, p.len() as u32, if last { 0 } else { NEXT }, if last { 0 } else { next });
        }
        self.push_avail(1, head % QSIZE as u16);
    }

    /// Post `n` receive buffers of `len` bytes on the RX ring (0), one descriptor each.
    pub fn post_rx(&mut self, n: usize, len: u32) {
        for _ in 0..n {
            let i = self.next_desc[0] % QSIZE as u16;
            self.next_desc[0] = self.next_desc[0].wrapping_add(1);
            self.set_desc(0, i, Self::buf_gpa(0, i), len, WRITE, 0);
            self.push_avail(0, i);
        }
    }

    /// Used entries of ring `r` not read yet: (id, len).
    pub fn used(&mut self, r: usize) -> Vec<(u32, u32)> {
        let (_, _, u, _) = ring_off(r);
        let end = self.idx(u + 2).load(Ordering::Acquire);
        let mut v = Vec::new();
        while self.used_seen[r] != end {
            let slot = u32::from(self.used_seen[r]) % QSIZE;
            let e = self.read(u + 4 + 8 * u64::from(slot), 8);
            v.push((u32::from_le_bytes(e[..4].try_into().unwrap()), u32::from_le_bytes(e[4..].try_into().unwrap())));
            self.used_seen[r] = self.used_seen[r].wrapping_add(1);
        }
        v
    }

    /// Frames received on the RX ring (0): (12-byte header, frame), merged buffers
    /// put together by `num_buffers`.
    pub fn recv(&mut self) -> Vec<([u8; 12], Vec<u8>)> {
        let used = self.used(0);
        let mut out = Vec::new();
        let mut k = 0;
        while k < used.len() {
            let (id, len) = used[k];
            let first = self.read(Self::buf_gpa(0, id as u16) - GPA, len as usize);
            let mut hdr = [0u8; 12];
            hdr.copy_from_slice(&first[..12]);
            let nbuf = usize::from(u16::from_le_bytes([hdr[10], hdr[11]])).max(1);
            let mut frame = first[12..].to_vec();
            for &(id, len) in &used[k + 1..(k + nbuf).min(used.len())] {
                frame.extend(self.read(Self::buf_gpa(0, id as u16) - GPA, len as usize));
            }
            k += nbuf;
            out.push((hdr, frame));
        }
        out
    }

    /// The requests that set up queue pair 0 on this guest, as (request, payload,
    /// whether a descriptor goes with it).
    pub fn setup_requests(features: u64) -> Vec<(u32, Vec<u8>, bool)> {
        let mut v = vec![
            (req::SET_OWNER, vec![], false),
            (req::SET_FEATURES, features.to_le_bytes().to_vec(), false),
            (req::SET_MEM_TABLE, proto::mem_table(&[Self::region()]), true),
        ];
        for r in 0..2u32 {
            v.push((req::SET_VRING_NUM, proto::state(r, QSIZE), false));
            v.push((req::SET_VRING_BASE, proto::state(r, 0), false));
            v.push((req::SET_VRING_ADDR, proto::ring_addr(r, Self::addr(r as usize)), false));
            v.push((req::SET_VRING_KICK, u64::from(r).to_le_bytes().to_vec(), true));
            v.push((req::SET_VRING_CALL, u64::from(r).to_le_bytes().to_vec(), true));
            v.push((req::SET_VRING_ENABLE, proto::state(r, 1), false));
        }
        v
    }
}
