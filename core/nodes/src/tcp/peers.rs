//! Peers: what each peer makes the node hold. A peer is an IPv4 address or an IPv6
//! /64 (one host is given a whole /64 and may use any address in it). Each has a
//! count of its connections (`max_per_peer`) and the memory they hold (`peer_share`):
//! received data charged at its buffers, plus the heap their applications keep for
//! them; and the file-system requests it has outstanding (`file_io_queue`). A
//! connection keeps its peer's index, so charging costs no lookup. A peer is forgotten
//! once it has no connection and no request outstanding (a request outlives the
//! connection that made it).

use crate::hash::KeyedState;
use ironpath_wire::IpAddress;
use std::collections::HashMap;

/// The peer an address belongs to: the address itself (IPv4), its /64 (IPv6).
pub(super) fn peer_key(a: IpAddress) -> IpAddress {
    match a {
        IpAddress::V4(_) => a,
        IpAddress::V6(v6) => {
            let mut b = v6.octets();
            b[8..].fill(0);
            IpAddress::V6(std::net::Ipv6Addr::from(b))
        }
    }
}

/// One peer's use.
struct PeerUse {
    key: IpAddress,
    conns: u32,
    held: u64,
    /// File-system requests outstanding.
    io: u32,
}

/// The peers with connections, by [`peer_key`].
pub(super) struct Peers {
    index: HashMap<IpAddress, u32, KeyedState>,
    slots: Vec<PeerUse>,
    free: Vec<u32>,
}

impl Peers {
    pub(super) fn new(key: KeyedState) -> Peers {
        Peers { index: HashMap::with_hasher(key), slots: Vec::new(), free: Vec::new() }
    }

    /// Connections and memory of the peer of `addr` (nothing if it has no connection).
    pub(super) fn usage(&self, addr: IpAddress) -> (u32, u64) {
        self.index.get(&peer_key(addr)).map_or((0, 0), |&i| {
            let p = &self.slots[i as usize];
            (p.conns, p.held)
        })
    }

    /// Counts a new connection of the peer of `addr`; returns the peer's index.
    pub(super) fn attach(&mut self, addr: IpAddress) -> u32 {
        let key = peer_key(addr);
        let i = match self.index.get(&key) {
            Some(&i) => i,
            None => {
                let p = PeerUse { key, conns: 0, held: 0, io: 0 };
                let i = match self.free.pop() {
                    Some(i) => {
                        self.slots[i as usize] = p;
                        i
                    }
                    None => {
                        self.slots.push(p);
                        (self.slots.len() - 1) as u32
                    }
                };
                self.index.insert(key, i);
                i
            }
        };
        self.slots[i as usize].conns += 1;
        i
    }

    /// A connection of peer `i` is gone (its memory was uncharged before).
    pub(super) fn detach(&mut self, i: u32) {
        let Some(p) = self.slots.get_mut(i as usize) else { return };
        p.conns = p.conns.saturating_sub(1);
        self.forget_unused(i);
    }

    /// Forgets peer `i` if it has no connection and no request outstanding.
    fn forget_unused(&mut self, i: u32) {
        let Some(p) = self.slots.get(i as usize) else { return };
        if p.conns == 0 && p.io == 0 {
            debug_assert_eq!(p.held, 0, "a peer without connections holds nothing");
            self.index.remove(&p.key);
            self.free.push(i);
        }
    }

    /// File-system requests peer `i` has outstanding.
    #[inline]
    pub(super) fn io(&self, i: u32) -> u32 {
        self.slots.get(i as usize).map_or(0, |p| p.io)
    }

    /// Peer `i` (with a connection) started `n` requests.
    pub(super) fn start_io(&mut self, i: u32, n: u32) {
        if let Some(p) = self.slots.get_mut(i as usize) {
            p.io += n;
        }
    }

    /// A request of peer `i` completed (its connection may be gone).
    pub(super) fn end_io(&mut self, i: u32) {
        if let Some(p) = self.slots.get_mut(i as usize) {
            p.io = p.io.saturating_sub(1);
            self.forget_unused(i);
        }
    }

    /// Memory peer `i` holds.
    #[inline]
    pub(super) fn held(&self, i: u32) -> u64 {
        self.slots.get(i as usize).map_or(0, |p| p.held)
    }

    /// Peer `i`'s charge for one connection goes from `old` to `new`.
    #[inline]
    pub(super) fn recharge(&mut self, i: u32, old: u64, new: u64) {
        if let Some(p) = self.slots.get_mut(i as usize) {
            p.held = p.held + new - old;
        }
    }

    /// Peers with connections.
    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    /// Connections peer `i` holds.
    #[inline]
    pub(super) fn conns(&self, i: u32) -> u32 {
        self.slots.get(i as usize).map_or(0, |p| p.conns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn v6(s: &str) -> IpAddress {
        IpAddress::V6(s.parse::<Ipv6Addr>().unwrap())
    }

    #[test]
    fn an_ipv6_64_is_one_peer_and_ipv4_addresses_are_each_their_own() {
        assert_eq!(peer_key(v6("fd00:1:2:3:4:5:6:7")), v6("fd00:1:2:3::"));
        assert_ne!(peer_key(v6("fd00:1:2:3::1")), peer_key(v6("fd00:1:2:4::1")));
        let a = IpAddress::V4(Ipv4Addr::new(198, 18, 0, 1));
        let b = IpAddress::V4(Ipv4Addr::new(198, 18, 0, 2));
        assert_ne!(peer_key(a), peer_key(b));
        let mut p = Peers::new(KeyedState::default());
        let i = p.attach(v6("fd00::1"));
        assert_eq!(p.attach(v6("fd00::ffff:1")), i, "same /64, same peer");
        p.recharge(i, 0, 5000);
        assert_eq!(p.usage(v6("fd00::9")), (2, 5000));
        let j = p.attach(a);
        assert_ne!(i, j);
        p.recharge(i, 5000, 0);
        p.detach(i);
        p.detach(i);
        assert_eq!(p.usage(v6("fd00::9")), (0, 0));
        assert_eq!(p.len(), 1);
        assert_eq!(p.attach(b), i, "the slot is reused");
    }

    #[test]
    fn a_peer_with_a_request_outstanding_outlives_its_connections() {
        let a = IpAddress::V4(Ipv4Addr::new(198, 18, 0, 1));
        let b = IpAddress::V4(Ipv4Addr::new(198, 18, 0, 2));
        let mut p = Peers::new(KeyedState::default());
        let i = p.attach(a);
        p.start_io(i, 2);
        p.detach(i);
        assert_eq!(p.len(), 1, "kept while its requests are outstanding");
        assert_ne!(p.attach(b), i, "its slot is not someone else's yet");
        p.end_io(i);
        assert_eq!(p.io(i), 1);
        p.end_io(i);
        assert_eq!(p.len(), 1, "forgotten with its last request");
        assert_eq!(p.attach(a), i, "the slot is free again");
    }
}
