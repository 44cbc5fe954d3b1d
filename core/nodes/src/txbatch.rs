//! `tx_batch`: the last pipeline stage, a [`TxBatcher`] on one port queue.
//!
//! Packets wait until `coalesce` are buffered, the oldest has waited `flush_us`, the
//! lcore is idle (`flush_on_idle`), or one carries [`ironpath_eal::TX_PUSH`]. Every
//! poll also reclaims completed transmissions from the driver and applies the
//! completion policy (see [`ironpath_eal::txbatch`]). Counters say why each flush
//! happened and how many packets a flush carried.

use crate::kind::{NodeError, NodeKind, PORT, QUEUE};
use crate::offload::{FixupStats, TxFixup};
use ironpath_config::{NodeSpec, ParamKind, ParamSpec, QueueUse, VariantSpec};
use ironpath_eal::{Burst, Mbuf, TxBatchStats, TxBatcher, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx, SleepPlan};

ironpath_graph::counters! {
    /// What `tx_batch` counts.
    pub enum TxBatchCounter {
        Sent("sent", "packets"),
        Bytes("bytes", "bytes sent"),
        TxFull("tx_full", "packets dropped (queue full)"),
        FlushFull("flush_full", "flushes (coalesce reached)"),
        FlushTimeout("flush_timeout", "flushes (flush_us)"),
        FlushIdle("flush_idle", "flushes (idle lcore)"),
        FlushPush("flush_push", "flushes (pushed packet)"),
        FlushStop("flush_stop", "flushes (stop)"),
        Completions("completions", "packets reported complete"),
        MaxWaitUs("max_wait_us", "longest wait in the buffer (raised, never lowered)"),
        CsumSw("csum_sw", "checksums completed in software (the port cannot)"),
        GsoSplit("gso_split", "GSO frames or aggregates cut into segments in software"),
        OffloadDropped("offload_dropped", "packets dropped: an offload neither the port nor software could do"),
    }
}

/// The `tx_batch` node.
pub struct TxBatch {
    b: TxBatcher,
    shown: TxBatchStats,
    shown_wait_us: u64,
    shown_version: u64,
    /// TSC of the last publication (counters are published at most every ~100 us
    /// while busy, and on every idle walk).
    shown_at: u64,
    hz: u64,
    fixup: TxFixup,
    /// Packets cut into more than a burst holds, queued after it.
    more: Vec<Mbuf>,
    fixup_seen: FixupStats,
}

impl TxBatch {
    /// A node around `b`; `hz` converts ticks to microseconds for `max_wait_us`;
    /// `fixup` does in software what the port cannot.
    pub fn new(b: TxBatcher, hz: u64, fixup: TxFixup) -> Self {
        Self {
            b,
            shown: TxBatchStats::default(),
            shown_wait_us: 0,
            shown_version: 0,
            shown_at: 0,
            hz,
            fixup,
            more: Vec::new(),
            fixup_seen: FixupStats::default(),
        }
    }

    /// Publish the software-offload counters' increments.
    fn sync_fixup(&mut self, cx: &NodeCx<'_>) {
        let (st, old) = (self.fixup.stats, self.fixup_seen);
        if st != old {
            cx.count(TxBatchCounter::CsumSw, st.csum_sw - old.csum_sw);
            cx.count(TxBatchCounter::GsoSplit, st.gso_split - old.gso_split);
            cx.count(TxBatchCounter::OffloadDropped, st.dropped - old.dropped);
            cx.dropped(st.dropped - old.dropped);
            self.fixup_seen = st;
        }
    }

    /// Publish counter increments since the last call.
    #[inline]
    fn sync(&mut self, cx: &NodeCx<'_>) {
        if self.b.version() == self.shown_version {
            return;
        }
        self.shown_version = self.b.version();
        let s = self.b.stats();
        let old = self.shown;
        let add = |k: usize, new: u64, old: u64| {
            if new != old {
                cx.count(k, new.wrapping_sub(old));
            }
        };
        add(0, s.sent, old.sent);
        add(1, s.bytes, old.bytes);
        add(2, s.tx_full, old.tx_full);
        cx.dropped(s.tx_full.wrapping_sub(old.tx_full));
        for k in 0..s.flushes.len() {
            add(3 + k, s.flushes[k], old.flushes[k]);
        }
        add(8, s.completions, old.completions);
        if s.max_wait_tsc != old.max_wait_tsc {
            let wait_us = ironpath_eal::txbatch::tsc_to_us(s.max_wait_tsc, self.hz);
            if wait_us > self.shown_wait_us {
                cx.count(TxBatchCounter::MaxWaitUs, wait_us - self.shown_wait_us);
                self.shown_wait_us = wait_us;
            }
        }
        self.shown = s;
    }
}

impl Node for TxBatch {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        if !pkts.is_empty() {
            let more = &mut self.more;
            self.fixup.prepare(pkts, |m| more.push(m));
            self.b.enqueue(pkts, cx.now_tsc);
            if !self.more.is_empty() {
                let mut rest = Burst::new();
                for m in std::mem::take(&mut self.more) {
                    if let Err(m) = rest.push(m) {
                        self.b.enqueue(&mut rest, cx.now_tsc);
                        let _ = rest.push(m);
                    }
                }
                self.b.enqueue(&mut rest, cx.now_tsc);
            }
            self.sync_fixup(cx);
        }
        self.b.poll(cx.now_tsc);
        if cx.now_tsc.wrapping_sub(self.shown_at) > self.hz / 10_000 {
            self.shown_at = cx.now_tsc;
            self.sync(cx);
        }
        Dispatch::Consumed
    }

    fn counters(&self) -> &'static [CounterSpec] {
        TxBatchCounter::SPECS
    }

    fn idle(&mut self, cx: &mut NodeCx<'_>) {
        self.b.idle(cx.now_tsc);
        self.sync(cx);
    }

    fn sleep(&mut self, _cx: &mut NodeCx<'_>, plan: &mut SleepPlan) {
        match self.b.wake_need() {
            Err(why) => plan.keep_polling(why),
            Ok(Some(t)) => plan.until(t),
            Ok(None) => plan.quiet(),
        }
    }

    fn stop(&mut self) {
        self.b.stop(ironpath_eal::tsc::rdtsc());
    }
}

/// `tx_batch`'s completion policies.
const COMPLETION: &[VariantSpec] = &[
    VariantSpec { name: "immediate", arg: None },
    VariantSpec { name: "every", arg: Some((1, 65_536)) },
    VariantSpec { name: "timer_us", arg: Some((1, 10_000_000)) },
];

/// `tx_batch`: batched TX with bounded delay and explicit completions.
pub const KIND: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "tx_batch",
        doc: "send to one queue of a port in batches: flush at `coalesce` packets, after `flush_us`, when the lcore is idle, or on a push (SYN/FIN/PSH segments of `tcp`); reclaims completions every poll and can emulate a NIC's completion coalescing",
        params: &[
            PORT,
            QUEUE,
            ParamSpec::new("coalesce", ParamKind::Uint { min: 1, max: 256 }).default("32").doc("flush when this many packets are buffered"),
            ParamSpec::new("flush_us", ParamKind::Duration).default("100us").doc("flush when the oldest buffered packet has waited this long"),
            ParamSpec::new("flush_on_idle", ParamKind::Bool).default("true").doc("flush when a walk of the lcore finds no work (a lone ACK leaves within one poll)"),
            ParamSpec::new("completion", ParamKind::Variant(COMPLETION)).default("immediate").doc("when sent packets are reported complete (freed): as soon as the driver frees them, or emulating a NIC's coalescing: every N packets (`tx-frames`) or T microseconds after the oldest (`tx-usecs`)"),
            ParamSpec::new("retries", ParamKind::Uint { min: 0, max: 1024 }).default("0").doc("retries of a full queue (after reclaiming completions) before dropping"),
        ],
        source: true,
        queue: QueueUse::Tx,
        ..NodeSpec::DEFAULT
    },
    build: |b, env| {
        let p = b.params();
        let port = p.port("port")?;
        let hz = env.tsc_hz();
        let completion = match p.raw().variant("completion").ok_or(NodeError::Missing("completion"))? {
            ("immediate", None) => ironpath_eal::Completion::Immediate,
            ("every", Some(n)) => ironpath_eal::Completion::Every(n as u32),
            ("timer_us", Some(t)) => ironpath_eal::Completion::Timer(ironpath_eal::txbatch::us_to_tsc(t, hz)),
            (other, _) => {
                return Err(NodeError::Param { param: "completion", reason: format!("`{other}` is not a form of it") })
            }
        };
        let cfg = ironpath_eal::TxBatchConfig {
            coalesce: p.int("coalesce")?,
            flush_tsc: p.tsc("flush_us", hz)?,
            flush_on_idle: p.bool("flush_on_idle")?,
            completion,
            retries: p.int("retries")?,
            hz,
        };
        let q = env.tx_queue(port, p.int("queue")?)?;
        let fixup = TxFixup::new(env.port_tx_offloads(port), env.mempool(None, Some(port))?);
        Ok(Box::new(TxBatch::new(ironpath_eal::TxBatcher::new(q, cfg), hz, fixup)))
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{counter, pool, stats};
    use ironpath_eal::port::testing::sink_txq;
    use ironpath_eal::{Completion, Mbuf, TxBatchConfig};
    use ironpath_graph::testing;

    fn node(
        coalesce: usize,
        flush_tsc: u64,
        idle: bool,
    ) -> (TxBatch, std::sync::Arc<ironpath_eal::port::testing::SinkDevice>) {
        let (q, dev) = sink_txq(4096, false);
        let cfg = TxBatchConfig {
            coalesce,
            flush_tsc,
            flush_on_idle: idle,
            completion: Completion::Immediate,
            retries: 0,
            hz: 1_000_000,
        };
        let fixup = crate::offload::TxFixup::new(u64::MAX, pool(16));
        (TxBatch::new(TxBatcher::new(q, cfg), 1_000_000, fixup), dev)
    }

    #[test]
    fn a_lone_ack_leaves_on_the_first_idle_poll_and_counters_show_why() {
        let p = pool(64);
        let (mut n, dev) = node(32, 1_000_000, true);
        let st = stats(&n);
        let mut b = Burst::new();
        assert!(b.push(Mbuf::from_slice(&p, &[0u8; 54]).unwrap()).is_ok());
        testing::call(&mut n, &st, &mut b, 10);
        assert_eq!(dev.logged(), 0, "waits for a batch");
        testing::idle(&mut n, &st, 10);
        assert_eq!(dev.logged(), 1, "sent within one poll");
        assert_eq!(counter(&st, "flush_idle"), 1);
        assert_eq!(counter(&st, "sent"), 1);
        assert_eq!(counter(&st, "bytes"), 54);
        assert_eq!(p.stats().in_use, 0);
    }
}
