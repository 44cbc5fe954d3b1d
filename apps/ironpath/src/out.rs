//! Standard output that may close under us (`ironpath run ... | head -2`): a
//! write that fails marks stdout gone instead of panicking, the loops that print
//! read [`gone`] and end the run as Ctrl-C would, and nothing more is written.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static GONE: AtomicBool = AtomicBool::new(false);

/// Writes `text` to stdout and flushes it; on failure marks stdout gone.
pub fn write(text: std::fmt::Arguments) {
    if GONE.load(Ordering::Relaxed) {
        return;
    }
    let mut o = std::io::stdout().lock();
    if o.write_fmt(text).and_then(|()| o.flush()).is_err() {
        GONE.store(true, Ordering::Relaxed);
    }
}

/// Whether a write to stdout failed (the reader went away).
pub fn gone() -> bool {
    GONE.load(Ordering::Relaxed)
}

/// `print!` that survives a closed stdout (see [`crate::out`]).
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => { $crate::out::write(format_args!($($t)*)) };
}

/// `println!` that survives a closed stdout (see [`crate::out`]).
#[macro_export]
macro_rules! outln {
    () => { $crate::out::write(format_args!("\n")) };
    ($($t:tt)*) => { $crate::out::write(format_args!("{}\n", format_args!($($t)*))) };
}
