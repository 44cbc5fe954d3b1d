//! `ironpath-pmd-sdk`: write an ironpath PMD plugin in safe Rust.
//!
//! It owns the glue between the C ABI ([`ironpath_abi`]) and a driver written as a
//! Rust type: implement [`Pmd`] for your device, [`RxQueue`]/[`TxQueue`] for its
//! queues, and export it with [`export_pmd!`]. The SDK then
//! * builds the entry table and the device ops table,
//! * parses and whitelists device arguments ([`DevArgs`]), with errors that name the
//!   argument and list the accepted ones,
//! * keeps per-queue counters ([`QueueStats`]) and answers `stats_get`,
//!   `stats_reset` and the per-queue xstats for you,
//! * wraps every call in `catch_unwind`: a panic becomes `-EFAULT` on the control path
//!   and a counted error on the fast path (RX returns 0 packets; TX claims the whole
//!   burst, leaking rather than risking a double free); it never unwinds into the host.
//!
//! See `docs/writing-a-pmd.md` for a walk-through.

pub use ironpath_abi as abi;
use ironpath_abi::Mbuf;
use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;

mod devargs;
pub mod tpacket;
pub mod vnet;
pub use devargs::DevArgs;

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

/// A counter with one writer (the queue's lcore) and any number of readers.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Add `n` (single writer: a load and a store, no locked instruction).
    #[inline(always)]
    pub fn add(&self, n: u64) {
        self.0.store(self.0.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    /// Current value.
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

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
}

impl QueueStats {
    fn snapshot(&self) -> [u64; 5] {
        [self.packets.get(), self.bytes.get(), self.errors.get(), self.nombuf.get(), self.missed.get()]
    }
}

/// A host mempool as seen by a driver: allocate packets for RX.
#[derive(Clone, Copy, Debug)]
pub struct Pool {
    raw: *const abi::Mempool,
    alloc: abi::AllocBulkFn,
}

// SAFETY: a host pool is thread-safe (its ops may be called from any thread).
unsafe impl Send for Pool {}
// SAFETY: as above.
unsafe impl Sync for Pool {}

impl Pool {
    /// Allocate `out.len()` reset packets, all or nothing. `false` when the pool is
    /// empty (count it as `nombuf`).
    #[inline(always)]
    pub fn alloc_bulk(&self, out: &mut [*mut Mbuf]) -> bool {
        // SAFETY: `raw` is a live host pool (the host keeps it alive while the queue
        // exists) and `out` has room for `out.len()` pointers.
        unsafe { (self.alloc)(self.raw, out.as_mut_ptr(), out.len() as u32) == 0 }
    }

    /// Buffer length of each mbuf (headroom included).
    pub fn buf_len(&self) -> u16 {
        // SAFETY: live host pool.
        unsafe { (*self.raw).buf_len }
    }

    /// Headroom of each mbuf.
    pub fn headroom(&self) -> u16 {
        // SAFETY: live host pool.
        unsafe { (*self.raw).headroom }
    }

    /// The raw ABI pointer (for DMA mapping: region address, IOVA and length).
    pub fn as_raw(&self) -> *const abi::Mempool {
        self.raw
    }
}

/// Release packets the driver owns (after transmission, or on drop), to whatever
/// pool each belongs.
///
/// # Safety
/// Each pointer is a packet from a host pool that the caller owns a reference to.
#[inline(always)]
pub unsafe fn free_bulk(pkts: &[*mut Mbuf]) {
    let Some(&first) = pkts.first() else { return };
    // SAFETY: a host mbuf's `pool` points at a live host pool whose ops table is valid.
    unsafe {
        if let Some(f) = (*(*(*first).pool).ops).free_bulk {
            f(pkts.as_ptr(), pkts.len() as u32);
        }
    }
}

/// Total length of a packet.
///
/// # Safety
/// `m` is a valid packet.
#[inline(always)]
pub unsafe fn pkt_len(m: *const Mbuf) -> u32 {
    // SAFETY: caller's contract.
    unsafe { (*m).pkt_len }
}

/// Write `data` as the whole content of a fresh one-segment packet (truncated to the
/// buffer); returns the length written.
///
/// # Safety
/// `m` is a valid, freshly allocated packet owned by the caller.
#[inline(always)]
pub unsafe fn set_data(m: *mut Mbuf, data: &[u8]) -> usize {
    // SAFETY: caller's contract; we write inside the buffer after the headroom.
    unsafe {
        let r = &mut *m;
        let room = (r.buf_len - r.data_off) as usize;
        let n = data.len().min(room);
        std::ptr::copy_nonoverlapping(data.as_ptr(), r.buf_addr.add(r.data_off as usize), n);
        r.data_len = n as u16;
        r.pkt_len = n as u32;
        n
    }
}

/// Write the concatenation of `parts` into `segs` (fresh one-segment packets from one
/// pool, each filled to its data room in turn) and link them into one packet, the
/// first segment its head. Returns the packet's length, or `None` (nothing linked)
/// when the bytes do not fit the segments.
///
/// # Safety
/// Every pointer of `segs` is a valid, freshly allocated packet owned by the caller.
pub unsafe fn fill_chain(segs: &[*mut Mbuf], parts: &[&[u8]]) -> Option<usize> {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    // SAFETY: caller's contract: valid fresh packets.
    let room: usize = segs.iter().map(|&m| unsafe { usize::from((*m).buf_len - (*m).data_off) }).sum();
    if segs.is_empty() || total > room {
        return None;
    }
    let (mut i, mut at) = (0, 0usize);
    for part in parts {
        let mut rest = *part;
        while !rest.is_empty() {
            // SAFETY: `i` < segs.len() (the bytes fit, checked above); we write inside
            // the segment's buffer after its data, within its room.
            unsafe {
                let r = &mut *segs[i];
                let cap = usize::from(r.buf_len - r.data_off);
                if at == cap {
                    i += 1;
                    at = 0;
                    continue;
                }
                let n = rest.len().min(cap - at);
                std::ptr::copy_nonoverlapping(rest.as_ptr(), r.buf_addr.add(usize::from(r.data_off) + at), n);
                at += n;
                r.data_len = at as u16;
                rest = &rest[n..];
            }
        }
    }
    // SAFETY: as above; segments after the `i + 1` used (none when sized right) stay
    // empty and unlinked, for the caller to free.
    unsafe {
        for k in 0..i {
            (*segs[k]).next = segs[k + 1];
        }
        let h = &mut *segs[0];
        h.pkt_len = total as u32;
        h.nb_segs = (i + 1) as u16;
    }
    Some(total)
}

/// The first segment's data of a packet.
///
/// # Safety
/// `m` is a valid packet and the returned slice is not used after it is freed.
#[inline(always)]
pub unsafe fn data<'a>(m: *const Mbuf) -> &'a [u8] {
    // SAFETY: caller's contract; data lies inside the buffer.
    unsafe {
        let r = &*m;
        std::slice::from_raw_parts(r.buf_addr.add(r.data_off as usize), r.data_len as usize)
    }
}

/// MAC address, MTU and promiscuous flag kept in software, for devices with no
/// hardware to ask (null, ring, pcap ...). A driver returns it from [`Pmd::soft`] /
/// [`Pmd::soft_mut`] and gets the MAC, MTU and promiscuous operations for free.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SoftState {
    /// MAC address.
    pub mac: [u8; 6],
    /// Current MTU.
    pub mtu: u16,
    /// Smallest MTU accepted.
    pub min_mtu: u16,
    /// Largest MTU accepted.
    pub max_mtu: u16,
    /// Promiscuous mode.
    pub promisc: bool,
    /// All-multicast mode.
    pub allmulti: bool,
    /// Further unicast addresses (`mac_addr add`), at most [`SoftState::MAX_MACS`] - 1.
    pub macs: Vec<[u8; 6]>,
    /// Link brought down administratively (`set link-down`).
    pub link_down: bool,
}

impl SoftState {
    /// MTU 1500 (68..=`max_mtu`), promiscuous, with `mac`.
    pub fn new(mac: [u8; 6], max_mtu: u16) -> Self {
        Self { mac, mtu: 1500, min_mtu: 68, max_mtu, promisc: true, allmulti: true, macs: Vec::new(), link_down: false }
    }

    /// Addresses a port answers to, the primary one included (as a NIC's 16
    /// receive-address registers).
    pub const MAX_MACS: usize = 16;

    /// A locally administered MAC `02:<tag>:<4 bytes of a hash of the instance name>`,
    /// stable across runs, different per instance.
    pub fn mac_from_name(tag: u8, name: &str) -> [u8; 6] {
        let h = name.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
        [0x02, tag, (h >> 24) as u8, (h >> 16) as u8, (h >> 8) as u8, h as u8]
    }
}

/// RSS of a device whose queues the Linux kernel fills (af_packet fanout, a
/// multi-queue TAP): flows are spread by the kernel's flow hash, IPv4/IPv6
/// addresses with TCP/UDP ports together; it cannot hash on a part or be turned off.
pub struct KernelFlowHash;

impl KernelFlowHash {
    /// (functions the device can use, functions in use) with `queues` RX queues.
    pub fn rss_hash(queues: u16) -> (u64, u64) {
        let all = abi::RSS_NAMES.iter().fold(0, |a, (f, _)| a | f);
        if queues > 1 {
            (all, all)
        } else {
            (0, 0)
        }
    }

    /// Accepts only what is in use already; says why for anything else.
    pub fn set_rss_hash(queues: u16, rss_hf: u64) -> Result<(), PmdError> {
        let (capa, cur) = Self::rss_hash(queues);
        if rss_hf == cur {
            return Ok(());
        }
        Err(if capa == 0 {
            PmdError::not_supported("RSS with one queue")
        } else {
            PmdError::new(
                abi::errno::ENOTSUP,
                format!(
                    "rss_hf {rss_hf:#x}: the kernel's flow hash covers addresses and TCP/UDP ports together \
                     ({capa:#x}); it cannot hash on a part or be turned off"
                ),
            )
        })
    }
}

/// A receive queue.
pub trait RxQueue: Send + 'static {
    /// Receive up to `pkts.len()` packets into `pkts`; return how many. Count them in
    /// the queue's [`QueueStats`].
    fn rx_burst(&mut self, pkts: &mut [*mut Mbuf]) -> usize;
}

/// A transmit queue.
pub trait TxQueue: Send + 'static {
    /// Whether the queue keeps sent packets until the device is done with them (then
    /// implement `tx_done_cleanup` and `tx_inflight`). `false` (the default) leaves the
    /// ops NULL, so the host never calls them.
    const HOLDS_PACKETS: bool = false;

    /// Take packets from the front of `pkts`; return how many were taken (now owned by
    /// the driver, which frees them with [`free_bulk`] when done).
    fn tx_burst(&mut self, pkts: &mut [*mut Mbuf]) -> usize;

    /// Free up to `max` (0 = all) sent packets the device is done with, whatever the
    /// queue's own `tx_free_thresh`; return how many were freed. A driver that frees
    /// packets inside `tx_burst` (a copy or a synchronous write) keeps the default.
    fn tx_done_cleanup(&mut self, _max: usize) -> usize {
        0
    }

    /// How many taken packets the queue still holds (not yet completed, or completed
    /// and not yet freed). The default, 0, suits drivers that free in `tx_burst`.
    fn tx_inflight(&self) -> usize {
        0
    }
}

/// What `probe` receives besides the arguments.
pub struct ProbeCtx<'a> {
    /// Instance name (`net_null0`).
    pub name: &'a str,
    /// Raw argument string after the first comma.
    pub args: &'a str,
}

/// A device of your driver.
pub trait Pmd: Sized + Send + 'static {
    /// Driver name (`net_null`); instance names start with it.
    const NAME: &'static CStr;
    /// Accepted device arguments, one line (`size=<bytes>,copy=0|1`).
    const DEVARGS_HELP: &'static CStr;
    /// PCI functions this driver drives (vendor, device). The host gives `-a
    /// DDDD:BB:DD.F` to the driver that lists the function's ids, probing it with
    /// `pci=DDDD:BB:DD.F` first in its arguments. Empty (the default) for drivers of
    /// virtual devices.
    const PCI_IDS: &'static [abi::PciId] = &[];
    /// RX queue type.
    type Rx: RxQueue;
    /// TX queue type.
    type Tx: TxQueue;

    /// Create a device. Reject bad arguments with a message that names them.
    fn probe(ctx: &ProbeCtx<'_>) -> Result<Self, PmdError>;
    /// Whether [`Pmd::check_args`] checks anything (exported as
    /// `PmdEntry::check_args` only then).
    const CHECKS_ARGS: bool = false;
    /// Check the device arguments as `probe` would, without creating anything
    /// (no socket, file, interface or register access): `ironpath check` asks this.
    fn check_args(_ctx: &ProbeCtx<'_>) -> Result<(), PmdError> {
        Ok(())
    }
    /// Capabilities.
    fn info(&self) -> abi::DevInfo;
    /// Apply a configuration (queue counts are checked against `info` by the host).
    fn configure(&mut self, _conf: &abi::DevConf) -> Result<(), PmdError> {
        Ok(())
    }
    /// Create RX queue `qid`.
    fn rx_queue_setup(
        &mut self,
        qid: u16,
        nb_desc: u16,
        pool: Pool,
        stats: Arc<QueueStats>,
    ) -> Result<Self::Rx, PmdError>;
    /// Create TX queue `qid`.
    fn tx_queue_setup(&mut self, qid: u16, nb_desc: u16, stats: Arc<QueueStats>) -> Result<Self::Tx, PmdError>;
    /// Start the device.
    fn start(&mut self) -> Result<(), PmdError> {
        Ok(())
    }
    /// Stop the device.
    fn stop(&mut self) -> Result<(), PmdError> {
        Ok(())
    }
    /// Link state.
    fn link(&self) -> abi::Link {
        abi::Link { speed_mbps: 0, up: 1, full_duplex: 1, autoneg: 0, reserved: 0 }
    }
    /// Add device-level counters (e.g. kernel drops to `imissed`) to `s`.
    fn extra_stats(&self, _s: &mut abi::Stats) {}
    /// Driver-specific xstats, appended after the per-queue ones.
    fn xstats(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
    /// Software-kept MAC/MTU/promiscuous state, if the device has no hardware for them.
    fn soft(&self) -> Option<&SoftState> {
        None
    }
    /// Mutable access to the same.
    fn soft_mut(&mut self) -> Option<&mut SoftState> {
        None
    }
    /// MAC address (default: from [`Pmd::soft`]).
    fn mac(&self) -> Result<[u8; 6], PmdError> {
        self.soft().map(|s| s.mac).ok_or_else(|| PmdError::not_supported("reading the MAC address"))
    }
    /// Set the MAC address (default: in [`Pmd::soft_mut`]).
    fn set_mac(&mut self, mac: [u8; 6]) -> Result<(), PmdError> {
        let s = self.soft_mut().ok_or_else(|| PmdError::not_supported("setting the MAC address"))?;
        s.mac = mac;
        Ok(())
    }
    /// Set the MTU (default: checked against and kept in [`Pmd::soft_mut`]).
    fn set_mtu(&mut self, mtu: u16) -> Result<(), PmdError> {
        let s = self.soft_mut().ok_or_else(|| PmdError::not_supported("setting the MTU"))?;
        if !(s.min_mtu..=s.max_mtu).contains(&mtu) {
            return Err(PmdError::invalid(format!("MTU {mtu} is out of range {}..={}", s.min_mtu, s.max_mtu)));
        }
        s.mtu = mtu;
        Ok(())
    }
    /// Promiscuous mode on/off (default: kept in [`Pmd::soft_mut`]).
    fn set_promiscuous(&mut self, on: bool) -> Result<(), PmdError> {
        let s = self.soft_mut().ok_or_else(|| PmdError::not_supported("promiscuous mode"))?;
        s.promisc = on;
        Ok(())
    }
    /// Promiscuous mode (default: from [`Pmd::soft`]).
    fn promiscuous(&self) -> Result<bool, PmdError> {
        self.soft().map(|s| s.promisc).ok_or_else(|| PmdError::not_supported("promiscuous mode"))
    }
    /// All-multicast mode on/off (default: kept in [`Pmd::soft_mut`]).
    fn set_allmulticast(&mut self, on: bool) -> Result<(), PmdError> {
        let s = self.soft_mut().ok_or_else(|| PmdError::not_supported("all-multicast mode"))?;
        s.allmulti = on;
        Ok(())
    }
    /// All-multicast mode (default: from [`Pmd::soft`]).
    fn allmulticast(&self) -> Result<bool, PmdError> {
        self.soft().map(|s| s.allmulti).ok_or_else(|| PmdError::not_supported("all-multicast mode"))
    }
    /// Also receive for unicast `mac` (default: listed in [`Pmd::soft_mut`]).
    fn add_mac(&mut self, mac: [u8; 6]) -> Result<(), PmdError> {
        let s = self.soft_mut().ok_or_else(|| PmdError::not_supported("adding a MAC address"))?;
        if mac[0] & 1 != 0 || mac == [0; 6] {
            return Err(PmdError::invalid("an added MAC address must be unicast and not zero"));
        }
        if mac == s.mac || s.macs.contains(&mac) {
            return Ok(());
        }
        if s.macs.len() + 1 >= SoftState::MAX_MACS {
            return Err(PmdError::new(
                abi::errno::ENOSPC,
                format!("the port answers to {} addresses already", SoftState::MAX_MACS),
            ));
        }
        s.macs.push(mac);
        Ok(())
    }
    /// Stop receiving for an added `mac` (default: in [`Pmd::soft_mut`]).
    fn remove_mac(&mut self, mac: [u8; 6]) -> Result<(), PmdError> {
        let s = self.soft_mut().ok_or_else(|| PmdError::not_supported("removing a MAC address"))?;
        if mac == s.mac {
            return Err(PmdError::invalid("the port's own address cannot be removed (mac_addr set replaces it)"));
        }
        s.macs.retain(|m| *m != mac);
        Ok(())
    }
    /// RSS hash functions: (those the device can use, those in use), as
    /// `abi::RSS_*` flags (default: none).
    fn rss_hash(&self) -> Result<(u64, u64), PmdError> {
        Ok((0, 0))
    }
    /// Use RSS hash functions `rss_hf` (default: only 0, no RSS, is accepted).
    fn set_rss_hash(&mut self, rss_hf: u64) -> Result<(), PmdError> {
        if rss_hf == 0 {
            Ok(())
        } else {
            Err(PmdError::not_supported("RSS (the device has no hash to spread flows over queues)"))
        }
    }
    /// Bring the link up or down administratively (default: in [`Pmd::soft_mut`];
    /// the link then reads down).
    fn set_link(&mut self, up: bool) -> Result<(), PmdError> {
        let s = self.soft_mut().ok_or_else(|| PmdError::not_supported("setting the link up or down"))?;
        s.link_down = !up;
        Ok(())
    }
}

// ---- glue ----------------------------------------------------------------------

static HOST: AtomicPtr<abi::HostApi> = AtomicPtr::new(std::ptr::null_mut());

/// Log through the host (level 0 = error .. 3 = debug). Silently dropped before the
/// first probe or if the host offers no logger.
pub fn log(level: u32, msg: &str) {
    let h = HOST.load(Ordering::Acquire);
    if h.is_null() {
        return;
    }
    let Ok(c) = std::ffi::CString::new(msg.replace('\0', " ")) else { return };
    // SAFETY: the host API table is static in the host and outlives the plugin.
    unsafe {
        if let Some(f) = (*h).log {
            f(level, c.as_ptr());
        }
    }
}

struct QueueWrap<Q> {
    q: Q,
    stats: Arc<QueueStats>,
}

/// The device object handed to the host.
struct DevWrap<D: Pmd> {
    dev: D,
    rxqs: Vec<*mut QueueWrap<D::Rx>>,
    txqs: Vec<*mut QueueWrap<D::Tx>>,
    rx_stats: Vec<Arc<QueueStats>>,
    tx_stats: Vec<Arc<QueueStats>>,
    /// Counter values at the last reset, per queue (RX then TX).
    rx_base: Vec<[u64; 5]>,
    tx_base: Vec<[u64; 5]>,
}

impl<D: Pmd> DevWrap<D> {
    fn release_rx(&mut self, qid: usize) {
        if let Some(p) = self.rxqs.get_mut(qid) {
            if !p.is_null() {
                // SAFETY: made by Box::into_raw in setup; the host no longer bursts on it.
                drop(unsafe { Box::from_raw(*p) });
                *p = std::ptr::null_mut();
            }
        }
    }
    fn release_tx(&mut self, qid: usize) {
        if let Some(p) = self.txqs.get_mut(qid) {
            if !p.is_null() {
                // SAFETY: as above.
                drop(unsafe { Box::from_raw(*p) });
                *p = std::ptr::null_mut();
            }
        }
    }
    fn stats(&self) -> abi::Stats {
        let mut s = abi::Stats::default();
        for (i, (q, base)) in self.rx_stats.iter().zip(&self.rx_base).enumerate() {
            let v = q.snapshot();
            let d: Vec<u64> = v.iter().zip(base).map(|(a, b)| a.wrapping_sub(*b)).collect();
            s.ipackets += d[0];
            s.ibytes += d[1];
            s.ierrors += d[2];
            s.rx_nombuf += d[3];
            s.imissed += d[4];
            if i < abi::QUEUE_STAT_CNTRS {
                s.q_ipackets[i] = d[0];
                s.q_ibytes[i] = d[1];
                s.q_errors[i] = d[2];
            }
        }
        for (i, (q, base)) in self.tx_stats.iter().zip(&self.tx_base).enumerate() {
            let v = q.snapshot();
            let d: Vec<u64> = v.iter().zip(base).map(|(a, b)| a.wrapping_sub(*b)).collect();
            s.opackets += d[0];
            s.obytes += d[1];
            s.oerrors += d[2];
            if i < abi::QUEUE_STAT_CNTRS {
                s.q_opackets[i] = d[0];
                s.q_obytes[i] = d[1];
            }
        }
        self.dev.extra_stats(&mut s);
        s
    }
    fn xstats(&self) -> Vec<(String, u64)> {
        let s = self.stats();
        let mut v = vec![
            ("rx_good_packets".to_string(), s.ipackets),
            ("tx_good_packets".to_string(), s.opackets),
            ("rx_good_bytes".to_string(), s.ibytes),
            ("tx_good_bytes".to_string(), s.obytes),
            ("rx_missed_errors".to_string(), s.imissed),
            ("rx_errors".to_string(), s.ierrors),
            ("tx_errors".to_string(), s.oerrors),
            ("rx_mbuf_allocation_errors".to_string(), s.rx_nombuf),
        ];
        for (i, (q, base)) in self.rx_stats.iter().zip(&self.rx_base).enumerate() {
            let c = q.snapshot();
            v.push((format!("rx_q{i}_packets"), c[0].wrapping_sub(base[0])));
            v.push((format!("rx_q{i}_bytes"), c[1].wrapping_sub(base[1])));
            v.push((format!("rx_q{i}_errors"), c[2].wrapping_sub(base[2])));
        }
        for (i, (q, base)) in self.tx_stats.iter().zip(&self.tx_base).enumerate() {
            let c = q.snapshot();
            v.push((format!("tx_q{i}_packets"), c[0].wrapping_sub(base[0])));
            v.push((format!("tx_q{i}_bytes"), c[1].wrapping_sub(base[1])));
            v.push((format!("tx_q{i}_errors"), c[2].wrapping_sub(base[2])));
        }
        v.extend(self.dev.xstats());
        v
    }
}

impl<D: Pmd> Drop for DevWrap<D> {
    fn drop(&mut self) {
        for q in 0..self.rxqs.len() {
            self.release_rx(q);
        }
        for q in 0..self.txqs.len() {
            self.release_tx(q);
        }
    }
}

fn write_err(err: *mut abi::ErrMsg, msg: &str) {
    if err.is_null() {
        return;
    }
    let bytes = msg.as_bytes();
    let n = bytes.len().min(abi::ERR_MSG_LEN - 1);
    // SAFETY: `err` is a valid ErrMsg (host contract); we write n + 1 <= its length.
    unsafe {
        let dst = (*err).msg.as_mut_ptr().cast::<u8>();
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, n);
        *dst.add(n) = 0;
    }
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

thread_local! {
    /// Message of the last failed control op on this thread (read by `last_error`).
    static LAST_ERROR: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// Run a control operation, turning errors and panics into a negative errno; the
/// message is kept for the host's `last_error` call.
fn control<R>(f: impl FnOnce() -> Result<R, PmdError>) -> Result<R, i32> {
    let (rc, msg) = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => return Ok(v),
        Ok(Err(e)) => (-e.errno.max(1), e.msg),
        Err(p) => (-abi::errno::EFAULT, format!("driver panicked: {}", panic_text(&p))),
    };
    LAST_ERROR.with(|l| *l.borrow_mut() = msg);
    Err(rc)
}

unsafe extern "C" fn last_error(_dev: *mut c_void, err: *mut abi::ErrMsg) {
    LAST_ERROR.with(|l| write_err(err, &l.borrow()));
}

fn rc(r: Result<(), i32>) -> i32 {
    r.err().unwrap_or(0)
}

/// # Safety
/// `dev` is a `DevWrap<D>` made by `probe::<D>` and not yet closed.
unsafe fn wrap<'a, D: Pmd>(dev: *mut c_void) -> &'a mut DevWrap<D> {
    // SAFETY: caller's contract; the host serialises control calls.
    unsafe { &mut *dev.cast::<DevWrap<D>>() }
}

/// Entry point glue: the probe function. Not for direct use.
///
/// # Safety
/// Called by the host with valid pointers per the ABI.
pub unsafe extern "C" fn probe<D: Pmd>(
    host: *const abi::HostApi,
    name: *const c_char,
    args: *const c_char,
    out: *mut abi::Device,
    err: *mut abi::ErrMsg,
) -> i32 {
    if !host.is_null() {
        HOST.store(host.cast_mut(), Ordering::Release);
    }
    let r = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: NUL-terminated strings from the host (ABI contract).
        let (name, args) = unsafe {
            (CStr::from_ptr(name).to_string_lossy().into_owned(), CStr::from_ptr(args).to_string_lossy().into_owned())
        };
        D::probe(&ProbeCtx { name: &name, args: &args })
    }));
    match r {
        Ok(Ok(dev)) => {
            let w = Box::new(DevWrap::<D> {
                dev,
                rxqs: Vec::new(),
                txqs: Vec::new(),
                rx_stats: Vec::new(),
                tx_stats: Vec::new(),
                rx_base: Vec::new(),
                tx_base: Vec::new(),
            });
            // SAFETY: `out` is a valid out-pointer (ABI contract).
            unsafe {
                (*out).dev = Box::into_raw(w).cast();
                (*out).ops = <D as OpsTable>::OPS_REF;
            }
            0
        }
        Ok(Err(e)) => {
            write_err(err, &e.msg);
            -e.errno.max(1)
        }
        Err(p) => {
            write_err(err, &format!("driver {} panicked in probe: {}", D::NAME.to_string_lossy(), panic_text(&p)));
            -abi::errno::EFAULT
        }
    }
}

unsafe extern "C" fn dev_configure<D: Pmd>(dev: *mut c_void, conf: *const abi::DevConf) -> i32 {
    // SAFETY: host contract: live device, valid config.
    let (w, conf) = unsafe { (wrap::<D>(dev), *conf) };
    rc(control(|| {
        for q in 0..w.rxqs.len() {
            w.release_rx(q);
        }
        for q in 0..w.txqs.len() {
            w.release_tx(q);
        }
        w.dev.configure(&conf)?;
        let (nr, nt) = (conf.nb_rx_queues as usize, conf.nb_tx_queues as usize);
        w.rxqs = vec![std::ptr::null_mut(); nr];
        w.txqs = vec![std::ptr::null_mut(); nt];
        w.rx_stats = (0..nr).map(|_| Arc::new(QueueStats::default())).collect();
        w.tx_stats = (0..nt).map(|_| Arc::new(QueueStats::default())).collect();
        w.rx_base = vec![[0; 5]; nr];
        w.tx_base = vec![[0; 5]; nt];
        Ok(())
    }))
}

unsafe extern "C" fn dev_info<D: Pmd>(dev: *mut c_void, info: *mut abi::DevInfo) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    match control(|| {
        let mut i = w.dev.info();
        i.nb_xstats = w.xstats().len() as u32;
        Ok(i)
    }) {
        Ok(i) => {
            // SAFETY: valid out-pointer.
            unsafe { *info = i };
            0
        }
        Err(e) => e,
    }
}

unsafe extern "C" fn rx_burst<D: Pmd>(q: *mut c_void, pkts: *mut *mut Mbuf, n: u16) -> u16 {
    // SAFETY: `q` is our QueueWrap (set at setup), used by one thread; `pkts` holds n.
    let (qw, pkts) = unsafe { (&mut *q.cast::<QueueWrap<D::Rx>>(), std::slice::from_raw_parts_mut(pkts, n as usize)) };
    match catch_unwind(AssertUnwindSafe(|| qw.q.rx_burst(pkts))) {
        Ok(k) => k.min(n as usize) as u16,
        Err(_) => {
            qw.stats.errors.add(1);
            0
        }
    }
}

unsafe extern "C" fn tx_burst<D: Pmd>(q: *mut c_void, pkts: *mut *mut Mbuf, n: u16) -> u16 {
    // SAFETY: as in `rx_burst`.
    let (qw, pkts) = unsafe { (&mut *q.cast::<QueueWrap<D::Tx>>(), std::slice::from_raw_parts_mut(pkts, n as usize)) };
    match catch_unwind(AssertUnwindSafe(|| qw.q.tx_burst(pkts))) {
        Ok(k) => k.min(n as usize) as u16,
        Err(_) => {
            // The driver may already have queued some of these packets: claim them
            // all (counted as errors). Leaking them is safe; handing them back could
            // free a packet the driver still holds.
            qw.stats.errors.add(u64::from(n));
            n
        }
    }
}

unsafe extern "C" fn tx_done_cleanup<D: Pmd>(q: *mut c_void, free_cnt: u32) -> i32 {
    // SAFETY: as in `rx_burst` (called on the queue's thread).
    let qw = unsafe { &mut *q.cast::<QueueWrap<D::Tx>>() };
    match catch_unwind(AssertUnwindSafe(|| qw.q.tx_done_cleanup(free_cnt as usize))) {
        Ok(k) => k.min(i32::MAX as usize) as i32,
        Err(_) => {
            qw.stats.errors.add(1);
            -abi::errno::EIO
        }
    }
}

unsafe extern "C" fn tx_inflight<D: Pmd>(q: *mut c_void) -> i32 {
    // SAFETY: as in `rx_burst` (called on the queue's thread).
    let qw = unsafe { &*q.cast::<QueueWrap<D::Tx>>() };
    match catch_unwind(AssertUnwindSafe(|| qw.q.tx_inflight())) {
        Ok(k) => k.min(i32::MAX as usize) as i32,
        Err(_) => -abi::errno::EIO,
    }
}

unsafe extern "C" fn rx_queue_setup<D: Pmd>(
    dev: *mut c_void,
    qid: u16,
    nb_desc: u16,
    pool: *const abi::Mempool,
    out: *mut abi::RxQueue,
) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    let r = control(|| {
        let i = qid as usize;
        if i >= w.rxqs.len() {
            return Err(PmdError::invalid(format!("RX queue {qid} is not configured")));
        }
        // SAFETY: the host passes a live pool whose ops table is valid.
        let alloc = unsafe { (*(*pool).ops).alloc_bulk }
            .ok_or_else(|| PmdError::invalid("the mempool has no alloc_bulk operation"))?;
        w.release_rx(i);
        let stats = Arc::new(QueueStats::default());
        let q = w.dev.rx_queue_setup(qid, nb_desc, Pool { raw: pool, alloc }, stats.clone())?;
        w.rx_stats[i] = stats;
        w.rx_base[i] = [0; 5];
        w.rxqs[i] = Box::into_raw(Box::new(QueueWrap { q, stats: w.rx_stats[i].clone() }));
        Ok(w.rxqs[i])
    });
    match r {
        Ok(p) => {
            // SAFETY: valid out-pointer.
            unsafe { *out = abi::RxQueue { queue: p.cast(), rx_burst: Some(rx_burst::<D>) } };
            0
        }
        Err(e) => e,
    }
}

unsafe extern "C" fn tx_queue_setup<D: Pmd>(dev: *mut c_void, qid: u16, nb_desc: u16, out: *mut abi::TxQueue) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    let r = control(|| {
        let i = qid as usize;
        if i >= w.txqs.len() {
            return Err(PmdError::invalid(format!("TX queue {qid} is not configured")));
        }
        w.release_tx(i);
        let stats = Arc::new(QueueStats::default());
        let q = w.dev.tx_queue_setup(qid, nb_desc, stats.clone())?;
        w.tx_stats[i] = stats;
        w.tx_base[i] = [0; 5];
        w.txqs[i] = Box::into_raw(Box::new(QueueWrap { q, stats: w.tx_stats[i].clone() }));
        Ok(w.txqs[i])
    });
    match r {
        Ok(p) => {
            // SAFETY: valid out-pointer.
            unsafe { *out = abi::TxQueue { queue: p.cast(), tx_burst: Some(tx_burst::<D>) } };
            0
        }
        Err(e) => e,
    }
}

unsafe extern "C" fn rx_queue_release<D: Pmd>(dev: *mut c_void, qid: u16) {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    let _ = control(|| {
        w.release_rx(qid as usize);
        Ok(())
    });
}

unsafe extern "C" fn tx_queue_release<D: Pmd>(dev: *mut c_void, qid: u16) {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    let _ = control(|| {
        w.release_tx(qid as usize);
        Ok(())
    });
}

unsafe extern "C" fn dev_start<D: Pmd>(dev: *mut c_void) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    rc(control(|| w.dev.start()))
}

unsafe extern "C" fn dev_stop<D: Pmd>(dev: *mut c_void) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    rc(control(|| w.dev.stop()))
}

unsafe extern "C" fn dev_close<D: Pmd>(dev: *mut c_void) {
    let _ = control(|| {
        // SAFETY: made by Box::into_raw in probe; the host never uses it again.
        drop(unsafe { Box::from_raw(dev.cast::<DevWrap<D>>()) });
        Ok(())
    });
}

unsafe extern "C" fn link_get<D: Pmd>(dev: *mut c_void, link: *mut abi::Link) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    match control(|| Ok(w.dev.link())) {
        Ok(mut l) => {
            if w.dev.soft().is_some_and(|s| s.link_down) {
                l.up = 0;
            }
            // SAFETY: valid out-pointer.
            unsafe { *link = l };
            0
        }
        Err(e) => e,
    }
}

unsafe extern "C" fn stats_get<D: Pmd>(dev: *mut c_void, stats: *mut abi::Stats) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    match control(|| Ok(w.stats())) {
        Ok(s) => {
            // SAFETY: valid out-pointer.
            unsafe { *stats = s };
            0
        }
        Err(e) => e,
    }
}

unsafe extern "C" fn stats_reset<D: Pmd>(dev: *mut c_void) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    rc(control(|| {
        // Counters have one writer (the queue); resetting records a base instead of
        // writing to them, so no update is lost.
        w.rx_base = w.rx_stats.iter().map(|q| q.snapshot()).collect();
        w.tx_base = w.tx_stats.iter().map(|q| q.snapshot()).collect();
        Ok(())
    }))
}

unsafe extern "C" fn xstats_names<D: Pmd>(dev: *mut c_void, names: *mut abi::XstatName, n: u32) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    match control(|| Ok(w.xstats())) {
        Ok(v) => {
            if !names.is_null() {
                for (i, (name, _)) in v.iter().enumerate().take(n as usize) {
                    let b = name.as_bytes();
                    let k = b.len().min(abi::XSTAT_NAME_LEN - 1);
                    // SAFETY: `names` holds `n` entries; we write entry i < n.
                    unsafe {
                        let dst = (*names.add(i)).name.as_mut_ptr().cast::<u8>();
                        std::ptr::copy_nonoverlapping(b.as_ptr(), dst, k);
                        *dst.add(k) = 0;
                    }
                }
            }
            v.len() as i32
        }
        Err(e) => e,
    }
}

unsafe extern "C" fn xstats_get<D: Pmd>(dev: *mut c_void, values: *mut u64, n: u32) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    match control(|| Ok(w.xstats())) {
        Ok(v) => {
            if !values.is_null() {
                for (i, (_, val)) in v.iter().enumerate().take(n as usize) {
                    // SAFETY: `values` holds `n` entries.
                    unsafe { *values.add(i) = *val };
                }
            }
            v.len() as i32
        }
        Err(e) => e,
    }
}

unsafe extern "C" fn xstats_reset<D: Pmd>(dev: *mut c_void) -> i32 {
    // SAFETY: forwarded with the same contract.
    unsafe { stats_reset::<D>(dev) }
}

unsafe extern "C" fn mac_addr_get<D: Pmd>(dev: *mut c_void, mac: *mut [u8; 6]) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    match control(|| w.dev.mac()) {
        Ok(m) => {
            // SAFETY: valid out-pointer.
            unsafe { *mac = m };
            0
        }
        Err(e) => e,
    }
}

unsafe extern "C" fn mac_addr_set<D: Pmd>(dev: *mut c_void, mac: *const [u8; 6]) -> i32 {
    // SAFETY: host contract.
    let (w, m) = unsafe { (wrap::<D>(dev), *mac) };
    rc(control(|| w.dev.set_mac(m)))
}

unsafe extern "C" fn mtu_set<D: Pmd>(dev: *mut c_void, mtu: u16) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    rc(control(|| w.dev.set_mtu(mtu)))
}

unsafe extern "C" fn promiscuous_set<D: Pmd>(dev: *mut c_void, on: u8) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    rc(control(|| w.dev.set_promiscuous(on != 0)))
}

unsafe extern "C" fn allmulticast_set<D: Pmd>(dev: *mut c_void, on: u8) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    rc(control(|| w.dev.set_allmulticast(on != 0)))
}

unsafe extern "C" fn allmulticast_get<D: Pmd>(dev: *mut c_void) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    match control(|| w.dev.allmulticast()) {
        Ok(b) => i32::from(b),
        Err(e) => e,
    }
}

unsafe extern "C" fn mac_addr_add<D: Pmd>(dev: *mut c_void, mac: *const [u8; 6]) -> i32 {
    // SAFETY: host contract.
    let (w, m) = unsafe { (wrap::<D>(dev), *mac) };
    rc(control(|| w.dev.add_mac(m)))
}

unsafe extern "C" fn mac_addr_remove<D: Pmd>(dev: *mut c_void, mac: *const [u8; 6]) -> i32 {
    // SAFETY: host contract.
    let (w, m) = unsafe { (wrap::<D>(dev), *mac) };
    rc(control(|| w.dev.remove_mac(m)))
}

unsafe extern "C" fn dev_set_link<D: Pmd>(dev: *mut c_void, up: u8) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    rc(control(|| w.dev.set_link(up != 0)))
}

unsafe extern "C" fn rss_hash_get<D: Pmd>(dev: *mut c_void, capa: *mut u64, cur: *mut u64) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    match control(|| w.dev.rss_hash()) {
        Ok((c, u)) => {
            // SAFETY: valid out-pointers (host contract).
            unsafe {
                *capa = c;
                *cur = u;
            }
            0
        }
        Err(e) => e,
    }
}

unsafe extern "C" fn rss_hash_set<D: Pmd>(dev: *mut c_void, rss_hf: u64) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    rc(control(|| w.dev.set_rss_hash(rss_hf)))
}

unsafe extern "C" fn promiscuous_get<D: Pmd>(dev: *mut c_void) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    match control(|| w.dev.promiscuous()) {
        Ok(b) => i32::from(b),
        Err(e) => e,
    }
}

/// The ops table of a driver type (a promoted constant: one static table per type).
pub trait OpsTable {
    /// The table.
    const OPS: abi::DevOps;
    /// A `'static` reference to it.
    const OPS_REF: &'static abi::DevOps;
}

impl<D: Pmd> OpsTable for D {
    const OPS: abi::DevOps = abi::DevOps {
        size: std::mem::size_of::<abi::DevOps>() as u32,
        reserved: 0,
        dev_configure: Some(dev_configure::<D>),
        dev_info: Some(dev_info::<D>),
        rx_queue_setup: Some(rx_queue_setup::<D>),
        tx_queue_setup: Some(tx_queue_setup::<D>),
        rx_queue_release: Some(rx_queue_release::<D>),
        tx_queue_release: Some(tx_queue_release::<D>),
        dev_start: Some(dev_start::<D>),
        dev_stop: Some(dev_stop::<D>),
        dev_close: Some(dev_close::<D>),
        link_get: Some(link_get::<D>),
        stats_get: Some(stats_get::<D>),
        stats_reset: Some(stats_reset::<D>),
        xstats_names: Some(xstats_names::<D>),
        xstats_get: Some(xstats_get::<D>),
        xstats_reset: Some(xstats_reset::<D>),
        mac_addr_get: Some(mac_addr_get::<D>),
        mac_addr_set: Some(mac_addr_set::<D>),
        mtu_set: Some(mtu_set::<D>),
        promiscuous_set: Some(promiscuous_set::<D>),
        promiscuous_get: Some(promiscuous_get::<D>),
        last_error: Some(last_error),
        tx_done_cleanup: if <D::Tx as TxQueue>::HOLDS_PACKETS { Some(tx_done_cleanup::<D>) } else { None },
        tx_inflight: if <D::Tx as TxQueue>::HOLDS_PACKETS { Some(tx_inflight::<D>) } else { None },
        allmulticast_set: Some(allmulticast_set::<D>),
        allmulticast_get: Some(allmulticast_get::<D>),
        mac_addr_add: Some(mac_addr_add::<D>),
        mac_addr_remove: Some(mac_addr_remove::<D>),
        dev_set_link: Some(dev_set_link::<D>),
        rss_hash_get: Some(rss_hash_get::<D>),
        rss_hash_set: Some(rss_hash_set::<D>),
    };
    const OPS_REF: &'static abi::DevOps = &Self::OPS;
}

/// The entry table for driver type `D` (used by [`export_pmd!`]).
pub const fn entry<D: Pmd>() -> abi::PmdEntry {
    let (entry_size, mbuf_size, mempool_size, dev_ops_size, stats_size) = abi::entry_sizes();
    abi::PmdEntry {
        abi_major: abi::ABI_MAJOR,
        abi_minor: abi::ABI_MINOR,
        entry_size,
        mbuf_size,
        mempool_size,
        dev_ops_size,
        stats_size,
        name: D::NAME.as_ptr(),
        devargs_help: D::DEVARGS_HELP.as_ptr(),
        probe: Some(probe::<D>),
        pci_ids: if D::PCI_IDS.is_empty() { std::ptr::null() } else { D::PCI_IDS.as_ptr() },
        nb_pci_ids: D::PCI_IDS.len() as u32,
        reserved: 0,
        check_args: if D::CHECKS_ARGS { Some(check_args::<D>) } else { None },
    }
}

/// `PmdEntry::check_args` of driver `D`.
///
/// # Safety
/// `name` and `args` are NUL-terminated strings and `err` a valid ErrMsg (the host's
/// contract).
pub unsafe extern "C" fn check_args<D: Pmd>(name: *const c_char, args: *const c_char, err: *mut abi::ErrMsg) -> i32 {
    let r = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: NUL-terminated strings from the host (ABI contract).
        let (name, args) = unsafe {
            (CStr::from_ptr(name).to_string_lossy().into_owned(), CStr::from_ptr(args).to_string_lossy().into_owned())
        };
        D::check_args(&ProbeCtx { name: &name, args: &args })
    }));
    match r {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            write_err(err, &e.msg);
            -e.errno.max(1)
        }
        Err(p) => {
            write_err(
                err,
                &format!("driver {} panicked checking arguments: {}", D::NAME.to_string_lossy(), panic_text(&p)),
            );
            -abi::errno::EIO
        }
    }
}

/// Export a driver type as this library's PMD: defines the `ironpath_pmd_entry` symbol.
#[macro_export]
macro_rules! export_pmd {
    ($ty:ty) => {
        static __IRONPATH_PMD_ENTRY: $crate::abi::PmdEntry = $crate::entry::<$ty>();

        /// The plugin entry point (see `ironpath_abi::ENTRY_SYMBOL`).
        #[no_mangle]
        pub extern "C" fn ironpath_pmd_entry() -> *const $crate::abi::PmdEntry {
            &__IRONPATH_PMD_ENTRY
        }
    };
}
