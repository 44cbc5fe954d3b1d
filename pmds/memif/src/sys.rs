//! The system calls net_memif makes: the control socket (a `SOCK_SEQPACKET` Unix
//! socket, by path or in the abstract namespace; a path created `0600`), the peer's
//! credentials, messages with a file descriptor attached (`SCM_RIGHTS`), shared
//! memory (`memfd_create`, sealed against shrinking, and `mmap`), eventfds, signals
//! to a peer's eventfd that cannot block ([`Signaller`]) and `poll`.

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

/// Listen on `p` (non-blocking). A path socket's file is created `0600` (the mode is
/// the socket's before `bind`, so the file never exists with a wider one).
pub fn listen(p: &SockPath) -> io::Result<OwnedFd> {
    let (un, len) = p.addr()?;
    let fd = seqpacket()?;
    if !p.is_abstract {
        // SAFETY: fchmod on a socket we own: bind gives the file this mode (less the umask).
        cvt(unsafe { libc::fchmod(fd.as_raw_fd(), 0o600) })?;
    }
    // SAFETY: `un` is a valid address of `len` bytes.
    cvt(unsafe { libc::bind(fd.as_raw_fd(), (&un as *const libc::sockaddr_un).cast(), len) })?;
    // SAFETY: a bound socket.
    // A backlog of 128: connections from other users are accepted only to be refused
    // (their credentials are read on the accepted socket), and a short backlog they
    // fill would turn the owner's own connections away.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), 128) })?;
    set_nonblocking(&fd)?;
    Ok(fd)
}

/// Connect to `p`, non-blocking: a server whose backlog is full answers at once
/// (`WouldBlock`) instead of holding the control thread.
pub fn connect(p: &SockPath) -> io::Result<OwnedFd> {
    let (un, len) = p.addr()?;
    let fd = seqpacket()?;
    set_nonblocking(&fd)?;
    // SAFETY: `un` is a valid address of `len` bytes.
    cvt(unsafe { libc::connect(fd.as_raw_fd(), (&un as *const libc::sockaddr_un).cast(), len) })?;
    Ok(fd)
}

/// Give the file of path socket `p` to user `uid` (the file stays `0600`; a link
/// put in its place is not followed).
pub fn give_socket(p: &SockPath, uid: u32) -> io::Result<()> {
    let path = std::ffi::CString::new(p.name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: lchown of a C string path; the result is checked.
    cvt(unsafe { libc::lchown(path.as_ptr(), uid, u32::MAX) }).map(drop)
}

/// The user id of the process at the other end of connected socket `fd`, and its pid
/// (as they were when it connected).
pub fn peer_cred(fd: &OwnedFd) -> io::Result<(u32, i32)> {
    // SAFETY: an all-zero ucred is valid.
    let mut c: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `c`.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut c as *mut libc::ucred).cast(),
            &mut len,
        )
    })?;
    Ok((c.uid, c.pid))
}

/// Our effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
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

pub use ironpath_pmd_sdk::ipc::{
    drain, eventfd, file_size, is_eventfd, memfd, nowait_reads, poke, poll, read_nowait, seal_shrink, Mapping,
    Signaller,
};

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) use ironpath_pmd_sdk::testing::saturated_eventfd;

    #[test]
    fn a_path_socket_is_its_owners_only_from_the_start() {
        let dir = std::env::temp_dir().join(format!("memif-sys-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let p = SockPath { name: dir.join("s").display().to_string(), is_abstract: false };
        let _ = std::fs::remove_file(&p.name);
        // SAFETY: umask cannot fail; a permissive one shows the mode does not come from it.
        let old = unsafe { libc::umask(0) };
        let l = listen(&p);
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        let l = l.unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&p.name).unwrap().permissions().mode() & 0o777, 0o600);
        // Our own connection passes; its credentials are ours.
        let c = connect(&p).unwrap();
        let a = accept(&l).unwrap().unwrap();
        assert_eq!(peer_cred(&a).unwrap(), (euid(), std::process::id() as i32));
        assert_eq!(peer_cred(&c).unwrap().0, euid());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
