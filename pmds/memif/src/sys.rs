//! The system calls net_memif makes: the control socket (a `SOCK_SEQPACKET` Unix
//! socket, by path or in the abstract namespace), messages with a file descriptor
//! attached (`SCM_RIGHTS`), shared memory (`memfd_create`, sealed against shrinking,
//! and `mmap`), eventfds and `poll`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::proto::MSG_SIZE;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A socket address: a path, or a name in the abstract namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SockPath {
    /// The path or abstract name.
    pub name: String,
    /// In the abstract namespace (no file; the address is `\0name`).
    pub is_abstract: bool,
}

impl SockPath {
    fn addr(&self) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
        // SAFETY: an all-zero sockaddr_un is valid.
        let mut un: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        un.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let b = self.name.as_bytes();
        let skip = usize::from(self.is_abstract);
        if b.is_empty() || b.len() + skip >= un.sun_path.len() || b.contains(&0) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "socket name empty or too long"));
        }
        for (i, &c) in b.iter().enumerate() {
            un.sun_path[i + skip] = c as libc::c_char;
        }
        let base = std::mem::size_of::<libc::sa_family_t>();
        // A path socket's address is the whole structure (as DPDK binds it); an
        // abstract one's ends after its name, so both sides agree on its length.
        let len = if self.is_abstract { base + 1 + b.len() } else { std::mem::size_of::<libc::sockaddr_un>() };
        Ok((un, len as libc::socklen_t))
    }
}

impl std::fmt::Display for SockPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_abstract {
            write!(f, "@{}", self.name)
        } else {
            f.write_str(&self.name)
        }
    }
}

fn seqpacket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the result is checked.
    let fd = cvt(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Listen on `p` (non-blocking).
pub fn listen(p: &SockPath) -> io::Result<OwnedFd> {
    let (un, len) = p.addr()?;
    let fd = seqpacket()?;
    // SAFETY: `un` is a valid address of `len` bytes.
    cvt(unsafe { libc::bind(fd.as_raw_fd(), (&un as *const libc::sockaddr_un).cast(), len) })?;
    // SAFETY: a bound socket.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), 8) })?;
    set_nonblocking(&fd)?;
    Ok(fd)
}

/// Connect to `p` (then non-blocking).
pub fn connect(p: &SockPath) -> io::Result<OwnedFd> {
    let (un, len) = p.addr()?;
    let fd = seqpacket()?;
    // SAFETY: `un` is a valid address of `len` bytes.
    cvt(unsafe { libc::connect(fd.as_raw_fd(), (&un as *const libc::sockaddr_un).cast(), len) })?;
    set_nonblocking(&fd)?;
    Ok(fd)
}

/// Accept one connection, if any waits.
pub fn accept(l: &OwnedFd) -> io::Result<Option<OwnedFd>> {
    // SAFETY: accept4 without an address; the result is checked.
    let r = unsafe {
        libc::accept4(
            l.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::WouldBlock { Ok(None) } else { Err(e) };
    }
    // SAFETY: a new descriptor we own.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(r) }))
}

fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we own.
    let fl = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK) })?;
    Ok(())
}

/// Send one message, with `fd` attached if given.
pub fn send(sock: &OwnedFd, msg: &[u8; MSG_SIZE], fd: Option<RawFd>) -> io::Result<()> {
    let mut iov = libc::iovec { iov_base: msg.as_ptr() as *mut libc::c_void, iov_len: MSG_SIZE };
    // Room for one descriptor, aligned as a cmsghdr.
    let mut ctl = [0u64; 4];
    // SAFETY: an all-zero msghdr is valid.
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    if let Some(fd) = fd {
        // SAFETY: CMSG_SPACE is arithmetic.
        let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
        mh.msg_control = ctl.as_mut_ptr().cast();
        mh.msg_controllen = space;
        // SAFETY: the control buffer holds `space` bytes (32 >= 24), aligned; the
        // first header and its data lie inside it.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&mh);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), fd);
        }
    }
    // SAFETY: `mh` describes live buffers.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &mh, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != MSG_SIZE {
        return Err(io::Error::new(io::ErrorKind::WriteZero, "short control message"));
    }
    Ok(())
}

/// One received datagram: its bytes (any length up to 256) and a descriptor if one
/// came (extra descriptors are closed).
pub struct Received {
    /// The bytes.
    pub bytes: Vec<u8>,
    /// The attached descriptor.
    pub fd: Option<OwnedFd>,
}

/// Receive one message; `Ok(None)` when none waits; an error with kind
/// `UnexpectedEof` when the peer closed.
pub fn recv(sock: &OwnedFd) -> io::Result<Option<Received>> {
    let mut buf = [0u8; 2 * MSG_SIZE];
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let mut ctl = [0u64; 16];
    // SAFETY: an all-zero msghdr is valid.
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctl.as_mut_ptr().cast();
    mh.msg_controllen = std::mem::size_of_val(&ctl);
    // SAFETY: `mh` describes live buffers; descriptors are received close-on-exec.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut mh, libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::WouldBlock { Ok(None) } else { Err(e) };
    }
    if n == 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the peer closed the control channel"));
    }
    let mut fd = None;
    // SAFETY: the kernel filled `msg_controllen` bytes of `ctl` with well-formed
    // headers; each SCM_RIGHTS data holds whole descriptors we now own.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&mh);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c).cast::<RawFd>();
                let count = ((*c).cmsg_len - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
                for i in 0..count {
                    let owned = OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i)));
                    if fd.is_none() {
                        fd = Some(owned);
                    }
                }
            }
            c = libc::CMSG_NXTHDR(&mh, c);
        }
    }
    let bytes = if mh.msg_flags & libc::MSG_TRUNC != 0 { buf.to_vec() } else { buf[..n as usize].to_vec() };
    Ok(Some(Received { bytes, fd }))
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

/// Signal eventfd `fd` (an interrupt to a peer that asked for them).
#[inline]
pub fn kick(fd: RawFd) {
    let one = 1u64;
    // SAFETY: writes 8 bytes from a live u64; a failure (a closed or full eventfd)
    // only loses a wake-up of a peer that polls anyway.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

/// The size of the file behind `fd`.
pub fn file_size(fd: &OwnedFd) -> io::Result<u64> {
    // SAFETY: an all-zero stat is valid; fstat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st.st_size as u64)
}

/// Seal `fd` against shrinking if it is not already; whether it is sealed now (a
/// memfd made without `MFD_ALLOW_SEALING`, or a hugetlbfs file, cannot be).
pub fn seal_shrink(fd: &OwnedFd) -> bool {
    // SAFETY: fcntl on a descriptor we hold; failures are answered by F_GET_SEALS.
    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK) };
    // SAFETY: as above.
    let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    seals >= 0 && seals & libc::F_SEAL_SHRINK != 0
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
        let len = usize::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: a new shared mapping of a file we hold; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
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
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once; nothing refers to it any more (the
        // connection that holds it is gone).
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}
