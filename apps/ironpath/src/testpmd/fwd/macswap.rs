//! `macswap`: swap Ethernet source and destination, then forward.
use crate::testpmd::engine::{no_begin, rx, tx_all, FwdEngine, FwdSettings, Stream};

/// Swap the two MAC addresses at the start of a frame (no-op for runts).
#[inline(always)]
pub fn swap_macs(d: &mut [u8]) {
    ironpath_wire::ethernet::swap_addresses(d);
}

fn fwd(s: &mut Stream, set: &FwdSettings) {
    if rx(s, set) == 0 {
        return;
    }
    // A frame shorter than the two addresses is forwarded unchanged.
    s.burst.swap_mac_addresses();
    tx_all(s, set);
}

/// The engine.
pub const ENGINE: FwdEngine = FwdEngine { name: "macswap", begin: no_begin, fwd, counts_tx: false };

#[cfg(test)]
mod tests {
    #[test]
    fn swaps() {
        let mut f = [1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 8, 0];
        super::swap_macs(&mut f);
        assert_eq!(f, [2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 8, 0]);
        let mut runt = [1u8; 5];
        super::swap_macs(&mut runt);
    }
}
