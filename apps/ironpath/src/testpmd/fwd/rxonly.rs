//! `rxonly`: receive and free.
use crate::testpmd::engine::{no_begin, rx, FwdEngine, FwdSettings, Stream};

fn fwd(s: &mut Stream, set: &FwdSettings) {
    if rx(s, set) > 0 {
        s.burst.free_all();
    }
}

/// The engine.
pub const ENGINE: FwdEngine = FwdEngine { name: "rxonly", begin: no_begin, fwd, counts_tx: false };
