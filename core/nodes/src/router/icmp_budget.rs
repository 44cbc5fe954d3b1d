//! How many ICMP errors the router may send: a budget for the router as a whole
//! (`icmp_rate` a second, `icmp_burst` back to back) and one per destination of the
//! errors (the source of the packet that caused each: `icmp_peer_rate`,
//! `icmp_peer_burst`), as Linux limits errors per peer and in all. Without the second,
//! one host sending TTL-1 packets (or packets too big) as fast as it can spends the
//! whole budget, and every other host's time-exceeded and packet-too-big messages
//! (path MTU discovery) are lost while it does.
//!
//! The per-destination budgets live in a table of [`SLOTS`] indexed by a keyed hash of
//! the address (a peer cannot choose which slot it lands in): an address that hashes
//! to a slot held by another takes it over with a full budget. Bounded memory,
//! constant time; two addresses sharing a slot at once share its budget.

use crate::hash::KeyedState;
use std::hash::BuildHasher;
use std::net::IpAddr;

/// Per-destination budgets kept.
pub const SLOTS: usize = 1024;

/// A token bucket: `burst` tokens, one more every `tick` TSC ticks.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: u64,
    last: u64,
}

impl Bucket {
    fn full(burst: u64) -> Self {
        Bucket { tokens: burst, last: 0 }
    }

    /// Take a token at `now` (refilled first); false if none is left.
    fn take(&mut self, now: u64, tick: u64, burst: u64) -> bool {
        if tick == u64::MAX {
            return false;
        }
        let new = now.wrapping_sub(self.last) / tick;
        if new > 0 {
            self.tokens = self.tokens.saturating_add(new).min(burst);
            self.last = self.last.wrapping_add(new.saturating_mul(tick));
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

/// Why an error was not sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limited {
    /// The router's budget is spent.
    Router,
    /// Its destination's budget is spent.
    Peer,
}

/// The router's ICMP error budgets.
pub struct IcmpBudget {
    all: Bucket,
    tick: u64,
    burst: u64,
    peer_tick: u64,
    peer_burst: u64,
    peers: Box<[(Option<IpAddr>, Bucket)]>,
    hash: KeyedState,
}

impl IcmpBudget {
    /// Budgets of `rate` errors a second and `burst` back to back in all, and
    /// `peer_rate` and `peer_burst` per destination (rates 0: no error at all), with
    /// a TSC of `hz` ticks a second and the table's hash keyed by `key`.
    pub fn new((rate, burst): (u64, u64), (peer_rate, peer_burst): (u64, u64), hz: u64, key: [u8; 16]) -> Self {
        let tick = |r: u64| hz.checked_div(r).map_or(u64::MAX, |t| t.max(1));
        IcmpBudget {
            all: Bucket::full(burst),
            tick: tick(rate),
            burst,
            peer_tick: tick(peer_rate),
            peer_burst,
            peers: vec![(None, Bucket::full(peer_burst)); SLOTS].into_boxed_slice(),
            hash: KeyedState::new(key),
        }
    }

    /// May an error go to `to` at TSC `now`? Takes a token of its destination's
    /// budget, then one of the router's.
    pub fn allow(&mut self, to: IpAddr, now: u64) -> Result<(), Limited> {
        let slot = (self.hash.hash_one(to) as usize) % SLOTS;
        let (owner, bucket) = &mut self.peers[slot];
        if *owner != Some(to) {
            *owner = Some(to);
            *bucket = Bucket { tokens: self.peer_burst, last: now };
        }
        if !bucket.take(now, self.peer_tick, self.peer_burst) {
            return Err(Limited::Peer);
        }
        if !self.all.take(now, self.tick, self.burst) {
            // The destination's token is given back: the router sent nothing.
            self.peers[slot].1.tokens += 1;
            return Err(Limited::Router);
        }
        Ok(())
    }

    /// Every budget full again.
    pub fn refill(&mut self) {
        self.all = Bucket::full(self.burst);
        for p in self.peers.iter_mut() {
            *p = (None, Bucket::full(self.peer_burst));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const HZ: u64 = 1000;

    #[test]
    fn one_flooding_source_spends_its_own_budget_not_the_others() {
        let mut b = IcmpBudget::new((1000, 50), (10, 5), HZ, [3; 16]);
        let flooder = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 66));
        let sent = (0..10_000).filter(|&k| b.allow(flooder, k / 100).is_ok()).count();
        // 100 ms of flood: its burst (the next token comes at 100 ms).
        assert_eq!(sent, 5, "{sent}");
        // Every other host still gets its errors.
        for k in 1..=40u8 {
            let other = IpAddr::V4(Ipv4Addr::new(198, 18, 1, k));
            assert_eq!(b.allow(other, 100), Ok(()), "host {k}");
        }
    }

    #[test]
    fn the_router_budget_holds_over_many_sources() {
        let mut b = IcmpBudget::new((10, 20), (10, 5), HZ, [3; 16]);
        let mut sent = 0;
        let mut limited = 0;
        for k in 0..1000u32 {
            match b.allow(IpAddr::V4(Ipv4Addr::from(0xc612_0000 + k)), 0) {
                Ok(()) => sent += 1,
                Err(Limited::Router) => limited += 1,
                Err(Limited::Peer) => panic!("each source sent one"),
            }
        }
        assert_eq!((sent, limited), (20, 980));
        // A second later, 10 more.
        let sent = (0..1000u32).filter(|&k| b.allow(IpAddr::V4(Ipv4Addr::from(0xc612_0000 + k)), HZ).is_ok()).count();
        assert_eq!(sent, 10);
        b.refill();
        assert_eq!(b.allow(IpAddr::V4(Ipv4Addr::new(198, 18, 9, 9)), HZ), Ok(()));
    }

    #[test]
    fn a_rate_of_zero_sends_nothing() {
        let mut b = IcmpBudget::new((0, 50), (10, 5), HZ, [3; 16]);
        assert_eq!(b.allow(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)), 5), Err(Limited::Router));
        let mut b = IcmpBudget::new((10, 50), (0, 5), HZ, [3; 16]);
        assert_eq!(b.allow(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)), 5), Err(Limited::Peer));
    }
}
