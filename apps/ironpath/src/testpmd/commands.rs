//! The shell's commands: a table of (words, usage, help) and one dispatcher. Every
//! wrong command or argument yields a one-line reason followed by the usage.

use super::params::{parse_txpkts, MODES};
use super::{device_cmds, display, App};
use ironpath_eal::{PortError, PortState};
use ironpath_util::suggest::did_you_mean;
use std::time::{Duration, Instant};

/// One command's documentation.
pub struct CmdDoc {
    /// Leading keywords (for help lookup and completion).
    pub words: &'static str,
    /// Usage line.
    pub usage: &'static str,
    /// What it does.
    pub help: &'static str,
}

/// Every command.
pub const COMMANDS: &[CmdDoc] = &[
    CmdDoc {
        words: "start",
        usage: "start | start tx_first [N]",
        help: "start forwarding (tx_first: first send N bursts on every stream, default 1)",
    },
    CmdDoc { words: "stop", usage: "stop", help: "stop forwarding and print the forward statistics" },
    CmdDoc { words: "quit", usage: "quit", help: "stop everything and exit" },
    CmdDoc {
        words: "show port",
        usage: "show port info|summary|stats|xstats (ID|all)",
        help: "port information and counters",
    },
    CmdDoc { words: "clear port", usage: "clear port stats|xstats (ID|all)", help: "reset port counters" },
    CmdDoc { words: "show fwd", usage: "show fwd stats all", help: "forward statistics so far" },
    CmdDoc { words: "clear fwd", usage: "clear fwd [stats all]", help: "reset forward statistics" },
    CmdDoc { words: "show config", usage: "show config rxtx|cores|fwd", help: "current configuration" },
    CmdDoc {
        words: "set fwd",
        usage: "set fwd io|mac|macswap|5tswap|rxonly|txonly|flowgen|csum|icmpecho [retry]",
        help: "choose the forwarding engine",
    },
    CmdDoc { words: "set burst", usage: "set burst N (1..=256)", help: "packets per burst" },
    CmdDoc {
        words: "set txpkts",
        usage: "set txpkts LEN[,LEN...] (total 42..=9000)",
        help: "segment lengths of generated packets",
    },
    CmdDoc { words: "set nbcore", usage: "set nbcore N", help: "number of forwarding lcores" },
    CmdDoc { words: "set promisc", usage: "set promisc (ID|all) on|off", help: "promiscuous mode" },
    CmdDoc {
        words: "set port gro",
        usage: "set port ID gro on|off",
        help: "receive aggregation (TCP over IPv4/IPv6) on the port's received bursts",
    },
    CmdDoc {
        words: "set gro flush",
        usage: "set gro flush N (1..=4)",
        help: "polls an aggregate may wait before it is flushed (1: within each burst)",
    },
    CmdDoc { words: "show port gro", usage: "show port ID gro", help: "GRO settings and counters of a port" },
    CmdDoc {
        words: "set txcoalesce",
        usage: "set txcoalesce N (1..=256)",
        help: "batch TX: send when N packets wait, after 100 us, or on an idle round (1: no batching)",
    },
    CmdDoc {
        words: "set txcompletion",
        usage: "set txcompletion immediate|every N|timer_us T",
        help: "report TX completions (free sent packets) at once, every N packets, or T us after the oldest",
    },
    CmdDoc {
        words: "show port txq",
        usage: "show port ID txq",
        help: "TX batching of a port's queues: in-flight, completions, flushes by reason",
    },
    CmdDoc {
        words: "set verbose",
        usage: "set verbose N",
        help: "verbosity: 1 or more prints every received packet (at the next start)",
    },
    CmdDoc { words: "port start", usage: "port start (ID|all)", help: "configure and start ports" },
    CmdDoc { words: "port stop", usage: "port stop (ID|all)", help: "stop ports" },
    CmdDoc { words: "port close", usage: "port close (ID|all)", help: "close stopped ports (and remove them)" },
    CmdDoc {
        words: "port reset",
        usage: "port reset (ID|all)",
        help: "re-initialise stopped ports (probed again with the same arguments; settings lost)",
    },
    CmdDoc { words: "port attach", usage: "port attach DEVARGS (e.g. net_null2,size=128)", help: "add a port" },
    CmdDoc { words: "port detach", usage: "port detach ID", help: "remove a port" },
    CmdDoc {
        words: "port config",
        usage: "port config all rxq|txq|rxd|txd N",
        help: "queue counts and sizes (applied at port start)",
    },
    CmdDoc {
        words: "port config all rss",
        usage: "port config all rss ip|tcp|udp|all|default|none",
        help: "RSS hash functions of every port (what each can do)",
    },
    CmdDoc { words: "show port rss-hash", usage: "show port ID rss-hash", help: "a port's RSS hash functions" },
    CmdDoc { words: "port config mtu", usage: "port config mtu PORT N", help: "set a port's MTU" },
    CmdDoc { words: "mac_addr set", usage: "mac_addr set PORT aa:bb:cc:dd:ee:ff", help: "set a port's MAC address" },
    CmdDoc {
        words: "mac_addr add",
        usage: "mac_addr add|remove PORT aa:bb:cc:dd:ee:ff",
        help: "receive for a further unicast address / stop",
    },
    CmdDoc {
        words: "vlan set",
        usage: "vlan set strip|filter on|off PORT",
        help: "VLAN strip (tag into the mbuf) or filter (tagged frames of unlisted ids dropped), in software",
    },
    CmdDoc { words: "rx_vlan", usage: "rx_vlan add|rm VID PORT", help: "VLAN ids the filter accepts" },
    CmdDoc { words: "set allmulti", usage: "set allmulti (ID|all) on|off", help: "all-multicast reception" },
    CmdDoc {
        words: "set link-up",
        usage: "set link-up|link-down port ID",
        help: "bring a port's link up or down (af_packet/tap: the kernel interface's IFF_UP)",
    },
    CmdDoc {
        words: "show rxq info",
        usage: "show rxq info PORT QUEUE",
        help: "an RX queue: mempool, state, descriptors",
    },
    CmdDoc {
        words: "show txq info",
        usage: "show txq info PORT QUEUE",
        help: "a TX queue: state, descriptors, offloads",
    },
    CmdDoc {
        words: "show device info",
        usage: "show device info all|NAME",
        help: "devices: bus, driver, arguments, port",
    },
    CmdDoc { words: "show config txpkts", usage: "show config txpkts", help: "segments of generated packets" },
    CmdDoc {
        words: "set rxpkts",
        usage: "set rxpkts LEN[,LEN...]",
        help: "RX buffer-split segment lengths (applied by ports with a buffer-split offload; no ironpath PMD has one)",
    },
    CmdDoc { words: "show config rxpkts", usage: "show config rxpkts", help: "RX buffer-split segment lengths" },
    CmdDoc {
        words: "dump_mempool",
        usage: "dump_mempool",
        help: "every mempool: size, element size, caches, counters",
    },
    CmdDoc { words: "show mempool", usage: "show mempool", help: "the same as dump_mempool" },
    CmdDoc {
        words: "set eth-peer",
        usage: "set eth-peer PORT aa:bb:cc:dd:ee:ff",
        help: "destination MAC the mac and csum engines write for packets sent on PORT",
    },
    CmdDoc { words: "set nbport", usage: "set nbport N", help: "forward on the first N started ports" },
    CmdDoc {
        words: "set record-core-cycles",
        usage: "set record-core-cycles on|off",
        help: "count busy cycles per stream (CPU cycles/packet at stop)",
    },
    CmdDoc {
        words: "set record-burst-stats",
        usage: "set record-burst-stats on|off",
        help: "count RX and TX bursts by size (shown at stop)",
    },
    CmdDoc {
        words: "set xstats-hide-zero",
        usage: "set xstats-hide-zero on|off",
        help: "show port xstats without zeros",
    },
    CmdDoc {
        words: "monitor",
        usage: "monitor [SECS [COUNT]]",
        help: "per-port Ipkts/IBytes/Opkts/Obytes and rates every SECS seconds (default 1 s, 10 rows)",
    },
    CmdDoc {
        words: "pipeline",
        usage: "pipeline load FILE | pipeline stop",
        help: "run a YAML pipeline (its own ports, pools and lcores) / stop it and print its counters",
    },
    CmdDoc { words: "show graph", usage: "show graph", help: "the pipeline's lcores, nodes and edges" },
    CmdDoc { words: "show runtime", usage: "show runtime", help: "per-node calls, packets, drops, cycles/packet" },
    CmdDoc {
        words: "trace",
        usage: "trace on NODE [N] | trace off [NODE]",
        help: "record the next N (default 50) packets a pipeline node handles",
    },
    CmdDoc { words: "show trace", usage: "show trace", help: "print and clear the trace records" },
    CmdDoc { words: "help", usage: "help [COMMAND]", help: "list commands, or one command's usage" },
];

/// Completion candidates: every command's words and the keywords after them.
pub const WORDS: &[&str] = &[
    "start",
    "tx_first",
    "stop",
    "quit",
    "show",
    "port",
    "info",
    "summary",
    "stats",
    "xstats",
    "all",
    "clear",
    "fwd",
    "config",
    "rxtx",
    "cores",
    "set",
    "burst",
    "txpkts",
    "nbcore",
    "promisc",
    "on",
    "off",
    "verbose",
    "attach",
    "detach",
    "close",
    "reset",
    "mtu",
    "allmulti",
    "link-up",
    "link-down",
    "add",
    "remove",
    "vlan",
    "rx_vlan",
    "rss",
    "rss-hash",
    "record-burst-stats",
    "rxpkts",
    "strip",
    "filter",
    "rm",
    "mac_addr",
    "device",
    "mempool",
    "dump_mempool",
    "eth-peer",
    "nbport",
    "record-core-cycles",
    "xstats-hide-zero",
    "rxq",
    "txq",
    "rxd",
    "txd",
    "monitor",
    "help",
    "retry",
    "io",
    "mac",
    "macswap",
    "5tswap",
    "rxonly",
    "txonly",
    "flowgen",
    "csum",
    "icmpecho",
    "pipeline",
    "load",
    "graph",
    "runtime",
    "trace",
    "gro",
    "flush",
    "txcoalesce",
    "txcompletion",
    "immediate",
    "every",
    "timer_us",
];

/// What the shell does after a command.
#[derive(Debug, PartialEq, Eq)]
pub enum Flow {
    /// Keep reading.
    Continue,
    /// Exit.
    Quit,
}

fn usage_for(words: &str) -> &'static str {
    COMMANDS.iter().find(|c| c.words == words).map(|c| c.usage).unwrap_or("help")
}

fn bad(words: &str, why: impl std::fmt::Display) -> String {
    format!("Bad arguments: {why}\nUsage: {}", usage_for(words))
}

fn ports_arg(app: &App, words: &str, a: Option<&str>) -> Result<Vec<u16>, String> {
    match a {
        Some("all") => Ok(app.eal.port_ids()),
        Some(s) => {
            let id: u16 = s.parse().map_err(|_| bad(words, format!("`{s}` is not a port id or `all`")))?;
            app.eal.port(id).map_err(|e| bad(words, e))?;
            Ok(vec![id])
        }
        None => Err(bad(words, "missing port id or `all`")),
    }
}

fn num<T: std::str::FromStr + PartialOrd + std::fmt::Display>(
    words: &str,
    a: Option<&str>,
    min: T,
    max: T,
) -> Result<T, String> {
    let a = a.ok_or_else(|| bad(words, "missing number"))?;
    match a.parse::<T>() {
        Ok(n) if n >= min && n <= max => Ok(n),
        _ => Err(bad(words, format!("`{a}` is not a number in {min}..={max}"))),
    }
}

fn no_more(words: &str, rest: &[&str]) -> Result<(), String> {
    match rest.first() {
        None => Ok(()),
        Some(x) => Err(bad(words, format!("unexpected `{x}`"))),
    }
}

/// Run one command line; output goes to the returned string, errors as `Err`.
pub fn execute(app: &mut App, line: &str) -> Result<(String, Flow), String> {
    let line = line.split('#').next().unwrap_or("").trim();
    let t: Vec<&str> = line.split_whitespace().collect();
    let Some(&first) = t.first() else { return Ok((String::new(), Flow::Continue)) };
    let arg = |i: usize| t.get(i).copied();
    let mut out = String::new();
    match first {
        "start" => {
            let n = match (arg(1), arg(2)) {
                (None, _) => None,
                (Some("tx_first"), None) => Some(1),
                (Some("tx_first"), n) => Some(num("start", n, 1u32, 1024)?),
                (Some(x), _) => return Err(bad("start", format!("unexpected `{x}`"))),
            };
            no_more("start", t.get(3..).unwrap_or(&[]))?;
            out = app.start(n)?;
        }
        "stop" => {
            no_more("stop", &t[1..])?;
            out = app.stop()?;
        }
        "quit" | "exit" => {
            if app.is_running() {
                out = app.stop().unwrap_or_default();
            }
            out.push_str("\nBye...\n");
            return Ok((out, Flow::Quit));
        }
        "help" => out = help(arg(1), t.get(2).copied()),
        "monitor" => {
            let secs = match arg(1) {
                Some(_) => num("monitor", arg(1), 0.1f64, 3600.0)?,
                None => 1.0,
            };
            let count = match arg(2) {
                Some(_) => num("monitor", arg(2), 1u32, 100_000)?,
                None => 10,
            };
            monitor(app, secs, count, &mut |s| crate::outln!("{s}"));
        }
        "show" if matches!(arg(1), Some("graph" | "runtime" | "trace")) => {
            no_more("show", &t[2..])?;
            out = super::pipeline_cmds::show(app, t[1])?;
        }
        "show" => out = show(app, &t)?,
        "pipeline" => out = super::pipeline_cmds::pipeline(app, &t)?,
        "trace" => out = super::pipeline_cmds::trace(app, &t)?,
        "clear" => match (arg(1), arg(2)) {
            (Some("port"), Some(kind @ ("stats" | "xstats"))) => {
                for id in ports_arg(app, "clear port", arg(3))? {
                    let p = app.eal.port_mut(id).map_err(|e| bad("clear port", e))?;
                    let r = if kind == "stats" { p.stats_reset() } else { p.xstats_reset() };
                    r.map_err(|e| bad("clear port", e))?;
                    out.push_str(&format!(
                        "\n  NIC {} for port {id} cleared\n",
                        if kind == "stats" { "statistics" } else { "xstats" }
                    ));
                }
            }
            (Some("port"), _) => return Err(bad("clear port", "expected stats or xstats")),
            (Some("fwd"), None) | (Some("fwd"), Some("stats")) => {
                app.clear_fwd();
                out.push_str("\n  Forward statistics cleared\n");
            }
            _ => return Err(bad("clear port", "expected `clear port ...` or `clear fwd`")),
        },
        "set" => out = set(app, &t)?,
        "port" => out = port(app, &t)?,
        "mac_addr" => {
            let words = match arg(1) {
                Some("set") => "mac_addr set",
                Some("add") => "mac_addr add",
                Some("remove") => "mac_addr remove",
                x => return Err(bad("mac_addr set", format!("`{}`: accepted set, add, remove", x.unwrap_or("")))),
            };
            let id = num(words, arg(2), 0u16, u16::MAX)?;
            let mac = arg(3).ok_or_else(|| bad(words, "missing MAC address"))?;
            no_more(words, t.get(4..).unwrap_or(&[]))?;
            out = match arg(1) {
                Some("set") => device_cmds::mac_addr_set(app, id, mac)?,
                Some(w) => device_cmds::mac_addr_add_remove(app, w == "add", id, mac)?,
                None => unreachable!("matched above"),
            };
        }
        "vlan" => {
            // vlan set strip|filter on|off PORT
            if arg(1) != Some("set") {
                return Err(bad("vlan set", "expected `vlan set strip|filter on|off PORT`"));
            }
            let what = match arg(2) {
                Some(w @ ("strip" | "filter")) => w,
                x => return Err(bad("vlan set", format!("`{}`: accepted strip, filter", x.unwrap_or("")))),
            };
            let on = match arg(3) {
                Some("on") => true,
                Some("off") => false,
                _ => return Err(bad("vlan set", "expected on or off")),
            };
            let id = num("vlan set", arg(4), 0u16, u16::MAX)?;
            no_more("vlan set", t.get(5..).unwrap_or(&[]))?;
            app.eal.port(id).map_err(|_| format!("Invalid port {id}"))?;
            if app.is_running() {
                return Err(bad("vlan set", "stop forwarding first"));
            }
            let set = if what == "strip" { &mut app.vlan.strip } else { &mut app.vlan.filter };
            if on {
                set.insert(id);
            } else {
                set.remove(&id);
            }
        }
        "rx_vlan" => {
            // rx_vlan add|rm VID PORT
            let add = match arg(1) {
                Some("add") => true,
                Some("rm") => false,
                x => return Err(bad("rx_vlan", format!("`{}`: accepted add, rm", x.unwrap_or("")))),
            };
            let vid = num("rx_vlan", arg(2), 0u16, 4095)?;
            let id = num("rx_vlan", arg(3), 0u16, u16::MAX)?;
            no_more("rx_vlan", t.get(4..).unwrap_or(&[]))?;
            app.eal.port(id).map_err(|_| format!("Invalid port {id}"))?;
            if app.is_running() {
                return Err(bad("rx_vlan", "stop forwarding first"));
            }
            let ids = app.vlan.ids.entry(id).or_default();
            if add {
                ids.insert(vid);
            } else {
                ids.remove(&vid);
            }
        }
        "dump_mempool" => {
            no_more("dump_mempool", &t[1..])?;
            out = device_cmds::dump_mempools(app);
        }
        _ => {
            let hint = did_you_mean(
                first,
                [
                    "start",
                    "stop",
                    "quit",
                    "show",
                    "clear",
                    "set",
                    "port",
                    "help",
                    "monitor",
                    "pipeline",
                    "trace",
                    "mac_addr",
                    "dump_mempool",
                    "vlan",
                    "rx_vlan",
                ],
            );
            return Err(format!("Bad arguments: unknown command `{first}`{hint}\nUsage: help [COMMAND]"));
        }
    }
    Ok((out, Flow::Continue))
}

fn help(a: Option<&str>, b: Option<&str>) -> String {
    match a {
        None => {
            let mut o = String::from("\nCommands (help COMMAND for one):\n");
            for c in COMMANDS {
                o.push_str(&format!("  {:<72} {}\n", c.usage, c.help));
            }
            o
        }
        Some(w) => {
            let two = b.map(|b| format!("{w} {b}"));
            let found: Vec<&CmdDoc> = COMMANDS
                .iter()
                .filter(|c| Some(c.words.to_string()) == two || c.words == w || c.words.starts_with(&format!("{w} ")))
                .collect();
            if found.is_empty() {
                format!("no command `{w}`: try `help`\n")
            } else {
                found.iter().map(|c| format!("{}\n    {}\n", c.usage, c.help)).collect()
            }
        }
    }
}

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

fn show(app: &mut App, t: &[&str]) -> Result<String, String> {
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
            out = super::gro::show(id, &app.gro, c);
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
                        out.push_str(&display::port_info(&p.info(), p.link().ok()));
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
            Some("rxtx") => {
                let engine = &app.p.forward_mode;
                out.push_str(&format!("  {engine} packet forwarding packets/burst={}\n", app.p.burst));
                out.push_str(&format!(
                    "  packet len={} - nb packet segments={}\n",
                    app.p.txpkts.iter().map(|l| u32::from(*l)).sum::<u32>(),
                    app.p.txpkts.len()
                ));
                out.push_str(&format!(
                    "  nb forwarding cores={} - nb forwarding ports={}\n",
                    app.fwd_lcores().len(),
                    app.fwd_ports().len()
                ));
                for p in app.eal.ports() {
                    out.push_str(&format!(
                        "  port {}: RX queue number: {} Tx queue number: {}\n",
                        p.id(),
                        p.nb_rxq(),
                        p.nb_txq()
                    ));
                    out.push_str(&format!("    RX desc={} - TX desc={}\n", app.p.rxd, app.p.txd));
                }
            }
            Some("cores") => {
                let l: Vec<String> = app.fwd_lcores().iter().map(|c| c.to_string()).collect();
                out.push_str(&format!("List of forwarding lcores: {}\n", l.join(" ")));
            }
            Some("fwd") => {
                let fwd = app.fwd_lcores();
                match super::runner::build_streams(
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

/// Every word `set` accepts.
const SET_WORDS: &[&str] = &[
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
];

fn set(app: &mut App, t: &[&str]) -> Result<String, String> {
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
            let n = num("set burst", arg(2), 1u16, super::params::MAX_PKT_BURST)?;
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
            let n = num("set gro flush", arg(3), 1u32, super::gro::MAX_FLUSH_CYCLES)?;
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
            for id in ids {
                app.eal.port_mut(id).and_then(|p| p.set_promiscuous(on)).map_err(|e| bad("set promisc", e))?;
            }
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

fn port(app: &mut App, t: &[&str]) -> Result<String, String> {
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
            let id = app.eal.port_attach(d).map_err(|e| bad("port attach", e))?;
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

/// Print per-port deltas every `secs` seconds, `count` times.
pub fn monitor(app: &mut App, secs: f64, count: u32, emit: &mut dyn FnMut(String)) {
    let ids = app.eal.port_ids();
    let snap = |app: &App| -> Vec<ironpath_eal::abi::Stats> {
        ids.iter().map(|id| app.eal.port(*id).and_then(|p| p.stats()).unwrap_or_default()).collect()
    };
    let mut prev = snap(app);
    let mut t = Instant::now();
    emit(display::monitor_header());
    for _ in 0..count {
        std::thread::sleep(Duration::from_secs_f64(secs));
        let cur = snap(app);
        let dt = t.elapsed().as_secs_f64();
        t = Instant::now();
        for (i, id) in ids.iter().enumerate() {
            emit(display::monitor_row(*id, &prev[i], &cur[i], dt));
        }
        prev = cur;
    }
}

#[cfg(test)]
mod word_tests {
    use super::{COMMANDS, SET_WORDS, WORDS};

    /// Every `set` command's word is in the list a wrong `set` prints, and every
    /// command word completes.
    #[test]
    fn error_lists_and_completion_cover_every_command() {
        for c in COMMANDS {
            let w: Vec<&str> = c.words.split_whitespace().collect();
            if w[0] == "set" {
                assert!(SET_WORDS.contains(&w[1]), "`{}` missing from SET_WORDS", c.words);
            }
            for word in &w {
                assert!(WORDS.contains(word), "`{word}` of `{}` missing from WORDS", c.words);
            }
        }
    }
}
