//! The runtime directory of a process's Unix sockets, `RUNDIR/dpdk/PREFIX` as DPDK
//! lays it out, and the rules for every socket placed there (the telemetry socket;
//! a control socket goes beside it through the same functions):
//!
//! * [`RunDir::open`] creates the directory, or verifies the one that is there:
//!   every directory from `/` down to `RUNDIR` is owned by root or by us and is
//!   not writable by group or others unless sticky (`/tmp`); `dpdk` and `PREFIX`
//!   are real directories (a symbolic link planted in their place is refused),
//!   not writable by group or others, and `PREFIX` is ours (`dpdk` may be root's);
//!   `PREFIX` ends with mode 0700. Each step opens the next directory from the
//!   one above without following a link and checks what it opened.
//! * [`RunDir::bind`] creates a socket there with mode 0600 from the start (the
//!   socket's own mode is set before `bind`, which gives it to the file).
//! * [`peer_trusted`] tells whether the process at the other end of an accepted
//!   connection runs as our user or root; the servers close the others.
//!
//! `RUNDIR` is `$RUNTIME_DIRECTORY`, else `/var/run` for root, else
//! `$XDG_RUNTIME_DIR`, else `/tmp`: where `dpdk-telemetry.py` looks.

use rustix::fs::{
    chmod, chmodat, fchmod, fstat, linkat, mkdirat, openat, statat, unlinkat, AtFlags, FileType, Mode, OFlags, CWD,
};
use rustix::io::Errno;
use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

/// Why a runtime directory was refused.
#[derive(Debug)]
pub enum RunDirError {
    /// The file prefix would name something else than one directory.
    Prefix {
        /// The prefix given.
        prefix: String,
    },
    /// A system call failed.
    Io {
        /// The directory.
        path: PathBuf,
        /// The error.
        err: std::io::Error,
    },
    /// A symbolic link where a directory of ours belongs.
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// Something else than a directory where one belongs.
    NotDir {
        /// The file.
        path: PathBuf,
    },
    /// Owned by another user.
    Owner {
        /// The directory.
        path: PathBuf,
        /// Its owner.
        uid: u32,
        /// Our effective uid.
        euid: u32,
    },
    /// Writable by group or others.
    Writable {
        /// The directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A directory above `RUNDIR/dpdk` lets another user replace what is below it.
    Above {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
}

impl std::fmt::Display for RunDirError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunDirError::Prefix { prefix } => {
                write!(f, "file prefix `{prefix}`: refused: expected one file name (not empty, `.` or `..`, no `/`)")
            }
            RunDirError::Io { path, err } => write!(f, "runtime directory {}: {err}", path.display()),
            RunDirError::Symlink { path } => write!(
                f,
                "runtime directory {}: refused: it is a symbolic link, expected a directory of ours \
                 (someone may have planted it: remove it)",
                path.display()
            ),
            RunDirError::NotDir { path } => {
                write!(f, "runtime directory {}: refused: not a directory", path.display())
            }
            RunDirError::Owner { path, uid, euid } => write!(
                f,
                "runtime directory {}: refused: owned by uid {uid}, expected uid {euid} (this process's user); \
                 another user may have made it to read or replace our sockets: remove it, or set \
                 $RUNTIME_DIRECTORY or $XDG_RUNTIME_DIR to a directory of ours",
                path.display()
            ),
            RunDirError::Writable { path, mode } => write!(
                f,
                "runtime directory {}: refused: writable by group or others (mode {mode:04o}), expected 0700 \
                 (see what is in it, then chmod 700)",
                path.display()
            ),
            RunDirError::Above { path, why } => write!(f, "runtime directory {}: refused: {why}", path.display()),
        }
    }
}

impl std::error::Error for RunDirError {}

/// `RUNDIR` (module documentation); it must exist.
pub fn base() -> PathBuf {
    if let Some(d) = std::env::var_os("RUNTIME_DIRECTORY").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if rustix::process::geteuid().is_root() {
        return PathBuf::from("/var/run");
    }
    std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()).map_or_else(|| PathBuf::from("/tmp"), PathBuf::from)
}

/// `RUNDIR/dpdk/PREFIX`, the directory [`RunDir::open`] makes for `prefix`.
pub fn path_for(prefix: &str) -> PathBuf {
    base().join("dpdk").join(prefix)
}

/// A runtime directory created or verified by [`RunDir::open`], held open.
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
    fd: OwnedFd,
}

const DIR_FLAGS: OFlags = OFlags::PATH.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

impl RunDir {
    /// Creates or verifies `RUNDIR/dpdk/PREFIX` (module documentation).
    pub fn open(prefix: &str) -> Result<RunDir, RunDirError> {
        let mut parts = Path::new(prefix).components();
        if !matches!((parts.next(), parts.next()), (Some(Component::Normal(_)), None)) || prefix.contains('/') {
            return Err(RunDirError::Prefix { prefix: prefix.to_string() });
        }
        open_under(&base(), &[OsStr::new("dpdk"), OsStr::new(prefix)], rustix::process::geteuid().as_raw())
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A Unix socket of type `ty` listening at `name` in the directory, mode 0600
    /// from its creation. The name appears only once the socket listens, and only
    /// if no file had it: an existing one is `AlreadyExists` (remove a stale one
    /// first). So a process that finds the name and cannot connect knows its owner
    /// is gone, and two processes never take the same name.
    pub fn bind(&self, name: &str, ty: SocketType, backlog: i32) -> std::io::Result<OwnedFd> {
        let fd = rustix::net::socket_with(AddressFamily::UNIX, ty, SocketFlags::CLOEXEC, None)?;
        // Linux gives the file `bind` creates the socket's own mode (less the
        // umask): set before, the file never has other bits.
        fchmod(&fd, Mode::from_raw_mode(0o600))?;
        // Bound under a name of this process's own, through the descriptor of
        // the directory checked (not its name), then linked to `name`.
        let own = format!(".{name}.{}", rustix::process::getpid().as_raw_nonzero());
        let _ = unlinkat(&self.fd, own.as_str(), AtFlags::empty());
        let via = format!("/proc/self/fd/{}/{own}", self.fd.as_raw_fd());
        rustix::net::bind(&fd, &SocketAddrUnix::new(via.as_str())?)?;
        let published = (|| {
            // Should the mode not have carried over, nobody can connect before
            // `listen` (and nobody but us can reach the directory).
            chmodat(&self.fd, own.as_str(), Mode::from_raw_mode(0o600), AtFlags::empty())?;
            rustix::net::listen(&fd, backlog)?;
            linkat(&self.fd, own.as_str(), &self.fd, name, AtFlags::empty())
        })();
        let _ = unlinkat(&self.fd, own.as_str(), AtFlags::empty());
        published?;
        Ok(fd)
    }
}

impl RunDir {
    /// A socket of type `ty` listening at the first free name of `name`, `name:1`,
    /// `name:2` ... (at most 64): a second process with the same prefix takes the
    /// next one. A socket nobody listens on any more (a run that ended without
    /// removing it) is taken over: the directory is ours alone, so we left it.
    pub fn bind_free(&self, name: &str, ty: SocketType, backlog: i32) -> std::io::Result<(OwnedFd, PathBuf)> {
        for i in 0..64 {
            let n = if i == 0 { name.to_string() } else { format!("{name}:{i}") };
            let path = self.path.join(&n);
            if std::fs::symlink_metadata(&path).is_ok() {
                match connect_nonblocking(&path, ty) {
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                        let _ = std::fs::remove_file(&path);
                    }
                    _ => continue,
                }
            }
            match self.bind(&n, ty, backlog) {
                Ok(fd) => return Ok((fd, path)),
                // Another process took the name in between.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
            }
        }
        Err(std::io::Error::other(format!("64 processes already listen as {name} in {}", self.path.display())))
    }
}

/// A connection to the Unix socket of type `ty` at `path`; never waits (a
/// listener whose queue is full answers `WouldBlock`).
pub fn connect_nonblocking(path: &Path, ty: SocketType) -> std::io::Result<OwnedFd> {
    let fd = rustix::net::socket_with(AddressFamily::UNIX, ty, SocketFlags::CLOEXEC | SocketFlags::NONBLOCK, None)?;
    rustix::net::connect(&fd, &SocketAddrUnix::new(path)?)?;
    Ok(fd)
}

/// Whether the peer of an accepted Unix connection `fd` may be served: it runs as
/// our effective user or as root. `Err` carries the peer's uid and pid (`None`:
/// the kernel did not say).
pub fn peer_trusted(fd: impl AsFd) -> Result<(), Option<(u32, i32)>> {
    let cred = rustix::net::sockopt::socket_peercred(fd).map_err(|_| None)?;
    let uid = cred.uid.as_raw();
    if uid == 0 || uid == rustix::process::geteuid().as_raw() {
        Ok(())
    } else {
        Err(Some((uid, cred.pid.as_raw_nonzero().get())))
    }
}

fn io(path: &Path) -> impl Fn(Errno) -> RunDirError + '_ {
    move |e| RunDirError::Io { path: path.to_path_buf(), err: e.into() }
}

/// Walks from `/` to `base` (which must exist) checking each directory, then
/// creates or verifies each of `subs` below it; the last must be owned by `euid`.
fn open_under(base: &Path, subs: &[&OsStr], euid: u32) -> Result<RunDir, RunDirError> {
    // The base's own links (`/var/run` -> `/run`) are the system's: resolved, then
    // walked without following any.
    let real = base.canonicalize().map_err(|err| RunDirError::Io { path: base.to_path_buf(), err })?;
    let mut fd = openat(CWD, "/", DIR_FLAGS, Mode::empty()).map_err(io(Path::new("/")))?;
    let mut at = PathBuf::from("/");
    loop {
        let st = fstat(&fd).map_err(io(&at))?;
        let above = |why: String| RunDirError::Above { path: at.clone(), why };
        if st.st_uid != 0 && st.st_uid != euid {
            return Err(above(format!("owned by uid {}, expected root or uid {euid}", st.st_uid)));
        }
        let mode = st.st_mode & 0o7777;
        if mode & 0o022 != 0 && mode & 0o1000 == 0 {
            return Err(above(format!("writable by group or others without the sticky bit (mode {mode:04o})")));
        }
        let Some(next) = real.strip_prefix(&at).ok().and_then(|rest| rest.components().next()) else { break };
        let next = next.as_os_str().to_owned();
        at.push(&next);
        fd = openat(&fd, next.as_os_str(), DIR_FLAGS, Mode::empty()).map_err(io(&at))?;
    }
    let mut path = base.to_path_buf();
    for (i, name) in subs.iter().enumerate() {
        path.push(name);
        let last = i + 1 == subs.len();
        let created = match mkdirat(&fd, *name, Mode::from_raw_mode(0o700)) {
            Ok(()) => true,
            Err(Errno::EXIST) => false,
            Err(e) => return Err(io(&path)(e)),
        };
        let sub = match openat(&fd, *name, DIR_FLAGS, Mode::empty()) {
            Ok(s) => s,
            Err(e @ (Errno::NOTDIR | Errno::LOOP)) => {
                return Err(match statat(&fd, *name, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => RunDirError::Symlink { path },
                    Ok(_) => RunDirError::NotDir { path },
                    Err(_) => io(&path)(e),
                })
            }
            Err(e) => return Err(io(&path)(e)),
        };
        // The checks are on what was opened.
        let st = fstat(&sub).map_err(io(&path))?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => {}
            FileType::Symlink => return Err(RunDirError::Symlink { path }),
            _ => return Err(RunDirError::NotDir { path }),
        }
        // `dpdk` may be root's (made by a root process before us); ours must be ours.
        if st.st_uid != euid && (last || st.st_uid != 0) {
            return Err(RunDirError::Owner { path, uid: st.st_uid, euid });
        }
        let mode = st.st_mode & 0o7777;
        if mode & 0o022 != 0 {
            return Err(RunDirError::Writable { path, mode });
        }
        // Made by us under a umask, or ours and readable by others: 0700. Through
        // the descriptor (`O_PATH` takes no fchmod; its /proc name does).
        if (created || last) && mode != 0o700 {
            chmod(format!("/proc/self/fd/{}", sub.as_raw_fd()).as_str(), Mode::from_raw_mode(0o700))
                .map_err(io(&path))?;
        }
        fd = sub;
    }
    Ok(RunDir { path, fd })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};

    struct Tmp(PathBuf);

    impl Tmp {
        fn new(tag: &str) -> Tmp {
            let d = std::env::temp_dir().join(format!("ironpath-rundir-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir(&d).unwrap();
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
            Tmp(d)
        }
    }

    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    fn subs<'a>() -> [&'a OsStr; 2] {
        [OsStr::new("dpdk"), OsStr::new("p")]
    }

    fn euid() -> u32 {
        rustix::process::geteuid().as_raw()
    }

    #[test]
    fn made_0700_with_a_0600_socket_in_it() {
        let t = Tmp::new("made");
        let d = open_under(&t.0, &subs(), euid()).unwrap();
        assert_eq!(d.path(), t.0.join("dpdk/p"));
        assert_eq!((mode(&t.0.join("dpdk")), mode(&t.0.join("dpdk/p"))), (0o700, 0o700));
        let _s = d.bind("s", SocketType::SEQPACKET, 4).unwrap();
        let m = std::fs::symlink_metadata(t.0.join("dpdk/p/s")).unwrap();
        assert!(std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()));
        assert_eq!(m.mode() & 0o7777, 0o600);
        // Again: verified, not made.
        assert_eq!(open_under(&t.0, &subs(), euid()).unwrap().path(), t.0.join("dpdk/p"));
        // The name reaches the listening socket; a second bind of it is refused
        // and leaves nothing behind.
        let c = rustix::net::socket(AddressFamily::UNIX, SocketType::SEQPACKET, None).unwrap();
        rustix::net::connect(&c, &SocketAddrUnix::new(t.0.join("dpdk/p/s")).unwrap()).unwrap();
        let again = d.bind("s", SocketType::SEQPACKET, 4).unwrap_err();
        assert_eq!(again.kind(), std::io::ErrorKind::AlreadyExists, "{again}");
        let names: Vec<_> = std::fs::read_dir(t.0.join("dpdk/p")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, [OsStr::new("s")]);
    }

    #[test]
    fn an_existing_directory_of_ours_is_tightened_to_0700() {
        let t = Tmp::new("ours");
        std::fs::create_dir_all(t.0.join("dpdk/p")).unwrap();
        std::fs::set_permissions(t.0.join("dpdk/p"), std::fs::Permissions::from_mode(0o755)).unwrap();
        open_under(&t.0, &subs(), euid()).unwrap();
        assert_eq!(mode(&t.0.join("dpdk/p")), 0o700);
    }

    #[test]
    fn writable_links_and_other_owners_are_refused() {
        let t = Tmp::new("bad");
        std::fs::create_dir_all(t.0.join("dpdk/p")).unwrap();
        std::fs::set_permissions(t.0.join("dpdk/p"), std::fs::Permissions::from_mode(0o770)).unwrap();
        let e = open_under(&t.0, &subs(), euid()).unwrap_err().to_string();
        assert!(e.contains("dpdk/p: refused: writable by group or others (mode 0770)"), "{e}");

        std::fs::remove_dir(t.0.join("dpdk/p")).unwrap();
        std::fs::create_dir(t.0.join("elsewhere")).unwrap();
        symlink(t.0.join("elsewhere"), t.0.join("dpdk/p")).unwrap();
        let e = open_under(&t.0, &subs(), euid()).unwrap_err();
        assert!(matches!(e, RunDirError::Symlink { .. }), "{e}");
        assert!(e.to_string().contains("dpdk/p: refused: it is a symbolic link"), "{e}");
        std::fs::remove_file(t.0.join("dpdk/p")).unwrap();
        std::fs::write(t.0.join("dpdk/p"), b"").unwrap();
        assert!(matches!(open_under(&t.0, &subs(), euid()), Err(RunDirError::NotDir { .. })));
        std::fs::remove_file(t.0.join("dpdk/p")).unwrap();

        // Seen by another uid, our directories are someone else's.
        let other = euid() + 1;
        let e = open_under(&t.0, &subs(), other).unwrap_err().to_string();
        assert!(e.contains(&format!("owned by uid {}, expected", euid())), "{e}");

        std::fs::set_permissions(&t.0, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = open_under(&t.0, &subs(), euid()).unwrap_err().to_string();
        assert!(e.contains("writable by group or others without the sticky bit (mode 0777)"), "{e}");
        std::fs::set_permissions(&t.0, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(open_under(&t.0, &subs(), euid()).is_ok());
    }

    #[test]
    fn a_prefix_is_one_file_name() {
        for p in ["", ".", "..", "a/b", "../x", "/abs"] {
            assert!(matches!(RunDir::open(p), Err(RunDirError::Prefix { .. })), "{p}");
        }
    }
}
