//! `icmpecho`: answer ARP requests and ICMP echo requests (IPv4) on the port they came
//! in on, like DPDK's icmpecho: an ARP request gets a reply with the port's MAC for
//! the address asked; an echo request gets an echo reply (addresses swapped, type 0,
//! checksum updated). Everything else is freed; malformed packets are counted.
use crate::testpmd::engine::{no_begin, rx, tx_all, FwdEngine, FwdSettings, Stream};
use crate::testpmd::pkt::{be16, csum_update16, parse, put16, ETH_P_ARP, ETH_P_IP, IPPROTO_ICMP};

/// What to do with a frame after [`answer`].
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Rewritten into a reply: send it back.
    Reply,
    /// Not for us: drop.
    Ignore,
    /// Malformed: count and drop.
    Malformed,
}

/// Turn an ARP or ICMP echo request into its reply in place.
pub fn answer(d: &mut [u8], my_mac: [u8; 6]) -> Verdict {
    let Some(l) = parse(d) else { return Verdict::Malformed };
    match l.ethertype {
        ETH_P_ARP => {
            let a = l.l3;
            let Some(arp) = d.get_mut(a..a + 28) else { return Verdict::Malformed };
            // Ethernet/IPv4 request only.
            if arp[0..2] != [0, 1] || arp[2..4] != [8, 0] || arp[4] != 6 || arp[5] != 4 {
                return Verdict::Malformed;
            }
            if arp[6..8] != [0, 1] {
                return Verdict::Ignore;
            }
            arp[7] = 2;
            let (sha, spa) =
                ([arp[8], arp[9], arp[10], arp[11], arp[12], arp[13]], [arp[14], arp[15], arp[16], arp[17]]);
            let tpa = [arp[24], arp[25], arp[26], arp[27]];
            arp[8..14].copy_from_slice(&my_mac);
            arp[14..18].copy_from_slice(&tpa);
            arp[18..24].copy_from_slice(&sha);
            arp[24..28].copy_from_slice(&spa);
            d[0..6].copy_from_slice(&sha);
            d[6..12].copy_from_slice(&my_mac);
            Verdict::Reply
        }
        ETH_P_IP if l.proto == IPPROTO_ICMP && l.l4 != 0 => {
            let ic = l.l4;
            if d.len() < ic + 8 || l.ip_end < ic + 8 {
                return Verdict::Malformed;
            }
            if d[ic] != 8 || d[ic + 1] != 0 {
                return Verdict::Ignore;
            }
            let old = be16(d, ic).unwrap_or(0);
            d[ic] = 0;
            let c = be16(d, ic + 2).unwrap_or(0);
            put16(d, ic + 2, csum_update16(c, old, 0));
            let s = l.l3 + 12;
            let (x, y) = d.split_at_mut(s + 4);
            x[s..s + 4].swap_with_slice(&mut y[..4]);
            let (dst, src) = d[..12].split_at_mut(6);
            dst.swap_with_slice(src);
            d[6..12].copy_from_slice(&my_mac);
            Verdict::Reply
        }
        _ => Verdict::Ignore,
    }
}

fn fwd(s: &mut Stream, set: &FwdSettings) {
    let n = rx(s, set);
    if n == 0 {
        return;
    }
    // Replies go out on the RX port: the stream's TX queue belongs to it in the loop
    // topology, and testpmd's icmpecho is used with one port (or `--port-topology=loop`).
    let mac = s.tx_mac;
    let mut malformed = 0u64;
    let mut verdicts = [false; ironpath_eal::MAX_BURST];
    for (i, v) in verdicts.iter_mut().enumerate().take(n) {
        let Some(d) = s.burst.data_mut(i) else { continue };
        match answer(d, mac) {
            Verdict::Reply => *v = true,
            Verdict::Ignore => {}
            Verdict::Malformed => malformed += 1,
        }
    }
    let mut i = 0;
    s.burst.retain(|_, _| {
        i += 1;
        verdicts[i - 1]
    });
    s.stats.rx_malformed.add(malformed);
    tx_all(s, set);
}

/// The engine.
pub const ENGINE: FwdEngine = FwdEngine { name: "icmpecho", begin: no_begin, fwd, counts_tx: false };

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testpmd::pkt::checksum;

    #[test]
    fn answers_arp_requests() {
        let me = [2, 0, 0, 0, 0, 9];
        let peer = [2, 0, 0, 0, 0, 1];
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&peer);
        f.extend_from_slice(&[8, 6, 0, 1, 8, 0, 6, 4, 0, 1]);
        f.extend_from_slice(&peer);
        f.extend_from_slice(&[198, 18, 0, 1, 0, 0, 0, 0, 0, 0, 198, 18, 0, 2]);
        assert_eq!(answer(&mut f, me), Verdict::Reply);
        assert_eq!(&f[0..6], &peer);
        assert_eq!(&f[6..12], &me);
        assert_eq!(&f[20..22], &[0, 2]);
        assert_eq!(&f[22..28], &me);
        assert_eq!(&f[28..32], &[198, 18, 0, 2]);
        assert_eq!(&f[38..42], &[198, 18, 0, 1]);
    }

    #[test]
    fn answers_echo_requests_with_valid_checksum() {
        let mut f = vec![2, 0, 0, 0, 0, 9, 2, 0, 0, 0, 0, 1, 8, 0];
        let mut ip = vec![0x45, 0, 0, 28, 0, 0, 0, 0, 64, 1, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2];
        let c = checksum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
        let mut icmp = vec![8, 0, 0, 0, 0x12, 0x34, 0, 1];
        let c = checksum(&icmp);
        icmp[2..4].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&icmp);
        assert_eq!(answer(&mut f, [2, 0, 0, 0, 0, 9]), Verdict::Reply);
        assert_eq!(f[34], 0);
        assert_eq!(checksum(&f[34..42]), 0);
        assert_eq!(&f[26..30], &[198, 18, 0, 2]);
        assert_eq!(&f[0..6], &[2, 0, 0, 0, 0, 1]);
        let mut cut = f[..30].to_vec();
        assert_eq!(answer(&mut cut, [0; 6]), Verdict::Malformed);
        assert_eq!(answer(&mut [0u8; 20], [0; 6]), Verdict::Ignore);
    }
}
