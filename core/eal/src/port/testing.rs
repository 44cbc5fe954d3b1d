//! In-process receive and transmit queues for tests of nodes and batching: no plugin,
//! no port.
//! Behind the `testing` feature (enable it in `[dev-dependencies]`), never in a
//! production build.

use super::{RxQ, TxQ};
use crate::mbuf::Mbuf;
use ironpath_abi::Mbuf as RawMbuf;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard};

/// A fake device behind a [`TxQ`] from [`sink_txq`]: it takes packets while it has
/// room, logs their bytes, and (with `hold`) keeps them until the test says the
/// device finished sending ([`SinkDevice::finish`]) and the queue reclaims them.
#[derive(Default)]
pub struct SinkDevice {
    inner: Mutex<SinkInner>,
}

#[derive(Default)]
struct SinkInner {
    room: usize,
    hold: bool,
    sending: Vec<Mbuf>,
    finished: Vec<Mbuf>,
    log: Vec<Vec<u8>>,
}

impl SinkDevice {
    fn lock(&self) -> MutexGuard<'_, SinkInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Take the bytes of every packet sent so far (in order).
    pub fn take_log(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.lock().log)
    }

    /// Packets sent so far and not yet taken with [`SinkDevice::take_log`].
    pub fn logged(&self) -> usize {
        self.lock().log.len()
    }

    /// The device finished sending the oldest `n` held packets (they wait for a
    /// reclaim: `TxQ::done_cleanup`).
    pub fn finish(&self, n: usize) {
        let mut g = self.lock();
        let n = n.min(g.sending.len());
        let done: Vec<Mbuf> = g.sending.drain(..n).collect();
        g.finished.extend(done);
    }

    /// Packets the device holds.
    pub fn holding(&self) -> usize {
        let g = self.lock();
        g.sending.len() + g.finished.len()
    }

    /// Change how many packets the device holds at most (a ring size).
    pub fn set_room(&self, room: usize) {
        self.lock().room = room;
    }
}

unsafe extern "C" fn burst(q: *mut c_void, pkts: *mut *mut RawMbuf, n: u16) -> u16 {
    // SAFETY: `q` is the `SinkDevice` kept alive by the TxQ; `pkts` holds n packets
    // the caller hands over.
    let (dev, pkts) = unsafe { (&*q.cast::<SinkDevice>(), std::slice::from_raw_parts(pkts, n as usize)) };
    let mut g = dev.lock();
    let held = g.sending.len() + g.finished.len();
    let take = (n as usize).min(g.room.saturating_sub(held));
    for &p in &pkts[..take] {
        // SAFETY: each packet's reference now belongs to the device.
        let m = unsafe { Mbuf::from_raw(p) };
        g.log.push(m.to_vec());
        if g.hold {
            g.sending.push(m);
        }
    }
    take as u16
}

unsafe extern "C" fn cleanup(q: *mut c_void, max: u32) -> i32 {
    // SAFETY: as in `burst`.
    let dev = unsafe { &*q.cast::<SinkDevice>() };
    let mut g = dev.lock();
    let n = if max == 0 { g.finished.len() } else { g.finished.len().min(max as usize) };
    g.finished.drain(..n);
    n as i32
}

unsafe extern "C" fn inflight(q: *mut c_void) -> i32 {
    // SAFETY: as in `burst`.
    let dev = unsafe { &*q.cast::<SinkDevice>() };
    dev.holding() as i32
}

/// A TX queue on a fresh [`SinkDevice`] with room for `room` packets; with `hold`
/// the device keeps sent packets until [`SinkDevice::finish`], else frees them at once.
pub fn sink_txq(room: usize, hold: bool) -> (TxQ, Arc<SinkDevice>) {
    let dev = Arc::new(SinkDevice::default());
    {
        let mut g = dev.lock();
        g.room = room;
        g.hold = hold;
    }
    // The queue holds the device: `q` points into it as long as the handle lives.
    let q = TxQ::new(Arc::as_ptr(&dev) as *mut c_void, burst, (Some(cleanup), Some(inflight)), (0, 0), dev.clone());
    (q, dev)
}

/// A fake device behind an [`RxQ`] from [`feed_rxq`]: the test queues packets, the
/// queue's receive burst hands them out in order.
#[derive(Default)]
pub struct FeedDevice {
    queued: Mutex<std::collections::VecDeque<Mbuf>>,
}

impl FeedDevice {
    /// Queue `m` for a later receive.
    pub fn push(&self, m: Mbuf) {
        self.queued.lock().unwrap_or_else(|e| e.into_inner()).push_back(m);
    }

    /// Packets queued and not yet received.
    pub fn queued(&self) -> usize {
        self.queued.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

unsafe extern "C" fn rx_burst(q: *mut c_void, pkts: *mut *mut RawMbuf, n: u16) -> u16 {
    // SAFETY: `q` is the `FeedDevice` kept alive by the RxQ; `pkts` has room for n
    // pointers.
    let (dev, out) = unsafe { (&*q.cast::<FeedDevice>(), std::slice::from_raw_parts_mut(pkts, n as usize)) };
    let mut g = dev.queued.lock().unwrap_or_else(|e| e.into_inner());
    let mut got = 0;
    while got < out.len() {
        let Some(m) = g.pop_front() else { break };
        out[got] = m.into_raw();
        got += 1;
    }
    got as u16
}

/// An RX queue on a fresh [`FeedDevice`] of port `port`.
pub fn feed_rxq(port: u16) -> (RxQ, Arc<FeedDevice>) {
    let dev = Arc::new(FeedDevice::default());
    // The queue holds the device: `q` points into it as long as the handle lives.
    let q = RxQ::new(Arc::as_ptr(&dev) as *mut c_void, rx_burst, port, 0, dev.clone());
    (q, dev)
}
