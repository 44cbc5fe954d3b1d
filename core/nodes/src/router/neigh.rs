//! The router's neighbour table of one interface (IPv4 by ARP, IPv6 by neighbour
//! discovery): resolved entries that age, and unresolved neighbours with the
//! packets held for them, retried and given up on. Everything is bounded: entries
//! (the least recently confirmed of a sample is evicted), unresolved neighbours
//! (beyond the bound the one asked about longest ago gives up its place, its held
//! packets dropped: a scan of a subnet's addresses, which keeps the table of
//! unresolved neighbours full, cannot keep a real new neighbour from being resolved),
//! packets held per neighbour.

use crate::hash::KeyedState;
use ironpath_eal::Mbuf;
use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;

/// Permanent entries one interface holds at most (from the configuration, `ip
/// neighbor add` and a followed kernel table together).
pub const MAX_PERMANENT: usize = 16_384;

/// Limits and timers of a table.
#[derive(Clone, Copy, Debug)]
pub struct NeighConfig {
    /// Resolved entries kept.
    pub max_entries: usize,
    /// Neighbours being resolved at once.
    pub max_pending: usize,
    /// Packets held per neighbour being resolved (at least one).
    pub hold: usize,
    /// TSC ticks between two requests for one neighbour.
    pub retry_tsc: u64,
    /// Requests before giving up.
    pub max_tries: u32,
    /// TSC ticks an entry is used after it was last confirmed; then it is resolved again.
    pub reachable_tsc: u64,
}

struct Pending {
    held: VecDeque<Mbuf>,
    last_request: u64,
    tries: u32,
    /// Its number in the order neighbours started being resolved ([`Neighbours::order`]).
    serial: u64,
}

/// What became of a packet given to [`Neighbours::hold`].
#[derive(Debug, PartialEq, Eq)]
pub enum Held {
    /// Held; `request` says a request must be sent now (the first packet for it).
    Yes {
        /// Send a request for the neighbour now.
        request: bool,
        /// The bound on neighbours being resolved was reached: the one asked about
        /// longest ago gave up its place, and this many packets it held were dropped.
        evicted: Option<u64>,
    },
    /// Dropped: the neighbour already holds `hold` packets.
    QueueFull,
}

/// One interface's table.
pub struct Neighbours {
    cfg: NeighConfig,
    /// Keyed: a peer chooses which addresses it makes us resolve.
    entries: HashMap<IpAddr, ([u8; 6], u64), KeyedState>,
    pending: HashMap<IpAddr, Pending, KeyedState>,
    /// Neighbours in the order they started being resolved, with their serial (an
    /// address resolved, given up or evicted leaves a stale item, skipped and
    /// compacted away): the oldest gives up its place when `pending` is full.
    order: VecDeque<(IpAddr, u64)>,
    serial: u64,
    /// Entries from the configuration: never age, never evicted, not changed by the wire.
    fixed: HashMap<IpAddr, [u8; 6]>,
    /// The last entry looked up (most routed traffic goes to one gateway); its
    /// confirmation time, None for a fixed entry.
    last: Cell<Option<Cached>>,
    /// The hash key of the tables (kept for [`Neighbours::forget`]).
    key: [u8; 16],
}

/// A looked-up entry: address, MAC, confirmation time (None: fixed).
type Cached = (IpAddr, [u8; 6], Option<u64>);

impl Neighbours {
    /// An empty table whose hash is keyed by `key`.
    pub fn new(cfg: NeighConfig, key: [u8; 16]) -> Self {
        Self {
            cfg,
            entries: HashMap::with_hasher(KeyedState::new(key)),
            pending: HashMap::with_hasher(KeyedState::new(key)),
            order: VecDeque::new(),
            serial: 0,
            fixed: HashMap::new(),
            last: Cell::new(None),
            key,
        }
    }

    /// Forget what was learned and held: resolved entries, neighbours being resolved
    /// and their packets (freed). Static entries stay.
    pub fn forget(&mut self) {
        let fixed = std::mem::take(&mut self.fixed);
        *self = Self::new(self.cfg, self.key);
        self.fixed = fixed;
    }

    /// A permanent entry (as `ip neigh add ... permanent`); false (and nothing
    /// changed) when the table already holds [`MAX_PERMANENT`] others.
    pub fn add_static(&mut self, ip: IpAddr, mac: [u8; 6]) -> bool {
        if self.fixed.len() >= MAX_PERMANENT && !self.fixed.contains_key(&ip) {
            return false;
        }
        self.fixed.insert(ip, mac);
        self.last.set(None);
        true
    }

    /// Remove `ip`'s entry, permanent or learned; false if there was none.
    pub fn remove(&mut self, ip: IpAddr) -> bool {
        self.last.set(None);
        let fixed = self.fixed.remove(&ip).is_some();
        self.entries.remove(&ip).is_some() || fixed
    }

    /// The MAC of `ip`, when confirmed within `reachable_tsc` of `now`.
    #[inline]
    pub fn lookup(&self, ip: IpAddr, now: u64) -> Option<[u8; 6]> {
        let fresh = |seen: Option<u64>| seen.is_none_or(|t| now.wrapping_sub(t) < self.cfg.reachable_tsc);
        if let Some((a, mac, seen)) = self.last.get() {
            if a == ip && fresh(seen) {
                return Some(mac);
            }
        }
        let (mac, seen) = match self.fixed.get(&ip) {
            Some(mac) => (*mac, None),
            None => self.entries.get(&ip).map(|e| (e.0, Some(e.1))).filter(|e| fresh(e.1))?,
        };
        self.last.set(Some((ip, mac, seen)));
        Some(mac)
    }

    /// The MAC of `ip` and the TSC until which it may be used without asking again
    /// (`u64::MAX` for a fixed entry), valid until the table changes.
    pub fn lookup_until(&self, ip: IpAddr, now: u64) -> Option<([u8; 6], u64)> {
        if let Some(mac) = self.fixed.get(&ip) {
            return Some((*mac, u64::MAX));
        }
        let e = self.entries.get(&ip).filter(|e| now.wrapping_sub(e.1) < self.cfg.reachable_tsc)?;
        Some((e.0, e.1.saturating_add(self.cfg.reachable_tsc)))
    }

    /// Resolved entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No resolved entry?
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Is `ip` known or awaited (a message from it may update its entry)?
    pub fn knows(&self, ip: IpAddr) -> bool {
        self.entries.contains_key(&ip) || self.pending.contains_key(&ip) || self.fixed.contains_key(&ip)
    }

    /// Record `ip` at `mac`; returns the packets held for it (to send now) and
    /// whether an entry was evicted to make room.
    pub fn learn(&mut self, ip: IpAddr, mac: [u8; 6], now: u64) -> (VecDeque<Mbuf>, bool) {
        let mut evicted = false;
        if self.fixed.contains_key(&ip) {
            return (self.pending.remove(&ip).map(|p| p.held).unwrap_or_default(), false);
        }
        if !self.entries.contains_key(&ip) && self.entries.len() >= self.cfg.max_entries {
            // The least recently confirmed of a few (the map's order is random enough
            // and a peer cannot choose which): a constant cost per learned entry.
            if let Some(old) = self.entries.iter().take(8).min_by_key(|(_, e)| e.1).map(|(k, _)| *k) {
                self.entries.remove(&old);
                evicted = true;
            }
        }
        self.entries.insert(ip, (mac, now));
        self.last.set(None);
        (self.pending.remove(&ip).map(|p| p.held).unwrap_or_default(), evicted)
    }

    /// Hold `m` until `ip` is resolved.
    pub fn hold(&mut self, ip: IpAddr, m: Mbuf, now: u64) -> Held {
        let first = !self.pending.contains_key(&ip);
        let mut evicted = None;
        if first {
            if self.pending.len() >= self.cfg.max_pending.max(1) {
                evicted = self.evict_oldest();
            }
            self.serial += 1;
            let serial = self.serial;
            self.pending.insert(ip, Pending { held: VecDeque::new(), last_request: now, tries: 1, serial });
            self.order.push_back((ip, serial));
            if self.order.len() > 2 * self.cfg.max_pending.max(1) + 16 {
                let pending = &self.pending;
                self.order.retain(|(a, s)| pending.get(a).is_some_and(|p| p.serial == *s));
            }
        }
        let Some(p) = self.pending.get_mut(&ip) else { return Held::QueueFull };
        if p.held.len() >= self.cfg.hold.max(1) {
            return Held::QueueFull;
        }
        p.held.push_back(m);
        Held::Yes { request: first, evicted }
    }

    /// Give up the neighbour that started being resolved longest ago; returns how
    /// many packets it held (now dropped), or None if none is being resolved.
    fn evict_oldest(&mut self) -> Option<u64> {
        while let Some((ip, serial)) = self.order.pop_front() {
            if self.pending.get(&ip).is_some_and(|p| p.serial == serial) {
                return self.pending.remove(&ip).map(|p| p.held.len() as u64);
            }
        }
        None
    }

    /// Neighbours to ask again now (into `again`); returns the packets dropped for
    /// neighbours that never answered.
    pub fn retry(&mut self, now: u64, again: &mut Vec<IpAddr>) -> u64 {
        let (retry, max) = (self.cfg.retry_tsc, self.cfg.max_tries);
        let mut dropped = 0;
        self.pending.retain(|ip, p| {
            if now.wrapping_sub(p.last_request) < retry {
                return true;
            }
            if p.tries >= max {
                dropped += p.held.len() as u64;
                return false;
            }
            p.tries += 1;
            p.last_request = now;
            again.push(*ip);
            true
        });
        dropped
    }

    /// When the next request for a neighbour being resolved is due (TSC).
    pub fn next_retry(&self) -> Option<u64> {
        self.pending.values().map(|p| p.last_request.wrapping_add(self.cfg.retry_tsc)).min()
    }

    /// Any neighbour being resolved?
    pub fn resolving(&self) -> bool {
        !self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::pool;
    use std::net::Ipv4Addr;

    fn cfg() -> NeighConfig {
        NeighConfig { max_entries: 4, max_pending: 2, hold: 2, retry_tsc: 100, max_tries: 3, reachable_tsc: 1000 }
    }

    fn ip(k: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(198, 18, 0, k))
    }

    #[test]
    fn held_packets_are_bounded_and_released_in_order() {
        let pool = pool(16);
        let mut n = Neighbours::new(cfg(), [1; 16]);
        let m = |tag: u8| Mbuf::from_slice(&pool, &[tag; 60]).unwrap();
        assert_eq!(n.hold(ip(1), m(1), 0), Held::Yes { request: true, evicted: None });
        assert_eq!(n.hold(ip(1), m(2), 1), Held::Yes { request: false, evicted: None });
        assert_eq!(n.hold(ip(1), m(3), 2), Held::QueueFull);
        assert_eq!(n.hold(ip(2), m(4), 2), Held::Yes { request: true, evicted: None });
        assert_eq!(pool.stats().in_use, 3);
        let (out, evicted) = n.learn(ip(1), [2; 6], 10);
        assert!(!evicted);
        assert_eq!(out.iter().map(|m| m.data()[0]).collect::<Vec<_>>(), [1, 2]);
        drop(out);
        assert_eq!(n.lookup(ip(1), 500), Some([2; 6]));
        assert_eq!(n.lookup(ip(1), 1010), None, "older than reachable: resolved again");
        // ip(2) never answers: asked again at 100 and 200, then its packet is dropped.
        let mut again = vec![];
        assert_eq!(n.retry(50, &mut again), 0);
        assert_eq!(n.retry(150, &mut again), 0);
        assert_eq!(n.retry(260, &mut again), 0);
        assert_eq!(n.retry(370, &mut again), 1);
        assert_eq!(again, [ip(2), ip(2)]);
        assert!(!n.resolving());
        assert_eq!(pool.stats().in_use, 0);
    }

    /// A scan of many addresses keeps the table of neighbours being resolved full;
    /// a new neighbour still gets a place (the oldest scanned address gives up its
    /// own) and is resolved.
    #[test]
    fn a_scan_cannot_keep_a_new_neighbour_from_being_resolved() {
        let pool = pool(64);
        let cfg = NeighConfig { max_pending: 8, hold: 1, ..cfg() };
        let mut n = Neighbours::new(cfg, [1; 16]);
        let m = |tag: u8| Mbuf::from_slice(&pool, &[tag; 60]).unwrap();
        let mut dropped = 0;
        for k in 100..200u8 {
            match n.hold(ip(k), m(k), u64::from(k)) {
                Held::Yes { request: true, evicted } => dropped += evicted.unwrap_or(0),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(dropped, 92, "each scanned address beyond the eighth evicted the oldest");
        assert_eq!(pool.stats().in_use, 8);
        assert_eq!(n.hold(ip(7), m(7), 300), Held::Yes { request: true, evicted: Some(1) });
        // More of the scan: the new neighbour is not the oldest yet.
        for k in 200..206u8 {
            assert!(matches!(n.hold(ip(k), m(k), 301), Held::Yes { request: true, evicted: Some(1) }));
        }
        let (out, _) = n.learn(ip(7), [7; 6], 302);
        assert_eq!(out.iter().map(|m| m.data()[0]).collect::<Vec<_>>(), [7], "its packet held, then released");
        drop(out);
        // The queue of the order is compacted: bounded by the table, not the scan.
        assert!(n.order.len() <= 2 * 8 + 16, "{}", n.order.len());
        drop(n);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn permanent_entries_are_bounded() {
        let mut n = Neighbours::new(cfg(), [1; 16]);
        let addr = |k: usize| IpAddr::V6(std::net::Ipv6Addr::from(0xfd00_u128 << 112 | k as u128));
        for k in 0..MAX_PERMANENT {
            assert!(n.add_static(addr(k), [1; 6]));
        }
        assert!(!n.add_static(addr(MAX_PERMANENT), [1; 6]), "one more is refused");
        assert_eq!(n.lookup(addr(MAX_PERMANENT), 0), None);
        assert!(n.add_static(addr(3), [2; 6]), "a known one is still replaced");
        assert_eq!(n.lookup(addr(3), 0), Some([2; 6]));
        assert!(n.remove(addr(0)));
        assert!(n.add_static(addr(MAX_PERMANENT), [1; 6]), "room again after a removal");
    }

    #[test]
    fn the_table_is_bounded_and_evicts_the_oldest_of_a_sample() {
        let mut n = Neighbours::new(cfg(), [1; 16]);
        for k in 0..4 {
            assert!(!n.learn(ip(k), [k; 6], u64::from(k)).1);
        }
        assert!(n.learn(ip(9), [9; 6], 10).1);
        assert_eq!(n.len(), 4);
        assert_eq!(n.lookup(ip(9), 11), Some([9; 6]));
        assert_eq!(n.lookup(ip(0), 11), None, "the oldest of all four sampled");
        // A static entry: found at any time, not changed by what the wire says.
        assert!(n.add_static(ip(7), [7; 6]));
        assert_eq!(n.lookup(ip(7), u64::MAX), Some([7; 6]));
        assert!(!n.learn(ip(7), [6; 6], 20).1);
        assert_eq!(n.lookup(ip(7), 21), Some([7; 6]));
        // Refreshing a known entry evicts nothing.
        assert!(!n.learn(ip(9), [8; 6], 12).1);
        assert_eq!(n.lookup(ip(9), 13), Some([8; 6]));
    }
}
