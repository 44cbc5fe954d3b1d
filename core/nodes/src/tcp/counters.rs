//! What the `tcp` node counts (one declaration each for its counters and its
//! gauges), and how a connection's own counts and state reach them.

use super::*;

ironpath_graph::counters! {
    /// What the `tcp` node counts.
    pub enum TcpCounter {
        SegsIn("segs_in", "TCP segments received (an aggregate counts once)"),
        SegsOut("segs_out", "TCP segments sent"),
        Malformed("malformed", "packets dropped (bad or truncated headers, fragments, VLAN)"),
        BadChecksum("bad_checksum", "packets dropped (IPv4 header or TCP checksum)"),
        NotOurs("not_ours", "packets dropped (not TCP to one of our addresses)"),
        RstSent("rst_sent", "RSTs for segments no connection or listener wants"),
        ConnsOpened("conns_opened", "connections accepted or opened"),
        ConnsClosed("conns_closed", "connections removed (closed, aborted, timed out)"),
        ConnsFailed("conns_failed", "connections closed by a RST, a timeout or a refusal"),
        Retransmits("retransmits", "segments sent again"),
        RtoTimeouts("rto_timeouts", "retransmission timer expiries"),
        AllocFailed("alloc_failed", "frames not built (mempool empty; sent later)"),
        TxFull("tx_full", "immediate replies dropped (output burst full)"),
        SynDropped("syn_dropped", "SYNs refused (backlog or connection table full)"),
        AppBytesIn("app_bytes_in", "payload bytes the applications read"),
        AppBytesOut("app_bytes_out", "payload bytes the applications queued"),
        HttpRequests("http_requests", "HTTP requests answered or completed"),
        HttpErrors("http_errors", "HTTP answers >= 400, or failed client requests"),
        ClientsDone("clients_done", "client connections that finished"),
        TimeWaitReused("time_wait_reused", "TIME-WAIT connections replaced by a new SYN"),
        TsqThrottled("tsq_throttled", "times a connection waited for TX completions (tx_inflight_limit)"),
        SynCookiesSent("syn_cookies_sent", "SYN-ACKs with a SYN cookie (backlog full, no state kept)"),
        SynCookiesValid("syn_cookies_valid", "connections made from a valid SYN cookie"),
        KeepaliveProbes("keepalive_probes", "keep-alive probes sent"),
        IdleResets("idle_resets", "connections reset by idle_timeout or fin_wait2_timeout"),
        KeepaliveResets("keepalive_resets", "connections reset after unanswered keep-alive probes"),
        ChallengeAcks("challenge_acks", "RFC 5961 challenge ACKs sent (RST or SYN in window, unacceptable ACK)"),
        MemDropped("mem_dropped", "data segments dropped: memory held by all connections' received data over the node's limit (memory_limit, pool_share; out-of-order first)"),
        MemRefused("mem_refused", "SYNs refused: received data's memory over the node's limit"),
        TsoSent("tso_sent", "TSO packets sent (up to 64 KiB, cut into MSS-sized segments by the port)"),
        TimeWaitOverflow("time_wait_overflow", "connections closed without TIME-WAIT (max_time_wait connections already in it)"),
        RcvCollapsed("rcv_collapsed", "received pieces copied into compact buffers (each pinned a packet buffer for a few bytes)"),
        OooPruned("ooo_pruned", "out-of-order bytes dropped to make room, highest first (resent by the peer)"),
        RcvMemDrops("rcv_mem_drops", "data segments dropped: the connection's recv_buffer still full after collapsing and pruning"),
        SendTimeouts("send_timeouts", "connections reset: the peer accepted nothing for send_timeout"),
        HeaderTimeouts("header_timeouts", "HTTP connections closed: no complete request head within header_timeout (408 if one had begun)"),
        KeepaliveTimeouts("keepalive_timeouts", "HTTP connections closed: no new request within keepalive_timeout"),
        PeerCapped("peer_capped", "connections refused: the peer address held max_per_peer already"),
        NeighEvicted("neigh_evicted", "neighbour entries dropped to stay within max_neighbours (none had a connection)"),
        NeighRefused("neigh_refused", "MAC changes refused: from a segment no connection or handshake accepted, for an address with connections"),
        SendTooSlow("send_too_slow", "connections reset: the peer acknowledged less than send_min_rate x send_timeout in a send_timeout"),
        PeerMemDropped("peer_mem_dropped", "data segments dropped: their peer (address, IPv6 /64) held its peer_share of the memory budget (out-of-order first)"),
        PeerMemRefused("peer_mem_refused", "SYNs and cookie handshakes refused: their peer held its peer_share of the memory budget"),
        HeldBack("held_back", "times an application took no new work (request, file piece, echo read) while it had some: its peer over peer_share or all over memory_limit"),
        MemReclaimed("mem_reclaimed", "connections reset under memory pressure, before any SYN is refused: the largest holders without progress for a second, then those of the peers over their fair part of the budget"),
        ConnsReclaimed("conns_reclaimed", "connections dropped with the table full, before any SYN is refused: the idlest of the peers over their fair part of the table"),
        PipelineHeld("pipeline_held", "times an HTTP connection left pipelined requests unparsed: max_pipeline responses queued or unacknowledged"),
        FdExhausted("fd_exhausted", "HTTP requests answered 503: the file could not be opened for lack of descriptors"),
        FdsClosed("fds_closed", "descriptors of cached files closed to stay within open_files (least recently used first)"),
        FilesStreamed("files_streamed", "files opened to be streamed (read as sent, freed once acknowledged): larger than what file_cache had left"),
        FileIo("file_io", "file-system requests handed to the file-I/O threads (opens, checks of cached files, piece reads)"),
        FileIoFull("file_io_full", "times an HTTP request or a file piece waited: file_io_queue requests outstanding"),
        FileIoPeerFull("file_io_peer_full", "times an HTTP request or a file piece waited: its peer had its share (peer_share) of file_io_queue outstanding"),
        FileIoConnHeld("file_io_conn_held", "times an HTTP connection left pipelined requests unparsed behind one whose file was being opened (one at a time per connection)"),
        FileIoTimeouts("file_io_timeouts", "HTTP requests answered 503, or responses reset, because their file did not open, or a piece did not arrive, within header_timeout"),
    }
}

ironpath_graph::counters! {
    /// The `tcp` node's gauges: connections by state (RFC 9293 names), as `ss -s` counts.
    pub enum TcpGauge {
        SynSent("syn_sent", "connections in SYN-SENT"),
        SynReceived("syn_received", "connections in SYN-RECEIVED"),
        Established("established", "connections in ESTABLISHED"),
        FinWait1("fin_wait_1", "connections in FIN-WAIT-1"),
        FinWait2("fin_wait_2", "connections in FIN-WAIT-2"),
        CloseWait("close_wait", "connections in CLOSE-WAIT"),
        Closing("closing", "connections in CLOSING"),
        LastAck("last_ack", "connections in LAST-ACK"),
        TimeWait("time_wait", "connections in TIME-WAIT (the compact table)"),
    }
}

/// The gauge of a state (`None`: CLOSED, about to leave the table).
pub(super) fn state_gauge(s: State) -> Option<usize> {
    Some(usize::from(match s {
        State::Closed => return None,
        State::SynSent => TcpGauge::SynSent,
        State::SynReceived => TcpGauge::SynReceived,
        State::Established => TcpGauge::Established,
        State::FinWait1 => TcpGauge::FinWait1,
        State::FinWait2 => TcpGauge::FinWait2,
        State::CloseWait => TcpGauge::CloseWait,
        State::Closing => TcpGauge::Closing,
        State::LastAck => TcpGauge::LastAck,
        State::TimeWait => TcpGauge::TimeWait,
    }))
}

/// Moves `e` to the count of the state its connection is in now.
pub(super) fn count_state(states: &mut [u64; TcpGauge::COUNT], e: &mut Entry) {
    let now = e.conn.state();
    if now != e.counted {
        if let Some(k) = state_gauge(e.counted) {
            states[k] -= 1;
        }
        if let Some(k) = state_gauge(now) {
            states[k] += 1;
        }
        e.counted = now;
    }
}

/// Takes `e` out of the state counts (it leaves the table).
pub(super) fn uncount_state(states: &mut [u64; TcpGauge::COUNT], e: &Entry) {
    if let Some(k) = state_gauge(e.counted) {
        states[k] -= 1;
    }
}

/// The node's counters that add up a connection's own, with the connection's values.
pub(super) fn synced(c: &ironpath_tcp::Counters) -> [(TcpCounter, u64); 7] {
    [
        (TcpCounter::Retransmits, c.retransmits),
        (TcpCounter::RtoTimeouts, c.rto_timeouts),
        (TcpCounter::KeepaliveProbes, c.keepalive_probes),
        (TcpCounter::ChallengeAcks, c.challenge_acks),
        (TcpCounter::RcvCollapsed, c.rcv_collapsed),
        (TcpCounter::OooPruned, c.ooo_pruned),
        (TcpCounter::RcvMemDrops, c.rcv_mem_drops),
    ]
}

/// Adds what `e`'s connection counted since the last call to the node's counters.
#[inline]
pub(super) fn sync_counters(cx: &NodeCx<'_>, e: &mut Entry) {
    for ((k, v), before) in synced(e.conn.counters()).into_iter().zip(e.seen.iter_mut()) {
        if v != *before {
            cx.count(k, v - *before);
            *before = v;
        }
    }
}
