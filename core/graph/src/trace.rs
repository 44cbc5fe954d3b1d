//! Per-packet trace, as VPP's `trace add`: arming a node ([`crate::GraphInfo::trace`])
//! records the next N packets it handles. A record is one header line (lcore, node,
//! time since the trace was armed, frame length, the mbuf's offload flags by name,
//! the edge the packet took) and the node's [`crate::Node::trace`] lines, indented (by
//! default the frame's headers decoded one per line, [`ironpath_wire::describe`]).
//! The packet is then followed through every node after it on the lcore, as VPP's
//! trace follows a buffer: each hop adds a `then lcore L NODE: +T ns -> EDGE` line
//! (its time, length, flags and edge) and the headers again when the node changed
//! them. A packet is known at the next node by its mbuf's address; the record ends
//! where the packet leaves the lcore's walk (sent, freed, or into a ring).
//! When no trace is armed the engine pays one relaxed load per walk (the lcore's
//! watch flag, shared with capture); while one
//! is armed the traced node's lcore formats its records (a slow path: it allocates).
//!
//! Bounds: at most [`TRACE_MAX_PACKETS`] packets per arming, [`TRACE_CAPACITY`] records
//! kept (older ones are discarded and counted; so is one the lcore would have had
//! to wait for a reader to place: the lcore never blocks) and [`TRACE_RECORD_MAX`] bytes per
//! record (longer ones are cut and say so): at most about 8 MiB.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, TryLockError};

use ironpath_eal::abi;

/// Most records kept; older ones are discarded (and counted).
pub const TRACE_CAPACITY: usize = 4096;
/// Most packets one arming of a node records.
pub const TRACE_MAX_PACKETS: u32 = 1000;
/// Most bytes of one record; a longer one is cut.
pub const TRACE_RECORD_MAX: usize = 2048;

/// Records shared between the lcores and the control plane.
#[derive(Debug, Default)]
pub struct TraceBuf {
    records: Mutex<VecDeque<String>>,
    /// Records discarded because [`TRACE_CAPACITY`] were kept, or because a reader held
    /// the buffer when the lcore had one, since the last take.
    discarded: AtomicU64,
    /// TSC when the trace was armed (0: not yet); times are relative to it.
    start_tsc: AtomicU64,
}

impl TraceBuf {
    pub(crate) fn push(&self, mut rec: String) {
        if rec.len() > TRACE_RECORD_MAX {
            let mut cut = TRACE_RECORD_MAX;
            while !rec.is_char_boundary(cut) {
                cut -= 1;
            }
            rec.truncate(cut);
            rec.push_str(&format!("\n  (record cut at {TRACE_RECORD_MAX} bytes)"));
        }
        // The lcore never waits: while a reader holds the buffer (a `show trace`
        // copying it out), the record is dropped and counted with the discarded.
        let mut r = match self.records.try_lock() {
            Ok(r) => r,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => {
                self.discarded.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        if r.len() == TRACE_CAPACITY {
            r.pop_front();
            self.discarded.fetch_add(1, Ordering::Relaxed);
        }
        r.push_back(rec);
    }

    /// Take all records (oldest first); when older ones were discarded for room, the
    /// first record says how many.
    pub fn take(&self) -> Vec<String> {
        let mut r = self.records.lock().unwrap_or_else(|e| e.into_inner());
        let lost = self.discarded.swap(0, Ordering::Relaxed);
        let mut v = Vec::with_capacity(r.len() + 1);
        if lost > 0 {
            v.push(format!("({lost} records discarded: at most {TRACE_CAPACITY} are kept, none waited for)"));
        }
        v.extend(r.drain(..));
        v
    }

    /// The first `max` records (oldest first) without taking them, the number kept in
    /// all, and how many older ones were discarded for room.
    pub fn peek(&self, max: usize) -> (Vec<String>, usize, u64) {
        let r = self.records.lock().unwrap_or_else(|e| e.into_inner());
        (r.iter().take(max).cloned().collect(), r.len(), self.discarded.load(Ordering::Relaxed))
    }

    /// Drop every record and restart the trace's clock at the next arming.
    pub fn clear(&self) {
        self.records.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.discarded.store(0, Ordering::Relaxed);
        self.start_tsc.store(0, Ordering::Relaxed);
    }

    /// Start the trace's clock at `tsc` unless it runs already.
    pub(crate) fn start(&self, tsc: u64) {
        let _ = self.start_tsc.compare_exchange(0, tsc.max(1), Ordering::Relaxed, Ordering::Relaxed);
    }

    /// Nanoseconds from the trace's start to `tsc` (0 before it or when not started).
    pub(crate) fn since_start_ns(&self, tsc: u64, hz: u64) -> u64 {
        let start = self.start_tsc.load(Ordering::Relaxed);
        if start == 0 || hz == 0 {
            return 0;
        }
        (u128::from(tsc.saturating_sub(start)) * 1_000_000_000 / u128::from(hz)) as u64
    }
}

/// A one-line summary of a frame: its length and its first 16 bytes in hex.
pub fn summarize(frame: &[u8]) -> String {
    crate::summary::summarize(frame)
}

/// The names of the mbuf offload flags set in `flags`, space-separated (`none` when
/// none is), unknown bits as `0x…`.
pub fn ol_flag_names(flags: u64) -> String {
    const NAMES: [(u64, &str); 18] = [
        (abi::RX_L4_CKSUM_NONE, "RX_L4_CKSUM_NONE"),
        (abi::RX_L4_CKSUM_GOOD, "RX_L4_CKSUM_GOOD"),
        (abi::RX_L4_CKSUM_BAD, "RX_L4_CKSUM_BAD"),
        (abi::RX_IP_CKSUM_GOOD, "RX_IP_CKSUM_GOOD"),
        (abi::RX_IP_CKSUM_BAD, "RX_IP_CKSUM_BAD"),
        (abi::RX_RSS_HASH, "RX_RSS_HASH"),
        (abi::RX_VLAN_STRIPPED, "RX_VLAN_STRIPPED"),
        (abi::RX_AGGREGATED, "RX_AGGREGATED"),
        (abi::RX_TIMESTAMP, "RX_TIMESTAMP"),
        (abi::TX_IP_CKSUM, "TX_IP_CKSUM"),
        (abi::TX_TCP_CKSUM, "TX_TCP_CKSUM"),
        (abi::TX_UDP_CKSUM, "TX_UDP_CKSUM"),
        (abi::TX_TCP_SEG, "TX_TCP_SEG"),
        (abi::TX_IPV4, "TX_IPV4"),
        (abi::TX_IPV6, "TX_IPV6"),
        (abi::TX_PUSH, "TX_PUSH"),
        (abi::IND_ATTACHED, "IND_ATTACHED"),
        (abi::EXT_ATTACHED, "EXT_ATTACHED"),
    ];
    let mut s = String::new();
    let mut left = flags;
    for (bit, name) in NAMES {
        if flags & bit != 0 {
            if !s.is_empty() {
                s.push(' ');
            }
            s.push_str(name);
            left &= !bit;
        }
    }
    if left != 0 {
        if !s.is_empty() {
            s.push(' ');
        }
        s.push_str(&format!("0x{left:x}"));
    }
    if s.is_empty() {
        s.push_str("none");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_named() {
        assert_eq!(ol_flag_names(0), "none");
        assert_eq!(
            ol_flag_names(abi::RX_IP_CKSUM_GOOD | abi::RX_L4_CKSUM_GOOD | 1 << 50),
            "RX_L4_CKSUM_GOOD RX_IP_CKSUM_GOOD 0x4000000000000"
        );
    }

    #[test]
    fn records_and_bytes_are_bounded() {
        let b = TraceBuf::default();
        for i in 0..TRACE_CAPACITY + 3 {
            b.push(format!("r{i}"));
        }
        b.push("x".repeat(TRACE_RECORD_MAX * 2));
        let t = b.take();
        assert_eq!(t[0], format!("(4 records discarded: at most {TRACE_CAPACITY} are kept, none waited for)"));
        assert_eq!(t[1], "r4");
        assert_eq!(t.len(), TRACE_CAPACITY + 1);
        assert!(t[TRACE_CAPACITY].ends_with("(record cut at 2048 bytes)"));
        assert!(t[TRACE_CAPACITY].len() < TRACE_RECORD_MAX + 40);
        assert!(b.take().is_empty());
        b.push("a".into());
        b.push("b".into());
        assert_eq!(b.peek(1), (vec!["a".to_string()], 2, 0));
        assert_eq!(b.take().len(), 2);
    }

    #[test]
    fn the_lcore_never_waits_for_a_reader() {
        let b = TraceBuf::default();
        b.push("kept".into());
        {
            let _reader = b.records.lock().unwrap();
            b.push("while a reader holds the buffer".into());
        }
        assert_eq!(b.peek(8), (vec!["kept".to_string()], 1, 1));
    }

    #[test]
    fn time_is_relative_to_the_start() {
        let b = TraceBuf::default();
        assert_eq!(b.since_start_ns(5000, 1_000_000_000), 0);
        b.start(1000);
        b.start(2000);
        assert_eq!(b.since_start_ns(4000, 2_000_000_000), 1500);
        b.clear();
        assert_eq!(b.since_start_ns(4000, 2_000_000_000), 0);
    }
}
