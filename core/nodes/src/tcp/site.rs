//! An `http` listener's site: a root directory (its files in
//! [`Files`](super::files), opened beneath the root only, by the file-I/O threads)
//! and in-memory objects; what a request target leads to.

use super::files::{Delivery, FileBody, Files, Io, Lookup, PieceAt};
use super::io_threads::FileIo;
use ironpath_http as http;
use ironpath_tcp::Time;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A response body: bytes in memory, or a file.
pub(super) enum Body {
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

/// A body found, its content type, and a ready response head (objects only).
pub(super) struct Found {
    pub(super) body: Body,
    pub(super) ctype: &'static str,
    pub(super) head: Option<Arc<[u8]>>,
}

/// What a request target leads to.
pub(super) enum Looked {
    /// A body to send now.
    Ready(Found),
    /// An error status to answer with now.
    Failed(http::Status),
    /// The file `rel` (of content type `ctype`) is being opened under `token`
    /// (`None`: not yet asked for, see [`Lookup::Busy`]).
    Wait { rel: PathBuf, ctype: &'static str, token: Option<u32> },
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

    /// The body for `target`: an object (with its ready 200 head for `keep_alive`), a
    /// file under the root (`io`: the node's file I/O, `None` if it has none).
    pub(super) fn lookup(&mut self, target: &str, keep_alive: bool, io: Option<&mut Io>, now: Time) -> Looked {
        let bare = target.split(['?', '#']).next().unwrap_or(target);
        if let Some(o) = self.objects.get(bare) {
            let head = Arc::clone(&o.heads[usize::from(keep_alive)]);
            let body = Body::Bytes(Arc::clone(&o.body));
            return Looked::Ready(Found { body, ctype: OBJECT_TYPE, head: Some(head) });
        }
        // Lexically first (no `..`, no encoded slash, the index of a directory), then
        // opened beneath the root's descriptor.
        let path = match http::resolve_path(Path::new("/"), target) {
            Ok(p) => p,
            Err(s) => return Looked::Failed(s),
        };
        let Ok(rel) = path.strip_prefix("/") else { return Looked::Failed(http::Status::NOT_FOUND) };
        if !self.dotfiles && rel.components().any(|c| c.as_os_str().as_encoded_bytes().starts_with(b".")) {
            return Looked::Failed(http::Status::NOT_FOUND);
        }
        let Some(io) = io else { return Looked::Failed(http::Status::NOT_FOUND) };
        let ctype = http::content_type(rel);
        match self.files.file(rel, io, now) {
            Lookup::Found(b) => Looked::Ready(Found { body: Body::File(b), ctype, head: None }),
            Lookup::Failed(s) => Looked::Failed(s),
            Lookup::Wait(t) => Looked::Wait { rel: rel.to_owned(), ctype, token: Some(t) },
            Lookup::Busy => Looked::Wait { rel: rel.to_owned(), ctype, token: None },
        }
    }
}

/// A [`Site`] whose file I/O runs on the calling thread, one request at a time: for
/// tests and fuzzing (a node serves its sites through its file-I/O threads).
pub struct LocalSite {
    site: Site,
    io: Io,
    now: Time,
}

impl LocalSite {
    /// A site serving `root` (if any) and `objects` (see [`Site::new`]); a cached file
    /// is checked at every request.
    pub fn new(root: Option<PathBuf>, objects: &str, dotfiles: bool) -> Result<LocalSite, String> {
        let mut site = Site::new(root, objects, dotfiles)?;
        let exec = FileIo::new(0, 4, 64).map_err(|e| format!("file I/O: {e}"))?;
        site.files.attach(0, exec.closer(), Duration::ZERO);
        Ok(LocalSite { site, io: Io::new(exec), now: Time::from_millis(1) })
    }

    /// The body a GET of `target` answers with, read whole, or the error status.
    pub fn get(&mut self, target: &str) -> Result<Vec<u8>, http::Status> {
        self.now = self.now + Duration::from_millis(1);
        let body = match self.site.lookup(target, false, Some(&mut self.io), self.now) {
            Looked::Ready(f) => f.body,
            Looked::Failed(s) => return Err(s),
            Looked::Wait { token: Some(mut t), .. } => loop {
                match self.settle(t) {
                    Delivery::File(r) => break Body::File(r?),
                    Delivery::Retried(again) => t = again,
                    _ => return Err(http::Status(500)),
                }
            },
            Looked::Wait { token: None, .. } => return Err(http::Status::SERVICE_UNAVAILABLE),
        };
        match body {
            Body::Bytes(b) => Ok(b.to_vec()),
            Body::File(f) => {
                let mut v = Vec::with_capacity(f.len() as usize);
                while (v.len() as u64) < f.len() {
                    let off = v.len() as u64;
                    let (piece, start) = match self.site.files.piece(&f, off, &mut self.io) {
                        PieceAt::Ready(p, s) => (p, s),
                        PieceAt::Wait(t) => match self.settle(t) {
                            Delivery::Piece(Ok(p)) => p,
                            _ => return Err(http::Status(500)),
                        },
                        PieceAt::Busy | PieceAt::Failed => return Err(http::Status(500)),
                    };
                    v.extend_from_slice(&piece[(off - start) as usize..]);
                }
                Ok(v)
            }
        }
    }

    /// Runs the requests asked for and takes in their completions; returns what the
    /// one under `token` delivers.
    fn settle(&mut self, token: u32) -> Delivery {
        self.io.exec.run_inline();
        let mut mine = Delivery::Nothing;
        while let Some((done, t)) = self.io.exec.poll() {
            let tok = done.token;
            let d = self.site.files.complete(done, t.what, t.owner, &mut self.io, self.now);
            if tok == token {
                mine = d;
            }
        }
        mine
    }
}
