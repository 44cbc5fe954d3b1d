//! Option negotiation at the handshake (RFC 9293 MSS, RFC 7323 window scale and
//! timestamps, RFC 2018 SACK-permitted) and timestamp helpers.
use std::time::Duration;

use ironpath_wire::{TcpControl, TcpRepr};

use crate::{Config, SeqNum, Time};

/// RFC 9293 §3.7.1: the MSS to assume when the peer's SYN has none.
const DEFAULT_MSS_V4: u16 = 536;
const DEFAULT_MSS_V6: u16 = 1220;

/// The smallest peer MSS taken at face value (Linux uses 48): keeps segments from
/// being all header.
const MIN_PEER_MSS: u16 = 64;

/// PAWS ignores TS.Recent after this long without an update (RFC 7323 §5.5: 24 days).
pub(crate) const PAWS_IDLE: Duration = Duration::from_secs(24 * 24 * 3600);

/// What the handshake settled (or, before the peer's SYN, what we offer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Negotiated {
    /// The peer's MSS (what we may send in one segment, before options).
    pub(crate) snd_mss: u16,
    /// Shift applied to the window fields the peer sends.
    pub(crate) snd_wscale: u8,
    /// Shift applied to the window fields we send.
    pub(crate) rcv_wscale: u8,
    pub(crate) window_scaling: bool,
    pub(crate) timestamps: bool,
    pub(crate) sack: bool,
}

impl Negotiated {
    /// What our SYN offers.
    pub(crate) fn offer(config: &Config) -> Self {
        Negotiated {
            snd_mss: DEFAULT_MSS_V4,
            snd_wscale: 0,
            rcv_wscale: if config.window_scaling { config.rcv_wscale() } else { 0 },
            window_scaling: config.window_scaling,
            timestamps: config.timestamps,
            sack: config.sack,
        }
    }

    /// Our offer combined with the peer's SYN: an option is on when both sides sent it.
    pub(crate) fn with_peer_syn(self, syn: &TcpRepr, ipv6: bool) -> Self {
        let default_mss = if ipv6 { DEFAULT_MSS_V6 } else { DEFAULT_MSS_V4 };
        let window_scaling = self.window_scaling && syn.window_scale.is_some();
        Negotiated {
            snd_mss: syn.max_seg_size.unwrap_or(default_mss).max(MIN_PEER_MSS),
            snd_wscale: if window_scaling { syn.window_scale.unwrap_or(0).min(14) } else { 0 },
            rcv_wscale: if window_scaling { self.rcv_wscale } else { 0 },
            window_scaling,
            timestamps: self.timestamps && syn.timestamp.is_some(),
            sack: self.sack && syn.sack_permitted,
        }
    }

    /// Option bytes every non-SYN segment carries besides SACK blocks: the timestamp
    /// (10 bytes behind two NOPs).
    pub(crate) fn fixed_options_len(&self) -> usize {
        if self.timestamps {
            12
        } else {
            0
        }
    }
}

/// Option bytes of `blocks` SACK blocks (behind two NOPs).
pub(crate) fn sack_options_len(blocks: usize) -> usize {
    if blocks == 0 {
        0
    } else {
        4 + 8 * blocks
    }
}

/// Whether timestamp `a` is older than `b` (modulo 2^32, RFC 7323 §5.2).
pub(crate) fn ts_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// PAWS (RFC 7323 §5.3 R1): is `seg` (`plen` payload bytes, timestamp `tsval`) an old
/// duplicate for a connection at `rcv_nxt` / `snd_una` whose TS.Recent is `recent`
/// (value, and when it was taken)?
///
/// A pure duplicate ACK that arrives after a later one (reordered ACKs) is not: it may
/// be a loss signal, so PAWS lets it through (as Linux's `tcp_disordered_ack`); its
/// timestamp never becomes TS.Recent. After `PAWS_IDLE` TS.Recent is stale.
pub(crate) fn paws_rejects(
    seg: &TcpRepr,
    plen: usize,
    tsval: u32,
    rcv_nxt: SeqNum,
    snd_una: SeqNum,
    recent: (u32, Time),
    now: Time,
) -> bool {
    let disordered_ack = plen == 0
        && !matches!(seg.control, TcpControl::Fin | TcpControl::Syn)
        && SeqNum(seg.seq_number) == rcv_nxt
        && seg.ack_number == Some(snd_una.0)
        && recent.0.wrapping_sub(tsval) <= 1_000;
    ts_before(tsval, recent.0) && now - recent.1 < PAWS_IDLE && !disordered_ack
}

#[cfg(test)]
mod tests {
    use ironpath_wire::{TcpControl, TcpRepr};

    use super::*;

    fn syn() -> TcpRepr {
        TcpRepr {
            src_port: 1,
            dst_port: 2,
            seq_number: 0,
            ack_number: None,
            control: TcpControl::Syn,
            window_len: 65535,
            max_seg_size: Some(9000),
            window_scale: Some(7),
            sack_permitted: true,
            sack_ranges: [None; 3],
            timestamp: Some((1, 0)),
            payload_len: 0,
        }
    }

    #[test]
    fn both_sides_must_offer() {
        let cfg = Config::default();
        let n = Negotiated::offer(&cfg).with_peer_syn(&syn(), false);
        assert_eq!(
            n,
            Negotiated {
                snd_mss: 9000,
                snd_wscale: 7,
                rcv_wscale: 3,
                window_scaling: true,
                timestamps: true,
                sack: true
            }
        );
        assert_eq!(n.fixed_options_len(), 12);
        let bare = TcpRepr { max_seg_size: None, window_scale: None, sack_permitted: false, timestamp: None, ..syn() };
        let n = Negotiated::offer(&cfg).with_peer_syn(&bare, true);
        assert_eq!(
            n,
            Negotiated {
                snd_mss: 1220,
                snd_wscale: 0,
                rcv_wscale: 0,
                window_scaling: false,
                timestamps: false,
                sack: false
            }
        );
        let off = Config { window_scaling: false, timestamps: false, sack: false, ..cfg };
        let n = Negotiated::offer(&off).with_peer_syn(&syn(), false);
        assert!(!n.window_scaling && !n.timestamps && !n.sack && n.snd_wscale == 0);
        let tiny = TcpRepr { max_seg_size: Some(1), ..syn() };
        assert_eq!(Negotiated::offer(&cfg).with_peer_syn(&tiny, false).snd_mss, 64);
        assert_eq!((sack_options_len(0), sack_options_len(3)), (0, 28));
    }

    #[test]
    fn timestamp_order_wraps() {
        assert!(ts_before(1, 2));
        assert!(ts_before(u32::MAX, 3));
        assert!(!ts_before(3, u32::MAX));
        assert!(!ts_before(5, 5));
    }
}
