//! Ports: instances of loaded drivers, created from DPDK-style device arguments
//! (`net_null0,size=64`), with a control API (configure, queues, start/stop/close,
//! stats, xstats, link, MAC, MTU, promiscuous) and copyable fast-path queue handles.

use crate::loader::{Driver, Registry};
use crate::mempool::Mempool;
use ironpath_abi as abi;
use ironpath_abi::{DevOps, Mbuf as RawMbuf};
use std::ffi::{c_char, c_void, CStr, CString};
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
    /// The driver refused the device arguments (its message names the argument).
    #[error("{name}: {msg}\n  usage: {name},{help}")]
    Probe {
        /// Instance name.
        name: String,
        /// Driver's message.
        msg: String,
        /// Driver's device-argument help.
        help: String,
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

/// A lease on one queue: while a handle holds it, the port refuses to stop,
/// reconfigure or close, so the driver's queue stays valid under the handle.
#[derive(Debug, Default)]
struct Lease;

/// Fast-path receive handle: the queue pointer, its burst function and a lease.
/// Only one handle per queue exists at a time (see [`Port::rx_queue`]).
pub struct RxQ {
    q: *mut c_void,
    f: abi::RxBurstFn,
    /// Port of this queue.
    pub port: PortId,
    /// Queue index.
    pub queue: u16,
    _lease: Arc<Lease>,
}

/// Fast-path transmit handle.
pub struct TxQ {
    q: *mut c_void,
    f: abi::TxBurstFn,
    cleanup: Option<unsafe extern "C" fn(*mut c_void, u32) -> i32>,
    inflight: Option<unsafe extern "C" fn(*mut c_void) -> i32>,
    /// Port of this queue.
    pub port: PortId,
    /// Queue index.
    pub queue: u16,
    _lease: Arc<Lease>,
    /// Keeps an in-process test device alive ([`testing::sink_txq`]).
    _keep: Option<Arc<testing::SinkDevice>>,
}

// SAFETY: a handle is the only one for its queue (leases are exclusive), so one thread
// bursts on a queue at a time; the driver's queue state has no thread affinity.
unsafe impl Send for RxQ {}
// SAFETY: as above.
unsafe impl Send for TxQ {}

impl RxQ {
    /// Receive up to `pkts.len()` (at most 65535) packets; returns how many.
    #[inline(always)]
    pub fn rx_burst(&self, pkts: &mut [*mut RawMbuf]) -> usize {
        let n = pkts.len().min(u16::MAX as usize) as u16;
        // SAFETY: the handle was made for a set-up queue of a started port, and its lease
        // keeps the port from stopping or closing; `pkts` has room for n pointers.
        let got = unsafe { (self.f)(self.q, pkts.as_mut_ptr(), n) };
        (got as usize).min(n as usize)
    }
}

impl TxQ {
    /// Send packets; returns how many the driver took. The rest stay with the caller.
    #[inline(always)]
    pub fn tx_burst(&self, pkts: &mut [*mut RawMbuf]) -> usize {
        let n = pkts.len().min(u16::MAX as usize) as u16;
        // SAFETY: as for `RxQ::rx_burst`; the caller owns the packets it passes.
        let sent = unsafe { (self.f)(self.q, pkts.as_mut_ptr(), n) };
        (sent as usize).min(n as usize)
    }

    /// Ask the driver to free up to `max` (0 = all) sent packets the device is done
    /// with (DPDK's `rte_eth_tx_done_cleanup`); returns how many it freed (0 for a
    /// driver that frees packets as it takes them).
    #[inline]
    pub fn done_cleanup(&self, max: u32) -> usize {
        match self.cleanup {
            // SAFETY: as for `tx_burst`; the op touches only this queue, on our thread.
            Some(f) => unsafe { f(self.q, max) }.max(0) as usize,
            None => 0,
        }
    }

    /// Whether the driver keeps sent packets until the device is done with them (it
    /// implements [`TxQ::done_cleanup`]); otherwise it frees them as it takes them.
    #[inline]
    pub fn holds_packets(&self) -> bool {
        self.cleanup.is_some()
    }

    /// Packets the driver holds that are not completed (or not yet freed).
    #[inline]
    pub fn inflight(&self) -> usize {
        match self.inflight {
            // SAFETY: as for `done_cleanup`.
            Some(f) => unsafe { f(self.q) }.max(0) as usize,
            None => 0,
        }
    }
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
        let probe_err = |msg: String| PortError::Probe { name: name.to_string(), msg, help: driver.help.clone() };
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
        })
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
        Some(RxQ { q: q.queue, f: q.rx_burst?, port: self.id, queue: qid, _lease: lease.clone() })
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
        Some(TxQ {
            q: q.queue,
            f: q.tx_burst?,
            cleanup: self.ops.tx_done_cleanup,
            inflight: self.ops.tx_inflight,
            port: self.id,
            queue: qid,
            _lease: lease.clone(),
            _keep: None,
        })
    }

    /// Basic counters.
    pub fn stats(&self) -> Result<abi::Stats, PortError> {
        let f = op!(self, stats_get, "stats_get");
        let mut s = abi::Stats::default();
        // SAFETY: live device, valid out-pointer.
        let rc = unsafe { f(self.dev, &mut s) };
        if rc < 0 {
            return Err(self.fail("stats_get", rc));
        }
        Ok(s)
    }

    /// Reset basic counters.
    pub fn stats_reset(&mut self) -> Result<(), PortError> {
        let f = op!(self, stats_reset, "stats_reset");
        // SAFETY: live device.
        let rc = unsafe { f(self.dev) };
        if rc < 0 {
            return Err(self.fail("stats_reset", rc));
        }
        Ok(())
    }

    /// Extended counters as (name, value) pairs.
    pub fn xstats(&self) -> Result<Vec<(String, u64)>, PortError> {
        let fnames = op!(self, xstats_names, "xstats_names");
        let fvals = op!(self, xstats_get, "xstats_get");
        // SAFETY: live device; a NULL buffer of length 0 asks for the count.
        let n = unsafe { fnames(self.dev, std::ptr::null_mut(), 0) };
        if n < 0 {
            return Err(self.fail("xstats_names", n));
        }
        let n = n as u32;
        let mut names = vec![abi::XstatName { name: [0; abi::XSTAT_NAME_LEN] }; n as usize];
        let mut vals = vec![0u64; n as usize];
        // SAFETY: buffers of `n` entries each.
        let (a, b) = unsafe { (fnames(self.dev, names.as_mut_ptr(), n), fvals(self.dev, vals.as_mut_ptr(), n)) };
        if a < 0 {
            return Err(self.fail("xstats_names", a));
        }
        if b < 0 {
            return Err(self.fail("xstats_get", b));
        }
        let k = (a as u32).min(b as u32).min(n) as usize;
        Ok(names[..k]
            .iter_mut()
            .zip(&vals[..k])
            .map(|(nm, v)| {
                nm.name[abi::XSTAT_NAME_LEN - 1] = 0;
                // SAFETY: NUL-terminated (forced above).
                (unsafe { CStr::from_ptr(nm.name.as_ptr()) }.to_string_lossy().into_owned(), *v)
            })
            .collect())
    }

    /// Reset extended counters.
    pub fn xstats_reset(&mut self) -> Result<(), PortError> {
        let f = op!(self, xstats_reset, "xstats_reset");
        // SAFETY: live device.
        let rc = unsafe { f(self.dev) };
        if rc < 0 {
            return Err(self.fail("xstats_reset", rc));
        }
        Ok(())
    }

    /// Link state.
    pub fn link(&self) -> Result<abi::Link, PortError> {
        let f = op!(self, link_get, "link_get");
        let mut l = abi::Link::default();
        // SAFETY: live device, valid out-pointer.
        let rc = unsafe { f(self.dev, &mut l) };
        if rc < 0 {
            return Err(self.fail("link_get", rc));
        }
        Ok(l)
    }

    /// MAC address.
    pub fn mac(&self) -> Result<[u8; 6], PortError> {
        let f = op!(self, mac_addr_get, "mac_addr_get");
        let mut m = [0u8; 6];
        // SAFETY: live device, valid out-pointer.
        let rc = unsafe { f(self.dev, &mut m) };
        if rc < 0 {
            return Err(self.fail("mac_addr_get", rc));
        }
        Ok(m)
    }

    /// Set the MAC address.
    pub fn set_mac(&mut self, mac: [u8; 6]) -> Result<(), PortError> {
        let f = op!(self, mac_addr_set, "mac_addr_set");
        // SAFETY: live device, valid pointer.
        let rc = unsafe { f(self.dev, &mac) };
        if rc < 0 {
            return Err(self.fail("mac_addr_set", rc));
        }
        Ok(())
    }

    /// Set the MTU.
    pub fn set_mtu(&mut self, mtu: u16) -> Result<(), PortError> {
        let f = op!(self, mtu_set, "mtu_set");
        // SAFETY: live device.
        let rc = unsafe { f(self.dev, mtu) };
        if rc < 0 {
            return Err(self.fail("mtu_set", rc));
        }
        Ok(())
    }

    /// Promiscuous mode on or off.
    pub fn set_promiscuous(&mut self, on: bool) -> Result<(), PortError> {
        let f = op!(self, promiscuous_set, "promiscuous_set");
        // SAFETY: live device.
        let rc = unsafe { f(self.dev, u8::from(on)) };
        if rc < 0 {
            return Err(self.fail("promiscuous_set", rc));
        }
        Ok(())
    }

    /// Promiscuous mode.
    pub fn promiscuous(&self) -> Result<bool, PortError> {
        let f = op!(self, promiscuous_get, "promiscuous_get");
        // SAFETY: live device.
        let rc = unsafe { f(self.dev) };
        if rc < 0 {
            return Err(self.fail("promiscuous_get", rc));
        }
        Ok(rc != 0)
    }

    /// All-multicast mode on or off (ABI 1.5).
    pub fn set_allmulticast(&mut self, on: bool) -> Result<(), PortError> {
        let f = op!(self, allmulticast_set, "allmulticast_set");
        // SAFETY: live device.
        let rc = unsafe { f(self.dev, u8::from(on)) };
        if rc < 0 {
            return Err(self.fail("allmulticast_set", rc));
        }
        Ok(())
    }

    /// All-multicast mode (ABI 1.5).
    pub fn allmulticast(&self) -> Result<bool, PortError> {
        let f = op!(self, allmulticast_get, "allmulticast_get");
        // SAFETY: live device.
        let rc = unsafe { f(self.dev) };
        if rc < 0 {
            return Err(self.fail("allmulticast_get", rc));
        }
        Ok(rc != 0)
    }

    /// Also receive for unicast `mac` (ABI 1.5).
    pub fn add_mac(&mut self, mac: [u8; 6]) -> Result<(), PortError> {
        let f = op!(self, mac_addr_add, "mac_addr_add");
        // SAFETY: live device; `mac` outlives the call.
        let rc = unsafe { f(self.dev, &mac) };
        if rc < 0 {
            return Err(self.fail("mac_addr_add", rc));
        }
        Ok(())
    }

    /// Stop receiving for an added `mac` (ABI 1.5).
    pub fn remove_mac(&mut self, mac: [u8; 6]) -> Result<(), PortError> {
        let f = op!(self, mac_addr_remove, "mac_addr_remove");
        // SAFETY: live device; `mac` outlives the call.
        let rc = unsafe { f(self.dev, &mac) };
        if rc < 0 {
            return Err(self.fail("mac_addr_remove", rc));
        }
        Ok(())
    }

    /// Bring the link up or down administratively (ABI 1.5).
    pub fn set_link(&mut self, up: bool) -> Result<(), PortError> {
        let f = op!(self, dev_set_link, "dev_set_link");
        // SAFETY: live device.
        let rc = unsafe { f(self.dev, u8::from(up)) };
        if rc < 0 {
            return Err(self.fail("dev_set_link", rc));
        }
        Ok(())
    }

    /// RSS hash functions: (those the device can use, those in use) (ABI 1.5).
    pub fn rss_hash(&self) -> Result<(u64, u64), PortError> {
        let f = op!(self, rss_hash_get, "rss_hash_get");
        let (mut capa, mut cur) = (0u64, 0u64);
        // SAFETY: live device, valid out-pointers.
        let rc = unsafe { f(self.dev, &mut capa, &mut cur) };
        if rc < 0 {
            return Err(self.fail("rss_hash_get", rc));
        }
        Ok((capa, cur))
    }

    /// Use RSS hash functions `rss_hf` (ABI 1.5).
    pub fn set_rss_hash(&mut self, rss_hf: u64) -> Result<(), PortError> {
        let f = op!(self, rss_hash_set, "rss_hash_set");
        // SAFETY: live device.
        let rc = unsafe { f(self.dev, rss_hf) };
        if rc < 0 {
            return Err(self.fail("rss_hash_set", rc));
        }
        Ok(())
    }

    /// Everything about the port, for `show port info`.
    pub fn info(&self) -> PortInfo {
        PortInfo {
            id: self.id,
            name: self.name.clone(),
            devargs: self.devargs.clone(),
            driver: self.driver.name.clone(),
            plugin: self.driver.path.clone(),
            state: self.state,
            dev_info: self.dev_info().unwrap_or_default(),
            nb_rxq: self.nb_rxq(),
            nb_txq: self.nb_txq(),
            mac: self.mac().ok(),
            promisc: self.promiscuous().ok(),
            allmulti: self.allmulticast().ok(),
        }
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

/// In-process transmit queues for tests of nodes and batching: no plugin, no port.
pub mod testing {
    use super::{Lease, TxQ};
    use crate::mbuf::Mbuf;
    use ironpath_abi::Mbuf as RawMbuf;
    use std::ffi::c_void;
    use std::sync::{Arc, Mutex, MutexGuard};

    /// A fake device behind a [`TxQ`] from [`sink_txq`]: it takes packets while it has
    /// room, logs their bytes, and (with `hold`) keeps them until the test says the
    /// device finished sending ([`SinkDevice::finish`]) and the queue reclaims them.
    #[derive(Default)]
    pub struct SinkDevice {
        inner: Mutex<SinkInner>,
    }

    #[derive(Default)]
    struct SinkInner {
        room: usize,
        hold: bool,
        sending: Vec<Mbuf>,
        finished: Vec<Mbuf>,
        log: Vec<Vec<u8>>,
    }

    impl SinkDevice {
        fn lock(&self) -> MutexGuard<'_, SinkInner> {
            self.inner.lock().unwrap_or_else(|e| e.into_inner())
        }

        /// Take the bytes of every packet sent so far (in order).
        pub fn take_log(&self) -> Vec<Vec<u8>> {
            std::mem::take(&mut self.lock().log)
        }

        /// Packets sent so far and not yet taken with [`SinkDevice::take_log`].
        pub fn logged(&self) -> usize {
            self.lock().log.len()
        }

        /// The device finished sending the oldest `n` held packets (they wait for a
        /// reclaim: `TxQ::done_cleanup`).
        pub fn finish(&self, n: usize) {
            let mut g = self.lock();
            let n = n.min(g.sending.len());
            let done: Vec<Mbuf> = g.sending.drain(..n).collect();
            g.finished.extend(done);
        }

        /// Packets the device holds.
        pub fn holding(&self) -> usize {
            let g = self.lock();
            g.sending.len() + g.finished.len()
        }

        /// Change how many packets the device holds at most (a ring size).
        pub fn set_room(&self, room: usize) {
            self.lock().room = room;
        }
    }

    unsafe extern "C" fn burst(q: *mut c_void, pkts: *mut *mut RawMbuf, n: u16) -> u16 {
        // SAFETY: `q` is the `SinkDevice` kept alive by the TxQ; `pkts` holds n packets
        // the caller hands over.
        let (dev, pkts) = unsafe { (&*q.cast::<SinkDevice>(), std::slice::from_raw_parts(pkts, n as usize)) };
        let mut g = dev.lock();
        let held = g.sending.len() + g.finished.len();
        let take = (n as usize).min(g.room.saturating_sub(held));
        for &p in &pkts[..take] {
            // SAFETY: each packet's reference now belongs to the device.
            let m = unsafe { Mbuf::from_raw(p) };
            g.log.push(m.to_vec());
            if g.hold {
                g.sending.push(m);
            }
        }
        take as u16
    }

    unsafe extern "C" fn cleanup(q: *mut c_void, max: u32) -> i32 {
        // SAFETY: as in `burst`.
        let dev = unsafe { &*q.cast::<SinkDevice>() };
        let mut g = dev.lock();
        let n = if max == 0 { g.finished.len() } else { g.finished.len().min(max as usize) };
        g.finished.drain(..n);
        n as i32
    }

    unsafe extern "C" fn inflight(q: *mut c_void) -> i32 {
        // SAFETY: as in `burst`.
        let dev = unsafe { &*q.cast::<SinkDevice>() };
        dev.holding() as i32
    }

    /// A TX queue on a fresh [`SinkDevice`] with room for `room` packets; with `hold`
    /// the device keeps sent packets until [`SinkDevice::finish`], else frees them at once.
    pub fn sink_txq(room: usize, hold: bool) -> (TxQ, Arc<SinkDevice>) {
        let dev = Arc::new(SinkDevice::default());
        {
            let mut g = dev.lock();
            g.room = room;
            g.hold = hold;
        }
        let q = TxQ {
            q: Arc::as_ptr(&dev) as *mut c_void,
            f: burst,
            cleanup: Some(cleanup),
            inflight: Some(inflight),
            port: 0,
            queue: 0,
            _lease: Arc::new(Lease),
            _keep: Some(dev.clone()),
        };
        (q, dev)
    }
}
