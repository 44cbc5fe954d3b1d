//! `5tswap`: swap MACs, IP addresses (IPv4 or IPv6) and TCP/UDP ports, then forward.
//! Checksums stay valid: swapping keeps every one's-complement sum.
use super::macswap::swap_macs;
use crate::testpmd::engine::{no_begin, rx, tx_all, FwdEngine, FwdSettings, Stream};
use crate::testpmd::pkt::{parse, ETH_P_IP, ETH_P_IPV6, IPPROTO_TCP, IPPROTO_UDP};

fn swap_ranges(d: &mut [u8], a: usize, b: usize, len: usize) {
    if a + len <= b && b + len <= d.len() {
        let (x, y) = d.split_at_mut(b);
        x[a..a + len].swap_with_slice(&mut y[..len]);
    }
}

/// Swap the 5-tuple of one frame in place.
pub fn swap5(d: &mut [u8]) {
    swap_macs(d);
    let Some(l) = parse(d) else { return };
    match l.ethertype {
        ETH_P_IP => swap_ranges(d, l.l3 + 12, l.l3 + 16, 4),
        ETH_P_IPV6 => swap_ranges(d, l.l3 + 8, l.l3 + 24, 16),
        _ => return,
    }
    if l.l4 != 0 && matches!(l.proto, IPPROTO_TCP | IPPROTO_UDP) {
        swap_ranges(d, l.l4, l.l4 + 2, 2);
    }
}

fn fwd(s: &mut Stream, set: &FwdSettings) {
    if rx(s, set) == 0 {
        return;
    }
    s.burst.for_each_data_mut(swap5);
    tx_all(s, set);
}

/// The engine.
pub const ENGINE: FwdEngine = FwdEngine { name: "5tswap", begin: no_begin, fwd, counts_tx: false };

#[cfg(test)]
mod tests {
    use crate::testpmd::pkt::{checksum, udp_template};

    #[test]
    fn swaps_addresses_and_ports_keeping_checksums() {
        let mut f = udp_template(64, [1; 6], [2; 6]);
        f[34..36].copy_from_slice(&[0x12, 0x34]);
        super::swap5(&mut f);
        assert_eq!(&f[0..6], &[1; 6]);
        assert_eq!(&f[26..30], &[198, 18, 0, 2]);
        assert_eq!(&f[30..34], &[198, 18, 0, 1]);
        assert_eq!(&f[36..38], &[0x12, 0x34]);
        assert_eq!(checksum(&f[14..34]), 0);
    }
}
