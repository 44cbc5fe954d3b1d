//! What the engine does when a node panics: a panic drops the call's packets, never
//! the service.
//!
//! * The packets of the call that panicked are freed and counted (`panic_drops`),
//!   the panic is counted (`panics`), and the node keeps its state and keeps being
//!   called: one malformed packet must not stop routing for everyone.
//! * The next [`ISOLATE_CALLS`] bursts sent to the node are given to it one packet at
//!   a time, so that a packet that makes it panic again costs only itself, not the
//!   packets that share its burst. (A panic during isolation starts it over.)
//! * A node that panics on every call, [`FENCE_AFTER`] calls in a row over at least
//!   [`FENCE_MIN_SPAN`] of time with none returning (a broken node, not one bad
//!   packet in a burst: isolation lets the good packets through), is fenced for a
//!   while: what is sent to it is dropped and counted (`fenced_drops`) without a call.
//!   Then it is called again; each fence in a row lasts twice as long, up to
//!   [`FENCE_MAX`]. A call that returns ends the row.
//! * The first panic of a node is logged with its message and where it happened;
//!   later ones at most once a second per node, as a count.
//!
//! The engine's own panic hook (installed when a graph is built, chained to the one
//! before it) keeps the default hook from printing every caught panic.

use crate::stats::NodeStats;
use std::cell::{Cell, RefCell};
use std::sync::Once;

/// Bursts a node gets one packet at a time after it panicked.
pub const ISOLATE_CALLS: u32 = 64;
/// Panicking calls in a row that fence a node (with [`FENCE_MIN_SPAN`]).
pub const FENCE_AFTER: u32 = 32;
/// The shortest row of panics that fences a node, in seconds.
pub const FENCE_MIN_SPAN: f64 = 1.0;
/// The first fence, in seconds; each next one in a row lasts twice as long.
pub const FENCE_FIRST: f64 = 1.0;
/// The longest fence, in seconds.
pub const FENCE_MAX: f64 = 8.0;

thread_local! {
    /// The lcore's walk is calling nodes: the hook keeps quiet about panics (the
    /// engine reports them).
    static IN_WALK: Cell<bool> = const { Cell::new(false) };
    /// Where the last panic on this thread happened (`file:line:column`).
    static WHERE: RefCell<String> = const { RefCell::new(String::new()) };
}

static HOOK: Once = Once::new();

/// Install the engine's panic hook (once per process): it notes where a panic
/// happened and, inside a walk, prints nothing; elsewhere it defers to the hook
/// that was installed before.
pub(crate) fn install_hook() {
    HOOK.call_once(|| {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(l) = info.location() {
                WHERE.with(|w| *w.borrow_mut() = format!("{}:{}:{}", l.file(), l.line(), l.column()));
            }
            if !IN_WALK.with(Cell::get) {
                before(info);
            }
        }));
    });
}

/// Marks the current thread as walking a graph while it lives.
pub(crate) struct Walking;

impl Walking {
    #[inline(always)]
    pub(crate) fn begin() -> Walking {
        IN_WALK.with(|w| w.set(true));
        Walking
    }
}

impl Drop for Walking {
    #[inline(always)]
    fn drop(&mut self) {
        IN_WALK.with(|w| w.set(false));
    }
}

/// A node's panic state, kept by the lcore that runs it.
#[derive(Debug, Default)]
pub(crate) struct Guard {
    /// Bursts still to be given one packet at a time.
    pub isolate: u32,
    /// Panicking calls in a row, and the TSC of the first of them.
    in_row: u32,
    row_since: u64,
    /// Fenced until this TSC (0: not fenced), and the next fence's length in ticks.
    fenced_until: u64,
    next_fence: u64,
    /// When a panic was last logged, and the panics since that were not.
    logged_at: u64,
    unlogged: u64,
}

impl Guard {
    /// Whether the node is fenced at `now` (a fence that ran out is lifted here).
    #[inline(always)]
    pub fn fenced(&mut self, now: u64, stats: &NodeStats) -> bool {
        if self.fenced_until == 0 {
            return false;
        }
        if now.wrapping_sub(self.fenced_until) as i64 >= 0 {
            self.fenced_until = 0;
            stats.fenced.set(0);
            return false;
        }
        true
    }

    /// A call returned.
    #[inline(always)]
    pub fn returned(&mut self) {
        if self.in_row != 0 {
            self.in_row = 0;
            self.next_fence = 0;
        }
    }

    /// A call of node `name` on `lcore` panicked with `payload` (its `dropped`
    /// packets were freed) at TSC `now`, the TSC running at `hz` ticks a second.
    #[cold]
    #[inline(never)]
    pub fn panicked(
        &mut self,
        (lcore, name): (u32, &str),
        stats: &NodeStats,
        payload: &(dyn std::any::Any + Send),
        dropped: usize,
        (now, hz): (u64, u64),
    ) {
        stats.panics.add(1);
        stats.panic_drops.add(dropped as u64);
        self.isolate = ISOLATE_CALLS;
        if self.in_row == 0 {
            self.row_since = now;
        }
        self.in_row = self.in_row.saturating_add(1);
        let ticks = |secs: f64| (secs * hz as f64) as u64;
        let msg = || {
            let text = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic with a non-text payload".into());
            let at = WHERE.with(|w| std::mem::take(&mut *w.borrow_mut()));
            if at.is_empty() {
                text
            } else {
                format!("{text} (at {at})")
            }
        };
        if stats.first_panic.get().is_none() {
            let m = msg();
            log::error!(
                "lcore {lcore}: node `{name}` panicked: {m}; its {dropped} packet(s) were dropped (counted: \
                 panic_drops), the node runs on, taking the next bursts one packet at a time"
            );
            let _ = stats.first_panic.set(m);
            self.logged_at = now;
        } else if now.wrapping_sub(self.logged_at) >= ticks(1.0) {
            let m = msg();
            log::error!(
                "lcore {lcore}: node `{name}` panicked {} more time(s) (last: {m}); {} panics in all",
                self.unlogged + 1,
                stats.panics.get()
            );
            self.logged_at = now;
            self.unlogged = 0;
        } else {
            self.unlogged += 1;
            WHERE.with(|w| w.borrow_mut().clear());
        }
        if self.in_row >= FENCE_AFTER && now.wrapping_sub(self.row_since) >= ticks(FENCE_MIN_SPAN) {
            let len = if self.next_fence == 0 { ticks(FENCE_FIRST) } else { self.next_fence };
            self.fenced_until = now.wrapping_add(len).max(1);
            self.next_fence = (len * 2).min(ticks(FENCE_MAX));
            stats.fences.add(1);
            stats.fenced.set(1);
            log::error!(
                "lcore {lcore}: node `{name}` panicked on every call ({} in a row): fenced for {:.0} s (packets \
                 sent to it are dropped, counted: fenced_drops), then called again",
                self.in_row,
                len as f64 / hz.max(1) as f64
            );
        }
    }
}
