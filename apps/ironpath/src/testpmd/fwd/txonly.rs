//! `txonly`: send packets built from `--txpkts` (Ethernet / IPv4 / UDP, valid
//! checksums) from the TX port's MAC to its peer's.
use crate::testpmd::engine::{tx_all, FwdEngine, FwdSettings, Stream};
use crate::testpmd::pkt::udp_template;
use ironpath_eal::Mbuf;

/// Build the stream's template.
pub fn begin(s: &mut Stream, set: &FwdSettings) {
    let total: usize = set.txpkts.iter().map(|l| usize::from(*l)).sum();
    s.template = udp_template(total, s.tx_mac, s.peer_mac);
}

/// Append `n` packets made from `s.template` to `s.burst`; false if the pool is empty.
pub fn generate(s: &mut Stream, set: &FwdSettings, n: usize) -> bool {
    if set.txpkts.len() == 1 {
        let start = s.burst.len();
        if s.burst.alloc(&s.pool, n).is_err() {
            s.stats.alloc_failed.add(1);
            return false;
        }
        let len = s.template.len();
        for i in start..s.burst.len() {
            if let Some(d) = s.burst.set_len(i, len) {
                d.copy_from_slice(&s.template);
            }
        }
        return true;
    }
    // Multi-segment packets: one segment per --txpkts length.
    for _ in 0..n {
        let mut off = 0;
        let mut head: Option<Mbuf> = None;
        for &seg_len in &set.txpkts {
            let seg_len = usize::from(seg_len);
            let Ok(mut m) = Mbuf::alloc(&s.pool) else {
                s.stats.alloc_failed.add(1);
                return false;
            };
            let end = (off + seg_len).min(s.template.len());
            match m.append(end - off) {
                Ok(d) => d.copy_from_slice(&s.template[off..end]),
                Err(_) => return false,
            }
            off = end;
            match head.as_mut() {
                None => head = Some(m),
                Some(h) => {
                    if h.chain(m).is_err() {
                        return false;
                    }
                }
            }
        }
        if let Some(h) = head {
            if s.burst.push(h).is_err() {
                break;
            }
        }
    }
    true
}

fn fwd(s: &mut Stream, set: &FwdSettings) {
    if generate(s, set, set.burst) {
        tx_all(s, set);
    }
}

/// The engine.
pub const ENGINE: FwdEngine = FwdEngine { name: "txonly", begin, fwd, counts_tx: true };
