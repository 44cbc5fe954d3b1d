//! Shared fixtures (feature `test-utils`): a small node catalog for tests and the fuzz target.

use std::sync::LazyLock;

use crate::catalog::{Catalog, Nexts, NodeSpec, ParamKind, ParamSpec, QueueUse};

const PORT: ParamSpec = ParamSpec::new("port", ParamKind::Port).required().doc("The port to use.");
const QUEUE: ParamSpec =
    ParamSpec::new("queue", ParamKind::Uint { min: 0, max: 63 }).default("0").doc("The queue of the port.");

const fn node(
    type_name: &'static str,
    params: &'static [ParamSpec],
    nexts: &'static [&'static str],
    source: bool,
) -> NodeSpec {
    // The mock's port_rx/port_tx take queues as the real ones do.
    let queue = match type_name.as_bytes() {
        b"port_rx" => QueueUse::Rx,
        b"port_tx" => QueueUse::Tx,
        _ => QueueUse::None,
    };
    let ends_loops = matches!(type_name.as_bytes(), b"server");
    NodeSpec { type_name, params, nexts: Nexts::Fixed(nexts), source, queue, ends_loops, ..NodeSpec::DEFAULT }
}

/// The forms of `capture`'s `completion` (a [`ParamKind::Variant`]).
const COMPLETION: &[crate::catalog::VariantSpec] = &[
    crate::catalog::VariantSpec { name: "immediate", arg: None },
    crate::catalog::VariantSpec { name: "every", arg: Some((1, 256)) },
];

/// The fields of each record of `server`'s `listen`.
const LISTEN: &[ParamSpec] = &[
    ParamSpec::new("port", ParamKind::Uint { min: 1, max: 65535 }).required().doc("TCP port."),
    ParamSpec::new("app", ParamKind::Enum(&["http", "echo", "discard"])).required().doc("What answers."),
    ParamSpec::new("root", ParamKind::Path),
    ParamSpec::new("backlog", ParamKind::Uint { min: 1, max: 4096 }).default("128"),
    ParamSpec::new("pool", ParamKind::Mempool),
];

static NODES: &[NodeSpec] = &[
    node(
        "port_rx",
        &[PORT, QUEUE, ParamSpec::new("burst", ParamKind::Uint { min: 1, max: 256 }).default("32")],
        &["out"],
        true,
    ),
    node("port_tx", &[PORT, QUEUE], &[], false),
    node("classify", &[], &["arp", "ipv4", "ipv6", "other"], false),
    node("macswap", &[], &["out"], false),
    node(
        "arp",
        &[ParamSpec::new("addresses", ParamKind::IpList).required(), ParamSpec::new("mac", ParamKind::Mac)],
        &["out"],
        false,
    ),
    node("drop", &[], &[], false),
    // Every other parameter kind, for tests.
    node(
        "capture",
        &[
            ParamSpec::new("path", ParamKind::Path).required(),
            ParamSpec::new("mode", ParamKind::Enum(&["file", "ring"])).default("file"),
            ParamSpec::new("flush", ParamKind::Duration).default("10ms"),
            ParamSpec::new("enabled", ParamKind::Bool).default("true"),
            ParamSpec::new("label", ParamKind::Str),
            ParamSpec::new("gw", ParamKind::Ipv4),
            ParamSpec::new("gw6", ParamKind::Ipv6),
            ParamSpec::new("pool", ParamKind::Mempool),
            ParamSpec::new("completion", ParamKind::Variant(COMPLETION)).default("immediate"),
        ],
        &["out"],
        false,
    ),
    // A list of records.
    node("server", &[ParamSpec::new("listen", ParamKind::Records(LISTEN)).default("[]")], &["out"], false),
    // One next edge per port.
    NodeSpec { type_name: "bridge", nexts: Nexts::Ports, ..NodeSpec::DEFAULT },
];

static DRIVERS: LazyLock<Vec<String>> =
    LazyLock::new(|| ["net_null", "net_ring", "net_pcap", "net_af_packet", "net_tap"].map(str::to_owned).to_vec());

/// The mock catalog: node types `port_rx` {port, queue 0..=63 = 0, burst 1..=256 = 32; next out},
/// `port_tx` {port, queue; sink}, `classify` {nexts arp, ipv4, ipv6, other}, `macswap` {next out},
/// `arp` {addresses (required IP list), mac; next out}, `drop` {sink}, and `capture` {path
/// (required), mode file|ring, flush 10ms, enabled true, label, gw, gw6, pool; next out} which
/// uses every other scalar parameter kind, and `server` {listen: a list of records {port 1..=65535
/// (required), app http|echo|discard (required), root (path), backlog 1..=4096 = 128, pool
/// (mempool)}, default `[]`; next out}, and `bridge` {no params; one next per port}. Drivers: net_null, net_ring, net_pcap, net_af_packet, net_tap.
pub fn mock_catalog() -> Catalog<'static> {
    Catalog { nodes: NODES, drivers: Some(DRIVERS.as_slice()) }
}
