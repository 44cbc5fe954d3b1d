//! [`Counters`]: what happened on one connection (single writer: the connection).

/// Per-connection event counts, in segments unless the name says otherwise.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Segments processed, counting each original segment of an aggregate (`segs`).
    pub segs_in: u64,
    /// Segments emitted (by `dispatch` and as replies from `process`).
    pub segs_out: u64,
    /// Payload bytes accepted into the receive buffer (in order or not).
    pub bytes_in: u64,
    /// Payload bytes emitted, retransmissions included.
    pub bytes_out: u64,
    /// Segments that resent sequence space already sent (any cause, SYNs included).
    pub retransmits: u64,
    /// Fast retransmits (third duplicate ACK, RFC 5681 §3.2).
    pub fast_retransmits: u64,
    /// Partial ACKs during NewReno recovery (each resends one segment, RFC 6582).
    pub partial_acks: u64,
    /// Retransmission timer expiries.
    pub rto_timeouts: u64,
    /// Duplicate ACKs received (RFC 5681 definition).
    pub dup_acks: u64,
    /// Data segments received out of order (each original segment of an aggregate).
    pub ooo_segments: u64,
    /// Challenge ACKs sent (RFC 5961: RST in window but not exact, SYN, unacceptable ACK).
    pub challenge_acks: u64,
    /// Challenge ACKs suppressed by the rate limit.
    pub challenge_acks_suppressed: u64,
    /// ACKs not sent in answer to unacceptable pure ACKs (at most one per 500 ms).
    pub oow_acks_suppressed: u64,
    /// Zero-window probes sent.
    pub zero_window_probes: u64,
    /// Pure window updates sent after the application freed receive buffer.
    pub window_updates: u64,
    /// Segments with an unacceptable sequence number (answered with an ACK or dropped).
    pub out_of_window: u64,
    /// Segments dropped by PAWS (RFC 7323 §5) or for missing timestamps.
    pub paws_drops: u64,
    /// Received payload bytes dropped: beyond the window or over the out-of-order limit.
    pub bytes_dropped: u64,
    /// Keep-alive probes sent.
    pub keepalive_probes: u64,
    /// Received pieces copied into compact buffers because they pinned much more
    /// memory than they carry (collapse, as Linux's `TCPRcvCollapsed`).
    pub rcv_collapsed: u64,
    /// Out-of-order payload bytes dropped to make room under memory pressure (as
    /// Linux's `OfoPruned`; the peer sends them again).
    pub ooo_pruned: u64,
    /// Data segments dropped because the receive buffer's memory stayed full after
    /// collapsing and pruning (as Linux's `TCPRcvQDrop`).
    pub rcv_mem_drops: u64,
}
