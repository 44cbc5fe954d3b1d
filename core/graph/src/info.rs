//! What the control plane sees of a running graph: nodes, edges and lcores
//! (`show graph`), their counters (`show runtime`), and the trace switch.

use crate::stats::{Counter, NodeStats, StatsSnapshot};
use crate::trace::TraceBuf;
use ironpath_eal::sleep::RxMode;
use std::fmt::Write;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Counters of one edge (written by the sending lcore).
#[derive(Debug, Default)]
pub struct EdgeStats {
    /// Packets that went along the edge.
    pub packets: Counter,
    /// Packets dropped on it (receiving frame or ring full).
    pub drops: Counter,
}

/// Counters of one lcore's walks (written by that lcore).
#[derive(Debug, Default)]
pub struct LcoreStats {
    /// Walks of the graph.
    pub walks: Counter,
    /// Walks that found packets.
    pub busy_walks: Counter,
    /// TSC cycles of the walks that found packets.
    pub busy_cycles: Counter,
    /// TSC cycles of the walks that found no packets yet lasted over
    /// [`LONG_IDLE_WALK`](crate::sched::LONG_IDLE_WALK) cycles: the kernel interrupted
    /// the thread (an interrupt, softirq work run on this CPU, such as delivering
    /// frames into an af_packet ring, or another task), or a node did work without
    /// packets (timers). With `busy_cycles`, the CPU time the lcore's work cost,
    /// measured with the TSC (tick-based accounting in /proc/stat samples it).
    pub long_idle_cycles: Counter,
    /// Packets that entered the lcore's graph (from ports, sources and rings).
    pub received: Counter,
    /// Sleeps (rx mode `adaptive` or `interrupt`, [`ironpath_eal::sleep`]).
    pub sleeps: Counter,
    /// Sleeps a receive queue's wake-up source ended (packets came).
    pub wake_rx: Counter,
    /// Sleeps the doorbell ended (a ring from another lcore, a table change, stop).
    pub wake_bell: Counter,
    /// Sleeps a node's timer ended.
    pub wake_timer: Counter,
    /// TSC cycles asleep.
    pub asleep_cycles: Counter,
    /// Times the lcore would have slept but a node kept it polling (a queue without
    /// a wake-up source, held packets, work in flight).
    pub kept_polling: Counter,
    /// Its rx mode (`RxMode` as set by `LcoreGraph::set_rx_mode`: 0 poll, 1
    /// adaptive, 2 interrupt).
    pub(crate) mode: std::sync::atomic::AtomicU8,
}

impl LcoreStats {
    /// Its rx mode.
    pub fn rx_mode(&self) -> RxMode {
        match self.mode.load(Ordering::Relaxed) {
            1 => RxMode::Adaptive,
            2 => RxMode::Interrupt,
            _ => RxMode::Poll,
        }
    }
}

impl LcoreStats {
    /// Busy cycles per received packet (testpmd's `CPU cycles/packet`).
    pub fn cycles_per_packet(&self) -> f64 {
        let r = self.received.get();
        if r == 0 {
            0.0
        } else {
            self.busy_cycles.get() as f64 / r as f64
        }
    }
}

/// One node as the shell shows it.
#[derive(Debug)]
pub struct NodeInfo {
    /// Node name (engine-made ring ends are named `FROM->TO.ring_tx` / `.ring_rx`).
    pub name: String,
    /// Node type.
    pub type_name: String,
    /// Lcore running it.
    pub lcore: u32,
    /// Declared next edges and the node each leads to (if connected).
    pub nexts: Vec<(String, Option<String>)>,
    /// True for ring ends the engine inserted.
    pub synthetic: bool,
    /// Its counters.
    pub stats: Arc<NodeStats>,
    pub(crate) trace_left: Arc<AtomicU32>,
    /// The port it receives from or sends to, if it is a port's node.
    pub port: Option<(String, PortRole)>,
    pub(crate) tap: Arc<crate::capture::NodeTap>,
    /// Its lcore's flag: a trace or a capture is armed on one of its nodes.
    pub(crate) watch: Arc<std::sync::atomic::AtomicBool>,
}

/// What a port's node does with its port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortRole {
    /// It receives from the port (a source).
    Rx,
    /// It sends to the port.
    Tx,
}

/// One edge as the shell shows it.
#[derive(Debug)]
pub struct EdgeInfo {
    /// Sending node.
    pub from: String,
    /// Next-edge name on the sending node.
    pub next: String,
    /// Receiving node.
    pub to: String,
    /// Ring size when the edge crosses lcores.
    pub ring: Option<usize>,
    /// Its counters.
    pub stats: Arc<EdgeStats>,
}

/// The counters `show runtime` shows, taken at one instant: a baseline that
/// [`GraphInfo::format_runtime_since`] subtracts (`clear runtime` keeps one in the
/// control plane; the counters the lcores write are never reset).
#[derive(Clone, Debug, Default)]
pub struct RuntimeBase {
    /// Per node: common counters and its own counters, in `nodes` order.
    nodes: Vec<(StatsSnapshot, Vec<u64>)>,
    /// Per edge: packets, in `edges` order.
    edges: Vec<u64>,
    /// Per lcore: [`lcore_values`].
    lcores: Vec<[u64; 11]>,
}

/// Walks, busy walks, received, busy cycles, long idle cycles, sleeps, wake-ups by
/// a queue, the doorbell and a timer, cycles asleep, kept polling.
fn lcore_values(st: &LcoreStats) -> [u64; 11] {
    [
        st.walks.get(),
        st.busy_walks.get(),
        st.received.get(),
        st.busy_cycles.get(),
        st.long_idle_cycles.get(),
        st.sleeps.get(),
        st.wake_rx.get(),
        st.wake_bell.get(),
        st.wake_timer.get(),
        st.asleep_cycles.get(),
        st.kept_polling.get(),
    ]
}

/// The whole graph, shared with the control plane.
#[derive(Debug, Default)]
pub struct GraphInfo {
    /// Nodes (user nodes first, then engine-made ring ends).
    pub nodes: Vec<NodeInfo>,
    /// Edges as declared.
    pub edges: Vec<EdgeInfo>,
    /// Lcores and their CPUs.
    pub lcores: Vec<(u32, Option<u32>)>,
    /// Per-lcore walk counters (lcores that run nodes).
    pub lcore_stats: Vec<(u32, Arc<LcoreStats>)>,
    pub(crate) trace: Arc<TraceBuf>,
    /// The controllers of nodes whose tables change at run time.
    pub controls: Vec<crate::ControlEntry>,
    pub(crate) captures: Arc<crate::capture::Slots>,
}

impl GraphInfo {
    /// A node by name.
    pub fn node(&self, name: &str) -> Option<&NodeInfo> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// Packets node `name` passed on along its edges (into rings for edges that
    /// cross lcores).
    pub fn passed_on(&self, name: &str) -> u64 {
        self.edges.iter().filter(|e| e.from == name).map(|e| e.stats.packets.get()).sum()
    }

    /// Arm the trace of `node` for its next `n` packets (0 disarms; at most
    /// [`crate::TRACE_MAX_PACKETS`]). The trace's clock starts at the first arming
    /// after [`GraphInfo::clear_trace`] (or the graph's start).
    pub fn trace(&self, node: &str, n: u32) -> Result<(), String> {
        if n > crate::TRACE_MAX_PACKETS {
            return Err(format!("{n} packets: at most {} per node are traced", crate::TRACE_MAX_PACKETS));
        }
        match self.node(node) {
            Some(ni) => {
                if n > 0 {
                    self.trace.start(ironpath_eal::tsc::rdtsc());
                }
                ni.trace_left.store(n, Ordering::Relaxed);
                if n > 0 {
                    // After the count: the lcore that sees the flag sees the count.
                    ni.watch.store(true, Ordering::Release);
                }
                Ok(())
            }
            None => Err(format!(
                "no node `{node}`; nodes: {}",
                self.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(", ")
            )),
        }
    }

    /// Carry out a table command (`ip route add ...`) on the node whose controller
    /// takes it (a trailing `node NAME` picks one when several do). `None`: no node
    /// of this graph takes such a command.
    pub fn control(&self, words: &[&str]) -> Option<Result<String, String>> {
        crate::control::dispatch(&self.controls, words)
    }

    /// Take the trace records collected so far.
    pub fn take_trace(&self) -> Vec<String> {
        self.trace.take()
    }

    /// `show trace`: the first `max` records (oldest first), left in place; the number
    /// kept; how many older ones were discarded for room.
    pub fn peek_trace(&self, max: usize) -> (Vec<String>, usize, u64) {
        self.trace.peek(max)
    }

    /// `clear trace`: disarm every node, drop the records and reset the trace's clock.
    pub fn clear_trace(&self) {
        for n in &self.nodes {
            n.trace_left.store(0, Ordering::Relaxed);
        }
        self.trace.clear();
    }

    /// Text of `show graph`: lcores, nodes with their edges.
    pub fn format_graph(&self) -> String {
        let mut s = String::new();
        for &(lc, cpu) in &self.lcores {
            let cpu = cpu.map_or("unpinned".to_string(), |c| format!("cpu {c}"));
            let _ = writeln!(s, "lcore {lc} ({cpu}):");
            for n in self.nodes.iter().filter(|n| n.lcore == lc) {
                let _ = writeln!(s, "  {} [{}]", n.name, n.type_name);
                for (next, to) in &n.nexts {
                    let _ = match to {
                        Some(to) => {
                            let ring = self
                                .edges
                                .iter()
                                .find(|e| e.from == n.name && &e.next == next)
                                .and_then(|e| e.ring)
                                .map_or(String::new(), |r| format!("  (ring of {r}, other lcore)"));
                            writeln!(s, "    {next} -> {to}{ring}")
                        }
                        None => writeln!(s, "    {next} -> (unconnected: dropped)"),
                    };
                }
            }
        }
        s
    }

    /// Text of `show runtime`: VPP-like per-node counters. `Calls` counts every
    /// call (idle polls too) and `Pkts/call` is `Packets / Calls`, as VPP's
    /// Vectors/Call; `Busy` counts the calls that had packets and `Pkts/busy` is
    /// `Packets / Busy`. A node's packets are those it was given (a node given none,
    /// such as a source or a port's receiver: those it brought in); a node that sends
    /// on more than one edge has a line per edge with what it sent there.
    pub fn format_runtime(&self) -> String {
        self.format_runtime_since(&RuntimeBase::default())
    }

    /// The counters `show runtime` shows, now (a baseline for
    /// [`format_runtime_since`](Self::format_runtime_since)).
    pub fn runtime_base(&self) -> RuntimeBase {
        RuntimeBase {
            nodes: self.nodes.iter().map(|n| (n.stats.snapshot(), n.stats.extra().map(|(_, v)| v).collect())).collect(),
            edges: self.edges.iter().map(|e| e.stats.packets.get()).collect(),
            lcores: self.lcore_stats.iter().map(|(_, st)| lcore_values(st)).collect(),
        }
    }

    /// [`format_runtime`](Self::format_runtime) with what was counted since
    /// `base`: calls, packets, drops, cycles, edge and own counters (gauges and
    /// panic/fence counts stay as they are).
    pub fn format_runtime_since(&self, base: &RuntimeBase) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<28} {:<14} {:>5} {:>14} {:>14} {:>16} {:>12} {:>11} {:>10} {:>10}",
            "Name", "Type", "Lcore", "Calls", "Busy", "Packets", "Drops", "Cycles/pkt", "Pkts/call", "Pkts/busy"
        );
        let edge_packets =
            |i: usize, e: &EdgeInfo| e.stats.packets.get().saturating_sub(base.edges.get(i).copied().unwrap_or(0));
        for (i, (lc, st)) in self.lcore_stats.iter().enumerate() {
            let b = base.lcores.get(i).copied().unwrap_or_default();
            let v = lcore_values(st).into_iter().zip(b).map(|(x, b)| x.saturating_sub(b)).collect::<Vec<_>>();
            let per_packet = if v[2] == 0 { 0.0 } else { v[3] as f64 / v[2] as f64 };
            let _ = writeln!(
                s,
                "lcore {lc}: {} walks, {} busy, {} packets in, {per_packet:.1} busy cycles/packet, {} cycles in long idle walks",
                v[0], v[1], v[2], v[4]
            );
            let mode = st.rx_mode();
            if mode != RxMode::Poll {
                let hz = ironpath_eal::tsc::tsc_hz().max(1) as f64;
                let _ = writeln!(
                    s,
                    "  rx mode {}: {} sleeps (woken by a queue {}, the doorbell {}, a timer {}), {:.3} s asleep, kept polling {} times",
                    mode.name(),
                    v[5],
                    v[6],
                    v[7],
                    v[8],
                    v[9] as f64 / hz,
                    v[10]
                );
            }
        }
        let no_extra = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            let (b, b_extra) = base.nodes.get(i).map_or((StatsSnapshot::default(), &no_extra), |(b, x)| (*b, x));
            let st = n.stats.snapshot().since(&b);
            let _ = writeln!(
                s,
                "{:<28} {:<14} {:>5} {:>14} {:>14} {:>16} {:>12} {:>11.1} {:>10.2} {:>10.1}",
                n.name,
                n.type_name,
                n.lcore,
                st.calls,
                st.busy_calls,
                st.packets,
                st.drops,
                st.cycles_per_packet(),
                st.packets_per_call(),
                st.packets_per_busy_call()
            );
            let out: Vec<(usize, &EdgeInfo)> =
                self.edges.iter().enumerate().filter(|(_, e)| e.from == n.name).collect();
            if out.len() > 1 {
                for (j, e) in out {
                    let _ = writeln!(
                        s,
                        "    {:<32} {:>16} packets",
                        format!("to {} -> {}", e.next, e.to),
                        edge_packets(j, e)
                    );
                }
            }
            for (j, (spec, v)) in n.stats.extra().enumerate() {
                let v = v.saturating_sub(b_extra.get(j).copied().unwrap_or(0));
                if v != 0 {
                    let _ = writeln!(s, "    {:<32} {:>16} {}", spec.name, v, spec.unit);
                }
            }
            for (spec, v) in n.stats.gauges() {
                if v != 0 {
                    let _ = writeln!(s, "    {:<32} {:>16} {} (now)", spec.name, v, spec.unit);
                }
            }
            if n.type_name == "drop" {
                // A drop node's reasons are the edges that lead to it.
                for (j, e) in self.edges.iter().enumerate().filter(|(_, e)| e.to == n.name) {
                    let _ = writeln!(
                        s,
                        "    {:<32} {:>16} packets",
                        format!("from {}.{}", e.from, e.next),
                        edge_packets(j, e)
                    );
                }
            }
            let (un, ff) = (n.stats.unconnected.get(), n.stats.frame_full.get());
            // Faults (unconnected edges, full frames, panics): totals since start.
            if un != 0 {
                let _ = writeln!(s, "    {:<32} {:>16} packets dropped", "unconnected_next", un);
            }
            if ff != 0 {
                let _ = writeln!(s, "    {:<32} {:>16} packets dropped", "frame_full", ff);
            }
            let (panics, pd, fd) = (n.stats.panics.get(), n.stats.panic_drops.get(), n.stats.fenced_drops.get());
            if panics != 0 {
                let why = n.stats.first_panic.get().map_or("", String::as_str);
                let _ = writeln!(s, "    {:<32} {:>16} calls (first: {why})", "panics", panics);
                let _ = writeln!(s, "    {:<32} {:>16} packets dropped with a panicking call", "panic_drops", pd);
            }
            if fd != 0 || n.stats.fences.get() != 0 {
                let now = if n.stats.fenced.get() != 0 { ", FENCED now" } else { "" };
                let _ = writeln!(
                    s,
                    "    {:<32} {:>16} packets dropped while fenced ({} fences{now})",
                    "fenced_drops",
                    fd,
                    n.stats.fences.get()
                );
            }
        }
        s
    }
}
