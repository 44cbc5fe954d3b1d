//! Follows a Linux routing table and the neighbour tables over rtnetlink, so that a
//! kernel table (filled by `ip route`, a routing daemon such as BIRD, or DHCP) can
//! drive ironpath's FIB, as VPP's linux-cp plugin does.
//!
//! This crate owns:
//! - the parser of rtnetlink datagrams ([`parse()`], in `parse.rs`): route, neighbour
//!   and link messages and the netlink control messages, checked length by length,
//!   never panicking, fuzzed (`fuzz/fuzz_targets/netlink_parse.rs`);
//! - the rtnetlink socket (`socket.rs`): opened inside the namespace followed, bound
//!   to the route, neighbour and link groups, taking datagrams from the kernel only;
//! - the [`Follower`] (`follow.rs`): a thread of its own that dumps the table and the
//!   neighbours, delivers them as one [`KernelEvent::Snapshot`], then delivers each
//!   change, and starts over with a new snapshot whenever it may have missed one.
//!
//! It does not own the FIB: the events go to a callback, which runs on the
//! follower's thread (never an lcore) and hands them to whoever builds the tables.
//!
//! What is followed: unicast, blackhole, unreachable and prohibit routes of one table
//! (IPv4 and IPv6) with at most one next hop; ARP and NDP entries. What is not, and
//! counted in [`FollowStats`]: routes of other tables, local/broadcast/multicast/
//! anycast/throw/nat routes, cached clones, multipath routes (ignored whole, not cut
//! to their first hop, so that a table never forwards on a part of a route), routes
//! through nexthop objects or with an encapsulation, proxy and non-Ethernet neighbour
//! entries.
#![forbid(unsafe_code)]

mod follow;
mod parse;
mod socket;

use std::net::IpAddr;

pub use follow::{FollowCfg, FollowStats, Follower};
pub use parse::{parse, Ignored, LinkMsg, Malformed, Message, NeighMsg, Parsed, RouteMsg};

/// What a route does with a packet it matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RouteKind {
    /// Forward (to `gateway`, or on-link through `oif`).
    Unicast,
    /// Drop silently.
    Blackhole,
    /// Drop and answer host unreachable.
    Unreachable,
    /// Drop and answer administratively prohibited.
    Prohibit,
}

/// A route of the table followed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelRoute {
    /// The destination prefix, its bits past `len` cleared.
    pub dst: IpAddr,
    pub len: u8,
    pub kind: RouteKind,
    /// The next hop; `None` for a route on-link (connected) or one that drops.
    pub gateway: Option<IpAddr>,
    /// The output interface by its name in the namespace followed; `None` when the
    /// route names none or its index is not (yet) known.
    pub oif: Option<String>,
    pub table: u32,
    /// `RTA_PRIORITY` (the metric), 0 when absent. A route is identified by
    /// (`table`, `dst`, `len`, `metric`): a `RouteAdd` with the key of a route
    /// already delivered replaces it.
    pub metric: u32,
}

/// An ARP (IPv4) or NDP (IPv6) entry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelNeigh {
    pub addr: IpAddr,
    /// All zero when the entry has no link-layer address (incomplete, failed).
    pub mac: [u8; 6],
    /// The interface by its name in the namespace followed. An entry is identified
    /// by (`addr`, `ifname`).
    pub ifname: Option<String>,
    /// A link-layer address is known and the NUD state is one of reachable, stale,
    /// delay, probe, permanent or noarp. Meaningless on a `NeighDel`.
    pub reachable: bool,
}

/// What the follower delivers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelEvent {
    /// The whole table and all neighbour entries: replaces everything delivered
    /// before. Sent first, and again after any loss (overrun, interrupted dump, an
    /// interface gone down or away).
    Snapshot {
        routes: Vec<KernelRoute>,
        neighs: Vec<KernelNeigh>,
    },
    RouteAdd(KernelRoute),
    RouteDel(KernelRoute),
    NeighAdd(KernelNeigh),
    NeighDel(KernelNeigh),
}
