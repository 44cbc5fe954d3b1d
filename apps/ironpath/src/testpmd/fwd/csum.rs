//! `csum`: parse Ethernet/IPv4/IPv6/TCP/UDP, verify the IPv4 header checksum and the
//! TCP/UDP checksum (counting bad ones), recompute both in software, rewrite the MACs
//! as `mac` does, and forward. Packets whose L4 checksum is only partial (the kernel's
//! CHECKSUM_PARTIAL, flagged `RX_L4_CKSUM_NONE` by the PMD) are completed, not counted
//! as bad. Malformed packets are counted and dropped.
use crate::testpmd::engine::{no_begin, rx, tx_all, FwdEngine, FwdSettings, Stream};
use crate::testpmd::pkt::{checksum, fold, l4_csum_off, parse, pseudo_sum, put16, sum16, ETH_P_IP, IPPROTO_UDP};
use ironpath_eal::abi;

/// Outcome of checking one frame.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Check {
    /// IPv4 header checksum was wrong.
    pub bad_ip: bool,
    /// L4 checksum was wrong.
    pub bad_l4: bool,
}

/// Verify and recompute the checksums of one frame in place; `None` if malformed.
pub fn check_and_fix(d: &mut [u8], l4_partial: bool) -> Option<Check> {
    let l = parse(d)?;
    let mut c = Check::default();
    if l.ethertype == ETH_P_IP {
        let ihl = usize::from(d[l.l3] & 0x0f) * 4;
        let hdr = d.get_mut(l.l3..l.l3 + ihl)?;
        c.bad_ip = checksum(hdr) != 0;
        put16(hdr, 10, 0);
        let v = checksum(hdr);
        put16(hdr, 10, v);
    }
    if l.l4 != 0 {
        if let Some(off) = l4_csum_off(l.proto) {
            let ps = pseudo_sum(d, &l)?;
            let seg = d.get_mut(l.l4..l.ip_end)?;
            if seg.len() < off + 2 {
                return None;
            }
            let udp_zero = l.proto == IPPROTO_UDP && l.ethertype == ETH_P_IP && seg[off] == 0 && seg[off + 1] == 0;
            if !l4_partial && !udp_zero {
                c.bad_l4 = fold(sum16(seg, ps)) != 0;
            }
            put16(seg, off, 0);
            let mut v = fold(sum16(seg, ps));
            if v == 0 && l.proto == IPPROTO_UDP {
                v = 0xffff;
            }
            put16(seg, off, v);
        }
    }
    Some(c)
}

fn fwd(s: &mut Stream, set: &FwdSettings) {
    let n = rx(s, set);
    if n == 0 {
        return;
    }
    let (mut bad_ip, mut bad_l4, mut malformed) = (0u64, 0u64, 0u64);
    let mut hdr = [0u8; 12];
    hdr[..6].copy_from_slice(&s.peer_mac);
    hdr[6..].copy_from_slice(&s.tx_mac);
    let mut keep = [true; ironpath_eal::MAX_BURST];
    for (i, k) in keep.iter_mut().enumerate().take(n) {
        let partial = s.burst.header(i).ol_flags & abi::RX_L4_CKSUM_NONE != 0;
        let Some(d) = s.burst.data_mut(i) else { continue };
        match check_and_fix(d, partial) {
            Some(c) => {
                bad_ip += u64::from(c.bad_ip);
                bad_l4 += u64::from(c.bad_l4);
                d[..12].copy_from_slice(&hdr);
            }
            None => {
                malformed += 1;
                *k = false;
            }
        }
    }
    if malformed > 0 {
        let mut i = 0;
        s.burst.retain(|_, _| {
            i += 1;
            keep[i - 1]
        });
    }
    s.stats.rx_bad_ip_csum.add(bad_ip);
    s.stats.rx_bad_l4_csum.add(bad_l4);
    s.stats.rx_malformed.add(malformed);
    tx_all(s, set);
}

/// The engine.
pub const ENGINE: FwdEngine = FwdEngine { name: "csum", begin: no_begin, fwd, counts_tx: false };

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testpmd::pkt::udp_template;

    #[test]
    fn counts_and_fixes_bad_checksums() {
        let good = udp_template(80, [1; 6], [2; 6]);
        let mut f = good.clone();
        assert_eq!(check_and_fix(&mut f, false), Some(Check::default()));
        assert_eq!(f, good);
        f[24] ^= 0xff;
        f[40] ^= 0x0f;
        assert_eq!(check_and_fix(&mut f, false), Some(Check { bad_ip: true, bad_l4: true }));
        assert_eq!(f, good, "recomputed");
        // Partial checksum (pseudo-header only) is completed, not counted.
        let mut p = good.clone();
        p[40] = 0x12;
        assert_eq!(check_and_fix(&mut p, true), Some(Check::default()));
        assert_eq!(p, good);
        // An IPv4 frame cut inside its header is malformed; a non-IP frame is not.
        let mut cut = good[..20].to_vec();
        assert_eq!(check_and_fix(&mut cut, false), None);
        assert_eq!(check_and_fix(&mut [0u8; 20], false), Some(Check::default()));
    }
}
