//! `net_virtio`: a virtio-net 1.x PCI device (QEMU's `virtio-net-pci`, a cloud
//! VM's NIC) driven from user space through VFIO, as the e1000 is: polled, its
//! rings in our DMA memory, mbufs posted and sent by address (IOVA = VA).
//!
//! * Probe: `-a DDDD:BB:DD.F` (PCI 1af4:1041, or the transitional 1af4:1000 through
//!   its modern interface) or `--vdev net_virtio0,pci=...`; the function bound to
//!   vfio-pci with an IOMMU group (each refusal says how). The transport's
//!   capabilities are read ([`pci`]), the device reset, features negotiated:
//!   `VERSION_1` (required), `MAC`, `STATUS` (the link), `CSUM` (we send partial
//!   checksums, the device completes them), `GUEST_CSUM` (it tells us which checksums
//!   it checked or left partial), `HOST_TSO4`/`HOST_TSO6` with `tso=1` (we send TCP
//!   segments up to 64 KiB, the device cuts them), `ACCESS_PLATFORM` (required: the
//!   device's DMA goes through the IOMMU; QEMU: `iommu_platform=on`).
//! * Queue pairs: one, or with `MQ` (and `CTRL_VQ`) as many as the device has (up to
//!   64), the count told to the device at start through the control queue
//!   ([`queue::Ctrl`]); with `RSS`, the Toeplitz key, an indirection table over the RX
//!   queues and the hash types (`set_rss_hash`) go to it the same way.
//! * Each queue ([`queue`]): split rings; RX posts one mbuf per descriptor (the
//!   12-byte header in its headroom), refilled in bulk as packets come; TX chains a
//!   header of ours and the packet's segments, holds the packet until the device
//!   returns the chain. Every used entry the device writes is checked (an id we did
//!   not post, a length beyond the buffer: counted, dropped). Interrupts are not used
//!   (MSI-X vectors off); notifications only when the device has not suppressed them.
//! * Link from the device's status field; the MAC from its configuration.
//!
//! Device arguments: `pci=DDDD:BB:DD.F` (required with `--vdev`), `tso=0|1` (0: with
//! 1, and a device that offers it, we send TCP segments up to 64 KiB; a segment of
//! host memory without an IO address, as our TCP's TSO frames point into its file
//! cache, is never handed to the device: such packets are dropped and counted,
//! `tx_no_iova`, so leave TSO off for our TCP).

#![deny(clippy::undocumented_unsafe_blocks)]

pub mod pci;
pub mod queue;

use ironpath_pmd_sdk::abi::{self, errno};
use ironpath_pmd_sdk::vfio::{check_function, parse_pci_addr, Function, SYSFS_PCI_DEVICES};
use ironpath_pmd_sdk::{
    export_pmd, DevArgs, Pmd, PmdError, Pool, ProbeCtx, QueueStats, RxBurst, RxQueue, SoftState, TxBurst, TxQueue,
};
use pci::{common, status, Transport};
use queue::{Ctrl, Faults, RxRing, TxRing};
use std::ffi::CStr;
use std::path::Path;
use std::sync::Arc;

const KEYS: &[&str] = &["pci", "tso"];
/// The devices this driver drives: virtio-net, modern and transitional.
const IDS: &[abi::PciId] =
    &[abi::PciId { vendor: 0x1af4, device: 0x1041 }, abi::PciId { vendor: 0x1af4, device: 0x1000 }];

mod feat {
    pub const CSUM: u32 = 0;
    pub const GUEST_CSUM: u32 = 1;
    pub const MAC: u32 = 5;
    pub const HOST_TSO4: u32 = 11;
    pub const HOST_TSO6: u32 = 12;
    pub const STATUS: u32 = 16;
    pub const CTRL_VQ: u32 = 17;
    pub const MQ: u32 = 22;
    pub const RSS: u32 = 60;
    pub const VERSION_1: u32 = 32;
    pub const ACCESS_PLATFORM: u32 = 33;
}

fn bit(b: u32) -> u64 {
    1 << b
}

/// One virtio-net device.
pub struct Virtio {
    f: Arc<Function>,
    t: Arc<Transport>,
    features: u64,
    soft: SoftState,
    started: bool,
    /// Reset by `stop` (its queues are gone from the device).
    stopped: bool,
    /// The RX queues' notification addresses and indices.
    rx_notify: Vec<(usize, u16)>,
    rx_faults: Vec<Arc<Faults>>,
    tx_faults: Vec<Arc<Faults>>,
    /// Queue pairs the device has (1 without `MQ`/`RSS`).
    max_pairs: u16,
    /// The control queue (with `MQ` or `RSS`).
    ctrl: Option<Ctrl>,
    /// With `RSS`: what the device can hash and steer by.
    rss: Option<RssCaps>,
    /// RSS hash functions asked for (`abi::RSS_*`); `None`: the default (every one
    /// the device has, once there is more than one RX queue).
    rss_hf: Option<u64>,
    /// (virtio hash types, queue pairs) the device was last told to use (after a
    /// reset: none, one).
    sent: (u32, u16),
    /// RX and TX queues configured.
    queues: (u16, u16),
}

/// The device's RSS limits (its configuration, with `VIRTIO_NET_F_RSS`).
#[derive(Clone, Copy, Debug)]
struct RssCaps {
    key_len: u8,
    table_len: u16,
    hash_types: u32,
}

/// Most queue pairs used (a device may offer up to 32,767).
const MAX_PAIRS: u16 = 64;

/// Control classes and commands (virtio-net 5.1.6.5).
const CTRL_MQ: u8 = 4;
const CTRL_MQ_VQ_PAIRS_SET: u8 = 0;
const CTRL_MQ_RSS_CONFIG: u8 = 1;

/// Our `abi::RSS_*` flags and virtio's hash types (IPv4, TCPv4, UDPv4, IPv6, TCPv6,
/// UDPv6: bits 0-5).
const HASH_TYPES: [(u64, u32); 6] = [
    (abi::RSS_IPV4, 1 << 0),
    (abi::RSS_IPV4_TCP, 1 << 1),
    (abi::RSS_IPV4_UDP, 1 << 2),
    (abi::RSS_IPV6, 1 << 3),
    (abi::RSS_IPV6_TCP, 1 << 4),
    (abi::RSS_IPV6_UDP, 1 << 5),
];

/// The Toeplitz key every RSS implementation defaults to (Microsoft's published
/// verification key, 40 bytes).
const RSS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b,
    0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac,
    0x01, 0xfa,
];

fn to_virtio_hash(rss_hf: u64) -> u32 {
    HASH_TYPES.iter().filter(|(f, _)| rss_hf & f != 0).fold(0, |a, (_, v)| a | v)
}

fn from_virtio_hash(types: u32) -> u64 {
    HASH_TYPES.iter().filter(|(_, v)| types & v != 0).fold(0, |a, (f, _)| a | f)
}

/// The body of `VIRTIO_NET_CTRL_MQ_RSS_CONFIG`: hash types, the indirection table
/// (`table_len` entries spreading flows over `rx` queues round-robin), no
/// unclassified queue but 0, `tx` TX queues, and the key (none when nothing is
/// hashed).
fn rss_config(hash_types: u32, table_len: u16, rx: u16, tx: u16, key: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(12 + 2 * usize::from(table_len) + key.len());
    b.extend_from_slice(&hash_types.to_le_bytes());
    b.extend_from_slice(&(table_len - 1).to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    for i in 0..table_len {
        b.extend_from_slice(&(i % rx.max(1)).to_le_bytes());
    }
    b.extend_from_slice(&tx.to_le_bytes());
    let key = if hash_types == 0 { &[][..] } else { key };
    b.push(key.len() as u8);
    b.extend_from_slice(key);
    b
}

fn args(a: &DevArgs, ctx_args: &str) -> Result<(String, bool), PmdError> {
    let raw = a.get("pci").ok_or_else(|| {
        PmdError::invalid(format!("device argument `pci=DDDD:BB:DD.F` is required (got `{ctx_args}`)"))
    })?;
    let addr = parse_pci_addr(raw)
        .ok_or_else(|| PmdError::invalid(format!("device argument `pci={raw}` is not a PCI address (DDDD:BB:DD.F)")))?;
    Ok((addr, a.get_bool("tso", false)?))
}

/// An RX queue.
pub struct VirtioRx {
    ring: RxRing,
    stats: Arc<QueueStats>,
}

impl RxQueue for VirtioRx {
    fn rx_burst(&mut self, burst: &mut RxBurst<'_>) {
        let (p, b, nombuf) = self.ring.rx(burst);
        if p > 0 {
            self.stats.packets.add(p);
            self.stats.bytes.add(b);
        }
        if nombuf > 0 {
            self.stats.nombuf.add(nombuf);
        }
    }
}

/// A TX queue.
pub struct VirtioTx {
    ring: TxRing,
    stats: Arc<QueueStats>,
}

impl TxQueue for VirtioTx {
    const HOLDS_PACKETS: bool = true;

    fn tx_burst(&mut self, burst: &mut TxBurst<'_>) {
        let (p, b) = self.ring.tx(burst);
        if p > 0 {
            self.stats.packets.add(p);
            self.stats.bytes.add(b);
        }
    }

    fn tx_done_cleanup(&mut self, max: usize) -> usize {
        self.ring.reclaim(max)
    }

    fn tx_inflight(&self) -> usize {
        self.ring.inflight()
    }
}

impl Pmd for Virtio {
    const NAME: &'static CStr = c"net_virtio";
    const DEVARGS_HELP: &'static CStr = c"pci=DDDD:BB:DD.F (or -a DDDD:BB:DD.F),tso=0|1 (0)";
    const PCI_IDS: &'static [abi::PciId] = IDS;
    type Rx = VirtioRx;
    type Tx = VirtioTx;

    const CHECKS_ARGS: bool = true;

    fn check_args(ctx: &ProbeCtx<'_>) -> Result<(), PmdError> {
        args(&DevArgs::parse(ctx.args, KEYS)?, ctx.args).map(drop)
    }

    fn probe(ctx: &ProbeCtx<'_>) -> Result<Self, PmdError> {
        let (addr, tso) = args(&DevArgs::parse(ctx.args, KEYS)?, ctx.args)?;
        let group = check_function(Path::new(SYSFS_PCI_DEVICES), &addr, IDS)?;
        let f = Arc::new(Function::open(&addr, group)?);
        let t = Arc::new(Transport::new(&f)?);
        if !t.reset() {
            return Err(PmdError::new(errno::EIO, format!("PCI device {addr}: the device did not reset")));
        }
        t.add_status(status::ACKNOWLEDGE | status::DRIVER);
        let offered = t.device_features();
        if offered & bit(feat::VERSION_1) == 0 {
            t.add_status(status::FAILED);
            return Err(PmdError::new(errno::ENOTSUP, format!("PCI device {addr} offers no virtio 1.0 (legacy only)")));
        }
        // ACCESS_PLATFORM: the device's DMA goes through the IOMMU, where our IOVAs
        // (= our addresses) are mapped. A device without it takes addresses as
        // physical ones, which a user-space driver cannot give.
        if offered & bit(feat::ACCESS_PLATFORM) == 0 {
            t.add_status(status::FAILED);
            return Err(PmdError::new(
                errno::ENOTSUP,
                format!(
                    "PCI device {addr} bypasses the IOMMU (no VIRTIO_F_ACCESS_PLATFORM): \
                     qemu -device virtio-net-pci,iommu_platform=on"
                ),
            ));
        }
        let mut want = bit(feat::VERSION_1)
            | bit(feat::ACCESS_PLATFORM)
            | bit(feat::MAC)
            | bit(feat::STATUS)
            | bit(feat::CSUM)
            | bit(feat::GUEST_CSUM);
        if tso {
            want |= bit(feat::HOST_TSO4) | bit(feat::HOST_TSO6);
        }
        // Several queue pairs (and RSS over them) are set through the control queue.
        // (RSS only beside MQ: without it, a device whose RSS we cannot use would
        // leave no valid way to set the queue count.)
        let multi = offered & bit(feat::CTRL_VQ) != 0 && offered & bit(feat::MQ) != 0;
        if multi {
            want |= bit(feat::CTRL_VQ) | bit(feat::MQ) | bit(feat::RSS);
        }
        let features = offered & want;
        t.set_driver_features(features);
        t.add_status(status::FEATURES_OK);
        if t.r8(common::STATUS) & status::FEATURES_OK == 0 {
            t.add_status(status::FAILED);
            return Err(PmdError::new(errno::EIO, format!("PCI device {addr} refused our features {features:#x}")));
        }
        t.w16(common::MSIX, 0xffff);
        // The control queue follows every queue pair the device has; we use at most
        // `MAX_PAIRS` of them.
        let dev_pairs = if multi { t.dev16(8).unwrap_or(0) } else { 1 };
        if !(1..=0x7fff).contains(&dev_pairs) {
            t.add_status(status::FAILED);
            return Err(PmdError::new(
                errno::EIO,
                format!("PCI device {addr}: max_virtqueue_pairs {dev_pairs} is outside 1..=32767 (its control queue would have no index)"),
            ));
        }
        let max_pairs = dev_pairs.min(MAX_PAIRS);
        let rss = (features & bit(feat::RSS) != 0).then(|| RssCaps {
            key_len: t.dev8_opt(17).unwrap_or(0),
            table_len: t.dev16(18).unwrap_or(0),
            hash_types: t.dev32(20).unwrap_or(0),
        });
        // The spec's minimum key is 40 bytes; a table is a power of two (at most 128
        // entries used).
        let rss = rss.filter(|c| c.key_len >= 40 && c.table_len >= 1 && c.hash_types & 0x3f != 0).map(|c| RssCaps {
            key_len: 40,
            table_len: 1 << (15 - c.table_len.min(128).leading_zeros()),
            hash_types: c.hash_types,
        });
        let ctrl = if multi {
            match Ctrl::new(&t, &f, (2 * u32::from(dev_pairs)) as u16) {
                Ok(c) => Some(c),
                Err(e) => {
                    t.add_status(status::FAILED);
                    return Err(e);
                }
            }
        } else {
            None
        };
        let mac = if features & bit(feat::MAC) != 0 {
            std::array::from_fn(|i| t.dev8(i))
        } else {
            SoftState::mac_from_name(0x76, ctx.name)
        };
        Ok(Virtio {
            f,
            t,
            features,
            soft: SoftState::new(mac, 1500),
            started: false,
            stopped: false,
            rx_notify: Vec::new(),
            rx_faults: Vec::new(),
            tx_faults: Vec::new(),
            max_pairs,
            ctrl,
            rss,
            rss_hf: None,
            sent: (0, 1),
            queues: (1, 1),
        })
    }

    fn info(&self) -> abi::DevInfo {
        let tso = self.features & (bit(feat::HOST_TSO4) | bit(feat::HOST_TSO6)) != 0;
        let csum = self.features & bit(feat::CSUM) != 0;
        abi::DevInfo {
            max_rx_queues: self.max_pairs,
            max_tx_queues: self.max_pairs,
            min_desc: 8,
            max_desc: 32768,
            min_mtu: 68,
            max_mtu: 1500,
            mtu: self.soft.mtu,
            max_rx_pktlen: 1518,
            rx_offload_capa: abi::RX_L4_CKSUM_GOOD | abi::RX_L4_CKSUM_NONE,
            tx_offload_capa: if csum { abi::TX_TCP_CKSUM | abi::TX_UDP_CKSUM } else { 0 }
                | if tso && csum { abi::TX_TCP_SEG } else { 0 },
            ..Default::default()
        }
    }

    fn configure(&mut self, conf: &abi::DevConf) -> Result<(), PmdError> {
        if self.started {
            return Err(PmdError::new(errno::EBUSY, "stop the port before configuring it"));
        }
        self.check_qid(conf.nb_rx_queues.max(conf.nb_tx_queues).max(1) - 1)?;
        if self.rss.is_none() && self.max_pairs > 1 && conf.nb_tx_queues > conf.nb_rx_queues {
            // Without RSS the device spreads frames over as many RX queues as queue
            // pairs run: one without buffers would lose them.
            return Err(PmdError::invalid(format!(
                "net_virtio without RSS: {} TX queues need as many RX queues (got {})",
                conf.nb_tx_queues, conf.nb_rx_queues
            )));
        }
        self.queues = (conf.nb_rx_queues.max(1), conf.nb_tx_queues.max(1));
        Ok(())
    }

    fn rx_queue_setup(&mut self, qid: u16, nb: u16, pool: Pool, stats: Arc<QueueStats>) -> Result<VirtioRx, PmdError> {
        if self.started {
            return Err(PmdError::new(errno::EBUSY, "stop the port before setting up queues"));
        }
        self.check_qid(qid)?;
        if usize::from(pool.buf_len() - pool.headroom()) < 1518 {
            return Err(PmdError::invalid("net_virtio needs mbufs with at least 1518 bytes of data room"));
        }
        let ring = RxRing::new(&self.t, &self.f, 2 * qid, nb.max(256), pool)?;
        self.rx_faults.push(ring.faults.clone());
        self.rx_notify.push(ring.notifier());
        Ok(VirtioRx { ring, stats })
    }

    fn tx_queue_setup(&mut self, qid: u16, nb: u16, stats: Arc<QueueStats>) -> Result<VirtioTx, PmdError> {
        if self.started {
            return Err(PmdError::new(errno::EBUSY, "stop the port before setting up queues"));
        }
        self.check_qid(qid)?;
        let ring = TxRing::new(&self.t, &self.f, 2 * qid + 1, nb.max(256))?;
        self.tx_faults.push(ring.faults.clone());
        Ok(VirtioTx { ring, stats })
    }

    /// DRIVER_OK: the device starts on the queues set up.
    fn start(&mut self) -> Result<(), PmdError> {
        if self.stopped {
            return Err(PmdError::new(
                errno::ENOTSUP,
                "net_virtio: a stopped port was reset and cannot start again (close it and probe it again)",
            ));
        }
        if !self.started {
            self.t.add_status(status::DRIVER_OK);
            self.started = true;
            // The RX buffers were posted before the device ran: announce them now.
            for &(addr, q) in &self.rx_notify {
                // SAFETY: a queue's notification address inside the mapped BAR the
                // transport keeps (checked when the queue was set up).
                unsafe { std::ptr::write_volatile(addr as *mut u16, q.to_le()) };
            }
            if let Err(e) = self.apply_queues() {
                // The device runs with queues we cannot tell it about: stopped.
                self.t.reset();
                self.started = false;
                self.stopped = true;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Reset the device: it lets go of our rings and buffers before the queues are
    /// freed.
    fn stop(&mut self) -> Result<(), PmdError> {
        if self.started {
            self.t.reset();
            self.started = false;
            self.stopped = true;
        }
        Ok(())
    }

    fn link(&self) -> abi::Link {
        let up =
            if self.features & bit(feat::STATUS) != 0 { self.t.dev8_opt(6).is_some_and(|s| s & 1 != 0) } else { true };
        abi::Link {
            speed_mbps: 10000,
            up: u8::from(up && !self.soft.link_down),
            full_duplex: 1,
            autoneg: 0,
            reserved: 0,
        }
    }

    fn rss_hash(&self) -> Result<(u64, u64), PmdError> {
        Ok(match self.rss {
            Some(c) => {
                let capa = from_virtio_hash(c.hash_types);
                (capa, self.rss_hf_now(capa))
            }
            None => (0, 0),
        })
    }

    /// Hash functions for RSS: the device is told at once when the port runs.
    fn set_rss_hash(&mut self, rss_hf: u64) -> Result<(), PmdError> {
        let Some(c) = self.rss else {
            return if rss_hf == 0 {
                Ok(())
            } else {
                Err(PmdError::not_supported(
                    "RSS: the device does not offer VIRTIO_NET_F_RSS (qemu: -device virtio-net-pci,rss=on)",
                ))
            };
        };
        let capa = from_virtio_hash(c.hash_types);
        if rss_hf & !capa != 0 {
            return Err(PmdError::invalid(format!(
                "rss_hf {rss_hf:#x}: the device hashes only {capa:#x} ({})",
                abi::RSS_NAMES.iter().filter(|(f, _)| capa & f != 0).map(|(_, n)| *n).collect::<Vec<_>>().join(" ")
            )));
        }
        let before = self.rss_hf;
        self.rss_hf = Some(rss_hf);
        if self.started {
            if let Err(e) = self.apply_queues() {
                self.rss_hf = before;
                return Err(e);
            }
        }
        Ok(())
    }

    fn xstats(&self) -> Vec<(String, u64)> {
        let sum = |v: &[Arc<Faults>], f: fn(&Faults) -> u64| v.iter().map(|x| f(x)).sum::<u64>();
        vec![
            ("features".to_string(), self.features),
            ("queue_pairs".to_string(), u64::from(self.sent.1)),
            ("rss_hash_types".to_string(), u64::from(self.sent.0)),
            ("rx_bad_used".to_string(), sum(&self.rx_faults, |f| f.bad_used.get())),
            ("tx_bad_used".to_string(), sum(&self.tx_faults, |f| f.bad_used.get())),
            ("tx_ring_full".to_string(), sum(&self.tx_faults, |f| f.ring_full.get())),
            ("tx_too_many_segs".to_string(), sum(&self.tx_faults, |f| f.too_many_segs.get())),
            ("tx_no_iova".to_string(), sum(&self.tx_faults, |f| f.no_iova.get())),
        ]
    }

    fn soft(&self) -> Option<&SoftState> {
        Some(&self.soft)
    }

    fn soft_mut(&mut self) -> Option<&mut SoftState> {
        Some(&mut self.soft)
    }
}

impl Virtio {
    /// Queue `qid` exists on the device (`MQ` gives more than one pair).
    fn check_qid(&self, qid: u16) -> Result<(), PmdError> {
        if qid < self.max_pairs {
            return Ok(());
        }
        Err(PmdError::invalid(format!(
            "net_virtio: queue {qid}: the device has {} queue pair(s) (qemu: -netdev tap,queues=N and \
             -device virtio-net-pci,mq=on, optionally rss=on)",
            self.max_pairs
        )))
    }

    /// RSS hash functions in use: those asked for, else every one the device has
    /// once the port has more than one RX queue.
    fn rss_hf_now(&self, capa: u64) -> u64 {
        self.rss_hf.unwrap_or(if self.queues.0 > 1 { capa } else { 0 }) & capa
    }

    /// Tell the device how many queue pairs run and, with RSS, how flows spread over
    /// the RX queues (through the control queue; nothing when that is what it
    /// already does). With RSS and no hash function asked for, while several pairs
    /// run, every frame is steered to queue 0 (a table of zeros): the device would
    /// otherwise spread them by its own choice, onto queues that may have no buffers.
    fn apply_queues(&mut self) -> Result<(), PmdError> {
        let (rx, tx) = self.queues;
        let pairs = rx.max(tx);
        let want = match self.rss {
            Some(c) => (to_virtio_hash(self.rss_hf_now(from_virtio_hash(c.hash_types))) & c.hash_types, pairs),
            None => (0, pairs),
        };
        let Some(ctrl) = self.ctrl.as_mut() else { return Ok(()) };
        if want == self.sent {
            return Ok(());
        }
        match self.rss {
            Some(c) => {
                let (types, over) = if want.0 == 0 { (c.hash_types & 0x3f, 1) } else { (want.0, rx) };
                let body = rss_config(types, c.table_len, over, pairs, &RSS_KEY[..usize::from(c.key_len)]);
                ctrl.command(CTRL_MQ, CTRL_MQ_RSS_CONFIG, &body, "net_virtio: RSS configuration")?;
            }
            None => {
                ctrl.command(CTRL_MQ, CTRL_MQ_VQ_PAIRS_SET, &pairs.to_le_bytes(), "net_virtio: queue pairs")?;
            }
        }
        self.sent = want;
        Ok(())
    }
}

impl Drop for Virtio {
    fn drop(&mut self) {
        // The device stops using our rings and buffers before they go.
        self.t.reset();
    }
}

export_pmd!(Virtio);

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<(String, bool), PmdError> {
        args(&DevArgs::parse(s, KEYS)?, s)
    }

    #[test]
    fn arguments_name_what_is_wrong() {
        assert_eq!(parse("pci=00:01.0").unwrap(), ("0000:00:01.0".to_string(), false));
        assert!(parse("pci=0000:00:01.0,tso=1").unwrap().1);
        assert!(parse("").unwrap_err().msg.contains("pci=DDDD:BB:DD.F"));
        assert!(parse("pci=nope").unwrap_err().msg.contains("not a PCI address"));
        assert!(parse("pci=00:01.0,tso=2").unwrap_err().msg.contains("tso"));
        assert!(parse("pci=00:01.0,queues=2").unwrap_err().msg.contains("queues"));
    }

    #[test]
    fn rss_config_is_laid_out_as_the_spec_says() {
        let b = rss_config(0b11, 8, 3, 4, &RSS_KEY);
        // hash types, table mask, unclassified queue 0
        assert_eq!(&b[..8], &[3, 0, 0, 0, 7, 0, 0, 0]);
        // eight entries over three queues, round robin
        let table: Vec<u16> = b[8..24].chunks(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
        assert_eq!(table, [0, 1, 2, 0, 1, 2, 0, 1]);
        // TX queues, key length, key
        assert_eq!(&b[24..27], &[4, 0, 40]);
        assert_eq!(&b[27..], &RSS_KEY);
        // Nothing hashed: no key.
        let off = rss_config(0, 1, 2, 2, &RSS_KEY);
        assert_eq!(off.len(), 8 + 2 + 3);
        assert_eq!(off[off.len() - 1], 0);
    }

    #[test]
    fn hash_types_map_both_ways() {
        let all = abi::RSS_NAMES.iter().fold(0, |a, (f, _)| a | f);
        assert_eq!(to_virtio_hash(all), 0x3f);
        assert_eq!(from_virtio_hash(0x3f), all);
        // Virtio's extension-header types have no flag of ours: not reported.
        assert_eq!(from_virtio_hash(1 << 6 | 1 << 1), abi::RSS_IPV4_TCP);
        for (f, v) in HASH_TYPES {
            assert_eq!((to_virtio_hash(f), from_virtio_hash(v)), (v, f));
        }
    }
}
