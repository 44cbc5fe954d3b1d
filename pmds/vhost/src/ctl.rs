//! The control thread: the vhost-user socket (a server that a front end connects
//! to, or a client that connects to a front end's server and reconnects every
//! 0.5 s), the requests, and the signals the guest asked for.
//!
//! The thread owns everything the front end handed over (the memory table, the kick
//! and call descriptors) and is the only one to drop them; a queue reaches a ring
//! through the ring's lock, which it only tries (a queue never waits), and never
//! holds the memory past its burst. A ring changed here (new addresses, a new
//! memory table, stopped by `GET_VRING_BASE`) is changed under its lock, so a queue
//! sees the old ring or the new one, whole. When the guest asks to be signalled, the
//! queue marks the ring and pokes our eventfd; this thread signals the front end's
//! call eventfd through the kernel's asynchronous I/O, which cannot block whatever
//! the front end did to that descriptor.
//!
//! One front end at a time: another that connects while one is served is closed at
//! once (counted). A request that breaks the protocol (a bad header, sizes, a ring
//! index beyond our rings, a ring that does not translate into the memory table)
//! closes the connection, counted; the rings then stop until a front end sets them
//! up again. A front end that stalls in the middle of a message is given 1 s.

use crate::mem::MemTable;
use crate::proto::{self, feat, has, pfeat, req, Msg};
use crate::vring::{Negotiated, Vring};
use ironpath_pmd_sdk::ipc::{self, Signaller};
use ironpath_pmd_sdk::Counter;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Counters of the control path (read by the xstats).
#[derive(Debug, Default)]
pub struct CtlCounters {
    /// Front ends connected (or connected to).
    pub connects: Counter,
    /// Connections that ended (closed by either side).
    pub disconnects: Counter,
    /// Connections closed for breaking the protocol.
    pub protocol_errors: Counter,
    /// Front ends refused: another was being served, or another user's process.
    pub refused: Counter,
    /// Requests we do not take (answered with a failure when asked).
    pub unknown_requests: Counter,
    /// Memory regions whose file could shrink under us (not sealed, or hugetlbfs).
    pub unsealed_regions: Counter,
    /// Call descriptors that were no eventfd (the ring is then never signalled).
    pub bad_call_fds: Counter,
    /// Signals sent to the guest.
    pub calls: Counter,
    /// Kicks that woke a sleeping RX queue.
    pub kick_wakeups: Counter,
    /// Kick descriptors that are not eventfds (kept; such a ring's queue polls).
    pub bad_kick_fds: Counter,
    /// Connection attempts of a client that failed.
    pub connect_failures: Counter,
}

/// What the device and its queues share.
#[derive(Debug)]
pub struct Shared {
    /// Ring `2q` is the guest's RX queue `q` (our TX), `2q + 1` its TX (our RX).
    pub rings: Vec<Mutex<Vring>>,
    /// A queue marked the ring: the guest wants a signal.
    pub call_pending: Vec<AtomicBool>,
    /// Our eventfd, poked by a queue that marked a ring.
    pub wake: OwnedFd,
    /// Per queue pair: the wake-up source of our RX queue (an eventfd of ours, the
    /// same across connections), which the thread writes when the guest kicks that
    /// ring while the queue's lcore sleeps.
    pub rx_wake: Vec<OwnedFd>,
    /// Per queue pair: its RX queue's lcore is about to sleep (kicks are watched).
    pub rx_armed: Vec<AtomicBool>,
    /// Per ring: the front end gave an eventfd to kick it with (one the thread can
    /// read without waiting).
    pub kickable: Vec<AtomicBool>,
    /// The link: a front end set up the first queue pair.
    pub up: AtomicBool,
    /// Ask the thread to end.
    pub stop: AtomicBool,
    pub c: CtlCounters,
}

impl Shared {
    /// State for `pairs` queue pairs.
    pub fn new(pairs: u16) -> io::Result<Shared> {
        let n = 2 * usize::from(pairs);
        Ok(Shared {
            rings: (0..n).map(|_| Mutex::new(Vring::default())).collect(),
            call_pending: (0..n).map(|_| AtomicBool::new(false)).collect(),
            wake: ipc::eventfd()?,
            rx_wake: (0..pairs).map(|_| ipc::eventfd()).collect::<io::Result<_>>()?,
            rx_armed: (0..pairs).map(|_| AtomicBool::new(false)).collect(),
            kickable: (0..n).map(|_| AtomicBool::new(false)).collect(),
            up: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            c: CtlCounters::default(),
        })
    }

    /// Ring `i`, waiting for a queue's burst to end (control thread only).
    pub fn ring(&self, i: usize) -> MutexGuard<'_, Vring> {
        self.rings[i].lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How the device reaches its front end.
#[derive(Debug, Clone)]
pub struct Config {
    /// The socket's path.
    pub path: String,
    /// Connect to a front end's server (else listen).
    pub client: bool,
    /// The features we offer.
    pub features: u64,
    /// Queue pairs we serve.
    pub pairs: u16,
    /// The port's name, for the log.
    pub name: String,
    /// Refuse memory whose file could shrink under us.
    pub require_sealed: bool,
}

/// Log `msg` at host level `level` (1 warning, 2 information), naming the port.
fn say(cfg: &Config, level: u32, msg: &str) {
    ironpath_pmd_sdk::log(level, &format!("net_vhost {} ({}): {msg}", cfg.name, cfg.path));
}

/// What one connection negotiated and handed over.
#[derive(Default)]
struct Session {
    features: u64,
    protocol: u64,
    mem: Option<Arc<MemTable>>,
    calls: Vec<Option<OwnedFd>>,
    kicks: Vec<Option<OwnedFd>>,
}

/// A request as read: request, flags, payload, descriptors.
type Request = (u32, u32, Vec<u8>, Vec<OwnedFd>);

/// Read one request: its header with the descriptors that came with it, then its
/// payload. `Ok(None)`: the front end closed the connection.
fn recv(s: &UnixStream, stop: &AtomicBool) -> io::Result<Option<Request>> {
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut h = [0u8; proto::HDR_SIZE];
    let mut cbuf = [0u64; 32];
    let mut iov = libc::iovec { iov_base: h.as_mut_ptr().cast(), iov_len: h.len() };
    // SAFETY: an all-zero msghdr is valid; the pointers set below outlive the call.
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf.as_mut_ptr().cast();
    mh.msg_controllen = std::mem::size_of_val(&cbuf) as _;
    // SAFETY: `mh` describes live buffers of the sizes given.
    let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut mh, libc::MSG_WAITALL | libc::MSG_CMSG_CLOEXEC) };
    let mut fds = Vec::new();
    if n > 0 {
        // SAFETY: walks the control buffer the kernel filled, with its own macros.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&mh);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(c).cast::<RawFd>();
                    let count = ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
                    for k in 0..count {
                        fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(k))));
                    }
                }
                c = libc::CMSG_NXTHDR(&mh, c);
            }
        }
    }
    if n == 0 {
        return Ok(None);
    }
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if (n as usize) < h.len() || mh.msg_flags & libc::MSG_CTRUNC != 0 {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "short header or too many descriptors"));
    }
    let (request, flags, size) =
        proto::header(&h).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.as_str()))?;
    // The payload within the message's second, whatever pace the front end reads at.
    let mut p = vec![0u8; size];
    let mut got = 0;
    while got < size {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stop.load(Ordering::Acquire) {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "message not complete within 1 s"));
        }
        if !ipc::poll(&[s.as_raw_fd()], left.as_millis().clamp(1, 1000) as i32)[0] {
            continue;
        }
        match (&*s).read(&mut p[got..]) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed in a message")),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted || e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some((request, flags, p, fds)))
}

/// Connect to `path` without waiting: a server whose backlog is full (it never
/// accepts) counts as one that is not there.
fn connect_now(path: &str) -> io::Result<UnixStream> {
    let addr = std::os::unix::net::SocketAddr::from_pathname(path)?;
    // SAFETY: plain socket(2); the result is checked.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor we own.
    let s = unsafe { UnixStream::from_raw_fd(fd) };
    // SAFETY: an all-zero sockaddr_un is valid; the path is copied in below.
    let mut un: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    un.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let b = addr.as_pathname().and_then(|p| p.to_str()).unwrap_or_default().as_bytes();
    if b.is_empty() || b.len() >= un.sun_path.len() {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    for (i, &c) in b.iter().enumerate() {
        un.sun_path[i] = c as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    // SAFETY: `un` is a valid address of `len` bytes.
    if unsafe { libc::connect(s.as_raw_fd(), (&un as *const libc::sockaddr_un).cast(), len) } < 0 {
        return Err(io::Error::last_os_error());
    }
    s.set_nonblocking(false)?;
    Ok(s)
}

/// Whether the peer runs as our user or root.
fn trusted_peer(s: &UnixStream) -> bool {
    let mut cred = libc::ucred { pid: 0, uid: u32::MAX, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt fills `cred` (of `len` bytes) for a socket we hold.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    r == 0 && (cred.uid == me || cred.uid == 0)
}

/// Listen on `path` (a stale socket file is replaced; the socket is `0600`).
pub fn listen(path: &str) -> io::Result<UnixListener> {
    let is_socket = std::fs::symlink_metadata(path).is_ok_and(|m| {
        use std::os::unix::fs::FileTypeExt as _;
        m.file_type().is_socket()
    });
    // A socket file no one listens on is stale; one whose server never accepts (its
    // backlog full) is in use.
    if is_socket && connect_now(path).is_err_and(|e| e.raw_os_error() == Some(libc::ECONNREFUSED)) {
        let _ = std::fs::remove_file(path);
    }
    let l = UnixListener::bind(path)?;
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// The thread's loop, until `shared.stop`.
pub fn run(cfg: Config, shared: Arc<Shared>, listener: Option<UnixListener>) {
    let sig = Signaller::new().ok();
    let mut conn: Option<UnixStream> = None;
    let mut sess = Session::default();
    let mut next_try = Instant::now();
    while !shared.stop.load(Ordering::Acquire) {
        if conn.is_none() {
            conn = if cfg.client {
                if Instant::now() >= next_try {
                    next_try = Instant::now() + Duration::from_millis(500);
                    match connect_now(&cfg.path) {
                        Ok(s) if trusted_peer(&s) => Some(s),
                        Ok(_) => {
                            shared.c.refused.add(1);
                            None
                        }
                        Err(_) => {
                            shared.c.connect_failures.add(1);
                            None
                        }
                    }
                } else {
                    None
                }
            } else {
                accept(listener.as_ref(), &shared)
            };
            if let Some(s) = &conn {
                let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
                let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
                shared.c.connects.add(1);
                say(&cfg, 2, "front end connected");
                sess = Session::default();
                let n = shared.rings.len();
                sess.calls.resize_with(n, || None);
                sess.kicks.resize_with(n, || None);
            }
        } else if let Some(l) = &listener {
            // Another front end while one is served: closed at once.
            if let Ok((s, _)) = l.accept() {
                drop(s);
                shared.c.refused.add(1);
            }
        }
        let mut fds = vec![shared.wake.as_raw_fd()];
        if let Some(s) = &conn {
            fds.push(s.as_raw_fd());
        } else if let Some(l) = &listener {
            fds.push(l.as_raw_fd());
        }
        // The kicks of the rings whose RX queue sleeps, after the fixed two.
        let watched = watched_kicks(&shared, &sess);
        if fds.len() == 1 {
            fds.push(-1);
        }
        fds.extend(watched.iter().map(|&(_, fd)| fd));
        let ready = ipc::poll(&fds, 100);
        if ready[0] {
            ipc::drain(shared.wake.as_raw_fd());
        }
        signal_calls(&shared, &sess, sig.as_ref());
        for (&(q, fd), _) in watched.iter().zip(&ready[2..]).filter(|(_, &r)| r) {
            // The guest kicked: its count taken (never waiting, whatever it did to
            // the file's flags), the sleeping queue woken.
            // One wake-up per arming: the kick is not watched again until the queue
            // arms again (a front end that fills a semaphore eventfd, each read
            // taking 1, would otherwise keep this thread busy).
            let _ = ipc::read_nowait(fd);
            shared.rx_armed[q].store(false, Ordering::Release);
            shared.c.kick_wakeups.add(1);
            ipc::poke(shared.rx_wake[q].as_raw_fd());
        }
        if ready.get(1) == Some(&true) {
            if let Some(s) = &conn {
                let was_up = shared.up.load(Ordering::Acquire);
                let res = match recv(s, &shared.stop) {
                    Ok(Some((request, flags, payload, fds))) => {
                        handle(&cfg, &shared, &mut sess, s, request, flags, &payload, fds)
                    }
                    Ok(None) => Err(io::Error::new(io::ErrorKind::ConnectionAborted, "")),
                    Err(e) => Err(e),
                };
                // Whatever the request changed (a ring set up again, its memory
                // moved), a sleeping queue looks again.
                wake_armed(&shared);
                match res {
                    Ok(()) => {
                        let up = shared.up.load(Ordering::Acquire);
                        if up != was_up {
                            say(
                                &cfg,
                                2,
                                if up { "queue pair 0 ready: link up" } else { "queue pair 0 stopped: link down" },
                            );
                        }
                    }
                    Err(e) => {
                        if e.kind() != io::ErrorKind::ConnectionAborted {
                            shared.c.protocol_errors.add(1);
                            say(&cfg, 1, &format!("front end refused: {e}"));
                        }
                        let again = if cfg.client { ", reconnecting" } else { "" };
                        say(&cfg, 2, &format!("front end gone: link down{again}"));
                        conn = None;
                        end_session(&shared, &mut sess);
                    }
                }
            }
        }
    }
    end_session(&shared, &mut sess);
}

fn accept(l: Option<&UnixListener>, shared: &Shared) -> Option<UnixStream> {
    let (s, _) = l?.accept().ok()?;
    if !trusted_peer(&s) {
        shared.c.refused.add(1);
        return None;
    }
    s.set_nonblocking(false).ok()?;
    Some(s)
}

/// The connection ended: every ring stops and forgets the memory (unmapped here,
/// once the last ring let go of it); the indices stay.
fn end_session(shared: &Shared, sess: &mut Session) {
    if sess.calls.is_empty() {
        return;
    }
    shared.up.store(false, Ordering::Release);
    for i in 0..shared.rings.len() {
        shared.ring(i).clear();
        shared.kickable[i].store(false, Ordering::Release);
    }
    shared.c.disconnects.add(1);
    *sess = Session::default();
}

/// (queue pair, kick descriptor) of the RX queues about to sleep whose guest TX
/// ring has a kick eventfd.
fn watched_kicks(shared: &Shared, sess: &Session) -> Vec<(usize, RawFd)> {
    let mut w = Vec::new();
    for (q, armed) in shared.rx_armed.iter().enumerate() {
        let r = 2 * q + 1;
        if armed.load(Ordering::Acquire) && shared.kickable[r].load(Ordering::Acquire) {
            if let Some(Some(fd)) = sess.kicks.get(r) {
                w.push((q, fd.as_raw_fd()));
            }
        }
    }
    w
}

/// Wake every RX queue about to sleep (it polls once and sleeps again if nothing
/// came).
fn wake_armed(shared: &Shared) {
    // The ring's lock released (a store) before the armed flags are read: a queue
    // that armed while we held it either polls after this or is woken here.
    std::sync::atomic::fence(Ordering::SeqCst);
    for (q, armed) in shared.rx_armed.iter().enumerate() {
        if armed.load(Ordering::Acquire) {
            ipc::poke(shared.rx_wake[q].as_raw_fd());
        }
    }
}

/// Signal the rings whose queue asked.
fn signal_calls(shared: &Shared, sess: &Session, sig: Option<&Signaller>) {
    for (i, p) in shared.call_pending.iter().enumerate() {
        if p.load(Ordering::Relaxed) && p.swap(false, Ordering::AcqRel) {
            if let (Some(Some(fd)), Some(sig)) = (sess.calls.get(i), sig) {
                shared.c.calls.add(sig.signal(&[fd.as_raw_fd()]) as u64);
            }
        }
    }
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// What the data path follows from the features.
fn negotiated(features: u64) -> Negotiated {
    let mrg = has(features, feat::MRG_RXBUF);
    Negotiated {
        hdr_len: if mrg || has(features, feat::VERSION_1) { 12 } else { 10 },
        mrg,
        guest_csum: has(features, feat::GUEST_CSUM),
        guest_tso: has(features, feat::GUEST_TSO4) && has(features, feat::GUEST_TSO6),
        in_order: has(features, feat::IN_ORDER),
    }
}

/// Act on one request; an error closes the connection.
#[allow(clippy::too_many_arguments)]
fn handle(
    cfg: &Config,
    shared: &Shared,
    sess: &mut Session,
    s: &UnixStream,
    request: u32,
    flags: u32,
    payload: &[u8],
    fds: Vec<OwnedFd>,
) -> io::Result<()> {
    let msg = proto::parse(request, payload, fds.len()).map_err(|e| invalid(e.as_str()))?;
    let ack = flags & proto::F_NEED_REPLY != 0 && has(sess.protocol, pfeat::REPLY_ACK);
    let mut w = s;
    let ring_index = |i: u32| -> io::Result<usize> {
        let i = i as usize;
        if i < shared.rings.len() {
            Ok(i)
        } else {
            Err(invalid("ring index beyond our queues"))
        }
    };
    let mut ok = true;
    match msg {
        Msg::Plain(req::GET_FEATURES) => return w.write_all(&proto::reply_u64(request, cfg.features)),
        Msg::Plain(req::GET_PROTOCOL_FEATURES) => {
            return w.write_all(&proto::reply_u64(request, proto::OFFERED_PROTOCOL))
        }
        Msg::Plain(req::GET_QUEUE_NUM) => return w.write_all(&proto::reply_u64(request, u64::from(cfg.pairs))),
        Msg::Plain(req::SET_OWNER) => {}
        Msg::Plain(_) => {
            // RESET_OWNER: the rings stop, as at a disconnection.
            for i in 0..shared.rings.len() {
                shared.ring(i).clear();
            }
            shared.up.store(false, Ordering::Release);
        }
        Msg::U64(req::SET_FEATURES, f) => {
            if f & !cfg.features != 0 {
                return Err(invalid("features we did not offer"));
            }
            sess.features = f;
            let neg = negotiated(f);
            for i in 0..shared.rings.len() {
                shared.ring(i).neg = neg;
            }
        }
        Msg::U64(req::SET_PROTOCOL_FEATURES, f) => sess.protocol = f & proto::OFFERED_PROTOCOL,
        Msg::U64(..) => {}
        Msg::MemTable(regions) => match MemTable::map(&regions, &fds, !cfg.require_sealed) {
            Ok(t) => {
                shared.c.unsealed_regions.add(t.unsealed as u64);
                let t = Arc::new(t);
                for i in 0..shared.rings.len() {
                    let mut r = shared.ring(i);
                    r.mem = Some(t.clone());
                    if r.addr.is_some() && !r.translate() {
                        r.broken = true;
                    }
                }
                // The old table is unmapped here, once no ring holds it.
                sess.mem = Some(t);
            }
            Err(e) => {
                say(cfg, 1, &format!("memory table refused: {e}"));
                ok = false;
            }
        },
        Msg::State(req::SET_VRING_NUM, i, num) => {
            let i = ring_index(i)?;
            if num == 0 || !num.is_power_of_two() || num > crate::vring::MAX_RING {
                return Err(invalid("ring size not a power of two up to 32768"));
            }
            let mut r = shared.ring(i);
            r.num = num;
            if r.addr.is_some() {
                r.translate();
            }
        }
        Msg::State(req::SET_VRING_BASE, i, num) => {
            let i = ring_index(i)?;
            shared.ring(i).last_avail = num as u16;
        }
        Msg::State(req::GET_VRING_BASE, i, _) => {
            let i = ring_index(i)?;
            let base = {
                let mut r = shared.ring(i);
                r.started = false;
                r.last_avail
            };
            sess.calls[i] = None;
            sess.kicks[i] = None;
            shared.kickable[i].store(false, Ordering::Release);
            update_link(shared);
            return w.write_all(&proto::reply_state(request, i as u32, u32::from(base)));
        }
        Msg::State(_, i, num) => {
            // SET_VRING_ENABLE.
            let i = ring_index(i)?;
            shared.ring(i).enabled = num != 0;
        }
        Msg::Addr(i, a) => {
            let i = ring_index(i)?;
            let mut r = shared.ring(i);
            r.addr = Some(a);
            r.broken = false;
            if r.mem.is_some() && !r.translate() {
                return Err(invalid("ring outside the memory table or misaligned"));
            }
        }
        Msg::Fd(kind, i, _) => {
            let i = ring_index(i)?;
            let fd = fds.into_iter().next();
            match kind {
                req::SET_VRING_KICK => {
                    // Only an eventfd we can read without waiting wakes a queue
                    // (a pipe or a file in its place is kept, never read).
                    let ok = fd.as_ref().is_some_and(ipc::is_eventfd) && ipc::nowait_reads();
                    if fd.is_some() && !ok {
                        shared.c.bad_kick_fds.add(1);
                    }
                    shared.kickable[i].store(ok, Ordering::Release);
                    sess.kicks[i] = fd;
                    let mut r = shared.ring(i);
                    r.started = true;
                    r.broken = false;
                    if !has(sess.features, feat::PROTOCOL_FEATURES) {
                        r.enabled = true;
                    }
                }
                req::SET_VRING_CALL => {
                    sess.calls[i] = match fd {
                        Some(fd) if ipc::is_eventfd(&fd) => Some(fd),
                        Some(_) => {
                            shared.c.bad_call_fds.add(1);
                            None
                        }
                        None => None,
                    };
                }
                _ => {}
            }
        }
        Msg::Unknown(_) => {
            shared.c.unknown_requests.add(1);
            ok = false;
            if flags & proto::F_NEED_REPLY != 0 {
                update_link(shared);
                return w.write_all(&proto::reply_u64(request, 1));
            }
        }
    }
    update_link(shared);
    if ack {
        w.write_all(&proto::reply_u64(request, u64::from(!ok)))?;
    } else if !ok && request == req::SET_MEM_TABLE {
        return Err(invalid("memory table refused"));
    }
    Ok(())
}

/// The link is up while the first queue pair runs.
fn update_link(shared: &Shared) {
    let up = shared.rings.len() >= 2 && shared.ring(0).ready() && shared.ring(1).ready();
    shared.up.store(up, Ordering::Release);
}
