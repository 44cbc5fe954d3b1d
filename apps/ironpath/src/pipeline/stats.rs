//! The per-second figures of a running pipeline: the port table (testpmd's
//! monitor layout, with the file's port names) and JSON lines for plotting (ports,
//! nodes with their counters, mempools with their objects in use, lcores with their
//! busy cycles).

use super::PipelineRun;
use crate::testpmd::display;
use ironpath_eal::abi::Stats;
use ironpath_eal::Eal;
use std::fmt::Write;

/// Port counters at one instant.
pub type Snapshot = Vec<Stats>;

/// Counters of every pipeline port (zeros for a port whose stats fail).
pub fn snapshot(eal: &Eal, run: &PipelineRun) -> Snapshot {
    run.ports.iter().map(|p| eal.port(p.id).and_then(|x| x.stats()).unwrap_or_default()).collect()
}

/// The table of per-second deltas, one row per port.
pub fn table(run: &PipelineRun, prev: &Snapshot, cur: &Snapshot, secs: f64) -> String {
    let mut s = format!("{:<10}{}\n", "Name", display::monitor_header());
    for (i, p) in run.ports.iter().enumerate() {
        let _ = writeln!(s, "{:<10}{}", p.name, display::monitor_row(p.id, &prev[i], &cur[i], secs));
    }
    s
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
                "calls": s.calls, "cycles_per_packet": s.cycles_per_packet(), "cycles": s.cycles,
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
                "received": st.received.get()}),
        );
    }
    serde_json::json!({"t": (t * 1000.0).round() / 1000.0, "tsc_hz": ironpath_eal::tsc::tsc_hz(), "ports": ports,
        "nodes": nodes, "mempools": pools, "lcores": lcores})
    .to_string()
}
