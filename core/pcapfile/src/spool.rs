//! A capture file written by a thread of its own, so that capturing costs an lcore no
//! system call: a write to a regular file waits for the disk or for writeback
//! whatever its flags say, and an lcore must never wait.
//!
//! Each [`SpoolFeed`] (one per lcore side: a TX queue, a capture node) encodes a
//! packet into a record in a scratch buffer and copies it whole into a ring of its
//! own (single producer, single consumer): no lock, no allocation, no system call.
//! The `pcap-writer` thread moves whatever the rings hold into the file, whole
//! records only (each is published at once), and flushes the file whenever the rings
//! are empty. A record that does not fit its ring is dropped and counted: a slow
//! disk costs records, never the fast path. A write error stops the writing (the
//! rings are still emptied, so no feed ever waits) and is reported once.

use crate::{record_head, record_tail, Format, Writer, MAX_HEAD, SNAPLEN};
use ringbuf::traits::{Consumer, Observer, Producer, Split};
use ringbuf::{HeapCons, HeapProd, HeapRb};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the writer thread sleeps when every ring is empty.
const IDLE: Duration = Duration::from_millis(1);
/// How long it sleeps once the rings stayed empty for [`QUIET_AFTER`] sleeps (an
/// idle capture costs about nothing; a burst after it waits up to this long in
/// the rings).
const QUIET: Duration = Duration::from_millis(10);
const QUIET_AFTER: u32 = 1000;

/// How long [`Spool::flush`] waits for the writer thread.
const FLUSH_WAIT: Duration = Duration::from_secs(10);

/// A capture file and the thread that writes it.
pub struct Spool {
    shared: Arc<Shared>,
    format: Format,
    thread: Option<JoinHandle<()>>,
}

/// What the writer thread shares with the spool and the feeds.
struct Shared {
    /// The rings' consumer ends: locked by the writer thread and by [`Spool::feed`],
    /// never by a feed.
    rings: Mutex<Vec<HeapCons<u8>>>,
    /// Every feed's counters.
    counts: Mutex<Vec<Arc<FeedCounts>>>,
    stop: AtomicBool,
    /// Flushes asked for, and the last one done (everything pushed before it is in
    /// the file).
    flush_asked: AtomicU64,
    flush_done: AtomicU64,
    failed: AtomicBool,
    error: Mutex<Option<String>>,
}

/// One feed's counters (written by the feed only).
#[derive(Default)]
struct FeedCounts {
    captured: AtomicU64,
    dropped: AtomicU64,
}

/// One lcore's way into a [`Spool`].
pub struct SpoolFeed {
    ring: HeapProd<u8>,
    /// One record: head, up to [`SNAPLEN`] bytes of data, tail (reserved once).
    scratch: Vec<u8>,
    format: Format,
    captured: u64,
    dropped: u64,
    counts: Arc<FeedCounts>,
    shared: Arc<Shared>,
}

impl Spool {
    /// Create (truncate) `path`, write its header ([`Writer::create`]: pcapng for a
    /// `.pcapng` path, else pcap with nanosecond timestamps when `nano`) and start
    /// the thread that writes the records the feeds give it.
    pub fn create(path: &Path, nano: bool) -> io::Result<Spool> {
        let w = Writer::create(path, nano)?;
        let format = w.format;
        let shared = Arc::new(Shared {
            rings: Mutex::new(Vec::new()),
            counts: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            flush_asked: AtomicU64::new(0),
            flush_done: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new().name("pcap-writer".into()).spawn(move || run(w, &s))?;
        Ok(Spool { shared, format, thread: Some(thread) })
    }

    /// A new feed with a ring of `ring_bytes` (at least one record of the largest
    /// size).
    pub fn feed(&self, ring_bytes: usize) -> SpoolFeed {
        let most = MAX_HEAD + SNAPLEN as usize + 8;
        let (ring, cons) = HeapRb::<u8>::new(ring_bytes.max(most)).split();
        lock(&self.shared.rings).push(cons);
        let counts = Arc::new(FeedCounts::default());
        lock(&self.shared.counts).push(counts.clone());
        SpoolFeed {
            ring,
            scratch: Vec::with_capacity(most),
            format: self.format,
            captured: 0,
            dropped: 0,
            counts,
            shared: self.shared.clone(),
        }
    }

    /// Wait until every record pushed before this call is in the file (or 10 s);
    /// the first write error if there was one.
    pub fn flush(&self) -> io::Result<()> {
        let n = self.shared.flush_asked.fetch_add(1, Ordering::AcqRel) + 1;
        let t = Instant::now();
        while self.shared.flush_done.load(Ordering::Acquire) < n {
            if self.thread.as_ref().is_none_or(JoinHandle::is_finished) {
                break;
            }
            if t.elapsed() > FLUSH_WAIT {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "the pcap writer thread did not catch up"));
            }
            std::thread::sleep(IDLE);
        }
        match lock(&self.shared.error).as_ref() {
            Some(e) => Err(io::Error::other(e.clone())),
            None => Ok(()),
        }
    }

    /// Records the feeds handed to the writer thread (in the file after a flush).
    pub fn captured(&self) -> u64 {
        lock(&self.shared.counts).iter().map(|c| c.captured.load(Ordering::Relaxed)).sum()
    }

    /// Records dropped because their ring was full.
    pub fn dropped(&self) -> u64 {
        lock(&self.shared.counts).iter().map(|c| c.dropped.load(Ordering::Relaxed)).sum()
    }

    /// Whether writing failed (the file stops growing; see [`Spool::flush`]).
    pub fn failed(&self) -> bool {
        self.shared.failed.load(Ordering::Relaxed)
    }
}

impl Drop for Spool {
    /// Write what the rings still hold, then end the thread.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl SpoolFeed {
    /// Record a packet of `orig_len` bytes given as `segments`, cut to `snap` bytes
    /// (and to the file's snap length). False if its ring had no room: the record is
    /// dropped and counted.
    pub fn push<'a>(&mut self, segments: impl IntoIterator<Item = &'a [u8]>, orig_len: usize, snap: usize) -> bool {
        let head = match self.format {
            Format::Pcapng => MAX_HEAD,
            Format::PcapUs | Format::PcapNs => 16,
        };
        let end = head + snap.min(SNAPLEN as usize);
        // Within the capacity reserved at creation: no allocation.
        self.scratch.clear();
        self.scratch.resize(head, 0);
        for s in segments {
            let take = (end - self.scratch.len()).min(s.len());
            self.scratch.extend_from_slice(&s[..take]);
            if self.scratch.len() == end {
                break;
            }
        }
        let caplen = self.scratch.len() - head;
        let (h, n) = record_head(self.format, crate::now(), caplen, orig_len);
        self.scratch[..n].copy_from_slice(&h[..n]);
        let (t, m) = record_tail(self.format, caplen);
        self.scratch.extend_from_slice(&t[..m]);
        if self.ring.vacant_len() < self.scratch.len() {
            self.dropped += 1;
            self.counts.dropped.store(self.dropped, Ordering::Relaxed);
            return false;
        }
        // One push: the writer thread sees the whole record or none of it.
        self.ring.push_slice(&self.scratch);
        self.captured += 1;
        self.counts.captured.store(self.captured, Ordering::Relaxed);
        true
    }

    /// Records this feed handed to the writer thread.
    pub fn captured(&self) -> u64 {
        self.captured
    }

    /// Records this feed dropped for lack of room in its ring.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Whether writing the file failed (nothing more reaches it).
    pub fn failed(&self) -> bool {
        self.shared.failed.load(Ordering::Relaxed)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The writer thread: drain the rings into the file until stopped and drained.
fn run(mut w: Writer, shared: &Shared) {
    let mut idle = 0u32;
    loop {
        let stopping = shared.stop.load(Ordering::Acquire);
        let asked = shared.flush_asked.load(Ordering::Acquire);
        let moved = drain(&mut w, shared);
        if moved == 0 || asked != shared.flush_done.load(Ordering::Relaxed) {
            // Everything pushed before `asked` was read is in the writer: to the file.
            if !shared.failed.load(Ordering::Relaxed) {
                if let Err(e) = w.flush() {
                    fail(shared, &e);
                }
            }
            shared.flush_done.store(asked, Ordering::Release);
        }
        if moved == 0 {
            if stopping {
                return;
            }
            idle = idle.saturating_add(1);
            std::thread::sleep(if idle > QUIET_AFTER { QUIET } else { IDLE });
        } else {
            idle = 0;
        }
    }
}

/// Move what every ring holds into `w` (or drop it after a failure); bytes moved.
fn drain(w: &mut Writer, shared: &Shared) -> usize {
    let mut rings = lock(&shared.rings);
    let mut moved = 0;
    for r in rings.iter_mut() {
        let (a, b) = r.as_slices();
        let n = a.len() + b.len();
        if n == 0 {
            continue;
        }
        if !shared.failed.load(Ordering::Relaxed) {
            if let Err(e) = w.append(a).and_then(|()| w.append(b)) {
                fail(shared, &e);
            }
        }
        r.skip(n);
        moved += n;
    }
    moved
}

fn fail(shared: &Shared, e: &io::Error) {
    let mut err = lock(&shared.error);
    if err.is_none() {
        *err = Some(e.to_string());
    }
    shared.failed.store(true, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read;

    fn tmp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("ironpath-spool-{}-{name}", std::process::id()))
    }

    #[test]
    fn feeds_write_whole_records_cut_to_the_snap_length() {
        for name in ["two.pcap", "two.pcapng"] {
            let p = tmp(name);
            let s = Spool::create(&p, true).unwrap();
            let (mut a, mut b) = (s.feed(1 << 20), s.feed(1 << 20));
            for i in 0..100u8 {
                // A packet in two segments, and a long one cut to 64 bytes.
                assert!(a.push([&[i; 30][..], &[i; 31][..]], 61, 65535));
                assert!(b.push([&[i; 1000][..]], 1000, 64));
            }
            s.flush().unwrap();
            let got = read(&p).unwrap();
            assert_eq!(got.len(), 200, "{name}");
            let (mut sixty_one, mut cut) = (0, 0);
            for pkt in &got {
                match pkt.data.len() {
                    61 => sixty_one += 1,
                    64 => cut += 1,
                    n => panic!("{name}: a record of {n} bytes"),
                }
                assert!(pkt.data.iter().all(|&x| x == pkt.data[0]), "{name}: records are whole");
            }
            assert_eq!((sixty_one, cut), (100, 100));
            assert_eq!((s.captured(), s.dropped(), a.captured()), (200, 0, 100));
            drop((a, b, s));
            std::fs::remove_file(&p).unwrap();
        }
    }

    #[test]
    fn a_stuck_file_costs_records_never_a_wait() {
        // A FIFO nobody reads yet: the writer thread blocks in write(2) once the
        // pipe and its own buffer are full, as on a disk that does not answer.
        let p = tmp("stuck.fifo");
        let _ = std::fs::remove_file(&p);
        assert!(std::process::Command::new("mkfifo").arg(&p).status().unwrap().success());
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let reader = {
            let p = p.clone();
            std::thread::spawn(move || {
                let mut f = std::fs::File::open(&p).unwrap();
                // Read once the feed is done, or after 10 s if it never gets done.
                let _ = wait.recv_timeout(Duration::from_secs(10));
                let mut all = Vec::new();
                io::Read::read_to_end(&mut f, &mut all).unwrap();
                all
            })
        };
        let s = Spool::create(&p, false).unwrap();
        let mut f = s.feed(0);
        let t = Instant::now();
        // 6 MB: far more than the pipe, the file buffer and the ring together.
        let pushed = (0..3000).filter(|_| f.push([&[7u8; 2000][..]], 2000, 65535)).count() as u64;
        let took = t.elapsed();
        go.send(()).unwrap();
        assert!(took < Duration::from_secs(5), "the feed waited {took:?}");
        assert_eq!((f.captured(), f.captured() + f.dropped()), (pushed, 3000));
        assert!(f.dropped() > 1000, "{} dropped", f.dropped());
        assert_eq!(s.dropped(), f.dropped());
        drop(f);
        drop(s);
        let bytes = reader.join().unwrap();
        std::fs::remove_file(&p).unwrap();
        // 24-byte file header, then records of 16 + 2000 bytes.
        assert_eq!(bytes.len() as u64, 24 + pushed * 2016, "every record pushed reached the file");
    }

    #[test]
    fn a_write_error_is_reported_and_the_feeds_never_wait() {
        let s = Spool::create(Path::new("/dev/full"), false).unwrap();
        let mut f = s.feed(1 << 20);
        let t = Instant::now();
        while !f.failed() && t.elapsed() < Duration::from_secs(10) {
            f.push([&[1u8; 1500][..]], 1500, 65535);
        }
        assert!(f.failed() && s.failed(), "the writer thread saw /dev/full fail");
        // Still accepted (and thrown away): the ring keeps being emptied.
        let t = Instant::now();
        let mut ok = 0;
        while ok < 5000 && t.elapsed() < Duration::from_secs(10) {
            ok += usize::from(f.push([&[1u8; 1500][..]], 1500, 65535));
        }
        assert_eq!(ok, 5000, "7.5 MB through a 1 MiB ring after the failure");
        let e = s.flush().unwrap_err();
        assert!(e.to_string().contains("No space left"), "{e}");
    }
}
