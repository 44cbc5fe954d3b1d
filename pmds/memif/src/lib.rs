//! `net_memif`: shared-memory packet interfaces to another packet process (DPDK's
//! net_memif, VPP's memif, libmemif applications, another ironpath), speaking
//! libmemif's protocol, version 2.0.
//!
//! * Roles: `role=server` listens on the socket (several clients may try; one
//!   interface id is served per port, several ports of a process may share a socket), `role=client` connects and owns the shared
//!   memory: one memfd region (sealed against shrinking) holding every ring and one
//!   buffer of `bsize` bytes per descriptor, DPDK's layout. The control channel runs
//!   on a thread of its own from `start` to `stop` ([`ctl`]).
//! * Data path ([`ring`]): copy mode. Received packets are copied out of the shared
//!   buffers into mbufs of the queue's pool (a bulk allocation per burst; chained
//!   descriptors become one packet, up to 64 KiB), sent packets are copied into
//!   shared buffers (a packet longer than a buffer, or in several segments, spans
//!   descriptors chained with `NEXT`) and freed at once, so no mbuf is ever in the
//!   peer's hands and nothing needs reclaiming when it goes. A server also serves a
//!   zero-copy client (DPDK's `zero-copy=yes`): it reads and fills whatever buffers the
//!   client's descriptors name, in any region the client added. Our own client's
//!   zero-copy mode is not offered (`zero-copy=yes` is refused saying so): a pool
//!   holds each mbuf's header beside its buffer, so exposing it would let the peer
//!   rewrite headers no check could catch.
//! * Interrupts: while an lcore polls, our RX rings are flagged `MASK_INT` so the
//!   peer does not signal them. An idle lcore may sleep (rx modes `adaptive`,
//!   `interrupt`): its RX queue then clears `MASK_INT`, and the control thread
//!   relays the peer's signal on the ring's eventfd to an eventfd of the queue's own,
//!   the queue's wake-up source ([`wakeup`]). After TX a peer that asked for
//!   interrupts is signalled, but never from the queue ([`notify`]): the queue marks
//!   the ring and pokes an eventfd of our own, and the control thread has the kernel
//!   signal the peer's eventfd, which cannot block whatever the peer did to it. An
//!   lcore never names a descriptor the peer holds.
//! * The peer is not trusted ([`proto`] and [`ring`] say how): it must run as our
//!   user or root (or `allow-uid=`'s; checked on every connection, both roles), a
//!   path socket is created `0600`; region sizes are checked against their files
//!   (which must be sealed against shrinking, unless `require-sealed=no`), ring
//!   offsets against their regions, interrupt descriptors must be eventfds, every
//!   descriptor is checked against its region before a byte moves; violations are
//!   refused with the reason sent to the peer, or counted (`rx_bad_desc`,
//!   `tx_bad_desc`, `*_bad_ring_index`) and dropped.
//! * Link state follows the peer: up from `CONNECTED` until a `DISCONNECT` or the
//!   socket closing (a killed peer); a client then reconnects every 0.5 s until the
//!   server is back. A reconnection brings fresh memory; queues switch over on their
//!   next burst (one atomic load per burst, no lock), and the control thread frees a
//!   connection once no queue may be using it ([`publish`]): an lcore never closes
//!   the peer's descriptors or unmaps its memory.
//!
//! Device arguments (DPDK's): `role=server|client` (server), `id=<u32>` (0),
//! `socket=<path>` (`/run/memif.sock`), `socket-abstract=yes|no` (yes: the name in the
//! abstract namespace, as DPDK 22.11 does by default), `mac=<addr>`,
//! `secret=<up to 23 chars>`, `bsize=<bytes>` (2048), `rsize=<log2 ring size>` (10),
//! `zero-copy=no`, and ours: `require-sealed=yes|no` (yes; no: a server accepts
//! regions it cannot seal against shrinking, as a zero-copy client's hugepages, and
//! counts them in `unsealed_regions`), `allow-uid=<uid>` (none: one more user whose
//! processes may connect, or serve us). Queue counts are the port's
//! (`--rxq`/`--txq`); a client agrees with the server on the smaller of both sides.

#![deny(clippy::undocumented_unsafe_blocks)]

// Descriptors are read and written as two little-endian 8-byte words.
#[cfg(target_endian = "big")]
compile_error!("net_memif supports little-endian hosts only");

pub mod ctl;
pub mod notify;
pub mod proto;
pub mod publish;
pub mod ring;
mod sys;
pub mod wakeup;

use ctl::{Config, Link, Queues, Role};
use ironpath_pmd_sdk::abi;
use ironpath_pmd_sdk::{
    export_pmd, DevArgs, Pmd, PmdError, Pool, ProbeCtx, QueueStats, RxBurst, RxQueue, SoftState, TxBurst, TxQueue,
};
use proto::{Layout, SECRET_SZ};
use publish::Follower;
use ring::{Conn, QueueFaults, RxState, TxState};
use std::ffi::CStr;
use std::os::fd::RawFd;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use wakeup::RxWake;

pub use sys::SockPath;

const KEYS: &[&str] = &[
    "role",
    "id",
    "socket",
    "socket-abstract",
    "mac",
    "secret",
    "bsize",
    "rsize",
    "zero-copy",
    "require-sealed",
    "allow-uid",
];
/// Most queue pairs (DPDK's limit).
const MAX_QUEUES: u16 = 255;

/// The device arguments, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Args {
    role: Role,
    id: u32,
    sock: SockPath,
    mac: Option<[u8; 6]>,
    secret: Option<[u8; SECRET_SZ]>,
    bsize: u32,
    log2: u8,
    require_sealed: bool,
    allow_uid: Option<u32>,
}

fn parse_args(a: &DevArgs) -> Result<Args, PmdError> {
    let role = match a.get("role") {
        None | Some("server") | Some("master") => Role::Server,
        Some("client") | Some("slave") => Role::Client,
        Some(v) => {
            return Err(PmdError::invalid(format!(
                "device argument `role={v}` is not a role: accepted server or client"
            )))
        }
    };
    let id = a.get_u64("id", 0, 0, u64::from(u32::MAX))? as u32;
    let is_abstract = a.get_bool("socket-abstract", true)?;
    let name = a.get("socket").unwrap_or("/run/memif.sock").to_string();
    let max = if is_abstract { 106 } else { 107 };
    if name.is_empty() || name.len() > max || name.contains('\0') {
        return Err(PmdError::invalid(format!(
            "device argument `socket={name}` must be 1 to {max} bytes (a Unix socket address)"
        )));
    }
    if !is_abstract {
        let dir = std::path::Path::new(&name).parent().filter(|d| !d.as_os_str().is_empty());
        if dir.is_some_and(|d| !d.is_dir()) {
            return Err(PmdError::invalid(format!(
                "device argument `socket={name}`: its directory does not exist (or use socket-abstract=yes)"
            )));
        }
    }
    let secret = match a.get("secret") {
        None => None,
        Some(s) if s.is_empty() || s.len() >= SECRET_SZ => {
            return Err(PmdError::invalid(format!("device argument `secret` must be 1 to {} bytes", SECRET_SZ - 1)))
        }
        Some(s) => Some(proto::Msg::secret(s)),
    };
    let bsize = a.get_u64("bsize", 2048, 64, 65535)? as u32;
    let log2 = a.get_u64("rsize", 10, 1, u64::from(proto::MAX_LOG2_RING))? as u8;
    if a.get_bool("zero-copy", false)? {
        return Err(PmdError::not_supported(
            "device argument `zero-copy=yes` (an ironpath client shares its buffers by copy; \
             a server serves zero-copy clients as they are)",
        ));
    }
    let run = proto::ClientRun { c2s: MAX_QUEUES, s2c: MAX_QUEUES, log2 };
    if Layout::new(run, bsize).is_none() && role == Role::Client {
        // The region of the largest agreement must fit the protocol's 32-bit offsets.
        let fits =
            (1..=MAX_QUEUES).rev().find(|&q| Layout::new(proto::ClientRun { c2s: q, s2c: q, log2 }, bsize).is_some());
        if fits.is_none() {
            return Err(PmdError::invalid(format!(
                "bsize={bsize} with rsize={log2}: one ring pair's buffers exceed 4 GiB; lower either"
            )));
        }
    }
    let require_sealed = a.get_bool("require-sealed", true)?;
    let allow_uid = match a.get("allow-uid") {
        None => None,
        Some(_) => Some(a.get_u64("allow-uid", 0, 0, u64::from(u32::MAX - 1))? as u32),
    };
    Ok(Args {
        role,
        id,
        sock: SockPath { name, is_abstract },
        mac: a.get_mac("mac")?,
        secret,
        bsize,
        log2,
        require_sealed,
        allow_uid,
    })
}

/// A device.
pub struct Memif {
    a: Args,
    name: String,
    soft: SoftState,
    link: Arc<Link>,
    /// The control thread's own eventfd (the queues poke it), for the device's life.
    wake: Arc<notify::Wake>,
    thread: Option<JoinHandle<()>>,
    queues: Queues,
    rx_faults: Vec<Arc<QueueFaults>>,
    tx_faults: Vec<Arc<QueueFaults>>,
}

impl Memif {
    /// End the control thread, then free every connection it kept, here on the main
    /// thread: the host stops a port only once no lcore holds its queues.
    fn stop_thread(&mut self) {
        if let Some(t) = self.thread.take() {
            self.link.stop.store(true, Ordering::Release);
            let _ = t.join();
            self.link.stop.store(false, Ordering::Release);
        }
        self.link.conns.release_all();
    }
}

impl Drop for Memif {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

fn eventfd_error(e: &std::io::Error) -> PmdError {
    PmdError::new(e.raw_os_error().unwrap_or(abi::errno::EIO), format!("eventfd: {e}"))
}

/// New counters for queue `qid`, kept in `all` (by queue) for the xstats.
fn fresh_faults(all: &mut Vec<Arc<QueueFaults>>, qid: u16) -> Arc<QueueFaults> {
    let i = usize::from(qid);
    if all.len() <= i {
        all.resize_with(i + 1, Default::default);
    }
    all[i] = Arc::new(QueueFaults::default());
    all[i].clone()
}

/// An RX queue.
pub struct MemifRx {
    q: u16,
    /// The connection it uses, switched when the control thread publishes another.
    follow: Follower<Conn>,
    pool: Pool,
    stats: Arc<QueueStats>,
    faults: Arc<QueueFaults>,
    st: RxState,
    scratch: Vec<u8>,
    /// Its wake-up source (an eventfd of ours) and what the control thread relays by.
    wake: Arc<RxWake>,
    /// The control thread's eventfd: poked when the queue arms.
    ctl: Arc<notify::Wake>,
    /// Reads of the peer's eventfd that cannot wait work here (else no wake-up source).
    can_sleep: bool,
    /// Armed for a sleep (between `wake_arm(true)` and `wake_arm(false)`).
    armed: bool,
}

impl RxQueue for MemifRx {
    #[inline]
    fn rx_burst(&mut self, burst: &mut RxBurst<'_>) {
        let (conn, fresh) = self.follow.get();
        let Some(c) = conn else { return };
        if fresh {
            self.st = RxState::fresh(c, self.q);
        }
        let (p, b, nombuf) = ring::rx(c, self.q, &mut self.st, burst, &self.pool, &self.faults, &mut self.scratch);
        if p > 0 {
            self.stats.packets.add(p);
            self.stats.bytes.add(b);
        }
        if nombuf > 0 {
            self.stats.nombuf.add(nombuf);
        }
        if self.armed {
            // The last poll before a sleep: what the control thread compares with.
            self.wake.consumed(self.st.last);
        }
    }

    /// An eventfd of ours, which the control thread writes when the peer signals the
    /// ring with something new in it ([`wakeup`]); the same across reconnections.
    fn wake_fd(&self) -> Option<RawFd> {
        self.can_sleep.then(|| self.wake.fd())
    }

    /// Arming clears `MASK_INT` on the queue's ring (the peer signals after it
    /// enqueues) and pokes the control thread to watch the ring; disarming sets it
    /// again. Atomics, and one write to our own eventfd: nothing on the peer's.
    fn wake_arm(&mut self, on: bool) -> bool {
        if on == self.armed || !self.can_sleep {
            return self.can_sleep || !on;
        }
        self.armed = on;
        // On the connection it will poll next (switched to here if a new one came).
        let (conn, fresh) = self.follow.get();
        if let (Some(c), true) = (conn, fresh) {
            self.st = RxState::fresh(c, self.q);
        }
        let ring = conn.and_then(|c| c.rx_ring(self.q));
        if !on {
            if let Some(r) = ring {
                r.flags().store(proto::RING_FLAG_MASK_INT, Ordering::Relaxed);
            }
            self.wake.disarm();
            return true;
        }
        if ring.is_some_and(|r| r.doorbell().is_none()) {
            // The peer gave no eventfd for this ring: nothing can signal us, the
            // queue is polled.
            self.armed = false;
            return false;
        }
        self.wake.arm(self.st.last);
        if let Some(r) = ring {
            r.flags().store(0, Ordering::SeqCst);
        }
        // The flags stored before the host's last poll loads the peer's index (a
        // store then a load: a full fence), the peer's TX having its own between its
        // index store and its flags load: either that poll finds the packet, or the
        // peer sees the flag clear and signals (`ring::Ring::notify`).
        fence(Ordering::SeqCst);
        // No connection: the control thread wakes us when one comes.
        self.ctl.poke();
        true
    }
}

/// A TX queue.
pub struct MemifTx {
    q: u16,
    /// As the RX queue's.
    follow: Follower<Conn>,
    stats: Arc<QueueStats>,
    faults: Arc<QueueFaults>,
    st: TxState,
}

impl TxQueue for MemifTx {
    #[inline]
    fn tx_burst(&mut self, burst: &mut TxBurst<'_>) {
        let (conn, fresh) = self.follow.get();
        let Some(c) = conn else { return };
        if fresh {
            self.st = TxState::default();
        }
        let (p, b) = ring::tx(c, self.q, &mut self.st, burst, &self.faults);
        if p > 0 {
            self.stats.packets.add(p);
            self.stats.bytes.add(b);
        }
    }
}

impl Pmd for Memif {
    const NAME: &'static CStr = c"net_memif";
    const DEVARGS_HELP: &'static CStr = c"role=server|client (server),id=<u32> (0),socket=<path> (/run/memif.sock),socket-abstract=yes|no (yes),mac=<xx:xx:xx:xx:xx:xx>,secret=<1..23 chars>,bsize=<64..65535> (2048),rsize=<log2 ring size 1..14> (10),zero-copy=no,require-sealed=yes|no (yes),allow-uid=<uid> (none: only our user and root may connect)";
    type Rx = MemifRx;
    type Tx = MemifTx;

    const CHECKS_ARGS: bool = true;

    fn check_args(ctx: &ProbeCtx<'_>) -> Result<(), PmdError> {
        parse_args(&DevArgs::parse(ctx.args, KEYS)?).map(drop)
    }

    fn probe(ctx: &ProbeCtx<'_>) -> Result<Self, PmdError> {
        let a = parse_args(&DevArgs::parse(ctx.args, KEYS)?)?;
        let mac = a.mac.unwrap_or_else(|| SoftState::mac_from_name(0x4d, ctx.name));
        Ok(Memif {
            a,
            name: ctx.name.to_string(),
            soft: SoftState::new(mac, 9000),
            link: Arc::new(Link::default()),
            wake: notify::Wake::new().map_err(|e| eventfd_error(&e))?,
            thread: None,
            queues: Queues { rx: 1, tx: 1 },
            rx_faults: Vec::new(),
            tx_faults: Vec::new(),
        })
    }

    fn info(&self) -> abi::DevInfo {
        abi::DevInfo {
            max_rx_queues: MAX_QUEUES,
            max_tx_queues: MAX_QUEUES,
            min_desc: 1,
            max_desc: 16384,
            min_mtu: 68,
            max_mtu: 9000,
            mtu: self.soft.mtu,
            max_rx_pktlen: ring::MAX_FRAME as u32,
            ..Default::default()
        }
    }

    fn configure(&mut self, conf: &abi::DevConf) -> Result<(), PmdError> {
        if self.thread.is_some() {
            return Err(PmdError::new(abi::errno::EBUSY, "stop the port before configuring it"));
        }
        self.queues = Queues { rx: conf.nb_rx_queues.max(1), tx: conf.nb_tx_queues.max(1) };
        if conf.mtu != 0 {
            self.set_mtu(conf.mtu)?;
        }
        Ok(())
    }

    fn rx_queue_setup(
        &mut self,
        qid: u16,
        _nb_desc: u16,
        pool: Pool,
        stats: Arc<QueueStats>,
    ) -> Result<MemifRx, PmdError> {
        let faults = fresh_faults(&mut self.rx_faults, qid);
        let wake = RxWake::new().map_err(|e| eventfd_error(&e))?;
        {
            let mut wakes = self.link.rx_wakes.lock().unwrap_or_else(|e| e.into_inner());
            let i = usize::from(qid);
            if wakes.len() <= i {
                wakes.resize_with(i + 1, Default::default);
            }
            wakes[i] = Arc::downgrade(&wake);
        }
        Ok(MemifRx {
            q: qid,
            follow: self.link.conns.follower(),
            pool,
            stats,
            faults,
            st: RxState::default(),
            scratch: Vec::new(),
            wake,
            ctl: self.wake.clone(),
            can_sleep: sys::nowait_reads(),
            armed: false,
        })
    }

    fn tx_queue_setup(&mut self, qid: u16, _nb_desc: u16, stats: Arc<QueueStats>) -> Result<MemifTx, PmdError> {
        let faults = fresh_faults(&mut self.tx_faults, qid);
        Ok(MemifTx { q: qid, follow: self.link.conns.follower(), stats, faults, st: TxState::default() })
    }

    /// Start the control channel: a server binds its socket here (a socket another
    /// process serves is refused), a client starts connecting.
    fn start(&mut self) -> Result<(), PmdError> {
        if self.thread.is_some() {
            return Ok(());
        }
        let listener = match self.a.role {
            Role::Server => {
                Some(ctl::Listener::join(&self.a.sock, self.a.id, self.queues, self.a.allow_uid).map_err(|e| {
                    let hint = match e.raw_os_error() {
                        Some(libc::EADDRINUSE) => " (another process serves it: pick another socket=)",
                        Some(libc::EACCES) | Some(libc::EPERM) => " (no permission to create it there)",
                        _ => "",
                    };
                    PmdError::new(
                        e.raw_os_error().unwrap_or(abi::errno::EIO),
                        format!("socket={}: cannot listen: {e}{hint}", self.a.sock),
                    )
                })?)
            }
            Role::Client => None,
        };
        let cfg = Config {
            role: self.a.role,
            id: self.a.id,
            sock: self.a.sock.clone(),
            secret: self.a.secret,
            bsize: self.a.bsize,
            log2: self.a.log2,
            if_name: self.name.clone(),
            require_sealed: self.a.require_sealed,
            allow_uid: self.a.allow_uid,
            wake: self.wake.clone(),
        };
        let (q, link, id) = (self.queues, self.link.clone(), self.a.id);
        let joined = listener.clone();
        let t = std::thread::Builder::new()
            .name(format!("memif-{}", self.name))
            .spawn(move || ctl::run(cfg, q, listener, link))
            .map_err(|e| {
                if let Some(l) = joined {
                    l.leave(id);
                }
                PmdError::new(abi::errno::EIO, format!("cannot start the control thread: {e}"))
            })?;
        self.thread = Some(t);
        Ok(())
    }

    /// Disconnect (the peer is told "Device stopped") and stop the control channel.
    fn stop(&mut self) -> Result<(), PmdError> {
        self.stop_thread();
        Ok(())
    }

    fn link(&self) -> abi::Link {
        let up = self.link.up.load(Ordering::Acquire) && !self.soft.link_down;
        abi::Link { speed_mbps: 0, up: u8::from(up), full_duplex: 1, autoneg: 0, reserved: 0 }
    }

    fn xstats(&self) -> Vec<(String, u64)> {
        let c = &self.link.c;
        let sum = |v: &[Arc<QueueFaults>], f: fn(&QueueFaults) -> u64| v.iter().map(|x| f(x)).sum::<u64>();
        vec![
            ("connected".to_string(), u64::from(self.link.up.load(Ordering::Acquire))),
            ("connects".to_string(), c.connects.get()),
            ("disconnects".to_string(), c.disconnects.get()),
            ("refused".to_string(), c.refused.get()),
            ("peer_disconnects".to_string(), c.peer_disconnects.get()),
            ("handshake_timeouts".to_string(), c.timeouts.get()),
            ("waiting_overflow".to_string(), c.overflow.get()),
            ("connect_failures".to_string(), c.connect_failures.get()),
            ("unsealed_regions".to_string(), c.unsealed.get()),
            ("refused_users".to_string(), c.refused_users.get()),
            ("bad_interrupt_fds".to_string(), c.bad_interrupt_fds.get()),
            ("interrupts_sent".to_string(), c.interrupts_sent.get()),
            ("interrupts_failed".to_string(), c.interrupts_failed.get()),
            ("rx_wakeups".to_string(), c.rx_wakeups.get()),
            ("rx_interrupts_ignored".to_string(), c.rx_interrupts_ignored.get()),
            ("rx_interrupts_throttled".to_string(), c.rx_interrupts_throttled.get()),
            ("rx_bad_desc".to_string(), sum(&self.rx_faults, |f| f.bad_desc.get())),
            ("rx_bad_ring_index".to_string(), sum(&self.rx_faults, |f| f.bad_ring_index.get())),
            ("tx_bad_desc".to_string(), sum(&self.tx_faults, |f| f.bad_desc.get())),
            ("tx_bad_ring_index".to_string(), sum(&self.tx_faults, |f| f.bad_ring_index.get())),
            ("tx_ring_full".to_string(), sum(&self.tx_faults, |f| f.ring_full.get())),
        ]
    }

    fn soft(&self) -> Option<&SoftState> {
        Some(&self.soft)
    }

    fn soft_mut(&mut self) -> Option<&mut SoftState> {
        Some(&mut self.soft)
    }
}

export_pmd!(Memif);

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Result<Args, PmdError> {
        parse_args(&DevArgs::parse(s, KEYS)?)
    }

    #[test]
    fn arguments_follow_dpdk_and_name_what_is_wrong() {
        let a = args("").unwrap();
        assert_eq!(
            (a.role, a.id, a.sock.clone(), a.bsize, a.log2, a.secret),
            (Role::Server, 0, SockPath { name: "/run/memif.sock".into(), is_abstract: true }, 2048, 10, None)
        );
        let a = args("role=client,id=7,socket=/tmp/m.sock,socket-abstract=no,secret=pw,bsize=4096,rsize=12").unwrap();
        assert_eq!((a.role, a.id, a.sock.is_abstract, a.bsize, a.log2), (Role::Client, 7, false, 4096, 12));
        assert_eq!(a.secret, Some(proto::Msg::secret("pw")));
        assert!(args("role=master").is_ok() && args("role=slave").is_ok());
        assert!(args("role=peer").unwrap_err().msg.contains("accepted server or client"));
        assert!(args("rsize=15").unwrap_err().msg.contains("rsize"));
        assert!(args("bsize=10").unwrap_err().msg.contains("bsize"));
        assert!(args("secret=012345678901234567890123").unwrap_err().msg.contains("secret"));
        assert!(args("socket=/no/such/dir/s.sock,socket-abstract=no").unwrap_err().msg.contains("directory"));
        assert!(args("zero-copy=yes").unwrap_err().msg.contains("zero-copy"));
        assert!(args("zero-copy=no").is_ok());
        assert!(args("sock=x").unwrap_err().msg.contains("socket"));
        // Secure by default: sealed regions only, no other user.
        let d = args("").unwrap();
        assert_eq!((d.require_sealed, d.allow_uid), (true, None));
        let a = args("require-sealed=no,allow-uid=1000").unwrap();
        assert_eq!((a.require_sealed, a.allow_uid), (false, Some(1000)));
        assert!(args("allow-uid=-1").unwrap_err().msg.contains("allow-uid"));
        assert!(args("allow-uid=4294967295").unwrap_err().msg.contains("allow-uid"));
    }
}
