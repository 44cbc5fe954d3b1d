//! Lcores: threads pinned to CPUs, each with a unique lcore id that indexes per-lcore
//! state (mempool caches). Threads that are not lcores work too: they have no id
//! and bypass per-lcore caches, or call [`register_thread`] to get one.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

/// Highest lcore id + 1.
pub const MAX_LCORES: usize = 128;

/// Marker for "this thread is not an lcore".
pub const LCORE_ID_ANY: u32 = u32::MAX;

static USED: [AtomicBool; MAX_LCORES] = [const { AtomicBool::new(false) }; MAX_LCORES];

thread_local! {
    static LCORE_ID: Cell<u32> = const { Cell::new(LCORE_ID_ANY) };
    static GUARD: Cell<Option<LcoreGuard>> = const { Cell::new(None) };
}

/// Errors of lcore handling.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LcoreError {
    /// Bad `-l` list syntax.
    #[error("bad lcore list `{list}`: {why} (expected e.g. `0-1` or `0,2-3`)")]
    BadList {
        /// The list given.
        list: String,
        /// What is wrong.
        why: String,
    },
    /// Id out of range.
    #[error("lcore {0} is out of range (0..{MAX_LCORES})")]
    OutOfRange(u32),
    /// Id taken by another live thread.
    #[error("lcore {0} is already in use by another thread")]
    Busy(u32),
    /// No id left.
    #[error("all {MAX_LCORES} lcore ids are in use")]
    Exhausted,
    /// This thread already has an id.
    #[error("this thread is already lcore {0}")]
    AlreadyRegistered(u32),
    /// Pinning failed.
    #[error("cannot pin lcore {lcore} to CPU {cpu}: {err}")]
    Pin {
        /// Lcore id.
        lcore: u32,
        /// CPU.
        cpu: u32,
        /// OS error text.
        err: String,
    },
}

/// Releases the thread's lcore id when the thread exits.
struct LcoreGuard(u32);

impl Drop for LcoreGuard {
    fn drop(&mut self) {
        // Release: everything this thread did with per-lcore state happens-before the
        // next thread that acquires the id.
        USED[self.0 as usize].store(false, Ordering::Release);
    }
}

/// The calling thread's lcore id, or [`LCORE_ID_ANY`].
#[inline(always)]
pub fn lcore_id() -> u32 {
    LCORE_ID.with(|c| c.get())
}

fn claim(id: u32) -> Result<(), LcoreError> {
    if id as usize >= MAX_LCORES {
        return Err(LcoreError::OutOfRange(id));
    }
    let cur = lcore_id();
    if cur != LCORE_ID_ANY {
        return Err(LcoreError::AlreadyRegistered(cur));
    }
    USED[id as usize]
        .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
        .map_err(|_| LcoreError::Busy(id))?;
    LCORE_ID.with(|c| c.set(id));
    GUARD.with(|g| g.set(Some(LcoreGuard(id))));
    Ok(())
}

/// Give the calling (non-lcore) thread a free lcore id, highest first so that ids
/// matching CPU numbers stay free for pinned lcores. Released when the thread ends
/// or on [`unregister_thread`].
pub fn register_thread() -> Result<u32, LcoreError> {
    for id in (0..MAX_LCORES as u32).rev() {
        match claim(id) {
            Ok(()) => return Ok(id),
            Err(LcoreError::Busy(_)) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(LcoreError::Exhausted)
}

/// Make the calling thread a specific lcore (used by [`launch`] and the main lcore).
pub fn register_as(id: u32) -> Result<(), LcoreError> {
    claim(id)
}

/// Give up the calling thread's lcore id now.
pub fn unregister_thread() {
    LCORE_ID.with(|c| c.set(LCORE_ID_ANY));
    GUARD.with(|g| drop(g.take()));
}

/// Parse a DPDK lcore list such as `0-1`, `0,2-3` or `3`. Sorted, no duplicates.
/// (A set of bits: a list of many overlapping ranges costs one step a range.)
pub fn parse_lcore_list(s: &str) -> Result<Vec<u32>, LcoreError> {
    const _: () = assert!(MAX_LCORES <= 128, "the lcore set is one u128");
    let bad = |why: &str| LcoreError::BadList { list: s.to_string(), why: why.to_string() };
    if s.trim().is_empty() {
        return Err(bad("empty"));
    }
    let mut set = 0u128;
    for part in s.split(',') {
        let part = part.trim();
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let a: u32 = a.trim().parse().map_err(|_| bad(&format!("`{part}` is not a number or range")))?;
        let b: u32 = b.trim().parse().map_err(|_| bad(&format!("`{part}` is not a number or range")))?;
        if a > b {
            return Err(bad(&format!("range `{part}` goes backwards")));
        }
        if b as usize >= MAX_LCORES {
            return Err(LcoreError::OutOfRange(b));
        }
        // Bits a..=b (b < 128).
        set |= (u128::MAX >> (127 - b)) & (u128::MAX << a);
    }
    Ok((0..MAX_LCORES as u32).filter(|&c| set >> c & 1 == 1).collect())
}

/// Pin the calling thread to `cpu`.
pub fn pin_to_cpu(lcore: u32, cpu: u32) -> Result<(), LcoreError> {
    // SAFETY: `cpu_set_t` is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu as usize >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
        return Err(LcoreError::Pin { lcore, cpu, err: "CPU number too large".into() });
    }
    // SAFETY: `cpu` is within the set's capacity (checked above).
    unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is this thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(LcoreError::Pin { lcore, cpu, err: std::io::Error::last_os_error().to_string() });
    }
    Ok(())
}

/// Keep the calling thread, and the threads it starts from now on, off `cpus` (the
/// pinned lcores' own), as DPDK keeps its control threads off the data-plane cores:
/// its affinity becomes what it was less `cpus`, unless that would leave none.
/// Returns whether it changed.
pub fn avoid_cpus(cpus: &[u32]) -> bool {
    // SAFETY: `cpu_set_t` is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `set` is a valid cpu_set_t of `size` bytes; pid 0 is this thread.
    if unsafe { libc::sched_getaffinity(0, size, &mut set) } != 0 {
        return false;
    }
    let mut left = set;
    for &c in cpus.iter().filter(|&&c| (c as usize) < 8 * size) {
        // SAFETY: `c` is within the set's capacity (filtered above).
        unsafe { libc::CPU_CLR(c as usize, &mut left) };
    }
    // SAFETY: both sets are valid cpu_set_t values.
    let (n_left, n_was) = unsafe { (libc::CPU_COUNT(&left), libc::CPU_COUNT(&set)) };
    if n_left == 0 || n_left == n_was {
        return false;
    }
    // SAFETY: `left` is a valid cpu_set_t of the size passed; pid 0 is this thread.
    unsafe { libc::sched_setaffinity(0, size, &left) == 0 }
}

/// A launched worker lcore.
pub struct LcoreHandle<T> {
    /// The lcore id.
    pub lcore: u32,
    handle: std::thread::JoinHandle<Result<T, LcoreError>>,
}

impl<T> LcoreHandle<T> {
    /// True once the thread has ended (its result waits for [`LcoreHandle::join`]).
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Wait for the lcore's function to return. A panic in it is reported as `Err`
    /// with the panic message.
    pub fn join(self) -> Result<T, String> {
        match self.handle.join() {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(e.to_string()),
            Err(p) => Err(panic_message(&p)),
        }
    }
}

/// The text of a panic payload.
pub fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

/// Start `f` on a new thread that is lcore `lcore`, pinned to CPU `lcore` when
/// `pin` is set (DPDK's default lcore-to-CPU mapping).
pub fn launch<T, F>(lcore: u32, pin: bool, f: F) -> std::io::Result<LcoreHandle<T>>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    launch_on(lcore, pin.then_some(lcore), f)
}

/// Like [`launch`], pinning the thread to `cpu` when given (lcore ids and CPU
/// numbers differ when a pipeline file says so).
pub fn launch_on<T, F>(lcore: u32, cpu: Option<u32>, f: F) -> std::io::Result<LcoreHandle<T>>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let handle = std::thread::Builder::new().name(format!("lcore-{lcore}")).spawn(move || {
        block_process_signals();
        register_as(lcore)?;
        if let Some(cpu) = cpu {
            pin_to_cpu(lcore, cpu)?;
        }
        // The thread's first allocation makes its malloc arena, which may wait for
        // a lock other threads starting or ending hold: done here, before its work.
        drop(std::hint::black_box(Box::new([0u8; 64])));
        // Its work runs between two names (the second the same as the first): what
        // comes before and after is the thread starting and ending (a tracer, such
        // as the lcore syscall test, tells them apart by these).
        let _ = rustix::thread::set_name(&std::ffi::CString::new(format!("lcore-{lcore}")).unwrap_or_default());
        let out = f();
        let _ = rustix::thread::set_name(&std::ffi::CString::new(format!("lcore-{lcore}.end")).unwrap_or_default());
        Ok(out)
    })?;
    Ok(LcoreHandle { lcore, handle })
}

/// Signals meant for the process (Ctrl-C, `kill`, a closed terminal, a quit key):
/// blocked on every lcore thread, so the kernel delivers them to a thread that is not
/// an lcore and a handler (its write to a pipe, its lock) never runs on one.
const PROCESS_SIGNALS: [libc::c_int; 5] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGUSR1];

/// Block [`PROCESS_SIGNALS`] on the calling thread.
fn block_process_signals() {
    // SAFETY: `set` is a local sigset_t, initialised by sigemptyset before use;
    // pthread_sigmask changes only the calling thread's mask and reads `set` only.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in PROCESS_SIGNALS {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn lcore_threads_block_the_process_signals() {
        let h = launch(101, false, || {
            // SAFETY: as in block_process_signals; the mask is read into a local.
            unsafe {
                let mut now: libc::sigset_t = std::mem::zeroed();
                libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now);
                PROCESS_SIGNALS.iter().all(|&s| libc::sigismember(&now, s) == 1)
            }
        })
        .unwrap();
        assert!(h.join().unwrap(), "an lcore thread leaves a process signal unblocked");
    }

    #[test]
    fn parses_lists() {
        assert_eq!(parse_lcore_list("0-1").unwrap(), vec![0, 1]);
        assert_eq!(parse_lcore_list("3,0-1,1").unwrap(), vec![0, 1, 3]);
        assert!(matches!(parse_lcore_list("1-0"), Err(LcoreError::BadList { .. })));
        assert!(matches!(parse_lcore_list("a"), Err(LcoreError::BadList { .. })));
        assert!(matches!(parse_lcore_list(""), Err(LcoreError::BadList { .. })));
        assert_eq!(parse_lcore_list("0-500"), Err(LcoreError::OutOfRange(500)));
        // The ends of the set, and against a list written out.
        assert_eq!(parse_lcore_list("127").unwrap(), vec![127]);
        assert_eq!(parse_lcore_list("0").unwrap(), vec![0]);
        assert_eq!(parse_lcore_list("0-127").unwrap(), (0..128).collect::<Vec<u32>>());
        assert_eq!(
            parse_lcore_list("120-127, 5 ,6-6,63-65").unwrap(),
            vec![5, 6, 63, 64, 65, 120, 121, 122, 123, 124, 125, 126, 127]
        );
        assert_eq!(parse_lcore_list("128"), Err(LcoreError::OutOfRange(128)));
    }

    #[test]
    fn ids_are_unique_and_released_at_thread_exit() {
        let h = launch(100, false, || {
            assert_eq!(lcore_id(), 100);
            // A second thread cannot take the same id while this one lives.
            let r = std::thread::spawn(|| register_as(100)).join().unwrap();
            assert_eq!(r, Err(LcoreError::Busy(100)));
            lcore_id()
        })
        .unwrap();
        assert_eq!(h.join().unwrap(), 100);
        // Released: a new thread can be lcore 100 now.
        let again = launch(100, false, lcore_id).unwrap();
        assert_eq!(again.join().unwrap(), 100);
        assert_eq!(lcore_id(), LCORE_ID_ANY);
    }

    #[test]
    fn launched_lcore_is_pinned() {
        let h = launch(0, true, || {
            // SAFETY: plain data out-parameter of the right size.
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            // SAFETY: valid pointer and size; pid 0 = this thread.
            let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
            assert_eq!(rc, 0);
            // SAFETY: reading the set filled above.
            (0..4).filter(|c| unsafe { libc::CPU_ISSET(*c, &set) }).collect::<Vec<_>>()
        })
        .unwrap();
        assert_eq!(h.join().unwrap(), vec![0]);
    }
}
