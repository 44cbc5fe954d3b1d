//! The settings of a `tcp` node: listeners, client connections, limits.

use super::*;

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
    /// Memory all connections may make the node hold (received data charged at its
    /// buffers, and their applications' heap) before the node drops out-of-order
    /// data, holds applications back, resets the largest holders that make no
    /// progress and refuses SYNs; 1/8 above it, all data (0: only `pool_share`
    /// bounds it).
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
    /// Connections (established or closing, not TIME-WAIT) one peer (an IPv4 address,
    /// an IPv6 /64) may hold; 0: no cap.
    pub max_per_peer: u32,
    /// Percent of the node's memory budget (`memory_limit`, `pool_share`) one peer may
    /// hold: received data and its applications' heap for it.
    pub peer_share: u32,
    /// `http`: responses one connection may have queued or unacknowledged; further
    /// pipelined requests wait, unparsed, in the receive buffer.
    pub max_pipeline: usize,
    /// `http`: bytes of files a site keeps in memory; a file that does not fit is
    /// streamed (read as sent, freed once acknowledged).
    pub file_cache: u64,
    /// `http`: descriptors of cached files a site keeps open at most (files whose
    /// pieces are not all in memory yet); least recently used ones are closed first.
    pub open_files: usize,
    /// `http`: file-I/O threads of the node (every open, stat, read and close of a
    /// served file runs on them, never on the lcore); 0 runs them on the node's own
    /// thread at its next poll, for tests and fuzzing only (a blocking call on an lcore).
    pub file_threads: usize,
    /// `http`: file-system requests the node has outstanding at most (opens, checks,
    /// piece reads); one peer may have `peer_share` percent of them.
    pub file_io_queue: usize,
    /// `http`: a cached file is served from memory, its name checked again (off the
    /// lcore) at most this often.
    pub file_check: std::time::Duration,
    /// Neighbour (IP to MAC) entries held at most; entries of addresses without a
    /// connection are evicted to make room.
    pub max_neighbours: usize,
    /// `http`: a request head must be complete this long after it began (after the
    /// connection opened, for the first); `None`: no limit.
    pub header_timeout: Option<std::time::Duration>,
    /// `http`: an idle keep-alive connection is closed after this long; `None`: never.
    pub keepalive_timeout: Option<std::time::Duration>,
}
