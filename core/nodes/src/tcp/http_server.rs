//! The `http` application's server side: the [`Site`] (a root directory and
//! in-memory objects; its files, opened beneath the root only, in
//! [`Files`](super::files)) and one connection's request/response loop
//! ([`HttpConn`]).

use super::apps::{close_when_peer_did, AppEnv, Sender, MAX_HEAD};
use super::files::Files;
pub(super) use super::files::FileBody;
use super::payload::Chunk;
use ironpath_http as http;
use ironpath_tcp::{Connection, Payload, State, Time};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bytes of responses a connection queues beyond what its send buffer holds; more
/// requests wait.
const MAX_QUEUED: usize = 4 << 20;

/// A response body: bytes in memory, or a file.
enum Body {
    Bytes(Arc<[u8]>),
    File(Arc<FileBody>),
}

impl Body {
    pub(super) fn len(&self) -> u64 {
        match self {
            Body::Bytes(b) => b.len() as u64,
            Body::File(f) => f.len(),
        }
    }
}

/// An HTTP site: a root directory and in-memory objects; files stay in memory once
/// sent, up to a limit (read again when their size or time changes).
///
/// Files are opened beneath the root only (`openat2` with `RESOLVE_BENEATH` from a
/// descriptor of the root): a symlink may lead elsewhere inside the root, never out
/// of it (an absolute one not at all); names starting with `.` are refused unless
/// `dotfiles` is set.
pub struct Site {
    dotfiles: bool,
    /// Looked up by every request (a fixed key: the requests do not choose the keys).
    objects: HashMap<String, Object, crate::hash::KeyedState>,
    pub(super) files: Files,
}

/// An in-memory object: its body and its two possible 200 response heads (written
/// once: a request for an object copies no head bytes and allocates nothing).
struct Object {
    body: Arc<[u8]>,
    /// The head with `Connection: close`, then with `Connection: keep-alive`.
    heads: [Arc<[u8]>; 2],
}

const OBJECT_TYPE: &str = "application/octet-stream";

/// What [`Site::lookup`] found: the body, its content type, and a ready response head
/// (objects only).
struct Found {
    body: Body,
    ctype: &'static str,
    head: Option<Arc<[u8]>>,
}

impl Site {
    /// A site serving `root` (if any) and `objects` (`/path=size` pairs, comma-separated;
    /// each object is `size` bytes of the pattern, `/empty=0` an empty one).
    pub fn new(root: Option<PathBuf>, objects: &str, dotfiles: bool) -> Result<Site, String> {
        let mut map = HashMap::with_hasher(crate::hash::KeyedState::default());
        for item in objects.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (path, size) = item.split_once('=').ok_or_else(|| format!("object `{item}` is not `/path=size`"))?;
            if !path.starts_with('/') {
                return Err(format!("object path `{path}` must start with `/`"));
            }
            let size: usize =
                size.trim().parse().map_err(|_| format!("object `{item}`: `{size}` is not a size in bytes"))?;
            if size > 1 << 30 {
                return Err(format!("object `{item}` is larger than 1 GiB"));
            }
            let body: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            let head = |keep_alive| {
                let mut v = Vec::new();
                http::response_head(&mut v, http::Status(200), size as u64, OBJECT_TYPE, keep_alive);
                Arc::<[u8]>::from(v)
            };
            map.insert(path.trim().to_owned(), Object { body: body.into(), heads: [head(false), head(true)] });
        }
        Ok(Site { dotfiles, objects: map, files: Files::new(root) })
    }

    /// Keeps at most `cache` bytes of files in memory (larger files are streamed) and
    /// `open_files` descriptors of cached files open (see [`Files`]).
    pub fn set_file_limits(&mut self, cache: u64, open_files: usize) {
        self.files.set_limits(cache, open_files);
    }

    /// The body a GET of `target` answers with, read whole, or the error status (for
    /// tests and fuzzing: the node sends bodies a piece at a time).
    pub fn get(&mut self, target: &str) -> Result<Vec<u8>, http::Status> {
        match self.lookup(target, false)?.body {
            Body::Bytes(b) => Ok(b.to_vec()),
            Body::File(f) => {
                let mut v = Vec::with_capacity(f.len() as usize);
                while (v.len() as u64) < f.len() {
                    let (piece, start) = f.piece_at(v.len() as u64, None).map_err(|_| http::Status(500))?;
                    v.extend_from_slice(&piece[(v.len() as u64 - start) as usize..]);
                }
                Ok(v)
            }
        }
    }

    /// The body for `target` and its content type: an object (with its ready 200 head
    /// for `keep_alive`), or a file under the root.
    fn lookup(&mut self, target: &str, keep_alive: bool) -> Result<Found, http::Status> {
        let bare = target.split(['?', '#']).next().unwrap_or(target);
        if let Some(o) = self.objects.get(bare) {
            let head = Arc::clone(&o.heads[usize::from(keep_alive)]);
            return Ok(Found { body: Body::Bytes(Arc::clone(&o.body)), ctype: OBJECT_TYPE, head: Some(head) });
        }
        // Lexically first (no `..`, no encoded slash, the index of a directory), then
        // opened beneath the root's descriptor.
        let path = http::resolve_path(Path::new("/"), target)?;
        let rel = path.strip_prefix("/").map_err(|_| http::Status(404))?;
        if !self.dotfiles && rel.components().any(|c| c.as_os_str().as_encoded_bytes().starts_with(b".")) {
            return Err(http::Status(404));
        }
        let body = self.files.file(rel)?;
        Ok(Found { body: Body::File(body), ctype: http::content_type(rel), head: None })
    }
}

/// Opening files beneath a directory, never outside it.
pub(crate) mod beneath {
    use rustix::fs::{openat2, Mode, OFlags, ResolveFlags};
    use std::fs::File;
    use std::os::fd::{AsFd, OwnedFd};
    use std::path::{Component, Path};

    /// The directory `dir`, for [`open`].
    pub fn open_dir(dir: &Path) -> std::io::Result<OwnedFd> {
        Ok(rustix::fs::open(dir, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?)
    }

    /// The file `rel` beneath `dir`, read-only. Symlinks are followed while they stay
    /// beneath `dir` (`openat2`'s `RESOLVE_BENEATH`: no `..` above it, no absolute
    /// link, no magic `/proc` link); a kernel without `openat2` gets a walk that
    /// follows no symlink at all. Non-blocking, so that a FIFO cannot stall the lcore.
    pub fn open(dir: &OwnedFd, rel: &Path) -> std::io::Result<File> {
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
        let how = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        match openat2(dir.as_fd(), rel, flags, Mode::empty(), how) {
            Ok(fd) => Ok(File::from(fd)),
            Err(rustix::io::Errno::NOSYS) => walk(dir, rel, flags),
            Err(e) => Err(e.into()),
        }
    }

    /// Component by component with `O_NOFOLLOW`.
    fn walk(dir: &OwnedFd, rel: &Path, flags: OFlags) -> std::io::Result<File> {
        let parts: Vec<_> = rel.components().collect();
        let mut cur: Option<OwnedFd> = None;
        for (i, c) in parts.iter().enumerate() {
            let Component::Normal(name) = c else {
                return Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied));
            };
            let at = cur.as_ref().map_or(dir.as_fd(), |f| f.as_fd());
            let last = i + 1 == parts.len();
            let f = if last { flags } else { OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC };
            cur = Some(rustix::fs::openat(at, *name, f | OFlags::NOFOLLOW, Mode::empty())?);
        }
        cur.map(File::from).ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    }
}


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
            self.time_out(conn, env);
        }
        self.requests(conn, env, now);
        let held_back = env.held_back;
        match self.out.flush(conn, held_back, Some(&mut env.sites[self.site].files.recent)) {
            Ok(held) => env.stats.held_back += u64::from(held),
            Err(_) => {
                // A file could not be read to the length announced: end the connection
                // with a reset, so the peer does not take the short body as complete.
                env.stats.http_errors += 1;
                self.out.clear();
                self.pending = None;
                self.responses.clear();
                self.responses_heap = 0;
                self.closing = true;
                conn.abort();
                return;
            }
        }
        if self.closing && self.out.is_empty() && conn.may_send() {
            conn.close();
        }
        close_when_peer_did(conn, self.out.is_empty() && !self.waiting);
        if self.heads.buffered().is_empty() && self.heads.capacity() > 2 * 1024 {
            // A large burst of requests is over: give back its buffer.
            self.heads.release();
        }
        self.deadline = self.next_deadline(conn, env);
    }

    /// Answers the requests received, parsing them only while fewer than
    /// `max_pipeline` responses (one, held back) are queued or unacknowledged: the
    /// others wait in the head buffer and the receive buffer, closing the window.
    fn requests(&mut self, conn: &mut Connection<Chunk>, env: &mut AppEnv, now: Time) {
        self.waiting = false;
        let bound = if env.held_back { 1 } else { env.max_pipeline.max(1) };
        while !self.closing {
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
                        self.respond(&req, env);
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

    fn respond(&mut self, req: &http::Request, env: &mut AppEnv) {
        let head_only = req.method == http::Method::Head;
        env.stats.http_requests += 1;
        let found = match req.method {
            http::Method::Other => Err(http::Status(405)),
            _ => env.sites[self.site].lookup(&req.path, req.keep_alive),
        };
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
                        http::response_head(&mut v, http::Status(200), body.len(), ctype, req.keep_alive);
                        let c = Chunk::from_vec(v);
                        heap = c.truesize();
                        c
                    }
                };
                env.stats.bytes_out += head.len() as u64;
                self.out.push(head);
                if !head_only {
                    env.stats.bytes_out += body.len();
                    match body {
                        Body::Bytes(b) => {
                            let len = b.len();
                            self.out.push(Chunk::from_bytes(b, 0, len));
                        }
                        Body::File(f) => self.out.push_file(f),
                    }
                }
            }
            Err(status) => {
                env.stats.http_errors += 1;
                if status == http::Status::SERVICE_UNAVAILABLE {
                    env.stats.fd_exhausted += 1;
                }
                let mut v = Vec::with_capacity(160);
                http::error_response(&mut v, status, req.keep_alive, head_only);
                env.stats.bytes_out += v.len() as u64;
                let c = Chunk::from_vec(v);
                heap = c.truesize();
                self.out.push(c);
            }
        }
        self.responses.push_back((self.out.queued_end(), heap));
        self.responses_heap += heap;
        if !req.keep_alive {
            self.closing = true;
        }
    }
}
