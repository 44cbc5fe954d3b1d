//! The figures as Prometheus text (format 0.0.4) or OpenMetrics 1.0 text: one
//! family per figure, `ironpath_` names with their unit and `_total` for
//! counters, HELP and TYPE lines, labels `port`, `pool`, `node`, `lcore`, `source`, `name`,
//! and `endpoint`, `reason` for the telemetry endpoints' own counters.

use super::counters::{Counts, Event};
use super::Figures;
use std::fmt::Write;

/// One sample: label pairs and value.
type Sample = (Vec<(&'static str, String)>, f64);

struct Family {
    /// Name without `_total`.
    name: &'static str,
    counter: bool,
    help: &'static str,
    samples: Vec<Sample>,
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn family(name: &'static str, counter: bool, help: &'static str) -> Family {
    Family { name, counter, help, samples: Vec::new() }
}

/// Renders `f` and the endpoints' counters `counts` (OpenMetrics if `openmetrics`,
/// else Prometheus text 0.0.4).
pub fn render(f: &Figures, counts: &Counts, openmetrics: bool) -> String {
    let mut fams = Vec::new();
    let port = |l: &str| vec![("port", l.to_string())];
    macro_rules! port_counter {
        ($name:literal, $help:literal, $field:ident) => {{
            let mut fam = family($name, true, $help);
            for p in &f.ports {
                fam.samples.push((port(&p.label), p.stats.$field as f64));
            }
            fams.push(fam);
        }};
    }
    port_counter!("ironpath_port_rx_packets", "Packets received.", ipackets);
    port_counter!("ironpath_port_rx_bytes", "Bytes received.", ibytes);
    port_counter!("ironpath_port_tx_packets", "Packets sent.", opackets);
    port_counter!("ironpath_port_tx_bytes", "Bytes sent.", obytes);
    port_counter!("ironpath_port_rx_missed_packets", "Packets the device dropped: no receive slot free.", imissed);
    port_counter!("ironpath_port_rx_error_packets", "Erroneous packets received.", ierrors);
    port_counter!("ironpath_port_tx_error_packets", "Packets the device failed to send.", oerrors);
    port_counter!("ironpath_port_rx_nombuf_packets", "Packets not received: the mempool was empty.", rx_nombuf);
    let mut up = family("ironpath_port_link_up", false, "1 if the link is up.");
    let mut xs = family("ironpath_port_xstats", true, "Extended port counters (DPDK's xstats), by name.");
    for p in &f.ports {
        up.samples.push((port(&p.label), f64::from(p.link.is_some_and(|l| l.up != 0))));
        for (k, v) in &p.xstats {
            xs.samples.push((vec![("port", p.label.clone()), ("name", k.clone())], *v as f64));
        }
    }
    fams.extend([up, xs]);

    let pool = |n: &str| vec![("pool", n.to_string())];
    let mut size = family("ironpath_mempool_size_mbufs", false, "Mbufs in the pool.");
    let mut used = family("ironpath_mempool_in_use_mbufs", false, "Mbufs handed out.");
    let mut avail = family("ironpath_mempool_available_mbufs", false, "Mbufs free (in the ring or a cache).");
    let mut fails = family("ironpath_mempool_get_fails", true, "Gets refused: the pool was empty.");
    for p in &f.pools {
        size.samples.push((pool(&p.name), f64::from(p.stats.size)));
        used.samples.push((pool(&p.name), f64::from(p.stats.in_use)));
        avail.samples.push((pool(&p.name), f64::from(p.stats.available)));
        fails.samples.push((pool(&p.name), p.stats.get_fails as f64));
    }
    fams.extend([size, used, avail, fails]);

    if let Some(g) = &f.graph {
        let mut calls = family("ironpath_node_calls", true, "Calls of the node (for a source, every poll).");
        let mut pkts = family("ironpath_node_packets", true, "Packets the node handled.");
        let mut drops =
            family("ironpath_node_dropped_packets", true, "Packets the node freed without passing them on.");
        let mut cpp = family("ironpath_node_cycles_per_packet", false, "TSC cycles per packet (sampled calls).");
        let mut panics =
            family("ironpath_node_panics", true, "Calls of the node that panicked (their packets dropped).");
        let mut fenced =
            family("ironpath_node_fenced", false, "1 while the node is fenced (it panicked on every call).");
        let mut own = family("ironpath_node_events", true, "The node's own counters, by name (`show runtime`).");
        let mut open = family("ironpath_tcp_open_connections", false, "Connections a tcp node holds.");
        let mut gauge = family("ironpath_node_gauge", false, "The node's own gauges, by name (values now).");
        for n in &g.nodes {
            let l = vec![("node", n.name.clone()), ("lcore", n.lcore.to_string())];
            let s = n.stats.snapshot();
            calls.samples.push((l.clone(), s.calls as f64));
            pkts.samples.push((l.clone(), s.packets as f64));
            drops.samples.push((l.clone(), s.drops as f64));
            cpp.samples.push((l.clone(), s.cycles_per_packet()));
            panics.samples.push((l.clone(), n.stats.panics.get() as f64));
            fenced.samples.push((l.clone(), n.stats.fenced.get() as f64));
            for (spec, v) in n.stats.extra() {
                own.samples.push((vec![("node", n.name.clone()), ("name", spec.name.to_string())], v as f64));
            }
            for (spec, v) in n.stats.gauges() {
                gauge.samples.push((vec![("node", n.name.clone()), ("name", spec.name.to_string())], v as f64));
            }
            if n.type_name == "tcp" {
                let c = |k| n.stats.extra_by_name(k).unwrap_or(0);
                open.samples.push((l.clone(), c("conns_opened").saturating_sub(c("conns_closed")) as f64));
            }
        }
        fams.extend([calls, pkts, drops, cpp, panics, fenced, own, gauge, open]);
    }

    if let Some(g) = &f.graph {
        let hz = ironpath_eal::tsc::tsc_hz().max(1) as f64;
        let mut sleeps =
            family("ironpath_lcore_sleeps", true, "Sleeps of an idle lcore (rx mode adaptive or interrupt).");
        let mut wakeups =
            family("ironpath_lcore_wakeups", true, "What ended an lcore's sleeps, by source: rx, doorbell, timer.");
        let mut asleep = family("ironpath_lcore_asleep_seconds", true, "Time an lcore slept.");
        for (lc, st) in &g.lcore_stats {
            let l = vec![("lcore", lc.to_string())];
            sleeps.samples.push((l.clone(), st.sleeps.get() as f64));
            for (src, v) in [("rx", st.wake_rx.get()), ("doorbell", st.wake_bell.get()), ("timer", st.wake_timer.get())]
            {
                wakeups.samples.push((vec![("lcore", lc.to_string()), ("source", src.to_string())], v as f64));
            }
            asleep.samples.push((l, st.asleep_cycles.get() as f64 / hz));
        }
        fams.extend([sleeps, wakeups, asleep]);
    }

    let mut clients = family("ironpath_telemetry_clients", true, "Clients a telemetry endpoint accepted.");
    let mut refused = family(
        "ironpath_telemetry_refused",
        true,
        "Clients or requests a telemetry endpoint refused, by the bound that bit.",
    );
    for e in Event::ALL {
        match e.label() {
            (ep, None) => clients.samples.push((vec![("endpoint", ep.to_string())], counts.get(e) as f64)),
            (ep, Some(why)) => refused
                .samples
                .push((vec![("endpoint", ep.to_string()), ("reason", why.to_string())], counts.get(e) as f64)),
        }
    }
    fams.extend([clients, refused]);

    let mut out = String::new();
    for fam in fams.iter().filter(|f| !f.samples.is_empty()) {
        let sample_name = if fam.counter { format!("{}_total", fam.name) } else { fam.name.to_string() };
        // OpenMetrics names the family without `_total`; Prometheus text names it
        // as its samples.
        let fam_name = if openmetrics { fam.name.to_string() } else { sample_name.clone() };
        let _ = writeln!(out, "# HELP {fam_name} {}", fam.help);
        let _ = writeln!(out, "# TYPE {fam_name} {}", if fam.counter { "counter" } else { "gauge" });
        for (labels, v) in &fam.samples {
            let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape_label(v))).collect();
            let _ = writeln!(out, "{sample_name}{{{}}} {}", l.join(","), fmt_value(*v));
        }
    }
    if openmetrics {
        out.push_str("# EOF\n");
    }
    out
}

fn fmt_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_and_families_typed() {
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        let f = Figures { app: "test", params: vec![], ports: vec![], pools: vec![], graph: None };
        let text = render(&f, &Counts::default(), false);
        assert!(text.starts_with("# HELP ironpath_telemetry_clients_total "), "{text}");
        assert!(text.contains("\n# TYPE ironpath_telemetry_refused_total counter\n"), "{text}");
        assert!(
            text.contains("\nironpath_telemetry_refused_total{endpoint=\"metrics\",reason=\"evicted\"} 0\n"),
            "{text}"
        );
        let om = render(&f, &Counts::default(), true);
        assert!(om.contains("\n# TYPE ironpath_telemetry_refused counter\n") && om.ends_with("\n# EOF\n"), "{om}");
        assert_eq!(fmt_value(3.0), "3");
        assert_eq!(fmt_value(2.5), "2.5");
    }
}
