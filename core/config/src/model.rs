//! The validated pipeline: what the runtime builds ports, mempools, lcores and the graph from.

use std::path::PathBuf;

use crate::error::Loc;
use crate::params::Params;

/// Name of the mempool created when the file has no `mempools:` key.
pub const DEFAULT_MEMPOOL: &str = "default";

/// A valid pipeline file. Every name in it is unique in its kind, and every reference resolves.
#[derive(Debug, Clone, PartialEq)]
pub struct Pipeline {
    /// The file as the caller named it.
    pub file: PathBuf,
    /// Top-level `name:`.
    pub name: Option<String>,
    /// Top-level `description:`.
    pub description: Option<String>,
    /// At least one: the implicit [`DEFAULT_MEMPOOL`] when the file has no `mempools:`.
    pub mempools: Vec<MempoolCfg>,
    /// In file order (possibly none).
    pub ports: Vec<PortCfg>,
    /// In file order (at least one).
    pub lcores: Vec<LcoreCfg>,
    /// In file order (at least one).
    pub nodes: Vec<NodeCfg>,
    /// In file order.
    pub edges: Vec<EdgeCfg>,
}

/// Whether a mempool's memory comes from hugepages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HugePages {
    /// Hugepages when the system has them, else ordinary pages with a warning.
    #[default]
    Auto,
    /// Hugepages or fail.
    On,
    /// Ordinary pages.
    Off,
}

/// One entry of `mempools:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MempoolCfg {
    /// Unique among mempools.
    pub name: String,
    /// Number of mbufs, 1..=16777215.
    pub size: u32,
    /// Per-lcore cache size, 0..=512.
    pub cache: u32,
    /// Bytes of each mbuf's data buffer, headroom (128) included, 256..=65535.
    pub data_room: u16,
    /// Where the memory comes from.
    pub hugepages: HugePages,
    /// The entry's position (0:0 for the implicit pool).
    pub loc: Loc,
}

impl MempoolCfg {
    /// The pool used when the file has no `mempools:`: [`DEFAULT_MEMPOOL`], 8191 mbufs,
    /// cache 256, data room 2176 (2048 + headroom), hugepages auto.
    pub fn implicit() -> Self {
        Self {
            name: DEFAULT_MEMPOOL.to_owned(),
            size: 8191,
            cache: 256,
            data_room: 2176,
            hugepages: HugePages::Auto,
            loc: Loc::default(),
        }
    }
}

/// One entry of `ports:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortCfg {
    /// Unique among ports.
    pub name: String,
    /// PMD driver name, e.g. `net_ring`.
    pub driver: String,
    /// Device arguments as after the comma of `--vdev` (may be empty).
    pub args: String,
    /// The mempool RX buffers come from (resolved: the first mempool when not given).
    pub mempool: String,
    /// 1..=64.
    pub rx_queues: u16,
    /// 1..=64.
    pub tx_queues: u16,
    /// Descriptors per RX queue, 1..=32768.
    pub rx_desc: u16,
    /// Descriptors per TX queue, 1..=32768.
    pub tx_desc: u16,
    /// Promiscuous mode.
    pub promisc: bool,
    /// MTU to set, 68..=65535; `None` keeps the driver's.
    pub mtu: Option<u16>,
    /// The entry's position.
    pub loc: Loc,
}

/// The accepted `rx_mode` words of an lcore.
pub const RX_MODES: &[&str] = &["poll", "adaptive", "interrupt"];

/// One entry of `lcores:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LcoreCfg {
    /// Lcore id, 0..=127, unique.
    pub id: u32,
    /// CPU the lcore's thread is pinned to (defaults to `id`).
    pub cpu: usize,
    /// How it waits for packets: `poll`, `adaptive` or `interrupt` (`None`: the
    /// runtime's default, adaptive).
    pub rx_mode: Option<&'static str>,
    /// The entry's position.
    pub loc: Loc,
}

/// One entry of `nodes:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeCfg {
    /// Unique among nodes, `[A-Za-z0-9_-]+`.
    pub name: String,
    /// A type of the catalog.
    pub type_name: String,
    /// A defined lcore id.
    pub lcore: u32,
    /// Checked against the type's parameter specs, defaults filled in.
    pub params: Params,
    /// The entry's position.
    pub loc: Loc,
}

/// One entry of `edges:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgeCfg {
    /// Source node name.
    pub from: String,
    /// The source's next edge (resolved when the type declares only one).
    pub next: String,
    /// Destination node name.
    pub to: String,
    /// Size of the ring used when `from` and `to` run on different lcores: a power of two in 64..=65536.
    pub ring_size: u32,
    /// The entry's position.
    pub loc: Loc,
}
