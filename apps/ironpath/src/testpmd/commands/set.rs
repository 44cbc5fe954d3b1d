//! `set ...`: forwarding mode and parameters, and per-port settings.

use super::{bad, no_more, num, ports_arg};
use crate::testpmd::params::{parse_txpkts, MODES};
use crate::testpmd::{device_cmds, App};
use ironpath_util::suggest::did_you_mean;

/// Every word `set` accepts.
pub(super) const SET_WORDS: &[&str] = &[
    "fwd",
    "burst",
    "txpkts",
    "rxpkts",
    "nbcore",
    "nbport",
    "promisc",
    "allmulti",
    "verbose",
    "link-up",
    "link-down",
    "eth-peer",
    "record-core-cycles",
    "record-burst-stats",
    "xstats-hide-zero",
    "port",
    "gro",
    "txcoalesce",
    "txcompletion",
    "rx-mode",
];

pub(super) fn set(app: &mut App, t: &[&str]) -> Result<String, String> {
    let arg = |i: usize| t.get(i).copied();
    let mut out = String::new();
    match arg(1) {
        Some("fwd") => {
            let m = arg(2).ok_or_else(|| bad("set fwd", "missing mode"))?;
            if !MODES.contains(&m) {
                let hint = did_you_mean(m, MODES.iter().copied());
                return Err(bad("set fwd", format!("unknown mode `{m}`{hint}")));
            }
            let retry = match arg(3) {
                None => false,
                Some("retry") => true,
                Some(x) => return Err(bad("set fwd", format!("unexpected `{x}`"))),
            };
            if app.is_running() {
                return Err(bad("set fwd", "stop forwarding first"));
            }
            app.p.forward_mode = m.to_string();
            app.retry = retry;
            out = format!("Set {m} packet forwarding mode{}\n", if retry { " with retry" } else { "" });
        }
        Some("burst") => {
            let n = num("set burst", arg(2), 1u16, crate::testpmd::params::MAX_PKT_BURST)?;
            if app.is_running() {
                return Err(bad("set burst", "stop forwarding first"));
            }
            app.p.burst = n;
            out = format!("Number of packets per burst set to {n}\n");
        }
        Some("txpkts") => {
            let v = arg(2).ok_or_else(|| bad("set txpkts", "missing lengths"))?;
            let segs = parse_txpkts(v).map_err(|e| bad("set txpkts", e))?;
            if app.is_running() {
                return Err(bad("set txpkts", "stop forwarding first"));
            }
            app.p.txpkts = segs;
        }
        Some("rxpkts") => {
            let v = arg(2).ok_or_else(|| bad("set rxpkts", "missing lengths"))?;
            no_more("set rxpkts", &t[3..])?;
            if app.is_running() {
                return Err(bad("set rxpkts", "stop forwarding first"));
            }
            out = device_cmds::set_rxpkts(app, v)?;
        }
        Some("nbcore") => {
            let max = app.lcores.len().saturating_sub(1).max(1) as u16;
            let n = num("set nbcore", arg(2), 1u16, max)?;
            if app.is_running() {
                return Err(bad("set nbcore", "stop forwarding first"));
            }
            app.p.nb_cores = n;
            out = format!("Number of forwarding cores set to {n}\n");
        }
        Some("port") if arg(3) == Some("gro") => {
            let id = ports_arg(app, "set port gro", arg(2))?[0];
            let on = match arg(4) {
                Some("on") => true,
                Some("off") => false,
                _ => return Err(bad("set port gro", "expected on or off")),
            };
            no_more("set port gro", &t[5..])?;
            if app.is_running() {
                return Err(bad("set port gro", "stop forwarding first"));
            }
            if on {
                app.gro.ports.insert(id);
            } else {
                app.gro.ports.remove(&id);
            }
            out = format!("Port {id}: GRO {}\n", if on { "on" } else { "off" });
        }
        Some("txcoalesce") => {
            let n = num("set txcoalesce", arg(2), 1usize, ironpath_eal::MAX_BURST)?;
            no_more("set txcoalesce", &t[3..])?;
            if app.is_running() {
                return Err(bad("set txcoalesce", "stop forwarding first"));
            }
            app.txcoalesce = n;
            out = format!("TX coalesce set to {n} packets (flush after 100 us or on an idle round)\n");
        }
        Some("txcompletion") => {
            let hz = ironpath_eal::tsc::tsc_hz();
            let c = ironpath_eal::Completion::parse(&t[2..], hz).map_err(|e| bad("set txcompletion", e))?;
            if app.is_running() {
                return Err(bad("set txcompletion", "stop forwarding first"));
            }
            app.txcompletion = c;
            out = format!("TX completion set to {}\n", c.describe(hz));
        }
        Some("gro") => {
            if arg(2) != Some("flush") {
                return Err(bad("set gro flush", "expected `set gro flush N`"));
            }
            let n = num("set gro flush", arg(3), 1u32, crate::testpmd::gro::MAX_FLUSH_CYCLES)?;
            no_more("set gro flush", &t[4..])?;
            if app.is_running() {
                return Err(bad("set gro flush", "stop forwarding first"));
            }
            app.gro.flush_cycles = n;
            out = format!("GRO flush cycles set to {n}\n");
        }
        Some("promisc") => {
            let ids = ports_arg(app, "set promisc", arg(2))?;
            let on = match arg(3) {
                Some("on") => true,
                Some("off") => false,
                _ => return Err(bad("set promisc", "expected on or off")),
            };
            no_more("set promisc", t.get(4..).unwrap_or(&[]))?;
            out = device_cmds::promisc(app, &ids, on)?;
        }
        Some("eth-peer") => {
            let id = num("set eth-peer", arg(2), 0u16, u16::MAX)?;
            let mac = arg(3).ok_or_else(|| bad("set eth-peer", "missing MAC address"))?;
            no_more("set eth-peer", t.get(4..).unwrap_or(&[]))?;
            app.eal.port(id).map_err(|_| format!("Invalid port {id}"))?;
            let m = device_cmds::parse_mac(mac).ok_or_else(|| format!("Error: Invalid ethernet address: {mac}"))?;
            if app.is_running() {
                return Err(bad("set eth-peer", "stop forwarding first"));
            }
            app.peers.insert(id, m);
        }
        Some("allmulti") => {
            let ids = ports_arg(app, "set allmulti", arg(2))?;
            let on = match arg(3) {
                Some("on") => true,
                Some("off") => false,
                _ => return Err(bad("set allmulti", "expected on or off")),
            };
            no_more("set allmulti", &t[4..])?;
            out = device_cmds::allmulti(app, &ids, on)?;
        }
        Some(w @ ("link-up" | "link-down")) => {
            let words = if w == "link-up" { "set link-up" } else { "set link-down" };
            if arg(2) != Some("port") {
                return Err(bad(words, "expected `port N`"));
            }
            let id = num(words, arg(3), 0u16, u16::MAX)?;
            no_more(words, &t[4..])?;
            out = device_cmds::link(app, id, w == "link-up")?;
        }
        Some("nbport") => {
            let n = num("set nbport", arg(2), 0usize, usize::from(u16::MAX))?;
            no_more("set nbport", &t[3..])?;
            if app.is_running() {
                return Err(bad("set nbport", "stop forwarding first"));
            }
            app.nb_fwd_ports = Some(n);
            out = format!("Number of forwarding ports set to {n}\n");
        }
        Some(w @ ("record-core-cycles" | "record-burst-stats" | "xstats-hide-zero")) => {
            let words = match w {
                "record-core-cycles" => "set record-core-cycles",
                "record-burst-stats" => "set record-burst-stats",
                _ => "set xstats-hide-zero",
            };
            let on = match arg(2) {
                Some("on") => true,
                Some("off") => false,
                _ => return Err(bad(words, "expected on or off")),
            };
            no_more(words, &t[3..])?;
            if w == "xstats-hide-zero" {
                app.xstats_hide_zero = on;
            } else if app.is_running() {
                return Err(bad(words, "stop forwarding first"));
            } else if w == "record-burst-stats" {
                app.p.record_burst_stats = on;
            } else {
                app.p.record_core_cycles = on;
            }
        }
        Some("rx-mode") => {
            let m: ironpath_eal::sleep::RxMode = arg(2)
                .ok_or_else(|| bad("set rx-mode", "expected poll, adaptive or interrupt"))?
                .parse()
                .map_err(|e: String| bad("set rx-mode", e))?;
            no_more("set rx-mode", &t[3..])?;
            if app.is_running() {
                return Err(bad("set rx-mode", "stop forwarding first"));
            }
            app.p.rx_mode = m;
            out = format!("Rx mode set to {}\n", m.name());
        }
        Some("verbose") => {
            let new = num("set verbose", arg(2), 0u32, 10)?;
            out = format!("Change verbose level from {} to {new}\n", app.verbose);
            app.verbose = new;
            if app.is_running() {
                out.push_str("(applies at the next start)\n");
            }
        }
        _ => {
            return Err(format!(
                "Bad arguments: `{}`: accepted after `set`: {} (help set: each one's usage)",
                arg(1).unwrap_or(""),
                SET_WORDS.join(", ")
            ))
        }
    }
    Ok(out)
}
