//! Waking a sleeping lcore when the peer fills one of our receive rings, without the
//! lcore ever naming the peer's descriptor.
//!
//! An idle lcore may sleep (rx modes `adaptive` and `interrupt`) on its receive
//! queues' wake-up sources (ABI 1.7). A ring's interrupt eventfd is shared with the
//! peer (passed in `SCM_RIGHTS` one way or the other), and an lcore never names such
//! a descriptor, not even to `epoll_ctl` (DESIGN.md, "Trust boundaries"). So each
//! receive queue has an eventfd of its own ([`RxWake`]), made at queue setup, closed
//! with the queue, never sent to anyone: that is its wake-up source, the same across
//! reconnections. The port's control thread relays ([`Relay`]):
//!
//! * the queue arms, before the lcore sleeps: it records the slot it consumes next,
//!   marks itself armed, clears `MASK_INT` on its ring (so the peer writes the ring's
//!   eventfd after it enqueues), and pokes the port's [`Wake`](crate::notify::Wake)
//!   so that the control thread starts watching the ring; the lcore then polls once
//!   more (recording the slot again) and sleeps. All of it is atomics in our memory
//!   and the ring's header, and one write to an eventfd of ours, non-blocking;
//! * the control thread polls the ring's eventfd while the queue is armed and not
//!   yet woken since it armed. When it is readable, the thread takes its count (a
//!   read that cannot wait, below) and, if the ring holds a descriptor past the slot
//!   the queue recorded, writes the queue's eventfd (ours, non-blocking): the lcore
//!   wakes;
//! * the queue disarms once awake: `MASK_INT` again.
//!
//! A connection that comes or goes wakes every armed queue, which then moves to the
//! new connection (or to none) and arms there: a new connection's rings start with
//! `MASK_INT`, so no peer would signal a queue that slept through the change.
//!
//! Reading the peer's eventfd. The peer shares the open file: it can clear
//! `O_NONBLOCK` on it and empty the counter itself between our `poll` and our read,
//! after which a read(2) would wait for its next write, perhaps forever, and the
//! port's `stop` with it. The control thread reads with `preadv2(RWF_NOWAIT)`
//! (`sys::read_nowait`), which the kernel answers with `EAGAIN` instead of waiting,
//! whatever the file's flags. It needs Linux 5.12 or later; on an older kernel (a
//! probe, `sys::nowait_reads`) the queues offer no wake-up source and are polled as
//! before. Reopening the descriptor (`/proc/self/fd`) is no way out: an eventfd
//! cannot be reopened.
//!
//! Bounds. The control thread watches a ring only while its queue sleeps, and stops
//! once it woke the queue: the peer's signals wake it at most once per sleep. A signal
//! with nothing new in the ring wakes no one and is counted
//! (`rx_interrupts_ignored`); [`MAX_IGNORED`] of them in a row while the queue stays
//! asleep (a peer writing its eventfd again and again) set the ring aside for
//! [`QUIET`] (`rx_interrupts_throttled`): a spamming peer costs the control thread at
//! most [`MAX_IGNORED`] reads per [`QUIET`], and delays only its own packets, by
//! [`QUIET`] at most.

use crate::ctl::Link;
use crate::sys;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Signals in a row with nothing new, its queue asleep throughout, before the ring
/// is set aside.
pub const MAX_IGNORED: u32 = 8;
/// How long a ring that signals with nothing new is not watched.
pub const QUIET: Duration = Duration::from_millis(10);

/// A receive queue's wake-up: its own eventfd, and what the control thread needs to
/// know to relay the peer's signals to it.
#[derive(Debug)]
pub struct RxWake {
    /// Ours: non-blocking, close-on-exec, never sent to a peer.
    fd: OwnedFd,
    /// Odd while the queue is armed; moves on at each arming and disarming (written
    /// by the queue only).
    arm: AtomicU64,
    /// The slot the queue consumes next, as of its last poll while armed.
    next: AtomicU16,
}

impl RxWake {
    /// A new one.
    pub fn new() -> io::Result<Arc<RxWake>> {
        Ok(Arc::new(RxWake { fd: sys::eventfd()?, arm: AtomicU64::new(0), next: AtomicU16::new(0) }))
    }

    /// The descriptor the lcore sleeps on.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The queue, about to sleep: it consumes slot `next` next. Ordered before the
    /// ring's flags are cleared (the queue's `SeqCst` store), so a peer that signals
    /// finds the queue armed.
    pub fn arm(&self, next: u16) {
        self.next.store(next, Ordering::Release);
        self.arm.fetch_add(1, Ordering::SeqCst);
    }

    /// The queue polled while armed: it consumes slot `next` next.
    #[inline]
    pub fn consumed(&self, next: u16) {
        self.next.store(next, Ordering::Release);
    }

    /// The queue is awake again.
    pub fn disarm(&self) {
        self.arm.fetch_add(1, Ordering::SeqCst);
    }

    /// Wake the queue (the control thread; the queue itself when its ring has no
    /// eventfd to be signalled on). Our own non-blocking eventfd: cannot wait; a
    /// counter at its maximum (2^64 - 2 writes) only merges wake-ups.
    pub fn signal(&self) {
        sys::poke(self.fd.as_raw_fd());
    }

    /// The arming now: odd while armed.
    fn arming(&self) -> u64 {
        self.arm.load(Ordering::SeqCst)
    }
}

/// What the control thread keeps per receive queue.
#[derive(Debug, Default)]
struct Watch {
    /// The queue's wake-up, for this turn (none: no such queue, or released).
    wake: Option<Arc<RxWake>>,
    /// The arming last woken (no second wake-up for it).
    woken: u64,
    /// Signals in a row with nothing new, the queue asleep throughout.
    ignored: u32,
    /// Set aside until then.
    quiet_until: Option<Instant>,
}

/// One descriptor polled this turn.
#[derive(Debug, Clone, Copy)]
struct Polled {
    q: usize,
    fd: RawFd,
    /// The queue's arming when the turn began.
    arming: u64,
}

/// The control thread's side: relays the peer's signals on the live connection's
/// receive rings to the queues that sleep.
#[derive(Debug)]
pub struct Relay {
    /// Reads that cannot wait work here (else nothing is watched).
    usable: bool,
    /// The generation of the connection last seen.
    gen: u64,
    queues: Vec<Watch>,
    polled: Vec<Polled>,
}

impl Default for Relay {
    fn default() -> Self {
        Relay { usable: sys::nowait_reads(), gen: 0, queues: Vec::new(), polled: Vec::new() }
    }
}

impl Relay {
    /// Before the thread polls: wake the armed queues if the connection changed, and
    /// add to `fds` the eventfd of each ring whose queue sleeps and waits for a
    /// signal. The descriptors stay open until [`Relay::serve`]: only this thread
    /// replaces or frees a connection.
    pub fn watch(&mut self, link: &Link, fds: &mut Vec<RawFd>) {
        self.polled.clear();
        if !self.usable {
            return;
        }
        {
            let wakes = link.rx_wakes.lock().unwrap_or_else(|e| e.into_inner());
            self.queues.resize_with(wakes.len(), Watch::default);
            for (w, weak) in self.queues.iter_mut().zip(wakes.iter()) {
                w.wake = weak.upgrade();
            }
        }
        let gen = link.conns.generation();
        if gen != self.gen {
            self.gen = gen;
            for w in &mut self.queues {
                (w.ignored, w.quiet_until) = (0, None);
                let Some(wake) = &w.wake else { continue };
                let a = wake.arming();
                if a & 1 == 1 && a != w.woken {
                    wake.signal();
                    w.woken = a;
                    link.c.rx_wakeups.add(1);
                }
            }
        }
        let now = Instant::now();
        let (queues, polled) = (&mut self.queues, &mut self.polled);
        link.conns.with_current(|c| {
            let Some(c) = c else { return };
            for (q, w) in queues.iter_mut().enumerate() {
                let Some(wake) = &w.wake else { continue };
                if w.quiet_until.is_some_and(|t| now < t) {
                    continue;
                }
                w.quiet_until = None;
                let a = wake.arming();
                if a & 1 == 0 || a == w.woken {
                    continue;
                }
                // A peer whose sender has no full fence between its index store and
                // its flags load (as ours has) may miss the cleared MASK_INT and not
                // signal: each turn (at least every tick) looks at the index too.
                let moved = u16::try_from(q)
                    .ok()
                    .and_then(|q| c.rx_peer_index(q))
                    .is_some_and(|i| i != wake.next.load(Ordering::Acquire));
                if moved {
                    wake.signal();
                    (w.woken, w.ignored) = (a, 0);
                    link.c.rx_wakeups.add(1);
                    continue;
                }
                let bell = u16::try_from(q).ok().and_then(|q| c.rx_ring(q)).and_then(|r| r.doorbell());
                if let Some(b) = bell {
                    polled.push(Polled { q, fd: b.peer_fd(), arming: a });
                    fds.push(b.peer_fd());
                }
            }
        });
    }

    /// After the poll (`ready`: the readiness of the descriptors [`Relay::watch`]
    /// added, in order): take each signalled ring's count and wake its queue if the
    /// ring holds something new for it.
    pub fn serve(&mut self, link: &Link, ready: &[bool]) {
        if !self.polled.is_empty() {
            self.relay(link, ready);
        }
        // Queues released on the main thread meanwhile close their eventfd now.
        for w in &mut self.queues {
            w.wake = None;
        }
    }

    fn relay(&mut self, link: &Link, ready: &[bool]) {
        let now = Instant::now();
        let (queues, polled) = (&mut self.queues, &self.polled);
        link.conns.with_current(|c| {
            let Some(c) = c else { return };
            for (p, _) in polled.iter().zip(ready).filter(|(_, r)| **r) {
                // Taken before the ring is looked at: a signal after this read finds
                // the descriptor readable again at the next turn.
                if !matches!(sys::read_nowait(p.fd), Ok(Some(_))) {
                    continue; // emptied by the peer meanwhile: nothing to act on
                }
                let w = &mut queues[p.q];
                let Some(wake) = &w.wake else { continue };
                // Decided on the queue's state now, not the turn's: it may have woken
                // and armed again since, and this signal may be for the new arming.
                let a = wake.arming();
                let new = u16::try_from(p.q)
                    .ok()
                    .and_then(|q| c.rx_peer_index(q))
                    .is_some_and(|i| i != wake.next.load(Ordering::Acquire));
                if a & 1 == 1 && a != w.woken && new {
                    wake.signal();
                    (w.woken, w.ignored) = (a, 0);
                    link.c.rx_wakeups.add(1);
                    continue;
                }
                link.c.rx_interrupts_ignored.add(1);
                // Only a queue that slept throughout says the peer signals for nothing
                // (one that woke meanwhile may have taken the packet signalled).
                if a == p.arming {
                    w.ignored += 1;
                    if w.ignored >= MAX_IGNORED {
                        (w.ignored, w.quiet_until) = (0, Some(now + QUIET));
                        link.c.rx_interrupts_throttled.add(1);
                    }
                }
            }
        });
    }

    /// The poll's timeout: `tick` ms, or less when a ring set aside is due back.
    pub fn timeout(&self, tick: i32) -> i32 {
        let now = Instant::now();
        self.queues
            .iter()
            .filter_map(|w| w.quiet_until)
            .map(|t| t.saturating_duration_since(now).as_millis().saturating_add(1).min(i32::MAX as u128) as i32)
            .fold(tick, i32::min)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::{Doorbell, Wake};
    use crate::proto::{ring_bytes, RING_FLAG_MASK_INT};
    use crate::ring::{Conn, Ring};
    use crate::sys::Mapping;

    /// A server's connection with one client-to-server ring (our receive ring) of 16
    /// slots whose interrupt eventfd is `peer` (the peer's end, shared).
    fn server_conn(peer: OwnedFd) -> Conn {
        let log2 = 4;
        let size = ring_bytes(log2);
        let fd = sys::memfd(c"wake-test", size).unwrap();
        let map = Mapping::new(&fd, size).unwrap();
        // SAFETY: offset 0, the whole ring inside the mapping, which the connection keeps.
        let r = unsafe { Ring::new(&map, 0, log2, Some(Doorbell::new(peer, Wake::new().unwrap()))) };
        r.flags().store(RING_FLAG_MASK_INT, Ordering::Relaxed);
        r.head().store(0, Ordering::Relaxed);
        r.tail().store(0, Ordering::Relaxed);
        Conn { c2s: vec![Some(r)], s2c: vec![None], sizes: vec![size], layout: None, regions: vec![map] }
    }

    /// A blocking eventfd and a second descriptor of the same file: the peer's view
    /// (it can empty the counter and clear `O_NONBLOCK`) and ours.
    fn shared_eventfd() -> (OwnedFd, OwnedFd) {
        // SAFETY: plain eventfd(2), blocking (what a peer may make of a shared one).
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: a new descriptor we own.
        let ours = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        (ours.try_clone().unwrap(), ours)
    }

    /// One turn of the control thread: watch, poll at once, serve; the descriptors
    /// polled.
    fn turn(relay: &mut Relay, link: &Link) -> usize {
        let mut fds = Vec::new();
        relay.watch(link, &mut fds);
        let ready = sys::poll(&fds, 0);
        relay.serve(link, &ready);
        fds.len()
    }

    /// The peer: fill `n` slots and signal.
    fn peer_sends(link: &Link, peer: &OwnedFd, n: u16) {
        link.conns.with_current(|c| {
            let r = c.unwrap().rx_ring(0).unwrap();
            let head = r.head().load(Ordering::Relaxed);
            r.head().store(head.wrapping_add(n), Ordering::Release);
        });
        sys::poke(peer.as_raw_fd());
    }

    /// A link with a connection whose ring 0 shares an eventfd with `peer`, one
    /// queue's wake-up, and a relay.
    fn connected() -> (OwnedFd, Link, Arc<RxWake>, Relay) {
        let (peer, ours) = shared_eventfd();
        let link = Link::default();
        link.conns.publish(Some(server_conn(ours)));
        let wake = RxWake::new().unwrap();
        link.rx_wakes.lock().unwrap().push(Arc::downgrade(&wake));
        (peer, link, wake, Relay::default())
    }

    #[test]
    fn a_sleeping_queue_is_woken_once_per_sleep_and_never_for_nothing() {
        if !sys::nowait_reads() {
            return;
        }
        let (peer, link, wake, mut relay) = connected();
        let woken = |w: &RxWake| matches!(sys::read_nowait(w.fd()), Ok(Some(_)));
        // The first turn sees the connection: nothing armed, nothing woken.
        assert_eq!(turn(&mut relay, &link), 0);
        assert!(!woken(&wake));
        // Awake (not armed): the ring is not watched, whatever the peer writes.
        peer_sends(&link, &peer, 1);
        assert_eq!(turn(&mut relay, &link), 0);
        assert_eq!(link.c.rx_wakeups.get(), 0);
        // Armed, having consumed that slot: the stale count wakes no one (nothing new).
        wake.arm(1);
        assert_eq!(turn(&mut relay, &link), 1);
        assert!(!woken(&wake));
        assert_eq!(link.c.rx_interrupts_ignored.get(), 1);
        // A packet and its signal: woken, once (seen by the peer's index moving, which
        // the turn looks at before it waits for the eventfd).
        peer_sends(&link, &peer, 1);
        assert_eq!(turn(&mut relay, &link), 0);
        assert!(woken(&wake));
        assert_eq!(link.c.rx_wakeups.get(), 1);
        peer_sends(&link, &peer, 1);
        assert_eq!(turn(&mut relay, &link), 0, "not watched again until the queue sleeps again");
        assert!(!woken(&wake));
        // It woke, polled everything, and sleeps again: the signal left meanwhile is
        // taken and, nothing being new, ignored; the next packet wakes it.
        wake.disarm();
        wake.arm(3);
        assert_eq!(turn(&mut relay, &link), 1);
        assert!(!woken(&wake));
        peer_sends(&link, &peer, 2);
        turn(&mut relay, &link);
        assert!(woken(&wake));
        assert_eq!(link.c.rx_wakeups.get(), 2);
    }

    #[test]
    fn a_peer_signalling_for_nothing_is_set_aside_and_a_new_connection_wakes_the_queue() {
        if !sys::nowait_reads() {
            return;
        }
        let (peer, link, wake, mut relay) = connected();
        turn(&mut relay, &link);
        wake.arm(0);
        for _ in 0..MAX_IGNORED {
            sys::poke(peer.as_raw_fd());
            assert_eq!(turn(&mut relay, &link), 1);
        }
        assert_eq!(link.c.rx_interrupts_throttled.get(), 1);
        assert_eq!(link.c.rx_interrupts_ignored.get(), u64::from(MAX_IGNORED));
        assert!(!matches!(sys::read_nowait(wake.fd()), Ok(Some(_))), "never woken for nothing");
        // Set aside: not polled, and the thread comes back for it in time.
        sys::poke(peer.as_raw_fd());
        assert_eq!(turn(&mut relay, &link), 0);
        assert!(relay.timeout(50) <= QUIET.as_millis() as i32 + 1);
        // A packet while set aside is seen once the ring is watched again.
        peer_sends(&link, &peer, 1);
        std::thread::sleep(QUIET);
        turn(&mut relay, &link);
        assert!(matches!(sys::read_nowait(wake.fd()), Ok(Some(_))));
        // Asleep again, the connection goes: the queue is woken to move on.
        wake.disarm();
        wake.arm(1);
        link.conns.publish(None);
        assert_eq!(turn(&mut relay, &link), 0);
        assert!(matches!(sys::read_nowait(wake.fd()), Ok(Some(_))));
        assert_eq!(link.c.rx_wakeups.get(), 2);
        // A queue released takes its eventfd with it: the relay keeps none.
        let weak = Arc::downgrade(&wake);
        drop(wake);
        turn(&mut relay, &link);
        assert!(weak.upgrade().is_none(), "closed with the queue");
    }
}
