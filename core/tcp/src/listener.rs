//! [`Listener`]: the LISTEN state (RFC 9293 §3.10.7.2) of one port, with its backlog of
//! connections that are still in the handshake or not yet accepted.
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound::{Excluded, Unbounded};

use ironpath_wire::{IpAddress, TcpControl, TcpRepr};

use crate::segment::rst_reply;
use crate::{Config, Connection, Endpoint, IsnGenerator, ListenError, Payload, Segment, State, Time};

/// Listener event counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListenerCounters {
    /// SYNs that created a connection.
    pub syns: u64,
    /// SYNs dropped because the backlog was full.
    pub backlog_drops: u64,
    /// RSTs sent for segments that matched no connection.
    pub resets: u64,
    /// Connections handed out by `accept`.
    pub accepted: u64,
    /// Connections that closed (reset, timed out) before being accepted.
    pub dropped: u64,
}

/// Passive opens on one port. It owns each connection from the peer's SYN until the
/// application [`accept`](Self::accept)s it: the caller routes segments of 4-tuples it
/// has no connection for to [`process`](Self::process), and drives the listener's
/// [`dispatch`](Self::dispatch)/[`poll_at`](Self::poll_at) like a connection's.
#[derive(Debug)]
pub struct Listener<P> {
    port: u16,
    config: Config,
    isn: IsnGenerator,
    backlog: usize,
    /// By (remote endpoint, local address): deterministic order for `dispatch`.
    conns: BTreeMap<(Endpoint, IpAddress), Connection<P>>,
    /// Connections past the handshake, in the order they got there.
    ready: VecDeque<(Endpoint, IpAddress)>,
    counters: ListenerCounters,
}

impl<P: Payload> Listener<P> {
    /// Listens on `port` (any local address); at most `backlog` connections wait in the
    /// handshake or for `accept`. `isn` keys the initial sequence numbers.
    pub fn new(port: u16, backlog: usize, config: Config, isn: IsnGenerator) -> Result<Self, ListenError> {
        if port == 0 {
            return Err(ListenError::Unaddressable);
        }
        if backlog == 0 {
            return Err(ListenError::ZeroBacklog);
        }
        Ok(Listener {
            port,
            config,
            isn,
            backlog,
            conns: BTreeMap::new(),
            ready: VecDeque::new(),
            counters: ListenerCounters::default(),
        })
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Connections held (in the handshake or waiting for `accept`).
    pub fn pending(&self) -> usize {
        self.conns.len()
    }

    /// Event counters.
    pub fn counters(&self) -> &ListenerCounters {
        &self.counters
    }

    /// Processes a segment from `src` to `dst` for which the caller has no connection.
    /// Returns a segment to send back at once, if any (RST, or a held connection's reply).
    pub fn process(
        &mut self,
        now: Time,
        src: IpAddress,
        dst: IpAddress,
        seg: &TcpRepr,
        payload: Option<P>,
        segs: u16,
    ) -> Option<Segment<P>> {
        let key = (Endpoint::new(src, seg.src_port), dst);
        if let Some(conn) = self.conns.get_mut(&key) {
            let reply = conn.process(now, seg, payload, segs);
            self.sweep(key);
            return reply;
        }
        let payload_len = payload.as_ref().map_or(0, P::len);
        if seg.control == TcpControl::Rst {
            return None;
        }
        if seg.ack_number.is_some() {
            self.counters.resets += 1;
            return rst_reply(src, dst, seg, payload_len);
        }
        if seg.control != TcpControl::Syn {
            return None;
        }
        if self.conns.len() >= self.backlog {
            self.counters.backlog_drops += 1;
            return None;
        }
        let local = Endpoint::new(dst, seg.dst_port);
        let conn = Connection::accept_syn(now, local, key.0, &self.config, &self.isn, seg);
        self.conns.insert(key, conn);
        self.counters.syns += 1;
        None
    }

    /// Emits the held connections' segments (SYN-ACKs, their retransmissions, ACKs) and
    /// forgets the ones that closed. Stops at the first `emit` error.
    pub fn dispatch<E>(&mut self, now: Time, mut emit: impl FnMut(Segment<P>) -> Result<(), E>) -> Result<usize, E> {
        let mut sent = 0;
        let mut next = self.conns.keys().next().copied();
        while let Some(key) = next {
            let result = self.conns.get_mut(&key).map_or(Ok(0), |conn| conn.dispatch(now, &mut emit));
            self.sweep(key);
            sent += result?;
            next = self.conns.range((Excluded(key), Unbounded)).next().map(|(k, _)| *k);
        }
        Ok(sent)
    }

    /// The earliest `poll_at` of the held connections.
    pub fn poll_at(&self) -> Option<Time> {
        self.conns.values().filter_map(Connection::poll_at).min()
    }

    /// Takes the oldest connection that completed its handshake.
    pub fn accept(&mut self) -> Option<Connection<P>> {
        let key = self.ready.pop_front()?;
        let conn = self.conns.remove(&key)?;
        self.counters.accepted += 1;
        Some(conn)
    }

    /// After a connection changed: queue it for `accept` once synchronized, drop it once
    /// closed with nothing left to send.
    fn sweep(&mut self, key: (Endpoint, IpAddress)) {
        let Some(conn) = self.conns.get(&key) else { return };
        match conn.state() {
            State::Closed if conn.poll_at().is_none() => {
                self.conns.remove(&key);
                self.ready.retain(|k| *k != key);
                self.counters.dropped += 1;
            }
            State::SynReceived | State::Closed => {}
            _ => {
                if !self.ready.contains(&key) {
                    self.ready.push_back(key);
                }
            }
        }
    }
}
