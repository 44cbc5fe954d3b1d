//! The per-second figures of a running pipeline: the port table (totals and
//! rates per port, with the file's port names) and JSON lines for plotting (ports,
//! nodes with their counters, mempools with their objects in use, lcores with their
//! busy cycles).

use super::PipelineRun;
use ironpath_eal::abi::Stats;
use ironpath_eal::Eal;
use ironpath_graph::GraphInfo;
use std::fmt::Write;

/// Port counters at one instant.
pub type Snapshot = Vec<Stats>;

/// Counters of every pipeline port (zeros for a port whose stats fail).
pub fn snapshot(eal: &Eal, run: &PipelineRun) -> Snapshot {
    run.ports.iter().map(|p| eal.port(p.id).and_then(|x| x.stats()).unwrap_or_default()).collect()
}

/// The port table: per port, the totals since the start (as DPDK's `show port
/// stats` RX-packets/TX-packets) and the rates over the last `secs` seconds (as
/// its throughput lines). A port that moved packets yet counted no bytes (a
/// driver that counts packets only, such as net_ring without `bytes=1`) shows `-`
/// for its bytes and bit rates, not a misleading 0.
pub fn table(run: &PipelineRun, prev: &Snapshot, cur: &Snapshot, secs: f64) -> String {
    let mut s = format!(
        "{:<10} {:>4} {:>13} {:>15} {:>13} {:>15} {:>11} {:>11} {:>10} {:>10}\n",
        "Name",
        "Port",
        "RX-packets",
        "RX-bytes",
        "TX-packets",
        "TX-bytes",
        "RX-pps",
        "TX-pps",
        "RX-Mbit/s",
        "TX-Mbit/s"
    );
    let secs = secs.max(1e-9);
    let mut no_bytes = false;
    for (i, p) in run.ports.iter().enumerate() {
        let (a, b) = (&prev[i], &cur[i]);
        let pps = |x: u64, y: u64| format!("{:.0}", x.saturating_sub(y) as f64 / secs);
        let bytes = |pkts: u64, bytes: u64| if pkts > 0 && bytes == 0 { "-".to_string() } else { bytes.to_string() };
        let mbit = |pkts: u64, x: u64, y: u64| {
            if pkts > 0 && x == 0 {
                "-".to_string()
            } else {
                format!("{:.1}", x.saturating_sub(y) as f64 * 8.0 / secs / 1e6)
            }
        };
        no_bytes |= (b.ipackets > 0 && b.ibytes == 0) || (b.opackets > 0 && b.obytes == 0);
        let _ = writeln!(
            s,
            "{:<10} {:>4} {:>13} {:>15} {:>13} {:>15} {:>11} {:>11} {:>10} {:>10}",
            p.name,
            p.id,
            b.ipackets,
            bytes(b.ipackets, b.ibytes),
            b.opackets,
            bytes(b.opackets, b.obytes),
            pps(b.ipackets, a.ipackets),
            pps(b.opackets, a.opackets),
            mbit(b.ipackets, b.ibytes, a.ibytes),
            mbit(b.opackets, b.obytes, a.obytes),
        );
    }
    if no_bytes {
        s.push_str("(-: the port's driver counts packets only; net_ring counts bytes with bytes=1)\n");
    }
    s
}

/// True if no port's counters moved between `prev` and `cur`.
pub fn quiet(prev: &Snapshot, cur: &Snapshot) -> bool {
    prev.iter().zip(cur).all(|(a, b)| a.ipackets == b.ipackets && a.opackets == b.opackets)
}

/// Why each node that dropped packets dropped them, one line a node (empty if
/// none did): a `drop` node's drops are the pipeline's deliberate end; any other
/// node's are named by its own counters whose unit says "dropped" (and, for a
/// port's TX queue, what a full queue means).
pub fn drop_notes(info: &GraphInfo) -> String {
    let mut s = String::new();
    for n in &info.nodes {
        let drops = n.stats.snapshot().drops;
        if drops == 0 {
            continue;
        }
        let why = if n.type_name == "drop" {
            "deliberate: a drop node, where packets end (its `from` lines say from which edge)".to_string()
        } else {
            let mut reasons: Vec<String> = n
                .stats
                .extra()
                .filter(|(spec, v)| *v > 0 && spec.unit.contains("dropped"))
                .map(|(spec, v)| format!("{} {v}", spec.name))
                .collect();
            for (name, v) in [
                ("unconnected_next", n.stats.unconnected.get()),
                ("frame_full", n.stats.frame_full.get()),
                ("panic_drops", n.stats.panic_drops.get()),
                ("fenced_drops", n.stats.fenced_drops.get()),
            ] {
                if v > 0 {
                    reasons.push(format!("{name} {v}"));
                }
            }
            let mut why = if reasons.is_empty() { "see its counters above".to_string() } else { reasons.join(", ") };
            if n.type_name == "port_tx" && n.stats.extra_by_name("tx_full").unwrap_or(0) > 0 {
                why.push_str(
                    ": the port's TX queue was full, its reader (for net_ring, the linked port's \
                     port_rx) fell behind the rate sent; a lower rate (a source's rate_pps) or a \
                     larger queue (net_ring size=) avoids it",
                );
            }
            why
        };
        let _ = writeln!(s, "  {:<20} {:>14} {why}", n.name, drops);
    }
    if s.is_empty() {
        s
    } else {
        format!("drops (node, packets, why):\n{s}")
    }
}

/// The most objects each pool of `run` had in use at any check so far: `peaks`
/// (one per pool) is raised to what is in use now. The run loop checks every 20 ms.
pub fn track_peaks(run: &PipelineRun, peaks: &mut Vec<u32>) {
    peaks.resize(run.pools().len(), 0);
    for ((_, pool), peak) in run.pools().iter().zip(peaks.iter_mut()) {
        *peak = (*peak).max(pool.stats().in_use);
    }
}

/// One JSON line: time, per-port deltas and totals, per-node packets and drops,
/// pools (with `in_use_max`, the high-water mark of `peaks`).
pub fn json_line(run: &PipelineRun, t: f64, prev: &Snapshot, cur: &Snapshot, secs: f64, peaks: &[u32]) -> String {
    let mut ports = serde_json::Map::new();
    for (i, p) in run.ports.iter().enumerate() {
        let (a, b) = (&prev[i], &cur[i]);
        let d = |x: u64, y: u64| x.saturating_sub(y);
        ports.insert(
            p.name.clone(),
            serde_json::json!({
                "ipackets": b.ipackets, "ibytes": b.ibytes, "opackets": b.opackets, "obytes": b.obytes,
                "imissed": b.imissed, "ierrors": b.ierrors, "oerrors": b.oerrors, "rx_nombuf": b.rx_nombuf,
                "rx_pps": d(b.ipackets, a.ipackets) as f64 / secs,
                "tx_pps": d(b.opackets, a.opackets) as f64 / secs,
                "rx_bps": d(b.ibytes, a.ibytes) as f64 * 8.0 / secs,
                "tx_bps": d(b.obytes, a.obytes) as f64 * 8.0 / secs,
            }),
        );
    }
    let mut nodes = serde_json::Map::new();
    for n in &run.info.nodes {
        let s = n.stats.snapshot();
        let counters: serde_json::Map<String, serde_json::Value> =
            n.stats.extra().map(|(spec, v)| (spec.name.to_owned(), v.into())).collect();
        let gauges: serde_json::Map<String, serde_json::Value> =
            n.stats.gauges().map(|(spec, v)| (spec.name.to_owned(), v.into())).collect();
        nodes.insert(
            n.name.clone(),
            serde_json::json!({"lcore": n.lcore, "type": n.type_name, "packets": s.packets,
                "passed_on": run.info.passed_on(&n.name), "drops": s.drops,
                "calls": s.calls, "busy_calls": s.busy_calls, "cycles_per_packet": s.cycles_per_packet(), "cycles": s.cycles,
                "idle_cycles": s.idle_cycles, "timed_packets": s.timed_packets, "counters": counters,
                "gauges": gauges, "panics": n.stats.panics.get(), "panic_drops": n.stats.panic_drops.get(),
                "fenced_drops": n.stats.fenced_drops.get()}),
        );
    }
    let mut pools = serde_json::Map::new();
    for (i, (name, pool)) in run.pools().iter().enumerate() {
        let s = pool.stats();
        let peak = peaks.get(i).copied().unwrap_or(0).max(s.in_use);
        pools.insert(
            name.clone(),
            serde_json::json!({"size": s.size, "in_use": s.in_use, "in_use_max": peak, "available": s.available,
                "get_fails": s.get_fails}),
        );
    }
    let mut lcores = serde_json::Map::new();
    for (lc, st) in &run.info.lcore_stats {
        lcores.insert(
            lc.to_string(),
            serde_json::json!({"walks": st.walks.get(), "busy_walks": st.busy_walks.get(),
                "busy_cycles": st.busy_cycles.get(), "long_idle_cycles": st.long_idle_cycles.get(),
                "received": st.received.get(), "rx_mode": st.rx_mode().name(), "sleeps": st.sleeps.get(),
                "asleep_cycles": st.asleep_cycles.get()}),
        );
    }
    serde_json::json!({"t": (t * 1000.0).round() / 1000.0, "tsc_hz": ironpath_eal::tsc::tsc_hz(), "ports": ports,
        "nodes": nodes, "mempools": pools, "lcores": lcores})
    .to_string()
}
