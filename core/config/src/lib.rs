//! ironpath-config: the YAML pipeline schema and its validation.
//!
//! A pipeline file declares mempools, ports, lcores, graph nodes placed on lcores, and the edges
//! between nodes (`docs/pipeline-yaml.md` is the reference). [`parse_str`] and [`load_file`] turn
//! it into a [`Pipeline`], or into a [`ConfigErrors`] that lists **every** problem, each with
//! `file:line:column` and what would be accepted:
//!
//! ```text
//! pipe.yaml:7:5: error: unknown key `rx_queue` in port `p0`; accepted: name, driver, args, mempool, rx_queues, tx_queues, rx_desc, tx_desc, promisc, mtu (did you mean `rx_queues`?)
//! pipe.yaml:15:12: error: `lcore` in node `rx0`: lcore 3 is not defined; defined lcores: 0, 1
//! ```
//!
//! # Two layers
//!
//! 1. [`tree::parse`]: the YAML text becomes a generic tree ([`tree::Node`]) in which every value
//!    and every key carries its position, and scalars keep their YAML type (`1` is an integer,
//!    `"1"` a string). Bad YAML is one error at the parser's position.
//! 2. Validation walks that tree by hand, field by field, against the schema and the caller's
//!    [`Catalog`] of node types, and keeps going after an error. Names are collected even from
//!    entries with other errors, so one mistake does not cascade into many.
//!
//! # Why serde-saphyr
//!
//! `serde_yaml` is archived upstream. Its forks (`serde_yaml_ng`, `serde_norway`) keep its design:
//! deserializing into typed structs stops at the first error, and only that error has a location;
//! a value that deserializes fine but is wrong for us (a dangling name, a lcore that does not
//! exist) has no location at all, so we could not point at it. `serde-saphyr` is maintained, parses
//! with the saphyr/granit parser without panicking on any input, enforces a budget (depth, events,
//! aliases) against hostile files, and its `Spanned<T>` yields the line and column of any value.
//! Wrapping every node of a generic tree in `Spanned` gives us positions everywhere; validating
//! that tree ourselves gives us every error instead of the first.
//!
//! The crate does no I/O except [`load_file`] reading the file, and has no unsafe code.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod catalog;
mod choice;
mod error;
mod model;
mod params;
mod suggest;
#[cfg(feature = "test-utils")]
pub mod testing;
pub mod tree;
mod validate;

use std::path::Path;

pub use catalog::{Catalog, CheckFn, Nexts, NodeSpec, ParamKind, ParamSpec, QueueUse, VariantSpec};
pub use choice::Choice;
pub use error::{ConfigError, ConfigErrors, Loc};
pub use model::{EdgeCfg, HugePages, LcoreCfg, MempoolCfg, NodeCfg, Pipeline, PortCfg, DEFAULT_MEMPOOL, RX_MODES};
pub use params::{ParamValue, Params};
pub use suggest::closest;
pub use validate::parse_mac;

/// Parses and validates a pipeline given as text.
///
/// `file` names the text in errors and is the base of relative `Path` parameters: they are
/// resolved against `file`'s directory, or left relative (to the current directory) when `file`
/// has no directory part. Nothing is read from disk.
pub fn parse_str(text: &str, file: &Path, catalog: &Catalog<'_>) -> Result<Pipeline, ConfigErrors> {
    let root = tree::parse(text).map_err(|e| ConfigErrors::new(file, vec![e]))?;
    validate::pipeline(&root, file, catalog).map_err(|errors| ConfigErrors::new(file, errors))
}

/// Reads `path` and [`parse_str`]s it. A file that cannot be read (or is not UTF-8) is one error
/// without a position, displayed as `{file}: error: cannot read: {reason}`.
pub fn load_file(path: &Path, catalog: &Catalog<'_>) -> Result<Pipeline, ConfigErrors> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigErrors::single(path, Loc::default(), format!("cannot read: {e}")))?;
    parse_str(&text, path, catalog)
}
