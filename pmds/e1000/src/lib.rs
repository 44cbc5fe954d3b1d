//! `net_e1000`: the Intel 82540EM (QEMU's `-device e1000`, PCI 8086:100e) driven from
//! user space through VFIO with the `pci-driver` crate: polled, with the device's
//! interrupt as the RX queue's wake-up source when its lcore sleeps.
//!
//! * Probe: `-a 0000:00:01.0` (the host hands the function to the driver that lists
//!   its PCI ids) or `--vdev net_e10000,pci=0000:00:01.0`. The function must be bound
//!   to vfio-pci and have an IOMMU group; each refusal says how to get there
//!   ([`nic::check_function`]). The device is reset with CTRL.RST (the 82540EM has no
//!   function-level reset), interrupts are masked, RX and TX are quiesced, and the MAC
//!   address is read from RAL0/RAH0.
//! * One RX and one TX queue of legacy descriptors in DMA memory ([`rx`], [`tx`]):
//!   RX refilled in bulk from the queue's mempool with one RDT write per refill; TX
//!   reclaimed by `tx_free_thresh`; checksum offloads (TX through context
//!   descriptors; RX status reported in `ol_flags` when the device sets it).
//! * DMA: IOVA = VA. The RX pool's region is mapped at queue setup, the pool of any
//!   other mbuf on first sight in `tx_burst` (see "DMA and IOVA" in
//!   `docs/writing-a-pmd.md`).
//! * Link from STATUS; promiscuous and all-multicast through RCTL; the statistics
//!   registers as `hw_*` xstats ([`hwstats`]), MPC also as `imissed`.
//! * Interrupts ([`irq`]): at probe the function's interrupt (MSI if it has one, else
//!   INTx, which is all the 82540EM has) is routed through VFIO to an eventfd, the RX
//!   queue's `wake_fd`, so that an lcore in rx mode `adaptive` or `interrupt` sleeps
//!   until a frame comes. Masked (IMC) while the lcore polls; `wake_arm(true)` clears
//!   ICR, unmasks the RX causes in IMS and VFIO's INTx mask; ITR keeps interrupts at
//!   least 125 µs apart. Without an interrupt (VFIO refused, logged at probe) the
//!   queue is polled in every rx mode.
//!
//! QEMU's e1000 refuses frames for one second (guest time) after every RCTL write.
//! RCTL is therefore written once when the port starts, and promiscuous mode is on
//! from the start (`promisc=1`, testpmd's setting) so turning it on is no write.
//!
//! Device arguments: `pci=DDDD:BB:DD.F` (required with `--vdev`), `promisc=0|1`,
//! `allmulti=0|1`, `rx_free_thresh=N`, `tx_free_thresh=N`.

mod hwstats;
pub mod irq;
pub mod nic;
pub mod regs;
pub mod rx;
pub mod tx;

use hwstats::HwStats;
use ironpath_pmd_sdk::abi::{self, errno};
use ironpath_pmd_sdk::{export_pmd, DevArgs, Pmd, PmdError, Pool, ProbeCtx, QueueStats};
use nic::Nic;
use regs::*;
use std::cell::RefCell;
use std::ffi::CStr;
use std::path::Path;
use std::sync::Arc;

const KEYS: &[&str] = &["pci", "promisc", "allmulti", "rx_free_thresh", "tx_free_thresh"];
/// The devices this driver drives.
const IDS: &[abi::PciId] = &[abi::PciId { vendor: 0x8086, device: 0x100e }];
/// Descriptor ring sizes: RDLEN/TDLEN are multiples of 128 bytes (8 descriptors).
const MIN_DESC: u16 = 32;
const MAX_DESC: u16 = 4096;
const MAX_MTU: u16 = 1500;
/// Ethernet header, one VLAN tag and the MTU: the largest frame without long packets.
const MAX_FRAME: u32 = MAX_MTU as u32 + 14 + 4;
/// ITR: at least 125 µs (488 × 256 ns) between two interrupts, at most 8,000 a
/// second, whatever the traffic (the RX queue also masks them while its lcore is
/// awake, so this only bounds a sleep-wake cycle). QEMU enforces 128 µs itself.
const ITR_INTERVAL: u32 = 488;

/// One e1000.
pub struct E1000 {
    nic: Arc<Nic>,
    mac: [u8; 6],
    mtu: u16,
    promisc: bool,
    allmulti: bool,
    /// Receive-address registers 1..=15 (`mac_addr add`); 0 holds `mac`.
    extra_macs: [Option<[u8; 6]>; 15],
    started: bool,
    rx_free_thresh: u16,
    tx_free_thresh: u16,
    /// Hardware counters, read (and accumulated) when statistics are asked for.
    hw: RefCell<HwStats>,
}

impl E1000 {
    /// RCTL for the current filters, receiver enabled or not.
    fn rctl(&self, enable: bool) -> u32 {
        let mut v = RCTL_BAM | RCTL_SECRC;
        if self.promisc {
            v |= RCTL_UPE | RCTL_MPE;
        } else if self.allmulti {
            v |= RCTL_MPE;
        }
        if enable {
            v |= RCTL_EN;
        }
        v
    }

    fn check_desc(what: &str, nb_desc: u16) -> Result<usize, PmdError> {
        if !(MIN_DESC..=MAX_DESC).contains(&nb_desc) || !nb_desc.is_multiple_of(8) {
            return Err(PmdError::invalid(format!(
                "{what}: {nb_desc} descriptors: net_e1000 takes a multiple of 8 in {MIN_DESC}..={MAX_DESC}"
            )));
        }
        Ok(usize::from(nb_desc))
    }

    /// Reset the device and bring it to a known, quiet state (receive and transmit
    /// off, interrupts masked, multicast table empty, RX checksum status on).
    fn reset(r: &Regs) {
        r.write(IMC, u32::MAX);
        r.write(CTRL, r.read(CTRL) | CTRL_RST);
        // The SDM asks for a wait before touching the device again.
        std::thread::sleep(std::time::Duration::from_millis(10));
        r.write(IMC, u32::MAX);
        let _ = r.read(ICR);
        r.write(CTRL, (r.read(CTRL) & !CTRL_RST) | CTRL_SLU | CTRL_ASDE);
        // QEMU's CTRL.RST keeps the registers: stop what an earlier user left running.
        r.write(RCTL, 0);
        r.write(TCTL, 0);
        for i in 0..128 {
            r.write(MTA + 4 * i, 0);
        }
        r.write(RXCSUM, RXCSUM_IPOFL | RXCSUM_TUOFL);
    }
}

/// The device arguments: PCI address, promiscuous and all-multicast, thresholds.
fn parse_args(a: &DevArgs) -> Result<(String, bool, bool, u16, u16), PmdError> {
    let Some(raw) = a.get("pci") else {
        return Err(PmdError::invalid(
            "device argument `pci` is required: pci=DDDD:BB:DD.F (e.g. pci=0000:00:01.0), or use -a DDDD:BB:DD.F",
        ));
    };
    let addr = nic::parse_pci_addr(raw).ok_or_else(|| {
        PmdError::invalid(format!("device argument `pci={raw}` is not a PCI address: expected DDDD:BB:DD.F"))
    })?;
    let promisc = a.get_bool("promisc", true)?;
    let allmulti = a.get_bool("allmulti", true)?;
    let rx_free_thresh = a.get_u64("rx_free_thresh", 32, 1, u64::from(MAX_DESC) - 1)? as u16;
    let tx_free_thresh = a.get_u64("tx_free_thresh", 32, 1, u64::from(MAX_DESC) - 1)? as u16;
    Ok((addr, promisc, allmulti, rx_free_thresh, tx_free_thresh))
}

impl Pmd for E1000 {
    const NAME: &'static CStr = c"net_e1000";
    const DEVARGS_HELP: &'static CStr =
        c"pci=<DDDD:BB:DD.F>,promisc=0|1 (default 1),allmulti=0|1 (default 1),rx_free_thresh=<1..4095, default 32>,tx_free_thresh=<1..4095, default 32>";
    const PCI_IDS: &'static [abi::PciId] = IDS;
    type Rx = rx::E1000Rx;
    type Tx = tx::E1000Tx;

    const CHECKS_ARGS: bool = true;

    /// The arguments; the PCI function is not touched.
    fn check_args(ctx: &ProbeCtx<'_>) -> Result<(), PmdError> {
        parse_args(&DevArgs::parse(ctx.args, KEYS)?).map(drop)
    }

    fn probe(ctx: &ProbeCtx<'_>) -> Result<Self, PmdError> {
        let a = DevArgs::parse(ctx.args, KEYS)?;
        let (addr, promisc, allmulti, rx_free_thresh, tx_free_thresh) = parse_args(&a)?;
        let group = nic::check_function(Path::new(nic::SYSFS_PCI_DEVICES), &addr, IDS)?;
        let nic = Arc::new(Nic::open(&addr, group)?);
        let r = &nic.regs;
        Self::reset(r);
        let (ral, rah) = (r.read(RAL0), r.read(RAH0));
        let mac = mac_from_ra(ral, rah);
        if rah & RAH_AV == 0 || mac == [0; 6] || mac[0] & 1 != 0 {
            return Err(PmdError::new(
                errno::EIO,
                format!("PCI device {addr}: no valid MAC address in RAL0/RAH0 ({ral:#010x} {rah:#010x})"),
            ));
        }
        Ok(E1000 {
            nic,
            mac,
            mtu: MAX_MTU,
            promisc,
            allmulti,
            extra_macs: [None; 15],
            started: false,
            rx_free_thresh,
            tx_free_thresh,
            hw: RefCell::new(HwStats::default()),
        })
    }

    fn info(&self) -> abi::DevInfo {
        abi::DevInfo {
            max_rx_queues: 1,
            max_tx_queues: 1,
            min_desc: MIN_DESC,
            max_desc: MAX_DESC,
            min_mtu: 68,
            max_mtu: MAX_MTU,
            mtu: self.mtu,
            max_rx_pktlen: MAX_FRAME,
            rx_offload_capa: abi::RX_IP_CKSUM_GOOD | abi::RX_L4_CKSUM_GOOD,
            tx_offload_capa: tx::TX_CKSUM,
            ..Default::default()
        }
    }

    fn rx_queue_setup(
        &mut self,
        _qid: u16,
        nb_desc: u16,
        pool: Pool,
        stats: Arc<QueueStats>,
    ) -> Result<rx::E1000Rx, PmdError> {
        let n = Self::check_desc("RX queue", nb_desc)?;
        let room = usize::from(pool.buf_len()).saturating_sub(usize::from(pool.headroom()));
        if room < RX_BUF_SIZE {
            return Err(PmdError::invalid(format!(
                "the mempool's mbufs have {room} bytes of data room; net_e1000 receives into {RX_BUF_SIZE}-byte buffers"
            )));
        }
        // Mapped again at every setup: a new pool may sit where an old one was.
        // SAFETY: the host keeps the pool alive while the queue exists.
        unsafe { self.nic.map_pool(pool.as_raw(), true)? };
        rx::E1000Rx::new(&self.nic, n, usize::from(self.rx_free_thresh), pool, stats)
    }

    fn tx_queue_setup(&mut self, _qid: u16, nb_desc: u16, stats: Arc<QueueStats>) -> Result<tx::E1000Tx, PmdError> {
        let n = Self::check_desc("TX queue", nb_desc)?;
        tx::E1000Tx::new(&self.nic, n, usize::from(self.tx_free_thresh), stats)
    }

    fn start(&mut self) -> Result<(), PmdError> {
        let r = &self.nic.regs;
        r.write(CTRL, r.read(CTRL) | CTRL_SLU);
        r.write(TIPG, TIPG_COPPER);
        r.write(TCTL, TCTL_EN | TCTL_PSP | TCTL_CT_COLD);
        r.write(ITR, ITR_INTERVAL);
        // The one RCTL write of a run (QEMU then ignores frames for a second).
        r.write(RCTL, self.rctl(true));
        self.started = true;
        Ok(())
    }

    fn stop(&mut self) -> Result<(), PmdError> {
        let r = &self.nic.regs;
        r.write(RCTL, self.rctl(false));
        r.write(TCTL, r.read(TCTL) & !TCTL_EN);
        self.started = false;
        Ok(())
    }

    fn link(&self) -> abi::Link {
        let st = self.nic.regs.read(STATUS);
        let up = st & STATUS_LU != 0;
        abi::Link {
            speed_mbps: if up { speed_mbps(st) } else { 0 },
            up: u8::from(up),
            full_duplex: u8::from(st & STATUS_FD != 0),
            autoneg: 1,
            reserved: 0,
        }
    }

    fn extra_stats(&self, s: &mut abi::Stats) {
        let mut hw = self.hw.borrow_mut();
        hw.refresh(&self.nic.regs);
        s.imissed += hw.get(hwstats::MISSED);
    }

    fn xstats(&self) -> Vec<(String, u64)> {
        let mut hw = self.hw.borrow_mut();
        hw.refresh(&self.nic.regs);
        hw.xstats()
    }

    fn mac(&self) -> Result<[u8; 6], PmdError> {
        Ok(self.mac)
    }

    fn set_mac(&mut self, mac: [u8; 6]) -> Result<(), PmdError> {
        if mac[0] & 1 != 0 || mac == [0; 6] {
            return Err(PmdError::invalid("a port MAC address must be unicast and not zero"));
        }
        let (ral, rah) = ra_from_mac(mac);
        let r = &self.nic.regs;
        r.write(RAH0, 0);
        r.write(RAL0, ral);
        r.write(RAH0, rah);
        self.mac = mac;
        Ok(())
    }

    fn set_mtu(&mut self, mtu: u16) -> Result<(), PmdError> {
        if !(68..=MAX_MTU).contains(&mtu) {
            return Err(PmdError::invalid(format!(
                "MTU {mtu} is out of range: accepted 68..={MAX_MTU} (net_e1000 does not enable long packets)"
            )));
        }
        self.mtu = mtu;
        Ok(())
    }

    fn set_promiscuous(&mut self, on: bool) -> Result<(), PmdError> {
        if on != self.promisc {
            self.promisc = on;
            if self.started {
                self.nic.regs.write(RCTL, self.rctl(true));
            }
        }
        Ok(())
    }

    fn promiscuous(&self) -> Result<bool, PmdError> {
        Ok(self.promisc)
    }

    /// RCTL.MPE (kept on while promiscuous).
    fn set_allmulticast(&mut self, on: bool) -> Result<(), PmdError> {
        if on != self.allmulti {
            self.allmulti = on;
            if self.started {
                self.nic.regs.write(RCTL, self.rctl(true));
            }
        }
        Ok(())
    }

    fn allmulticast(&self) -> Result<bool, PmdError> {
        Ok(self.allmulti)
    }

    /// A free receive-address register RAL/RAH 1..=15, marked valid.
    fn add_mac(&mut self, mac: [u8; 6]) -> Result<(), PmdError> {
        if mac[0] & 1 != 0 || mac == [0; 6] {
            return Err(PmdError::invalid("an added MAC address must be unicast and not zero"));
        }
        if mac == self.mac || self.extra_macs.contains(&Some(mac)) {
            return Ok(());
        }
        let Some(i) = self.extra_macs.iter().position(Option::is_none) else {
            return Err(PmdError::new(errno::ENOSPC, "all 16 receive-address registers are in use"));
        };
        let (ral, rah) = ra_from_mac(mac);
        let r = &self.nic.regs;
        let n = 8 * (i + 1);
        r.write(RAH0 + n, 0);
        r.write(RAL0 + n, ral);
        r.write(RAH0 + n, rah);
        self.extra_macs[i] = Some(mac);
        Ok(())
    }

    /// Clears the address's register (RAH.AV off).
    fn remove_mac(&mut self, mac: [u8; 6]) -> Result<(), PmdError> {
        if mac == self.mac {
            return Err(PmdError::invalid("the port's own address cannot be removed (mac_addr set replaces it)"));
        }
        if let Some(i) = self.extra_macs.iter().position(|m| *m == Some(mac)) {
            self.nic.regs.write(RAH0 + 8 * (i + 1), 0);
            self.extra_macs[i] = None;
        }
        Ok(())
    }

    /// CTRL.SLU (set link up): cleared, the MAC drops the link.
    fn set_link(&mut self, up: bool) -> Result<(), PmdError> {
        let r = &self.nic.regs;
        let c = r.read(CTRL);
        r.write(CTRL, if up { c | CTRL_SLU } else { c & !CTRL_SLU });
        Ok(())
    }
}

export_pmd!(E1000);

#[cfg(test)]
mod tests {
    use super::*;

    fn probe_err(args: &str) -> String {
        E1000::probe(&ProbeCtx { name: "net_e10000", args }).err().expect("probe should fail").msg
    }

    #[test]
    fn device_arguments_are_checked_before_the_device() {
        assert!(probe_err("").starts_with("device argument `pci` is required"));
        assert_eq!(probe_err("pci=00:01"), "device argument `pci=00:01` is not a PCI address: expected DDDD:BB:DD.F");
        assert!(probe_err("pci=0000:00:01.0,promisc=2").contains("`promisc=2` is not a boolean"));
        assert!(probe_err("pci=0000:00:01.0,tx_free_thresh=0").contains("out of range"));
        assert!(probe_err("pcie=1").contains("did you mean `pci`"));
    }

    #[test]
    fn a_missing_device_is_named() {
        assert_eq!(probe_err("pci=0000:1f:1f.7"), "no PCI device 0000:1f:1f.7 (lspci -D lists them)");
    }

    #[test]
    fn descriptor_counts() {
        assert_eq!(E1000::check_desc("RX queue", 1024), Ok(1024));
        assert!(E1000::check_desc("RX queue", 1001).unwrap_err().msg.contains("multiple of 8 in 32..=4096"));
        assert!(E1000::check_desc("TX queue", 8).is_err());
    }
}
