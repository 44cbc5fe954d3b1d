//! The file-I/O threads of a `tcp` node: every file-system call the `http`
//! application needs, made off the lcore. An lcore makes no blocking call (DESIGN.md,
//! "Trust boundaries"), and on a file every call may block: `open` and `stat` walk
//! directories (a slow disk, NFS, a FUSE mount whose timing someone else controls),
//! `pread` waits for the disk on a page-cache miss (`O_NONBLOCK` means nothing to a
//! regular file), and even `close` may wait (FUSE flushes on close).
//!
//! * Each thread has a request ring and a completion ring (bounded, lock-free, one
//!   producer and one consumer). The lcore pushes a request to the thread with the
//!   fewest outstanding (a thread stuck on a slow file gets no more while another is
//!   free) and pops completions when the node is polled: no lock, no syscall, no
//!   wake-up. An idle thread looks at its ring again after a few yields, then after
//!   sleeps growing to 1 ms; idle for [`PARK_AFTER`] sleeps it parks (an idle
//!   pipeline's threads cost nothing) and the lcore's next submit to it unparks it
//!   (a `FUTEX_WAKE`, paid only while it is parked).
//! * At most `capacity` requests are outstanding over all threads, and each
//!   completion ring holds `capacity`: a thread never waits for the lcore.
//! * Descriptors live on the threads. The lcore names a file by the [`Handle`] it
//!   gave the request that opened it; the threads keep the `File`s, so the lcore never
//!   holds one and never closes one. Closing is a handle pushed to a ring of its own
//!   ([`Closer`]), which the threads drain before each request (a request pushed after
//!   a close sees it done).
//! * Memory that crosses is allocated and freed on the lcore: a piece's buffer is made
//!   by the lcore, filled by a thread and handed back with the completion, as is the
//!   path of an open. (A buffer freed on another thread than the one that allocated
//!   it makes that thread take the allocator's lock of the other's arena.)
//!
//! With no thread (`threads == 0`) the requests run on the caller's thread when it
//! calls [`FileIo::run_inline`] (the node does at the start of each poll, so each
//! completes at the next poll): deterministic, for tests and fuzzing, never for a
//! node on an lcore (the catalog's `file_threads` is at least 1).

use ironpath_eal::mpmc::MpmcRing;
use ringbuf::traits::{Consumer, Producer, Split};
use ringbuf::{HeapCons, HeapProd, HeapRb};
use rustix::fs::{AtFlags, FileType};
use std::collections::HashMap;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// A file the threads hold open, named by the lcore when it asked for the open.
pub(super) type Handle = u64;

/// A web root: its path, and its descriptor once a thread opened it (at the first
/// request that needs it: a root created after the node still serves).
pub(super) struct Root {
    path: PathBuf,
    dir: OnceLock<OwnedFd>,
}

impl Root {
    pub(super) fn new(path: PathBuf) -> Arc<Root> {
        Arc::new(Root { path, dir: OnceLock::new() })
    }

    fn dir(&self) -> Result<&OwnedFd, Fail> {
        if let Some(d) = self.dir.get() {
            return Ok(d);
        }
        let d = beneath::open_dir(&self.path).map_err(|e| Fail::of(&e))?;
        // Two threads may race here: the loser's descriptor is closed on its thread.
        let _ = self.dir.set(d);
        self.dir.get().ok_or(Fail::NotFound)
    }
}

/// What a file was when opened or looked at: a cached body is served while its name
/// still leads to the same device, inode, size and modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Identity {
    dev: u64,
    ino: u64,
    pub(super) len: u64,
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

    /// Whether `st` is a regular file (a FIFO, a device or a directory is never served).
    fn regular(st: &rustix::fs::Stat) -> Option<Identity> {
        (FileType::from_raw_mode(st.st_mode) == FileType::RegularFile).then(|| Identity::of(st))
    }
}

/// Why a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fail {
    /// No such regular file beneath the root (or resolving it would leave the root).
    NotFound,
    /// The process or the system is out of descriptors.
    NoDescriptors,
    /// A read came short (the file shrank) or failed, or its handle is closed.
    Read,
}

impl Fail {
    fn of(e: &std::io::Error) -> Fail {
        match rustix::io::Errno::from_io_error(e) {
            Some(rustix::io::Errno::MFILE) | Some(rustix::io::Errno::NFILE) => Fail::NoDescriptors,
            _ => Fail::NotFound,
        }
    }
}

/// A request.
pub(super) enum Op {
    /// Open `rel` beneath `root` as `handle` (a regular file only) and say what it is.
    Open { root: Arc<Root>, rel: PathBuf, handle: Handle },
    /// Say what `rel` beneath `root` is now, without opening it.
    Stat { root: Arc<Root>, rel: PathBuf },
    /// Fill `buf` (the lcore's, unshared) from offset `off` of `handle`.
    Read { handle: Handle, off: u64, buf: Arc<[u8]> },
}

/// How a request went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Opened, or looked at: a regular file.
    File(Identity),
    /// `buf` is filled.
    Read,
    Failed(Fail),
}

/// A request on its way to a thread.
struct Request {
    token: u32,
    op: Op,
}

/// A request done: its token, the request itself (with its buffer and path, to be
/// freed by the lcore) and how it went.
pub(super) struct Done {
    pub(super) token: u32,
    pub(super) op: Op,
    pub(super) outcome: Outcome,
}

/// What the threads share (never touched by the lcore but for `closes`).
struct Shared {
    /// Handles to close, pushed by the lcore (one producer), drained by the threads.
    closes: MpmcRing<Handle>,
    /// The open files by handle (the lock is the threads' only).
    files: Mutex<HashMap<Handle, Arc<File>>>,
    stop: AtomicBool,
    #[cfg(test)]
    hold: Hold,
}

impl Shared {
    fn files(&self) -> std::sync::MutexGuard<'_, HashMap<Handle, Arc<File>>> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Closes every handle queued for closing; returns whether there was one.
    fn drain_closes(&self) -> bool {
        let mut batch = [0; 32];
        let mut any = false;
        loop {
            let n = self.closes.dequeue_burst(&mut batch);
            if n == 0 {
                return any;
            }
            any = true;
            let mut gone = Vec::with_capacity(n);
            {
                let mut files = self.files();
                gone.extend(batch[..n].iter().filter_map(|h| files.remove(h)));
            }
            drop(gone); // closed outside the lock
        }
    }

    fn execute(&self, op: &mut Op) -> Outcome {
        match op {
            Op::Open { root, rel, handle } => {
                let opened = root.dir().and_then(|dir| {
                    let file = beneath::open(dir, rel).map_err(|e| Fail::of(&e))?;
                    let st = rustix::fs::fstat(&file).map_err(|_| Fail::NotFound)?;
                    Ok((file, Identity::regular(&st).ok_or(Fail::NotFound)?))
                });
                match opened {
                    Ok((file, ident)) => {
                        self.files().insert(*handle, Arc::new(file));
                        Outcome::File(ident)
                    }
                    Err(f) => Outcome::Failed(f),
                }
            }
            Op::Stat { root, rel } => {
                let seen = root.dir().and_then(|dir| {
                    let st = rustix::fs::statat(dir, rel.as_path(), AtFlags::empty()).map_err(|_| Fail::NotFound)?;
                    Identity::regular(&st).ok_or(Fail::NotFound)
                });
                seen.map_or_else(Outcome::Failed, Outcome::File)
            }
            Op::Read { handle, off, buf } => {
                let file = self.files().get(handle).cloned();
                let read = match (file, Arc::get_mut(buf)) {
                    (Some(f), Some(dst)) => f.read_exact_at(dst, *off).is_ok(),
                    _ => false,
                };
                if read {
                    Outcome::Read
                } else {
                    Outcome::Failed(Fail::Read)
                }
            }
        }
    }
}

/// Idle sleeps (of up to 1 ms each) after which a file thread parks.
pub(super) const PARK_AFTER: u32 = 200;
/// The longest a parked thread waits before it looks at its ring by itself (a
/// safeguard: a submit unparks it).
const PARKED_MAX: Duration = Duration::from_millis(200);

/// A thread's ends of its rings.
struct Worker {
    shared: Arc<Shared>,
    /// Set while it parks.
    parked: Arc<AtomicBool>,
    requests: HeapCons<Request>,
    done: HeapProd<Done>,
    /// Requests a test holds back (`Hold`), when run inline.
    #[cfg(test)]
    deferred: std::collections::VecDeque<Request>,
}

impl Worker {
    /// Runs the requests waiting; returns whether there was any work.
    fn step(&mut self, inline: bool) -> bool {
        let mut any = self.shared.drain_closes();
        #[cfg(test)]
        for _ in 0..self.deferred.len() {
            let Some(r) = self.deferred.pop_front() else { break };
            any |= self.handle(r, inline);
        }
        while let Some(r) = self.requests.try_pop() {
            // A close pushed before this request is done first.
            self.shared.drain_closes();
            any |= self.handle(r, inline);
        }
        any
    }

    fn handle(&mut self, mut r: Request, inline: bool) -> bool {
        #[cfg(test)]
        if self.shared.hold.holds(&r.op) {
            if inline {
                self.deferred.push_back(r);
                return false;
            }
            while self.shared.hold.holds(&r.op) && !self.shared.stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let _ = inline; // only the test hook looks at it
        let outcome = self.shared.execute(&mut r.op);
        let mut d = Done { token: r.token, op: r.op, outcome };
        // Never full: at most the ring's capacity is outstanding (a safeguard only).
        while let Err(back) = self.done.try_push(d) {
            if self.shared.stop.load(Ordering::Relaxed) {
                return true;
            }
            d = back;
            std::thread::sleep(Duration::from_micros(50));
        }
        true
    }

    /// A thread's loop, until the node is dropped; then it closes every file.
    fn run(mut self) {
        let mut idle = 0u32;
        while !self.shared.stop.load(Ordering::Acquire) {
            if self.step(false) {
                idle = 0;
                continue;
            }
            idle = idle.saturating_add(1);
            match idle {
                0..=16 => std::thread::yield_now(),
                n if n < PARK_AFTER => {
                    std::thread::sleep(Duration::from_micros((25u64 << (n - 17).min(6)).min(1000)));
                }
                _ => {
                    // Parked, then the ring looked at again: a request pushed before
                    // the flag was seen is found now; one after it unparks us.
                    self.parked.store(true, Ordering::SeqCst);
                    // The flag before the ring's load (the submitter fences between
                    // its push and its load of the flag).
                    std::sync::atomic::fence(Ordering::SeqCst);
                    let found = self.step(false);
                    if !found && !self.shared.stop.load(Ordering::Acquire) {
                        std::thread::park_timeout(PARKED_MAX);
                    }
                    self.parked.store(false, Ordering::Relaxed);
                    if found {
                        idle = 0;
                    }
                }
            }
        }
        self.shared.drain_closes();
        // Closed here, never where the node is dropped.
        self.shared.files().clear();
    }
}

/// The lcore's ends of one thread's rings.
struct Lane {
    requests: HeapProd<Request>,
    done: HeapCons<Done>,
    outstanding: usize,
    /// The thread and its "parked" flag (none: run inline).
    waker: Option<(std::thread::Thread, Arc<AtomicBool>)>,
}

/// Closes handles from wherever a body is dropped (the lcore): a push to the close
/// ring, no syscall.
#[derive(Clone)]
pub(super) struct Closer(Arc<Shared>);

impl Closer {
    pub(super) fn close(&self, h: Handle) {
        // The ring holds every handle that can be open (the caller bounds them); if it
        // were full the file would stay open until the node is dropped.
        let _ = self.0.closes.enqueue_bulk(&[h]);
    }
}

/// The lcore's side of the file-I/O threads: submits requests, each with a value `W`
/// that comes back with its completion.
pub(super) struct FileIo<W> {
    lanes: Vec<Lane>,
    /// By token: what each outstanding request is for.
    waiting: Vec<Option<W>>,
    free: Vec<u32>,
    shared: Arc<Shared>,
    /// With no thread: the threads' ends, run by [`FileIo::run_inline`].
    inline: Vec<Worker>,
    next_handle: Handle,
    /// The lane polled first next time (so no lane starves another).
    next_lane: usize,
}

impl<W> FileIo<W> {
    /// `threads` threads (0: run inline), at most `capacity` requests outstanding,
    /// room for `closes` handles waiting to be closed. The threads start now: call
    /// this where the node is built, never on an lcore.
    pub(super) fn new(threads: usize, capacity: usize, closes: usize) -> std::io::Result<FileIo<W>> {
        let capacity = capacity.clamp(1, 1 << 16);
        let closes = MpmcRing::new(closes.clamp(64, 1 << 20).next_power_of_two()).map_err(std::io::Error::other)?;
        let shared = Arc::new(Shared {
            closes,
            files: Mutex::new(HashMap::new()),
            stop: AtomicBool::new(false),
            #[cfg(test)]
            hold: Hold::default(),
        });
        let (mut lanes, mut workers) = (Vec::new(), Vec::new());
        for _ in 0..threads.max(1) {
            let (rp, rc) = HeapRb::<Request>::new(capacity).split();
            let (dp, dc) = HeapRb::<Done>::new(capacity).split();
            lanes.push(Lane { requests: rp, done: dc, outstanding: 0, waker: None });
            workers.push(Worker {
                shared: Arc::clone(&shared),
                parked: Arc::default(),
                requests: rc,
                done: dp,
                #[cfg(test)]
                deferred: Default::default(),
            });
        }
        let mut inline = Vec::new();
        if threads == 0 {
            inline = workers;
        } else {
            for (i, w) in workers.into_iter().enumerate() {
                let parked = Arc::clone(&w.parked);
                let spawned = std::thread::Builder::new().name(format!("tcp-files-{i}")).spawn(move || w.run());
                match spawned {
                    Ok(h) => lanes[i].waker = Some((h.thread().clone(), parked)),
                    Err(e) => {
                        shared.stop.store(true, Ordering::Release);
                        for (t, _) in lanes.iter().filter_map(|l| l.waker.as_ref()) {
                            t.unpark();
                        }
                        return Err(e);
                    }
                }
            }
        }
        Ok(FileIo {
            lanes,
            waiting: (0..capacity).map(|_| None).collect(),
            free: (0..capacity as u32).rev().collect(),
            shared,
            inline,
            next_handle: 0,
            next_lane: 0,
        })
    }

    /// Where bodies close their handles.
    pub(super) fn closer(&self) -> Closer {
        Closer(Arc::clone(&self.shared))
    }

    /// A new handle for an open.
    pub(super) fn next_handle(&mut self) -> Handle {
        self.next_handle += 1;
        self.next_handle
    }

    /// Requests that may still be submitted.
    pub(super) fn room(&self) -> usize {
        self.free.len()
    }

    /// Hands `op` to the thread with the fewest requests outstanding; returns its
    /// token, or `op` and `w` back when `capacity` requests are outstanding.
    pub(super) fn submit(&mut self, op: Op, w: W) -> Result<u32, (Op, W)> {
        let Some(token) = self.free.pop() else { return Err((op, w)) };
        let lane = self.lanes.iter_mut().min_by_key(|l| l.outstanding).expect("at least one lane");
        match lane.requests.try_push(Request { token, op }) {
            Ok(()) => {
                lane.outstanding += 1;
                self.waiting[token as usize] = Some(w);
                if let Some((thread, parked)) = &lane.waker {
                    // Orders the push before the load: either the thread sees the
                    // request when it looks again, or we see it parked.
                    std::sync::atomic::fence(Ordering::SeqCst);
                    if parked.load(Ordering::Relaxed) {
                        thread.unpark();
                    }
                }
                Ok(token)
            }
            Err(r) => {
                self.free.push(token);
                Err((r.op, w))
            }
        }
    }

    /// The next completion and its value, if any.
    pub(super) fn poll(&mut self) -> Option<(Done, W)> {
        let n = self.lanes.len();
        for k in 0..n {
            let i = (self.next_lane + k) % n;
            let lane = &mut self.lanes[i];
            while let Some(d) = lane.done.try_pop() {
                lane.outstanding -= 1;
                let Some(w) = self.waiting.get_mut(d.token as usize).and_then(Option::take) else { continue };
                self.free.push(d.token);
                self.next_lane = i + 1;
                return Some((d, w));
            }
        }
        None
    }

    /// With no thread: runs the requests submitted so far on this thread.
    pub(super) fn run_inline(&mut self) {
        for w in &mut self.inline {
            w.step(true);
        }
    }

    /// Requests outstanding.
    pub(super) fn outstanding(&self) -> usize {
        self.waiting.len() - self.free.len()
    }

    /// Files the threads hold open (closes pushed and not yet drained count).
    #[cfg(test)]
    pub(super) fn open_files(&self) -> usize {
        self.shared.files().len()
    }

    /// The test hook that holds requests back.
    #[cfg(test)]
    pub(super) fn hold(&self) -> &Hold {
        &self.shared.hold
    }
}

impl<W> Drop for FileIo<W> {
    fn drop(&mut self) {
        // The threads close their files and end on their own (no join: dropping the
        // node must not wait for a thread stuck on a slow file).
        self.shared.stop.store(true, Ordering::Release);
        for (t, _) in self.lanes.iter().filter_map(|l| l.waker.as_ref()) {
            t.unpark();
        }
    }
}

/// Requests a test holds back: opens and stats of a file named in `names`, and every
/// read while `reads` is set. Inline they stay queued; a thread waits on them (as it
/// would on a slow disk).
#[cfg(test)]
#[derive(Default)]
pub(super) struct Hold {
    names: Mutex<Vec<String>>,
    reads: AtomicBool,
}

#[cfg(test)]
impl Hold {
    pub(super) fn name(&self, name: &str, held: bool) {
        let mut n = self.names.lock().unwrap();
        n.retain(|x| x != name);
        if held {
            n.push(name.to_owned());
        }
    }

    pub(super) fn reads(&self, held: bool) {
        self.reads.store(held, Ordering::Relaxed);
    }

    fn holds(&self, op: &Op) -> bool {
        match op {
            Op::Open { rel, .. } | Op::Stat { rel, .. } => {
                let name = rel.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                self.names.lock().unwrap().contains(&name)
            }
            Op::Read { .. } => self.reads.load(Ordering::Relaxed),
        }
    }
}

/// Opening files beneath a directory, never outside it.
pub(super) mod beneath {
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
    /// follows no symlink at all. Non-blocking, so that a FIFO cannot hold the thread
    /// (it is then refused: not a regular file).
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::time::Instant;

    fn root(tag: &str, files: &[(&str, &[u8])]) -> (PathBuf, Arc<Root>) {
        let dir = std::env::temp_dir().join(format!("ironpath-io-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, data) in files {
            std::fs::write(dir.join(name), data).unwrap();
        }
        (dir.clone(), Root::new(dir))
    }

    fn open(io: &mut FileIo<&'static str>, root: &Arc<Root>, name: &str, tag: &'static str) -> (u32, Handle) {
        let handle = io.next_handle();
        let op = Op::Open { root: Arc::clone(root), rel: PathBuf::from(name), handle };
        (io.submit(op, tag).ok().expect("room"), handle)
    }

    /// Polls `io` until a completion comes (at most 5 s).
    fn wait(io: &mut FileIo<&'static str>) -> (Done, &'static str) {
        let t = Instant::now();
        loop {
            io.run_inline();
            if let Some(d) = io.poll() {
                return d;
            }
            assert!(t.elapsed() < Duration::from_secs(5), "no completion");
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    #[test]
    fn a_thread_stuck_on_a_slow_file_gets_no_more_while_another_is_free() {
        let (dir, root) = root("slow", &[("slow", b"s"), ("a", b"aa"), ("b", b"bbb")]);
        let mut io = FileIo::new(2, 8, 64).unwrap();
        io.hold().name("slow", true);
        let (slow, _) = open(&mut io, &root, "slow", "slow");
        // The other thread takes both of these, one after the other.
        let (a, ha) = open(&mut io, &root, "a", "a");
        let (d, w) = wait(&mut io);
        assert_eq!((d.token, w), (a, "a"));
        assert!(matches!(d.outcome, Outcome::File(id) if id.len == 2));
        let (b, _) = open(&mut io, &root, "b", "b");
        let (d, w) = wait(&mut io);
        assert_eq!((d.token, w), (b, "b"));
        // A read of what the free thread opened, into the lcore's buffer.
        let buf: Arc<[u8]> = Arc::from(vec![0u8; 2]);
        let r = io.submit(Op::Read { handle: ha, off: 0, buf }, "read").ok().unwrap();
        let (d, _) = wait(&mut io);
        assert_eq!((d.token, d.outcome), (r, Outcome::Read));
        let Op::Read { buf, .. } = d.op else { panic!("a read") };
        assert_eq!(&buf[..], b"aa");
        assert_eq!(io.outstanding(), 1, "the slow open is still out");
        io.hold().name("slow", false);
        let (d, w) = wait(&mut io);
        assert_eq!((d.token, w), (slow, "slow"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn at_most_capacity_requests_are_outstanding_and_completions_come_with_their_values() {
        let (dir, root) = root("cap", &[("f", b"x")]);
        let mut io: FileIo<&'static str> = FileIo::new(0, 2, 64).unwrap();
        open(&mut io, &root, "f", "one");
        open(&mut io, &root, "missing", "two");
        let handle = io.next_handle();
        let op = Op::Open { root: Arc::clone(&root), rel: PathBuf::from("f"), handle };
        let Err((Op::Open { rel, .. }, "three")) = io.submit(op, "three") else { panic!("full") };
        assert_eq!(rel, Path::new("f"), "the request comes back whole");
        assert!(io.poll().is_none(), "inline: nothing runs before run_inline");
        io.run_inline();
        let mut got = [io.poll().unwrap(), io.poll().unwrap()];
        got.sort_by_key(|(_, w)| *w);
        assert!(matches!(got[0], (Done { outcome: Outcome::File(_), .. }, "one")));
        assert!(matches!(got[1], (Done { outcome: Outcome::Failed(Fail::NotFound), .. }, "two")));
        assert_eq!(io.room(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_close_pushed_before_a_request_is_done_before_it() {
        let (dir, root) = root("close", &[("f", b"data")]);
        let mut io: FileIo<()> = FileIo::new(0, 4, 64).unwrap();
        let handle = io.next_handle();
        let op = Op::Open { root: Arc::clone(&root), rel: PathBuf::from("f"), handle };
        io.submit(op, ()).ok().unwrap();
        io.run_inline();
        io.poll().unwrap();
        assert_eq!(io.open_files(), 1);
        io.closer().close(handle);
        let buf: Arc<[u8]> = Arc::from(vec![0u8; 4]);
        io.submit(Op::Read { handle, off: 0, buf }, ()).ok().unwrap();
        io.run_inline();
        assert_eq!(io.poll().unwrap().0.outcome, Outcome::Failed(Fail::Read), "closed first");
        assert_eq!(io.open_files(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_regular_files_beneath_the_root_open_and_a_short_read_fails() {
        let (dir, root) = root("kinds", &[("f", b"12345")]);
        std::fs::create_dir_all(dir.join("d")).unwrap();
        let outside = format!("ironpath-io-outside-{}", std::process::id());
        std::fs::write(dir.join("..").join(&outside), b"out").unwrap();
        std::os::unix::fs::symlink(format!("../{outside}"), dir.join("up")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.join("fifo"),
            FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let mut io: FileIo<()> = FileIo::new(0, 8, 64).unwrap();
        let mut outcome = |op: Op| {
            io.submit(op, ()).ok().unwrap();
            io.run_inline();
            io.poll().unwrap().0.outcome
        };
        for name in ["d", "up", "fifo", "nothing", "/etc/passwd"] {
            let op = Op::Open { root: Arc::clone(&root), rel: PathBuf::from(name), handle: 1 };
            assert_eq!(outcome(op), Outcome::Failed(Fail::NotFound), "{name}");
            let op = Op::Stat { root: Arc::clone(&root), rel: PathBuf::from(name) };
            assert_ne!(outcome(op), Outcome::Read, "{name}");
        }
        let op = Op::Open { root: Arc::clone(&root), rel: PathBuf::from("f"), handle: 7 };
        let Outcome::File(id) = outcome(op) else { panic!("opens") };
        assert_eq!(outcome(Op::Stat { root: Arc::clone(&root), rel: PathBuf::from("f") }), Outcome::File(id));
        let buf: Arc<[u8]> = Arc::from(vec![0u8; 4]);
        assert_eq!(outcome(Op::Read { handle: 7, off: 3, buf }), Outcome::Failed(Fail::Read), "past the end");
        let _ = std::fs::remove_file(dir.join("..").join(&outside));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
