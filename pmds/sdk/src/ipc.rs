//! What drivers that share memory and eventfds with a peer process use (net_memif,
//! net_vhost): `poll`, eventfds of our own, reads of a peer's eventfd that never
//! wait, signals to a peer's eventfd that cannot block ([`Signaller`]), checks of the
//! files a peer hands over (is it an eventfd, its size, hugetlbfs) and shared
//! mappings of them.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub(crate) fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Wait up to `ms` for any of `fds` to be readable; returns which are (or hung up).
pub fn poll(fds: &[RawFd], ms: i32) -> Vec<bool> {
    let mut p: Vec<libc::pollfd> =
        fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    // SAFETY: `p` holds `p.len()` pollfds.
    let r = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, ms) };
    p.iter().map(|x| r > 0 && x.revents != 0).collect()
}

/// A new eventfd (non-blocking).
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain eventfd(2).
    let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
    // SAFETY: a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Add one to eventfd `fd`, which must be one we created non-blocking and shared
/// with no one (a [`crate::notify::Wake`]): no one else can fill it or make it
/// blocking, so the write returns at once.
#[inline]
pub fn poke(fd: RawFd) {
    let one = 1u64;
    // SAFETY: writes 8 bytes from a live u64; a failure (a counter at its maximum,
    // which would take 2^64 pokes) only merges wake-ups.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

/// Reset eventfd `fd` (ours, non-blocking) to zero.
pub fn drain(fd: RawFd) {
    let mut v = 0u64;
    // SAFETY: reads 8 bytes into a live u64; a counter at zero fails with EAGAIN.
    unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
}

/// Take the count of eventfd `fd` without ever waiting, whatever its flags: `fd` may
/// be a peer's, which can clear `O_NONBLOCK` on the file we share and empty the
/// counter between our `poll` and this read, after which a read(2) would wait for
/// its next write. `preadv2` with `RWF_NOWAIT` answers `EAGAIN` instead (the kernel
/// refuses the flag, `EOPNOTSUPP`, on files that cannot honour it: see
/// [`nowait_reads`]). `Ok(None)`: the counter was zero.
pub fn read_nowait(fd: RawFd) -> io::Result<Option<u64>> {
    let mut v = 0u64;
    let iov = libc::iovec { iov_base: (&mut v as *mut u64).cast(), iov_len: 8 };
    // SAFETY: one iovec over a live u64; offset -1 reads at the file's position (an
    // eventfd has none that matters).
    let n = unsafe { libc::preadv2(fd, &iov, 1, -1, libc::RWF_NOWAIT) };
    if n == 8 {
        return Ok(Some(v));
    }
    let e = io::Error::last_os_error();
    match e.kind() {
        io::ErrorKind::WouldBlock => Ok(None),
        _ if n >= 0 => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short eventfd read")),
        _ => Err(e),
    }
}

/// Whether this kernel reads eventfds with `RWF_NOWAIT` (Linux 5.12 and later):
/// probed once, on a blocking eventfd of our own that holds a count, so the probe
/// cannot wait whatever the answer. Without it a memif queue has no wake-up source.
pub fn nowait_reads() -> bool {
    static WORKS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WORKS.get_or_init(|| {
        // SAFETY: plain eventfd(2), blocking, with a count of 1.
        let fd = unsafe { libc::eventfd(1, libc::EFD_CLOEXEC) };
        if fd < 0 {
            return false;
        }
        // SAFETY: a new descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        matches!(read_nowait(fd.as_raw_fd()), Ok(Some(1)))
    })
}

/// Whether `fd` is an eventfd (what a ring's interrupt descriptor must be: a pipe,
/// a socket or a file could block or do worse when written).
pub fn is_eventfd(fd: &OwnedFd) -> bool {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .is_ok_and(|l| l.as_os_str() == "anon_inode:[eventfd]")
}

/// The kernel's asynchronous I/O (`io_submit`), used for one thing: an eventfd named
/// in a request's `resfd` is signalled when the request completes, by the kernel,
/// which only adds to the counter (up to its maximum) and never waits, whatever the
/// descriptor's flags. Each signal is a read of nothing from a memfd of ours, which
/// completes at once.
pub struct Signaller {
    ctx: libc::c_ulong,
    src: OwnedFd,
}

/// `struct iocb` (linux/aio_abi.h, little-endian).
#[repr(C)]
#[derive(Default)]
struct Iocb {
    data: u64,
    key: u32,
    rw_flags: i32,
    opcode: u16,
    reqprio: i16,
    fildes: u32,
    buf: u64,
    nbytes: u64,
    offset: i64,
    reserved2: u64,
    flags: u32,
    resfd: u32,
}

/// `struct io_event`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct IoEvent {
    data: u64,
    obj: u64,
    res: i64,
    res2: i64,
}

const IOCB_CMD_PREAD: u16 = 0;
const IOCB_FLAG_RESFD: u32 = 1;
/// Requests in flight at most (each completes inside `io_submit`).
const AIO_EVENTS: usize = 16;

impl Signaller {
    /// A context of our own.
    pub fn new() -> io::Result<Signaller> {
        // SAFETY: a memfd of our own (empty); the result is checked.
        let src = cvt(unsafe { libc::memfd_create(c"memif-signal".as_ptr(), libc::MFD_CLOEXEC) })?;
        // SAFETY: a new descriptor we own.
        let src = unsafe { OwnedFd::from_raw_fd(src) };
        let mut ctx: libc::c_ulong = 0;
        // SAFETY: io_setup writes the context id into `ctx`.
        let r =
            unsafe { libc::syscall(libc::SYS_io_setup, AIO_EVENTS as libc::c_long, &mut ctx as *mut libc::c_ulong) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Signaller { ctx, src })
    }

    /// Add one to each eventfd of `fds`; returns how many were signalled (an fd that
    /// is not an eventfd is refused by the kernel and not counted).
    pub fn signal(&self, fds: &[RawFd]) -> usize {
        let mut sent = 0;
        let mut none = [0u8; 1];
        for &fd in fds {
            let mut cb = Iocb {
                opcode: IOCB_CMD_PREAD,
                fildes: self.src.as_raw_fd() as u32,
                buf: none.as_mut_ptr() as u64,
                nbytes: 0,
                flags: IOCB_FLAG_RESFD,
                resfd: fd as u32,
                ..Default::default()
            };
            let mut list = [&mut cb as *mut Iocb];
            // SAFETY: one valid iocb whose buffer (0 bytes) lives through the call; the
            // read completes inside io_submit (an empty memfd), and is reaped below.
            let r = unsafe { libc::syscall(libc::SYS_io_submit, self.ctx, 1 as libc::c_long, list.as_mut_ptr()) };
            if r == 1 {
                sent += 1;
            }
            self.reap();
        }
        sent
    }

    /// Collect completed requests (without waiting).
    fn reap(&self) {
        let mut ev = [IoEvent::default(); AIO_EVENTS];
        let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: room for AIO_EVENTS events; a zero timeout never waits.
        unsafe {
            libc::syscall(
                libc::SYS_io_getevents,
                self.ctx,
                0 as libc::c_long,
                AIO_EVENTS as libc::c_long,
                ev.as_mut_ptr(),
                &zero as *const libc::timespec,
            )
        };
    }
}

impl Drop for Signaller {
    fn drop(&mut self) {
        // SAFETY: our context, destroyed once (nothing is in flight: every request
        // completed inside io_submit).
        unsafe { libc::syscall(libc::SYS_io_destroy, self.ctx) };
    }
}

/// The size of the file behind `fd`.
pub fn file_size(fd: &OwnedFd) -> io::Result<u64> {
    // SAFETY: an all-zero stat is valid; fstat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st.st_size as u64)
}

/// Seal `fd` against shrinking if it is not already; whether its pages can no longer
/// go away under a mapping: sealed now, and not on hugetlbfs (a memfd made without
/// `MFD_ALLOW_SEALING` cannot be sealed; a hugetlb memfd can, but its owner can still
/// punch a hole in it with `fallocate` and take the free huge pages, after which
/// reading that hole faults with SIGBUS: the seal does not protect it).
pub fn seal_shrink(fd: &OwnedFd) -> bool {
    // SAFETY: fcntl on a descriptor we hold; failures are answered by F_GET_SEALS.
    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK) };
    // SAFETY: as above.
    let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    seals >= 0 && seals & libc::F_SEAL_SHRINK != 0 && !on_hugetlbfs(fd)
}

/// Whether the file behind `fd` is on hugetlbfs (a hugetlb memfd is).
pub fn on_hugetlbfs(fd: &OwnedFd) -> bool {
    const HUGETLBFS_MAGIC: i64 = 0x9584_58f6;
    // SAFETY: an all-zero statfs is valid; fstatfs fills it from a descriptor we hold.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let ok = unsafe { libc::fstatfs(fd.as_raw_fd(), &mut st) } == 0;
    // (A file whose filesystem cannot be told is treated as one that may lose pages.)
    !ok || st.f_type as i64 == HUGETLBFS_MAGIC
}

/// A new shared memory file of `size` bytes that cannot shrink (a peer that maps it
/// can rely on its size).
pub fn memfd(name: &std::ffi::CStr, size: u64) -> io::Result<OwnedFd> {
    // SAFETY: `name` is a C string.
    let fd = cvt(unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_ALLOW_SEALING | libc::MFD_CLOEXEC) })?;
    // SAFETY: a new descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ftruncate/fcntl on our descriptor.
    cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) })?;
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK) })?;
    Ok(fd)
}

/// A shared mapping of a whole region file, unmapped when dropped.
#[derive(Debug)]
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: a shared mapping is plain memory any thread may address; every access to
// it goes through the rules of `ring.rs`.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Map `len` bytes of `fd` read-write, shared.
    pub fn new(fd: &OwnedFd, len: u64) -> io::Result<Mapping> {
        Self::new_at(fd, 0, len)
    }

    /// Map `len` bytes of `fd` from file offset `offset` (a multiple of the page size,
    /// or of the huge page size on hugetlbfs) read-write, shared.
    pub fn new_at(fd: &OwnedFd, offset: u64, len: u64) -> io::Result<Mapping> {
        let len = usize::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let offset = libc::off_t::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: a new shared mapping of a file we hold; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { ptr: p.cast(), len })
    }

    /// First byte.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.len as u64
    }

    /// Whether the mapping is empty (never: `mmap` refuses zero bytes).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once; nothing refers to it any more (the
        // connection that holds it is gone).
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::saturated_eventfd;
    use std::time::{Duration, Instant};

    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut p = [0; 2];
        // SAFETY: pipe2 fills two descriptors we then own.
        cvt(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }).unwrap();
        // SAFETY: as above.
        unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) }
    }

    fn count(fd: &OwnedFd) -> u64 {
        let mut v = 0u64;
        // SAFETY: the counter is not zero in these tests, so the read returns at once.
        assert_eq!(unsafe { libc::read(fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) }, 8);
        v
    }

    #[test]
    fn only_eventfds_pass_as_interrupt_descriptors() {
        assert!(is_eventfd(&eventfd().unwrap()));
        let (r, w) = pipe();
        assert!(!is_eventfd(&r) && !is_eventfd(&w));
        assert!(!is_eventfd(&memfd(c"t", 4096).unwrap()));
    }

    /// Our memfd is sealed and not on hugetlbfs; a hugetlb memfd, sealed or not, is
    /// not taken as sealed (its pages can be punched out).
    #[test]
    fn a_hugetlb_region_is_never_taken_as_sealed() {
        let ours = memfd(c"t", 4096).unwrap();
        assert!(!on_hugetlbfs(&ours) && seal_shrink(&ours));
        // SAFETY: memfd_create with a C string; the descriptor, if any, is ours.
        let fd = unsafe { libc::memfd_create(c"h".as_ptr(), libc::MFD_HUGETLB | libc::MFD_ALLOW_SEALING) };
        if fd < 0 {
            return; // no hugetlbfs in this kernel: nothing to take for sealed
        }
        // SAFETY: as above.
        let huge = unsafe { OwnedFd::from_raw_fd(fd) };
        assert!(on_hugetlbfs(&huge));
        assert!(!seal_shrink(&huge), "a sealed hugetlb memfd can still lose its pages");
        // SAFETY: plain timerfd_create; another anonymous inode that is no eventfd.
        let t = unsafe { OwnedFd::from_raw_fd(cvt(libc::timerfd_create(libc::CLOCK_MONOTONIC, 0)).unwrap()) };
        assert!(!is_eventfd(&t));
    }

    /// A peer's eventfd made blocking and emptied: a plain read would wait for its
    /// next write; ours answers at once.
    #[test]
    fn an_empty_blocking_eventfd_is_read_without_waiting() {
        if !nowait_reads() {
            return; // an old kernel: queues have no wake-up source, nothing is read
        }
        // SAFETY: plain eventfd(2), blocking (what a peer may make of a shared one).
        let fd = unsafe { OwnedFd::from_raw_fd(cvt(libc::eventfd(0, libc::EFD_CLOEXEC)).unwrap()) };
        let raw = fd.as_raw_fd();
        let (tx, rx) = std::sync::mpsc::channel();
        // On a thread of its own: if the read waited, the test fails instead of hanging.
        std::thread::spawn(move || {
            let empty = read_nowait(raw).map_err(|e| e.to_string());
            poke(raw);
            poke(raw);
            let two = read_nowait(raw).map_err(|e| e.to_string());
            let _ = tx.send((empty, two));
        });
        let (empty, two) = rx.recv_timeout(Duration::from_secs(5)).expect("read_nowait waited");
        assert_eq!((empty, two), (Ok(None), Ok(Some(2))));
        let (_r, w) = pipe();
        assert!(read_nowait(w.as_raw_fd()).is_err(), "a pipe's write end is not read");
        drop(fd);
    }

    #[test]
    fn the_kernel_signals_an_eventfd_that_a_write_would_block_on() {
        let Ok(sig) = Signaller::new() else {
            // No asynchronous I/O in this kernel: the notifier counts failures instead.
            return;
        };
        let full = saturated_eventfd();
        let plain = eventfd().unwrap();
        let t = Instant::now();
        assert_eq!(sig.signal(&[full.as_raw_fd(), plain.as_raw_fd(), plain.as_raw_fd()]), 3);
        assert!(t.elapsed() < Duration::from_secs(1));
        // The full counter went to its very top (the peer has a wake-up pending); the
        // other one took both signals.
        assert_eq!((count(&full), count(&plain)), (u64::MAX, 2));
        // A pipe is no eventfd: refused, not written.
        let (_r, w) = pipe();
        assert_eq!(sig.signal(&[w.as_raw_fd()]), 0);
    }
}
