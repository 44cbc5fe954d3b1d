//! Receive aggregation in testpmd, as DPDK's `set port ID gro on|off`,
//! `set gro flush N` and `show port ID gro`: streams whose RX port has GRO on run
//! each received burst through an [`Aggregator`] before the forwarding engine
//! sees it. `set gro flush 1` (the default) aggregates within each burst; with
//! N > 1 aggregates may span bursts and are flushed after N polls.

use super::engine::Stream;
use ironpath_nodes::aggregate::{AggrConfig, Aggregator, Flush, Mode};
use std::collections::BTreeSet;
use std::fmt::Write;

/// Most polls an aggregate may wait (DPDK's `RTE_GRO_MAX_FLUSH_CYCLES`).
pub const MAX_FLUSH_CYCLES: u32 = 4;

/// The shell's GRO settings.
#[derive(Clone, Debug)]
pub struct GroSettings {
    /// Ports with GRO on.
    pub ports: BTreeSet<u16>,
    /// Polls before held aggregates are flushed (1: every burst).
    pub flush_cycles: u32,
}

impl Default for GroSettings {
    fn default() -> Self {
        Self { ports: BTreeSet::new(), flush_cycles: 1 }
    }
}

impl GroSettings {
    /// The aggregator configuration for a stream.
    pub fn config(&self) -> AggrConfig {
        AggrConfig {
            mode: Mode::Gro,
            flush: if self.flush_cycles <= 1 { Flush::Burst } else { Flush::Timeout },
            // The "clock" of a stream's aggregator counts polls.
            flush_tsc: u64::from(self.flush_cycles.saturating_sub(1)),
            ..AggrConfig::default()
        }
    }
}

/// A stream's aggregator and its poll clock.
pub struct StreamGro {
    agg: Aggregator,
    polls: u64,
    reported: [u64; 4],
}

impl StreamGro {
    /// A stream aggregator with these settings.
    pub fn new(set: &GroSettings) -> Self {
        Self { agg: Aggregator::new(set.config(), None), polls: 0, reported: [0; 4] }
    }

    /// It holds packets (they leave after some more polls).
    pub fn holding(&self) -> bool {
        self.agg.flows() > 0 || self.agg.held() > 0
    }
}

/// Aggregate the stream's received burst in place (called after every RX, even an
/// empty one, so held aggregates leave on time). Returns the burst's length.
#[inline]
pub fn apply(s: &mut Stream) -> usize {
    let Some(g) = s.gro.as_mut() else { return s.burst.len() };
    g.polls += 1;
    g.agg.process(&mut s.burst, g.polls);
    let st = g.agg.stats;
    let now = [st.packets_in, st.packets_out, st.aggregates, st.merged];
    let c = [&s.stats.gro_in, &s.stats.gro_out, &s.stats.gro_aggregates, &s.stats.gro_merged];
    for k in 0..4 {
        if now[k] != g.reported[k] {
            c[k].add(now[k] - g.reported[k]);
        }
    }
    g.reported = now;
    s.burst.len()
}

/// `show port ID gro`.
pub fn show(port: u16, set: &GroSettings, counters: [u64; 4]) -> String {
    let mut o = String::new();
    if !set.ports.contains(&port) {
        let _ = writeln!(o, "Port {port} doesn't enable GRO.");
    } else {
        let _ = writeln!(o, "GRO type: TCP/IPv4, TCP/IPv6");
        let _ = writeln!(o, "Max number of packets per flow: {}", AggrConfig::default().max_segments);
        let _ = writeln!(o, "Max number of flows: {}", AggrConfig::default().max_flows);
        let _ = writeln!(o, "Flush cycles: {}", set.flush_cycles);
    }
    let [i, out, aggs, merged] = counters;
    if i > 0 {
        let avg = if aggs == 0 { 0.0 } else { merged as f64 / aggs as f64 };
        let _ = writeln!(
            o,
            "Packets in: {i}  out: {out}  aggregates: {aggs}  segments per aggregate: {avg:.1}  (since start)"
        );
    }
    o
}
