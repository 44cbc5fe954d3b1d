//! The `rx_aggregate` and `gso` graph nodes around [`super::Aggregator`] and
//! [`super::gso::segment`].

use super::gso::{segment, GsoSkip};
use super::{AggrConfig, AggrStats, Aggregator, Flush, Mode};
use crate::kind::{NodeError, NodeKind, Values, MEMPOOL};
use ironpath_config::{Choice, Nexts, NodeSpec, ParamKind, ParamSpec};
use ironpath_eal::{Burst, Mempool, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx, SleepPlan};

ironpath_graph::counters! {
    /// What `rx_aggregate` counts.
    pub enum AggrCounter {
        PacketsIn("packets_in", "packets"),
        PacketsOut("packets_out", "packets"),
        TcpIn("tcp_in", "TCP segments considered"),
        Aggregates("aggregates", "outputs of 2+ segments"),
        Merged("merged", "segments inside aggregates"),
        SegsPerAggregateX100("segs_per_aggregate_x100", "average segments per aggregate x 100"),
        FlushBurst("flush_burst", "flow flushes (end of burst)"),
        FlushTimeout("flush_timeout", "flow flushes (flush_us)"),
        FlushEnd("flush_end", "flow flushes (PSH/FIN/short segment)"),
        FlushLimit("flush_limit", "flow flushes (max_bytes/max_segments)"),
        FlushMismatch("flush_mismatch", "flow flushes (a packet that could not join)"),
        FlowsEvicted("flows_evicted", "flows flushed for room (max_flows)"),
        Reordered("reordered", "segments held out of order"),
        BadChecksum("bad_checksum", "packets (never merged)"),
        Malformed("malformed", "packets (never merged)"),
        Passed("passed", "packets not aggregated (not TCP, pure ACKs ...)"),
        LroAllocFailed("lro_alloc_failed", "LRO buffers not available"),
        Dropped("dropped", "bad packets dropped (bad: drop) or freed at stop"),
        FlowsHeld("flows_held", "flows held now"),
        FlushHeld("flush_held", "flow flushes (the flows held max_held packets)"),
    }
}

fn fields(s: &AggrStats) -> [(AggrCounter, u64); 16] {
    [
        (AggrCounter::PacketsIn, s.packets_in),
        (AggrCounter::PacketsOut, s.packets_out),
        (AggrCounter::TcpIn, s.tcp_in),
        (AggrCounter::Aggregates, s.aggregates),
        (AggrCounter::Merged, s.merged),
        (AggrCounter::FlushBurst, s.flush_burst),
        (AggrCounter::FlushTimeout, s.flush_timeout),
        (AggrCounter::FlushEnd, s.flush_end),
        (AggrCounter::FlushLimit, s.flush_limit),
        (AggrCounter::FlushMismatch, s.flush_mismatch),
        (AggrCounter::FlowsEvicted, s.flows_evicted),
        (AggrCounter::Reordered, s.reordered),
        (AggrCounter::BadChecksum, s.bad_checksum),
        (AggrCounter::Malformed, s.malformed),
        (AggrCounter::Passed, s.passed),
        (AggrCounter::LroAllocFailed, s.lro_alloc_failed),
    ]
}

/// `rx_aggregate`: GRO or LRO on every burst (or a counted pass-through for `off`).
pub struct RxAggregate {
    agg: Option<Aggregator>,
    reported: [u64; 16],
    dropped: u64,
    flush_held: u64,
    flows_held: u64,
    avg: u64,
    off_packets: u64,
}

impl RxAggregate {
    /// A node around `agg` (`None`: mode `off`).
    pub fn new(agg: Option<Aggregator>) -> Self {
        Self { agg, reported: [0; 16], dropped: 0, flush_held: 0, flows_held: 0, avg: 0, off_packets: 0 }
    }
}

impl Node for RxAggregate {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        let Some(agg) = self.agg.as_mut() else {
            // `off`: count and pass on.
            let n = pkts.len() as u64;
            if n > 0 {
                self.off_packets += n;
                cx.count(AggrCounter::PacketsIn, n);
                cx.count(AggrCounter::PacketsOut, n);
            }
            return Dispatch::All(0);
        };
        if pkts.is_empty() && agg.flows() == 0 && agg.held() == 0 {
            return Dispatch::All(0);
        }
        agg.process(pkts, cx.now_tsc);
        let now = fields(&agg.stats);
        for (&(k, v), r) in now.iter().zip(self.reported.iter_mut()) {
            if v != *r {
                cx.count(k, v - *r);
                *r = v;
            }
        }
        // Gauges kept as counters: add the change.
        let avg = (agg.stats.merged * 100).checked_div(agg.stats.aggregates).unwrap_or(0);
        if avg != self.avg {
            cx.count(AggrCounter::SegsPerAggregateX100, avg.wrapping_sub(self.avg));
            self.avg = avg;
        }
        let held = agg.flows() as u64;
        if held != self.flows_held {
            cx.count(AggrCounter::FlowsHeld, held.wrapping_sub(self.flows_held));
            self.flows_held = held;
        }
        if agg.stats.flush_held != self.flush_held {
            cx.count(AggrCounter::FlushHeld, agg.stats.flush_held - self.flush_held);
            self.flush_held = agg.stats.flush_held;
        }
        if agg.stats.dropped != self.dropped {
            cx.count(AggrCounter::Dropped, agg.stats.dropped - self.dropped);
            self.dropped = agg.stats.dropped;
        }
        Dispatch::All(0)
    }

    fn counters(&self) -> &'static [CounterSpec] {
        AggrCounter::SPECS
    }

    fn sleep(&mut self, cx: &mut NodeCx<'_>, plan: &mut SleepPlan) {
        // Held flows leave within flush_us (shorter than a sleep): poll until then.
        plan.quiet();
        if self.agg.as_ref().is_some_and(|a| a.flows() > 0 || a.held() > 0) {
            plan.until(cx.now_tsc);
        }
    }

    fn stop(&mut self) {
        if let Some(a) = self.agg.as_mut() {
            a.discard();
        }
    }
}

ironpath_graph::counters! {
    /// What `gso` counts.
    pub enum GsoCounter {
        Split("split", "aggregates split"),
        SegmentsOut("segments_out", "segments made"),
        Passed("passed", "packets not split (not aggregates, or small)"),
        NoMbuf("no_mbuf", "aggregates sent whole (mempool empty)"),
    }
}

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
                    cx.count(GsoCounter::Split, 1);
                    cx.count(GsoCounter::SegmentsOut, n as u64);
                }
                Err((m, why)) => {
                    cx.count(if why == GsoSkip::NoMbuf { GsoCounter::NoMbuf } else { GsoCounter::Passed }, 1);
                    emit(m);
                }
            }
        }
        self.out.move_to(pkts);
        Dispatch::All(0)
    }

    fn counters(&self) -> &'static [CounterSpec] {
        GsoCounter::SPECS
    }
}

ironpath_config::choice! {
    /// `rx_aggregate`'s `mode`.
    pub enum AggrMode {
        /// Chain the segments.
        Gro = "gro",
        /// Copy payloads into one large buffer.
        Lro = "lro",
        /// Pass everything on, counted.
        Off = "off",
    }
}

ironpath_config::choice! {
    /// `rx_aggregate`'s `bad`: what happens to malformed or bad-checksum packets.
    pub enum BadPackets {
        /// Passed on, unmerged.
        Pass = "pass",
        /// Dropped.
        Drop = "drop",
    }
}

/// `rx_aggregate`: GRO/LRO.
pub const RX_AGGREGATE: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "rx_aggregate",
        doc: "merge TCP segments (IPv4/IPv6) into large packets: gro keeps them as an mbuf chain, lro copies payloads into one buffer; only what can be split back exactly",
        params: &[
            ParamSpec::new("mode", ParamKind::Enum(AggrMode::NAMES)).default("gro").doc("how to merge (`off`: pass everything on, counted)"),
            ParamSpec::new("max_bytes", ParamKind::Uint { min: 1024, max: 65535 }).default("65535").doc("most bytes of IP payload in an aggregate"),
            ParamSpec::new("max_segments", ParamKind::Uint { min: 2, max: 1024 }).default("64").doc("most segments in an aggregate"),
            ParamSpec::new("max_flows", ParamKind::Uint { min: 1, max: 65536 }).default("64").doc("flows held at once (the oldest is flushed for a new one)"),
            ParamSpec::new("max_held", ParamKind::Uint { min: 64, max: 1 << 20 }).default("4096").doc("packets the flows may hold between bursts (flush: timeout); beyond it the oldest flows leave early (counted: flush_held), so a peer's out-of-order segments cannot pin more of the pool"),
            ParamSpec::new("flush", ParamKind::Enum(Flush::NAMES)).default("burst").doc("flush at the end of every burst, or after `flush_us`"),
            ParamSpec::new("flush_us", ParamKind::Duration).default("100us").doc("how long a flow may be held (flush: timeout)"),
            ParamSpec::new("tso", ParamKind::Bool).default("false").doc("aggregates leave as TSO packets (TX_TCP_SEG, the MSS, a partial TCP checksum) for the sending port or the kernel behind it to cut again: for a pipeline that forwards what it merged, as Linux forwards GRO packets (max_segments is then at most 64, what af_packet writes as one packet; tap takes 128, net_virtio 32); false: complete checksums, for a consumer such as tcp"),
            ParamSpec::new("bad", ParamKind::Enum(BadPackets::NAMES)).default("pass").doc("what to do with malformed or bad-checksum packets (never merged, always counted)"),
            ParamSpec::new("lro_mempool", ParamKind::Mempool).doc("large buffers for lro (data_room >= the largest aggregate + headers, e.g. 65535)"),
        ],
        nexts: Nexts::Fixed(&["out"]),
        source: true,
        ..NodeSpec::DEFAULT
    },
    build: |b, env| {
        let p = b.params();
        let (mode, ac) = config(p, env.tsc_hz())?;
        if mode == AggrMode::Off {
            return Ok(Box::new(RxAggregate::new(None)));
        }
        let lro_pool = match (ac.mode, p.raw().mempool("lro_mempool")) {
            (Mode::Lro, None) => {
                return Err(NodeError::Param {
                    param: "lro_mempool",
                    reason: "mode lro needs it (a mempool of large buffers)".into(),
                })
            }
            (_, Some(name)) => Some(env.mempool(Some(name), None)?),
            _ => None,
        };
        Ok(Box::new(RxAggregate::new(Some(Aggregator::new(ac, lro_pool)))))
    },
};

/// Most segments of an aggregate made with `tso` (af_packet's most per TSO packet;
/// tap takes 128).
const MAX_TSO_SEGMENTS: u16 = 64;

/// The aggregator's settings from `rx_aggregate`'s parameters (`mode: off` comes
/// with the settings of `gro`).
fn config(p: Values<'_>, hz: u64) -> Result<(AggrMode, AggrConfig), NodeError> {
    let mode = p.choice::<AggrMode>("mode")?;
    let cfg = AggrConfig {
        mode: if mode == AggrMode::Lro { Mode::Lro } else { Mode::Gro },
        max_bytes: p.int("max_bytes")?,
        // A TSO packet is handed to the kernel as one write of its segments: af_packet
        // takes up to 64 (MAX_TSO_SEGMENTS), tap 128.
        max_segments: if p.bool("tso")? {
            p.int::<u16>("max_segments")?.min(MAX_TSO_SEGMENTS)
        } else {
            p.int("max_segments")?
        },
        max_flows: p.int("max_flows")?,
        max_held: p.int("max_held")?,
        flush: p.choice("flush")?,
        flush_tsc: p.tsc("flush_us", hz)?,
        drop_bad: p.choice::<BadPackets>("bad")? == BadPackets::Drop,
        tso: p.bool("tso")?,
    };
    Ok((mode, cfg))
}

/// The catalog's defaults of `rx_aggregate` (read from [`RX_AGGREGATE`]'s specs
/// through the pipeline validation), with `flush_tsc` 0 (no TSC rate here: set it
/// for `Flush::Timeout`).
impl Default for AggrConfig {
    fn default() -> Self {
        let yaml = "lcores: [{id: 0}]\nnodes: [{name: a, type: rx_aggregate, lcore: 0}]\n";
        let catalog = ironpath_config::Catalog { nodes: &[RX_AGGREGATE.spec], drivers: None };
        let p = ironpath_config::parse_str(yaml, std::path::Path::new("a.yaml"), &catalog).expect("valid");
        config(Values(&p.nodes[0].params), 0).expect("defaults").1
    }
}

/// `gso`: split aggregates back into segments.
pub const GSO: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "gso",
        doc:
            "split aggregated TCP packets back into segments of their MSS (headers copied, payload shared by reference)",
        params: &[
            MEMPOOL,
            ParamSpec::new("mss", ParamKind::Uint { min: 0, max: 65535 })
                .default("0")
                .doc("segment payload size (0: each aggregate's own, tso_segsz)"),
        ],
        nexts: Nexts::Fixed(&["out"]),
        ..NodeSpec::DEFAULT
    },
    build: |b, env| {
        let p = b.params();
        Ok(Box::new(Gso::new(env.mempool(p.raw().mempool("mempool"), None)?, p.int("mss")?)))
    },
};
