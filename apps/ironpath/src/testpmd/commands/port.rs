//! `port ...`: start, stop, close, reset, attach and detach ports; queue and device
//! configuration (`port config`).

use super::{bad, no_more, num, ports_arg};
use crate::testpmd::{device_cmds, App};
use ironpath_eal::{PortError, PortState};

pub(super) fn port(app: &mut App, t: &[&str]) -> Result<String, String> {
    let arg = |i: usize| t.get(i).copied();
    let mut out = String::new();
    match arg(1) {
        // DPDK 22.11's testpmd, recorded with net_null ports (the texts below are its):
        //   port stop 0      Stopping ports...\nChecking link statuses...\nDone
        //   start            Not all ports were started          (a port is stopped)
        //   port close 1     Closing ports...\nCannot close started device (port 1)\nDone
        //   port start 0     Port 0: 5A:29:0A:D2:15:9C\nChecking link statuses...\nDone
        //   port start all   Port 0 is now not stopped\nPlease stop the ports first\nDone
        //   port reset 0     Can not reset port(s), please stop port(s) first.   (started)
        //   port reset 0     Resetting ports...\nDone                            (stopped)
        //   port close 1     Closing ports...\nPort 1 is closed\nDone           (stopped)
        Some(op @ ("start" | "stop" | "close" | "reset")) => {
            let words = match op {
                "start" => "port start",
                "stop" => "port stop",
                "reset" => "port reset",
                _ => "port close",
            };
            let ids = ports_arg(app, words, arg(2))?;
            no_more(words, t.get(3..).unwrap_or(&[]))?;
            if app.is_running() && op != "start" {
                return Err(bad(words, "Please stop forwarding first"));
            }
            let started = |app: &App, id: u16| app.eal.port(id).is_ok_and(|p| p.state() == PortState::Started);
            match op {
                "start" => {
                    let mut any = false;
                    for id in ids {
                        if started(app, id) {
                            out.push_str(&format!("Port {id} is now not stopped\n"));
                            continue;
                        }
                        app.port_start_one(id).map_err(|e| bad(words, e))?;
                        any = true;
                    }
                    out.push_str(if any {
                        "Checking link statuses...\nDone\n"
                    } else {
                        "Please stop the ports first\nDone\n"
                    });
                }
                "stop" => {
                    out.push_str("Stopping ports...\n");
                    for id in ids {
                        if started(app, id) {
                            app.eal.port_mut(id).and_then(|p| p.stop()).map_err(|e| bad(words, e))?;
                        }
                    }
                    out.push_str("Checking link statuses...\nDone\n");
                }
                "reset" => {
                    if ids.iter().any(|id| started(app, *id)) {
                        return Err("Can not reset port(s), please stop port(s) first.".into());
                    }
                    out.push_str("Resetting ports...\n");
                    for id in ids {
                        if let Err(e) = app.eal.port_reset(id) {
                            let diag = match &e {
                                PortError::Errno { err, .. } => -err.raw_os_error().unwrap_or(5),
                                _ => -5,
                            };
                            out.push_str(&format!("Failed to reset port {id}. diag={diag} ({e})\n"));
                        }
                    }
                    out.push_str("Done\n");
                }
                _ => {
                    out.push_str("Closing ports...\n");
                    for id in ids {
                        if started(app, id) {
                            out.push_str(&format!("Cannot close started device (port {id})\n"));
                            continue;
                        }
                        app.eal.port_detach(id).map_err(|e| bad(words, e))?;
                        out.push_str(&format!("Port {id} is closed\n"));
                    }
                    out.push_str("Done\n");
                }
            }
        }
        Some("attach") => {
            let d = arg(2).ok_or_else(|| bad("port attach", "missing device arguments"))?;
            no_more("port attach", t.get(3..).unwrap_or(&[]))?;
            let id = app.eal.port_attach(d).map_err(|e| match e {
                // The driver failed for a reason of its own (no such interface,
                // permission): its message and DPDK's line, no usage.
                PortError::Probe { help: None, .. } => format!("{e}\nFailed to attach port {d}"),
                _ => bad("port attach", e),
            })?;
            out = format!(
                "Attaching a new port...\nPort {id} is attached. Now total ports is {}\nDone\n",
                app.eal.ports().count()
            );
        }
        Some("detach") => {
            let id = num("port detach", arg(2), 0u16, u16::MAX)?;
            if app.is_running() {
                return Err(bad("port detach", "Please stop forwarding first"));
            }
            app.eal.port_detach(id).map_err(|e| bad("port detach", e))?;
            out = format!(
                "Removing a device...\nPort {id} is detached. Now total ports is {}\nDone\n",
                app.eal.ports().count()
            );
        }
        Some("config") if arg(2) == Some("all") && arg(3) == Some("rss") => {
            let what = arg(4).ok_or_else(|| bad("port config all rss", "missing ip|tcp|udp|all|default|none"))?;
            no_more("port config all rss", t.get(5..).unwrap_or(&[]))?;
            if app.is_running() {
                return Err(bad("port config all rss", "Please stop forwarding first"));
            }
            out = device_cmds::config_rss(app, what)?;
        }
        Some("config") if arg(2) == Some("mtu") => {
            let id = num("port config mtu", arg(3), 0u16, u16::MAX)?;
            let mtu = num("port config mtu", arg(4), 0u16, u16::MAX)?;
            no_more("port config mtu", t.get(5..).unwrap_or(&[]))?;
            out = device_cmds::port_mtu(app, id, mtu)?;
        }
        Some("config") => {
            if arg(2) != Some("all") {
                return Err(bad("port config", "expected `all` (per-port values are not supported)"));
            }
            let what = arg(3).ok_or_else(|| bad("port config", "missing rxq|txq|rxd|txd"))?;
            if app.is_running() {
                return Err(bad("port config", "Please stop forwarding first"));
            }
            match what {
                "rxq" => app.p.rxq = num("port config", arg(4), 1u16, 1024)?,
                "txq" => app.p.txq = num("port config", arg(4), 1u16, 1024)?,
                "rxd" => app.p.rxd = num("port config", arg(4), 1u16, 65535)?,
                "txd" => app.p.txd = num("port config", arg(4), 1u16, 65535)?,
                other => return Err(bad("port config", format!("`{other}`: expected rxq, txq, rxd or txd"))),
            }
            out = "Set; stop and start the ports to apply (port stop all; port start all)\n".into();
        }
        _ => return Err(bad("port start", "expected start, stop, close, attach, detach or config after `port`")),
    }
    Ok(out)
}
