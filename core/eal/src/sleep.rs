//! Sleeping instead of polling when an lcore's queues stay empty (rx modes
//! `adaptive` and `interrupt`, as DPDK's Rx interrupts and VPP's `rx-mode`).
//!
//! * [`RxMode`]: how an lcore waits for packets.
//! * [`Doorbell`]: an lcore's own eventfd and "asleep" flag. Whoever gives it work
//!   from elsewhere (a ring producer on another lcore, a table change, the stop
//!   request) rings it; that costs a fence and a load while the lcore is awake, a
//!   `write(2)` on a descriptor only we hold (non-blocking) while it sleeps.
//! * [`Sleeper`]: the epoll set an lcore sleeps in: its doorbell, and the wake-up
//!   sources of its receive queues (`rx_wake_fd`, ABI 1.7) waited on edge-triggered,
//!   so that a descriptor a peer shares (a memif ring's eventfd) is never read.
//!
//! Going to sleep is a protocol, so that no packet is left waiting: arm every
//! queue's wake-up (`rx_wake_arm`), mark the doorbell asleep ([`Doorbell::asleep`]),
//! poll everything once more, and only if that finds nothing wait in
//! [`Sleeper::sleep`]; a packet that came before the arming is found by that last
//! poll, one after it signals.

use rustix::event::epoll;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How an lcore waits for packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RxMode {
    /// Poll all the time (a core at 100%): the lowest latency, for NICs at line rate.
    Poll,
    /// Poll while there is work; after [`ADAPTIVE_IDLE`] without any, sleep on the
    /// queues' wake-up sources until one signals (or a timer is due). An lcore with a
    /// queue that has no wake-up source (a null or pcap port, an old plugin) keeps
    /// polling.
    #[default]
    Adaptive,
    /// Sleep as soon as a walk finds no work.
    Interrupt,
}

impl RxMode {
    /// The accepted names, for YAML and the shells.
    pub const NAMES: [&'static str; 3] = ["poll", "adaptive", "interrupt"];

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            RxMode::Poll => "poll",
            RxMode::Adaptive => "adaptive",
            RxMode::Interrupt => "interrupt",
        }
    }
}

impl std::str::FromStr for RxMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "poll" => Ok(RxMode::Poll),
            "adaptive" => Ok(RxMode::Adaptive),
            "interrupt" => Ok(RxMode::Interrupt),
            _ => Err(format!("`{s}` is not an rx mode; accepted: {}", RxMode::NAMES.join(", "))),
        }
    }
}

/// How long an `adaptive` lcore polls without work before it sleeps: longer than
/// the gap between two requests of a busy client, so a loaded lcore never sleeps.
pub const ADAPTIVE_IDLE: Duration = Duration::from_micros(500);

/// Shortest sleep worth a system call: a timer due sooner is polled for.
pub const MIN_SLEEP: Duration = Duration::from_millis(1);

/// An lcore's doorbell: rung by whoever hands it work from elsewhere.
#[derive(Debug)]
pub struct Doorbell {
    fd: OwnedFd,
    /// The lcore's rx mode lets it sleep (set before it runs).
    may_sleep: AtomicBool,
    asleep: AtomicBool,
}

impl Doorbell {
    /// A new one (a non-blocking eventfd only this process holds).
    pub fn new() -> io::Result<Arc<Doorbell>> {
        let fd =
            rustix::event::eventfd(0, rustix::event::EventfdFlags::NONBLOCK | rustix::event::EventfdFlags::CLOEXEC)?;
        Ok(Arc::new(Doorbell { fd, may_sleep: AtomicBool::new(false), asleep: AtomicBool::new(false) }))
    }

    /// Whether the lcore may sleep at all (its rx mode is not `poll`); set before
    /// the lcore and those ringing it start. While false a ring costs one load.
    pub fn set_may_sleep(&self, on: bool) {
        self.may_sleep.store(on, Ordering::Relaxed);
    }

    /// After making work visible to the lcore (a ring's tail stored, a request
    /// counted): wake it if it sleeps. A fence and a load while it is awake.
    #[inline]
    pub fn ring(&self) {
        if !self.may_sleep.load(Ordering::Relaxed) {
            return;
        }
        // Orders the work's store before the load of `asleep`; the lcore's
        // `asleep()` is a SeqCst store before its last poll: either it sees the
        // work, or we see it asleep.
        fence(Ordering::SeqCst);
        if self.asleep.load(Ordering::Relaxed) {
            self.wake();
        }
    }

    #[cold]
    fn wake(&self) {
        // Our own non-blocking eventfd: cannot block; a full counter means a wake-up
        // is pending anyway.
        let _ = rustix::io::write(&self.fd, &1u64.to_ne_bytes());
    }

    /// The lcore is about to make its last poll before sleeping.
    pub fn asleep(&self) {
        self.asleep.store(true, Ordering::SeqCst);
        // The store before the last poll's loads (of the rings, the request
        // counter, stop): the other half of `ring`'s fence.
        fence(Ordering::SeqCst);
    }

    /// The lcore is awake again: rings from now on cost no system call; a ring
    /// that came meanwhile is taken.
    pub fn awake(&self) {
        self.asleep.store(false, Ordering::Relaxed);
        let mut b = [0u8; 8];
        let _ = rustix::io::read(&self.fd, &mut b);
    }

    /// Whether the lcore sleeps (or is about to).
    pub fn is_asleep(&self) -> bool {
        self.asleep.load(Ordering::Relaxed)
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// What ended a sleep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Woke {
    /// The timeout passed (a timer is due).
    Timer,
    /// The doorbell rang (a ring from another lcore, a table change, stop).
    Bell,
    /// Wake-up source `k` of those given signalled (the first of them, if several).
    Source(usize),
    /// A signal interrupted the wait.
    Interrupted,
}

/// The epoll set one lcore sleeps in.
#[derive(Debug)]
pub struct Sleeper {
    ep: OwnedFd,
    bell: Arc<Doorbell>,
    /// The wake-up sources registered now, in the order given.
    registered: Vec<RawFd>,
}

/// The longest one sleep with a timeout waits, in milliseconds.
const MAX_SLEEP_MS: u128 = 3_600_000;

/// `epoll` data of the doorbell.
const BELL: u64 = u64::MAX;

impl Sleeper {
    /// An epoll set holding `bell`.
    pub fn new(bell: Arc<Doorbell>) -> io::Result<Sleeper> {
        let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        epoll::add(&ep, bell.fd(), epoll::EventData::new_u64(BELL), epoll::EventFlags::IN | epoll::EventFlags::ET)?;
        Ok(Sleeper { ep, bell, registered: Vec::new() })
    }

    /// Its doorbell.
    pub fn bell(&self) -> &Arc<Doorbell> {
        &self.bell
    }

    /// Sleep until one of `fds` signals, the doorbell rings or `timeout` passes
    /// (`None`: no timer). `fds` must stay open until the next call (each is a
    /// queue's descriptor, open while the queue lives); the set is registered again
    /// when it changed. A timeout is rounded down to whole milliseconds.
    pub fn sleep(&mut self, fds: &[RawFd], timeout: Option<Duration>) -> io::Result<Woke> {
        if fds != self.registered.as_slice() {
            self.register(fds)?;
        }
        // Whole milliseconds, rounded up (a timer is never woken for early), at most
        // an hour (a longer wait is asked again).
        let ts = timeout.map(|t| {
            let ms = t.as_nanos().div_ceil(1_000_000).min(MAX_SLEEP_MS) as u64;
            rustix::event::Timespec { tv_sec: (ms / 1000) as i64, tv_nsec: ((ms % 1000) * 1_000_000) as i64 }
        });
        let mut events = Vec::with_capacity(8);
        match epoll::wait(&self.ep, spare(&mut events), ts.as_ref()) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => return Ok(Woke::Interrupted),
            Err(e) => return Err(e.into()),
        }
        let mut woke = Woke::Timer;
        for ev in &events {
            let k = ev.data.u64();
            if k == BELL {
                woke = Woke::Bell;
            } else if woke == Woke::Timer {
                woke = Woke::Source(k as usize);
            }
        }
        Ok(woke)
    }

    fn register(&mut self, fds: &[RawFd]) -> io::Result<()> {
        for &fd in &self.registered {
            // SAFETY: only used to name the descriptor to epoll_ctl; a descriptor
            // closed since (a queue gone) left the set by itself and fails harmlessly.
            let _ = epoll::delete(&self.ep, unsafe { BorrowedFd::borrow_raw(fd) });
        }
        self.registered.clear();
        for (k, &fd) in fds.iter().enumerate() {
            // SAFETY: the caller's contract: `fd` is a queue's open descriptor.
            let bfd = unsafe { BorrowedFd::borrow_raw(fd) };
            match epoll::add(
                &self.ep,
                bfd,
                epoll::EventData::new_u64(k as u64),
                epoll::EventFlags::IN | epoll::EventFlags::ET,
            ) {
                // Two queues on one descriptor: registered once (the first wakes).
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
            self.registered.push(fd);
        }
        Ok(())
    }
}

fn spare(v: &mut Vec<epoll::Event>) -> rustix::buffer::SpareCapacity<'_, epoll::Event> {
    rustix::buffer::spare_capacity(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_ring_wakes_a_sleeper_and_costs_nothing_while_it_is_awake() {
        let bell = Doorbell::new().unwrap();
        bell.set_may_sleep(true);
        let mut s = Sleeper::new(bell.clone()).unwrap();
        // Awake: a ring writes nothing, so a sleep times out.
        bell.ring();
        assert_eq!(s.sleep(&[], Some(Duration::from_millis(5))).unwrap(), Woke::Timer);
        // Asleep: a ring from another thread wakes it.
        bell.asleep();
        let b2 = bell.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            b2.ring();
        });
        let t0 = Instant::now();
        assert_eq!(s.sleep(&[], Some(Duration::from_secs(5))).unwrap(), Woke::Bell);
        assert!(t0.elapsed() < Duration::from_secs(4));
        t.join().unwrap();
        bell.awake();
        assert_eq!(s.sleep(&[], Some(Duration::from_millis(5))).unwrap(), Woke::Timer, "the ring was taken");
    }

    #[test]
    fn a_source_wakes_it_edge_triggered_without_being_drained() {
        let bell = Doorbell::new().unwrap();
        let mut s = Sleeper::new(bell).unwrap();
        let src = rustix::event::eventfd(0, rustix::event::EventfdFlags::NONBLOCK).unwrap();
        use std::os::fd::AsRawFd;
        let fds = [src.as_raw_fd()];
        assert_eq!(s.sleep(&fds, Some(Duration::from_millis(5))).unwrap(), Woke::Timer);
        rustix::io::write(&src, &1u64.to_ne_bytes()).unwrap();
        assert_eq!(s.sleep(&fds, Some(Duration::from_secs(5))).unwrap(), Woke::Source(0));
        // Not drained, not signalled again: no new edge, the next sleep times out.
        assert_eq!(s.sleep(&fds, Some(Duration::from_millis(5))).unwrap(), Woke::Timer);
        rustix::io::write(&src, &1u64.to_ne_bytes()).unwrap();
        assert_eq!(s.sleep(&fds, Some(Duration::from_secs(5))).unwrap(), Woke::Source(0), "each signal is an edge");
    }
}
