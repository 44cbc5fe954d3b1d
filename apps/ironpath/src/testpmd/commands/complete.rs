//! What the shell's Tab offers: the words valid next, given the words typed so far.
//!
//! Every command's syntax is one line of [`GRAMMAR`]: words separated by spaces, a
//! word either keywords (`info|summary`) or a typed argument in angle brackets.
//! `<port>`, `<port|all>`, `<engine>` and `<command>` complete from facts (the
//! ports that exist, the forwarding engines, the command names); any other
//! `<...>` (a number, a MAC address, a file) has no words to offer, so Tab shows
//! the command's usage instead, as DPDK's cmdline prints a token's help. A trailing
//! `[...]` marks optional words at the end of a line.

use super::{CmdDoc, COMMANDS};

/// One command's syntax and the `COMMANDS` entry (by its words) that documents it.
pub struct Syntax {
    /// Words and arguments, e.g. `show port info|summary|stats|xstats <port|all>`.
    pub pattern: &'static str,
    /// `CmdDoc::words` of the entry whose usage and help describe it.
    pub doc: &'static str,
}

const fn s(pattern: &'static str, doc: &'static str) -> Syntax {
    Syntax { pattern, doc }
}

/// Every command the shell runs, as the dispatcher in `commands` accepts it.
pub const GRAMMAR: &[Syntax] = &[
    s("start [tx_first [<N>]]", "start"),
    s("stop", "stop"),
    s("quit", "quit"),
    s("exit", "quit"),
    s("help [<command>]", "help"),
    s("monitor [<SECS> [<COUNT>]]", "monitor"),
    s("show port info|summary|stats|xstats <port|all>", "show port"),
    s("show port <port> rss-hash", "show port rss-hash"),
    s("show port <port> txq", "show port txq"),
    s("show port <port> gro", "show port gro"),
    s("show fwd stats all", "show fwd"),
    s("show config rxtx|cores|fwd", "show config"),
    s("show config txpkts", "show config txpkts"),
    s("show config rxpkts", "show config rxpkts"),
    s("show rxq info <port> <QUEUE>", "show rxq info"),
    s("show txq info <port> <QUEUE>", "show txq info"),
    s("show device info all", "show device info"),
    s("show device info <NAME>", "show device info"),
    s("show mempool", "show mempool"),
    s("show graph", "show graph"),
    s("show runtime", "show runtime"),
    s("show trace [max <N>]", "show trace"),
    s("show ip route", "show ip route"),
    s("show acl", "show ip route"),
    s("show bridge mac", "show ip route"),
    s("ip route add|replace|del <PREFIX> [<ARGS...>]", "ip route"),
    s("ip neighbor add|del <ADDR> [<ARGS...>]", "ip neighbor"),
    s("acl rule add|replace|del [<ARGS...>]", "acl rule"),
    s("bridge mac add|del|flush [<ARGS...>]", "bridge mac"),
    s("clear port stats|xstats <port|all>", "clear port"),
    s("clear fwd [stats all]", "clear fwd"),
    s("set fwd <engine> [retry]", "set fwd"),
    s("set burst <N>", "set burst"),
    s("set txpkts <LEN[,LEN...]>", "set txpkts"),
    s("set rxpkts <LEN[,LEN...]>", "set rxpkts"),
    s("set nbcore <N>", "set nbcore"),
    s("set nbport <N>", "set nbport"),
    s("set promisc <port|all> on|off", "set promisc"),
    s("set allmulti <port|all> on|off", "set allmulti"),
    s("set port <port> gro on|off", "set port gro"),
    s("set gro flush <N>", "set gro flush"),
    s("set txcoalesce <N>", "set txcoalesce"),
    s("set txcompletion immediate", "set txcompletion"),
    s("set txcompletion every <N>", "set txcompletion"),
    s("set txcompletion timer_us <T>", "set txcompletion"),
    s("set rx-mode poll|adaptive|interrupt", "set rx-mode"),
    s("set verbose <N>", "set verbose"),
    s("set link-up|link-down port <port>", "set link-up"),
    s("set eth-peer <port> <MAC>", "set eth-peer"),
    s("set record-core-cycles on|off", "set record-core-cycles"),
    s("set record-burst-stats on|off", "set record-burst-stats"),
    s("set xstats-hide-zero on|off", "set xstats-hide-zero"),
    s("port start <port|all>", "port start"),
    s("port stop <port|all>", "port stop"),
    s("port close <port|all>", "port close"),
    s("port reset <port|all>", "port reset"),
    s("port attach <DEVARGS>", "port attach"),
    s("port detach <port>", "port detach"),
    s("port config all rxq|txq|rxd|txd <N>", "port config"),
    s("port config all rss ip|tcp|udp|all|default|none", "port config all rss"),
    s("port config mtu <port> <N>", "port config mtu"),
    s("mac_addr set <port> <MAC>", "mac_addr set"),
    s("mac_addr add|remove <port> <MAC>", "mac_addr add"),
    s("vlan set strip|filter on|off <port>", "vlan set"),
    s("rx_vlan add|rm <VID> <port>", "rx_vlan"),
    s("dump_mempool", "dump_mempool"),
    s("pipeline load <FILE>", "pipeline"),
    s("pipeline stop", "pipeline"),
    s("trace on|add <NODE> [<N>]", "trace"),
    s("clear trace", "clear trace"),
    s("trace off [<NODE>]", "trace"),
];

/// What completion draws on besides the grammar.
pub struct Facts<'a> {
    /// Ids of the ports that exist.
    pub ports: Vec<u16>,
    /// Forwarding engine names.
    pub engines: &'a [&'a str],
}

use crate::completion::Next;
pub use crate::completion::Offer;

/// One word of a pattern.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Tok {
    /// Keywords, `|`-separated.
    Keys(&'static str),
    /// A port id.
    Port,
    /// A port id or `all`.
    PortOrAll,
    /// A forwarding engine.
    Engine,
    /// A command's first word.
    Command,
    /// Anything; the text is its name in the usage (`<N>`).
    Free(&'static str),
}

impl Tok {
    fn parse(w: &'static str) -> Tok {
        match w {
            "<port>" => Tok::Port,
            "<port|all>" => Tok::PortOrAll,
            "<engine>" => Tok::Engine,
            "<command>" => Tok::Command,
            w if w.starts_with('<') => Tok::Free(w),
            w => Tok::Keys(w),
        }
    }

    /// Whether a typed word fits here.
    fn accepts(self, w: &str, facts: &Facts<'_>) -> bool {
        match self {
            Tok::Keys(k) => k.split('|').any(|k| k == w),
            Tok::Port => w.parse::<u16>().is_ok(),
            Tok::PortOrAll => w == "all" || w.parse::<u16>().is_ok(),
            Tok::Engine => facts.engines.contains(&w),
            Tok::Command | Tok::Free(_) => true,
        }
    }

    /// The words this argument can be; `None` for a free argument.
    fn words(self, facts: &Facts<'_>) -> Option<Vec<String>> {
        let ports = || facts.ports.iter().map(u16::to_string);
        match self {
            Tok::Keys(k) => Some(k.split('|').map(str::to_string).collect()),
            Tok::Port => Some(ports().collect()),
            Tok::PortOrAll => Some(ports().chain(["all".to_string()]).collect()),
            Tok::Engine => Some(facts.engines.iter().map(|e| e.to_string()).collect()),
            Tok::Command => {
                let mut v: Vec<String> = Vec::new();
                for c in COMMANDS {
                    let w = c.words.split(' ').next().unwrap_or_default().to_string();
                    if !v.contains(&w) {
                        v.push(w);
                    }
                }
                Some(v)
            }
            Tok::Free(_) => None,
        }
    }
}

/// A pattern's forms (see [`crate::completion::forms`]).
fn forms(pattern: &'static str) -> Vec<Vec<Tok>> {
    crate::completion::forms(pattern, Tok::parse)
}

/// The documentation of a grammar line.
pub fn doc_of(syntax: &Syntax) -> Option<&'static CmdDoc> {
    COMMANDS.iter().find(|c| c.words == syntax.doc)
}

/// What Tab offers with `line` typed up to the cursor.
pub fn complete(line: &str, facts: &Facts<'_>) -> Offer {
    crate::completion::offer(
        line,
        GRAMMAR,
        |syntax| forms(syntax.pattern),
        |tok, w| tok.accepts(w, facts),
        |syntax, tok| match (tok.words(facts), tok, doc_of(syntax)) {
            (Some(words), _, _) => Next::Words(words),
            (None, Tok::Free(name), Some(d)) => Next::Usage(format!("{name}: {} ({})", d.usage, d.help)),
            _ => Next::Nothing,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testpmd::params::MODES;

    fn facts() -> Facts<'static> {
        Facts { ports: vec![0, 1], engines: MODES }
    }

    fn words(line: &str) -> Vec<String> {
        complete(line, &facts()).words
    }

    #[test]
    fn port_info_offers_ports_and_all() {
        assert_eq!(words("show port info "), ["0", "1", "all"]);
        assert_eq!(words("show port info a"), ["all"]);
        assert_eq!(complete("show port info a", &facts()).start, 15);
    }

    #[test]
    fn set_fwd_offers_the_engines_then_retry() {
        assert_eq!(words("set fwd "), MODES);
        assert_eq!(words("set fwd mac"), ["mac", "macswap"]);
        assert_eq!(words("set fwd io "), ["retry"]);
        assert!(words("set fwd nosuch ").is_empty());
    }

    #[test]
    fn first_and_second_words() {
        let first = words("");
        for w in ["start", "stop", "show", "set", "port", "clear", "mac_addr", "vlan", "help"] {
            assert!(first.contains(&w.to_string()), "{w} missing from {first:?}");
        }
        assert_eq!(words("sh"), ["show"]);
        assert_eq!(words("show port "), ["info", "summary", "stats", "xstats", "0", "1"]);
        assert_eq!(words("show port 0 "), ["rss-hash", "txq", "gro"]);
        assert_eq!(words("set promisc 1 "), ["on", "off"]);
        assert_eq!(words("set link-down "), ["port"]);
        assert_eq!(words("set link-down port "), ["0", "1"]);
        let help = words("help ");
        assert!(help.contains(&"show".to_string()) && help.contains(&"dump_mempool".to_string()), "{help:?}");
    }

    #[test]
    fn a_free_argument_shows_the_usage() {
        let o = complete("set burst ", &facts());
        assert!(o.words.is_empty());
        assert_eq!(o.usage, ["<N>: set burst N (1..=256) (packets per burst)"]);
        let o = complete("mac_addr add 0 ", &facts());
        assert_eq!(o.usage.len(), 1, "{o:?}");
        assert!(o.usage[0].starts_with("<MAC>: mac_addr add|remove PORT"), "{o:?}");
        // A complete command offers nothing more.
        assert_eq!(complete("stop ", &facts()), Offer { start: 5, ..Offer::default() });
    }

    #[test]
    fn optional_tails() {
        assert_eq!(words("start "), ["tx_first"]);
        assert_eq!(complete("start tx_first ", &facts()).usage.len(), 1);
        assert_eq!(words("show trace "), ["max"]);
        assert_eq!(words("clear fwd "), ["stats"]);
    }

    /// Every grammar line names a documented command, and every documented command
    /// has a grammar line; every grammar line's keywords are accepted by the
    /// dispatcher's own word lists (checked by running them in `tests/testpmd.rs`).
    #[test]
    fn grammar_and_docs_cover_each_other() {
        for g in GRAMMAR {
            assert!(doc_of(g).is_some(), "`{}` names no COMMANDS entry `{}`", g.pattern, g.doc);
        }
        for c in COMMANDS {
            assert!(GRAMMAR.iter().any(|g| g.doc == c.words), "`{}` has no GRAMMAR line", c.words);
        }
    }
}
