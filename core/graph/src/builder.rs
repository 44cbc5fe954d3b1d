//! Turning declared nodes and edges into per-lcore graphs: checks names and
//! edges, inserts an SPSC ring (a `ring_tx` / `ring_rx` pair of nodes) on every
//! edge between lcores, and orders each lcore's nodes topologically.

use crate::control::{ControlEntry, Mailbox, Remote};
use crate::info::{EdgeInfo, EdgeStats, GraphInfo, LcoreStats, NodeInfo};
use crate::node::Node;
use crate::ring::{RingRx, RingTx};
use crate::sched::{LcoreGraph, RtNode, Shared, Target};
use crate::stats::NodeStats;
use crate::trace::TraceBuf;
use ironpath_eal::sleep::Doorbell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};
use std::sync::Arc;
use std::sync::Mutex;

/// A node to place in the graph.
pub struct NodeDecl {
    /// Unique name.
    pub name: String,
    /// Its type (for display).
    pub type_name: String,
    /// Lcore that runs it.
    pub lcore: u32,
    /// Names of its next edges, in the order `Dispatch` indexes them.
    pub nexts: Vec<String>,
    /// Polled every walk, even without input (port receive, traffic source).
    pub source: bool,
    /// The node itself.
    pub node: Box<dyn Node>,
    /// The port it receives from or sends to (capture points name ports).
    pub port: Option<(String, crate::PortRole)>,
}

/// An edge: next `next` of node `from` leads to node `to`.
#[derive(Clone, Debug)]
pub struct EdgeDecl {
    /// Sending node.
    pub from: String,
    /// Next-edge name on the sending node.
    pub next: String,
    /// Receiving node.
    pub to: String,
    /// Ring size used if the two nodes are on different lcores.
    pub ring_size: usize,
}

/// Why a graph could not be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GraphError {
    /// Two nodes share a name.
    #[error("two nodes are named `{0}`")]
    Duplicate(String),
    /// An edge names a node that does not exist.
    #[error("edge {from}.{next} -> {to}: no node `{missing}`")]
    NoNode {
        /// Sending node.
        from: String,
        /// Next name.
        next: String,
        /// Receiving node.
        to: String,
        /// The name not found.
        missing: String,
    },
    /// An edge uses a next the node does not declare.
    #[error("node `{node}` has no next edge `{next}` (it declares: {declared})")]
    NoNext {
        /// Node.
        node: String,
        /// Next asked for.
        next: String,
        /// Declared nexts.
        declared: String,
    },
    /// A next edge is connected twice.
    #[error("next edge `{next}` of node `{node}` is connected twice")]
    TwiceConnected {
        /// Node.
        node: String,
        /// Next.
        next: String,
    },
    /// A node is placed on an lcore not in the lcore list.
    #[error("node `{node}` is on lcore {lcore}, which is not declared")]
    NoLcore {
        /// Node.
        node: String,
        /// Lcore id.
        lcore: u32,
    },
    /// Edges on one lcore form a loop.
    #[error("edges between nodes on lcore {lcore} form a loop through: {nodes} (a loop must cross lcores)")]
    Loop {
        /// Lcore.
        lcore: u32,
        /// Nodes on the loop (or after it).
        nodes: String,
    },
    /// A node's controller could not start (e.g. the kernel table it follows).
    #[error("node `{node}`: {reason}")]
    Control {
        /// Node.
        node: String,
        /// Why.
        reason: String,
    },
    /// An lcore's doorbell or epoll set could not be made (out of descriptors).
    #[error("lcore {lcore}: {reason}")]
    Lcore {
        /// Lcore.
        lcore: u32,
        /// Why.
        reason: String,
    },
    /// A ring size that is zero.
    #[error("edge {from} -> {to}: ring size must be at least 1")]
    RingSize {
        /// Sending node.
        from: String,
        /// Receiving node.
        to: String,
    },
}

/// A built graph: one [`LcoreGraph`] per lcore with nodes, and the shared view.
pub struct Graph {
    /// Per-lcore parts, ready to run.
    pub lcores: Vec<LcoreGraph>,
    /// Names, edges and counters for the control plane.
    pub info: Arc<GraphInfo>,
}

struct Pending {
    decl: NodeDecl,
    synthetic: bool,
    /// Per next: index of the target in `all`, and the edge's counters.
    targets: Vec<Option<(usize, Arc<EdgeStats>)>>,
}

/// Build a graph from nodes, edges and the lcores (id, CPU to pin to).
pub fn build(nodes: Vec<NodeDecl>, edges: &[EdgeDecl], lcores: &[(u32, Option<u32>)]) -> Result<Graph, GraphError> {
    let mut index: HashMap<String, usize> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        if index.insert(n.name.clone(), i).is_some() {
            return Err(GraphError::Duplicate(n.name.clone()));
        }
        if !lcores.iter().any(|&(l, _)| l == n.lcore) {
            return Err(GraphError::NoLcore { node: n.name.clone(), lcore: n.lcore });
        }
    }
    // Each lcore's doorbell: rung by ring producers on other lcores and by table
    // changes when it sleeps (ironpath_eal::sleep).
    let mut bells: HashMap<u32, Arc<Doorbell>> = HashMap::new();
    for &(l, _) in lcores {
        let bell = Doorbell::new().map_err(|e| GraphError::Lcore { lcore: l, reason: format!("eventfd: {e}") })?;
        bells.insert(l, bell);
    }
    let mut all: Vec<Pending> = nodes
        .into_iter()
        .map(|d| Pending { targets: d.nexts.iter().map(|_| None).collect(), decl: d, synthetic: false })
        .collect();
    let mut edge_infos = Vec::new();
    for e in edges {
        let missing = |m: &str| GraphError::NoNode {
            from: e.from.clone(),
            next: e.next.clone(),
            to: e.to.clone(),
            missing: m.to_string(),
        };
        let &f = index.get(&e.from).ok_or_else(|| missing(&e.from))?;
        let &t = index.get(&e.to).ok_or_else(|| missing(&e.to))?;
        let k = all[f].decl.nexts.iter().position(|n| *n == e.next).ok_or_else(|| GraphError::NoNext {
            node: e.from.clone(),
            next: e.next.clone(),
            declared: all[f].decl.nexts.join(", "),
        })?;
        if all[f].targets[k].is_some() {
            return Err(GraphError::TwiceConnected { node: e.from.clone(), next: e.next.clone() });
        }
        let stats = Arc::new(EdgeStats::default());
        let (lf, lt) = (all[f].decl.lcore, all[t].decl.lcore);
        let ring = if lf == lt {
            all[f].targets[k] = Some((t, stats.clone()));
            None
        } else {
            if e.ring_size == 0 {
                return Err(GraphError::RingSize { from: e.from.clone(), to: e.to.clone() });
            }
            let (p, c) = ironpath_eal::spsc::spsc_ring(e.ring_size);
            let base = format!("{}.{}->{}", e.from, e.next, e.to);
            let txi = all.len();
            all.push(Pending {
                decl: NodeDecl {
                    name: format!("{base}.ring_tx"),
                    type_name: "ring_tx".into(),
                    lcore: lf,
                    nexts: vec![],
                    source: false,
                    node: Box::new(RingTx(p, bells[&lt].clone())),
                    port: None,
                },
                synthetic: true,
                targets: vec![],
            });
            all.push(Pending {
                decl: NodeDecl {
                    name: format!("{base}.ring_rx"),
                    type_name: "ring_rx".into(),
                    lcore: lt,
                    nexts: vec!["out".into()],
                    source: true,
                    node: Box::new(RingRx(c)),
                    port: None,
                },
                synthetic: true,
                targets: vec![Some((t, Arc::new(EdgeStats::default())))],
            });
            all[f].targets[k] = Some((txi, stats.clone()));
            Some(e.ring_size)
        };
        edge_infos.push(EdgeInfo { from: e.from.clone(), next: e.next.clone(), to: e.to.clone(), ring, stats });
    }

    let trace = Arc::new(TraceBuf::default());
    let mut infos = Vec::new();
    let mut per_lcore: Vec<(u32, Option<u32>, Vec<usize>)> = Vec::new();
    for &(lc, cpu) in lcores {
        let members: Vec<usize> = (0..all.len()).filter(|&i| all[i].decl.lcore == lc).collect();
        if members.is_empty() {
            continue;
        }
        per_lcore.push((lc, cpu, topo_order(lc, &members, &all)?));
    }
    // Shared counters and names, made before the nodes move into their lcores.
    let stats: Vec<Arc<NodeStats>> = all
        .iter()
        .map(|p| Arc::new(NodeStats::new(p.decl.node.counters()).with_gauges(p.decl.node.gauges())))
        .collect();
    let traces: Vec<Arc<AtomicU32>> = all.iter().map(|_| Arc::new(AtomicU32::new(0))).collect();
    // Controllers, each with a mailbox its node's lcore looks at when that lcore's
    // request counter moves.
    let requests: HashMap<u32, Arc<AtomicU64>> = lcores.iter().map(|&(l, _)| (l, Arc::default())).collect();
    // Per lcore: a trace or a capture is armed on one of its nodes.
    let watches: HashMap<u32, Arc<AtomicBool>> = lcores.iter().map(|&(l, _)| (l, Arc::default())).collect();
    let mut mailboxes: Vec<Option<Arc<Mailbox>>> = Vec::with_capacity(all.len());
    let mut controls = Vec::new();
    for p in all.iter_mut() {
        let Some(mut controller) = p.decl.node.controller() else {
            mailboxes.push(None);
            continue;
        };
        let mailbox = Arc::new(Mailbox::default());
        mailboxes.push(Some(mailbox.clone()));
        let remote = Remote {
            mailbox,
            requests: requests[&p.decl.lcore].clone(),
            bell: Some(bells[&p.decl.lcore].clone()),
            lcore: p.decl.lcore,
        };
        controller.attached(&remote).map_err(|reason| GraphError::Control { node: p.decl.name.clone(), reason })?;
        controls.push(ControlEntry {
            node: p.decl.name.clone(),
            type_name: p.decl.type_name.clone(),
            controller: Mutex::new(controller),
            remote,
        });
    }
    let taps: Vec<Arc<crate::capture::NodeTap>> = all.iter().map(|_| Arc::default()).collect();
    for (i, p) in all.iter().enumerate() {
        infos.push(NodeInfo {
            name: p.decl.name.clone(),
            type_name: p.decl.type_name.clone(),
            lcore: p.decl.lcore,
            nexts: p
                .decl
                .nexts
                .iter()
                .zip(&p.targets)
                .map(|(n, t)| (n.clone(), t.as_ref().map(|(j, _)| all[*j].decl.name.clone())))
                .collect(),
            synthetic: p.synthetic,
            stats: stats[i].clone(),
            trace_left: traces[i].clone(),
            port: p.decl.port.clone(),
            tap: taps[i].clone(),
            watch: watches[&p.decl.lcore].clone(),
        });
    }
    let mut slots: Vec<Option<Pending>> = all.into_iter().map(Some).collect();
    let mut graphs = Vec::new();
    let mut lcore_stats = Vec::new();
    for (lc, cpu, order) in per_lcore {
        let pos: HashMap<usize, usize> = order.iter().enumerate().map(|(p, &i)| (i, p)).collect();
        let mut rt = Vec::new();
        for &i in &order {
            let p = slots[i].take().expect("each node is in exactly one lcore order");
            rt.push(RtNode {
                name: p.decl.name.as_str().into(),
                always: p.decl.source,
                targets: p.targets.into_iter().map(|t| t.map(|(j, edge)| Target { node: pos[&j], edge })).collect(),
                next_names: p.decl.nexts.iter().map(|n| n.as_str().into()).collect(),
                node: p.decl.node,
                stats: stats[i].clone(),
                trace_left: traces[i].clone(),
                tap: taps[i].clone(),
                guard: Default::default(),
                mailbox: mailboxes[i].take(),
                answer: None,
            });
        }
        let ls = Arc::new(LcoreStats::default());
        lcore_stats.push((lc, ls.clone()));
        let shared = Shared { requests: requests[&lc].clone(), watch: watches[&lc].clone(), bell: bells[&lc].clone() };
        let g = LcoreGraph::new(lc, cpu, rt, trace.clone(), ls, shared)
            .map_err(|e| GraphError::Lcore { lcore: lc, reason: format!("epoll: {e}") })?;
        graphs.push(g);
    }
    let info = GraphInfo {
        nodes: infos,
        edges: edge_infos,
        lcores: lcores.to_vec(),
        lcore_stats,
        trace,
        controls,
        captures: Default::default(),
    };
    Ok(Graph { lcores: graphs, info: Arc::new(info) })
}

/// Kahn's algorithm over the lcore-local edges, keeping declaration order among
/// ready nodes (so sources come first as written).
fn topo_order(lcore: u32, members: &[usize], all: &[Pending]) -> Result<Vec<usize>, GraphError> {
    let local = |j: usize| all[j].decl.lcore == lcore;
    let mut indeg: HashMap<usize, usize> = members.iter().map(|&i| (i, 0)).collect();
    for &i in members {
        for (j, _) in all[i].targets.iter().flatten() {
            if local(*j) {
                *indeg.get_mut(j).expect("local target is a member") += 1;
            }
        }
    }
    let mut order = Vec::with_capacity(members.len());
    let mut done = vec![false; all.len()];
    while order.len() < members.len() {
        let Some(&next) = members.iter().find(|&&i| !done[i] && indeg[&i] == 0) else {
            let rest: Vec<&str> = members.iter().filter(|&&i| !done[i]).map(|&i| all[i].decl.name.as_str()).collect();
            return Err(GraphError::Loop { lcore, nodes: rest.join(", ") });
        };
        done[next] = true;
        order.push(next);
        for (j, _) in all[next].targets.iter().flatten() {
            if local(*j) {
                *indeg.get_mut(j).expect("local target is a member") -= 1;
            }
        }
    }
    Ok(order)
}
