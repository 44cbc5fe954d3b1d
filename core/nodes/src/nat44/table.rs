//! The translation state of `nat44`: mappings (an inside endpoint and the outside
//! endpoint it is translated to, one per inside endpoint whatever the destination:
//! endpoint-independent mapping, RFC 4787 REQ-1), sessions (a mapping and one remote
//! endpoint, with TCP state and an idle timer), the outside ports of each address,
//! and the bounds.
//!
//! Timers: each session is on one of four lists by its timeout class (UDP, ICMP, TCP
//! transitory, TCP established), most recently used last; a packet moves its session
//! to the tail, so each list's head is its oldest idle session, and expiry pops heads.
//! When the table is full the oldest idle session of all is reclaimed. A session
//! counts against its inside host (whichever side opened it): a host at its bound
//! opens nothing more until one of its sessions ends, and takes no one else's.
//!
//! Every table is keyed with a random secret: a peer cannot aim its flows at one
//! bucket.

use crate::hash::KeyedState;
use std::collections::HashMap;

/// IP protocol numbers the node translates.
pub const ICMP: u8 = 1;
/// TCP.
pub const TCP: u8 = 6;
/// UDP.
pub const UDP: u8 = 17;

/// No session or mapping (the end of a list).
const NIL: u32 = u32::MAX;
/// Sessions of a list looked at, at most, for one to reclaim.
const RECLAIM_LOOK: usize = 64;

/// An address and a port (an ICMP query id for ICMP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint {
    /// IPv4 address, host order.
    pub addr: u32,
    /// Port or query id.
    pub port: u16,
}

impl Endpoint {
    /// `addr:port`.
    pub fn new(addr: u32, port: u16) -> Endpoint {
        Endpoint { addr, port }
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", std::net::Ipv4Addr::from(self.addr), self.port)
    }
}

/// Which remote endpoints may send in through a mapping (RFC 4787 section 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Filtering {
    /// Any remote (full cone).
    EndpointIndependent,
    /// A remote address the inside endpoint has sent to (restricted cone).
    AddressDependent,
    /// A remote address and port the inside endpoint has sent to (port restricted).
    AddressPortDependent,
}

ironpath_config::choice! {
    /// `filtering`, as written.
    pub enum FilteringName {
        /// Any remote may send in once a mapping exists.
        EndpointIndependent = "endpoint-independent",
        /// Remotes at an address the inside endpoint sent to.
        AddressDependent = "address-dependent",
        /// Only the remote endpoints the inside endpoint sent to.
        AddressPortDependent = "address-port-dependent",
    }
}

impl From<FilteringName> for Filtering {
    fn from(f: FilteringName) -> Filtering {
        match f {
            FilteringName::EndpointIndependent => Filtering::EndpointIndependent,
            FilteringName::AddressDependent => Filtering::AddressDependent,
            FilteringName::AddressPortDependent => Filtering::AddressPortDependent,
        }
    }
}

/// A session's timeout class, the index of its timer list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Class {
    /// UDP.
    Udp = 0,
    /// ICMP queries.
    Icmp = 1,
    /// TCP not (or no longer) established: opening, closing, reset.
    TcpTransitory = 2,
    /// TCP established.
    TcpEstablished = 3,
}

impl Class {
    /// Its name in `show nat44`.
    pub fn name(self) -> &'static str {
        ["udp", "icmp", "tcp-transitory", "tcp-established"][self as usize]
    }
}

/// TCP flags seen on a session (each direction's SYN, ACK without SYN, FIN; a RST).
pub mod seen {
    /// SYN from the inside.
    pub const SYN_OUT: u8 = 1;
    /// SYN from the outside.
    pub const SYN_IN: u8 = 2;
    /// A segment without SYN from the inside.
    pub const ACK_OUT: u8 = 4;
    /// A segment without SYN from the outside.
    pub const ACK_IN: u8 = 8;
    /// FIN from the inside.
    pub const FIN_OUT: u8 = 16;
    /// FIN from the outside.
    pub const FIN_IN: u8 = 32;
    /// A RST either way.
    pub const RST: u8 = 64;
}

/// TCP header flags.
pub mod flags {
    /// FIN.
    pub const FIN: u8 = 0x01;
    /// SYN.
    pub const SYN: u8 = 0x02;
    /// RST.
    pub const RST: u8 = 0x04;
    /// ACK.
    pub const ACK: u8 = 0x10;
}

/// The class of a TCP session with these flags seen (RFC 5382 section 5: established
/// once both SYNs and the opener's ACK were seen, or, for a connection picked up in
/// mid-stream, segments without SYN both ways; transitory while opening, once FIN was
/// seen both ways, and after a RST).
pub fn tcp_class(s: u8) -> Class {
    use seen::*;
    let closing = s & RST != 0 || s & (FIN_OUT | FIN_IN) == FIN_OUT | FIN_IN;
    let both_syn = s & (SYN_OUT | SYN_IN) == SYN_OUT | SYN_IN;
    let acked = if both_syn {
        s & (ACK_OUT | ACK_IN) != 0
    } else {
        s & (SYN_OUT | SYN_IN) == 0 && s & (ACK_OUT | ACK_IN) == ACK_OUT | ACK_IN
    };
    if !closing && acked {
        Class::TcpEstablished
    } else {
        Class::TcpTransitory
    }
}

/// The flags a TCP segment adds to a session; `out`: from the inside.
pub fn tcp_seen(f: u8, out: bool) -> u8 {
    use seen::*;
    let mut s = 0;
    if f & flags::RST != 0 {
        s |= RST;
    }
    if f & flags::SYN != 0 {
        s |= if out { SYN_OUT } else { SYN_IN };
    } else if f & flags::ACK != 0 {
        s |= if out { ACK_OUT } else { ACK_IN };
    }
    if f & flags::FIN != 0 {
        s |= if out { FIN_OUT } else { FIN_IN };
    }
    s
}

/// A mapping: an inside endpoint and its outside endpoint, for one protocol.
#[derive(Clone, Copy, Debug)]
pub struct Mapping {
    /// IP protocol.
    pub proto: u8,
    /// The inside endpoint.
    pub inside: Endpoint,
    /// The outside endpoint.
    pub outside: Endpoint,
    /// Its sessions.
    pub sessions: u32,
    /// A static forward (kept with no session; its port never freed).
    pub fixed: bool,
}

/// A session: a mapping and a remote endpoint.
#[derive(Clone, Copy, Debug)]
struct Session {
    map: u32,
    remote: Endpoint,
    /// TCP flags seen ([`seen`]).
    tcp: u8,
    class: Class,
    /// Last packet (TSC).
    last: u64,
    /// When it was put at its list's tail (see [`Table::touch`]).
    linked: u64,
    prev: u32,
    next: u32,
}

/// One session as `show nat44` lists it.
#[derive(Clone, Debug)]
pub struct SessionView {
    /// IP protocol.
    pub proto: u8,
    /// Inside endpoint.
    pub inside: Endpoint,
    /// Outside endpoint.
    pub outside: Endpoint,
    /// Remote endpoint.
    pub remote: Endpoint,
    /// Timeout class.
    pub class: Class,
    /// Ticks idle.
    pub idle: u64,
}

/// The node's bounds and timers (timers in TSC ticks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Sessions at most.
    pub max_sessions: usize,
    /// Sessions of one inside host at most.
    pub per_host: u32,
    /// Idle timeout per [`Class`].
    pub timeout: [u64; 4],
}

/// Why a packet was not translated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// No mapping or session matches an inbound packet.
    NoMapping,
    /// The mapping exists but the filtering does not let this remote in.
    Filtered,
    /// The inside host holds its bound of sessions.
    HostLimit,
    /// Every port of the host's outside address is taken.
    PortsExhausted,
    /// A TCP segment other than a SYN would open a session from the outside.
    NotSyn,
    /// The table is full of sessions in use this instant.
    TableFull,
}

/// What creating or refreshing a session did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Events {
    /// Sessions created.
    pub created: u64,
    /// Mappings created.
    pub mapped: u64,
    /// Sessions reclaimed (the table was full).
    pub reclaimed: u64,
    /// Sessions found past their timeout (not yet swept) and ended.
    pub expired: u64,
}

/// Ports of one protocol on one outside address: a bitmap, set bits taken.
struct Ports {
    bits: Box<[u64; 1024]>,
    free: u32,
    /// Ports below it are never handed out (nor freed): forwards may use them.
    first: u16,
}

/// The first port handed out dynamically (RFC 4787 REQ-? ports: well-known ones are
/// left alone).
pub const FIRST_PORT: u16 = 1024;

impl Ports {
    fn new(first: u16) -> Ports {
        let mut p = Ports { bits: Box::new([0; 1024]), free: 0, first };
        for w in 0..(usize::from(first) / 64) {
            p.bits[w] = !0;
        }
        for b in (usize::from(first) / 64 * 64)..usize::from(first) {
            p.bits[b / 64] |= 1 << (b % 64);
        }
        p.free = p.bits.iter().map(|w| w.count_zeros()).sum();
        p
    }

    fn taken(&self, port: u16) -> bool {
        self.bits[usize::from(port) / 64] & 1 << (port % 64) != 0
    }

    fn take(&mut self, port: u16) -> bool {
        if self.taken(port) {
            return false;
        }
        self.bits[usize::from(port) / 64] |= 1 << (port % 64);
        self.free -= 1;
        true
    }

    fn give(&mut self, port: u16) {
        if port >= self.first && self.taken(port) {
            self.bits[usize::from(port) / 64] &= !(1 << (port % 64));
            self.free += 1;
        }
    }

    /// `want` if free, else the first free port from a pseudo-random word on.
    fn alloc(&mut self, want: u16, rnd: u64) -> Option<u16> {
        if self.free == 0 {
            return None;
        }
        if self.take(want) {
            return Some(want);
        }
        let start = (rnd % 1024) as usize;
        for i in 0..1024 {
            let w = (start + i) % 1024;
            let word = self.bits[w];
            if word != !0 {
                // A free bit, from a pseudo-random bit of the word on (ports are
                // not handed out in order: the next one cannot be guessed).
                let rot = (rnd >> 10) as u32 % 64;
                let free = !word;
                let b = (free.rotate_right(rot).trailing_zeros() + rot) % 64;
                let port = (w * 64) as u16 + b as u16;
                let taken = self.take(port);
                debug_assert!(taken);
                return Some(port);
            }
        }
        None
    }
}

/// Sessions, mappings and ports.
pub struct Table {
    limits: Limits,
    filtering: Filtering,
    /// The outside addresses.
    addrs: Vec<u32>,
    /// Ports per address, per protocol (ICMP, TCP, UDP).
    ports: Vec<[Ports; 3]>,
    maps: Vec<Mapping>,
    free_maps: Vec<u32>,
    by_inside: HashMap<(u8, Endpoint), u32, KeyedState>,
    by_outside: HashMap<(u8, Endpoint), u32, KeyedState>,
    sessions: Vec<Session>,
    free_sessions: Vec<u32>,
    flows: HashMap<(u32, Endpoint), u32, KeyedState>,
    /// Sessions per (mapping, remote address): address-dependent filtering.
    remote_addrs: HashMap<(u32, u32), u32, KeyedState>,
    /// Sessions per inside host.
    hosts: HashMap<u32, u32, KeyedState>,
    /// Per class: head (oldest) and tail.
    lists: [(u32, u32); 4],
    live: usize,
    /// Per class: sessions.
    per_class: [usize; 4],
    key: KeyedState,
    rnd: u64,
}

fn proto_index(proto: u8) -> usize {
    match proto {
        ICMP => 0,
        TCP => 1,
        _ => 2,
    }
}

impl Table {
    /// An empty table over outside addresses `addrs`, hashes keyed by `key`.
    pub fn new(addrs: Vec<u32>, limits: Limits, filtering: Filtering, key: [u8; 16]) -> Table {
        let k = |r: u32| {
            let mut kk = key;
            kk.rotate_left(r as usize);
            KeyedState::new(kk)
        };
        let ports = addrs.iter().map(|_| [Ports::new(1), Ports::new(FIRST_PORT), Ports::new(FIRST_PORT)]).collect();
        let cap = limits.max_sessions.min(4096);
        Table {
            filtering,
            addrs,
            ports,
            maps: Vec::new(),
            free_maps: Vec::new(),
            by_inside: HashMap::with_capacity_and_hasher(cap, k(1)),
            by_outside: HashMap::with_capacity_and_hasher(cap, k(2)),
            sessions: Vec::new(),
            free_sessions: Vec::new(),
            flows: HashMap::with_capacity_and_hasher(cap, k(3)),
            remote_addrs: HashMap::with_capacity_and_hasher(cap, k(4)),
            hosts: HashMap::with_capacity_and_hasher(cap.min(1024), k(5)),
            lists: [(NIL, NIL); 4],
            live: 0,
            per_class: [0; 4],
            key: k(6),
            rnd: u64::from_le_bytes(key[..8].try_into().unwrap_or_default()) | 1,
            limits,
        }
    }

    /// The outside addresses.
    pub fn addrs(&self) -> &[u32] {
        &self.addrs
    }

    /// Whether `a` is one of the outside addresses.
    pub fn is_outside(&self, a: u32) -> bool {
        self.addrs.contains(&a)
    }

    /// Sessions now.
    pub fn sessions(&self) -> usize {
        self.live
    }

    /// Sessions now per class.
    pub fn per_class(&self) -> [usize; 4] {
        self.per_class
    }

    /// Mappings now (static ones included).
    pub fn mappings(&self) -> usize {
        self.by_inside.len()
    }

    /// Inside hosts holding sessions now.
    pub fn hosts(&self) -> usize {
        self.hosts.len()
    }

    /// Sessions of inside host `a` now.
    pub fn host_sessions(&self, a: u32) -> u32 {
        self.hosts.get(&a).copied().unwrap_or(0)
    }

    /// The bounds and timers.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    fn next_rnd(&mut self) -> u64 {
        // xorshift64*, seeded from the secret.
        let mut x = self.rnd;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rnd = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// The outside address of inside host `a` (paired pooling, RFC 4787 REQ-2: the
    /// same one for all its sessions).
    fn address_of(&self, a: u32) -> usize {
        use std::hash::{BuildHasher, Hasher};
        let mut h = self.key.build_hasher();
        h.write_u32(a);
        (h.finish() % self.addrs.len() as u64) as usize
    }

    /// Add a static forward: `outside` (one of the addresses) to `inside`.
    pub fn add_forward(&mut self, proto: u8, outside: Endpoint, inside: Endpoint) -> Result<(), String> {
        let Some(ai) = self.addrs.iter().position(|&a| a == outside.addr) else {
            return Err(format!("{outside}: not one of the outside addresses"));
        };
        if self.by_outside.contains_key(&(proto, outside)) {
            return Err(format!("{outside} is in use (a forward or a dynamic mapping)"));
        }
        if self.by_inside.contains_key(&(proto, inside)) {
            return Err(format!("{inside} has a mapping already"));
        }
        let ports = &mut self.ports[ai][proto_index(proto)];
        // A port below the dynamic range is never handed out: free for forwards.
        if outside.port >= ports.first && !ports.take(outside.port) {
            return Err(format!("{outside} is in use"));
        }
        let m = Mapping { proto, inside, outside, sessions: 0, fixed: true };
        let id = self.new_map(m);
        self.by_inside.insert((proto, inside), id);
        self.by_outside.insert((proto, outside), id);
        Ok(())
    }

    /// Remove the static forward at `outside`, with its sessions.
    pub fn del_forward(&mut self, proto: u8, outside: Endpoint) -> Result<String, String> {
        let Some(&id) = self.by_outside.get(&(proto, outside)) else { return Err(format!("no forward at {outside}")) };
        if !self.maps[id as usize].fixed {
            return Err(format!("{outside} is a dynamic mapping, not a forward"));
        }
        let ids: Vec<u32> = self.flows.iter().filter(|(k, _)| k.0 == id).map(|(_, &s)| s).collect();
        for s in &ids {
            self.free_session(*s);
        }
        self.maps[id as usize].fixed = false;
        self.drop_map(id);
        Ok(format!("forward {outside} removed with {} sessions", ids.len()))
    }

    fn new_map(&mut self, m: Mapping) -> u32 {
        match self.free_maps.pop() {
            Some(i) => {
                self.maps[i as usize] = m;
                i
            }
            None => {
                self.maps.push(m);
                (self.maps.len() - 1) as u32
            }
        }
    }

    /// Free mapping `id` if it has no session and is not a forward; whether it was.
    fn drop_map(&mut self, id: u32) -> bool {
        let m = self.maps[id as usize];
        if m.fixed || m.sessions > 0 {
            return false;
        }
        self.by_inside.remove(&(m.proto, m.inside));
        self.by_outside.remove(&(m.proto, m.outside));
        if let Some(ai) = self.addrs.iter().position(|&a| a == m.outside.addr) {
            self.ports[ai][proto_index(m.proto)].give(m.outside.port);
        }
        self.maps[id as usize].proto = 0;
        self.free_maps.push(id);
        true
    }

    /// The mapping whose outside endpoint is `outside`.
    pub fn by_outside(&self, proto: u8, outside: Endpoint) -> Option<&Mapping> {
        self.by_outside.get(&(proto, outside)).map(|&i| &self.maps[i as usize])
    }

    /// The mapping whose inside endpoint is `inside`.
    pub fn by_inside(&self, proto: u8, inside: Endpoint) -> Option<&Mapping> {
        self.by_inside.get(&(proto, inside)).map(|&i| &self.maps[i as usize])
    }

    /// Whether the mapping of `inside` has a session with `remote`.
    pub fn has_session(&self, proto: u8, inside: Endpoint, remote: Endpoint) -> bool {
        self.by_inside.get(&(proto, inside)).is_some_and(|&m| self.flows.contains_key(&(m, remote)))
    }

    /// An outbound packet from `inside` to `remote`: its session found or created
    /// (and its mapping), refreshed; the outside endpoint to translate to.
    pub fn outbound(
        &mut self,
        proto: u8,
        inside: Endpoint,
        remote: Endpoint,
        tcp_flags: u8,
        now: u64,
        ev: &mut Events,
    ) -> Result<Endpoint, Refused> {
        let mut found = self.by_inside.get(&(proto, inside)).copied();
        let mut existing = None;
        if let Some(m) = found {
            match self.live_flow(m, remote, now, ev) {
                Ok(s) => existing = s,
                // The mapping's only session is past its timeout: both end here.
                Err(()) => found = None,
            }
        }
        let map = match found {
            Some(m) => m,
            None => {
                if self.host_sessions(inside.addr) >= self.limits.per_host {
                    return Err(Refused::HostLimit);
                }
                let ai = self.address_of(inside.addr);
                let rnd = self.next_rnd();
                // Port preservation where the port is free (and not a well-known one).
                let want = if proto == ICMP { inside.port.max(1) } else { inside.port.max(FIRST_PORT) };
                let Some(port) = self.ports[ai][proto_index(proto)].alloc(want, rnd) else {
                    return Err(Refused::PortsExhausted);
                };
                let outside = Endpoint::new(self.addrs[ai], port);
                let id = self.new_map(Mapping { proto, inside, outside, sessions: 0, fixed: false });
                self.by_inside.insert((proto, inside), id);
                self.by_outside.insert((proto, outside), id);
                ev.mapped += 1;
                id
            }
        };
        let s = self.session(map, remote, existing, tcp_flags, true, now, ev);
        match s {
            Ok(_) => Ok(self.maps[map as usize].outside),
            Err(e) => {
                self.drop_map(map);
                Err(e)
            }
        }
    }

    /// An inbound packet from `remote` to `outside`: its session found, or created
    /// where the filtering (or a static forward) lets it in, refreshed; the inside
    /// endpoint to translate to.
    pub fn inbound(
        &mut self,
        proto: u8,
        outside: Endpoint,
        remote: Endpoint,
        tcp_flags: u8,
        now: u64,
        ev: &mut Events,
    ) -> Result<Endpoint, Refused> {
        let Some(&map) = self.by_outside.get(&(proto, outside)) else { return Err(Refused::NoMapping) };
        let Ok(existing) = self.live_flow(map, remote, now, ev) else { return Err(Refused::NoMapping) };
        let m = self.maps[map as usize];
        if existing.is_none() {
            let allowed = m.fixed
                || match self.filtering {
                    Filtering::EndpointIndependent => true,
                    Filtering::AddressDependent => self.remote_addrs.contains_key(&(map, remote.addr)),
                    Filtering::AddressPortDependent => false,
                };
            if !allowed {
                return Err(Refused::Filtered);
            }
            if proto == TCP && tcp_flags & (flags::SYN | flags::ACK | flags::RST) != flags::SYN {
                // Only a SYN opens a connection from the outside (no session picked
                // up from a stray ACK or RST sent to a forward).
                return Err(Refused::NotSyn);
            }
            if proto == ICMP {
                // An echo reply opens nothing (queries come from the inside).
                return Err(Refused::NoMapping);
            }
        }
        self.session(map, remote, existing, tcp_flags, false, now, ev)?;
        Ok(m.inside)
    }

    /// The session of `map` with `remote`, if there is one and it is not past its
    /// timeout (one that is, not swept yet, is ended here); `Err` when the mapping
    /// ended with it.
    fn live_flow(&mut self, map: u32, remote: Endpoint, now: u64, ev: &mut Events) -> Result<Option<u32>, ()> {
        let Some(&s) = self.flows.get(&(map, remote)) else { return Ok(None) };
        let x = &self.sessions[s as usize];
        if now.saturating_sub(x.last) < self.limits.timeout[x.class as usize] {
            return Ok(Some(s));
        }
        ev.expired += 1;
        if self.free_session(s) {
            Err(())
        } else {
            Ok(None)
        }
    }

    /// The session of `map` with `remote` (`existing`, found by [`Table::live_flow`]),
    /// created if new (`out`: the packet comes from the inside), refreshed.
    #[allow(clippy::too_many_arguments)]
    fn session(
        &mut self,
        map: u32,
        remote: Endpoint,
        existing: Option<u32>,
        tcp_flags: u8,
        out: bool,
        now: u64,
        ev: &mut Events,
    ) -> Result<u32, Refused> {
        let proto = self.maps[map as usize].proto;
        if let Some(s) = existing {
            if proto == TCP {
                let mut st = self.sessions[s as usize].tcp;
                let closing =
                    st & seen::RST != 0 || st & (seen::FIN_OUT | seen::FIN_IN) == seen::FIN_OUT | seen::FIN_IN;
                if closing && tcp_flags & (flags::SYN | flags::ACK) == flags::SYN {
                    // A new connection on the same endpoints (TIME_WAIT reuse).
                    st = 0;
                }
                st |= tcp_seen(tcp_flags, out);
                self.sessions[s as usize].tcp = st;
                let class = tcp_class(st);
                let was = self.sessions[s as usize].class;
                if class != was {
                    self.unlink(s);
                    self.per_class[was as usize] -= 1;
                    self.per_class[class as usize] += 1;
                    self.sessions[s as usize].class = class;
                    self.sessions[s as usize].last = now;
                    self.link_tail(s);
                    return Ok(s);
                }
            }
            self.touch(s, now);
            return Ok(s);
        }
        let host = self.maps[map as usize].inside.addr;
        if self.host_sessions(host) >= self.limits.per_host {
            return Err(Refused::HostLimit);
        }
        if self.live >= self.limits.max_sessions {
            if !self.reclaim_oldest(map, now) {
                return Err(Refused::TableFull);
            }
            ev.reclaimed += 1;
        }
        let tcp = if proto == TCP { tcp_seen(tcp_flags, out) } else { 0 };
        let class = match proto {
            TCP => tcp_class(tcp),
            ICMP => Class::Icmp,
            _ => Class::Udp,
        };
        let sess = Session { map, remote, tcp, class, last: now, linked: now, prev: NIL, next: NIL };
        let id = match self.free_sessions.pop() {
            Some(i) => {
                self.sessions[i as usize] = sess;
                i
            }
            None => {
                self.sessions.push(sess);
                (self.sessions.len() - 1) as u32
            }
        };
        self.link_tail(id);
        self.flows.insert((map, remote), id);
        *self.remote_addrs.entry((map, remote.addr)).or_insert(0) += 1;
        *self.hosts.entry(host).or_insert(0) += 1;
        self.maps[map as usize].sessions += 1;
        self.live += 1;
        self.per_class[class as usize] += 1;
        ev.created += 1;
        Ok(id)
    }

    /// Reclaim the oldest idle session of all (never one of mapping `keep`'s, whose
    /// session is being made, nor one used at `now`: a packet being translated may
    /// hold it).
    fn reclaim_oldest(&mut self, keep: u32, now: u64) -> bool {
        let mut best: Option<u32> = None;
        for c in 0..4 {
            let mut s = self.lists[c].0;
            // From the oldest end of the list, at most RECLAIM_LOOK sessions along, to
            // one that may be reclaimed.
            let mut looked = 0;
            while s != NIL && (self.sessions[s as usize].map == keep || self.sessions[s as usize].last == now) {
                s = self.sessions[s as usize].next;
                looked += 1;
                if looked == RECLAIM_LOOK {
                    s = NIL;
                }
            }
            if s != NIL && best.is_none_or(|b| self.sessions[s as usize].last < self.sessions[b as usize].last) {
                best = Some(s);
            }
        }
        if let Some(s) = best {
            self.free_session(s);
        }
        best.is_some()
    }

    /// A packet of session `s` at `now`: its timer restarts. It goes back to its
    /// list's tail only when it was put there more than 1/1024 of its timeout ago
    /// (most packets write one word): a list is in the order sessions were linked,
    /// each `last` at most that much past its `linked`, so a session expires at most
    /// 1/1024 of its timeout late (and a packet never finds one past its timeout:
    /// [`Table::session`] checks).
    fn touch(&mut self, s: u32, now: u64) {
        let x = &mut self.sessions[s as usize];
        x.last = now;
        if now.saturating_sub(x.linked) > self.limits.timeout[x.class as usize] >> 10 {
            self.unlink(s);
            self.link_tail(s);
        }
    }

    fn link_tail(&mut self, s: u32) {
        let x = &mut self.sessions[s as usize];
        x.linked = x.last;
        let c = x.class as usize;
        let tail = self.lists[c].1;
        self.sessions[s as usize].prev = tail;
        self.sessions[s as usize].next = NIL;
        if tail == NIL {
            self.lists[c].0 = s;
        } else {
            self.sessions[tail as usize].next = s;
        }
        self.lists[c].1 = s;
    }

    fn unlink(&mut self, s: u32) {
        let Session { prev, next, class, .. } = self.sessions[s as usize];
        let c = class as usize;
        if prev == NIL {
            self.lists[c].0 = next;
        } else {
            self.sessions[prev as usize].next = next;
        }
        if next == NIL {
            self.lists[c].1 = prev;
        } else {
            self.sessions[next as usize].prev = prev;
        }
    }

    /// End session `s`; whether its mapping went with it.
    fn free_session(&mut self, s: u32) -> bool {
        self.unlink(s);
        let Session { map, remote, class, .. } = self.sessions[s as usize];
        self.flows.remove(&(map, remote));
        if let Some(n) = self.remote_addrs.get_mut(&(map, remote.addr)) {
            *n -= 1;
            if *n == 0 {
                self.remote_addrs.remove(&(map, remote.addr));
            }
        }
        let host = self.maps[map as usize].inside.addr;
        if let Some(n) = self.hosts.get_mut(&host) {
            *n -= 1;
            if *n == 0 {
                self.hosts.remove(&host);
            }
        }
        self.maps[map as usize].sessions -= 1;
        self.live -= 1;
        self.per_class[class as usize] -= 1;
        self.free_sessions.push(s);
        self.drop_map(map)
    }

    /// Expire sessions idle past their timeout, at most `budget`; how many.
    pub fn expire(&mut self, now: u64, budget: usize) -> usize {
        let mut n = 0;
        for c in 0..4 {
            let t = self.limits.timeout[c];
            while n < budget {
                let h = self.lists[c].0;
                if h == NIL || now.saturating_sub(self.sessions[h as usize].last) < t {
                    break;
                }
                self.free_session(h);
                n += 1;
            }
        }
        n
    }

    /// Forget every dynamic session and mapping (static forwards stay).
    pub fn flush(&mut self) -> usize {
        let n = self.live;
        for c in 0..4 {
            while self.lists[c].0 != NIL {
                self.free_session(self.lists[c].0);
            }
        }
        n
    }

    /// Sessions from the `from`-th on, at most `max` (by class, oldest first).
    pub fn view(&self, from: usize, max: usize, now: u64) -> Vec<SessionView> {
        let mut out = Vec::new();
        let mut i = 0;
        for c in 0..4 {
            let mut s = self.lists[c].0;
            while s != NIL && out.len() < max {
                if i >= from {
                    let x = &self.sessions[s as usize];
                    let m = &self.maps[x.map as usize];
                    out.push(SessionView {
                        proto: m.proto,
                        inside: m.inside,
                        outside: m.outside,
                        remote: x.remote,
                        class: x.class,
                        idle: now.saturating_sub(x.last),
                    });
                }
                i += 1;
                s = self.sessions[s as usize].next;
            }
        }
        out
    }

    /// Static forwards: (proto, outside, inside).
    pub fn forwards(&self) -> Vec<(u8, Endpoint, Endpoint)> {
        let mut v: Vec<_> = self
            .by_outside
            .values()
            .map(|&i| &self.maps[i as usize])
            .filter(|m| m.fixed)
            .map(|m| (m.proto, m.outside, m.inside))
            .collect();
        v.sort();
        v
    }

    /// Free ports of address `a` for `proto`.
    pub fn free_ports(&self, a: u32, proto: u8) -> u32 {
        self.addrs.iter().position(|&x| x == a).map_or(0, |i| self.ports[i][proto_index(proto)].free)
    }

    #[cfg(test)]
    fn maps_live(&self) -> impl Iterator<Item = &Mapping> {
        self.by_inside.values().map(|&i| &self.maps[i as usize])
    }

    /// Consistency of every index with the sessions (tests).
    #[cfg(test)]
    pub fn check(&self) {
        let mut n = 0;
        let mut hosts: HashMap<u32, u32> = HashMap::new();
        for c in 0..4 {
            let mut s = self.lists[c].0;
            let mut prev = NIL;
            let mut k = 0;
            while s != NIL {
                let x = &self.sessions[s as usize];
                assert_eq!(x.class as usize, c);
                assert_eq!(x.prev, prev);
                assert_eq!(self.flows.get(&(x.map, x.remote)), Some(&s));
                if prev != NIL {
                    assert!(self.sessions[prev as usize].linked <= x.linked, "a list is in the order it was linked");
                }
                assert!(x.linked <= x.last && x.last - x.linked <= self.limits.timeout[c] >> 10);
                *hosts.entry(self.maps[x.map as usize].inside.addr).or_insert(0) += 1;
                prev = s;
                s = x.next;
                k += 1;
            }
            assert_eq!(self.lists[c].1, prev);
            assert_eq!(self.per_class[c], k);
            n += k;
        }
        assert_eq!(n, self.live);
        assert_eq!(self.flows.len(), self.live);
        assert_eq!(hosts.len(), self.hosts.len());
        for (h, k) in &hosts {
            assert_eq!(self.hosts.get(h), Some(k));
            assert!(*k <= self.limits.per_host);
        }
        assert!(self.live <= self.limits.max_sessions);
        for (k, &i) in &self.by_inside {
            let m = &self.maps[i as usize];
            assert_eq!((m.proto, m.inside), *k);
            assert_eq!(self.by_outside.get(&(m.proto, m.outside)), Some(&i));
            assert!(m.fixed || m.sessions > 0, "a dynamic mapping without sessions is freed");
            let ai = self.addrs.iter().position(|&a| a == m.outside.addr).unwrap();
            assert!(self.ports[ai][proto_index(m.proto)].taken(m.outside.port));
        }
        assert_eq!(self.by_inside.len(), self.by_outside.len());
        let used: u32 = self.ports.iter().flat_map(|p| p.iter()).map(|p| 65536 - p.free).sum();
        let reserved: u32 = self.ports.len() as u32 * (1 + 2 * u32::from(FIRST_PORT));
        let dynamic_range =
            self.maps_live().filter(|m| m.outside.port >= if m.proto == ICMP { 1 } else { FIRST_PORT }).count();
        assert_eq!(used - reserved, dynamic_range as u32, "a port taken for each mapping in the dynamic range");
    }
}
