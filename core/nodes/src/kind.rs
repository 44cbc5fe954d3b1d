//! What a node kind is: one value ([`NodeKind`]) holding its catalog entry
//! (parameters with their defaults, next edges, how it is scheduled) and its
//! constructor. Each kind's module defines its value; `lib.rs` lists them once.
//!
//! A constructor reads parameters from the validated configuration, in which
//! `core/config` has filled in every default from the [`ParamSpec`]s: so a
//! default is written once, in the spec, and the constructor never repeats it.

use ironpath_config::{Choice, NodeCfg, NodeSpec, ParamKind, ParamSpec, Params};
use ironpath_graph::Node;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use crate::Env;

/// A node kind: its catalog entry and its constructor.
#[derive(Clone, Copy, Debug)]
pub struct NodeKind {
    /// What `core/config` checks a node of this kind against, and what
    /// `docs/pipeline-yaml.md` is generated from.
    pub spec: NodeSpec,
    /// A node from its validated configuration and what the application provides.
    pub build: BuildFn,
}

/// A node kind's constructor.
pub type BuildFn = fn(&Build<'_>, &mut dyn Env) -> Result<Box<dyn Node>, NodeError>;

/// What a constructor gets: the node's configuration and its connected next edges.
pub struct Build<'a> {
    /// The node as validated (defaults filled in).
    pub cfg: &'a NodeCfg,
    /// The names of its next edges that lead somewhere.
    pub connected: &'a [&'a str],
}

impl<'a> Build<'a> {
    /// The node's parameters, read as their spec says.
    pub fn params(&self) -> Values<'a> {
        Values(&self.cfg.params)
    }
}

/// Why a node could not be built.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The node type is not in the registry.
    #[error("unknown node type `{0}`")]
    UnknownType(String),
    /// A parameter with a default or marked required has no value: the
    /// configuration did not come through `core/config`'s validation.
    #[error("parameter `{0}` has no value (the configuration was not validated against the catalog)")]
    Missing(&'static str),
    /// A parameter's value is accepted by its kind but not by the node.
    #[error("`{param}`: {reason}")]
    Param {
        /// The parameter.
        param: &'static str,
        /// What is wrong and what is accepted.
        reason: String,
    },
    /// The application could not provide a queue, a MAC or a pool.
    #[error("{0}")]
    Env(String),
    /// A file could not be created.
    #[error("cannot create `{}`: {source}", path.display())]
    Create {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The kernel's random source failed.
    #[error("cannot read random bytes for the node's secrets and hash keys (getrandom): {0}")]
    Random(std::io::Error),
    /// The node refused its settings as a whole (they do not fit together).
    #[error("{0}")]
    Refused(String),
}

impl From<String> for NodeError {
    /// An [`Env`] error.
    fn from(e: String) -> Self {
        NodeError::Env(e)
    }
}

/// The parameters of a node (or the fields of one record), each read by the
/// getter of its [`ParamKind`]. A parameter with a default or a required one is
/// always there after validation: its getter returns [`NodeError::Missing`]
/// otherwise, never a value of its own. Optional parameters without a default are
/// read through [`Values::raw`].
#[derive(Clone, Copy)]
pub struct Values<'a>(pub &'a Params);

macro_rules! required {
    ($($(#[$doc:meta])* $fn:ident -> $ty:ty;)*) => {
        $(
            $(#[$doc])*
            pub fn $fn(&self, name: &'static str) -> Result<$ty, NodeError> {
                self.0.$fn(name).ok_or(NodeError::Missing(name))
            }
        )*
    };
}

impl<'a> Values<'a> {
    /// The underlying parameters (for optional ones without default: `None` when absent).
    pub fn raw(&self) -> &'a Params {
        self.0
    }

    required! {
        /// An unsigned integer.
        uint -> u64;
        /// A boolean.
        bool -> bool;
        /// A string.
        str -> &'a str;
        /// An Ethernet address.
        mac -> [u8; 6];
        /// An IPv4 address.
        ipv4 -> Ipv4Addr;
        /// A list of IP addresses.
        ip_list -> &'a [IpAddr];
        /// A file path.
        path -> &'a Path;
        /// A port name.
        port -> &'a str;
        /// A duration, in microseconds.
        duration_us -> u64;
        /// A list of records.
        records -> &'a [Params];
    }

    /// An unsigned integer that the spec bounds to fit `T`.
    pub fn int<T: TryFrom<u64>>(&self, name: &'static str) -> Result<T, NodeError> {
        let v = self.uint(name)?;
        T::try_from(v).map_err(|_| NodeError::Param { param: name, reason: format!("{v} is out of range") })
    }

    /// A duration in TSC ticks at `hz` ticks per second (the one conversion of
    /// microseconds to ticks every node uses).
    pub fn tsc(&self, name: &'static str, hz: u64) -> Result<u64, NodeError> {
        Ok(ironpath_eal::txbatch::us_to_tsc(self.duration_us(name)?, hz))
    }

    /// A duration; zero is `None` (the convention of "0: never" parameters).
    pub fn nonzero_duration(&self, name: &'static str) -> Result<Option<std::time::Duration>, NodeError> {
        let us = self.duration_us(name)?;
        Ok((us != 0).then(|| std::time::Duration::from_micros(us)))
    }

    /// The enum variant of a `ParamKind::Enum(T::NAMES)` parameter.
    pub fn choice<T: Choice>(&self, name: &'static str) -> Result<T, NodeError> {
        self.0.choice(name).ok_or(NodeError::Missing(name))
    }

    /// An optional enum parameter without default.
    pub fn opt_choice<T: Choice>(&self, name: &'static str) -> Option<T> {
        self.0.choice(name)
    }
}

/// A kind's `check` from its settings' constructor: what the constructor refuses is
/// refused by `check` too, at the parameter it names.
pub fn refused_at<T>(p: &Params, settings: Result<T, NodeError>) -> Result<(), (Option<ironpath_config::Loc>, String)> {
    settings.map(drop).map_err(|e| match e {
        NodeError::Param { param, .. } => (p.loc(param), e.to_string()),
        _ => (None, e.to_string()),
    })
}

/// `port`: the port a node uses.
pub const PORT: ParamSpec = ParamSpec::new("port", ParamKind::Port).required().doc("the port (a name from `ports:`)");
/// `queue`: the port queue a node takes.
pub const QUEUE: ParamSpec =
    ParamSpec::new("queue", ParamKind::Uint { min: 0, max: 63 }).default("0").doc("queue index (one node per queue)");
/// `mempool`: where a node's own packets come from.
pub const MEMPOOL: ParamSpec = ParamSpec::new("mempool", ParamKind::Mempool)
    .doc("pool for packets the node creates (default: the port's, else the first)");
