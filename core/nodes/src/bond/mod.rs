//! `bond` and `bond_tx`: link aggregation of ports, as Linux's bonding driver,
//! DPDK's `net_bonding` and VPP's bond interfaces do it.
//!
//! A `bond` node receives from its members (a source, as `port_rx`) and runs the
//! bond's control: member links, the active member, LACP. Its `bond_tx` node sends
//! what the graph gives it over the members (a sink, as `port_tx`). To the rest of
//! the graph the bond is one port, known by its first member: received packets
//! carry that port's id, and nodes that name a port for the bond (an `arp` or
//! `ip_router` interface) name the first member, whose MAC is the bond's.
//!
//! Modes:
//! - `active_backup`: one member carries traffic both ways; when its link goes
//!   down (checked every 100 ms) the next member that is up takes over.
//! - `balance`: every member that is up carries traffic, each flow on one member
//!   by its hash (`hash`: `l2`, `l23`, `l34`), as a static link aggregate.
//! - `lacp`: IEEE 802.1AX / 802.3ad ([`lacp`]): members carry traffic once the
//!   partner on their link agrees, by flow hash as `balance`. LACPDUs and marker
//!   responses leave through `bond_tx`.
//!
//! Frames from a member that does not carry traffic (down, backup, not collecting)
//! are dropped and counted. Slow protocol frames never reach the graph.

pub mod lacp;

use crate::kind::{NodeKind, MEMPOOL};
use crate::offload::TxFixup;
use crate::port::PortTx;
use ironpath_config::{Nexts, NodeSpec, ParamKind, ParamSpec, Params, QueueUse};
use ironpath_eal::{Burst, Mbuf, Mempool, RxQ, MAX_BURST};
use ironpath_graph::{Controller, CounterSpec, Dispatch, Msg, Node, NodeCx, Remote, SleepPlan};
use lacp::{Lacp, Pdu, Timing, PDU_FRAME};
use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

/// Most members a bond has.
pub const MAX_MEMBERS: usize = 16;
/// Control frames (LACPDUs, marker responses) waiting for `bond_tx` at most.
const CTL_QUEUE: usize = 64;
/// Marker responses per member and second at most (802.3 allows a requester five
/// markers a second).
const MARKERS_PER_S: u32 = 5;

ironpath_config::choice! {
    /// `bond`'s `mode`.
    pub enum Mode {
        /// One member at a time; the next takes over when its link goes down.
        ActiveBackup = "active_backup",
        /// Every member that is up, flows spread by hash.
        Balance = "balance",
        /// IEEE 802.3ad / 802.1AX LACP, flows spread by hash.
        Lacp = "lacp",
    }
}

ironpath_config::choice! {
    /// What the transmit hash covers.
    pub enum Hash {
        /// Source and destination MAC.
        L2 = "l2",
        /// MACs and IP addresses.
        L23 = "l23",
        /// IP addresses and TCP/UDP ports (MACs for non-IP frames).
        L34 = "l34",
    }
}

ironpath_config::choice! {
    /// How often the partner is asked to send LACPDUs.
    pub enum Rate {
        /// Every 30 s (its information expires after 90 s).
        Slow = "slow",
        /// Every second (expires after 3 s).
        Fast = "fast",
    }
}

/// What the two nodes of one bond share: the members that transmit, the control
/// frames to send, and the members' transmit halves until `bond_tx` takes them.
pub struct Shared {
    /// Bit `i`: member `i` carries traffic out.
    tx_mask: AtomicU64,
    /// Control frames for `bond_tx` (member, frame); taken with `try_lock` by both
    /// nodes, so neither ever waits.
    ctl: Mutex<Vec<(usize, Mbuf)>>,
    /// The members' senders, made where the queues are handed out.
    ports: Mutex<Option<Vec<PortTx>>>,
    /// The transmit hash (a [`Hash`] as `u8`), set by `bond`.
    hash: AtomicU8,
}

impl Shared {
    fn new() -> Shared {
        Shared {
            tx_mask: AtomicU64::new(0),
            ctl: Mutex::new(Vec::new()),
            ports: Mutex::new(None),
            hash: AtomicU8::new(0),
        }
    }
}

/// The object both nodes of bond `name` hold.
fn shared(env: &mut dyn crate::Env, name: &str) -> Arc<Shared> {
    let mut make = || Arc::new(Shared::new()) as Arc<dyn Any + Send + Sync>;
    env.shared(&format!("bond:{name}"), &mut make)
        .and_then(|a| a.downcast::<Shared>().ok())
        .unwrap_or_else(|| Arc::new(Shared::new()))
}

ironpath_graph::counters! {
    /// What `bond` counts.
    pub enum BondCounter {
        NotCollecting("not_collecting", "frames dropped: from a member that carries no traffic (down, backup, or not collecting)"),
        LacpIn("lacpdu_in", "LACPDUs taken"),
        LacpOut("lacpdu_out", "LACPDUs made"),
        LacpRefused("lacpdu_refused", "LACPDUs dropped: malformed, our own looped back, or on a member that is down"),
        Markers("marker_replies", "marker responses made"),
        MarkerLimited("marker_limited", "marker PDUs unanswered: more than 5 a second on a member, or responses"),
        SlowOther("slow_other", "slow protocol frames of another protocol (or in a mode without LACP), dropped"),
        Changes("changes", "changes of the members carrying traffic (failovers, members joining or leaving)"),
        NoMbuf("no_mbuf", "control frames not made: no buffer free, or bond_tx not taking them (LACPDUs are tried again)"),
        CtlFull("ctl_full", "control frames dropped: bond_tx did not take them"),
    }
}

/// One member, as the receiving node sees it.
struct Member {
    name: String,
    rxq: RxQ,
    port_id: u16,
    mac: [u8; 6],
    link: Option<Arc<AtomicBool>>,
    /// The port's administrative state (`set interface state`).
    admin: Option<Arc<AtomicBool>>,
    up: bool,
    /// When the last [`MARKERS_PER_S`] marker responses were made (oldest first).
    markers: [u64; MARKERS_PER_S as usize],
    /// Marker responses made so far.
    answered: u64,
}

/// The bond's receiving half and its control.
pub struct Bond {
    mode: Mode,
    members: Vec<Member>,
    /// What received packets carry as their port (the first member's id).
    port_id: u16,
    lacp: Option<Lacp>,
    /// `active_backup`'s member carrying traffic.
    active: Option<usize>,
    rx_mask: u64,
    tx_mask: u64,
    shared: Arc<Shared>,
    pool: Mempool,
    burst: usize,
    hz: u64,
    next_tick: u64,
    /// Control frames not yet handed to `bond_tx` (its lock was busy).
    pending: Vec<(usize, Mbuf)>,
    /// Slow protocol frames of this burst (member, frame).
    slow: Vec<(usize, [u8; PDU_FRAME])>,
    start: usize,
    ctl: Option<BondCtl>,
    hash: Hash,
}

/// The checks every tick: links, timers, which members carry traffic.
const TICK_MS: u64 = 100;

impl Bond {
    fn tick(&mut self, cx: &NodeCx<'_>, now: u64) {
        self.next_tick = now.saturating_add(self.tick_period());
        for i in 0..self.members.len() {
            let m = &self.members[i];
            let flag = |f: &Option<Arc<AtomicBool>>| f.as_ref().is_none_or(|l| l.load(Ordering::Relaxed));
            // A member carries traffic only while its link and its port are up.
            let up = flag(&m.link) && flag(&m.admin);
            if up != self.members[i].up || self.lacp.as_ref().is_some_and(|l| l.ports[i].rx == lacp::Rx::Disabled && up)
            {
                self.members[i].up = up;
                if let Some(l) = &mut self.lacp {
                    l.set_enabled(i, up, now);
                }
            }
        }
        let up = |m: &Member| m.up;
        let (rx, tx) = match self.mode {
            Mode::ActiveBackup => {
                if !self.active.is_some_and(|a| self.members[a].up) {
                    self.active = self.members.iter().position(up);
                }
                let bit = self.active.map_or(0, |a| 1u64 << a);
                (bit, bit)
            }
            Mode::Balance => {
                let bits = self.members.iter().enumerate().filter(|(_, m)| m.up).fold(0, |b, (i, _)| b | 1u64 << i);
                (bits, bits)
            }
            Mode::Lacp => {
                let (members, pool, pending) = (&self.members, &self.pool, &mut self.pending);
                let l = self.lacp.as_mut().expect("lacp mode has its machines");
                let (mut made, mut failed) = (0, 0);
                l.tick(now, |i, actor, partner| {
                    let mut f = [0u8; PDU_FRAME];
                    lacp::write_lacpdu(&mut f, members[i].mac, actor, partner);
                    // Not made (no buffer, or bond_tx is not taking control frames):
                    // the machine keeps it due and tries at the next tick.
                    let ok = frame(pool, pending, i, &f).is_ok();
                    if ok {
                        made += 1;
                    } else {
                        failed += 1;
                    }
                    ok
                });
                let (mut rx, mut tx) = (0u64, 0u64);
                for i in 0..self.members.len() {
                    if self.members[i].up && l.collecting(i) {
                        rx |= 1 << i;
                    }
                    if self.members[i].up && l.distributing(i) {
                        tx |= 1 << i;
                    }
                }
                cx.count(BondCounter::LacpOut, made);
                if failed > 0 {
                    cx.count(BondCounter::NoMbuf, failed);
                }
                (rx, tx)
            }
        };
        if tx != self.tx_mask {
            cx.count(BondCounter::Changes, 1);
            self.tx_mask = tx;
            self.shared.tx_mask.store(tx, Ordering::Relaxed);
        }
        self.rx_mask = rx;
        cx.gauge(BondGauge::MembersUp, self.members.iter().filter(|m| m.up).count() as u64);
        cx.gauge(BondGauge::Carrying, u64::from(tx.count_ones()));
        self.flush(cx);
    }

    /// The time between ticks, in TSC ticks.
    fn tick_period(&self) -> u64 {
        self.hz * TICK_MS / 1000
    }

    /// Hands pending control frames to `bond_tx` (if its lock is free now).
    fn flush(&mut self, cx: &NodeCx<'_>) {
        if self.pending.is_empty() {
            return;
        }
        if let Ok(mut q) = self.shared.ctl.try_lock() {
            let room = CTL_QUEUE.saturating_sub(q.len());
            let over = self.pending.len().saturating_sub(room);
            if over > 0 {
                cx.count(BondCounter::CtlFull, over as u64);
                self.pending.truncate(room);
            }
            q.append(&mut self.pending);
        }
    }

    /// The slow protocol frames of this burst; true if a LACPDU was taken (the
    /// machines then run at once: what the partner withdrew stops now, and our
    /// answer leaves now).
    fn slow_frames(&mut self, cx: &NodeCx<'_>, now: u64) -> bool {
        let mut taken = false;
        let slow = std::mem::take(&mut self.slow);
        for (i, f) in &slow {
            let Some(l) = self.lacp.as_mut() else {
                cx.count(BondCounter::SlowOther, 1);
                continue;
            };
            match lacp::parse(f) {
                Ok(Pdu::Lacp { actor, partner }) => {
                    if l.received(*i, &actor, &partner, now) {
                        cx.count(BondCounter::LacpIn, 1);
                        taken = true;
                    } else {
                        cx.count(BondCounter::LacpRefused, 1);
                    }
                }
                Ok(Pdu::MarkerInfo(tlv)) => {
                    let m = &mut self.members[*i];
                    // At most MARKERS_PER_S in any second: the oldest of the last
                    // ones must be a second old (or from a clock that stepped back).
                    let oldest = m.markers[0];
                    let full = m.answered >= u64::from(MARKERS_PER_S) && oldest <= now && now - oldest < self.hz;
                    if full || !m.up {
                        cx.count(BondCounter::MarkerLimited, 1);
                        continue;
                    }
                    let mut out = [0u8; PDU_FRAME];
                    lacp::write_marker_response(&mut out, m.mac, &tlv);
                    if frame(&self.pool, &mut self.pending, *i, &out).is_err() {
                        cx.count(BondCounter::NoMbuf, 1);
                        continue;
                    }
                    let m = &mut self.members[*i];
                    m.markers.rotate_left(1);
                    m.markers[MARKERS_PER_S as usize - 1] = now;
                    m.answered += 1;
                    cx.count(BondCounter::Markers, 1);
                }
                Ok(Pdu::MarkerResponse) => cx.count(BondCounter::MarkerLimited, 1),
                Err(lacp::Bad::Malformed) => cx.count(BondCounter::LacpRefused, 1),
                Err(lacp::Bad::Unknown) => cx.count(BondCounter::SlowOther, 1),
            }
        }
        self.slow = slow;
        self.slow.clear();
        self.flush(cx);
        taken
    }

    fn view(&self) -> BondView {
        let members = self
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| MemberView {
                name: m.name.clone(),
                up: m.up,
                collecting: self.rx_mask & (1 << i) != 0,
                distributing: self.tx_mask & (1 << i) != 0,
                lacp: self.lacp.as_ref().map(|l| l.ports[i].clone()),
            })
            .collect();
        BondView { mode: self.mode, hash: self.hash, members, aggregate: self.lacp.as_ref().and_then(|l| l.aggregate) }
    }
}

ironpath_graph::counters! {
    /// What `bond` shows as gauges.
    pub enum BondGauge {
        MembersUp("members_up", "members whose link is up"),
        Carrying("carrying", "members carrying traffic out"),
    }
}

/// Slow protocol frames kept from one burst at most (the rest are counted and
/// dropped; LACP repeats itself).
const SLOW_PER_BURST: usize = 16;

impl Node for Bond {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        let now = cx.now_tsc;
        // A clock that stepped back does not hold the ticks off.
        if now >= self.next_tick || self.next_tick - now > self.tick_period() {
            self.tick(cx, now);
        } else if !self.pending.is_empty() {
            self.flush(cx);
        }
        let room = pkts.room().min(self.burst);
        let n = self.members.len();
        // Which member each packet came from, by the queue it was received on (not
        // by the port id a driver writes: a ring or memif port may pass another's).
        let mut from = [0u8; MAX_BURST];
        let first = pkts.len();
        for k in 0..n {
            let got = pkts.len();
            if got >= room {
                break;
            }
            let m = (self.start + k) % n;
            let more = pkts.rx(&self.members[m].rxq, room - got);
            from[got - first..got - first + more].fill(m as u8);
        }
        self.start = (self.start + 1) % n;
        if pkts.len() == first {
            return Dispatch::All(0);
        }
        let (mut not_collecting, mut slow_over) = (0u64, 0u64);
        let rx_mask = self.rx_mask;
        let slow = &mut self.slow;
        let mut k = 0usize;
        pkts.retain(|_, d| {
            // Packets the burst held before this poll (none when the graph polls a
            // source) pass as they are.
            let Some(at) = k.checked_sub(first) else {
                k += 1;
                return true;
            };
            k += 1;
            let i = usize::from(from[at]);
            if d.len() >= 14 && d[12..14] == lacp::ETH_SLOW.to_be_bytes() {
                if slow.len() < SLOW_PER_BURST && d.len() >= PDU_FRAME {
                    let mut f = [0u8; PDU_FRAME];
                    f.copy_from_slice(&d[..PDU_FRAME]);
                    slow.push((i, f));
                } else {
                    slow_over += 1;
                }
                return false;
            }
            if rx_mask & (1 << i) == 0 {
                not_collecting += 1;
                return false;
            }
            true
        });
        for i in first..pkts.len() {
            pkts.header_mut(i).port = self.port_id;
        }
        if not_collecting > 0 {
            cx.count(BondCounter::NotCollecting, not_collecting);
            cx.dropped(not_collecting);
        }
        if slow_over > 0 {
            let k = if self.lacp.is_some() { BondCounter::LacpRefused } else { BondCounter::SlowOther };
            cx.count(k, slow_over);
        }
        if !self.slow.is_empty() && self.slow_frames(cx, now) {
            self.tick(cx, now);
        }
        Dispatch::All(0)
    }

    fn counters(&self) -> &'static [CounterSpec] {
        BondCounter::SPECS
    }

    fn gauges(&self) -> &'static [CounterSpec] {
        BondGauge::SPECS
    }

    fn sleep(&mut self, _cx: &mut NodeCx<'_>, plan: &mut SleepPlan) {
        plan.until(self.next_tick);
        for m in &self.members {
            match m.rxq.wake_fd() {
                Some(fd) => plan.wake_on(fd),
                None => plan.keep_polling("a member's receive queue has no wake-up source (the driver has none)"),
            }
        }
    }

    fn arm(&mut self, _cx: &mut NodeCx<'_>) -> bool {
        self.members.iter().all(|m| m.rxq.wake_arm(true))
    }

    fn woke(&mut self, _cx: &mut NodeCx<'_>) {
        for m in &self.members {
            m.rxq.wake_arm(false);
        }
    }

    fn controller(&mut self) -> Option<Box<dyn Controller>> {
        self.ctl.take().map(|c| Box::new(c) as Box<dyn Controller>)
    }

    fn apply(&mut self, _cx: &mut NodeCx<'_>, msg: Msg) -> Msg {
        match msg.downcast::<ShowBond>() {
            Ok(_) => Box::new(self.view()),
            Err(m) => m,
        }
    }

    fn stop(&mut self) {
        self.pending.clear();
        self.shared.ctl.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// Queues control frame `f` for member `i`: `Err` when no buffer is free or the
/// queue toward `bond_tx` is full.
fn frame(pool: &Mempool, pending: &mut Vec<(usize, Mbuf)>, i: usize, f: &[u8; PDU_FRAME]) -> Result<(), ()> {
    if pending.len() >= CTL_QUEUE {
        return Err(());
    }
    let mut m = Mbuf::alloc(pool).map_err(drop)?;
    m.append(PDU_FRAME).map_err(drop)?.copy_from_slice(f);
    pending.push((i, m));
    Ok(())
}

/// `show bond`'s question to the node.
struct ShowBond;

/// One member as `show bond` prints it.
struct MemberView {
    name: String,
    up: bool,
    collecting: bool,
    distributing: bool,
    lacp: Option<lacp::Port>,
}

/// The bond as `show bond` prints it.
struct BondView {
    mode: Mode,
    hash: Hash,
    members: Vec<MemberView>,
    aggregate: Option<(u16, [u8; 6], u16)>,
}

fn mac_str(m: &[u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

impl BondView {
    fn format(&self) -> String {
        use ironpath_config::Choice;
        let mut s = format!("mode: {}  hash: {}\n", self.mode.name(), self.hash.name());
        if self.mode == Mode::Lacp {
            match self.aggregate {
                Some((prio, sys, key)) => {
                    s.push_str(&format!("aggregator partner: system {} priority {prio} key {key}\n", mac_str(&sys)))
                }
                None => s.push_str("aggregator partner: none (no member has a partner)\n"),
            }
        }
        s.push_str(&format!("{:<12} {:<5} {:<10} {:<12}", "member", "link", "collecting", "distributing"));
        if self.mode == Mode::Lacp {
            s.push_str(&format!(
                " {:<9} {:<8} {:<8} {:<8} {:<58} {:<17} {:<5} {:<4} {}",
                "rx", "mux", "pdu-in", "pdu-out", "actor state", "partner system", "key", "port", "partner state"
            ));
        }
        s.push('\n');
        for m in &self.members {
            let yn = |b: bool| if b { "yes" } else { "no" };
            s.push_str(&format!(
                "{:<12} {:<5} {:<10} {:<12}",
                m.name,
                if m.up { "up" } else { "down" },
                yn(m.collecting),
                yn(m.distributing)
            ));
            if let Some(p) = &m.lacp {
                s.push_str(&format!(
                    " {:<9} {:<8} {:<8} {:<8} {:<58} {:<17} {:<5} {:<4} {}",
                    format!("{:?}", p.rx).to_lowercase(),
                    match p.mux {
                        lacp::Mux::Detached => "detached",
                        lacp::Mux::Waiting => "waiting",
                        lacp::Mux::Attached => "attached",
                        lacp::Mux::CollectingDistributing => "coll-dist",
                    },
                    p.received,
                    p.sent,
                    lacp::state_words(p.actor.state),
                    mac_str(&p.partner.system),
                    p.partner.key,
                    p.partner.port,
                    lacp::state_words(p.partner.state)
                ));
            }
            s.push('\n');
        }
        s
    }
}

/// The commands of a `bond` node.
const BOND_GRAMMAR: &[(&str, &str)] =
    &[("show bond", "mode, members (link, collecting, distributing) and, with LACP, each member's actor and partner")];

/// The control-plane half of a `bond` node.
struct BondCtl;

impl Controller for BondCtl {
    fn grammar(&self) -> &'static [(&'static str, &'static str)] {
        BOND_GRAMMAR
    }

    fn accepts(&self, words: &[&str]) -> bool {
        matches!(words, ["show", "bond", ..])
    }

    fn command(&mut self, words: &[&str], remote: &Remote) -> Result<String, String> {
        match words {
            ["show", "bond"] => match remote.call(Box::new(ShowBond))?.downcast::<BondView>() {
                Ok(v) => Ok(v.format()),
                Err(_) => Err("the node did not answer (it panicked)".into()),
            },
            _ => Err("usage: show bond".into()),
        }
    }
}

ironpath_graph::counters! {
    /// What `bond_tx` counts: `port_tx`'s counters over all members, then its own.
    pub enum BondTxCounter {
        Sent("sent", "packets"),
        TxFull("tx_full", "packets dropped (queue full)"),
        CsumSw("csum_sw", "checksums completed in software (the port cannot)"),
        GsoSplit("gso_split", "GSO frames or aggregates cut into segments in software"),
        OffloadDropped("offload_dropped", "packets dropped: an offload neither the port nor software could do"),
        AdminDown("admin_down", "packets dropped (the port is administratively down: set interface state)"),
        NoMember("no_member", "packets dropped: no member carries traffic (all down, or no LACP partner agrees)"),
        Control("control_sent", "LACPDUs and marker responses given to members"),
    }
}

/// The bond's transmitting half.
pub struct BondTx {
    shared: Arc<Shared>,
    ports: Vec<PortTx>,
    hash: Hash,
    /// The members carrying traffic, as last seen, and their indices.
    mask: u64,
    table: Vec<u8>,
    tags: [u16; MAX_BURST],
    outs: Vec<Burst>,
    ctl: Vec<(usize, Mbuf)>,
}

impl BondTx {
    /// Takes the members' senders once the `bond` node made them.
    fn ready(&mut self) -> bool {
        if self.ports.is_empty() {
            if let Ok(mut p) = self.shared.ports.try_lock() {
                if let Some(v) = p.take() {
                    self.hash = match self.shared.hash.load(Ordering::Relaxed) {
                        0 => Hash::L2,
                        1 => Hash::L23,
                        _ => Hash::L34,
                    };
                    self.outs = (0..v.len()).map(|_| Burst::new()).collect();
                    self.ports = v;
                }
            }
        }
        !self.ports.is_empty()
    }

    /// Sends the control frames `bond` queued.
    fn control(&mut self, cx: &mut NodeCx<'_>) {
        if let Ok(mut q) = self.shared.ctl.try_lock() {
            if q.is_empty() {
                return;
            }
            std::mem::swap(&mut *q, &mut self.ctl);
        } else {
            return;
        }
        let mut next = [0u16; MAX_BURST];
        let mut b = Burst::new();
        for (i, m) in self.ctl.drain(..) {
            let Some(p) = self.ports.get_mut(i) else { continue };
            if b.push(m).is_ok() {
                cx.count(BondTxCounter::Control, 1);
                p.process(cx, &mut b, &mut next);
            }
        }
    }

    fn retable(&mut self, mask: u64) {
        self.mask = mask;
        self.table.clear();
        self.table.extend((0..self.ports.len() as u8).filter(|&i| mask & (1 << i) != 0));
    }
}

/// The flow hash of a frame for `h` (0 for what it cannot read: such frames share
/// one member).
#[inline]
pub fn flow_hash(d: &[u8], h: Hash) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mix = |acc: u64, v: u64| (acc ^ v).wrapping_mul(K).rotate_left(29);
    if d.len() < 14 {
        return 0;
    }
    let rd = |o: usize, n: usize| -> u64 { d[o..o + n].iter().fold(0u64, |a, &b| a << 8 | u64::from(b)) };
    let l2 = mix(mix(0, rd(0, 6)), rd(6, 6));
    if h == Hash::L2 {
        return l2;
    }
    // Up to two VLAN tags (802.1ad outer, 802.1Q inner).
    let mut off = 12;
    let mut et = rd(12, 2) as u16;
    for _ in 0..2 {
        if (et == 0x8100 || et == 0x88a8) && d.len() >= off + 6 {
            off += 4;
            et = rd(off, 2) as u16;
        }
    }
    let ip = off + 2;
    let (l3, proto, l4) = match et {
        0x0800 if d.len() >= ip + 20 && d[ip] >> 4 == 4 => {
            let ihl = usize::from(d[ip] & 0x0f) * 4;
            let frag = rd(ip + 6, 2) & 0x3fff != 0;
            (mix(rd(ip + 12, 4), rd(ip + 16, 4)), if frag { 0 } else { d[ip + 9] }, ip + ihl)
        }
        0x86dd if d.len() >= ip + 40 => {
            (mix(mix(rd(ip + 8, 8), rd(ip + 16, 8)), mix(rd(ip + 24, 8), rd(ip + 32, 8))), d[ip + 6], ip + 40)
        }
        _ => return l2,
    };
    match h {
        Hash::L23 => mix(l2, l3),
        _ if (proto == 6 || proto == 17) && d.len() >= l4 + 4 => mix(l3, rd(l4, 4)),
        _ => l3,
    }
}

impl Node for BondTx {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, next: &mut [u16; MAX_BURST]) -> Dispatch {
        if !self.ready() {
            cx.count(BondTxCounter::NoMember, pkts.len() as u64);
            cx.dropped(pkts.len() as u64);
            pkts.free_all();
            return Dispatch::Consumed;
        }
        self.control(cx);
        let mask = self.shared.tx_mask.load(Ordering::Relaxed);
        if mask != self.mask {
            self.retable(mask);
        }
        match self.table.len() {
            0 => {
                cx.count(BondTxCounter::NoMember, pkts.len() as u64);
                cx.dropped(pkts.len() as u64);
                pkts.free_all();
            }
            1 => {
                self.ports[usize::from(self.table[0])].process(cx, pkts, next);
            }
            n => {
                let all = self.ports.len() as u64;
                for i in 0..pkts.len() {
                    let h = flow_hash(pkts.data(i), self.hash);
                    // Multiply-shift: the hash's top bits pick a member among all of
                    // them, so that a member going down moves only its own flows; a
                    // flow of a member that carries no traffic goes to one of those
                    // that do, by the hash's low bits.
                    let k = ((h >> 32) * all) >> 32;
                    self.tags[i] = if self.mask & (1 << k) != 0 {
                        k as u16
                    } else {
                        u16::from(self.table[((((h as u32) as u64) * n as u64) >> 32) as usize])
                    };
                }
                pkts.distribute(&self.tags, &mut self.outs);
                for (p, out) in self.ports.iter_mut().zip(self.outs.iter_mut()) {
                    if !out.is_empty() {
                        p.process(cx, out, next);
                    }
                }
            }
        }
        Dispatch::Consumed
    }

    fn counters(&self) -> &'static [CounterSpec] {
        BondTxCounter::SPECS
    }

    fn idle(&mut self, cx: &mut NodeCx<'_>) {
        if self.ready() {
            self.control(cx);
            for p in &mut self.ports {
                p.idle(cx);
            }
        }
    }

    fn sleep(&mut self, cx: &mut NodeCx<'_>, plan: &mut SleepPlan) {
        // Control frames come from the `bond` node without a signal: look at least
        // every tick.
        plan.until(cx.now_tsc + ironpath_eal::tsc::tsc_hz() * TICK_MS / 1000);
        for p in &mut self.ports {
            p.sleep(cx, plan);
        }
    }

    fn stop(&mut self) {
        self.shared.ctl.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.ctl.clear();
    }
}

/// The bond's settings, read from its parameters.
struct Settings<'a> {
    members: Vec<&'a str>,
    mode: Mode,
    hash: Hash,
    rate: Rate,
}

fn settings(p: &Params) -> Result<Settings<'_>, crate::NodeError> {
    let v = crate::kind::Values(p);
    let recs = v.records("members")?;
    let members: Vec<&str> = recs.iter().filter_map(|r| r.port("port")).collect();
    if members.is_empty() || members.len() > MAX_MEMBERS {
        return Err(crate::NodeError::Param {
            param: "members",
            reason: format!("a bond has 1 to {MAX_MEMBERS} members; {} given", members.len()),
        });
    }
    for (i, m) in members.iter().enumerate() {
        if members[..i].contains(m) {
            return Err(crate::NodeError::Param { param: "members", reason: format!("port `{m}` is a member twice") });
        }
    }
    Ok(Settings { members, mode: v.choice("mode")?, hash: v.choice("hash")?, rate: v.choice("lacp_rate")? })
}

const MEMBER_FIELDS: &[ParamSpec] = &[ParamSpec::new("port", ParamKind::Port).required().doc("a member port")];

/// `bond`: the receiving half and the control of a bond.
pub const BOND: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "bond",
        doc: "link aggregation: receive from the member ports and run the bond (active-backup, balance, LACP); its bond_tx sends",
        params: &[
            ParamSpec::new("members", ParamKind::Records(MEMBER_FIELDS))
                .required()
                .doc("the member ports, in order of preference (`[{port: p0}, {port: p1}]`; the first names the bond)"),
            ParamSpec::new("mode", ParamKind::Enum(<Mode as ironpath_config::Choice>::NAMES))
                .default("lacp")
                .doc("active_backup, balance (static, by flow hash) or lacp (802.3ad, by flow hash)"),
            ParamSpec::new("hash", ParamKind::Enum(<Hash as ironpath_config::Choice>::NAMES))
                .default("l34")
                .doc("what picks a flow's member: l2 (MACs), l23 (+ IP addresses), l34 (IP addresses and ports)"),
            ParamSpec::new("lacp_rate", ParamKind::Enum(<Rate as ironpath_config::Choice>::NAMES))
                .default("slow")
                .doc("LACPDUs asked of the partner every 30 s (slow) or every second (fast)"),
            ParamSpec::new("system_priority", ParamKind::Uint { min: 1, max: 65535 })
                .default("65535")
                .doc("LACP system priority"),
            ParamSpec::new("key", ParamKind::Uint { min: 1, max: 65535 }).default("1").doc("LACP key of every member"),
            ParamSpec::new("queue", ParamKind::Uint { min: 0, max: 63 })
                .default("0")
                .doc("RX queue taken on every member"),
            ParamSpec::new("tx_queue", ParamKind::Uint { min: 0, max: 63 })
                .default("0")
                .doc("TX queue taken on every member (by the bond's bond_tx)"),
            ParamSpec::new("burst", ParamKind::Uint { min: 1, max: 256 }).default("32").doc("packets per poll"),
            MEMPOOL,
        ],
        nexts: Nexts::Fixed(&["out"]),
        source: true,
        queue: QueueUse::None,
        check: Some(|p| crate::kind::refused_at(p, settings(p))),
        ..NodeSpec::DEFAULT
    },
    build: |b, env| {
        let p = b.params();
        let s = settings(&b.cfg.params)?;
        let hz = env.tsc_hz();
        let (q, txq): (u16, u16) = (p.int("queue")?, p.int("tx_queue")?);
        let shared = shared(env, &b.cfg.name);
        let mut members = Vec::new();
        let mut ports = Vec::new();
        for name in &s.members {
            let fixup = TxFixup::new(env.port_tx_offloads(name), env.mempool(None, Some(name))?);
            ports.push(PortTx::new(env.tx_queue(name, txq)?, 0, fixup).with_admin(env.admin_state(name)));
            members.push(Member {
                name: name.to_string(),
                rxq: env.rx_queue(name, q)?,
                port_id: env.port_id(name)?,
                mac: env.port_mac(name)?,
                link: env.link_state(name),
                admin: env.admin_state(name),
                up: false,
                markers: [0; MARKERS_PER_S as usize],
                answered: 0,
            });
        }
        let system = members[0].mac;
        let lacp = (s.mode == Mode::Lacp).then(|| {
            let timing = Timing { second: hz, fast: s.rate == Rate::Fast };
            Lacp::new(members.len(), system, p.int("system_priority").unwrap_or(65535), p.int("key").unwrap_or(1), timing)
        });
        *shared.ports.lock().unwrap_or_else(|e| e.into_inner()) = Some(ports);
        shared.hash.store(s.hash as u8, Ordering::Relaxed);
        Ok(Box::new(Bond {
            mode: s.mode,
            port_id: members[0].port_id,
            members,
            lacp,
            active: None,
            rx_mask: 0,
            tx_mask: 0,
            shared,
            pool: env.mempool(p.raw().mempool("mempool"), Some(s.members[0]))?,
            burst: p.int("burst")?,
            hz,
            next_tick: 0,
            pending: Vec::new(),
            slow: Vec::with_capacity(SLOW_PER_BURST),
            start: 0,
            ctl: Some(BondCtl),
            hash: s.hash,
        }))
    },
};

/// `bond_tx`: the transmitting half of a bond.
pub const BOND_TX: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "bond_tx",
        doc: "send over a bond's members (the one carrying traffic, or each flow's by hash); drops what no member carries",
        params: &[ParamSpec::new("bond", ParamKind::Node("bond")).required().doc("the bond (a `bond` node)")],
        ..NodeSpec::DEFAULT
    },
    build: |b, env| {
        let name = b.params().str("bond")?;
        Ok(Box::new(BondTx {
            shared: shared(env, name),
            ports: Vec::new(),
            hash: Hash::L34,
            mask: 0,
            table: Vec::new(),
            tags: [0; MAX_BURST],
            outs: Vec::new(),
            ctl: Vec::new(),
        }))
    },
};

#[cfg(test)]
mod attack_tests;
#[cfg(test)]
mod tests;
