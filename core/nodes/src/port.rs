//! `port_rx` (a source: receive bursts from one queue) and `port_tx` (a sink:
//! send to one queue; what the queue refuses is dropped and counted, never held;
//! completions are reclaimed when the lcore is idle).

use crate::kind::{NodeKind, PORT, QUEUE};
use crate::offload::{FixupStats, TxFixup};
use ironpath_config::{Nexts, NodeSpec, ParamKind, ParamSpec, QueueUse};
use ironpath_eal::{Burst, Mbuf, RxQ, TxQ, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx, SleepPlan, DROP};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Receive from one port queue.
pub struct PortRx {
    q: RxQ,
    burst: usize,
    /// The port's administrative state (`None`: always up).
    admin: Option<Arc<AtomicBool>>,
    /// The queue's wake-up is armed (the lcore is about to sleep).
    armed: bool,
}

ironpath_graph::counters! {
    /// What `port_rx` counts.
    pub enum RxCounter {
        AdminDown("admin_down", "packets dropped (the port is administratively down: set interface state)"),
    }
}

impl PortRx {
    /// A receiver of up to `burst` packets per poll.
    pub fn new(q: RxQ, burst: usize) -> Self {
        Self { q, burst: burst.clamp(1, MAX_BURST), admin: None, armed: false }
    }

    /// Drop what the port receives while `admin` is false.
    pub fn with_admin(mut self, admin: Option<Arc<AtomicBool>>) -> Self {
        self.admin = admin;
        self
    }
}

impl Node for PortRx {
    #[inline]
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        let room = pkts.room().min(self.burst);
        pkts.rx(&self.q, room);
        if let Some(a) = &self.admin {
            if !a.load(Ordering::Relaxed) && !pkts.is_empty() {
                cx.count(RxCounter::AdminDown, pkts.len() as u64);
                return Dispatch::All(DROP);
            }
        }
        Dispatch::All(0)
    }

    fn counters(&self) -> &'static [CounterSpec] {
        RxCounter::SPECS
    }

    fn sleep(&mut self, _cx: &mut NodeCx<'_>, plan: &mut SleepPlan) {
        match self.q.wake_fd() {
            Some(fd) => plan.wake_on(fd),
            None => plan.keep_polling("a receive queue without a wake-up source (the driver has none)"),
        }
    }

    fn arm(&mut self, _cx: &mut NodeCx<'_>) -> bool {
        self.armed = self.q.wake_arm(true);
        self.armed
    }

    fn woke(&mut self, _cx: &mut NodeCx<'_>) {
        if std::mem::take(&mut self.armed) {
            self.q.wake_arm(false);
        }
    }
}

ironpath_graph::counters! {
    /// What `port_tx` counts.
    pub enum TxCounter {
        Sent("sent", "packets"),
        TxFull("tx_full", "packets dropped (queue full)"),
        CsumSw("csum_sw", "checksums completed in software (the port cannot)"),
        GsoSplit("gso_split", "GSO frames or aggregates cut into segments in software"),
        OffloadDropped("offload_dropped", "packets dropped: an offload neither the port nor software could do"),
        AdminDown("admin_down", "packets dropped (the port is administratively down: set interface state)"),
    }
}

/// Send to one port queue.
pub struct PortTx {
    q: TxQ,
    retries: u32,
    fixup: TxFixup,
    /// Packets cut into more than a burst holds, sent after it.
    more: Vec<Mbuf>,
    seen: FixupStats,
    /// The port's administrative state (`None`: always up).
    admin: Option<Arc<AtomicBool>>,
}

impl PortTx {
    /// A sender that retries a full queue `retries` times before dropping; `fixup`
    /// does in software what the port cannot.
    pub fn new(q: TxQ, retries: u32, fixup: TxFixup) -> Self {
        Self { q, retries, fixup, more: Vec::new(), seen: FixupStats::default(), admin: None }
    }

    /// Drop what is sent to the port while `admin` is false.
    pub fn with_admin(mut self, admin: Option<Arc<AtomicBool>>) -> Self {
        self.admin = admin;
        self
    }

    /// Sends `pkts`; returns (sent, dropped as the queue stayed full).
    fn send(&mut self, pkts: &mut Burst) -> (u64, u64) {
        let n = pkts.len();
        let mut left = self.retries;
        while !pkts.is_empty() {
            let before = pkts.len();
            pkts.tx(&self.q);
            if pkts.len() == before {
                if left == 0 {
                    break;
                }
                left -= 1;
            }
        }
        let unsent = pkts.len();
        if unsent > 0 {
            pkts.free_all();
        }
        ((n - unsent) as u64, unsent as u64)
    }
}

impl Node for PortTx {
    #[inline]
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        if let Some(a) = &self.admin {
            if !a.load(Ordering::Relaxed) {
                cx.count(TxCounter::AdminDown, pkts.len() as u64);
                cx.dropped(pkts.len() as u64);
                pkts.free_all();
                return Dispatch::Consumed;
            }
        }
        let more = &mut self.more;
        self.fixup.prepare(pkts, |m| more.push(m));
        let (mut sent, mut full) = self.send(pkts);
        while !self.more.is_empty() {
            let mut rest = std::mem::take(&mut self.more);
            for m in rest.drain(..) {
                if let Err(m) = pkts.push(m) {
                    self.more.push(m);
                }
            }
            self.more.append(&mut rest);
            let (s, f) = self.send(pkts);
            (sent, full) = (sent + s, full + f);
        }
        cx.count(TxCounter::Sent, sent);
        if full > 0 {
            cx.count(TxCounter::TxFull, full);
            cx.dropped(full);
        }
        let st = self.fixup.stats;
        if st != self.seen {
            cx.count(TxCounter::CsumSw, st.csum_sw - self.seen.csum_sw);
            cx.count(TxCounter::GsoSplit, st.gso_split - self.seen.gso_split);
            cx.count(TxCounter::OffloadDropped, st.dropped - self.seen.dropped);
            cx.dropped(st.dropped - self.seen.dropped);
            self.seen = st;
        }
        Dispatch::Consumed
    }

    fn counters(&self) -> &'static [CounterSpec] {
        TxCounter::SPECS
    }

    fn idle(&mut self, _cx: &mut NodeCx<'_>) {
        // Nothing to send: let the driver free what the device has finished, so that
        // senders waiting for completions (tcp's tx_inflight_limit) do not wait for the
        // next burst.
        self.q.done_cleanup(0);
    }

    fn sleep(&mut self, _cx: &mut NodeCx<'_>, plan: &mut SleepPlan) {
        // Completions come with no signal: a sender waiting for them (tcp's
        // tx_inflight_limit) would wait for the next packet.
        if self.q.holds_packets() && self.q.inflight() > 0 {
            plan.keep_polling("sent packets the device has not completed");
        }
    }
}

/// `port_rx`: receive bursts from one queue of a port.
pub const PORT_RX: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "port_rx",
        doc: "receive bursts from one queue of a port (polled)",
        params: &[
            PORT,
            QUEUE,
            ParamSpec::new("burst", ParamKind::Uint { min: 1, max: 256 }).default("32").doc("packets per poll"),
        ],
        nexts: Nexts::Fixed(&["out"]),
        source: true,
        queue: QueueUse::Rx,
        ..NodeSpec::DEFAULT
    },
    build: |b, env| {
        let p = b.params();
        let port = p.port("port")?;
        Ok(Box::new(
            PortRx::new(env.rx_queue(port, p.int("queue")?)?, p.int("burst")?).with_admin(env.admin_state(port)),
        ))
    },
};

/// `port_tx`: send to one queue of a port.
pub const PORT_TX: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "port_tx",
        doc: "send to one queue of a port; what the queue refuses is dropped and counted (tx_full)",
        params: &[
            PORT,
            QUEUE,
            ParamSpec::new("retries", ParamKind::Uint { min: 0, max: 1024 })
                .default("0")
                .doc("retries of a full queue before dropping"),
        ],
        queue: QueueUse::Tx,
        ..NodeSpec::DEFAULT
    },
    build: |b, env| {
        let p = b.params();
        let port = p.port("port")?;
        let fixup = TxFixup::new(env.port_tx_offloads(port), env.mempool(None, Some(port))?);
        let tx = PortTx::new(env.tx_queue(port, p.int("queue")?)?, p.int("retries")?, fixup);
        Ok(Box::new(tx.with_admin(env.admin_state(port))))
    },
};
