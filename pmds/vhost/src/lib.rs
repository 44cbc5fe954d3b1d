//! `net_vhost`: the vhost-user back end of a virtio-net device, the port a QEMU
//! guest (`-netdev vhost-user`) or a DPDK `net_virtio_user` process connects to, as
//! DPDK's `net_vhost` and VPP's vhost-user interface are.
//!
//! * Control ([`ctl`], [`proto`]): the vhost-user protocol on a Unix socket, as a
//!   server (`client=0`, the default: the front end connects) or a client
//!   (`client=1`: we connect to the front end's server, and again every 0.5 s after
//!   it went away). Features offered: checksum offload both ways, TSO both ways
//!   (`tso=1`), merged receive buffers, indirect descriptors, several queue pairs
//!   (`VHOST_USER_PROTOCOL_F_MQ`; the control queue stays the front end's), virtio
//!   1.0, and acknowledgements (`REPLY_ACK`). The front end's memory table is
//!   mapped from the descriptors it passes ([`mem`]).
//! * Data path ([`vring`]): split rings, copy both ways. Queue `q` is queue pair
//!   `q`: our RX reads the guest's TX ring (`2q + 1`), our TX fills its RX ring
//!   (`2q`). The virtio-net header maps to mbuf offload flags and back (partial
//!   checksums, GSO); a partial checksum the guest did not agree to complete is
//!   completed here. While we poll, we ask the guest not to kick us; an RX queue
//!   whose lcore is about to sleep asks for kicks, which the control thread turns
//!   into a write to the queue's own eventfd (its wake-up source). When the guest
//!   asks for a signal, the control thread sends it.
//! * The guest is not trusted: every address, index, chain and size it gives is
//!   checked before a byte moves ([`vring`] lists the rules); a bad chain is counted
//!   and dropped, a bad ring index stops that ring (counted), a protocol error closes
//!   the connection (counted). A queue never waits: it tries its ring's lock and
//!   skips the burst while the control thread changes the ring.
//! * Link: up while the first queue pair runs; down when the front end goes.
//!
//! Device arguments (DPDK's names): `iface=<path>` (or `path=`; required),
//! `queues=<pairs>` (1: the most queue pairs a front end may use; the port's queue
//! counts may not exceed it), `client=0|1` (0), `tso=0|1` (0), `mac=<addr>`.

#![deny(clippy::undocumented_unsafe_blocks)]

#[cfg(target_endian = "big")]
compile_error!("net_vhost supports little-endian hosts only");

#[cfg(test)]
mod attack_tests;
pub mod ctl;
#[cfg(test)]
mod ctl_tests;
#[cfg(test)]
mod datapath_tests;
#[cfg(test)]
mod guest;
pub mod mem;
pub mod proto;
#[cfg(test)]
mod testkit;
pub mod vring;

use ctl::{Config, Shared};
use ironpath_pmd_sdk::abi;
use ironpath_pmd_sdk::ipc;
use ironpath_pmd_sdk::{
    export_pmd, DevArgs, Pmd, PmdError, Pool, ProbeCtx, QueueStats, RxBurst, RxQueue, SoftState, TxBurst, TxQueue,
};
use proto::{feat, OFFERED};
use std::ffi::CStr;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, TryLockError};
use std::thread::JoinHandle;
use vring::Faults;

const KEYS: &[&str] = &["iface", "path", "queues", "client", "tso", "mac", "require-sealed"];
/// Most queue pairs.
const MAX_PAIRS: u64 = 128;

/// The device arguments, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Args {
    path: String,
    pairs: u16,
    client: bool,
    tso: bool,
    mac: Option<[u8; 6]>,
    require_sealed: bool,
}

fn parse_args(a: &DevArgs) -> Result<Args, PmdError> {
    let path = match (a.get("iface"), a.get("path")) {
        (Some(p), None) | (None, Some(p)) => p.to_string(),
        (Some(_), Some(_)) => return Err(PmdError::invalid("give the socket as `iface=` or `path=`, not both")),
        (None, None) => {
            return Err(PmdError::invalid("device argument `iface=<socket path>` is required (the vhost-user socket)"))
        }
    };
    if path.is_empty() || path.len() > 107 || path.contains('\0') {
        return Err(PmdError::invalid(format!("device argument `iface={path}` must be 1 to 107 bytes")));
    }
    let dir = std::path::Path::new(&path).parent().filter(|d| !d.as_os_str().is_empty());
    if dir.is_some_and(|d| !d.is_dir()) {
        return Err(PmdError::invalid(format!("device argument `iface={path}`: its directory does not exist")));
    }
    Ok(Args {
        path,
        pairs: a.get_u64("queues", 1, 1, MAX_PAIRS)? as u16,
        client: a.get_bool("client", false)?,
        tso: a.get_bool("tso", false)?,
        mac: a.get_mac("mac")?,
        require_sealed: a.get_bool("require-sealed", true)?,
    })
}

/// The features we offer with these arguments.
fn features(a: &Args) -> u64 {
    let tso = proto::bits(&[feat::GUEST_TSO4, feat::GUEST_TSO6, feat::HOST_TSO4, feat::HOST_TSO6]);
    if a.tso {
        OFFERED
    } else {
        OFFERED & !tso
    }
}

/// A device.
pub struct Vhost {
    a: Args,
    name: String,
    soft: SoftState,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// `start` bound the socket file (removed at `stop`; a file another process
    /// serves is never touched).
    bound: bool,
    rx_faults: Vec<Arc<Faults>>,
    tx_faults: Vec<Arc<Faults>>,
}

impl Vhost {
    fn stop_thread(&mut self) {
        if let Some(t) = self.thread.take() {
            self.shared.stop.store(true, Ordering::Release);
            let _ = t.join();
            self.shared.stop.store(false, Ordering::Release);
        }
        if std::mem::take(&mut self.bound) {
            let _ = std::fs::remove_file(&self.a.path);
        }
    }
}

impl Drop for Vhost {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

fn fresh_faults(all: &mut Vec<Arc<Faults>>, qid: u16) -> Arc<Faults> {
    let i = usize::from(qid);
    if all.len() <= i {
        all.resize_with(i + 1, Default::default);
    }
    all[i] = Arc::new(Faults::default());
    all[i].clone()
}

/// Lock ring `i` for a burst, or count the burst skipped (the control thread holds
/// it). A ring whose last user panicked is used as it is: its state is indices and
/// addresses, each checked before use.
#[inline(always)]
fn try_ring<'a>(shared: &'a Shared, i: usize, faults: &Faults) -> Option<std::sync::MutexGuard<'a, vring::Vring>> {
    match shared.rings[i].try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(TryLockError::WouldBlock) => {
            faults.busy.add(1);
            None
        }
    }
}

/// After a burst: the guest asked for a signal; the control thread sends it.
#[inline(always)]
fn ask_call(shared: &Shared, i: usize, v: &mut vring::Vring) {
    if std::mem::take(&mut v.want_call) && !shared.call_pending[i].swap(true, Ordering::AcqRel) {
        ipc::poke(shared.wake.as_raw_fd());
    }
}

/// An RX queue: the guest's TX ring of its queue pair.
pub struct VhostRx {
    ring: usize,
    /// About to sleep: the guest was asked to kick (`wake_arm`).
    armed: bool,
    /// Disarmed while the control thread held the ring: its used flags still ask
    /// for kicks, set back at the next burst.
    restore: bool,
    shared: Arc<Shared>,
    pool: Pool,
    stats: Arc<QueueStats>,
    faults: Arc<Faults>,
}

impl RxQueue for VhostRx {
    #[inline]
    fn rx_burst(&mut self, burst: &mut RxBurst<'_>) {
        let Some(mut v) = try_ring(&self.shared, self.ring, &self.faults) else { return };
        if self.restore {
            v.want_kicks(false);
            self.restore = false;
        }
        if !v.ready() {
            return;
        }
        let (p, b, nombuf) = v.dequeue(burst, &self.pool, &self.faults);
        ask_call(&self.shared, self.ring, &mut v);
        drop(v);
        if p > 0 {
            self.stats.packets.add(p);
            self.stats.bytes.add(b);
        }
        if nombuf > 0 {
            self.stats.nombuf.add(nombuf);
        }
    }

    /// Our eventfd for the queue pair, which the control thread writes when the
    /// guest kicks its TX ring while we sleep (the same across connections).
    fn wake_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.shared.rx_wake[self.ring / 2].as_raw_fd())
    }

    /// Arming asks the guest to kick its TX ring (its used flags) and the control
    /// thread to watch the kick; disarming asks the guest to stop. No arming while
    /// the front end gave no kick eventfd (nothing would wake us) or the control
    /// thread holds the ring (the host polls and tries again).
    fn wake_arm(&mut self, on: bool) -> bool {
        let q = self.ring / 2;
        if !on {
            if self.armed {
                self.shared.rx_armed[q].store(false, Ordering::Release);
                match self.shared.rings[self.ring].try_lock() {
                    Ok(mut v) => v.want_kicks(false),
                    Err(TryLockError::Poisoned(e)) => e.into_inner().want_kicks(false),
                    Err(TryLockError::WouldBlock) => self.restore = true,
                }
                self.armed = false;
            }
            return true;
        }
        // Arming again is allowed (the control thread disarms the pair after the
        // one wake-up it sends).
        if !self.shared.kickable[self.ring].load(Ordering::Acquire) {
            return false;
        }
        let mut v = match self.shared.rings[self.ring].try_lock() {
            Ok(v) => v,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return false,
        };
        v.want_kicks(true);
        self.restore = false;
        drop(v);
        self.shared.rx_armed[q].store(true, Ordering::Release);
        // The flags stored before the host's last poll loads the guest's index (a
        // store then a load: a full fence), the guest having its own between its
        // index store and its flags load: either that poll finds the packet, or the
        // guest sees the flags clear and kicks.
        std::sync::atomic::fence(Ordering::SeqCst);
        // The control thread adds the kick to what it waits on.
        ipc::poke(self.shared.wake.as_raw_fd());
        self.armed = true;
        true
    }
}

/// A TX queue: the guest's RX ring of its queue pair.
pub struct VhostTx {
    ring: usize,
    shared: Arc<Shared>,
    stats: Arc<QueueStats>,
    faults: Arc<Faults>,
}

impl TxQueue for VhostTx {
    #[inline]
    fn tx_burst(&mut self, burst: &mut TxBurst<'_>) {
        let Some(mut v) = try_ring(&self.shared, self.ring, &self.faults) else { return };
        if !v.ready() {
            return;
        }
        let (p, b) = v.enqueue(burst, &self.faults);
        ask_call(&self.shared, self.ring, &mut v);
        drop(v);
        if p > 0 {
            self.stats.packets.add(p);
            self.stats.bytes.add(b);
        }
    }
}

impl Pmd for Vhost {
    const NAME: &'static CStr = c"net_vhost";
    const DEVARGS_HELP: &'static CStr =
        c"iface=<socket path> (or path=; required),queues=<1..128> (1),client=0|1 (0),tso=0|1 (0),mac=<xx:xx:xx:xx:xx:xx>,require-sealed=yes|no (yes: refuse guest memory that could shrink under us)";
    type Rx = VhostRx;
    type Tx = VhostTx;

    const CHECKS_ARGS: bool = true;

    fn check_args(ctx: &ProbeCtx<'_>) -> Result<(), PmdError> {
        parse_args(&DevArgs::parse(ctx.args, KEYS)?).map(drop)
    }

    fn probe(ctx: &ProbeCtx<'_>) -> Result<Self, PmdError> {
        let a = parse_args(&DevArgs::parse(ctx.args, KEYS)?)?;
        let mac = a.mac.unwrap_or_else(|| SoftState::mac_from_name(0x56, ctx.name));
        let shared = Shared::new(a.pairs)
            .map_err(|e| PmdError::new(e.raw_os_error().unwrap_or(abi::errno::EIO), format!("eventfd: {e}")))?;
        Ok(Vhost {
            a,
            name: ctx.name.to_string(),
            soft: SoftState::new(mac, 9000),
            shared: Arc::new(shared),
            thread: None,
            bound: false,
            rx_faults: Vec::new(),
            tx_faults: Vec::new(),
        })
    }

    fn info(&self) -> abi::DevInfo {
        abi::DevInfo {
            max_rx_queues: self.a.pairs,
            max_tx_queues: self.a.pairs,
            min_desc: 1,
            max_desc: 32768,
            min_mtu: 68,
            max_mtu: 9000,
            mtu: self.soft.mtu,
            max_rx_pktlen: vring::MAX_FRAME as u32,
            rx_offload_capa: vring::rx_offload_capa(),
            tx_offload_capa: abi::TX_TCP_CKSUM | abi::TX_UDP_CKSUM | if self.a.tso { abi::TX_TCP_SEG } else { 0 },
            ..Default::default()
        }
    }

    fn configure(&mut self, conf: &abi::DevConf) -> Result<(), PmdError> {
        if self.thread.is_some() {
            return Err(PmdError::new(abi::errno::EBUSY, "stop the port before configuring it"));
        }
        if conf.mtu != 0 {
            self.set_mtu(conf.mtu)?;
        }
        Ok(())
    }

    fn rx_queue_setup(&mut self, qid: u16, _nb: u16, pool: Pool, stats: Arc<QueueStats>) -> Result<VhostRx, PmdError> {
        let faults = fresh_faults(&mut self.rx_faults, qid);
        Ok(VhostRx {
            ring: 2 * usize::from(qid) + 1,
            armed: false,
            restore: false,
            shared: self.shared.clone(),
            pool,
            stats,
            faults,
        })
    }

    fn tx_queue_setup(&mut self, qid: u16, _nb: u16, stats: Arc<QueueStats>) -> Result<VhostTx, PmdError> {
        let faults = fresh_faults(&mut self.tx_faults, qid);
        Ok(VhostTx { ring: 2 * usize::from(qid), shared: self.shared.clone(), stats, faults })
    }

    /// Start the control thread: a server listens on its socket here (a socket
    /// another process serves is refused), a client starts connecting.
    fn start(&mut self) -> Result<(), PmdError> {
        if self.thread.is_some() {
            return Ok(());
        }
        let listener = if self.a.client {
            None
        } else {
            Some(ctl::listen(&self.a.path).map_err(|e| {
                let hint = match e.raw_os_error() {
                    Some(libc::EADDRINUSE) => " (another process serves it: pick another iface=)",
                    _ => "",
                };
                PmdError::new(
                    e.raw_os_error().unwrap_or(abi::errno::EIO),
                    format!("iface={}: cannot listen: {e}{hint}", self.a.path),
                )
            })?)
        };
        let cfg = Config {
            path: self.a.path.clone(),
            client: self.a.client,
            features: features(&self.a),
            pairs: self.a.pairs,
            name: self.name.clone(),
            require_sealed: self.a.require_sealed,
        };
        self.bound = listener.is_some();
        let shared = self.shared.clone();
        let t = std::thread::Builder::new()
            .name(format!("vhost-{}", self.name))
            .spawn(move || ctl::run(cfg, shared, listener))
            .map_err(|e| PmdError::new(abi::errno::EIO, format!("cannot start the control thread: {e}")))?;
        self.thread = Some(t);
        Ok(())
    }

    /// Close the connection (the rings stop) and end the control thread.
    fn stop(&mut self) -> Result<(), PmdError> {
        self.stop_thread();
        Ok(())
    }

    fn link(&self) -> abi::Link {
        let up = self.shared.up.load(Ordering::Acquire) && !self.soft.link_down;
        abi::Link { speed_mbps: 10000, up: u8::from(up), full_duplex: 1, autoneg: 0, reserved: 0 }
    }

    fn xstats(&self) -> Vec<(String, u64)> {
        let c = &self.shared.c;
        let sum = |v: &[Arc<Faults>], f: fn(&Faults) -> u64| v.iter().map(|x| f(x)).sum::<u64>();
        vec![
            ("connected".to_string(), u64::from(self.shared.up.load(Ordering::Acquire))),
            ("connects".to_string(), c.connects.get()),
            ("disconnects".to_string(), c.disconnects.get()),
            ("protocol_errors".to_string(), c.protocol_errors.get()),
            ("refused".to_string(), c.refused.get()),
            ("connect_failures".to_string(), c.connect_failures.get()),
            ("unknown_requests".to_string(), c.unknown_requests.get()),
            ("unsealed_regions".to_string(), c.unsealed_regions.get()),
            ("bad_call_fds".to_string(), c.bad_call_fds.get()),
            ("bad_kick_fds".to_string(), c.bad_kick_fds.get()),
            ("kick_wakeups".to_string(), c.kick_wakeups.get()),
            ("calls".to_string(), c.calls.get()),
            ("rx_bad_desc".to_string(), sum(&self.rx_faults, |f| f.bad_desc.get())),
            ("rx_bad_ring_index".to_string(), sum(&self.rx_faults, |f| f.bad_ring_index.get())),
            ("rx_busy".to_string(), sum(&self.rx_faults, |f| f.busy.get())),
            ("rx_gso_packets".to_string(), sum(&self.rx_faults, |f| f.gso.get())),
            ("rx_partial_csum".to_string(), sum(&self.rx_faults, |f| f.partial_csum.get())),
            ("tx_bad_desc".to_string(), sum(&self.tx_faults, |f| f.bad_desc.get())),
            ("tx_bad_ring_index".to_string(), sum(&self.tx_faults, |f| f.bad_ring_index.get())),
            ("tx_ring_full".to_string(), sum(&self.tx_faults, |f| f.ring_full.get())),
            ("tx_too_long".to_string(), sum(&self.tx_faults, |f| f.too_long.get())),
            ("tx_busy".to_string(), sum(&self.tx_faults, |f| f.busy.get())),
            ("tx_gso_packets".to_string(), sum(&self.tx_faults, |f| f.gso.get())),
        ]
    }

    fn soft(&self) -> Option<&SoftState> {
        Some(&self.soft)
    }

    fn soft_mut(&mut self) -> Option<&mut SoftState> {
        Some(&mut self.soft)
    }
}

export_pmd!(Vhost);

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Result<Args, PmdError> {
        parse_args(&DevArgs::parse(s, KEYS)?)
    }

    #[test]
    fn arguments_follow_dpdk_and_name_what_is_wrong() {
        let a = args("iface=/tmp/v.sock").unwrap();
        assert_eq!((a.pairs, a.client, a.tso), (1, false, false));
        let a = args("path=/tmp/v.sock,queues=4,client=1,tso=1").unwrap();
        assert_eq!((a.path.as_str(), a.pairs, a.client, a.tso), ("/tmp/v.sock", 4, true, true));
        assert!(args("").unwrap_err().msg.contains("iface"));
        assert!(args("iface=/tmp/a,path=/tmp/b").unwrap_err().msg.contains("not both"));
        assert!(args("iface=/no/such/dir/v.sock").unwrap_err().msg.contains("directory"));
        assert!(args("iface=/tmp/v,queues=0").unwrap_err().msg.contains("queues"));
        assert!(args("iface=/tmp/v,socket=x").unwrap_err().msg.contains("socket"));
        let off = features(&args("iface=/tmp/v").unwrap());
        assert!(!proto::has(off, feat::GUEST_TSO4) && proto::has(off, feat::MRG_RXBUF));
        assert!(proto::has(features(&args("iface=/tmp/v,tso=1").unwrap()), feat::HOST_TSO4));
    }
}
