//! `io`: forward packets unchanged.
use crate::testpmd::engine::{no_begin, rx, tx_all, FwdEngine, FwdSettings, Stream};

fn fwd(s: &mut Stream, set: &FwdSettings) {
    if rx(s, set) > 0 {
        tx_all(s, set);
    }
}

/// The engine.
pub const ENGINE: FwdEngine = FwdEngine { name: "io", begin: no_begin, fwd, counts_tx: false };
