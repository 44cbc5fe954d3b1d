//! The control channel: one thread per port, from `start` to `stop`.
//!
//! * Server: listens on the socket, sends `HELLO` to each client that connects (if
//!   it runs as our user, root, or the user `allow-uid=` names: its credentials are
//!   checked on every connection, any other gets `DISCONNECT "Permission denied"`),
//!   and walks one of them through the handshake ([`ServerSession`]); others get
//!   `DISCONNECT "Already connected"`. At most [`MAX_PENDING`] connections wait for
//!   their `INIT`, each at most [`INIT_TIMEOUT`]; a handshake must end within
//!   [`HANDSHAKE_TIMEOUT`]. Regions are mapped as they arrive, once their file is
//!   known to be as large as declared; a ring's interrupt descriptor must be an
//!   eventfd; at `CONNECT` every ring's cookie is checked.
//! * Client: connects (again every [`RETRY`] while the server is away, or runs as
//!   another user than ours, root or `allow-uid=`'s), creates the
//!   region (rings and buffers in one sealed memfd, DPDK's layout) and the rings'
//!   eventfds, and sends `INIT`, `ADD_REGION`, `ADD_RING`s and `CONNECT`, one per
//!   `ACK`.
//!
//! The link is up from `CONNECTED` until either side disconnects or the socket
//! closes (a peer that dies closes it): then the connection is withdrawn from the
//! queues (a new generation is published; each queue moves past the old one on its
//! next burst), the link goes down, and a client reconnects. The thread keeps every
//! connection it replaced until no queue may be using it, and frees it itself, on
//! every turn of its loop ([`crate::publish`]): no lcore ever closes the peer's
//! descriptors or unmaps its memory. In copy mode no mbuf is ever in shared memory,
//! so nothing is left to reclaim.
//! Every refusal, ours or the peer's, is logged with its reason and counted.
//!
//! The thread also signals the peer's interrupt eventfds the queues ask for
//! ([`crate::notify`]): it polls the port's wake eventfd beside its sockets.

use crate::notify::{Doorbell, Notifier, Wake};
use crate::proto::{
    ClientRun, Layout, Msg, ServerLimits, ServerSession, Step, ADD_RING_FLAG_C2S, COOKIE, MODE_ETHERNET,
    RING_FLAG_MASK_INT, SECRET_SZ, VERSION,
};
use crate::publish::Published;
use crate::ring::{Conn, Ring};
use crate::sys::{self, Mapping, SockPath};
use ironpath_pmd_sdk::{log, Counter};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Connections waiting for their `INIT`.
pub const MAX_PENDING: usize = 4;
/// How long a new connection may take to send `INIT`.
pub const INIT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a handshake may take from `HELLO` to `CONNECT`.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// A client's pause between connection attempts.
pub const RETRY: Duration = Duration::from_millis(500);
/// The control thread's poll period (how fast it sees `stop`).
const TICK_MS: i32 = 50;

/// Server or client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Listens; maps the client's memory.
    Server,
    /// Connects; owns the memory.
    Client,
}

/// What the control thread needs to know.
#[derive(Debug, Clone)]
pub struct Config {
    /// Our role.
    pub role: Role,
    /// Interface id.
    pub id: u32,
    /// The socket.
    pub sock: SockPath,
    /// Secret (NUL-padded), if any.
    pub secret: Option<[u8; SECRET_SZ]>,
    /// Client: buffer size.
    pub bsize: u32,
    /// Client: ring size (log2).
    pub log2: u8,
    /// Our interface name (CONNECT/CONNECTED).
    pub if_name: String,
    /// Server: refuse regions that cannot be sealed against shrinking.
    pub require_sealed: bool,
    /// A user admitted besides ours and root (the peer's credentials).
    pub allow_uid: Option<u32>,
    /// The port's wake eventfd (the queues' requests for interrupts).
    pub wake: Arc<Wake>,
}

impl Config {
    /// Whether a peer running as `uid` may connect: our own user, root, or the one
    /// `allow-uid=` names.
    pub fn admits(&self, uid: u32) -> bool {
        admits(uid, self.allow_uid)
    }
}

fn admits(uid: u32, allow: Option<u32>) -> bool {
    uid == sys::euid() || uid == 0 || allow == Some(uid)
}

/// Counters of the control thread (single writer: that thread).
#[derive(Debug, Default)]
pub struct CtlCounters {
    /// Connections made (link up).
    pub connects: Counter,
    /// Connections ended (link down).
    pub disconnects: Counter,
    /// Handshakes we refused (the reason is logged and sent).
    pub refused: Counter,
    /// Disconnects the peer sent (its reason is logged).
    pub peer_disconnects: Counter,
    /// Connections closed for taking too long.
    pub timeouts: Counter,
    /// Connections turned away: too many waiting for `INIT`.
    pub overflow: Counter,
    /// Client: connection attempts that failed.
    pub connect_failures: Counter,
    /// Server: regions accepted that could not be sealed against shrinking.
    pub unsealed: Counter,
    /// Peers refused for running as another user (SO_PEERCRED).
    pub refused_users: Counter,
    /// Rings refused for an interrupt descriptor that is not an eventfd.
    pub bad_interrupt_fds: Counter,
    /// Interrupts signalled to the peer's eventfds.
    pub interrupts_sent: Counter,
    /// Interrupts the kernel would not signal (no asynchronous I/O here).
    pub interrupts_failed: Counter,
}

/// What the control thread shares with the queues and the device.
#[derive(Debug, Default)]
pub struct Link {
    /// The live connection, as the queues follow it; a new one (or none) is
    /// published on every connect and disconnect.
    pub conns: Arc<Published<Conn>>,
    /// Whether a connection is live.
    pub up: AtomicBool,
    /// Set to end the control thread.
    pub stop: AtomicBool,
    /// Counters.
    pub c: CtlCounters,
    /// The peer's names while connected, and the last disconnect reason.
    pub peer: Mutex<(String, String)>,
}

impl Link {
    fn publish(&self, conn: Option<Conn>) {
        let up = conn.is_some();
        self.conns.publish(conn);
        self.up.store(up, Ordering::Release);
        if up {
            self.c.connects.add(1);
        } else {
            self.c.disconnects.add(1);
        }
    }

    fn set_reason(&self, why: &str) {
        self.peer.lock().unwrap_or_else(|e| e.into_inner()).1 = why.to_string();
    }
}

/// Queue counts the connection carries: (our RX queues, our TX queues).
#[derive(Debug, Clone, Copy)]
pub struct Queues {
    /// RX queues.
    pub rx: u16,
    /// TX queues.
    pub tx: u16,
}

fn disconnect(fd: &OwnedFd, why: &str) {
    let _ = sys::send(fd, &Msg::Disconnect { code: 0, reason: why.to_string() }.encode(), None);
}

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
type Handoff = (OwnedFd, Instant, Msg, u32);

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
    fd: OwnedFd,
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

    fn inbox(&self, id: u32) -> Option<Arc<Mutex<Vec<Handoff>>>> {
        self.members.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|m| m.id == id).map(|m| m.inbox.clone())
    }

    /// Whether any port on the socket admits a peer running as `uid` (before its
    /// `INIT` says which port it wants; that port checks again).
    fn admits(&self, uid: u32) -> bool {
        let m = self.members.lock().unwrap_or_else(|e| e.into_inner());
        admits(uid, None) || m.iter().any(|x| x.allow == Some(uid))
    }

    /// The most rings any port on the socket takes (HELLO goes out before the client
    /// says which interface it wants).
    fn most(&self) -> Queues {
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

/// Run the control thread until `link.stop`.
pub fn run(cfg: Config, q: Queues, listener: Option<Arc<Listener>>, link: Arc<Link>) {
    let name = cfg.if_name.clone();
    let say = |level: u32, msg: &str| log(level, &format!("net_memif {name} ({}): {msg}", cfg.sock));
    match (cfg.role, listener) {
        (Role::Server, Some(l)) => {
            Server::new(&cfg, q, l.clone()).run(&link, &say);
            l.leave(cfg.id);
        }
        _ => Client::new(&cfg, q).run(&link, &say),
    }
    if link.up.load(Ordering::Acquire) {
        link.publish(None);
    }
}

// ---- server ---------------------------------------------------------------------

struct Session {
    fd: OwnedFd,
    ss: ServerSession,
    since: Instant,
    regions: Vec<Mapping>,
    c2s_fds: Vec<Option<OwnedFd>>,
    s2c_fds: Vec<Option<OwnedFd>>,
}

/// A connection waiting for its `INIT`: since when, and its peer's user id.
type Waiting = (OwnedFd, Instant, u32);

struct Server<'a> {
    cfg: &'a Config,
    lim: ServerLimits,
    listener: Arc<Listener>,
    inbox: Arc<Mutex<Vec<Handoff>>>,
    waiting: Vec<Waiting>,
    session: Option<Session>,
    notifier: Notifier,
}

/// Count a peer refused for its user, and log it (the 1st, 2nd, 4th, 8th... time).
fn refuse_user(link: &Link, say: &dyn Fn(u32, &str), uid: u32, pid: Option<i32>) {
    link.c.refused_users.add(1);
    let n = link.c.refused_users.get();
    if n.is_power_of_two() {
        let pid = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
        say(
            1,
            &format!(
                "refused a connection from uid {uid}{pid}: only uid {} (ours), root or allow-uid= may connect \
                 ({n} refused so far)",
                sys::euid()
            ),
        );
    }
}

impl<'a> Server<'a> {
    fn new(cfg: &'a Config, q: Queues, listener: Arc<Listener>) -> Self {
        let lim = ServerLimits { id: cfg.id, secret: cfg.secret, c2s: q.rx, s2c: q.tx, name: "ironpath".into() };
        let inbox = listener.inbox(cfg.id).unwrap_or_default();
        let notifier = Notifier::new(cfg.wake.clone());
        Server { cfg, lim, listener, inbox, waiting: Vec::new(), session: None, notifier }
    }

    fn run(mut self, link: &Link, say: &dyn Fn(u32, &str)) {
        while !link.stop.load(Ordering::Acquire) {
            let had_session = self.session.is_some();
            let mut fds = vec![self.notifier.fd(), self.listener.fd.as_raw_fd()];
            fds.extend(self.session.as_ref().map(|s| s.fd.as_raw_fd()));
            fds.extend(self.waiting.iter().map(|w| w.0.as_raw_fd()));
            let ready = sys::poll(&fds, TICK_MS);
            self.notifier.serve(link, ready[0], say);
            // Connections every queue has moved past are freed here, not on an lcore.
            link.conns.collect();
            if ready[1] {
                self.accept(link, say);
            }
            if had_session && ready[2] {
                self.on_session(link, say);
            }
            let skip = 2 + usize::from(had_session);
            let ready_waiting: Vec<bool> = ready.get(skip..).map(<[bool]>::to_vec).unwrap_or_default();
            self.on_waiting(&ready_waiting, link, say);
            // Connections other ports of this process accepted for us.
            let handed: Vec<Handoff> = std::mem::take(&mut *self.inbox.lock().unwrap_or_else(|e| e.into_inner()));
            for (fd, since, init, uid) in handed {
                self.take_init(fd, since, init, uid, link, say);
            }
            // A handshake that does not finish in time.
            if let Some(s) = &self.session {
                if s.ss.phase != crate::proto::Phase::Connected && s.since.elapsed() > HANDSHAKE_TIMEOUT {
                    link.c.timeouts.add(1);
                    self.end(link, say, "Handshake timeout", true);
                }
            }
        }
        if let Some(s) = &self.session {
            disconnect(&s.fd, "Device stopped");
        }
    }

    fn accept(&mut self, link: &Link, say: &dyn Fn(u32, &str)) {
        while let Ok(Some(fd)) = sys::accept(&self.listener.fd) {
            // Who connected: an abstract socket has no file mode to keep others out.
            let (uid, pid) = sys::peer_cred(&fd).unwrap_or((u32::MAX, 0));
            if !self.listener.admits(uid) {
                refuse_user(link, say, uid, Some(pid));
                disconnect(&fd, "Permission denied");
                continue;
            }
            if self.waiting.len() >= MAX_PENDING {
                link.c.overflow.add(1);
                disconnect(&fd, "Too many connections waiting");
                let n = link.c.overflow.get();
                if n.is_power_of_two() {
                    say(1, &format!("refused a client: Too many connections waiting ({n} so far)"));
                }
                continue;
            }
            // The client says which interface it wants only after HELLO: offer the
            // most rings of any port on the socket.
            let most = self.listener.most();
            let hello = ServerSession::new(ServerLimits { c2s: most.rx, s2c: most.tx, ..self.lim.clone() }).hello();
            if sys::send(&fd, &hello.encode(), None).is_ok() {
                self.waiting.push((fd, Instant::now(), uid));
            } else {
                say(3, "a client left before HELLO");
            }
        }
    }

    /// Connections that have not sent INIT yet.
    fn on_waiting(&mut self, ready: &[bool], link: &Link, say: &dyn Fn(u32, &str)) {
        let mut keep = Vec::new();
        for (i, (fd, since, uid)) in std::mem::take(&mut self.waiting).into_iter().enumerate() {
            if !ready.get(i).copied().unwrap_or(false) {
                if since.elapsed() > INIT_TIMEOUT {
                    link.c.timeouts.add(1);
                    disconnect(&fd, "Handshake timeout");
                    say(1, "a client sent no INIT in time: closed");
                } else {
                    keep.push((fd, since, uid));
                }
                continue;
            }
            let m = match sys::recv(&fd) {
                Ok(Some(r)) => Msg::parse(&r.bytes),
                Ok(None) => {
                    keep.push((fd, since, uid));
                    continue;
                }
                Err(_) => continue,
            };
            let refuse = |why: &str| {
                link.c.refused.add(1);
                link.set_reason(why);
                disconnect(&fd, why);
                say(1, &format!("refused a client: {why}"));
            };
            match m {
                Ok(init @ Msg::Init { .. }) => {
                    let Msg::Init { id, .. } = init else { unreachable!() };
                    if id == self.lim.id {
                        self.take_init(fd, since, init, uid, link, say);
                    } else if let Some(inbox) = self.listener.inbox(id) {
                        // Another port of this process serves it.
                        inbox.lock().unwrap_or_else(|e| e.into_inner()).push((fd, since, init, uid));
                    } else {
                        refuse("ID not found");
                    }
                }
                Ok(Msg::Disconnect { reason, .. }) => {
                    link.c.peer_disconnects.add(1);
                    say(1, &format!("a client disconnected before INIT: {reason}"));
                }
                Ok(_) => refuse("Unexpected message"),
                Err(why) => refuse(why),
            }
        }
        keep.extend(std::mem::take(&mut self.waiting));
        self.waiting = keep;
    }

    /// A client's `INIT` for this port (read here or handed over by another port).
    fn take_init(&mut self, fd: OwnedFd, since: Instant, init: Msg, uid: u32, link: &Link, say: &dyn Fn(u32, &str)) {
        if !self.cfg.admits(uid) {
            // Admitted by another port's allow-uid, not by this one.
            refuse_user(link, say, uid, None);
            return disconnect(&fd, "Permission denied");
        }
        let refuse = |why: &str| {
            link.c.refused.add(1);
            link.set_reason(why);
            disconnect(&fd, why);
            say(1, &format!("refused a client: {why}"));
        };
        if self.session.is_some() {
            return refuse("Already connected");
        }
        let mut ss = ServerSession::new(self.lim.clone());
        match ss.on_msg(init, None) {
            Step::Reply(ack) if sys::send(&fd, &ack.encode(), None).is_ok() => {
                let (c, s) = (usize::from(self.lim.c2s), usize::from(self.lim.s2c));
                self.session = Some(Session {
                    fd,
                    ss,
                    since,
                    regions: Vec::new(),
                    c2s_fds: (0..c).map(|_| None).collect(),
                    s2c_fds: (0..s).map(|_| None).collect(),
                });
            }
            Step::Refuse(why) => refuse(&why),
            _ => {}
        }
    }

    fn on_session(&mut self, link: &Link, say: &dyn Fn(u32, &str)) {
        let Some(s) = self.session.as_mut() else { return };
        let r = match sys::recv(&s.fd) {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) => {
                say(1, &format!("the client went away ({e})"));
                link.set_reason("the peer closed the socket");
                self.end(link, say, "", false);
                return;
            }
        };
        let m = match Msg::parse(&r.bytes) {
            Ok(m) => m,
            Err(why) => return self.refuse(link, say, why),
        };
        let mut sealed = true;
        let fd_size = match (&m, &r.fd) {
            (Msg::AddRegion { .. }, Some(fd)) => {
                // Sealed first, so that the size checked cannot shrink afterwards.
                sealed = sys::seal_shrink(fd);
                Some(sys::file_size(fd).unwrap_or(0))
            }
            (Msg::AddRing { .. }, Some(fd)) if s.ss.phase == crate::proto::Phase::Setup && !sys::is_eventfd(fd) => {
                // Signalled from our side: a pipe or a socket could block us, a file
                // would be written.
                link.c.bad_interrupt_fds.add(1);
                return self.refuse(link, say, "Interrupt fd not an eventfd");
            }
            (_, Some(_)) => Some(0),
            _ => None,
        };
        match s.ss.on_msg(m.clone(), fd_size) {
            Step::Reply(reply) => {
                match m {
                    Msg::AddRegion { index, size } => {
                        if !sealed {
                            if self.cfg.require_sealed {
                                return self.refuse(link, say, "Region not sealed against shrinking");
                            }
                            link.c.unsealed.add(1);
                            say(
                                1,
                                &format!(
                                    "region {index} cannot be sealed against losing pages (hugepage memory of a \
                                     zero-copy client), accepted as require-sealed=no asks: a client that \
                                     truncates it or punches a hole in it could crash this process"
                                ),
                            );
                        }
                        let fd = r.fd.expect("checked by the session");
                        match Mapping::new(&fd, size) {
                            Ok(map) => s.regions.push(map),
                            Err(e) => {
                                say(0, &format!("cannot map a region of {size} bytes: {e}"));
                                return self.refuse(link, say, "Region mmap failed");
                            }
                        }
                    }
                    Msg::AddRing { flags, index, .. } => {
                        let fds = if flags & ADD_RING_FLAG_C2S != 0 { &mut s.c2s_fds } else { &mut s.s2c_fds };
                        fds[usize::from(index)] = r.fd;
                    }
                    _ => {}
                }
                if sys::send(&s.fd, &reply.encode(), None).is_err() {
                    self.end(link, say, "", false);
                }
            }
            Step::Connect => match self.connect() {
                Ok(conn) => {
                    let s = self.session.as_ref().expect("in a session");
                    if sys::send(&s.fd, &Msg::Connected(self.cfg.if_name.clone()).encode(), None).is_err() {
                        return self.end(link, say, "", false);
                    }
                    *link.peer.lock().unwrap_or_else(|e| e.into_inner()) =
                        (format!("{} ({})", s.ss.peer_if_name, s.ss.peer_name), String::new());
                    say(2, &format!("connected to {} ({})", s.ss.peer_if_name, s.ss.peer_name));
                    link.publish(Some(conn));
                }
                Err(why) => self.refuse(link, say, why),
            },
            Step::Refuse(why) => self.refuse(link, say, &why),
            Step::Closed(reason) => {
                link.c.peer_disconnects.add(1);
                say(1, &format!("the client disconnected: {reason}"));
                link.set_reason(&reason);
                self.end(link, say, "", false);
            }
        }
    }

    /// The connection the session describes: rings checked and reset.
    fn connect(&mut self) -> Result<Conn, &'static str> {
        let wake = &self.cfg.wake;
        let s = self.session.as_mut().expect("in a session");
        let sizes: Vec<u64> = s.regions.iter().map(Mapping::len).collect();
        let make = |specs: &[Option<crate::proto::RingSpec>], fds: &mut [Option<OwnedFd>], rx: bool| {
            let mut out = Vec::new();
            for (spec, fd) in specs.iter().zip(fds.iter_mut()) {
                let Some(spec) = spec else {
                    out.push(None);
                    continue;
                };
                let bell = fd.take().map(|fd| Doorbell::new(fd, wake.clone()));
                // SAFETY: the session checked the ring lies inside its region
                // (8-byte aligned offset, header and descriptors within the size),
                // and the mapping lives in the same connection, dropped after it.
                let ring =
                    unsafe { Ring::new(&s.regions[usize::from(spec.region)], u64::from(spec.offset), spec.log2, bell) };
                if ring.cookie() != COOKIE {
                    return Err("Wrong ring cookie");
                }
                ring.head().store(0, Ordering::Relaxed);
                ring.tail().store(0, Ordering::Relaxed);
                if rx {
                    // We poll: the client need not signal us.
                    ring.flags().store(RING_FLAG_MASK_INT, Ordering::Relaxed);
                }
                out.push(Some(ring));
            }
            Ok(out)
        };
        let c2s = make(&s.ss.c2s, &mut s.c2s_fds, true)?;
        let s2c = make(&s.ss.s2c, &mut s.s2c_fds, false)?;
        Ok(Conn { c2s, s2c, sizes, layout: None, regions: std::mem::take(&mut s.regions) })
    }

    fn refuse(&mut self, link: &Link, say: &dyn Fn(u32, &str), why: &str) {
        link.c.refused.add(1);
        link.set_reason(why);
        say(1, &format!("refused the client: {why}"));
        self.end(link, say, why, true);
    }

    /// End the session (sending `why` if asked); the link goes down if it was up.
    fn end(&mut self, link: &Link, say: &dyn Fn(u32, &str), why: &str, tell: bool) {
        if let Some(s) = self.session.take() {
            if tell {
                disconnect(&s.fd, why);
            }
            if s.ss.phase == crate::proto::Phase::Connected && link.up.load(Ordering::Acquire) {
                link.publish(None);
                say(2, "link down");
            }
        }
    }
}

// ---- client ---------------------------------------------------------------------

struct Handshake {
    /// Messages still to send, each after the previous one's ACK.
    todo: VecDeque<(Msg, Option<RawFd>)>,
    conn: Option<Conn>,
    /// Keeps the region's file open until ADD_REGION is sent.
    _memfd: OwnedFd,
}

enum State {
    Down { next: Instant, last_err: String },
    Hello { fd: OwnedFd, since: Instant },
    Setup { fd: OwnedFd, since: Instant, h: Handshake },
    Up { fd: OwnedFd },
}

struct Client<'a> {
    cfg: &'a Config,
    q: Queues,
    notifier: Notifier,
}

impl<'a> Client<'a> {
    fn new(cfg: &'a Config, q: Queues) -> Self {
        Client { cfg, q, notifier: Notifier::new(cfg.wake.clone()) }
    }

    fn run(mut self, link: &Link, say: &dyn Fn(u32, &str)) {
        let mut st = State::Down { next: Instant::now(), last_err: String::new() };
        while !link.stop.load(Ordering::Acquire) {
            // Wait for the server's next message (or the time to connect) and for the
            // queues' requests for interrupts, whichever comes first.
            let mut fds = vec![self.notifier.fd()];
            let due = match &st {
                State::Hello { fd, .. } | State::Setup { fd, .. } | State::Up { fd } => {
                    fds.push(fd.as_raw_fd());
                    false
                }
                State::Down { next, .. } => Instant::now() >= *next,
            };
            let polled = sys::poll(&fds, if due { 0 } else { TICK_MS });
            self.notifier.serve(link, polled[0], say);
            // Connections every queue has moved past are freed here, not on an lcore.
            link.conns.collect();
            let ready = polled.get(1).copied().unwrap_or(false);
            st = match st {
                State::Down { next, last_err } if !due => State::Down { next, last_err },
                State::Down { last_err, .. } => self.connect(link, say, last_err),
                State::Hello { fd, since } => self.step(link, say, fd, since, None, ready),
                State::Setup { fd, since, h } => self.step(link, say, fd, since, Some(h), ready),
                State::Up { fd } => self.up(link, say, fd, ready),
            };
        }
        if let State::Up { fd } | State::Setup { fd, .. } | State::Hello { fd, .. } = &st {
            disconnect(fd, "Device stopped");
        }
    }

    /// Connect to the server, if it runs as a user we trust (anyone may bind an
    /// abstract name first, and would get our traffic).
    fn connect(&self, link: &Link, say: &dyn Fn(u32, &str), last_err: String) -> State {
        let err = match sys::connect(&self.cfg.sock) {
            Ok(fd) => match sys::peer_cred(&fd) {
                Ok((uid, _)) if self.cfg.admits(uid) => return State::Hello { fd, since: Instant::now() },
                Ok((uid, pid)) => {
                    link.c.refused_users.add(1);
                    format!(
                        "refused the server: it runs as uid {uid} (pid {pid}); only uid {} (ours), root or \
                         allow-uid= are trusted",
                        sys::euid()
                    )
                }
                Err(e) => {
                    link.c.refused_users.add(1);
                    format!("refused the server: its credentials cannot be read ({e})")
                }
            },
            Err(e) => {
                link.c.connect_failures.add(1);
                format!("cannot connect ({e})")
            }
        };
        if err != last_err {
            say(1, &format!("{err}; trying again every {} ms", RETRY.as_millis()));
        }
        State::Down { next: Instant::now() + RETRY, last_err: err }
    }

    fn down(&self, link: &Link, why: &str) -> State {
        link.set_reason(why);
        State::Down { next: Instant::now() + RETRY, last_err: String::new() }
    }

    /// One message of the handshake.
    fn step(
        &self,
        link: &Link,
        say: &dyn Fn(u32, &str),
        fd: OwnedFd,
        since: Instant,
        h: Option<Handshake>,
        ready: bool,
    ) -> State {
        let again = |fd, h: Option<Handshake>| match h {
            None => State::Hello { fd, since },
            Some(h) => State::Setup { fd, since, h },
        };
        if since.elapsed() > HANDSHAKE_TIMEOUT {
            link.c.timeouts.add(1);
            disconnect(&fd, "Handshake timeout");
            say(1, "the server did not finish the handshake in time");
            return self.down(link, "Handshake timeout");
        }
        if !ready {
            return again(fd, h);
        }
        let m = match sys::recv(&fd) {
            Ok(Some(r)) => Msg::parse(&r.bytes),
            Ok(None) => return again(fd, h),
            Err(e) => {
                say(1, &format!("the server went away during the handshake ({e})"));
                return self.down(link, "the peer closed the socket");
            }
        };
        let refuse = |why: &str| {
            link.c.refused.add(1);
            disconnect(&fd, why);
            say(1, &format!("refused the server: {why}"));
            self.down(link, why)
        };
        match (m, h) {
            (Ok(Msg::Disconnect { reason, .. }), _) => {
                link.c.peer_disconnects.add(1);
                say(1, &format!("the server refused us: {reason}"));
                self.down(link, &reason)
            }
            (Ok(hello @ Msg::Hello { .. }), None) => {
                let want = ClientRun { c2s: self.q.tx, s2c: self.q.rx, log2: self.cfg.log2 };
                let run = match ClientRun::agree(&hello, want) {
                    Ok(r) => r,
                    Err(why) => return refuse(why),
                };
                let h = match self.prepare(run) {
                    Ok(h) => h,
                    Err(e) => {
                        say(0, &format!("cannot create the shared memory: {e}"));
                        return refuse("Client memory setup failed");
                    }
                };
                self.send_next(link, say, fd, since, h)
            }
            (Ok(Msg::Ack), Some(h)) => self.send_next(link, say, fd, since, h),
            (Ok(Msg::Connected(name)), Some(mut h)) if h.todo.is_empty() => {
                let Some(conn) = h.conn.take() else { return refuse("Unexpected message") };
                for r in conn.s2c.iter().flatten() {
                    // We poll: the server need not signal us. Every buffer is
                    // posted at once (the descriptors were written with the rings),
                    // so the server can send before our first receive.
                    r.flags().store(RING_FLAG_MASK_INT, Ordering::Relaxed);
                    r.head().store(r.size() as u16, Ordering::Release);
                }
                *link.peer.lock().unwrap_or_else(|e| e.into_inner()) = (name.clone(), String::new());
                say(2, &format!("connected to {name}"));
                link.publish(Some(conn));
                State::Up { fd }
            }
            (Ok(_), _) => refuse("Unexpected message"),
            (Err(why), _) => refuse(why),
        }
    }

    fn send_next(&self, link: &Link, say: &dyn Fn(u32, &str), fd: OwnedFd, since: Instant, mut h: Handshake) -> State {
        let Some((m, afd)) = h.todo.pop_front() else {
            return State::Setup { fd, since, h };
        };
        if let Err(e) = sys::send(&fd, &m.encode(), afd) {
            say(1, &format!("cannot send to the server ({e})"));
            return self.down(link, "the peer closed the socket");
        }
        State::Setup { fd, since, h }
    }

    /// The region, its rings and their eventfds, and the messages that describe them.
    fn prepare(&self, run: ClientRun) -> io::Result<Handshake> {
        let layout = Layout::new(run, self.cfg.bsize).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        let memfd = sys::memfd(c"memif_region_0", layout.size())?;
        let map = Mapping::new(&memfd, layout.size())?;
        let mut todo = VecDeque::new();
        todo.push_back((
            Msg::Init {
                version: VERSION,
                id: self.cfg.id,
                mode: MODE_ETHERNET,
                secret: self.cfg.secret.unwrap_or([0; SECRET_SZ]),
                name: "ironpath".into(),
            },
            None,
        ));
        todo.push_back((Msg::AddRegion { index: 0, size: layout.size() }, Some(memfd.as_raw_fd())));
        let mut rings = |c2s: bool, n: u16| -> io::Result<Vec<Option<Ring>>> {
            let mut out = Vec::new();
            for i in 0..n {
                let off = layout.ring_offset(c2s, i);
                let ev = sys::eventfd()?;
                todo.push_back((
                    Msg::AddRing {
                        flags: if c2s { ADD_RING_FLAG_C2S } else { 0 },
                        index: i,
                        region: 0,
                        offset: off as u32,
                        log2_ring_size: run.log2,
                        private_hdr_size: 0,
                    },
                    Some(ev.as_raw_fd()),
                ));
                // SAFETY: the layout puts the ring inside the region (`Layout::size`
                // covers every ring), at a multiple of the ring size (16-byte aligned).
                let r = unsafe { Ring::new(&map, off, run.log2, Some(Doorbell::new(ev, self.cfg.wake.clone()))) };
                r.set_cookie(COOKIE);
                r.flags().store(0, Ordering::Relaxed);
                r.head().store(0, Ordering::Relaxed);
                r.tail().store(0, Ordering::Relaxed);
                for slot in 0..(1u32 << run.log2) {
                    let slot = slot as u16;
                    let offset = layout.buffer_offset(c2s, i, slot) as u32;
                    r.set_desc(
                        slot,
                        crate::proto::Desc { flags: 0, region: 0, length: layout.bsize, offset, metadata: 0 },
                    );
                }
                out.push(Some(r));
            }
            Ok(out)
        };
        let c2s = rings(true, run.c2s)?;
        let s2c = rings(false, run.s2c)?;
        todo.push_back((Msg::Connect(self.cfg.if_name.clone()), None));
        let conn = Conn { c2s, s2c, sizes: vec![layout.size()], layout: Some(layout), regions: vec![map] };
        Ok(Handshake { todo, conn: Some(conn), _memfd: memfd })
    }

    fn up(&self, link: &Link, say: &dyn Fn(u32, &str), fd: OwnedFd, ready: bool) -> State {
        if !ready {
            return State::Up { fd };
        }
        let why = match sys::recv(&fd) {
            Ok(None) => return State::Up { fd },
            Ok(Some(r)) => match Msg::parse(&r.bytes) {
                Ok(Msg::Disconnect { reason, .. }) => {
                    link.c.peer_disconnects.add(1);
                    format!("the server disconnected: {reason}")
                }
                Ok(_) => {
                    link.c.refused.add(1);
                    disconnect(&fd, "Unexpected message");
                    "refused the server: Unexpected message".to_string()
                }
                Err(why) => {
                    link.c.refused.add(1);
                    disconnect(&fd, why);
                    format!("refused the server: {why}")
                }
            },
            Err(e) => format!("the server went away ({e})"),
        };
        say(1, &format!("{why}; link down, reconnecting"));
        link.publish(None);
        self.down(link, &why)
    }
}
