//! Live capture of a running graph: copies of the packets a node is given or
//! sends along chosen edges, filtered by a classic BPF program, go through a
//! bounded byte ring per lcore to a reader (`ironpath ctl capture`'s writer).
//!
//! Cost when no capture is on: none per node call. Arming sets the lcore's watch
//! flag (one load per walk, shared with the trace); while it is set the lcore's
//! calls go through the watched path, which loads each node's armed mask. When
//! one is on, the armed node's lcore
//! takes, once per call, the capture's point and its lcore's ring end (two
//! `try_lock`s that only the arming and disarming control thread can ever
//! contend; if they do, the packets are not captured and that is all), runs the
//! filter per packet and copies what passes (cut at the snap length), after a
//! 20-byte record header, into the ring: a lock-free single-producer,
//! single-consumer ring of bytes allocated when the capture is armed, so nothing
//! is allocated per packet. When the ring has no room (the reader is behind) the
//! packet is counted as dropped, and the lcore goes on: it never waits.
//!
//! Bounds: at most [`MAX_CAPTURES`] captures at once per graph; per capture
//! [`RING_BYTES`] of ring, split among the lcores it watches (at least
//! [`MIN_RING_BYTES`] each); snap length at most [`MAX_SNAPLEN`].

use crate::bpf::Program;
use crate::info::GraphInfo;
use crate::node::{Dispatch, DROP};
use ironpath_eal::{Burst, MAX_BURST};
use ringbuf::traits::{Consumer, Observer, Producer, Split};
use ringbuf::{HeapCons, HeapProd, HeapRb};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Captures that may run at once on one graph.
pub const MAX_CAPTURES: usize = 4;
/// Bytes of ring a capture allocates, over all its lcores' rings.
pub const RING_BYTES: usize = 8 << 20;
/// Fewest bytes in one lcore's ring.
pub const MIN_RING_BYTES: usize = 1 << 20;
/// Longest snap length.
pub const MAX_SNAPLEN: u32 = 65535;
/// Snap length when none is given: whole packets.
pub const DEFAULT_SNAPLEN: u32 = MAX_SNAPLEN;
/// Bytes of a record's header in the ring: point (u32), TSC (u64), length on the
/// wire (u32), bytes kept (u32), little-endian.
pub const RECORD_HEADER: usize = 20;

/// Bytes of each lcore ring of a capture with `rings` rings.
pub fn ring_bytes(rings: usize) -> usize {
    (RING_BYTES / rings.max(1)).max(MIN_RING_BYTES)
}

/// One captured packet.
#[derive(Debug)]
pub struct Record {
    /// Index of its capture point (the pcapng interface).
    pub point: u32,
    /// TSC at the walk that saw it.
    pub tsc: u64,
    /// Its length on the wire (the mbuf's packet length).
    pub orig_len: u32,
    /// Its first bytes (at most the snap length).
    pub data: Vec<u8>,
}

/// What one capture point counted (written by lcores, read by the reader).
#[derive(Debug, Default)]
pub struct PointCounts {
    /// Packets that passed the filter.
    pub accepted: AtomicU64,
    /// Of those, packets the ring had no free record for.
    pub dropped: AtomicU64,
}

/// The lcore's end of one lcore ring.
struct Sink(HeapProd<u8>);

/// The reader's end of one lcore ring.
struct Reader(HeapCons<u8>);

/// A capture's view of one node.
struct TapPoint {
    /// Points of the packets the node is given.
    input: Box<[u32]>,
    /// Points per next edge (by index) of the packets it sends there.
    edges: Box<[Box<[u32]>]>,
    sink: Arc<Mutex<Sink>>,
    counts: Arc<[PointCounts]>,
    filter: Option<Arc<Program>>,
    snaplen: u32,
}

/// Per node: which captures watch it (bit `s` for capture slot `s`) and how.
#[derive(Default)]
pub struct NodeTap {
    armed: AtomicU32,
    points: [Mutex<Option<TapPoint>>; MAX_CAPTURES],
    /// The lcore that ran the node has stopped it: nothing will come any more.
    pub(crate) stopped: AtomicBool,
}

impl std::fmt::Debug for NodeTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NodeTap({:#x})", self.armed.load(Ordering::Relaxed))
    }
}

impl NodeTap {
    /// The captures watching this node (0: none). The only cost of capture on an
    /// unwatched node.
    #[inline(always)]
    pub(crate) fn armed(&self) -> u32 {
        self.armed.load(Ordering::Relaxed)
    }
}

/// Copies the packets of `pkts` that go to a watched point: `edge_of(k)` says
/// where packet `k` goes (`None`: the node's input).
#[cold]
#[inline(never)]
fn tap(tap: &NodeTap, mask: u32, pkts: &Burst, now: u64, edge_of: impl Fn(usize) -> Option<Option<u16>>) {
    for s in 0..MAX_CAPTURES {
        if mask & (1 << s) == 0 {
            continue;
        }
        // Held only by the control thread arming or disarming slot `s`.
        let Ok(point) = tap.points[s].try_lock() else { continue };
        let Some(p) = point.as_ref() else { continue };
        let Ok(mut sink) = p.sink.try_lock() else { continue };
        for k in 0..pkts.len() {
            let ids: &[u32] = match edge_of(k) {
                None | Some(Some(DROP)) => continue,
                Some(None) => &p.input,
                Some(Some(e)) => p.edges.get(e as usize).map_or(&[], |v| v),
            };
            if ids.is_empty() {
                continue;
            }
            // The filter sees the first segment (the headers), and the length.
            let keep = match &p.filter {
                Some(f) => f.run(pkts.data(k), pkts.pkt_len(k) as u32),
                None => u32::MAX,
            };
            if keep == 0 {
                continue;
            }
            for &id in ids {
                copy(&mut sink, p, id, pkts, k, keep, now);
            }
        }
    }
}

/// Copies packet `k` of `pkts` (every segment, up to the snap length and the
/// filter's `keep`) for point `id` into `sink`.
#[inline]
fn copy(sink: &mut Sink, p: &TapPoint, id: u32, pkts: &Burst, k: usize, keep: u32, now: u64) {
    let Some(c) = p.counts.get(id as usize) else { return };
    c.accepted.fetch_add(1, Ordering::Relaxed);
    let have: usize = pkts.segments(k).map(<[u8]>::len).sum();
    let n = have.min(p.snaplen as usize).min(keep as usize);
    if sink.0.vacant_len() < RECORD_HEADER + n {
        c.dropped.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let mut h = [0u8; RECORD_HEADER];
    h[0..4].copy_from_slice(&id.to_le_bytes());
    h[4..12].copy_from_slice(&now.to_le_bytes());
    h[12..16].copy_from_slice(&(pkts.pkt_len(k) as u32).to_le_bytes());
    h[16..20].copy_from_slice(&(n as u32).to_le_bytes());
    // Room was checked, and only this lcore produces: everything goes in. The
    // reader takes a record once its bytes are all there.
    sink.0.push_slice(&h);
    let mut left = n;
    for seg in pkts.segments(k) {
        let take = seg.len().min(left);
        sink.0.push_slice(&seg[..take]);
        left -= take;
        if left == 0 {
            break;
        }
    }
}

/// Taps a node's input frame (before its call).
#[inline]
pub(crate) fn tap_input(t: &NodeTap, mask: u32, pkts: &Burst, now: u64) {
    tap(t, mask, pkts, now, |_| Some(None));
}

/// Taps what a node sends (after its call): `d` and `next` say where each goes.
#[inline]
pub(crate) fn tap_output(t: &NodeTap, mask: u32, pkts: &Burst, d: Dispatch, next: &[u16; MAX_BURST], now: u64) {
    match d {
        Dispatch::All(e) => tap(t, mask, pkts, now, |_| Some(Some(e))),
        Dispatch::Each => tap(t, mask, pkts, now, |k| Some(Some(next.get(k).copied().unwrap_or(DROP)))),
        Dispatch::Consumed => {}
    }
}

/// Where a capture point sits on a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum At {
    /// The packets the node is given (a port's transmit node: what is sent).
    Input,
    /// The packets it sends along every edge (a port's receive node: what it
    /// passes on).
    Output,
    /// The packets it sends along the named next edge.
    Edge(String),
}

/// One capture point: a pcapng interface.
#[derive(Clone, Debug)]
pub struct Point {
    /// Its name (the interface's `if_name`).
    pub name: String,
    /// The nodes it watches (a port may have a receive node per queue).
    pub nodes: Vec<String>,
    /// Where on them.
    pub at: At,
}

/// What to capture.
#[derive(Clone, Debug)]
pub struct Spec {
    /// The points, at least one.
    pub points: Vec<Point>,
    /// Bytes kept of each packet (1..=[`MAX_SNAPLEN`]).
    pub snaplen: u32,
    /// Packets kept: those for which it returns non-zero (none: every packet).
    pub filter: Option<Program>,
}

/// Slots of the captures running on a graph.
#[derive(Debug, Default)]
pub struct Slots(Mutex<[bool; MAX_CAPTURES]>);

/// A running capture, the reader's side; dropping it disarms it.
pub struct Capture {
    slot: usize,
    slots: Arc<Slots>,
    taps: Vec<Arc<NodeTap>>,
    rings: Vec<Reader>,
    counts: Arc<[PointCounts]>,
    names: Vec<String>,
    snaplen: u32,
    bytes_per_ring: usize,
    rec: Record,
    /// The ring `drain` starts with next (turn about).
    first: usize,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Capture(slot {}, {:?})", self.slot, self.names)
    }
}

impl Capture {
    /// The points' names, by point index.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The snap length.
    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// Bytes of each lcore ring.
    pub fn ring_bytes(&self) -> usize {
        self.bytes_per_ring
    }

    /// Point `i`'s counters: packets that passed the filter, and those the ring
    /// could not take.
    pub fn counts(&self, i: usize) -> (u64, u64) {
        self.counts.get(i).map_or((0, 0), |c| (c.accepted.load(Ordering::Relaxed), c.dropped.load(Ordering::Relaxed)))
    }

    /// Whether the graph it watches has stopped (every lcore that ran one of its
    /// nodes has stopped them): no record will come any more.
    pub fn graph_stopped(&self) -> bool {
        self.taps.iter().all(|t| t.stopped.load(Ordering::Acquire))
    }

    /// Hands up to `max` records to `f` (oldest first per lcore); the number handed.
    pub fn drain(&mut self, max: usize, mut f: impl FnMut(&Record)) -> usize {
        let mut n = 0;
        // Each lcore's ring gets its share of `max`, starting with a different
        // one each time, so that a busy lcore cannot starve the others' rings.
        let k = self.rings.len().max(1);
        let share = max.div_ceil(k);
        self.first = (self.first + 1) % k;
        let first = self.first;
        let nrings = self.rings.len();
        for r in 0..nrings {
            let ring = &mut self.rings[(first + r) % nrings];
            let limit = (n + share).min(max);
            while n < limit {
                let mut h = [0u8; RECORD_HEADER];
                if ring.0.peek_slice(&mut h) < RECORD_HEADER {
                    break;
                }
                let word = |at: usize| u32::from_le_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
                let len = word(16) as usize;
                if ring.0.occupied_len() < RECORD_HEADER + len {
                    // The lcore is writing its bytes now.
                    break;
                }
                ring.0.skip(RECORD_HEADER);
                self.rec.point = word(0);
                self.rec.tsc = u64::from_le_bytes(h[4..12].try_into().expect("8 bytes"));
                self.rec.orig_len = word(12);
                self.rec.data.resize(len, 0);
                ring.0.pop_slice(&mut self.rec.data);
                f(&self.rec);
                n += 1;
            }
        }
        n
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let bit = 1u32 << self.slot;
        for t in &self.taps {
            t.armed.fetch_and(!bit, Ordering::Relaxed);
            // Waits for an lcore inside its (short, bounded) copy loop to leave.
            *t.points[self.slot].lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
        self.slots.0.lock().unwrap_or_else(|e| e.into_inner())[self.slot] = false;
    }
}

impl GraphInfo {
    /// Arms a capture of `spec`: records start to flow at the lcores' next node
    /// calls. Refused (and nothing armed) when a node or edge is unknown or
    /// [`MAX_CAPTURES`] run already.
    pub fn capture(&self, spec: Spec) -> Result<Capture, String> {
        if spec.points.is_empty() {
            return Err("no capture point".to_string());
        }
        if spec.snaplen == 0 || spec.snaplen > MAX_SNAPLEN {
            return Err(format!("snap length {}: 1..={MAX_SNAPLEN}", spec.snaplen));
        }
        // Resolve every point first: (node index, point index, at).
        let mut per_node: Vec<(usize, Vec<u32>, Vec<Vec<u32>>)> = Vec::new();
        for (pi, p) in spec.points.iter().enumerate() {
            if p.nodes.is_empty() {
                return Err(format!("capture point `{}` watches no node", p.name));
            }
            for name in &p.nodes {
                let Some(ni) = self.nodes.iter().position(|n| &n.name == name) else {
                    return Err(format!("no node `{name}`"));
                };
                let node = &self.nodes[ni];
                let entry = match per_node.iter_mut().find(|(i, _, _)| *i == ni) {
                    Some(e) => e,
                    None => {
                        per_node.push((ni, Vec::new(), vec![Vec::new(); node.nexts.len()]));
                        per_node.last_mut().expect("just pushed")
                    }
                };
                let id = pi as u32;
                match &p.at {
                    At::Input => entry.1.push(id),
                    At::Output => entry.2.iter_mut().for_each(|e| e.push(id)),
                    At::Edge(edge) => {
                        let Some(k) = node.nexts.iter().position(|(n, _)| n == edge) else {
                            let nexts: Vec<&str> = node.nexts.iter().map(|(n, _)| n.as_str()).collect();
                            return Err(format!("node `{name}` has no next `{edge}`; its nexts: {}", nexts.join(", ")));
                        };
                        entry.2[k].push(id);
                    }
                }
            }
        }
        let slot = {
            let mut used = self.captures.0.lock().unwrap_or_else(|e| e.into_inner());
            let Some(s) = used.iter().position(|u| !u) else {
                return Err(format!("{MAX_CAPTURES} captures run already; stop one first"));
            };
            used[s] = true;
            s
        };
        let mut lcores: Vec<u32> = per_node.iter().map(|(i, _, _)| self.nodes[*i].lcore).collect();
        lcores.sort_unstable();
        lcores.dedup();
        let per_ring = ring_bytes(lcores.len());
        let counts: Arc<[PointCounts]> = spec.points.iter().map(|_| PointCounts::default()).collect();
        let filter = spec.filter.map(Arc::new);
        let mut rings = Vec::new();
        let mut sinks = Vec::new();
        for &lc in &lcores {
            let (p, c) = HeapRb::<u8>::new(per_ring).split();
            rings.push(Reader(c));
            sinks.push((lc, Arc::new(Mutex::new(Sink(p)))));
        }
        let mut cap = Capture {
            slot,
            slots: self.captures.clone(),
            taps: Vec::new(),
            rings,
            counts: counts.clone(),
            names: spec.points.iter().map(|p| p.name.clone()).collect(),
            snaplen: spec.snaplen,
            bytes_per_ring: per_ring,
            rec: Record { point: 0, tsc: 0, orig_len: 0, data: Vec::with_capacity(spec.snaplen as usize) },
            first: 0,
        };
        for (ni, input, edges) in per_node {
            let node = &self.nodes[ni];
            let sink =
                sinks.iter().find(|(lc, _)| *lc == node.lcore).map(|(_, s)| s.clone()).expect("a sink per lcore");
            *node.tap.points[slot].lock().unwrap_or_else(|e| e.into_inner()) = Some(TapPoint {
                input: input.into(),
                edges: edges.into_iter().map(Vec::into_boxed_slice).collect(),
                sink,
                counts: counts.clone(),
                filter: filter.clone(),
                snaplen: spec.snaplen,
            });
            // The point is in place before the bit is seen (the lock's release
            // orders it; an lcore that sees the bit early finds `None` and skips).
            node.tap.armed.fetch_or(1 << slot, Ordering::Relaxed);
            node.watch.store(true, Ordering::Release);
            cap.taps.push(node.tap.clone());
        }
        Ok(cap)
    }
}
