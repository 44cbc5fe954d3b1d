//! `nodes:` and `edges:`.

use std::collections::HashMap;

use crate::catalog::{Catalog, NodeSpec};
use crate::error::Loc;
use crate::model::{EdgeCfg, NodeCfg};
use crate::suggest::{did_you_mean, list, show};
use crate::tree::{Node, NodeKind};

use super::param::{self, Env};
use super::resources::{LcoreIds, MAX_LCORE};
use super::{entry_ctx, list_of, peek_name, required_list, string, uint, uint_as, Errors, Fields, Names};

const NODE_KEYS: &[&str] = &["name", "type", "lcore", "params"];
const EDGE_KEYS: &[&str] = &["from", "next", "to", "ring_size"];

/// The nodes edges may refer to: every distinct name, with its type when that type is known.
pub(crate) struct NodeNames<'c> {
    names: Names,
    specs: Vec<Option<&'c NodeSpec>>,
}

/// The nodes, and their names and types.
pub(crate) fn nodes<'c>(
    e: &mut Errors,
    top: &Fields<'_>,
    catalog: &Catalog<'c>,
    lcores: &LcoreIds,
    env: &Env<'_>,
) -> (Vec<NodeCfg>, NodeNames<'c>) {
    let mut known = NodeNames { names: Names::default(), specs: Vec::new() };
    let mut nodes = Vec::new();
    let example = "`nodes: [{name: rx0, type: port_rx, lcore: 0, params: {port: p0}}]`";
    for (i, item) in required_list(e, top, "nodes", example).iter().enumerate() {
        let Some(f) = Fields::of(e, item, &format!("nodes[{i}]")) else { continue };
        let ctx = entry_ctx("node", "nodes", i, peek_name(&f, "name"));
        f.check_keys(e, &format!("in {ctx}"), NODE_KEYS);
        let name = node_name(e, &f, &ctx);
        if name.is_none() {
            known.names.mark_incomplete();
        }
        let spec = f.required(e, "type", &ctx).and_then(|n| node_type(e, n, &ctx, catalog));
        if let Some(name) = name {
            if known.names.add(e, "node", name, f.get("name").map_or(f.loc, |n| n.loc)) {
                known.specs.push(spec);
            }
        }
        let lcore = f.required(e, "lcore", &ctx).and_then(|n| lcore(e, n, &ctx, lcores));
        let params = spec.and_then(|s| param::params(e, f.get("params"), s, &ctx, f.loc, env));
        // The type's own check of its parameters, once they are valid by kind.
        if let (Some(check), Some(p)) = (spec.and_then(|s| s.check), &params) {
            if let Err((loc, msg)) = check(p) {
                e.push(loc.unwrap_or(f.loc), format!("in {ctx}: {msg}"));
            }
        }
        if let (Some(name), Some(spec), Some(lcore), Some(params)) = (name, spec, lcore, params) {
            nodes.push(NodeCfg {
                name: name.to_owned(),
                type_name: spec.type_name.to_owned(),
                lcore,
                params,
                loc: f.loc,
            });
        }
    }
    (nodes, known)
}

/// A node name: `[A-Za-z0-9_-]+`.
fn node_name<'n>(e: &mut Errors, f: &Fields<'n>, ctx: &str) -> Option<&'n str> {
    let node = f.required(e, "name", ctx)?;
    let name = string(e, node, &format!("`name` in {ctx}"))?;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        e.push(node.loc, format!("invalid node name `{}`: use one or more letters, digits, `_` and `-`", show(name)));
        return None;
    }
    Some(name)
}

fn node_type<'c>(e: &mut Errors, node: &Node, ctx: &str, catalog: &Catalog<'c>) -> Option<&'c NodeSpec> {
    let what = format!("`type` in {ctx}");
    let t = string(e, node, &what)?;
    let spec = catalog.nodes.iter().find(|s| s.type_name == t);
    if spec.is_none() {
        let types = || catalog.nodes.iter().map(|s| s.type_name);
        e.push_with(node.loc, || {
            format!("{what}: unknown node type `{}`; accepted: {}{}", show(t), list(types()), did_you_mean(t, types()))
        });
    }
    spec
}

fn lcore(e: &mut Errors, node: &Node, ctx: &str, lcores: &LcoreIds) -> Option<u32> {
    let what = format!("`lcore` in {ctx}");
    let id = uint_as::<u32>(e, node, &what, 0, MAX_LCORE)?;
    if lcores.ids.contains(&id) {
        return Some(id);
    }
    if !lcores.complete {
        return None;
    }
    let defined: Vec<String> = lcores.ids.iter().map(u32::to_string).collect();
    e.push(
        node.loc,
        format!("{what}: lcore {id} is not defined; defined lcores: {}", list(defined.iter().map(String::as_str))),
    );
    None
}

/// The edges; a node's next may be connected once.
pub(crate) fn edges(e: &mut Errors, node: Option<&Node>, nodes: &NodeNames<'_>, ports: &Names) -> Vec<EdgeCfg> {
    let mut edges = Vec::new();
    // (from, next) -> the edge that connected it first.
    let mut connected: HashMap<(String, String), Loc> = HashMap::new();
    for (i, item) in list_of(e, node, "edges").iter().enumerate() {
        let Some(f) = Fields::of(e, item, &format!("edges[{i}]")) else { continue };
        let ctx = match (peek_name(&f, "from"), peek_name(&f, "to")) {
            (Some(a), Some(b)) => format!("edge `{} -> {}`", show(a), show(b)),
            _ => entry_ctx("edge", "edges", i, None),
        };
        f.check_keys(e, &format!("in {ctx}"), EDGE_KEYS);
        let from =
            f.required(e, "from", &ctx).and_then(|n| nodes.names.reference(e, n, &format!("`from` in {ctx}"), "node"));
        let to = f.required(e, "to", &ctx).and_then(|n| nodes.names.reference(e, n, &format!("`to` in {ctx}"), "node"));
        let spec = from.as_deref().and_then(|name| {
            let idx = nodes.names.position(name)?;
            nodes.specs[idx]
        });
        let next = match spec {
            Some(spec) => next(e, &f, &ctx, from.as_deref().unwrap_or_default(), spec, ports),
            None => {
                // The source is unknown: still check that `next` is a string.
                if let Some(n) = f.get("next") {
                    string(e, n, &format!("`next` in {ctx}"));
                }
                None
            }
        };
        let ring_size = f.get("ring_size").map_or(Some(1024), |n| ring_size(e, n, &ctx));
        if let (Some(from), Some(next)) = (&from, &next) {
            if let Some(first) = connected.get(&(from.clone(), next.clone())) {
                let at = f.get("next").map_or(f.loc, |n| n.loc);
                e.push(
                    at,
                    format!(
                        "next `{next}` of node `{}` is already connected (first at line {})",
                        show(from),
                        first.line
                    ),
                );
                continue;
            }
            connected.insert((from.clone(), next.clone()), f.loc);
        }
        if let (Some(from), Some(next), Some(to), Some(ring_size)) = (from, next, to, ring_size) {
            edges.push(EdgeCfg { from, next, to, ring_size, loc: f.loc });
        }
    }
    edges
}

/// The edge's `next`: one the source type declares; may be omitted when it declares exactly one.
fn next(e: &mut Errors, f: &Fields<'_>, ctx: &str, from: &str, spec: &NodeSpec, ports: &Names) -> Option<String> {
    let declared = spec.nexts.names();
    let source = format!("node `{}` (type {})", show(from), spec.type_name);
    if spec.nexts.per_port() {
        // One next per port, named after it (and the type's extra names).
        let extra = spec.nexts.extra();
        let also = if extra.is_empty() { String::new() } else { format!("; also: {}", list(extra.iter().copied())) };
        let Some(n) = f.get("next") else {
            e.push(
                f.loc,
                format!(
                    "missing required key `next` in {ctx}: {source} has one next edge per port, named after it; ports: {}{also}",
                    list(ports.iter())
                ),
            );
            return None;
        };
        if let Some(x) = extra.iter().find(|x| matches!(&n.kind, NodeKind::Str(name) if name == *x)) {
            return Some((*x).to_owned());
        }
        return ports.reference(e, n, &format!("`next` in {ctx} ({source}: one next edge per port{also})"), "port");
    }
    if declared.is_empty() {
        e.push(f.get("next").map_or(f.loc, |n| n.loc), format!("{ctx}: {source} has no next edges (it is a sink)"));
        return None;
    }
    let Some(n) = f.get("next") else {
        if let [only] = declared {
            return Some((*only).to_owned());
        }
        e.push(
            f.loc,
            format!("missing required key `next` in {ctx}: {source} declares {}", list(declared.iter().copied())),
        );
        return None;
    };
    let what = format!("`next` in {ctx}");
    let name = string(e, n, &what)?;
    let found = declared.iter().find(|d| **d == name).copied();
    if found.is_none() {
        e.push(
            n.loc,
            format!(
                "{what}: {source} has no next `{}`; declared: {}{}",
                show(name),
                list(declared.iter().copied()),
                did_you_mean(name, declared.iter().copied())
            ),
        );
    }
    found.map(str::to_owned)
}

fn ring_size(e: &mut Errors, node: &Node, ctx: &str) -> Option<u32> {
    let what = format!("`ring_size` in {ctx}");
    let v = uint(e, node, &what, 64, 65536)?;
    if !v.is_power_of_two() {
        e.push(node.loc, format!("{what}: {v} is not a power of two (64, 128, ..., 65536)"));
        return None;
    }
    u32::try_from(v).ok()
}
