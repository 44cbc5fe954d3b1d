//! Per-node counters: written by the one lcore that runs the node, read by anyone.

use crate::node::CounterSpec;
pub use ironpath_util::Counter;

/// The counters of one node, like VPP's `show runtime` row plus the node's own.
#[derive(Debug)]
pub struct NodeStats {
    /// Calls of `process` (for source nodes, every poll).
    pub calls: Counter,
    /// Calls that handled at least one packet.
    pub busy_calls: Counter,
    /// Packets handled (received by a source, given to any other node).
    pub packets: Counter,
    /// TSC cycles of the sampled calls (one walk in [`crate::TIME_EVERY`]), each
    /// from the previous clock read to the end of its dispatch.
    pub cycles: Counter,
    /// Sampled cycles of calls that handled no packet (idle polls).
    pub idle_cycles: Counter,
    /// Packets handled in the sampled calls.
    pub timed_packets: Counter,
    /// Packets the node dropped ([`crate::DROP`], or left over after `Consumed`).
    pub drops: Counter,
    /// Packets sent to a next edge that is not connected (freed).
    pub unconnected: Counter,
    /// Packets dropped because the next node's input frame was full.
    pub frame_full: Counter,
    /// Calls of the node that panicked (see the `guard` module: the call's packets
    /// are dropped, the node runs on).
    pub panics: Counter,
    /// Packets dropped because the call that held them panicked.
    pub panic_drops: Counter,
    /// Packets dropped without a call because the node was fenced (it panicked on
    /// every call for a while).
    pub fenced_drops: Counter,
    /// Times the node was fenced.
    pub fences: Counter,
    /// 1 while the node is fenced, else 0.
    pub fenced: Counter,
    /// The node's first panic: its message and where it happened.
    pub first_panic: std::sync::OnceLock<String>,
    /// Names and units of the node's own counters.
    pub extra_specs: &'static [CounterSpec],
    extra: Box<[Counter]>,
    /// Names and units of the node's gauges (values it sets, not adds to).
    pub gauge_specs: &'static [CounterSpec],
    gauges: Box<[Counter]>,
}

impl NodeStats {
    /// Counters for a node that declares `extra_specs`.
    pub fn new(extra_specs: &'static [CounterSpec]) -> Self {
        Self {
            calls: Counter::default(),
            busy_calls: Counter::default(),
            packets: Counter::default(),
            cycles: Counter::default(),
            idle_cycles: Counter::default(),
            timed_packets: Counter::default(),
            drops: Counter::default(),
            unconnected: Counter::default(),
            frame_full: Counter::default(),
            panics: Counter::default(),
            panic_drops: Counter::default(),
            fenced_drops: Counter::default(),
            fences: Counter::default(),
            fenced: Counter::default(),
            first_panic: std::sync::OnceLock::new(),
            extra_specs,
            extra: extra_specs.iter().map(|_| Counter::default()).collect(),
            gauge_specs: &[],
            gauges: Box::default(),
        }
    }

    /// The same with the gauges a node declares ([`crate::Node::gauges`]).
    pub fn with_gauges(mut self, specs: &'static [CounterSpec]) -> Self {
        self.gauge_specs = specs;
        self.gauges = specs.iter().map(|_| Counter::default()).collect();
        self
    }

    #[inline(always)]
    pub(crate) fn set_gauge(&self, k: usize, v: u64) {
        if let Some(c) = self.gauges.get(k) {
            c.set(v);
        }
    }

    /// The node's gauges, with their names and units.
    pub fn gauges(&self) -> impl Iterator<Item = (&'static CounterSpec, u64)> + '_ {
        self.gauge_specs.iter().zip(self.gauges.iter().map(Counter::get))
    }

    #[inline(always)]
    pub(crate) fn add_extra(&self, k: usize, n: u64) {
        if let Some(c) = self.extra.get(k) {
            c.add(n);
        }
    }

    /// The node's own counters, with their names and units.
    pub fn extra(&self) -> impl Iterator<Item = (&'static CounterSpec, u64)> + '_ {
        self.extra_specs.iter().zip(self.extra.iter().map(Counter::get))
    }

    /// One of the node's own counters by name.
    pub fn extra_by_name(&self, name: &str) -> Option<u64> {
        self.extra().find(|(s, _)| s.name == name).map(|(_, v)| v)
    }

    /// Snapshot of the common counters.
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            calls: self.calls.get(),
            busy_calls: self.busy_calls.get(),
            packets: self.packets.get(),
            cycles: self.cycles.get(),
            idle_cycles: self.idle_cycles.get(),
            timed_packets: self.timed_packets.get(),
            drops: self.drops.get()
                + self.unconnected.get()
                + self.frame_full.get()
                + self.panic_drops.get()
                + self.fenced_drops.get(),
        }
    }
}

/// Plain values of a node's common counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Calls.
    pub calls: u64,
    /// Calls with packets.
    pub busy_calls: u64,
    /// Packets the node was given (a node given none: those it brought in).
    pub packets: u64,
    /// Cycles in the sampled calls.
    pub cycles: u64,
    /// Cycles in sampled calls without packets.
    pub idle_cycles: u64,
    /// Packets in the sampled calls.
    pub timed_packets: u64,
    /// All drops (node, unconnected, frame full, a panicking or fenced node).
    pub drops: u64,
}

impl StatsSnapshot {
    /// What was counted since `base` (an earlier snapshot of the same node);
    /// saturating, so a base taken from other counters gives zeros, not a wrap.
    pub fn since(&self, base: &StatsSnapshot) -> StatsSnapshot {
        StatsSnapshot {
            calls: self.calls.saturating_sub(base.calls),
            busy_calls: self.busy_calls.saturating_sub(base.busy_calls),
            packets: self.packets.saturating_sub(base.packets),
            cycles: self.cycles.saturating_sub(base.cycles),
            idle_cycles: self.idle_cycles.saturating_sub(base.idle_cycles),
            timed_packets: self.timed_packets.saturating_sub(base.timed_packets),
            drops: self.drops.saturating_sub(base.drops),
        }
    }

    /// Cycles per packet over the sampled calls that handled packets (idle polls
    /// excluded, as they cost nothing when there is work).
    pub fn cycles_per_packet(&self) -> f64 {
        if self.timed_packets == 0 {
            0.0
        } else {
            (self.cycles - self.idle_cycles.min(self.cycles)) as f64 / self.timed_packets as f64
        }
    }

    /// Packets per call, idle calls included (VPP's vectors/call).
    pub fn packets_per_call(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.packets as f64 / self.calls as f64
        }
    }

    /// Packets per busy call (a call that handled packets): the frame size a node
    /// sees when it has work.
    pub fn packets_per_busy_call(&self) -> f64 {
        if self.busy_calls == 0 {
            0.0
        } else {
            self.packets as f64 / self.busy_calls as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_ratios() {
        static SPECS: [CounterSpec; 1] = [CounterSpec { name: "x", unit: "packets" }];
        let s = NodeStats::new(&SPECS);
        s.add_extra(0, 5);
        s.add_extra(7, 5); // out of range: ignored
        s.packets.add(10);
        s.calls.add(8);
        s.busy_calls.add(2);
        s.cycles.add(1000);
        s.idle_cycles.add(200);
        s.timed_packets.add(10);
        assert_eq!(s.extra_by_name("x"), Some(5));
        let snap = s.snapshot();
        assert_eq!(snap.cycles_per_packet(), 80.0);
        assert_eq!(snap.packets_per_call(), 1.25);
        assert_eq!(snap.packets_per_busy_call(), 5.0);
    }
}
