//! What a driver implements: the device ([`Pmd`]) and its queues ([`RxQueue`],
//! [`TxQueue`]).

use crate::packet::{RxBurst, TxBurst};
use crate::{abi, PmdError, Pool, QueueStats, SoftState};
use std::ffi::CStr;
use std::sync::Arc;

/// A receive queue.
pub trait RxQueue: Send + 'static {
    /// Receive up to [`RxBurst::room`] packets into `burst`. Count them in the
    /// queue's [`QueueStats`].
    fn rx_burst(&mut self, burst: &mut RxBurst<'_>);

    /// The queue's wake-up source: a descriptor that becomes readable when packets
    /// may be waiting, once [`RxQueue::wake_arm`] armed it (a socket, an eventfd the
    /// peer or the device signals). `None` (the default): the queue has none and the
    /// host keeps polling it. The descriptor stays the queue's: the host only waits
    /// on it, edge-triggered (nobody needs to drain it; never read a descriptor a
    /// peer shares on the queue's thread), and asks again before every sleep.
    fn wake_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }

    /// `true` before the host sleeps: ask for the wake-up (unmask the interrupt, tell
    /// the peer to signal); the host polls once more before it sleeps. `false` after
    /// it woke: back to polling (mask again). A socket, readable whenever it holds
    /// packets, needs nothing here (the default). Return false when the wake-up
    /// cannot be armed now (nothing would signal: a peer that gave no interrupt
    /// descriptor, an interrupt that cannot be unmasked): the host does not sleep
    /// and tries again later.
    fn wake_arm(&mut self, _on: bool) -> bool {
        true
    }
}

/// A transmit queue.
pub trait TxQueue: Send + 'static {
    /// Whether the queue keeps sent packets until the device is done with them (then
    /// implement `tx_done_cleanup` and `tx_inflight`). `false` (the default) leaves the
    /// ops NULL, so the host never calls them.
    const HOLDS_PACKETS: bool = false;

    /// Take packets from the front of `burst` (now owned by the driver, which frees
    /// them, or drops them, when done); those not taken stay the host's.
    fn tx_burst(&mut self, burst: &mut TxBurst<'_>);

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
