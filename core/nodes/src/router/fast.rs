//! The router's fast path: plain IPv4 unicast to a resolved next hop. A burst's
//! packets are checked in one pass each ([`Router::quick4`]), their FIB root slots
//! read together (every slot prefetched first; a slot that is a leaf forwarded at
//! once, one that leads to a ply in a second pass), and forwarded in place from their
//! route's [`Adj`] (the next hop's MAC cached against the neighbour tables). Every
//! packet it does not take goes through every check ([`super::checks`]); the tests in
//! `router/tests.rs` compare the two paths byte for byte on random bursts.

use super::checks::Slow;
use super::config::Target;
use super::lpm::Lpm;
use super::{Router, RouterCounter as C};
use ironpath_eal::abi::{self, Mbuf as RawMbuf};
use ironpath_eal::{Burst, MAX_BURST};
use ironpath_wire::checksum;
use ironpath_wire::ethernet::HEADER_LEN as ETH;
use std::net::{IpAddr, Ipv4Addr};

/// What the fast path keeps per packet of a burst (allocated once, out of the router
/// while a burst is worked).
pub(super) struct Work {
    /// The packets whose root slot leads to a ply, for the second pass: their IPv4
    /// destinations, the length their MTU check compares (the IP length; 1 for a GSO
    /// aggregate), their indexes in the burst, and their root slots.
    waiting_dst: [u32; MAX_BURST],
    waiting_mtu_len: [u16; MAX_BURST],
    waiting_index: [u8; MAX_BURST],
    waiting_root_slot: [u32; MAX_BURST],
    /// Indexes of the packets every check is run on.
    general: [u8; MAX_BURST],
    /// Why each packet that left both paths did ([`super::SLOW`] in its next edge).
    pub(super) slow: [Slow; MAX_BURST],
    /// What the packets that took every check were dropped for.
    pub(super) drops: [u64; C::COUNT],
}

impl Work {
    pub(super) fn new() -> Box<Work> {
        Box::new(Work {
            waiting_dst: [0; MAX_BURST],
            waiting_mtu_len: [0; MAX_BURST],
            waiting_index: [0; MAX_BURST],
            waiting_root_slot: [0; MAX_BURST],
            general: [0; MAX_BURST],
            slow: [Slow::Local; MAX_BURST],
            drops: [0; C::COUNT],
        })
    }
}

/// What a FIB target needs on the fast path: a plain forward's interface, next edge
/// and MTU (0 for every other kind of route, so no packet passes its MTU check), its
/// gateway, and the Ethernet addresses a packet leaves with as last looked up.
pub(super) struct Adj {
    /// The gateway's MAC then ours, valid while the neighbour tables are at
    /// generation `gen` and the TSC is before `until` (`gen` 0: never; an on-link
    /// route looks each destination up).
    macs: [u8; 12],
    gen: u64,
    until: u64,
    mtu: u32,
    iface: u16,
    edge: u16,
    gw: Option<IpAddr>,
}

/// [`Adj::iface`] of a target that is not a plain forward.
const NOT_FORWARD: u16 = u16::MAX;

impl Adj {
    /// The adjacency of FIB target `target`, nothing cached yet; `links[k]` is
    /// interface `k`'s MTU and next edge.
    pub(super) fn new(target: &Target, links: &[(u32, u16)]) -> Adj {
        match *target {
            Target::Forward { iface, via } => Adj {
                macs: [0; 12],
                gen: 0,
                until: 0,
                mtu: links[iface].0,
                iface: iface as u16,
                edge: links[iface].1,
                gw: via,
            },
            _ => Adj { macs: [0; 12], gen: 0, until: 0, mtu: 0, iface: NOT_FORWARD, edge: 0, gw: None },
        }
    }

    /// Drop the cached MACs.
    pub(super) fn forget(&mut self) {
        (self.macs, self.gen, self.until) = ([0; 12], 0, 0);
    }
}

impl Router {
    /// The common IPv4 packet, checked in one go: to our MAC, a 20-byte header with a
    /// good checksum, a plain unicast source (not an address of interface `k`, which
    /// it came in on), TTL above 1. Gives its destination and
    /// the length its MTU check compares (`Work::waiting_mtu_len`); anything else
    /// (`None`) takes every check of [`Router::parse`].
    #[inline(always)]
    fn quick4(&self, mbuf: &RawMbuf, data: &[u8], our_mac48: u64, k: usize) -> Option<(u32, u16)> {
        let frame: &[u8; ETH + 20] = data.first_chunk()?;
        let ne32_at = |o: usize| u32::from_ne_bytes([frame[o], frame[o + 1], frame[o + 2], frame[o + 3]]);
        let first8 =
            u64::from_le_bytes([frame[0], frame[1], frame[2], frame[3], frame[4], frame[5], frame[6], frame[7]]);
        // Our MAC (the low six bytes), then EtherType 0x0800 and version 4, IHL 5.
        if (first8 ^ our_mac48) << 16 != 0 || u32::from_le(ne32_at(12)) & 0x00ff_ffff != 0x0045_0008 {
            return None;
        }
        let total_len = u16::from_be_bytes([frame[16], frame[17]]);
        let ttl = frame[22];
        let flags = mbuf.ol_flags;
        if ETH as u32 + u32::from(total_len) > mbuf.pkt_len
            || total_len < 20
            || ttl <= 1
            || flags & abi::RX_IP_CKSUM_BAD != 0
        {
            return None;
        }
        let header: &[u8; 20] = frame[ETH..].first_chunk()?;
        if flags & abi::RX_IP_CKSUM_GOOD == 0 && !checksum::verify20(header) {
            return None;
        }
        let src = u32::from_be(ne32_at(26));
        let dst = u32::from_be(ne32_at(30));
        if self.martian16[(src >> 22) as usize] >> (src >> 16 & 63) & 1 != 0
            || (self.ifaces[k].bloom4 >> (src.wrapping_mul(0x9e37_79b1) >> 26) & 1 != 0
                && self.ifaces[k].v4.iter().any(|(a, _)| u32::from(*a) == src))
        {
            return None;
        }
        let mtu_len = if flags & (abi::RX_AGGREGATED | abi::TX_TCP_SEG) != 0 { 1 } else { total_len };
        Some((dst, mtu_len))
    }

    /// The Ethernet addresses (the next hop's, then ours) for FIB target `target` (a
    /// plain forward) and destination `dst`; a gateway's are cached in its [`Adj`].
    #[inline(never)]
    fn adj_lookup(&mut self, target: usize, dst: u32, now: u64) -> Option<[u8; 12]> {
        let adj = &self.adj[target];
        let iface = &self.ifaces[usize::from(adj.iface)];
        let with_ours = |mac: [u8; 6]| {
            let mut macs = [0u8; 12];
            macs[..6].copy_from_slice(&mac);
            macs[6..].copy_from_slice(&iface.mac);
            macs
        };
        let Some(gw) = adj.gw else {
            return iface.neigh.lookup(IpAddr::V4(Ipv4Addr::from(dst)), now).map(with_ours);
        };
        let (mac, until) = iface.neigh.lookup_until(gw, now)?;
        let macs = with_ours(mac);
        let gen = self.neigh_gen;
        let adj = &mut self.adj[target];
        (adj.macs, adj.gen, adj.until) = (macs, gen, until);
        Some(macs)
    }

    /// Forward packet `i` (passed [`Router::quick4`]: IPv4 to `dst`, `mtu_len` for the
    /// MTU check) by the FIB leaf `leaf` when it is a plain forward whose next hop is
    /// resolved: rewritten in place, its next edge set. `false`: it takes every check.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn forward(
        &mut self,
        pkts: &mut Burst,
        next: &mut [u16; MAX_BURST],
        i: usize,
        leaf: u32,
        dst: u32,
        mtu_len: u16,
        now: u64,
    ) -> bool {
        // Leaves hold the target's index plus one.
        let target = leaf.wrapping_sub(1) as usize;
        match self.adj.get(target) {
            // (Not a plain forward: MTU 0.)
            Some(adj) if u32::from(mtu_len) <= adj.mtu => {
                let edge = adj.edge;
                // The cached MACs written straight from the adjacency (no copy).
                let looked_up;
                let macs = if adj.gen == self.neigh_gen && now < adj.until {
                    Some(&self.adj[target].macs)
                } else {
                    looked_up = self.adj_lookup(target, dst, now);
                    looked_up.as_ref()
                };
                match (macs, pkts.data_mut(i).and_then(|d| d.first_chunk_mut())) {
                    (Some(macs), Some(frame)) => {
                        forward4(frame, macs);
                        next[i] = edge;
                        true
                    }
                    _ => false,
                }
            }
            _ => false,
        }
    }

    /// The burst's fast path: plain IPv4 unicast to a resolved next hop is checked
    /// (its FIB root slot read, the next ply prefetched), then looked up and rewritten
    /// in place; every other packet takes every check ([`Router::general`]). Packets
    /// off both get `SLOW` and their reason in `w.slow`. Gives the packets forwarded
    /// and whether any packet took every check (what those dropped is in `w.drops`).
    pub(super) fn fast(
        &mut self,
        w: &mut Work,
        pkts: &mut Burst,
        next: &mut [u16; MAX_BURST],
        now: u64,
    ) -> (u64, bool) {
        let n = pkts.len();
        // Packets waiting for the second pass, and packets for every check.
        let (mut waiting, mut to_check) = (0, 0);
        // The FIB root slots of every destination asked for at once (their loads
        // overlap; a slot read one packet at a time waits for the cache each time).
        for i in 0..n {
            if let Some(d) = pkts.data(i).get(ETH + 16..ETH + 20) {
                self.fib4.prefetch_root4(u32::from_be_bytes([d[0], d[1], d[2], d[3]]));
            }
        }
        // A burst mostly comes from one port: its interface looked up once (its MAC,
        // `None` when the packets from it take every check).
        let (mut port, mut our_mac48) = (u16::MAX, None);
        let mut forwarded = 0;
        for i in 0..n {
            let mbuf = pkts.header(i);
            if mbuf.port != port {
                port = mbuf.port;
                our_mac48 = self.iface_of(mbuf).map(|k| (self.ifaces[k].mac48, k)).filter(|_| !self.all_checks);
            }
            let quick = match our_mac48 {
                Some((mac48, k)) => self.quick4(mbuf, pkts.data(i), mac48, k),
                None => None,
            };
            // (`waiting`, `to_check` <= `i` < MAX_BURST: the masks only spare bounds
            // checks.)
            let sent = match quick {
                Some((dst, mtu_len)) => {
                    // A root slot that is a leaf (prefetched above) is forwarded now;
                    // one that leads to a ply waits for the ply's line (prefetched
                    // here) in the second pass.
                    let root_slot = self.fib4.root4(dst);
                    if Lpm::is_leaf(root_slot) {
                        self.forward(pkts, next, i, root_slot, dst, mtu_len, now)
                    } else {
                        let j = waiting & (MAX_BURST - 1);
                        w.waiting_dst[j] = dst;
                        w.waiting_mtu_len[j] = mtu_len;
                        w.waiting_index[j] = i as u8;
                        w.waiting_root_slot[j] = root_slot;
                        waiting += 1;
                        continue;
                    }
                }
                None => false,
            };
            if sent {
                forwarded += 1;
            } else {
                w.general[to_check & (MAX_BURST - 1)] = i as u8;
                to_check += 1;
            }
        }
        for j in 0..waiting {
            let i = usize::from(w.waiting_index[j]);
            let dst = w.waiting_dst[j];
            let leaf = self.fib4.leaf4(dst, w.waiting_root_slot[j]);
            if self.forward(pkts, next, i, leaf, dst, w.waiting_mtu_len[j], now) {
                forwarded += 1;
            } else {
                w.general[to_check & (MAX_BURST - 1)] = i as u8;
                to_check += 1;
            }
        }
        if to_check == 0 {
            return (forwarded, false);
        }
        w.drops = [0; C::COUNT];
        // (Indexed: iterating `w.general[..to_check]` cost 6 instructions a burst in
        // `benches/router.rs`.)
        for k in 0..to_check {
            let i = usize::from(w.general[k]);
            let (edge, out) = self.general(pkts, i, now, &mut w.slow, &mut w.drops);
            next[i] = edge;
            forwarded += out;
        }
        (forwarded, true)
    }
}

/// Forward a plain IPv4 packet in place ([`Router::quick4`] passed it: TTL above 1):
/// the Ethernet addresses `macs` (destination, source), TTL minus one with the header
/// checksum updated (RFC 1624, the (TTL, protocol) word less 0x0100:
/// [`checksum::update16_decrement`]). The checksum is read and written little-endian,
/// its decrement byte-swapped to match, as one's complement sums allow.
#[inline(always)]
fn forward4(frame: &mut [u8; ETH + 20], macs: &[u8; 12]) {
    frame[..12].copy_from_slice(macs);
    frame[ETH + 8] -= 1;
    let old = u16::from_le_bytes([frame[ETH + 10], frame[ETH + 11]]);
    let new = checksum::update16_decrement(old, 0x0100u16.swap_bytes());
    frame[ETH + 10..ETH + 12].copy_from_slice(&new.to_le_bytes());
}

/// The bitmap of [`Router::martian16`]: one bit per /16, set where
/// [`super::checks::martian4_src`] holds (whole /8s and one /16, set as ranges); made
/// once, shared by every router.
pub(super) fn martian16() -> &'static [u64; 1 << 10] {
    static MAP: std::sync::OnceLock<Box<[u64; 1 << 10]>> = std::sync::OnceLock::new();
    MAP.get_or_init(martian16_map)
}

pub(super) fn martian16_map() -> Box<[u64; 1 << 10]> {
    let mut map = Box::new([0u64; 1 << 10]);
    let mut set = |from: u32, to: u32| (from..to).for_each(|x| map[(x >> 6) as usize] |= 1 << (x & 63));
    set(0, 1 << 8); // 0/8
    set(127 << 8, 128 << 8); // 127/8
    set(224 << 8, 1 << 16); // 224/3: multicast and reserved
    set(0xa9fe, 0xa9ff); // 169.254/16
    map
}
