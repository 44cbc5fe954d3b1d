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
//! polled whenever their connection changed. A connection in TIME-WAIT leaves the
//! table for a compact one ([`ironpath_tcp::TimeWait`], 152 bytes instead of a
//! ~1 KiB slot) that answers its peer until 2 MSL are over (`max_time_wait` bounds
//! it; ends are queued in order, no heap).

mod apps;
mod hash;
mod kind;
pub mod payload;
pub mod trace;

pub use apps::Site;
use apps::{App, AppEnv, HttpGet};
use hash::KeyedState;
use ironpath_eal::abi;
use ironpath_eal::{Burst, Mbuf, Mempool, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx};
use ironpath_tcp::{
    rst_reply, Config, ConnError, Connection, Endpoint, IsnGenerator, Listener, Segment, State, Time, TimeWait,
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
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::path::PathBuf;

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
    }
}

/// A listening port.
#[derive(Clone, Debug)]
pub struct ListenCfg {
    /// The port.
    pub port: u16,
    /// The application.
    pub app: ServerApp,
    /// Connections in the handshake or not yet accepted, at most.
    pub backlog: usize,
    /// `source`: bytes per connection (0: until the peer closes).
    pub bytes: u64,
    /// `http`: the directory served.
    pub root: Option<PathBuf>,
    /// `http`: in-memory objects, `/path=size,...`.
    pub objects: String,
    /// Congestion control of accepted connections (`None`: the node's).
    pub congestion: Option<ironpath_tcp::Congestion>,
    /// `http`: serve files and directories whose names start with `.` (off: 404).
    pub dotfiles: bool,
}

/// Connections the node opens when it starts.
#[derive(Clone, Debug)]
pub struct ConnectCfg {
    /// The peer.
    pub to: IpAddress,
    /// The peer's port.
    pub port: u16,
    /// What the connections do.
    pub app: ClientApp,
    /// `source`: bytes to send (0: until the peer closes).
    pub bytes: u64,
    /// `http_get`: the path.
    pub path: String,
    /// `http_get`: where to write the body (a connection's index is appended when `count` > 1).
    pub save: Option<PathBuf>,
    /// Connections to open.
    pub count: u32,
    /// `http_get`: requests per connection (keep-alive).
    pub requests: u64,
    /// Congestion control of these connections (`None`: the node's).
    pub congestion: Option<ironpath_tcp::Congestion>,
}

/// Settings of a `tcp` node.
#[derive(Clone, Debug)]
pub struct TcpConfig {
    /// Our MAC (the port's).
    pub mac: [u8; 6],
    /// Our addresses (the first of each family is the source of our connections).
    pub addresses: Vec<IpAddress>,
    /// Per-connection engine settings.
    pub tcp: Config,
    /// Listening ports.
    pub listen: Vec<ListenCfg>,
    /// Connections to open.
    pub connect: Vec<ConnectCfg>,
    /// Connections held at most (established and closing; listeners' backlogs apart).
    pub max_connections: usize,
    /// TSC ticks per second.
    pub tsc_hz: u64,
    /// Key of the initial sequence numbers (RFC 6528).
    pub isn_secret: [u8; 16],
    /// Bytes per connection handed to TX and not yet completed, at most (0: no limit).
    pub tx_inflight_limit: u64,
    /// Received payload bytes all connections may hold (unread and out of order)
    /// before the node drops out-of-order data and refuses SYNs; 1/8 above it, all
    /// data (0: no limit; each connection is bounded by its `recv_buffer` anyway).
    pub memory_limit: u64,
    /// Connections held in TIME-WAIT at most (in a compact form, outside the
    /// connection table); beyond it a connection closes without TIME-WAIT, counted.
    pub max_time_wait: usize,
    /// What a peer may make the node hold, beyond the per-connection buffers.
    pub limits: TcpLimits,
}

/// Bounds on what peers may make a `tcp` node hold, and for how long.
#[derive(Clone, Debug)]
pub struct TcpLimits {
    /// Percent of the node's mempool the received data of all connections may pin
    /// at most (the rest stays for RX, ARP, ICMP and new connections).
    pub pool_share: u32,
    /// Connections (established or closing, not TIME-WAIT) one peer address may
    /// hold; 0: no cap.
    pub max_per_peer: u32,
    /// Neighbour (IP to MAC) entries held at most; entries of addresses without a
    /// connection are evicted to make room.
    pub max_neighbours: usize,
    /// `http`: a request head must be complete this long after it began (after the
    /// connection opened, for the first); `None`: no limit.
    pub header_timeout: Option<std::time::Duration>,
    /// `http`: an idle keep-alive connection is closed after this long; `None`: never.
    pub keepalive_timeout: Option<std::time::Duration>,
}

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

/// The gauge of a state (`None`: TcpCounter::ConnsClosed, about to leave the table).
fn state_gauge(s: State) -> Option<usize> {
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
fn count_state(states: &mut [u64; TcpGauge::COUNT], e: &mut Entry) {
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
fn uncount_state(states: &mut [u64; TcpGauge::COUNT], e: &Entry) {
    if let Some(k) = state_gauge(e.counted) {
        states[k] -= 1;
    }
}

/// Brings `total` (memory all connections' received data holds) up to date with
/// what `e`'s connection holds now.
fn account_rx(total: &mut u64, e: &mut Entry) {
    let held = e.conn.recv_mem() as u64;
    *total = *total + held - e.rx_held;
    e.rx_held = held;
}

/// The node's counters that add up a connection's own, with the connection's values.
fn synced(c: &ironpath_tcp::Counters) -> [(TcpCounter, u64); 7] {
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
fn sync_counters(cx: &NodeCx<'_>, e: &mut Entry) {
    for ((k, v), before) in synced(e.conn.counters()).into_iter().zip(e.seen.iter_mut()) {
        if v != *before {
            cx.count(k, v - *before);
            *before = v;
        }
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
    /// What `rx_held` may reach: `memory_limit` and the pool share.
    mem_limit: u64,
    /// Connections in the table by state ([`GAUGES`]; TIME-WAIT from its own table).
    states: [u64; TcpGauge::COUNT],
    /// The gauges as last published.
    published: [u64; TcpGauge::COUNT],
}

/// Frames built during one poll.
struct Out<'a> {
    pkts: &'a mut Burst,
    sent: u64,
    alloc_failed: u64,
    tso: u64,
}

/// What building a frame needs: the pool, our MAC, the peers' MACs.
struct Wire {
    pool: Mempool,
    mac: [u8; 6],
    /// Neighbours: the MAC each peer address is reached at. Set by segments that a
    /// connection or a handshake accepted; other segments may only fill in an address
    /// that has no connection (see [`Wire::learn`]).
    neigh: HashMap<IpAddress, [u8; 6], KeyedState>,
    /// Connections (established or closing) per peer address: their neighbour entries
    /// stay, and `max_per_peer` caps them.
    peers: HashMap<IpAddress, u32, KeyedState>,
    max_neigh: usize,
}

/// What [`Wire::learn`] did that the node counts.
#[derive(Default)]
struct Learned {
    evicted: u64,
    refused: bool,
}

impl Wire {
    /// Builds and queues the frame of `seg`; `Err` when the burst is full or the pool
    /// is empty (the engine keeps the segment for the next dispatch).
    fn emit(&self, out: &mut Out<'_>, seg: Segment<Chunk>, ip_id: u16) -> Result<(), ()> {
        self.emit_tracked(out, seg, ip_id, None)
    }

    /// As [`Wire::emit`] for a reply to a received frame from `src_mac`: to the
    /// neighbour entry of the address if there is one (a forged source never
    /// redirects a reply to a known peer), else back to where the frame came from.
    fn reply(&self, out: &mut Out<'_>, seg: Segment<Chunk>, src_mac: [u8; 6]) -> Result<(), ()> {
        let dst_mac = self.neigh.get(&seg.dst_addr).copied().unwrap_or(src_mac);
        self.emit_frame(out, seg, 0, dst_mac, None)
    }

    /// As [`Wire::emit`]; a data frame to a known neighbour also leaves a reference in
    /// `track` (with its length) so that its completion can be seen.
    fn emit_tracked(
        &self,
        out: &mut Out<'_>,
        seg: Segment<Chunk>,
        ip_id: u16,
        track: Option<&mut Option<(Mbuf, u64)>>,
    ) -> Result<(), ()> {
        let dst_mac = self.neigh.get(&seg.dst_addr).copied().unwrap_or([0; 6]);
        self.emit_frame(out, seg, ip_id, dst_mac, track)
    }

    fn emit_frame(
        &self,
        out: &mut Out<'_>,
        seg: Segment<Chunk>,
        ip_id: u16,
        dst_mac: [u8; 6],
        track: Option<&mut Option<(Mbuf, u64)>>,
    ) -> Result<(), ()> {
        if out.pkts.room() == 0 {
            return Err(());
        }
        let known = (dst_mac != [0; 6]).then_some(dst_mac);
        let data = seg.payload.is_some();
        let push = seg.repr.control != TcpControl::None;
        match build_frame(&self.pool, self.mac, dst_mac, &seg, ip_id) {
            Some(mut m) => {
                out.sent += 1;
                out.tso += u64::from(seg.tso_segsz > 0);
                if push {
                    m.header_mut().ol_flags |= ironpath_eal::TX_PUSH;
                }
                // A frame whose MAC the arp node fills must stay writable: not tracked.
                if let (Some(t), true, Some(_)) = (track, data, known) {
                    *t = Some((m.share(), m.pkt_len() as u64));
                }
                out.pkts.push(m).map_err(drop)
            }
            None => {
                out.alloc_failed += 1;
                Err(())
            }
        }
    }

    /// Records that `ip` sent from `mac`. A segment a connection or a handshake
    /// `accepted` sets the entry; any other (a SYN, a segment no connection wants, a
    /// forgery) only for an address without connections, so that a forged source
    /// cannot redirect a connection's frames. Makes room by evicting every entry of an
    /// address without connections when `max_neigh` is reached.
    fn learn(&mut self, ip: IpAddress, mac: [u8; 6], accepted: bool) -> Learned {
        let mut done = Learned::default();
        match self.neigh.get_mut(&ip) {
            Some(m) if *m == mac => {}
            Some(m) => {
                if accepted || !self.peers.contains_key(&ip) {
                    *m = mac;
                } else {
                    done.refused = true;
                }
            }
            None => {
                if self.neigh.len() >= self.max_neigh {
                    let before = self.neigh.len();
                    let peers = &self.peers;
                    self.neigh.retain(|a, _| peers.contains_key(a));
                    done.evicted = (before - self.neigh.len()) as u64;
                }
                self.neigh.insert(ip, mac);
            }
        }
        done
    }

    /// Counts a connection of peer `ip` (opened: `+1`, gone: `-1`).
    fn peer_conns(&mut self, ip: IpAddress, opened: bool) {
        if opened {
            *self.peers.entry(ip).or_insert(0) += 1;
        } else if let Some(n) = self.peers.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.peers.remove(&ip);
            }
        }
    }
}

/// A starting IPv4 identification for a connection (from its ports: not guessable
/// across connections, never 0).
fn slot_hint(conn: &Connection<Chunk>) -> u32 {
    u32::from(conn.local().port).wrapping_mul(40503) ^ u32::from(conn.remote().port).wrapping_mul(2_654_435_761)
}

/// Whether `seg`, arriving for a connection in TIME-WAIT that expects `rcv_nxt`, is
/// a new SYN beyond what it received: it then starts a new connection in its place (as
/// Linux does; RFC 9293 §3.10.7.4 allows it).
fn syn_replaces(seg: &TcpRepr, rcv_nxt: ironpath_tcp::SeqNum) -> bool {
    seg.control == TcpControl::Syn && seg.ack_number.is_none() && ironpath_tcp::SeqNum(seg.seq_number) > rcv_nxt
}

fn is_v4(a: &IpAddress) -> bool {
    matches!(a, IpAddress::V4(_))
}

/// Ethernet and IP headers for `seg` (whose TCP header and payload make `tcp_len`
/// bytes) at the start of `d`; returns the offset of the TCP header.
fn emit_l2_l3(
    d: &mut [u8],
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    seg: &Segment<Chunk>,
    ip_id: u16,
    tcp_len: usize,
) -> usize {
    let (ethertype, ip_len) = match seg.dst_addr {
        IpAddress::V4(_) => (EtherType::IPV4, 20),
        IpAddress::V6(_) => (EtherType::IPV6, 40),
    };
    EthernetRepr { src_addr: EthernetAddress(src_mac), dst_addr: EthernetAddress(dst_mac), ethertype }
        .emit(&mut EthernetFrame::new_unchecked(&mut d[..ETH_LEN]));
    match (seg.src_addr, seg.dst_addr) {
        (IpAddress::V4(s), IpAddress::V4(t)) => {
            let mut ip = Ipv4Packet::new_unchecked(&mut d[ETH_LEN..ETH_LEN + 20]);
            Ipv4Repr { src_addr: s, dst_addr: t, next_header: IpProtocol::TCP, payload_len: tcp_len, hop_limit: 64 }
                .emit(&mut ip);
            if ip_id != 0 {
                ip.set_ident(ip_id);
                ip.fill_checksum();
            }
        }
        (s, t) => Ipv6Repr {
            src_addr: s.to_ipv6(),
            dst_addr: t.to_ipv6(),
            next_header: IpProtocol::TCP,
            payload_len: tcp_len,
            hop_limit: 64,
        }
        .emit(&mut Ipv6Packet::new_unchecked(&mut d[ETH_LEN..ETH_LEN + 40])),
    }
    ETH_LEN + ip_len
}

/// The frame carrying `seg` (Ethernet, IPv4 or IPv6, TCP with its checksum); `None`
/// if the pool is empty or the frame does not fit one buffer. `ip_id` is the IPv4
/// identification: a connection's frames carry consecutive ones (as Linux sends
/// them), which receive aggregation (GRO) expects. A TSO segment
/// (`seg.tso_segsz > 0`) becomes a chained packet for the port to cut
/// (`build_tso_frame`).
pub fn build_frame(
    pool: &Mempool,
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    seg: &Segment<Chunk>,
    ip_id: u16,
) -> Option<Mbuf> {
    if seg.tso_segsz > 0 {
        return build_tso_frame(pool, src_mac, dst_mac, seg, ip_id);
    }
    let hl = seg.repr.header_len();
    let plen = seg.payload.as_ref().map_or(0, ironpath_tcp::Payload::len);
    let tcp_len = hl + plen;
    let ip_len = if is_v4(&seg.dst_addr) { 20 } else { 40 };
    let mut m = Mbuf::alloc(pool).ok()?;
    let d = m.append(ETH_LEN + ip_len + tcp_len).ok()?;
    let l4 = emit_l2_l3(d, src_mac, dst_mac, seg, ip_id, tcp_len);
    let psum = match &seg.payload {
        Some(p) => p.copy_and_sum(&mut d[l4 + hl..]),
        None => 0,
    };
    let mut tcp = TcpPacket::new_unchecked(&mut d[l4..l4 + hl]);
    seg.repr.emit_header(&mut tcp);
    tcp.set_checksum(0);
    let hsum = checksum::sum(tcp.into_inner());
    let pseudo = checksum::pseudo_header(&seg.src_addr, &seg.dst_addr, IpProtocol::TCP, tcp_len as u32);
    let total = u64::from(pseudo) + u64::from(hsum) + u64::from(psum);
    let folded = checksum::fold(((total & 0xffff_ffff) + (total >> 32)) as u32);
    d[l4 + 16..l4 + 18].copy_from_slice(&(!folded).to_be_bytes());
    Some(m)
}

/// A TSO segment as one packet for the port to cut into `seg.tso_segsz`-byte
/// segments: headers in the first buffer, the payload in chained segments that point
/// into the data's own buffers (external and indirect segments, no copy),
/// `TX_TCP_SEG | TX_TCP_CKSUM` with the header lengths and `tso_segsz`, and in the
/// checksum field the pseudo-header sum over the whole TCP length (what a NIC or the
/// kernel's GSO completes per segment). `None` if the pool ran out or the IP length
/// would not fit.
fn build_tso_frame(
    pool: &Mempool,
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    seg: &Segment<Chunk>,
    ip_id: u16,
) -> Option<Mbuf> {
    let p = seg.payload.as_ref()?;
    let hl = seg.repr.header_len();
    let tcp_len = hl + ironpath_tcp::Payload::len(p);
    let v4 = is_v4(&seg.dst_addr);
    let ip_len = if v4 { 20 } else { 40 };
    if tcp_len + if v4 { ip_len } else { 0 } > 65535 {
        return None;
    }
    let mut m = Mbuf::alloc(pool).ok()?;
    let d = m.append(ETH_LEN + ip_len + hl).ok()?;
    let l4 = emit_l2_l3(d, src_mac, dst_mac, seg, ip_id, tcp_len);
    let mut tcp = TcpPacket::new_unchecked(&mut d[l4..l4 + hl]);
    seg.repr.emit_header(&mut tcp);
    let pseudo = checksum::pseudo_header(&seg.src_addr, &seg.dst_addr, IpProtocol::TCP, tcp_len as u32);
    tcp.set_checksum(checksum::fold(pseudo));
    // The payload: segments pointing into the application's buffers (or the received
    // packets it echoes), no copy; the port's driver copies once, into the kernel.
    let mut tails: Vec<Mbuf> = Vec::with_capacity(4);
    if p.to_segments(pool, &mut tails).is_err() || m.chain_many(&mut tails).is_err() {
        return None;
    }
    let h = m.header_mut();
    h.ol_flags |= abi::TX_TCP_SEG | abi::TX_TCP_CKSUM | if v4 { abi::TX_IPV4 } else { abi::TX_IPV6 };
    h.l2_len = ETH_LEN as u8;
    h.l3_len = ip_len as u16;
    h.l4_len = hl as u8;
    h.tso_segsz = seg.tso_segsz;
    Some(m)
}

/// A received segment after the IP layer.
struct Rx {
    src: IpAddress,
    dst: IpAddress,
    repr: TcpRepr,
    /// Offset of the payload in the packet.
    off: usize,
    segs: u16,
    src_mac: [u8; 6],
}

/// Why a frame was refused.
enum Refused {
    Malformed,
    Checksum,
    NotOurs,
}

/// The Internet checksum sum of `len` bytes of `m` from `off`, across segments.
fn sum_chain(m: &Mbuf, off: usize, len: usize) -> u32 {
    let (mut skip, mut left, mut at) = (off, len, 0usize);
    let mut acc: u64 = 0;
    for s in m.segments() {
        if left == 0 {
            break;
        }
        if skip >= s.len() {
            skip -= s.len();
            continue;
        }
        let n = (s.len() - skip).min(left);
        let sum = checksum::fold(checksum::sum(&s[skip..skip + n]));
        acc += u64::from(if at % 2 == 1 { sum.swap_bytes() } else { sum });
        at += n;
        left -= n;
        skip = 0;
    }
    ((acc & 0xffff_ffff) + (acc >> 32)) as u32
}

/// Parses the headers of a TCP frame addressed to one of `ours`.
fn parse_frame(m: &Mbuf, ours: &[IpAddress]) -> Result<Rx, Refused> {
    let d = m.data();
    let pkt_len = m.pkt_len();
    if d.len() < ETH_LEN {
        return Err(Refused::Malformed);
    }
    let mut src_mac = [0; 6];
    src_mac.copy_from_slice(&d[6..12]);
    let h = m.header();
    let (src, dst, l4, l4_len) = match EtherType(u16::from_be_bytes([d[12], d[13]])) {
        EtherType::IPV4 => {
            // Only the headers need to be in the first segment: an aggregate's payload
            // continues in a chain, so lengths are checked against the whole packet.
            if d.len() < ETH_LEN + 20 {
                return Err(Refused::Malformed);
            }
            let ip = Ipv4Packet::new_unchecked(&d[ETH_LEN..]);
            if usize::from(ip.header_len()) < 20 || d.len() < ETH_LEN + usize::from(ip.header_len()) {
                return Err(Refused::Malformed);
            }
            let verify = h.ol_flags & abi::RX_IP_CKSUM_GOOD == 0;
            if h.ol_flags & abi::RX_IP_CKSUM_BAD != 0 {
                return Err(Refused::Checksum);
            }
            let ihl = usize::from(ip.header_len());
            let total = usize::from(ip.total_len());
            if ip.version() != 4 || ip.is_fragment() || total < ihl || total > pkt_len - ETH_LEN {
                return Err(Refused::Malformed);
            }
            if verify && !ip.verify_checksum() {
                return Err(Refused::Checksum);
            }
            if ip.next_header() != IpProtocol::TCP {
                return Err(Refused::NotOurs);
            }
            (IpAddress::V4(ip.src_addr()), IpAddress::V4(ip.dst_addr()), ETH_LEN + ihl, total - ihl)
        }
        EtherType::IPV6 => {
            if d.len() < ETH_LEN + 40 {
                return Err(Refused::Malformed);
            }
            let ip = Ipv6Packet::new_unchecked(&d[ETH_LEN..]);
            let plen = usize::from(ip.payload_len());
            if ip.version() != 6 || plen + 40 > pkt_len - ETH_LEN {
                return Err(Refused::Malformed);
            }
            if ip.next_header() != IpProtocol::TCP {
                return Err(Refused::NotOurs);
            }
            (IpAddress::V6(ip.src_addr()), IpAddress::V6(ip.dst_addr()), ETH_LEN + 40, plen)
        }
        _ => return Err(Refused::Malformed),
    };
    if !ours.contains(&dst) {
        return Err(Refused::NotOurs);
    }
    if l4_len < 20 || d.len() < l4 + 20 {
        return Err(Refused::Malformed);
    }
    let hl = usize::from(d[l4 + 12] >> 4) * 4;
    if hl < 20 || hl > l4_len || d.len() < l4 + hl {
        return Err(Refused::Malformed);
    }
    if h.ol_flags & abi::RX_L4_CKSUM_BAD != 0 {
        return Err(Refused::Checksum);
    }
    if h.ol_flags & (abi::RX_L4_CKSUM_GOOD | abi::RX_L4_CKSUM_NONE) == 0 {
        let pseudo = checksum::pseudo_header(&src, &dst, IpProtocol::TCP, l4_len as u32);
        let total = u64::from(pseudo) + u64::from(sum_chain(m, l4, l4_len));
        if checksum::fold(((total & 0xffff_ffff) + (total >> 32)) as u32) != 0xffff {
            return Err(Refused::Checksum);
        }
    }
    let mut repr = TcpRepr::parse(&TcpPacket::new_unchecked(&d[l4..l4 + hl]), &src, &dst, false)
        .map_err(|_| Refused::Malformed)?;
    repr.payload_len = l4_len - hl;
    let segs = if h.ol_flags & abi::RX_AGGREGATED != 0 { h.aggr_segs.max(1) } else { 1 };
    Ok(Rx { src, dst, repr, off: l4 + hl, segs, src_mac })
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
                sites.push(Site::new(l.root.clone(), &l.objects, l.dotfiles)?);
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
        let timeouts =
            apps::HttpTimeouts { header: cfg.limits.header_timeout, keepalive: cfg.limits.keepalive_timeout };
        let env = AppEnv { pattern: apps::pattern(), sites, stats: Default::default(), now: Time::ZERO, timeouts };
        let seed = u64::from_le_bytes(cfg.isn_secret[..8].try_into().unwrap_or_default());
        // What received data may pin: `memory_limit`, and the pool share (less 1/5,
        // since segments that fill a hole are taken up to 1/4 beyond the limit).
        let pool_bytes = pool.elt_size() as u64 * u64::from(pool.stats().size);
        let share = pool_bytes * u64::from(cfg.limits.pool_share.clamp(1, 100)) / 100 * 4 / 5;
        let mem_limit = match cfg.memory_limit {
            0 => share,
            m => m.min(share),
        };
        Ok(TcpNode {
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
            cfg,
        })
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

    /// Connections in TIME-WAIT.
    pub fn in_time_wait(&self) -> usize {
        self.time_wait.len()
    }

    fn insert(&mut self, conn: Connection<Chunk>, app: App) -> u32 {
        let key = (conn.local(), conn.remote());
        self.wire.peer_conns(key.1.addr, true);
        let ip_id = (slot_hint(&conn) | 1) as u16;
        self.next_id += 1;
        let counted = conn.state();
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
                        self.insert(conn, app);
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

    fn input(&mut self, cx: &NodeCx<'_>, now: Time, m: Mbuf, out: &mut Out<'_>) {
        let rx = match parse_frame(&m, &self.cfg.addresses) {
            Ok(rx) => rx,
            Err(Refused::Malformed) => return cx.count(TcpCounter::Malformed, 1),
            Err(Refused::Checksum) => return cx.count(TcpCounter::BadChecksum, 1),
            Err(Refused::NotOurs) => return cx.count(TcpCounter::NotOurs, 1),
        };
        cx.count(TcpCounter::SegsIn, 1);
        let plen = rx.repr.payload_len;
        let payload = (plen > 0).then(|| Chunk::from_mbuf(m, rx.off, plen));
        let key = (Endpoint::new(rx.dst, rx.repr.dst_port), Endpoint::new(rx.src, rx.repr.src_port));
        if let Some(&slot) = self.flows.get(&key) {
            let e = self.slots[slot as usize].as_mut().expect("flow table points at a live slot");
            let reuse = e.conn.state() == State::TimeWait && syn_replaces(&rx.repr, e.conn.info().rcv_nxt);
            if !reuse {
                let limit = self.mem_limit;
                if payload.is_some() && self.rx_held >= limit {
                    // Under memory pressure this connection's small pieces are copied
                    // into compact buffers first (Linux's collapse); then out-of-order
                    // data goes (it cannot be read until the hole fills); well over the
                    // limit, all data. The peer sends it again.
                    e.conn.collapse_recv();
                    account_rx(&mut self.rx_held, e);
                    let in_order = e.conn.in_order(ironpath_tcp::SeqNum(rx.repr.seq_number));
                    // A segment that fills a hole is taken up to 1/4 beyond the limit:
                    // it turns held out-of-order data into data the application reads.
                    let fills_hole = in_order && e.conn.recv_held() > e.conn.recv_queue();
                    let room = match () {
                        _ if self.rx_held < limit => true,
                        _ if self.rx_held < limit + limit / 8 => in_order,
                        _ => fills_hole && self.rx_held < limit + limit / 4,
                    };
                    if !room {
                        cx.count(TcpCounter::MemDropped, 1);
                        self.touch(slot);
                        return;
                    }
                }
                let reply = e.conn.process(now, &rx.repr, payload, rx.segs);
                account_rx(&mut self.rx_held, e);
                let accepted = e.conn.accepted();
                self.learn(cx, rx.src, rx.src_mac, accepted);
                if let Some(r) = reply {
                    if self.wire.reply(out, r, rx.src_mac).is_err() {
                        cx.count(TcpCounter::TxFull, 1);
                    }
                }
                self.touch(slot);
                return;
            }
            cx.count(TcpCounter::TimeWaitReused, 1);
            self.remove(cx, slot);
        } else if let Some(tw) = self.time_wait.get_mut(&key) {
            let reuse = syn_replaces(&rx.repr, tw.rcv_nxt());
            let over = tw.expires() <= now;
            if !reuse && !over {
                let challenges = tw.challenge_acks();
                let reply = tw.process::<Chunk>(now, &rx.repr, plen);
                cx.count(TcpCounter::ChallengeAcks, u64::from(tw.challenge_acks() - challenges));
                match reply {
                    TimeWaitReply::None => {}
                    TimeWaitReply::Ack(r) => {
                        if self.wire.reply(out, r, rx.src_mac).is_err() {
                            cx.count(TcpCounter::TxFull, 1);
                        }
                    }
                    TimeWaitReply::Closed => {
                        self.time_wait.remove(&key);
                        cx.count(TcpCounter::ConnsClosed, 1);
                    }
                }
                return;
            }
            // Its 2 MSL are over (the expiry queue gets to it later) or a new SYN
            // replaces it: the segment goes on as if it were gone.
            if !over {
                cx.count(TcpCounter::TimeWaitReused, 1);
            }
            cx.count(TcpCounter::ConnsClosed, 1);
            self.time_wait.remove(&key);
        }
        let Some(&li) = self.by_port.get(&rx.repr.dst_port) else {
            if let Some(r) = rst_reply::<Chunk>(rx.src, rx.dst, &rx.repr, plen) {
                cx.count(TcpCounter::RstSent, 1);
                if self.wire.reply(out, r, rx.src_mac).is_err() {
                    cx.count(TcpCounter::TxFull, 1);
                }
            }
            return;
        };
        if rx.repr.control == TcpControl::Syn {
            if self.flows.len() >= self.cfg.max_connections {
                cx.count(TcpCounter::SynDropped, 1);
                return;
            }
            if self.rx_held >= self.mem_limit {
                cx.count(TcpCounter::MemRefused, 1);
                return;
            }
            if self.peer_full(rx.src) {
                cx.count(TcpCounter::PeerCapped, 1);
                return;
            }
            // A SYN may name the MAC of an address without connections (the SYN-ACK
            // and its retransmissions go there); never that of one with connections.
            self.learn(cx, rx.src, rx.src_mac, false);
        }
        let lis = &mut self.listeners[li].0;
        let before = *lis.counters();
        let reply = lis.process(now, rx.src, rx.dst, &rx.repr, payload, rx.segs);
        let after = *lis.counters();
        if after.backlog_drops != before.backlog_drops {
            cx.count(TcpCounter::SynDropped, 1);
        }
        if after.cookies_sent != before.cookies_sent {
            cx.count(TcpCounter::SynCookiesSent, 1);
        }
        if after.cookies_valid != before.cookies_valid {
            cx.count(TcpCounter::SynCookiesValid, 1);
        }
        if let Some(r) = reply {
            if r.repr.control == TcpControl::Rst {
                cx.count(TcpCounter::RstSent, 1);
            }
            if self.wire.reply(out, r, rx.src_mac).is_err() {
                cx.count(TcpCounter::TxFull, 1);
            }
        }
        self.listeners_due = true;
        self.accept(cx, li);
        if self.flows.contains_key(&key) {
            // This segment completed a valid handshake (or carried a valid cookie).
            self.learn(cx, rx.src, rx.src_mac, true);
        }
    }

    /// Whether `peer` holds `max_per_peer` connections already.
    fn peer_full(&self, peer: IpAddress) -> bool {
        let cap = self.cfg.limits.max_per_peer;
        cap > 0 && self.wire.peers.get(&peer).is_some_and(|&n| n >= cap)
    }

    fn learn(&mut self, cx: &NodeCx<'_>, ip: IpAddress, mac: [u8; 6], accepted: bool) {
        let done = self.wire.learn(ip, mac, accepted);
        if done.evicted > 0 {
            cx.count(TcpCounter::NeighEvicted, done.evicted);
        }
        if done.refused {
            cx.count(TcpCounter::NeighRefused, 1);
        }
    }

    fn accept(&mut self, cx: &NodeCx<'_>, li: usize) {
        while let Some(conn) = self.listeners[li].0.accept() {
            if self.peer_full(conn.remote().addr) {
                // A handshake (a SYN cookie's, say) completed for a peer at its cap:
                // no state is kept; the peer's data finds no connection.
                cx.count(TcpCounter::PeerCapped, 1);
                continue;
            }
            let (_, l, site) = &self.listeners[li];
            let app = App::server(l.app, l.bytes, *site);
            cx.count(TcpCounter::ConnsOpened, 1);
            self.insert(conn, app);
        }
    }

    /// Moves the connection of `slot` to the TIME-WAIT table (or closes it, if that
    /// is full).
    fn enter_time_wait(&mut self, cx: &NodeCx<'_>, slot: u32, tw: TimeWait) {
        if let Some(mut e) = self.slots[slot as usize].take() {
            sync_counters(cx, &mut e);
            uncount_state(&mut self.states, &e);
            self.rx_held -= e.rx_held;
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
            self.rx_held -= e.rx_held;
            self.flows.remove(&(e.conn.local(), e.conn.remote()));
            self.wire.peer_conns(e.conn.remote().addr, false);
            self.free.push(slot);
            cx.count(TcpCounter::ConnsClosed, 1);
            match e.conn.error() {
                Some(ConnError::IdleTimeout) => cx.count(TcpCounter::IdleResets, 1),
                Some(ConnError::KeepaliveTimeout) => cx.count(TcpCounter::KeepaliveResets, 1),
                Some(ConnError::SendTimeout) => cx.count(TcpCounter::SendTimeouts, 1),
                _ => {}
            }
            if e.conn.error().is_some() {
                cx.count(TcpCounter::ConnsFailed, 1);
            }
        }
    }

    /// Runs the application of `slot`, sends what is due, re-arms its timer. Returns
    /// false if the output burst filled before everything was sent.
    fn service(&mut self, cx: &NodeCx<'_>, now: Time, slot: u32, out: &mut Out<'_>) -> bool {
        let Some(e) = self.slots[slot as usize].as_mut() else { return true };
        self.env.now = now;
        e.app.poll(&mut e.conn, &mut self.env);
        let wire = &self.wire;
        let ip_id = &mut e.ip_id;
        let limit = self.cfg.tx_inflight_limit;
        let (inflight, blocked, id) = (&mut e.inflight, &mut e.tsq_blocked, e.id);
        let pending = &mut self.pending;
        let mut sent_data = false;
        let mut emit = |s: Segment<Chunk>| {
            let data = s.payload.is_some();
            if limit == 0 {
                wire.emit(out, s, *ip_id)?;
            } else {
                if s.payload.is_some() && *inflight >= limit {
                    // Like TCP Small Queues: wait for completions (they wake us).
                    *blocked = true;
                    return Err(());
                }
                let mut t = None;
                wire.emit_tracked(out, s, *ip_id, Some(&mut t))?;
                if let Some((m, bytes)) = t {
                    *inflight += bytes;
                    pending.push_back(Pending { slot, id, bytes, m });
                }
            }
            *ip_id = ip_id.wrapping_add(1).max(1);
            sent_data |= data;
            Ok::<(), ()>(())
        };
        let mut complete = e.conn.dispatch(now, &mut emit).is_ok();
        if complete {
            // Sending may have freed room the application can fill at once.
            e.app.poll(&mut e.conn, &mut self.env);
            complete = e.conn.dispatch(now, &mut emit).is_ok();
        }
        if e.tsq_blocked {
            // Not a full burst: completions, not the next poll, bring it back.
            cx.count(TcpCounter::TsqThrottled, 1);
            complete = true;
        }
        if sent_data && complete && !out.pkts.is_empty() {
            // The connection sent what it could and now waits (for ACKs, a window, or
            // completions): nothing it sends later can join these segments, so they go
            // out with this burst rather than wait for `tx_batch`'s timer (a download
            // limited by tx_inflight_limit sat out flush_us every few segments). The
            // last packet of the burst is this connection's last segment.
            let last = out.pkts.len() - 1;
            out.pkts.header_mut(last).ol_flags |= ironpath_eal::TX_PUSH;
        }
        sync_counters(cx, e);
        count_state(&mut self.states, e);
        account_rx(&mut self.rx_held, e);
        if e.conn.state() == State::TimeWait {
            // Nothing more to send or read for 2 MSL: the connection leaves the table
            // for the compact TIME-WAIT one, its slot and buffers to the next
            // connections (short connections keep tens of thousands in TIME-WAIT).
            if let Some(tw) = e.conn.time_wait() {
                self.enter_time_wait(cx, slot, tw);
                return complete;
            }
            if e.conn.recv_queue() == 0 && !matches!(e.app, App::Discard) {
                // Not settled yet (an ACK owed, say): it stays, without its
                // application and its queues' memory, and moves at its next service.
                e.app = App::Discard;
                e.conn.release_buffers();
            }
        }
        let at = e.conn.poll_at();
        if e.conn.state() == State::Closed && at.is_none() {
            self.remove(cx, slot);
            return complete;
        }
        // The application's own deadline (an HTTP timeout) counts as a timer too.
        let at = match (at, e.app.deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(t) = at {
            if t <= now && e.tsq_blocked {
                // Due only for data the limit holds back: a completion wakes it.
                e.armed = None;
            } else if t <= now {
                // Due now (e.g. the burst filled): the next poll comes back to it.
                e.armed = None;
                return false;
            } else if e.armed != Some(t) {
                // A deadline that moved later waits for the entry already armed: when
                // that fires the connection is serviced and the later time armed. (A
                // send timeout or a keep-alive deadline 60-75 s away alternating with
                // each request's retransmission timer left an entry in the heap per
                // request for that long.)
                let later = e.armed.is_some_and(|a| a > now && a < t);
                if !later {
                    e.armed = Some(t);
                    self.timers.push(Reverse((t, slot)));
                }
            }
        } else {
            e.armed = None;
        }
        complete
    }

    fn service_listeners(&mut self, cx: &NodeCx<'_>, now: Time, out: &mut Out<'_>) {
        let wire = &self.wire;
        let mut complete = true;
        for (lis, _, _) in &mut self.listeners {
            complete &= lis.dispatch(now, |s| wire.emit(out, s, 0)).is_ok();
        }
        for li in 0..self.listeners.len() {
            self.accept(cx, li);
        }
        self.listeners_due = !complete;
        self.listeners_armed = self.listeners.iter().filter_map(|(l, _, _)| l.poll_at()).min();
    }

    /// Frames the driver (and any completion policy) released: their connections'
    /// in-flight bytes go down, and a connection stopped by the limit is woken.
    fn completions(&mut self) {
        while let Some(p) = self.pending.front() {
            if p.m.refcnt() != 1 {
                break; // in order: a later frame's completion waits for this one
            }
            let p = self.pending.pop_front().expect("front exists");
            let Some(Some(e)) = self.slots.get_mut(p.slot as usize) else { continue };
            if e.id != p.id {
                continue;
            }
            e.inflight -= p.bytes;
            if e.tsq_blocked && e.inflight < self.cfg.tx_inflight_limit {
                e.tsq_blocked = false;
                self.touch(p.slot);
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
        ] {
            if v != 0 {
                cx.count(k, v);
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
