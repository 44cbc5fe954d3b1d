//! The commands `ironpath ctl` sends and the owning thread answers, their
//! grammar (which the client's completion reads too) and their text.
//!
//! Every answer is made from [`Figures`], collected by the thread that owns the
//! ports from counters the data plane publishes; `clear runtime` keeps a
//! baseline here, in [`Control`], and never resets a counter an lcore writes.

use crate::telemetry::{Figures, PoolFig, PortFig};
use ironpath_graph::{GraphInfo, RuntimeBase};
use std::fmt::Write;
use std::sync::Arc;

/// What a command does (the dispatcher's match on it is exhaustive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmd {
    /// `help`.
    Help,
    /// `show runtime`.
    ShowRuntime,
    /// `clear runtime`.
    ClearRuntime,
    /// `show interface`.
    ShowInterface,
    /// `show errors`.
    ShowErrors,
    /// `show graph`.
    ShowGraph,
    /// `show mempool`.
    ShowMempool,
    /// `show memory`.
    ShowMemory,
    /// `show ctl`, answered by the socket thread ([`super::server`]).
    ShowCtl,
    /// `trace add NODE [N]`.
    TraceAdd,
    /// `show trace [max N]`.
    ShowTrace,
    /// `clear trace`.
    ClearTrace,
    /// `set interface state NAME up|down`.
    SetInterfaceState,
    /// A table command a node's controller answers (`ip route add ...`).
    Table,
    /// `capture ...`, served by the socket thread ([`super::capture`]).
    Capture,
}

/// Packets `trace add NODE` records when no count is given (as VPP's default).
pub const TRACE_DEFAULT_PACKETS: u32 = 50;
/// Records `show trace` prints when no `max` is given.
pub const SHOW_TRACE_DEFAULT_MAX: usize = 50;

/// One command: its syntax (words, `a|b` keywords, `<ARG>` free arguments, a
/// trailing `[...]` optional), what it does and its help.
pub struct Syntax {
    /// E.g. `show interface [<NAME>]`.
    pub pattern: &'static str,
    /// The command.
    pub cmd: Cmd,
    /// One line of help.
    pub help: &'static str,
}

const fn s(pattern: &'static str, cmd: Cmd, help: &'static str) -> Syntax {
    Syntax { pattern, cmd, help }
}

/// Every command, in the order `help` lists them.
pub const GRAMMAR: &[Syntax] = &[
    s("help [<COMMAND>]", Cmd::Help, "list the commands, or the ones that begin with COMMAND"),
    s(
        "show runtime",
        Cmd::ShowRuntime,
        "per node: calls, busy calls, packets, drops, cycles/packet, packets/call (since `clear runtime`)",
    ),
    s(
        "clear runtime",
        Cmd::ClearRuntime,
        "start `show runtime` from zero (the data plane's counters are left as they are)",
    ),
    s("show interface [<NAME>]", Cmd::ShowInterface, "per port: state, link, RX/TX packets and bytes, drops by reason"),
    s("show errors", Cmd::ShowErrors, "every node counter of drops or errors that is not zero, with its reason"),
    s("show graph", Cmd::ShowGraph, "lcores, nodes, their kinds and edges"),
    s("show mempool", Cmd::ShowMempool, "per pool: size, in use, free, in caches, cache size, get failures"),
    s("show memory", Cmd::ShowMemory, "process RSS, mempool memory and what backs it (hugepages or not)"),
    s("show ctl", Cmd::ShowCtl, "the control socket's own counters: clients served and refused, by reason"),
    s(
        "trace add <NODE> [<N>]",
        Cmd::TraceAdd,
        "record the next N packets (default 50, at most 1000) node NODE handles, headers decoded",
    ),
    s(
        "show trace [max <N>]",
        Cmd::ShowTrace,
        "the first N trace records (default 50): per packet and node, time, flags, edge, headers",
    ),
    s("clear trace", Cmd::ClearTrace, "stop every trace, drop its records and restart its clock"),
    s(
        "capture <POINT...>",
        Cmd::Capture,
        "[rx|tx|both] PORT|NODE.EDGE ... [-c N] [-s SNAPLEN] [--duration S] [FILTER] -w FILE|-: packets to pcapng, live",
    ),
    s(
        "set interface state <NAME> up|down",
        Cmd::SetInterfaceState,
        "administrative state: a port that is down drops what it receives and what is sent to it (counted: admin_down)",
    ),
    s(
        "ip route add|replace <PREFIX> via <ADDR> [port <NAME>]",
        Cmd::Table,
        "route PREFIX through gateway ADDR (ip_router); replaces PREFIX's route",
    ),
    s("ip route add|replace <PREFIX> port <NAME>", Cmd::Table, "route PREFIX on the link of port NAME"),
    s(
        "ip route add|replace <PREFIX> blackhole|unreachable|prohibit",
        Cmd::Table,
        "drop PREFIX's packets (unreachable, prohibit: with an ICMP error)",
    ),
    s("ip route del <PREFIX>", Cmd::Table, "remove PREFIX's route"),
    s("show ip route", Cmd::Table, "the router's table: connected, its own addresses and the routes"),
    s("ip neighbor add <ADDR> lladdr <MAC> port <NAME>", Cmd::Table, "a permanent neighbour entry on interface NAME"),
    s("ip neighbor del <ADDR> port <NAME>", Cmd::Table, "remove a neighbour entry (permanent or learned)"),
    s(
        "acl rule add [at <N>] permit|deny|count [<FIELD> <VALUE> ...]",
        Cmd::Table,
        "insert a rule (at N, default last); fields src, dst (prefixes), proto, sport, dport (a port or LO-HI)",
    ),
    s("acl rule replace <N> permit|deny|count [<FIELD> <VALUE> ...]", Cmd::Table, "replace rule N"),
    s("acl rule del <N>", Cmd::Table, "remove rule N"),
    s("show acl", Cmd::Table, "the acl's rules in order (first match wins) and its default"),
    s("bridge mac add <MAC> port <NAME> [vlan <VID>]", Cmd::Table, "a static entry: MAC is behind port NAME"),
    s("bridge mac del <MAC> [vlan <VID>]", Cmd::Table, "remove MAC's entry, static or learned"),
    s(
        "bridge mac flush [port <NAME>]",
        Cmd::Table,
        "forget the learned entries (of port NAME): they are learned again",
    ),
    s("show bridge mac", Cmd::Table, "the bridge's MAC table: MAC, VLAN, port, static or learned"),
];

/// What `help` says of the table commands.
pub const TABLE_NOTE: &str = "Table commands change a running node without a pause in forwarding; with several nodes of one kind, end the command with `node NAME`.";

/// One word of a pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    /// `|`-separated keywords.
    Keys(&'static str),
    /// Anything; the text is its name (`<NAME>`).
    Free(&'static str),
}

impl Tok {
    fn parse(w: &'static str) -> Tok {
        if w.starts_with('<') {
            Tok::Free(w)
        } else {
            Tok::Keys(w)
        }
    }

    fn accepts(self, w: &str) -> bool {
        match self {
            Tok::Keys(k) => k.split('|').any(|k| k == w),
            Tok::Free(_) => true,
        }
    }
}

fn forms(pattern: &'static str) -> Vec<Vec<Tok>> {
    crate::completion::forms(pattern, Tok::parse)
}

use crate::completion::Next;
pub use crate::completion::Offer;

/// What Tab offers with `line` typed up to the cursor.
pub fn complete(line: &str) -> Offer {
    crate::completion::offer(
        line,
        GRAMMAR,
        |syntax| forms(syntax.pattern),
        Tok::accepts,
        |syntax, tok| match tok {
            Tok::Keys(k) => Next::Words(k.split('|').map(str::to_string).collect()),
            Tok::Free(name) => Next::Usage(format!("{name}: {} ({})", syntax.pattern, syntax.help)),
        },
    )
}

/// The grammar line `words` matches, and its free argument if it has one.
pub fn parse(words: &[&str]) -> Option<(&'static Syntax, Option<String>)> {
    // `capture` takes any number of words; its own parser reads them.
    if words.first() == Some(&"capture") && words.len() > 1 {
        return GRAMMAR.iter().find(|g| g.cmd == Cmd::Capture).map(|g| (g, None));
    }
    for syntax in GRAMMAR {
        for form in forms(syntax.pattern) {
            if form.len() == words.len() && words.iter().zip(&form).all(|(w, t)| t.accepts(w)) {
                let arg = words.iter().zip(&form).find(|(_, t)| matches!(t, Tok::Free(_))).map(|(w, _)| w.to_string());
                return Some((syntax, arg));
            }
        }
    }
    None
}

/// The help text: every command, or those beginning with `prefix`.
pub fn help(prefix: Option<&str>) -> String {
    let mut out = String::new();
    for g in GRAMMAR.iter().filter(|g| prefix.is_none_or(|p| g.pattern.starts_with(p))) {
        let _ = writeln!(out, "  {:<26} {}", g.pattern, g.help);
    }
    if prefix.is_none() {
        let _ = writeln!(out, "{TABLE_NOTE}");
    }
    out
}

/// What the owning thread keeps between commands.
#[derive(Default)]
pub struct Control {
    /// `clear runtime`'s baseline, for the graph it was taken of.
    runtime_base: Option<(Arc<GraphInfo>, RuntimeBase)>,
}

impl Control {
    /// Answers `req` from figures `f`; a capture gets the running graph (the
    /// socket thread streams it).
    pub fn serve(&mut self, req: super::Request, f: &Figures) {
        if super::capture::is_capture(&req.line) {
            req.reply_graph(f.graph.clone());
        } else {
            let answer = self.answer(&req.line, f);
            req.reply(answer);
        }
    }

    /// The answer to command `line` from figures `f` (`Err`: refused, with why).
    pub fn answer(&mut self, line: &str, f: &Figures) -> Result<String, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            return Ok(String::new());
        }
        let parsed = parse(&words);
        if matches!(parsed, None | Some((Syntax { cmd: Cmd::Table, .. }, _))) {
            if let Some(answer) = f.graph.as_ref().and_then(|g| g.control(&words)) {
                return answer.map(|mut a| {
                    if !a.ends_with('\n') {
                        a.push('\n');
                    }
                    a
                });
            }
        }
        let Some((syntax, arg)) = parsed else {
            let near = help(words.first().copied());
            return Err(if near.is_empty() {
                format!("unknown command `{line}`; `help` lists the commands")
            } else {
                format!("unknown command `{line}`; did you mean:\n{}", near.trim_end())
            });
        };
        match syntax.cmd {
            Cmd::Help => Ok(help(arg.as_deref())),
            Cmd::ShowRuntime => self.show_runtime(f),
            Cmd::ClearRuntime => {
                let g = graph(f)?;
                self.runtime_base = Some((g.clone(), g.runtime_base()));
                Ok("runtime counters cleared\n".to_string())
            }
            Cmd::ShowInterface => show_interface(f, arg.as_deref()),
            Cmd::ShowErrors => graph(f).map(|g| show_errors(g)),
            Cmd::ShowGraph => graph(f).map(|g| g.format_graph()),
            Cmd::ShowMempool => Ok(show_mempool(&f.pools)),
            Cmd::ShowMemory => Ok(show_memory(&f.pools)),
            Cmd::ShowCtl => Err("`show ctl` is answered by the control socket's own thread".to_string()),
            Cmd::Capture => Err("`capture` is served by the control socket's own thread".to_string()),
            Cmd::TraceAdd => trace_add(graph(f)?, &words),
            Cmd::ShowTrace => show_trace(graph(f)?, &words),
            Cmd::ClearTrace => {
                graph(f)?.clear_trace();
                Ok("trace cleared\n".to_string())
            }
            Cmd::SetInterfaceState => set_interface_state(f, &words),
            Cmd::Table => {
                graph(f)?;
                let kind = match words[0] {
                    "ip" => "an ip_router",
                    "acl" => "an acl",
                    "bridge" => "an l2_bridge",
                    _ => match words.get(1) {
                        Some(&"acl") => "an acl",
                        Some(&"bridge") => "an l2_bridge",
                        _ => "an ip_router",
                    },
                };
                Err(format!("no node of this pipeline takes `{line}` ({kind} does)"))
            }
        }
    }

    fn show_runtime(&self, f: &Figures) -> Result<String, String> {
        let g = graph(f)?;
        Ok(match &self.runtime_base {
            Some((of, base)) if Arc::ptr_eq(of, g) => g.format_runtime_since(base),
            _ => g.format_runtime(),
        })
    }
}

/// A count argument `w` in `1..=max`.
fn count(what: &str, w: &str, max: usize) -> Result<usize, String> {
    match w.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("{what}: `{w}` is not a number in 1..={max}")),
    }
}

/// `trace add NODE [N]` (`words` matched the grammar).
fn trace_add(g: &GraphInfo, words: &[&str]) -> Result<String, String> {
    let node = words[2];
    let n = match words.get(3) {
        Some(w) => count("trace add", w, ironpath_graph::TRACE_MAX_PACKETS as usize)? as u32,
        None => TRACE_DEFAULT_PACKETS,
    };
    g.trace(node, n)?;
    Ok(format!("tracing the next {n} packets of `{node}` (show trace)\n"))
}

/// `show trace [max N]` (`words` matched the grammar): records stay until `clear trace`.
fn show_trace(g: &GraphInfo, words: &[&str]) -> Result<String, String> {
    let max = match words.get(3) {
        Some(w) => count("show trace max", w, ironpath_graph::TRACE_CAPACITY)?,
        None => SHOW_TRACE_DEFAULT_MAX,
    };
    let (records, kept, discarded) = g.peek_trace(max);
    let mut out = String::new();
    if discarded > 0 {
        let _ = writeln!(
            out,
            "({discarded} records discarded: at most {} are kept, none waited for)",
            ironpath_graph::TRACE_CAPACITY
        );
    }
    if records.is_empty() {
        out.push_str("no trace records (`trace add NODE N` arms a trace)\n");
    }
    for r in &records {
        let _ = writeln!(out, "{r}");
    }
    if kept > records.len() {
        let _ = writeln!(out, "({} more records: show trace max N)", kept - records.len());
    }
    Ok(out)
}

fn graph(f: &Figures) -> Result<&Arc<GraphInfo>, String> {
    f.graph.as_ref().ok_or_else(|| "no pipeline: none is loaded (testpmd: `pipeline load FILE`)".to_string())
}

/// Whether a node counter counts drops or errors (its description says so).
fn is_drop_or_error(name: &str, unit: &str) -> bool {
    unit.contains("dropped")
        || name.contains("drop")
        || ["error", "malformed", "invalid"].iter().any(|w| name.contains(w) || unit.contains(w))
}

fn show_errors(g: &GraphInfo) -> String {
    let mut rows: Vec<(u64, String, String, String)> = Vec::new();
    for n in &g.nodes {
        // A drop node's reasons are the edges that lead to it (below), not its
        // own total.
        for (spec, v) in n.stats.extra().filter(|_| n.type_name != "drop") {
            if v != 0 && is_drop_or_error(spec.name, spec.unit) {
                rows.push((v, n.name.clone(), spec.name.to_string(), spec.unit.to_string()));
            }
        }
        let s = &n.stats;
        for (name, v, why) in [
            ("unconnected_next", s.unconnected.get(), "packets dropped (sent on an edge that leads nowhere)"),
            ("frame_full", s.frame_full.get(), "packets dropped (the next node's frame was full)"),
            ("panic_drops", s.panic_drops.get(), "packets dropped with a call that panicked"),
            ("fenced_drops", s.fenced_drops.get(), "packets dropped while the node was fenced"),
        ] {
            if v != 0 {
                rows.push((v, n.name.clone(), name.to_string(), why.to_string()));
            }
        }
        if n.type_name == "drop" {
            for e in g.edges.iter().filter(|e| e.to == n.name) {
                let v = e.stats.packets.get();
                if v != 0 {
                    let from = format!("from {}.{}", e.from, e.next);
                    rows.push((v, n.name.clone(), from, "packets dropped deliberately (a drop node)".to_string()));
                }
            }
        }
        for e in g.edges.iter().filter(|e| e.from == n.name) {
            let v = e.stats.drops.get();
            if v != 0 {
                let edge = format!("edge {} -> {}", e.next, e.to);
                rows.push((v, n.name.clone(), edge, "packets dropped (receiving frame or ring full)".to_string()));
            }
        }
    }
    if rows.is_empty() {
        return "no drops or errors counted\n".to_string();
    }
    let mut out = format!("{:>14}  {:<24} {:<26} {}\n", "Count", "Node", "Counter", "Reason");
    for (v, node, name, why) in rows {
        let _ = writeln!(out, "{v:>14}  {node:<24} {name:<26} {why}");
    }
    out
}

/// `set interface state NAME up|down` (`words` matched the grammar).
fn set_interface_state(f: &Figures, words: &[&str]) -> Result<String, String> {
    let name = words[3];
    let p = f.ports.iter().find(|p| p.label == name || p.info.name == name).ok_or_else(|| {
        let names: Vec<&str> = f.ports.iter().map(|p| p.label.as_str()).collect();
        format!("no interface `{name}`; interfaces: {}", names.join(", "))
    })?;
    let up = words[4] == "up";
    p.admin.store(up, std::sync::atomic::Ordering::Relaxed);
    Ok(format!("{}: admin {}\n", p.label, if up { "up" } else { "down" }))
}

fn link_text(p: &PortFig) -> String {
    match p.link {
        Some(l) if l.up != 0 => {
            format!("up, {} Mbps, {}", l.speed_mbps, if l.full_duplex != 0 { "full-duplex" } else { "half-duplex" })
        }
        Some(_) => "down".to_string(),
        None => "unknown (the driver does not say)".to_string(),
    }
}

fn show_interface(f: &Figures, name: Option<&str>) -> Result<String, String> {
    let ports: Vec<&PortFig> =
        f.ports.iter().filter(|p| name.is_none_or(|n| p.label == n || p.info.name == n)).collect();
    if ports.is_empty() {
        let names: Vec<&str> = f.ports.iter().map(|p| p.label.as_str()).collect();
        return Err(match name {
            Some(n) => format!("no interface `{n}`; interfaces: {}", names.join(", ")),
            None => "no interfaces".to_string(),
        });
    }
    let mut out = String::new();
    for p in ports {
        let i = &p.info;
        let admin = if p.admin.load(std::sync::atomic::Ordering::Relaxed) { "admin up" } else { "admin down" };
        let _ = writeln!(
            out,
            "{} (port {}, {} {}): {:?}, {admin}, link {}",
            p.label,
            i.id,
            i.driver,
            i.name,
            i.state,
            link_text(p)
        );
        let st = &p.stats;
        let rows = [
            ("rx packets", st.ipackets),
            ("rx bytes", st.ibytes),
            ("tx packets", st.opackets),
            ("tx bytes", st.obytes),
            ("drops: rx missed", st.imissed),
            ("drops: rx nombuf", st.rx_nombuf),
            ("drops: rx errors", st.ierrors),
            ("drops: tx errors", st.oerrors),
        ];
        for (k, v) in rows {
            let _ = writeln!(out, "  {k:<36} {v:>16}");
        }
        // The driver's own counters of losses, non-zero ones only.
        for (k, v) in &p.xstats {
            let drop_like = ["drop", "miss", "full", "err", "fail"].iter().any(|w| k.contains(w));
            if *v != 0 && drop_like {
                let _ = writeln!(out, "  {:<36} {v:>16}", format!("drops: {k}"));
            }
        }
        // Losses the port's own nodes counted (a full TX queue, admin down), non-zero.
        let nodes = f.graph.iter().flat_map(|g| g.nodes.iter());
        for n in nodes.filter(|n| n.port.as_ref().is_some_and(|(port, _)| *port == p.label)) {
            for (spec, v) in n.stats.extra() {
                if v != 0 && is_drop_or_error(spec.name, spec.unit) {
                    let _ = writeln!(out, "  {:<36} {v:>16}", format!("drops: {} ({})", spec.name, n.name));
                }
            }
        }
    }
    Ok(out)
}

fn show_mempool(pools: &[PoolFig]) -> String {
    let mut out = format!(
        "{:<20} {:>10} {:>10} {:>10} {:>10} {:>6} {:>9} {:>10}\n",
        "Name", "Size", "In use", "Free", "In caches", "Cache", "Elt size", "Get fails"
    );
    for p in pools {
        let s = &p.stats;
        let _ = writeln!(
            out,
            "{:<20} {:>10} {:>10} {:>10} {:>10} {:>6} {:>9} {:>10}",
            p.name, s.size, s.in_use, s.available, s.in_caches, p.cache_size, p.elt_size, s.get_fails
        );
    }
    out
}

/// Resident memory of this process, in bytes (`VmRSS` of `/proc/self/status`,
/// in KiB there: no page size to know).
fn rss_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn show_memory(pools: &[PoolFig]) -> String {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let mut out = match rss_bytes() {
        Some(b) => format!("process RSS: {:.1} MiB (VmRSS, /proc/self/status)\n", mib(b)),
        None => "process RSS: unknown (/proc/self/status unreadable)\n".to_string(),
    };
    let total: u64 = pools.iter().map(|p| p.bytes as u64).sum();
    let _ = writeln!(out, "mempools: {} pools, {:.1} MiB", pools.len(), mib(total));
    for p in pools {
        let _ = writeln!(
            out,
            "  {:<20} {:>10.1} MiB on {} ({} objects of {} bytes)",
            p.name,
            mib(p.bytes as u64),
            p.mem,
            p.stats.size,
            p.elt_size
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        complete(line).words
    }

    #[test]
    fn completion_knows_where_it_is() {
        assert_eq!(words(""), ["help", "show", "clear", "trace", "capture", "set", "ip", "acl", "bridge"]);
        assert!(complete("capture ").usage[0].starts_with("<POINT...>: capture <POINT...>"));
        assert_eq!(words("sh"), ["show"]);
        assert_eq!(
            words("show "),
            ["runtime", "interface", "errors", "graph", "mempool", "memory", "ctl", "trace", "ip", "acl", "bridge"]
        );
        assert_eq!(words("ip route "), ["add", "replace", "del"]);
        assert_eq!(words("ip route add 198.19.0.0/16 "), ["via", "port", "blackhole", "unreachable", "prohibit"]);
        assert_eq!(words("set interface state p0 "), ["up", "down"]);
        assert_eq!(words("bridge mac "), ["add", "del", "flush"]);
        assert_eq!(words("show m"), ["mempool", "memory"]);
        assert_eq!(words("clear "), ["runtime", "trace"]);
        assert_eq!(words("trace "), ["add"]);
        assert_eq!(words("show trace "), ["max"]);
        assert!(words("show runtime ").is_empty());
        let o = complete("show interface ");
        assert!(o.words.is_empty());
        assert_eq!(o.usage.len(), 1);
        assert!(o.usage[0].starts_with("<NAME>: show interface [<NAME>]"), "{o:?}");
        assert_eq!(complete("show m").start, 5);
    }

    #[test]
    fn lines_parse_to_their_grammar_line() {
        assert_eq!(parse(&["show", "runtime"]).map(|(s, a)| (s.cmd, a)), Some((Cmd::ShowRuntime, None)));
        assert_eq!(
            parse(&["show", "interface", "p0"]).map(|(s, a)| (s.cmd, a)),
            Some((Cmd::ShowInterface, Some("p0".to_string())))
        );
        assert_eq!(parse(&["show", "interface"]).map(|(s, a)| (s.cmd, a)), Some((Cmd::ShowInterface, None)));
        assert_eq!(parse(&["show", "ctl"]).map(|(s, _)| s.cmd), Some(Cmd::ShowCtl));
        assert_eq!(
            parse(&["trace", "add", "ip4", "3"]).map(|(s, a)| (s.cmd, a)),
            Some((Cmd::TraceAdd, Some("ip4".into())))
        );
        assert_eq!(parse(&["trace", "add", "ip4"]).map(|(s, _)| s.cmd), Some(Cmd::TraceAdd));
        assert_eq!(parse(&["show", "trace", "max", "2"]).map(|(s, _)| s.cmd), Some(Cmd::ShowTrace));
        assert_eq!(parse(&["clear", "trace"]).map(|(s, _)| s.cmd), Some(Cmd::ClearTrace));
        assert!(parse(&["trace", "add"]).is_none());
        assert!(parse(&["show", "trace", "max"]).is_none());
        assert!(parse(&["show", "runtime", "x"]).is_none());
        assert!(parse(&["show"]).is_none());
        assert!(parse(&["frobnicate"]).is_none());
        assert_eq!(parse(&["capture", "rx", "a", "tcp", "port", "80"]).map(|(s, _)| s.cmd), Some(Cmd::Capture));
        assert!(parse(&["capture"]).is_none());
    }

    #[test]
    fn help_lists_every_command() {
        let h = help(None);
        for g in GRAMMAR {
            assert!(h.contains(g.pattern), "{} missing from help", g.pattern);
        }
        assert_eq!(help(Some("clear")).lines().count(), 2);
        assert!(h.contains("node NAME"));
    }

    #[test]
    fn unknown_and_pipeline_less_commands_are_refused() {
        let f = Figures { app: "test", params: vec![], ports: vec![], pools: vec![], graph: None };
        let mut c = Control::default();
        let e = c.answer("show", &f).unwrap_err();
        assert!(e.contains("did you mean") && e.contains("show runtime"), "{e}");
        assert!(c.answer("show runtime", &f).unwrap_err().contains("no pipeline"));
        assert!(c.answer("show interface nope", &f).unwrap_err().contains("no interface `nope`"));
        assert!(c.answer("show mempool", &f).unwrap().starts_with("Name"));
        assert!(c.answer("show memory", &f).unwrap().contains("process RSS"));
        assert!(c.answer("trace add ip4 3", &f).unwrap_err().contains("no pipeline"));
        assert!(c.answer("ip route del 198.19.0.0/16", &f).unwrap_err().contains("no pipeline"));
        assert!(c.answer("set interface state p0 down", &f).unwrap_err().contains("no interface `p0`"));
        assert_eq!(c.answer("  ", &f), Ok(String::new()));
    }
}
