//! How the control thread hands a connection to the queues and takes it back, with
//! no lock, no reference count and no free on the lcore.
//!
//! Dropping a connection closes the peer's interrupt eventfds and unmaps its
//! regions: system calls on what a peer handed us, which no lcore may make
//! (DESIGN.md, "Trust boundaries"). So a connection is freed only by the thread that
//! publishes them (the port's control thread; the main thread once that one ended),
//! never by a queue, and a queue never waits for anything to use one:
//!
//! * **Publication.** Each publication (a connection, or none) gets the next
//!   generation. The writer stores the pointer first, then the generation; the entry
//!   it replaced is *retired*, kept in a list only writers touch.
//! * **A queue** ([`Follower`]) loads the generation once per burst (one atomic load:
//!   all a burst pays when nothing changed). When it moved, the queue switches, with
//!   two stores to its own slot and one load: "any generation from g on" (g, the
//!   generation it loaded), then it loads the pointer, then "generation k exactly"
//!   (k, the entry's own) or "nothing" (no connection). A new queue's slot says
//!   "nothing", and so does a dropped queue's.
//! * **Retirement.** After each publication, and on every turn of its loop, the
//!   writer frees each retired entry that no slot may be using: every slot says
//!   "nothing", names another generation exactly, or says "from g on" with g past
//!   the entry's. A queue therefore holds at most the one connection it uses: a queue
//!   that never polls or was dropped holds none; one that stopped polling, the last
//!   it used, until the port stops.
//! * **Stop.** [`Published::release_all`] frees everything on the main thread once
//!   the control thread ended: the host stops a port only when no lcore holds its
//!   queues (`Port::stop` refuses while a queue handle is out, and hands none out
//!   until the port is started again), and the generation is moved past every entry
//!   a queue may still point to, so a queue switches before it touches one again.
//!
//! Why a queue never uses a freed entry. The pointer, the slots and the writer's
//! scan of them are sequentially consistent, so they sit in one total order. Say the
//! writer frees entry E (generation k) after its scan read queue Q's slot. E was
//! retired (the pointer replaced: store R) before that scan. If Q uses E, Q loaded
//! the pointer and got E (load L), after storing "from g on" with g <= k (store W:
//! the generation Q read was stored after E's pointer, so E is that generation's
//! entry or a later one). L returned E, so L comes before R, and W before L: the
//! scan reads W or a later store of Q's. W ("from g on", g <= k) and Q's next one
//! ("k exactly") keep E; any later store comes from a later switch, made after Q
//! stopped using E, or from Q's drop. And since that scan's load acquires what Q's
//! store released, Q's last reads of E happen before E is freed.

use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// A slot's "nothing": the queue uses no entry.
const IDLE: u64 = u64::MAX;

/// A slot's "any generation from `g` on" (the switch, before it knows its entry).
fn from(g: u64) -> u64 {
    g << 1
}

/// A slot's "generation `g` exactly".
fn exactly(g: u64) -> u64 {
    (g << 1) | 1
}

/// Whether a queue whose slot says `slot` may be using the entry of generation `g`.
fn may_use(slot: u64, g: u64) -> bool {
    match slot {
        IDLE => false,
        s if s & 1 == 1 => s >> 1 == g,
        s => g >= s >> 1,
    }
}

/// One publication: its generation and what it carries.
struct Entry<T> {
    gen: u64,
    val: T,
}

/// What only writers touch (the control thread, and the main thread once that one
/// ended; never an lcore).
struct Writer<T> {
    /// Entries replaced, not freed yet (each from `Box::into_raw`).
    retired: Vec<*mut Entry<T>>,
    /// Every queue's slot (the queue holds the other reference).
    slots: Vec<Arc<AtomicU64>>,
}

/// The value published to the queues of one port (its live connection).
pub struct Published<T> {
    /// Generation of the current publication (0: none yet).
    gen: AtomicU64,
    /// The current entry (from `Box::into_raw`), null for none.
    current: AtomicPtr<Entry<T>>,
    writer: Mutex<Writer<T>>,
}

// SAFETY: the raw pointers are entries owned by this value (from `Box::into_raw`),
// freed under the writer lock only, as the module says; a `T` is shared with the
// queues' threads (`Sync`) and dropped on a writer's thread (`Send`).
unsafe impl<T: Send + Sync> Send for Published<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for Published<T> {}

impl<T> Default for Published<T> {
    fn default() -> Self {
        Published {
            gen: AtomicU64::new(0),
            current: AtomicPtr::new(ptr::null_mut()),
            writer: Mutex::new(Writer { retired: Vec::new(), slots: Vec::new() }),
        }
    }
}

impl<T> std::fmt::Debug for Published<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Published")
            .field("gen", &self.gen.load(Ordering::Relaxed))
            .field("current", &!self.current.load(Ordering::Relaxed).is_null())
            .finish_non_exhaustive()
    }
}

impl<T> Published<T> {
    fn lock(&self) -> MutexGuard<'_, Writer<T>> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A queue's view (its slot registered here; on the main thread, at queue setup).
    pub fn follower(self: &Arc<Self>) -> Follower<T> {
        let slot = Arc::new(AtomicU64::new(IDLE));
        self.lock().slots.push(slot.clone());
        Follower { board: self.clone(), slot, gen: u64::MAX, entry: ptr::null() }
    }

    /// Publish `v` (a writer): the queues switch to it on their next burst. What it
    /// replaces is retired, and freed here once no queue may be using it.
    pub fn publish(&self, v: Option<T>) {
        let mut w = self.lock();
        let g = self.gen.load(Ordering::Relaxed) + 1;
        let p = v.map_or(ptr::null_mut(), |val| Box::into_raw(Box::new(Entry { gen: g, val })));
        // The pointer before the generation: a queue that loads generation g then
        // finds g's entry or a later one.
        let old = self.current.swap(p, Ordering::SeqCst);
        self.gen.store(g, Ordering::SeqCst);
        if !old.is_null() {
            w.retired.push(old);
        }
        Self::collect_locked(&mut w);
    }

    /// Free the retired entries no queue may be using (a writer, on every turn of
    /// its loop); returns how many are still kept.
    pub fn collect(&self) -> usize {
        Self::collect_locked(&mut self.lock())
    }

    fn collect_locked(w: &mut Writer<T>) -> usize {
        let Writer { retired, slots } = w;
        // A dropped queue's slot said "nothing" before its reference went.
        slots.retain(|s| Arc::strong_count(s) > 1 || s.load(Ordering::SeqCst) != IDLE);
        retired.retain(|&p| {
            // SAFETY: a retired entry is alive until it is freed just below, under
            // the writer lock we hold.
            let g = unsafe { (*p).gen };
            if slots.iter().any(|s| may_use(s.load(Ordering::SeqCst), g)) {
                return true;
            }
            // SAFETY: from `Box::into_raw`, no longer current, and no queue may be
            // using it (the module's argument); freed once, as it leaves the list.
            drop(unsafe { Box::from_raw(p) });
            false
        });
        retired.len()
    }

    /// The generation of the current publication: it moves on with every one (a
    /// writer's view of which connection is live, compared turn to turn).
    pub fn generation(&self) -> u64 {
        self.gen.load(Ordering::Acquire)
    }

    /// Run `f` on the current value (a writer: nothing frees it meanwhile).
    pub fn with_current<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        let _w = self.lock();
        // SAFETY: the current entry is freed only once replaced and retired, by a
        // writer holding the lock we hold.
        f(unsafe { self.current.load(Ordering::SeqCst).as_ref() }.map(|e| &e.val))
    }

    /// Free everything, the current value included (the main thread, when the port
    /// stops or closes: no lcore bursts on its queues until it starts again). The
    /// generation moves past every entry, so a queue switches before using one.
    pub fn release_all(&self) {
        let mut w = self.lock();
        let old = self.current.swap(ptr::null_mut(), Ordering::SeqCst);
        if !old.is_null() {
            self.gen.store(self.gen.load(Ordering::Relaxed) + 1, Ordering::SeqCst);
            w.retired.push(old);
        }
        for p in w.retired.drain(..) {
            // SAFETY: from `Box::into_raw`, retired; no queue bursts now (above).
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

impl<T> Drop for Published<T> {
    fn drop(&mut self) {
        // The last reference: every queue (each holds one) is gone.
        self.release_all();
    }
}

/// A queue's view of a [`Published`] value.
pub struct Follower<T> {
    board: Arc<Published<T>>,
    /// What this queue may be using (see the module), read by the writers.
    slot: Arc<AtomicU64>,
    /// The generation last seen (`u64::MAX`: never looked).
    gen: u64,
    /// The entry in use, null for none; the slot names it exactly.
    entry: *const Entry<T>,
}

// SAFETY: `entry` is an entry of `board` that stays alive while the slot names it;
// the value is shared (`Sync`) and never dropped by the follower.
unsafe impl<T: Send + Sync> Send for Follower<T> {}

impl<T> Follower<T> {
    /// The current value, and whether it is another than at the last call (a new
    /// connection: the queue's state on it starts afresh). One atomic load when
    /// nothing changed; never a lock, a wait or a free.
    #[inline(always)]
    pub fn get(&mut self) -> (Option<&T>, bool) {
        let g = self.board.gen.load(Ordering::Acquire);
        let fresh = g != self.gen && self.switch(g);
        // SAFETY: `entry` is null or the entry this follower's slot names exactly,
        // which no writer frees while it does.
        (unsafe { self.entry.as_ref() }.map(|e| &e.val), fresh)
    }

    /// Move to the current entry (the generation moved to `g` or later); whether
    /// there is one. An entry found here is always another than the last one: the
    /// generation only grows, and an entry is found only past the one left.
    #[cold]
    #[inline(never)]
    fn switch(&mut self, g: u64) -> bool {
        self.slot.store(from(g), Ordering::SeqCst);
        let p = self.board.current.load(Ordering::SeqCst);
        // SAFETY: null, or an entry of generation g or later (stored before
        // generation g was), which no writer frees while the slot says "from g on".
        match unsafe { p.as_ref() } {
            None => {
                self.slot.store(IDLE, Ordering::SeqCst);
                self.entry = ptr::null();
                self.gen = g;
                false
            }
            Some(e) => {
                self.slot.store(exactly(e.gen), Ordering::SeqCst);
                self.entry = p;
                self.gen = e.gen;
                true
            }
        }
    }
}

impl<T> Drop for Follower<T> {
    fn drop(&mut self) {
        self.slot.store(IDLE, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc;
    use std::thread::{self, ThreadId};
    use std::time::{Duration, Instant};

    /// A published value that records the thread it was dropped on.
    struct Probe {
        id: u32,
        drops: Arc<Mutex<Vec<(u32, ThreadId)>>>,
    }

    impl Drop for Probe {
        fn drop(&mut self) {
            self.drops.lock().unwrap().push((self.id, thread::current().id()));
        }
    }

    /// An lcore: a thread that owns a follower and calls `get` when asked, answering
    /// with the id it sees and whether it is fresh.
    struct Lcore {
        ask: Option<mpsc::Sender<()>>,
        answer: mpsc::Receiver<(Option<u32>, bool)>,
        thread: Option<thread::JoinHandle<ThreadId>>,
    }

    impl Lcore {
        fn new(mut f: Follower<Probe>) -> Lcore {
            let (ask, asked) = mpsc::channel::<()>();
            let (tell, answer) = mpsc::channel();
            let thread = thread::spawn(move || {
                while asked.recv().is_ok() {
                    let (v, fresh) = f.get();
                    tell.send((v.map(|p| p.id), fresh)).unwrap();
                }
                // The follower is dropped here, on the lcore: it frees nothing.
                drop(f);
                thread::current().id()
            });
            Lcore { ask: Some(ask), answer, thread: Some(thread) }
        }

        fn burst(&self) -> (Option<u32>, bool) {
            self.ask.as_ref().unwrap().send(()).unwrap();
            self.answer.recv_timeout(Duration::from_secs(5)).unwrap()
        }

        /// End the thread (its follower dropped there); its id.
        fn end(mut self) -> ThreadId {
            self.ask.take();
            self.thread.take().unwrap().join().unwrap()
        }
    }

    #[test]
    fn only_the_writer_frees_a_connection_and_only_once_every_queue_moved_past_it() {
        let drops = Arc::new(Mutex::new(Vec::new()));
        let probe = |id| Some(Probe { id, drops: drops.clone() });
        let dropped = || drops.lock().unwrap().iter().map(|d| d.0).collect::<Vec<_>>();
        let board = Arc::new(Published::<Probe>::default());
        let me = thread::current().id();
        let lcore = Lcore::new(board.follower());
        // A queue that never polls, and one that is dropped: neither keeps anything.
        let idle = board.follower();
        let gone = board.follower();

        assert_eq!(lcore.burst(), (None, false), "nothing published yet");
        board.publish(probe(1));
        assert_eq!(lcore.burst(), (Some(1), true));
        assert_eq!(lcore.burst(), (Some(1), false), "the same connection: not fresh");
        board.publish(probe(2));
        assert_eq!(board.collect(), 1, "1 is kept: the lcore still uses it");
        assert!(dropped().is_empty());
        assert_eq!(lcore.burst(), (Some(2), true));
        assert!(dropped().is_empty(), "the lcore moved past 1 and freed nothing");
        assert_eq!(board.collect(), 0);
        assert_eq!(dropped(), [1], "freed by the writer once the lcore moved past it");

        // The peer leaves: no connection; the lcore lets go of 2 on its next burst.
        board.publish(None);
        assert_eq!(board.collect(), 1);
        assert_eq!(lcore.burst(), (None, false));
        assert_eq!(board.collect(), 0);
        assert_eq!(dropped(), [1, 2]);

        // A queue that stopped polling keeps only the connection it last used.
        board.publish(probe(3));
        assert_eq!(lcore.burst(), (Some(3), true));
        for id in 4..8 {
            board.publish(probe(id));
        }
        assert_eq!(board.collect(), 1, "only 3 is kept (4 to 6 freed at once)");
        assert_eq!(dropped(), [1, 2, 4, 5, 6]);

        // The lcore ends, dropping its follower there: its slot counts as moved.
        drop(gone);
        let lcore_thread = lcore.end();
        assert_eq!(board.collect(), 0);
        assert_eq!(dropped(), [1, 2, 4, 5, 6, 3]);

        // The port stops: the current connection is freed by the main thread.
        board.release_all();
        assert_eq!(dropped(), [1, 2, 4, 5, 6, 3, 7]);
        drop(idle);
        drop(board);
        let d = drops.lock().unwrap();
        assert!(d.iter().all(|(_, t)| *t == me), "every connection freed on the writer's thread");
        assert!(d.iter().all(|(_, t)| *t != lcore_thread));
    }

    #[test]
    fn after_a_stop_a_queue_switches_before_touching_what_was_freed() {
        let drops = Arc::new(Mutex::new(Vec::new()));
        let board = Arc::new(Published::default());
        let mut f = board.follower();
        board.publish(Some(Probe { id: 1, drops: drops.clone() }));
        assert_eq!(f.get().0.map(|p| p.id), Some(1));
        board.release_all();
        assert_eq!(drops.lock().unwrap().len(), 1);
        assert!(f.get().0.is_none(), "the generation moved: the queue let go without a look");
        board.publish(Some(Probe { id: 2, drops: drops.clone() }));
        let (v, fresh) = f.get();
        assert_eq!((v.map(|p| p.id), fresh), (Some(2), true));
    }

    /// Published values that check, while a queue reads them, that they are alive.
    struct Live {
        alive: AtomicU64,
        freed_off_writer: Arc<AtomicUsize>,
        writer: ThreadId,
    }

    const ALIVE: u64 = 0x6c69_7665_6c69_7665;

    impl Drop for Live {
        fn drop(&mut self) {
            self.alive.store(0, Ordering::SeqCst);
            if thread::current().id() != self.writer {
                self.freed_off_writer.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    #[test]
    fn queues_switching_while_connections_come_and_go_use_only_live_ones() {
        // Two lcores burst as fast as they can while the writer publishes and
        // collects; a freed value read by a queue would show a cleared mark (and
        // AddressSanitizer would see the access).
        let board = Arc::new(Published::<Live>::default());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let off = Arc::new(AtomicUsize::new(0));
        let writer = thread::current().id();
        let lcores: Vec<_> = (0..2)
            .map(|_| {
                let (mut f, stop) = (board.follower(), stop.clone());
                thread::spawn(move || {
                    let (mut bursts, mut switches, mut dead) = (0u64, 0u64, 0u64);
                    while !stop.load(Ordering::Relaxed) {
                        let (v, fresh) = f.get();
                        if let Some(v) = v {
                            dead += u64::from(v.alive.load(Ordering::SeqCst) != ALIVE);
                        }
                        switches += u64::from(fresh);
                        bursts += 1;
                    }
                    (bursts, switches, dead)
                })
            })
            .collect();
        let t = Instant::now();
        let mut n = 0u64;
        while t.elapsed() < Duration::from_millis(300) {
            let v = (n % 3 != 2).then(|| Live { alive: AtomicU64::new(ALIVE), freed_off_writer: off.clone(), writer });
            board.publish(v);
            board.collect();
            n += 1;
        }
        stop.store(true, Ordering::Relaxed);
        for l in lcores {
            let (bursts, switches, dead) = l.join().unwrap();
            assert_eq!(dead, 0, "a queue read a freed connection ({bursts} bursts, {switches} switches)");
            assert!(switches > 0, "the queue saw connections change");
        }
        assert!(n > 100);
        assert_eq!(board.collect(), 0, "every queue gone: nothing kept");
        board.release_all();
        assert_eq!(off.load(Ordering::Relaxed), 0, "every value freed on the writer's thread");
    }

    #[test]
    fn slots_say_what_a_queue_may_use() {
        assert!(!may_use(IDLE, 0) && !may_use(IDLE, u64::MAX >> 1));
        assert!(may_use(exactly(5), 5) && !may_use(exactly(5), 4) && !may_use(exactly(5), 6));
        assert!(may_use(from(5), 5) && may_use(from(5), 9) && !may_use(from(5), 4));
    }
}
