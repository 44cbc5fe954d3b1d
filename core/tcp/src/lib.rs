//! `ironpath-tcp`: a TCP engine that does no I/O and reads no clock.
//!
//! It owns the protocol logic of TCP connections, in the style of smoltcp's socket:
//! [`Connection::process`] takes a received segment (and the time) and may return a
//! reply; [`Connection::dispatch`] emits what is due; [`Connection::poll_at`] says when
//! to come back. Time ([`Time`]) and the ISN secret ([`IsnGenerator`]) are arguments,
//! so everything is deterministic and simulation-tested. Headers are
//! [`ironpath_wire::TcpRepr`]; payloads are any [`Payload`] (refcounted mbuf chains in a
//! node), which is sliced, never copied.
//!
//! Implemented:
//! * RFC 9293 state machine: active and passive open ([`Listener`] with a backlog),
//!   simultaneous open and close, FIN-WAIT-1/2, CLOSING, TIME-WAIT (2 × MSL),
//!   CLOSE-WAIT, LAST-ACK, RST handling, abort; sequence numbers modulo 2^32 ([`SeqNum`]);
//! * RFC 5961: RST in window but not exact, SYN in a synchronized state and ACKs outside
//!   `[SND.UNA - MAX.SND.WND, SND.NXT]` get a (rate-limited) challenge ACK;
//! * options: MSS, window scaling and timestamps (RFC 7323: PAWS, RTT measurement),
//!   SACK-permitted and SACK blocks from the out-of-order queue (RFC 2018);
//!   ISNs per RFC 6528 (SipHash-2-4 of the 4-tuple under the secret, plus a 4 µs clock);
//! * RTO per RFC 6298 (Karn's algorithm without timestamps, backoff, bounds);
//! * congestion control chosen per connection ([`Congestion`]): CUBIC (RFC 9438, the
//!   default, as in Linux) or NewReno (RFC 5681) congestion avoidance; both share slow
//!   start with byte counting, an initial window of 10 segments, fast retransmit and
//!   NewReno fast recovery with partial ACKs (RFC 6582); SACK-aware duplicate ACK
//!   counting (RFC 6675's DupAck); PAWS lets reordered pure duplicate ACKs through
//!   (as Linux);
//! * delayed ACKs (every second segment, or after `ack_delay`; at once for out-of-order
//!   data, hole fills and FINs) counting the original segments of GRO/LRO aggregates;
//! * SYN cookies (RFC 4987) when a listener's backlog is full;
//! * keep-alive probes ([`Keepalive`], off by default), an idle timeout and a
//!   FIN-WAIT-2 timeout (60 s by default), each ending in a RST ([`ConnError`] says which);
//! * receive memory charged by what payloads pin ([`Payload::truesize`], Linux's
//!   truesize) against `recv_buffer`: small pieces collapsed into compact copies, the
//!   out-of-order queue pruned from the top, the window offered at the observed
//!   payload-to-memory ratio; a send timeout for peers that accept nothing;
//! * out-of-order reassembly; zero-window probes (persist timer), window updates, receiver and sender SWS
//!   avoidance, Nagle;
//! * TSO: with [`Config::tso_max`] set (0, off, by default) new data leaves in segments
//!   of several MSSs marked with [`Segment::tso_segsz`] for the NIC or the kernel to cut;
//!   retransmissions stay one MSS;
//! * per-connection [`Counters`];
//! * a compact TIME-WAIT form ([`TimeWait`], from [`Connection::time_wait`]) that
//!   answers the peer as the connection would, for a caller that keeps thousands.
//!
//! Not implemented (or simplified):
//! * the sender has no RFC 6675 scoreboard (recovery resends one segment per RTT), no
//!   D-SACK, no RACK-TLP, no limited transmit (RFC 3042), no F-RTO, no pacing; cwnd is
//!   not reduced after idle (RFC 5681 §4.1), only kept from growing while under-used;
//! * no ECN, no urgent data (URG is ignored), no TCP Fast Open, no TIME-WAIT reuse by a
//!   new SYN inside the engine (the `tcp` node replaces such a connection), no PMTU
//!   discovery;
//! * data carried on a SYN is not taken (the peer resends it); the RTO after a
//!   retransmitted SYN is not raised to 3 s (RFC 6298 §5.7); RTT samples are not
//!   weighted per window (RFC 7323 Appendix G).
//!
//! Choices worth knowing: pure ACKs carry `snd_max` (BSD's SND.NXT) so that they stay
//! acceptable while data is resent; unacceptable pure ACKs are answered at most every
//! 500 ms and challenge ACKs at most `challenge_ack_limit` per second, so two ends that
//! disagree cannot ACK each other forever; slow start counts acknowledged bytes (no
//! RFC 3465 limit), and cwnd only grows while at least half of it is in use.
//!
//! # Driving it (a graph node)
//! Per received segment, after the IP layer and checksum checks:
//! 1. parse it with [`TcpRepr::parse`](ironpath_wire::TcpRepr::parse); the payload is a
//!    [`Payload`] slice of the mbuf, `segs` the GRO count (1 without aggregation);
//! 2. look the 4-tuple up in the flow table: found, call [`Connection::process`]; not
//!    found but a [`Listener`] has the port, call [`Listener::process`] (then move
//!    [`Listener::accept`]ed connections into the table); neither, send [`rst_reply`];
//! 3. transmit the returned segment, if any, at once.
//!
//! After a burst (and whenever the application sent, read or closed), and when the
//! earliest [`poll_at`](Connection::poll_at) of a timer wheel comes due, call
//! [`dispatch`](Connection::dispatch) with an `emit` that builds the headers
//! ([`TcpRepr::emit`](ironpath_wire::TcpRepr::emit)) before the payload chain and
//! enqueues the frame; returning `Err` when the TX burst is full leaves that segment
//! for the next call. Then re-arm the connection's timer at the new `poll_at`
//! ([`Time::ZERO`] means "now"). Remove a connection once its state is
//! [`State::Closed`] and `poll_at` is `None`.
//!
//! Layout: `conn` (the TCB; `input`, `output` and `timers` split it by concern,
//! `time_wait` is its compact TIME-WAIT form),
//! `listener`, `send_buf` and `recv_buf` (reassembly, SACK blocks), `rtt` (RFC 6298),
//! `congestion` (CUBIC and NewReno), `options` (negotiation, PAWS helpers), `isn` (RFC 6528).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod config;
mod congestion;
mod conn;
mod counters;
mod error;
mod isn;
mod listener;
mod options;
mod payload;
mod recv_buf;
mod rtt;
mod segment;
mod send_buf;
mod seq;
mod time;

#[cfg(any(test, feature = "test-utils"))]
pub mod testing;

pub use config::{Config, Keepalive};
pub use congestion::Congestion;
pub use conn::{Connection, Info, State, TimeWait, TimeWaitReply};
pub use counters::Counters;
pub use error::{ConnError, ConnectError, ListenError, SendError};
pub use isn::IsnGenerator;
pub use listener::{Listener, ListenerCounters};
pub use payload::Payload;
pub use segment::{rst_reply, Endpoint, Segment};
pub use seq::SeqNum;
pub use time::Time;
