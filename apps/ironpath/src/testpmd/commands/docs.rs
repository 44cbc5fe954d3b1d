//! Every command's words, usage and help (its syntax for completion is in `complete`).

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
        words: "set rx-mode",
        usage: "set rx-mode poll|adaptive|interrupt",
        help: "how forwarding lcores wait when their queues stay empty: poll always, sleep after 500 us idle on the queues' wake-up sources (adaptive, the default; a queue without one keeps its lcore polling), or sleep at once (interrupt); shown by show fwd stats",
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
        usage: "trace on|add NODE [N] | trace off [NODE]",
        help: "record the next N (default 50, at most 1000) packets a pipeline node handles, headers decoded",
    },
    CmdDoc { words: "clear trace", usage: "clear trace", help: "stop every trace and drop its records" },
    CmdDoc {
        words: "show trace",
        usage: "show trace [max N]",
        help: "print (the first N of) the trace records and clear them",
    },
    CmdDoc {
        words: "ip route",
        usage: "ip route add|replace PREFIX via ADDR [port NAME] | PREFIX port NAME | PREFIX blackhole|unreachable|prohibit; ip route del PREFIX",
        help: "change the pipeline router's routes while it runs (add `node NAME` with several routers)",
    },
    CmdDoc {
        words: "ip neighbor",
        usage: "ip neighbor add ADDR lladdr MAC port NAME | ip neighbor del ADDR port NAME",
        help: "add or remove a pipeline router's neighbour entry",
    },
    CmdDoc {
        words: "acl rule",
        usage: "acl rule add [at N] permit|deny|count [src P] [dst P] [proto X] [sport X] [dport X] | acl rule replace N ... | acl rule del N",
        help: "change the pipeline acl's rules while it runs (the rule set swapped whole)",
    },
    CmdDoc {
        words: "bridge mac",
        usage: "bridge mac add MAC port NAME [vlan VID] | bridge mac del MAC [vlan VID] | bridge mac flush [port NAME]",
        help: "change the pipeline bridge's MAC table",
    },
    CmdDoc {
        words: "show ip route",
        usage: "show ip route | show acl | show bridge mac",
        help: "the pipeline router's routes, the acl's rules, the bridge's MAC table",
    },
    CmdDoc { words: "help", usage: "help [COMMAND]", help: "list commands, or one command's usage" },
];
