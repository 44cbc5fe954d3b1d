//! Checks across entries that `run` would otherwise refuse (or, for a loop through
//! rings, run forever): one node per port queue and only queues the port has;
//! no loop of edges on one lcore; no loop across lcores unless a node on it ends
//! the packets that reach it ([`NodeSpec::ends_loops`]).

use std::collections::HashMap;

use crate::catalog::{Catalog, NodeSpec, QueueUse};
use crate::model::{EdgeCfg, NodeCfg, PortCfg};

use super::Errors;

fn spec<'c>(catalog: &Catalog<'c>, n: &NodeCfg) -> Option<&'c NodeSpec> {
    catalog.nodes.iter().find(|s| s.type_name == n.type_name)
}

/// The queues node `n` takes: (port, RX, queue, where the queue is written). A
/// queue-using kind takes queue `queue` of its `port`; a node with `members` (a
/// bond) takes RX queue `queue` and TX queue `tx_queue` of each member.
fn claims<'n>(s: &NodeSpec, n: &'n NodeCfg) -> Vec<(&'n str, bool, u64, crate::Loc)> {
    let mut out = Vec::new();
    let at = |k: &str| n.params.loc(k).unwrap_or(n.loc);
    match s.queue {
        QueueUse::None => {}
        QueueUse::Rx | QueueUse::Tx => {
            if let (Some(port), Some(queue)) = (n.params.port("port"), n.params.uint("queue")) {
                out.push((port, s.queue == QueueUse::Rx, queue, at("queue")));
            }
        }
    }
    if let (Some(members), true) = (n.params.records("members"), s.param("members").is_some()) {
        for m in members {
            let Some(port) = m.port("port") else { continue };
            for (key, rx) in [("queue", true), ("tx_queue", false)] {
                if let Some(q) = n.params.uint(key) {
                    out.push((port, rx, q, m.loc("port").unwrap_or_else(|| at(key))));
                }
            }
        }
    }
    out
}

/// One node per (port, direction, queue), and a queue the port has.
pub(crate) fn queues(e: &mut Errors, ports: &[PortCfg], nodes: &[NodeCfg], catalog: &Catalog<'_>) {
    let mut taken: HashMap<(&str, bool, u64), &NodeCfg> = HashMap::new();
    for n in nodes {
        let Some(s) = spec(catalog, n) else { continue };
        for (port, rx, queue, at) in claims(s, n) {
            queue_once(e, ports, &mut taken, n, (port, rx, queue, at));
        }
    }
}

/// Node `n`'s claim on one queue: one the port has, and no other node's.
fn queue_once<'n>(
    e: &mut Errors,
    ports: &[PortCfg],
    taken: &mut HashMap<(&'n str, bool, u64), &'n NodeCfg>,
    n: &'n NodeCfg,
    (port, rx, queue, at): (&'n str, bool, u64, crate::Loc),
) {
    let (dir, key) = if rx { ("RX", "rx_queues") } else { ("TX", "tx_queues") };
    if let Some(p) = ports.iter().find(|p| p.name == port) {
        let have = u64::from(if rx { p.rx_queues } else { p.tx_queues });
        if queue >= have {
            e.push(
                at,
                format!(
                    "node `{}`: port `{port}` has {have} {dir} queue(s) ({key}: {have} at line {}); queue {queue} does not exist",
                    n.name, p.loc.line
                ),
            );
            return;
        }
    }
    match taken.get(&(port, rx, queue)) {
        Some(first) => e.push(
            at,
            format!(
                "node `{}` takes {dir} queue {queue} of port `{port}`, which node `{}` (line {}) takes already: \
                 one node per queue{}",
                n.name,
                first.name,
                first.loc.line,
                if rx { " (give the port more rx_queues)" } else { " (send several edges into one node)" }
            ),
        ),
        None => {
            taken.insert((port, rx, queue), n);
        }
    }
}

/// Every `Node` parameter names a node of its type, and each such node is named
/// by at most one node of one type (a bond has one `bond_tx`).
pub(crate) fn references(e: &mut Errors, nodes: &[NodeCfg], catalog: &Catalog<'_>) {
    let mut named: HashMap<(&str, &str), &NodeCfg> = HashMap::new();
    for n in nodes {
        let Some(s) = spec(catalog, n) else { continue };
        for p in s.params {
            let crate::ParamKind::Node(kind) = p.kind else { continue };
            let Some(target) = n.params.str(p.name) else { continue };
            let at = n.params.loc(p.name).unwrap_or(n.loc);
            let of_kind: Vec<&str> = nodes.iter().filter(|m| m.type_name == kind).map(|m| m.name.as_str()).collect();
            if !of_kind.contains(&target) {
                let defined = if of_kind.is_empty() { "none".to_owned() } else { of_kind.join(", ") };
                e.push(
                    at,
                    format!("node `{}`: `{}`: no `{kind}` node named `{target}`; defined: {defined}", n.name, p.name),
                );
                continue;
            }
            match named.get(&(n.type_name.as_str(), target)) {
                Some(first) => e.push(
                    at,
                    format!(
                        "node `{}`: `{kind}` node `{target}` has a `{}` already: `{}` (line {})",
                        n.name, n.type_name, first.name, first.loc.line
                    ),
                ),
                None => {
                    named.insert((n.type_name.as_str(), target), n);
                }
            }
        }
    }
}

/// A cycle of `edges` restricted to `keep` (edge index), as the node names along
/// it and the index of the edge that closes it, if there is one.
fn find_cycle(nodes: &[NodeCfg], edges: &[EdgeCfg], keep: impl Fn(&EdgeCfg) -> bool) -> Option<(Vec<String>, usize)> {
    let index: HashMap<&str, usize> = nodes.iter().enumerate().map(|(i, n)| (n.name.as_str(), i)).collect();
    let mut out: Vec<Vec<(usize, usize)>> = vec![Vec::new(); nodes.len()];
    for (k, ed) in edges.iter().enumerate() {
        if let (Some(&a), Some(&b), true) = (index.get(ed.from.as_str()), index.get(ed.to.as_str()), keep(ed)) {
            out[a].push((b, k));
        }
    }
    // Iterative DFS: 0 unvisited, 1 on the stack, 2 done.
    let mut state = vec![0u8; nodes.len()];
    for root in 0..nodes.len() {
        if state[root] != 0 {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        state[root] = 1;
        while let Some(top) = stack.len().checked_sub(1) {
            let (v, next) = stack[top];
            if let Some(&(w, k)) = out[v].get(next) {
                stack[top].1 += 1;
                match state[w] {
                    0 => {
                        state[w] = 1;
                        stack.push((w, 0));
                    }
                    1 => {
                        let from = stack.iter().position(|(x, _)| *x == w).unwrap_or(0);
                        let mut names: Vec<String> =
                            stack[from..].iter().map(|(x, _)| nodes[*x].name.clone()).collect();
                        names.push(nodes[w].name.clone());
                        return Some((names, k));
                    }
                    _ => {}
                }
            } else {
                state[v] = 2;
                stack.pop();
            }
        }
    }
    None
}

/// No loop on one lcore; no loop across lcores that no node ends.
pub(crate) fn loops(e: &mut Errors, nodes: &[NodeCfg], edges: &[EdgeCfg], catalog: &Catalog<'_>) {
    let node = |name: &str| nodes.iter().find(|n| n.name == name);
    let lcore = |name: &str| node(name).map(|n| n.lcore);
    if let Some((names, k)) = find_cycle(nodes, edges, |ed| lcore(&ed.from) == lcore(&ed.to)) {
        e.push(
            edges[k].loc,
            format!(
                "edges between nodes on lcore {} form a loop: {} (a loop must cross lcores through a ring)",
                lcore(&edges[k].from).unwrap_or(0),
                names.join(" -> ")
            ),
        );
        return;
    }
    // A loop is broken by an edge out of a node that ends the packets it was given
    // (not one of its edges that passes them on unchanged).
    let breaks = |ed: &EdgeCfg| {
        node(&ed.from)
            .and_then(|n| spec(catalog, n))
            .is_some_and(|s| s.ends_loops && !s.loop_passes.contains(&ed.next.as_str()))
    };
    if let Some((names, k)) = find_cycle(nodes, edges, |ed| !breaks(ed)) {
        let enders: Vec<&str> = catalog.nodes.iter().filter(|s| s.ends_loops).map(|s| s.type_name).collect();
        e.push(
            edges[k].loc,
            format!(
                "edges form a loop through rings: {}; its packets would circulate forever (a loop must pass a node \
                 that ends the packets reaching it: {})",
                names.join(" -> "),
                if enders.is_empty() { "none in this catalog".into() } else { enders.join(", ") }
            ),
        );
    }
}
