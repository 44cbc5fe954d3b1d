//! The C side: the entry table, the device ops table and the trampolines that call
//! a [`Pmd`] from the host, each wrapped in `catch_unwind`.

use crate::fence::{panic_text, Fence};
use crate::packet::{RxBurst, TxBurst};
use crate::{abi, Pmd, PmdError, Pool, ProbeCtx, QueueStats, RxQueue, TxQueue};
use ironpath_abi::Mbuf;
use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;

// ---- glue ----------------------------------------------------------------------

static HOST: AtomicPtr<abi::HostApi> = AtomicPtr::new(std::ptr::null_mut());

/// Log through the host (level 0 = error .. 3 = debug). Silently dropped before the
/// first probe or if the host offers no logger.
pub fn log(level: u32, msg: &str) {
    let h = HOST.load(Ordering::Acquire);
    if h.is_null() {
        return;
    }
    let Ok(c) = std::ffi::CString::new(msg.replace('\0', " ")) else { return };
    // SAFETY: the host API table is static in the host and outlives the plugin.
    unsafe {
        if let Some(f) = (*h).log {
            f(level, c.as_ptr());
        }
    }
}

struct QueueWrap<Q> {
    q: Q,
    stats: Arc<QueueStats>,
    /// The host's id of the port (from `dev_configure`), handed to each RX burst.
    port_id: u16,
    /// "RX queue 0" (for reports).
    label: String,
    /// Closed by the queue's first fast-path panic.
    fence: Fence,
}

/// The device object handed to the host.
struct DevWrap<D: Pmd> {
    dev: D,
    rxqs: Vec<*mut QueueWrap<D::Rx>>,
    txqs: Vec<*mut QueueWrap<D::Tx>>,
    rx_stats: Vec<Arc<QueueStats>>,
    tx_stats: Vec<Arc<QueueStats>>,
    /// Counter values at the last reset, per queue (RX then TX).
    rx_base: Vec<[u64; 5]>,
    tx_base: Vec<[u64; 5]>,
    /// The host's id of the port, learnt in `dev_configure`.
    port_id: u16,
}

impl<D: Pmd> DevWrap<D> {
    fn release_rx(&mut self, qid: usize) {
        if let Some(p) = self.rxqs.get_mut(qid) {
            if !p.is_null() {
                // SAFETY: made by Box::into_raw in setup; the host no longer bursts on it.
                drop(unsafe { Box::from_raw(*p) });
                *p = std::ptr::null_mut();
            }
        }
    }
    fn release_tx(&mut self, qid: usize) {
        if let Some(p) = self.txqs.get_mut(qid) {
            if !p.is_null() {
                // SAFETY: as above.
                drop(unsafe { Box::from_raw(*p) });
                *p = std::ptr::null_mut();
            }
        }
    }
    fn stats(&self) -> abi::Stats {
        let mut s = abi::Stats::default();
        for (i, (q, base)) in self.rx_stats.iter().zip(&self.rx_base).enumerate() {
            let v = q.snapshot();
            let d: Vec<u64> = v.iter().zip(base).map(|(a, b)| a.wrapping_sub(*b)).collect();
            s.ipackets += d[0];
            s.ibytes += d[1];
            s.ierrors += d[2];
            s.rx_nombuf += d[3];
            s.imissed += d[4];
            if i < abi::QUEUE_STAT_CNTRS {
                s.q_ipackets[i] = d[0];
                s.q_ibytes[i] = d[1];
                s.q_errors[i] = d[2];
            }
        }
        for (i, (q, base)) in self.tx_stats.iter().zip(&self.tx_base).enumerate() {
            let v = q.snapshot();
            let d: Vec<u64> = v.iter().zip(base).map(|(a, b)| a.wrapping_sub(*b)).collect();
            s.opackets += d[0];
            s.obytes += d[1];
            s.oerrors += d[2];
            if i < abi::QUEUE_STAT_CNTRS {
                s.q_opackets[i] = d[0];
                s.q_obytes[i] = d[1];
            }
        }
        self.dev.extra_stats(&mut s);
        s
    }
    fn xstats(&self) -> Vec<(String, u64)> {
        let s = self.stats();
        let mut v = vec![
            ("rx_good_packets".to_string(), s.ipackets),
            ("tx_good_packets".to_string(), s.opackets),
            ("rx_good_bytes".to_string(), s.ibytes),
            ("tx_good_bytes".to_string(), s.obytes),
            ("rx_missed_errors".to_string(), s.imissed),
            ("rx_errors".to_string(), s.ierrors),
            ("tx_errors".to_string(), s.oerrors),
            ("rx_mbuf_allocation_errors".to_string(), s.rx_nombuf),
        ];
        for (i, (q, base)) in self.rx_stats.iter().zip(&self.rx_base).enumerate() {
            let c = q.snapshot();
            v.push((format!("rx_q{i}_packets"), c[0].wrapping_sub(base[0])));
            v.push((format!("rx_q{i}_bytes"), c[1].wrapping_sub(base[1])));
            v.push((format!("rx_q{i}_errors"), c[2].wrapping_sub(base[2])));
        }
        for (i, (q, base)) in self.tx_stats.iter().zip(&self.tx_base).enumerate() {
            let c = q.snapshot();
            v.push((format!("tx_q{i}_packets"), c[0].wrapping_sub(base[0])));
            v.push((format!("tx_q{i}_bytes"), c[1].wrapping_sub(base[1])));
            v.push((format!("tx_q{i}_errors"), c[2].wrapping_sub(base[2])));
        }
        // Fenced queues (a driver panic): why their bursts are skipped.
        for (dir, qs) in [("rx", &self.rx_stats), ("tx", &self.tx_stats)] {
            for (i, q) in qs.iter().enumerate() {
                v.push((format!("{dir}_q{i}_driver_panics"), q.driver_panics.get()));
                v.push((format!("{dir}_q{i}_fenced_bursts"), q.fenced_bursts.get()));
            }
        }
        v.extend(self.dev.xstats());
        v
    }
}

impl<D: Pmd> Drop for DevWrap<D> {
    fn drop(&mut self) {
        for q in 0..self.rxqs.len() {
            self.release_rx(q);
        }
        for q in 0..self.txqs.len() {
            self.release_tx(q);
        }
    }
}

fn write_err(err: *mut abi::ErrMsg, msg: &str) {
    if err.is_null() {
        return;
    }
    let bytes = msg.as_bytes();
    let n = bytes.len().min(abi::ERR_MSG_LEN - 1);
    // SAFETY: `err` is a valid ErrMsg (host contract); we write n + 1 <= its length.
    unsafe {
        let dst = (*err).msg.as_mut_ptr().cast::<u8>();
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, n);
        *dst.add(n) = 0;
    }
}

thread_local! {
    /// Message of the last failed control op on this thread (read by `last_error`).
    static LAST_ERROR: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// Run a control operation, turning errors and panics into a negative errno; the
/// message is kept for the host's `last_error` call.
fn control<R>(f: impl FnOnce() -> Result<R, PmdError>) -> Result<R, i32> {
    let (rc, msg) = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => return Ok(v),
        Ok(Err(e)) => (-e.errno.max(1), e.msg),
        Err(p) => (-abi::errno::EFAULT, format!("driver panicked: {}", panic_text(&p))),
    };
    LAST_ERROR.with(|l| *l.borrow_mut() = msg);
    Err(rc)
}

unsafe extern "C" fn last_error(_dev: *mut c_void, err: *mut abi::ErrMsg) {
    LAST_ERROR.with(|l| write_err(err, &l.borrow()));
}

fn rc(r: Result<(), i32>) -> i32 {
    r.err().unwrap_or(0)
}

/// # Safety
/// `dev` is a `DevWrap<D>` made by `probe::<D>` and not yet closed.
unsafe fn wrap<'a, D: Pmd>(dev: *mut c_void) -> &'a mut DevWrap<D> {
    // SAFETY: caller's contract; the host serialises control calls.
    unsafe { &mut *dev.cast::<DevWrap<D>>() }
}

/// Entry point glue: the probe function. Not for direct use.
///
/// # Safety
/// Called by the host with valid pointers per the ABI.
pub unsafe extern "C" fn probe<D: Pmd>(
    host: *const abi::HostApi,
    name: *const c_char,
    args: *const c_char,
    out: *mut abi::Device,
    err: *mut abi::ErrMsg,
) -> i32 {
    if !host.is_null() {
        HOST.store(host.cast_mut(), Ordering::Release);
        crate::fence::install_hook();
    }
    let r = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: NUL-terminated strings from the host (ABI contract).
        let (name, args) = unsafe {
            (CStr::from_ptr(name).to_string_lossy().into_owned(), CStr::from_ptr(args).to_string_lossy().into_owned())
        };
        D::probe(&ProbeCtx { name: &name, args: &args })
    }));
    match r {
        Ok(Ok(dev)) => {
            let w = Box::new(DevWrap::<D> {
                dev,
                rxqs: Vec::new(),
                txqs: Vec::new(),
                rx_stats: Vec::new(),
                tx_stats: Vec::new(),
                rx_base: Vec::new(),
                tx_base: Vec::new(),
                port_id: u16::MAX,
            });
            // SAFETY: `out` is a valid out-pointer (ABI contract).
            unsafe {
                (*out).dev = Box::into_raw(w).cast();
                (*out).ops = <D as OpsTable>::OPS_REF;
            }
            0
        }
        Ok(Err(e)) => {
            write_err(err, &e.msg);
            -e.errno.max(1)
        }
        Err(p) => {
            write_err(err, &format!("driver {} panicked in probe: {}", D::NAME.to_string_lossy(), panic_text(&p)));
            -abi::errno::EFAULT
        }
    }
}

unsafe extern "C" fn dev_configure<D: Pmd>(dev: *mut c_void, conf: *const abi::DevConf) -> i32 {
    // SAFETY: host contract: live device, valid config.
    let (w, conf) = unsafe { (wrap::<D>(dev), *conf) };
    rc(control(|| {
        for q in 0..w.rxqs.len() {
            w.release_rx(q);
        }
        for q in 0..w.txqs.len() {
            w.release_tx(q);
        }
        w.dev.configure(&conf)?;
        w.port_id = conf.port_id;
        let (nr, nt) = (conf.nb_rx_queues as usize, conf.nb_tx_queues as usize);
        w.rxqs = vec![std::ptr::null_mut(); nr];
        w.txqs = vec![std::ptr::null_mut(); nt];
        w.rx_stats = (0..nr).map(|_| Arc::new(QueueStats::default())).collect();
        w.tx_stats = (0..nt).map(|_| Arc::new(QueueStats::default())).collect();
        w.rx_base = vec![[0; 5]; nr];
        w.tx_base = vec![[0; 5]; nt];
        Ok(())
    }))
}

unsafe extern "C" fn dev_info<D: Pmd>(dev: *mut c_void, info: *mut abi::DevInfo) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    match control(|| {
        let mut i = w.dev.info();
        i.nb_xstats = w.xstats().len() as u32;
        Ok(i)
    }) {
        Ok(i) => {
            // SAFETY: valid out-pointer.
            unsafe { *info = i };
            0
        }
        Err(e) => e,
    }
}

unsafe extern "C" fn rx_burst<D: Pmd>(q: *mut c_void, pkts: *mut *mut Mbuf, n: u16) -> u16 {
    // SAFETY: `q` is our QueueWrap (set at setup), used by one thread; `pkts` holds n.
    let (qw, pkts) = unsafe { (&mut *q.cast::<QueueWrap<D::Rx>>(), std::slice::from_raw_parts_mut(pkts, n as usize)) };
    if qw.fence.skips(&qw.stats) {
        return 0;
    }
    let mut burst = RxBurst::new(pkts, qw.port_id);
    match catch_unwind(AssertUnwindSafe(|| qw.q.rx_burst(&mut burst))) {
        Ok(()) => burst.len() as u16,
        Err(p) => {
            // Nothing is received: what the burst held goes back to its pool.
            burst.reclaim();
            qw.stats.errors.add(1);
            qw.fence.close(&qw.stats, D::NAME, qw.port_id, &qw.label, "rx_burst", &p);
            0
        }
    }
}

unsafe extern "C" fn rx_wake_fd<D: Pmd>(q: *mut c_void) -> i32 {
    // SAFETY: as in `rx_burst` (called on the queue's thread).
    let qw = unsafe { &mut *q.cast::<QueueWrap<D::Rx>>() };
    if qw.fence.skips(&qw.stats) {
        return -abi::errno::ENOTSUP;
    }
    match catch_unwind(AssertUnwindSafe(|| qw.q.wake_fd())) {
        Ok(Some(fd)) if fd >= 0 => fd,
        Ok(_) => -abi::errno::ENOTSUP,
        Err(p) => {
            qw.fence.close(&qw.stats, D::NAME, qw.port_id, &qw.label, "wake_fd", &p);
            -abi::errno::EIO
        }
    }
}

unsafe extern "C" fn rx_wake_arm<D: Pmd>(q: *mut c_void, on: u8) -> i32 {
    // SAFETY: as in `rx_burst` (called on the queue's thread).
    let qw = unsafe { &mut *q.cast::<QueueWrap<D::Rx>>() };
    if qw.fence.skips(&qw.stats) {
        return -abi::errno::ENOTSUP;
    }
    match catch_unwind(AssertUnwindSafe(|| qw.q.wake_arm(on != 0))) {
        Ok(true) => 0,
        Ok(false) => -abi::errno::EBUSY,
        Err(p) => {
            qw.fence.close(&qw.stats, D::NAME, qw.port_id, &qw.label, "wake_arm", &p);
            -abi::errno::EIO
        }
    }
}

unsafe extern "C" fn tx_burst<D: Pmd>(q: *mut c_void, pkts: *mut *mut Mbuf, n: u16) -> u16 {
    // SAFETY: as in `rx_burst`.
    let (qw, pkts) = unsafe { (&mut *q.cast::<QueueWrap<D::Tx>>(), std::slice::from_raw_parts_mut(pkts, n as usize)) };
    if qw.fence.skips(&qw.stats) {
        return 0;
    }
    // SAFETY: the host hands over `n` valid packets for the driver to take.
    let mut burst = unsafe { TxBurst::new(pkts) };
    match catch_unwind(AssertUnwindSafe(|| qw.q.tx_burst(&mut burst))) {
        Ok(()) => burst.taken() as u16,
        Err(p) => {
            // Through the safe API the burst knows what the driver took (and freed, or
            // dropped while unwinding): the rest stays the host's. A driver that
            // worked on the raw array may hold any of them: claim them all (counted
            // as errors); leaking is safe, handing back a packet it holds is not.
            let taken = if burst.used_raw() { usize::from(n) } else { burst.taken() };
            qw.stats.errors.add(taken as u64);
            qw.fence.close(&qw.stats, D::NAME, qw.port_id, &qw.label, "tx_burst", &p);
            taken as u16
        }
    }
}

unsafe extern "C" fn tx_done_cleanup<D: Pmd>(q: *mut c_void, free_cnt: u32) -> i32 {
    // SAFETY: as in `rx_burst` (called on the queue's thread).
    let qw = unsafe { &mut *q.cast::<QueueWrap<D::Tx>>() };
    if qw.fence.skips(&qw.stats) {
        return 0;
    }
    match catch_unwind(AssertUnwindSafe(|| qw.q.tx_done_cleanup(free_cnt as usize))) {
        Ok(k) => k.min(i32::MAX as usize) as i32,
        Err(p) => {
            qw.stats.errors.add(1);
            qw.fence.close(&qw.stats, D::NAME, qw.port_id, &qw.label, "tx_done_cleanup", &p);
            -abi::errno::EIO
        }
    }
}

unsafe extern "C" fn tx_inflight<D: Pmd>(q: *mut c_void) -> i32 {
    // SAFETY: as in `rx_burst` (called on the queue's thread).
    let qw = unsafe { &mut *q.cast::<QueueWrap<D::Tx>>() };
    if qw.fence.skips(&qw.stats) {
        // A fenced queue holds nothing the host may wait for.
        return 0;
    }
    match catch_unwind(AssertUnwindSafe(|| qw.q.tx_inflight())) {
        Ok(k) => k.min(i32::MAX as usize) as i32,
        Err(p) => {
            qw.fence.close(&qw.stats, D::NAME, qw.port_id, &qw.label, "tx_inflight", &p);
            -abi::errno::EIO
        }
    }
}

unsafe extern "C" fn rx_queue_setup<D: Pmd>(
    dev: *mut c_void,
    qid: u16,
    nb_desc: u16,
    pool: *const abi::Mempool,
    out: *mut abi::RxQueue,
) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    let r = control(|| {
        let i = qid as usize;
        if i >= w.rxqs.len() {
            return Err(PmdError::invalid(format!("RX queue {qid} is not configured")));
        }
        // SAFETY: the host passes a live pool whose ops table is valid.
        let alloc = unsafe { (*(*pool).ops).alloc_bulk }
            .ok_or_else(|| PmdError::invalid("the mempool has no alloc_bulk operation"))?;
        w.release_rx(i);
        let stats = Arc::new(QueueStats::default());
        let q = w.dev.rx_queue_setup(qid, nb_desc, Pool::from_host(pool, alloc), stats.clone())?;
        w.rx_stats[i] = stats;
        w.rx_base[i] = [0; 5];
        w.rxqs[i] = Box::into_raw(Box::new(QueueWrap {
            q,
            stats: w.rx_stats[i].clone(),
            port_id: w.port_id,
            label: format!("RX queue {qid}"),
            fence: Fence::default(),
        }));
        Ok(w.rxqs[i])
    });
    match r {
        Ok(p) => {
            // SAFETY: valid out-pointer.
            unsafe { *out = abi::RxQueue { queue: p.cast(), rx_burst: Some(rx_burst::<D>) } };
            0
        }
        Err(e) => e,
    }
}

unsafe extern "C" fn tx_queue_setup<D: Pmd>(dev: *mut c_void, qid: u16, nb_desc: u16, out: *mut abi::TxQueue) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    let r = control(|| {
        let i = qid as usize;
        if i >= w.txqs.len() {
            return Err(PmdError::invalid(format!("TX queue {qid} is not configured")));
        }
        w.release_tx(i);
        let stats = Arc::new(QueueStats::default());
        let q = w.dev.tx_queue_setup(qid, nb_desc, stats.clone())?;
        w.tx_stats[i] = stats;
        w.tx_base[i] = [0; 5];
        w.txqs[i] = Box::into_raw(Box::new(QueueWrap {
            q,
            stats: w.tx_stats[i].clone(),
            port_id: w.port_id,
            label: format!("TX queue {qid}"),
            fence: Fence::default(),
        }));
        Ok(w.txqs[i])
    });
    match r {
        Ok(p) => {
            // SAFETY: valid out-pointer.
            unsafe { *out = abi::TxQueue { queue: p.cast(), tx_burst: Some(tx_burst::<D>) } };
            0
        }
        Err(e) => e,
    }
}

unsafe extern "C" fn rx_queue_release<D: Pmd>(dev: *mut c_void, qid: u16) {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    let _ = control(|| {
        w.release_rx(qid as usize);
        Ok(())
    });
}

unsafe extern "C" fn tx_queue_release<D: Pmd>(dev: *mut c_void, qid: u16) {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    let _ = control(|| {
        w.release_tx(qid as usize);
        Ok(())
    });
}

unsafe extern "C" fn dev_start<D: Pmd>(dev: *mut c_void) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    rc(control(|| w.dev.start()))
}

unsafe extern "C" fn dev_stop<D: Pmd>(dev: *mut c_void) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    rc(control(|| w.dev.stop()))
}

unsafe extern "C" fn dev_close<D: Pmd>(dev: *mut c_void) {
    let _ = control(|| {
        // SAFETY: made by Box::into_raw in probe; the host never uses it again.
        drop(unsafe { Box::from_raw(dev.cast::<DevWrap<D>>()) });
        Ok(())
    });
}

unsafe extern "C" fn link_get<D: Pmd>(dev: *mut c_void, link: *mut abi::Link) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    match control(|| Ok(w.dev.link())) {
        Ok(mut l) => {
            if w.dev.soft().is_some_and(|s| s.link_down) {
                l.up = 0;
            }
            // SAFETY: valid out-pointer.
            unsafe { *link = l };
            0
        }
        Err(e) => e,
    }
}

unsafe extern "C" fn stats_get<D: Pmd>(dev: *mut c_void, stats: *mut abi::Stats) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    match control(|| Ok(w.stats())) {
        Ok(s) => {
            // SAFETY: valid out-pointer.
            unsafe { *stats = s };
            0
        }
        Err(e) => e,
    }
}

unsafe extern "C" fn stats_reset<D: Pmd>(dev: *mut c_void) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    rc(control(|| {
        // Counters have one writer (the queue); resetting records a base instead of
        // writing to them, so no update is lost.
        w.rx_base = w.rx_stats.iter().map(|q| q.snapshot()).collect();
        w.tx_base = w.tx_stats.iter().map(|q| q.snapshot()).collect();
        Ok(())
    }))
}

unsafe extern "C" fn xstats_names<D: Pmd>(dev: *mut c_void, names: *mut abi::XstatName, n: u32) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    match control(|| Ok(w.xstats())) {
        Ok(v) => {
            if !names.is_null() {
                for (i, (name, _)) in v.iter().enumerate().take(n as usize) {
                    let b = name.as_bytes();
                    let k = b.len().min(abi::XSTAT_NAME_LEN - 1);
                    // SAFETY: `names` holds `n` entries; we write entry i < n.
                    unsafe {
                        let dst = (*names.add(i)).name.as_mut_ptr().cast::<u8>();
                        std::ptr::copy_nonoverlapping(b.as_ptr(), dst, k);
                        *dst.add(k) = 0;
                    }
                }
            }
            v.len() as i32
        }
        Err(e) => e,
    }
}

unsafe extern "C" fn xstats_get<D: Pmd>(dev: *mut c_void, values: *mut u64, n: u32) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    match control(|| Ok(w.xstats())) {
        Ok(v) => {
            if !values.is_null() {
                for (i, (_, val)) in v.iter().enumerate().take(n as usize) {
                    // SAFETY: `values` holds `n` entries.
                    unsafe { *values.add(i) = *val };
                }
            }
            v.len() as i32
        }
        Err(e) => e,
    }
}

unsafe extern "C" fn xstats_reset<D: Pmd>(dev: *mut c_void) -> i32 {
    // SAFETY: forwarded with the same contract.
    unsafe { stats_reset::<D>(dev) }
}

unsafe extern "C" fn mac_addr_get<D: Pmd>(dev: *mut c_void, mac: *mut [u8; 6]) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    match control(|| w.dev.mac()) {
        Ok(m) => {
            // SAFETY: valid out-pointer.
            unsafe { *mac = m };
            0
        }
        Err(e) => e,
    }
}

unsafe extern "C" fn mac_addr_set<D: Pmd>(dev: *mut c_void, mac: *const [u8; 6]) -> i32 {
    // SAFETY: host contract.
    let (w, m) = unsafe { (wrap::<D>(dev), *mac) };
    rc(control(|| w.dev.set_mac(m)))
}

unsafe extern "C" fn mtu_set<D: Pmd>(dev: *mut c_void, mtu: u16) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    rc(control(|| w.dev.set_mtu(mtu)))
}

unsafe extern "C" fn promiscuous_set<D: Pmd>(dev: *mut c_void, on: u8) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    rc(control(|| w.dev.set_promiscuous(on != 0)))
}

unsafe extern "C" fn allmulticast_set<D: Pmd>(dev: *mut c_void, on: u8) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    rc(control(|| w.dev.set_allmulticast(on != 0)))
}

unsafe extern "C" fn allmulticast_get<D: Pmd>(dev: *mut c_void) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    match control(|| w.dev.allmulticast()) {
        Ok(b) => i32::from(b),
        Err(e) => e,
    }
}

unsafe extern "C" fn mac_addr_add<D: Pmd>(dev: *mut c_void, mac: *const [u8; 6]) -> i32 {
    // SAFETY: host contract.
    let (w, m) = unsafe { (wrap::<D>(dev), *mac) };
    rc(control(|| w.dev.add_mac(m)))
}

unsafe extern "C" fn mac_addr_remove<D: Pmd>(dev: *mut c_void, mac: *const [u8; 6]) -> i32 {
    // SAFETY: host contract.
    let (w, m) = unsafe { (wrap::<D>(dev), *mac) };
    rc(control(|| w.dev.remove_mac(m)))
}

unsafe extern "C" fn dev_set_link<D: Pmd>(dev: *mut c_void, up: u8) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    rc(control(|| w.dev.set_link(up != 0)))
}

unsafe extern "C" fn rss_hash_get<D: Pmd>(dev: *mut c_void, capa: *mut u64, cur: *mut u64) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    match control(|| w.dev.rss_hash()) {
        Ok((c, u)) => {
            // SAFETY: valid out-pointers (host contract).
            unsafe {
                *capa = c;
                *cur = u;
            }
            0
        }
        Err(e) => e,
    }
}

unsafe extern "C" fn rss_hash_set<D: Pmd>(dev: *mut c_void, rss_hf: u64) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    rc(control(|| w.dev.set_rss_hash(rss_hf)))
}

unsafe extern "C" fn promiscuous_get<D: Pmd>(dev: *mut c_void) -> i32 {
    // SAFETY: host contract.
    let w = unsafe { wrap::<D>(dev) };
    match control(|| w.dev.promiscuous()) {
        Ok(b) => i32::from(b),
        Err(e) => e,
    }
}

/// The ops table of a driver type (a promoted constant: one static table per type).
pub trait OpsTable {
    /// The table.
    const OPS: abi::DevOps;
    /// A `'static` reference to it.
    const OPS_REF: &'static abi::DevOps;
}

impl<D: Pmd> OpsTable for D {
    const OPS: abi::DevOps = abi::DevOps {
        size: std::mem::size_of::<abi::DevOps>() as u32,
        reserved: 0,
        dev_configure: Some(dev_configure::<D>),
        dev_info: Some(dev_info::<D>),
        rx_queue_setup: Some(rx_queue_setup::<D>),
        tx_queue_setup: Some(tx_queue_setup::<D>),
        rx_queue_release: Some(rx_queue_release::<D>),
        tx_queue_release: Some(tx_queue_release::<D>),
        dev_start: Some(dev_start::<D>),
        dev_stop: Some(dev_stop::<D>),
        dev_close: Some(dev_close::<D>),
        link_get: Some(link_get::<D>),
        stats_get: Some(stats_get::<D>),
        stats_reset: Some(stats_reset::<D>),
        xstats_names: Some(xstats_names::<D>),
        xstats_get: Some(xstats_get::<D>),
        xstats_reset: Some(xstats_reset::<D>),
        mac_addr_get: Some(mac_addr_get::<D>),
        mac_addr_set: Some(mac_addr_set::<D>),
        mtu_set: Some(mtu_set::<D>),
        promiscuous_set: Some(promiscuous_set::<D>),
        promiscuous_get: Some(promiscuous_get::<D>),
        last_error: Some(last_error),
        tx_done_cleanup: if <D::Tx as TxQueue>::HOLDS_PACKETS { Some(tx_done_cleanup::<D>) } else { None },
        tx_inflight: if <D::Tx as TxQueue>::HOLDS_PACKETS { Some(tx_inflight::<D>) } else { None },
        allmulticast_set: Some(allmulticast_set::<D>),
        allmulticast_get: Some(allmulticast_get::<D>),
        mac_addr_add: Some(mac_addr_add::<D>),
        mac_addr_remove: Some(mac_addr_remove::<D>),
        dev_set_link: Some(dev_set_link::<D>),
        rss_hash_get: Some(rss_hash_get::<D>),
        rss_hash_set: Some(rss_hash_set::<D>),
        rx_wake_fd: Some(rx_wake_fd::<D>),
        rx_wake_arm: Some(rx_wake_arm::<D>),
    };
    const OPS_REF: &'static abi::DevOps = &Self::OPS;
}

/// The entry table for driver type `D` (used by [`export_pmd!`]).
pub const fn entry<D: Pmd>() -> abi::PmdEntry {
    let (entry_size, mbuf_size, mempool_size, dev_ops_size, stats_size) = abi::entry_sizes();
    abi::PmdEntry {
        abi_major: abi::ABI_MAJOR,
        abi_minor: abi::ABI_MINOR,
        entry_size,
        mbuf_size,
        mempool_size,
        dev_ops_size,
        stats_size,
        name: D::NAME.as_ptr(),
        devargs_help: D::DEVARGS_HELP.as_ptr(),
        probe: Some(probe::<D>),
        pci_ids: if D::PCI_IDS.is_empty() { std::ptr::null() } else { D::PCI_IDS.as_ptr() },
        nb_pci_ids: D::PCI_IDS.len() as u32,
        reserved: 0,
        check_args: if D::CHECKS_ARGS { Some(check_args::<D>) } else { None },
        min_abi_minor: min_abi_minor::<D>(),
        reserved_1_6: [0; 3],
    }
}

/// The oldest host ABI minor driver `D` runs correctly on, from what it uses: a
/// queue that holds sent packets needs 1.2's `tx_done_cleanup`/`tx_inflight` (or
/// nothing would ask it to free them), anything else runs on every 1.x host that
/// reads this field (1.6 on; older hosts do not check). The rest of what the SDK
/// exports is optional for a host: one that lacks a slot never calls it.
pub const fn min_abi_minor<D: Pmd>() -> u16 {
    if <D::Tx as TxQueue>::HOLDS_PACKETS {
        2
    } else {
        1
    }
}

/// `PmdEntry::check_args` of driver `D`.
///
/// # Safety
/// `name` and `args` are NUL-terminated strings and `err` a valid ErrMsg (the host's
/// contract).
pub unsafe extern "C" fn check_args<D: Pmd>(name: *const c_char, args: *const c_char, err: *mut abi::ErrMsg) -> i32 {
    let r = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: NUL-terminated strings from the host (ABI contract).
        let (name, args) = unsafe {
            (CStr::from_ptr(name).to_string_lossy().into_owned(), CStr::from_ptr(args).to_string_lossy().into_owned())
        };
        D::check_args(&ProbeCtx { name: &name, args: &args })
    }));
    match r {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            write_err(err, &e.msg);
            -e.errno.max(1)
        }
        Err(p) => {
            write_err(
                err,
                &format!("driver {} panicked checking arguments: {}", D::NAME.to_string_lossy(), panic_text(&p)),
            );
            -abi::errno::EIO
        }
    }
}

/// Export a driver type as this library's PMD: defines the `ironpath_pmd_entry` symbol.
#[macro_export]
macro_rules! export_pmd {
    ($ty:ty) => {
        static __IRONPATH_PMD_ENTRY: $crate::abi::PmdEntry = $crate::entry::<$ty>();

        /// The plugin entry point (see `ironpath_abi::ENTRY_SYMBOL`).
        #[no_mangle]
        pub extern "C" fn ironpath_pmd_entry() -> *const $crate::abi::PmdEntry {
            &__IRONPATH_PMD_ENTRY
        }
    };
}
