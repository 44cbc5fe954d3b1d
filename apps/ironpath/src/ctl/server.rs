//! The control socket's threads: one accepts, one per client (at most
//! [`MAX_CLIENTS`]) reads its line under a deadline, passes it on as a
//! [`Request`] and writes the answer under another. None of them waits on the
//! owning thread longer than [`ANSWER_TIMEOUT`], and none touches a port.

use super::{
    encode, Reply, Request, ANSWER_TIMEOUT, IDLE_TIMEOUT, MAX_CLIENTS, MAX_LINE, QUEUE, SEND_TIMEOUT, SOCKET_NAME,
};
use crate::telemetry::rundir::{connect_nonblocking, peer_trusted, RunDir};
use rustix::net::SocketType;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Instant;

/// What happened to clients, by kind.
#[derive(Debug, Default)]
pub struct Counts {
    /// Clients served (their command read and answered or refused).
    pub served: AtomicU64,
    /// Closed because their user is neither ours nor root.
    pub refused_uid: AtomicU64,
    /// Closed because [`MAX_CLIENTS`] were being served.
    pub busy: AtomicU64,
    /// Closed because their line exceeded [`MAX_LINE`].
    pub too_long: AtomicU64,
    /// Closed because their line did not come within [`IDLE_TIMEOUT`].
    pub idle: AtomicU64,
    /// Dropped because they did not read their answer within [`SEND_TIMEOUT`].
    pub slow_readers: AtomicU64,
    /// Commands the owning thread did not take or answer in time.
    pub unanswered: AtomicU64,
    /// Captures started (`capture`, streamed by the socket thread).
    pub captures: AtomicU64,
    /// Captures refused (bad point or filter, no pipeline, 4 running already).
    pub captures_refused: AtomicU64,
}

impl Counts {
    fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// `show ctl`: the socket's own counters (answered by the socket thread).
    pub fn format(&self, path: &Path) -> String {
        let rows = [
            ("clients served", &self.served),
            ("refused: another user", &self.refused_uid),
            ("refused: busy (max clients)", &self.busy),
            ("refused: line too long", &self.too_long),
            ("closed: nothing sent in time", &self.idle),
            ("dropped: answer not read in time", &self.slow_readers),
            ("commands not answered in time", &self.unanswered),
            ("captures served", &self.captures),
            ("captures refused", &self.captures_refused),
        ];
        let mut s = format!(
            "control socket {} (max {MAX_CLIENTS} clients, {MAX_LINE}-byte lines, {} s to send, {} s to read)\n",
            path.display(),
            IDLE_TIMEOUT.as_secs(),
            SEND_TIMEOUT.as_secs()
        );
        for (name, c) in rows {
            s.push_str(&format!("  {name:<34} {:>10}\n", c.load(Ordering::Relaxed)));
        }
        s
    }
}

/// The listening control socket; dropping it stops the threads and removes the
/// socket file.
pub struct Server {
    path: PathBuf,
    stop: Arc<AtomicBool>,
}

impl Server {
    /// Listens on the first free control socket of `prefix`; commands arrive on
    /// the receiver.
    pub fn start(prefix: &str) -> Result<(Server, Receiver<Request>), String> {
        let dir = RunDir::open(prefix).map_err(|e| format!("control socket: {e}"))?;
        let (fd, path) =
            dir.bind_free(SOCKET_NAME, SocketType::STREAM, 64).map_err(|e| format!("control socket: {e}"))?;
        let (tx, rx) = sync_channel(QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        let listener = UnixListener::from(fd);
        let (stop2, path2) = (stop.clone(), path.clone());
        std::thread::Builder::new()
            .name("ctl".into())
            .spawn(move || accept_loop(&listener, &tx, &stop2, &path2))
            .map_err(|e| format!("control socket: {e}"))?;
        Ok((Server { path, stop }, rx))
    }

    /// Where it listens.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `ctl -i N` that selects this socket (empty for the first).
    pub fn instance_arg(&self) -> String {
        self.path.to_string_lossy().rsplit_once(".sock:").map(|(_, i)| format!(" -i {i}")).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accepting thread, which sees `stop` and ends.
        let _ = connect_nonblocking(&self.path, SocketType::STREAM);
        let _ = std::fs::remove_file(&self.path);
    }
}

fn accept_loop(listener: &UnixListener, tx: &SyncSender<Request>, stop: &Arc<AtomicBool>, path: &Path) {
    let live = Arc::new(AtomicUsize::new(0));
    let counts = Arc::new(Counts::default());
    let mut told = false;
    while !stop.load(Ordering::Relaxed) {
        let Ok((mut c, _)) = listener.accept() else {
            // Out of descriptors or memory: wait rather than spin.
            std::thread::sleep(std::time::Duration::from_millis(50));
            continue;
        };
        if stop.load(Ordering::Relaxed) {
            break;
        }
        // Every line written here goes to a fresh socket buffer: it cannot block.
        let _ = c.set_write_timeout(Some(SEND_TIMEOUT));
        // The 0700 directory keeps other users out; this is the second lock.
        if let Err(who) = peer_trusted(&c) {
            Counts::bump(&counts.refused_uid);
            let who = who.map_or("of unknown uid".to_string(), |(uid, pid)| format!("of uid {uid} (pid {pid})"));
            if !told {
                told = true;
                log::warn!("control socket: refused a client {who}: only our user and root are served (said once)");
            }
            let _ =
                c.write_all(format!("refused: a client {who}; only the owner's user and root are served\n").as_bytes());
            continue;
        }
        if live.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
            live.fetch_sub(1, Ordering::AcqRel);
            Counts::bump(&counts.busy);
            let _ = c.write_all(format!("busy: {MAX_CLIENTS} clients are being served; try again\n").as_bytes());
            continue;
        }
        let (tx, live2, counts2, path) = (tx.clone(), live.clone(), counts.clone(), path.to_path_buf());
        let stop2 = stop.clone();
        let spawned = std::thread::Builder::new().name("ctl-client".into()).spawn(move || {
            client(c, &tx, &counts2, &path, &stop2);
            live2.fetch_sub(1, Ordering::AcqRel);
        });
        if spawned.is_err() {
            live.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Why a command line was not read.
#[derive(Debug, PartialEq, Eq)]
enum ReadError {
    /// Over [`MAX_LINE`] bytes without a line end.
    TooLong,
    /// No line end within the deadline.
    Idle,
    /// The client went away.
    Gone,
}

/// Reads one line (without its `\n`, trimmed) from `c` before `deadline`.
fn read_line(c: &mut UnixStream, deadline: Instant) -> Result<String, ReadError> {
    let mut buf = Vec::with_capacity(256);
    let mut chunk = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ReadError::Idle);
        }
        let _ = c.set_read_timeout(Some(left));
        let n = match c.read(&mut chunk) {
            Ok(0) => return Err(ReadError::Gone),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Err(ReadError::Idle)
            }
            Err(_) => return Err(ReadError::Gone),
        };
        let got = &chunk[..n];
        if let Some(i) = got.iter().position(|&b| b == b'\n') {
            if buf.len() + i + 1 > MAX_LINE {
                return Err(ReadError::TooLong);
            }
            buf.extend_from_slice(&got[..i]);
            return Ok(String::from_utf8_lossy(&buf).trim().to_string());
        }
        if buf.len() + n >= MAX_LINE {
            return Err(ReadError::TooLong);
        }
        buf.extend_from_slice(got);
    }
}

/// Writes `bytes` before `deadline`; false if the client did not take them.
pub(super) fn write_all(c: &mut UnixStream, bytes: &[u8], deadline: Instant) -> bool {
    let mut at = 0;
    while at < bytes.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let _ = c.set_write_timeout(Some(left));
        match c.write(&bytes[at..]) {
            Ok(0) => return false,
            Ok(n) => at += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

/// Passes `line` to the owning thread and waits (bounded) for its reply.
fn ask_owner(tx: &SyncSender<Request>, line: String, counts: &Counts) -> Result<Reply, String> {
    let (rtx, rrx) = sync_channel(1);
    match tx.try_send(Request { line, reply: rtx }) {
        Ok(()) => rrx.recv_timeout(ANSWER_TIMEOUT).map_err(|_| {
            Counts::bump(&counts.unanswered);
            format!("error: no answer within {} s (the process is busy or ending)", ANSWER_TIMEOUT.as_secs())
        }),
        Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
            Counts::bump(&counts.unanswered);
            Err("error: the process has too many commands waiting; try again".to_string())
        }
    }
}

fn client(mut c: UnixStream, tx: &SyncSender<Request>, counts: &Counts, path: &Path, stop: &AtomicBool) {
    let line = match read_line(&mut c, Instant::now() + IDLE_TIMEOUT) {
        Ok(l) => l,
        Err(e) => {
            let (counter, why) = match e {
                ReadError::TooLong => (&counts.too_long, format!("error: command longer than {MAX_LINE} bytes\n")),
                ReadError::Idle => {
                    (&counts.idle, format!("error: no command line within {} s\n", IDLE_TIMEOUT.as_secs()))
                }
                ReadError::Gone => return,
            };
            Counts::bump(counter);
            let _ = write_all(&mut c, why.as_bytes(), Instant::now() + SEND_TIMEOUT);
            return;
        }
    };
    Counts::bump(&counts.served);
    if super::capture::is_capture(&line) {
        let graph = match ask_owner(tx, line.clone(), counts) {
            Ok(Reply::Graph(g)) => g,
            Ok(Reply::Text(_)) => None,
            Err(e) => {
                let _ = write_all(&mut c, &encode(&Err(e)), Instant::now() + SEND_TIMEOUT);
                return;
            }
        };
        match super::capture::serve(&mut c, &line, graph, stop, &|| Counts::bump(&counts.captures)) {
            super::capture::End::Done => {}
            super::capture::End::SlowReader => Counts::bump(&counts.slow_readers),
            super::capture::End::Refused => Counts::bump(&counts.captures_refused),
        }
        return;
    }
    let words: Vec<&str> = line.split_whitespace().collect();
    let own = super::commands::parse(&words).is_some_and(|(s, _)| s.cmd == super::commands::Cmd::ShowCtl);
    let answer = if own {
        Ok(counts.format(path))
    } else {
        match ask_owner(tx, line, counts) {
            Ok(Reply::Text(a)) => a,
            Ok(Reply::Graph(_)) => Err("error: no answer for this command".to_string()),
            Err(e) => Err(e),
        }
    };
    if !write_all(&mut c, &encode(&answer), Instant::now() + SEND_TIMEOUT) {
        Counts::bump(&counts.slow_readers);
    }
}
