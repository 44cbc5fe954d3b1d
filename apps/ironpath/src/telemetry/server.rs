//! The telemetry endpoints: DPDK's telemetry v2 Unix socket and the metrics HTTP
//! endpoint. Their threads only speak the protocols; every question goes as a
//! [`Request`] to the thread that owns the ports, which answers it with
//! [`respond`].
//!
//! The v2 protocol, as DPDK's `dpdk-telemetry.py` expects it: a `SOCK_SEQPACKET`
//! socket at `RUNDIR/dpdk/PREFIX/dpdk_telemetry.v2` (RUNDIR: `$RUNTIME_DIRECTORY`,
//! else `/var/run` for root, else `$XDG_RUNTIME_DIR` or `/tmp`; a second process
//! with the same prefix takes `…v2:1`, and so on, which `-i 1` selects). On
//! connection the server sends the `/info` object; then each message from the
//! client is one command, `/path` or `/path,parameter`, and each reply one JSON
//! object `{"/path": value}` (`null` for an unknown command or parameter).

use super::{answer, info, known, metrics, Figures, MAX_OUTPUT_LEN};
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketAddrUnix, SocketFlags, SocketType};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::time::Duration;

/// Clients served at once on the socket (DPDK's limit too); more are closed.
const MAX_CLIENTS: usize = 10;
/// Longest command (bytes); DPDK reads 1024.
const MAX_COMMAND: usize = 1024;
/// How long a client waits for the owning thread before getting `null`.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// What a client asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ask {
    /// A telemetry command and its parameter.
    Command {
        /// `/path`.
        cmd: String,
        /// What followed the first comma (empty: none).
        param: String,
    },
    /// A metrics scrape; `openmetrics` if the scraper asked for that format.
    Metrics {
        /// OpenMetrics 1.0 rather than Prometheus text 0.0.4.
        openmetrics: bool,
    },
}

/// A question for the thread that owns the ports.
pub struct Request {
    /// The question.
    pub ask: Ask,
    reply: SyncSender<String>,
}

impl Request {
    /// Sends the answer (the client may have given up; then it is dropped).
    pub fn reply(self, text: String) {
        let _ = self.reply.try_send(text);
    }
}

/// The reply text to `ask` from figures `f`.
pub fn respond(ask: &Ask, f: &Figures) -> String {
    match ask {
        Ask::Command { cmd, param } => {
            let text = serde_json::json!({ cmd.as_str(): answer(f, cmd, param) }).to_string();
            if text.len() > MAX_OUTPUT_LEN {
                serde_json::json!({ cmd.as_str(): { "error": format!("reply of {} bytes exceeds max_output_len", text.len()) } })
                    .to_string()
            } else {
                text
            }
        }
        Ask::Metrics { openmetrics } => metrics::render(f, *openmetrics),
    }
}

/// The running endpoints; dropping it stops them and removes the socket file.
pub struct Server {
    socket: Option<PathBuf>,
    metrics: Option<SocketAddr>,
    stop: Arc<AtomicBool>,
}

/// DPDK's runtime directory for `prefix`.
pub fn runtime_dir(prefix: &str) -> PathBuf {
    let base = std::env::var_os("RUNTIME_DIRECTORY").map(PathBuf::from).unwrap_or_else(|| {
        if rustix::process::geteuid().is_root() {
            PathBuf::from("/var/run")
        } else {
            std::env::var_os("XDG_RUNTIME_DIR").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from)
        }
    });
    base.join("dpdk").join(prefix)
}

fn seqpacket() -> std::io::Result<OwnedFd> {
    Ok(rustix::net::socket_with(AddressFamily::UNIX, SocketType::SEQPACKET, SocketFlags::CLOEXEC, None)?)
}

fn connect(path: &Path) -> std::io::Result<OwnedFd> {
    let fd = seqpacket()?;
    rustix::net::connect(&fd, &SocketAddrUnix::new(path)?)?;
    Ok(fd)
}

/// Binds the first free `dpdk_telemetry.v2[:N]` in `dir`; a file no process
/// listens on any more (a crashed run) is taken over.
fn bind_socket(dir: &Path) -> Result<(OwnedFd, PathBuf), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("telemetry: {}: {e}", dir.display()))?;
    for i in 0..64 {
        let name = if i == 0 { "dpdk_telemetry.v2".to_string() } else { format!("dpdk_telemetry.v2:{i}") };
        let path = dir.join(name);
        if path.exists() {
            if connect(&path).is_ok() {
                continue;
            }
            let _ = std::fs::remove_file(&path);
        }
        let fd = seqpacket().map_err(|e| format!("telemetry: socket: {e}"))?;
        let addr = SocketAddrUnix::new(&path).map_err(|e| format!("telemetry: {}: {e}", path.display()))?;
        rustix::net::bind(&fd, &addr).map_err(|e| format!("telemetry: bind {}: {e}", path.display()))?;
        rustix::net::listen(&fd, 16).map_err(|e| format!("telemetry: listen {}: {e}", path.display()))?;
        return Ok((fd, path));
    }
    Err(format!("telemetry: 64 processes already listen in {}", dir.display()))
}

impl Server {
    /// Starts the telemetry socket for `prefix` (unless `None`) and the metrics
    /// endpoint on `metrics` (`ADDR:PORT`, unless `None`); questions arrive on the
    /// returned receiver.
    pub fn start(prefix: Option<&str>, metrics: Option<&str>) -> Result<(Server, Receiver<Request>), String> {
        let (tx, rx) = sync_channel::<Request>(64);
        let stop = Arc::new(AtomicBool::new(false));
        let mut server = Server { socket: None, metrics: None, stop: stop.clone() };
        if let Some(prefix) = prefix {
            // Without its socket the process still runs (as DPDK's EAL with a
            // telemetry failure would not): said once, on stderr.
            match bind_socket(&runtime_dir(prefix)) {
                Ok((fd, path)) => {
                    let (tx, stop) = (tx.clone(), stop.clone());
                    std::thread::Builder::new()
                        .name("telemetry".into())
                        .spawn(move || accept_loop(fd, tx, stop))
                        .map_err(|e| format!("telemetry: {e}"))?;
                    server.socket = Some(path);
                }
                Err(e) => log::warn!("{e}; running without a telemetry socket"),
            }
        }
        if let Some(addr) = metrics {
            let sa: SocketAddr =
                addr.parse().map_err(|_| format!("--metrics {addr}: not an ADDRESS:PORT (e.g. 127.0.0.1:9100)"))?;
            let l = TcpListener::bind(sa).map_err(|e| format!("--metrics {addr}: {e}"))?;
            server.metrics = Some(l.local_addr().map_err(|e| format!("--metrics {addr}: {e}"))?);
            std::thread::Builder::new()
                .name("metrics".into())
                .spawn(move || http_loop(l, tx, stop))
                .map_err(|e| format!("metrics: {e}"))?;
        }
        Ok((server, rx))
    }

    /// The socket's path, if it listens.
    pub fn socket_path(&self) -> Option<&Path> {
        self.socket.as_deref()
    }

    /// The metrics endpoint's address, if it listens.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accepting threads so they see `stop` and end.
        if let Some(p) = &self.socket {
            let _ = connect(p);
            let _ = std::fs::remove_file(p);
        }
        if let Some(a) = self.metrics {
            let _ = TcpStream::connect_timeout(&a, Duration::from_millis(200));
        }
    }
}

fn accept_loop(fd: OwnedFd, tx: SyncSender<Request>, stop: Arc<AtomicBool>) {
    let live = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        let Ok(c) = rustix::net::accept_with(&fd, SocketFlags::CLOEXEC) else {
            // Out of descriptors or memory: wait rather than spin.
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if live.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
            live.fetch_sub(1, Ordering::AcqRel);
            continue; // closed: DPDK does the same past its limit
        }
        let (tx, live2) = (tx.clone(), live.clone());
        let spawned = std::thread::Builder::new().name("telemetry-client".into()).spawn(move || {
            client(c, &tx);
            live2.fetch_sub(1, Ordering::AcqRel);
        });
        if spawned.is_err() {
            live.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Asks the owning thread and waits for its answer (`None`: it did not answer
/// in time, or the process is ending).
fn ask(tx: &SyncSender<Request>, q: Ask) -> Option<String> {
    let (rtx, rrx) = sync_channel(1);
    tx.send(Request { ask: q, reply: rtx }).ok()?;
    rrx.recv_timeout(ANSWER_TIMEOUT).ok()
}

/// One message of a telemetry client: `/path` or `/path,parameter` (trailing NULs
/// and line ends ignored; bytes that are not UTF-8 replaced).
pub fn split_command(msg: &[u8]) -> (String, String) {
    let text = String::from_utf8_lossy(msg);
    let text = text.trim_end_matches(['\0', '\n', '\r']);
    let (cmd, param) = text.split_once(',').unwrap_or((text, ""));
    (cmd.to_string(), param.to_string())
}

/// A scrape's request head: method, path (query cut off), and whether the
/// scraper accepts OpenMetrics.
pub fn parse_head(head: &str) -> (String, String, bool) {
    let mut lines = head.lines();
    let mut words = lines.next().unwrap_or("").split_whitespace();
    let method = words.next().unwrap_or("").to_string();
    let path = words.next().unwrap_or("").split('?').next().unwrap_or("").to_string();
    let openmetrics = lines.any(|h| {
        h.split_once(':')
            .is_some_and(|(k, v)| k.eq_ignore_ascii_case("accept") && v.contains("application/openmetrics-text"))
    });
    (method, path, openmetrics)
}

fn client(fd: OwnedFd, tx: &SyncSender<Request>) {
    let send = |s: &str| rustix::net::send(&fd, s.as_bytes(), SendFlags::NOSIGNAL).is_ok();
    if !send(&info().to_string()) {
        return;
    }
    let mut buf = [0u8; MAX_COMMAND];
    loop {
        let n = match rustix::net::recv(&fd, &mut buf[..], RecvFlags::empty()) {
            Ok((0, _)) | Err(_) => return,
            Ok((n, _)) => n,
        };
        let (cmd, param) = split_command(&buf[..n]);
        let reply = if known(&cmd) { ask(tx, Ask::Command { cmd: cmd.clone(), param }) } else { None };
        let reply = reply.unwrap_or_else(|| serde_json::json!({ cmd.as_str(): null }).to_string());
        if !send(&reply) {
            return;
        }
    }
}

fn http_loop(l: TcpListener, tx: SyncSender<Request>, stop: Arc<AtomicBool>) {
    for s in l.incoming() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        // One scrape at a time, each bounded in time and size: a stuck scraper
        // delays the next by at most the timeouts.
        let Ok(s) = s else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
        let _ = scrape(s, &tx);
    }
}

fn scrape(s: TcpStream, tx: &SyncSender<Request>) -> std::io::Result<()> {
    // The head, up to its empty line, at most 8 KiB.
    let mut r = BufReader::new(s.try_clone()?.take(8192));
    let mut head = String::new();
    loop {
        let before = head.len();
        if r.read_line(&mut head)? == 0 || head[before..].trim().is_empty() {
            break;
        }
    }
    let (method, path, openmetrics) = parse_head(&head);
    let mut w = s;
    let (status, ctype, body) = match (method.as_str(), path.as_str()) {
        ("GET" | "HEAD", "/metrics") => match ask(tx, Ask::Metrics { openmetrics }) {
            Some(b) if openmetrics => ("200 OK", "application/openmetrics-text; version=1.0.0; charset=utf-8", b),
            Some(b) => ("200 OK", "text/plain; version=0.0.4; charset=utf-8", b),
            None => ("503 Service Unavailable", "text/plain", "the process did not answer in time\n".into()),
        },
        ("GET" | "HEAD", _) => ("404 Not Found", "text/plain", "metrics are at /metrics\n".into()),
        _ => ("405 Method Not Allowed", "text/plain", "GET /metrics\n".into()),
    };
    write!(
        w,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    if method != "HEAD" {
        w.write_all(body.as_bytes())?;
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_heads_parse() {
        assert_eq!(split_command(b"/ethdev/stats,0\n\0"), ("/ethdev/stats".into(), "0".into()));
        assert_eq!(split_command(b"/"), ("/".into(), String::new()));
        assert_eq!(split_command(b"/help,/a,b"), ("/help".into(), "/a,b".into()));
        let (m, p, om) =
            parse_head("GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: application/openmetrics-text\r\n\r\n");
        assert_eq!((m.as_str(), p.as_str(), om), ("GET", "/metrics", true));
        let (m, p, om) = parse_head("");
        assert_eq!((m.as_str(), p.as_str(), om), ("", "", false));
    }
}
