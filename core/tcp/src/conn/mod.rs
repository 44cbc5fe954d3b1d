//! [`Connection`]: one connection's state (the TCB of RFC 9293 §3.3.1) and the calls an
//! application makes on it. The other concerns live in sibling files:
//! `input` (segment arrival, the state machine), `output` (what to send and building
//! segments) and `timers` (retransmission, persist, delayed ACK, TIME-WAIT, `poll_at`).
use std::fmt;
use std::time::Duration;

use ironpath_wire::TcpRepr;

use crate::congestion::NewReno;
use crate::options::Negotiated;
use crate::recv_buf::RecvBuffer;
use crate::rtt::RttEstimator;
use crate::send_buf::SendBuffer;
use crate::{Config, ConnError, ConnectError, Counters, Endpoint, IsnGenerator, Payload, SendError, SeqNum, Time};

mod input;
mod output;
mod time_wait;
mod timers;

pub use time_wait::{TimeWait, TimeWaitReply};

/// 1.0 in the fixed point of `Connection::rcv_ratio`.
const RATIO_ONE: u32 = 1024;

/// Connection states of RFC 9293 §3.3.2 (LISTEN is a [`Listener`](crate::Listener)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// No connection (initial after an abort, reset or timeout; final after a close).
    Closed,
    /// Our SYN is sent (or about to be), waiting for the peer's.
    SynSent,
    /// Both SYNs seen, ours not yet acknowledged.
    SynReceived,
    /// Open both ways.
    Established,
    /// We closed; our FIN is not yet acknowledged.
    FinWait1,
    /// We closed and our FIN is acknowledged; the peer may still send.
    FinWait2,
    /// The peer closed; we may still send.
    CloseWait,
    /// Both closed at the same time; our FIN is not yet acknowledged.
    Closing,
    /// The peer closed, then we did; our FIN is not yet acknowledged.
    LastAck,
    /// Both closed; waiting 2 × MSL for stray segments.
    TimeWait,
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            State::Closed => "CLOSED",
            State::SynSent => "SYN-SENT",
            State::SynReceived => "SYN-RECEIVED",
            State::Established => "ESTABLISHED",
            State::FinWait1 => "FIN-WAIT-1",
            State::FinWait2 => "FIN-WAIT-2",
            State::CloseWait => "CLOSE-WAIT",
            State::Closing => "CLOSING",
            State::LastAck => "LAST-ACK",
            State::TimeWait => "TIME-WAIT",
        })
    }
}

/// A snapshot of a connection's variables (for statistics and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Info {
    /// Oldest unacknowledged sequence number.
    pub snd_una: SeqNum,
    /// Next sequence number to send.
    pub snd_nxt: SeqNum,
    /// Highest sequence number sent plus one (beyond `snd_nxt` after a timeout).
    pub snd_max: SeqNum,
    /// Next sequence number expected.
    pub rcv_nxt: SeqNum,
    /// The peer's window, scaled.
    pub snd_wnd: u32,
    /// The window we advertised and still hold open (from `rcv_nxt`).
    pub rcv_wnd: u32,
    /// Congestion window in bytes.
    pub cwnd: u32,
    /// Slow-start threshold in bytes.
    pub ssthresh: u32,
    /// Sender MSS: payload bytes of a full segment (timestamps deducted).
    pub smss: u32,
    /// Smoothed RTT, once measured.
    pub srtt: Option<Duration>,
    /// The retransmission timeout, backoff included.
    pub rto: Duration,
    /// In NewReno fast recovery.
    pub in_recovery: bool,
    /// The congestion avoidance algorithm.
    pub congestion: crate::Congestion,
    /// Window-scale shifts `(ours, the peer's)` if window scaling was negotiated.
    pub window_scale: Option<(u8, u8)>,
    /// Timestamps negotiated.
    pub timestamps: bool,
    /// SACK negotiated.
    pub sack: bool,
}

/// Deadlines; `None` means the timer is stopped.
#[derive(Debug, Clone, Copy, Default)]
struct Timers {
    /// Retransmission (RFC 6298).
    rto: Option<Time>,
    /// Zero-window probe (RFC 9293 §3.8.6.1).
    persist: Option<Time>,
    /// Delayed ACK.
    ack: Option<Time>,
    /// End of TIME-WAIT.
    time_wait: Option<Time>,
    /// Keep-alive, idle timeout or FIN-WAIT-2 timeout: the earliest that may be due.
    /// Traffic does not move it (no timer update per segment); when it expires the
    /// real deadline is worked out again from `last_rx` (as Linux's keep-alive timer).
    idle: Option<Time>,
}

/// One TCP connection: a state machine over segments and time, with its buffers.
///
/// It does no I/O and reads no clock. The caller:
/// * feeds every segment of this 4-tuple to [`process`](Self::process) and transmits
///   the reply it may return;
/// * calls [`dispatch`](Self::dispatch) when [`poll_at`](Self::poll_at) is due (and after
///   `process`, `send`, `recv` or `close`), transmitting what it emits;
/// * moves data with [`send`](Self::send) and [`recv`](Self::recv).
#[derive(Debug, Clone)]
pub struct Connection<P> {
    config: Config,
    local: Endpoint,
    remote: Endpoint,
    state: State,
    error: Option<ConnError>,

    // Send sequence space (RFC 9293 §3.3.1). `snd_max` is BSD's: the highest sequence
    // number sent, which `snd_nxt` drops below after a timeout (go-back-N).
    iss: SeqNum,
    snd_una: SeqNum,
    snd_nxt: SeqNum,
    snd_max: SeqNum,
    snd_wnd: u32,
    max_snd_wnd: u32,
    snd_wl1: SeqNum,
    snd_wl2: SeqNum,
    send_buf: SendBuffer<P>,
    /// `close` was called: a FIN follows the queued data.
    fin_queued: bool,
    /// Our FIN is acknowledged.
    fin_acked: bool,

    // Receive sequence space. `rcv_adv` is the right edge of the window we advertised;
    // it never moves left.
    irs: SeqNum,
    rcv_nxt: SeqNum,
    rcv_adv: SeqNum,
    recv_buf: RecvBuffer<P>,
    /// Sequence number of a FIN that arrived ahead of missing data.
    fin_at: Option<SeqNum>,
    /// The peer's FIN was received (in order).
    fin_received: bool,

    // Options (RFC 7323).
    opts: Negotiated,
    ts_offset: u32,
    ts_recent: u32,
    ts_recent_at: Time,
    /// Highest right edge of a SACK block received (what a duplicate ACK must report
    /// beyond to count when the window changed).
    sack_high: SeqNum,
    last_ack_sent: SeqNum,

    // Reliability and congestion control.
    rtt: RttEstimator,
    /// A segment being timed without timestamps: `(seq, sent at)` (Karn's algorithm).
    rtt_seq: Option<(SeqNum, Time)>,
    /// Retransmission timeouts in a row.
    retries: u32,
    cc: NewReno,
    timers: Timers,
    /// Zero-window probes since the window was last open.
    persist_probes: u32,

    // Output owed.
    ack_now: bool,
    /// The application read data since we last sent an ACK: only then may a window
    /// update go out on its own. (The window our SYN-ACK could advertise is at most
    /// 65,535 bytes, unscaled; without this the handshake's last ACK was answered
    /// with a pure window update, one frame more per connection. The larger window
    /// rides on our next ACK, long before the peer's first flight could fill 64 KiB.)
    read_since_ack: bool,
    /// Original data segments received since the last ACK we sent.
    unacked_segs: u32,
    /// Resend the first unacknowledged segment (fast retransmit or partial ACK).
    rexmit_head: bool,
    /// The persist timer fired: send a one-byte probe.
    probe_due: bool,
    /// `abort` was called: send this RST.
    rst_due: Option<SeqNum>,
    /// A keep-alive probe is due.
    keepalive_due: bool,

    // Idle tracking: when a segment last arrived, keep-alive probes unanswered since,
    // and when FIN-WAIT-2 began.
    last_rx: Time,
    keepalive_sent: u32,
    fin_wait2_at: Time,

    // Challenge ACK rate limit (RFC 5961 §7) and the out-of-window ACK limit.
    ack_limits: input::AckLimits,

    /// Since when data or a FIN has waited for the peer without an ACK moving
    /// `snd_una` (for `send_timeout`); `None` while nothing waits.
    stalled_since: Option<Time>,
    /// `snd_una` when the current send-timeout period began (`send_min_rate`).
    stall_una: SeqNum,
    /// Payload bytes per byte of memory of the full-sized segments received, in
    /// 1/1024 (1024 until one arrives): the window offered is the free memory times it.
    rcv_ratio: u32,
    /// The last segment given to `process` passed the sequence and ACK checks.
    accepted: bool,
    /// `discard_recv` was called: data is acknowledged and dropped as it arrives.
    discard: bool,

    counters: Counters,
}

impl<P: Payload> Connection<P> {
    fn new(config: &Config, local: Endpoint, remote: Endpoint, iss: SeqNum, ts_offset: u32) -> Self {
        Connection {
            config: config.clone(),
            local,
            remote,
            state: State::Closed,
            error: None,
            iss,
            snd_una: iss,
            snd_nxt: iss,
            snd_max: iss,
            snd_wnd: 0,
            max_snd_wnd: 0,
            snd_wl1: SeqNum(0),
            snd_wl2: iss,
            send_buf: SendBuffer::new(config.send_buffer),
            fin_queued: false,
            fin_acked: false,
            irs: SeqNum(0),
            rcv_nxt: SeqNum(0),
            rcv_adv: SeqNum(0),
            recv_buf: RecvBuffer::new(config.max_ooo_segments),
            fin_at: None,
            fin_received: false,
            opts: Negotiated::offer(config),
            ts_offset,
            ts_recent: 0,
            ts_recent_at: Time::ZERO,
            sack_high: iss,
            last_ack_sent: SeqNum(0),
            rtt: RttEstimator::new(config),
            rtt_seq: None,
            retries: 0,
            cc: NewReno::new(iss, config.congestion),
            timers: Timers::default(),
            persist_probes: 0,
            ack_now: false,
            read_since_ack: false,
            unacked_segs: 0,
            rexmit_head: false,
            probe_due: false,
            rst_due: None,
            keepalive_due: false,
            last_rx: Time::ZERO,
            keepalive_sent: 0,
            fin_wait2_at: Time::ZERO,
            ack_limits: input::AckLimits::default(),
            stalled_since: None,
            stall_una: iss,
            rcv_ratio: RATIO_ONE,
            accepted: false,
            discard: false,
            counters: Counters::default(),
        }
    }

    /// Active open (RFC 9293 §3.10.1): a connection in SYN-SENT whose SYN goes out at
    /// the next [`dispatch`](Self::dispatch). `isn` keys the initial sequence number.
    pub fn connect(
        now: Time,
        local: Endpoint,
        remote: Endpoint,
        config: &Config,
        isn: &IsnGenerator,
    ) -> Result<Self, ConnectError> {
        let same_family = matches!(
            (local.addr, remote.addr),
            (ironpath_wire::IpAddress::V4(_), ironpath_wire::IpAddress::V4(_))
                | (ironpath_wire::IpAddress::V6(_), ironpath_wire::IpAddress::V6(_))
        );
        if local.port == 0 || remote.port == 0 || !same_family {
            return Err(ConnectError::Unaddressable);
        }
        let iss = isn.isn(now, &local, &remote);
        let mut conn = Self::new(config, local, remote, iss, isn.ts_offset(&local, &remote));
        conn.state = State::SynSent;
        conn.last_rx = now;
        Ok(conn)
    }

    /// Passive open: a connection in SYN-RECEIVED for a `syn` that arrived at a
    /// listener; its SYN-ACK goes out at the next `dispatch`. Data on the SYN is not
    /// taken (the peer sends it again).
    pub(crate) fn accept_syn(
        now: Time,
        local: Endpoint,
        remote: Endpoint,
        config: &Config,
        isn: &IsnGenerator,
        syn: &TcpRepr,
    ) -> Self {
        let iss = isn.isn(now, &local, &remote);
        Self::accept_syn_with_iss(now, local, remote, config, isn, syn, iss)
    }

    /// [`accept_syn`](Self::accept_syn) with a given ISS (a SYN cookie).
    pub(crate) fn accept_syn_with_iss(
        now: Time,
        local: Endpoint,
        remote: Endpoint,
        config: &Config,
        isn: &IsnGenerator,
        syn: &TcpRepr,
        iss: SeqNum,
    ) -> Self {
        let mut conn = Self::new(config, local, remote, iss, isn.ts_offset(&local, &remote));
        conn.state = State::SynReceived;
        conn.last_rx = now;
        conn.take_peer_syn(now, syn);
        conn
    }

    /// Frees the memory of empty send and receive queues (a connection in TIME-WAIT
    /// keeps its state for 2 MSL but will queue nothing again).
    pub fn release_buffers(&mut self) {
        self.send_buf.release();
        self.recv_buf.release();
    }

    /// The connection's state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Why the connection closed abnormally, once it has.
    pub fn error(&self) -> Option<ConnError> {
        self.error
    }

    /// Our address and port.
    pub fn local(&self) -> Endpoint {
        self.local
    }

    /// The peer's address and port.
    pub fn remote(&self) -> Endpoint {
        self.remote
    }

    /// Event counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The settings the connection was opened with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// A snapshot of the sequence, window, RTT and congestion variables.
    pub fn info(&self) -> Info {
        Info {
            snd_una: self.snd_una,
            snd_nxt: self.snd_nxt,
            snd_max: self.snd_max,
            rcv_nxt: self.rcv_nxt,
            snd_wnd: self.snd_wnd,
            rcv_wnd: self.rcv_wnd(),
            cwnd: self.cc.cwnd(),
            ssthresh: self.cc.ssthresh(),
            smss: self.smss() as u32,
            srtt: self.rtt.srtt(),
            rto: self.rtt.rto(),
            in_recovery: self.cc.in_recovery(),
            congestion: self.cc.algo(),
            window_scale: self.opts.window_scaling.then_some((self.opts.rcv_wscale, self.opts.snd_wscale)),
            timestamps: self.opts.timestamps,
            sack: self.opts.sack,
        }
    }

    /// Whether [`send`](Self::send) may queue data: the connection is opening or open
    /// and `close` was not called.
    pub fn may_send(&self) -> bool {
        !self.fin_queued
            && matches!(self.state, State::SynSent | State::SynReceived | State::Established | State::CloseWait)
    }

    /// Whether more data may come from [`recv`](Self::recv): some is buffered, or the
    /// peer has not closed its side (and the connection is not closed).
    pub fn may_recv(&self) -> bool {
        self.recv_buf.ready_len() > 0 || (!self.fin_received && self.state != State::Closed)
    }

    /// Queues `data` for sending: all of it, or as much as the send buffer has room for
    /// (a slice, not a copy). Returns the bytes queued.
    pub fn send(&mut self, data: P) -> Result<usize, SendError> {
        if !self.may_send() {
            return Err(SendError::InvalidState(self.state));
        }
        if data.is_empty() {
            return Ok(0);
        }
        match self.send_buf.push(data) {
            0 => Err(SendError::BufferFull),
            n => Ok(n),
        }
    }

    /// The oldest unacknowledged sequence number (what [`info`](Self::info) reports,
    /// without building the rest).
    pub fn snd_una(&self) -> SeqNum {
        self.snd_una
    }

    /// Bytes queued or in flight (what the send buffer holds).
    pub fn send_queue(&self) -> usize {
        self.send_buf.len()
    }

    /// Bytes [`send`](Self::send) would accept now.
    pub fn send_free(&self) -> usize {
        self.send_buf.free()
    }

    /// Takes the next in-order data the peer sent (one received payload, or the part
    /// of it that was new). Reading may reopen the window: call `dispatch` after.
    pub fn recv(&mut self) -> Option<P> {
        let p = self.recv_buf.pop();
        self.read_since_ack |= p.is_some();
        p
    }

    /// In-order bytes waiting for [`recv`](Self::recv).
    pub fn recv_queue(&self) -> usize {
        self.recv_buf.ready_len()
    }

    /// Received bytes the connection holds: in order (unread) and out of order.
    pub fn recv_held(&self) -> usize {
        self.recv_buf.ready_len() + self.recv_buf.ooo_len()
    }

    /// Memory the received data holds ([`Payload::truesize`] of every piece, in order
    /// and out of order): what `recv_buffer` bounds.
    pub fn recv_mem(&self) -> usize {
        self.recv_buf.mem()
    }

    /// Copies small received pieces that pin large buffers into compact ones (what
    /// the connection does itself when its own `recv_buffer` fills; a caller with a
    /// memory limit across connections calls it under pressure). Returns the pieces
    /// collapsed.
    pub fn collapse_recv(&mut self) -> usize {
        let done = self.recv_buf.collapse();
        self.counters.rcv_collapsed += done.pieces as u64;
        done.pieces
    }

    /// Drops everything received and not read, in order and out of order (the
    /// application will read no more: it timed the peer out). Later data is taken
    /// and dropped as it arrives ([`Counters::bytes_dropped`]).
    pub fn discard_recv(&mut self) {
        let held = self.recv_held() as u64;
        self.recv_buf.clear();
        self.counters.bytes_dropped += held;
        self.discard = true;
    }

    /// Whether the last segment given to [`process`](Self::process) passed the
    /// sequence-number and ACK checks: it came from the peer, or from someone who
    /// knows the connection's sequence numbers (an off-path forger does not). A caller
    /// learns link-layer addresses only from such segments.
    pub fn accepted(&self) -> bool {
        self.accepted
    }

    /// Whether a segment starting at `seq` would be in order (the next byte expected).
    pub fn in_order(&self, seq: SeqNum) -> bool {
        seq == self.rcv_nxt
    }

    /// Closes our side (RFC 9293 §3.10.4): a FIN follows the queued data. In SYN-SENT
    /// the connection just goes away; after our FIN it does nothing.
    pub fn close(&mut self) {
        match self.state {
            State::SynSent => self.enter_closed(None),
            State::SynReceived => self.fin_queued = true,
            State::Established => {
                self.fin_queued = true;
                self.state = State::FinWait1;
            }
            State::CloseWait => {
                self.fin_queued = true;
                self.state = State::LastAck;
            }
            _ => {}
        }
    }

    /// Drops the connection (RFC 9293 §3.10.5): queued data is discarded and, when the
    /// peer may still hold state, a RST goes out at the next `dispatch`.
    pub fn abort(&mut self) {
        if matches!(
            self.state,
            State::SynReceived | State::Established | State::FinWait1 | State::FinWait2 | State::CloseWait
        ) {
            // SND.NXT in BSD's sense: what the peer expects next even while resending.
            self.rst_due = Some(self.snd_max);
        }
        if self.state != State::Closed {
            self.enter_closed(Some(ConnError::Aborted));
        }
    }

    /// Goes to CLOSED. With an error, buffered data is dropped (RFC 9293: "all segment
    /// queues should be flushed"); after an orderly close unread data stays readable.
    fn enter_closed(&mut self, error: Option<ConnError>) {
        self.state = State::Closed;
        self.error = self.error.or(error);
        self.timers = Timers::default();
        self.ack_now = false;
        self.rexmit_head = false;
        self.probe_due = false;
        self.keepalive_due = false;
        if error.is_some() {
            self.send_buf.clear();
            self.recv_buf.clear();
        }
    }

    fn enter_time_wait(&mut self, now: Time) {
        self.state = State::TimeWait;
        self.timers.rto = None;
        self.timers.persist = None;
        self.timers.time_wait = Some(now + self.config.msl * 2);
    }

    /// Takes the peer's SYN: IRS, options, TS.Recent, the (unscaled) window.
    fn take_peer_syn(&mut self, now: Time, syn: &TcpRepr) {
        let seq = SeqNum(syn.seq_number);
        self.irs = seq;
        self.rcv_nxt = seq + 1u32;
        self.last_ack_sent = self.rcv_nxt;
        self.rcv_adv = self.rcv_nxt + usize::from(self.syn_window());
        let ipv6 = matches!(self.remote.addr, ironpath_wire::IpAddress::V6(_));
        self.opts = Negotiated::offer(&self.config).with_peer_syn(syn, ipv6);
        if let (true, Some((tsval, _))) = (self.opts.timestamps, syn.timestamp) {
            self.ts_recent = tsval;
            self.ts_recent_at = now;
        }
        self.snd_wnd = u32::from(syn.window_len);
        self.max_snd_wnd = self.snd_wnd;
        self.snd_wl1 = seq;
        self.snd_wl2 = SeqNum(syn.ack_number.unwrap_or(self.iss.0));
    }

    /// The window field of our SYN (never scaled, RFC 7323 §2.2).
    fn syn_window(&self) -> u16 {
        self.config.recv_window_max().min(65535) as u16
    }

    /// Sender MSS for congestion control: the smaller MSS minus the timestamp option.
    fn smss(&self) -> usize {
        usize::from(self.opts.snd_mss.min(self.config.local_mss())) - self.opts.fixed_options_len()
    }

    /// The largest receive window: the buffer, bounded by what the field can say.
    fn rcv_cap(&self) -> usize {
        self.config.recv_window_max().min(65535 << self.opts.rcv_wscale)
    }

    /// The advertised window still open from `rcv_nxt`.
    fn rcv_wnd(&self) -> u32 {
        if self.rcv_adv > self.rcv_nxt {
            self.rcv_adv.distance(self.rcv_nxt)
        } else {
            0
        }
    }

    /// Checks the connection's invariants (for tests and fuzzing).
    #[cfg(any(test, feature = "test-utils"))]
    pub fn check_invariants(&self) -> Result<(), String> {
        let err = |what: &str| Err(format!("{what} ({})", self.describe()));
        if !(self.snd_una <= self.snd_nxt && self.snd_nxt <= self.snd_max) {
            return err("snd_una <= snd_nxt <= snd_max broken");
        }
        if self.state != State::Closed {
            let seq_space = self.send_buf.len() + 2;
            if self.snd_max.distance(self.snd_una) as usize > seq_space {
                return err("more sequence space outstanding than data, SYN and FIN");
            }
        }
        if self.send_buf.len() > self.send_buf.limit() {
            return err("send buffer over its limit");
        }
        if self.recv_buf.ready_len() + self.recv_buf.ooo_len() > self.rcv_cap() {
            return err("receive buffer over its limit");
        }
        self.recv_buf.check(self.rcv_nxt)?;
        if self.cc.cwnd() == 0 {
            return err("zero cwnd");
        }
        let live = !matches!(self.state, State::Closed | State::TimeWait);
        let timer = self.timers.rto.is_some() || self.timers.persist.is_some() || self.probe_due;
        if live && self.snd_max > self.snd_una && !timer {
            return err("data outstanding without a retransmission or persist timer");
        }
        if self.state == State::Closed && (self.timers.rto.is_some() || self.timers.persist.is_some()) {
            return err("timer running in CLOSED");
        }
        if (self.state == State::TimeWait) != self.timers.time_wait.is_some() {
            return err("TIME-WAIT timer out of sync with the state");
        }
        Ok(())
    }

    #[cfg(any(test, feature = "test-utils"))]
    fn describe(&self) -> String {
        format!(
            "{} una={} nxt={} max={} sndbuf={} rcv_nxt={} adv={} wnd={} timers={:?}",
            self.state,
            self.snd_una,
            self.snd_nxt,
            self.snd_max,
            self.send_buf.len(),
            self.rcv_nxt,
            self.rcv_adv,
            self.snd_wnd,
            self.timers
        )
    }
}
