//! Changing a running node: the control plane's half of a node (its [`Controller`])
//! answers table commands (`ip route add`, `acl rule add`, `bridge mac flush`, ...)
//! off the fast path. It builds what changes (a new FIB, a new rule set) on its own
//! thread and hands it to the node through a [`Remote`]; the node's lcore takes it at
//! a burst boundary ([`crate::Node::apply`]) and hands back what it replaced, which
//! the control thread frees.
//!
//! This is quiescent-state reclamation (as DPDK's `rte_rcu_qsbr`) with one reader:
//! every table belongs to one node, run by one lcore. The lcore swaps the new
//! version in between two bursts, a point where it holds no reference into the old
//! one (its quiescent state), and gives the old one back; only then is it freed, on
//! the control thread. So the lcore never frees or builds a table, never waits on a
//! lock (it tries the mailbox's and comes back the next walk if the writer holds
//! it), and pays one load per walk when nothing changes: no lock and no atomic
//! read-modify-write on the fast path. A change is in force from the next burst the
//! node handles after the lcore's next walk begins, and the writer's call returns
//! once it is.

use std::any::Any;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What a controller hands a node, and what the node hands back (the version it
/// replaced, or an answer). Each node kind downcasts to its own types.
pub type Msg = Box<dyn Any + Send>;

/// How long [`Remote::call`] waits for the lcore to take a change (an lcore walks
/// its graph every few microseconds; one that takes no change for this long is
/// stopped or stuck, and the change is withdrawn: nothing changes).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(1);

/// A node's answer when applying a change panicked: the node kept its old version.
#[derive(Debug)]
pub struct ApplyPanicked;

/// The control plane's half of a node: it answers the table commands of its node
/// kind, building new versions off the fast path and handing them over with
/// [`Remote::call`].
pub trait Controller: Send {
    /// The commands it answers, each `(syntax, help)`, e.g. `("ip route del <PREFIX>",
    /// "remove the route of PREFIX")`: for `help` and completion.
    fn grammar(&self) -> &'static [(&'static str, &'static str)];

    /// Does `words` belong to this controller (its first words match one of its
    /// commands)? A command no controller accepts is unknown.
    fn accepts(&self, words: &[&str]) -> bool {
        self.grammar().iter().any(|(syntax, _)| {
            let fixed: Vec<&str> = syntax.split_whitespace().take_while(|w| !w.starts_with(['<', '['])).collect();
            let n = fixed.len().min(words.len()).min(3);
            n > 0 && fixed[..n].iter().zip(words).all(|(f, w)| f.split('|').any(|k| k == *w))
        })
    }

    /// Carry out `words` (a command it accepts). `Ok`: what changed, one line or a
    /// table; `Err`: one line saying why nothing changed.
    fn command(&mut self, words: &[&str], remote: &Remote) -> Result<String, String>;

    /// Called once when the graph is built, with the way to the node: a controller
    /// that changes its node by itself (following a kernel table) starts here. An
    /// error stops the graph from being built.
    fn attached(&mut self, _remote: &Remote) -> Result<(), String> {
        Ok(())
    }
}

/// The mailbox between a controller and its node's lcore.
#[derive(Default)]
pub(crate) struct Mailbox {
    slot: Mutex<Slot>,
    /// Held by a caller for its whole call: callers (a controller's commands, a
    /// kernel follower) take turns, one change in the mailbox at a time.
    calls: Mutex<u64>,
    /// The graph stopped: no change will be taken.
    pub(crate) closed: AtomicBool,
}

#[derive(Default)]
pub(crate) struct Slot {
    /// A change waiting for the lcore, with its call's number.
    pub(crate) offer: Option<(u64, Msg)>,
    /// The lcore's answer to the last change it took, with that change's number (a
    /// caller takes only its own; one a caller gave up on is dropped by the next).
    pub(crate) back: Option<(u64, Msg)>,
}

fn lock(m: &Mutex<Slot>) -> MutexGuard<'_, Slot> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Mailbox {
    /// The lcore's side: the slot if no writer holds it now.
    pub(crate) fn try_slot(&self) -> Option<MutexGuard<'_, Slot>> {
        match self.slot.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

/// A controller's way to its node: [`Remote::call`].
#[derive(Clone)]
pub struct Remote {
    pub(crate) mailbox: Arc<Mailbox>,
    /// The node's lcore's request counter (the lcore compares it once per walk).
    pub(crate) requests: Arc<AtomicU64>,
    /// The lcore's doorbell: rung after a request, in case it sleeps.
    pub(crate) bell: Option<Arc<ironpath_eal::sleep::Doorbell>>,
    /// The node's lcore.
    pub lcore: u32,
}

impl fmt::Debug for Remote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Remote").field("lcore", &self.lcore).finish()
    }
}

impl Remote {
    /// The graph stopped: no change will be taken any more.
    pub fn closed(&self) -> bool {
        self.mailbox.closed.load(Ordering::Acquire)
    }

    /// Hand `msg` to the node and wait until its lcore has applied it
    /// ([`crate::Node::apply`]); returns what the node handed back. Fails, with
    /// nothing changed, when the lcore does not take it within [`CALL_TIMEOUT`] (the
    /// graph stopped, or the lcore is stuck). Calls from several threads take turns.
    pub fn call(&self, msg: Msg) -> Result<Msg, String> {
        let mut turn = self.mailbox.calls.lock().unwrap_or_else(|e| e.into_inner());
        *turn += 1;
        let me = *turn;
        if self.mailbox.closed.load(Ordering::Acquire) {
            return Err("the pipeline has stopped: nothing changed".into());
        }
        {
            let mut s = lock(&self.mailbox.slot);
            s.back = None;
            s.offer = Some((me, msg));
        }
        // Release: the lcore that sees the new count sees the offer.
        self.requests.fetch_add(1, Ordering::Release);
        if let Some(bell) = &self.bell {
            bell.ring();
        }
        let start = Instant::now();
        let mut nap = Duration::from_micros(10);
        loop {
            {
                let mut s = lock(&self.mailbox.slot);
                match s.back.take() {
                    Some((n, back)) if n == me => return Ok(back),
                    // An answer to an earlier call that gave up waiting: dropped.
                    Some(_) | None => {}
                }
                let late = start.elapsed() > CALL_TIMEOUT || self.mailbox.closed.load(Ordering::Acquire);
                if late && s.offer.take().is_some() {
                    return Err(format!(
                        "lcore {} did not take the change within {} ms (stopped or stuck): nothing changed",
                        self.lcore,
                        CALL_TIMEOUT.as_millis()
                    ));
                }
                if start.elapsed() > 4 * CALL_TIMEOUT {
                    return Err(format!(
                        "lcore {} took the change but did not answer within {} ms",
                        self.lcore,
                        4 * CALL_TIMEOUT.as_millis()
                    ));
                }
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(1));
        }
    }
}

/// A controller of the graph with its node's name and way to the node.
pub struct ControlEntry {
    /// The node's name.
    pub node: String,
    /// The node's type.
    pub type_name: String,
    pub(crate) controller: Mutex<Box<dyn Controller>>,
    pub(crate) remote: Remote,
}

impl fmt::Debug for ControlEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControlEntry").field("node", &self.node).field("remote", &self.remote).finish()
    }
}

impl ControlEntry {
    /// Its controller's grammar.
    pub fn grammar(&self) -> &'static [(&'static str, &'static str)] {
        self.controller.lock().unwrap_or_else(|e| e.into_inner()).grammar()
    }
}

/// Carry out a table command: the controllers that accept `words` (after an optional
/// trailing `node NAME`, which picks one node) answer it. `None`: no controller
/// knows the command.
pub(crate) fn dispatch(entries: &[ControlEntry], words: &[&str]) -> Option<Result<String, String>> {
    let (words, only) = match words {
        [rest @ .., "node", name] => (rest, Some(*name)),
        _ => (words, None),
    };
    let mine: Vec<&ControlEntry> =
        entries.iter().filter(|e| e.controller.lock().unwrap_or_else(|p| p.into_inner()).accepts(words)).collect();
    if mine.is_empty() {
        return None;
    }
    let names = || mine.iter().map(|e| e.node.as_str()).collect::<Vec<_>>().join(", ");
    let e = match only {
        Some(name) => match mine.iter().find(|e| e.node == name) {
            Some(e) => *e,
            None => return Some(Err(format!("no node `{name}` takes this command; nodes that do: {}", names()))),
        },
        None if mine.len() > 1 => {
            return Some(Err(format!("{} nodes take this command ({}): add `node NAME`", mine.len(), names())))
        }
        None => mine[0],
    };
    let mut c = e.controller.lock().unwrap_or_else(|p| p.into_inner());
    Some(c.command(words, &e.remote))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_times_out_and_withdraws_its_change_when_no_lcore_takes_it() {
        let r = Remote { mailbox: Arc::default(), requests: Arc::default(), bell: None, lcore: 3 };
        r.mailbox.closed.store(true, Ordering::Release);
        assert!(r.call(Box::new(1u32)).unwrap_err().contains("stopped"));
        r.mailbox.closed.store(false, Ordering::Release);
        let t = Instant::now();
        let e = r.call(Box::new(1u32)).unwrap_err();
        assert!(e.contains("lcore 3 did not take"), "{e}");
        assert!(t.elapsed() >= CALL_TIMEOUT);
        assert!(lock(&r.mailbox.slot).offer.is_none(), "the change is withdrawn");
    }

    #[test]
    fn callers_take_turns_and_each_gets_its_own_answer() {
        let r = Remote { mailbox: Arc::default(), requests: Arc::default(), bell: None, lcore: 0 };
        let stop = Arc::new(AtomicBool::new(false));
        // A stand-in lcore: answers each change with its number times ten.
        let lcore = {
            let (mb, stop) = (r.mailbox.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(mut s) = mb.try_slot() {
                        if let Some((n, m)) = s.offer.take() {
                            let v = *m.downcast::<u32>().unwrap();
                            s.back = Some((n, Box::new(v * 10)));
                        }
                    }
                    std::thread::yield_now();
                }
            })
        };
        let callers: Vec<_> = (0..4u32)
            .map(|k| {
                let r = r.clone();
                std::thread::spawn(move || {
                    for i in 0..50u32 {
                        let v = k * 1000 + i;
                        let back = *r.call(Box::new(v)).unwrap().downcast::<u32>().unwrap();
                        assert_eq!(back, v * 10, "caller {k} got another's answer");
                    }
                })
            })
            .collect();
        for c in callers {
            c.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        lcore.join().unwrap();
    }

    struct Echo;
    impl Controller for Echo {
        fn grammar(&self) -> &'static [(&'static str, &'static str)] {
            &[("ip route add <PREFIX> [...]", "add"), ("show ip route", "show")]
        }
        fn command(&mut self, words: &[&str], _remote: &Remote) -> Result<String, String> {
            Ok(words.join(" "))
        }
    }

    fn entry(name: &str) -> ControlEntry {
        ControlEntry {
            node: name.into(),
            type_name: "echo".into(),
            controller: Mutex::new(Box::new(Echo)),
            remote: Remote { mailbox: Arc::default(), requests: Arc::default(), bell: None, lcore: 0 },
        }
    }

    #[test]
    fn commands_go_to_the_one_node_that_takes_them_or_to_the_one_named() {
        let one = [entry("r1")];
        assert_eq!(dispatch(&one, &["ip", "route", "add", "x"]).unwrap().unwrap(), "ip route add x");
        assert_eq!(dispatch(&one, &["show", "ip", "route"]).unwrap().unwrap(), "show ip route");
        assert!(dispatch(&one, &["acl", "rule", "add"]).is_none());
        assert!(dispatch(&one, &["show", "runtime"]).is_none());
        let two = [entry("r1"), entry("r2")];
        assert!(dispatch(&two, &["ip", "route", "add", "x"]).unwrap().unwrap_err().contains("r1, r2"));
        assert_eq!(dispatch(&two, &["ip", "route", "add", "x", "node", "r2"]).unwrap().unwrap(), "ip route add x");
        assert!(dispatch(&two, &["ip", "route", "add", "x", "node", "r3"])
            .unwrap()
            .unwrap_err()
            .contains("no node `r3`"));
    }
}
