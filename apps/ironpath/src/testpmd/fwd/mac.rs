//! `mac`: rewrite the Ethernet source to the TX port's MAC and the destination to its
//! peer's, then forward.
use crate::testpmd::engine::{no_begin, rx, tx_all, FwdEngine, FwdSettings, Stream};

fn fwd(s: &mut Stream, set: &FwdSettings) {
    if rx(s, set) == 0 {
        return;
    }
    let mut hdr = [0u8; 12];
    hdr[..6].copy_from_slice(&s.peer_mac);
    hdr[6..].copy_from_slice(&s.tx_mac);
    s.burst.for_each_data_mut(|d| {
        if let Some(eth) = d.get_mut(..12) {
            eth.copy_from_slice(&hdr);
        }
    });
    tx_all(s, set);
}

/// The engine.
pub const ENGINE: FwdEngine = FwdEngine { name: "mac", begin: no_begin, fwd, counts_tx: false };
