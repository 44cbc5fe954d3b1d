//! What the tests of this crate share: a test front end on the vhost-user socket
//! ([`FrontEnd`]), a device with its queues ([`Dev`]), and a queue pair over an
//! in-process guest's rings ([`Q`]).

use crate::guest::Guest;
use crate::proto::{self, req, F_NEED_REPLY, HDR_SIZE};
use crate::vring::{Faults, Vring};
use crate::{Vhost, VhostRx, VhostTx};
use ironpath_pmd_sdk::testing::{run_rx, run_tx, TestPool};
use ironpath_pmd_sdk::{Pmd, Pool, ProbeCtx, QueueStats, RxBurst, RxQueue, TxBurst, TxQueue};
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A ring of ours over a guest's ring, as a queue (RX or TX).
pub struct Q {
    pub v: Vring,
    pub pool: Pool,
    pub f: Arc<Faults>,
}

impl Q {
    pub fn new(v: Vring, tp: &TestPool) -> Q {
        Q { v, pool: tp.pool(), f: Arc::new(Faults::default()) }
    }
}

impl RxQueue for Q {
    fn rx_burst(&mut self, burst: &mut RxBurst<'_>) {
        if self.v.ready() {
            self.v.dequeue(burst, &self.pool, &self.f);
        }
    }
}

impl TxQueue for Q {
    fn tx_burst(&mut self, burst: &mut TxBurst<'_>) {
        if self.v.ready() {
            self.v.enqueue(burst, &self.f);
        }
    }
}

/// A front end's end of the socket.
pub struct FrontEnd(pub UnixStream);

impl FrontEnd {
    pub fn connect(path: &str) -> FrontEnd {
        let t = Instant::now();
        loop {
            if let Ok(s) = UnixStream::connect(path) {
                s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                return FrontEnd(s);
            }
            assert!(t.elapsed() < Duration::from_secs(5), "no socket at {path}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Send `bytes` with descriptors (any number); false if not all went.
    pub fn send_raw(&self, bytes: &[u8], fds: &[RawFd]) -> bool {
        let mut iov = libc::iovec { iov_base: bytes.as_ptr() as *mut _, iov_len: bytes.len() };
        // SAFETY: CMSG_SPACE is a size computation.
        let space = unsafe { libc::CMSG_SPACE((fds.len() * 4) as u32) } as usize;
        let mut cbuf = vec![0u64; space / 8 + 1];
        // SAFETY: an all-zero msghdr is valid; the buffers set below outlive the call.
        let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
        mh.msg_iov = &mut iov;
        mh.msg_iovlen = 1;
        if !fds.is_empty() {
            mh.msg_control = cbuf.as_mut_ptr().cast();
            mh.msg_controllen = space as _;
            // SAFETY: the control buffer has room for one header and `fds`.
            unsafe {
                let c = libc::CMSG_FIRSTHDR(&mh);
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_RIGHTS;
                (*c).cmsg_len = libc::CMSG_LEN((fds.len() * 4) as u32) as _;
                std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(c).cast::<RawFd>(), fds.len());
            }
        }
        // SAFETY: `mh` describes live buffers.
        let n = unsafe { libc::sendmsg(self.0.as_raw_fd(), &mh, libc::MSG_NOSIGNAL) };
        n == bytes.len() as isize
    }

    pub fn send(&self, request: u32, flags: u32, payload: &[u8], fds: &[RawFd]) -> bool {
        self.send_raw(&proto::request(request, flags, payload), fds)
    }

    pub fn reply(&mut self) -> Option<Vec<u8>> {
        let mut h = [0u8; HDR_SIZE];
        self.0.read_exact(&mut h).ok()?;
        let n = u32::from_le_bytes(h[8..12].try_into().unwrap()) as usize;
        let mut p = vec![0u8; n];
        self.0.read_exact(&mut p).ok()?;
        Some(p)
    }

    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 64];
        loop {
            match self.0.read(&mut b) {
                Ok(0) | Err(_) => return true,
                Ok(_) => continue,
            }
        }
    }

    /// Ask for an acknowledgement of `request`: Some(0) success, Some(1) failure,
    /// None: the connection closed.
    pub fn acked(&mut self, request: u32, payload: &[u8], fds: &[RawFd]) -> Option<u64> {
        if !self.send(request, F_NEED_REPLY, payload, fds) {
            return None;
        }
        self.reply().map(|p| u64::from_le_bytes(p[..8].try_into().unwrap()))
    }

    pub fn setup(&mut self, g: &Guest, kick: &OwnedFd, calls: [&OwnedFd; 2]) {
        assert!(self.send(req::GET_FEATURES, 0, &[], &[]));
        let f = u64::from_le_bytes(self.reply().unwrap()[..8].try_into().unwrap());
        assert!(self.send(req::SET_PROTOCOL_FEATURES, 0, &proto::OFFERED_PROTOCOL.to_le_bytes(), &[]));
        for (r, p, fd) in Guest::setup_requests(f) {
            let fds: Vec<RawFd> = match (fd, r) {
                (false, _) => vec![],
                (true, req::SET_MEM_TABLE) => vec![g.fd.as_raw_fd()],
                (true, req::SET_VRING_KICK) => vec![kick.as_raw_fd()],
                (true, _) => vec![calls[usize::from(p[0] != 0)].as_raw_fd()],
            };
            assert!(self.send(r, F_NEED_REPLY, &p, &fds), "request {r}");
            assert_eq!(self.reply(), Some(0u64.to_le_bytes().to_vec()), "request {r} acknowledged");
        }
    }
}

/// A device, its queue pair 0 and its socket.
pub struct Dev {
    pub d: Vhost,
    pub rx: VhostRx,
    pub tx: VhostTx,
    pub path: String,
}

pub fn sock_path(tag: &str) -> String {
    std::env::temp_dir().join(format!("vhost-atk-{tag}-{}.sock", std::process::id())).display().to_string()
}

pub fn dev_with(tp: &TestPool, path: String, extra: &str) -> Dev {
    let args = format!("iface={path},tso=1{extra}");
    let mut d = Vhost::probe(&ProbeCtx { name: "net_vhost0", args: &args }).unwrap();
    let rx = d.rx_queue_setup(0, 256, tp.pool(), Arc::new(QueueStats::default())).unwrap();
    let tx = d.tx_queue_setup(0, 256, Arc::new(QueueStats::default())).unwrap();
    d.start().unwrap();
    Dev { d, rx, tx, path }
}

pub fn dev(tp: &TestPool, tag: &str) -> Dev {
    dev_with(tp, sock_path(tag), "")
}

pub fn xstat(d: &Vhost, name: &str) -> u64 {
    d.xstats().into_iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no xstat {name}")).1
}

pub fn wait(what: &str, f: impl Fn() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(5), "waited in vain for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub fn round_trip(g: &mut Guest, d: &mut Dev, n: usize) -> usize {
    for k in 0..n {
        g.send(&[0; 12], &frame(200, k as u8), 2048);
    }
    g.post_rx(n, 2048);
    let mut got = Vec::new();
    for _ in 0..20 {
        got.extend(run_rx(&mut d.rx, 32, 0));
        if got.len() >= n {
            break;
        }
    }
    drop(run_tx(&mut d.tx, got));
    g.used(1);
    g.recv().len()
}

fn frame(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8) ^ seed).collect()
}

/// One bad chain from the guest, then a good frame: (chains counted bad, good
/// frames received).
pub fn bad_then_good(g: &mut Guest, rx: &mut Q, bad: impl FnOnce(&mut Guest)) -> (u64, usize) {
    let before = rx.f.bad_desc.get();
    bad(g);
    g.send(&[0; 12], &frame(100, 7), 2048);
    let got = run_rx(rx, 32, 0);
    assert!(!rx.v.broken);
    let ok = got.iter().filter(|p| p.len() == 100).count();
    (rx.f.bad_desc.get() - before, ok)
}
