//! `tcp`: TCP termination. The node owns a per-lcore connection table, the
//! listening ports (each with a backlog and an application), the client
//! connections a pipeline opens (`connect:`), and their timers; the protocol
//! itself is `ironpath-tcp`'s engine, driven as its crate documentation says.
//!
//! Input: TCP over IPv4/IPv6 in untagged Ethernet frames (`classify`'s `tcp`
//! next, usually after `rx_aggregate`). Each segment is checked (IPv4 header
//! checksum unless the port verified it, TCP checksum unless the port verified it
//! or the frame came partially checksummed from the local kernel, addressed to one
//! of `addresses`, no fragment) and handed to its connection, a listener, or
//! answered with a RST; bad ones are counted and dropped. An aggregate (GRO/LRO)
//! is one segment whose ACK credit counts its original segments.
//!
//! Output (`out`): the frames the connections send, with full checksums, to the
//! MAC the peer last sent from (learned per address); an address never heard from
//! (a connection we open) gets a zero destination MAC, so route `out` through an
//! `arp` node to resolve IPv4 neighbours. ARP and ICMP stay with their nodes.
//!
//! The node is polled: timers (retransmission, delayed ACK, persist, keep-alive)
//! run from a heap keyed by each connection's `poll_at`, and applications are
//! polled whenever their connection changed or a file-system request they made
//! completed (`http` serving files: every file-system call runs on the node's
//! file-I/O threads, [`io_threads`], never on the lcore). A connection in TIME-WAIT leaves the
//! table for a compact one ([`ironpath_tcp::TimeWait`], 152 bytes instead of a
//! ~1 KiB slot) that answers its peer until 2 MSL are over (`max_time_wait` bounds
//! it; ends are queued in order, no heap).

mod apps;
mod budget;
mod config;
mod counters;
mod file_io;
mod files;
mod frame;
mod http_server;
mod input;
mod io_threads;
mod kind;
pub mod payload;
mod peers;
mod service;
mod site;
pub mod trace;
mod wire;

use crate::hash::KeyedState;
use apps::{App, AppEnv, HttpGet};
use budget::{account_heap, account_rx};
pub use config::{ConnectCfg, ListenCfg, TcpConfig, TcpLimits};
use counters::*;
pub use counters::{TcpCounter, TcpGauge};
pub use files::raise_descriptor_limit;
pub use frame::build_frame;
use frame::*;
use ironpath_eal::abi;
use ironpath_eal::{Burst, Mbuf, Mempool, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx, SleepPlan};
use ironpath_tcp::{
    rst_reply, Config, ConnError, Connection, Endpoint, IsnGenerator, Listener, Segment, SeqNum, State, Time, TimeWait,
    TimeWaitReply,
};
use ironpath_wire::checksum;
use ironpath_wire::ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr, HEADER_LEN as ETH_LEN};
use ironpath_wire::ipv4::{Ipv4Packet, Ipv4Repr};
use ironpath_wire::ipv6::{Ipv6Packet, Ipv6Repr};
use ironpath_wire::tcp::{TcpControl, TcpPacket, TcpRepr};
use ironpath_wire::{IpAddress, IpProtocol};
pub use kind::{config, defaults, ClientApp, CongestionChoice, ServerApp, KIND};
pub use payload::Chunk;
use peers::Peers;
pub use site::LocalSite;
use site::Site;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::path::PathBuf;
use wire::*;

/// One connection and its application.
struct Entry {
    conn: Connection<Chunk>,
    app: App,
    /// The time a timer is armed for (heap entries for other times are stale).
    armed: Option<Time>,
    /// In the dirty list.
    dirty: bool,
    /// IPv4 identification of the next frame.
    ip_id: u16,
    /// The connection's counters when last added to the node's ([`synced`]).
    seen: [u64; 7],
    /// Memory the connection's received data held when last looked at (summed in
    /// `rx_held`).
    rx_held: u64,
    /// Unique id (slots are reused; completions name the connection by it).
    id: u64,
    /// Bytes handed to TX and not yet completed.
    inflight: u64,
    /// Stopped by `tx_inflight_limit`; woken by a completion.
    tsq_blocked: bool,
    /// The state the connection is counted in ([`TcpNode::states`]).
    counted: State,
    /// Its peer's index in [`TcpNode::peers`].
    peer: u32,
    /// Heap its application holds for it when last looked at (summed in `heap_held`).
    heap: u64,
    /// `snd_una` when last looked at, and when the connection last made progress (the
    /// peer acknowledged data, or the application read some).
    una: SeqNum,
    progress_at: Time,
    /// Among the node's I/O waiters (polled again at the next file-I/O completion).
    io_wait: bool,
}

impl Entry {
    /// Memory the connection is charged: received data and its application's heap.
    fn held(&self) -> u64 {
        self.rx_held + self.heap
    }
}

/// A sent frame whose completion (its last other reference released) the node awaits.
struct Pending {
    slot: u32,
    id: u64,
    bytes: u64,
    m: Mbuf,
}

type FlowKey = (Endpoint, Endpoint);

/// The node.
pub struct TcpNode {
    cfg: TcpConfig,
    wire: Wire,
    isn: IsnGenerator,
    listeners: Vec<(Listener<Chunk>, ListenCfg, usize)>,
    by_port: HashMap<u16, usize, KeyedState>,
    flows: HashMap<FlowKey, u32, KeyedState>,
    slots: Vec<Option<Entry>>,
    free: Vec<u32>,
    /// Connections in TIME-WAIT, reduced to what answering the peer needs (a few
    /// cache lines instead of a kilobyte-sized slot), and when each ends, in the
    /// order they entered (a retransmitted FIN moves an end later: checked on pop).
    time_wait: HashMap<FlowKey, TimeWait, KeyedState>,
    tw_ends: VecDeque<(Time, FlowKey)>,
    timers: BinaryHeap<Reverse<(Time, u32)>>,
    dirty: Vec<u32>,
    /// The input burst's packets while a call handles them (kept for its capacity:
    /// `Burst::drain` would copy a 2 KiB iterator on every walk, busy or not).
    rx: Vec<Mbuf>,
    listeners_due: bool,
    listeners_armed: Option<Time>,
    env: AppEnv,
    tsc0: u64,
    /// Microseconds per TSC tick, fixed point with 40 fraction bits.
    us_per_tick: u128,
    next_port: u16,
    started: bool,
    /// Sent data frames awaiting completion, in sending order.
    pending: std::collections::VecDeque<Pending>,
    next_id: u64,
    /// Memory all connections' received data holds (see `TcpConfig::memory_limit`).
    rx_held: u64,
    /// Heap all connections' applications hold for them.
    heap_held: u64,
    /// What `rx_held + heap_held` may reach: `memory_limit` and the pool share.
    mem_limit: u64,
    /// What one peer may hold (`peer_share` of `mem_limit`).
    peer_limit: u64,
    /// Connections and memory by peer (address, IPv6 /64).
    peers: Peers,
    /// Over `mem_limit`: look for connections to reset at the end of the call.
    pressure: bool,
    /// The earliest time of the next look for connections to reset.
    reclaim_at: Time,
    /// When the connection table may next be reclaimed ([`TcpNode::reclaim_table`]).
    table_reclaim_at: Time,
    /// (memory held, slot) of the candidates of a reclaim (kept for its capacity).
    reclaim_scratch: Vec<(u64, u32)>,
    /// Connections in the table by state ([`GAUGES`]; TIME-WAIT from its own table).
    states: [u64; TcpGauge::COUNT],
    /// The gauges as last published.
    published: [u64; TcpGauge::COUNT],
    /// Connections (slot, id) waiting for file-I/O progress they did not ask for: a
    /// full queue, a piece or a file another connection reads or opens.
    io_waiters: Vec<(u32, u64)>,
    /// File-system requests one peer may have outstanding.
    peer_io_limit: u32,
}

/// A starting IPv4 identification for a connection (from its ports: not guessable
/// across connections, never 0).
fn slot_hint(conn: &Connection<Chunk>) -> u32 {
    u32::from(conn.local().port).wrapping_mul(40503) ^ u32::from(conn.remote().port).wrapping_mul(2_654_435_761)
}

impl TcpNode {
    /// A node allocating its frames from `pool`.
    pub fn new(cfg: TcpConfig, pool: Mempool) -> Result<TcpNode, String> {
        let room = usize::from(pool.data_room()).saturating_sub(128);
        let need = ETH_LEN + 40 + 60 + usize::from(cfg.tcp.mss);
        if need > room {
            return Err(format!(
                "mss {} does not fit the pool's buffers (a frame needs {need} bytes, `{}` has {room} after the headroom)",
                cfg.tcp.mss,
                pool.name()
            ));
        }
        let isn = IsnGenerator::new(cfg.isn_secret);
        let mut listeners = Vec::new();
        // The flow table's hash key: secret, as the ISN key (from which it is derived).
        let key = KeyedState::new(cfg.isn_secret.map(|b| b ^ 0x5c));
        let mut by_port = HashMap::with_hasher(key);
        let mut sites = Vec::new();
        for l in &cfg.listen {
            if by_port.contains_key(&l.port) {
                return Err(format!("port {} is listed twice in `listen`", l.port));
            }
            let site = sites.len();
            if l.app == ServerApp::Http {
                let mut site = Site::new(l.root.clone(), &l.objects, l.dotfiles)?;
                site.set_file_limits(cfg.limits.file_cache, cfg.limits.open_files);
                sites.push(site);
            }
            let mut lcfg = cfg.tcp.clone();
            lcfg.congestion = l.congestion.unwrap_or(lcfg.congestion);
            let lis = Listener::new(l.port, l.backlog, lcfg, isn)
                .map_err(|e| format!("cannot listen on port {}: {e}", l.port))?;
            by_port.insert(l.port, listeners.len());
            listeners.push((lis, l.clone(), site));
        }
        for c in &cfg.connect {
            let family_ok = cfg.addresses.iter().any(|a| is_v4(a) == is_v4(&c.to));
            if !family_ok {
                return Err(format!("`connect` to {}: no address of that family in `addresses`", c.to));
            }
        }
        let io = file_io::start(&mut sites, &cfg.limits)?;
        let timeouts =
            apps::HttpTimeouts { header: cfg.limits.header_timeout, keepalive: cfg.limits.keepalive_timeout };
        let env = AppEnv {
            pattern: apps::pattern(),
            sites,
            stats: Default::default(),
            now: Time::ZERO,
            timeouts,
            max_pipeline: cfg.limits.max_pipeline.max(1),
            held_back: false,
            io,
        };
        let seed = u64::from_le_bytes(cfg.isn_secret[..8].try_into().unwrap_or_default());
        // What received data may pin: `memory_limit`, and the pool share (less 1/5,
        // since segments that fill a hole are taken up to 1/4 beyond the limit).
        let pool_bytes = pool.elt_size() as u64 * u64::from(pool.stats().size);
        let share = pool_bytes * u64::from(cfg.limits.pool_share.clamp(1, 100)) / 100 * 4 / 5;
        let mem_limit = match cfg.memory_limit {
            0 => share,
            m => m.min(share),
        };
        let peer_limit = mem_limit * u64::from(cfg.limits.peer_share.clamp(1, 100)) / 100;
        let peer_io = cfg.limits.file_io_queue * cfg.limits.peer_share.clamp(1, 100) as usize / 100;
        let peer_io_limit = u32::try_from(peer_io.max(1)).unwrap_or(u32::MAX);
        Ok(TcpNode {
            peers: Peers::new(key),
            peer_limit,
            heap_held: 0,
            pressure: false,
            reclaim_at: Time::ZERO,
            table_reclaim_at: Time::ZERO,
            reclaim_scratch: Vec::new(),
            wire: Wire {
                pool,
                mac: cfg.mac,
                neigh: HashMap::with_hasher(key),
                peers: HashMap::with_hasher(key),
                max_neigh: cfg.limits.max_neighbours.max(1),
            },
            mem_limit,
            isn,
            listeners,
            by_port,
            flows: HashMap::with_hasher(key),
            slots: Vec::new(),
            free: Vec::new(),
            time_wait: HashMap::with_hasher(key),
            tw_ends: VecDeque::new(),
            timers: BinaryHeap::new(),
            dirty: Vec::new(),
            rx: Vec::with_capacity(MAX_BURST),
            listeners_due: false,
            listeners_armed: None,
            env,
            tsc0: 0,
            // Rounded up, so that a whole number of microseconds is not read as one less.
            us_per_tick: (1_000_000u128 << 40).div_ceil(u128::from(cfg.tsc_hz.max(1))),
            next_port: 32768 + (seed % 16384) as u16,
            started: false,
            pending: std::collections::VecDeque::new(),
            next_id: 1,
            rx_held: 0,
            states: [0; TcpGauge::COUNT],
            published: [0; TcpGauge::COUNT],
            io_waiters: Vec::new(),
            peer_io_limit,
            cfg,
        })
    }

    /// The TSC at which the node's clock reads `t` (the inverse of [`TcpNode::now`],
    /// rounded down); `now_tsc` before the clock started.
    fn tsc_at(&self, t: Time, now_tsc: u64) -> u64 {
        if self.tsc0 == 0 || self.us_per_tick == 0 {
            return now_tsc;
        }
        let us = u128::from(t.micros().saturating_sub(1000));
        let ticks = (us << 40) / self.us_per_tick;
        self.tsc0.saturating_add(u64::try_from(ticks).unwrap_or(u64::MAX))
    }

    fn now(&mut self, tsc: u64) -> Time {
        if self.tsc0 == 0 {
            self.tsc0 = tsc.max(1);
        }
        let ticks = u128::from(tsc.saturating_sub(self.tsc0));
        // Start at 1 ms: Time::ZERO means "now" to poll_at users. A multiply by a
        // precomputed 2^-40 fixed-point factor, not a 128-bit division per call
        // (error below 10^-9: a millisecond in two weeks).
        Time::from_micros(1000 + ((ticks * self.us_per_tick) >> 40) as u64)
    }

    /// Connections currently held (not counting listeners' handshakes nor
    /// connections in TIME-WAIT).
    pub fn connections(&self) -> usize {
        self.flows.len()
    }

    /// Memory the connections are charged: received data and their applications'
    /// heap ("Per-peer accounting" in docs/tcp.md).
    pub fn memory_held(&self) -> u64 {
        self.held()
    }

    /// Connections in TIME-WAIT.
    pub fn in_time_wait(&self) -> usize {
        self.time_wait.len()
    }

    /// Handshakes the listeners hold (SYN received, not yet accepted).
    pub fn handshakes(&self) -> usize {
        self.listeners.iter().map(|(l, ..)| l.pending()).sum()
    }

    fn insert(&mut self, now: Time, conn: Connection<Chunk>, app: App) -> u32 {
        let key = (conn.local(), conn.remote());
        self.wire.peer_conns(key.1.addr, true);
        let peer = self.peers.attach(key.1.addr);
        let ip_id = (slot_hint(&conn) | 1) as u16;
        self.next_id += 1;
        let counted = conn.state();
        let conn_una = conn.snd_una();
        if let Some(k) = state_gauge(counted) {
            self.states[k] += 1;
        }
        let e = Entry {
            counted,
            conn,
            app,
            armed: None,
            dirty: false,
            ip_id,
            seen: [0; 7],
            rx_held: 0,
            id: self.next_id,
            inflight: 0,
            tsq_blocked: false,
            peer,
            heap: 0,
            una: conn_una,
            progress_at: now,
            io_wait: false,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(e);
                s
            }
            None => {
                self.slots.push(Some(e));
                (self.slots.len() - 1) as u32
            }
        };
        self.flows.insert(key, slot);
        self.touch(slot);
        slot
    }

    fn touch(&mut self, slot: u32) {
        if let Some(Some(e)) = self.slots.get_mut(slot as usize) {
            if !e.dirty {
                e.dirty = true;
                self.dirty.push(slot);
            }
        }
    }

    /// Opens the `connect:` connections (first poll).
    fn start_clients(&mut self, cx: &NodeCx<'_>, now: Time) {
        self.started = true;
        let connects = self.cfg.connect.clone();
        for c in &connects {
            let Some(local_addr) = self.cfg.addresses.iter().copied().find(|a| is_v4(a) == is_v4(&c.to)) else {
                continue;
            };
            for i in 0..c.count {
                let remote = Endpoint::new(c.to, c.port);
                let Some(local) = self.ephemeral(local_addr, remote) else {
                    cx.count(TcpCounter::ConnsFailed, 1);
                    continue;
                };
                let app = match c.app {
                    ClientApp::HttpGet => {
                        let save = c.save.as_ref().map(|p| {
                            if c.count > 1 {
                                PathBuf::from(format!("{}.{i}", p.display()))
                            } else {
                                p.clone()
                            }
                        });
                        match HttpGet::new(&c.path, c.to.to_string(), c.requests, save.as_deref()) {
                            Ok(g) => App::HttpGet(Box::new(g)),
                            Err(e) => {
                                log::error!("tcp: {e}");
                                cx.count(TcpCounter::ConnsFailed, 1);
                                continue;
                            }
                        }
                    }
                    ClientApp::Source => App::Source { left: (c.bytes != 0).then_some(c.bytes), sent: 0 },
                    ClientApp::Discard => App::Discard,
                };
                let mut ccfg = self.cfg.tcp.clone();
                ccfg.congestion = c.congestion.unwrap_or(ccfg.congestion);
                match Connection::connect(now, local, remote, &ccfg, &self.isn) {
                    Ok(conn) => {
                        cx.count(TcpCounter::ConnsOpened, 1);
                        self.insert(now, conn, app);
                    }
                    Err(_) => cx.count(TcpCounter::ConnsFailed, 1),
                }
            }
        }
    }

    /// A free local endpoint towards `remote`.
    fn ephemeral(&mut self, addr: IpAddress, remote: Endpoint) -> Option<Endpoint> {
        for _ in 0..28_232 {
            let port = self.next_port;
            self.next_port = if port >= 60999 { 32768 } else { port + 1 };
            let local = Endpoint::new(addr, port);
            let key = (local, remote);
            if !self.by_port.contains_key(&port) && !self.flows.contains_key(&key) && !self.time_wait.contains_key(&key)
            {
                return Some(local);
            }
        }
        None
    }

    /// Moves the connection of `slot` to the TIME-WAIT table (or closes it, if that
    /// is full).
    fn enter_time_wait(&mut self, cx: &NodeCx<'_>, slot: u32, tw: TimeWait) {
        if let Some(mut e) = self.slots[slot as usize].take() {
            sync_counters(cx, &mut e);
            uncount_state(&mut self.states, &e);
            self.uncharge(&e);
            let key = (e.conn.local(), e.conn.remote());
            self.flows.remove(&key);
            self.wire.peer_conns(key.1.addr, false);
            self.free.push(slot);
            if self.time_wait.len() >= self.cfg.max_time_wait {
                cx.count(TcpCounter::TimeWaitOverflow, 1);
                cx.count(TcpCounter::ConnsClosed, 1);
                return;
            }
            self.tw_ends.push_back((tw.expires(), key));
            self.time_wait.insert(key, tw);
        }
    }

    /// Forgets the TIME-WAIT connections whose 2 MSL are over.
    fn expire_time_wait(&mut self, cx: &NodeCx<'_>, now: Time) {
        while let Some(&(at, key)) = self.tw_ends.front() {
            if at > now {
                break;
            }
            self.tw_ends.pop_front();
            match self.time_wait.get(&key).map(TimeWait::expires) {
                // Replaced, reset, or this entry is stale.
                None => {}
                Some(end) if end <= now => {
                    self.time_wait.remove(&key);
                    cx.count(TcpCounter::ConnsClosed, 1);
                }
                // A retransmitted FIN restarted its wait: it ends after everything
                // queued (the same 2 MSL from a later time).
                Some(end) => self.tw_ends.push_back((end, key)),
            }
        }
    }

    fn remove(&mut self, cx: &NodeCx<'_>, slot: u32) {
        if let Some(mut e) = self.slots[slot as usize].take() {
            sync_counters(cx, &mut e);
            uncount_state(&mut self.states, &e);
            self.uncharge(&e);
            self.flows.remove(&(e.conn.local(), e.conn.remote()));
            self.wire.peer_conns(e.conn.remote().addr, false);
            self.free.push(slot);
            cx.count(TcpCounter::ConnsClosed, 1);
            match e.conn.error() {
                Some(ConnError::IdleTimeout) => cx.count(TcpCounter::IdleResets, 1),
                Some(ConnError::KeepaliveTimeout) => cx.count(TcpCounter::KeepaliveResets, 1),
                Some(ConnError::SendTimeout) => cx.count(TcpCounter::SendTimeouts, 1),
                Some(ConnError::SendTooSlow) => cx.count(TcpCounter::SendTooSlow, 1),
                _ => {}
            }
            if e.conn.error().is_some() {
                cx.count(TcpCounter::ConnsFailed, 1);
            }
        }
    }

    /// Publishes the state gauges that changed (TIME-WAIT: the compact table).
    fn publish_states(&mut self, cx: &NodeCx<'_>) {
        let mut now = self.states;
        now[usize::from(TcpGauge::TimeWait)] += self.time_wait.len() as u64;
        for (k, (v, p)) in now.iter().zip(self.published.iter_mut()).enumerate() {
            if v != p {
                cx.gauge(k, *v);
                *p = *v;
            }
        }
    }

    fn flush_stats(&mut self, cx: &NodeCx<'_>) {
        let s = std::mem::take(&mut self.env.stats);
        for (k, v) in [
            (TcpCounter::AppBytesIn, s.bytes_in),
            (TcpCounter::AppBytesOut, s.bytes_out),
            (TcpCounter::HttpRequests, s.http_requests),
            (TcpCounter::HttpErrors, s.http_errors),
            (TcpCounter::ClientsDone, s.clients_done),
            (TcpCounter::HeaderTimeouts, s.header_timeouts),
            (TcpCounter::KeepaliveTimeouts, s.keepalive_timeouts),
            (TcpCounter::HeldBack, s.held_back),
            (TcpCounter::PipelineHeld, s.pipeline_held),
            (TcpCounter::FdExhausted, s.fd_exhausted),
        ] {
            if v != 0 {
                cx.count(k, v);
            }
        }
        if let Some(io) = self.env.io.as_mut() {
            let s = std::mem::take(&mut io.stats);
            for (k, v) in [
                (TcpCounter::FileIo, s.submitted),
                (TcpCounter::FileIoFull, s.full),
                (TcpCounter::FileIoPeerFull, s.peer_full),
                (TcpCounter::FileIoConnHeld, s.conn_held),
                (TcpCounter::FileIoTimeouts, s.timeouts),
            ] {
                if v != 0 {
                    cx.count(k, v);
                }
            }
        }
        for site in &mut self.env.sites {
            let closed = std::mem::take(&mut site.files.fds_closed);
            if closed != 0 {
                cx.count(TcpCounter::FdsClosed, closed);
            }
            let streamed = std::mem::take(&mut site.files.streamed);
            if streamed != 0 {
                cx.count(TcpCounter::FilesStreamed, streamed);
            }
        }
    }
}

impl Node for TcpNode {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        let now = self.now(cx.now_tsc);
        let mut input = std::mem::take(&mut self.rx);
        pkts.take_into(&mut input);
        let mut out = Out { pkts, sent: 0, alloc_failed: 0, tso: 0 };
        if !self.started {
            self.start_clients(cx, now);
        }
        self.completions();
        self.file_completions(now);
        for m in input.drain(..) {
            self.input(cx, now, m, &mut out);
        }
        self.rx = input;
        while let Some(&Reverse((t, slot))) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            if let Some(Some(e)) = self.slots.get_mut(slot as usize) {
                if e.armed == Some(t) {
                    e.armed = None;
                    self.touch(slot);
                }
            }
        }
        if self.listeners_due || self.listeners_armed.is_some_and(|t| t <= now) {
            self.service_listeners(cx, now, &mut out);
        }
        if self.tw_ends.front().is_some_and(|&(t, _)| t <= now) {
            self.expire_time_wait(cx, now);
        }
        let mut dirty = std::mem::take(&mut self.dirty);
        let mut done = 0;
        for &slot in &dirty {
            if out.pkts.room() == 0 {
                break;
            }
            done += 1;
            if let Some(Some(e)) = self.slots.get_mut(slot as usize) {
                e.dirty = false;
            }
            if !self.service(cx, now, slot, &mut out) {
                self.touch(slot);
            }
        }
        // What the full burst left waiting keeps its place for the next poll.
        dirty.drain(..done);
        dirty.append(&mut self.dirty);
        self.dirty = dirty;
        if out.sent != 0 {
            cx.count(TcpCounter::SegsOut, out.sent);
        }
        if out.alloc_failed != 0 {
            cx.count(TcpCounter::AllocFailed, out.alloc_failed);
        }
        if out.tso != 0 {
            cx.count(TcpCounter::TsoSent, out.tso);
        }
        if self.pressure {
            self.reclaim(cx, now);
        }
        self.flush_stats(cx);
        self.publish_states(cx);
        Dispatch::All(0)
    }

    fn counters(&self) -> &'static [CounterSpec] {
        TcpCounter::SPECS
    }

    fn gauges(&self) -> &'static [CounterSpec] {
        TcpGauge::SPECS
    }

    fn sleep(&mut self, cx: &mut NodeCx<'_>, plan: &mut SleepPlan) {
        if !self.pending.is_empty() {
            return plan.keep_polling("tcp segments sent and not yet completed");
        }
        if self.env.io.as_ref().is_some_and(|io| io.exec.outstanding() > 0) {
            return plan.keep_polling("tcp file reads in flight");
        }
        if !self.started || !self.dirty.is_empty() || self.listeners_due || self.pressure || !self.rx.is_empty() {
            return plan.until(cx.now_tsc);
        }
        // The earliest timer (stale heap entries only wake it early).
        let times = [self.timers.peek().map(|r| r.0 .0), self.listeners_armed, self.tw_ends.front().map(|e| e.0)];
        match times.into_iter().flatten().min() {
            Some(t) => plan.until(self.tsc_at(t, cx.now_tsc)),
            None => plan.quiet(),
        }
    }

    fn trace(&self, frame: &[u8], out: &mut String) {
        if !trace::format_segment(frame, out) {
            out.push_str(&ironpath_graph::summarize(frame));
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod limits_tests;

#[cfg(test)]
mod file_io_tests;
