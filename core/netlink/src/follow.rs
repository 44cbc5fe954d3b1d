//! The follower thread: enters the namespace, dumps links, routes (IPv4, IPv6) and
//! neighbours while already subscribed to their notifications, delivers the result
//! as one snapshot, then delivers each notification as a delta.
//!
//! Consistency: notifications that arrive during the dumps are applied to the
//! snapshot being built in arrival order (an add inserts or replaces by key, a
//! delete removes), so the snapshot is the table as of its last message, whatever
//! the interleaving. The follower starts over with a new snapshot when it may have
//! missed something: the kernel dropped notifications (ENOBUFS, `NLMSG_OVERRUN`, a
//! datagram larger than the buffer), a dump says it was interrupted
//! (`NLM_F_DUMP_INTR`), or an interface went down or away (the kernel removes the
//! IPv4 routes through it without a notification per route). Multicast
//! notifications carry no sequence of their own, so a gap among them shows only as
//! ENOBUFS. A dump that fails or stalls (5 s) reopens the socket and retries.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::parse::{parse, Ignored, LinkMsg, Message, NeighMsg, Parsed, RouteMsg};
use crate::socket::{Recv, Socket, POLL, RTM_GETLINK, RTM_GETNEIGH, RTM_GETROUTE};
use crate::{KernelEvent, KernelNeigh, KernelRoute};

/// How long one dump may go without finishing before the socket is reopened.
const DUMP_STALL: Duration = Duration::from_secs(5);
/// The wait before retrying after a failed dump.
const RETRY: Duration = Duration::from_millis(200);

/// What to follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FollowCfg {
    /// The network namespace: a name under `/var/run/netns` (as `ip netns` makes),
    /// or a path such as `/proc/PID/ns/net`; `None` for the process's own.
    pub netns: Option<String>,
    /// The routing table followed (254 is `main`).
    pub table: u32,
}

/// The follower's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FollowStats {
    /// Snapshots delivered, the first included.
    pub snapshots: u64,
    /// Deltas delivered (route and neighbour adds and deletes).
    pub events: u64,
    /// New snapshots because notifications were lost (ENOBUFS, `NLMSG_OVERRUN`, a
    /// datagram larger than the buffer).
    pub resyncs: u64,
    /// Dumps started over because the kernel marked them interrupted.
    pub interrupted_dumps: u64,
    /// New snapshots because an interface went down or was removed.
    pub link_resyncs: u64,
    /// Dumps that failed (an error answer, a send error, a stall); each reopens
    /// the socket.
    pub dump_errors: u64,
    /// Messages that did not hold together (bad lengths, truncated attributes).
    pub malformed: u64,
    /// Routes of other tables.
    pub ignored_table: u64,
    /// Local, broadcast, multicast, anycast, throw and nat routes.
    pub ignored_route_type: u64,
    /// Cached clones (`RTM_F_CLONED`).
    pub ignored_cloned: u64,
    /// Multipath routes (`RTA_MULTIPATH`).
    pub ignored_multipath: u64,
    /// Routes through nexthop objects or with an encapsulation, proxy and
    /// non-Ethernet neighbour entries, other address families.
    pub ignored_unsupported: u64,
    /// Message types not read, and answers to no request of ours.
    pub ignored_messages: u64,
    /// Datagrams from another process than the kernel, dropped.
    pub foreign: u64,
}

/// A thread following one table of one namespace; dropping it stops the thread
/// (within about [`POLL`], plus the callback's own time).
pub struct Follower {
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<FollowStats>>,
    thread: Option<JoinHandle<()>>,
}

impl Follower {
    /// Starts the thread: it enters `cfg.netns`, opens the socket (errors of either
    /// are returned here), then dumps and delivers a [`KernelEvent::Snapshot`], then
    /// the deltas. `on_event` runs on the follower's thread.
    pub fn start(cfg: FollowCfg, on_event: impl FnMut(KernelEvent) + Send + 'static) -> io::Result<Follower> {
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Mutex::new(FollowStats::default()));
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let (t_stop, t_stats) = (stop.clone(), stats.clone());
        let thread = std::thread::Builder::new().name("netlink-follow".into()).spawn(move || {
            let sock = match enter(cfg.netns.as_deref()).and_then(|()| Socket::open()) {
                Ok(s) => s,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            let _ = ready_tx.send(Ok(()));
            let mut run = Run {
                sock,
                table: cfg.table,
                links: HashMap::new(),
                stats: FollowStats::default(),
                shared: t_stats,
                stop: t_stop,
                msgs: Vec::new(),
            };
            run.run(on_event);
        })?;
        let follower = Follower { stop, stats, thread: Some(thread) };
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(follower),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(io::Error::other("the netlink follower thread ended before opening its socket")),
        }
    }

    /// The counters as last published by the thread (after each datagram).
    pub fn stats(&self) -> FollowStats {
        *self.stats.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Moves the calling thread into the network namespace `netns` (a thread's network
/// namespace is its own: the rest of the process stays where it is).
fn enter(netns: Option<&str>) -> io::Result<()> {
    let Some(ns) = netns else { return Ok(()) };
    let path = if ns.contains('/') {
        ns.to_string()
    } else if ns.is_empty() || ns == "." || ns == ".." {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("bad network namespace name {ns:?}")));
    } else {
        format!("/var/run/netns/{ns}")
    };
    let f = std::fs::File::open(&path).map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
    rustix::thread::move_into_link_name_space(f.as_fd(), Some(rustix::thread::LinkNameSpaceType::Network))
        .map_err(|e| io::Error::new(io::Error::from(e).kind(), format!("setns({path}): {e}")))
}

/// Routes by (table, destination, length, metric); neighbours by (address, interface).
type RouteKey = (u32, IpAddr, u8, u32);
type NeighKey = (IpAddr, u32);

/// The table being rebuilt by a dump.
#[derive(Default)]
struct Building {
    routes: HashMap<RouteKey, RouteMsg>,
    neighs: HashMap<NeighKey, NeighMsg>,
}

/// What one receive brought.
enum Got {
    /// `self.msgs` holds the messages of a datagram.
    Messages,
    Nothing,
    /// Something was lost: a new snapshot is needed.
    Lost,
}

/// How a dump ended.
enum Dump {
    Complete,
    /// Something may have been missed: dump everything again.
    Again,
    Stopped,
}

struct Run {
    sock: Socket,
    table: u32,
    /// Interface index -> (name, up).
    links: HashMap<u32, (Option<String>, bool)>,
    stats: FollowStats,
    shared: Arc<Mutex<FollowStats>>,
    stop: Arc<AtomicBool>,
    /// The messages of the datagram being handled (kept to reuse its allocation).
    msgs: Vec<Parsed>,
}

impl Run {
    fn run(&mut self, mut on_event: impl FnMut(KernelEvent)) {
        loop {
            let building = match self.dump_all() {
                Ok(Some(b)) => b,
                Ok(None) => return,
                Err(_) => {
                    if self.recover() {
                        return;
                    }
                    continue;
                }
            };
            let routes = building.routes.into_values().map(|r| self.route(r)).collect();
            let neighs = building.neighs.into_values().map(|n| self.neigh(n)).collect();
            self.stats.snapshots += 1;
            self.publish();
            on_event(KernelEvent::Snapshot { routes, neighs });
            match self.follow(&mut on_event) {
                Ok(true) => {}
                Ok(false) => return,
                Err(_) => {
                    if self.recover() {
                        return;
                    }
                }
            }
        }
    }

    /// After a failed dump or receive: counts it, waits [`RETRY`], and reopens the
    /// socket (a dump may still be under way on the old one). True when stopped.
    fn recover(&mut self) -> bool {
        self.stats.dump_errors += 1;
        self.publish();
        if self.nap(RETRY) {
            return true;
        }
        if let Ok(s) = Socket::open() {
            self.sock = s;
        }
        false
    }

    /// Delivers deltas until something was missed (returns true: dump again) or the
    /// stop flag is raised (false).
    fn follow(&mut self, on_event: &mut impl FnMut(KernelEvent)) -> io::Result<bool> {
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(false);
            }
            let mut again = false;
            match self.receive()? {
                Got::Messages => {}
                Got::Nothing => continue,
                Got::Lost => {
                    self.stats.resyncs += 1;
                    again = true;
                }
            }
            let msgs = std::mem::take(&mut self.msgs);
            for p in &msgs {
                let event = match &p.msg {
                    Message::Route { add, route } => {
                        let r = self.route(route.clone());
                        if *add {
                            KernelEvent::RouteAdd(r)
                        } else {
                            KernelEvent::RouteDel(r)
                        }
                    }
                    Message::Neigh { add, neigh } => {
                        let n = self.neigh(neigh.clone());
                        if *add {
                            KernelEvent::NeighAdd(n)
                        } else {
                            KernelEvent::NeighDel(n)
                        }
                    }
                    Message::Link { add, link } => {
                        if self.link(*add, link) && !again {
                            self.stats.link_resyncs += 1;
                            again = true;
                        }
                        continue;
                    }
                    Message::Overrun => {
                        if !again {
                            self.stats.resyncs += 1;
                            again = true;
                        }
                        continue;
                    }
                    other => {
                        self.count(other);
                        continue;
                    }
                };
                if again {
                    // A new snapshot follows; deltas after a loss would be applied to a
                    // table that is already wrong.
                    continue;
                }
                self.stats.events += 1;
                on_event(event);
            }
            self.msgs = msgs;
            self.publish();
            if again {
                return Ok(true);
            }
        }
    }

    /// Dumps links, IPv4 routes, IPv6 routes and neighbours, starting over until
    /// one round went through without a loss. `None` when stopped.
    fn dump_all(&mut self) -> io::Result<Option<Building>> {
        'again: loop {
            self.links.clear();
            let mut b = Building::default();
            for (kind, family) in [(RTM_GETLINK, 0), (RTM_GETROUTE, 2), (RTM_GETROUTE, 10), (RTM_GETNEIGH, 0)] {
                match self.dump(kind, family, &mut b)? {
                    Dump::Complete => {}
                    Dump::Again => continue 'again,
                    Dump::Stopped => return Ok(None),
                }
            }
            return Ok(Some(b));
        }
    }

    /// One dump request, read to its `NLMSG_DONE`; every message read on the way
    /// (replies and notifications alike) is applied to `b` and the link map.
    fn dump(&mut self, kind: u16, family: u8, b: &mut Building) -> io::Result<Dump> {
        let seq = self.sock.request_dump(kind, family)?;
        let deadline = Instant::now() + DUMP_STALL;
        let (mut again, mut done) = (false, false);
        while !done {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(Dump::Stopped);
            }
            if Instant::now() > deadline {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "netlink dump stalled"));
            }
            match self.receive()? {
                Got::Messages => {}
                Got::Nothing => continue,
                Got::Lost => {
                    // Replies to the dump are never dropped (the kernel waits for
                    // room); notifications were: read the dump out, then again.
                    self.stats.resyncs += 1;
                    again = true;
                    continue;
                }
            }
            let msgs = std::mem::take(&mut self.msgs);
            let mut refused = None;
            for p in &msgs {
                let ours = p.seq == seq;
                if ours && p.interrupted() && !again {
                    self.stats.interrupted_dumps += 1;
                    again = true;
                }
                match &p.msg {
                    Message::Done if ours => done = true,
                    Message::Error(e) if ours && *e != 0 => refused = Some(*e),
                    Message::Route { add, route } => {
                        let key = (route.table, route.dst, route.len, route.metric);
                        if *add {
                            b.routes.insert(key, route.clone());
                        } else {
                            b.routes.remove(&key);
                        }
                    }
                    Message::Neigh { add, neigh } => {
                        let key = (neigh.addr, neigh.ifindex);
                        if *add {
                            b.neighs.insert(key, neigh.clone());
                        } else {
                            b.neighs.remove(&key);
                        }
                    }
                    Message::Link { add, link } => {
                        if self.link(*add, link) && !again {
                            self.stats.link_resyncs += 1;
                            again = true;
                        }
                    }
                    Message::Overrun => {
                        if !again {
                            self.stats.resyncs += 1;
                            again = true;
                        }
                    }
                    other => self.count(other),
                }
            }
            self.msgs = msgs;
            self.publish();
            if let Some(e) = refused {
                let errno = e.checked_neg().unwrap_or(rustix::io::Errno::IO.raw_os_error());
                return Err(io::Error::from_raw_os_error(errno));
            }
        }
        Ok(if again { Dump::Again } else { Dump::Complete })
    }

    /// Reads one datagram into `self.msgs`.
    fn receive(&mut self) -> io::Result<Got> {
        self.msgs.clear();
        let data = match self.sock.recv()? {
            Recv::Data(d) => d,
            Recv::Nothing => return Ok(Got::Nothing),
            Recv::Foreign => {
                self.stats.foreign += 1;
                return Ok(Got::Nothing);
            }
            Recv::Lost => return Ok(Got::Lost),
        };
        let msgs = &mut self.msgs;
        parse(data, self.table, &mut |p| msgs.push(p));
        Ok(Got::Messages)
    }

    /// Updates the link map; true when a link known to be up went down or away.
    fn link(&mut self, add: bool, link: &LinkMsg) -> bool {
        let was_up = self.links.get(&link.index).is_some_and(|(_, up)| *up);
        if add {
            let name = link.name.clone().or_else(|| self.links.get(&link.index).and_then(|(n, _)| n.clone()));
            self.links.insert(link.index, (name, link.up));
            was_up && !link.up
        } else {
            self.links.remove(&link.index);
            was_up
        }
    }

    fn name(&self, index: u32) -> Option<String> {
        self.links.get(&index).and_then(|(n, _)| n.clone())
    }

    fn route(&self, r: RouteMsg) -> KernelRoute {
        KernelRoute {
            dst: r.dst,
            len: r.len,
            kind: r.kind,
            gateway: r.gateway,
            oif: r.oif.and_then(|i| self.name(i)),
            table: r.table,
            metric: r.metric,
        }
    }

    fn neigh(&self, n: NeighMsg) -> KernelNeigh {
        KernelNeigh { addr: n.addr, mac: n.mac, ifname: self.name(n.ifindex), reachable: n.reachable }
    }

    fn count(&mut self, m: &Message) {
        let s = &mut self.stats;
        match m {
            Message::Malformed(_) => s.malformed += 1,
            Message::Ignored(Ignored::Table) => s.ignored_table += 1,
            Message::Ignored(Ignored::RouteType(_)) => s.ignored_route_type += 1,
            Message::Ignored(Ignored::Cloned) => s.ignored_cloned += 1,
            Message::Ignored(Ignored::Multipath) => s.ignored_multipath += 1,
            Message::Ignored(
                Ignored::NexthopObject | Ignored::Encap | Ignored::Family(_) | Ignored::Proxy | Ignored::NotEthernet,
            ) => s.ignored_unsupported += 1,
            _ => s.ignored_messages += 1,
        }
    }

    fn publish(&self) {
        *self.shared.lock().unwrap_or_else(|p| p.into_inner()) = self.stats;
    }

    /// Sleeps `d` in steps of [`POLL`]; true when the stop flag was raised.
    fn nap(&self, d: Duration) -> bool {
        let end = Instant::now() + d;
        while Instant::now() < end {
            if self.stop.load(Ordering::Relaxed) {
                return true;
            }
            std::thread::sleep(POLL.min(end.saturating_duration_since(Instant::now())));
        }
        self.stop.load(Ordering::Relaxed)
    }
}
