//! Ports: instances of loaded drivers, created from DPDK-style device arguments
//! (`net_null0,size=64`), with a control API (configure, queues, start/stop/close,
//! stats, xstats, link, MAC, MTU, promiscuous) and copyable fast-path queue handles.
//!
//! The fast path ([`RxQ`], [`TxQ`]: one burst call through a driver's pointer) lives
//! in `fastpath`, apart from the control path, as DPDK keeps `rte_eth_rx_burst` apart
//! from `rte_eth_dev_configure`; the device settings (stats, link, MAC, modes, RSS)
//! are in `settings`.

use crate::loader::{Driver, Registry};
use crate::mempool::Mempool;
use fastpath::Lease;
use ironpath_abi as abi;
use ironpath_abi::DevOps;
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Port identifier (index in the runtime's port table).
pub type PortId = u16;

/// Errors of port operations.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// No loaded driver matches the instance name.
    #[error("no driver for device `{name}`: loaded drivers: {loaded}{hint}")]
    NoDriver {
        /// Instance name.
        name: String,
        /// Loaded driver names.
        loaded: String,
        /// " (did you mean ...?)" or empty.
        hint: String,
    },
    /// The plugin that provides the driver was refused when it was loaded.
    #[error("no driver for device `{name}`: driver {driver} was refused: {why}")]
    Refused {
        /// Instance name.
        name: String,
        /// Driver name.
        driver: String,
        /// The loader's refusal.
        why: String,
    },
    /// The driver could not make the device: it refused the device arguments (its
    /// message names the argument; the usage line follows), or the arguments were
    /// fine and something else failed (no such interface, no permission: the
    /// driver's message alone, one line).
    #[error("{name}: {msg}{}", help.as_ref().map_or(String::new(), |h| format!("\n  usage: {name},{h}")))]
    Probe {
        /// Instance name.
        name: String,
        /// Driver's message.
        msg: String,
        /// Driver's device-argument help, when the arguments were refused.
        help: Option<String>,
    },
    /// An `-a` PCI address that names no device or whose ids cannot be read.
    #[error(transparent)]
    Pci(#[from] crate::pci::PciError),
    /// No loaded driver claims the PCI function's ids.
    #[error("-a {addr}: no loaded driver drives PCI device {addr} ({id}); drivers of PCI devices: {claimed}")]
    NoPciDriver {
        /// The address.
        addr: String,
        /// Its `vendor:device` ids.
        id: String,
        /// Loaded PCI drivers and their ids, or a hint.
        claimed: String,
    },
    /// Malformed devargs string.
    #[error("bad device string `{0}`: expected NAME[,KEY=VALUE...] such as `net_null0,size=64`")]
    BadDevargs(String),
    /// A port with this name exists.
    #[error("a port named `{0}` already exists")]
    Exists(String),
    /// Too many ports.
    #[error("too many ports (limit {0})")]
    TooMany(usize),
    /// No such port.
    #[error("no port {0}")]
    NoPort(PortId),
    /// The driver does not implement the operation.
    #[error("port {port}: {op} is not supported by driver {driver}")]
    NotSupported {
        /// Port.
        port: PortId,
        /// Operation.
        op: &'static str,
        /// Driver.
        driver: String,
    },
    /// The driver returned an error.
    #[error("port {port}: {op} failed: {}", if msg.is_empty() { err.to_string() } else { msg.clone() })]
    Errno {
        /// Port.
        port: PortId,
        /// Operation.
        op: &'static str,
        /// Decoded errno.
        err: std::io::Error,
        /// The driver's own message, when it gave one.
        msg: String,
    },
    /// Wrong state for the operation.
    #[error("port {port}: {op}: {why}")]
    State {
        /// Port.
        port: PortId,
        /// Operation.
        op: &'static str,
        /// What state is needed.
        why: String,
    },
}

/// Life-cycle state of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortState {
    /// Probed, not configured.
    Probed,
    /// Configured (queues may be set up), stopped.
    Stopped,
    /// Started.
    Started,
}

/// One port.
pub struct Port {
    id: PortId,
    name: String,
    devargs: String,
    /// What the driver's probe got after the name (to probe again on reset).
    probe_args: String,
    driver: Arc<Driver>,
    dev: *mut c_void,
    ops: DevOps,
    state: PortState,
    rxqs: Vec<Option<abi::RxQueue>>,
    txqs: Vec<Option<abi::TxQueue>>,
    rx_pools: Vec<Option<Mempool>>,
    /// Descriptors each set-up queue was given (`show rxq|txq info`).
    rx_desc: Vec<u16>,
    tx_desc: Vec<u16>,
    rx_leases: Vec<Arc<Lease>>,
    tx_leases: Vec<Arc<Lease>>,
    closed: bool,
    /// Administrative state (VPP's `set interface state`): while false, the
    /// pipeline's port nodes drop what the port receives and what is sent to it.
    admin_up: Arc<AtomicBool>,
}

// SAFETY: the control API takes `&mut self`, so control calls are serialised; drivers
// must accept control calls from any thread (ABI contract).
unsafe impl Send for Port {}

/// Everything `show port info` prints.
#[derive(Clone, Debug)]
pub struct PortInfo {
    /// Port id.
    pub id: PortId,
    /// Instance name.
    pub name: String,
    /// Full device string.
    pub devargs: String,
    /// Driver name.
    pub driver: String,
    /// Plugin file.
    pub plugin: std::path::PathBuf,
    /// State.
    pub state: PortState,
    /// Capabilities.
    pub dev_info: abi::DevInfo,
    /// Configured RX queues.
    pub nb_rxq: u16,
    /// Configured TX queues.
    pub nb_txq: u16,
    /// MAC address, if the driver reports one.
    pub mac: Option<[u8; 6]>,
    /// Promiscuous mode, if known.
    pub promisc: Option<bool>,
    /// All-multicast mode, if known.
    pub allmulti: Option<bool>,
}

fn errno_err(port: PortId, op: &'static str, rc: i32) -> PortError {
    PortError::Errno { port, op, err: std::io::Error::from_raw_os_error(-rc), msg: String::new() }
}

unsafe extern "C" fn host_log(level: u32, msg: *const c_char) {
    if msg.is_null() {
        return;
    }
    // SAFETY: the plugin passes a NUL-terminated string (ABI contract).
    let m = unsafe { CStr::from_ptr(msg) }.to_string_lossy();
    let lvl = match level {
        0 => log::Level::Error,
        1 => log::Level::Warn,
        2 => log::Level::Info,
        _ => log::Level::Debug,
    };
    log::log!(target: "pmd", lvl, "{m}");
}

static HOST_API: abi::HostApi = abi::HostApi {
    size: std::mem::size_of::<abi::HostApi>() as u32,
    abi_major: abi::ABI_MAJOR,
    abi_minor: abi::ABI_MINOR,
    log: Some(host_log),
};

/// The driver's op `$slot`, or the error a closed port or a missing op gives (a
/// missing op means "not supported", as in DPDK's `eth_dev_ops`).
macro_rules! op {
    ($self:ident, $slot:ident, $name:expr) => {
        match $self.ops.$slot {
            _ if $self.closed => {
                return Err(PortError::State { port: $self.id, op: $name, why: "the port is closed".into() })
            }
            Some(f) => f,
            None => {
                return Err(PortError::NotSupported { port: $self.id, op: $name, driver: $self.driver.name.clone() })
            }
        }
    };
}

// After `op!`, which `settings` uses.
mod fastpath;
mod settings;
/// In-process transmit queues for tests (the `testing` feature of `ironpath-eal`).
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use fastpath::{RxQ, TxQ};

impl Port {
    /// Probe a device from a devargs string using the drivers in `reg`.
    pub(crate) fn probe(reg: &Registry, id: PortId, devargs: &str) -> Result<Port, PortError> {
        let devargs = devargs.trim();
        let (name, args) = match devargs.split_once(',') {
            Some((n, a)) => (n.trim(), a.trim()),
            None => (devargs, ""),
        };
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(PortError::BadDevargs(devargs.to_string()));
        }
        let Some(driver) = reg.find_for_instance(name) else {
            if let Some((driver, why)) = reg.refusal_for(name) {
                return Err(PortError::Refused { name: name.to_string(), driver, why: why.to_string() });
            }
            let names: Vec<&str> = reg.drivers().iter().map(|d| d.name.as_str()).collect();
            let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
            let hint = ironpath_util::suggest::did_you_mean(stem, names.iter().copied());
            return Err(PortError::NoDriver {
                name: name.to_string(),
                loaded: if names.is_empty() { "none (check -d or IRONPATH_PMD_PATH)".into() } else { names.join(", ") },
                hint,
            });
        };
        Self::probe_driver(driver, id, name, args, devargs)
    }

    /// Probe a device with a given driver: `name` and `args` go to the driver's probe;
    /// `devargs` is what the user wrote (shown by `show port info`).
    pub(crate) fn probe_driver(
        driver: &Arc<Driver>,
        id: PortId,
        name: &str,
        args: &str,
        devargs: &str,
    ) -> Result<Port, PortError> {
        let driver = driver.clone();
        let cname = CString::new(name).map_err(|_| PortError::BadDevargs(devargs.to_string()))?;
        let cargs = CString::new(args).map_err(|_| PortError::BadDevargs(devargs.to_string()))?;
        let mut out = abi::Device { dev: std::ptr::null_mut(), ops: std::ptr::null() };
        let mut err = abi::ErrMsg { msg: [0; abi::ERR_MSG_LEN] };
        // SAFETY: `probe` comes from a checked plugin; all pointers are valid for the call.
        let rc = unsafe { (driver.probe)(&HOST_API, cname.as_ptr(), cargs.as_ptr(), &mut out, &mut err) };
        // EINVAL: the driver refused the arguments, so their usage helps; any other
        // failure (ENODEV, EPERM, EBUSY ...) is not about their syntax.
        let help = (rc == -abi::errno::EINVAL).then(|| driver.help.clone());
        let probe_err = |msg: String| PortError::Probe { name: name.to_string(), msg, help };
        if rc != 0 || out.dev.is_null() || out.ops.is_null() {
            err.msg[abi::ERR_MSG_LEN - 1] = 0;
            // SAFETY: NUL-terminated (forced above).
            let m = unsafe { CStr::from_ptr(err.msg.as_ptr()) }.to_string_lossy().into_owned();
            let m = if m.is_empty() {
                format!("probe failed: {}", std::io::Error::from_raw_os_error(rc.saturating_neg().max(1)))
            } else {
                m
            };
            return Err(probe_err(m));
        }
        // Copy the plugin's table into a host-sized one: slots the plugin does not
        // know (an older minor) stay NULL.
        // SAFETY: DevOps is integers and Option<fn>s: all-zero is a valid value (NULLs).
        let mut ops: DevOps = unsafe { std::mem::zeroed() };
        // SAFETY: `out.ops` points to the plugin's table, `size` bytes long (its first
        // field); we copy at most our own size.
        unsafe {
            let theirs = (*out.ops).size as usize;
            let n = theirs.min(std::mem::size_of::<DevOps>());
            std::ptr::copy_nonoverlapping(out.ops.cast::<u8>(), (&mut ops as *mut DevOps).cast::<u8>(), n);
        }
        Ok(Port {
            id,
            name: name.to_string(),
            devargs: devargs.to_string(),
            probe_args: args.to_string(),
            driver,
            dev: out.dev,
            ops,
            state: PortState::Probed,
            rxqs: Vec::new(),
            txqs: Vec::new(),
            rx_pools: Vec::new(),
            rx_desc: Vec::new(),
            tx_desc: Vec::new(),
            rx_leases: Vec::new(),
            tx_leases: Vec::new(),
            closed: false,
            admin_up: Arc::new(AtomicBool::new(true)),
        })
    }

    /// Is the port administratively up (the default)?
    pub fn admin_up(&self) -> bool {
        self.admin_up.load(Ordering::Relaxed)
    }

    /// Set the administrative state: down, the pipeline's port nodes drop what the
    /// port receives (still taking it from the queues) and what is sent to it, each
    /// counted (`admin_down`); the device and its link are left as they are.
    pub fn set_admin_up(&self, up: bool) {
        self.admin_up.store(up, Ordering::Relaxed);
    }

    /// The flag port nodes read once per burst.
    pub fn admin_flag(&self) -> Arc<AtomicBool> {
        self.admin_up.clone()
    }

    /// The error for a failed op, with the driver's message if it has one.
    fn fail(&self, op: &'static str, rc: i32) -> PortError {
        let mut e = errno_err(self.id, op, rc);
        if let (Some(f), false) = (self.ops.last_error, self.dev.is_null()) {
            let mut m = abi::ErrMsg { msg: [0; abi::ERR_MSG_LEN] };
            // SAFETY: live device; `m` is a valid buffer, NUL-terminated below.
            unsafe { f(self.dev, &mut m) };
            m.msg[abi::ERR_MSG_LEN - 1] = 0;
            // SAFETY: NUL-terminated (forced above).
            let text = unsafe { CStr::from_ptr(m.msg.as_ptr()) }.to_string_lossy().into_owned();
            if let PortError::Errno { msg, .. } = &mut e {
                *msg = text;
            }
        }
        e
    }

    /// Port id.
    pub fn id(&self) -> PortId {
        self.id
    }

    /// Instance name (`net_null0`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The driver.
    pub fn driver(&self) -> &Arc<Driver> {
        &self.driver
    }

    /// State.
    pub fn state(&self) -> PortState {
        self.state
    }

    /// Number of configured RX queues.
    pub fn nb_rxq(&self) -> u16 {
        self.rxqs.len() as u16
    }

    /// Number of configured TX queues.
    pub fn nb_txq(&self) -> u16 {
        self.txqs.len() as u16
    }

    /// Device capabilities.
    pub fn dev_info(&self) -> Result<abi::DevInfo, PortError> {
        let f = op!(self, dev_info, "dev_info");
        let mut info = abi::DevInfo::default();
        // SAFETY: `dev` is live (port not closed) and `info` a valid out-pointer.
        let rc = unsafe { f(self.dev, &mut info) };
        if rc < 0 {
            return Err(self.fail("dev_info", rc));
        }
        Ok(info)
    }

    /// The first queue whose fast-path handle is still out, if any.
    fn leased(&self) -> Option<String> {
        if let Some(q) = self.rx_leases.iter().position(|l| Arc::strong_count(l) > 1) {
            return Some(format!("RX queue {q}"));
        }
        self.tx_leases.iter().position(|l| Arc::strong_count(l) > 1).map(|q| format!("TX queue {q}"))
    }

    fn not_leased(&self, op: &'static str) -> Result<(), PortError> {
        match self.leased() {
            Some(q) => Err(PortError::State {
                port: self.id,
                op,
                why: format!("{q} is still in use by a forwarding thread (stop forwarding first)"),
            }),
            None => Ok(()),
        }
    }

    fn need(&self, op: &'static str, ok: bool, why: &str) -> Result<(), PortError> {
        if ok {
            Ok(())
        } else {
            Err(PortError::State { port: self.id, op, why: why.to_string() })
        }
    }

    /// Configure `nb_rxq` RX and `nb_txq` TX queues (port must be stopped). Releases
    /// queues set up before.
    pub fn configure(&mut self, nb_rxq: u16, nb_txq: u16) -> Result<(), PortError> {
        self.need("configure", self.state != PortState::Started, "stop the port first")?;
        self.not_leased("configure")?;
        let info = self.dev_info()?;
        if nb_rxq == 0 && nb_txq == 0 {
            return Err(PortError::State { port: self.id, op: "configure", why: "need at least one queue".into() });
        }
        if nb_rxq > info.max_rx_queues || nb_txq > info.max_tx_queues {
            return Err(PortError::State {
                port: self.id,
                op: "configure",
                why: format!(
                    "{nb_rxq} RX / {nb_txq} TX queues requested, driver {} allows at most {} / {}",
                    self.driver.name, info.max_rx_queues, info.max_tx_queues
                ),
            });
        }
        self.release_queues();
        let f = op!(self, dev_configure, "dev_configure");
        let conf = abi::DevConf { nb_rx_queues: nb_rxq, nb_tx_queues: nb_txq, port_id: self.id, ..Default::default() };
        // SAFETY: live device, valid config pointer.
        let rc = unsafe { f(self.dev, &conf) };
        if rc < 0 {
            return Err(self.fail("configure", rc));
        }
        self.rxqs = (0..nb_rxq).map(|_| None).collect();
        self.txqs = (0..nb_txq).map(|_| None).collect();
        self.rx_pools = (0..nb_rxq).map(|_| None).collect();
        self.rx_desc = vec![0; usize::from(nb_rxq)];
        self.tx_desc = vec![0; usize::from(nb_txq)];
        self.rx_leases = (0..nb_rxq).map(|_| Arc::new(Lease)).collect();
        self.tx_leases = (0..nb_txq).map(|_| Arc::new(Lease)).collect();
        self.state = PortState::Stopped;
        Ok(())
    }

    fn release_queues(&mut self) {
        for q in 0..self.rxqs.len() {
            if self.rxqs[q].take().is_some() {
                if let Some(f) = self.ops.rx_queue_release {
                    // SAFETY: live device; queue q was set up.
                    unsafe { f(self.dev, q as u16) };
                }
            }
        }
        for q in 0..self.txqs.len() {
            if self.txqs[q].take().is_some() {
                if let Some(f) = self.ops.tx_queue_release {
                    // SAFETY: live device; queue q was set up.
                    unsafe { f(self.dev, q as u16) };
                }
            }
        }
        self.rx_pools.iter_mut().for_each(|p| *p = None);
    }

    /// Set up RX queue `qid` with `nb_desc` descriptors receiving into `pool`.
    pub fn rx_queue_setup(&mut self, qid: u16, nb_desc: u16, pool: &Mempool) -> Result<(), PortError> {
        self.need("rx_queue_setup", self.state == PortState::Stopped, "configure the port and stop it first")?;
        self.need(
            "rx_queue_setup",
            (qid as usize) < self.rxqs.len(),
            &format!("queue {qid} not configured (have {})", self.rxqs.len()),
        )?;
        let f = op!(self, rx_queue_setup, "rx_queue_setup");
        if self.rxqs[qid as usize].take().is_some() {
            if let Some(r) = self.ops.rx_queue_release {
                // SAFETY: live device, queue was set up.
                unsafe { r(self.dev, qid) };
            }
        }
        let mut q = abi::RxQueue { queue: std::ptr::null_mut(), rx_burst: None };
        // SAFETY: live device; the pool outlives the queue (kept in `rx_pools`).
        let rc = unsafe { f(self.dev, qid, nb_desc, pool.as_abi(), &mut q) };
        if rc < 0 {
            return Err(self.fail("rx_queue_setup", rc));
        }
        if q.rx_burst.is_none() {
            return Err(PortError::NotSupported { port: self.id, op: "rx_burst", driver: self.driver.name.clone() });
        }
        self.rxqs[qid as usize] = Some(q);
        self.rx_pools[qid as usize] = Some(pool.clone());
        self.rx_desc[qid as usize] = nb_desc;
        Ok(())
    }

    /// Set up TX queue `qid` with `nb_desc` descriptors.
    pub fn tx_queue_setup(&mut self, qid: u16, nb_desc: u16) -> Result<(), PortError> {
        self.need("tx_queue_setup", self.state == PortState::Stopped, "configure the port and stop it first")?;
        self.need(
            "tx_queue_setup",
            (qid as usize) < self.txqs.len(),
            &format!("queue {qid} not configured (have {})", self.txqs.len()),
        )?;
        let f = op!(self, tx_queue_setup, "tx_queue_setup");
        if self.txqs[qid as usize].take().is_some() {
            if let Some(r) = self.ops.tx_queue_release {
                // SAFETY: live device, queue was set up.
                unsafe { r(self.dev, qid) };
            }
        }
        let mut q = abi::TxQueue { queue: std::ptr::null_mut(), tx_burst: None };
        // SAFETY: live device, valid out-pointer.
        let rc = unsafe { f(self.dev, qid, nb_desc, &mut q) };
        if rc < 0 {
            return Err(self.fail("tx_queue_setup", rc));
        }
        if q.tx_burst.is_none() {
            return Err(PortError::NotSupported { port: self.id, op: "tx_burst", driver: self.driver.name.clone() });
        }
        self.txqs[qid as usize] = Some(q);
        self.tx_desc[qid as usize] = nb_desc;
        Ok(())
    }

    /// RX queue `qid` as set up: its pool and descriptor count (`None`: not set up).
    pub fn rxq_info(&self, qid: u16) -> Option<(Mempool, u16)> {
        let i = usize::from(qid);
        self.rxqs.get(i)?.as_ref()?;
        Some((self.rx_pools.get(i)?.clone()?, self.rx_desc.get(i).copied().unwrap_or(0)))
    }

    /// TX queue `qid` as set up: its descriptor count (`None`: not set up).
    pub fn txq_info(&self, qid: u16) -> Option<u16> {
        let i = usize::from(qid);
        self.txqs.get(i)?.as_ref()?;
        self.tx_desc.get(i).copied()
    }

    /// Start the port (every configured queue must be set up).
    pub fn start(&mut self) -> Result<(), PortError> {
        if self.state == PortState::Started {
            return Ok(());
        }
        self.need("start", self.state == PortState::Stopped, "configure the port first")?;
        if let Some(q) = self.rxqs.iter().position(Option::is_none) {
            return Err(PortError::State { port: self.id, op: "start", why: format!("RX queue {q} is not set up") });
        }
        if let Some(q) = self.txqs.iter().position(Option::is_none) {
            return Err(PortError::State { port: self.id, op: "start", why: format!("TX queue {q} is not set up") });
        }
        if let Some(f) = self.ops.dev_start {
            // SAFETY: live device.
            let rc = unsafe { f(self.dev) };
            if rc < 0 {
                return Err(self.fail("start", rc));
            }
        }
        self.state = PortState::Started;
        Ok(())
    }

    /// Stop the port. Queue handles must no longer be used for bursts.
    pub fn stop(&mut self) -> Result<(), PortError> {
        if self.state != PortState::Started {
            return Ok(());
        }
        self.not_leased("stop")?;
        if let Some(f) = self.ops.dev_stop {
            // SAFETY: live device.
            let rc = unsafe { f(self.dev) };
            if rc < 0 {
                return Err(self.fail("stop", rc));
            }
        }
        self.state = PortState::Stopped;
        Ok(())
    }

    /// Closes the port and probes its device again with the same arguments and id
    /// (DPDK's `rte_eth_dev_reset`): queues and settings are lost. Refused while
    /// the port is started.
    pub(crate) fn reprobe(&mut self) -> Result<Port, PortError> {
        if self.state == PortState::Started {
            return Err(PortError::State { port: self.id, op: "reset", why: "stop the port first".into() });
        }
        self.close()?;
        Port::probe_driver(
            &self.driver.clone(),
            self.id,
            &self.name.clone(),
            &self.probe_args.clone(),
            &self.devargs.clone(),
        )
    }

    /// Stop, release queues and close the device. Idempotent. Refused while a queue
    /// handle is out.
    pub fn close(&mut self) -> Result<(), PortError> {
        if self.closed {
            return Ok(());
        }
        self.not_leased("close")?;
        let _ = self.stop();
        self.release_queues();
        if let Some(f) = self.ops.dev_close {
            // SAFETY: live device; it is not used after this.
            unsafe { f(self.dev) };
        }
        self.closed = true;
        self.dev = std::ptr::null_mut();
        Ok(())
    }

    /// The fast-path handle of RX queue `qid`: `None` unless the port is started and
    /// no other handle of that queue is out. While the handle lives, the port refuses
    /// to stop, reconfigure or close.
    pub fn rx_queue(&self, qid: u16) -> Option<RxQ> {
        if self.state != PortState::Started {
            return None;
        }
        let lease = self.rx_leases.get(qid as usize)?;
        if Arc::strong_count(lease) > 1 {
            return None;
        }
        let q = self.rxqs.get(qid as usize)?.as_ref()?;
        Some(
            RxQ::new(q.queue, q.rx_burst?, self.id, qid, lease.clone())
                .with_wake(self.ops.rx_wake_fd, self.ops.rx_wake_arm),
        )
    }

    /// The fast-path handle of TX queue `qid` (same rules as [`Port::rx_queue`]).
    pub fn tx_queue(&self, qid: u16) -> Option<TxQ> {
        if self.state != PortState::Started {
            return None;
        }
        let lease = self.tx_leases.get(qid as usize)?;
        if Arc::strong_count(lease) > 1 {
            return None;
        }
        let q = self.txqs.get(qid as usize)?.as_ref()?;
        let ops = (self.ops.tx_done_cleanup, self.ops.tx_inflight);
        Some(TxQ::new(q.queue, q.tx_burst?, ops, (self.id, qid), lease.clone()))
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            // A handle is still out: closing would pull the queue from under it. Leak
            // the device instead (a bug in the caller, never undefined behaviour).
            log::warn!("port {} dropped while in use, not closed: {e}", self.id);
        }
    }
}
