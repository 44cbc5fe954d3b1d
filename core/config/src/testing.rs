//! Shared fixtures (feature `test-utils`): a small node catalog for tests and the fuzz target.

use std::sync::LazyLock;

use crate::catalog::{Catalog, Nexts, NodeSpec, ParamKind, ParamSpec, QueueUse};

const PORT: ParamSpec =
    ParamSpec { name: "port", kind: ParamKind::Port, required: true, default: None, doc: "The port to use." };
const QUEUE: ParamSpec = ParamSpec {
    name: "queue",
    kind: ParamKind::Uint { min: 0, max: 63 },
    required: false,
    default: Some("0"),
    doc: "The queue of the port.",
};

const fn param(name: &'static str, kind: ParamKind, default: Option<&'static str>) -> ParamSpec {
    ParamSpec { name, kind, required: false, default, doc: "" }
}

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
    NodeSpec {
        type_name,
        doc: "",
        params,
        nexts: Nexts::Fixed(nexts),
        source,
        sink: nexts.is_empty(),
        queue,
        ends_loops,
        check: None,
    }
}

/// The forms of `capture`'s `completion` (a [`ParamKind::Variant`]).
const COMPLETION: &[crate::catalog::VariantSpec] = &[
    crate::catalog::VariantSpec { name: "immediate", arg: None },
    crate::catalog::VariantSpec { name: "every", arg: Some((1, 256)) },
];

/// The fields of each record of `server`'s `listen`.
const LISTEN: &[ParamSpec] = &[
    ParamSpec {
        name: "port",
        kind: ParamKind::Uint { min: 1, max: 65535 },
        required: true,
        default: None,
        doc: "TCP port.",
    },
    ParamSpec {
        name: "app",
        kind: ParamKind::Enum(&["http", "echo", "discard"]),
        required: true,
        default: None,
        doc: "What answers.",
    },
    param("root", ParamKind::Path, None),
    param("backlog", ParamKind::Uint { min: 1, max: 4096 }, Some("128")),
    param("pool", ParamKind::Mempool, None),
];

static NODES: &[NodeSpec] = &[
    node("port_rx", &[PORT, QUEUE, param("burst", ParamKind::Uint { min: 1, max: 256 }, Some("32"))], &["out"], true),
    node("port_tx", &[PORT, QUEUE], &[], false),
    node("classify", &[], &["arp", "ipv4", "ipv6", "other"], false),
    node("macswap", &[], &["out"], false),
    node(
        "arp",
        &[
            ParamSpec { name: "addresses", kind: ParamKind::IpList, required: true, default: None, doc: "" },
            param("mac", ParamKind::Mac, None),
        ],
        &["out"],
        false,
    ),
    node("drop", &[], &[], false),
    // Every other parameter kind, for tests.
    node(
        "capture",
        &[
            ParamSpec { name: "path", kind: ParamKind::Path, required: true, default: None, doc: "" },
            param("mode", ParamKind::Enum(&["file", "ring"]), Some("file")),
            param("flush", ParamKind::Duration, Some("10ms")),
            param("enabled", ParamKind::Bool, Some("true")),
            param("label", ParamKind::Str, None),
            param("gw", ParamKind::Ipv4, None),
            param("gw6", ParamKind::Ipv6, None),
            param("pool", ParamKind::Mempool, None),
            param("completion", ParamKind::Variant(COMPLETION), Some("immediate")),
        ],
        &["out"],
        false,
    ),
    // A list of records.
    node("server", &[param("listen", ParamKind::Records(LISTEN), Some("[]"))], &["out"], false),
    // One next edge per port.
    NodeSpec {
        type_name: "bridge",
        doc: "",
        params: &[],
        nexts: Nexts::Ports,
        source: false,
        sink: false,
        queue: QueueUse::None,
        ends_loops: false,
        check: None,
    },
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
