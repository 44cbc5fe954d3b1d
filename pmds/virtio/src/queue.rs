//! Split virtqueues, the driver's side: the descriptor table, available and used
//! rings in DMA memory of ours, mbufs posted by address (IOVA = VA), completions read
//! from the used ring. The device is the one writer of the used ring; every index
//! and id it writes is checked before use (a device that errs loses its packet, it
//! never makes us touch a slot we do not own).

use crate::pci::{common, Transport};
use ironpath_pmd_sdk::abi::{self, errno, Mbuf};
use ironpath_pmd_sdk::vfio::{DmaMem, Function};
use ironpath_pmd_sdk::vnet::VnetHdr;
use ironpath_pmd_sdk::{Counter, Packet, PmdError, Pool, RxBurst, TxBurst};
use std::sync::atomic::{fence, AtomicU16, Ordering};
use std::sync::Arc;

const NEXT: u16 = 1;
const WRITE: u16 = 2;
const USED_F_NO_NOTIFY: u16 = 1;
/// The virtio-net header with `VERSION_1`.
pub const HDR: usize = 12;
/// Most segments of one packet we send.
const MAX_TX_SEGS: usize = 32;

/// What a device did wrong (xstats).
#[derive(Debug, Default)]
pub struct Faults {
    /// Used entries naming a descriptor we did not post, or a length beyond it.
    pub bad_used: Counter,
    /// TX: packets not sent for lack of descriptors.
    pub ring_full: Counter,
    /// TX: packets with more segments than we send.
    pub too_many_segs: Counter,
    /// TX: packets with a segment that has no IO address (external memory of the
    /// host, which only copying drivers take), or whose pool could not be mapped.
    pub no_iova: Counter,
}

/// One split ring in DMA memory.
struct Ring {
    /// The ring's memory (the device reads and writes it until it is reset).
    _mem: DmaMem,
    n: u16,
    desc: *mut u8,
    avail: *mut u8,
    used: *mut u8,
    avail_idx: u16,
    last_used: u16,
    notify: *mut u16,
    q: u16,
}

// SAFETY: the ring's memory and notification address are the queue's own.
unsafe impl Send for Ring {}

impl Ring {
    /// Set up queue `q` with `want` entries (at most the device's size, a power of
    /// two), tell the device where it is and enable it.
    fn new(t: &Transport, f: &Arc<Function>, q: u16, want: u16) -> Result<Ring, PmdError> {
        t.w16(common::Q_SELECT, q);
        let max = t.r16(common::Q_SIZE);
        if max == 0 {
            return Err(PmdError::new(errno::EINVAL, format!("virtio queue {q} does not exist")));
        }
        let n = want.max(8).min(max);
        let n = if n.is_power_of_two() { n } else { 1 << (15 - n.leading_zeros()) };
        let nn = usize::from(n);
        let used_off = (16 * nn + 6 + 2 * nn).next_multiple_of(4096);
        let mem = DmaMem::new(f, used_off + 6 + 8 * nn, "virtqueue")?;
        let base = mem.ptr();
        // SAFETY: all three parts inside `mem` (sized above).
        let (desc, avail, used) = unsafe { (base, base.add(16 * nn), base.add(used_off)) };
        let iova = mem.iova();
        t.w16(common::Q_SIZE, n);
        t.w64(common::Q_DESC, iova);
        t.w64(common::Q_AVAIL, iova + 16 * nn as u64);
        t.w64(common::Q_USED, iova + used_off as u64);
        t.w16(common::Q_MSIX, 0xffff);
        let notify = t.notify_addr(t.r16(common::Q_NOFF)).ok_or_else(|| {
            PmdError::new(errno::EINVAL, format!("virtio queue {q}: notification outside its window"))
        })?;
        t.w16(common::Q_ENABLE, 1);
        Ok(Ring { _mem: mem, n, desc, avail, used, avail_idx: 0, last_used: 0, notify, q })
    }

    fn set_desc(&self, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&addr.to_le_bytes());
        b[8..12].copy_from_slice(&len.to_le_bytes());
        b[12..14].copy_from_slice(&flags.to_le_bytes());
        b[14..].copy_from_slice(&next.to_le_bytes());
        // SAFETY: `i < n`: inside the table.
        unsafe { std::ptr::write_volatile(self.desc.add(16 * usize::from(i)).cast::<[u8; 16]>(), b) };
    }

    /// Put head `head` in the next available slot (published by `publish`).
    fn push(&mut self, head: u16) {
        let slot = usize::from(self.avail_idx & (self.n - 1));
        // SAFETY: `slot < n`: inside the available ring.
        unsafe { std::ptr::write_volatile(self.avail.add(4 + 2 * slot).cast::<u16>(), head.to_le()) };
        self.avail_idx = self.avail_idx.wrapping_add(1);
    }

    /// Publish the available index and notify the device unless it said not to.
    fn publish(&mut self) {
        // SAFETY: the available index, 2-aligned in our ring.
        unsafe { &*self.avail.add(2).cast::<AtomicU16>() }.store(self.avail_idx, Ordering::Release);
        fence(Ordering::SeqCst);
        // SAFETY: the used ring's flags, in our ring.
        let flags = unsafe { std::ptr::read_volatile(self.used.cast::<u16>()) };
        if u16::from_le(flags) & USED_F_NO_NOTIFY == 0 {
            // SAFETY: the queue's notification address in the mapped BAR (checked).
            unsafe { std::ptr::write_volatile(self.notify, self.q.to_le()) };
        }
    }

    /// Used entries the device added since we last looked (at most a ring: more
    /// would be the device's error, taken as none).
    fn used_count(&self) -> u16 {
        // SAFETY: the used index, 2-aligned in our ring.
        let u = unsafe { &*self.used.add(2).cast::<AtomicU16>() }.load(Ordering::Acquire);
        let k = u.wrapping_sub(self.last_used);
        if k > self.n {
            0
        } else {
            k
        }
    }

    /// Used entry `k` from ours: (id, len).
    fn used_at(&self, k: u16) -> (u32, u32) {
        let slot = usize::from(self.last_used.wrapping_add(k) & (self.n - 1));
        // SAFETY: `slot < n`: inside the used ring.
        let e: [u8; 8] = unsafe { std::ptr::read_volatile(self.used.add(4 + 8 * slot).cast()) };
        (u32::from_le_bytes([e[0], e[1], e[2], e[3]]), u32::from_le_bytes([e[4], e[5], e[6], e[7]]))
    }
}

/// Bytes of the control queue's command buffer: the class and command at 0, the
/// command's data from [`CTRL_DATA`], the device's acknowledgement in the last byte.
const CTRL_BUF: usize = 4096;
const CTRL_DATA: usize = 64;
const CTRL_ACK: usize = CTRL_BUF - 1;
/// The acknowledgement of a command the device carried out.
const CTRL_OK: u8 = 0;

/// The control queue (`VIRTIO_NET_F_CTRL_VQ`): one command at a time, sent from the
/// control thread (start, an RSS change) and waited for. A device that does not
/// answer within a second makes the queue unusable (the command's descriptors stay
/// posted): later commands are refused rather than racing the late answer.
pub struct Ctrl {
    r: Ring,
    buf: DmaMem,
    dead: bool,
}

impl Ctrl {
    /// Set up the control queue, virtqueue `q` (after the queue pairs).
    pub fn new(t: &Transport, f: &Arc<Function>, q: u16) -> Result<Ctrl, PmdError> {
        let r = Ring::new(t, f, q, 8)?;
        if r.n < 4 {
            return Err(PmdError::new(errno::EINVAL, format!("virtio control queue {q}: {} entries, 3 needed", r.n)));
        }
        let buf = DmaMem::new(f, CTRL_BUF, "virtio control queue")?;
        Ok(Ctrl { r, buf, dead: false })
    }

    /// Send command `cmd` of class `class` with `data` and wait for the device's
    /// answer: an error names the command when the device refuses it or does not
    /// answer, or when its answer names a chain we did not post.
    pub fn command(&mut self, class: u8, cmd: u8, data: &[u8], what: &str) -> Result<(), PmdError> {
        if self.dead {
            return Err(PmdError::new(errno::EIO, format!("{what}: the device's control queue stopped answering")));
        }
        if data.is_empty() || data.len() > CTRL_ACK - CTRL_DATA {
            return Err(PmdError::invalid(format!("{what}: {} bytes of command data", data.len())));
        }
        let (p, a) = (self.buf.ptr(), self.buf.iova());
        // SAFETY: every write inside the command buffer (`CTRL_BUF` bytes, checked
        // above for the data), which the device reads only once the chain is posted.
        unsafe {
            std::ptr::write_volatile(p, class);
            std::ptr::write_volatile(p.add(1), cmd);
            for (i, &b) in data.iter().enumerate() {
                std::ptr::write_volatile(p.add(CTRL_DATA + i), b);
            }
            std::ptr::write_volatile(p.add(CTRL_ACK), 0xff);
        }
        self.r.set_desc(0, a, 2, NEXT, 1);
        self.r.set_desc(1, a + CTRL_DATA as u64, data.len() as u32, NEXT, 2);
        self.r.set_desc(2, a + CTRL_ACK as u64, 1, WRITE, 0);
        self.r.push(0);
        self.r.publish();
        let t = std::time::Instant::now();
        while self.r.used_count() == 0 {
            if t.elapsed() > std::time::Duration::from_secs(1) {
                self.dead = true;
                return Err(PmdError::new(errno::EIO, format!("{what}: the device did not answer in 1 s")));
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        let (id, _) = self.r.used_at(0);
        let more = self.r.used_count();
        self.r.last_used = self.r.last_used.wrapping_add(more);
        if id != 0 || more != 1 {
            // The chain may still be the device's: no further command reuses it.
            self.dead = true;
            return Err(PmdError::new(
                errno::EIO,
                format!(
                    "{what}: the device answered {more} time(s), for chain {id}: its control queue is not used again"
                ),
            ));
        }
        // SAFETY: the acknowledgement byte inside the command buffer.
        let ack = unsafe { std::ptr::read_volatile(p.add(CTRL_ACK)) };
        if ack != CTRL_OK {
            return Err(PmdError::new(errno::EIO, format!("{what}: the device refused it (status {ack})")));
        }
        Ok(())
    }
}

/// The segments of packet `p`, as mbufs.
fn segments(p: &Packet) -> impl Iterator<Item = *mut Mbuf> + '_ {
    let mut s = p.as_ptr();
    std::iter::from_fn(move || {
        if s.is_null() {
            return None;
        }
        let c = s;
        // SAFETY: a segment of a live packet; `next` is NULL or the next one.
        s = unsafe { (*s).next };
        Some(c)
    })
}

/// The IOVA of byte `off` of mbuf `m`'s buffer (its pool mapped at IOVA = VA).
fn iova(m: &Mbuf, off: u16) -> u64 {
    m.buf_iova + u64::from(off)
}

/// An RX queue: every descriptor holds one mbuf, posted whole (header in its
/// headroom, then a frame of up to its data room).
pub struct RxRing {
    r: Ring,
    slots: Vec<*mut Mbuf>,
    pool: Pool,
    headroom: u16,
    room: u32,
    pub faults: Arc<Faults>,
    fresh: Vec<*mut Mbuf>,
}

// SAFETY: the posted mbufs are the queue's own until received.
unsafe impl Send for RxRing {}

impl RxRing {
    /// Set up queue `q` and post a mbuf in every descriptor.
    pub fn new(t: &Transport, f: &Arc<Function>, q: u16, want: u16, pool: Pool) -> Result<RxRing, PmdError> {
        // SAFETY: a live host pool (the queue's).
        unsafe { f.map_pool(pool.as_raw(), false)? };
        let headroom = pool.headroom();
        if usize::from(headroom) < HDR {
            return Err(PmdError::invalid("the pool's headroom is smaller than the virtio-net header"));
        }
        let mut r = Ring::new(t, f, q, want)?;
        let n = usize::from(r.n);
        let mut slots = vec![std::ptr::null_mut(); n];
        if !pool.alloc_bulk(&mut slots) {
            return Err(PmdError::new(errno::ENOMEM, format!("RX queue {q}: no {n} mbufs in the pool")));
        }
        let room = u32::from(pool.buf_len() - headroom) + HDR as u32;
        for (i, &m) in slots.iter().enumerate() {
            // SAFETY: a fresh mbuf of the pool, ours.
            let a = iova(unsafe { &*m }, headroom - HDR as u16);
            r.set_desc(i as u16, a, room, WRITE, 0);
            r.push(i as u16);
        }
        r.publish();
        Ok(RxRing { r, slots, pool, headroom, room, faults: Arc::default(), fresh: Vec::with_capacity(64) })
    }

    /// Where the device is told of new buffers, and the queue's index (the port
    /// notifies once the device runs: buffers posted before then went unannounced).
    pub fn notifier(&self) -> (usize, u16) {
        (self.r.notify as usize, self.r.q)
    }

    /// Receive what the device wrote: (packets, bytes, lost for lack of mbufs).
    pub fn rx(&mut self, burst: &mut RxBurst<'_>) -> (u64, u64, u64) {
        let k = usize::from(self.r.used_count()).min(burst.room());
        if k == 0 {
            return (0, 0, 0);
        }
        // The replacements first: a packet is received only when its slot is refilled.
        self.fresh.resize(k, std::ptr::null_mut());
        if !self.pool.alloc_bulk(&mut self.fresh[..k]) {
            return (0, 0, k as u64);
        }
        let (mut pkts, mut bytes) = (0, 0);
        let port = burst.port_id();
        // SAFETY: the burst's free slots; each filled one is a received packet.
        let out = unsafe { burst.raw_rest() };
        let mut got = 0;
        for j in 0..k {
            let (id, len) = self.r.used_at(j as u16);
            let fresh = self.fresh[j];
            let Some(&m) = self.slots.get(id as usize) else {
                self.faults.bad_used.add(1);
                // SAFETY: our fresh mbuf, unused: back to its pool.
                unsafe { ironpath_pmd_sdk::free_bulk(&[fresh]) };
                continue;
            };
            self.slots[id as usize] = fresh;
            // SAFETY: a fresh mbuf of the pool, ours.
            let a = iova(unsafe { &*fresh }, self.headroom - HDR as u16);
            self.r.set_desc(id as u16, a, self.room, WRITE, 0);
            self.r.push(id as u16);
            if len < HDR as u32 + 14 || len > self.room {
                self.faults.bad_used.add(1);
                // SAFETY: the mbuf the device gave back, ours again.
                unsafe { ironpath_pmd_sdk::free_bulk(&[m]) };
                continue;
            }
            let flen = (len - HDR as u32) as u16;
            // SAFETY: the mbuf the device gave back, ours; its header sits in the
            // headroom just before the data.
            unsafe {
                let mb = &mut *m;
                mb.data_off = self.headroom;
                mb.data_len = flen;
                mb.pkt_len = u32::from(flen);
                mb.nb_segs = 1;
                mb.next = std::ptr::null_mut();
                mb.port = port;
                let h = std::slice::from_raw_parts(mb.buf_addr.add(usize::from(self.headroom) - HDR), 10);
                if let Some(vh) = VnetHdr::parse(h) {
                    if vh != VnetHdr::default() {
                        vh.to_mbuf(mb);
                    }
                }
            }
            out[got] = m;
            got += 1;
            pkts += 1;
            bytes += u64::from(flen);
        }
        self.r.last_used = self.r.last_used.wrapping_add(k as u16);
        // SAFETY: `got` packets written above.
        unsafe { burst.set_filled(got) };
        self.r.publish();
        (pkts, bytes, 0)
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: the posted mbufs are ours (the device is reset before queues go).
        unsafe { ironpath_pmd_sdk::free_bulk(&self.slots) };
    }
}

/// A TX queue: a packet is a chain of its header (in a table of ours) and its
/// segments, held until the device returns the chain.
pub struct TxRing {
    r: Ring,
    /// Per head: the packet it carries (NULL: free) and its descriptor count.
    held: Vec<(*mut Mbuf, u16)>,
    /// Free descriptors (a stack).
    free: Vec<u16>,
    /// Our shadow of each descriptor's `next` (never read back from the device).
    next: Vec<u16>,
    /// Headers, one 16-byte slot per descriptor (the head's).
    hdrs: DmaMem,
    f: Arc<Function>,
    last_pool: *const abi::Mempool,
    pub faults: Arc<Faults>,
    inflight: usize,
}

// SAFETY: the held mbufs are the queue's own until completed.
unsafe impl Send for TxRing {}

impl TxRing {
    /// Set up queue `q`.
    pub fn new(t: &Transport, f: &Arc<Function>, q: u16, want: u16) -> Result<TxRing, PmdError> {
        let r = Ring::new(t, f, q, want)?;
        let n = usize::from(r.n);
        let hdrs = DmaMem::new(f, 16 * n, "virtio-net headers")?;
        Ok(TxRing {
            r,
            held: vec![(std::ptr::null_mut(), 0); n],
            free: (0..n as u16).rev().collect(),
            next: vec![0; n],
            hdrs,
            f: f.clone(),
            last_pool: std::ptr::null(),
            faults: Arc::default(),
            inflight: 0,
        })
    }

    /// Free what the device completed (up to `max`, 0: all); how many packets.
    pub fn reclaim(&mut self, max: usize) -> usize {
        let k = self.r.used_count();
        let mut done = Vec::new();
        let mut freed = 0;
        let mut j = 0;
        while j < k && (max == 0 || freed < max) {
            let (id, _) = self.r.used_at(j);
            j += 1;
            let Some(&(m, cnt)) = self.held.get(id as usize) else {
                self.faults.bad_used.add(1);
                continue;
            };
            if m.is_null() {
                self.faults.bad_used.add(1);
                continue;
            }
            self.held[id as usize] = (std::ptr::null_mut(), 0);
            let mut d = id as u16;
            for _ in 0..cnt {
                self.free.push(d);
                d = self.next[usize::from(d)];
            }
            done.push(m);
            freed += 1;
        }
        self.r.last_used = self.r.last_used.wrapping_add(j);
        self.inflight -= freed;
        // SAFETY: packets the device is done with, ours.
        unsafe { ironpath_pmd_sdk::free_bulk(&done) };
        freed
    }

    /// Post the packets of `burst` the ring has room for; returns (packets, bytes).
    pub fn tx(&mut self, burst: &mut TxBurst<'_>) -> (u64, u64) {
        if self.free.len() < 2 + MAX_TX_SEGS {
            self.reclaim(0);
        }
        let (mut pkts, mut bytes) = (0, 0);
        while let Some(p) = burst.packets().first() {
            let m = p.mbuf();
            let segs = usize::from(m.nb_segs).max(1);
            if segs > MAX_TX_SEGS {
                self.faults.too_many_segs.add(1);
                burst.free(1);
                continue;
            }
            if self.free.len() < segs + 1 {
                self.faults.ring_full.add(1);
                break;
            }
            // The pool of every segment must be mapped (IOVA = VA); the last one is cached.
            let mut ok = true;
            for s in segments(p) {
                // SAFETY: a segment of a packet we were handed.
                let (pool, iova0) = unsafe { ((*s).pool, (*s).buf_iova) };
                if iova0 == 0 {
                    // Host memory with no IO address (an external buffer): never
                    // handed to the device.
                    self.faults.no_iova.add(1);
                    ok = false;
                    break;
                }
                if pool != self.last_pool {
                    // SAFETY: the mbuf's own pool, live while it is.
                    if unsafe { self.f.map_pool(pool, false) }.is_err() {
                        ok = false;
                        break;
                    }
                    self.last_pool = pool;
                }
            }
            if !ok {
                burst.free(1);
                continue;
            }
            let head = self.free.pop().expect("room checked");
            let h = VnetHdr::from_mbuf(m);
            let mut hb = [0u8; HDR];
            hb[..10].copy_from_slice(&h.to_bytes());
            // SAFETY: slot `head` of the header table (16 bytes each).
            unsafe {
                std::ptr::copy_nonoverlapping(hb.as_ptr(), self.hdrs.ptr().add(16 * usize::from(head)), HDR);
            }
            let mut prev = head;
            self.r.set_desc(head, self.hdrs.iova() + 16 * u64::from(head), HDR as u32, NEXT, 0);
            let mut cnt = 1u16;
            let len = p.len();
            let mut segs_iter = segments(p).peekable();
            while let Some(s) = segs_iter.next() {
                let d = self.free.pop().expect("room checked");
                // SAFETY: a segment of the packet, ours until completed.
                let sm = unsafe { &*s };
                let last = segs_iter.peek().is_none();
                self.r.set_desc(d, iova(sm, sm.data_off), u32::from(sm.data_len), if last { 0 } else { NEXT }, 0);
                // Link the previous descriptor to this one.
                self.next[usize::from(prev)] = d;
                self.relink(prev, d);
                prev = d;
                cnt += 1;
            }
            drop(segs_iter);
            bytes += u64::from(len);
            let taken = burst.take().expect("the packet looked at");
            self.held[usize::from(head)] = (taken.into_raw(), cnt);
            self.r.push(head);
            self.inflight += 1;
            pkts += 1;
        }
        if pkts > 0 {
            self.r.publish();
        }
        (pkts, bytes)
    }

    /// Set descriptor `d`'s `next` to `to` (its other fields as written).
    fn relink(&self, d: u16, to: u16) {
        // SAFETY: `d < n`: the `next` field of descriptor `d` in our table.
        unsafe { std::ptr::write_volatile(self.r.desc.add(16 * usize::from(d) + 14).cast::<u16>(), to.to_le()) };
    }

    /// Packets posted and not yet completed.
    pub fn inflight(&self) -> usize {
        self.inflight
    }
}

impl Drop for TxRing {
    fn drop(&mut self) {
        let held: Vec<*mut Mbuf> = self.held.iter().map(|h| h.0).filter(|m| !m.is_null()).collect();
        // SAFETY: packets we hold (the device is reset before queues go).
        unsafe { ironpath_pmd_sdk::free_bulk(&held) };
    }
}
