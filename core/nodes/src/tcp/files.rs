//! The files a site serves: opened beneath its root only, read a piece at a time as
//! the send buffer takes them, and either cached (the pieces stay in memory for later
//! requests, up to `file_cache` bytes a site) or streamed (a file that does not fit:
//! each piece is freed once the peer acknowledged it; requests at about the same
//! place of the file share the last pieces read).
//!
//! Descriptors are a budget of their own: a cached file keeps its descriptor only
//! while some of it is not in memory, at most `open_files` of them (least recently
//! used closed first, opened again if a missing piece is asked for), and a request
//! hit checks the file with a `stat` beneath the root, without opening it. A file
//! that cannot be opened for lack of descriptors is a 503, not a 404.

use ironpath_http as http;
use rustix::fs::{AtFlags, FileType};
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};

/// Bytes of a file read at a time (and kept, for a cached file).
pub(super) const FILE_PIECE: usize = 256 << 10;

/// Heap bytes a piece costs beyond its contents (the `Arc` counts, the allocator).
const PIECE_OVERHEAD: usize = 32;

/// What a file was when opened: a cached body is served while the name still leads to
/// the same device, inode, size and modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Identity {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, u64),
}

impl Identity {
    fn of(st: &rustix::fs::Stat) -> Identity {
        Identity {
            dev: st.st_dev,
            ino: st.st_ino,
            len: st.st_size.max(0) as u64,
            mtime: (st.st_mtime, st.st_mtime_nsec),
        }
    }
}

/// Whether `st` is a regular file (a FIFO, a device or a directory is never served).
fn regular(st: &rustix::fs::Stat) -> bool {
    FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
}

/// A cached body's pieces, each set once read.
type Kept = Box<[OnceLock<Arc<[u8]>>]>;

/// A recently read piece: (body id, piece index, bytes).
type RecentPiece = (u64, u64, Arc<[u8]>);

/// A file being served, read from its descriptor a piece at a time when its bytes are
/// first sent: reading a large file whole at its first request stalled the lcore, and
/// every connection on it, for the whole read (100 MiB: 130-400 ms).
pub(super) struct FileBody {
    /// Unique in its site (keys the recent pieces of streamed files).
    id: u64,
    file: Option<File>,
    ident: Identity,
    /// A cached body's pieces, each kept once read; `None` for a streamed body.
    kept: Option<Kept>,
    /// Pieces of a cached body not read yet.
    unread: AtomicUsize,
}

impl FileBody {
    fn new(id: u64, file: File, ident: Identity, cached: bool) -> FileBody {
        let n = ident.len.div_ceil(FILE_PIECE as u64) as usize;
        let kept = cached.then(|| (0..n).map(|_| OnceLock::new()).collect());
        let unread = AtomicUsize::new(if cached { n } else { 0 });
        FileBody { id, file: Some(file), ident, kept, unread }
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

    fn has_file(&self) -> bool {
        self.file.is_some()
    }

    /// The same cached body with `file` as its descriptor (the pieces read are shared).
    fn with_file(&self, file: Option<File>) -> FileBody {
        let kept: Option<Kept> = self.kept.as_ref().map(|k| {
            k.iter()
                .map(|s| {
                    let o = OnceLock::new();
                    if let Some(p) = s.get() {
                        let _ = o.set(Arc::clone(p));
                    }
                    o
                })
                .collect()
        });
        let unread = kept.as_ref().map_or(0, |k| k.iter().filter(|s| s.get().is_none()).count());
        FileBody { id: self.id, file, ident: self.ident, kept, unread: AtomicUsize::new(unread) }
    }

    /// The piece holding byte `off` (< `len`) and the file offset where it starts:
    /// kept, among the `recent` pieces of streamed files, or read now.
    pub(super) fn piece_at(&self, off: u64, recent: Option<&mut Recent>) -> std::io::Result<(Arc<[u8]>, u64)> {
        if off >= self.ident.len {
            return Err(std::io::Error::other("offset past the end of the file"));
        }
        let i = off / FILE_PIECE as u64;
        let start = i * FILE_PIECE as u64;
        match &self.kept {
            Some(kept) => {
                let slot = kept.get(i as usize).ok_or_else(|| std::io::Error::other("no such piece"))?;
                if let Some(p) = slot.get() {
                    return Ok((Arc::clone(p), start));
                }
                let buf = self.read(start)?;
                if slot.set(Arc::clone(&buf)).is_ok() {
                    self.unread.fetch_sub(1, Ordering::Relaxed);
                }
                Ok((buf, start))
            }
            None => {
                if let Some(p) = recent.as_deref().and_then(|r| r.get(self.id, i)) {
                    return Ok((p, start));
                }
                let buf = self.read(start)?;
                if let Some(r) = recent {
                    r.put(self.id, i, Arc::clone(&buf));
                }
                Ok((buf, start))
            }
        }
    }

    fn read(&self, start: u64) -> std::io::Result<Arc<[u8]>> {
        let file = self.file.as_ref().ok_or_else(|| std::io::Error::other("the file was closed"))?;
        let n = (self.ident.len - start).min(FILE_PIECE as u64) as usize;
        let mut buf: Arc<[u8]> = std::iter::repeat_n(0u8, n).collect();
        let dst = Arc::get_mut(&mut buf).ok_or_else(|| std::io::Error::other("piece buffer shared"))?;
        file.read_exact_at(dst, start)?;
        Ok(buf)
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

/// Whether an open failed for lack of descriptors (the process's or the system's).
fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(
        rustix::io::Errno::from_io_error(e),
        Some(rustix::io::Errno::MFILE) | Some(rustix::io::Errno::NFILE)
    )
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

/// A site's open files: the root's descriptor, the cache and the streamed files.
pub(super) struct Files {
    root: Option<PathBuf>,
    /// The root directory, opened at the first request that needs it.
    root_dir: Option<OwnedFd>,
    /// Cached files by path.
    cache: HashMap<PathBuf, Arc<FileBody>>,
    /// Sum of the sizes of the cached files.
    cached_bytes: u64,
    cache_limit: u64,
    /// Cached files that hold a descriptor, least recently used first.
    open: VecDeque<PathBuf>,
    max_open: usize,
    /// Streamed files being sent, by path: later requests share their descriptor.
    streams: HashMap<PathBuf, Weak<FileBody>>,
    /// The last pieces of streamed files read.
    pub(super) recent: Recent,
    next_id: u64,
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
            root,
            root_dir: None,
            cache: HashMap::new(),
            cached_bytes: 0,
            cache_limit: CACHE_LIMIT,
            open: VecDeque::new(),
            max_open: 1,
            streams: HashMap::new(),
            recent: Recent::default(),
            next_id: 0,
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

    /// The body of the regular file at `rel` beneath the root: cached, or opened now
    /// (nothing is read yet). 404 if there is no root, no such regular file, or
    /// resolving it would leave the root; 503 if it cannot be opened for lack of
    /// descriptors.
    pub(super) fn file(&mut self, rel: &Path) -> Result<Arc<FileBody>, http::Status> {
        let not_found = http::Status::NOT_FOUND;
        if self.root_dir.is_none() {
            let root = self.root.as_deref().ok_or(not_found)?;
            match super::http_server::beneath::open_dir(root) {
                Ok(d) => self.root_dir = Some(d),
                Err(e) if out_of_descriptors(&e) => return Err(http::Status::SERVICE_UNAVAILABLE),
                Err(_) => return Err(not_found),
            }
        }
        let dir = self.root_dir.as_ref().ok_or(not_found)?;
        // A look at the name first, without a descriptor: a cached file is served
        // while it is the same file. (Whatever this finds, a file is only ever read
        // through a descriptor opened beneath the root.)
        let st = rustix::fs::statat(dir, rel, AtFlags::empty()).map_err(|_| not_found)?;
        if !regular(&st) {
            return Err(not_found);
        }
        let seen = Identity::of(&st);
        if let Some(body) = self.cache.get(rel) {
            if body.ident == seen {
                let body = Arc::clone(body);
                return self.cached(rel, body);
            }
            self.forget(rel);
        }
        if let Some(b) = self.streams.get(rel).and_then(Weak::upgrade).filter(|b| b.ident == seen) {
            return Ok(b);
        }
        let file = self.open(rel)?;
        let st = rustix::fs::fstat(&file).map_err(|_| not_found)?;
        if !regular(&st) {
            return Err(not_found);
        }
        let ident = Identity::of(&st);
        self.next_id += 1;
        if self.cached_bytes + ident.len <= self.cache_limit {
            let mut body = FileBody::new(self.next_id, file, ident, true);
            if body.complete() {
                body.file = None; // empty: nothing to read
            }
            let body = Arc::new(body);
            self.cached_bytes += ident.len;
            self.cache.insert(rel.to_owned(), Arc::clone(&body));
            if body.has_file() {
                self.open.push_back(rel.to_owned());
            }
            return Ok(body);
        }
        let body = Arc::new(FileBody::new(self.next_id, file, ident, false));
        self.streamed += 1;
        if self.streams.len() >= 64 {
            self.streams.retain(|_, w| w.strong_count() > 0);
        }
        self.streams.insert(rel.to_owned(), Arc::downgrade(&body));
        Ok(body)
    }

    /// A cached `body` (of `rel`) for a request: its descriptor closed if all of it is
    /// in memory and no response reads it, opened again if a piece is missing and the
    /// descriptor was closed.
    fn cached(&mut self, rel: &Path, body: Arc<FileBody>) -> Result<Arc<FileBody>, http::Status> {
        if body.complete() {
            // Held by the cache and here only: no response reads through it.
            if body.has_file() && Arc::strong_count(&body) == 2 {
                let closed = Arc::new(body.with_file(None));
                self.cache.insert(rel.to_owned(), Arc::clone(&closed));
                self.unlist(rel);
                return Ok(closed);
            }
            return Ok(body);
        }
        if body.has_file() {
            self.touch(rel);
            return Ok(body);
        }
        // Some pieces are missing and its descriptor was closed: the same file again.
        let file = self.open(rel)?;
        let same = rustix::fs::fstat(&file).is_ok_and(|st| regular(&st) && Identity::of(&st) == body.ident);
        if !same {
            self.forget(rel);
            return self.file(rel);
        }
        let reopened = Arc::new(body.with_file(Some(file)));
        self.cache.insert(rel.to_owned(), Arc::clone(&reopened));
        self.open.push_back(rel.to_owned());
        Ok(reopened)
    }

    /// Opens `rel` beneath the root, first making room within the descriptor budget;
    /// out of descriptors, closes every cached file it can and tries once more.
    fn open(&mut self, rel: &Path) -> Result<File, http::Status> {
        self.make_room(self.max_open.saturating_sub(1));
        let dir = self.root_dir.as_ref().ok_or(http::Status::NOT_FOUND)?;
        match super::http_server::beneath::open(dir, rel) {
            Ok(f) => Ok(f),
            Err(e) if out_of_descriptors(&e) => {
                self.make_room(0);
                let dir = self.root_dir.as_ref().ok_or(http::Status::NOT_FOUND)?;
                super::http_server::beneath::open(dir, rel).map_err(|e| {
                    if out_of_descriptors(&e) {
                        http::Status::SERVICE_UNAVAILABLE
                    } else {
                        http::Status::NOT_FOUND
                    }
                })
            }
            Err(_) => Err(http::Status::NOT_FOUND),
        }
    }

    /// Closes descriptors of cached files no response reads, least recently used
    /// first, until at most `keep` remain (or none can be closed).
    fn make_room(&mut self, keep: usize) {
        let mut i = 0;
        while self.open.len() > keep && i < self.open.len() {
            let Some(path) = self.open.get(i) else { break };
            let body = match self.cache.get(path) {
                Some(b) if b.has_file() => b,
                _ => {
                    // Gone from the cache, or closed since: not open any more.
                    self.open.remove(i);
                    continue;
                }
            };
            if Arc::strong_count(body) > 1 {
                i += 1; // a response reads it: its descriptor stays
                continue;
            }
            if !body.complete() {
                self.fds_closed += 1;
            }
            let closed = Arc::new(body.with_file(None));
            if let Some(path) = self.open.remove(i) {
                self.cache.insert(path, closed);
            }
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

    /// Drops the cached `rel` (it changed).
    fn forget(&mut self, rel: &Path) {
        if let Some(b) = self.cache.remove(rel) {
            self.cached_bytes -= b.len();
            self.unlist(rel);
        }
    }

    /// Descriptors the cache holds.
    #[cfg(test)]
    pub(super) fn open_descriptors(&self) -> usize {
        self.cache.values().filter(|b| b.has_file()).count()
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

    fn read_all(b: &FileBody, recent: &mut Recent) -> Vec<u8> {
        let mut v = Vec::new();
        while (v.len() as u64) < b.len() {
            let (p, start) = b.piece_at(v.len() as u64, Some(recent)).unwrap();
            v.extend_from_slice(&p[(v.len() as u64 - start) as usize..]);
        }
        v
    }

    #[test]
    fn a_file_above_the_cache_limit_is_streamed_and_shares_its_descriptor() {
        let dir = root("stream", &[("big", 3 * FILE_PIECE + 10), ("small", 100)]);
        let mut f = Files::new(Some(dir.clone()));
        f.set_limits(FILE_PIECE as u64, 16);
        let big = f.file(Path::new("big")).unwrap();
        assert!(!big.is_cached());
        let again = f.file(Path::new("big")).unwrap();
        assert!(Arc::ptr_eq(&big, &again), "a second request shares the streamed body");
        let mut recent = Recent::default();
        let body = read_all(&big, &mut recent);
        assert_eq!(body.len(), 3 * FILE_PIECE + 10);
        assert!(body.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        // Nothing of it stays but the last pieces read.
        let (p, _) = big.piece_at(0, None).unwrap();
        assert_eq!(Arc::strong_count(&p), 1, "a streamed piece belongs to its reader only");
        assert!(f.file(Path::new("small")).unwrap().is_cached());
        drop((big, again));
        let fresh = f.file(Path::new("big")).unwrap();
        assert_eq!(fresh.len(), 3 * FILE_PIECE as u64 + 10, "opened again once nobody sent it");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cached_files_close_their_descriptors_once_read_and_the_budget_closes_the_least_recent() {
        let names: Vec<String> = (0..20).map(|i| format!("f{i}")).collect();
        let files: Vec<(&str, usize)> = names.iter().map(|n| (n.as_str(), 2 * FILE_PIECE)).collect();
        let dir = root("budget", &files);
        let mut f = Files::new(Some(dir.clone()));
        f.set_limits(1 << 30, 4);
        let mut recent = Recent::default();
        // Each file half read (its first piece), then left: the budget closes the oldest.
        for n in &names {
            let b = f.file(Path::new(n)).unwrap();
            b.piece_at(0, None).unwrap();
            assert!(f.open_descriptors() <= 4, "{} open", f.open_descriptors());
        }
        assert!(f.fds_closed >= 16, "{}", f.fds_closed);
        // A closed one is opened again for its missing piece, its first piece kept.
        let b = f.file(Path::new("f0")).unwrap();
        assert_eq!(read_all(&b, &mut recent).len(), 2 * FILE_PIECE);
        drop(b);
        // Read whole, it needs no descriptor: the next look closes it.
        let b = f.file(Path::new("f0")).unwrap();
        assert!(b.complete() && !b.has_file());
        // A changed file is read again.
        std::fs::write(dir.join("f0"), b"changed").unwrap();
        let b = f.file(Path::new("f0")).unwrap();
        assert_eq!(read_all(&b, &mut recent), b"changed");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
