//! The fast path: copyable per-queue handles whose bursts are one call through the
//! driver's function pointer (no lock, no check beyond the lease taken at creation).

use super::PortId;
use ironpath_abi as abi;
use ironpath_abi::Mbuf as RawMbuf;
use std::any::Any;
use std::ffi::c_void;
use std::sync::Arc;

/// A driver's TX done-cleanup op (`tx_done_cleanup`).
pub(super) type CleanupFn = unsafe extern "C" fn(*mut c_void, u32) -> i32;
/// A driver's TX in-flight count op (`tx_inflight`).
pub(super) type InflightFn = unsafe extern "C" fn(*mut c_void) -> i32;
/// A driver's RX wake-up source op (`rx_wake_fd`).
pub type WakeFdFn = unsafe extern "C" fn(*mut c_void) -> i32;
/// A driver's RX wake-up arming op (`rx_wake_arm`).
pub type WakeArmFn = unsafe extern "C" fn(*mut c_void, u8) -> i32;

/// A lease on one queue: while a handle holds it, the port refuses to stop,
/// reconfigure or close, so the driver's queue stays valid under the handle.
#[derive(Debug, Default)]
pub(super) struct Lease;

/// Fast-path receive handle: the queue pointer, its burst function and a lease.
/// Only one handle per queue exists at a time (see
/// [`Port::rx_queue`](super::Port::rx_queue)).
pub struct RxQ {
    q: *mut c_void,
    f: abi::RxBurstFn,
    /// The driver's wake-up ops (ABI 1.7), when it has both.
    wake: Option<(WakeFdFn, WakeArmFn)>,
    /// Port of this queue.
    pub port: PortId,
    /// Queue index.
    pub queue: u16,
    /// Keeps the queue valid while the handle lives: the port's [`Lease`] on it, or
    /// whatever else owns the queue (an in-process device in tests).
    _hold: Arc<dyn Any + Send + Sync>,
}

/// Fast-path transmit handle.
pub struct TxQ {
    q: *mut c_void,
    f: abi::TxBurstFn,
    cleanup: Option<CleanupFn>,
    inflight: Option<InflightFn>,
    /// Port of this queue.
    pub port: PortId,
    /// Queue index.
    pub queue: u16,
    /// Keeps the queue valid while the handle lives: the port's [`Lease`] on it, or
    /// whatever else owns the queue (an in-process device in tests).
    _hold: Arc<dyn Any + Send + Sync>,
}

// SAFETY: a handle is the only one for its queue (leases are exclusive), so one thread
// bursts on a queue at a time; the driver's queue state has no thread affinity.
unsafe impl Send for RxQ {}
// SAFETY: as above.
unsafe impl Send for TxQ {}

impl RxQ {
    /// The handle of driver queue `q` of `port`; `hold` keeps the queue valid while
    /// the handle lives (the port's lease on it).
    pub(super) fn new(
        q: *mut c_void,
        f: abi::RxBurstFn,
        port: PortId,
        queue: u16,
        hold: Arc<dyn Any + Send + Sync>,
    ) -> Self {
        Self { q, f, wake: None, port, queue, _hold: hold }
    }

    /// The same handle with the driver's wake-up ops (both, or none is used).
    pub fn with_wake(mut self, fd: Option<WakeFdFn>, arm: Option<WakeArmFn>) -> Self {
        self.wake = fd.zip(arm);
        self
    }

    /// The queue's wake-up source (`rx_wake_fd`): a descriptor that becomes readable
    /// when packets may be waiting once [`RxQ::wake_arm`] armed it; `None` when the
    /// driver has none (the queue must be polled). Ask again after every wake-up.
    pub fn wake_fd(&self) -> Option<std::os::fd::RawFd> {
        let (fd, _) = self.wake?;
        // SAFETY: as for `rx_burst`: the queue is valid while the handle lives, and the
        // op touches only this queue, on our thread.
        let r = unsafe { fd(self.q) };
        (r >= 0).then_some(r)
    }

    /// Arm (`true`, before sleeping) or disarm (`false`, after waking) the queue's
    /// wake-up (`rx_wake_arm`); false when the driver could not.
    pub fn wake_arm(&self, on: bool) -> bool {
        match self.wake {
            // SAFETY: as for `wake_fd`.
            Some((_, arm)) => (unsafe { arm(self.q, u8::from(on)) }) >= 0,
            None => false,
        }
    }

    /// Receive up to `pkts.len()` (at most 65535) packets; returns how many.
    #[inline(always)]
    pub fn rx_burst(&self, pkts: &mut [*mut RawMbuf]) -> usize {
        let n = pkts.len().min(u16::MAX as usize) as u16;
        // SAFETY: the handle was made for a set-up queue of a started port, and its lease
        // keeps the port from stopping or closing; `pkts` has room for n pointers.
        let got = unsafe { (self.f)(self.q, pkts.as_mut_ptr(), n) };
        (got as usize).min(n as usize)
    }
}

impl TxQ {
    /// The handle of driver queue `q` with its burst and optional ops; `hold` keeps
    /// the queue valid while the handle lives (the port's lease on it).
    pub(super) fn new(
        q: *mut c_void,
        f: abi::TxBurstFn,
        ops: (Option<CleanupFn>, Option<InflightFn>),
        (port, queue): (PortId, u16),
        hold: Arc<dyn Any + Send + Sync>,
    ) -> Self {
        Self { q, f, cleanup: ops.0, inflight: ops.1, port, queue, _hold: hold }
    }

    /// Send packets; returns how many the driver took. The rest stay with the caller.
    #[inline(always)]
    pub fn tx_burst(&self, pkts: &mut [*mut RawMbuf]) -> usize {
        let n = pkts.len().min(u16::MAX as usize) as u16;
        // SAFETY: as for `RxQ::rx_burst`; the caller owns the packets it passes.
        let sent = unsafe { (self.f)(self.q, pkts.as_mut_ptr(), n) };
        (sent as usize).min(n as usize)
    }

    /// Ask the driver to free up to `max` (0 = all) sent packets the device is done
    /// with (DPDK's `rte_eth_tx_done_cleanup`); returns how many it freed (0 for a
    /// driver that frees packets as it takes them).
    #[inline]
    pub fn done_cleanup(&self, max: u32) -> usize {
        match self.cleanup {
            // SAFETY: as for `tx_burst`; the op touches only this queue, on our thread.
            Some(f) => unsafe { f(self.q, max) }.max(0) as usize,
            None => 0,
        }
    }

    /// Whether the driver keeps sent packets until the device is done with them (it
    /// implements [`TxQ::done_cleanup`]); otherwise it frees them as it takes them.
    #[inline]
    pub fn holds_packets(&self) -> bool {
        self.cleanup.is_some()
    }

    /// Packets the driver holds that are not completed (or not yet freed).
    #[inline]
    pub fn inflight(&self) -> usize {
        match self.inflight {
            // SAFETY: as for `done_cleanup`.
            Some(f) => unsafe { f(self.q) }.max(0) as usize,
            None => 0,
        }
    }
}
