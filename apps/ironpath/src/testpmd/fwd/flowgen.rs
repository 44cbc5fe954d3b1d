//! `flowgen`: receives and frees what arrives (as DPDK's flowgen does, so its RX
//! counts), then sends like `txonly`, but each packet goes to the next of `--flowgen-flows`
//! destination addresses (198.18.1.0 onwards, inside 198.18.0.0/15); the IPv4 and UDP
//! checksums are updated incrementally (RFC 1624).
use super::txonly;
use crate::testpmd::engine::{rx, tx_all, FwdEngine, FwdSettings, Stream};
use crate::testpmd::pkt::{be16, csum_update16, put16};

const BASE: u32 = u32::from_be_bytes([198, 18, 1, 0]);

fn fwd(s: &mut Stream, set: &FwdSettings) {
    if rx(s, set) > 0 {
        s.burst.free_all();
    }
    let start = s.burst.len();
    if !txonly::generate(s, set, set.burst) {
        return;
    }
    let flows = set.flows.max(1);
    for i in start..s.burst.len() {
        let flow = s.next_flow;
        s.next_flow = (s.next_flow + 1) % flows;
        let ip = (BASE + flow).to_be_bytes();
        let Some(d) = s.burst.data_mut(i) else { continue };
        if d.len() < 42 {
            continue;
        }
        let (old_hi, old_lo) = (be16(d, 30).unwrap_or(0), be16(d, 32).unwrap_or(0));
        let (new_hi, new_lo) = (u16::from_be_bytes([ip[0], ip[1]]), u16::from_be_bytes([ip[2], ip[3]]));
        d[30..34].copy_from_slice(&ip);
        let ipc = be16(d, 24).unwrap_or(0);
        put16(d, 24, csum_update16(csum_update16(ipc, old_hi, new_hi), old_lo, new_lo));
        let udpc = be16(d, 40).unwrap_or(0);
        let mut c = csum_update16(csum_update16(udpc, old_hi, new_hi), old_lo, new_lo);
        if c == 0 {
            c = 0xffff;
        }
        put16(d, 40, c);
    }
    tx_all(s, set);
}

/// The engine.
pub const ENGINE: FwdEngine = FwdEngine { name: "flowgen", begin: txonly::begin, fwd, counts_tx: true };
