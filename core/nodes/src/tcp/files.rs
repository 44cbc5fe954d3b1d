//! The files a site serves, as the lcore keeps them: opened beneath its root only,
//! read a piece at a time as the send buffer takes them, and either cached (the
//! pieces stay in memory for later requests, up to `file_cache` bytes a site) or
//! streamed (a file that does not fit: each piece is freed once the peer acknowledged
//! it; requests at about the same place of the file share the last pieces read).
//!
//! Every file-system call (open, stat, read, close) runs on the node's file-I/O
//! threads ([`io_threads`](super::io_threads)); the lcore asks for it and answers the
//! request once the completion is back, at a later poll. A request waits meanwhile (its
//! connection has nothing to send; the others go on). A cached file is served from
//! memory with no call at all: a thread checks at most every `file_check` that its
//! name still leads to the same file, while the cached copy is served, and later
//! requests read it again once it does not.
//!
//! Descriptors are a budget of their own: a cached file keeps its descriptor only
//! while some of it is not in memory, at most `open_files` of them (least recently
//! used closed first, opened again if a missing piece is asked for); streamed files
//! hold at most as many more. A file that cannot be opened for lack of descriptors is
//! a 503, not a 404.

use super::io_threads::{Closer, Done, Fail, FileIo, Handle, Identity, Op, Outcome, Root};
use ironpath_http as http;
use ironpath_tcp::Time;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

/// Bytes of a file read at a time (and kept, for a cached file).
pub(super) const FILE_PIECE: usize = 256 << 10;

/// Heap bytes a piece costs beyond its contents (the `Arc` counts, the allocator).
const PIECE_OVERHEAD: usize = 32;

/// A cached body's pieces, each set once read.
type Kept = Box<[OnceLock<Arc<[u8]>>]>;

/// A recently read piece: (body id, piece index, bytes).
type RecentPiece = (u64, u64, Arc<[u8]>);

/// A site's descriptors: where they are closed, and how many it holds (opens under way
/// included).
#[derive(Clone)]
pub(super) struct Descriptors {
    closer: Closer,
    count: Arc<AtomicUsize>,
}

impl Descriptors {
    fn close(&self, h: Handle) {
        self.closer.close(h);
        self.count.fetch_sub(1, Ordering::Relaxed);
    }

    fn held(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }
}

/// A file being served, read a piece at a time when its bytes are first sent (a large
/// file read whole at its first request held everything behind it for the read).
///
/// Shared by the responses that send it (an `Arc`), so what changes is atomic; only
/// the lcore ever touches it (the threads see handles and buffers), hence `Relaxed`.
pub(super) struct FileBody {
    /// Unique in its site (keys the pieces being read and the recent pieces).
    id: u64,
    /// The threads' handle of its descriptor (0: none).
    handle: AtomicU64,
    ident: Identity,
    /// A cached body's pieces, each kept once read; `None` for a streamed body.
    kept: Option<Kept>,
    /// Pieces of a cached body not read yet.
    unread: AtomicUsize,
    fds: Descriptors,
}

impl FileBody {
    fn new(id: u64, handle: Handle, ident: Identity, cached: bool, fds: Descriptors) -> FileBody {
        let n = ident.len.div_ceil(FILE_PIECE as u64) as usize;
        let kept = cached.then(|| (0..n).map(|_| OnceLock::new()).collect());
        let unread = AtomicUsize::new(if cached { n } else { 0 });
        FileBody { id, handle: AtomicU64::new(handle), ident, kept, unread, fds }
    }

    /// Bytes served.
    pub(super) fn len(&self) -> u64 {
        self.ident.len
    }

    /// Whether the body keeps its pieces (a cached file): they cost the connections
    /// that send them nothing of their own.
    pub(super) fn is_cached(&self) -> bool {
        self.kept.is_some()
    }

    /// A cached body whose every piece is in memory.
    fn complete(&self) -> bool {
        self.kept.is_some() && self.unread.load(Ordering::Relaxed) == 0
    }

    fn handle(&self) -> Option<Handle> {
        Some(self.handle.load(Ordering::Relaxed)).filter(|&h| h != 0)
    }

    fn has_file(&self) -> bool {
        self.handle().is_some()
    }

    /// Closes its descriptor, if it has one.
    fn close(&self) {
        let h = self.handle.swap(0, Ordering::Relaxed);
        if h != 0 {
            self.fds.close(h);
        }
    }

    /// The start and length of the piece holding byte `off` (< `len`).
    pub(super) fn piece_span(&self, off: u64) -> (u64, usize) {
        let start = off / FILE_PIECE as u64 * FILE_PIECE as u64;
        (start, (self.ident.len.saturating_sub(start)).min(FILE_PIECE as u64) as usize)
    }
}

impl Drop for FileBody {
    fn drop(&mut self) {
        self.close();
    }
}

/// Heap a streamed piece of `len` bytes costs the connection that read it.
pub(super) fn piece_cost(len: usize) -> usize {
    len + PIECE_OVERHEAD
}

/// The last pieces read of streamed files, so that requests at about the same place
/// of a file read it once (each stays until pushed out by a later one: at most
/// `RECENT` pieces a site beyond what the send buffers hold).
#[derive(Default)]
pub(super) struct Recent {
    slots: [Option<RecentPiece>; RECENT],
    next: usize,
}

const RECENT: usize = 4;

impl Recent {
    fn get(&self, body: u64, piece: u64) -> Option<Arc<[u8]>> {
        self.slots.iter().flatten().find(|(b, p, _)| *b == body && *p == piece).map(|(_, _, d)| Arc::clone(d))
    }

    fn put(&mut self, body: u64, piece: u64, data: Arc<[u8]>) {
        self.slots[self.next] = Some((body, piece, data));
        self.next = (self.next + 1) % RECENT;
    }
}

/// The process's limit on open descriptors (RLIMIT_NOFILE, soft), after raising it to
/// the hard limit: descriptors are the files a site keeps open, and a limit of 1024
/// (a common default) is reached by a web root of a thousand files. Returns the limit.
pub fn raise_descriptor_limit() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let lim = getrlimit(Resource::Nofile);
    if lim.current.is_some() && lim.current != lim.maximum {
        let want = Rlimit { current: lim.maximum, maximum: lim.maximum };
        match setrlimit(Resource::Nofile, want) {
            Ok(()) => log::info!(
                "open descriptor limit raised from {} to {}",
                lim.current.unwrap_or(u64::MAX),
                lim.maximum.map_or("unlimited".to_string(), |m| m.to_string())
            ),
            Err(e) => log::warn!("cannot raise the open descriptor limit: {e}"),
        }
    }
    descriptor_limit()
}

/// The process's soft limit on open descriptors.
fn descriptor_limit() -> u64 {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// Who waits for a request: a connection (its slot, its unique id) and its peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Owner {
    pub(super) slot: u32,
    pub(super) id: u64,
    pub(super) peer: u32,
}

/// What a request is for, kept on the lcore until its completion.
pub(super) enum Pending {
    /// A file's open (`retried`: the second, after closing what could be closed for
    /// lack of descriptors).
    Open { retried: bool },
    /// The check of a cached file.
    Stat,
    /// Piece `piece` of `body` (held here, so its descriptor stays open until then).
    Read { body: Arc<FileBody>, piece: u64 },
}

/// A request's ticket: its site, what it is for, who waits.
pub(super) struct Ticket {
    pub(super) site: usize,
    pub(super) what: Pending,
    pub(super) owner: Option<Owner>,
}

/// What a completion brings the connection that waits for it.
pub(super) enum Delivery {
    /// Its request's file, or the status to answer with.
    File(Result<Arc<FileBody>, http::Status>),
    /// Its request's open is tried again under a new token.
    Retried(u32),
    /// The piece it asked for, from the file offset given, or a failed read.
    Piece(Result<(Arc<[u8]>, u64), ()>),
    /// Nothing (a check).
    Nothing,
}

/// What the applications count of file I/O (added to the node's counters).
#[derive(Debug, Default, Clone, Copy)]
pub struct IoStats {
    /// Requests handed to the threads.
    pub submitted: u64,
    /// Times a request waited: the node's queue was full.
    pub full: u64,
    /// Times a request waited: its peer had its share outstanding.
    pub peer_full: u64,
    /// Times a connection left pipelined requests unparsed behind one waiting for I/O.
    pub conn_held: u64,
    /// Requests answered 503, or responses reset, for I/O slower than header_timeout.
    pub timeouts: u64,
}

/// The node's file I/O as its applications use it: the threads, and the connection
/// being polled (whose peer is charged for what it asks).
pub struct Io {
    pub(super) exec: FileIo<Ticket>,
    /// The connection being polled.
    pub(super) owner: Option<Owner>,
    /// Requests its peer may still start (its share of the queue, less what it has
    /// outstanding).
    pub(super) peer_room: u32,
    /// Requests it started (the node charges its peer after the poll).
    pub(super) started: u32,
    /// It waits for I/O progress it did not ask for (a full queue, a piece or a file
    /// another connection is reading or opening): poll it again at the next completion.
    pub(super) blocked: bool,
    pub(super) stats: IoStats,
}

impl Io {
    pub(super) fn new(exec: FileIo<Ticket>) -> Io {
        Io { exec, owner: None, peer_room: u32::MAX, started: 0, blocked: false, stats: IoStats::default() }
    }

    /// Whether the connection being polled may submit a request now (counts why not,
    /// and marks it to be polled again at the next completion).
    fn may_submit(&mut self) -> bool {
        if self.owner.is_some() && self.peer_room == 0 {
            self.stats.peer_full += 1;
        } else if self.exec.room() == 0 {
            self.stats.full += 1;
        } else {
            return true;
        }
        self.blocked = true;
        false
    }

    /// Submits `op` for the connection being polled (charged to its peer).
    fn submit(&mut self, site: usize, op: Op, what: Pending) -> Option<u32> {
        let owner = self.owner;
        let t = self.submit_for(site, op, what, owner)?;
        if owner.is_some() {
            self.peer_room -= 1;
            self.started += 1;
        }
        Some(t)
    }

    /// Submits `op` for `owner`, charging nobody (a check, or a retry that keeps the
    /// charge of the request it repeats).
    fn submit_for(&mut self, site: usize, op: Op, what: Pending, owner: Option<Owner>) -> Option<u32> {
        match self.exec.submit(op, Ticket { site, what, owner }) {
            Ok(t) => {
                self.stats.submitted += 1;
                Some(t)
            }
            Err(_) => {
                self.stats.full += 1;
                self.blocked = true;
                None
            }
        }
    }
}

/// What [`Files::file`] found.
pub(super) enum Lookup {
    /// The body, to be sent now.
    Found(Arc<FileBody>),
    /// An open was asked for under this token: its completion brings the answer.
    Wait(u32),
    /// Nothing could be asked for now (the queue, the peer's share, another open of
    /// the same file): ask again after the next completion.
    Busy,
    Failed(http::Status),
}

/// What [`Files::piece`] found.
pub(super) enum PieceAt {
    /// The piece and the file offset it starts at.
    Ready(Arc<[u8]>, u64),
    /// A read was asked for under this token.
    Wait(u32),
    /// Nothing could be asked for now (see [`Lookup::Busy`]).
    Busy,
    /// The body cannot be read (its descriptor is gone).
    Failed,
}

/// A cached file: its body, when it was last known to be the file its name leads to,
/// and whether a check is under way.
struct Cached {
    body: Arc<FileBody>,
    checked: Time,
    checking: bool,
}

/// A site's files: the cache, the streamed files, the requests under way.
pub(super) struct Files {
    root: Option<Arc<Root>>,
    /// The site's index in the node (named in its requests' tickets).
    site: usize,
    /// Set once the site has file-I/O threads to ask.
    fds: Option<Descriptors>,
    /// Cached files by path.
    cache: HashMap<PathBuf, Cached>,
    /// Sum of the sizes of the cached files.
    cached_bytes: u64,
    cache_limit: u64,
    /// Cached files that hold a descriptor, least recently used first.
    open: VecDeque<PathBuf>,
    max_open: usize,
    /// Streamed files being sent, by path, and when each was opened: later requests
    /// within `check_every` share their descriptor.
    streams: HashMap<PathBuf, (Weak<FileBody>, Time)>,
    /// Opens under way, by path (a second request for the file waits for the first).
    opening: HashMap<PathBuf, u32>,
    /// Piece reads under way, by body and piece (a second reader waits for the first).
    reading: HashMap<(u64, u64), u32>,
    /// The last pieces of streamed files read.
    recent: Recent,
    next_id: u64,
    /// How long a cached file is served without checking its name again.
    check_every: Duration,
    /// Descriptors closed to stay within `max_open` (the node counts them).
    pub(super) fds_closed: u64,
    /// Files opened to be streamed, not cached (the node counts them).
    pub(super) streamed: u64,
}

/// Bytes of files a site keeps in memory unless told otherwise.
const CACHE_LIMIT: u64 = 1 << 30;
/// Descriptors of cached files a site keeps open unless told otherwise.
const OPEN_FILES: usize = 4096;

impl Files {
    pub(super) fn new(root: Option<PathBuf>) -> Files {
        let mut f = Files {
            root: root.map(Root::new),
            site: 0,
            fds: None,
            cache: HashMap::new(),
            cached_bytes: 0,
            cache_limit: CACHE_LIMIT,
            open: VecDeque::new(),
            max_open: 1,
            streams: HashMap::new(),
            opening: HashMap::new(),
            reading: HashMap::new(),
            recent: Recent::default(),
            next_id: 0,
            check_every: Duration::from_secs(1),
            fds_closed: 0,
            streamed: 0,
        };
        f.set_limits(CACHE_LIMIT, OPEN_FILES);
        f
    }

    /// At most `cache` bytes of files in memory and `open_files` descriptors of cached
    /// files (never more than a quarter of the process's descriptor limit).
    pub(super) fn set_limits(&mut self, cache: u64, open_files: usize) {
        self.cache_limit = cache;
        let quarter = usize::try_from(descriptor_limit() / 4).unwrap_or(usize::MAX);
        self.max_open = open_files.min(quarter).max(1);
    }

    /// Whether the site serves a directory.
    pub(super) fn has_root(&self) -> bool {
        self.root.is_some()
    }

    /// Descriptors the site may hold: `max_open` cached, as many streamed.
    pub(super) fn max_descriptors(&self) -> usize {
        2 * self.max_open
    }

    /// The site is `site` of a node whose threads close through `closer`; a cached
    /// file is checked at most every `check_every`.
    pub(super) fn attach(&mut self, site: usize, closer: Closer, check_every: Duration) {
        self.site = site;
        self.fds = Some(Descriptors { closer, count: Arc::new(AtomicUsize::new(0)) });
        self.check_every = check_every;
    }

    /// The body of the regular file at `rel` beneath the root: cached (no I/O), or
    /// an open asked for. 404 if there is no root, no such regular file, or resolving
    /// it would leave the root; 503 if it cannot be opened for lack of descriptors.
    pub(super) fn file(&mut self, rel: &Path, io: &mut Io, now: Time) -> Lookup {
        let not_found = Lookup::Failed(http::Status::NOT_FOUND);
        let Some(root) = &self.root else { return not_found };
        if let Some(c) = self.cache.get_mut(rel) {
            if !c.checking && now >= c.checked + self.check_every && io.exec.room() > 0 {
                // Served meanwhile: a check changes only what later requests get (and
                // with the queue full it waits for a later request).
                let op = Op::Stat { root: Arc::clone(root), rel: rel.to_owned() };
                let blocked = io.blocked;
                c.checking = io.submit_for(self.site, op, Pending::Stat, None).is_some();
                io.blocked = blocked;
            }
            let body = Arc::clone(&c.body);
            return self.cached(rel, body, io);
        }
        if let Some((w, opened)) = self.streams.get(rel) {
            if now < *opened + self.check_every {
                if let Some(b) = w.upgrade() {
                    return Lookup::Found(b);
                }
            }
        }
        self.open(rel, io)
    }

    /// A cached `body` (of `rel`) for a request: its descriptor closed if all of it is
    /// in memory and no response reads it, opened again if a piece is missing and the
    /// descriptor was closed.
    fn cached(&mut self, rel: &Path, body: Arc<FileBody>, io: &mut Io) -> Lookup {
        if body.complete() {
            // Held by the cache and here only: no response reads through it.
            if body.has_file() && Arc::strong_count(&body) == 2 {
                body.close();
                self.unlist(rel);
            }
            return Lookup::Found(body);
        }
        if body.has_file() {
            self.touch(rel);
            return Lookup::Found(body);
        }
        // Some pieces are missing and its descriptor was closed: open it again (the
        // completion checks that it is the same file).
        self.open(rel, io)
    }

    /// Asks for `rel` to be opened, first making room within the descriptor budget.
    fn open(&mut self, rel: &Path, io: &mut Io) -> Lookup {
        if self.opening.contains_key(rel) {
            io.blocked = true;
            return Lookup::Busy;
        }
        let (Some(root), Some(fds)) = (&self.root, &self.fds) else {
            return Lookup::Failed(http::Status::NOT_FOUND);
        };
        let (root, fds) = (Arc::clone(root), fds.clone());
        self.make_room(self.max_open.saturating_sub(1));
        if fds.held() >= self.max_descriptors() {
            return Lookup::Failed(http::Status::SERVICE_UNAVAILABLE);
        }
        if !io.may_submit() {
            return Lookup::Busy;
        }
        let handle = io.exec.next_handle();
        let op = Op::Open { root, rel: rel.to_owned(), handle };
        match io.submit(self.site, op, Pending::Open { retried: false }) {
            Some(t) => {
                fds.count.fetch_add(1, Ordering::Relaxed);
                self.opening.insert(rel.to_owned(), t);
                Lookup::Wait(t)
            }
            None => Lookup::Busy,
        }
    }

    /// The piece of `body` holding byte `off` (< its length): kept, among the recent
    /// pieces of streamed files, or a read asked for.
    pub(super) fn piece(&mut self, body: &Arc<FileBody>, off: u64, io: &mut Io) -> PieceAt {
        if off >= body.len() {
            return PieceAt::Failed;
        }
        let i = off / FILE_PIECE as u64;
        let (start, len) = body.piece_span(off);
        match &body.kept {
            Some(kept) => {
                if let Some(p) = kept.get(i as usize).and_then(OnceLock::get) {
                    return PieceAt::Ready(Arc::clone(p), start);
                }
            }
            None => {
                if let Some(p) = self.recent.get(body.id, i) {
                    return PieceAt::Ready(p, start);
                }
            }
        }
        if self.reading.contains_key(&(body.id, i)) {
            io.blocked = true;
            return PieceAt::Busy;
        }
        // A body being sent keeps its descriptor until it is read whole.
        let Some(handle) = body.handle() else { return PieceAt::Failed };
        if !io.may_submit() {
            return PieceAt::Busy;
        }
        let buf: Arc<[u8]> = std::iter::repeat_n(0u8, len).collect();
        let op = Op::Read { handle, off: start, buf };
        match io.submit(self.site, op, Pending::Read { body: Arc::clone(body), piece: i }) {
            Some(t) => {
                self.reading.insert((body.id, i), t);
                PieceAt::Wait(t)
            }
            None => PieceAt::Busy,
        }
    }

    /// Takes in a completion of this site's: the cache, the streams and the pieces
    /// are brought up to date, and what its owner gets is returned.
    pub(super) fn complete(
        &mut self,
        done: Done,
        what: Pending,
        owner: Option<Owner>,
        io: &mut Io,
        now: Time,
    ) -> Delivery {
        let Done { token, op, outcome } = done;
        match (what, op) {
            (Pending::Open { retried }, Op::Open { root, rel, handle }) => {
                if self.opening.get(&rel) == Some(&token) {
                    self.opening.remove(&rel);
                }
                let Some(fds) = self.fds.clone() else { return Delivery::Nothing };
                let fail = match outcome {
                    Outcome::File(ident) => return Delivery::File(Ok(self.opened(rel, handle, ident, fds, now))),
                    Outcome::Failed(f) => f,
                    Outcome::Read => Fail::NotFound,
                };
                fds.count.fetch_sub(1, Ordering::Relaxed);
                match fail {
                    Fail::NoDescriptors if !retried => {
                        // Out of descriptors: close every cached one no response reads,
                        // and try once more (the threads close them before the open).
                        self.make_room(0);
                        let op = Op::Open { root, rel: rel.clone(), handle: io.exec.next_handle() };
                        match io.submit_for(self.site, op, Pending::Open { retried: true }, owner) {
                            Some(t) => {
                                fds.count.fetch_add(1, Ordering::Relaxed);
                                self.opening.insert(rel, t);
                                Delivery::Retried(t)
                            }
                            None => Delivery::File(Err(http::Status::SERVICE_UNAVAILABLE)),
                        }
                    }
                    Fail::NoDescriptors => Delivery::File(Err(http::Status::SERVICE_UNAVAILABLE)),
                    Fail::NotFound | Fail::Read => {
                        self.forget(&rel);
                        Delivery::File(Err(http::Status::NOT_FOUND))
                    }
                }
            }
            (Pending::Stat, Op::Stat { rel, .. }) => {
                if let Some(c) = self.cache.get_mut(&rel) {
                    c.checking = false;
                    c.checked = now;
                    if outcome != Outcome::File(c.body.ident) {
                        // Changed or gone: later requests open it again.
                        self.forget(&rel);
                    }
                }
                Delivery::Nothing
            }
            (Pending::Read { body, piece }, Op::Read { buf, .. }) => {
                if self.reading.get(&(body.id, piece)) == Some(&token) {
                    self.reading.remove(&(body.id, piece));
                }
                if outcome != Outcome::Read {
                    return Delivery::Piece(Err(()));
                }
                match &body.kept {
                    Some(kept) => {
                        let set = kept.get(piece as usize).is_some_and(|s| s.set(Arc::clone(&buf)).is_ok());
                        if set {
                            body.unread.fetch_sub(1, Ordering::Relaxed);
                        }
                    }
                    None => self.recent.put(body.id, piece, Arc::clone(&buf)),
                }
                Delivery::Piece(Ok((buf, piece * FILE_PIECE as u64)))
            }
            _ => Delivery::Nothing,
        }
    }

    /// `rel` was opened as `handle` and is `ident`: the cached body if it is the same
    /// file (which gets the descriptor if it has none), else a new body, cached if it
    /// fits, streamed if not.
    fn opened(&mut self, rel: PathBuf, handle: Handle, ident: Identity, fds: Descriptors, now: Time) -> Arc<FileBody> {
        if let Some(c) = self.cache.get_mut(&rel) {
            if c.body.ident == ident {
                c.checked = now;
                let body = Arc::clone(&c.body);
                if body.has_file() || body.complete() {
                    fds.close(handle);
                } else {
                    body.handle.store(handle, Ordering::Relaxed);
                    self.open.push_back(rel);
                    self.make_room(self.max_open);
                }
                return body;
            }
            self.forget(&rel);
        }
        self.next_id += 1;
        if self.cached_bytes + ident.len <= self.cache_limit {
            let body = Arc::new(FileBody::new(self.next_id, handle, ident, true, fds));
            if body.complete() {
                body.close(); // empty: nothing to read
            }
            self.cached_bytes += ident.len;
            let has_file = body.has_file();
            self.cache.insert(rel.clone(), Cached { body: Arc::clone(&body), checked: now, checking: false });
            if has_file {
                self.open.push_back(rel);
                self.make_room(self.max_open);
            }
            return body;
        }
        let body = Arc::new(FileBody::new(self.next_id, handle, ident, false, fds));
        self.streamed += 1;
        if self.streams.len() >= 64 {
            self.streams.retain(|_, (w, _)| w.strong_count() > 0);
        }
        self.streams.insert(rel, (Arc::downgrade(&body), now));
        body
    }

    /// Closes descriptors of cached files no response reads, least recently used
    /// first, until at most `keep` remain (or none can be closed).
    fn make_room(&mut self, keep: usize) {
        let mut i = 0;
        while self.open.len() > keep && i < self.open.len() {
            let Some(path) = self.open.get(i) else { break };
            let body = match self.cache.get(path) {
                Some(c) if c.body.has_file() => &c.body,
                _ => {
                    // Gone from the cache, or closed since: not open any more.
                    self.open.remove(i);
                    continue;
                }
            };
            if Arc::strong_count(body) > 1 {
                i += 1; // a response or a read holds it: its descriptor stays
                continue;
            }
            if !body.complete() {
                self.fds_closed += 1;
            }
            body.close();
            self.open.remove(i);
        }
    }

    /// `rel` was used: last in line for closing.
    fn touch(&mut self, rel: &Path) {
        if self.open.back().is_some_and(|p| p == rel) {
            return;
        }
        if let Some(i) = self.open.iter().position(|p| p == rel) {
            if let Some(p) = self.open.remove(i) {
                self.open.push_back(p);
            }
        }
    }

    fn unlist(&mut self, rel: &Path) {
        if let Some(i) = self.open.iter().position(|p| p == rel) {
            self.open.remove(i);
        }
    }

    /// Drops the cached `rel` (it changed); responses sending it keep their copy.
    fn forget(&mut self, rel: &Path) {
        if let Some(c) = self.cache.remove(rel) {
            self.cached_bytes -= c.body.len();
            self.unlist(rel);
        }
    }

    /// Descriptors the site holds (opens under way included).
    #[cfg(test)]
    pub(super) fn descriptors(&self) -> usize {
        self.fds.as_ref().map_or(0, Descriptors::held)
    }

    /// Descriptors the cache holds.
    #[cfg(test)]
    pub(super) fn open_descriptors(&self) -> usize {
        self.cache.values().filter(|c| c.body.has_file()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(tag: &str, files: &[(&str, usize)]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ironpath-files-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, size) in files {
            std::fs::write(dir.join(name), (0..*size).map(|i| (i % 251) as u8).collect::<Vec<u8>>()).unwrap();
        }
        dir
    }

    /// A site's files with inline file I/O, driven one completion round at a time.
    struct Rig {
        files: Files,
        io: Io,
        now: Time,
    }

    impl Rig {
        fn new(dir: &Path, cache: u64, open_files: usize, check: Duration) -> Rig {
            let mut files = Files::new(Some(dir.to_owned()));
            files.set_limits(cache, open_files);
            let exec = FileIo::new(0, 8, 256).unwrap();
            files.attach(0, exec.closer(), check);
            Rig { files, io: Io::new(exec), now: Time::from_millis(1) }
        }

        /// Runs what was asked for; the deliveries by token.
        fn settle(&mut self) -> Vec<(u32, Delivery)> {
            self.io.exec.run_inline();
            let mut out = Vec::new();
            while let Some((done, t)) = self.io.exec.poll() {
                let token = done.token;
                out.push((token, self.files.complete(done, t.what, t.owner, &mut self.io, self.now)));
            }
            out
        }

        fn file(&mut self, name: &str) -> Result<Arc<FileBody>, http::Status> {
            match self.files.file(Path::new(name), &mut self.io, self.now) {
                Lookup::Found(b) => Ok(b),
                Lookup::Failed(s) => Err(s),
                Lookup::Busy => panic!("{name}: busy"),
                Lookup::Wait(t) => {
                    let mut got = self.settle();
                    let i = got.iter().position(|(k, _)| *k == t).expect("its completion");
                    match got.swap_remove(i).1 {
                        Delivery::File(r) => r,
                        _ => panic!("a file"),
                    }
                }
            }
        }

        fn read_all(&mut self, b: &Arc<FileBody>) -> Vec<u8> {
            let mut v = Vec::new();
            while (v.len() as u64) < b.len() {
                let off = v.len() as u64;
                let (p, start) = match self.files.piece(b, off, &mut self.io) {
                    PieceAt::Ready(p, s) => (p, s),
                    PieceAt::Wait(t) => match self.settle().into_iter().find(|(k, _)| *k == t) {
                        Some((_, Delivery::Piece(Ok(p)))) => p,
                        _ => panic!("read failed"),
                    },
                    _ => panic!("no read"),
                };
                v.extend_from_slice(&p[(off - start) as usize..]);
            }
            v
        }
    }

    #[test]
    fn a_file_above_the_cache_limit_is_streamed_and_shares_its_descriptor() {
        let dir = root("stream", &[("big", 3 * FILE_PIECE + 10), ("small", 100)]);
        let mut r = Rig::new(&dir, FILE_PIECE as u64, 16, Duration::from_secs(1));
        let big = r.file("big").unwrap();
        assert!(!big.is_cached());
        let again = r.file("big").unwrap();
        assert!(Arc::ptr_eq(&big, &again), "a second request shares the streamed body");
        let body = r.read_all(&big);
        assert_eq!(body.len(), 3 * FILE_PIECE + 10);
        assert!(body.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        let small = r.file("small").unwrap();
        assert!(small.is_cached());
        assert_eq!(r.files.descriptors(), 2);
        r.read_all(&small);
        drop(small);
        r.file("small").unwrap();
        assert_eq!(r.files.descriptors(), 1, "small is in memory: only big's descriptor");
        drop((big, again));
        r.settle();
        assert_eq!((r.files.descriptors(), r.io.exec.open_files()), (0, 0), "closed once nobody sends it");
        let fresh = r.file("big").unwrap();
        assert_eq!(fresh.len(), 3 * FILE_PIECE as u64 + 10, "opened again");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cached_files_close_their_descriptors_once_read_and_the_budget_closes_the_least_recent() {
        let names: Vec<String> = (0..20).map(|i| format!("f{i}")).collect();
        let files: Vec<(&str, usize)> = names.iter().map(|n| (n.as_str(), 2 * FILE_PIECE)).collect();
        let dir = root("budget", &files);
        let mut r = Rig::new(&dir, 1 << 30, 4, Duration::ZERO);
        // Each file half read (its first piece), then left: the budget closes the oldest.
        for n in &names {
            let b = r.file(n).unwrap();
            let PieceAt::Wait(_) = r.files.piece(&b, 0, &mut r.io) else { panic!("a read") };
            r.settle();
            assert!(r.files.open_descriptors() <= 4, "{} open", r.files.open_descriptors());
        }
        assert!(r.files.fds_closed >= 16, "{}", r.files.fds_closed);
        r.settle();
        assert_eq!(r.io.exec.open_files(), r.files.descriptors(), "the threads closed what the site closed");
        // A closed one is opened again for its missing piece, its first piece kept.
        let b = r.file("f0").unwrap();
        assert!(b.has_file());
        assert_eq!(r.read_all(&b).len(), 2 * FILE_PIECE);
        drop(b);
        // Read whole, it needs no descriptor: the next look closes it.
        let b = r.file("f0").unwrap();
        assert!(b.complete() && !b.has_file());
        // A changed file: served from the cache until its check is back, then read again.
        std::fs::write(dir.join("f0"), b"changed").unwrap();
        r.now = r.now + Duration::from_millis(1);
        assert_eq!(r.file("f0").unwrap().len(), 2 * FILE_PIECE as u64, "the check is not waited for");
        r.settle();
        let b = r.file("f0").unwrap();
        assert_eq!(r.read_all(&b), b"changed");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_cached_file_is_served_with_no_request_and_checked_at_most_every_file_check() {
        let dir = root("check", &[("f", 1000)]);
        let mut r = Rig::new(&dir, 1 << 30, 16, Duration::from_secs(1));
        let b = r.file("f").unwrap();
        assert_eq!(r.read_all(&b).len(), 1000);
        let asked = r.io.stats.submitted;
        assert_eq!(asked, 2, "an open and a read");
        for _ in 0..100 {
            r.now = r.now + Duration::from_millis(5);
            assert!(Arc::ptr_eq(&r.file("f").unwrap(), &b));
        }
        assert_eq!(r.io.stats.submitted, asked, "half a second of hits: no request at all");
        r.now = r.now + Duration::from_millis(600);
        r.file("f").unwrap();
        r.file("f").unwrap();
        assert_eq!(r.io.stats.submitted, asked + 1, "one check, however many hits meanwhile");
        r.settle();
        assert!(Arc::ptr_eq(&r.file("f").unwrap(), &b), "the same file: still cached");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn concurrent_requests_for_a_file_or_a_piece_make_one_open_and_one_read() {
        let dir = root("once", &[("f", FILE_PIECE + 1)]);
        let mut r = Rig::new(&dir, 1 << 30, 16, Duration::from_secs(1));
        let Lookup::Wait(t) = r.files.file(Path::new("f"), &mut r.io, r.now) else { panic!("an open") };
        assert!(matches!(r.files.file(Path::new("f"), &mut r.io, r.now), Lookup::Busy), "waits for the first");
        assert!(std::mem::take(&mut r.io.blocked), "to be woken by the next completion");
        let got = r.settle();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, t);
        let b = r.file("f").unwrap();
        let PieceAt::Wait(_) = r.files.piece(&b, 10, &mut r.io) else { panic!("a read") };
        assert!(matches!(r.files.piece(&b, 20, &mut r.io), PieceAt::Busy), "the same piece: waits");
        r.settle();
        assert!(matches!(r.files.piece(&b, 20, &mut r.io), PieceAt::Ready(_, 0)));
        assert_eq!(r.io.stats.submitted, 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn beyond_the_descriptor_budget_a_file_is_a_503_never_a_404() {
        let names: Vec<String> = (0..4).map(|i| format!("s{i}")).collect();
        let files: Vec<(&str, usize)> = names.iter().map(|n| (n.as_str(), 2 * FILE_PIECE)).collect();
        let dir = root("fds", &files);
        // Nothing cached: every file streamed; one cached descriptor, one streamed.
        let mut r = Rig::new(&dir, 0, 1, Duration::from_secs(1));
        let held: Vec<_> = names[..2].iter().map(|n| r.file(n).unwrap()).collect();
        assert_eq!(r.file("s2").err(), Some(http::Status::SERVICE_UNAVAILABLE));
        assert_eq!(r.file("nothing").err(), Some(http::Status::SERVICE_UNAVAILABLE), "not even looked up");
        drop(held);
        assert_eq!(r.file("nothing").err(), Some(http::Status::NOT_FOUND));
        assert!(r.file("s3").is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
