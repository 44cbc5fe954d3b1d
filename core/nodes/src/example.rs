//! `sample`: pass one packet in `every`, drop the others (an example node kind).

use crate::kind::NodeKind;
use ironpath_config::{Nexts, NodeSpec, ParamKind, ParamSpec};
use ironpath_eal::{Burst, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx};

ironpath_graph::counters! {
    /// What `sample` counts.
    pub enum SampleCounter {
        Passed("passed", "packets sent on"),
        Dropped("dropped", "packets not sampled"),
    }
}

/// The node: a packet counter modulo `every`.
pub struct Sample {
    every: u64,
    seen: u64,
}

impl Node for Sample {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        let before = pkts.len();
        let (every, seen) = (self.every, &mut self.seen);
        pkts.retain(|_, _| {
            *seen += 1;
            *seen % every == 0
        });
        cx.count(SampleCounter::Passed, pkts.len() as u64);
        cx.count(SampleCounter::Dropped, (before - pkts.len()) as u64);
        Dispatch::All(0)
    }

    fn counters(&self) -> &'static [CounterSpec] {
        SampleCounter::SPECS
    }
}

/// The kind: its spec (the default is written here only) and its constructor.
pub const KIND: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "sample",
        doc: "pass one packet in `every`, drop the others",
        params: &[ParamSpec::new("every", ParamKind::Uint { min: 1, max: 1_000_000 })
            .default("10")
            .doc("1 packet in this many passes")],
        nexts: Nexts::Fixed(&["out"]),
        ..NodeSpec::DEFAULT
    },
    build: |b, _env| Ok(Box::new(Sample { every: b.params().uint("every")?, seen: 0 })),
};
