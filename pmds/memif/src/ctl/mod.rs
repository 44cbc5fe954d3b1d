//! The control channel: one thread per port, from `start` to `stop`.
//!
//! * Server: listens on the socket, sends `HELLO` to each client that connects (if
//!   it runs as our user, root, or the user `allow-uid=` names: its credentials are
//!   checked on every connection, any other gets `DISCONNECT "Permission denied"`),
//!   and walks one of them through the handshake
//!   ([`ServerSession`](crate::proto::ServerSession)); others get
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
//! ([`crate::notify`]): it polls the port's wake eventfd beside its sockets; and,
//! while a receive queue sleeps, the eventfd the peer signals for that queue's ring,
//! to wake the queue through an eventfd of our own ([`crate::wakeup`]).
//!
//! The server lives in `ctl/server.rs` (the socket it shares with this process's other
//! server ports in `ctl/listener.rs`), the client in `ctl/client.rs`; both log through
//! one [`Log`], which names the port and its socket on every line.

mod client;
mod listener;
mod server;

pub use listener::Listener;

use crate::notify::Wake;
use crate::proto::{Msg, SECRET_SZ};
use crate::publish::Published;
use crate::ring::Conn;
use crate::sys::{self, SockPath};
use crate::wakeup::RxWake;
use client::Client;
use ironpath_pmd_sdk::{log, Counter};
use server::Server;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

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
    /// Wake-ups written to a sleeping receive queue: the peer signalled a ring that
    /// holds something new, or the connection changed ([`crate::wakeup`]).
    pub rx_wakeups: Counter,
    /// The peer's signals on a receive ring that woke no one: nothing new in the
    /// ring, or its queue awake or already woken.
    pub rx_interrupts_ignored: Counter,
    /// Times a ring was set aside for signalling again and again with nothing new.
    pub rx_interrupts_throttled: Counter,
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
    /// Each receive queue's wake-up, by queue (set up on the main thread; a queue
    /// released takes its eventfd with it).
    pub rx_wakes: Mutex<Vec<Weak<RxWake>>>,
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

/// How much a logged event matters (the host's levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Something we could not do (the port cannot work as asked).
    Error,
    /// A peer refused, refusing, or gone; a limit that bit.
    Warning,
    /// The link going up or down.
    Info,
    /// Details nobody needs to act on.
    Debug,
}

impl Level {
    /// The host's number for the level (0 = error .. 3 = debug).
    fn host(self) -> u32 {
        match self {
            Level::Error => 0,
            Level::Warning => 1,
            Level::Info => 2,
            Level::Debug => 3,
        }
    }
}

/// The control thread's log: the host's, each line naming the port and its socket.
pub struct Log {
    prefix: String,
}

impl Log {
    /// The log of the port `cfg` describes.
    pub fn new(cfg: &Config) -> Log {
        Log { prefix: format!("net_memif {} ({})", cfg.if_name, cfg.sock) }
    }

    /// Log `msg` at `level`.
    pub fn say(&self, level: Level, msg: &str) {
        log(level.host(), &format!("{}: {msg}", self.prefix));
    }
}

/// Run the control thread until `link.stop`.
pub fn run(cfg: Config, q: Queues, listener: Option<Arc<Listener>>, link: Arc<Link>) {
    let log = Log::new(&cfg);
    match (cfg.role, listener) {
        (Role::Server, Some(l)) => {
            Server::new(&cfg, q, l.clone(), &link, &log).run();
            l.leave(cfg.id);
        }
        _ => Client::new(&cfg, q, &link, &log).run(),
    }
    if link.up.load(Ordering::Acquire) {
        link.publish(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_the_hosts_numbers() {
        // core/abi's `HostApi::log`: 0 = error, 1 = warning, 2 = info, 3 = debug.
        let got: Vec<u32> = [Level::Error, Level::Warning, Level::Info, Level::Debug].map(Level::host).to_vec();
        assert_eq!(got, [0, 1, 2, 3]);
    }
}
