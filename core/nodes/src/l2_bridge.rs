//! `l2_bridge`: a learning bridge (one bridge domain) between the ports its edges
//! connect, forwarding as a Linux bridge or a VPP bridge domain does.
//!
//! * Learning: a frame's source MAC is recorded with the port it came in on (the
//!   packet's `port`); a MAC that shows up on another port moves there (`moved`).
//! * Forwarding: a frame to a known unicast MAC goes out of that MAC's port; one
//!   whose MAC sits on the port it came in on is dropped (split horizon: a frame never
//!   goes back out of its own port; `filtered`).
//! * Flooding: broadcast, multicast and unknown unicast go out of every other port.
//!   Each extra port gets a shared reference (nothing is copied; the buffer returns
//!   to its pool after the last port sent it), in the burst's order, so a port's
//!   frames leave in the order they arrived.
//! * Aging: a learned entry not refreshed for `age_s` seconds is removed (`aged`); a
//!   few entries are checked on every call and more when the lcore is idle.
//! * A bounded table: with `max_entries` entries, learning a new MAC evicts the least
//!   recently seen of a few learned entries (`evicted`); a hostile peer sending from
//!   random MACs thus recycles entries instead of growing memory. When no learned
//!   entry can go (all static), the MAC is not learned (`table_full`) and frames to it
//!   are flooded.
//! * Static entries (`static: [{mac, port, vid}]`) never age, never move and are
//!   never evicted.
//! * `vlan_aware: true`: one bridge domain per VLAN id (a tag the port stripped, else
//!   the frame's outermost 802.1Q/802.1ad tag; untagged frames are VLAN 0): a MAC is
//!   learned and looked up per VLAN, so one host may sit behind different ports in
//!   different VLANs. Frames keep their tags (push, pop and rewrite them with `vlan`
//!   nodes on a port's edges, as for an access port).
//! * VLAN membership (`members: [{port, vlans: "0,10,20-29"}]`, VLAN-aware bridges):
//!   the VLANs a port carries (0: untagged frames), as a Linux bridge's VLAN filtering
//!   does. A frame comes in only from a port that carries its VLAN (else it is
//!   dropped, `vlan_filtered`, and its source not learned), and is flooded only to
//!   the other ports that carry it; a known MAC was learned (or set static) on a port
//!   that carries its VLAN, so unicast follows. Ports not listed carry every VLAN.
//!
//! Next edges: one per port, named after it (`next: left`), each to that port's
//! transmit node. The ports' `port_rx` nodes feed the bridge on its lcore; the ports
//! need `promisc: true` to receive frames for MACs other than their own. Frames from
//! a port the bridge has no edge to are forwarded but their source is not learned
//! (`foreign`). Frames shorter than an Ethernet header and frames with a multicast
//! source address are dropped and counted (`malformed`).

use crate::hash::{random_secret, KeyedState};
use crate::kind::{NodeError, NodeKind, Values};
use ironpath_config::{Nexts, NodeSpec, ParamKind, ParamSpec};
use ironpath_eal::{Burst, MAX_BURST};
use ironpath_graph::{Controller, CounterSpec, Dispatch, Msg, Node, NodeCx, Remote, SleepPlan, DROP};
use std::collections::HashMap;

ironpath_graph::counters! {
    /// What `l2_bridge` counts.
    pub enum BridgeCounter {
        Forwarded("forwarded", "frames sent to the port of their known destination"),
        Flooded("flooded", "frames flooded (broadcast, multicast, unknown unicast)"),
        FloodCopies("flood_copies", "extra references sent while flooding"),
        FloodNoRoom("flood_no_room", "flood references not sent: the burst was full"),
        Filtered("filtered", "frames dropped: their destination is on the port they came in on"),
        Learned("learned", "MAC addresses learned"),
        Moved("moved", "learned MAC addresses seen on another port and moved there"),
        Aged("aged", "entries removed after age_s without a frame"),
        Evicted("evicted", "entries evicted to learn another MAC (table at max_entries)"),
        TableFull("table_full", "MAC addresses not learned: the table is full of static entries"),
        StaticKept("static_kept", "frames from a static MAC on another port (the entry kept)"),
        Foreign("foreign", "frames from a port without an edge of the bridge (not learned)"),
        Malformed("malformed", "frames dropped: shorter than 14 bytes or a multicast source"),
        VlanFiltered("vlan_filtered", "frames dropped: their port does not carry their VLAN (members)"),
    }
}

ironpath_graph::counters! {
    /// The bridge's gauges.
    pub enum BridgeGauge {
        Entries("entries", "MAC addresses in the table"),
    }
}

/// A table key: the VLAN id (0 in a bridge that is not VLAN-aware, and for untagged
/// frames) and the MAC address.
pub type Key = (u16, [u8; 6]);

/// The VLAN id of a frame: a tag the port stripped, else its outermost 802.1Q/802.1ad
/// tag, else 0.
fn vid_of(h: &ironpath_eal::abi::Mbuf, frame: &[u8]) -> u16 {
    if h.ol_flags & ironpath_eal::abi::RX_VLAN_STRIPPED != 0 {
        return h.vlan_tci & 0x0fff;
    }
    match frame.get(12..16) {
        Some(&[0x81, 0x00, hi, lo] | &[0x88, 0xa8, hi, lo]) => u16::from_be_bytes([hi, lo]) & 0x0fff,
        _ => 0,
    }
}

/// No next edge: a port that is not on the bridge.
const NO_PORT: u16 = u16::MAX;
/// `next` mark of a frame to flood (resolved before dispatch).
const FLOOD: u16 = u16::MAX - 1;
/// Table slots checked for age per call, and per idle walk.
const SWEEP_PER_CALL: usize = 8;
const SWEEP_IDLE: usize = 256;
/// Learned entries compared when one must be evicted (the least recently seen goes),
/// and the most slots looked at to find them.
const EVICT_SAMPLE: usize = 8;
const EVICT_SCAN: usize = 64;

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Free,
    Learned,
    Static,
}

#[derive(Clone, Copy)]
struct Slot {
    key: Key,
    /// Next-edge index of the port.
    port: u16,
    /// TSC of the last frame from the MAC.
    seen: u64,
    state: State,
}

/// Counts of one call, reported once.
#[derive(Default)]
struct Tally {
    c: [u64; BridgeCounter::SPECS.len()],
}

impl Tally {
    fn add(&mut self, k: BridgeCounter, n: u64) {
        self.c[k as usize] += n;
    }
}

/// The MAC table: slots (learned and static entries) indexed by a hash map.
struct Table {
    /// Keyed with 128 random bits: the MACs come from the wire.
    index: HashMap<Key, u32, KeyedState>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    cursor: usize,
    max: usize,
    age_tsc: u64,
}

impl Table {
    fn new(max: usize, age_tsc: u64, key: [u8; 16]) -> Self {
        let index = HashMap::with_hasher(KeyedState::new(key));
        Self { index, slots: Vec::new(), free: Vec::new(), cursor: 0, max, age_tsc }
    }

    fn lookup(&self, key: &Key) -> Option<u16> {
        self.index.get(key).map(|&s| self.slots[s as usize].port)
    }

    fn insert(&mut self, key: Key, port: u16, seen: u64, state: State) {
        let slot = Slot { key, port, seen, state };
        let at = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        self.index.insert(key, at);
    }

    fn remove(&mut self, i: usize) {
        let s = &mut self.slots[i];
        self.index.remove(&s.key);
        s.state = State::Free;
        self.free.push(i as u32);
    }

    /// Record that `mac` sent a frame in on port `port` at `now`.
    fn learn(&mut self, key: Key, port: u16, now: u64, t: &mut Tally) {
        if let Some(&i) = self.index.get(&key) {
            let s = &mut self.slots[i as usize];
            match s.state {
                State::Static if s.port != port => t.add(BridgeCounter::StaticKept, 1),
                State::Learned => {
                    if s.port != port {
                        s.port = port;
                        t.add(BridgeCounter::Moved, 1);
                    }
                    s.seen = now;
                }
                _ => {}
            }
            return;
        }
        if self.index.len() >= self.max {
            if !self.evict_one() {
                t.add(BridgeCounter::TableFull, 1);
                return;
            }
            t.add(BridgeCounter::Evicted, 1);
        }
        self.insert(key, port, now, State::Learned);
        t.add(BridgeCounter::Learned, 1);
    }

    /// Remove the least recently seen of up to `EVICT_SAMPLE` learned entries from
    /// the cursor on; false if none was found within `EVICT_SCAN` slots.
    fn evict_one(&mut self) -> bool {
        let n = self.slots.len();
        let mut best: Option<usize> = None;
        let mut sampled = 0;
        for k in 0..EVICT_SCAN.min(n) {
            let i = (self.cursor + k) % n;
            if self.slots[i].state == State::Learned {
                if best.is_none_or(|b| self.slots[i].seen < self.slots[b].seen) {
                    best = Some(i);
                }
                sampled += 1;
                if sampled == EVICT_SAMPLE {
                    break;
                }
            }
        }
        match best {
            Some(i) => {
                self.remove(i);
                self.cursor = (i + 1) % n;
                true
            }
            None => {
                self.cursor = (self.cursor + EVICT_SCAN) % n.max(1);
                false
            }
        }
    }

    /// Check `budget` slots from the cursor on; remove learned entries older than the
    /// aging time.
    fn sweep(&mut self, now: u64, budget: usize, t: &mut Tally) {
        let n = self.slots.len();
        if self.age_tsc == 0 || n == 0 {
            return;
        }
        for _ in 0..budget.min(n) {
            let i = self.cursor;
            self.cursor = (self.cursor + 1) % n;
            let s = self.slots[i];
            if s.state == State::Learned && now.wrapping_sub(s.seen) > self.age_tsc {
                self.remove(i);
                t.add(BridgeCounter::Aged, 1);
            }
        }
    }
}

/// The node.
pub struct L2Bridge {
    /// Next-edge index by port id ([`NO_PORT`] for ports not on the bridge).
    by_port: Vec<u16>,
    /// How many ports (next edges) the bridge has.
    nports: u16,
    table: Table,
    /// One domain per VLAN id: the table key holds the frame's VLAN id.
    vlan_aware: bool,
    /// Where the slow path (flooding to more than one port) rebuilds the burst.
    scratch: Box<Burst>,
    /// The VLANs each next edge carries (a bit per VLAN id; `None`: every VLAN).
    members: Vec<Option<Box<VlanSet>>>,
    /// Whether some port carries fewer than every VLAN.
    restricted: bool,
    /// The control-plane half, until the graph takes it (built with the node's ports' names).
    ctl: Option<BridgeCtl>,
}

/// A set of VLAN ids, a bit each.
pub type VlanSet = [u64; 64];

/// Whether `set` holds VLAN `vid`.
#[inline]
fn has(set: &VlanSet, vid: u16) -> bool {
    set[usize::from(vid >> 6) & 63] >> (vid & 63) & 1 != 0
}

/// Whether next edge `port` carries VLAN `vid` (`members` by next edge; `None`: all).
#[inline]
fn carries(members: &[Option<Box<VlanSet>>], port: u16, vid: u16) -> bool {
    match members.get(usize::from(port)) {
        Some(Some(set)) => has(set, vid),
        _ => true,
    }
}

/// The VLAN ids of a `vlans` list: ids and ranges separated by commas
/// (`"0,10,20-29"`; 0 is untagged).
pub fn parse_vlans(s: &str) -> Result<VlanSet, String> {
    let mut set = [0u64; 64];
    let bad = |item: &str| {
        format!("`{item}` is not a VLAN id or range of ids in 0..=4095 (e.g. \"0,10,20-29\"; 0: untagged)")
    };
    for item in s.split(',').map(str::trim) {
        let (lo, hi) = match item.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (item, item),
        };
        let (Ok(lo), Ok(hi)) = (lo.parse::<u16>(), hi.parse::<u16>()) else { return Err(bad(item)) };
        if lo > hi || hi > 4095 {
            return Err(bad(item));
        }
        for v in lo..=hi {
            set[usize::from(v >> 6)] |= 1 << (v & 63);
        }
    }
    Ok(set)
}

impl L2Bridge {
    /// A bridge over ports whose ids are `ports[i]` (next edge `i`), with static entries
    /// `((vid, mac), next edge)`, at most `max_entries` entries, learned ones living
    /// `age_tsc` TSC ticks without a frame (0: forever), one domain per VLAN id when
    /// `vlan_aware`, its table hashed with `secret`.
    pub fn new(
        ports: &[u16],
        statics: &[(Key, u16)],
        max_entries: usize,
        age_tsc: u64,
        vlan_aware: bool,
        secret: [u8; 16],
    ) -> Self {
        let mut by_port = vec![NO_PORT; ports.iter().map(|&p| p as usize + 1).max().unwrap_or(0)];
        for (i, &p) in ports.iter().enumerate() {
            by_port[p as usize] = i as u16;
        }
        let mut table = Table::new(max_entries, age_tsc, secret);
        for &(key, port) in statics {
            table.insert(key, port, 0, State::Static);
        }
        Self {
            by_port,
            nports: ports.len() as u16,
            table,
            vlan_aware,
            scratch: Box::new(Burst::new()),
            members: vec![None; ports.len()],
            restricted: false,
            ctl: None,
        }
    }

    /// Limit next edge `port` to the VLANs in `vlans` (VLAN-aware bridges).
    pub fn with_members(mut self, port: u16, vlans: VlanSet) -> Self {
        if let Some(m) = self.members.get_mut(usize::from(port)) {
            *m = Some(Box::new(vlans));
            self.restricted = true;
        }
        self
    }

    /// Whether next edge `port` carries VLAN `vid`.
    #[inline]
    fn carries(&self, port: u16, vid: u16) -> bool {
        carries(&self.members, port, vid)
    }

    /// How many ports a frame of VLAN `vid` from `from` floods to.
    #[inline]
    fn flood_targets(&self, from: u16, vid: u16) -> u16 {
        if !self.restricted {
            return self.nports - u16::from(from != NO_PORT);
        }
        (0..self.nports).filter(|&p| p != from && self.carries(p, vid)).count() as u16
    }

    /// Entries in the MAC table.
    pub fn entries(&self) -> usize {
        self.table.index.len()
    }

    /// The next edge of the port of `mac` in VLAN `vid` (0 when not VLAN-aware), if
    /// it is in the table.
    pub fn lookup(&self, vid: u16, mac: &[u8; 6]) -> Option<u16> {
        self.table.lookup(&(vid, *mac))
    }

    fn report(&self, cx: &NodeCx<'_>, t: &Tally) {
        for (k, &v) in t.c.iter().enumerate() {
            if v > 0 {
                cx.count(k, v);
            }
        }
        cx.gauge(BridgeGauge::Entries, self.table.index.len() as u64);
    }

    /// Rebuild the burst in order with a reference per extra flood port; `next`
    /// holds each packet's decision ([`FLOOD`] for floods) and ends holding the new
    /// order's edges.
    fn flood(&mut self, pkts: &mut Burst, next: &mut [u16; MAX_BURST], t: &mut Tally) {
        let decided = *next;
        let n = pkts.len();
        let out = &mut *self.scratch;
        for (i, m) in pkts.drain().enumerate() {
            let d = decided[i];
            if d == DROP {
                continue;
            }
            if d != FLOOD {
                next[out.len()] = d;
                let _ = out.push(m);
                continue;
            }
            let from = self.by_port.get(m.header().port as usize).copied().unwrap_or(NO_PORT);
            let vid = if self.restricted { vid_of(m.header(), m.data()) } else { 0 };
            let members = &self.members;
            let mut targets = (0..self.nports).filter(|&p| p != from && carries(members, p, vid));
            let Some(first) = targets.next() else { continue };
            for p in targets {
                // Keep room for the originals still to come.
                if out.room() > n - i {
                    next[out.len()] = p;
                    let _ = out.push(m.share());
                    t.add(BridgeCounter::FloodCopies, 1);
                } else {
                    t.add(BridgeCounter::FloodNoRoom, 1);
                }
            }
            next[out.len()] = first;
            let _ = out.push(m);
        }
        out.move_to(pkts);
    }
}

impl Node for L2Bridge {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, next: &mut [u16; MAX_BURST]) -> Dispatch {
        let now = cx.now_tsc;
        let mut t = Tally::default();
        let mut copies = 0usize;
        for (i, nx) in next.iter_mut().enumerate().take(pkts.len()) {
            let from = self.by_port.get(pkts.header(i).port as usize).copied().unwrap_or(NO_PORT);
            let d = pkts.data(i);
            let (Some(dst), Some(src)) = (d.get(..6), d.get(6..12)) else {
                *nx = DROP;
                t.add(BridgeCounter::Malformed, 1);
                continue;
            };
            if d.len() < 14 || src[0] & 1 != 0 {
                *nx = DROP;
                t.add(BridgeCounter::Malformed, 1);
                continue;
            }
            let dst: [u8; 6] = dst.try_into().unwrap_or_default();
            let vid = if self.vlan_aware { vid_of(pkts.header(i), d) } else { 0 };
            if self.restricted && from != NO_PORT && !self.carries(from, vid) {
                *nx = DROP;
                t.add(BridgeCounter::VlanFiltered, 1);
                continue;
            }
            if from == NO_PORT {
                t.add(BridgeCounter::Foreign, 1);
            } else {
                self.table.learn((vid, src.try_into().unwrap_or_default()), from, now, &mut t);
            }
            if dst[0] & 1 == 0 {
                if let Some(p) = self.table.lookup(&(vid, dst)) {
                    if p == from {
                        *nx = DROP;
                        t.add(BridgeCounter::Filtered, 1);
                    } else {
                        *nx = p;
                        t.add(BridgeCounter::Forwarded, 1);
                    }
                    continue;
                }
            }
            let targets = self.flood_targets(from, vid);
            if targets == 0 {
                *nx = DROP;
                let other_ports = self.nports > u16::from(from != NO_PORT);
                t.add(if other_ports { BridgeCounter::VlanFiltered } else { BridgeCounter::Filtered }, 1);
                continue;
            }
            t.add(BridgeCounter::Flooded, 1);
            if targets == 1 {
                // One port to go to: that one, no copy.
                *nx = (0..self.nports).find(|&p| p != from && self.carries(p, vid)).unwrap_or(DROP);
            } else {
                *nx = FLOOD;
                copies += usize::from(targets) - 1;
            }
        }
        if copies > 0 {
            self.flood(pkts, next, &mut t);
        }
        self.table.sweep(now, SWEEP_PER_CALL, &mut t);
        self.report(cx, &t);
        Dispatch::Each
    }

    fn sleep(&mut self, cx: &mut NodeCx<'_>, plan: &mut SleepPlan) {
        // Aging sweeps run when the lcore is idle: at least one a second.
        plan.until(cx.now_tsc.wrapping_add(ironpath_eal::tsc::tsc_hz()));
    }

    fn idle(&mut self, cx: &mut NodeCx<'_>) {
        let mut t = Tally::default();
        self.table.sweep(cx.now_tsc, SWEEP_IDLE, &mut t);
        if t.c.iter().any(|&v| v > 0) {
            self.report(cx, &t);
        }
    }

    fn counters(&self) -> &'static [CounterSpec] {
        BridgeCounter::SPECS
    }

    fn gauges(&self) -> &'static [CounterSpec] {
        BridgeGauge::SPECS
    }

    fn controller(&mut self) -> Option<Box<dyn Controller>> {
        self.ctl.take().map(|c| Box::new(c) as Box<dyn Controller>)
    }

    fn apply(&mut self, _cx: &mut NodeCx<'_>, msg: Msg) -> Msg {
        match msg.downcast::<MacChange>() {
            Ok(c) => Box::new(self.table.change(*c)),
            Err(m) => m,
        }
    }
}

/// A change of the MAC table, made by its lcore between two bursts.
enum MacChange {
    /// A static entry (replacing a learned one).
    Add(Key, u16),
    /// Remove an entry, static or learned.
    Del(Key),
    /// Remove the learned entries (of one next edge, or all) among [`SLICE`] slots
    /// from the one given: a big table is flushed in several changes, none of which
    /// holds the lcore long.
    Flush(Option<u16>, usize),
    /// Copy out the entries among [`SLICE`] slots from the one given.
    Show(usize),
}

/// What the lcore answers a [`MacChange`].
enum MacAnswer {
    Done(Result<String, String>),
    /// Entries flushed, and the slot to go on from (`None`: the end).
    Flushed(usize, Option<usize>),
    /// Entries (key, next edge, static) of the slots looked at, how many there are
    /// in all, and the slot to go on from.
    Entries(Vec<(Key, u16, bool)>, usize, Option<usize>),
}

/// Most entries `show bridge mac` prints.
const SHOW_MAX: usize = 1000;
/// Slots one flush or show change looks at on the lcore.
const SLICE: usize = 4096;

impl Table {
    fn change(&mut self, c: MacChange) -> MacAnswer {
        MacAnswer::Done(match c {
            MacChange::Add(key, port) => match self.index.get(&key).copied() {
                Some(i) => {
                    let s = &mut self.slots[i as usize];
                    (s.port, s.state) = (port, State::Static);
                    Ok("static entry set (it replaced an entry)".into())
                }
                None if self.index.len() >= self.max && !self.evict_one() => {
                    Err(format!("the MAC table is full of static entries ({}: max_entries): nothing changed", self.max))
                }
                None => {
                    self.insert(key, port, 0, State::Static);
                    Ok("static entry added".into())
                }
            },
            MacChange::Del(key) => match self.index.get(&key).copied() {
                Some(i) => {
                    self.remove(i as usize);
                    Ok("entry removed".into())
                }
                None => Err("no such entry".into()),
            },
            MacChange::Flush(port, from) => {
                let end = (from + SLICE).min(self.slots.len());
                let mut n = 0;
                for i in from..end {
                    let s = self.slots[i];
                    if s.state == State::Learned && port.is_none_or(|p| p == s.port) {
                        self.remove(i);
                        n += 1;
                    }
                }
                return MacAnswer::Flushed(n, (end < self.slots.len()).then_some(end));
            }
            MacChange::Show(from) => {
                let end = (from + SLICE).min(self.slots.len());
                let live = self.slots[from.min(end)..end].iter().filter(|s| s.state != State::Free);
                let v = live.map(|s| (s.key, s.port, s.state == State::Static)).collect();
                return MacAnswer::Entries(v, self.index.len(), (end < self.slots.len()).then_some(end));
            }
        })
    }
}

/// The controller of one `l2_bridge`: its ports by name, for the commands.
struct BridgeCtl {
    ports: Vec<String>,
    vlan_aware: bool,
    /// The VLANs each port carries (`members`), as the bridge has them.
    members: Vec<Option<Box<VlanSet>>>,
}

const BRIDGE_GRAMMAR: &[(&str, &str)] = &[
    ("bridge mac add <MAC> port <NAME> [vlan <VID>]", "a static entry: MAC is behind port NAME (in VLAN VID)"),
    ("bridge mac del <MAC> [vlan <VID>]", "remove MAC's entry, static or learned"),
    ("bridge mac flush [port <NAME>]", "forget the learned entries (of port NAME); they are learned again"),
    ("show bridge mac", "the MAC table: MAC, VLAN, port, static or learned"),
];

impl BridgeCtl {
    /// A static entry for `key` on port `port`, if the port carries its VLAN.
    fn add(&self, key: Key, port: u16) -> Result<MacChange, String> {
        if !carries(&self.members, port, key.0) {
            return Err(format!(
                "port `{}` does not carry VLAN {} (its `members` entry)",
                self.ports[usize::from(port)],
                key.0
            ));
        }
        Ok(MacChange::Add(key, port))
    }

    fn port(&self, name: &str) -> Result<u16, String> {
        self.ports
            .iter()
            .position(|p| p == name)
            .map(|i| i as u16)
            .ok_or_else(|| format!("port `{name}` is not on the bridge (its ports: {})", self.ports.join(", ")))
    }

    fn key(&self, mac: &str, vlan: Option<&str>) -> Result<Key, String> {
        let m = ironpath_config::parse_mac(mac)
            .ok_or_else(|| format!("`{mac}` is not a MAC address (aa:bb:cc:dd:ee:ff)"))?;
        if m[0] & 1 != 0 {
            return Err(format!("{mac} is a multicast address: it is never a frame's source"));
        }
        let vid = match vlan {
            None => 0,
            Some(v) if !self.vlan_aware => return Err(format!("vlan {v}: the bridge is not vlan_aware")),
            Some(v) => v
                .parse::<u16>()
                .ok()
                .filter(|v| *v <= 4095)
                .ok_or_else(|| format!("`{v}` is not a VLAN id (0..=4095)"))?,
        };
        Ok((vid, m))
    }
}

impl Controller for BridgeCtl {
    fn grammar(&self) -> &'static [(&'static str, &'static str)] {
        BRIDGE_GRAMMAR
    }

    fn accepts(&self, words: &[&str]) -> bool {
        matches!(words, ["bridge", ..] | ["show", "bridge", ..])
    }

    fn command(&mut self, words: &[&str], remote: &Remote) -> Result<String, String> {
        let change = match words {
            ["bridge", "mac", "add", mac, "port", port] => self.add(self.key(mac, None)?, self.port(port)?)?,
            ["bridge", "mac", "add", mac, "port", port, "vlan", v] => {
                self.add(self.key(mac, Some(v))?, self.port(port)?)?
            }
            ["bridge", "mac", "del" | "delete", mac] => MacChange::Del(self.key(mac, None)?),
            ["bridge", "mac", "del" | "delete", mac, "vlan", v] => MacChange::Del(self.key(mac, Some(v))?),
            ["bridge", "mac", "flush"] => MacChange::Flush(None, 0),
            ["bridge", "mac", "flush", "port", port] => MacChange::Flush(Some(self.port(port)?), 0),
            ["show", "bridge", "mac"] => MacChange::Show(0),
            _ => return Err(format!("usage: {}", BRIDGE_GRAMMAR.iter().map(|g| g.0).collect::<Vec<_>>().join(" | "))),
        };
        let ask = |c: MacChange| -> Result<MacAnswer, String> {
            match remote.call(Box::new(c))?.downcast::<MacAnswer>() {
                Ok(a) => Ok(*a),
                Err(_) => Err("the node did not take the change (it panicked): nothing changed".into()),
            }
        };
        match change {
            MacChange::Flush(port, _) => {
                let (mut n, mut at) = (0, Some(0));
                while let Some(from) = at {
                    let MacAnswer::Flushed(k, next) = ask(MacChange::Flush(port, from))? else { break };
                    (n, at) = (n + k, next);
                }
                Ok(format!("{n} learned entries flushed"))
            }
            MacChange::Show(_) => {
                let (mut all, mut total, mut at) = (Vec::new(), 0, Some(0));
                while let (Some(from), true) = (at, all.len() < SHOW_MAX) {
                    let MacAnswer::Entries(v, t, next) = ask(MacChange::Show(from))? else { break };
                    all.extend(v);
                    (total, at) = (t, next);
                }
                all.truncate(SHOW_MAX);
                let mut s = format!("{total} entries\n{:<18} {:>5} {:<12} {}\n", "MAC", "VLAN", "Port", "Kind");
                for ((vid, m), port, fixed) in &all {
                    let mac = m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
                    let name = self.ports.get(usize::from(*port)).map_or("?", String::as_str);
                    s.push_str(&format!(
                        "{mac:<18} {vid:>5} {name:<12} {}\n",
                        if *fixed { "static" } else { "learned" }
                    ));
                }
                if total > all.len() {
                    s.push_str(&format!("... {} more\n", total - all.len()));
                }
                Ok(s)
            }
            c => match ask(c)? {
                MacAnswer::Done(r) => r,
                _ => Err("the node answered another change".into()),
            },
        }
    }
}

const STATIC: &[ParamSpec] = &[
    ParamSpec::new("mac", ParamKind::Mac).required().doc("the MAC address"),
    ParamSpec::new("vid", ParamKind::Uint { min: 0, max: 4095 })
        .default("0")
        .doc("its VLAN (vlan_aware bridges; 0: untagged)"),
    ParamSpec::new("port", ParamKind::Port).required().doc("the port it is on (one of the bridge's next edges)"),
];

const MEMBER: &[ParamSpec] = &[
    ParamSpec::new("port", ParamKind::Port).required().doc("a port of the bridge (one of its next edges)"),
    ParamSpec::new("vlans", ParamKind::Str)
        .required()
        .doc("the VLAN ids it carries: ids and ranges, e.g. \"0,10,20-29\" (0: untagged frames)"),
];

/// A refusal of `check`: where, and why.
type CheckError = (Option<ironpath_config::Loc>, String);

/// The `members` records as (port name, VLANs); refuses them on a bridge that is not
/// VLAN-aware, a port listed twice and a bad `vlans` (at the parameter).
fn members_of(p: &ironpath_config::Params) -> Result<Vec<(String, VlanSet)>, CheckError> {
    let recs = p.records("members").unwrap_or_default();
    if !recs.is_empty() && p.bool("vlan_aware") != Some(true) {
        return Err((p.loc("members"), "`members` needs `vlan_aware: true` (membership is per VLAN)".into()));
    }
    let mut out: Vec<(String, VlanSet)> = Vec::new();
    for r in recs {
        let port = r.port("port").unwrap_or_default();
        if out.iter().any(|(q, _)| q == port) {
            return Err((r.loc("port"), format!("port `{port}` is listed twice in `members`")));
        }
        let vlans =
            parse_vlans(r.str("vlans").unwrap_or_default()).map_err(|e| (r.loc("vlans"), format!("`vlans`: {e}")))?;
        out.push((port.to_owned(), vlans));
    }
    Ok(out)
}

/// `l2_bridge`.
pub const KIND: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "l2_bridge",
        doc: "a learning bridge between the ports its edges connect: learning, forwarding, flooding, aging, split horizon",
        params: &[
            ParamSpec::new("age_s", ParamKind::Uint { min: 0, max: 1_000_000 }).default("300").doc("seconds a learned entry lives without a frame from its MAC (0: forever)"),
            ParamSpec::new("max_entries", ParamKind::Uint { min: 1, max: 1 << 24 }).default("65536").doc("entries in the MAC table (learned and static); beyond it learning evicts (counted)"),
            ParamSpec::new("static", ParamKind::Records(STATIC)).default("[]").doc("entries that never age or move"),
            ParamSpec::new("vlan_aware", ParamKind::Bool).default("false").doc("one bridge domain per VLAN id (the stripped or outermost tag; untagged: 0): MACs are learned per VLAN"),
            ParamSpec::new("members", ParamKind::Records(MEMBER)).default("[]").doc("VLANs per port (vlan_aware): frames come in and are flooded only where their VLAN is carried; unlisted ports carry all"),
        ],
        nexts: Nexts::Ports,
        check: Some(|p| members_of(p).map(drop)),
        ..NodeSpec::DEFAULT
    },
    build: |b, env| {
        let p = b.params();
        let members = members_of(p.raw()).map_err(|(_, reason)| NodeError::Param { param: "members", reason })?;
        let ports =
            b.connected.iter().map(|name| env.port_id(name).map_err(NodeError::from)).collect::<Result<Vec<_>, _>>()?;
        let edge = |name: &str| b.connected.iter().position(|c| *c == name).map(|i| i as u16);
        let mut statics = Vec::new();
        for r in p.records("static")? {
            let r = Values(r);
            let port = r.port("port")?;
            let Some(i) = edge(port) else {
                return Err(NodeError::Param {
                    param: "static",
                    reason: format!(
                        "port `{port}` is not on the bridge (its next edges: {})",
                        b.connected.join(", ")
                    ),
                });
            };
            let vid = r.int("vid")?;
            if let Some((_, set)) = members.iter().find(|(m, _)| m == port) {
                if !has(set, vid) {
                    return Err(NodeError::Param {
                        param: "static",
                        reason: format!("port `{port}` does not carry VLAN {vid} (its `members` entry)"),
                    });
                }
            }
            statics.push(((vid, r.mac("mac")?), i));
        }
        let max: usize = p.int("max_entries")?;
        if statics.len() > max {
            return Err(NodeError::Param {
                param: "static",
                reason: format!("{} entries do not fit max_entries={max}", statics.len()),
            });
        }
        let age_tsc = p.uint("age_s")?.saturating_mul(env.tsc_hz());
        let mut key = [0u8; 16];
        random_secret(&mut key)?;
        let mut br = L2Bridge::new(&ports, &statics, max, age_tsc, p.bool("vlan_aware")?, key);
        for (port, vlans) in members {
            let Some(i) = edge(&port) else {
                return Err(NodeError::Param {
                    param: "members",
                    reason: format!("port `{port}` is not on the bridge (its next edges: {})", b.connected.join(", ")),
                });
            };
            br = br.with_members(i, vlans);
        }
        br.ctl = Some(BridgeCtl {
            ports: b.connected.iter().map(|c| c.to_string()).collect(),
            vlan_aware: br.vlan_aware,
            members: br.members.clone(),
        });
        Ok(Box::new(br))
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{burst, call, counter, pool, stats};
    use ironpath_eal::Mempool;
    use ironpath_graph::testing::Call;

    const A: [u8; 6] = [0x02, 0, 0, 0, 0, 0xa];
    const B: [u8; 6] = [0x02, 0, 0, 0, 0, 0xb];
    const C: [u8; 6] = [0x02, 0, 0, 0, 0, 0xc];
    const BCAST: [u8; 6] = [0xff; 6];

    fn frame(dst: [u8; 6], src: [u8; 6], tag: u8) -> Vec<u8> {
        let mut f = [dst, src].concat();
        f.extend_from_slice(&[0x08, 0x00, tag]);
        f.resize(60, tag);
        f
    }

    /// Run `br` on frames that came in on port ids `from` (one per frame); returns
    /// (next edge, tag byte) per output packet and frees them.
    fn run(
        br: &mut L2Bridge,
        st: &ironpath_graph::NodeStats,
        p: &Mempool,
        now: u64,
        frames: &[(u16, Vec<u8>)],
    ) -> Vec<(u16, u8)> {
        let fs: Vec<Vec<u8>> = frames.iter().map(|f| f.1.clone()).collect();
        let mut b = burst(p, &fs);
        for (i, f) in frames.iter().enumerate() {
            b.header_mut(i).port = f.0;
        }
        let c: Call = call(br, st, &mut b, now);
        assert!(matches!(c.dispatch, Dispatch::Each));
        let out = (0..b.len())
            .map(|i| (c.next[i], b.data(i).get(14).copied().unwrap_or(0)))
            .filter(|x| x.0 != DROP)
            .collect();
        b.free_all();
        out
    }

    /// Ports 10, 11, 12 are next edges 0, 1, 2.
    fn bridge(max: usize, age_tsc: u64) -> L2Bridge {
        L2Bridge::new(&[10, 11, 12], &[], max, age_tsc, false, [7; 16])
    }

    #[test]
    fn learns_floods_unknown_and_broadcast_then_forwards_known_in_order() {
        let p = pool(256);
        let mut br = bridge(16, 0);
        let st = stats(&br);
        // A (port 10) to B: unknown, flooded to 1 and 2; B answers: known, to 0.
        let out = run(&mut br, &st, &p, 1, &[(10, frame(B, A, 1)), (11, frame(A, B, 2)), (12, frame(BCAST, C, 3))]);
        assert_eq!(out, [(2, 1), (1, 1), (0, 2), (1, 3), (0, 3)], "references next to their original, in order");
        assert_eq!(counter(&st, "learned"), 3);
        assert_eq!(counter(&st, "flooded"), 2);
        assert_eq!(counter(&st, "flood_copies"), 2);
        assert_eq!(counter(&st, "forwarded"), 1);
        // All known now: unicast only, no flooding.
        let out = run(&mut br, &st, &p, 2, &[(10, frame(B, A, 4)), (10, frame(C, A, 5)), (12, frame(A, C, 6))]);
        assert_eq!(out, [(1, 4), (2, 5), (0, 6)]);
        assert_eq!(p.stats().in_use, 0, "every reference freed");
    }

    #[test]
    fn split_horizon_and_moves() {
        let p = pool(64);
        let mut br = bridge(16, 0);
        let st = stats(&br);
        run(&mut br, &st, &p, 1, &[(10, frame(BCAST, A, 1)), (11, frame(BCAST, B, 2))]);
        // B's frame to A comes in on A's port: dropped, never back out of its port.
        assert_eq!(run(&mut br, &st, &p, 2, &[(10, frame(A, B, 3))]), []);
        assert_eq!(counter(&st, "filtered"), 1);
        assert_eq!(counter(&st, "moved"), 1, "B moved to port 10 with that frame");
        // A moves to port 12: frames to A follow it.
        run(&mut br, &st, &p, 3, &[(12, frame(BCAST, A, 4))]);
        assert_eq!(counter(&st, "moved"), 2);
        assert_eq!(run(&mut br, &st, &p, 4, &[(11, frame(A, C, 5))]), [(2, 5)]);
    }

    #[test]
    fn aged_entries_disappear_and_their_frames_flood_again() {
        let p = pool(64);
        let mut br = bridge(16, 1000);
        let st = stats(&br);
        run(&mut br, &st, &p, 10, &[(10, frame(BCAST, A, 1))]);
        assert_eq!(run(&mut br, &st, &p, 500, &[(11, frame(A, B, 2))]), [(0, 2)]);
        // B refreshed at 500, A not since 10: at 1500 A is older than 1000 ticks.
        ironpath_graph::testing::idle(&mut br, &st, 1500);
        assert_eq!(counter(&st, "aged"), 1);
        assert_eq!(st.gauges().find(|g| g.0.name == "entries").map(|g| g.1), Some(1));
        assert_eq!(run(&mut br, &st, &p, 1600, &[(11, frame(A, B, 3))]), [(2, 3), (0, 3)], "A unknown again: flooded");
    }

    #[test]
    fn a_full_table_evicts_the_least_recently_seen_and_static_entries_stay() {
        let p = pool(64);
        let mut br = L2Bridge::new(&[10, 11], &[((0, C), 1)], 3, 0, false, [7; 16]);
        let st = stats(&br);
        run(&mut br, &st, &p, 1, &[(10, frame(BCAST, A, 1))]);
        run(&mut br, &st, &p, 2, &[(10, frame(BCAST, B, 2))]);
        // Table: C (static), A (seen 1), B (seen 2): a new MAC evicts A.
        let d = [0x02, 0, 0, 0, 0, 0xd];
        run(&mut br, &st, &p, 3, &[(10, frame(BCAST, d, 3))]);
        assert_eq!(counter(&st, "evicted"), 1);
        assert_eq!(br.lookup(0, &A), None);
        assert_eq!(br.lookup(0, &B), Some(0));
        // The static C never moves: a frame from C on port 0 leaves it on port 1.
        run(&mut br, &st, &p, 4, &[(10, frame(BCAST, C, 4))]);
        assert_eq!(counter(&st, "static_kept"), 1);
        assert_eq!(br.lookup(0, &C), Some(1));
        // A table of static entries only learns nothing.
        let mut full = L2Bridge::new(&[10, 11], &[((0, C), 1)], 1, 0, false, [7; 16]);
        let st2 = stats(&full);
        run(&mut full, &st2, &p, 1, &[(10, frame(BCAST, A, 5))]);
        assert_eq!(counter(&st2, "table_full"), 1);
        assert_eq!(full.table.index.len(), 1);
    }

    #[test]
    fn random_sources_stay_within_the_bound() {
        let p = pool(512);
        let mut br = bridge(100, 0);
        let st = stats(&br);
        for round in 0..40u32 {
            let frames: Vec<(u16, Vec<u8>)> = (0..50u32)
                .map(|i| {
                    let x = (round * 50 + i).to_be_bytes();
                    (10, frame(B, [0x02, 0x33, x[0], x[1], x[2], x[3]], 0))
                })
                .collect();
            run(&mut br, &st, &p, u64::from(round), &frames);
        }
        assert_eq!(br.table.index.len(), 100);
        assert!(br.table.slots.len() <= 100);
        assert_eq!(counter(&st, "learned"), 2000);
        assert_eq!(counter(&st, "evicted"), 1900);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn vlan_aware_bridges_learn_per_vlan() {
        let p = pool(64);
        let tagged = |dst, src, vid: u16, tag: u8| {
            let f = frame(dst, src, tag);
            [&f[..12], &[0x81, 0x00], &vid.to_be_bytes(), &f[12..]].concat()
        };
        let mut br = L2Bridge::new(&[10, 11, 12], &[], 16, 0, true, [7; 16]);
        let st = stats(&br);
        // A is behind port 10 in VLAN 5 and behind port 12 in VLAN 6.
        run(&mut br, &st, &p, 1, &[(10, tagged(BCAST, A, 5, 1)), (12, tagged(BCAST, A, 6, 2))]);
        assert_eq!((br.lookup(5, &A), br.lookup(6, &A), br.lookup(0, &A)), (Some(0), Some(2), None));
        assert_eq!(counter(&st, "moved"), 0, "two domains, no move");
        let out = run(&mut br, &st, &p, 2, &[(11, tagged(A, B, 5, 3)), (11, tagged(A, B, 6, 4))]);
        assert_eq!(out.iter().map(|o| o.0).collect::<Vec<_>>(), [0, 2], "each VLAN's A");
        // A stripped tag counts as the frame's VLAN.
        let fs = [frame(A, C, 5)];
        let mut b = burst(&p, &fs);
        b.header_mut(0).port = 11;
        b.header_mut(0).ol_flags |= ironpath_eal::abi::RX_VLAN_STRIPPED;
        b.header_mut(0).vlan_tci = 0x2006;
        let c = call(&mut br, &st, &mut b, 3);
        assert_eq!(c.next[0], 2);
        assert_eq!(br.lookup(6, &C), Some(1));
        b.free_all();
        // Not VLAN-aware: one domain, the second sighting is a move.
        let mut flat = bridge(16, 0);
        let st2 = stats(&flat);
        run(&mut flat, &st2, &p, 1, &[(10, tagged(BCAST, A, 5, 1)), (12, tagged(BCAST, A, 6, 2))]);
        assert_eq!(counter(&st2, "moved"), 1);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn members_filter_what_comes_in_and_where_floods_go() {
        let p = pool(64);
        let tagged = |dst, src, vid: u16, tag: u8| {
            let f = frame(dst, src, tag);
            [&f[..12], &[0x81, 0x00], &vid.to_be_bytes(), &f[12..]].concat()
        };
        let set = |s: &str| parse_vlans(s).expect("vlans");
        // Port 10 (edge 0) carries VLAN 5, port 11 (edge 1) VLANs 5-6, port 12 every VLAN.
        let mut br = L2Bridge::new(&[10, 11, 12], &[], 16, 0, true, [7; 16])
            .with_members(0, set("5"))
            .with_members(1, set("5-6"));
        let st = stats(&br);
        // VLAN 6 from port 10, untagged from port 11: not carried there, dropped unlearned.
        assert_eq!(run(&mut br, &st, &p, 1, &[(10, tagged(BCAST, A, 6, 1)), (11, frame(BCAST, B, 2))]), []);
        assert_eq!(counter(&st, "vlan_filtered"), 2);
        assert_eq!((br.lookup(6, &A), br.lookup(0, &B)), (None, None));
        // Broadcasts from port 12: VLAN 6 reaches port 11 only, VLAN 5 both, VLAN 7 none.
        // (Edges only: byte 14 of a tagged frame is its tag.)
        let edges = |out: Vec<(u16, u8)>| out.iter().map(|o| o.0).collect::<Vec<_>>();
        let out = run(&mut br, &st, &p, 2, &[(12, tagged(BCAST, C, 6, 3)), (12, tagged(BCAST, C, 5, 4))]);
        assert_eq!(edges(out), [1, 1, 0], "VLAN 6 to edge 1; VLAN 5 to edge 1 (a reference) and 0");
        assert_eq!(run(&mut br, &st, &p, 3, &[(12, tagged(BCAST, C, 7, 5))]), []);
        assert_eq!(counter(&st, "vlan_filtered"), 3);
        // Known unicast in a carried VLAN is forwarded as before.
        assert_eq!(edges(run(&mut br, &st, &p, 4, &[(10, tagged(C, A, 5, 6))])), [2]);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn vlan_lists_parse_ids_and_ranges_and_refuse_the_rest() {
        let s = parse_vlans("0, 10,20-29,4095").expect("valid");
        let ids: Vec<u16> = (0..4096).filter(|&v| has(&s, v)).collect();
        assert_eq!(ids, [[0, 10].as_slice(), &(20..=29).collect::<Vec<_>>(), &[4095]].concat());
        for bad in ["", "4096", "10-5", "x", "1-", "-3", "5,,6"] {
            let e = parse_vlans(bad).expect_err(bad);
            assert!(e.contains("0..=4095") && e.contains("0,10,20-29"), "{bad}: {e}");
        }
    }

    #[test]
    fn members_are_refused_by_check_at_the_parameter() {
        let catalog = ironpath_config::Catalog { nodes: &[KIND.spec], drivers: None };
        for (params, at, wants) in [
            ("{members: [{port: a, vlans: \"5\"}]}", "b.yaml:4:", "vlan_aware: true"),
            ("{vlan_aware: true, members: [{port: a, vlans: \"5-x\"}]}", "b.yaml:4:", "`5-x` is not a VLAN id"),
            (
                "{vlan_aware: true, members: [{port: a, vlans: \"5\"}, {port: a, vlans: \"6\"}]}",
                "b.yaml:4:",
                "listed twice",
            ),
        ] {
            let yaml = format!(
                "ports: [{{name: a, driver: net_null}}, {{name: b, driver: net_null}}]\nlcores: [{{id: 0}}]\nnodes:\n  - {{name: br, type: l2_bridge, lcore: 0, params: {params}}}\n"
            );
            let e = ironpath_config::parse_str(&yaml, std::path::Path::new("b.yaml"), &catalog)
                .expect_err(params)
                .to_string();
            assert!(e.contains(at) && e.contains(wants), "{params}: {e}");
        }
    }

    #[test]
    fn runts_multicast_sources_and_foreign_ports() {
        let p = pool(64);
        let mut br = bridge(16, 0);
        let st = stats(&br);
        let runt = vec![0u8; 13];
        let mcast_src = frame(B, [0x01, 0, 0x5e, 0, 0, 1], 1);
        assert_eq!(run(&mut br, &st, &p, 1, &[(10, runt), (10, mcast_src)]), []);
        assert_eq!(counter(&st, "malformed"), 2);
        // Port 99 has no edge: flooded to all three, source not learned.
        assert_eq!(run(&mut br, &st, &p, 2, &[(99, frame(BCAST, A, 2))]), [(1, 2), (2, 2), (0, 2)]);
        assert_eq!(counter(&st, "foreign"), 1);
        assert_eq!(br.lookup(0, &A), None);
    }

    #[test]
    fn a_burst_too_full_for_every_flood_reference_keeps_every_original() {
        let p = pool(512);
        let mut br = bridge(16, 0);
        let st = stats(&br);
        let frames: Vec<(u16, Vec<u8>)> = (0..200).map(|i| (10, frame(BCAST, A, i as u8))).collect();
        let out = run(&mut br, &st, &p, 1, &frames);
        assert_eq!(out.len(), MAX_BURST);
        assert_eq!(out.iter().filter(|o| o.0 == 1).count(), 200, "every original went out of its first port");
        assert_eq!(counter(&st, "flood_copies"), (MAX_BURST - 200) as u64);
        assert_eq!(counter(&st, "flood_no_room"), (200 - (MAX_BURST - 200)) as u64);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn static_entries_added_removed_and_learned_ones_flushed_while_the_bridge_runs() {
        let mut br = bridge(4, 0);
        br.ctl = Some(BridgeCtl {
            ports: vec!["left".into(), "right".into()],
            vlan_aware: false,
            members: vec![None, None],
        });
        crate::tests::running(Box::new(br), &["left", "right"], |info| {
            let ok = |l: &str| crate::tests::ctl(info, l).unwrap().unwrap_or_else(|e| panic!("{l}: {e}"));
            let err = |l: &str| crate::tests::ctl(info, l).unwrap().unwrap_err();
            assert!(ok("show bridge mac").starts_with("0 entries"));
            assert!(ok("bridge mac add 02:00:00:00:00:0a port right").contains("added"));
            assert!(
                ok("show bridge mac").contains("02:00:00:00:00:0a      0 right        static"),
                "{}",
                ok("show bridge mac")
            );
            assert!(err("bridge mac add 02:00:00:00:00:0b port middle").contains("not on the bridge"));
            assert!(err("bridge mac add 03:00:00:00:00:0b port left").contains("multicast"));
            assert!(err("bridge mac add 02:00:00:00:00:0b port left vlan 5").contains("not vlan_aware"));
            assert!(err("bridge mac del 02:00:00:00:00:0b").contains("no such entry"));
            assert!(ok("bridge mac flush").contains("0 learned entries flushed"), "static entries stay");
            assert!(ok("bridge mac del 02:00:00:00:00:0a").contains("removed"));
            assert!(ok("show bridge mac").starts_with("0 entries"));
        });
    }

    #[test]
    fn a_flush_forgets_learned_entries_of_one_port_or_all() {
        let p = pool(64);
        let mut br = bridge(16, 0);
        let st = stats(&br);
        run(&mut br, &st, &p, 1, &[(10, frame(BCAST, A, 1)), (11, frame(BCAST, B, 2)), (11, frame(BCAST, C, 3))]);
        assert_eq!(br.entries(), 3);
        let MacAnswer::Flushed(n, None) = br.table.change(MacChange::Flush(Some(1), 0)) else { panic!() };
        assert_eq!(n, 2);
        assert_eq!(br.lookup(0, &A), Some(0));
        assert_eq!(br.lookup(0, &B), None);
        let MacAnswer::Flushed(n, None) = br.table.change(MacChange::Flush(None, 0)) else { panic!() };
        assert_eq!(n, 1);
        assert_eq!(br.entries(), 0);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn a_big_table_is_flushed_and_shown_in_slices() {
        let mut br = bridge(20_000, 0);
        for k in 0..10_000u32 {
            let b = k.to_be_bytes();
            br.table.insert((0, [0x02, 0, b[0], b[1], b[2], b[3]]), (k % 2) as u16, 1, State::Learned);
        }
        br.ctl = Some(BridgeCtl {
            ports: vec!["left".into(), "right".into(), "third".into()],
            vlan_aware: false,
            members: vec![None; 3],
        });
        crate::tests::running(Box::new(br), &["left", "right", "third"], |info| {
            let ok = |l: &str| crate::tests::ctl(info, l).unwrap().unwrap_or_else(|e| panic!("{l}: {e}"));
            let shown = ok("show bridge mac");
            assert!(shown.starts_with("10000 entries\n"), "{}", &shown[..60]);
            assert_eq!(shown.lines().count(), 2 + SHOW_MAX + 1, "a header, SHOW_MAX entries, `... more`");
            assert!(shown.ends_with(&format!("... {} more\n", 10_000 - SHOW_MAX)));
            assert_eq!(ok("bridge mac flush port right"), "5000 learned entries flushed");
            assert_eq!(ok("bridge mac flush"), "5000 learned entries flushed");
            assert!(ok("show bridge mac").starts_with("0 entries"));
        });
    }

    #[test]
    fn a_static_entry_goes_only_where_its_vlan_is_carried() {
        let ctl = BridgeCtl {
            ports: vec!["trunk".into(), "access".into()],
            vlan_aware: true,
            members: vec![None, Some(Box::new(parse_vlans("10").unwrap()))],
        };
        let key = ctl.key("02:00:00:00:00:0a", Some("20")).unwrap();
        assert!(ctl.add(key, 0).is_ok(), "the trunk carries every VLAN");
        let e = ctl.add(key, 1).err().expect("refused");
        assert!(e.contains("port `access` does not carry VLAN 20"), "{e}");
        assert!(ctl.add(ctl.key("02:00:00:00:00:0a", Some("10")).unwrap(), 1).is_ok());
    }
}
