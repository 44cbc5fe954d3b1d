//! `net_tap`: a PMD on a Linux TAP device, created or attached by name, one file
//! descriptor per queue (IFF_MULTI_QUEUE), with virtio-net headers (IFF_VNET_HDR) so
//! offloads cross the boundary both ways:
//!
//! * RX: the kernel may hand us TCP segments up to 64 KiB (GSO) and packets whose
//!   checksum is still to be completed. `VIRTIO_NET_HDR_F_NEEDS_CSUM` becomes
//!   `RX_L4_CKSUM_NONE` (with `l2_len`/`l3_len` from `csum_start`),
//!   `VIRTIO_NET_HDR_F_DATA_VALID` becomes `RX_L4_CKSUM_GOOD`, and a GSO type becomes
//!   `RX_AGGREGATED` with `tso_segsz` = the segment size. Large packets arrive as mbuf
//!   chains.
//! * TX: `TX_TCP_SEG` with `tso_segsz` becomes a GSO header (the kernel segments),
//!   `TX_TCP_CKSUM`/`TX_UDP_CKSUM` a NEEDS_CSUM header (the kernel completes the
//!   checksum). A packet received with `RX_AGGREGATED`/`RX_L4_CKSUM_NONE` and sent on
//!   unchanged keeps its GSO/partial-checksum header, so forwarding GSO traffic works.
//!
//! Device arguments: `iface=<name>` (default: the instance name), `queues=<1..16>`,
//! `offload=0|1` (default 1), `mac=aa:bb:cc:dd:ee:ff` (the kernel side's address).

#![deny(clippy::undocumented_unsafe_blocks)]

pub mod sys;

use ironpath_pmd_sdk::abi;
use ironpath_pmd_sdk::packet::PushError;
use ironpath_pmd_sdk::{
    export_pmd, DevArgs, KernelFlowHash, Pmd, PmdError, Pool, ProbeCtx, QueueStats, RxBurst, RxQueue, SoftState,
    TxBurst, TxQueue,
};
use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use sys::{Fd, VnetHdr};

/// Offload counters of the RX queues, shared with the device for xstats.
#[derive(Default)]
struct Offloads {
    gso_packets: AtomicU64,
    csum_partial: AtomicU64,
    largest_frame: AtomicU64,
}

const KEYS: &[&str] = &["iface", "queues", "offload", "mac"];
/// Largest frame the kernel hands a TAP with GSO on.
const MAX_FRAME: usize = 65_536 + 14 + 4;

/// A device.
pub struct Tap {
    iface: String,
    queues: u16,
    rx_fds: Vec<Option<Arc<Fd>>>,
    tx_fds: Vec<Option<Arc<Fd>>>,
    soft: SoftState,
    offloads: Arc<Offloads>,
}

/// Receive queue.
pub struct TapRx {
    fd: Arc<Fd>,
    buf: Vec<u8>,
    offloads: Arc<Offloads>,
    pool: Pool,
    stats: Arc<QueueStats>,
}

/// Transmit queue.
pub struct TapTx {
    fd: Arc<Fd>,
    stats: Arc<QueueStats>,
}

/// `iface` (default: the instance name), `queues`, `offload`.
fn parse_args(ctx: &ProbeCtx<'_>, a: &DevArgs) -> Result<(String, u16, bool), PmdError> {
    let iface = a.get_name("iface", 15)?.unwrap_or_else(|| ctx.name.chars().take(15).collect());
    let queues = a.get_u64("queues", 1, 1, 16)? as u16;
    let offload = a.get_bool("offload", true)?;
    Ok((iface, queues, offload))
}

impl Tap {
    fn kernel_err(&self, e: std::io::Error) -> PmdError {
        PmdError::new(e.raw_os_error().unwrap_or(abi::errno::EIO), format!("iface={}: {e}", self.iface))
    }
}

impl Pmd for Tap {
    const NAME: &'static CStr = c"net_tap";
    const DEVARGS_HELP: &'static CStr = c"iface=<name>,queues=<1..16>,offload=0|1,mac=<aa:bb:cc:dd:ee:ff>";
    type Rx = TapRx;
    type Tx = TapTx;

    const CHECKS_ARGS: bool = true;

    /// The arguments; no TAP device is opened.
    fn check_args(ctx: &ProbeCtx<'_>) -> Result<(), PmdError> {
        let a = DevArgs::parse(ctx.args, KEYS)?;
        parse_args(ctx, &a)?;
        a.get_mac("mac")?;
        Ok(())
    }

    fn probe(ctx: &ProbeCtx<'_>) -> Result<Self, PmdError> {
        let a = DevArgs::parse(ctx.args, KEYS)?;
        let (iface, queues, offload) = parse_args(ctx, &a)?;
        let mut fds = Vec::new();
        for _ in 0..queues {
            let fd = sys::open_tap(&iface, offload).map_err(|e| {
                let hint = if e.raw_os_error() == Some(libc::EPERM) { " (needs root or CAP_NET_ADMIN)" } else { "" };
                PmdError::new(
                    e.raw_os_error().unwrap_or(abi::errno::EIO),
                    format!("iface={iface}: cannot open the TAP device: {e}{hint}"),
                )
            })?;
            fds.push(Arc::new(fd));
        }
        if let Some(m) = a.get_mac("mac")? {
            sys::set_hwaddr(&iface, m)
                .map_err(|e| PmdError::invalid(format!("mac=: cannot set the address of {iface}: {e}")))?;
        }
        // Our own address: the kernel side has one; we use another, locally administered.
        let mac = SoftState::mac_from_name(0x7a, ctx.name);
        Ok(Tap {
            iface,
            queues,
            rx_fds: fds.iter().cloned().map(Some).collect(),
            tx_fds: fds.into_iter().map(Some).collect(),
            soft: SoftState::new(mac, 65_521),
            offloads: Arc::new(Offloads::default()),
        })
    }

    fn info(&self) -> abi::DevInfo {
        abi::DevInfo {
            max_rx_queues: self.queues,
            max_tx_queues: self.queues,
            max_desc: u16::MAX,
            min_mtu: 68,
            max_mtu: 65_521,
            mtu: sys::mtu(&self.iface).unwrap_or(1500).min(65535) as u16,
            max_rx_pktlen: MAX_FRAME as u32,
            rx_offload_capa: abi::RX_L4_CKSUM_GOOD | abi::RX_L4_CKSUM_NONE | abi::RX_AGGREGATED,
            tx_offload_capa: abi::TX_TCP_SEG | abi::TX_TCP_CKSUM | abi::TX_UDP_CKSUM,
            ..Default::default()
        }
    }

    fn rx_queue_setup(
        &mut self,
        qid: u16,
        _nb_desc: u16,
        pool: Pool,
        stats: Arc<QueueStats>,
    ) -> Result<TapRx, PmdError> {
        let fd = self.rx_fds.get(qid as usize).and_then(Clone::clone).ok_or_else(|| {
            PmdError::new(abi::errno::EINVAL, format!("RX queue {qid} is beyond queues={}", self.queues))
        })?;
        Ok(TapRx { fd, buf: vec![0; VnetHdr::LEN + MAX_FRAME], offloads: self.offloads.clone(), pool, stats })
    }

    fn tx_queue_setup(&mut self, qid: u16, _nb_desc: u16, stats: Arc<QueueStats>) -> Result<TapTx, PmdError> {
        let fd = self.tx_fds.get(qid as usize).and_then(Clone::clone).ok_or_else(|| {
            PmdError::new(abi::errno::EINVAL, format!("TX queue {qid} is beyond queues={}", self.queues))
        })?;
        Ok(TapTx { fd, stats })
    }

    fn link(&self) -> abi::Link {
        abi::Link { speed_mbps: 10_000, up: u8::from(sys::is_up(&self.iface)), full_duplex: 1, autoneg: 0, reserved: 0 }
    }

    fn xstats(&self) -> Vec<(String, u64)> {
        let o = &self.offloads;
        vec![
            ("rx_gso_packets".into(), o.gso_packets.load(Ordering::Relaxed)),
            ("rx_csum_partial_packets".into(), o.csum_partial.load(Ordering::Relaxed)),
            ("rx_largest_frame".into(), o.largest_frame.load(Ordering::Relaxed)),
        ]
    }

    fn soft(&self) -> Option<&SoftState> {
        Some(&self.soft)
    }

    fn soft_mut(&mut self) -> Option<&mut SoftState> {
        Some(&mut self.soft)
    }

    /// The kernel side's `IFF_ALLMULTI`.
    fn set_allmulticast(&mut self, on: bool) -> Result<(), PmdError> {
        sys::set_iface_flag(&self.iface, libc::IFF_ALLMULTI, on).map_err(|e| self.kernel_err(e))
    }

    fn allmulticast(&self) -> Result<bool, PmdError> {
        sys::iface_flags(&self.iface).map(|f| f & libc::IFF_ALLMULTI != 0).map_err(|e| self.kernel_err(e))
    }

    /// Every frame the kernel sends reaches a TAP: there is no address filter to add to.
    fn add_mac(&mut self, _mac: [u8; 6]) -> Result<(), PmdError> {
        Err(PmdError::not_supported("adding a MAC address (a TAP has no address filter)"))
    }

    fn remove_mac(&mut self, _mac: [u8; 6]) -> Result<(), PmdError> {
        Err(PmdError::not_supported("removing a MAC address (a TAP has no address filter)"))
    }

    /// With more than one queue, the kernel's flow hash ([`KernelFlowHash`]).
    fn rss_hash(&self) -> Result<(u64, u64), PmdError> {
        Ok(KernelFlowHash::rss_hash(self.queues))
    }

    fn set_rss_hash(&mut self, rss_hf: u64) -> Result<(), PmdError> {
        KernelFlowHash::set_rss_hash(self.queues, rss_hf)
    }

    /// The kernel side's `IFF_UP`.
    fn set_link(&mut self, up: bool) -> Result<(), PmdError> {
        sys::set_iface_flag(&self.iface, libc::IFF_UP, up).map_err(|e| self.kernel_err(e))
    }

    /// The MTU is the kernel interface's (a TAP has no promiscuous filter: every frame
    /// the kernel sends reaches us, whatever the soft flag says).
    fn set_mtu(&mut self, mtu: u16) -> Result<(), PmdError> {
        sys::set_mtu(&self.iface, mtu).map_err(|e| {
            PmdError::new(e.raw_os_error().unwrap_or(abi::errno::EIO), format!("iface={}: {e}", self.iface))
        })
    }
}

impl RxQueue for TapRx {
    /// The TAP descriptor: readable while the kernel has a frame for us.
    fn wake_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.fd.raw())
    }

    fn rx_burst(&mut self, burst: &mut RxBurst<'_>) {
        let port = burst.port_id();
        let (mut n, mut bytes) = (0u64, 0u64);
        while burst.room() > 0 {
            let len = match sys::read(&self.fd, &mut self.buf) {
                Ok(0) | Err(_) => break, // EAGAIN: nothing waiting
                Ok(len) => len,
            };
            let Some((hdr, frame)) = VnetHdr::split(&self.buf[..len]) else {
                self.stats.errors.add(1);
                continue;
            };
            let p = match burst.push_bytes(&self.pool, frame) {
                Ok(p) => p,
                Err(PushError::NoMbuf) => {
                    self.stats.nombuf.add(1);
                    continue;
                }
                Err(_) => {
                    self.stats.errors.add(1);
                    continue;
                }
            };
            p.set_port(port);
            // SAFETY: only offload metadata is written, the buffer fields stay.
            let m = unsafe { p.mbuf_mut() };
            hdr.to_mbuf(m);
            if m.ol_flags & abi::RX_AGGREGATED != 0 {
                self.offloads.gso_packets.fetch_add(1, Ordering::Relaxed);
            }
            if m.ol_flags & abi::RX_L4_CKSUM_NONE != 0 {
                self.offloads.csum_partial.fetch_add(1, Ordering::Relaxed);
            }
            self.offloads.largest_frame.fetch_max(frame.len() as u64, Ordering::Relaxed);
            n += 1;
            bytes += frame.len() as u64;
        }
        self.stats.packets.add(n);
        self.stats.bytes.add(bytes);
    }
}

/// Segments of one packet `tx_burst` writes (a 64 KiB TSO packet or aggregate of
/// 512-byte segments); a packet of more is dropped and counted in `oerrors`.
const MAX_TX_SEGS: usize = 128;

impl TxQueue for TapTx {
    fn tx_burst(&mut self, burst: &mut TxBurst<'_>) {
        let mut sent = 0;
        let mut ok = 0u64;
        let mut bytes = 0u64;
        for p in burst.packets() {
            let h = VnetHdr::from_mbuf(p.mbuf()).to_bytes();
            let mut iov = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; 1 + MAX_TX_SEGS];
            iov[0] = libc::iovec { iov_base: h.as_ptr() as *mut libc::c_void, iov_len: h.len() };
            let mut k = 1;
            let mut fits = true;
            for s in p.segments() {
                if k == iov.len() {
                    fits = false;
                    break;
                }
                iov[k] = libc::iovec { iov_base: s.as_ptr() as *mut libc::c_void, iov_len: s.len() };
                k += 1;
            }
            if !fits {
                // Never written cut short (the kernel would take a frame shorter than
                // its headers say): dropped and counted.
                self.stats.errors.add(1);
                sent += 1;
                continue;
            }
            match sys::writev(&self.fd, &iov[..k]) {
                Ok(_) => {
                    bytes += u64::from(p.len());
                    ok += 1;
                    sent += 1;
                }
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => break,
                Err(_) => {
                    // The kernel refused this frame (e.g. malformed GSO header): drop it.
                    self.stats.errors.add(1);
                    sent += 1;
                }
            }
        }
        // Written (or refused): free them; the rest stay the caller's.
        burst.free(sent);
        self.stats.packets.add(ok);
        self.stats.bytes.add(bytes);
    }
}

export_pmd!(Tap);
