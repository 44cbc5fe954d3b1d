//! The `rx_aggregate` and `gso` graph nodes around [`super::Aggregator`] and
//! [`super::gso::segment`].

use super::gso::{segment, GsoSkip};
use super::{AggrStats, Aggregator};
use ironpath_eal::{Burst, Mempool, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx};

static AGGR_COUNTERS: [CounterSpec; 20] = [
    CounterSpec { name: "packets_in", unit: "packets" },
    CounterSpec { name: "packets_out", unit: "packets" },
    CounterSpec { name: "tcp_in", unit: "TCP segments considered" },
    CounterSpec { name: "aggregates", unit: "outputs of 2+ segments" },
    CounterSpec { name: "merged", unit: "segments inside aggregates" },
    CounterSpec { name: "segs_per_aggregate_x100", unit: "average segments per aggregate x 100" },
    CounterSpec { name: "flush_burst", unit: "flow flushes (end of burst)" },
    CounterSpec { name: "flush_timeout", unit: "flow flushes (flush_us)" },
    CounterSpec { name: "flush_end", unit: "flow flushes (PSH/FIN/short segment)" },
    CounterSpec { name: "flush_limit", unit: "flow flushes (max_bytes/max_segments)" },
    CounterSpec { name: "flush_mismatch", unit: "flow flushes (a packet that could not join)" },
    CounterSpec { name: "flows_evicted", unit: "flows flushed for room (max_flows)" },
    CounterSpec { name: "reordered", unit: "segments held out of order" },
    CounterSpec { name: "bad_checksum", unit: "packets (never merged)" },
    CounterSpec { name: "malformed", unit: "packets (never merged)" },
    CounterSpec { name: "passed", unit: "packets not aggregated (not TCP, pure ACKs ...)" },
    CounterSpec { name: "lro_alloc_failed", unit: "LRO buffers not available" },
    CounterSpec { name: "dropped", unit: "bad packets dropped (bad: drop) or freed at stop" },
    CounterSpec { name: "flows_held", unit: "flows held now" },
    CounterSpec { name: "flush_held", unit: "flow flushes (the flows held max_held packets)" },
];
const FLUSH_HELD: usize = 19;

fn fields(s: &AggrStats) -> [u64; 17] {
    [
        s.packets_in,
        s.packets_out,
        s.tcp_in,
        s.aggregates,
        s.merged,
        0,
        s.flush_burst,
        s.flush_timeout,
        s.flush_end,
        s.flush_limit,
        s.flush_mismatch,
        s.flows_evicted,
        s.reordered,
        s.bad_checksum,
        s.malformed,
        s.passed,
        s.lro_alloc_failed,
    ]
}

/// `rx_aggregate`: GRO or LRO on every burst (or a counted pass-through for `off`).
pub struct RxAggregate {
    agg: Option<Aggregator>,
    reported: [u64; 17],
    dropped: u64,
    flush_held: u64,
    flows_held: u64,
    avg: u64,
    off_packets: u64,
}

impl RxAggregate {
    /// A node around `agg` (`None`: mode `off`).
    pub fn new(agg: Option<Aggregator>) -> Self {
        Self { agg, reported: [0; 17], dropped: 0, flush_held: 0, flows_held: 0, avg: 0, off_packets: 0 }
    }
}

impl Node for RxAggregate {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        let Some(agg) = self.agg.as_mut() else {
            // `off`: count and pass on.
            let n = pkts.len() as u64;
            if n > 0 {
                self.off_packets += n;
                cx.count(0, n);
                cx.count(1, n);
            }
            return Dispatch::All(0);
        };
        if pkts.is_empty() && agg.flows() == 0 && agg.held() == 0 {
            return Dispatch::All(0);
        }
        agg.process(pkts, cx.now_tsc);
        let now = fields(&agg.stats);
        for (k, (&v, r)) in now.iter().zip(self.reported.iter_mut()).enumerate() {
            if v != *r {
                cx.count(k, v - *r);
                *r = v;
            }
        }
        // Gauges kept as counters: add the change.
        let avg = (agg.stats.merged * 100).checked_div(agg.stats.aggregates).unwrap_or(0);
        if avg != self.avg {
            cx.count(5, avg.wrapping_sub(self.avg));
            self.avg = avg;
        }
        let held = agg.flows() as u64;
        if held != self.flows_held {
            cx.count(18, held.wrapping_sub(self.flows_held));
            self.flows_held = held;
        }
        if agg.stats.flush_held != self.flush_held {
            cx.count(FLUSH_HELD, agg.stats.flush_held - self.flush_held);
            self.flush_held = agg.stats.flush_held;
        }
        if agg.stats.dropped != self.dropped {
            cx.count(17, agg.stats.dropped - self.dropped);
            self.dropped = agg.stats.dropped;
        }
        Dispatch::All(0)
    }

    fn counters(&self) -> &'static [CounterSpec] {
        &AGGR_COUNTERS
    }

    fn stop(&mut self) {
        if let Some(a) = self.agg.as_mut() {
            a.discard();
        }
    }
}

static GSO_COUNTERS: [CounterSpec; 4] = [
    CounterSpec { name: "split", unit: "aggregates split" },
    CounterSpec { name: "segments_out", unit: "segments made" },
    CounterSpec { name: "passed", unit: "packets not split (not aggregates, or small)" },
    CounterSpec { name: "no_mbuf", unit: "aggregates sent whole (mempool empty)" },
];

/// `gso`: split aggregates back into MSS-sized segments.
pub struct Gso {
    pool: Mempool,
    mss: u16,
    out: Burst,
    overflow: std::collections::VecDeque<ironpath_eal::Mbuf>,
}

impl Gso {
    /// A splitter taking headers and payload slices from `pool`; `mss` 0 uses each
    /// aggregate's own `tso_segsz`.
    pub fn new(pool: Mempool, mss: u16) -> Self {
        Self { pool, mss, out: Burst::new(), overflow: Default::default() }
    }
}

impl Node for Gso {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        while let Some(m) = self.overflow.pop_front() {
            if let Err(m) = self.out.push(m) {
                self.overflow.push_front(m);
                break;
            }
        }
        let (out, overflow) = (&mut self.out, &mut self.overflow);
        let mut emit = |m| {
            if let Err(m) = out.push(m) {
                overflow.push_back(m);
            }
        };
        for m in pkts.drain() {
            match segment(m, &self.pool, self.mss, &mut emit) {
                Ok(n) => {
                    cx.count(0, 1);
                    cx.count(1, n as u64);
                }
                Err((m, why)) => {
                    cx.count(if why == GsoSkip::NoMbuf { 3 } else { 2 }, 1);
                    emit(m);
                }
            }
        }
        self.out.move_to(pkts);
        Dispatch::All(0)
    }

    fn counters(&self) -> &'static [CounterSpec] {
        &GSO_COUNTERS
    }
}
