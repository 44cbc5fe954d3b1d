//! What happens when a driver panics. Every entry point runs under `catch_unwind`
//! (a panic never unwinds into the host). On the fast path a panic also fences the
//! queue off: its later bursts are skipped (RX receives nothing, TX takes nothing,
//! so the host keeps and frees its packets), counted in the queue's xstats
//! (`rx_qN_driver_panics`, `rx_qN_fenced_bursts`, the same for `tx`), and reported
//! once, through the host's log, with the driver, port and queue.
//!
//! The SDK replaces the plugin's panic hook with one that prints nothing and keeps
//! where the panic happened, so that each panic is reported once, by the SDK, with
//! its context. (A thread a driver spawns itself should be joined: its panic comes
//! back through `join`.)

use crate::QueueStats;
use std::cell::RefCell;
use std::sync::Once;

thread_local! {
    /// Where the last panic on this thread happened (`file:line:column`).
    static WHERE: RefCell<String> = const { RefCell::new(String::new()) };
}

static HOOK: Once = Once::new();

/// Install the SDK's panic hook (once per plugin; the first probe does it).
pub(crate) fn install_hook() {
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            if let Some(l) = info.location() {
                let at = format!("{}:{}:{}", l.file(), l.line(), l.column());
                WHERE.with(|w| *w.borrow_mut() = at);
            }
        }));
    });
}

/// The panic's message and, when the hook saw it, where it happened.
pub(crate) fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    let msg = if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    };
    let at = WHERE.with(|w| std::mem::take(&mut *w.borrow_mut()));
    if at.is_empty() {
        msg
    } else {
        format!("{msg} (at {at})")
    }
}

/// A queue's fence: set by its first fast-path panic, read by its own lcore only.
#[derive(Debug, Default)]
pub(crate) struct Fence {
    on: bool,
}

impl Fence {
    /// Whether the queue is fenced off; counts the skipped burst if so.
    #[inline(always)]
    pub(crate) fn skips(&self, stats: &QueueStats) -> bool {
        if self.on {
            stats.fenced_bursts.add(1);
        }
        self.on
    }

    /// Fence the queue off after `p` and report it once.
    #[cold]
    pub(crate) fn close(
        &mut self,
        stats: &QueueStats,
        driver: &std::ffi::CStr,
        port: u16,
        queue: &str,
        what: &str,
        p: &Box<dyn std::any::Any + Send>,
    ) {
        stats.driver_panics.add(1);
        if self.on {
            return;
        }
        self.on = true;
        crate::log(
            0,
            &format!(
                "driver {}: port {port} {queue} panicked in {what}: {}; the queue is fenced off \
                 (its bursts are skipped and counted in the port's xstats)",
                driver.to_string_lossy(),
                panic_text(p)
            ),
        );
    }
}
