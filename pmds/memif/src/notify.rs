//! Interrupts to a peer that asks for them, without the lcore ever touching the
//! peer's descriptor.
//!
//! A ring's interrupt eventfd is shared with the peer: whatever descriptor it gave us
//! (or whichever we gave it), the peer holds the same open file, so it can clear
//! `O_NONBLOCK` and fill the counter to its maximum, after which a `write(2)` blocks
//! until it reads. A queue therefore never makes a system call on it:
//!
//! * after moving a ring's index, a queue whose peer asked for interrupts (the ring's
//!   flags lack `MASK_INT`) marks the ring's [`Doorbell`] (one atomic swap) and, if it
//!   was not marked yet, pokes the port's [`Wake`]: an eventfd we created
//!   non-blocking and never hand to anyone, so no one else can fill it or change its
//!   flags, and a write to it cannot block;
//! * the port's control thread polls that eventfd beside its sockets and, for each
//!   marked ring of the live connection, has the kernel add one to the peer's eventfd
//!   ([`crate::sys::Signaller`]: an asynchronous read of nothing, which signals the
//!   eventfd when it completes). That signal never waits, whatever the peer did to
//!   the descriptor (a full counter stays full, and the peer has a wake-up pending
//!   anyway), so the control thread cannot be stalled by it either, nor can the
//!   port's teardown or any other port.
//!
//! Counted (`interrupts_sent`, `interrupts_failed`); a ring whose interrupt
//! descriptor is not an eventfd is refused at `ADD_RING` (`ctl`). The other way, the
//! peer's interrupts waking our sleeping queues, is [`crate::wakeup`]'s.

use crate::ctl::{Level, Link};
use crate::ring::Conn;
use crate::sys::{self, Signaller};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The port's own eventfd: the queues poke it, the control thread polls it.
#[derive(Debug)]
pub struct Wake(OwnedFd);

impl Wake {
    /// A new one (non-blocking, close-on-exec; never sent to a peer).
    pub fn new() -> io::Result<Arc<Wake>> {
        Ok(Arc::new(Wake(sys::eventfd()?)))
    }

    /// Its descriptor, to poll.
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Wake the control thread (from a queue: non-blocking, on our own descriptor).
    #[inline]
    pub(crate) fn poke(&self) {
        sys::poke(self.0.as_raw_fd());
    }

    /// Take the pokes so far (the control thread, before it looks at the doorbells).
    pub fn drain(&self) {
        sys::drain(self.0.as_raw_fd());
    }
}

/// One ring's interrupt to the peer.
#[derive(Debug)]
pub struct Doorbell {
    /// Set by the queue after it moved the ring's index, cleared by the control thread
    /// when it signals the peer.
    wanted: AtomicBool,
    /// The eventfd the peer waits on (checked to be one).
    peer: OwnedFd,
    wake: Arc<Wake>,
}

impl Doorbell {
    /// A doorbell signalling `peer`, served by the thread that polls `wake`.
    pub fn new(peer: OwnedFd, wake: Arc<Wake>) -> Doorbell {
        Doorbell { wanted: AtomicBool::new(false), peer, wake }
    }

    /// Ask for the peer to be signalled (the queue, after its index store).
    ///
    /// The swap is a read-modify-write with release ordering, so the control thread
    /// that takes the mark (an acquiring swap) sees the ring's index as stored
    /// before, and so does the peer it then signals; a mark already set is taken
    /// later by that same thread, which signals after.
    #[inline]
    pub fn ring(&self) {
        if !self.wanted.swap(true, Ordering::AcqRel) {
            self.wake.poke();
        }
    }

    /// The peer's eventfd (for the control thread only: an lcore never names it).
    pub(crate) fn peer_fd(&self) -> RawFd {
        self.peer.as_raw_fd()
    }

    /// Whether a signal was asked for since the last call (the mark is cleared).
    fn take(&self) -> bool {
        self.wanted.swap(false, Ordering::AcqRel)
    }

    /// Whether a signal is asked for now (tests).
    #[cfg(test)]
    pub fn is_wanted(&self) -> bool {
        self.wanted.load(Ordering::Acquire)
    }
}

/// The control thread's side: signals the peer for each marked ring of the port's
/// live connection.
pub struct Notifier {
    wake: Arc<Wake>,
    sig: Option<Signaller>,
    /// Why there is no signaller (logged once, when a peer first asks).
    no_sig: String,
    told: bool,
    fds: Vec<RawFd>,
}

impl Notifier {
    /// The notifier of a port whose queues poke `wake`.
    pub fn new(wake: Arc<Wake>) -> Notifier {
        let (sig, no_sig) = match Signaller::new() {
            Ok(s) => (Some(s), String::new()),
            Err(e) => (None, e.to_string()),
        };
        Notifier { wake, sig, no_sig, told: false, fds: Vec::new() }
    }

    /// The descriptor to poll beside the control sockets.
    pub fn fd(&self) -> RawFd {
        self.wake.fd()
    }

    /// Signal the peer for every ring marked since the last call (`woken`: the
    /// wake descriptor polled readable). Cheap when nothing is marked.
    pub fn serve(&mut self, link: &Link, woken: bool, say: &dyn Fn(Level, &str)) {
        if woken {
            self.wake.drain();
        }
        // On the thread that frees connections: the live one stays open meanwhile.
        link.conns.with_current(|c| self.signal(link, c, say));
    }

    fn signal(&mut self, link: &Link, c: Option<&Conn>, say: &dyn Fn(Level, &str)) {
        let Some(c) = c else { return };
        self.fds.clear();
        for r in c.c2s.iter().chain(c.s2c.iter()).flatten() {
            if let Some(d) = r.doorbell() {
                if d.take() {
                    self.fds.push(d.peer.as_raw_fd());
                }
            }
        }
        if self.fds.is_empty() {
            return;
        }
        let sent = match &self.sig {
            Some(s) => s.signal(&self.fds),
            None => {
                if !self.told {
                    self.told = true;
                    say(
                        Level::Warning,
                        &format!("cannot signal a peer that asks for interrupts ({}): it must poll", self.no_sig),
                    );
                }
                0
            }
        };
        link.c.interrupts_sent.add(sent as u64);
        link.c.interrupts_failed.add((self.fds.len() - sent) as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::tests::saturated_eventfd;
    use std::time::{Duration, Instant};

    #[test]
    fn the_control_thread_signals_a_saturated_blocking_eventfd_without_waiting() {
        let wake = Wake::new().unwrap();
        let peer = saturated_eventfd();
        let peer_fd = peer.as_raw_fd();
        let link = Link::default();
        link.conns.publish(Some(crate::ring::tests::server_conn(Doorbell::new(peer, wake.clone()))));
        let mut n = Notifier::new(wake.clone());
        // The queue's side: it rings through the connection it follows.
        let mut q = link.conns.follower();
        q.get().0.unwrap().s2c[0].as_ref().unwrap().doorbell().unwrap().ring();
        assert!(sys::poll(&[wake.fd()], 0)[0], "the queue's poke wakes the thread");
        let t = Instant::now();
        n.serve(&link, true, &|_, _| {});
        assert!(t.elapsed() < Duration::from_secs(1));
        assert!(!sys::poll(&[wake.fd()], 0)[0], "the pokes were taken");
        // Signalled once, and only when asked again.
        n.serve(&link, false, &|_, _| {});
        let sent = link.c.interrupts_sent.get() + link.c.interrupts_failed.get();
        assert_eq!(sent, 1);
        if link.c.interrupts_sent.get() == 1 {
            let mut v = 0u64;
            // SAFETY: reads 8 bytes into a live u64 (the counter is not zero).
            assert_eq!(unsafe { libc::read(peer_fd, (&mut v as *mut u64).cast(), 8) }, 8);
            assert_eq!(v, u64::MAX, "the kernel added one to the full counter");
        }
        // The connection goes: the thread has nothing to signal, and frees it itself
        // once the queue moved past it.
        link.conns.publish(None);
        n.serve(&link, false, &|_, _| {});
        assert_eq!(link.conns.collect(), 1, "kept while the queue may use it");
        assert!(q.get().0.is_none());
        assert_eq!(link.conns.collect(), 0, "freed on the control thread");
    }
}
