//! `macswap`: swap Ethernet source and destination, then forward.
use crate::testpmd::engine::{no_begin, rx, tx_all, FwdEngine, FwdSettings, Stream};

/// Swap the two MAC addresses at the start of a frame (no-op for runts).
#[inline(always)]
pub fn swap_macs(d: &mut [u8]) {
    if let Some(eth) = d.get_mut(..12) {
        let (dst, src) = eth.split_at_mut(6);
        dst.swap_with_slice(src);
    }
}

fn fwd(s: &mut Stream, set: &FwdSettings) {
    let n = rx(s, set);
    if n == 0 {
        return;
    }
    for i in 0..n {
        if let Some(d) = s.burst.data_mut(i) {
            swap_macs(d);
        }
    }
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
