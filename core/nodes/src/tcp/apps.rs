//! The applications a `tcp` node runs on its connections: `http` (static files and
//! in-memory objects), `echo`, `discard` and `source` on listening ports, and the
//! client side (`connect:`): `source`, `discard` and `http_get`.
//!
//! An application is polled whenever its connection changed (data or an ACK came,
//! a timer fired) and sends through a [`Sender`] queue, which hands the engine as
//! much as its send buffer takes: a 100 MiB file is queued as one reference and
//! leaves in window-sized slices.

use super::files::{piece_cost, Delivery, FileBody, Files, Io, PieceAt};
use super::http_server::HttpConn;
use super::payload::Chunk;
use super::site::Site;
use ironpath_http as http;
use ironpath_tcp::{Connection, Payload, State, Time};
use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Bytes of a request or response head an HTTP side accepts (431 beyond it).
pub const MAX_HEAD: usize = 8192;

/// Bytes of the `source` pattern buffer: a multiple of 251, so that the stream is
/// byte `i % 251` at offset `i` whatever the slice sizes.
const PATTERN_LEN: usize = 251 * 261;

/// The `source` pattern (byte `i % 251` at stream offset `i`): made once, shared by
/// every node (it is never written).
pub fn pattern() -> Arc<[u8]> {
    static PATTERN: std::sync::OnceLock<Arc<[u8]>> = std::sync::OnceLock::new();
    PATTERN.get_or_init(|| (0..PATTERN_LEN).map(|i| (i % 251) as u8).collect::<Vec<u8>>().into()).clone()
}

/// What applications count (added to the node's counters by the caller).
#[derive(Debug, Default, Clone, Copy)]
pub struct AppStats {
    /// Payload bytes the applications read.
    pub bytes_in: u64,
    /// Payload bytes the applications queued for sending.
    pub bytes_out: u64,
    /// HTTP requests answered (server) or completed (client).
    pub http_requests: u64,
    /// HTTP answers with a status >= 400 (server), or failed requests (client).
    pub http_errors: u64,
    /// Client connections that finished their work.
    pub clients_done: u64,
    /// HTTP connections closed by `header_timeout`.
    pub header_timeouts: u64,
    /// HTTP connections closed by `keepalive_timeout`.
    pub keepalive_timeouts: u64,
    /// Times an application took no new work while it had some (its peer, or all
    /// connections, over their memory budget).
    pub held_back: u64,
    /// Times an HTTP connection left pipelined requests unparsed (`max_pipeline`).
    pub pipeline_held: u64,
    /// HTTP requests answered 503 for lack of descriptors.
    pub fd_exhausted: u64,
}

/// How long an HTTP connection may wait for a request, or take to send its head.
#[derive(Debug, Default, Clone, Copy)]
pub struct HttpTimeouts {
    /// From the connection's opening (first request) or the head's first byte (later
    /// ones) to its end; also between two reads of a request body.
    pub header: Option<Duration>,
    /// An idle keep-alive connection, between a response (all of it acknowledged)
    /// and the next request's first byte.
    pub keepalive: Option<Duration>,
}

/// Shared state of the applications of one node.
pub struct AppEnv {
    /// The `source` pattern.
    pub pattern: Arc<[u8]>,
    /// HTTP sites, by listener.
    pub sites: Vec<Site>,
    /// Counters since the caller last took them.
    pub stats: AppStats,
    /// The time of this poll.
    pub now: Time,
    /// HTTP timeouts.
    pub timeouts: HttpTimeouts,
    /// `http`: responses a connection may have queued or unacknowledged.
    pub max_pipeline: usize,
    /// The connection being polled belongs to a peer over its share of the memory
    /// budget, or all connections are over theirs: take no new work while some is
    /// under way (requests, file pieces, echo reads).
    pub held_back: bool,
    /// File I/O (`None`: no site serves a directory).
    pub io: Option<Io>,
}

/// Data queued by an application and not yet taken by the connection, and the heap
/// kept for the connection alone until its peer acknowledges it (response heads and
/// error bodies, echo copies, pieces of streamed files): what the connection is
/// charged beyond its received data.
#[derive(Default)]
pub struct Sender {
    queue: VecDeque<Part>,
    pub(super) bytes: usize,
    /// Bytes the connection took from this queue: the stream offset of the next one.
    sent: u64,
    /// Heap of queued parts, freed once the stream is acknowledged up to the offset.
    owned_parts: VecDeque<(u64, usize)>,
    /// Heap of streamed file pieces read, freed once acknowledged up to the offset.
    owned_pieces: VecDeque<(u64, usize)>,
    /// The sum of both.
    owned: usize,
    /// The token of the piece read asked for the file being sent (at most one).
    reading: Option<u32>,
    /// A read failed: the response cannot be completed.
    failed: bool,
}

/// How a [`Sender::flush`] ended short of the queue's end, when it did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Flushed {
    /// `held_back` kept a streamed file's next piece from being read.
    pub(super) held: bool,
    /// A file's next piece is being read (or waits to be).
    pub(super) io: bool,
}

/// What a [`Sender`] holds: bytes, or a range of a file, read as it is sent (with the
/// piece being sent), and the response head that goes with its first bytes.
enum Part {
    Data(Chunk),
    File { head: Option<Chunk>, body: Arc<FileBody>, off: u64, end: u64, piece: Option<(Arc<[u8]>, u64)> },
}

impl Sender {
    /// Queues `c`, a buffer shared with others (an object, a cached head): it costs the
    /// connection nothing of its own.
    pub(super) fn push(&mut self, c: Chunk) {
        if !c.is_empty() {
            self.bytes += c.len();
            self.queue.push_back(Part::Data(c));
        }
    }

    /// Queues `c`, a buffer made for this connection: charged to it until the peer
    /// acknowledges its last byte.
    pub(super) fn push_owned(&mut self, c: Chunk) {
        if !c.is_empty() {
            let cost = c.truesize();
            self.push(c);
            self.owned += cost;
            self.owned_parts.push_back((self.queued_end(), cost));
        }
    }

    /// Queues `head` (shared, as [`Sender::push`]) and the whole of `body`: the head
    /// leaves with the body's first bytes, once they are read (a small file goes in
    /// one segment, not a head and then, a read later, its body).
    pub(super) fn push_file(&mut self, head: Chunk, body: Arc<FileBody>) {
        let end = body.len();
        if end == 0 {
            return self.push(head);
        }
        self.bytes += head.len() + end as usize;
        let head = (!head.is_empty()).then_some(head);
        self.queue.push_back(Part::File { head, body, off: 0, end, piece: None });
    }

    /// The stream offset just past everything queued so far.
    pub(super) fn queued_end(&self) -> u64 {
        self.sent + self.bytes as u64
    }

    /// Frees what the peer acknowledged, given the connection's send queue; returns
    /// the stream offset acknowledged.
    pub(super) fn release(&mut self, send_queue: usize) -> u64 {
        let acked = self.sent.saturating_sub(send_queue as u64);
        for q in [&mut self.owned_parts, &mut self.owned_pieces] {
            while let Some(&(end, cost)) = q.front() {
                if end > acked {
                    break;
                }
                q.pop_front();
                self.owned -= cost;
            }
        }
        acked
    }

    /// Heap kept for this connection alone (see [`Sender`]).
    pub(super) fn owned(&self) -> usize {
        self.owned
    }

    /// Moves queued data into the connection's send buffer, as much as it takes. A
    /// file is read a piece at a time (through `files`: a read asked for completes at
    /// a later poll), only as far as the buffer has room; while `held_back`, a
    /// streamed file's next piece is read only once the send buffer is empty. Says
    /// what stopped it; `Err` when a read failed (the file shrank since): the response
    /// cannot be completed.
    pub(super) fn flush(
        &mut self,
        conn: &mut Connection<Chunk>,
        held_back: bool,
        mut files: Option<(&mut Files, &mut Io)>,
    ) -> Result<Flushed, ()> {
        if self.failed {
            return Err(());
        }
        let Sender { queue, bytes, sent, owned_pieces, owned, reading, .. } = self;
        while let Some(part) = queue.front_mut() {
            match part {
                Part::Data(c) => {
                    let len = c.len();
                    let n = conn.send(c.clone()).unwrap_or(0);
                    *bytes -= n;
                    *sent += n as u64;
                    if n < len {
                        *c = c.slice(n, len - n);
                        return Ok(Flushed::default());
                    }
                }
                Part::File { head, body, off, end, piece } => {
                    while *off < *end {
                        if conn.send_free() == 0 {
                            return Ok(Flushed::default());
                        }
                        let have = piece.as_ref().is_some_and(|(p, s)| *off >= *s && *off < *s + p.len() as u64);
                        if !have {
                            let waiting = Flushed { held: false, io: true };
                            if reading.is_some() {
                                return Ok(waiting);
                            }
                            let streamed = !body.is_cached();
                            if streamed && held_back && conn.send_queue() > 0 {
                                return Ok(Flushed { held: true, io: false });
                            }
                            let Some((files, io)) = files.as_mut() else { return Err(()) };
                            let (s, len) = body.piece_span(*off);
                            let got = match files.piece(body, *off, io) {
                                PieceAt::Ready(p, _) => Some(p),
                                PieceAt::Wait(t) => {
                                    *reading = Some(t);
                                    None
                                }
                                PieceAt::Busy => return Ok(waiting),
                                PieceAt::Failed => return Err(()),
                            };
                            if streamed {
                                // Its memory is this connection's from the read until
                                // its last byte sent here is acknowledged.
                                let last = (s + len as u64).min(*end);
                                let cost = piece_cost(len);
                                let before = head.as_ref().map_or(0, |h| h.len() as u64);
                                *owned += cost;
                                owned_pieces.push_back((*sent + before + (last - *off), cost));
                            }
                            match got {
                                Some(p) => *piece = Some((p, s)),
                                None => return Ok(waiting),
                            }
                        }
                        if let Some(h) = head.take() {
                            let len = h.len();
                            let n = conn.send(h.clone()).unwrap_or(0);
                            *bytes -= n;
                            *sent += n as u64;
                            if n < len {
                                *head = Some(h.slice(n, len - n));
                                return Ok(Flushed::default());
                            }
                        }
                        let Some((p, s)) = piece.as_ref() else { return Ok(Flushed::default()) };
                        let from = (*off - s) as usize;
                        let to = (p.len() as u64).min(*end - s) as usize;
                        let n = conn.send(Chunk::from_bytes(Arc::clone(p), from, to - from)).unwrap_or(0);
                        *bytes -= n;
                        *sent += n as u64;
                        *off += n as u64;
                        if n < to - from {
                            return Ok(Flushed::default());
                        }
                    }
                }
            }
            queue.pop_front();
        }
        Ok(Flushed::default())
    }

    /// The read under `token` completed: its piece becomes the one the file being
    /// sent goes on from (another token is a read this sender no longer waits for).
    pub(super) fn piece_done(&mut self, token: u32, r: Result<(Arc<[u8]>, u64), ()>) {
        if self.reading != Some(token) {
            return;
        }
        self.reading = None;
        match r {
            Ok((p, s)) => {
                if let Some(Part::File { piece, .. }) = self.queue.front_mut() {
                    *piece = Some((p, s));
                }
            }
            Err(()) => self.failed = true,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether the file being sent waits for a piece it does not have.
    pub(super) fn stalled(&self) -> bool {
        match self.queue.front() {
            Some(Part::File { off, end, piece, .. }) => {
                off < end && !piece.as_ref().is_some_and(|(p, s)| *off >= *s && *off < *s + p.len() as u64)
            }
            _ => false,
        }
    }

    /// Drops everything queued (the connection is aborted: its send buffer goes too).
    pub(super) fn clear(&mut self) {
        self.queue.clear();
        self.bytes = 0;
        self.owned_parts.clear();
        self.owned_pieces.clear();
        self.owned = 0;
        self.reading = None;
        self.failed = false;
    }
}

/// One connection's application.
pub enum App {
    /// Read and forget everything; close when the peer does.
    Discard,
    /// Send back what arrives.
    Echo(Sender),
    /// Send `left` bytes of the pattern (`None`: until the peer closes), then close.
    Source { left: Option<u64>, sent: u64 },
    /// Serve site `site`.
    Http(Box<HttpConn>),
    /// Fetch a path, `requests` times on one keep-alive connection.
    HttpGet(Box<HttpGet>),
}

impl App {
    /// The server application `name` of a listener (`site`: its index in
    /// [`AppEnv::sites`] for `http`).
    pub fn server(name: super::ServerApp, bytes: u64, site: usize) -> App {
        match name {
            super::ServerApp::Http => App::Http(Box::new(HttpConn::new(site))),
            super::ServerApp::Echo => App::Echo(Sender::default()),
            super::ServerApp::Source => App::Source { left: (bytes != 0).then_some(bytes), sent: 0 },
            super::ServerApp::Discard => App::Discard,
        }
    }

    /// Reacts to whatever changed on `conn`: reads, answers, sends, closes.
    pub fn poll(&mut self, conn: &mut Connection<Chunk>, env: &mut AppEnv) {
        match self {
            App::Discard => {
                while let Some(c) = conn.recv() {
                    env.stats.bytes_in += c.len() as u64;
                }
                close_when_peer_did(conn, true);
            }
            App::Echo(out) => {
                out.release(conn.send_queue());
                // Read only while little is waiting, so a slow reader closes our window.
                // The bytes are copied: a peer that sends one-byte segments and never
                // reads the answers must not keep a packet buffer per byte. Held back,
                // read only once everything read before was acknowledged.
                while out.bytes < 1 << 20 {
                    if env.held_back && (out.bytes > 0 || conn.send_queue() > 0) {
                        env.stats.held_back += u64::from(conn.recv_queue() > 0);
                        break;
                    }
                    let Some(c) = conn.recv() else { break };
                    env.stats.bytes_in += c.len() as u64;
                    env.stats.bytes_out += c.len() as u64;
                    out.push_owned(Chunk::from_vec(c.to_vec()));
                }
                let _ = out.flush(conn, false, None); // bytes only: cannot fail nor wait
                close_when_peer_did(conn, out.is_empty());
            }
            App::Source { left, sent } => {
                while let Some(c) = conn.recv() {
                    env.stats.bytes_in += c.len() as u64;
                }
                if conn.may_send() && matches!(conn.state(), State::Established | State::CloseWait) {
                    loop {
                        let free = conn.send_free() as u64;
                        let off = (*sent % 251) as usize;
                        let n = free.min(left.unwrap_or(u64::MAX)).min((PATTERN_LEN - off) as u64) as usize;
                        if n == 0 {
                            break;
                        }
                        let queued = conn.send(Chunk::from_bytes(Arc::clone(&env.pattern), off, n)).unwrap_or(0);
                        *sent += queued as u64;
                        env.stats.bytes_out += queued as u64;
                        if let Some(l) = left.as_mut() {
                            *l -= queued as u64;
                        }
                        if queued < n {
                            break;
                        }
                    }
                    if *left == Some(0) {
                        conn.close();
                        env.stats.clients_done += 1;
                    }
                }
                close_when_peer_did(conn, true);
            }
            App::Http(h) => h.poll(conn, env),
            App::HttpGet(g) => g.poll(conn, env),
        }
    }

    /// A file-system request it made completed.
    pub(super) fn io_done(&mut self, token: u32, d: Delivery) {
        if let App::Http(h) = self {
            h.io_done(token, d);
        }
    }

    /// Heap the application keeps for its connection alone (see [`Sender`]; `http`
    /// adds its unread request bytes).
    pub fn heap(&self) -> usize {
        match self {
            App::Echo(out) => out.owned(),
            App::Http(h) => h.heap(),
            _ => 0,
        }
    }

    /// When the application must be polled again even if nothing happens on its
    /// connection (an HTTP timeout), if ever.
    pub fn deadline(&self) -> Option<Time> {
        match self {
            App::Http(h) => h.deadline,
            _ => None,
        }
    }
}

/// Closes our side once the peer closed its side and nothing is left to send.
pub(super) fn close_when_peer_did(conn: &mut Connection<Chunk>, drained: bool) {
    if drained && conn.state() == State::CloseWait && conn.recv_queue() == 0 && conn.may_send() {
        conn.close();
    }
}

/// A client connection fetching one path.
pub struct HttpGet {
    path: String,
    host: String,
    requests: u64,
    done: u64,
    sent: bool,
    head: Vec<u8>,
    /// Body bytes still expected (`None`: until the server closes).
    body_left: Option<Option<u64>>,
    save: Option<File>,
    failed: bool,
}

impl HttpGet {
    /// GET `path` from `host`, `requests` times, the body written to `save` if given.
    pub fn new(path: &str, host: String, requests: u64, save: Option<&Path>) -> Result<HttpGet, String> {
        let save = match save {
            Some(p) => Some(File::create(p).map_err(|e| format!("cannot create `{}`: {e}", p.display()))?),
            None => None,
        };
        Ok(HttpGet {
            path: path.to_owned(),
            host,
            requests: requests.max(1),
            done: 0,
            sent: false,
            head: Vec::new(),
            body_left: None,
            save,
            failed: false,
        })
    }

    pub(super) fn poll(&mut self, conn: &mut Connection<Chunk>, env: &mut AppEnv) {
        while let Some(c) = conn.recv() {
            env.stats.bytes_in += c.len() as u64;
            c.for_each_slice(|s| self.take(s, env));
        }
        let peer_closed = matches!(conn.state(), State::CloseWait | State::Closed | State::LastAck | State::TimeWait);
        if peer_closed && self.sent && self.done < self.requests {
            if self.body_left == Some(None) {
                self.finish(env); // a body delimited by the close
            } else {
                self.failed = true;
            }
        }
        if !self.failed && !self.sent && self.done < self.requests && conn.state() == State::Established {
            let mut v = Vec::with_capacity(64 + 3 * self.path.len() + self.host.len());
            let keep_alive = self.done + 1 < self.requests;
            http::request_head(&mut v, http::Method::Get, &self.path, &self.host, keep_alive);
            env.stats.bytes_out += v.len() as u64;
            let _ = conn.send(Chunk::from_vec(v));
            self.sent = true;
        }
        let finished = self.done >= self.requests || self.failed || peer_closed;
        if finished && conn.may_send() {
            if self.failed || self.done < self.requests {
                env.stats.http_errors += 1;
            }
            env.stats.clients_done += 1;
            self.done = self.requests;
            conn.close();
        }
    }

    fn take(&mut self, mut s: &[u8], env: &mut AppEnv) {
        while !s.is_empty() && !self.failed && self.sent {
            match self.body_left {
                None => {
                    self.head.extend_from_slice(s);
                    s = &[];
                    match http::parse_response_head(&self.head, MAX_HEAD) {
                        http::RespParse::Incomplete => {}
                        http::RespParse::Error(_) => self.failed = true,
                        http::RespParse::Done { status, content_length, consumed, .. } => {
                            if status >= 400 {
                                env.stats.http_errors += 1;
                            }
                            self.body_left = Some(content_length);
                            let rest = self.head.split_off(consumed);
                            self.head.clear();
                            self.body(&rest, env);
                        }
                    }
                }
                Some(_) => {
                    let rest = std::mem::take(&mut s);
                    self.body(rest, env);
                }
            }
        }
    }

    /// Body bytes (and, past the end of this body, the next response's head).
    fn body(&mut self, s: &[u8], env: &mut AppEnv) {
        let n = match self.body_left {
            Some(Some(left)) => (left as usize).min(s.len()),
            _ => s.len(),
        };
        if let Some(f) = self.save.as_mut() {
            if f.write_all(&s[..n]).is_err() {
                self.failed = true;
            }
        }
        if let Some(Some(left)) = self.body_left.as_mut() {
            *left -= n as u64;
            if *left == 0 {
                self.finish(env);
                if n < s.len() {
                    let rest = s[n..].to_vec();
                    self.take(&rest, env);
                }
            }
        }
    }

    fn finish(&mut self, env: &mut AppEnv) {
        env.stats.http_requests += 1;
        self.done += 1;
        self.body_left = None;
        self.sent = false;
        if let Some(f) = self.save.as_mut() {
            let _ = f.flush();
        }
    }
}
