//! The server's listening socket, shared by every server port of this process on one
//! address: whichever port's thread accepts a connection reads its `INIT` and hands it
//! to the port that serves that interface id.

use super::{admits, Queues};
use crate::proto::Msg;
use crate::sys::{self, SockPath};
use std::io;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Bind the server's socket (a stale socket file nobody listens on is replaced;
/// a live one is refused). A path socket's file is `0600`, given to `allow` if set.
fn bind(p: &SockPath, allow: Option<u32>) -> io::Result<OwnedFd> {
    let fd = match sys::listen(p) {
        Err(e) if e.raw_os_error() == Some(libc::EADDRINUSE) && !p.is_abstract => {
            // Stale only if nobody listens (a live server with a full backlog
            // answers EAGAIN, and keeps its socket).
            if sys::connect(p).err().and_then(|x| x.raw_os_error()) != Some(libc::ECONNREFUSED) {
                return Err(e);
            }
            let _ = std::fs::remove_file(&p.name);
            sys::listen(p)
        }
        r => r,
    }?;
    if let (Some(uid), false) = (allow, p.is_abstract) {
        if let Err(e) = sys::give_socket(p, uid) {
            let _ = std::fs::remove_file(&p.name);
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "allow-uid={uid}: cannot give the socket file to that user ({e}); an abstract socket needs no file"
                ),
            ));
        }
    }
    Ok(fd)
}

/// A connection that sent `INIT` for a port other than the one that accepted it,
/// with its peer's user id.
pub(super) type Handoff = (OwnedFd, Instant, Msg, u32);

/// One server port on a shared socket.
struct Member {
    id: u32,
    q: Queues,
    allow: Option<u32>,
    inbox: Arc<Mutex<Vec<Handoff>>>,
}

/// A listening socket, shared by every server port of this process on that address
/// (each serves its own interface id, as DPDK's do): whichever port's thread accepts a
/// connection reads its `INIT` and hands it to the port with that id.
pub struct Listener {
    pub(super) fd: OwnedFd,
    sock: SockPath,
    members: Mutex<Vec<Member>>,
}

/// The listeners of this process, by address.
static LISTENERS: Mutex<Vec<std::sync::Weak<Listener>>> = Mutex::new(Vec::new());

impl Listener {
    /// Serve interface `id` with queues `q` on `p`: bind it, or join this process's
    /// listener there. Refused if another port of this process serves `id` there, or
    /// another process listens there.
    pub fn join(p: &SockPath, id: u32, q: Queues, allow: Option<u32>) -> io::Result<Arc<Listener>> {
        let mut all = LISTENERS.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|w| w.strong_count() > 0);
        let l = match all.iter().filter_map(|w| w.upgrade()).find(|l| l.sock == *p) {
            Some(l) => l,
            None => {
                let l = Arc::new(Listener { fd: bind(p, allow)?, sock: p.clone(), members: Mutex::new(Vec::new()) });
                all.push(Arc::downgrade(&l));
                l
            }
        };
        let mut m = l.members.lock().unwrap_or_else(|e| e.into_inner());
        if m.iter().any(|x| x.id == id) {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("interface id {id} is already served on this socket by another port of this process"),
            ));
        }
        m.push(Member { id, q, allow, inbox: Arc::new(Mutex::new(Vec::new())) });
        drop(m);
        Ok(l)
    }

    /// Stop serving `id` (its port stopped).
    pub fn leave(&self, id: u32) {
        self.members.lock().unwrap_or_else(|e| e.into_inner()).retain(|m| m.id != id);
    }

    pub(super) fn inbox(&self, id: u32) -> Option<Arc<Mutex<Vec<Handoff>>>> {
        self.members.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|m| m.id == id).map(|m| m.inbox.clone())
    }

    /// Whether any port on the socket admits a peer running as `uid` (before its
    /// `INIT` says which port it wants; that port checks again).
    pub(super) fn admits(&self, uid: u32) -> bool {
        let m = self.members.lock().unwrap_or_else(|e| e.into_inner());
        admits(uid, None) || m.iter().any(|x| x.allow == Some(uid))
    }

    /// The most rings any port on the socket takes (HELLO goes out before the client
    /// says which interface it wants).
    pub(super) fn most(&self) -> Queues {
        let m = self.members.lock().unwrap_or_else(|e| e.into_inner());
        Queues { rx: m.iter().map(|x| x.q.rx).max().unwrap_or(1), tx: m.iter().map(|x| x.q.tx).max().unwrap_or(1) }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if !self.sock.is_abstract {
            let _ = std::fs::remove_file(&self.sock.name);
        }
    }
}
