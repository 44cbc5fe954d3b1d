//! The client's control thread: it connects (again every [`RETRY`] while the server is
//! away or untrusted), creates the region, its rings and their eventfds, and sends
//! `INIT`, `ADD_REGION`, `ADD_RING`s and `CONNECT`, one per `ACK`.

use super::{disconnect, Config, Level, Link, Log, Queues, HANDSHAKE_TIMEOUT, RETRY, TICK_MS};
use crate::notify::{Doorbell, Notifier};
use crate::proto::{
    ClientRun, Desc, Layout, Msg, ADD_RING_FLAG_C2S, COOKIE, MODE_ETHERNET, RING_FLAG_MASK_INT, SECRET_SZ, VERSION,
};
use crate::ring::{Conn, Ring};
use crate::sys::{self, Mapping};
use crate::wakeup::Relay;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// The client's side of a handshake after `HELLO`.
struct Handshake {
    /// Messages still to send, each after the previous one's ACK.
    todo: VecDeque<(Msg, Option<RawFd>)>,
    conn: Option<Conn>,
    /// Keeps the region's file open until ADD_REGION is sent.
    _memfd: OwnedFd,
}

/// Where the client is.
enum State {
    Down { next: Instant, last_err: String },
    Hello { fd: OwnedFd, since: Instant },
    Setup { fd: OwnedFd, since: Instant, h: Handshake },
    Up { fd: OwnedFd },
}

/// One client port's control thread.
pub(super) struct Client<'a> {
    cfg: &'a Config,
    link: &'a Link,
    log: &'a Log,
    q: Queues,
    notifier: Notifier,
    relay: Relay,
}

impl<'a> Client<'a> {
    pub(super) fn new(cfg: &'a Config, q: Queues, link: &'a Link, log: &'a Log) -> Self {
        Client { cfg, link, log, q, notifier: Notifier::new(cfg.wake.clone()), relay: Relay::default() }
    }

    /// Run until `link.stop`; a server still connected is told "Device stopped".
    pub(super) fn run(mut self) {
        let (link, log) = (self.link, self.log);
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
            // Then the receive rings of the queues that sleep.
            let rings_at = fds.len();
            self.relay.watch(link, &mut fds);
            let polled = sys::poll(&fds, if due { 0 } else { self.relay.timeout(TICK_MS) });
            self.relay.serve(link, &polled[rings_at..]);
            self.notifier.serve(link, polled[0], &|level, msg| log.say(level, msg));
            // Connections every queue has moved past are freed here, not on an lcore.
            link.conns.collect();
            let ready = rings_at > 1 && polled[1];
            st = match st {
                State::Down { next, last_err } if !due => State::Down { next, last_err },
                State::Down { last_err, .. } => self.connect(last_err),
                State::Hello { fd, since } => self.step(fd, since, None, ready),
                State::Setup { fd, since, h } => self.step(fd, since, Some(h), ready),
                State::Up { fd } => self.up(fd, ready),
            };
        }
        if let State::Up { fd } | State::Setup { fd, .. } | State::Hello { fd, .. } = &st {
            disconnect(fd, "Device stopped");
        }
    }

    /// Connect to the server, if it runs as a user we trust (anyone may bind an
    /// abstract name first, and would get our traffic).
    fn connect(&self, last_err: String) -> State {
        let err = match sys::connect(&self.cfg.sock) {
            Ok(fd) => match sys::peer_cred(&fd) {
                Ok((uid, _)) if self.cfg.admits(uid) => return State::Hello { fd, since: Instant::now() },
                Ok((uid, pid)) => {
                    self.link.c.refused_users.add(1);
                    format!(
                        "refused the server: it runs as uid {uid} (pid {pid}); only uid {} (ours), root or \
                         allow-uid= are trusted",
                        sys::euid()
                    )
                }
                Err(e) => {
                    self.link.c.refused_users.add(1);
                    format!("refused the server: its credentials cannot be read ({e})")
                }
            },
            Err(e) => {
                self.link.c.connect_failures.add(1);
                format!("cannot connect ({e})")
            }
        };
        if err != last_err {
            self.log.say(Level::Warning, &format!("{err}; trying again every {} ms", RETRY.as_millis()));
        }
        State::Down { next: Instant::now() + RETRY, last_err: err }
    }

    /// The link is down for `why`: connect again after [`RETRY`].
    fn down(&self, why: &str) -> State {
        self.link.set_reason(why);
        State::Down { next: Instant::now() + RETRY, last_err: String::new() }
    }

    /// Refuse the server during the handshake: counted, told and logged.
    fn refuse(&self, fd: &OwnedFd, why: &str) -> State {
        self.link.c.refused.add(1);
        disconnect(fd, why);
        self.log.say(Level::Warning, &format!("refused the server: {why}"));
        self.down(why)
    }

    /// One message of the handshake.
    fn step(&self, fd: OwnedFd, since: Instant, h: Option<Handshake>, ready: bool) -> State {
        let again = |fd, h: Option<Handshake>| match h {
            None => State::Hello { fd, since },
            Some(h) => State::Setup { fd, since, h },
        };
        if since.elapsed() > HANDSHAKE_TIMEOUT {
            self.link.c.timeouts.add(1);
            disconnect(&fd, "Handshake timeout");
            self.log.say(Level::Warning, "the server did not finish the handshake in time");
            return self.down("Handshake timeout");
        }
        if !ready {
            return again(fd, h);
        }
        let m = match sys::recv(&fd) {
            Ok(Some(r)) => Msg::parse(&r.bytes),
            Ok(None) => return again(fd, h),
            Err(e) => {
                self.log.say(Level::Warning, &format!("the server went away during the handshake ({e})"));
                return self.down("the peer closed the socket");
            }
        };
        match (m, h) {
            (Ok(Msg::Disconnect { reason, .. }), _) => {
                self.link.c.peer_disconnects.add(1);
                self.log.say(Level::Warning, &format!("the server refused us: {reason}"));
                self.down(&reason)
            }
            (Ok(hello @ Msg::Hello { .. }), None) => {
                let want = ClientRun { c2s: self.q.tx, s2c: self.q.rx, log2: self.cfg.log2 };
                let run = match ClientRun::agree(&hello, want) {
                    Ok(r) => r,
                    Err(why) => return self.refuse(&fd, why),
                };
                let h = match self.prepare(run) {
                    Ok(h) => h,
                    Err(e) => {
                        self.log.say(Level::Error, &format!("cannot create the shared memory: {e}"));
                        return self.refuse(&fd, "Client memory setup failed");
                    }
                };
                self.send_next(fd, since, h)
            }
            (Ok(Msg::Ack), Some(h)) => self.send_next(fd, since, h),
            (Ok(Msg::Connected(name)), Some(mut h)) if h.todo.is_empty() => {
                let Some(conn) = h.conn.take() else { return self.refuse(&fd, "Unexpected message") };
                for r in conn.s2c.iter().flatten() {
                    // We poll: the server need not signal us. Every buffer is
                    // posted at once (the descriptors were written with the rings),
                    // so the server can send before our first receive.
                    r.flags().store(RING_FLAG_MASK_INT, Ordering::Relaxed);
                    r.head().store(r.size() as u16, Ordering::Release);
                }
                *self.link.peer.lock().unwrap_or_else(|e| e.into_inner()) = (name.clone(), String::new());
                self.log.say(Level::Info, &format!("connected to {name}"));
                self.link.publish(Some(conn));
                State::Up { fd }
            }
            (Ok(_), _) => self.refuse(&fd, "Unexpected message"),
            (Err(why), _) => self.refuse(&fd, why),
        }
    }

    /// Send the handshake's next message, if any is left.
    fn send_next(&self, fd: OwnedFd, since: Instant, mut h: Handshake) -> State {
        let Some((m, afd)) = h.todo.pop_front() else {
            return State::Setup { fd, since, h };
        };
        if let Err(e) = sys::send(&fd, &m.encode(), afd) {
            self.log.say(Level::Warning, &format!("cannot send to the server ({e})"));
            return self.down("the peer closed the socket");
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
                    r.set_desc(slot, Desc { flags: 0, region: 0, length: layout.bsize, offset, metadata: 0 });
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

    /// The link is up: the server's message (only `DISCONNECT` is expected) ends it.
    fn up(&self, fd: OwnedFd, ready: bool) -> State {
        if !ready {
            return State::Up { fd };
        }
        let why = match sys::recv(&fd) {
            Ok(None) => return State::Up { fd },
            Ok(Some(r)) => match Msg::parse(&r.bytes) {
                Ok(Msg::Disconnect { reason, .. }) => {
                    self.link.c.peer_disconnects.add(1);
                    format!("the server disconnected: {reason}")
                }
                Ok(_) => {
                    self.link.c.refused.add(1);
                    disconnect(&fd, "Unexpected message");
                    "refused the server: Unexpected message".to_string()
                }
                Err(why) => {
                    self.link.c.refused.add(1);
                    disconnect(&fd, why);
                    format!("refused the server: {why}")
                }
            },
            Err(e) => format!("the server went away ({e})"),
        };
        self.log.say(Level::Warning, &format!("{why}; link down, reconnecting"));
        self.link.publish(None);
        self.down(&why)
    }
}
