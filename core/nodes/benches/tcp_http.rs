//! The `tcp` node serving HTTP, measured alone: a server node (`http`, an empty
//! in-memory object) and a client node (`http_get` on C keep-alive connections) in
//! one thread, each one's output burst handed to the other as its input, on a
//! virtual clock (10 µs a round). No port, no kernel: what our TCP and HTTP cost per
//! request, which in `ci/bench-tcp` hides among the kernel's per-frame costs.
//!
//! ```text
//! tcp_http [--conns C] [--requests R] [--rounds N] [--thrash KIB] [--file BYTES]
//! ```
//!
//! `--file BYTES` serves a file of that size from a temporary web root (`/f`, in the
//! file cache after its first request, checked by a file-I/O thread at most every
//! second of the virtual clock) instead of the in-memory `/empty`.
//!
//! `--thrash KIB` writes that many KiB of other memory before each server call, as
//! the kernel's receive and send work does between our polls in `ci/bench-tcp`: with
//! `--conns 2 --thrash 1024` (two requests a poll, caches cold) the server's cycles
//! come near what it costs in place, and `--cache-sim=yes --LL=524288,8,64` under
//! callgrind says which code misses the (512 KiB) L2.
//!
//! Prints the server node's and the client node's TSC cycles per request (each node
//! call timed; a call over 1 ms, the thread descheduled, is not counted) and the
//! frames per request each way. Under `valgrind --tool=callgrind
//! --toggle-collect=tcp_http::step_server` it gives the server's instruction counts
//! (`--rounds` bounds the run).
#![forbid(unsafe_code)]

use ironpath_eal::tsc::{rdtsc, tsc_hz};
use ironpath_eal::{Burst, MemPolicy, Mempool, MempoolConfig};
use ironpath_graph::testing::call;
use ironpath_graph::{Node, NodeStats};
use ironpath_nodes::tcp::{ClientApp, ConnectCfg, ListenCfg, ServerApp, TcpConfig, TcpNode};
use ironpath_tcp::Config;
use ironpath_wire::IpAddress;
use std::net::Ipv4Addr;

const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const CLIENT: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);

fn cfg(mac: [u8; 6], addr: Ipv4Addr, hz: u64) -> TcpConfig {
    TcpConfig {
        mac,
        addresses: vec![IpAddress::V4(addr)],
        // The engine settings `configs/http-server.yaml` gets from the catalog's
        // defaults that differ from the engine's own.
        tcp: Config { send_timeout: Some(std::time::Duration::from_secs(60)), nagle: false, ..Config::default() },
        listen: Vec::new(),
        connect: Vec::new(),
        max_connections: 100_000,
        tsc_hz: hz,
        isn_secret: [7; 16],
        tx_inflight_limit: 0,
        memory_limit: 0,
        max_time_wait: 262_144,
        limits: Default::default(),
    }
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().unwrap_or_else(|_| panic!("{name} wants a number")))
        .unwrap_or(default)
}

fn requests(st: &NodeStats) -> u64 {
    st.extra_by_name("http_requests").unwrap_or(0)
}

/// One call of the server node (a function of its own, for callgrind's
/// `--toggle-collect=tcp_http::step_server`).
#[inline(never)]
fn step_server(server: &mut TcpNode, st: &NodeStats, b: &mut Burst, now: u64) {
    call(server, st, b, now);
}

fn main() {
    let conns = arg("--conns", 64) as u32;
    let per_conn = arg("--requests", 100_000);
    let rounds = arg("--rounds", 200_000);
    let mut thrash = vec![0u8; arg("--thrash", 0) as usize * 1024];
    let hz = tsc_hz();
    let file = std::env::args().any(|a| a == "--file").then(|| arg("--file", 0));
    let root = std::env::temp_dir().join(format!("ironpath-tcp-http-bench-{}", std::process::id()));
    if let Some(n) = file {
        std::fs::create_dir_all(&root).expect("web root");
        std::fs::write(root.join("f"), vec![b'x'; n as usize]).expect("file");
    }
    let pool = Mempool::create(&MempoolConfig::new("tcp-bench", 16383).cache_size(256).policy(MemPolicy::NoHuge))
        .expect("mempool");
    let mut s = cfg([2, 0, 0, 0, 0, 2], SERVER, hz);
    s.listen = vec![ListenCfg {
        port: 80,
        app: ServerApp::Http,
        backlog: 1024,
        bytes: 0,
        root: file.map(|_| root.clone()),
        objects: "/empty=0".into(),
        congestion: None,
        dotfiles: false,
    }];
    let mut c = cfg([2, 0, 0, 0, 0, 1], CLIENT, hz);
    c.connect = vec![ConnectCfg {
        to: IpAddress::V4(SERVER),
        port: 80,
        app: ClientApp::HttpGet,
        bytes: 0,
        path: if file.is_some() { "/f" } else { "/empty" }.into(),
        save: None,
        count: conns,
        requests: per_conn,
        congestion: None,
    }];
    let mut server = TcpNode::new(s, pool.clone()).expect("server");
    let mut client = TcpNode::new(c, pool.clone()).expect("client");
    let (ss, cs) = (NodeStats::new(server.counters()), NodeStats::new(client.counters()));
    let mut to_client = Burst::new();
    let (mut frames_in, mut frames_out) = (0u64, 0u64);
    let (mut s_cyc, mut c_cyc) = (0u64, 0u64);
    let (mut s_req, mut c_req) = (0u64, 0u64);
    let step = (hz / 100_000).max(1); // 10 µs
    let mut now = 1u64;
    let warmup = rounds / 10;
    for r in 0..rounds {
        now += step;
        // Counted once every connection had an answer (a file's first request waits
        // for the file-I/O threads, in real time, while the rounds run on).
        let counting = r >= warmup && requests(&cs) >= u64::from(conns);
        let mut b = std::mem::take(&mut to_client);
        let before = requests(&cs);
        let t = rdtsc();
        call(&mut client, &cs, &mut b, now);
        let dt = rdtsc().wrapping_sub(t);
        if counting && dt < hz / 1000 {
            c_cyc += dt;
            c_req += requests(&cs) - before;
        }
        frames_in += b.len() as u64;
        for line in thrash.chunks_mut(64) {
            line[0] = line[0].wrapping_add(1);
        }
        std::hint::black_box(&mut thrash);
        let before = requests(&ss);
        let t = rdtsc();
        step_server(&mut server, &ss, &mut b, now + step / 2);
        let dt = rdtsc().wrapping_sub(t);
        if counting && dt < hz / 1000 {
            s_cyc += dt;
            s_req += requests(&ss) - before;
        }
        frames_out += b.len() as u64;
        to_client = b;
    }
    if file.is_some() {
        let _ = std::fs::remove_dir_all(&root);
    }
    let total = requests(&ss).max(1);
    println!("| node | requests | cycles/request |");
    println!("|---|---|---|");
    println!("| server (http) | {} | {:.0} |", requests(&ss), s_cyc as f64 / s_req.max(1) as f64);
    println!("| client (http_get) | {} | {:.0} |", requests(&cs), c_cyc as f64 / c_req.max(1) as f64);
    println!(
        "\n{conns} connections, {rounds} rounds; frames per request: {:.2} to the server, {:.2} back; {} HTTP errors; TSC {:.2} GHz",
        frames_in as f64 / total as f64,
        frames_out as f64 / total as f64,
        ss.extra_by_name("http_errors").unwrap_or(0) + cs.extra_by_name("http_errors").unwrap_or(0),
        hz as f64 / 1e9
    );
}
