//! The two ends of an edge between nodes on different lcores: the engine puts a
//! `ring_tx` sink on the sending lcore and a `ring_rx` source on the receiving
//! one, joined by an SPSC ring (`ringbuf`). A full ring drops and counts.

use crate::node::{CounterSpec, Dispatch, Node, NodeCx, SleepPlan};
use ironpath_eal::sleep::Doorbell;
use ironpath_eal::spsc::{SpscConsumer, SpscProducer};
use ironpath_eal::{Burst, MAX_BURST};
use std::sync::Arc;

crate::counters! {
    /// What `ring_tx` counts.
    enum TxCounter {
        Enqueued("enqueued", "packets"),
        RingFull("ring_full", "packets dropped"),
    }
}

crate::counters! {
    /// What `ring_rx` counts.
    enum RxCounter {
        Dequeued("dequeued", "packets"),
    }
}

/// Sending end of a cross-lcore edge (a sink), with the receiving lcore's doorbell
/// (rung after an enqueue, in case that lcore sleeps).
pub(crate) struct RingTx(pub SpscProducer, pub Arc<Doorbell>);

impl Node for RingTx {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        let n = self.0.enqueue_from(pkts);
        if n > 0 {
            self.1.ring();
        }
        cx.count(TxCounter::Enqueued, n as u64);
        if !pkts.is_empty() {
            cx.count(TxCounter::RingFull, pkts.len() as u64);
            pkts.free_all();
        }
        Dispatch::Consumed
    }

    fn counters(&self) -> &'static [CounterSpec] {
        TxCounter::SPECS
    }
}

/// Receiving end of a cross-lcore edge (a source).
pub(crate) struct RingRx(pub SpscConsumer);

impl Node for RingRx {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        let room = pkts.room().min(64);
        let n = self.0.dequeue_into(pkts, room);
        if n > 0 {
            cx.count(RxCounter::Dequeued, n as u64);
        }
        Dispatch::All(0)
    }

    fn counters(&self) -> &'static [CounterSpec] {
        RxCounter::SPECS
    }

    /// The producer rings this lcore's doorbell after each enqueue.
    fn sleep(&mut self, _cx: &mut NodeCx<'_>, plan: &mut SleepPlan) {
        plan.quiet();
    }

    fn stop(&mut self) {
        // Producers have stopped (the engine joins every lcore first): free what is
        // still in flight so no packet leaks from its pool.
        let mut b = Burst::new();
        while self.0.dequeue_into(&mut b, MAX_BURST) > 0 {
            b.free_all();
        }
    }
}
