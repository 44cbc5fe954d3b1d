//! The `tcp` node kind: its parameters (defaults written here only), the choices
//! they offer as enums, and the constructor from a validated configuration.

use super::{ConnectCfg, ListenCfg, TcpConfig, TcpLimits, TcpNode};
use crate::kind::{NodeError, NodeKind, Values, MEMPOOL, PORT};
use ironpath_config::{Choice, Nexts, NodeSpec, ParamKind, ParamSpec};
use std::time::Duration;

ironpath_config::choice! {
    /// The application of each connection a listener accepts.
    pub enum ServerApp {
        /// Serve files (`root`) and in-memory objects (`objects`).
        Http = "http",
        /// Send back what arrives.
        Echo = "echo",
        /// Read and forget.
        Discard = "discard",
        /// Send `bytes` (0: until the peer closes).
        Source = "source",
    }
}

ironpath_config::choice! {
    /// What a connection the node opens does.
    pub enum ClientApp {
        /// Send `bytes` (0: until the peer closes).
        Source = "source",
        /// Read and forget.
        Discard = "discard",
        /// GET `path`, `requests` times (keep-alive).
        HttpGet = "http_get",
    }
}

ironpath_config::choice! {
    /// Congestion control, as written in the pipeline file.
    pub enum CongestionChoice {
        /// CUBIC (RFC 9438).
        Cubic = "cubic",
        /// NewReno (RFC 6582).
        NewReno = "newreno",
    }
}

impl From<CongestionChoice> for ironpath_tcp::Congestion {
    fn from(c: CongestionChoice) -> Self {
        match c {
            CongestionChoice::Cubic => ironpath_tcp::Congestion::Cubic,
            CongestionChoice::NewReno => ironpath_tcp::Congestion::NewReno,
        }
    }
}

const LISTEN: &[ParamSpec] = &[
    ParamSpec::new("port", ParamKind::Uint { min: 1, max: 65535 }).required().doc("TCP port"),
    ParamSpec::new("congestion", ParamKind::Enum(CongestionChoice::NAMES)).doc("congestion control of accepted connections (default: the node's)"),
    ParamSpec::new("app", ParamKind::Enum(ServerApp::NAMES)).required().doc("application of each accepted connection"),
    ParamSpec::new("root", ParamKind::Path).doc("http: directory served (relative to the YAML file); paths resolve beneath it only: a symlink that leaves it is a 404"),
    ParamSpec::new("dotfiles", ParamKind::Bool).default("false").doc("http: serve files and directories whose names start with `.` (`/.git/config`, `/.env`); off: 404"),
    ParamSpec::new("objects", ParamKind::Str).default("/empty=0").doc("http: in-memory objects, `/path=bytes,...` (pattern bytes; `/empty=0` is empty)"),
    ParamSpec::new("bytes", ParamKind::Uint { min: 0, max: u64::MAX }).default("0").doc("source: bytes sent per connection before closing (0: until the peer closes)"),
    ParamSpec::new("backlog", ParamKind::Uint { min: 1, max: 1_000_000 }).default("1024").doc("connections in the handshake or not yet accepted, at most"),
];

const CONNECT: &[ParamSpec] = &[
    ParamSpec::new("to", ParamKind::IpList).required().doc("the peer's address"),
    ParamSpec::new("congestion", ParamKind::Enum(CongestionChoice::NAMES))
        .doc("congestion control of these connections (default: the node's)"),
    ParamSpec::new("port", ParamKind::Uint { min: 1, max: 65535 }).required().doc("the peer's port"),
    ParamSpec::new("app", ParamKind::Enum(ClientApp::NAMES)).required().doc("what the connection does"),
    ParamSpec::new("bytes", ParamKind::Uint { min: 0, max: u64::MAX })
        .default("0")
        .doc("source: bytes to send, then close (0: until the peer closes)"),
    ParamSpec::new("path", ParamKind::Str).default("/").doc("http_get: the path requested"),
    ParamSpec::new("save", ParamKind::Path)
        .doc("http_get: file the body is written to (`.N` appended per connection when count > 1)"),
    ParamSpec::new("count", ParamKind::Uint { min: 1, max: 100_000 }).default("1").doc("connections opened"),
    ParamSpec::new("requests", ParamKind::Uint { min: 1, max: u64::MAX })
        .default("1")
        .doc("http_get: requests per connection (keep-alive)"),
];

/// The node's parameters.
const PARAMS: &[ParamSpec] = &[
    PORT,
    ParamSpec::new("addresses", ParamKind::IpList).required().doc("our IPv4 and IPv6 addresses (the first of each family opens our connections)"),
    MEMPOOL,
    ParamSpec::new("listen", ParamKind::Records(LISTEN)).default("[]").doc("listening ports, each with its application"),
    ParamSpec::new("connect", ParamKind::Records(CONNECT)).default("[]").doc("connections opened at start, each with its application"),
    ParamSpec::new("mss", ParamKind::Uint { min: 536, max: 9000 }).default("1460").doc("MSS we announce and send (path MTU minus 40 for IPv4); must fit the pool's buffers"),
    ParamSpec::new("send_buffer", ParamKind::Uint { min: 4096, max: 1 << 30 }).default("1048576").doc("bytes queued or unacknowledged per connection"),
    ParamSpec::new("recv_buffer", ParamKind::Uint { min: 4096, max: 1 << 30 }).default("1048576").doc("largest receive window per connection (bytes of payload)"),
    ParamSpec::new("initial_window", ParamKind::Uint { min: 1, max: 100 }).default("10").doc("initial congestion window, segments (RFC 6928)"),
    ParamSpec::new("congestion", ParamKind::Enum(CongestionChoice::NAMES)).default("cubic").doc("congestion control: CUBIC (RFC 9438) or NewReno (RFC 6582); `listen`/`connect` entries may override it"),
    ParamSpec::new("syn_cookies", ParamKind::Bool).default("true").doc("answer SYNs with SYN cookies when a listener's backlog is full (the connection keeps the MSS only), instead of dropping them"),
    ParamSpec::new("rto_min", ParamKind::Duration).default("200ms").doc("lower bound of the retransmission timeout"),
    ParamSpec::new("rto_initial", ParamKind::Duration).default("1s").doc("retransmission timeout before an RTT sample (RFC 6298)"),
    ParamSpec::new("ack_delay", ParamKind::Duration).default("40ms").doc("longest delay of an ACK (every second segment is ACKed at once; 0: never delayed)"),
    ParamSpec::new("time_wait", ParamKind::Duration).default("60s").doc("TIME-WAIT length (2 x MSL)"),
    ParamSpec::new("keepalive_idle", ParamKind::Duration).default("0s").doc("keep-alive: quiet time before the first probe of a connection with nothing outstanding (Linux tcp_keepalive_time, 7200s); 0: no probes"),
    ParamSpec::new("keepalive_interval", ParamKind::Duration).default("75s").doc("keep-alive: time between unanswered probes"),
    ParamSpec::new("keepalive_probes", ParamKind::Uint { min: 1, max: 1000 }).default("9").doc("keep-alive: unanswered probes before the connection is reset"),
    ParamSpec::new("idle_timeout", ParamKind::Duration).default("0s").doc("reset a connection from which nothing arrived for this long (0: never)"),
    ParamSpec::new("fin_wait2_timeout", ParamKind::Duration).default("60s").doc("reset a connection whose peer never closes after our FIN was acknowledged (Linux tcp_fin_timeout); 0: wait forever"),
    ParamSpec::new("nagle", ParamKind::Bool).default("false").doc("Nagle's algorithm (off: as TCP_NODELAY, what servers set)"),
    ParamSpec::new("timestamps", ParamKind::Bool).default("true").doc("offer/accept RFC 7323 timestamps"),
    ParamSpec::new("window_scaling", ParamKind::Bool).default("true").doc("offer/accept RFC 7323 window scaling"),
    ParamSpec::new("sack", ParamKind::Bool).default("true").doc("offer/accept SACK (blocks are sent, not used)"),
    ParamSpec::new("max_connections", ParamKind::Uint { min: 1, max: 10_000_000 }).default("65536").doc("connections held at most (SYNs beyond are dropped, counted)"),
    ParamSpec::new("seed", ParamKind::Uint { min: 0, max: u64::MAX }).default("0").doc("key of the initial sequence numbers, SYN cookies and hash tables (0: 128 bits from the kernel's getrandom; any other value makes them predictable: for tests only, warned at start)"),
    ParamSpec::new("tx_inflight_limit", ParamKind::Uint { min: 0, max: 1 << 30 }).default("262144").doc("bytes per connection handed to TX and not yet completed (freed by the driver or the completion policy), like Linux's TCP Small Queues; the connection sends again the moment completions arrive; 0: no limit"),
    ParamSpec::new("tso", ParamKind::Bool).default("true").doc("send up to 64 KiB per packet for the port to cut into MSS-sized segments (TSO), when the port offers TX_TCP_SEG (af_packet and tap do, through the kernel's GSO)"),
    ParamSpec::new("max_time_wait", ParamKind::Uint { min: 0, max: 10_000_000 }).default("262144").doc("connections kept in TIME-WAIT at most (each ~250 bytes with its table entry, outside the connection table and max_connections); beyond it a connection closes without TIME-WAIT (counted: time_wait_overflow), as Linux's tcp_max_tw_buckets"),
    ParamSpec::new("memory_limit", ParamKind::Uint { min: 0, max: 1 << 40 }).default("67108864").doc("memory all connections may make the node hold: received data (unread or out of order, each piece charged the buffer it holds: truesize) and their applications' heap (unread requests, queued responses, streamed file pieces, echo copies); beyond it a connection's small pieces are collapsed, out-of-order data is dropped, applications take no new work while they have some, the largest holders that made no progress for a second are reset (counted: mem_reclaimed) and then SYNs refused; 1/8 beyond it all data but segments that fill a hole, 1/4 beyond it those too (counted: rcv_collapsed, mem_dropped, mem_refused); 0: only pool_share bounds it"),
    ParamSpec::new("pool_share", ParamKind::Uint { min: 1, max: 100 }).default("50").doc("percent of the node's mempool that received data may pin at most, whatever memory_limit says: RX, ARP, ICMP and new connections always find buffers"),
    ParamSpec::new("send_timeout", ParamKind::Duration).default("60s").doc("reset a connection whose peer accepts nothing of what waits for it (a zero window, or no ACK) for this long (nginx send_timeout); 0: never"),
    ParamSpec::new("header_timeout", ParamKind::Duration).default("60s").doc("http: close a connection whose request head is not complete this long after it began (after the connection opened, for the first); 408 if some of it came (nginx client_header_timeout); 0: never"),
    ParamSpec::new("keepalive_timeout", ParamKind::Duration).default("75s").doc("http: close a keep-alive connection idle this long between requests (nginx keepalive_timeout); 0: never"),
    ParamSpec::new("send_min_rate", ParamKind::Uint { min: 0, max: 1 << 30 }).default("4096").doc("bytes per second a peer must acknowledge while data waits for it: each send_timeout period must end with send_min_rate x send_timeout bytes taken, or the connection is reset (counted: send_too_slow); a reader that takes a little now and then cannot hold a full send buffer forever; 0: any acknowledgment restarts send_timeout"),
    ParamSpec::new("max_per_peer", ParamKind::Uint { min: 0, max: 10_000_000 }).default("16384").doc("connections one peer (an IPv4 address, an IPv6 /64) may hold (SYNs and handshakes completed by a SYN cookie beyond are refused, counted: peer_capped); 0: no cap"),
    ParamSpec::new("peer_share", ParamKind::Uint { min: 1, max: 100 }).default("25").doc("percent of the node's memory budget (memory_limit, pool_share) one peer (an IPv4 address, an IPv6 /64) may hold: its received data and its applications' heap (unread requests, queued responses, streamed file pieces, echo copies); beyond it that peer's data is dropped (out-of-order first; counted: peer_mem_dropped), its applications take no new work while they have some (held_back) and its SYNs are refused (peer_mem_refused)"),
    ParamSpec::new("max_pipeline", ParamKind::Uint { min: 1, max: 4096 }).default("16").doc("http: responses a connection may have queued or unacknowledged; pipelined requests beyond wait unparsed in the receive buffer (counted: pipeline_held)"),
    ParamSpec::new("file_cache", ParamKind::Uint { min: 0, max: 1 << 40 }).default("1073741824").doc("http: bytes of files each listener keeps in memory once read; a file that does not fit is streamed (counted: files_streamed): read a piece at a time as the send buffer takes it, each piece freed once acknowledged"),
    ParamSpec::new("open_files", ParamKind::Uint { min: 1, max: 10_000_000 }).default("4096").doc("http: descriptors of cached files kept open per listener (a file is closed once all of it is in memory), at most a quarter of the process's descriptor limit (RLIMIT_NOFILE, raised to its hard limit at start); least recently used closed first (counted: fds_closed); streamed files hold at most as many more; a file that cannot be opened for lack of descriptors is a 503 (fd_exhausted)"),
    ParamSpec::new("file_threads", ParamKind::Uint { min: 1, max: 64 }).default("2").doc("http: threads of the node that make every file-system call of its listeners (open beneath the root, stat, read, close), so that none is made on the lcore; a request whose file is not in memory waits for its completion (its connection has nothing to send, the others go on), and a new request goes to the thread with the fewest outstanding (a thread stuck on a slow file gets no more while another is free); an idle thread looks for work at least every millisecond"),
    ParamSpec::new("file_io_queue", ParamKind::Uint { min: 1, max: 65536 }).default("256").doc("http: file-system requests (opens, checks, piece reads of 256 KiB, each piece's buffer allocated when asked for) the node has outstanding at most; one peer (an IPv4 address, an IPv6 /64) may have peer_share percent of them (at least one) and a connection one open and one piece read; a request beyond waits (counted: file_io_full, file_io_peer_full, file_io_conn_held)"),
    ParamSpec::new("file_check", ParamKind::Duration).default("1s").doc("http: a cached file is served from memory with no file-system call; a file-I/O thread checks at most this often that its name still leads to the same file (device, inode, size, modification time), the cached copy served meanwhile, and once it does not later requests read it again (0: a check at every request, still not waited for)"),
    ParamSpec::new("max_neighbours", ParamKind::Uint { min: 16, max: 10_000_000 }).default("65536").doc("IP-to-MAC entries kept; entries of addresses without a connection are evicted to make room (counted: neigh_evicted)"),
];

/// The `tcp` node kind.
pub const KIND: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "tcp",
        doc: "TCP termination: connection table, listening ports with applications (http, echo, discard, source), client connections; frames out with full checksums",
        params: PARAMS,
        nexts: Nexts::Fixed(&["out"]),
        source: true,
        ends_loops: true,
        ..NodeSpec::DEFAULT
    },
    build: |b, env| {
        let p = b.params();
        let port = p.port("port")?;
        // Files served and their descriptors: the process's whole allowance.
        super::raise_descriptor_limit();
        let tso = p.bool("tso")? && env.port_tx_offloads(port) & ironpath_eal::abi::TX_TCP_SEG != 0;
        let cfg = TcpConfig {
            mac: env.port_mac(port)?,
            isn_secret: secret(&b.cfg.name, p.uint("seed")?)?,
            tsc_hz: env.tsc_hz(),
            ..config(p, tso)?
        };
        Ok(Box::new(TcpNode::new(cfg, env.mempool(p.raw().mempool("mempool"), Some(port))?).map_err(NodeError::Refused)?))
    },
};

/// The node's settings from its parameters; `tso`: the port cuts segments. The MAC,
/// the secret and the clock are left for the caller.
pub fn config(p: Values<'_>, tso: bool) -> Result<TcpConfig, NodeError> {
    let dur = |k: &'static str| p.duration_us(k).map(Duration::from_micros);
    let addresses: Vec<ironpath_wire::IpAddress> = p.ip_list("addresses")?.iter().map(|a| (*a).into()).collect();
    let keepalive_idle = p.nonzero_duration("keepalive_idle")?;
    let tcp = ironpath_tcp::Config {
        mss: p.int("mss")?,
        send_buffer: p.int("send_buffer")?,
        recv_buffer: p.int("recv_buffer")?,
        initial_window: p.int("initial_window")?,
        rto_min: dur("rto_min")?,
        rto_initial: dur("rto_initial")?,
        ack_delay: dur("ack_delay")?,
        msl: dur("time_wait")? / 2,
        nagle: p.bool("nagle")?,
        timestamps: p.bool("timestamps")?,
        window_scaling: p.bool("window_scaling")?,
        sack: p.bool("sack")?,
        congestion: p.choice::<CongestionChoice>("congestion")?.into(),
        syn_cookies: p.bool("syn_cookies")?,
        keepalive: match keepalive_idle {
            Some(idle) => Some(ironpath_tcp::Keepalive {
                idle,
                interval: dur("keepalive_interval")?,
                probes: p.int("keepalive_probes")?,
            }),
            None => None,
        },
        idle_timeout: p.nonzero_duration("idle_timeout")?,
        fin_wait2_timeout: p.nonzero_duration("fin_wait2_timeout")?,
        send_timeout: p.nonzero_duration("send_timeout")?,
        send_min_rate: p.int("send_min_rate")?,
        // TSO when the port can cut segments: up to 64 KiB of payload per packet
        // (IPv4's total length leaves 65535 - 20 - 60 for the data).
        tso_max: if tso { 65_000 } else { 0 },
        ..ironpath_tcp::Config::default()
    };
    let listen = p.records("listen")?.iter().map(|r| listen(Values(r))).collect::<Result<_, _>>()?;
    let connect = p.records("connect")?.iter().map(|r| connect(Values(r), &addresses)).collect::<Result<_, _>>()?;
    Ok(TcpConfig {
        mac: [0; 6],
        addresses,
        tcp,
        listen,
        connect,
        max_connections: p.int("max_connections")?,
        tsc_hz: 0,
        isn_secret: [0; 16],
        tx_inflight_limit: p.uint("tx_inflight_limit")?,
        memory_limit: p.uint("memory_limit")?,
        max_time_wait: p.int("max_time_wait")?,
        limits: TcpLimits {
            pool_share: p.int("pool_share")?,
            max_per_peer: p.int("max_per_peer")?,
            peer_share: p.int("peer_share")?,
            max_pipeline: p.int("max_pipeline")?,
            file_cache: p.uint("file_cache")?,
            open_files: p.int("open_files")?,
            file_threads: p.int("file_threads")?,
            file_io_queue: p.int("file_io_queue")?,
            file_check: dur("file_check")?,
            max_neighbours: p.int("max_neighbours")?,
            header_timeout: p.nonzero_duration("header_timeout")?,
            keepalive_timeout: p.nonzero_duration("keepalive_timeout")?,
        },
    })
}

fn listen(r: Values<'_>) -> Result<ListenCfg, NodeError> {
    Ok(ListenCfg {
        port: r.int("port")?,
        app: r.choice("app")?,
        backlog: r.int("backlog")?,
        bytes: r.uint("bytes")?,
        root: r.raw().path("root").map(|x| x.to_owned()),
        objects: r.str("objects")?.to_owned(),
        congestion: r.opt_choice::<CongestionChoice>("congestion").map(Into::into),
        dotfiles: r.bool("dotfiles")?,
    })
}

fn connect(r: Values<'_>, ours: &[ironpath_wire::IpAddress]) -> Result<ConnectCfg, NodeError> {
    let to = r.ip_list("to")?.first().copied().map(Into::into);
    Ok(ConnectCfg {
        to: to.or(ours.first().copied()).ok_or(NodeError::Missing("to"))?,
        port: r.int("port")?,
        app: r.choice("app")?,
        bytes: r.uint("bytes")?,
        path: r.str("path")?.to_owned(),
        save: r.raw().path("save").map(|x| x.to_owned()),
        count: r.int("count")?,
        requests: r.uint("requests")?,
        congestion: r.opt_choice::<CongestionChoice>("congestion").map(Into::into),
    })
}

/// The key of the node's initial sequence numbers, SYN cookies and hash tables:
/// from the kernel, or from `seed` (warned: predictable) when it is not 0.
fn secret(node: &str, seed: u64) -> Result<[u8; 16], NodeError> {
    let mut secret = [0u8; 16];
    if seed == 0 {
        crate::hash::random_secret(&mut secret)?;
    } else {
        log::warn!(
            "tcp node `{node}`: a fixed `seed` ({seed}) makes initial sequence numbers, SYN cookies and \
             hash keys predictable to anyone who knows it; use it for tests only"
        );
        secret[..8].copy_from_slice(&seed.to_le_bytes());
    }
    Ok(secret)
}

/// The settings of a `tcp` node whose parameters are all defaults (with the
/// address 198.18.0.2), read from [`KIND`]'s specs through the pipeline
/// validation (once per process: a fuzz target asks for every input): for tests,
/// benchmarks and fuzz targets that vary a few.
pub fn defaults() -> TcpConfig {
    static DEFAULTS: std::sync::OnceLock<TcpConfig> = std::sync::OnceLock::new();
    DEFAULTS
        .get_or_init(|| {
            let yaml = "ports: [{name: p0, driver: net_null}]\nlcores: [{id: 0}]\n\
                        nodes: [{name: t, type: tcp, lcore: 0, params: {port: p0, addresses: 198.18.0.2}}]\n";
            let catalog = ironpath_config::Catalog { nodes: crate::CATALOG, drivers: None };
            let p = ironpath_config::parse_str(yaml, std::path::Path::new("t.yaml"), &catalog).expect("valid");
            config(Values(&p.nodes[0].params), false).expect("defaults")
        })
        .clone()
}

/// The catalog's defaults ([`defaults`]).
impl Default for TcpLimits {
    fn default() -> Self {
        defaults().limits
    }
}
