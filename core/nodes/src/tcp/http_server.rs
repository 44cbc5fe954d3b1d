//! The `http` application's server side: the [`Site`] (a root directory and
//! in-memory objects, files opened beneath the root only and cached) and one
//! connection's request/response loop ([`HttpConn`]).

use super::apps::{close_when_peer_did, AppEnv, Sender, MAX_HEAD};
use super::payload::Chunk;
use ironpath_http as http;
use ironpath_tcp::{Connection, Payload, State, Time};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

/// Bytes of a file read at a time (and kept, for a cached file).
pub(super) const FILE_PIECE: usize = 256 << 10;

/// A file being served, read from the open file a piece at a time when its bytes
/// are first sent: reading a large file whole at its first request stalled the
/// lcore, and every connection on it, for the whole read (100 MiB: 130-400 ms).
/// Pieces read stay for later requests of a cached file.
pub(super) struct FileBody {
    file: File,
    len: u64,
    pieces: Box<[OnceLock<Arc<[u8]>>]>,
}

impl FileBody {
    /// `file`, of which the first `len` bytes are served.
    fn new(file: File, len: u64) -> FileBody {
        let n = len.div_ceil(FILE_PIECE as u64) as usize;
        FileBody { file, len, pieces: (0..n).map(|_| OnceLock::new()).collect() }
    }

    /// Bytes served.
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// The piece holding byte `off` (< `len`) and the file offset where it starts;
    /// read now if it was not read before.
    pub(super) fn piece_at(&self, off: u64) -> std::io::Result<(Arc<[u8]>, u64)> {
        let i = (off / FILE_PIECE as u64) as usize;
        let start = i as u64 * FILE_PIECE as u64;
        let slot = self.pieces.get(i).ok_or_else(|| std::io::Error::other("offset past the end of the file"))?;
        if let Some(p) = slot.get() {
            return Ok((Arc::clone(p), start));
        }
        let n = (self.len - start).min(FILE_PIECE as u64) as usize;
        let mut buf: Arc<[u8]> = std::iter::repeat_n(0u8, n).collect();
        let dst = Arc::get_mut(&mut buf).ok_or_else(|| std::io::Error::other("piece buffer shared"))?;
        self.file.read_exact_at(dst, start)?;
        let _ = slot.set(Arc::clone(&buf));
        Ok((buf, start))
    }
}

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

/// An HTTP site: a root directory and in-memory objects; files stay open and their
/// bytes in memory once sent (read again when their size or time changes).
///
/// Files are opened beneath the root only (`openat2` with `RESOLVE_BENEATH` from a
/// descriptor of the root): a symlink may lead elsewhere inside the root, never out
/// of it (an absolute one not at all); names starting with `.` are refused unless
/// `dotfiles` is set.
pub struct Site {
    root: Option<PathBuf>,
    /// The root directory, opened at the first request that needs it.
    root_dir: Option<std::os::fd::OwnedFd>,
    dotfiles: bool,
    /// Looked up by every request (a fixed key: the requests do not choose the keys).
    objects: HashMap<String, Object, crate::hash::KeyedState>,
    /// Path -> (size, modification time, contents).
    cache: HashMap<PathBuf, Cached>,
    /// Sum of the sizes of the cached files.
    cached_bytes: usize,
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

/// A cached file: its device and inode, size and modification time when opened, and
/// its body.
type Cached = ((u64, u64), u64, Option<SystemTime>, Arc<FileBody>);

/// Bytes of files a site keeps in memory at most; larger sets are read again.
const CACHE_LIMIT: usize = 1 << 30;

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
        Ok(Site { root, root_dir: None, dotfiles, objects: map, cache: HashMap::new(), cached_bytes: 0 })
    }

    /// The body a GET of `target` answers with, read whole, or the error status (for
    /// tests and fuzzing: the node sends bodies a piece at a time).
    pub fn get(&mut self, target: &str) -> Result<Vec<u8>, http::Status> {
        match self.lookup(target, false)?.body {
            Body::Bytes(b) => Ok(b.to_vec()),
            Body::File(f) => {
                let mut v = Vec::with_capacity(f.len() as usize);
                while (v.len() as u64) < f.len() {
                    let (piece, start) = f.piece_at(v.len() as u64).map_err(|_| http::Status(500))?;
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
        let body = self.file(rel).ok_or(http::Status(404))?;
        Ok(Found { body: Body::File(body), ctype: http::content_type(rel), head: None })
    }

    /// The body of the file at `rel` beneath the root: cached, or opened now (nothing
    /// is read yet). `None` if there is no root, no such regular file, or resolving it
    /// would leave the root.
    fn file(&mut self, rel: &Path) -> Option<Arc<FileBody>> {
        use std::os::unix::fs::MetadataExt;
        if self.root_dir.is_none() {
            self.root_dir = Some(beneath::open_dir(self.root.as_deref()?).ok()?);
        }
        let file = beneath::open(self.root_dir.as_ref()?, rel).ok()?;
        let meta = file.metadata().ok().filter(|m| m.is_file())?;
        let (id, mtime) = ((meta.dev(), meta.ino()), meta.modified().ok());
        if let Some((cid, len, t, b)) = self.cache.get(rel) {
            if *cid == id && *len == meta.len() && *t == mtime {
                return Some(Arc::clone(b));
            }
        }
        let body = Arc::new(FileBody::new(file, meta.len()));
        let old = self.cache.remove(rel).map_or(0, |(_, len, _, _)| len as usize);
        self.cached_bytes -= old;
        if self.cached_bytes + meta.len() as usize <= CACHE_LIMIT {
            self.cached_bytes += meta.len() as usize;
            self.cache.insert(rel.to_owned(), (id, meta.len(), mtime, Arc::clone(&body)));
        }
        Some(body)
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
    /// Bytes of requests not yet answered.
    head: Vec<u8>,
    /// Request body bytes still to skip.
    skip: usize,
    out: Sender,
    /// Close after what is queued (no keep-alive, or an error).
    closing: bool,
    /// Requests answered.
    served: u64,
    /// Since when the connection has waited for a request with nothing left to send.
    idle_since: Option<Time>,
    /// When the request head in `head` began (the connection's opening, for the first).
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
            head: Vec::new(),
            skip: 0,
            out: Sender::default(),
            closing: false,
            served: 0,
            idle_since: None,
            head_since: None,
            body_since: None,
            deadline: None,
        }
    }

    pub(super) fn poll(&mut self, conn: &mut Connection<Chunk>, env: &mut AppEnv) {
        let now = env.now;
        if !self.closing && self.deadline.is_some_and(|d| now >= d) {
            self.time_out(conn, env);
        }
        // Take new bytes only while answers are not piling up (pipelining backpressure).
        while !self.closing && self.out.bytes < 4 << 20 {
            let Some(c) = conn.recv() else { break };
            env.stats.bytes_in += c.len() as u64;
            let (was_empty, skipping) = (self.head.is_empty(), self.skip > 0);
            c.for_each_slice(|s| {
                let skip = self.skip.min(s.len());
                self.skip -= skip;
                self.head.extend_from_slice(&s[skip..]);
            });
            if skipping {
                self.body_since = Some(now);
            }
            if was_empty && !self.head.is_empty() {
                // The first request's head has had its time since the connection
                // opened (nginx's client_header_timeout from the accept); a later
                // one's starts with its first byte.
                self.head_since = Some(if self.served == 0 { self.idle_since.unwrap_or(now) } else { now });
            }
            self.answer(env, now);
        }
        if self.out.flush(conn).is_err() {
            // A file could not be read to the length announced: end the connection
            // with a reset, so the peer does not take the short body as complete.
            env.stats.http_errors += 1;
            self.out.clear();
            self.closing = true;
            conn.abort();
            return;
        }
        if self.closing && self.out.is_empty() && conn.may_send() {
            conn.close();
        }
        close_when_peer_did(conn, self.out.is_empty());
        self.deadline = self.next_deadline(conn, env);
    }

    /// The time the connection is closed at unless a request (or more of it) comes.
    fn next_deadline(&mut self, conn: &Connection<Chunk>, env: &AppEnv) -> Option<Time> {
        if self.closing || !matches!(conn.state(), State::Established | State::SynReceived) {
            return None;
        }
        let t = env.timeouts;
        if self.skip > 0 {
            self.idle_since = None;
            return t.header.zip(self.body_since).map(|(d, since)| since + d);
        }
        if !self.head.is_empty() {
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
        if self.served == 0 || !self.head.is_empty() || self.skip > 0 {
            env.stats.header_timeouts += 1;
        } else {
            env.stats.keepalive_timeouts += 1;
        }
        if !self.head.is_empty() {
            let mut v = Vec::new();
            http::error_response(&mut v, http::Status::REQUEST_TIMEOUT, false, false);
            env.stats.http_errors += 1;
            env.stats.bytes_out += v.len() as u64;
            self.out.push(Chunk::from_vec(v));
        }
        self.head = Vec::new();
        self.skip = 0;
        self.closing = true;
        conn.discard_recv();
    }

    /// Answers every complete request in `head`.
    fn answer(&mut self, env: &mut AppEnv, now: Time) {
        while !self.closing && self.skip == 0 && !self.head.is_empty() {
            match http::parse_request(&self.head, MAX_HEAD) {
                http::Parse::Incomplete => break,
                http::Parse::Error(status) => {
                    let mut v = Vec::new();
                    http::error_response(&mut v, status, false, false);
                    env.stats.http_requests += 1;
                    env.stats.http_errors += 1;
                    env.stats.bytes_out += v.len() as u64;
                    self.out.push(Chunk::from_vec(v));
                    self.closing = true;
                    self.head.clear();
                }
                http::Parse::Done { req, consumed } => {
                    let body_in_head = req.content_length.min(self.head.len() - consumed);
                    self.skip = req.content_length - body_in_head;
                    self.head.drain(..consumed + body_in_head);
                    self.served += 1;
                    self.body_since = (self.skip > 0).then_some(now);
                    // A pipelined request already begun starts its own clock.
                    self.head_since = (!self.head.is_empty()).then_some(now);
                    self.respond(&req, env);
                }
            }
        }
    }

    fn respond(&mut self, req: &http::Request, env: &mut AppEnv) {
        let head_only = req.method == http::Method::Head;
        env.stats.http_requests += 1;
        let found = match req.method {
            http::Method::Other => Err(http::Status(405)),
            _ => env.sites[self.site].lookup(&req.path, req.keep_alive),
        };
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
                        Chunk::from_vec(v)
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
                let mut v = Vec::with_capacity(160);
                http::error_response(&mut v, status, req.keep_alive, head_only);
                env.stats.bytes_out += v.len() as u64;
                self.out.push(Chunk::from_vec(v));
            }
        }
        if !req.keep_alive {
            self.closing = true;
        }
    }
}
