//! One lcore's graph and its walk: sources are polled, every other node runs when
//! its input frame holds packets, in topological order, so a packet crosses the
//! whole lcore-local part of the graph in one walk.

use crate::control::{ApplyPanicked, Mailbox, Msg};
use crate::guard::{self, Guard, Walking};
use crate::info::{EdgeStats, LcoreStats};
use crate::node::{Dispatch, Node, NodeCx, SleepPlan, DROP};
use crate::stats::NodeStats;
use crate::trace::TraceBuf;
use ironpath_eal::sleep::{Doorbell, RxMode, Sleeper, Woke, ADAPTIVE_IDLE, MIN_SLEEP};
use ironpath_eal::tsc::rdtsc;
use ironpath_eal::{Burst, MAX_BURST};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// Where one next edge of a node leads on this lcore.
pub(crate) struct Target {
    /// Index of the receiving node in this lcore's order.
    pub node: usize,
    pub edge: Arc<EdgeStats>,
}

pub(crate) struct RtNode {
    pub name: Arc<str>,
    pub node: Box<dyn Node>,
    /// Polled every walk (sources and ring receivers).
    pub always: bool,
    /// Per declared next: its target, or `None` when unconnected.
    pub targets: Vec<Option<Target>>,
    pub next_names: Vec<Arc<str>>,
    pub stats: Arc<NodeStats>,
    pub trace_left: Arc<AtomicU32>,
    /// Captures watching it.
    pub tap: Arc<crate::capture::NodeTap>,
    /// What its panics did (isolation, fencing, logging).
    pub guard: Guard,
    /// Its controller's mailbox, when it has one ([`crate::control`]).
    pub mailbox: Option<Arc<Mailbox>>,
    /// An answer (with its change's number) the mailbox was busy for, given back
    /// the next walk.
    pub answer: Option<(u64, Msg)>,
}

/// What an lcore shares with the control plane and the other lcores.
pub(crate) struct Shared {
    /// Bumped by a controller that left a change in a mailbox of this lcore.
    pub requests: Arc<AtomicU64>,
    /// Set when a trace or a capture is armed on one of its nodes.
    pub watch: Arc<AtomicBool>,
    /// Rung by whoever gives the lcore work from elsewhere, in case it sleeps.
    pub bell: Arc<Doorbell>,
}

/// A packet a trace follows: its mbuf's address, its record so far, the header lines
/// last shown for it (a hop whose frame decodes the same says so instead), and
/// whether it still goes on (records are kept in the order they began until the
/// walk ends).
type Followed = (usize, String, String, bool);

/// The part of a graph one lcore runs.
pub struct LcoreGraph {
    /// Lcore id.
    pub lcore: u32,
    /// CPU to pin the lcore's thread to.
    pub cpu: Option<u32>,
    pub(crate) nodes: Vec<RtNode>,
    /// Input frame of each node. Boxed so a whole frame moves to an empty next
    /// frame by swapping two pointers (VPP hands frames over the same way).
    #[allow(clippy::vec_box, reason = "boxed on purpose: handing a frame over swaps two pointers")]
    inputs: Vec<Box<Burst>>,
    #[allow(clippy::vec_box, reason = "as `inputs`")]
    scratch: Vec<Box<Burst>>,
    /// A burst given to a node one packet at a time waits here.
    held: Box<Burst>,
    /// TSC ticks per second (for the panic guard's times).
    hz: u64,
    /// Set when a trace or a capture is armed on one of its nodes ([`LcoreGraph::call_watched`]).
    watch: Arc<AtomicBool>,
    next: Box<[u16; MAX_BURST]>,
    trace: Arc<TraceBuf>,
    stats: Arc<LcoreStats>,
    walk: u64,
    /// Bumped by a controller that left a change in a mailbox of this lcore.
    requests: Arc<AtomicU64>,
    /// `requests` as last served.
    requests_seen: u64,
    /// A mailbox was busy or an answer undelivered: look again next walk.
    mail_again: bool,
    /// Packets traced at a node earlier in this walk, followed through the nodes
    /// after it: each mbuf's address and its record so far (empty unless a trace is
    /// armed).
    followed: Vec<Followed>,
    prev_now: u64,
    prev_busy: bool,
    stopped: bool,
    /// How the lcore waits for packets.
    mode: RxMode,
    /// Its epoll set and doorbell.
    sleeper: Sleeper,
    plan: SleepPlan,
    /// TSC of the last walk that found work.
    last_work: u64,
    /// A node kept the lcore polling: no new attempt to sleep before this TSC.
    retry_at: u64,
    /// ADAPTIVE_IDLE and MIN_SLEEP in TSC ticks.
    adaptive_tsc: u64,
    min_sleep_tsc: u64,
}

/// An idle walk longer than this many TSC cycles counts in
/// [`LcoreStats::long_idle_cycles`]: an idle walk of a graph of ten nodes takes a
/// few hundred, an interrupt that delivers one frame several thousand.
pub const LONG_IDLE_WALK: u64 = 4096;

/// One walk in this many measures node cycles (a power of two).
pub const TIME_EVERY: u64 = 8;

impl LcoreGraph {
    pub(crate) fn new(
        lcore: u32,
        cpu: Option<u32>,
        nodes: Vec<RtNode>,
        trace: Arc<TraceBuf>,
        stats: Arc<LcoreStats>,
        shared: Shared,
    ) -> std::io::Result<Self> {
        let max_nexts = nodes.iter().map(|n| n.targets.len()).max().unwrap_or(0);
        guard::install_hook();
        let hz = ironpath_eal::tsc::tsc_hz();
        let Shared { requests, watch, bell } = shared;
        let per_us = hz / 1_000_000;
        let mut g = Self {
            lcore,
            cpu,
            inputs: nodes.iter().map(|_| Box::new(Burst::new())).collect(),
            scratch: (0..max_nexts).map(|_| Box::new(Burst::new())).collect(),
            held: Box::new(Burst::new()),
            hz,
            nodes,
            next: Box::new([DROP; MAX_BURST]),
            trace,
            stats,
            walk: 0,
            requests,
            watch,
            requests_seen: 0,
            mail_again: false,
            followed: Vec::new(),
            prev_now: 0,
            prev_busy: false,
            stopped: false,
            mode: RxMode::Poll,
            sleeper: Sleeper::new(bell)?,
            plan: SleepPlan::default(),
            last_work: 0,
            retry_at: 0,
            adaptive_tsc: per_us * ADAPTIVE_IDLE.as_micros() as u64,
            min_sleep_tsc: per_us * MIN_SLEEP.as_micros() as u64,
        };
        g.set_rx_mode(RxMode::default());
        Ok(g)
    }

    /// How the lcore waits for packets (set before it runs).
    pub fn set_rx_mode(&mut self, mode: RxMode) {
        self.mode = mode;
        self.sleeper.bell().set_may_sleep(mode != RxMode::Poll);
        let m = match mode {
            RxMode::Poll => 0,
            RxMode::Adaptive => 1,
            RxMode::Interrupt => 2,
        };
        self.stats.mode.store(m, Ordering::Relaxed);
    }

    /// Its rx mode.
    pub fn rx_mode(&self) -> RxMode {
        self.mode
    }

    /// Its doorbell (to wake it when it sleeps: the runner's stop).
    pub fn bell(&self) -> Arc<Doorbell> {
        self.sleeper.bell().clone()
    }

    /// Walk until `stop` is set; between walks that find no work, sleep as the rx
    /// mode says ([`LcoreGraph::set_rx_mode`]). Whoever sets `stop` rings
    /// [`LcoreGraph::bell`].
    pub fn run(&mut self, stop: &AtomicBool) {
        // One relaxed load per walk: the flag only has to be seen eventually.
        while !stop.load(Ordering::Relaxed) {
            if self.run_once() == 0 && self.mode != RxMode::Poll {
                self.idle_sleep(stop);
            }
        }
    }

    /// The walk found no work: sleep if the mode and the nodes allow it (the
    /// protocol is in [`ironpath_eal::sleep`]).
    #[cold]
    #[inline(never)]
    fn idle_sleep(&mut self, stop: &AtomicBool) {
        let now = rdtsc();
        if self.mode == RxMode::Adaptive && now.wrapping_sub(self.last_work) < self.adaptive_tsc {
            return;
        }
        if now < self.retry_at {
            return;
        }
        // What wakes it: each node arms its wake-up source, or gives a timer, or
        // says it must keep polling.
        self.plan.clear();
        for (i, rt) in self.nodes.iter_mut().enumerate() {
            self.plan.node = i as u16;
            self.plan.said = false;
            let mut cx = NodeCx { now_tsc: now, lcore: self.lcore, stats: &rt.stats, live: true };
            let plan = &mut self.plan;
            if let Err(payload) = std::panic::catch_unwind(AssertUnwindSafe(|| rt.node.sleep(&mut cx, plan))) {
                rt.guard.panicked((self.lcore, &rt.name), &rt.stats, &*payload, 0, (now, self.hz));
                self.plan.keep_polling("a node panicked preparing to sleep");
            }
            if rt.always && !self.plan.said {
                self.plan.keep_polling("a source node that names no wake-up source");
            }
        }
        let timeout = match (self.plan.poll, self.plan.deadline) {
            (Some(_), _) => None,
            (None, Some(d)) if d.saturating_sub(now) < self.min_sleep_tsc => {
                // A timer due sooner than a sleep is worth: poll until it.
                return;
            }
            (None, d) => d.map(|d| std::time::Duration::from_nanos(tsc_ns(d - now, self.hz))),
        };
        if self.plan.poll.is_some() {
            self.stats.kept_polling.add(1);
            // Try again in a while (a queue without a wake-up source stays so).
            self.retry_at = now + self.adaptive_tsc * 20;
            return;
        }
        // Arm every wake-up (only now that the lcore will sleep: arming may cost a
        // register write or a peer's attention).
        let mut armed = true;
        for rt in self.nodes.iter_mut() {
            let mut cx = NodeCx { now_tsc: now, lcore: self.lcore, stats: &rt.stats, live: true };
            match std::panic::catch_unwind(AssertUnwindSafe(|| rt.node.arm(&mut cx))) {
                Ok(true) => {}
                Ok(false) => armed = false,
                Err(payload) => {
                    rt.guard.panicked((self.lcore, &rt.name), &rt.stats, &*payload, 0, (now, self.hz));
                    armed = false;
                }
            }
        }
        if !armed {
            self.stats.kept_polling.add(1);
            self.retry_at = now + self.adaptive_tsc * 20;
            self.woke_all(now);
            return;
        }
        // The last poll, with every wake-up armed and the doorbell marked: a packet
        // or a request that came before is found now, one after wakes the sleep.
        let bell = self.sleeper.bell().clone();
        bell.asleep();
        let pending = self.requests.load(Ordering::Acquire) != self.requests_seen || self.mail_again;
        if pending || stop.load(Ordering::Relaxed) || self.run_once() > 0 {
            bell.awake();
            self.woke_all(rdtsc());
            return;
        }
        let t0 = rdtsc();
        let woke = self.sleeper.sleep(&self.plan.fds, timeout);
        let t1 = rdtsc();
        bell.awake();
        self.stats.sleeps.add(1);
        self.stats.asleep_cycles.add(t1.wrapping_sub(t0));
        match woke {
            Ok(Woke::Source(_)) => self.stats.wake_rx.add(1),
            Ok(Woke::Bell) => self.stats.wake_bell.add(1),
            Ok(Woke::Timer | Woke::Interrupted) => self.stats.wake_timer.add(1),
            Err(_) => {
                // A descriptor gone under us (a queue released): poll a while
                // (counted; no log line from the lcore).
                self.stats.kept_polling.add(1);
                self.retry_at = t1 + self.adaptive_tsc * 20;
            }
        }
        self.woke_all(t1);
        // The sleep is neither a busy nor a long idle walk.
        self.prev_now = rdtsc();
        self.prev_busy = false;
    }

    /// Tell every node the lcore polls again ([`Node::woke`]).
    fn woke_all(&mut self, now: u64) {
        for rt in self.nodes.iter_mut() {
            let mut cx = NodeCx { now_tsc: now, lcore: self.lcore, stats: &rt.stats, live: true };
            if let Err(payload) = std::panic::catch_unwind(AssertUnwindSafe(|| rt.node.woke(&mut cx))) {
                rt.guard.panicked((self.lcore, &rt.name), &rt.stats, &*payload, 0, (now, self.hz));
            }
        }
    }

    /// A trace or a capture is armed on one of its nodes (as of its last walk, or
    /// armed since): its node calls go through the watched path.
    pub fn watched(&self) -> bool {
        self.watch.load(Ordering::Relaxed)
    }

    /// Names of the nodes in walk order.
    pub fn node_names(&self) -> impl Iterator<Item = &str> {
        self.nodes.iter().map(|n| &*n.name)
    }

    /// Walk the graph once; returns how many packets the nodes handled (0 = idle;
    /// then every node's [`Node::idle`] is called).
    pub fn run_once(&mut self) -> usize {
        let now = rdtsc();
        // The previous walk lasted until now: charge it to the lcore if it was busy,
        // or to the long idle walks if it took far longer than an idle walk does.
        let took = now.wrapping_sub(self.prev_now);
        if self.prev_busy {
            self.stats.busy_cycles.add(took);
        } else if took > LONG_IDLE_WALK && self.prev_now != 0 {
            self.stats.long_idle_cycles.add(took);
        }
        self.prev_now = now;
        // Node cycles are sampled: one walk in TIME_EVERY reads the TSC after each
        // node call (charging the call from the previous read to the end of its
        // dispatch, as VPP reads the clock once per dispatch); other walks read no
        // clock per node.
        self.walk = self.walk.wrapping_add(1);
        let timed = self.walk & (TIME_EVERY - 1) == 0;
        let _walking = Walking::begin();
        // Table changes are taken here, between two bursts: one load when none waits.
        let requests = self.requests.load(Ordering::Acquire);
        if requests != self.requests_seen || self.mail_again {
            self.requests_seen = requests;
            self.take_changes(now);
        }
        // A trace or a capture on a node of this lcore: one load per walk when none is.
        let watched = self.watch.load(Ordering::Acquire);
        let mut w = Walk { now, timed, watched, t_prev: now, received: 0 };
        let mut work = 0;
        for i in 0..self.nodes.len() {
            let n_in = self.inputs[i].len();
            let rt = &mut self.nodes[i];
            if n_in == 0 && !rt.always {
                continue;
            }
            if rt.guard.fenced(now, &rt.stats) {
                rt.stats.fenced_drops.add(n_in as u64);
                self.inputs[i].free_all();
                continue;
            }
            work += if rt.guard.isolate > 0 && n_in > 1 {
                self.call_isolated(i, &mut w)
            } else if w.watched {
                self.call_watched(i, &mut w)
            } else {
                self.call(i, &mut w)
            };
        }
        self.stats.walks.add(1);
        if w.watched {
            self.end_watched_walk();
        }
        self.prev_busy = work > 0;
        if work > 0 {
            self.last_work = now;
            self.stats.busy_walks.add(1);
            self.stats.received.add(w.received as u64);
        }
        if work == 0 {
            for rt in self.nodes.iter_mut() {
                if rt.guard.fenced(now, &rt.stats) {
                    continue;
                }
                let mut cx = NodeCx { now_tsc: now, lcore: self.lcore, stats: &rt.stats, live: true };
                match std::panic::catch_unwind(AssertUnwindSafe(|| rt.node.idle(&mut cx))) {
                    Ok(()) => rt.guard.returned(),
                    Err(payload) => rt.guard.panicked((self.lcore, &rt.name), &rt.stats, &*payload, 0, (now, self.hz)),
                }
            }
        }
        work
    }

    /// End a walk a trace or a capture watched: a followed packet that left the lcore
    /// (a ring, a port) ends its record here; once no node is watched any more, the
    /// lcore's walks go back to the plain calls.
    #[cold]
    #[inline(never)]
    fn end_watched_walk(&mut self) {
        for (_, record, _, _) in self.followed.drain(..) {
            self.trace.push(record);
        }
        // Cleared first, then set again while a node is still watched: an arming that
        // sets the flag after the swap keeps it set; one before it is seen by the scan
        // (its node's state was written before the flag).
        self.watch.swap(false, Ordering::AcqRel);
        if self.nodes.iter().any(|rt| rt.trace_left.load(Ordering::Relaxed) > 0 || rt.tap.armed() != 0) {
            self.watch.store(true, Ordering::Release);
        }
    }

    /// Give every node with a change waiting its change ([`Node::apply`]) and leave
    /// its answer; a mailbox the writer holds now is tried again next walk.
    #[cold]
    #[inline(never)]
    fn take_changes(&mut self, now: u64) {
        self.mail_again = false;
        for rt in self.nodes.iter_mut() {
            let Some(mb) = rt.mailbox.clone() else { continue };
            let Some(mut slot) = mb.try_slot() else {
                self.mail_again = true;
                continue;
            };
            if let Some(answer) = rt.answer.take() {
                slot.back = Some(answer);
            }
            let Some((n, msg)) = slot.offer.take() else { continue };
            drop(slot);
            let mut cx = NodeCx { now_tsc: now, lcore: self.lcore, stats: &rt.stats, live: true };
            let answer = match std::panic::catch_unwind(AssertUnwindSafe(|| rt.node.apply(&mut cx, msg))) {
                Ok(a) => a,
                Err(payload) => {
                    rt.guard.panicked((self.lcore, &rt.name), &rt.stats, &*payload, 0, (now, self.hz));
                    Box::new(ApplyPanicked)
                }
            };
            let given = match mb.try_slot() {
                Some(mut slot) => {
                    slot.back = Some((n, answer));
                    true
                }
                None => {
                    rt.answer = Some((n, answer));
                    false
                }
            };
            self.mail_again |= !given;
        }
    }

    /// Give node `i` its input frame; dispatch what it sends. Returns the packets it
    /// handled. The walk's plain call: nothing watches the lcore.
    #[inline(always)]
    fn call(&mut self, i: usize, w: &mut Walk) -> usize {
        let n_in = self.inputs[i].len();
        match self.process(i, w) {
            Ok(d) => self.pass_on(i, n_in, d, w),
            Err(dropped) => n_in.max(dropped),
        }
    }

    /// [`LcoreGraph::call`] on an lcore a trace or a capture watches: the node's
    /// packets are recorded or copied before and after it runs.
    #[cold]
    #[inline(never)]
    fn call_watched(&mut self, i: usize, w: &mut Walk) -> usize {
        let input = &self.inputs[i];
        let rt = &self.nodes[i];
        let n_in = input.len();
        let tracing = rt.trace_left.load(Ordering::Relaxed) > 0;
        let pre: Vec<(usize, String, String)> = if tracing {
            (0..n_in)
                .map(|k| (addr(input, k), trace_record(&*rt.node, input, k)))
                .map(|(a, (h, l))| (a, h, l))
                .collect()
        } else {
            Vec::new()
        };
        // Packets a trace follows from a node earlier in this walk: their hop here.
        let hops = if self.followed.is_empty() { Vec::new() } else { hops_in(&mut self.followed, &*rt.node, input) };
        let tapped = rt.tap.armed();
        if tapped != 0 && n_in > 0 {
            crate::capture::tap_input(&rt.tap, tapped, input, w.now);
        }
        let d = match self.process(i, w) {
            Ok(d) => d,
            Err(dropped) => {
                for (j, mut record, _, _) in hops {
                    record.push_str(&format!(
                        "\n  then lcore {} {}: panicked (its burst dropped)",
                        self.lcore, self.nodes[i].name
                    ));
                    self.followed[j].1 = record;
                }
                return n_in.max(dropped);
            }
        };
        let (input, rt) = (&self.inputs[i], &self.nodes[i]);
        if !input.is_empty() || n_in > 0 {
            if tapped != 0 {
                crate::capture::tap_output(&rt.tap, tapped, input, d, &self.next, w.now);
            }
            if tracing || !hops.is_empty() {
                let t = self.trace.since_start_ns(rdtsc(), self.hz);
                let at = (self.lcore, t);
                if tracing {
                    trace_call(&self.trace, at, rt, input, pre, n_in, d, &self.next, &mut self.followed);
                }
                if !hops.is_empty() {
                    follow_call(at, rt, input, hops, d, &self.next, &mut self.followed);
                }
            }
        }
        self.pass_on(i, n_in, d, w)
    }

    /// Run node `i` on its input frame, a panic caught: `Err` holds how many packets
    /// the panicking call dropped.
    #[inline(always)]
    fn process(&mut self, i: usize, w: &Walk) -> Result<Dispatch, usize> {
        let input = &mut self.inputs[i];
        let rt = &mut self.nodes[i];
        rt.stats.calls.add(1);
        let mut cx = NodeCx { now_tsc: w.now, lcore: self.lcore, stats: &rt.stats, live: true };
        let next = &mut self.next;
        match std::panic::catch_unwind(AssertUnwindSafe(|| rt.node.process(&mut cx, input, next))) {
            Ok(d) => {
                rt.guard.returned();
                Ok(d)
            }
            Err(payload) => {
                let dropped = input.len();
                input.free_all();
                rt.guard.panicked((self.lcore, &rt.name), &rt.stats, &*payload, dropped, (w.now, self.hz));
                Err(dropped)
            }
        }
    }

    /// Count node `i`'s call (it was given `n_in` packets and returned `d`) and move
    /// its output along its edges. Returns the packets it handled.
    #[inline(always)]
    fn pass_on(&mut self, i: usize, n_in: usize, d: Dispatch, w: &mut Walk) -> usize {
        let (left, right) = self.inputs.split_at_mut(i + 1);
        let input = &mut left[i];
        let rt = &mut self.nodes[i];
        let n_out = input.len();
        let n = n_in.max(n_out);
        if n == 0 {
            if w.timed {
                let t = rdtsc();
                rt.stats.cycles.add(t.wrapping_sub(w.t_prev));
                rt.stats.idle_cycles.add(t.wrapping_sub(w.t_prev));
                w.t_prev = t;
            }
            return 0;
        }
        if rt.always {
            w.received += n_out.saturating_sub(n_in);
        }
        // A node's packets are those it was given; a node given none (a source, a
        // port's receiver) counts those it brought in. What a node adds to its
        // input (a mirror's copies, a TCP node's replies) is counted on its edges.
        let counted = if n_in > 0 { n_in } else { n_out };
        rt.stats.busy_calls.add(1);
        rt.stats.packets.add(counted as u64);
        match d {
            Dispatch::All(k) => send(rt, k, input, right, i),
            Dispatch::Each => {
                let nn = rt.targets.len();
                let dropped = input.distribute(&self.next[..], &mut self.scratch[..nn]);
                rt.stats.drops.add(dropped as u64);
                for k in 0..nn {
                    if !self.scratch[k].is_empty() {
                        send(rt, k as u16, &mut self.scratch[k], right, i);
                    }
                }
            }
            Dispatch::Consumed => {
                if !input.is_empty() {
                    rt.stats.drops.add(input.len() as u64);
                    input.free_all();
                }
            }
        }
        if w.timed {
            let t = rdtsc();
            rt.stats.cycles.add(t.wrapping_sub(w.t_prev));
            rt.stats.timed_packets.add(counted as u64);
            w.t_prev = t;
        }
        n
    }

    /// Give node `i` its input frame one packet at a time (it panicked lately: a
    /// packet that makes it panic again takes only itself down).
    #[cold]
    #[inline(never)]
    fn call_isolated(&mut self, i: usize, w: &mut Walk) -> usize {
        std::mem::swap(&mut self.inputs[i], &mut self.held);
        let panics = self.nodes[i].stats.panics.get();
        let mut work = 0;
        while !self.held.is_empty() {
            self.held.move_front_to(&mut self.inputs[i], 1);
            work += if w.watched { self.call_watched(i, w) } else { self.call(i, w) };
            let rt = &mut self.nodes[i];
            if rt.guard.fenced(w.now, &rt.stats) {
                rt.stats.fenced_drops.add(self.held.len() as u64);
                self.held.free_all();
            }
        }
        let rt = &mut self.nodes[i];
        if rt.stats.panics.get() == panics {
            rt.guard.isolate = rt.guard.isolate.saturating_sub(1);
        }
        work
    }

    /// Stop every node (flush files, drain rings) and free packets still queued.
    /// Call after every lcore of the graph has stopped walking.
    pub fn finish(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        for mb in self.nodes.iter().filter_map(|rt| rt.mailbox.as_ref()) {
            mb.closed.store(true, Ordering::Release);
        }
        for rt in &self.nodes {
            rt.tap.stopped.store(true, Ordering::Release);
        }
        let _walking = Walking::begin();
        let now = rdtsc();
        for rt in self.nodes.iter_mut() {
            if let Err(payload) = std::panic::catch_unwind(AssertUnwindSafe(|| rt.node.stop())) {
                rt.guard.panicked((self.lcore, &rt.name), &rt.stats, &*payload, 0, (now, self.hz));
            }
        }
        for b in self.inputs.iter_mut().chain(self.scratch.iter_mut()) {
            b.free_all();
        }
    }
}

impl Drop for LcoreGraph {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The clock and counts of one walk, as its node calls go.
struct Walk {
    now: u64,
    /// This walk measures node cycles.
    timed: bool,
    /// A trace or a capture watches a node of the lcore.
    watched: bool,
    /// The last clock read of a timed walk.
    t_prev: u64,
    /// Packets sources and ring receivers brought in.
    received: usize,
}

/// Move the packets in `from` along next edge `k` of node `i` (to a node after it);
/// what cannot go is freed and counted.
#[inline(always)]
fn send(rt: &RtNode, k: u16, from: &mut Box<Burst>, right: &mut [Box<Burst>], i: usize) {
    if k == DROP {
        rt.stats.drops.add(from.len() as u64);
        from.free_all();
        return;
    }
    match rt.targets.get(k as usize) {
        Some(Some(t)) => {
            let to = &mut right[t.node - i - 1];
            if to.is_empty() {
                // Hand the whole frame over: swap the boxes, copy nothing.
                std::mem::swap(from, to);
                t.edge.packets.add(to.len() as u64);
                return;
            }
            let moved = from.move_to(to);
            t.edge.packets.add(moved as u64);
            if !from.is_empty() {
                rt.stats.frame_full.add(from.len() as u64);
                t.edge.drops.add(from.len() as u64);
                from.free_all();
            }
        }
        _ => {
            rt.stats.unconnected.add(from.len() as u64);
            from.free_all();
        }
    }
}

/// Packet `k`'s trace record at this node, before its time and edge are known: its
/// length and offload flags, and the node's [`Node::trace`] lines, each indented.
#[cold]
fn trace_record(node: &dyn Node, pkts: &Burst, k: usize) -> (String, String) {
    let frame = pkts.data(k);
    let head =
        format!("len {}, ol_flags {}", pkts.header(k).pkt_len, crate::trace::ol_flag_names(pkts.header(k).ol_flags));
    let mut body = String::new();
    node.trace(frame, &mut body);
    let mut lines = String::with_capacity(body.len() + 16);
    for l in body.lines() {
        lines.push_str("\n  ");
        lines.push_str(l);
    }
    (head, lines)
}

/// `ticks` TSC ticks in nanoseconds.
fn tsc_ns(ticks: u64, hz: u64) -> u64 {
    (u128::from(ticks) * 1_000_000_000 / u128::from(hz.max(1))) as u64
}

/// The address of packet `k`'s mbuf: how a followed packet is known at the next node.
fn addr(pkts: &Burst, k: usize) -> usize {
    std::ptr::from_ref(pkts.header(k)) as usize
}

/// The name of next edge `k` of `rt`, and whether a packet sent there goes on to a
/// node of this graph.
fn edge_name(rt: &RtNode, k: u16) -> (String, bool) {
    if k == DROP {
        return ("drop".into(), false);
    }
    match (rt.next_names.get(k as usize), rt.targets.get(k as usize)) {
        (Some(n), Some(Some(_))) => (n.to_string(), true),
        (Some(n), _) => (format!("{n} (unconnected: drop)"), false),
        _ => (format!("next {k} (undeclared: drop)"), false),
    }
}

/// Where the packet whose mbuf is at `at` went: its edge, found by its place in the
/// node's output, and whether it goes on to another node.
fn went(rt: &RtNode, out: &Burst, at: usize, d: Dispatch, next: &[u16; MAX_BURST]) -> (String, bool) {
    let Some(pos) = (0..out.len()).find(|&k| addr(out, k) == at) else {
        let how = if d == Dispatch::Consumed { "consumed" } else { "kept, sent or freed by the node" };
        return (how.into(), false);
    };
    match d {
        Dispatch::All(x) => edge_name(rt, x),
        Dispatch::Each => edge_name(rt, next[pos]),
        Dispatch::Consumed => ("consumed".into(), false),
    }
}

/// The followed packets in `input`: each one's place in `followed`, its record
/// (taken out), its address, and this node's lines for its frame as it arrives.
#[cold]
fn hops_in(followed: &mut [Followed], node: &dyn Node, input: &Burst) -> Vec<(usize, String, usize, String)> {
    let mut hops = Vec::new();
    for k in 0..input.len() {
        let a = addr(input, k);
        if let Some(j) = followed.iter().position(|f| f.3 && f.0 == a) {
            let f = &mut followed[j];
            f.3 = false;
            let mut record = std::mem::take(&mut f.1);
            let (head, lines) = trace_record(node, input, k);
            record.push_str(&format!("\n  NODE {head}"));
            if lines == f.2 {
                record.push_str("\n    (headers as above)");
            } else {
                record.push_str(&lines.replace("\n  ", "\n    "));
            }
            hops.push((j, record, a, lines));
        }
    }
    hops
}

/// Finish the hop records of `hops` at node `rt` (the time and edge) and follow each
/// packet that goes on.
#[cold]
fn follow_call(
    (lcore, t): (u32, u64),
    rt: &RtNode,
    out: &Burst,
    hops: Vec<(usize, String, usize, String)>,
    d: Dispatch,
    next: &[u16; MAX_BURST],
    followed: &mut [Followed],
) {
    for (j, record, at, shown) in hops {
        let (to, goes_on) = went(rt, out, at, d, next);
        let record = record.replacen("\n  NODE ", &format!("\n  then lcore {lcore} {}: +{t} ns -> {to}, ", rt.name), 1);
        followed[j] = (at, record, shown, goes_on);
    }
}

#[allow(clippy::too_many_arguments)]
#[cold]
fn trace_call(
    buf: &TraceBuf,
    (lcore, t): (u32, u64),
    rt: &RtNode,
    out: &Burst,
    pre: Vec<(usize, String, String)>,
    n_in: usize,
    d: Dispatch,
    next: &[u16; MAX_BURST],
    followed: &mut Vec<Followed>,
) {
    // Inputs as they arrived, then packets the node produced (a source's receive).
    let mut records = pre;
    records.extend((n_in..out.len()).map(|k| {
        let (h, l) = trace_record(&*rt.node, out, k);
        (addr(out, k), h, l)
    }));
    for (at, head, lines) in records {
        if rt.trace_left.load(Ordering::Relaxed) == 0 {
            break;
        }
        rt.trace_left.fetch_sub(1, Ordering::Relaxed);
        let (to, goes_on) = went(rt, out, at, d, next);
        let record = format!("lcore {lcore} {}: +{t} ns -> {to}, {head}{lines}", rt.name);
        if followed.len() < crate::TRACE_MAX_PACKETS as usize {
            followed.push((at, record, lines, goes_on));
        } else {
            buf.push(record);
        }
    }
}
