//! `net_tmpl`: the template PMD. Copy `pmds/template/` to start a new driver, rename
//! the types and `NAME`, and replace the reflector with your hardware or transport.
//! `docs/writing-a-pmd.md` walks through every part of this file.
//!
//! What it does: each queue pair *q* shares a bounded in-memory FIFO (the
//! "reflector"). `tx_burst` on TX queue *q* appends packets to it and `rx_burst` on
//! RX queue *q* hands them back, in order, like a NIC cabled to itself. When the FIFO
//! is full, `tx_burst` takes fewer packets than offered and the caller keeps the rest,
//! exactly as a NIC with a full descriptor ring. Packets still in a FIFO when both of
//! its queues are gone are returned to their pool, so nothing leaks.
//!
//! Device arguments: `depth=<1..=65536>` (FIFO slots per queue pair, default 512),
//! `mac=aa:bb:cc:dd:ee:ff` (default: a locally administered address derived from the
//! instance name).
//!
//! Rules this file follows (and yours should):
//! * it depends on `ironpath-pmd-sdk` only: every type crossing into the host is
//!   `#[repr(C)]` from `ironpath_pmd_sdk::abi`;
//! * it is safe code (`forbid(unsafe_code)`): packets are [`Packet`] values taken
//!   from a [`TxBurst`] and pushed into an [`RxBurst`], so a packet has exactly one
//!   owner at a time (the caller, the FIFO or the receiver) and whoever holds it
//!   last frees it by dropping it. A driver that hands packets to hardware by
//!   address uses `ironpath_pmd_sdk::raw`, with a `// SAFETY:` comment on every
//!   `unsafe` block.
#![forbid(unsafe_code)]

use ironpath_pmd_sdk::abi;
use ironpath_pmd_sdk::{
    export_pmd, DevArgs, Packet, Pmd, PmdError, Pool, ProbeCtx, QueueStats, RxBurst, RxQueue, TxBurst, TxQueue,
};
use std::collections::VecDeque;
use std::ffi::CStr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

/// Every device argument this driver accepts. `DevArgs::parse` refuses any other key
/// with a message that lists these and suggests the closest one.
const KEYS: &[&str] = &["depth", "mac"];
/// `depth=` default and range.
const DEFAULT_DEPTH: u64 = 512;
const MAX_DEPTH: u64 = 65536;
/// Queue pairs per port. The SDK keeps per-queue counters for the first
/// `abi::QUEUE_STAT_CNTRS` (16) queues of each direction; stay within that.
const MAX_QUEUES: u16 = abi::QUEUE_STAT_CNTRS as u16;
/// MTU range reported in `info()` and enforced by `set_mtu`.
const MIN_MTU: u16 = 68;
const MAX_MTU: u16 = 9000;

// ---- the reflector ---------------------------------------------------------------

/// The FIFO shared by TX queue *q* (producer) and RX queue *q* (consumer). They may
/// run on different lcores, so it is behind a mutex: simple and correct, and cheap
/// when uncontended. A fast driver would use a lock-free SPSC ring instead (see
/// `pmds/ring`), or a hardware descriptor ring.
struct Reflector {
    /// Capacity in packets (`depth=`).
    depth: usize,
    pkts: Mutex<VecDeque<Packet>>,
}

impl Reflector {
    fn new(depth: usize) -> Self {
        Self { depth, pkts: Mutex::new(VecDeque::with_capacity(depth)) }
    }

    /// Lock the FIFO. A poisoned lock means a burst panicked while holding it (the SDK
    /// caught the panic and counted an error); the deque itself is still a valid
    /// deque, so carry on rather than panic on every later burst.
    fn lock(&self) -> MutexGuard<'_, VecDeque<Packet>> {
        self.pkts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn len(&self) -> usize {
        self.lock().len()
    }
}

// ---- the device ------------------------------------------------------------------

/// One `net_tmpl` port. The SDK keeps it behind the device pointer it gives the host
/// and calls the [`Pmd`] methods below; the host serialises these control calls, so
/// plain fields are fine here (no locks).
pub struct TmplPmd {
    depth: usize,
    mac: [u8; 6],
    mtu: u16,
    promisc: bool,
    started: bool,
    /// One reflector per queue pair. Weak: the queues own them, so a reflector (and
    /// the packets in it) goes away as soon as both its queues are released.
    reflectors: Vec<Weak<Reflector>>,
}

impl TmplPmd {
    /// The reflector of queue pair `qid`: the live one if the other queue of the pair
    /// holds it already, otherwise a new, empty one.
    fn reflector(&mut self, qid: u16) -> Result<Arc<Reflector>, PmdError> {
        let slot = self
            .reflectors
            .get_mut(usize::from(qid))
            .ok_or_else(|| PmdError::invalid(format!("queue {qid} is not configured")))?;
        if let Some(r) = slot.upgrade() {
            return Ok(r);
        }
        let r = Arc::new(Reflector::new(self.depth));
        *slot = Arc::downgrade(&r);
        Ok(r)
    }
}

/// RX queue *q*: the consumer end of reflector *q*.
pub struct TmplRx {
    refl: Arc<Reflector>,
    /// Counters the SDK created for this queue and reports as port statistics.
    stats: Arc<QueueStats>,
}

/// TX queue *q*: the producer end of reflector *q*.
pub struct TmplTx {
    refl: Arc<Reflector>,
    stats: Arc<QueueStats>,
}

impl Pmd for TmplPmd {
    /// Driver name: instance names start with it (`--vdev net_tmpl0,depth=256`).
    const NAME: &'static CStr = c"net_tmpl";
    /// One line, printed by `ironpath plugins` and after every device-argument error.
    const DEVARGS_HELP: &'static CStr = c"depth=<1..65536, default 512>,mac=<aa:bb:cc:dd:ee:ff>";
    type Rx = TmplRx;
    type Tx = TmplTx;

    /// `ironpath check` asks the driver to check device arguments without creating
    /// a device (ABI 1.4). This probe creates nothing, so the check is the probe.
    const CHECKS_ARGS: bool = true;

    fn check_args(ctx: &ProbeCtx<'_>) -> Result<(), PmdError> {
        Self::probe(ctx).map(drop)
    }

    /// Create a device from its instance name and arguments. Every error names the
    /// argument and what is accepted (the `DevArgs` getters do that for you).
    fn probe(ctx: &ProbeCtx<'_>) -> Result<Self, PmdError> {
        let a = DevArgs::parse(ctx.args, KEYS)?;
        let depth = a.get_u64("depth", DEFAULT_DEPTH, 1, MAX_DEPTH)? as usize;
        // (A probe that opened a file, a socket or a device would put the parsing in
        // a function `check_args` calls too; this one creates nothing.)
        // Default MAC: locally administered (0x02), derived from the instance name so
        // that two ports differ and a port keeps its address from run to run.
        let h = ctx.name.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
        let [b0, b1, b2, b3] = h.to_be_bytes();
        let mac = a.get_mac("mac")?.unwrap_or([0x02, 0x54, b0, b1, b2, b3]);
        Ok(Self { depth, mac, mtu: 1500, promisc: false, started: false, reflectors: Vec::new() })
    }

    /// Capabilities. The host checks queue counts against `max_*_queues` before it
    /// calls `configure`; the SDK fills in `nb_xstats`.
    fn info(&self) -> abi::DevInfo {
        abi::DevInfo {
            max_rx_queues: MAX_QUEUES,
            max_tx_queues: MAX_QUEUES,
            // The reflector is sized by `depth=`, not by the descriptor count the
            // host passes to queue setup, so accept any count.
            min_desc: 0,
            max_desc: u16::MAX,
            min_mtu: MIN_MTU,
            max_mtu: MAX_MTU,
            mtu: self.mtu,
            max_rx_pktlen: u32::from(MAX_MTU) + 18,
            ..Default::default()
        }
    }

    /// Called with the device stopped, after the SDK has released every queue.
    fn configure(&mut self, conf: &abi::DevConf) -> Result<(), PmdError> {
        // TX queue q reflects into RX queue q: a TX queue without its RX partner
        // would fill up and never drain, so refuse that configuration up front.
        if conf.nb_rx_queues != conf.nb_tx_queues {
            return Err(PmdError::invalid(format!(
                "net_tmpl reflects TX queue q into RX queue q: it needs as many RX as TX queues \
                 (got {} RX, {} TX)",
                conf.nb_rx_queues, conf.nb_tx_queues
            )));
        }
        self.reflectors = (0..conf.nb_rx_queues).map(|_| Weak::new()).collect();
        Ok(())
    }

    /// `pool` is where a real NIC driver allocates the buffers it posts to its RX
    /// descriptors (`pool.alloc_bulk`), and whose memory region it maps for DMA
    /// (`pool.as_raw()`, see the guide). The reflector only hands back packets it
    /// was given, so it needs no pool.
    fn rx_queue_setup(
        &mut self,
        qid: u16,
        _nb_desc: u16,
        _pool: Pool,
        stats: Arc<QueueStats>,
    ) -> Result<TmplRx, PmdError> {
        Ok(TmplRx { refl: self.reflector(qid)?, stats })
    }

    fn tx_queue_setup(&mut self, qid: u16, _nb_desc: u16, stats: Arc<QueueStats>) -> Result<TmplTx, PmdError> {
        Ok(TmplTx { refl: self.reflector(qid)?, stats })
    }

    fn start(&mut self) -> Result<(), PmdError> {
        self.started = true;
        Ok(())
    }

    fn stop(&mut self) -> Result<(), PmdError> {
        self.started = false;
        Ok(())
    }

    /// The link is up while the port is started (a NIC would read its PHY here).
    fn link(&self) -> abi::Link {
        abi::Link { speed_mbps: 10_000, up: u8::from(self.started), full_duplex: 1, autoneg: 0, reserved: 0 }
    }

    /// Driver-specific xstats, listed after the per-queue ones the SDK makes:
    /// here, how many packets each reflector holds right now.
    fn xstats(&self) -> Vec<(String, u64)> {
        self.reflectors
            .iter()
            .enumerate()
            .map(|(q, w)| (format!("reflector_q{q}_fill"), w.upgrade().map_or(0, |r| r.len() as u64)))
            .collect()
    }

    fn mac(&self) -> Result<[u8; 6], PmdError> {
        Ok(self.mac)
    }

    fn set_mac(&mut self, mac: [u8; 6]) -> Result<(), PmdError> {
        if mac[0] & 1 != 0 {
            return Err(PmdError::invalid("a port MAC address must be unicast (first byte even)"));
        }
        self.mac = mac;
        Ok(())
    }

    fn set_mtu(&mut self, mtu: u16) -> Result<(), PmdError> {
        if !(MIN_MTU..=MAX_MTU).contains(&mtu) {
            return Err(PmdError::invalid(format!("MTU {mtu} is out of range: accepted {MIN_MTU}..={MAX_MTU}")));
        }
        self.mtu = mtu;
        Ok(())
    }

    fn set_promiscuous(&mut self, on: bool) -> Result<(), PmdError> {
        self.promisc = on;
        Ok(())
    }

    fn promiscuous(&self) -> Result<bool, PmdError> {
        Ok(self.promisc)
    }
}

// ---- the fast path ---------------------------------------------------------------
//
// One lcore at a time calls a given queue's burst function. Never block, never
// allocate per packet, never panic after taking ownership of a packet (the SDK turns
// a panic into "0 packets", and the caller would then free packets you hold).

impl RxQueue for TmplRx {
    /// Move up to `burst.room()` packets into the burst; their ownership passes to
    /// the caller. `burst.port_id()` is the host's id of this port (the SDK learns it
    /// at configure), stamped into every received packet.
    #[inline]
    fn rx_burst(&mut self, burst: &mut RxBurst<'_>) {
        let mut fifo = self.refl.lock();
        let n = burst.room().min(fifo.len());
        if n == 0 {
            return;
        }
        let port = burst.port_id();
        let mut bytes = 0u64;
        for mut p in fifo.drain(..n) {
            p.set_port(port);
            bytes += u64::from(p.len());
            // `n` fits the burst's room, so the push cannot give the packet back.
            let _ = burst.push(p);
        }
        drop(fifo);
        // Single-writer counters: only this queue's lcore writes them.
        self.stats.packets.add(n as u64);
        self.stats.bytes.add(bytes);
    }
}

impl TxQueue for TmplTx {
    /// Take packets from the front of the burst while the reflector has room. Those
    /// are now ours; the rest stay with the caller.
    #[inline]
    fn tx_burst(&mut self, burst: &mut TxBurst<'_>) {
        let mut fifo = self.refl.lock();
        let n = burst.len().min(self.refl.depth - fifo.len());
        let mut bytes = 0u64;
        for _ in 0..n {
            let Some(p) = burst.take() else { break };
            // Read the length before the packet is visible to RX (not until we unlock).
            bytes += u64::from(p.len());
            fifo.push_back(p);
        }
        drop(fifo);
        self.stats.packets.add(n as u64);
        self.stats.bytes.add(bytes);
    }
}

// Defines the `ironpath_pmd_entry` symbol the host looks up. One per library.
export_pmd!(TmplPmd);

#[cfg(test)]
mod tests {
    use super::*;
    use ironpath_pmd_sdk::testing::{run_rx, run_tx, TestPool};

    fn probe(args: &str) -> Result<TmplPmd, PmdError> {
        TmplPmd::probe(&ProbeCtx { name: "net_tmpl0", args })
    }

    fn probe_err(args: &str) -> String {
        probe(args).err().expect("probe should fail").msg
    }

    #[test]
    fn defaults() {
        let d = probe("").unwrap();
        assert_eq!(d.depth, 512);
        assert_eq!(d.mac[0], 0x02, "locally administered unicast");
        assert_eq!(probe("depth=1,mac=02:00:00:00:00:07").unwrap().mac, [2, 0, 0, 0, 0, 7]);
        assert_eq!(probe("depth=0x10000").unwrap().depth, 65536);
    }

    #[test]
    fn bad_arguments_name_the_argument_and_the_accepted_values() {
        assert_eq!(probe_err("depth=0"), "device argument `depth=0` is out of range: accepted 1..=65536");
        assert_eq!(probe_err("depth=65537"), "device argument `depth=65537` is out of range: accepted 1..=65536");
        assert_eq!(probe_err("depth=deep"), "device argument `depth=deep` is not a number: accepted 1..=65536");
        assert_eq!(probe_err("deph=4"), "unknown device argument `deph` (did you mean `depth`?); accepted: depth, mac");
        assert!(probe_err("mac=02:00").contains("`mac=02:00` is not a MAC address"));
        assert!(probe_err("depth").contains("`depth` has no value"));
        assert!(probe_err("depth=1,depth=2").contains("given twice"));
    }

    #[test]
    fn control_path_errors() {
        let mut d = probe("").unwrap();
        let conf = abi::DevConf { nb_rx_queues: 2, nb_tx_queues: 1, ..Default::default() };
        assert!(d.configure(&conf).unwrap_err().msg.contains("got 2 RX, 1 TX"));
        assert_eq!(d.set_mtu(67).unwrap_err().msg, "MTU 67 is out of range: accepted 68..=9000");
        d.set_mtu(9000).unwrap();
        assert_eq!(d.info().mtu, 9000);
        assert!(d.set_mac([1, 0, 0, 0, 0, 0]).is_err());
        assert_eq!(d.link().up, 0);
        d.start().unwrap();
        assert_eq!(d.link().up, 1);
    }

    #[test]
    fn reflects_in_order_refuses_when_full_and_frees_leftovers() {
        // A stand-in for a host pool, so the fast path runs without the host.
        let tp = TestPool::new(16, 2048, 128);
        let mut d = probe("depth=4").unwrap();
        d.configure(&abi::DevConf { nb_rx_queues: 1, nb_tx_queues: 1, port_id: 3, ..Default::default() }).unwrap();
        let (rs, ts) = (Arc::new(QueueStats::default()), Arc::new(QueueStats::default()));
        let mut rx = d.rx_queue_setup(0, 0, tp.pool(), rs.clone()).unwrap();
        let mut tx = d.tx_queue_setup(0, 0, ts.clone()).unwrap();

        let pkts: Vec<_> = (0..6u8).map(|i| tp.packet(&vec![i; 60 + usize::from(i)])).collect();
        // Six offered, four fit: the driver takes the first four, the caller keeps two.
        let left = run_tx(&mut tx, pkts);
        assert_eq!(left.len(), 2);
        assert_eq!(d.xstats(), vec![("reflector_q0_fill".to_string(), 4)]);
        let got = run_rx(&mut rx, 2, 3);
        assert_eq!(got.iter().map(|p| p.data()[0]).collect::<Vec<_>>(), vec![0, 1], "received in the order sent");
        assert!(got.iter().all(|p| p.mbuf().port == 3), "stamped with the port id");
        assert!(run_tx(&mut tx, left).is_empty());
        assert_eq!((ts.packets.get(), ts.bytes.get()), (6, 60 + 61 + 62 + 63 + 64 + 65));
        assert_eq!((rs.packets.get(), rs.bytes.get()), (2, 60 + 61));
        drop(got);
        assert_eq!(tp.in_use(), 4);

        // Four packets are still parked: releasing both queues frees them.
        drop(rx);
        assert_eq!(tp.in_use(), 4, "TX still holds the reflector");
        drop(tx);
        assert_eq!(tp.in_use(), 0);
        assert_eq!(d.xstats(), vec![("reflector_q0_fill".to_string(), 0)]);
    }
}
