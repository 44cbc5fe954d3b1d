//! The server's control thread: it accepts connections on the port's [`Listener`],
//! sends each `HELLO`, waits (bounded in number and time) for their `INIT`, and walks
//! one client of this port through the handshake to a connection.

use super::listener::{Handoff, Listener};
use super::{disconnect, Config, Level, Link, Log, Queues, HANDSHAKE_TIMEOUT, INIT_TIMEOUT, MAX_PENDING, TICK_MS};
use crate::notify::{Doorbell, Notifier};
use crate::proto::{
    Msg, Phase, RingSpec, ServerLimits, ServerSession, Step, ADD_RING_FLAG_C2S, COOKIE, RING_FLAG_MASK_INT,
};
use crate::ring::{Conn, Ring};
use crate::sys::{self, Mapping};
use crate::wakeup::Relay;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The handshake of the client this port serves, and what it brought so far.
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

/// One server port's control thread.
pub(super) struct Server<'a> {
    cfg: &'a Config,
    link: &'a Link,
    log: &'a Log,
    lim: ServerLimits,
    listener: Arc<Listener>,
    inbox: Arc<Mutex<Vec<Handoff>>>,
    waiting: Vec<Waiting>,
    session: Option<Session>,
    notifier: Notifier,
    relay: Relay,
}

impl<'a> Server<'a> {
    pub(super) fn new(cfg: &'a Config, q: Queues, listener: Arc<Listener>, link: &'a Link, log: &'a Log) -> Self {
        let lim = ServerLimits { id: cfg.id, secret: cfg.secret, c2s: q.rx, s2c: q.tx, name: "ironpath".into() };
        let inbox = listener.inbox(cfg.id).unwrap_or_default();
        let notifier = Notifier::new(cfg.wake.clone());
        Server {
            cfg,
            link,
            log,
            lim,
            listener,
            inbox,
            waiting: Vec::new(),
            session: None,
            notifier,
            relay: Relay::default(),
        }
    }

    /// Serve until `link.stop`; a client still connected is told "Device stopped".
    pub(super) fn run(mut self) {
        let (link, log) = (self.link, self.log);
        while !link.stop.load(Ordering::Acquire) {
            let had_session = self.session.is_some();
            let mut fds = vec![self.notifier.fd(), self.listener.fd.as_raw_fd()];
            fds.extend(self.session.as_ref().map(|s| s.fd.as_raw_fd()));
            fds.extend(self.waiting.iter().map(|w| w.0.as_raw_fd()));
            // Then the receive rings of the queues that sleep.
            let rings_at = fds.len();
            self.relay.watch(link, &mut fds);
            let ready = sys::poll(&fds, self.relay.timeout(TICK_MS));
            self.relay.serve(link, &ready[rings_at..]);
            self.notifier.serve(link, ready[0], &|level, msg| log.say(level, msg));
            // Connections every queue has moved past are freed here, not on an lcore.
            link.conns.collect();
            if ready[1] {
                self.accept();
            }
            if had_session && ready[2] {
                self.on_session();
            }
            let skip = 2 + usize::from(had_session);
            let ready_waiting: Vec<bool> = ready.get(skip..rings_at).map(<[bool]>::to_vec).unwrap_or_default();
            self.on_waiting(&ready_waiting);
            // Connections other ports of this process accepted for us.
            let handed: Vec<Handoff> = std::mem::take(&mut *self.inbox.lock().unwrap_or_else(|e| e.into_inner()));
            for (fd, since, init, uid) in handed {
                self.take_init(fd, since, init, uid);
            }
            // A handshake that does not finish in time.
            if let Some(s) = &self.session {
                if s.ss.phase != Phase::Connected && s.since.elapsed() > HANDSHAKE_TIMEOUT {
                    link.c.timeouts.add(1);
                    self.end("Handshake timeout", true);
                }
            }
        }
        if let Some(s) = &self.session {
            disconnect(&s.fd, "Device stopped");
        }
    }

    /// Count a peer refused for its user, and log it (the 1st, 2nd, 4th, 8th... time).
    fn refuse_user(&self, uid: u32, pid: Option<i32>) {
        self.link.c.refused_users.add(1);
        let n = self.link.c.refused_users.get();
        if n.is_power_of_two() {
            let pid = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
            self.log.say(
                Level::Warning,
                &format!(
                    "refused a connection from uid {uid}{pid}: only uid {} (ours), root or allow-uid= may connect \
                     ({n} refused so far)",
                    sys::euid()
                ),
            );
        }
    }

    /// Refuse a client that has no session (yet): counted, told and logged.
    fn refuse_client(&self, fd: &OwnedFd, why: &str) {
        self.link.c.refused.add(1);
        self.link.set_reason(why);
        disconnect(fd, why);
        self.log.say(Level::Warning, &format!("refused a client: {why}"));
    }

    fn accept(&mut self) {
        while let Ok(Some(fd)) = sys::accept(&self.listener.fd) {
            // Who connected: an abstract socket has no file mode to keep others out.
            let (uid, pid) = sys::peer_cred(&fd).unwrap_or((u32::MAX, 0));
            if !self.listener.admits(uid) {
                self.refuse_user(uid, Some(pid));
                disconnect(&fd, "Permission denied");
                continue;
            }
            if self.waiting.len() >= MAX_PENDING {
                self.link.c.overflow.add(1);
                disconnect(&fd, "Too many connections waiting");
                let n = self.link.c.overflow.get();
                if n.is_power_of_two() {
                    self.log
                        .say(Level::Warning, &format!("refused a client: Too many connections waiting ({n} so far)"));
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
                self.log.say(Level::Debug, "a client left before HELLO");
            }
        }
    }

    /// Connections that have not sent INIT yet.
    fn on_waiting(&mut self, ready: &[bool]) {
        let mut keep = Vec::new();
        for (i, (fd, since, uid)) in std::mem::take(&mut self.waiting).into_iter().enumerate() {
            if !ready.get(i).copied().unwrap_or(false) {
                if since.elapsed() > INIT_TIMEOUT {
                    self.link.c.timeouts.add(1);
                    disconnect(&fd, "Handshake timeout");
                    self.log.say(Level::Warning, "a client sent no INIT in time: closed");
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
            match m {
                Ok(init @ Msg::Init { .. }) => {
                    let Msg::Init { id, .. } = init else { unreachable!() };
                    if id == self.lim.id {
                        self.take_init(fd, since, init, uid);
                    } else if let Some(inbox) = self.listener.inbox(id) {
                        // Another port of this process serves it.
                        inbox.lock().unwrap_or_else(|e| e.into_inner()).push((fd, since, init, uid));
                    } else {
                        self.refuse_client(&fd, "ID not found");
                    }
                }
                Ok(Msg::Disconnect { reason, .. }) => {
                    self.link.c.peer_disconnects.add(1);
                    self.log.say(Level::Warning, &format!("a client disconnected before INIT: {reason}"));
                }
                Ok(_) => self.refuse_client(&fd, "Unexpected message"),
                Err(why) => self.refuse_client(&fd, why),
            }
        }
        keep.extend(std::mem::take(&mut self.waiting));
        self.waiting = keep;
    }

    /// A client's `INIT` for this port (read here or handed over by another port).
    fn take_init(&mut self, fd: OwnedFd, since: Instant, init: Msg, uid: u32) {
        if !self.cfg.admits(uid) {
            // Admitted by another port's allow-uid, not by this one.
            self.refuse_user(uid, None);
            return disconnect(&fd, "Permission denied");
        }
        if self.session.is_some() {
            return self.refuse_client(&fd, "Already connected");
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
            Step::Refuse(why) => self.refuse_client(&fd, &why),
            _ => {}
        }
    }

    /// The session's next message.
    fn on_session(&mut self) {
        let (link, log) = (self.link, self.log);
        let Some(s) = self.session.as_mut() else { return };
        let r = match sys::recv(&s.fd) {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) => {
                log.say(Level::Warning, &format!("the client went away ({e})"));
                link.set_reason("the peer closed the socket");
                self.end("", false);
                return;
            }
        };
        let m = match Msg::parse(&r.bytes) {
            Ok(m) => m,
            Err(why) => return self.refuse(why),
        };
        let mut sealed = true;
        let fd_size = match (&m, &r.fd) {
            (Msg::AddRegion { .. }, Some(fd)) => {
                // Sealed first, so that the size checked cannot shrink afterwards.
                sealed = sys::seal_shrink(fd);
                Some(sys::file_size(fd).unwrap_or(0))
            }
            (Msg::AddRing { .. }, Some(fd)) if s.ss.phase == Phase::Setup && !sys::is_eventfd(fd) => {
                // Signalled from our side: a pipe or a socket could block us, a file
                // would be written.
                link.c.bad_interrupt_fds.add(1);
                return self.refuse("Interrupt fd not an eventfd");
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
                                return self.refuse("Region not sealed against shrinking");
                            }
                            link.c.unsealed.add(1);
                            log.say(
                                Level::Warning,
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
                                log.say(Level::Error, &format!("cannot map a region of {size} bytes: {e}"));
                                return self.refuse("Region mmap failed");
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
                    self.end("", false);
                }
            }
            Step::Connect => match self.connect() {
                Ok(conn) => {
                    let s = self.session.as_ref().expect("in a session");
                    if sys::send(&s.fd, &Msg::Connected(self.cfg.if_name.clone()).encode(), None).is_err() {
                        return self.end("", false);
                    }
                    *link.peer.lock().unwrap_or_else(|e| e.into_inner()) =
                        (format!("{} ({})", s.ss.peer_if_name, s.ss.peer_name), String::new());
                    log.say(Level::Info, &format!("connected to {} ({})", s.ss.peer_if_name, s.ss.peer_name));
                    link.publish(Some(conn));
                }
                Err(why) => self.refuse(why),
            },
            Step::Refuse(why) => self.refuse(&why),
            Step::Closed(reason) => {
                link.c.peer_disconnects.add(1);
                log.say(Level::Warning, &format!("the client disconnected: {reason}"));
                link.set_reason(&reason);
                self.end("", false);
            }
        }
    }

    /// The connection the session describes: rings checked and reset.
    fn connect(&mut self) -> Result<Conn, &'static str> {
        let wake = &self.cfg.wake;
        let s = self.session.as_mut().expect("in a session");
        let sizes: Vec<u64> = s.regions.iter().map(Mapping::len).collect();
        let make = |specs: &[Option<RingSpec>], fds: &mut [Option<OwnedFd>], rx: bool| {
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

    /// Refuse the session's client: counted, told, logged, and the session ended.
    fn refuse(&mut self, why: &str) {
        self.link.c.refused.add(1);
        self.link.set_reason(why);
        self.log.say(Level::Warning, &format!("refused the client: {why}"));
        self.end(why, true);
    }

    /// End the session (sending `why` if asked); the link goes down if it was up.
    fn end(&mut self, why: &str, tell: bool) {
        if let Some(s) = self.session.take() {
            if tell {
                disconnect(&s.fd, why);
            }
            if s.ss.phase == Phase::Connected && self.link.up.load(Ordering::Acquire) {
                self.link.publish(None);
                self.log.say(Level::Info, "link down");
            }
        }
    }
}
