//! `show ...`: port information, counters and settings, queues, forwarding config.

use super::{bad, no_more, num, ports_arg};
use crate::testpmd::{device_cmds, display, App};
use ironpath_eal::PortState;

/// `show port ID txq`: the batching settings and, while forwarding, each batched TX
/// queue's state.
fn show_txq(app: &App, id: u16) -> String {
    let hz = ironpath_eal::tsc::tsc_hz();
    let mut o = format!(
        "Port {id} TX: coalesce {} - completion {}{}\n",
        app.txcoalesce,
        app.txcompletion.describe(hz),
        if app.tx_batch_config().is_none() { " - direct (no batching)" } else { "" }
    );
    let snaps = app.txq_snaps(id);
    if snaps.is_empty() {
        o.push_str("  no batched TX queue is forwarding on this port\n");
    }
    for (q, s) in snaps {
        let st = s.stats;
        let flushes: u64 = st.flushes.iter().sum();
        let reasons: Vec<String> =
            ironpath_eal::FLUSH_REASONS.iter().zip(st.flushes).map(|(n, v)| format!("{n}={v}")).collect();
        o.push_str(&format!(
            "  queue {q}: in-flight {} (driver) + {} (held by completion policy) - buffered {}\n\
             \x20   sent {} - bytes {} - dropped (full) {} - completions {}\n\
             \x20   flushes {flushes} ({}) - packets/flush {:.1} - longest wait {} us\n",
            s.inflight,
            st.held,
            st.buffered,
            st.sent,
            st.bytes,
            st.tx_full,
            st.completions,
            reasons.join(" "),
            if flushes > 0 { st.sent as f64 / flushes as f64 } else { 0.0 },
            ironpath_eal::txbatch::tsc_to_us(st.max_wait_tsc, hz),
        ));
    }
    o
}

pub(super) fn show(app: &mut App, t: &[&str]) -> Result<String, String> {
    let arg = |i: usize| t.get(i).copied();
    let mut out = String::new();
    match arg(1) {
        Some(w @ ("rxq" | "txq")) => {
            let words = if w == "rxq" { "show rxq info" } else { "show txq info" };
            if arg(2) != Some("info") {
                return Err(bad(words, "expected `info`"));
            }
            let id = num(words, arg(3), 0u16, u16::MAX)?;
            let q = num(words, arg(4), 0u16, u16::MAX)?;
            no_more(words, t.get(5..).unwrap_or(&[]))?;
            out = if w == "rxq" { device_cmds::rxq_info(app, id, q)? } else { device_cmds::txq_info(app, id, q)? };
        }
        Some("device") => {
            if arg(2) != Some("info") {
                return Err(bad("show device info", "expected `info`"));
            }
            let which = arg(3).ok_or_else(|| bad("show device info", "missing `all` or a device name"))?;
            out = device_cmds::device_info(app, which)?;
        }
        Some("mempool") => {
            no_more("show mempool", &t[2..])?;
            out = device_cmds::dump_mempools(app);
        }
        Some("port") if arg(3) == Some("rss-hash") => {
            let id = num("show port rss-hash", arg(2), 0u16, u16::MAX)?;
            no_more("show port rss-hash", &t[4..])?;
            out = device_cmds::show_rss(app, id)?;
        }
        Some("port") if arg(3) == Some("txq") => {
            let id = ports_arg(app, "show port txq", arg(2))?[0];
            no_more("show port txq", &t[4..])?;
            out = show_txq(app, id);
        }
        Some("port") if arg(3) == Some("gro") => {
            let id = ports_arg(app, "show port gro", arg(2))?[0];
            no_more("show port gro", &t[4..])?;
            let mut c = [0u64; 4];
            for st in app.streams.iter().filter(|s| s.rx_port == id) {
                let v = [
                    st.stats.gro_in.get(),
                    st.stats.gro_out.get(),
                    st.stats.gro_aggregates.get(),
                    st.stats.gro_merged.get(),
                ];
                for k in 0..4 {
                    c[k] += v[k];
                }
            }
            out = crate::testpmd::gro::show(id, &app.gro, c);
        }
        Some("port") => {
            let what = arg(2).ok_or_else(|| bad("show port", "missing info|summary|stats|xstats"))?;
            if what == "summary" {
                let ids = ports_arg(app, "show port", arg(3).or(Some("all")))?;
                out.push_str(&format!("Number of available ports: {}\n", app.eal.ports().count()));
                // DPDK's layout: "Port MAC Address       Name         Driver         Status   Link".
                out.push_str(&format!(
                    "{:<4} {:<17} {:<12} {:<14} {:<8} {}\n",
                    "Port", "MAC Address", "Name", "Driver", "Status", "Link"
                ));
                for id in ids {
                    let p = app.eal.port(id).map_err(|e| bad("show port", e))?;
                    // A stopped port's link is down (DPDK's null ports say so too).
                    let l = p.link().unwrap_or_default();
                    let up = l.up != 0 && p.state() == PortState::Started;
                    out.push_str(&format!(
                        "{:<4} {:<17} {:<12} {:<14} {:<8} {}\n",
                        id,
                        p.mac().map(|m| display::mac(&m)).unwrap_or_else(|_| "n/a".into()),
                        p.name(),
                        p.driver().name,
                        if up { "up" } else { "down" },
                        display::link_speed(l.speed_mbps)
                    ));
                }
                return Ok(out);
            }
            let ids = ports_arg(app, "show port", arg(3))?;
            no_more("show port", t.get(4..).unwrap_or(&[]))?;
            for id in ids {
                match what {
                    "info" => {
                        let p = app.eal.port(id).map_err(|e| bad("show port", e))?;
                        out.push_str(&display::port_info(
                            &p.info(),
                            p.link().ok(),
                            p.rss_hash().map(|(capa, _)| capa).unwrap_or(0),
                        ));
                        out.push_str(&app.vlan.describe(id));
                    }
                    "stats" => out.push_str(&app.port_stats_text(id).map_err(|e| bad("show port", e))?),
                    "xstats" => {
                        let mut x = app.eal.port(id).and_then(|p| p.xstats()).map_err(|e| bad("show port", e))?;
                        if app.xstats_hide_zero {
                            x.retain(|(_, v)| *v != 0);
                        }
                        out.push_str(&display::xstats(id, &x));
                    }
                    other => {
                        return Err(bad("show port", format!("`{other}`: expected info, summary, stats or xstats")))
                    }
                }
            }
        }
        Some("fwd") => {
            if arg(2) != Some("stats") || arg(3) != Some("all") {
                return Err(bad("show fwd", "expected `show fwd stats all`"));
            }
            out = app.fwd_stats_text();
        }
        Some("config") => match arg(2) {
            Some("rxtx") => out = app.rxtx_config_text(),
            Some("cores") => {
                let l: Vec<String> = app.fwd_lcores().iter().map(|c| c.to_string()).collect();
                out.push_str(&format!("List of forwarding lcores: {}\n", l.join(" ")));
            }
            Some("fwd") => {
                let fwd = app.fwd_lcores();
                match crate::testpmd::runner::build_streams(
                    &app.eal,
                    &app.pool,
                    app.fwd_ports(),
                    &app.peers,
                    app.p.topology,
                    &fwd,
                    None,
                ) {
                    Ok((_streams, infos)) => out.push_str(&app.fwd_config_text(&infos)),
                    Err(e) => {
                        if app.is_running() {
                            out.push_str(&app.fwd_config_text(&app.streams.clone()));
                        } else {
                            return Err(bad("show config", e));
                        }
                    }
                }
            }
            Some("txpkts") => out = device_cmds::config_txpkts(app),
            Some("rxpkts") => out = device_cmds::config_rxpkts(app),
            _ => return Err(bad("show config", "expected rxtx, cores, fwd, txpkts or rxpkts")),
        },
        _ => {
            return Err(format!(
                "Bad arguments: `{}`: accepted after `show`: port, fwd, config, rxq, txq, device, mempool, graph, \
                 runtime, trace (help show: each one's usage)",
                arg(1).unwrap_or("")
            ))
        }
    }
    Ok(out)
}
