//! Device state kept in software for devices with no hardware to ask, and the RSS
//! answer of devices whose queues the kernel fills.

use crate::{abi, PmdError};

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
    /// stable across runs, different per instance. `tag` is one byte of your choice
    /// that tells drivers apart (in the tree: null 0x00, ring 0x01, pcap 0x70), so two
    /// drivers' ports of the same instance name get different addresses.
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
