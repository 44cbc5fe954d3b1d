//! `ironpath-pmd-sdk`: write an ironpath PMD plugin in safe Rust.
//!
//! It owns the glue between the C ABI ([`ironpath_abi`]) and a driver written as a
//! Rust type: implement [`Pmd`] for your device, [`RxQueue`]/[`TxQueue`] for its
//! queues, and export it with [`export_pmd!`]. The SDK then
//! * builds the entry table and the device ops table ([`glue`]),
//! * hands the queues safe bursts ([`packet`]): an [`RxBurst`] to fill with
//!   packets allocated from a [`Pool`] (single buffers or chains) or moved from
//!   elsewhere, a [`TxBurst`] whose packets the driver reads segment by segment and
//!   takes; owned packets ([`Packet`]) return to their pool when dropped, and
//!   [`PacketRing`] moves them between queues;
//! * remembers the port id the host gave the device ([`RxBurst::port_id`]),
//! * parses and whitelists device arguments ([`DevArgs`]), with errors that name the
//!   argument and list the accepted ones,
//! * keeps per-queue counters ([`QueueStats`]) and answers `stats_get`,
//!   `stats_reset` and the per-queue xstats for you,
//! * keeps MAC, MTU, promiscuous and link state in software for devices that have
//!   no hardware for them ([`SoftState`]),
//! * offers the Linux interface calls kernel-backed drivers share ([`linux`]),
//! * wraps every call in `catch_unwind`: a panic becomes `-EFAULT` on the control path
//!   and a counted error on the fast path (RX returns 0 packets and frees what the
//!   burst had received; TX claims the whole burst, leaking rather than risking a
//!   double free); it never unwinds into the host.
//!
//! Drivers that give packets to hardware or to the kernel by address use [`raw`].
//! See `docs/writing-a-pmd.md` for a walk-through.

pub use ironpath_abi as abi;
/// Helpers shared with the host: `Counter`, "did you mean", PCI addresses.
pub use ironpath_util as util;
pub use ironpath_util::Counter;

mod devargs;
mod fence;
pub mod glue;
#[cfg(target_os = "linux")]
pub mod ipc;
#[cfg(target_os = "linux")]
pub mod linux;
pub mod packet;
mod pmd;
mod pool;
pub mod raw;
mod soft;
pub mod testing;
pub mod tpacket;
#[cfg(all(target_os = "linux", feature = "vfio"))]
pub mod vfio;
pub mod vnet;
pub use devargs::DevArgs;
pub use glue::{entry, log};
pub use packet::{Fresh, Packet, PacketRing, RingConsumer, RingProducer, RxBurst, Segments, TxBurst};
pub use pmd::{Pmd, ProbeCtx, RxQueue, TxQueue};
pub use pool::Pool;
pub use raw::{copy_bytes, data, fill_chain, free_bulk, pkt_len, set_data};

/// Hint the CPU to start loading the cache line at `p` (a frame or descriptor a few
/// packets ahead of the one being copied). Never faults, whatever the address; no
/// effect off x86_64.
#[inline(always)]
pub fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and reads nothing the program sees.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Hint the CPU to start loading the cache line at `p` for writing (`prefetchw`:
/// a buffer another core owns, about to be written here, is taken exclusive at once
/// instead of shared and then again exclusive at the store). On an x86_64 CPU
/// without `prefetchw` a read prefetch; never faults; no effect off x86_64.
#[inline(always)]
pub fn prefetch_write(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    if has_prefetchw() {
        // SAFETY: the CPU has the instruction (CPUID); a prefetch never faults and
        // reads nothing the program sees. (`_mm_prefetch` with `_MM_HINT_ET0`
        // compiles to a read prefetch unless the whole build targets `prfchw`.)
        unsafe {
            std::arch::asm!("prefetchw [{}]", in(reg) p, options(nostack, preserves_flags, readonly));
        }
    } else {
        prefetch(p);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Whether this CPU has `prefetchw` (CPUID leaf 8000_0001h, ECX bit 8), asked once.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn has_prefetchw() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    /// 0: not asked yet; 1: no; 2: yes.
    static HAS: AtomicU8 = AtomicU8::new(0);
    #[cold]
    fn ask() -> bool {
        let yes = cpuid_prefetchw();
        HAS.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
        yes
    }
    match HAS.load(Ordering::Relaxed) {
        2 => true,
        1 => false,
        _ => ask(),
    }
}

/// CPUID's answer: the highest extended leaf, then leaf 8000_0001h's ECX bit 8.
#[cfg(target_arch = "x86_64")]
fn cpuid_prefetchw() -> bool {
    use std::arch::x86_64::__cpuid;
    // SAFETY: every x86_64 CPU has CPUID (the intrinsic is safe on newer Rust, hence
    // the allowance; `rust-version` still needs the block).
    #[allow(unused_unsafe)]
    unsafe {
        __cpuid(0x8000_0000).eax >= 0x8000_0001 && __cpuid(0x8000_0001).ecx & (1 << 8) != 0
    }
}

pub use soft::{KernelFlowHash, SoftState};

/// An error from a driver: an errno and a message for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PmdError {
    /// Positive errno value (`abi::errno::EINVAL`, ...).
    pub errno: i32,
    /// What went wrong; for device arguments, name the argument and what is accepted.
    pub msg: String,
}

impl PmdError {
    /// An `EINVAL` error with a message.
    pub fn invalid(msg: impl Into<String>) -> Self {
        Self { errno: abi::errno::EINVAL, msg: msg.into() }
    }

    /// An error with an errno and a message.
    pub fn new(errno: i32, msg: impl Into<String>) -> Self {
        Self { errno, msg: msg.into() }
    }

    /// "not supported".
    pub fn not_supported(what: &str) -> Self {
        Self { errno: abi::errno::ENOTSUP, msg: format!("{what} is not supported") }
    }
}

impl std::fmt::Display for PmdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for PmdError {}

/// Counters of one queue, written by the queue, read by the control path.
#[derive(Debug, Default)]
pub struct QueueStats {
    /// Packets received or sent.
    pub packets: Counter,
    /// Bytes received or sent.
    pub bytes: Counter,
    /// Errors (malformed input, failed sends, caught panics).
    pub errors: Counter,
    /// RX: packets not received for lack of mbufs.
    pub nombuf: Counter,
    /// RX: packets the device dropped (ring full).
    pub missed: Counter,
    /// Panics of the driver's burst functions on this queue (the first fences it off).
    pub driver_panics: Counter,
    /// Bursts skipped because the queue is fenced off.
    pub fenced_bursts: Counter,
}

impl QueueStats {
    fn snapshot(&self) -> [u64; 5] {
        [self.packets.get(), self.bytes.get(), self.errors.get(), self.nombuf.get(), self.missed.get()]
    }
}

#[cfg(test)]
mod prefetch_tests {
    #[test]
    fn prefetches_never_fault_whatever_the_address() {
        for p in [std::ptr::null(), usize::MAX as *const u8, 0x1000 as *const u8, &0u8 as *const u8] {
            super::prefetch(p);
            super::prefetch_write(p);
        }
    }

    /// The answer is CPUID's, on the first call (which asks) and on the next (which
    /// reads the answer kept).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn prefetchw_is_asked_of_cpuid_once() {
        let cpu = super::cpuid_prefetchw();
        assert_eq!(super::has_prefetchw(), cpu);
        assert_eq!(super::has_prefetchw(), cpu);
    }
}
