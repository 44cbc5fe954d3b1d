//! The telemetry endpoints: DPDK's telemetry v2 Unix socket and the metrics HTTP
//! endpoint ([`super::http`]). Their threads only speak the protocols; every
//! question goes as a [`Request`] to the thread that owns the ports, which answers
//! it with [`respond`].
//!
//! The v2 protocol, as DPDK's `dpdk-telemetry.py` expects it: a `SOCK_SEQPACKET`
//! socket `dpdk_telemetry.v2` in the runtime directory `RUNDIR/dpdk/PREFIX`
//! ([`super::rundir`]: created 0700 or verified, the socket 0600); a second process
//! with the same prefix takes `…v2:1`, and so on, which `-i 1` selects. A client
//! that runs as another user than ours or root is closed unanswered (counted). On
//! connection the server sends the `/info` object; then each message from the
//! client is one command, `/path` or `/path,parameter`, and each reply one JSON
//! object `{"/path": value}` (`null` for an unknown command or parameter).

use super::counters::{Counters, Counts, Event};
pub use super::http::parse_head;
use super::rundir::{peer_trusted, RunDir};
use super::{answer, info, known, metrics, Figures, MAX_OUTPUT_LEN};
use rustix::net::{RecvFlags, SendFlags, SocketFlags, SocketType};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Duration;

/// Clients served at once on the socket (DPDK's limit too); more are closed.
const MAX_CLIENTS: usize = 10;
/// Longest command (bytes); DPDK reads 1024.
const MAX_COMMAND: usize = 1024;
/// How long a client waits for the owning thread before getting `null` (socket)
/// or `503` (metrics).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);
/// Questions waiting for the owning thread; more get no answer at once. Above
/// what both endpoints' clients can ask at once, so it bites only if the owning
/// thread stops polling.
const QUEUE: usize = 64;
/// The command answered by the socket thread itself: the endpoints' counters.
const COUNTERS_COMMAND: &str = "/ironpath/telemetry";

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
        /// The endpoints' own counters, shown with the figures.
        counts: Counts,
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
        Ask::Metrics { openmetrics, counts } => metrics::render(f, counts, *openmetrics),
    }
}

/// The running endpoints; dropping it stops them and removes the socket file.
pub struct Server {
    socket: Option<PathBuf>,
    metrics: Option<SocketAddr>,
    stop: Arc<AtomicBool>,
}

/// A connection to the socket at `path`; never waits.
fn connect(path: &Path) -> std::io::Result<OwnedFd> {
    super::rundir::connect_nonblocking(path, SocketType::SEQPACKET)
}

/// Binds the first free `dpdk_telemetry.v2[:N]` in the runtime directory of
/// `prefix` ([`RunDir::bind_free`]). A name appears only once its socket listens
/// (`RunDir::bind`), so a refused connection means the owner is gone, and two
/// processes starting at once take two names.
fn bind_socket(prefix: &str) -> Result<(OwnedFd, PathBuf), String> {
    let dir = RunDir::open(prefix).map_err(|e| format!("telemetry: {e}"))?;
    dir.bind_free("dpdk_telemetry.v2", SocketType::SEQPACKET, 16).map_err(|e| format!("telemetry: {e}"))
}

impl Server {
    /// Starts the telemetry socket for `prefix` (unless `None`) and the metrics
    /// endpoint on `metrics` (`[ADDR]:PORT` as [`ironpath_eal::args::metrics_addr`]
    /// reads it, unless `None`); questions arrive on the
    /// returned receiver.
    pub fn start(prefix: Option<&str>, metrics: Option<&str>) -> Result<(Server, Receiver<Request>), String> {
        let (tx, rx) = sync_channel::<Request>(QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let mut server = Server { socket: None, metrics: None, stop: stop.clone() };
        if let Some(prefix) = prefix {
            // Without its socket the process still runs (as DPDK's EAL with a
            // telemetry failure would not): said once, on stderr, with the reason.
            match bind_socket(prefix) {
                Ok((fd, path)) => {
                    let (tx, stop, counters) = (tx.clone(), stop.clone(), counters.clone());
                    std::thread::Builder::new()
                        .name("telemetry".into())
                        .spawn(move || accept_loop(fd, tx, stop, counters))
                        .map_err(|e| format!("telemetry: {e}"))?;
                    server.socket = Some(path);
                }
                Err(e) => log::warn!("{e}; running without a telemetry socket"),
            }
        }
        if let Some(addr) = metrics {
            let sa: SocketAddr = ironpath_eal::args::metrics_addr(addr).map_err(|e| format!("--metrics: {e}"))?;
            let l = TcpListener::bind(sa).map_err(|e| format!("--metrics {addr}: {e}"))?;
            server.metrics = Some(l.local_addr().map_err(|e| format!("--metrics {addr}: {e}"))?);
            std::thread::Builder::new()
                .name("metrics".into())
                .spawn(move || super::http::serve(l, tx, stop, counters))
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

fn accept_loop(fd: OwnedFd, tx: SyncSender<Request>, stop: Arc<AtomicBool>, counters: Arc<Counters>) {
    let live = Arc::new(AtomicUsize::new(0));
    let mut told = false;
    while !stop.load(Ordering::Relaxed) {
        let Ok(c) = rustix::net::accept_with(&fd, SocketFlags::CLOEXEC) else {
            // Out of descriptors or memory: wait rather than spin.
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        if stop.load(Ordering::Relaxed) {
            break;
        }
        // The directory keeps other users out; this is the second lock.
        if let Err(who) = peer_trusted(&c) {
            counters.count(Event::SocketPeerUid);
            if !told {
                told = true;
                let who = who.map_or("of unknown uid".to_string(), |(uid, pid)| format!("of uid {uid} (pid {pid})"));
                log::warn!("telemetry: closed a client {who}: only our user and root are served (said once)");
            }
            continue;
        }
        if live.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
            live.fetch_sub(1, Ordering::AcqRel);
            counters.count(Event::SocketLimit);
            continue; // closed: DPDK does the same past its limit
        }
        counters.count(Event::SocketClient);
        let (tx, live2, counters) = (tx.clone(), live.clone(), counters.clone());
        let spawned = std::thread::Builder::new().name("telemetry-client".into()).spawn(move || {
            client(c, &tx, &counters);
            live2.fetch_sub(1, Ordering::AcqRel);
        });
        if spawned.is_err() {
            live.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Asks the owning thread and waits for its answer (`None`: the queue is full, it
/// did not answer in time, or the process is ending). Never blocks on the queue.
pub(super) fn ask(tx: &SyncSender<Request>, q: Ask) -> Option<String> {
    let (rtx, rrx) = sync_channel(1);
    match tx.try_send(Request { ask: q, reply: rtx }) {
        Ok(()) => rrx.recv_timeout(ANSWER_TIMEOUT).ok(),
        Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => None,
    }
}

/// One message of a telemetry client: `/path` or `/path,parameter` (trailing NULs
/// and line ends ignored; bytes that are not UTF-8 replaced).
pub fn split_command(msg: &[u8]) -> (String, String) {
    let text = String::from_utf8_lossy(msg);
    let text = text.trim_end_matches(['\0', '\n', '\r']);
    let (cmd, param) = text.split_once(',').unwrap_or((text, ""));
    (cmd.to_string(), param.to_string())
}

/// How long a reply may wait for a client that does not read it (then the client is
/// closed and its place freed; an idle client, one of ours, may stay).
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

fn client(fd: OwnedFd, tx: &SyncSender<Request>, counters: &Counters) {
    let _ = rustix::net::sockopt::set_socket_timeout(&fd, rustix::net::sockopt::Timeout::Send, Some(SEND_TIMEOUT));
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
        let reply = if cmd == COUNTERS_COMMAND {
            Some(serde_json::json!({ COUNTERS_COMMAND: counters.snapshot().to_json() }).to_string())
        } else if known(&cmd) {
            let r = ask(tx, Ask::Command { cmd: cmd.clone(), param });
            if r.is_none() {
                counters.count(Event::SocketUnanswered);
            }
            r
        } else {
            None
        };
        let reply = reply.unwrap_or_else(|| serde_json::json!({ cmd.as_str(): null }).to_string());
        if !send(&reply) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse() {
        assert_eq!(split_command(b"/ethdev/stats,0\n\0"), ("/ethdev/stats".into(), "0".into()));
        assert_eq!(split_command(b"/"), ("/".into(), String::new()));
        assert_eq!(split_command(b"/help,/a,b"), ("/help".into(), "/a,b".into()));
    }
}
