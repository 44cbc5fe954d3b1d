//! The node types a pipeline file may use: their parameters and next edges.

use ironpath_config::{Nexts, NodeSpec, ParamKind, ParamSpec, VariantSpec};

const fn p(
    name: &'static str,
    kind: ParamKind,
    required: bool,
    default: Option<&'static str>,
    doc: &'static str,
) -> ParamSpec {
    ParamSpec { name, kind, required, default, doc }
}

const PORT: ParamSpec = p("port", ParamKind::Port, true, None, "the port (a name from `ports:`)");
/// `tx_batch`'s completion policies.
const COMPLETION: &[VariantSpec] = &[
    VariantSpec { name: "immediate", arg: None },
    VariantSpec { name: "every", arg: Some((1, 65_536)) },
    VariantSpec { name: "timer_us", arg: Some((1, 10_000_000)) },
];
const QUEUE: ParamSpec =
    p("queue", ParamKind::Uint { min: 0, max: 63 }, false, Some("0"), "queue index (one node per queue)");
const MEMPOOL: ParamSpec = p(
    "mempool",
    ParamKind::Mempool,
    false,
    None,
    "pool for packets the node creates (default: the port's, else the first)",
);

const LISTEN: &[ParamSpec] = &[
    p("port", ParamKind::Uint { min: 1, max: 65535 }, true, None, "TCP port"),
    p(
        "app",
        ParamKind::Enum(&["http", "echo", "discard", "source"]),
        true,
        None,
        "application of each accepted connection",
    ),
    p("root", ParamKind::Path, false, None, "http: directory served (relative to the YAML file)"),
    p(
        "objects",
        ParamKind::Str,
        false,
        Some("/empty=0"),
        "http: in-memory objects, `/path=bytes,...` (pattern bytes; `/empty=0` is empty)",
    ),
    p(
        "bytes",
        ParamKind::Uint { min: 0, max: u64::MAX },
        false,
        Some("0"),
        "source: bytes sent per connection before closing (0: until the peer closes)",
    ),
    p(
        "backlog",
        ParamKind::Uint { min: 1, max: 1_000_000 },
        false,
        Some("1024"),
        "connections in the handshake or not yet accepted, at most",
    ),
];

const CONNECT: &[ParamSpec] = &[
    p("to", ParamKind::IpList, true, None, "the peer's address"),
    p("port", ParamKind::Uint { min: 1, max: 65535 }, true, None, "the peer's port"),
    p("app", ParamKind::Enum(&["source", "discard", "http_get"]), true, None, "what the connection does"),
    p(
        "bytes",
        ParamKind::Uint { min: 0, max: u64::MAX },
        false,
        Some("0"),
        "source: bytes to send, then close (0: until the peer closes)",
    ),
    p("path", ParamKind::Str, false, Some("/"), "http_get: the path requested"),
    p(
        "save",
        ParamKind::Path,
        false,
        None,
        "http_get: file the body is written to (`.N` appended per connection when count > 1)",
    ),
    p("count", ParamKind::Uint { min: 1, max: 100_000 }, false, Some("1"), "connections opened"),
    p(
        "requests",
        ParamKind::Uint { min: 1, max: u64::MAX },
        false,
        Some("1"),
        "http_get: requests per connection (keep-alive)",
    ),
];

/// Every built-in node type.
pub static CATALOG: &[NodeSpec] = &[
    NodeSpec {
        type_name: "port_rx",
        doc: "receive bursts from one queue of a port (polled)",
        params: &[PORT, QUEUE, p("burst", ParamKind::Uint { min: 1, max: 256 }, false, Some("32"), "packets per poll")],
        nexts: Nexts::Fixed(&["out"]),
        source: true,
        sink: false,
    },
    NodeSpec {
        type_name: "port_tx",
        doc: "send to one queue of a port; what the queue refuses is dropped and counted (tx_full)",
        params: &[
            PORT,
            QUEUE,
            p("retries", ParamKind::Uint { min: 0, max: 1024 }, false, Some("0"), "retries of a full queue before dropping"),
        ],
        nexts: Nexts::Fixed(&[]),
        source: false,
        sink: true,
    },
    NodeSpec {
        type_name: "tx_batch",
        doc: "send to one queue of a port in batches: flush at `coalesce` packets, after `flush_us`, when the lcore is idle, or on a push (SYN/FIN/PSH segments of `tcp`); reclaims completions every poll and can emulate a NIC's completion coalescing",
        params: &[
            PORT,
            QUEUE,
            p("coalesce", ParamKind::Uint { min: 1, max: 256 }, false, Some("32"), "flush when this many packets are buffered"),
            p("flush_us", ParamKind::Duration, false, Some("100us"), "flush when the oldest buffered packet has waited this long"),
            p("flush_on_idle", ParamKind::Bool, false, Some("true"), "flush when a walk of the lcore finds no work (a lone ACK leaves within one poll)"),
            p("completion", ParamKind::Variant(COMPLETION), false, Some("immediate"), "when sent packets are reported complete (freed): as soon as the driver frees them, or emulating a NIC's coalescing: every N packets (`tx-frames`) or T microseconds after the oldest (`tx-usecs`)"),
            p("retries", ParamKind::Uint { min: 0, max: 1024 }, false, Some("0"), "retries of a full queue (after reclaiming completions) before dropping"),
        ],
        nexts: Nexts::Fixed(&[]),
        source: true,
        sink: true,
    },
    NodeSpec {
        type_name: "classify",
        doc: "by ethertype and IP protocol (VLAN tags skipped); an unconnected class falls back: icmp/tcp/udp -> ipv4 or ipv6 -> other",
        params: &[],
        nexts: Nexts::Fixed(crate::classify::NEXTS),
        source: false,
        sink: false,
    },
    NodeSpec {
        type_name: "arp",
        doc: "answer ARP for our addresses; resolve the MAC of IPv4 packets sent through it (neighbour cache, held packets)",
        params: &[
            PORT,
            p("addresses", ParamKind::IpList, true, None, "our IPv4 addresses (the first is the sender of our requests)"),
            MEMPOOL,
            p("hold", ParamKind::Uint { min: 0, max: 256 }, false, Some("8"), "packets held per unresolved neighbour"),
            p("retry", ParamKind::Duration, false, Some("1s"), "time between requests for one neighbour"),
            p("max_tries", ParamKind::Uint { min: 1, max: 100 }, false, Some("3"), "requests before giving up"),
            p("max_entries", ParamKind::Uint { min: 1, max: 1_000_000 }, false, Some("1024"), "neighbour cache size"),
        ],
        nexts: Nexts::Fixed(&["out"]),
        source: true,
        sink: false,
    },
    NodeSpec {
        type_name: "icmp_echo",
        doc: "answer ICMP/ICMPv6 echo requests and IPv6 neighbour solicitations for our addresses, in place",
        params: &[
            PORT,
            p("addresses", ParamKind::IpList, true, None, "our IPv4 and IPv6 addresses"),
        ],
        nexts: Nexts::Fixed(&["out"]),
        source: false,
        sink: false,
    },
    NodeSpec {
        type_name: "macswap",
        doc: "swap source and destination MAC addresses (testpmd's macswap)",
        params: &[],
        nexts: Nexts::Fixed(&["out"]),
        source: false,
        sink: false,
    },
    NodeSpec {
        type_name: "pcap_capture",
        doc: "write the packets passing through to a pcap file (nanosecond timestamps), pass them on",
        params: &[
            p("file", ParamKind::Path, true, None, "output file (created or truncated)"),
            p("snaplen", ParamKind::Uint { min: 64, max: 262_144 }, false, Some("65535"), "bytes kept per packet"),
            p("max_packets", ParamKind::Uint { min: 0, max: u64::MAX }, false, Some("0"), "stop capturing after this many (0: no limit)"),
        ],
        nexts: Nexts::Fixed(&["out"]),
        source: false,
        sink: false,
    },
    NodeSpec {
        type_name: "rx_aggregate",
        doc: "merge TCP segments (IPv4/IPv6) into large packets: gro keeps them as an mbuf chain, lro copies payloads into one buffer; only what can be split back exactly",
        params: &[
            p("mode", ParamKind::Enum(&["gro", "lro", "off"]), false, Some("gro"), "how to merge (`off`: pass everything on, counted)"),
            p("max_bytes", ParamKind::Uint { min: 1024, max: 65535 }, false, Some("65535"), "most bytes of IP payload in an aggregate"),
            p("max_segments", ParamKind::Uint { min: 2, max: 1024 }, false, Some("64"), "most segments in an aggregate"),
            p("max_flows", ParamKind::Uint { min: 1, max: 65536 }, false, Some("64"), "flows held at once (the oldest is flushed for a new one)"),
            p("flush", ParamKind::Enum(&["burst", "timeout"]), false, Some("burst"), "flush at the end of every burst, or after `flush_us`"),
            p("flush_us", ParamKind::Duration, false, Some("100us"), "how long a flow may be held (flush: timeout)"),
            p("bad", ParamKind::Enum(&["pass", "drop"]), false, Some("pass"), "what to do with malformed or bad-checksum packets (never merged, always counted)"),
            p("lro_mempool", ParamKind::Mempool, false, None, "large buffers for lro (data_room >= the largest aggregate + headers, e.g. 65535)"),
        ],
        nexts: Nexts::Fixed(&["out"]),
        source: true,
        sink: false,
    },
    NodeSpec {
        type_name: "gso",
        doc: "split aggregated TCP packets back into segments of their MSS (headers copied, payload shared by reference)",
        params: &[
            MEMPOOL,
            p("mss", ParamKind::Uint { min: 0, max: 65535 }, false, Some("0"), "segment payload size (0: each aggregate's own, tso_segsz)"),
        ],
        nexts: Nexts::Fixed(&["out"]),
        source: false,
        sink: false,
    },
    NodeSpec {
        type_name: "impair",
        doc: "a bad link on purpose (as netem): seeded loss, delay with jitter (reordering), duplication, corruption",
        params: &[
            p("seed", ParamKind::Uint { min: 0, max: u64::MAX }, false, Some("1"), "generator seed (same seed, same decisions)"),
            p("loss", ParamKind::Str, false, Some("0%"), "probability a packet is dropped (`1%`, `0.1%` or a fraction like `0.01`)"),
            p("duplicate", ParamKind::Str, false, Some("0%"), "probability a packet is sent twice"),
            p("corrupt", ParamKind::Str, false, Some("0%"), "probability one bit (past the Ethernet header) is flipped"),
            p("delay", ParamKind::Duration, false, Some("0us"), "base delay"),
            p("jitter", ParamKind::Duration, false, Some("0us"), "each packet's delay is uniform in delay ± jitter (reorders)"),
            p("max_held", ParamKind::Uint { min: 1, max: 1_000_000 }, false, Some("65536"), "most packets waiting (beyond: dropped, counted)"),
            MEMPOOL,
        ],
        nexts: Nexts::Fixed(&["out"]),
        source: true,
        sink: false,
    },
    NodeSpec {
        type_name: "tcp",
        doc: "TCP termination: connection table, listening ports with applications (http, echo, discard, source), client connections; frames out with full checksums",
        params: &[
            PORT,
            p("addresses", ParamKind::IpList, true, None, "our IPv4 and IPv6 addresses (the first of each family opens our connections)"),
            MEMPOOL,
            p("listen", ParamKind::Records(LISTEN), false, Some("[]"), "listening ports, each with its application"),
            p("connect", ParamKind::Records(CONNECT), false, Some("[]"), "connections opened at start, each with its application"),
            p("mss", ParamKind::Uint { min: 536, max: 9000 }, false, Some("1460"), "MSS we announce and send (path MTU minus 40 for IPv4); must fit the pool's buffers"),
            p("send_buffer", ParamKind::Uint { min: 4096, max: 1 << 30 }, false, Some("1048576"), "bytes queued or unacknowledged per connection"),
            p("recv_buffer", ParamKind::Uint { min: 4096, max: 1 << 30 }, false, Some("1048576"), "largest receive window per connection (bytes of payload)"),
            p("initial_window", ParamKind::Uint { min: 1, max: 100 }, false, Some("10"), "initial congestion window, segments (RFC 6928)"),
            p("rto_min", ParamKind::Duration, false, Some("200ms"), "lower bound of the retransmission timeout"),
            p("rto_initial", ParamKind::Duration, false, Some("1s"), "retransmission timeout before an RTT sample (RFC 6298)"),
            p("ack_delay", ParamKind::Duration, false, Some("40ms"), "longest delay of an ACK (every second segment is ACKed at once; 0: never delayed)"),
            p("time_wait", ParamKind::Duration, false, Some("60s"), "TIME-WAIT length (2 x MSL)"),
            p("nagle", ParamKind::Bool, false, Some("false"), "Nagle's algorithm (off: as TCP_NODELAY, what servers set)"),
            p("timestamps", ParamKind::Bool, false, Some("true"), "offer/accept RFC 7323 timestamps"),
            p("window_scaling", ParamKind::Bool, false, Some("true"), "offer/accept RFC 7323 window scaling"),
            p("sack", ParamKind::Bool, false, Some("true"), "offer/accept SACK (blocks are sent, not used)"),
            p("max_connections", ParamKind::Uint { min: 1, max: 10_000_000 }, false, Some("65536"), "connections held at most (SYNs beyond are dropped, counted)"),
            p("seed", ParamKind::Uint { min: 0, max: u64::MAX }, false, Some("0"), "key of the initial sequence numbers (0: random per run)"),
            p("tx_inflight_limit", ParamKind::Uint { min: 0, max: 1 << 30 }, false, Some("262144"), "bytes per connection handed to TX and not yet completed (freed by the driver or the completion policy), like Linux's TCP Small Queues; the connection sends again the moment completions arrive; 0: no limit"),
        ],
        nexts: Nexts::Fixed(&["out"]),
        source: true,
        sink: false,
    },
    NodeSpec {
        type_name: "drop",
        doc: "free every packet; `show runtime` counts them by the edge they came from",
        params: &[],
        nexts: Nexts::Fixed(&[]),
        source: false,
        sink: true,
    },
    NodeSpec {
        type_name: "counter",
        doc: "count packets and bytes passing through",
        params: &[],
        nexts: Nexts::Fixed(&["out"]),
        source: false,
        sink: false,
    },
    NodeSpec {
        type_name: "source",
        doc: "generate UDP/IPv4 frames (as testpmd's txonly), at a rate and up to a count",
        params: &[
            MEMPOOL,
            p("size", ParamKind::Uint { min: 42, max: 9000 }, false, Some("60"), "frame bytes without FCS"),
            p("burst", ParamKind::Uint { min: 1, max: 256 }, false, Some("32"), "packets per poll"),
            p("flows", ParamKind::Uint { min: 1, max: 65535 }, false, Some("1"), "distinct UDP source ports"),
            p("src_mac", ParamKind::Mac, false, Some("02:00:00:00:00:01"), "Ethernet source"),
            p("dst_mac", ParamKind::Mac, false, Some("02:00:00:00:00:02"), "Ethernet destination"),
            p("src_ip", ParamKind::Ipv4, false, Some("198.18.0.1"), "IPv4 source"),
            p("dst_ip", ParamKind::Ipv4, false, Some("198.18.0.2"), "IPv4 destination"),
            p("rate_pps", ParamKind::Uint { min: 0, max: 1_000_000_000 }, false, Some("0"), "packets per second (0: unlimited)"),
            p("count", ParamKind::Uint { min: 0, max: u64::MAX }, false, Some("0"), "packets in all (0: unlimited)"),
        ],
        nexts: Nexts::Fixed(&["out"]),
        source: true,
        sink: false,
    },
];
