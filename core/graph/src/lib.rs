//! `ironpath-graph`: the node graph engine.
//!
//! It owns:
//! * [`Node`], the trait of a graph node: one function over a burst that says where
//!   each packet goes next ([`Dispatch`]), plus declared counters;
//! * [`build`]: checking declared nodes and edges, inserting an SPSC ring (a
//!   `ring_tx`/`ring_rx` pair of nodes) on each edge between lcores, and ordering
//!   each lcore's nodes topologically into an [`LcoreGraph`];
//! * [`LcoreGraph::run_once`]: one walk of an lcore's graph (sources polled, others
//!   run when their input frame has packets), with per-node counters (calls,
//!   packets, TSC cycles, drops) as VPP's `show runtime`;
//! * [`runner`]: pinned lcore threads and a clean stop;
//! * [`GraphInfo`]: the control plane's view (`show graph`, `show runtime`, trace,
//!   live [`capture`] filtered by a classic [`bpf`] program);
//! * [`control`]: table changes at run time, built off the fast path and taken by
//!   the node's lcore between two bursts.
//!
//! Nothing here allocates, locks or logs per packet unless a trace is armed (a
//! capture copies into records it allocated when armed).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bpf;
mod builder;
pub mod capture;
pub mod control;
pub mod guard;
mod info;
mod node;
mod ring;
pub mod runner;
mod sched;
mod stats;
mod summary;
mod trace;

pub use builder::{build, EdgeDecl, Graph, GraphError, NodeDecl};
pub use control::{ApplyPanicked, ControlEntry, Controller, Msg, Remote};
pub use info::{EdgeInfo, EdgeStats, GraphInfo, LcoreStats, NodeInfo, PortRole, RuntimeBase};
pub use ironpath_eal::sleep::RxMode;
pub use node::{CounterSpec, Dispatch, Node, NodeCx, SleepPlan, DROP};
pub use sched::{LcoreGraph, TIME_EVERY};
pub use stats::{Counter, NodeStats, StatsSnapshot};
pub use trace::{ol_flag_names, summarize, TraceBuf, TRACE_CAPACITY, TRACE_MAX_PACKETS, TRACE_RECORD_MAX};

/// Running one node outside a graph, for node tests and fuzz targets.
#[cfg(feature = "test-utils")]
pub mod testing {
    use crate::{Dispatch, Node, NodeCx, NodeStats};
    use ironpath_eal::{Burst, MAX_BURST};

    /// The outcome of one [`call`].
    pub struct Call {
        /// What the node returned.
        pub dispatch: Dispatch,
        /// The per-packet nexts it wrote (meaningful for [`Dispatch::Each`]).
        pub next: Box<[u16; MAX_BURST]>,
    }

    /// Call `node.process` once on `pkts` with TSC time `now_tsc`, counting into `stats`
    /// (make it with `NodeStats::new(node.counters())`).
    pub fn call(node: &mut dyn Node, stats: &NodeStats, pkts: &mut Burst, now_tsc: u64) -> Call {
        let mut next = Box::new([crate::DROP; MAX_BURST]);
        let mut cx = NodeCx { now_tsc, lcore: 0, stats, live: false };
        let dispatch = node.process(&mut cx, pkts, &mut next);
        Call { dispatch, next }
    }

    /// Call `node.idle` once (a walk that found no work) at TSC time `now_tsc`.
    pub fn idle(node: &mut dyn Node, stats: &NodeStats, now_tsc: u64) {
        let mut cx = NodeCx { now_tsc, lcore: 0, stats, live: false };
        node.idle(&mut cx);
    }

    /// Hand `msg` to `node.apply` as its lcore would between two bursts.
    pub fn apply(node: &mut dyn Node, stats: &NodeStats, msg: crate::Msg) -> crate::Msg {
        let mut cx = NodeCx { now_tsc: 0, lcore: 0, stats, live: false };
        node.apply(&mut cx, msg)
    }
}
