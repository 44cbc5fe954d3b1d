//! The `http` application's server side: one connection's request/response loop
//! ([`HttpConn`]) over its listener's [`Site`](super::site::Site). Responses go out
//! in request order; a request whose file is not in memory waits for the file-I/O
//! threads ([`Files`](super::files)), and the requests after it wait unparsed.

use super::apps::{close_when_peer_did, AppEnv, Sender, MAX_HEAD};
use super::files::{Delivery, FileBody};
use super::payload::Chunk;
use super::site::{Body, Found, Looked};
use ironpath_http as http;
use ironpath_tcp::{Connection, Payload, State, Time};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;

/// Bytes of responses a connection queues beyond what its send buffer holds; more
/// requests wait.
const MAX_QUEUED: usize = 4 << 20;

/// One HTTP server connection.
pub struct HttpConn {
    site: usize,
    /// Request heads as they arrive (at most [`MAX_HEAD`] bytes held); request bodies
    /// are skipped.
    heads: http::HeadBuf,
    /// Received bytes the head buffer has not taken yet (requests beyond the
    /// pipeline's bound; at most one received payload).
    pending: Option<Chunk>,
    out: Sender,
    /// Each response queued and not yet acknowledged: where it ends in the stream, and
    /// the heap of its own it holds until then (a head or an error body written for it).
    responses: VecDeque<(u64, usize)>,
    /// The sum of that heap.
    responses_heap: usize,
    /// Close after what is queued (no keep-alive, or an error).
    closing: bool,
    /// Requests answered.
    served: u64,
    /// Requests wait unparsed (the pipeline's bound, or held back).
    waiting: bool,
    /// Since when the connection has waited for a request with nothing left to send.
    idle_since: Option<Time>,
    /// When the request head being received began (the connection's opening, for the first).
    head_since: Option<Time>,
    /// When request body bytes last arrived, while some are still to come.
    body_since: Option<Time>,
    /// When a timeout closes the connection unless something happens first.
    pub(super) deadline: Option<Time>,
    /// The request whose file is being opened: answered before any later request is
    /// parsed.
    awaiting: Option<Awaiting>,
    /// Since when the connection has waited for file I/O (an open, or a piece of the
    /// file it sends).
    io_since: Option<Time>,
}

/// A request waiting for its file.
struct Awaiting {
    rel: PathBuf,
    ctype: &'static str,
    keep_alive: bool,
    head_only: bool,
    /// The open's token (`None`: not asked for yet, the queue or the peer's share was
    /// full, or another request is opening the file).
    token: Option<u32>,
    /// What its completion brought.
    result: Option<Result<Arc<FileBody>, http::Status>>,
}

impl HttpConn {
    /// A connection to site `site` (its index in [`AppEnv::sites`]), waiting for
    /// its first request.
    pub(super) fn new(site: usize) -> Self {
        HttpConn {
            site,
            heads: http::HeadBuf::new(MAX_HEAD),
            pending: None,
            out: Sender::default(),
            responses: VecDeque::new(),
            responses_heap: 0,
            closing: false,
            served: 0,
            waiting: false,
            idle_since: None,
            head_since: None,
            body_since: None,
            deadline: None,
            awaiting: None,
            io_since: None,
        }
    }

    /// Heap the connection holds for its peer: request bytes taken and not yet
    /// parsed, and what [`Sender`] keeps until it is acknowledged.
    pub(super) fn heap(&self) -> usize {
        self.heads.capacity()
            + self.pending.as_ref().map_or(0, Payload::truesize)
            + self.responses_heap
            + self.out.owned()
    }

    pub(super) fn poll(&mut self, conn: &mut Connection<Chunk>, env: &mut AppEnv) {
        let now = env.now;
        let acked = self.out.release(conn.send_queue());
        while let Some(&(end, heap)) = self.responses.front() {
            if end > acked {
                break;
            }
            self.responses.pop_front();
            self.responses_heap -= heap;
        }
        if !self.closing && self.deadline.is_some_and(|d| now >= d) {
            if self.io_since.is_some() {
                if self.io_time_out(conn, env) {
                    return;
                }
            } else {
                self.time_out(conn, env);
            }
        }
        self.settle(env, now);
        self.requests(conn, env, now);
        let held_back = env.held_back;
        let files = env.io.as_mut().map(|io| (&mut env.sites[self.site].files, io));
        let io_wait = match self.out.flush(conn, held_back, files) {
            Ok(f) => {
                env.stats.held_back += u64::from(f.held);
                f.io
            }
            Err(()) => {
                // A file could not be read to the length announced: end the connection
                // with a reset, so the peer does not take the short body as complete.
                env.stats.http_errors += 1;
                self.abort(conn);
                return;
            }
        };
        if io_wait || self.awaiting.is_some() {
            self.io_since.get_or_insert(now);
        } else {
            self.io_since = None;
        }
        if self.closing && self.out.is_empty() && conn.may_send() {
            conn.close();
        }
        close_when_peer_did(conn, self.out.is_empty() && !self.waiting && self.awaiting.is_none());
        if self.heads.buffered().is_empty() && self.heads.capacity() > 2 * 1024 {
            // A large burst of requests is over: give back its buffer.
            self.heads.release();
        }
        self.deadline = self.next_deadline(conn, env);
    }

    /// Ends the connection with a reset, dropping what it queued.
    fn abort(&mut self, conn: &mut Connection<Chunk>) {
        self.out.clear();
        self.pending = None;
        self.responses.clear();
        self.responses_heap = 0;
        self.awaiting = None;
        self.closing = true;
        conn.abort();
    }

    /// A file-system request of this connection completed (one it no longer waits for
    /// is dropped).
    pub(super) fn io_done(&mut self, token: u32, d: Delivery) {
        match d {
            Delivery::File(r) => {
                if let Some(a) = self.awaiting.as_mut().filter(|a| a.token == Some(token)) {
                    a.result = Some(r);
                }
            }
            Delivery::Retried(again) => {
                if let Some(a) = self.awaiting.as_mut().filter(|a| a.token == Some(token)) {
                    a.token = Some(again);
                }
            }
            Delivery::Piece(r) => self.out.piece_done(token, r),
            Delivery::Nothing => {}
        }
    }

    /// The request waiting for its file: answered if the file came, asked for again if
    /// it could not be yet.
    fn settle(&mut self, env: &mut AppEnv, now: Time) {
        let Some(a) = self.awaiting.as_mut() else { return };
        if let Some(r) = a.result.take() {
            let (ctype, keep_alive, head_only) = (a.ctype, a.keep_alive, a.head_only);
            self.awaiting = None;
            let found =
                r.map(|body| Found { body: Body::File(body), ctype, head: None }).map_err(|s| files_said(s, env));
            self.answer(found, keep_alive, head_only, env);
            return;
        }
        if a.token.is_some() {
            return;
        }
        let Some(io) = env.io.as_mut() else { return };
        let looked = match env.sites[self.site].files.file(&a.rel, io, now) {
            super::files::Lookup::Found(b) => Ok(Found { body: Body::File(b), ctype: a.ctype, head: None }),
            super::files::Lookup::Failed(s) => Err(files_said(s, env)),
            super::files::Lookup::Wait(t) => {
                a.token = Some(t);
                return;
            }
            super::files::Lookup::Busy => return,
        };
        let (keep_alive, head_only) = (a.keep_alive, a.head_only);
        self.awaiting = None;
        self.answer(looked, keep_alive, head_only, env);
    }

    /// File I/O took longer than `header_timeout`: a request still waiting for its
    /// file is answered 503; a response still waiting for a piece is reset (returns
    /// true). What came meanwhile is not timed out.
    fn io_time_out(&mut self, conn: &mut Connection<Chunk>, env: &mut AppEnv) -> bool {
        self.io_since = None;
        let late = match &self.awaiting {
            Some(a) => a.result.is_none(),
            None => self.out.stalled(),
        };
        if !late {
            return false;
        }
        if let Some(io) = env.io.as_mut() {
            io.stats.timeouts += 1;
        }
        match self.awaiting.take() {
            Some(a) => {
                self.answer(Err(http::Status::SERVICE_UNAVAILABLE), a.keep_alive, a.head_only, env);
                false
            }
            None => {
                env.stats.http_errors += 1;
                self.abort(conn);
                true
            }
        }
    }

    /// Answers the requests received, parsing them only while fewer than
    /// `max_pipeline` responses (one, held back) are queued or unacknowledged: the
    /// others wait in the head buffer and the receive buffer, closing the window.
    fn requests(&mut self, conn: &mut Connection<Chunk>, env: &mut AppEnv, now: Time) {
        self.waiting = false;
        let bound = if env.held_back { 1 } else { env.max_pipeline.max(1) };
        while !self.closing {
            if self.awaiting.is_some() {
                // One request at a time waits for its file; the next ones after it.
                self.waiting = self.pending.is_some() || !self.heads.buffered().is_empty() || conn.recv_queue() > 0;
                if let Some(io) = env.io.as_mut().filter(|_| self.waiting) {
                    io.stats.conn_held += 1;
                }
                break;
            }
            if self.responses.len() >= bound || self.out.bytes >= MAX_QUEUED {
                self.waiting = self.pending.is_some() || !self.heads.buffered().is_empty() || conn.recv_queue() > 0;
                if self.waiting {
                    if self.responses.len() < env.max_pipeline && self.out.bytes < MAX_QUEUED {
                        env.stats.held_back += 1;
                    } else {
                        env.stats.pipeline_held += 1;
                    }
                }
                break;
            }
            if self.heads.skipping() == 0 && !self.heads.buffered().is_empty() {
                match self.heads.next_request() {
                    http::Parse::Done { req, .. } => {
                        self.served += 1;
                        self.body_since = (self.heads.skipping() > 0).then_some(now);
                        // A pipelined request already begun starts its own clock.
                        self.head_since = (!self.heads.buffered().is_empty()).then_some(now);
                        self.respond(&req, env, now);
                        continue;
                    }
                    http::Parse::Error(status) => {
                        let mut v = Vec::new();
                        http::error_response(&mut v, status, false, false);
                        env.stats.http_requests += 1;
                        env.stats.http_errors += 1;
                        env.stats.bytes_out += v.len() as u64;
                        self.queue_response(Chunk::from_vec(v));
                        self.closing = true;
                        self.heads.clear();
                        self.pending = None;
                        break;
                    }
                    http::Parse::Incomplete => {}
                }
            }
            let c = match self.pending.take() {
                Some(c) => c,
                None => match conn.recv() {
                    Some(c) => {
                        env.stats.bytes_in += c.len() as u64;
                        c
                    }
                    None => break,
                },
            };
            let (was_empty, skipping) = (self.heads.buffered().is_empty(), self.heads.skipping() > 0);
            let (mut taken, mut full) = (0, false);
            let heads = &mut self.heads;
            c.for_each_slice(|s| {
                if !full {
                    let n = heads.push(s);
                    taken += n;
                    full = n < s.len();
                }
            });
            if taken < c.len() {
                self.pending = Some(c.slice(taken, c.len() - taken));
            }
            if skipping {
                self.body_since = Some(now);
            }
            if was_empty && !self.heads.buffered().is_empty() {
                // The first request's head has had its time since the connection
                // opened (nginx's client_header_timeout from the accept); a later
                // one's starts with its first byte.
                self.head_since = Some(if self.served == 0 { self.idle_since.unwrap_or(now) } else { now });
            }
            if taken == 0 {
                break; // a full head buffer the parser did not refuse (cannot happen)
            }
        }
    }

    /// The time the connection is closed at unless a request (or more of it) comes.
    fn next_deadline(&mut self, conn: &Connection<Chunk>, env: &AppEnv) -> Option<Time> {
        if self.closing || !matches!(conn.state(), State::Established | State::SynReceived) {
            return None;
        }
        let t = env.timeouts;
        if let Some(since) = self.io_since {
            // File I/O under way: it must end within the head's time.
            self.idle_since = None;
            return t.header.map(|d| since + d);
        }
        if self.waiting {
            // Requests wait for responses on their way: the engine's send timeout
            // watches those.
            self.idle_since = None;
            return None;
        }
        if self.heads.skipping() > 0 {
            self.idle_since = None;
            return t.header.zip(self.body_since).map(|(d, since)| since + d);
        }
        if !self.heads.buffered().is_empty() {
            self.idle_since = None;
            return t.header.zip(self.head_since).map(|(d, since)| since + d);
        }
        if !self.out.is_empty() || conn.send_queue() > 0 {
            // A response is on its way: the engine's send timeout watches it.
            self.idle_since = None;
            return None;
        }
        let since = *self.idle_since.get_or_insert(env.now);
        let limit = if self.served == 0 { t.header } else { t.keepalive };
        limit.map(|d| since + d)
    }

    /// A timeout: a request begun gets a 408; the connection closes, and what it
    /// received and did not read is dropped (its buffers go back at once).
    fn time_out(&mut self, conn: &mut Connection<Chunk>, env: &mut AppEnv) {
        let begun = !self.heads.buffered().is_empty();
        if self.served == 0 || begun || self.heads.skipping() > 0 {
            env.stats.header_timeouts += 1;
        } else {
            env.stats.keepalive_timeouts += 1;
        }
        if begun {
            let mut v = Vec::new();
            http::error_response(&mut v, http::Status::REQUEST_TIMEOUT, false, false);
            env.stats.http_errors += 1;
            env.stats.bytes_out += v.len() as u64;
            self.queue_response(Chunk::from_vec(v));
        }
        self.heads = http::HeadBuf::new(MAX_HEAD);
        self.pending = None;
        self.closing = true;
        conn.discard_recv();
    }

    /// Queues a response written for this connection alone (an error), whole.
    fn queue_response(&mut self, c: Chunk) {
        let heap = c.truesize();
        self.out.push(c);
        self.responses.push_back((self.out.queued_end(), heap));
        self.responses_heap += heap;
    }

    fn respond(&mut self, req: &http::Request, env: &mut AppEnv, now: Time) {
        let head_only = req.method == http::Method::Head;
        env.stats.http_requests += 1;
        let looked = match req.method {
            http::Method::Other => Looked::Failed(http::Status(405)),
            _ => env.sites[self.site].lookup(&req.path, req.keep_alive, env.io.as_mut(), now),
        };
        match looked {
            Looked::Ready(found) => self.answer(Ok(found), req.keep_alive, head_only, env),
            Looked::Failed(status) => self.answer(Err(files_said(status, env)), req.keep_alive, head_only, env),
            Looked::Wait { rel, ctype, token } => {
                self.awaiting =
                    Some(Awaiting { rel, ctype, keep_alive: req.keep_alive, head_only, token, result: None });
            }
        }
    }

    /// Queues the response to a request: `found`'s head and body, or an error.
    fn answer(&mut self, found: Result<Found, http::Status>, keep_alive: bool, head_only: bool, env: &mut AppEnv) {
        let mut heap = 0;
        match found {
            Ok(Found { body, ctype, head }) => {
                let head = match head {
                    Some(h) => {
                        let len = h.len();
                        Chunk::from_bytes(h, 0, len)
                    }
                    None => {
                        let mut v = Vec::with_capacity(160);
                        http::response_head(&mut v, http::Status(200), body.len(), ctype, keep_alive);
                        let c = Chunk::from_vec(v);
                        heap = c.truesize();
                        c
                    }
                };
                env.stats.bytes_out += head.len() as u64;
                if head_only {
                    self.out.push(head);
                } else {
                    env.stats.bytes_out += body.len();
                    match body {
                        Body::Bytes(b) => {
                            let len = b.len();
                            self.out.push(head);
                            self.out.push(Chunk::from_bytes(b, 0, len));
                        }
                        Body::File(f) => self.out.push_file(head, f),
                    }
                }
            }
            Err(status) => {
                env.stats.http_errors += 1;
                let mut v = Vec::with_capacity(160);
                http::error_response(&mut v, status, keep_alive, head_only);
                env.stats.bytes_out += v.len() as u64;
                let c = Chunk::from_vec(v);
                heap = c.truesize();
                self.out.push(c);
            }
        }
        self.responses.push_back((self.out.queued_end(), heap));
        self.responses_heap += heap;
        if !keep_alive {
            self.closing = true;
        }
    }
}

/// `status`, an error a site's lookup answered with (a 503: its file could not be
/// opened for lack of descriptors, counted).
fn files_said(status: http::Status, env: &mut AppEnv) -> http::Status {
    if status == http::Status::SERVICE_UNAVAILABLE {
        env.stats.fd_exhausted += 1;
    }
    status
}
