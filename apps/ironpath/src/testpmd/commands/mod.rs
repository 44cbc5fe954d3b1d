//! The shell's commands: a table of (words, usage, help) and one dispatcher. Every
//! wrong command or argument yields a one-line reason followed by the usage. The
//! table is in `docs`; `show`, `set` and `port` commands each have their own file.

pub mod complete;
mod docs;
mod port;
mod set;
mod show;

pub use docs::{CmdDoc, COMMANDS};

use super::{device_cmds, display, App};
use ironpath_util::suggest::did_you_mean;
use std::time::{Duration, Instant};

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
        "show" if arg(1) == Some("trace") => {
            let max = match arg(2) {
                None => None,
                Some("max") => Some(num("show trace", arg(3), 1usize, 1_000_000)?),
                Some(x) => return Err(bad("show trace", format!("unexpected `{x}`"))),
            };
            no_more("show trace", t.get(if max.is_some() { 4 } else { 2 }..).unwrap_or(&[]))?;
            out = super::pipeline_cmds::show(app, "trace", max)?;
        }
        "ip" | "acl" | "bridge" => out = super::pipeline_cmds::table(app, &t)?,
        "show" if matches!(arg(1), Some("ip" | "acl" | "bridge")) => out = super::pipeline_cmds::table(app, &t)?,
        "show" if matches!(arg(1), Some("graph" | "runtime")) => {
            no_more("show", &t[2..])?;
            out = super::pipeline_cmds::show(app, t[1], None)?;
        }
        "show" => out = show::show(app, &t)?,
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
            (Some("trace"), None) => out = super::pipeline_cmds::clear_trace(app)?,
            (Some("fwd"), None) | (Some("fwd"), Some("stats")) => {
                app.clear_fwd();
                out.push_str("\n  Forward statistics cleared\n");
            }
            _ => return Err(bad("clear port", "expected `clear port ...` or `clear fwd`")),
        },
        "set" => out = set::set(app, &t)?,
        "port" => out = port::port(app, &t)?,
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
    use super::set::SET_WORDS;
    use super::COMMANDS;

    /// Every `set` command's word is in the list a wrong `set` prints.
    #[test]
    fn error_lists_cover_every_command() {
        for c in COMMANDS {
            let w: Vec<&str> = c.words.split_whitespace().collect();
            if w[0] == "set" {
                assert!(SET_WORDS.contains(&w[1]), "`{}` missing from SET_WORDS", c.words);
            }
        }
    }
}
