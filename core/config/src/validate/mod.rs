//! Layer 2: the [`Node`] tree to a [`Pipeline`], collecting every error instead of stopping.
//!
//! Each section returns what it could validate plus the names it saw (even those of entries with
//! other errors), so references are checked against what the user meant and one mistake does not
//! cascade into a page of "unknown name" errors.

mod graph;
mod param;
pub use param::parse_mac;
mod resources;
mod wiring;

use std::collections::HashMap;
use std::path::Path;

use crate::catalog::Catalog;
use crate::error::{ConfigError, Loc};
use crate::model::Pipeline;
use crate::suggest::{did_you_mean, list, show};
use crate::tree::{Key, Node, NodeKind};

const TOP_KEYS: &[&str] = &["name", "description", "mempools", "ports", "lcores", "nodes", "edges"];

/// Validates a parsed file. `file` locates relative paths in node parameters.
pub(crate) fn pipeline(root: &Node, file: &Path, catalog: &Catalog<'_>) -> Result<Pipeline, Vec<ConfigError>> {
    let mut e = Errors::default();
    if root.kind == NodeKind::Null {
        e.push(Loc::new(1, 1), "the file is empty; a pipeline needs at least `lcores` and `nodes`");
        return Err(e.0);
    }
    let Some(top) = Fields::of(&mut e, root, "the top level") else {
        return Err(e.0);
    };
    top.check_keys(&mut e, "at the top level", TOP_KEYS);
    let name = top.get("name").and_then(|n| string(&mut e, n, "`name`")).map(str::to_owned);
    let description = top.get("description").and_then(|n| string(&mut e, n, "`description`")).map(str::to_owned);

    let (mempools, pool_names) = resources::mempools(&mut e, top.get("mempools"));
    let (ports, port_names) = resources::ports(&mut e, top.get("ports"), &pool_names, catalog);
    let (lcores, lcore_ids) = resources::lcores(&mut e, &top, "lcores");
    let env = param::Env { base_dir: base_dir(file), ports: &port_names, mempools: &pool_names };
    let (nodes, node_names) = graph::nodes(&mut e, &top, catalog, &lcore_ids, &env);
    let edges = graph::edges(&mut e, top.get("edges"), &node_names, &port_names);
    // Checks across entries, once every entry is valid (a duplicate name would
    // make loops of its own).
    if e.0.is_empty() {
        wiring::queues(&mut e, &ports, &nodes, catalog);
        wiring::references(&mut e, &nodes, catalog);
        wiring::loops(&mut e, &nodes, &edges, catalog);
    }

    if e.0.is_empty() {
        Ok(Pipeline { file: file.to_owned(), name, description, mempools, ports, lcores, nodes, edges })
    } else {
        Err(e.finish())
    }
}

/// Errors kept per file. A hostile file could otherwise have hundreds of thousands, each costing a
/// "did you mean" search; nobody reads past the first screens anyway.
const MAX_ERRORS: usize = 200;

/// The directory relative paths are resolved against: the file's, or none (the current directory)
/// when the file is named without a directory.
fn base_dir(file: &Path) -> Option<&Path> {
    file.parent().filter(|p| !p.as_os_str().is_empty())
}

/// The errors found so far (at most [`MAX_ERRORS`]), and whether some were dropped.
#[derive(Default)]
pub(crate) struct Errors(pub(crate) Vec<ConfigError>, bool);

impl Errors {
    pub(crate) fn push(&mut self, loc: Loc, message: impl Into<String>) {
        self.push_with(loc, || message.into());
    }

    /// Adds the error `message()`, computed only while errors are still kept.
    pub(crate) fn push_with(&mut self, loc: Loc, message: impl FnOnce() -> String) {
        if self.0.len() < MAX_ERRORS {
            self.0.push(ConfigError::new(loc, message()));
        } else {
            self.1 = true;
        }
    }

    /// The errors, with a note (without position, so printed first) if some were dropped.
    fn finish(mut self) -> Vec<ConfigError> {
        if self.1 {
            self.0.push(ConfigError::new(
                Loc::default(),
                format!("too many errors: only the first {MAX_ERRORS} found are listed"),
            ));
        }
        self.0
    }

    /// "{what}: expected {expected}, found {the node's type}", with a hint when quoting would help.
    pub(crate) fn wrong_type(&mut self, node: &Node, what: &str, expected: &str) {
        let hint = match (&node.kind, expected == "a string") {
            (NodeKind::Int(_) | NodeKind::Float(_) | NodeKind::Bool(_), true) => " (quote it to make it a string)",
            _ => "",
        };
        self.push(node.loc, format!("{what}: expected {expected}, found {}{hint}", node.kind.describe()));
    }
}

/// The entries of a YAML map, with the map's position.
pub(crate) struct Fields<'n> {
    pub(crate) loc: Loc,
    entries: &'n [(Key, Node)],
}

impl<'n> Fields<'n> {
    /// `node` as a map, or a wrong-type error naming `what`.
    pub(crate) fn of(e: &mut Errors, node: &'n Node, what: &str) -> Option<Self> {
        match &node.kind {
            NodeKind::Map(entries) => Some(Self { loc: node.loc, entries }),
            _ => {
                e.wrong_type(node, what, "a map");
                None
            }
        }
    }

    /// The value of the first `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&'n Node> {
        self.entries.iter().find(|(k, _)| k.name == key).map(|(_, v)| v)
    }

    /// The value of `key`, or a "missing" error at the map's position.
    pub(crate) fn required(&self, e: &mut Errors, key: &str, ctx: &str) -> Option<&'n Node> {
        let v = self.get(key);
        if v.is_none() {
            e.push(self.loc, format!("missing required key `{key}` in {ctx}"));
        }
        v
    }

    /// Reports keys not in `accepted` and keys given twice. `ctx` completes
    /// "unknown key `x` {ctx}", e.g. "in port `p0`".
    pub(crate) fn check_keys(&self, e: &mut Errors, ctx: &str, accepted: &[&str]) {
        self.check_names(e, "key", ctx, accepted);
    }

    /// As [`Fields::check_keys`], naming the entries `noun` ("param").
    pub(crate) fn check_names(&self, e: &mut Errors, noun: &str, ctx: &str, accepted: &[&str]) {
        let mut seen: HashMap<&str, Loc> = HashMap::new();
        for (k, _) in self.entries {
            if let Some(first) = seen.get(k.name.as_str()) {
                e.push(k.loc, format!("duplicate {noun} `{}` {ctx} (first at line {})", show(&k.name), first.line));
                continue;
            }
            seen.insert(&k.name, k.loc);
            if !accepted.contains(&k.name.as_str()) {
                e.push_with(k.loc, || {
                    format!(
                        "unknown {noun} `{}` {ctx}; accepted: {}{}",
                        show(&k.name),
                        list(accepted.iter().copied()),
                        did_you_mean(&k.name, accepted.iter().copied())
                    )
                });
            }
        }
    }
}

/// An unsigned integer in `min..=max`.
pub(crate) fn uint(e: &mut Errors, node: &Node, what: &str, min: u64, max: u64) -> Option<u64> {
    match node.kind {
        NodeKind::Int(i) if i >= i128::from(min) && i <= i128::from(max) => u64::try_from(i).ok(),
        NodeKind::Int(i) => {
            e.push(node.loc, format!("{what}: {i} is out of range {min}..={max}"));
            None
        }
        _ => {
            e.wrong_type(node, what, "an unsigned integer");
            None
        }
    }
}

/// An unsigned integer in `min..=max`, converted to `T` (which must hold `max`).
pub(crate) fn uint_as<T: TryFrom<u64>>(e: &mut Errors, node: &Node, what: &str, min: u64, max: u64) -> Option<T> {
    uint(e, node, what, min, max).and_then(|v| T::try_from(v).ok())
}

/// `true` or `false`.
pub(crate) fn boolean(e: &mut Errors, node: &Node, what: &str) -> Option<bool> {
    match node.kind {
        NodeKind::Bool(b) => Some(b),
        _ => {
            e.wrong_type(node, what, "a boolean (true or false)");
            None
        }
    }
}

/// A string.
pub(crate) fn string<'n>(e: &mut Errors, node: &'n Node, what: &str) -> Option<&'n str> {
    match &node.kind {
        NodeKind::Str(s) => Some(s),
        _ => {
            e.wrong_type(node, what, "a string");
            None
        }
    }
}

/// One of `accepted`; `what` names the field, e.g. "`hugepages` in mempool `mp0`".
pub(crate) fn choice<'a>(e: &mut Errors, node: &Node, what: &str, accepted: &[&'a str]) -> Option<&'a str> {
    let NodeKind::Str(s) = &node.kind else {
        e.wrong_type(node, what, &format!("one of: {}", list(accepted.iter().copied())));
        return None;
    };
    let found = accepted.iter().find(|a| **a == s).copied();
    if found.is_none() {
        e.push_with(node.loc, || {
            format!(
                "{what}: unknown value `{}`; accepted: {}{}",
                show(s),
                list(accepted.iter().copied()),
                did_you_mean(s, accepted.iter().copied())
            )
        });
    }
    found
}

/// Names seen in one section, with where each was first defined.
///
/// `incomplete` is set when an entry's name could not be read (missing, wrong type, invalid):
/// that error is reported already, and a reference to an unknown name may well mean that entry,
/// so unknown references are then not reported again.
#[derive(Default)]
pub(crate) struct Names {
    /// In file order.
    names: Vec<(String, Loc)>,
    /// Name -> index in `names`.
    index: HashMap<String, usize>,
    incomplete: bool,
}

impl Names {
    /// Notes that an entry of the section has no usable name.
    pub(crate) fn mark_incomplete(&mut self) {
        self.incomplete = true;
    }

    /// Records `name`, or reports it as a duplicate of an earlier one.
    pub(crate) fn add(&mut self, e: &mut Errors, noun: &str, name: &str, loc: Loc) -> bool {
        if let Some(&i) = self.index.get(name) {
            let first = self.names[i].1;
            e.push(loc, format!("duplicate {noun} name `{}` (first defined at line {})", show(name), first.line));
            false
        } else {
            self.index.insert(name.to_owned(), self.names.len());
            self.names.push((name.to_owned(), loc));
            true
        }
    }

    /// The index of `name` in file order (the order of [`Names::add`] calls that returned true).
    pub(crate) fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    pub(crate) fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> + Clone {
        self.names.iter().map(|(n, _)| n.as_str())
    }

    /// A string naming a defined entry, else a "no {noun} named" error listing the defined ones.
    pub(crate) fn reference(&self, e: &mut Errors, node: &Node, what: &str, noun: &str) -> Option<String> {
        let name = string(e, node, what)?;
        if self.contains(name) {
            return Some(name.to_owned());
        }
        if self.incomplete {
            return None;
        }
        e.push_with(node.loc, || {
            format!(
                "{what}: no {noun} named `{}`; defined: {}{}",
                show(name),
                list(self.iter()),
                did_you_mean(name, self.iter())
            )
        });
        None
    }
}

/// The entries of the list under a top-level key; `None`/null is an empty list.
pub(crate) fn list_of<'n>(e: &mut Errors, node: Option<&'n Node>, key: &str) -> &'n [Node] {
    match node.map(|n| &n.kind) {
        None | Some(NodeKind::Null) => &[],
        Some(NodeKind::Seq(items)) => items,
        Some(_) => {
            if let Some(n) = node {
                e.wrong_type(n, &format!("`{key}`"), "a list of maps");
            }
            &[]
        }
    }
}

/// As [`list_of`] for a required, non-empty list.
pub(crate) fn required_list<'n>(e: &mut Errors, top: &Fields<'n>, key: &str, example: &str) -> &'n [Node] {
    let Some(node) = top.get(key) else {
        e.push(top.loc, format!("missing required key `{key}` at the top level (e.g. {example})"));
        return &[];
    };
    let items = list_of(e, Some(node), key);
    if items.is_empty() && matches!(node.kind, NodeKind::Seq(_) | NodeKind::Null) {
        e.push(node.loc, format!("`{key}` must not be empty (e.g. {example})"));
    }
    items
}

/// The way messages name an entry: "port `p0`", or "ports[2]" (0-based) when it has no usable name.
pub(crate) fn entry_ctx(noun: &str, key: &str, index: usize, name: Option<&str>) -> String {
    match name {
        Some(n) => format!("{noun} `{}`", show(n)),
        None => format!("{key}[{index}]"),
    }
}

/// The `name` of a list entry, if it is a string (type errors are reported when it is read).
pub(crate) fn peek_name<'n>(fields: &Fields<'n>, key: &str) -> Option<&'n str> {
    match &fields.get(key)?.kind {
        NodeKind::Str(s) => Some(s),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::catalog::{Catalog, NodeSpec, ParamKind, ParamSpec};
    use crate::testing::mock_catalog;
    use crate::{parse_str, HugePages};

    fn errors(text: &str) -> String {
        parse_str(text, Path::new("t.yaml"), &mock_catalog()).unwrap_err().to_string()
    }

    const BASE: &str = "lcores: [{id: 0}]\nnodes: [{name: d, type: drop, lcore: 0}]\n";

    #[test]
    fn minimal_file_and_yaml11_words_stay_strings() {
        let text = format!("{BASE}mempools: [{{name: m, hugepages: on}}, {{name: n, hugepages: off}}]\n");
        let p = parse_str(&text, Path::new("t.yaml"), &mock_catalog()).unwrap();
        assert_eq!(p.mempools[0].hugepages, HugePages::On);
        assert_eq!(p.mempools[1].hugepages, HugePages::Off);
        assert_eq!(p.lcores[0].cpu, 0);
        assert!(p.edges.is_empty() && p.ports.is_empty());
    }

    #[test]
    fn a_node_with_one_next_per_port_names_its_edges_after_the_ports() {
        let text = "ports: [{name: left, driver: net_null}, {name: right, driver: net_null}]\nlcores: [{id: 0}]\nnodes:\n  - {name: br, type: bridge, lcore: 0}\n  - {name: tl, type: port_tx, lcore: 0, params: {port: left}}\n  - {name: tr, type: port_tx, lcore: 0, params: {port: right}}\nedges: [{from: br, next: right, to: tr}, {from: br, next: left, to: tl}]\n";
        let p = parse_str(text, Path::new("t.yaml"), &mock_catalog()).unwrap_or_else(|e| panic!("{e}"));
        let nexts: Vec<&str> = p.edges.iter().map(|e| e.next.as_str()).collect();
        assert_eq!(nexts, ["right", "left"]);
    }

    #[test]
    fn anchors_and_merge_keys_are_expanded() {
        let text = "lcores: [{id: 0}, {id: 1}]\nports:\n  - &p {name: p0, driver: net_null, rx_queues: 4}\n  - {<<: *p, name: p1}\nnodes: [{name: d, type: drop, lcore: 1}]\n";
        let p = parse_str(text, Path::new("t.yaml"), &mock_catalog()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.ports[1].name, "p1");
        assert_eq!(p.ports[1].rx_queues, 4);
    }

    #[test]
    fn unnamed_entries_do_not_cascade_into_unknown_references() {
        let e = errors("lcores: [{cpu: 1}]\nports: [{driver: net_null}]\nnodes: [{name: r, type: port_rx, lcore: 0, params: {port: p0}}]\n");
        assert_eq!(e.lines().count(), 2, "{e}");
        assert!(e.contains("missing required key `id` in lcores[0]"), "{e}");
        assert!(e.contains("missing required key `name` in ports[0]"), "{e}");
    }

    #[test]
    fn non_string_keys_are_unknown_keys() {
        let e = errors(&format!("{BASE}1: x\n? [a]\n: y\n"));
        assert!(e.contains("unknown key `1` at the top level"), "{e}");
        assert!(e.contains("unknown key `[...]` at the top level"), "{e}");
    }

    #[test]
    fn text_from_the_file_cannot_break_the_one_line_format() {
        let e = errors(&format!(
            "{BASE}\"a\\nb\\u001b\": 1\nports: [{{name: \"p\\n0\", driver: \"{}\"}}]\n",
            "x".repeat(500)
        ));
        assert_eq!(e.lines().count(), 2, "{e}");
        assert!(e.contains("unknown key `a\\nb\\u{1b}` at the top level"), "{e}");
        assert!(e.contains("unknown driver `xxxx") && e.contains("x...`"), "{e}");
    }

    #[test]
    fn errors_are_capped_on_big_files() {
        let mut text = String::from("lcores: [{id: 0}]\nnodes:\n");
        for i in 0..20_000 {
            text.push_str(&format!("  - {{name: node{i}, type: drop, lcore: 0}}\n"));
        }
        text.push_str("edges:\n");
        for i in 0..20_000 {
            text.push_str(&format!("  - {{from: nod{i}, to: node{i}}}\n"));
        }
        let errs = parse_str(&text, Path::new("t.yaml"), &mock_catalog()).unwrap_err();
        assert_eq!(errs.errors.len(), super::MAX_ERRORS + 1);
        assert!(errs.to_string().starts_with("t.yaml: error: too many errors: only the first 200 found are listed\n"));
    }

    #[test]
    fn node_names_are_restricted() {
        let e = errors(
            "lcores: [{id: 0}]\nnodes: [{name: \"a.b\", type: drop, lcore: 0}, {name: \"\", type: drop, lcore: 0}]\n",
        );
        assert_eq!(e.matches("invalid node name").count(), 2, "{e}");
    }

    #[test]
    fn bad_catalog_default_is_reported_at_the_node() {
        static NODES: &[NodeSpec] = &[NodeSpec {
            type_name: "t",
            params: &[ParamSpec::new("n", ParamKind::Uint { min: 0, max: 3 }).default("9")],
            ..NodeSpec::DEFAULT
        }];
        let cat = Catalog { nodes: NODES, drivers: None };
        let e = parse_str("lcores: [{id: 0}]\nnodes: [{name: a, type: t, lcore: 0}]\n", Path::new("t.yaml"), &cat)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "t.yaml:2:9: error: node type `t` has an invalid default `9` for param `n` (a bug in the catalog): \
             9 is out of range 0..=3"
        );
    }

    #[test]
    fn ip_list_accepts_one_address_or_several() {
        let text = "lcores: [{id: 0}]\nnodes:\n  - {name: a, type: arp, lcore: 0, params: {addresses: \"::1\"}}\n  - {name: b, type: arp, lcore: 0, params: {addresses: [10.0.0.1, \"fe80::2\"]}}\n";
        let p = parse_str(text, Path::new("t.yaml"), &mock_catalog()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.nodes[0].params.ip_list("addresses").unwrap().len(), 1);
        assert_eq!(p.nodes[1].params.ip_list("addresses").unwrap().len(), 2);
    }
}
