//! What the caller knows that the schema does not: node types and PMD driver names.
//!
//! `core/nodes` defines the real catalog; tests use [`crate::testing::mock_catalog`]
//! (feature `test-utils`).

/// The node types (and, optionally, the PMD drivers) a pipeline may use.
#[derive(Debug, Clone, Copy)]
pub struct Catalog<'a> {
    /// Every node type, in the order they are listed in messages.
    pub nodes: &'a [NodeSpec],
    /// The driver names a port may use; `None` accepts any name (the drivers are loaded later).
    pub drivers: Option<&'a [String]>,
}

impl Catalog<'_> {
    /// The node type named `type_name`.
    pub fn node(&self, type_name: &str) -> Option<&NodeSpec> {
        self.nodes.iter().find(|n| n.type_name == type_name)
    }
}

/// A node type: its parameters and its next edges. A spec names what differs from
/// [`NodeSpec::DEFAULT`]:
///
/// ```
/// # use ironpath_config::{Nexts, NodeSpec, ParamKind, ParamSpec};
/// const SPEC: NodeSpec = NodeSpec {
///     type_name: "sample",
///     doc: "pass one packet in `every`",
///     params: &[ParamSpec::new("every", ParamKind::Uint { min: 1, max: 100 }).default("10").doc("1 in this many")],
///     nexts: Nexts::Fixed(&["out"]),
///     ..NodeSpec::DEFAULT
/// };
/// ```
#[derive(Debug, Clone, Copy)]
pub struct NodeSpec {
    /// The value of `type:` in YAML.
    pub type_name: &'static str,
    /// One line for `docs/pipeline-yaml.md` and the shell.
    pub doc: &'static str,
    /// The keys accepted under `params:`.
    pub params: &'static [ParamSpec],
    /// The next edges the node may send packets to.
    pub nexts: Nexts,
    /// Polled by its lcore without input (e.g. port rx).
    pub source: bool,
    /// The port queue it takes (its `port` and `queue` params): one node per queue.
    pub queue: QueueUse,
    /// Packets that reach it end there (consumed, answered with new packets), so a
    /// loop of edges through it does not circulate packets forever (`tcp`; `vxlan`,
    /// whose packets leave decapsulated or encapsulated, except on the next edges
    /// of [`NodeSpec::loop_passes`]).
    pub ends_loops: bool,
    /// The next edges of a node that [ends loops](NodeSpec::ends_loops) on which it
    /// still sends packets it was given unchanged (`vxlan`'s `other`): a loop through
    /// one of them is a loop.
    pub loop_passes: &'static [&'static str],
    /// Checks the parameters beyond their kinds (a prefix written as a string, rules
    /// that must fit together), so that `check` refuses what the node's constructor
    /// would; the error's position (the offending value's, else the node's) and text.
    pub check: Option<CheckFn>,
}

/// A node type's own check of its validated parameters ([`NodeSpec::check`]).
pub type CheckFn = fn(&crate::Params) -> Result<(), (Option<crate::Loc>, String)>;

/// Which queue of its `port` a node takes, from its `queue` param.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueUse {
    /// None.
    None,
    /// An RX queue.
    Rx,
    /// A TX queue.
    Tx,
}

impl NodeSpec {
    /// What a spec does not name: no name or doc (every spec gives both), no
    /// parameters, no next edges, not polled without input, no port queue, does not
    /// end loops, no check beyond the parameters' kinds.
    pub const DEFAULT: NodeSpec = NodeSpec {
        type_name: "",
        doc: "",
        params: &[],
        nexts: Nexts::Fixed(&[]),
        source: false,
        queue: QueueUse::None,
        ends_loops: false,
        loop_passes: &[],
        check: None,
    };

    /// The spec of parameter `name`.
    pub fn param(&self, name: &str) -> Option<&ParamSpec> {
        self.params.iter().find(|p| p.name == name)
    }
}

/// The next edges a node type declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nexts {
    /// A fixed list of names (empty for sinks); the node sends packets to them by index.
    Fixed(&'static [&'static str]),
    /// One next edge per port of the file, named after the port (`next: left`); the
    /// node's next edges are those its edges connect, in the file's order (a bridge).
    Ports,
    /// As [`Nexts::Ports`], and these names too (a router's `local`): a `next` that
    /// is one of them is that edge, any other names a port.
    PortsAnd(&'static [&'static str]),
}

impl Nexts {
    /// The fixed names, in index order (none for [`Nexts::Ports`]).
    pub fn names(&self) -> &'static [&'static str] {
        match self {
            Nexts::Fixed(names) => names,
            Nexts::Ports | Nexts::PortsAnd(_) => &[],
        }
    }

    /// One next edge per port (named after it), whatever else.
    pub fn per_port(&self) -> bool {
        matches!(self, Nexts::Ports | Nexts::PortsAnd(_))
    }

    /// The names a per-port node accepts besides its ports.
    pub fn extra(&self) -> &'static [&'static str] {
        match self {
            Nexts::PortsAnd(names) => names,
            _ => &[],
        }
    }
}

/// One parameter of a node type, or one field of a [`ParamKind::Records`] parameter,
/// written as [`ParamSpec::new`] and what differs from its defaults (optional, no
/// default value, no doc):
///
/// ```
/// # use ironpath_config::{ParamKind, ParamSpec};
/// const BURST: ParamSpec = ParamSpec::new("burst", ParamKind::Uint { min: 1, max: 256 }).default("32").doc("packets per poll");
/// const PORT: ParamSpec = ParamSpec::new("port", ParamKind::Port).required().doc("the port");
/// assert!(PORT.required && BURST.default == Some("32"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamSpec {
    /// The key under `params:` (or in each record).
    pub name: &'static str,
    /// What values are accepted.
    pub kind: ParamKind,
    /// Whether the key must be given (a required parameter has no default).
    pub required: bool,
    /// The value used when the key is absent, written as in YAML (`"32"`, `"true"`, `"10ms"`),
    /// parsed and checked with the same rules as a value in the file.
    pub default: Option<&'static str>,
    /// One line for the documentation.
    pub doc: &'static str,
}

impl ParamSpec {
    /// Parameter `name` accepting `kind`: optional, without a default value or doc.
    pub const fn new(name: &'static str, kind: ParamKind) -> ParamSpec {
        ParamSpec { name, kind, required: false, default: None, doc: "" }
    }

    /// The key must be given (a required parameter has no default: refused at compile
    /// time in a `const`).
    pub const fn required(self) -> ParamSpec {
        assert!(self.default.is_none(), "a required parameter has no default");
        ParamSpec { required: true, ..self }
    }

    /// The value used when the key is absent, written as in YAML (`"32"`, `"10ms"`).
    pub const fn default(self, value: &'static str) -> ParamSpec {
        assert!(!self.required, "a required parameter has no default");
        ParamSpec { default: Some(value), ..self }
    }

    /// Its line of documentation.
    pub const fn doc(self, doc: &'static str) -> ParamSpec {
        ParamSpec { doc, ..self }
    }
}

/// The accepted values of a parameter, and the [`crate::ParamValue`] each one becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// An unsigned integer in `min..=max`.
    Uint {
        /// Smallest accepted value.
        min: u64,
        /// Largest accepted value.
        max: u64,
    },
    /// `true` or `false`.
    Bool,
    /// Any string.
    Str,
    /// One of these strings.
    Enum(&'static [&'static str]),
    /// An Ethernet address `aa:bb:cc:dd:ee:ff` (`-` also accepted as separator).
    Mac,
    /// An IPv4 address.
    Ipv4,
    /// An IPv6 address.
    Ipv6,
    /// A non-empty list of IPv4/IPv6 addresses, or a single one.
    IpList,
    /// A file path; a relative one is resolved against the YAML file's directory.
    Path,
    /// The name of a port defined in this file.
    Port,
    /// The name of a mempool defined in this file (or the implicit `default`).
    Mempool,
    /// The name of a node of this type in this file (a `bond_tx`'s `bond`); each
    /// such node is named by at most one node of the referring type.
    Node(&'static str),
    /// `"10ms"`, `"5us"`, `"1s"`, or an integer of microseconds.
    Duration,
    /// A list of mappings, each with these fields (required ones, defaults filled in like node
    /// params). The list may be empty; a default for the parameter itself may be `"[]"`.
    Records(&'static [ParamSpec]),
    /// One of several forms: a bare word (a variant without argument, `immediate`) or a
    /// map of one key to an unsigned integer (`{every: 16}`), as serde writes enums.
    Variant(&'static [VariantSpec]),
}

/// One form of a [`ParamKind::Variant`] parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VariantSpec {
    /// The word, or the map's key.
    pub name: &'static str,
    /// `None`: written as the bare word; `Some((min, max))`: written as `{name: N}`
    /// with `N` in `min..=max`.
    pub arg: Option<(u64, u64)>,
}

impl VariantSpec {
    /// How it is written: `immediate`, `{every: 1..=256}`.
    pub fn describe(&self) -> String {
        match self.arg {
            None => self.name.to_owned(),
            Some((min, max)) => format!("{{{}: {min}..={max}}}", self.name),
        }
    }
}

impl ParamKind {
    /// What is accepted, in words, for messages and documentation.
    pub fn describe(&self) -> String {
        match self {
            ParamKind::Uint { min, max } => format!("an unsigned integer in {min}..={max}"),
            ParamKind::Bool => "a boolean (true or false)".to_owned(),
            ParamKind::Str => "a string".to_owned(),
            ParamKind::Enum(values) => format!("one of: {}", values.join(", ")),
            ParamKind::Mac => "an Ethernet address (aa:bb:cc:dd:ee:ff)".to_owned(),
            ParamKind::Ipv4 => "an IPv4 address".to_owned(),
            ParamKind::Ipv6 => "an IPv6 address".to_owned(),
            ParamKind::IpList => "an IP address or a list of IP addresses".to_owned(),
            ParamKind::Path => "a file path".to_owned(),
            ParamKind::Port => "the name of a port".to_owned(),
            ParamKind::Mempool => "the name of a mempool".to_owned(),
            ParamKind::Node(t) => format!("the name of a `{t}` node"),
            ParamKind::Duration => "a duration (10ms, 5us, 1s, or an integer of microseconds)".to_owned(),
            ParamKind::Records(fields) => {
                let names: Vec<&str> = fields.iter().map(|f| f.name).collect();
                format!("a list of maps with keys: {}", names.join(", "))
            }
            ParamKind::Variant(forms) => {
                let all: Vec<String> = forms.iter().map(VariantSpec::describe).collect();
                format!("one of: {}", all.join(", "))
            }
        }
    }
}
