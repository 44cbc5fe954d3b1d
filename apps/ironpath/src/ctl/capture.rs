//! `ironpath ctl capture`: packets of a running pipeline to pcapng, live.
//!
//! `capture [rx|tx|both] PORT|NODE.EDGE ... [-c COUNT] [-s SNAPLEN] [--duration S]
//! [FILTER] -w FILE|-`. The client keeps `-w` and sends the rest as its command
//! line; the server resolves the capture points against the running graph
//! (a port by its name in the YAML: `rx` is what its receive nodes pass on,
//! `tx` what is given to its transmit nodes; `NODE.EDGE` what NODE sends along
//! next edge EDGE), compiles FILTER (tcpdump's syntax) with libpcap, verifies
//! the program ([`ironpath_graph::bpf`]) and arms the capture
//! ([`ironpath_graph::capture`]). It answers `\0capture\n` and then a pcapng
//! stream: a section header, an interface per point (named after it,
//! nanosecond time stamps), a packet block per packet as the lcores' rings
//! give them, and, when the capture ends, an interface statistics block per
//! point (`isb_ifrecv`: packets that passed the filter; `isb_ifdrop`: those the
//! ring had no room for), then it closes. A refused command gets the usual text
//! answer and error status line.
//!
//! The capture ends after COUNT packets, after S seconds, when the pipeline
//! stops, when the client shuts its side down (Ctrl-C: the client then still reads the statistics), or when
//! the client does not take what is written within [`SEND_TIMEOUT`] (it then
//! gets no statistics). While the client is slow the lcores go on: what the
//! ring cannot hold is dropped and counted.

use super::{decode, SEND_TIMEOUT};
use ironpath_graph::bpf::{Insn, Program};
use ironpath_graph::capture::{At, Capture, Point, Spec, DEFAULT_SNAPLEN, MAX_SNAPLEN};
use ironpath_graph::{GraphInfo, PortRole};
use ironpath_pcapfile::ng;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The first line of a capture's answer; the pcapng stream follows.
pub const STREAM_START: &[u8] = b"\0capture\n";
/// Most packets `-c` may ask for.
pub const MAX_COUNT: u64 = 1 << 40;
/// Longest `--duration`, in seconds (a week).
pub const MAX_DURATION: f64 = 7.0 * 86400.0;
/// Bytes of packet blocks gathered before one write to the client.
const WRITE_CHUNK: usize = 1 << 20;

/// Whether `line` is a capture command.
pub fn is_capture(line: &str) -> bool {
    line.split_whitespace().next() == Some("capture")
}

/// A capture command, parsed and resolved against a graph.
#[derive(Debug)]
pub struct Parsed {
    /// What to arm.
    pub spec: Spec,
    /// Packets to write (`-c`), if bounded.
    pub count: Option<u64>,
    /// How long to capture (`--duration`), if bounded.
    pub duration: Option<Duration>,
    /// The filter's text (empty: none).
    pub filter: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Rx,
    Tx,
    Both,
}

fn value<'a>(words: &[&'a str], i: usize, opt: &str) -> Result<&'a str, String> {
    words.get(i + 1).copied().ok_or_else(|| format!("capture: {opt} needs a value"))
}

/// The points of port `name` in direction `dir`, if the graph has nodes for it.
fn port_points(g: &GraphInfo, name: &str, dir: Dir) -> Option<Vec<Point>> {
    let nodes = |role: PortRole| -> Vec<String> {
        g.nodes
            .iter()
            .filter(|n| n.port.as_ref().is_some_and(|(p, r)| p == name && *r == role))
            .map(|n| n.name.clone())
            .collect()
    };
    let (rx, tx) = (nodes(PortRole::Rx), nodes(PortRole::Tx));
    if rx.is_empty() && tx.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    if dir != Dir::Tx && !rx.is_empty() {
        out.push(Point { name: format!("{name}:rx"), nodes: rx, at: At::Output });
    }
    if dir != Dir::Rx && !tx.is_empty() {
        out.push(Point { name: format!("{name}:tx"), nodes: tx, at: At::Input });
    }
    Some(out)
}

/// `NODE.EDGE` as a point, if NODE is a node of the graph with next EDGE.
fn edge_point(g: &GraphInfo, w: &str) -> Option<Point> {
    let (node, edge) = w.rsplit_once('.')?;
    let n = g.node(node)?;
    n.nexts.iter().any(|(e, _)| e == edge).then(|| Point {
        name: w.to_string(),
        nodes: vec![node.to_string()],
        at: At::Edge(edge.to_string()),
    })
}

/// Parses the words after `capture` against graph `g`; the filter is left as text.
pub fn parse(g: &GraphInfo, words: &[&str]) -> Result<Parsed, String> {
    let mut dir = Dir::Both;
    let mut points: Vec<Point> = Vec::new();
    let mut filter: Vec<&str> = Vec::new();
    let (mut count, mut duration, mut snaplen) = (None, None, DEFAULT_SNAPLEN);
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        match w {
            "-c" => {
                let v = value(words, i, w)?;
                count = Some(
                    v.parse::<u64>()
                        .ok()
                        .filter(|n| (1..=MAX_COUNT).contains(n))
                        .ok_or_else(|| format!("capture: -c `{v}`: a number of packets in 1..={MAX_COUNT}"))?,
                );
                i += 2;
                continue;
            }
            "-s" => {
                let v = value(words, i, w)?;
                snaplen = v
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=MAX_SNAPLEN).contains(n))
                    .ok_or_else(|| format!("capture: -s `{v}`: a snap length in 1..={MAX_SNAPLEN} bytes"))?;
                i += 2;
                continue;
            }
            "--duration" => {
                let v = value(words, i, w)?;
                let s = v
                    .parse::<f64>()
                    .ok()
                    .filter(|s| *s > 0.0 && *s <= MAX_DURATION)
                    .ok_or_else(|| format!("capture: --duration `{v}`: seconds in (0, {MAX_DURATION}]"))?;
                duration = Some(Duration::from_secs_f64(s));
                i += 2;
                continue;
            }
            "-w" => return Err("capture: -w is the client's (`ironpath ctl capture ... -w FILE`)".to_string()),
            _ => {}
        }
        i += 1;
        if !filter.is_empty() {
            filter.push(w);
            continue;
        }
        match w {
            "rx" => dir = Dir::Rx,
            "tx" => dir = Dir::Tx,
            "both" => dir = Dir::Both,
            _ => match port_points(g, w, dir).or_else(|| edge_point(g, w).map(|p| vec![p])) {
                Some(ps) if ps.is_empty() => {
                    return Err(format!(
                        "capture: port `{w}` has no {} node in the pipeline",
                        if dir == Dir::Rx { "receive" } else { "transmit" }
                    ))
                }
                Some(ps) => {
                    for p in ps {
                        if points.iter().any(|q| q.name == p.name) {
                            return Err(format!("capture: point `{}` given twice", p.name));
                        }
                        points.push(p);
                    }
                }
                None if points.is_empty() => return Err(no_point(g, w)),
                None => filter.push(w),
            },
        }
    }
    if points.is_empty() {
        return Err(no_point(g, "(none given)"));
    }
    Ok(Parsed { spec: Spec { points, snaplen, filter: None }, count, duration, filter: filter.join(" ") })
}

fn no_point(g: &GraphInfo, w: &str) -> String {
    let mut ports: Vec<&str> = g.nodes.iter().filter_map(|n| n.port.as_ref().map(|(p, _)| p.as_str())).collect();
    ports.sort_unstable();
    ports.dedup();
    let edges: Vec<String> = g
        .nodes
        .iter()
        .filter(|n| !n.synthetic)
        .flat_map(|n| n.nexts.iter().map(move |(e, _)| format!("{}.{e}", n.name)))
        .collect();
    format!(
        "capture: `{w}` is neither a port nor NODE.EDGE; ports: {}; edges: {}",
        if ports.is_empty() { "(none)".to_string() } else { ports.join(", ") },
        if edges.is_empty() { "(none)".to_string() } else { edges.join(", ") }
    )
}

/// Compiles `expr` with libpcap and verifies the program.
pub fn compile(expr: &str, snaplen: u32) -> Result<Program, String> {
    let insns = ironpath_eal::libpcap::compile(expr, snaplen).map_err(|e| format!("capture: {e}"))?;
    let insns: Vec<Insn> = insns.into_iter().map(|(c, jt, jf, k)| Insn::new(c, jt, jf, k)).collect();
    Program::verify(&insns).map_err(|e| format!("capture: filter `{expr}`: refused by the verifier: {e}"))
}

/// Turns the lcores' TSC into wall-clock nanoseconds.
struct Clock {
    tsc0: u64,
    wall0: i128,
    hz: i128,
}

impl Clock {
    fn now() -> Self {
        let wall0 = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i128);
        let hz = i128::from(ironpath_eal::tsc::tsc_hz().max(1));
        Self { tsc0: ironpath_eal::tsc::rdtsc(), wall0, hz }
    }

    fn ns(&self, tsc: u64) -> u64 {
        let d = i128::from(tsc) - i128::from(self.tsc0);
        (self.wall0 + d * 1_000_000_000 / self.hz).clamp(0, i128::from(u64::MAX)) as u64
    }

    fn wall_now() -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
    }
}

/// Whether the client has shut its side down (or gone); what it sends is ignored.
fn client_done(c: &UnixStream) -> bool {
    let mut buf = [0u8; 256];
    match rustix::net::recv(c, &mut buf, rustix::net::RecvFlags::DONTWAIT) {
        Ok((0, _)) => true,
        Ok(_) => false,
        Err(e) => e != rustix::io::Errno::AGAIN && e != rustix::io::Errno::INTR,
    }
}

/// How a served capture ended.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    /// Refused before it started (the client was told why).
    Refused,
    /// Ended and its statistics were written.
    Done,
    /// The client stopped reading; no statistics.
    SlowReader,
}

/// Serves `capture` command `line` on `c` with graph `g` until it ends; `stop`
/// ends it early (the server is going away); `started` is called once it is armed.
pub fn serve(c: &mut UnixStream, line: &str, g: Option<Arc<GraphInfo>>, stop: &AtomicBool, started: &dyn Fn()) -> End {
    let refuse = |c: &mut UnixStream, e: String| {
        let _ = super::server::write_all(c, &super::encode(&Err(e)), Instant::now() + SEND_TIMEOUT);
        End::Refused
    };
    let Some(g) = g else {
        return refuse(c, "capture: no pipeline: none is loaded (testpmd: `pipeline load FILE`)".to_string());
    };
    let words: Vec<&str> = line.split_whitespace().skip(1).collect();
    let mut req = match parse(&g, &words) {
        Ok(r) => r,
        Err(e) => return refuse(c, e),
    };
    if !req.filter.is_empty() {
        match compile(&req.filter, req.spec.snaplen) {
            Ok(p) => req.spec.filter = Some(p),
            Err(e) => return refuse(c, e),
        }
    }
    let snaplen = req.spec.snaplen;
    let clock = Clock::now();
    let mut cap = match g.capture(req.spec) {
        Ok(cap) => cap,
        Err(e) => return refuse(c, format!("capture: {e}")),
    };
    started();
    stream(c, &mut cap, &clock, snaplen, req.count, req.duration, stop)
}

fn stream(
    c: &mut UnixStream,
    cap: &mut Capture,
    clock: &Clock,
    snaplen: u32,
    count: Option<u64>,
    duration: Option<Duration>,
    stop: &AtomicBool,
) -> End {
    let mut out = Vec::with_capacity(WRITE_CHUNK + 70_000);
    out.extend_from_slice(STREAM_START);
    ng::section_header(&mut out, "ironpath ctl capture");
    for name in cap.names() {
        ng::interface(&mut out, name, snaplen);
    }
    if !super::server::write_all(c, &out, Instant::now() + SEND_TIMEOUT) {
        return End::SlowReader;
    }
    let t0 = Instant::now();
    let limit = count.unwrap_or(u64::MAX);
    let per_drain = (WRITE_CHUNK / snaplen as usize).max(16);
    // Records wait in the ring while the writer sleeps: 1 ms at a time.
    let mut written = 0u64;
    loop {
        out.clear();
        let n = cap.drain(per_drain, |r| {
            if written < limit {
                ng::packet(&mut out, r.point, clock.ns(r.tsc), &r.data, r.orig_len);
                written += 1;
            }
        });
        if !out.is_empty() && !super::server::write_all(c, &out, Instant::now() + SEND_TIMEOUT) {
            return End::SlowReader;
        }
        if written >= limit
            || duration.is_some_and(|d| t0.elapsed() >= d)
            || stop.load(Ordering::Relaxed)
            || cap.graph_stopped()
            || client_done(c)
        {
            break;
        }
        if n == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    // Disarm first, then write what the points counted.
    let counts: Vec<(u64, u64)> = (0..cap.names().len()).map(|i| cap.counts(i)).collect();
    out.clear();
    let now = Clock::wall_now();
    for (i, (accepted, dropped)) in counts.into_iter().enumerate() {
        ng::statistics(&mut out, i as u32, now, accepted, dropped);
    }
    if super::server::write_all(c, &out, Instant::now() + SEND_TIMEOUT) {
        End::Done
    } else {
        End::SlowReader
    }
}

/// The usage of `ironpath ctl capture`.
pub const USAGE: &str =
    "usage: ironpath ctl [-f PREFIX] capture [rx|tx|both] PORT|NODE.EDGE ... [-c COUNT] [-s SNAPLEN]
                          [--duration S] [FILTER] -w FILE|-

Writes the packets of a running pipeline to FILE (pcapng; `-` for stdout, e.g.
`| tshark -r -`): per PORT (its name in the YAML) what its receive nodes pass
on (rx) and what is given to its transmit nodes (tx), both by default; per
NODE.EDGE what NODE sends along its next EDGE. FILTER is tcpdump's syntax.
Ends after COUNT packets, S seconds or Ctrl-C; says on stderr how many packets
were captured and how many the capture ring had no room for.

  -c COUNT        stop after COUNT packets
  -s SNAPLEN      bytes kept of each packet [default and most: 65535]
  --duration S    stop after S seconds
  -w FILE|-       where to write (required)";

/// Set by Ctrl-C while a capture runs.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// `ironpath ctl capture ...` (`args`: the words after `capture`); the exit status.
pub fn client_main(path: &Path, prefix: &str, args: &[String]) -> i32 {
    let mut words: Vec<&str> = Vec::new();
    let mut file: Option<&str> = None;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "-h" | "--help" => {
                crate::outln!("{USAGE}");
                return 0;
            }
            "-w" => match args.get(i + 1) {
                Some(f) => {
                    file = Some(f);
                    i += 2;
                    continue;
                }
                None => return usage_error("-w needs a file (or - for stdout)"),
            },
            w => words.push(w),
        }
        i += 1;
    }
    let Some(file) = file else { return usage_error("-w FILE|- is required") };
    if words.is_empty() {
        return usage_error("no capture point (a port or NODE.EDGE)");
    }
    let line = format!("capture {}", words.join(" "));
    if line.contains('\n') || line.len() + 1 > super::MAX_LINE {
        return usage_error(&format!("the command is longer than {} bytes", super::MAX_LINE - 1));
    }
    let mut out: Box<dyn Write> = if file == "-" {
        Box::new(std::io::stdout().lock())
    } else {
        match std::fs::File::create(file) {
            Ok(f) => Box::new(std::io::BufWriter::new(f)),
            Err(e) => {
                eprintln!("ironpath ctl: {file}: {e}");
                return 1;
            }
        }
    };
    let mut c = match super::client::connect(path, prefix) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ironpath ctl: {e}");
            return 1;
        }
    };
    let _ = c.set_write_timeout(Some(SEND_TIMEOUT));
    if let Err(e) = c.write_all(format!("{line}\n").as_bytes()) {
        eprintln!("ironpath ctl: {}: {e}", path.display());
        return 1;
    }
    // Ctrl-C ends the capture; the server still sends the statistics. (In the
    // shell, a second capture finds the handler in place: only the flag is reset.)
    INTERRUPTED.store(false, Ordering::Relaxed);
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::Relaxed));
    match receive(&mut c, &mut *out) {
        Ok(s) => {
            if let Err(e) = out.flush() {
                if e.kind() != std::io::ErrorKind::BrokenPipe {
                    eprintln!("ironpath ctl: {file}: {e}");
                    return 1;
                }
            }
            let why = if s.stats { "" } else { " (no statistics: the capture was cut)" };
            eprintln!("{} packets captured, {} dropped by the capture ring{why}", s.packets, s.dropped);
            0
        }
        Err(e) => {
            eprintln!("ironpath ctl: {e}");
            1
        }
    }
}

fn usage_error(e: &str) -> i32 {
    eprintln!("ironpath ctl capture: {e}\n{USAGE}");
    2
}

/// What a capture stream held.
#[derive(Debug, Default)]
struct Summary {
    packets: u64,
    dropped: u64,
    stats: bool,
}

/// Reads the answer: a refusal (its text as the error), or the stream, each
/// whole block written to `out` as it comes.
fn receive(c: &mut UnixStream, out: &mut dyn Write) -> Result<Summary, String> {
    let _ = c.set_read_timeout(Some(Duration::from_millis(200)));
    let mut head: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    let mut splitter = ng::Splitter::default();
    let mut started = false;
    let mut s = Summary::default();
    let mut shut: Option<Instant> = None;
    let mut out_gone = false;
    loop {
        if INTERRUPTED.load(Ordering::Relaxed) || out_gone {
            match shut {
                None => {
                    let _ = c.shutdown(std::net::Shutdown::Write);
                    shut = Some(Instant::now());
                }
                Some(t) if t.elapsed() > SEND_TIMEOUT * 2 => return Err("no statistics after Ctrl-C".to_string()),
                Some(_) => {}
            }
        }
        let n = match c.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => return Err(e.to_string()),
        };
        let mut bytes = &chunk[..n];
        if !started {
            head.extend_from_slice(bytes);
            if head.len() < STREAM_START.len() && STREAM_START.starts_with(&head) {
                continue;
            }
            if !head.starts_with(STREAM_START) {
                // A refusal: read it whole.
                let _ = c.set_read_timeout(Some(SEND_TIMEOUT));
                let _ = c.read_to_end(&mut head);
                return Err(match decode(&head) {
                    Some(Err(e)) | Some(Ok(e)) => e.trim_end().to_string(),
                    None => String::from_utf8_lossy(&head).trim_end().to_string(),
                });
            }
            started = true;
            splitter.push(&head[STREAM_START.len()..]);
            bytes = &[];
        }
        splitter.push(bytes);
        while let Some((kind, block)) = splitter.next_block().map_err(|e| format!("capture stream: {e}"))? {
            match kind {
                ng::EPB if !out_gone => s.packets += 1,
                ng::ISB => {
                    s.stats = true;
                    if let Some((_, _, Some(d))) = ng::read_statistics(&block) {
                        s.dropped += d;
                    }
                }
                _ => {}
            }
            if !out_gone && out.write_all(&block).is_err() {
                // The reader of our output went away (SIGPIPE ignored): end the
                // capture and say what it counted.
                out_gone = true;
            }
        }
        if !out_gone && out.flush().is_err() {
            out_gone = true;
        }
    }
    if !started {
        return Err(match decode(&head) {
            Some(Err(e)) | Some(Ok(e)) => e.trim_end().to_string(),
            None if head.is_empty() => "closed without an answer".to_string(),
            None => String::from_utf8_lossy(&head).trim_end().to_string(),
        });
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_start_is_not_a_text_answer() {
        assert!(decode(STREAM_START).is_none());
        assert!(is_capture("capture a -c 3"));
        assert!(!is_capture("show capture"));
    }
}
