//! [`Config`]: the per-connection settings, with defaults close to Linux's.
use std::time::Duration;

/// Settings of a connection (copied into each [`Connection`](crate::Connection)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The MSS this side announces and the largest payload it sends: the path MTU
    /// minus the IP and TCP headers (1460 for Ethernet and IPv4). Clamped to 64..=65495.
    pub mss: u16,
    /// Bytes of the send buffer: queued plus unacknowledged data.
    pub send_buffer: usize,
    /// Bytes of the receive buffer: the largest window offered, and the memory the
    /// received data may pin ([`Payload::truesize`](crate::Payload::truesize): a
    /// payload in a packet buffer is charged the buffer). Beyond it small pieces are
    /// collapsed, then out-of-order data is pruned, then arriving data dropped; the
    /// window offered is scaled by the payload-to-memory ratio of full-sized segments.
    /// Clamped to 1..=(65535 << 14); with window scaling off, 65535 at most is offered.
    pub recv_buffer: usize,
    /// Initial congestion window in segments (RFC 6928: 10).
    pub initial_window: u32,
    /// RTO before the first RTT sample (RFC 6298: 1 s).
    pub rto_initial: Duration,
    /// Lower bound of the RTO (RFC 6298 says 1 s; Linux and this default use 200 ms).
    pub rto_min: Duration,
    /// Upper bound of the RTO and of the persist (zero-window probe) interval.
    pub rto_max: Duration,
    /// How long an ACK for in-order data may be delayed (zero: never delayed). An ACK
    /// is sent at once for every second segment, out-of-order data, and a FIN.
    pub ack_delay: Duration,
    /// Maximum segment lifetime: TIME-WAIT lasts 2 × MSL (RFC 9293 says 2 min; 30 s here).
    pub msl: Duration,
    /// Retransmission timeouts in a row before an established connection is dropped.
    pub max_retries: u32,
    /// Retransmission timeouts in a row before a SYN or SYN-ACK is given up.
    pub syn_retries: u32,
    /// Offer and accept window scaling (RFC 7323).
    pub window_scaling: bool,
    /// Offer and accept timestamps (RFC 7323): RTT measurement and PAWS.
    pub timestamps: bool,
    /// Offer and accept selective acknowledgments (RFC 2018; blocks are sent, not used).
    pub sack: bool,
    /// Nagle's algorithm (RFC 896): hold back a small segment while data is unacknowledged.
    pub nagle: bool,
    /// Challenge ACKs (RFC 5961) a connection sends per second at most.
    pub challenge_ack_limit: u32,
    /// Out-of-order pieces the receive side keeps at most; more are dropped (and resent).
    pub max_ooo_segments: usize,
    /// Congestion avoidance: CUBIC (default) or NewReno.
    pub congestion: crate::Congestion,
    /// Answer SYNs with SYN cookies (RFC 4987) when a listener's backlog is full,
    /// instead of dropping them. A cookie connection keeps only the peer's MSS (no
    /// window scaling, timestamps or SACK), as Linux without timestamps.
    pub syn_cookies: bool,
    /// Keep-alive probes (RFC 9293 §3.8.4, RFC 1122 §4.2.3.6) on an open connection
    /// with nothing outstanding after `idle` without a segment from the peer; it is
    /// reset after `probes` unanswered probes. `None` (the default, as RFC 1122 says):
    /// no probes.
    pub keepalive: Option<Keepalive>,
    /// Reset a connection from which no segment arrived for this long (any
    /// synchronized state but TIME-WAIT). `None`: never.
    pub idle_timeout: Option<Duration>,
    /// Reset a connection left in FIN-WAIT-2 (our FIN acknowledged, the peer's not
    /// coming) this long (Linux's `tcp_fin_timeout`, 60 s). `None`: wait forever.
    pub fin_wait2_timeout: Option<Duration>,
    /// Reset a connection whose peer accepts nothing for this long while we have data
    /// or a FIN waiting for it (unacknowledged, or held back by a zero window): no
    /// ACK that moves `snd_una` (nginx's `send_timeout`, Linux's `TCP_USER_TIMEOUT`).
    /// `None` (the default): only the retransmission limit ends such a connection,
    /// and a peer that keeps answering zero-window probes is kept forever.
    pub send_timeout: Option<Duration>,
    /// With `send_timeout`: the bytes per second the peer must acknowledge while data
    /// waits for it. Each `send_timeout` period in which data waited must end with at
    /// least `send_min_rate` × `send_timeout` bytes acknowledged (or nothing left
    /// waiting), else the connection is reset ([`ConnError::SendTooSlow`]); a reader
    /// that takes a little now and then cannot keep a full send buffer forever. 0
    /// (the default): any acknowledgment starts the timeout again.
    ///
    /// [`ConnError::SendTooSlow`]: crate::ConnError::SendTooSlow
    pub send_min_rate: u32,
    /// TSO: new data goes out in segments of up to this many payload bytes (whole
    /// sender MSSs), marked with [`Segment::tso_segsz`](crate::Segment::tso_segsz) for
    /// the NIC or the kernel to cut. Retransmissions stay one MSS. 0 (the default): off.
    pub tso_max: usize,
}

/// Keep-alive settings (Linux's `tcp_keepalive_time`, `_intvl`, `_probes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// Quiet time before the first probe (RFC 1122: no less than two hours by
    /// default; Linux 7200 s).
    pub idle: Duration,
    /// Between unanswered probes (Linux 75 s).
    pub interval: Duration,
    /// Unanswered probes before the connection is reset (Linux 9).
    pub probes: u32,
}

impl Default for Keepalive {
    fn default() -> Self {
        Keepalive { idle: Duration::from_secs(7200), interval: Duration::from_secs(75), probes: 9 }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mss: 1460,
            send_buffer: 256 * 1024,
            recv_buffer: 256 * 1024,
            initial_window: 10,
            rto_initial: Duration::from_secs(1),
            rto_min: Duration::from_millis(200),
            rto_max: Duration::from_secs(60),
            ack_delay: Duration::from_millis(40),
            msl: Duration::from_secs(30),
            max_retries: 15,
            syn_retries: 6,
            window_scaling: true,
            timestamps: true,
            sack: true,
            nagle: true,
            challenge_ack_limit: 100,
            max_ooo_segments: 256,
            congestion: crate::Congestion::Cubic,
            syn_cookies: true,
            keepalive: None,
            idle_timeout: None,
            fin_wait2_timeout: Some(Duration::from_secs(60)),
            send_timeout: None,
            send_min_rate: 0,
            tso_max: 0,
        }
    }
}

impl Config {
    /// The receive window offered at most: `recv_buffer`, bounded by what the window
    /// field can say.
    pub(crate) fn recv_window_max(&self) -> usize {
        self.recv_buffer.clamp(1, 65535 << 14)
    }

    /// The window-scale shift announced in our SYN: the smallest that lets the field
    /// say the whole receive buffer (RFC 7323 §2.3, at most 14).
    pub(crate) fn rcv_wscale(&self) -> u8 {
        let mut shift = 0;
        while (self.recv_window_max() >> shift) > 65535 && shift < 14 {
            shift += 1;
        }
        shift
    }

    /// `mss` clamped to what an IPv4 datagram can carry and to a sane minimum.
    pub(crate) fn local_mss(&self) -> u16 {
        self.mss.clamp(64, 65495)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_scale_fits_the_buffer() {
        let mut c = Config::default();
        assert_eq!(c.rcv_wscale(), 3); // 256 KiB >> 3 = 32 Ki
        c.recv_buffer = 65535;
        assert_eq!(c.rcv_wscale(), 0);
        c.recv_buffer = 65536;
        assert_eq!(c.rcv_wscale(), 1);
        c.recv_buffer = usize::MAX;
        assert_eq!(c.rcv_wscale(), 14);
        c.recv_buffer = 0;
        assert_eq!((c.recv_window_max(), c.rcv_wscale()), (1, 0));
        c.mss = 1;
        assert_eq!(c.local_mss(), 64);
    }
}
