//! What a node is: one function over a burst that says where each packet goes next.

use crate::stats::NodeStats;
use ironpath_eal::{Burst, MAX_BURST};

/// A next-edge index meaning "drop this packet" (freed by the engine and counted
/// in the node's `drops`).
pub const DROP: u16 = u16::MAX;

/// Where the packets left in the burst after [`Node::process`] go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dispatch {
    /// All of them to next edge `k` (the common case; no per-packet array).
    All(u16),
    /// Packet `i` to next edge `next[i]` (or [`DROP`]).
    Each,
    /// The node kept or sent every packet itself; anything left is dropped.
    Consumed,
}

/// A counter a node declares: its name and unit (shown by `show runtime`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterSpec {
    /// Short name, e.g. `replies`.
    pub name: &'static str,
    /// Unit or meaning, e.g. `packets`.
    pub unit: &'static str,
}

/// What a node sees of the engine during one call.
pub struct NodeCx<'a> {
    /// TSC at the start of this walk of the lcore's graph (one read per walk).
    pub now_tsc: u64,
    /// The lcore walking the graph.
    pub lcore: u32,
    pub(crate) stats: &'a NodeStats,
    /// Time is the real TSC (false under [`crate::testing`]'s virtual clock).
    pub(crate) live: bool,
}

impl NodeCx<'_> {
    /// Count `n` packets the node freed itself without passing them on (a full TX
    /// queue, a sink): they show in its Drops column, as packets sent to
    /// [`DROP`] do. Count the reason in one of the node's own counters too.
    #[inline(always)]
    pub fn dropped(&self, n: u64) {
        self.stats.drops.add(n);
    }

    /// Set the node's declared gauge `k` to `v`: a variant of the enum its
    /// [`crate::counters!`] declaration made, or an index into [`Node::gauges`].
    #[inline(always)]
    pub fn gauge(&self, k: impl Into<usize>, v: u64) {
        self.stats.set_gauge(k.into(), v);
    }

    /// Add `n` to the node's declared counter `k`: a variant of the enum its
    /// [`crate::counters!`] declaration made, or an index into [`Node::counters`].
    #[inline(always)]
    pub fn count(&self, k: impl Into<usize>, n: u64) {
        self.stats.add_extra(k.into(), n);
    }

    /// The TSC now (read again, not the walk's start): for a node that must not count
    /// time the lcore lost to preemption since the walk began. Under a virtual clock,
    /// [`NodeCx::now_tsc`].
    #[inline]
    pub fn tsc(&self) -> u64 {
        if self.live {
            ironpath_eal::tsc::rdtsc().max(self.now_tsc)
        } else {
            self.now_tsc
        }
    }
}

/// A graph node. It runs on one lcore, so it needs `Send` but never `Sync`.
///
/// The engine calls [`Node::process`] with the packets sent to the node (for a
/// source node, every walk, even with none). The node may change packets in
/// place, free some (e.g. `Burst::retain`), send them itself (a port), or add new
/// ones; then it says where the remaining packets go with a [`Dispatch`].
pub trait Node: Send {
    /// Process one burst; for [`Dispatch::Each`], fill `next[..pkts.len()]`.
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, next: &mut [u16; MAX_BURST]) -> Dispatch;

    /// Counters this node declares (their values are set through [`NodeCx::count`]).
    fn counters(&self) -> &'static [CounterSpec] {
        &[]
    }

    /// Gauges this node declares: values it sets ([`NodeCx::gauge`]), such as how
    /// many connections are in each state now.
    fn gauges(&self) -> &'static [CounterSpec] {
        &[]
    }

    /// Called when a walk of the lcore's graph found no packet anywhere (a chance
    /// to flush buffered output without delaying a lone packet).
    fn idle(&mut self, _cx: &mut NodeCx<'_>) {}

    /// Called once when the graph stops: flush files, return held packets.
    fn stop(&mut self) {}

    /// Appends the trace lines of `frame` (the packet's first segment) to `out`, for
    /// `trace add NODE N`. The default decodes its headers, one line each
    /// ([`ironpath_wire::describe::describe`]); a node that knows better says so (the
    /// `tcp` node prints flags, sequence numbers, window and length as tcpdump does).
    /// Only called while a trace is armed.
    fn trace(&self, frame: &[u8], out: &mut String) {
        ironpath_wire::describe::describe(frame, out);
    }

    /// The node's control-plane half, taken once when the graph is built: a node
    /// whose tables change at run time (routes, rules, MAC entries) returns one that
    /// answers those commands ([`crate::control`]).
    fn controller(&mut self) -> Option<Box<dyn crate::Controller>> {
        None
    }

    /// Take a change its controller built ([`crate::Remote::call`]), between two
    /// bursts; return what it replaced (freed by the control thread, never here) or
    /// an answer. Must not block; should not allocate.
    fn apply(&mut self, _cx: &mut NodeCx<'_>, msg: crate::Msg) -> crate::Msg {
        msg
    }

    /// The lcore found no work for a while and would sleep (rx mode `adaptive` or
    /// `interrupt`): say what must wake it, changing nothing yet. A node that
    /// receives on its own (a port's receiver) gives its queue's wake-up descriptor
    /// ([`SleepPlan::wake_on`]; it arms it in [`Node::arm`]), or says the lcore must
    /// keep polling ([`SleepPlan::keep_polling`]); a node with a timer gives its
    /// time ([`SleepPlan::until`]). The default, nothing, suits a node that only
    /// works on what it is given; a source node (polled every walk) must say
    /// something, at least [`SleepPlan::quiet`], or its lcore keeps polling.
    fn sleep(&mut self, _cx: &mut NodeCx<'_>, _plan: &mut SleepPlan) {}

    /// The lcore will sleep: arm the wake-ups given in [`Node::sleep`] (unmask an
    /// interrupt, tell a peer to signal). False: they cannot be armed now, and the
    /// lcore keeps polling. The lcore polls once more after this, then sleeps;
    /// [`Node::woke`] follows in every case.
    fn arm(&mut self, _cx: &mut NodeCx<'_>) -> bool {
        true
    }

    /// The lcore is polling again (after [`Node::arm`]): disarm what it armed.
    fn woke(&mut self, _cx: &mut NodeCx<'_>) {}
}

/// What an lcore about to sleep waits for, as its nodes said ([`Node::sleep`]).
#[derive(Debug, Default)]
pub struct SleepPlan {
    pub(crate) fds: Vec<std::os::fd::RawFd>,
    /// The node (its index in the walk) of each descriptor.
    pub(crate) owners: Vec<u16>,
    pub(crate) deadline: Option<u64>,
    pub(crate) poll: Option<&'static str>,
    pub(crate) node: u16,
    /// The current node said something.
    pub(crate) said: bool,
}

impl SleepPlan {
    /// Wake when `fd` becomes readable (waited on edge-triggered: each new signal
    /// wakes; the descriptor is never read). It must stay open until the node's
    /// [`Node::woke`].
    pub fn wake_on(&mut self, fd: std::os::fd::RawFd) {
        self.said = true;
        self.fds.push(fd);
        self.owners.push(self.node);
    }

    /// Wake by TSC time `tsc` at the latest (a timer of the node).
    pub fn until(&mut self, tsc: u64) {
        self.said = true;
        self.deadline = Some(self.deadline.map_or(tsc, |d| d.min(tsc)));
    }

    /// The lcore cannot sleep now: something the node waits for has no wake-up
    /// source (a queue without one, packets it holds, work in flight). `why` is
    /// counted and shown.
    pub fn keep_polling(&mut self, why: &'static str) {
        self.said = true;
        self.poll.get_or_insert(why);
    }

    /// The node has nothing to do until it is given packets, or a wake-up source
    /// another node gave signals, or the lcore's doorbell rings.
    pub fn quiet(&mut self) {
        self.said = true;
    }

    pub(crate) fn clear(&mut self) {
        self.fds.clear();
        self.owners.clear();
        self.deadline = None;
        self.poll = None;
    }
}

/// Declares a node's counters (or gauges) once: a `#[repr(usize)]` enum whose
/// variants index them (each documented by its name and unit), and its `SPECS`
/// (names and units, in declaration order) for [`Node::counters`]. No index is
/// written by hand:
///
/// ```
/// ironpath_graph::counters! {
///     /// What `my_node` counts.
///     pub enum MyCounter {
///         /// Packets passed on.
///         Passed("passed", "packets"),
///         /// Packets too short.
///         Short("short", "packets dropped (< 14 bytes)"),
///     }
/// }
/// assert_eq!(MyCounter::SPECS[MyCounter::Short as usize].name, "short");
/// assert_eq!(MyCounter::COUNT, 2);
/// // In `process`: cx.count(MyCounter::Passed, n);
/// ```
#[macro_export]
macro_rules! counters {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident($cname:literal, $unit:literal) ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(usize)]
        $vis enum $name {
            $(
                #[doc = concat!("`", $cname, "`: ", $unit, ".")]
                $(#[$vmeta])*
                $variant,
            )*
        }

        #[allow(dead_code, reason = "a declaration need not use every constant it gets")]
        impl $name {
            /// Every value's name and unit, in declaration order (the index is the variant's).
            pub const SPECS: &'static [$crate::CounterSpec] =
                &[$( $crate::CounterSpec { name: $cname, unit: $unit }, )*];
            /// How many there are.
            pub const COUNT: usize = Self::SPECS.len();
            /// Every variant, in declaration order.
            pub const ALL: [Self; Self::COUNT] = [$( Self::$variant, )*];
        }

        impl From<$name> for usize {
            #[inline(always)]
            fn from(c: $name) -> usize {
                c as usize
            }
        }
    };
}
