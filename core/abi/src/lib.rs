//! `ironpath-abi`: the only contract between the ironpath host and its PMD plugins.
//!
//! This crate owns every type that crosses the plugin boundary: the `#[repr(C)]`
//! mbuf header ([`Mbuf`]), the mempool view and its ops table ([`Mempool`],
//! [`MempoolOps`]), the entry table a plugin exports ([`PmdEntry`]), the device
//! control table ([`DevOps`]) and the per-queue fast-path functions ([`RxQueue`],
//! [`TxQueue`]). It contains no logic: a plugin built by another compiler version
//! links only this crate (usually through `ironpath-pmd-sdk`) and still loads.
//!
//! # Versioning
//! * [`ABI_MAJOR`] changes when a field is removed or reordered, or a meaning changes.
//!   The host refuses a plugin of another major.
//! * [`ABI_MINOR`] changes when a field is appended to a table. Tables carry their own
//!   size in their first field, so a host reads only the slots a plugin knows and
//!   treats the rest as NULL ("not supported"). A plugin built against an older minor
//!   loads on a newer host. A plugin built against a *newer* minor than the host's is
//!   refused, unless its entry says, in [`PmdEntry::min_abi_minor`] (1.6), the oldest
//!   minor whose host it runs correctly on and the host is at least that: the SDK
//!   sets it from what the driver uses (a driver that holds sent packets needs 1.2's
//!   `tx_done_cleanup`, a PCI driver 1.1's `pci_ids`).
//! * [`Mbuf`], [`Mempool`] and [`Stats`] are shared memory layouts (the host hands
//!   buffers of them to plugins): their sizes must be equal on both sides, so changing
//!   one is a major change. [`PmdEntry`] may grow (the host reads the prefix it knows,
//!   and requires at least the 1.0 size, [`PMD_ENTRY_SIZE_V1_0`]). The loader checks
//!   all this before calling anything else.
//!
//! Layouts are pinned by compile-time assertions at the end of this file.
#![no_std]

use core::ffi::{c_char, c_void};
use core::sync::atomic::AtomicU16;

/// ABI major version: a plugin of another major is refused.
pub const ABI_MAJOR: u16 = 1;
/// ABI minor version: appended fields only.
///
/// * 1.1: [`PmdEntry::pci_ids`] and [`PmdEntry::nb_pci_ids`] (the PCI functions a
///   driver claims, for `-a DDDD:BB:DD.F`).
/// * 1.2: [`DevOps::tx_done_cleanup`] and [`DevOps::tx_inflight`] (TX completions
///   made explicit: a driver that holds sent packets until the device is done with
///   them reclaims on request and says how many it holds).
/// * 1.3: [`Mbuf::ext_shared`] (was reserved, zero) and [`EXT_ATTACHED`]: external
///   buffers, host memory a packet points to without a copy (TSO payloads).
/// * 1.4: [`PmdEntry::check_args`]: device arguments checked without creating a
///   device (`ironpath check`).
/// * 1.5: [`DevOps::allmulticast_set`], [`DevOps::allmulticast_get`],
///   [`DevOps::mac_addr_add`], [`DevOps::mac_addr_remove`] and
///   [`DevOps::dev_set_link`] (testpmd's `set allmulti`, `mac_addr add|remove`,
///   `set link-up|link-down`), [`DevOps::rss_hash_get`] and [`DevOps::rss_hash_set`]
///   (`show port N rss-hash`, `port config all rss`).
/// * 1.6: [`PmdEntry::min_abi_minor`]: the oldest host minor a plugin runs on (a
///   host refuses a plugin of a newer minor that does not name one it meets).
/// * 1.7: [`DevOps::rx_wake_fd`] and [`DevOps::rx_wake_arm`]: a receive queue's
///   wake-up source (a socket, an eventfd the peer or the device signals), so that
///   a host whose queues stay empty can sleep on it instead of polling (rx modes
///   `adaptive` and `interrupt`). A plugin without them keeps being polled.
pub const ABI_MINOR: u16 = 7;
/// Name of the one symbol every plugin exports: `extern "C" fn() -> *const PmdEntry`.
pub const ENTRY_SYMBOL: &str = "ironpath_pmd_entry";
/// The entry symbol as a NUL-terminated byte string (for `dlsym`).
pub const ENTRY_SYMBOL_C: &[u8] = b"ironpath_pmd_entry\0";

/// Default headroom reserved in front of packet data, in bytes (as in DPDK).
pub const PKTMBUF_HEADROOM: u16 = 128;
/// Size of the private area in each mbuf that nodes may use freely.
pub const MBUF_PRIV_WORDS: usize = 4;
/// Number of queues for which per-queue counters are kept in [`Stats`].
pub const QUEUE_STAT_CNTRS: usize = 16;
/// Maximum length of an xstat name, NUL included.
pub const XSTAT_NAME_LEN: usize = 64;
/// Length of the error-message buffer handed to `probe`.
pub const ERR_MSG_LEN: usize = 256;

// ---- mbuf offload flags (`Mbuf::ol_flags`) -------------------------------------

/// RX: the L4 checksum was not verified and the packet is partially checksummed
/// (the checksum field holds only the pseudo-header sum, e.g. veth CHECKSUM_PARTIAL).
pub const RX_L4_CKSUM_NONE: u64 = 1 << 0;
/// RX: the L4 checksum was verified good by the device or kernel.
pub const RX_L4_CKSUM_GOOD: u64 = 1 << 1;
/// RX: the L4 checksum was verified bad.
pub const RX_L4_CKSUM_BAD: u64 = 1 << 2;
/// RX: the IPv4 header checksum was verified good.
pub const RX_IP_CKSUM_GOOD: u64 = 1 << 3;
/// RX: the IPv4 header checksum was verified bad.
pub const RX_IP_CKSUM_BAD: u64 = 1 << 4;
/// RX: `rss_hash` is valid.
pub const RX_RSS_HASH: u64 = 1 << 5;
/// RX: `vlan_tci` holds a stripped VLAN tag.
pub const RX_VLAN_STRIPPED: u64 = 1 << 6;
/// RX: the packet is an aggregate of several TCP segments (GRO/LRO);
/// `tso_segsz` holds the original MSS.
pub const RX_AGGREGATED: u64 = 1 << 7;
/// TX: compute the IPv4 header checksum.
pub const TX_IP_CKSUM: u64 = 1 << 32;
/// TX: compute the TCP checksum.
pub const TX_TCP_CKSUM: u64 = 1 << 33;
/// TX: compute the UDP checksum.
pub const TX_UDP_CKSUM: u64 = 1 << 34;
/// TX: segment into `tso_segsz`-sized TCP segments.
pub const TX_TCP_SEG: u64 = 1 << 35;
/// TX: the packet is IPv4.
pub const TX_IPV4: u64 = 1 << 36;
/// TX: the packet is IPv6.
pub const TX_IPV6: u64 = 1 << 37;
/// TX (1.2): end of a batch: a batching stage in front of the driver sends what it
/// holds right after this packet (Linux's `xmit_more` unset). Drivers ignore it.
pub const TX_PUSH: u64 = 1 << 38;
/// RX: `timestamp` is valid.
pub const RX_TIMESTAMP: u64 = 1 << 8;
/// Internal: this mbuf is indirect: its buffer belongs to another (direct) mbuf.
pub const IND_ATTACHED: u64 = 1 << 62;
/// Internal: this mbuf's buffer is external memory of the host (`ext_shared` says
/// who releases it), with no IO address (`buf_iova` 0): a PMD reads it as any buffer
/// but must not hand it to a DMA engine. Read-only, as an indirect mbuf's.
pub const EXT_ATTACHED: u64 = 1 << 61;

/// The mbuf header: one per packet segment, followed in memory by its data buffer.
///
/// Two cache lines, DPDK-like. The first line holds everything allocation, RX, TX and
/// freeing of a single-segment packet touch (including `pool`); the second holds the
/// chain link and metadata that is valid only when its `ol_flags` bit says so
/// (`aggr_segs` with `RX_AGGREGATED`, `timestamp` with `RX_TIMESTAMP`) and the
/// node-private area. Allocation does not clear the second line.
#[repr(C, align(64))]
pub struct Mbuf {
    /// Virtual address of the segment's buffer (headroom included).
    pub buf_addr: *mut u8,
    /// IO virtual address of `buf_addr` (what a DMA engine is given).
    pub buf_iova: u64,
    /// Offset of the first data byte from `buf_addr`.
    pub data_off: u16,
    /// Reference count; changed only with atomic operations.
    pub refcnt: AtomicU16,
    /// Number of segments in the chain (meaningful in the first segment).
    pub nb_segs: u16,
    /// Input port.
    pub port: u16,
    /// Offload flags (`RX_*`, `TX_*` constants).
    pub ol_flags: u64,
    /// Packet type (L2/L3/L4 classification, see [`ptype`]).
    pub packet_type: u32,
    /// Total packet length: sum of `data_len` over the chain (first segment only).
    pub pkt_len: u32,
    /// Data length of this segment.
    pub data_len: u16,
    /// VLAN TCI when `RX_VLAN_STRIPPED` is set.
    pub vlan_tci: u16,
    /// RSS hash when `RX_RSS_HASH` is set.
    pub rss_hash: u32,
    /// Length of the buffer at `buf_addr`.
    pub buf_len: u16,
    /// L2 header length (for offloads).
    pub l2_len: u8,
    /// L4 header length (for offloads).
    pub l4_len: u8,
    /// L3 header length (for offloads).
    pub l3_len: u16,
    /// TCP segment size for TSO, or the original MSS of an aggregated packet.
    pub tso_segsz: u16,
    /// The pool this mbuf returns to.
    pub pool: *const Mempool,
    // ---- second cache line: touched only for chains and optional metadata ----
    /// Next segment of the chain, or NULL. Always NULL when the first segment's
    /// `nb_segs` is 1 (and in every free mbuf), so single-segment packets are
    /// allocated and freed without touching this cache line.
    pub next: *mut Mbuf,
    /// Number of original segments in an aggregated packet (`RX_AGGREGATED`).
    pub aggr_segs: u16,
    /// Reserved, zero.
    pub reserved: [u16; 3],
    /// Receive timestamp in nanoseconds; valid only with `RX_TIMESTAMP`.
    pub timestamp: u64,
    /// Free for use by graph nodes; not touched by PMDs.
    pub private: [u64; MBUF_PRIV_WORDS],
    /// Internal to the host: with `EXT_ATTACHED`, the shared record of the external
    /// buffer (its reference count and release function); NULL otherwise. 1.3.
    pub ext_shared: *mut c_void,
}

/// Packet type bits for `Mbuf::packet_type` (a subset of DPDK's RTE_PTYPE_*).
pub mod ptype {
    /// Ethernet.
    pub const L2_ETHER: u32 = 0x0000_0001;
    /// IPv4 (any header length).
    pub const L3_IPV4: u32 = 0x0000_0010;
    /// IPv6 (any extension headers).
    pub const L3_IPV6: u32 = 0x0000_0020;
    /// TCP.
    pub const L4_TCP: u32 = 0x0000_0100;
    /// UDP.
    pub const L4_UDP: u32 = 0x0000_0200;
    /// ICMP / ICMPv6.
    pub const L4_ICMP: u32 = 0x0000_0400;
}

/// Allocate `n` mbufs, all or nothing. Returns 0 on success, a negative errno
/// (`-ENOBUFS`) when the pool cannot supply all of them (then `objs` is untouched).
/// Every mbuf returned is reset: one segment, refcnt 1, `data_off` = headroom, length 0.
pub type AllocBulkFn = unsafe extern "C" fn(pool: *const Mempool, objs: *mut *mut Mbuf, n: u32) -> i32;
/// Release one reference to each of `n` packets (whole chains), to whatever pool each
/// segment belongs to; a segment goes back to its pool when its refcount reaches zero.
pub type FreeBulkFn = unsafe extern "C" fn(objs: *const *mut Mbuf, n: u32);

/// The operations a host pool offers to plugins.
#[repr(C)]
pub struct MempoolOps {
    /// `size_of::<MempoolOps>()` as the host knows it.
    pub size: u32,
    /// Reserved, zero.
    pub reserved: u32,
    /// Bulk allocation (see [`AllocBulkFn`]).
    pub alloc_bulk: Option<AllocBulkFn>,
    /// Bulk release (see [`FreeBulkFn`]).
    pub free_bulk: Option<FreeBulkFn>,
}

/// The plugin's view of a host mempool. The host's pool object begins with this.
#[repr(C)]
pub struct Mempool {
    /// The pool's operations.
    pub ops: *const MempoolOps,
    /// NUL-terminated pool name.
    pub name: *const c_char,
    /// Bytes of buffer in each mbuf (headroom included).
    pub buf_len: u16,
    /// Headroom the pool reserves in each mbuf.
    pub headroom: u16,
    /// Number of objects in the pool.
    pub size: u32,
    /// Base virtual address of the memory region that holds the pool.
    pub region_va: *mut u8,
    /// IO virtual address of `region_va`.
    pub region_iova: u64,
    /// Length of that region in bytes.
    pub region_len: u64,
}

/// Receive up to `n` packets into `pkts`; returns how many were written.
pub type RxBurstFn = unsafe extern "C" fn(queue: *mut c_void, pkts: *mut *mut Mbuf, n: u16) -> u16;
/// Send up to `n` packets from `pkts`; returns how many the driver took (and now owns).
/// Packets not taken stay with the caller.
pub type TxBurstFn = unsafe extern "C" fn(queue: *mut c_void, pkts: *mut *mut Mbuf, n: u16) -> u16;

/// A receive queue as set up by the driver: an opaque queue and its burst function.
#[repr(C)]
pub struct RxQueue {
    /// Driver-owned queue state, passed back to `rx_burst`.
    pub queue: *mut c_void,
    /// The burst function chosen at setup.
    pub rx_burst: Option<RxBurstFn>,
}

/// A transmit queue as set up by the driver.
#[repr(C)]
pub struct TxQueue {
    /// Driver-owned queue state, passed back to `tx_burst`.
    pub queue: *mut c_void,
    /// The burst function chosen at setup.
    pub tx_burst: Option<TxBurstFn>,
}

/// Device configuration given to `dev_configure`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct DevConf {
    /// Number of RX queues.
    pub nb_rx_queues: u16,
    /// Number of TX queues.
    pub nb_tx_queues: u16,
    /// Requested MTU (0 = keep).
    pub mtu: u16,
    /// The host's id for this port (drivers store it in `Mbuf::port` on RX).
    pub port_id: u16,
    /// Requested RX offloads (`RX_*` flags).
    pub rx_offloads: u64,
    /// Requested TX offloads (`TX_*` flags).
    pub tx_offloads: u64,
}

/// Device capabilities reported by `dev_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct DevInfo {
    /// Maximum number of RX queues.
    pub max_rx_queues: u16,
    /// Maximum number of TX queues.
    pub max_tx_queues: u16,
    /// Minimum descriptors per queue.
    pub min_desc: u16,
    /// Maximum descriptors per queue.
    pub max_desc: u16,
    /// Minimum MTU.
    pub min_mtu: u16,
    /// Maximum MTU.
    pub max_mtu: u16,
    /// Current MTU.
    pub mtu: u16,
    /// Reserved, zero.
    pub reserved: u16,
    /// Largest packet the device receives, in bytes.
    pub max_rx_pktlen: u32,
    /// Number of xstats the device reports.
    pub nb_xstats: u32,
    /// Supported RX offloads.
    pub rx_offload_capa: u64,
    /// Supported TX offloads.
    pub tx_offload_capa: u64,
}

/// Link state reported by `link_get`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Link {
    /// Speed in Mbit/s (0 = unknown).
    pub speed_mbps: u32,
    /// 1 = up.
    pub up: u8,
    /// 1 = full duplex.
    pub full_duplex: u8,
    /// 1 = autonegotiated.
    pub autoneg: u8,
    /// Reserved, zero.
    pub reserved: u8,
}

/// Basic port counters, DPDK `rte_eth_stats`-like. Filled by `stats_get`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packets received.
    pub ipackets: u64,
    /// Packets sent.
    pub opackets: u64,
    /// Bytes received.
    pub ibytes: u64,
    /// Bytes sent.
    pub obytes: u64,
    /// Packets dropped by the device because no receive slot was free.
    pub imissed: u64,
    /// Erroneous received packets.
    pub ierrors: u64,
    /// Failed transmissions.
    pub oerrors: u64,
    /// Packets not received because the mempool was empty.
    pub rx_nombuf: u64,
    /// Per-queue packets received.
    pub q_ipackets: [u64; QUEUE_STAT_CNTRS],
    /// Per-queue packets sent.
    pub q_opackets: [u64; QUEUE_STAT_CNTRS],
    /// Per-queue bytes received.
    pub q_ibytes: [u64; QUEUE_STAT_CNTRS],
    /// Per-queue bytes sent.
    pub q_obytes: [u64; QUEUE_STAT_CNTRS],
    /// Per-queue receive errors.
    pub q_errors: [u64; QUEUE_STAT_CNTRS],
}

/// One extended-statistic name.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XstatName {
    /// NUL-terminated name.
    pub name: [c_char; XSTAT_NAME_LEN],
}

/// Buffer for an error message written by a plugin (NUL-terminated, truncated to fit).
#[repr(C)]
pub struct ErrMsg {
    /// The message bytes.
    pub msg: [c_char; ERR_MSG_LEN],
}

/// Services the host offers to plugins, passed to `probe`.
#[repr(C)]
pub struct HostApi {
    /// `size_of::<HostApi>()` as the host knows it.
    pub size: u32,
    /// Host ABI major.
    pub abi_major: u16,
    /// Host ABI minor.
    pub abi_minor: u16,
    /// Log a NUL-terminated message at a level (0 = error, 1 = warning, 2 = info, 3 = debug).
    pub log: Option<unsafe extern "C" fn(level: u32, msg: *const c_char)>,
}

/// A device returned by `probe`: its state and its control table.
#[repr(C)]
pub struct Device {
    /// Driver-owned device state, passed back to every op.
    pub dev: *mut c_void,
    /// The device's control operations.
    pub ops: *const DevOps,
}

/// Probe (create) one device. `name` is the instance name (`net_null0`), `args` the
/// device arguments after the first comma (`size=64,copy=1`), both NUL-terminated.
/// Returns 0 and fills `out`, or a negative errno and writes a message to `err`
/// (which names the bad argument and what is accepted).
pub type ProbeFn = unsafe extern "C" fn(
    host: *const HostApi,
    name: *const c_char,
    args: *const c_char,
    out: *mut Device,
    err: *mut ErrMsg,
) -> i32;

/// Checks device arguments as `probe` would, creating nothing: 0 if they are
/// accepted as far as arguments go, else a negative errno and a message naming
/// the argument in `err` (ABI 1.4).
pub type CheckArgsFn = unsafe extern "C" fn(name: *const c_char, args: *const c_char, err: *mut ErrMsg) -> i32;

/// Type of the exported entry symbol.
pub type PmdEntryFn = unsafe extern "C" fn() -> *const PmdEntry;

/// The table a plugin exports through [`ENTRY_SYMBOL`]. The first fields are frozen
/// for every ABI version so a host can always read the version of any plugin.
#[repr(C)]
pub struct PmdEntry {
    /// [`ABI_MAJOR`] the plugin was built against.
    pub abi_major: u16,
    /// [`ABI_MINOR`] the plugin was built against.
    pub abi_minor: u16,
    /// `size_of::<PmdEntry>()` in the plugin.
    pub entry_size: u32,
    /// `size_of::<Mbuf>()` in the plugin.
    pub mbuf_size: u32,
    /// `size_of::<Mempool>()` in the plugin.
    pub mempool_size: u32,
    /// `size_of::<DevOps>()` in the plugin.
    pub dev_ops_size: u32,
    /// `size_of::<Stats>()` in the plugin.
    pub stats_size: u32,
    /// Driver name, NUL-terminated (`net_null`).
    pub name: *const c_char,
    /// Device-argument help, NUL-terminated (`size=<bytes>,copy=0|1`).
    pub devargs_help: *const c_char,
    /// Create a device.
    pub probe: Option<ProbeFn>,
    // ---- 1.1 ----
    /// The PCI functions this driver drives, `nb_pci_ids` entries (NULL and 0 for a
    /// driver of virtual devices). The host picks the driver of `-a DDDD:BB:DD.F` by the
    /// function's vendor and device id and probes it with `pci=DDDD:BB:DD.F` first in
    /// its arguments. A 1.0 plugin's entry ends before this field: none.
    pub pci_ids: *const PciId,
    /// Number of entries at `pci_ids`.
    pub nb_pci_ids: u32,
    /// Reserved, zero.
    pub reserved: u32,
    // ---- 1.4 ----
    /// Check device arguments without creating a device; NULL (and in a 1.0-1.3
    /// plugin, absent): the driver cannot, only `probe` finds bad arguments.
    pub check_args: Option<CheckArgsFn>,
    // ---- 1.6 ----
    /// The oldest ABI minor of a host this plugin runs correctly on (0: not said; a
    /// host older than the plugin's `abi_minor` then refuses it).
    pub min_abi_minor: u16,
    /// Reserved, zero.
    pub reserved_1_6: [u16; 3],
}

/// Size of a [`PmdEntry`] of ABI 1.0 (the smallest a host accepts).
pub const PMD_ENTRY_SIZE_V1_0: u32 = 48;

/// A PCI vendor and device id (`8086:100e`), as in `lspci -n`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PciId {
    /// Vendor id (`/sys/bus/pci/devices/ADDR/vendor`).
    pub vendor: u16,
    /// Device id (`/sys/bus/pci/devices/ADDR/device`).
    pub device: u16,
}

/// A device's control operations. A NULL slot means "not supported" (`-ENOTSUP`).
/// Every op returns 0 or a negative errno unless said otherwise.
#[repr(C)]
pub struct DevOps {
    /// `size_of::<DevOps>()` in the plugin: slots past it are NULL for the host.
    pub size: u32,
    /// Reserved, zero.
    pub reserved: u32,
    /// Configure queue counts and offloads (device stopped).
    pub dev_configure: Option<unsafe extern "C" fn(dev: *mut c_void, conf: *const DevConf) -> i32>,
    /// Report capabilities.
    pub dev_info: Option<unsafe extern "C" fn(dev: *mut c_void, info: *mut DevInfo) -> i32>,
    /// Set up RX queue `qid` with `nb_desc` descriptors, receiving into `pool`.
    pub rx_queue_setup: Option<
        unsafe extern "C" fn(dev: *mut c_void, qid: u16, nb_desc: u16, pool: *const Mempool, out: *mut RxQueue) -> i32,
    >,
    /// Set up TX queue `qid` with `nb_desc` descriptors.
    pub tx_queue_setup:
        Option<unsafe extern "C" fn(dev: *mut c_void, qid: u16, nb_desc: u16, out: *mut TxQueue) -> i32>,
    /// Release RX queue `qid` (its `queue` pointer becomes invalid).
    pub rx_queue_release: Option<unsafe extern "C" fn(dev: *mut c_void, qid: u16)>,
    /// Release TX queue `qid`.
    pub tx_queue_release: Option<unsafe extern "C" fn(dev: *mut c_void, qid: u16)>,
    /// Start the device.
    pub dev_start: Option<unsafe extern "C" fn(dev: *mut c_void) -> i32>,
    /// Stop the device.
    pub dev_stop: Option<unsafe extern "C" fn(dev: *mut c_void) -> i32>,
    /// Close the device and free `dev`; no op may be called after it.
    pub dev_close: Option<unsafe extern "C" fn(dev: *mut c_void)>,
    /// Read link state.
    pub link_get: Option<unsafe extern "C" fn(dev: *mut c_void, link: *mut Link) -> i32>,
    /// Read basic counters.
    pub stats_get: Option<unsafe extern "C" fn(dev: *mut c_void, stats: *mut Stats) -> i32>,
    /// Reset basic counters.
    pub stats_reset: Option<unsafe extern "C" fn(dev: *mut c_void) -> i32>,
    /// Write up to `n` xstat names; returns the total number of xstats (>= 0) or an errno.
    pub xstats_names: Option<unsafe extern "C" fn(dev: *mut c_void, names: *mut XstatName, n: u32) -> i32>,
    /// Write up to `n` xstat values, in the order of the names; returns the total number.
    pub xstats_get: Option<unsafe extern "C" fn(dev: *mut c_void, values: *mut u64, n: u32) -> i32>,
    /// Reset xstats.
    pub xstats_reset: Option<unsafe extern "C" fn(dev: *mut c_void) -> i32>,
    /// Read the MAC address.
    pub mac_addr_get: Option<unsafe extern "C" fn(dev: *mut c_void, mac: *mut [u8; 6]) -> i32>,
    /// Set the MAC address.
    pub mac_addr_set: Option<unsafe extern "C" fn(dev: *mut c_void, mac: *const [u8; 6]) -> i32>,
    /// Set the MTU.
    pub mtu_set: Option<unsafe extern "C" fn(dev: *mut c_void, mtu: u16) -> i32>,
    /// Enable (1) or disable (0) promiscuous mode.
    pub promiscuous_set: Option<unsafe extern "C" fn(dev: *mut c_void, on: u8) -> i32>,
    /// Read promiscuous mode: 1, 0, or a negative errno.
    pub promiscuous_get: Option<unsafe extern "C" fn(dev: *mut c_void) -> i32>,
    /// Write the message of the last failed op on this thread (empty if none) to
    /// `err`; the host calls it right after an op returned a negative errno.
    pub last_error: Option<unsafe extern "C" fn(dev: *mut c_void, err: *mut ErrMsg)>,
    /// (1.2) Free up to `free_cnt` (0 = all) packets of TX queue `q` (the `queue` pointer
    /// of its [`TxQueue`]) that the device has finished sending, whatever the driver's
    /// own `tx_free_thresh`; returns how many were freed. Called on the thread that
    /// bursts on the queue. NULL: the driver frees packets as it takes them.
    pub tx_done_cleanup: Option<unsafe extern "C" fn(q: *mut c_void, free_cnt: u32) -> i32>,
    /// (1.2) How many packets TX queue `q` holds that the device has not finished
    /// sending (or has finished but the driver has not yet freed). Called on the
    /// queue's thread. NULL: always 0.
    pub tx_inflight: Option<unsafe extern "C" fn(q: *mut c_void) -> i32>,
    // ---- 1.5 ----
    /// (1.5) All-multicast reception on (1) or off (0).
    pub allmulticast_set: Option<unsafe extern "C" fn(dev: *mut c_void, on: u8) -> i32>,
    /// (1.5) 1 if all-multicast reception is on, 0 if off, or a negative errno.
    pub allmulticast_get: Option<unsafe extern "C" fn(dev: *mut c_void) -> i32>,
    /// (1.5) Also receive frames sent to unicast address `mac`.
    pub mac_addr_add: Option<unsafe extern "C" fn(dev: *mut c_void, mac: *const [u8; 6]) -> i32>,
    /// (1.5) Stop receiving for an address `mac_addr_add` added.
    pub mac_addr_remove: Option<unsafe extern "C" fn(dev: *mut c_void, mac: *const [u8; 6]) -> i32>,
    /// (1.5) Bring the link up (1) or down (0) administratively.
    pub dev_set_link: Option<unsafe extern "C" fn(dev: *mut c_void, up: u8) -> i32>,
    /// (1.5) RSS: the hash functions the device can spread flows over its RX
    /// queues with (`capa`) and those it uses now (`cur`), as `RSS_*` flags; 0 and
    /// 0 for a device without RSS.
    pub rss_hash_get: Option<unsafe extern "C" fn(dev: *mut c_void, capa: *mut u64, cur: *mut u64) -> i32>,
    /// (1.5) Use the hash functions `rss_hf` (a subset of `capa`; 0: off).
    pub rss_hash_set: Option<unsafe extern "C" fn(dev: *mut c_void, rss_hf: u64) -> i32>,
    /// (1.7) The wake-up source of RX queue `q` (the queue pointer of its
    /// [`RxQueue`]): a file descriptor that becomes readable when the queue may hold
    /// packets, once [`DevOps::rx_wake_arm`] armed it; `-ENOTSUP` when the queue has
    /// none (the host keeps polling it). The descriptor stays the driver's: the host
    /// only waits on it, edge-triggered (`EPOLLIN | EPOLLET`: each new signal wakes it,
    /// so nobody has to drain it, and a descriptor a peer shares is never read), never
    /// reads or closes it, and asks again before each sleep (a peer that reconnects
    /// brings a new one). Called on the queue's thread.
    pub rx_wake_fd: Option<unsafe extern "C" fn(q: *mut c_void) -> i32>,
    /// (1.7) `on` = 1, before the host sleeps: ask for the wake-up (unmask the
    /// device's interrupt, tell the peer to signal); the host polls the queue once
    /// more after this before it sleeps, so a packet that came before the arming is
    /// not missed; a negative errno (`-EBUSY`) when it cannot be armed now (nothing
    /// would signal), and the host keeps polling. `on` = 0, after it woke: back to
    /// polling (mask again). Called on the queue's thread.
    pub rx_wake_arm: Option<unsafe extern "C" fn(q: *mut c_void, on: u8) -> i32>,
}

/// RSS hash function: IPv4 addresses (DPDK's `RTE_ETH_RSS_IPV4` bit).
pub const RSS_IPV4: u64 = 1 << 2;
/// RSS hash function: IPv4 addresses and TCP ports.
pub const RSS_IPV4_TCP: u64 = 1 << 4;
/// RSS hash function: IPv4 addresses and UDP ports.
pub const RSS_IPV4_UDP: u64 = 1 << 5;
/// RSS hash function: IPv6 addresses.
pub const RSS_IPV6: u64 = 1 << 8;
/// RSS hash function: IPv6 addresses and TCP ports.
pub const RSS_IPV6_TCP: u64 = 1 << 10;
/// RSS hash function: IPv6 addresses and UDP ports.
pub const RSS_IPV6_UDP: u64 = 1 << 11;
/// Every RSS hash function above, with testpmd's names.
pub const RSS_NAMES: [(u64, &str); 6] = [
    (RSS_IPV4, "ipv4"),
    (RSS_IPV4_TCP, "ipv4-tcp"),
    (RSS_IPV4_UDP, "ipv4-udp"),
    (RSS_IPV6, "ipv6"),
    (RSS_IPV6_TCP, "ipv6-tcp"),
    (RSS_IPV6_UDP, "ipv6-udp"),
];

// SAFETY: `Mempool` is an immutable description after creation; the raw pointers it
// holds point to data that outlives every user and is only read.
unsafe impl Sync for Mempool {}
// SAFETY: as above; the pool may be handed to any thread.
unsafe impl Send for Mempool {}
// SAFETY: a `PmdEntry` is a static, immutable table of pointers to static strings,
// functions and a static PCI id table; sharing it between threads is sound.
unsafe impl Sync for PmdEntry {}
// SAFETY: a `DevOps` is an immutable table of function pointers.
unsafe impl Sync for DevOps {}
// SAFETY: a `MempoolOps` is an immutable table of function pointers.
unsafe impl Sync for MempoolOps {}
// SAFETY: `HostApi` is an immutable table of function pointers.
unsafe impl Sync for HostApi {}

// ---- layout checks (compile time) ---------------------------------------------

const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    assert!(size_of::<Mbuf>() == 128);
    assert!(align_of::<Mbuf>() == 64);
    assert!(offset_of!(Mbuf, buf_addr) == 0);
    assert!(offset_of!(Mbuf, buf_iova) == 8);
    assert!(offset_of!(Mbuf, data_off) == 16);
    assert!(offset_of!(Mbuf, refcnt) == 18);
    assert!(offset_of!(Mbuf, nb_segs) == 20);
    assert!(offset_of!(Mbuf, port) == 22);
    assert!(offset_of!(Mbuf, ol_flags) == 24);
    assert!(offset_of!(Mbuf, packet_type) == 32);
    assert!(offset_of!(Mbuf, pkt_len) == 36);
    assert!(offset_of!(Mbuf, data_len) == 40);
    assert!(offset_of!(Mbuf, vlan_tci) == 42);
    assert!(offset_of!(Mbuf, rss_hash) == 44);
    assert!(offset_of!(Mbuf, buf_len) == 48);
    assert!(offset_of!(Mbuf, l2_len) == 50);
    assert!(offset_of!(Mbuf, l4_len) == 51);
    assert!(offset_of!(Mbuf, l3_len) == 52);
    assert!(offset_of!(Mbuf, tso_segsz) == 54);
    assert!(offset_of!(Mbuf, pool) == 56);
    assert!(offset_of!(Mbuf, next) == 64);
    assert!(offset_of!(Mbuf, aggr_segs) == 72);
    assert!(offset_of!(Mbuf, timestamp) == 80);
    assert!(offset_of!(Mbuf, private) == 88);
    assert!(offset_of!(Mbuf, ext_shared) == 120);
    assert!(size_of::<Mempool>() == 48);
    assert!(size_of::<MempoolOps>() == 24);
    assert!(size_of::<RxQueue>() == 16);
    assert!(size_of::<TxQueue>() == 16);
    assert!(size_of::<DevConf>() == 24);
    assert!(size_of::<DevInfo>() == 40);
    assert!(size_of::<Link>() == 8);
    assert!(size_of::<Stats>() == 8 * 8 + 5 * 8 * QUEUE_STAT_CNTRS);
    assert!(size_of::<XstatName>() == XSTAT_NAME_LEN);
    assert!(size_of::<HostApi>() == 16);
    assert!(size_of::<Device>() == 16);
    assert!(offset_of!(PmdEntry, abi_major) == 0);
    assert!(offset_of!(PmdEntry, abi_minor) == 2);
    assert!(offset_of!(PmdEntry, entry_size) == 4);
    assert!(offset_of!(PmdEntry, pci_ids) == PMD_ENTRY_SIZE_V1_0 as usize);
    assert!(offset_of!(PmdEntry, check_args) == 64);
    assert!(offset_of!(PmdEntry, min_abi_minor) == 72);
    assert!(size_of::<PmdEntry>() == 80);
    assert!(size_of::<PciId>() == 4);
    assert!(size_of::<DevOps>() == 8 + 32 * 8);
};

/// Constant helper: the [`PmdEntry`] header fields for this ABI version.
#[allow(clippy::cast_possible_truncation)]
pub const fn entry_sizes() -> (u32, u32, u32, u32, u32) {
    (
        core::mem::size_of::<PmdEntry>() as u32,
        core::mem::size_of::<Mbuf>() as u32,
        core::mem::size_of::<Mempool>() as u32,
        core::mem::size_of::<DevOps>() as u32,
        core::mem::size_of::<Stats>() as u32,
    )
}

/// The errno values used across the ABI (Linux numbering).
pub mod errno {
    /// Operation not permitted.
    pub const EPERM: i32 = 1;
    /// No such device.
    pub const ENODEV: i32 = 19;
    /// I/O error.
    pub const EIO: i32 = 5;
    /// Out of memory.
    pub const ENOMEM: i32 = 12;
    /// Device or resource busy.
    pub const EBUSY: i32 = 16;
    /// No space left (an address table is full).
    pub const ENOSPC: i32 = 28;
    /// Already exists.
    pub const EEXIST: i32 = 17;
    /// Invalid argument.
    pub const EINVAL: i32 = 22;
    /// Out of range.
    pub const ERANGE: i32 = 34;
    /// No buffer space (pool empty).
    pub const ENOBUFS: i32 = 105;
    /// Not supported.
    pub const ENOTSUP: i32 = 95;
    /// Internal failure (a caught plugin panic).
    pub const EFAULT: i32 = 14;
}
