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
//! * One queue pair ([`queue`]): split rings; RX posts one mbuf per descriptor (the
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
use queue::{Faults, RxRing, TxRing};
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
        let features = offered & want;
        t.set_driver_features(features);
        t.add_status(status::FEATURES_OK);
        if t.r8(common::STATUS) & status::FEATURES_OK == 0 {
            t.add_status(status::FAILED);
            return Err(PmdError::new(errno::EIO, format!("PCI device {addr} refused our features {features:#x}")));
        }
        t.w16(common::MSIX, 0xffff);
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
        })
    }

    fn info(&self) -> abi::DevInfo {
        let tso = self.features & (bit(feat::HOST_TSO4) | bit(feat::HOST_TSO6)) != 0;
        let csum = self.features & bit(feat::CSUM) != 0;
        abi::DevInfo {
            max_rx_queues: 1,
            max_tx_queues: 1,
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

    fn rx_queue_setup(&mut self, qid: u16, nb: u16, pool: Pool, stats: Arc<QueueStats>) -> Result<VirtioRx, PmdError> {
        if self.started {
            return Err(PmdError::new(errno::EBUSY, "stop the port before setting up queues"));
        }
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
        let up = if self.features & bit(feat::STATUS) != 0 { self.t.dev8(6) & 1 != 0 } else { true };
        abi::Link {
            speed_mbps: 10000,
            up: u8::from(up && !self.soft.link_down),
            full_duplex: 1,
            autoneg: 0,
            reserved: 0,
        }
    }

    fn xstats(&self) -> Vec<(String, u64)> {
        let sum = |v: &[Arc<Faults>], f: fn(&Faults) -> u64| v.iter().map(|x| f(x)).sum::<u64>();
        vec![
            ("features".to_string(), self.features),
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
}
