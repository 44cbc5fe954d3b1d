//! Small error enums, one per operation.
use thiserror::Error;

use crate::State;

/// Why [`Connection::send`](crate::Connection::send) queued nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SendError {
    /// The connection is not open for sending (closed, or `close` was called).
    #[error("cannot send in state {0}")]
    InvalidState(State),
    /// The send buffer is full; try again after ACKs free it.
    #[error("send buffer full")]
    BufferFull,
}

/// Why a connection could not be opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ConnectError {
    /// A port is 0, or the two endpoints are of different IP versions.
    #[error("endpoints must have non-zero ports and the same IP version")]
    Unaddressable,
}

/// Why a listener could not be created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ListenError {
    /// Port 0.
    #[error("cannot listen on port 0")]
    Unaddressable,
    /// A backlog of 0 would refuse every connection.
    #[error("backlog must be at least 1")]
    ZeroBacklog,
}

/// Why a connection reached CLOSED other than by an orderly close.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ConnError {
    /// The peer answered our SYN with a RST.
    #[error("connection refused")]
    Refused,
    /// The peer reset an established connection.
    #[error("connection reset by peer")]
    Reset,
    /// Retransmissions went unanswered.
    #[error("connection timed out")]
    TimedOut,
    /// The application called [`abort`](crate::Connection::abort).
    #[error("connection aborted")]
    Aborted,
    /// Nothing arrived for [`Config::idle_timeout`](crate::Config::idle_timeout), or
    /// FIN-WAIT-2 lasted [`Config::fin_wait2_timeout`](crate::Config::fin_wait2_timeout).
    #[error("connection idle too long")]
    IdleTimeout,
    /// Keep-alive probes went unanswered ([`Config::keepalive`](crate::Config::keepalive)).
    #[error("keep-alive probes unanswered")]
    KeepaliveTimeout,
    /// The peer accepted nothing of what waited for it for
    /// [`Config::send_timeout`](crate::Config::send_timeout) (a zero window, or no ACK).
    #[error("peer accepted no data for the send timeout")]
    SendTimeout,
    /// The peer acknowledged less than
    /// [`Config::send_min_rate`](crate::Config::send_min_rate) × `send_timeout` bytes
    /// in a send timeout while data waited for it.
    #[error("peer accepted data slower than the minimum rate")]
    SendTooSlow,
}
