//! `vxlan`: a VXLAN tunnel endpoint (VTEP, RFC 7348) over an IPv4 underlay, bridging
//! one VNI between the inner side of the graph and remote VTEPs, as Linux's `vxlan`
//! device and VPP's `vxlan4` tunnels do.
//!
//! The node tells the two directions apart by the port a packet arrived on. From the
//! underlay port (`port`), a VXLAN packet (UDP to `udp_port`, 4789 by default, at our
//! address `local`) of our `vni` from one of `remotes` is decapsulated and its inner
//! frame sent on `inner`; the remote is learned as the VTEP behind the inner source
//! MAC. Every other frame goes on `other` unchanged (ARP and ICMP for our underlay
//! address; VXLAN of another VNI, for a second `vxlan` node), and a VXLAN packet of
//! ours from an address not in `remotes` is dropped: a VTEP trusts only the remotes it
//! was given. Any other packet is an inner frame: it is sent to the remote its
//! destination MAC was learned behind, or, for a broadcast, multicast or unknown
//! destination, to every remote (head-end replication), each copy encapsulated
//! (outer IPv4 with DF set, UDP with checksum 0 as RFC 7348 allows over IPv4, the
//! source port from a keyed hash of the inner flow in 49152..=65535, so that the
//! underlay spreads flows and keeps each in order) and sent on `underlay`, with the
//! outer destination MAC left for an `arp` node (or a router) to fill in.
//!
//! Offloads: an inner TSO frame, or a GSO frame received from the kernel, leaves as
//! encapsulated segments (cut here, as for a port without TSO); a partial checksum is
//! completed before the frame is encapsulated. A received VXLAN GSO frame (the
//! kernel hands a tunnel's TCP super-frame over whole, its offload state about the
//! inner headers) keeps that state, now relative to the inner frame, so the port that
//! sends it on cuts it. A VLAN tag the inner port stripped is put back into the inner
//! frame before it is encapsulated.
//!
//! MTU: an encapsulated packet longer than `mtu` (the underlay's IP MTU) is not sent.
//! For an inner IPv4 packet with DF set the sender gets an ICMP fragmentation needed
//! (next-hop MTU: `mtu` less the 50 bytes of encapsulation), for an IPv6 packet an
//! ICMPv6 packet too big, both sent on `inner` as from the packet's destination (as
//! Linux's bridged VXLAN does: the VTEP has no address on the inner network) and rate
//! limited in all and per destination; an IPv4 packet without DF is dropped (outer
//! fragmentation is not done). Outer IPv4 fragments are dropped, counted (no
//! reassembly).
//!
//! Only a packet from one host to one host behind a remote gets an ICMP error (not
//! one to a group or broadcast or to a MAC not learned behind a remote, from an
//! unspecified or group address, an ICMP error or a later fragment). With `mtu` below 1330 an IPv6 packet cannot cross at all (IPv6 needs
//! 1280 bytes): its sender is told 1280.
//!
//! Decapsulated frames keep the underlay port as their `port`, and ICMP errors carry
//! it too: an `l2_bridge` behind the node, whose edge named after the underlay port
//! leads back to the node, learns the remote hosts there, and the VNI is a member of
//! that bridge domain. One `vxlan` node and one bridge per VNI give a bridge domain
//! per VNI over one underlay (`configs/vxlan-bridges.yaml`); a bridge and its tunnel
//! feed each other, so they run on two lcores (the edges of one lcore form no loop).
//!
//! Bounds: the learned table holds at most `max_macs` inner MACs (aged after `age`
//! without traffic; when full, new MACs are not learned and their frames flood, as a
//! Linux VTEP's table does), the output waiting to leave (segments of TSO frames,
//! flooded copies) at most [`MAX_QUEUED`] packets (beyond, dropped: `queue_full`), a
//! TSO frame is cut into segments of at least 88 bytes (Linux's smallest MSS), and
//! ICMP errors keep to their budgets.

use crate::hash::{random_secret, KeyedState};
use crate::kind::{NodeKind, Values, MEMPOOL, PORT};
use crate::offload::TxFixup;
use crate::router::icmp::{error_allowed, ipv6_header};
use crate::router::icmp_budget::IcmpBudget;
use crate::NodeError;
use ironpath_config::{Nexts, NodeSpec, ParamKind, ParamSpec};
use ironpath_eal::abi::{self, RX_VLAN_STRIPPED};
use ironpath_eal::{Burst, Mbuf, Mempool, MAX_BURST};
use ironpath_graph::{Controller, CounterSpec, Dispatch, Msg, Node, NodeCx, Remote, SleepPlan, DROP};
use ironpath_wire::checksum;
use ironpath_wire::ethernet::{l3_offset, EtherType};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

ironpath_graph::counters! {
    /// What `vxlan` counts.
    pub enum VxlanCounter {
        Decapsulated("decapsulated", "VXLAN packets of our VNI from a remote, sent on inner"),
        Encapsulated("encapsulated", "packets sent to a remote VTEP (a flooded frame once per remote)"),
        Flooded("flooded", "inner frames sent to every remote (broadcast, multicast or unknown destination)"),
        Learned("learned", "inner MACs learned, or moved to another remote"),
        TableFull("table_full", "inner MACs not learned: the table holds max_macs"),
        Other("other", "underlay frames that are not VXLAN to our address and port, sent on other"),
        OtherVni("other_vni", "VXLAN packets of another VNI, sent on other"),
        UnknownRemote("unknown_remote", "VXLAN packets of our VNI from an address not in remotes, dropped"),
        Fragment("fragment", "UDP in IPv4 fragments to our address (not reassembled), dropped"),
        BadChecksum("bad_checksum", "VXLAN packets whose UDP checksum is wrong, dropped"),
        Malformed("malformed", "frames dropped: VXLAN cut short or without its I flag, or an inner frame shorter than an Ethernet header"),
        TooBig("too_big", "inner packets too long for the underlay MTU once encapsulated, dropped"),
        IcmpSent("icmp_sent", "ICMP fragmentation needed / packet too big sent back to an inner sender"),
        IcmpLimited("icmp_limited", "ICMP errors not sent: over their budget"),
        OffloadFailed("offload_failed", "inner packets whose offloads could not be done in software, dropped"),
        NoMbuf("no_mbuf", "packets dropped: no buffer for a copy, a tag or an ICMP error"),
        QueueFull("queue_full", "packets dropped: more output waiting than the node holds"),
    }
}

/// Next edge: decapsulated frames and ICMP errors to inner senders.
pub const INNER: u16 = 0;
/// Next edge: encapsulated packets.
pub const UNDERLAY: u16 = 1;
/// Next edge: underlay frames that are not ours.
pub const OTHER: u16 = 2;

/// Bytes VXLAN adds: Ethernet, IPv4, UDP and VXLAN headers.
pub const OVERHEAD: usize = 14 + 20 + 8 + 8;
/// The smallest TCP segment size a TSO frame may ask to be cut at (Linux's
/// `TCP_MIN_MSS`).
const MIN_SEGMENT: u16 = 88;
/// Remote VTEPs at most.
pub const MAX_REMOTES: usize = 64;
/// Packets waiting to leave the node at most.
pub const MAX_QUEUED: usize = 1024;
/// An Ethernet header.
const ETH: usize = 14;

/// The node's settings, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VxlanConfig {
    /// The VNI (24 bits).
    pub vni: u32,
    /// Our underlay address.
    pub local: Ipv4Addr,
    /// The remote VTEPs.
    pub remotes: Vec<Ipv4Addr>,
    /// The UDP port of VXLAN.
    pub udp_port: u16,
    /// The underlay's IP MTU.
    pub mtu: usize,
    /// Learned inner MACs at most.
    pub max_macs: usize,
    /// A learned MAC is forgotten after this long without a packet from it (µs).
    pub age_us: u64,
}

impl VxlanConfig {
    /// The settings from the validated parameters.
    pub fn from_params(p: Values<'_>) -> Result<Self, NodeError> {
        let refuse = |param, reason: String| Err(NodeError::Param { param, reason });
        let IpAddr::V4(local) =
            p.raw().ip_list("local").and_then(|l| l.first().copied()).ok_or(NodeError::Missing("local"))?
        else {
            return refuse("local", "the underlay is IPv4: give an IPv4 address".into());
        };
        let mut remotes = Vec::new();
        for a in p.ip_list("remotes")? {
            match a {
                IpAddr::V4(a) if *a == local => return refuse("remotes", format!("{a} is our own address (`local`)")),
                IpAddr::V4(a) if a.is_multicast() || a.is_broadcast() || a.is_unspecified() => {
                    return refuse("remotes", format!("{a} is not a unicast address"))
                }
                IpAddr::V4(a) if !remotes.contains(a) => remotes.push(*a),
                IpAddr::V4(_) => {}
                IpAddr::V6(a) => return refuse("remotes", format!("{a}: the underlay is IPv4")),
            }
        }
        if remotes.len() > MAX_REMOTES {
            return refuse(
                "remotes",
                format!("{} remotes; at most {MAX_REMOTES} (each flooded frame is copied to every one)", remotes.len()),
            );
        }
        Ok(VxlanConfig {
            vni: p.int("vni")?,
            local,
            remotes,
            udp_port: p.int("udp_port")?,
            mtu: p.int("mtu")?,
            max_macs: p.int("max_macs")?,
            age_us: p.duration_us("age")?,
        })
    }
}

/// A learned inner MAC: the remote behind it and when it was last seen.
#[derive(Clone, Copy, Debug)]
struct Learned {
    remote: Ipv4Addr,
    seen: u64,
}

/// The counts of one call, by counter.
type Counts = [u64; VxlanCounter::COUNT];

fn count(n: &mut Counts, c: VxlanCounter) {
    n[usize::from(c)] += 1;
}

/// The node.
pub struct Vxlan {
    cfg: VxlanConfig,
    /// The underlay port's id and MAC.
    port: u16,
    mac: [u8; 6],
    pool: Mempool,
    /// Inner offloads done in software (a port that can do none).
    fixup: TxFixup,
    macs: HashMap<[u8; 6], Learned, KeyedState>,
    age: u64,
    /// When the table is next swept of aged entries (when full).
    next_sweep: u64,
    hz: u64,
    flow_key: KeyedState,
    ip_id: u16,
    icmp: IcmpBudget,
    /// Packets waiting to leave, with their edge.
    out: VecDeque<(Mbuf, u16)>,
    /// The inner frames of the call being worked on (kept for its capacity).
    inner: Burst,
    work: Vec<Mbuf>,
    /// The control-plane half, until the graph takes it.
    ctl: Option<VxlanCtl>,
}

impl Vxlan {
    /// A VTEP as `cfg` says on the underlay port of id `port` and MAC `mac`, copies
    /// and ICMP errors from `pool`, a TSC of `hz`, its hashes keyed from `key`.
    pub fn new(cfg: VxlanConfig, port: u16, mac: [u8; 6], pool: Mempool, hz: u64, key: [u8; 16]) -> Self {
        let mut k2 = key;
        k2.reverse();
        let mut k3 = key;
        k3.rotate_left(5);
        let ctl = VxlanCtl {
            about: format!("vni {} local {} udp port {} mtu {}", cfg.vni, cfg.local, cfg.udp_port, cfg.mtu),
            local: cfg.local,
            hz,
        };
        Vxlan {
            ctl: Some(ctl),
            age: cfg.age_us.saturating_mul(hz) / 1_000_000,
            macs: HashMap::with_capacity_and_hasher(cfg.max_macs.min(4096), KeyedState::new(key)),
            cfg,
            port,
            mac,
            fixup: TxFixup::new(0, pool.clone()),
            pool,
            next_sweep: 0,
            hz,
            flow_key: KeyedState::new(k2),
            ip_id: 0,
            icmp: IcmpBudget::new((1000, 100), (10, 10), hz, k3),
            out: VecDeque::new(),
            inner: Burst::new(),
            work: Vec::with_capacity(MAX_BURST),
        }
    }

    /// Learned inner MACs now.
    pub fn learned(&self) -> usize {
        self.macs.len()
    }

    fn queue(&mut self, m: Mbuf, edge: u16, n: &mut Counts) {
        if self.out.len() >= MAX_QUEUED {
            count(n, VxlanCounter::QueueFull);
            return;
        }
        self.out.push_back((m, edge));
    }

    /// An underlay frame: decapsulated if it is ours, else on `other` or dropped.
    fn decap(&mut self, m: Mbuf, now: u64, n: &mut Counts) {
        let d = m.data();
        let Ok((EtherType::IPV4, off)) = l3_offset(d) else {
            count(n, VxlanCounter::Other);
            return self.queue(m, OTHER, n);
        };
        let ip = &d[off..];
        if ip.len() < 20 || ip[0] >> 4 != 4 || ip[9] != 17 || ip[16..20] != self.cfg.local.octets() {
            count(n, VxlanCounter::Other);
            return self.queue(m, OTHER, n);
        }
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        if u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0 {
            return count(n, VxlanCounter::Fragment);
        }
        let Some(udp) = ip.get(ihl..ihl + 8).filter(|_| ihl >= 20) else {
            return count(n, VxlanCounter::Malformed);
        };
        if u16::from_be_bytes([udp[2], udp[3]]) != self.cfg.udp_port {
            count(n, VxlanCounter::Other);
            return self.queue(m, OTHER, n);
        }
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
        let inner_at = off + ihl + 16;
        // The outer headers in the first segment, the lengths agreeing with each
        // other and with the frame, room for an inner Ethernet header.
        let Some(vx) = d.get(off + ihl + 8..inner_at) else { return count(n, VxlanCounter::Malformed) };
        if total != ihl + udp_len || off + total > m.pkt_len() || udp_len < 16 + ETH || vx[0] & 0x08 == 0 {
            return count(n, VxlanCounter::Malformed);
        }
        let vni = u32::from_be_bytes([0, vx[4], vx[5], vx[6]]);
        if vni != self.cfg.vni {
            count(n, VxlanCounter::OtherVni);
            return self.queue(m, OTHER, n);
        }
        let remote = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
        if !self.cfg.remotes.contains(&remote) {
            return count(n, VxlanCounter::UnknownRemote);
        }
        let h = m.header();
        let sum = u16::from_be_bytes([udp[6], udp[7]]);
        let offloaded = h.ol_flags & (abi::RX_L4_CKSUM_GOOD | abi::RX_L4_CKSUM_NONE | abi::RX_AGGREGATED) != 0;
        if sum != 0 && !offloaded && !udp_checksum_ok(&m, off, ihl, udp_len) {
            return count(n, VxlanCounter::BadChecksum);
        }
        // The inner Ethernet header in the first segment too.
        let Some(inner_mac) = d.get(inner_at + 6..inner_at + 12).and_then(|s| <[u8; 6]>::try_from(s).ok()) else {
            return count(n, VxlanCounter::Malformed);
        };
        let l2l3 = usize::from(h.l2_len) + usize::from(h.l3_len);
        // The inner headers are parsed only for an offload still pending (a tunnel's
        // GSO frame or partial checksum), whose state must move onto them.
        let pending = h.ol_flags & (abi::RX_AGGREGATED | abi::RX_L4_CKSUM_NONE) != 0;
        let inner = if pending { inner_ip(&d[inner_at..]) } else { None };
        let pad = m.pkt_len() - off - total;
        let mut m = if m.refcnt() > 1 {
            match m.deep_copy(&self.pool) {
                Ok(c) => c,
                Err(_) => return count(n, VxlanCounter::NoMbuf),
            }
        } else {
            m
        };
        if m.adj(inner_at).is_err() || m.trim(pad).is_err() {
            return count(n, VxlanCounter::Malformed);
        }
        let h = m.header_mut();
        let kept = abi::RX_AGGREGATED | abi::RX_L4_CKSUM_NONE | abi::RX_L4_CKSUM_GOOD | abi::RX_RSS_HASH;
        // Offload state about the inner headers (a tunnel's GSO frame) moves with
        // them; state about the outer ones (a stripped outer tag) goes.
        match inner {
            Some((l2, ptype)) if l2l3 > inner_at + l2 => {
                h.l3_len = (l2l3 - inner_at - l2) as u16;
                h.l2_len = l2 as u8;
                h.ol_flags &= kept;
                // The port's classification was of the outer headers (UDP): a port
                // sending this on must see the inner protocol.
                h.packet_type = ptype;
            }
            _ => {
                h.ol_flags &= abi::RX_RSS_HASH;
                (h.l2_len, h.l3_len, h.l4_len, h.tso_segsz, h.packet_type) = (0, 0, 0, 0, 0);
            }
        }
        h.vlan_tci = 0;
        self.learn(inner_mac, remote, now, n);
        count(n, VxlanCounter::Decapsulated);
        self.queue(m, INNER, n);
    }

    fn learn(&mut self, mac: [u8; 6], remote: Ipv4Addr, now: u64, n: &mut Counts) {
        if mac[0] & 1 != 0 || mac == [0; 6] {
            return;
        }
        if let Some(e) = self.macs.get_mut(&mac) {
            if e.remote != remote {
                count(n, VxlanCounter::Learned);
            }
            *e = Learned { remote, seen: now };
            return;
        }
        if self.macs.len() >= self.cfg.max_macs && now >= self.next_sweep {
            // At most once a second: a full table of live entries is not rescanned
            // for every new MAC a peer makes up.
            let age = self.age;
            self.macs.retain(|_, e| now.saturating_sub(e.seen) < age);
            self.next_sweep = now.saturating_add(self.hz);
        }
        if self.macs.len() >= self.cfg.max_macs {
            return count(n, VxlanCounter::TableFull);
        }
        self.macs.insert(mac, Learned { remote, seen: now });
        count(n, VxlanCounter::Learned);
    }

    /// The remote a unicast destination was learned behind (and still is).
    fn remote_of(&self, dst: &[u8], now: u64) -> Option<Ipv4Addr> {
        let mac: [u8; 6] = dst.try_into().ok()?;
        let e = self.macs.get(&mac)?;
        (now.saturating_sub(e.seen) < self.age).then_some(e.remote)
    }

    /// Inner frames: tags put back, offloads done, each encapsulated to its remote(s).
    fn encap_all(&mut self, now: u64, n: &mut Counts) {
        let mut more: Vec<Mbuf> = Vec::new();
        let before = self.fixup.stats.dropped;
        self.fixup.prepare(&mut self.inner, |m| more.push(m));
        n[usize::from(VxlanCounter::OffloadFailed)] += self.fixup.stats.dropped - before;
        let mut work = std::mem::take(&mut self.work);
        self.inner.take_into(&mut work);
        for m in work.drain(..).chain(more) {
            self.encap(m, now, n);
        }
        self.work = work;
    }

    fn encap(&mut self, m: Mbuf, now: u64, n: &mut Counts) {
        let d = m.data();
        if d.len() < ETH {
            return count(n, VxlanCounter::Malformed);
        }
        if m.pkt_len() + OVERHEAD - ETH > self.cfg.mtu {
            return self.too_big(m, now, n);
        }
        let sport = 49152 | (self.inner_flow(d) & 0x3fff) as u16;
        match self.remote_of(&d[..6], now) {
            Some(r) => self.encap_to(m, r, sport, n),
            None => {
                count(n, VxlanCounter::Flooded);
                let last = self.cfg.remotes.len().saturating_sub(1);
                for r in 0..last {
                    let to = self.cfg.remotes[r];
                    match m.deep_copy(&self.pool) {
                        Ok(c) => self.encap_to(c, to, sport, n),
                        Err(_) => count(n, VxlanCounter::NoMbuf),
                    }
                }
                // The node always has a remote (the last one cannot be removed).
                if let Some(&to) = self.cfg.remotes.last() {
                    self.encap_to(m, to, sport, n);
                }
            }
        }
    }

    /// The keyed hash of an inner frame's flow (addresses, protocol, ports), or of its
    /// MAC addresses when it is not IP.
    fn inner_flow(&self, d: &[u8]) -> u64 {
        let mut h = self.flow_key.build_hasher();
        match l3_offset(d) {
            Ok((EtherType::IPV4, off)) if d.len() >= off + 20 => {
                let ip = &d[off..];
                h.write(&ip[12..20]);
                h.write_u8(ip[9]);
                let l4 = off + usize::from(ip[0] & 0x0f) * 4;
                let first = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff == 0;
                if first && matches!(ip[9], 6 | 17 | 132) {
                    if let Some(p) = d.get(l4..l4 + 4) {
                        h.write(p);
                    }
                }
            }
            Ok((EtherType::IPV6, off)) if d.len() >= off + 40 => {
                let ip = &d[off..];
                h.write(&ip[8..40]);
                h.write_u8(ip[6]);
                if matches!(ip[6], 6 | 17 | 132) {
                    if let Some(p) = d.get(off + 40..off + 44) {
                        h.write(p);
                    }
                }
            }
            _ => h.write(&d[..12]),
        }
        h.finish()
    }

    /// Encapsulate `m` to `remote` and queue it on `underlay`.
    fn encap_to(&mut self, m: Mbuf, remote: Ipv4Addr, sport: u16, n: &mut Counts) {
        // Only the first segment is written: a segment's payload slices may be shared.
        let mut m = if m.head_writable() && m.headroom() >= OVERHEAD {
            m
        } else {
            match m.deep_copy(&self.pool) {
                Ok(c) if c.headroom() >= OVERHEAD => c,
                _ => return count(n, VxlanCounter::NoMbuf),
            }
        };
        let inner = m.pkt_len();
        self.ip_id = self.ip_id.wrapping_add(1);
        let Ok(d) = m.prepend(OVERHEAD) else { return count(n, VxlanCounter::NoMbuf) };
        d[..6].fill(0);
        d[6..12].copy_from_slice(&self.mac);
        d[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut d[ETH..ETH + 20];
        ip[0] = 0x45;
        ip[1] = 0;
        ip[2..4].copy_from_slice(&((inner + 36) as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&self.ip_id.to_be_bytes());
        ip[6..8].copy_from_slice(&[0x40, 0]);
        ip[8] = 64;
        ip[9] = 17;
        ip[10..12].fill(0);
        ip[12..16].copy_from_slice(&self.cfg.local.octets());
        ip[16..20].copy_from_slice(&remote.octets());
        let sum = !checksum::data(ip);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        let udp = &mut d[ETH + 20..ETH + 28];
        udp[0..2].copy_from_slice(&sport.to_be_bytes());
        udp[2..4].copy_from_slice(&self.cfg.udp_port.to_be_bytes());
        udp[4..6].copy_from_slice(&((inner + 16) as u16).to_be_bytes());
        udp[6..8].fill(0);
        let vx = &mut d[ETH + 28..OVERHEAD];
        vx.copy_from_slice(&[0x08, 0, 0, 0, 0, 0, 0, 0]);
        vx[4..7].copy_from_slice(&self.cfg.vni.to_be_bytes()[1..]);
        let h = m.header_mut();
        // The inner frame is complete (the fixup did its offloads): nothing is asked
        // of the port.
        h.ol_flags &= abi::RX_RSS_HASH;
        (h.l2_len, h.l3_len, h.l4_len, h.tso_segsz, h.vlan_tci) = (ETH as u8, 20, 8, 0, 0);
        h.packet_type = abi::ptype::L2_ETHER | abi::ptype::L3_IPV4 | abi::ptype::L4_UDP;
        count(n, VxlanCounter::Encapsulated);
        self.queue(m, UNDERLAY, n);
    }

    /// An inner packet too long once encapsulated: an ICMP error to its sender where
    /// one is due (IPv4 with DF, IPv6), sent on `inner`.
    fn too_big(&mut self, m: Mbuf, now: u64, n: &mut Counts) {
        count(n, VxlanCounter::TooBig);
        let d = m.data();
        let Ok((t, off)) = l3_offset(d) else { return };
        let v6 = match t {
            EtherType::IPV4 if d.len() >= off + 20 && d[off + 6] & 0x40 != 0 => false,
            EtherType::IPV6 if d.len() >= off + 40 => true,
            _ => return,
        };
        // The checks see the IP header at 14 bytes into what they are given.
        if !error_allowed(&d[off - ETH..], v6) || !to_one_host(d, off, v6) {
            return;
        }
        // Only for a destination known behind a remote: the error comes as from it,
        // and a bridge behind the node learns its MAC on the tunnel's side; for a
        // destination flooded while unknown (maybe on the sender's own side) that
        // would pull it into the tunnel.
        if self.remote_of(&d[..6], now).is_none() {
            return;
        }
        // The inner IP packet may be the underlay MTU less the outer IP, UDP and VXLAN
        // headers and the inner L2 header.
        let mtu = self.cfg.mtu.saturating_sub(OVERHEAD - ETH + off);
        let ip = &d[off..];
        let to = if v6 {
            IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&ip[8..24]).unwrap_or_default()))
        } else {
            IpAddr::V4(Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]))
        };
        if self.icmp.allow(to, now).is_err() {
            return count(n, VxlanCounter::IcmpLimited);
        }
        // As much of the packet as fits in 576 (IPv4) or 1280 (IPv6) bytes.
        let (hdr, max) = if v6 { (48, 1280) } else { (28, 576) };
        let ip_len = m.pkt_len() - off;
        let quote = ip_len.min(max - hdr);
        let mut b = vec![0u8; off + hdr + quote];
        m.copy_to(off, &mut b[off + hdr..]);
        // Back as from the packet's destination, on the VLAN it came on.
        b[..6].copy_from_slice(&d[6..12]);
        b[6..12].copy_from_slice(&d[..6]);
        b[12..off].copy_from_slice(&d[12..off]);
        let c = off + hdr - 8;
        if v6 {
            b[c] = 2;
            b[c + 4..c + 8].copy_from_slice(&(mtu.max(1280) as u32).to_be_bytes());
            let src = Ipv6Addr::from(<[u8; 16]>::try_from(&ip[24..40]).unwrap_or_default());
            let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&ip[8..24]).unwrap_or_default());
            ipv6_header(&mut b[off..off + 40], (8 + quote) as u16, 64, &src, &dst);
            let end = b.len();
            crate::icmp::fill_icmp6_checksum(&mut b, c..end, &src, &dst);
        } else {
            b[c] = 3;
            b[c + 1] = 4;
            b[c + 6..c + 8].copy_from_slice(&(mtu.min(0xffff) as u16).to_be_bytes());
            let e = &mut b[off..off + 20];
            e[0] = 0x45;
            e[1] = 0xc0;
            e[2..4].copy_from_slice(&((28 + quote) as u16).to_be_bytes());
            e[8] = 64;
            e[9] = 1;
            e[12..16].copy_from_slice(&ip[16..20]);
            e[16..20].copy_from_slice(&ip[12..16]);
            let s = !checksum::data(e);
            b[off + 10..off + 12].copy_from_slice(&s.to_be_bytes());
            let s = !checksum::data(&b[c..]);
            b[c + 2..c + 4].copy_from_slice(&s.to_be_bytes());
        }
        match Mbuf::from_slice(&self.pool, &b) {
            Ok(mut e) => {
                // From the tunnel's side, as a decapsulated frame (a bridge behind
                // the node learns the packet's destination there, where it is).
                e.header_mut().port = self.port;
                count(n, VxlanCounter::IcmpSent);
                self.queue(e, INNER, n);
            }
            Err(_) => count(n, VxlanCounter::NoMbuf),
        }
    }

    /// An inner frame made ready for the offload fixup: the tag its port stripped
    /// back in its bytes; a copy of its own when it is shared and a checksum is to be
    /// completed in it; an aggregate (`rx_aggregate`'s, checksums complete) marked to
    /// be cut at its segment size like a TSO packet. `None`: dropped (counted).
    fn inner_ready(&self, m: Mbuf, n: &mut Counts) -> Option<Mbuf> {
        let mut m = if m.header().ol_flags & RX_VLAN_STRIPPED != 0 { self.with_tag(m, n)? } else { m };
        let partial = abi::RX_L4_CKSUM_NONE | abi::TX_TCP_CKSUM | abi::TX_UDP_CKSUM | abi::TX_IP_CKSUM;
        // An aggregate gets TX_TCP_SEG below: its header must be ours alone too (a
        // bridge flooding it shares one header with another port's copy).
        let h = m.header();
        let cut = h.ol_flags & abi::RX_AGGREGATED != 0 && h.tso_segsz > 0;
        if (h.ol_flags & partial != 0 || cut) && !m.is_writable() {
            m = match m.deep_copy(&self.pool) {
                Ok(c) => c,
                Err(_) => {
                    count(n, VxlanCounter::NoMbuf);
                    return None;
                }
            };
        }
        if m.header().ol_flags & abi::TX_IP_CKSUM != 0 {
            // The inner IPv4 header checksum, which no port will write once the
            // header is inside the tunnel (TSO segments get theirs when cut).
            let Some(d) = m.data_mut().ok() else {
                count(n, VxlanCounter::OffloadFailed);
                return None;
            };
            if let Ok((EtherType::IPV4, off)) = l3_offset(d) {
                let hl = usize::from(d.get(off).map_or(0, |b| b & 0x0f)) * 4;
                if let Some(ip) = d.get_mut(off..off + hl).filter(|_| hl >= 20) {
                    ip[10..12].fill(0);
                    let sum = !checksum::data(ip);
                    ip[10..12].copy_from_slice(&sum.to_be_bytes());
                }
            }
            m.header_mut().ol_flags &= !abi::TX_IP_CKSUM;
        }
        let h = m.header_mut();
        if h.ol_flags & abi::RX_AGGREGATED != 0 && h.tso_segsz > 0 {
            h.ol_flags |= abi::TX_TCP_SEG;
        }
        if h.ol_flags & abi::TX_TCP_SEG != 0 && h.tso_segsz < MIN_SEGMENT {
            // A peer's 64 KiB frame cut into one-byte segments would take the pool.
            count(n, VxlanCounter::OffloadFailed);
            return None;
        }
        Some(m)
    }

    /// `m` with the tag its port stripped back in its bytes (a copy when it is shared
    /// or has no headroom for it).
    fn with_tag(&self, m: Mbuf, n: &mut Counts) -> Option<Mbuf> {
        let mut m = if m.is_writable() && m.headroom() >= 4 {
            m
        } else {
            match m.deep_copy(&self.pool) {
                Ok(c) if c.headroom() >= 4 => c,
                _ => {
                    count(n, VxlanCounter::NoMbuf);
                    return None;
                }
            }
        };
        let tci = m.header().vlan_tci;
        if m.data().len() < ETH || m.prepend(4).is_err() {
            count(n, VxlanCounter::Malformed);
            return None;
        }
        let d = m.data_mut().ok()?;
        d.copy_within(4..16, 0);
        d[12..14].copy_from_slice(&[0x81, 0x00]);
        d[14..16].copy_from_slice(&tci.to_be_bytes());
        let h = m.header_mut();
        h.ol_flags &= !RX_VLAN_STRIPPED;
        h.vlan_tci = 0;
        if h.l2_len != 0 {
            h.l2_len = h.l2_len.saturating_add(4);
        }
        Some(m)
    }
}

/// A change of the node's tables, made by its lcore between two bursts.
enum VxlanChange {
    /// One more remote.
    AddRemote(Ipv4Addr),
    /// One remote fewer, and the MACs learned behind it.
    DelRemote(Ipv4Addr),
    /// Forget the learned MACs.
    Flush,
    /// The remotes, and the learned MACs from the `usize`-th on (a page), at a time.
    Show(usize, u64),
}

/// What the lcore answers a [`VxlanChange`].
enum VxlanAnswer {
    Done(Result<String, String>),
    /// The remotes; a page of (MAC, remote, ticks since seen); how many MACs in all.
    Shown(Vec<Ipv4Addr>, Vec<([u8; 6], Ipv4Addr, u64)>, usize),
}

/// Learned MACs one [`VxlanChange::Show`] copies out at most.
const SHOW_PAGE: usize = 256;
/// Learned MACs `show vxlan` lists at most.
const SHOW_MAX: usize = 4096;

impl Vxlan {
    fn change(&mut self, c: VxlanChange) -> VxlanAnswer {
        let remotes = &mut self.cfg.remotes;
        VxlanAnswer::Done(match c {
            VxlanChange::AddRemote(a) if remotes.contains(&a) => Err(format!("{a} is a remote already")),
            VxlanChange::AddRemote(_) if remotes.len() >= MAX_REMOTES => {
                Err(format!("{MAX_REMOTES} remotes already (each flooded frame is copied to every one)"))
            }
            VxlanChange::AddRemote(a) => {
                remotes.push(a);
                Ok(format!("remote {a} added ({} remotes)", remotes.len()))
            }
            VxlanChange::DelRemote(a) => match remotes.iter().position(|&r| r == a) {
                None => Err(format!("{a} is not a remote")),
                Some(_) if remotes.len() == 1 => Err(format!("{a} is the last remote: add another first")),
                Some(i) => {
                    remotes.remove(i);
                    let before = self.macs.len();
                    self.macs.retain(|_, e| e.remote != a);
                    Ok(format!("remote {a} removed; {} MACs learned behind it forgotten", before - self.macs.len()))
                }
            },
            VxlanChange::Flush => {
                let n = self.macs.len();
                self.macs.clear();
                Ok(format!("{n} learned MACs flushed"))
            }
            VxlanChange::Show(from, now) => {
                let page = self.macs.iter().skip(from).take(SHOW_PAGE);
                let page = page.map(|(m, e)| (*m, e.remote, now.saturating_sub(e.seen))).collect();
                return VxlanAnswer::Shown(self.cfg.remotes.clone(), page, self.macs.len());
            }
        })
    }
}

/// The commands of a `vxlan` node.
const VXLAN_GRAMMAR: &[(&str, &str)] = &[
    ("vxlan remote add <IPV4>", "flood to, and take VXLAN from, one more remote VTEP"),
    ("vxlan remote del <IPV4>", "stop using a remote VTEP; the MACs learned behind it are forgotten"),
    ("vxlan mac flush", "forget the learned inner MACs; they are learned again"),
    ("show vxlan", "the VNI, the remotes and the learned inner MACs (MAC, remote, seconds since seen)"),
];

/// The control-plane half of a `vxlan` node.
struct VxlanCtl {
    /// VNI, local address, port, MTU, in words.
    about: String,
    local: Ipv4Addr,
    hz: u64,
}

impl VxlanCtl {
    fn remote(&self, word: &str) -> Result<Ipv4Addr, String> {
        let a: Ipv4Addr = word.parse().map_err(|_| format!("`{word}` is not an IPv4 address"))?;
        if a == self.local {
            return Err(format!("{a} is our own address (`local`)"));
        }
        if a.is_multicast() || a.is_broadcast() || a.is_unspecified() {
            return Err(format!("{a} is not a unicast address"));
        }
        Ok(a)
    }
}

impl Controller for VxlanCtl {
    fn grammar(&self) -> &'static [(&'static str, &'static str)] {
        VXLAN_GRAMMAR
    }

    fn accepts(&self, words: &[&str]) -> bool {
        matches!(words, ["vxlan", ..] | ["show", "vxlan", ..])
    }

    fn command(&mut self, words: &[&str], remote: &Remote) -> Result<String, String> {
        let ask = |c: VxlanChange| -> Result<VxlanAnswer, String> {
            match remote.call(Box::new(c))?.downcast::<VxlanAnswer>() {
                Ok(a) => Ok(*a),
                Err(_) => Err("the node did not take the change (it panicked): nothing changed".into()),
            }
        };
        let change = match words {
            ["vxlan", "remote", "add", a] => VxlanChange::AddRemote(self.remote(a)?),
            ["vxlan", "remote", "del" | "delete", a] => VxlanChange::DelRemote(self.remote(a)?),
            ["vxlan", "mac", "flush"] => VxlanChange::Flush,
            ["show", "vxlan"] => {
                let now = ironpath_eal::tsc::rdtsc();
                let (mut remotes, mut macs, mut total) = (Vec::new(), Vec::new(), 0);
                while macs.len() < SHOW_MAX {
                    let VxlanAnswer::Shown(r, page, t) = ask(VxlanChange::Show(macs.len(), now))? else { break };
                    let more = page.len() == SHOW_PAGE;
                    (remotes, total) = (r, t);
                    macs.extend(page);
                    if !more {
                        break;
                    }
                }
                let list: Vec<String> = remotes.iter().map(|r| r.to_string()).collect();
                let mut s = format!(
                    "{}
remotes: {}
{total} learned MACs
",
                    self.about,
                    list.join(", ")
                );
                if !macs.is_empty() {
                    s.push_str(&format!("{:<18} {:<16} {}\n", "MAC", "remote", "seen (s ago)"));
                }
                for (m, r, ago) in &macs {
                    let mac = m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
                    s.push_str(&format!(
                        "{mac:<18} {:<16} {:.1}\n",
                        r.to_string(),
                        *ago as f64 / self.hz.max(1) as f64
                    ));
                }
                if total > macs.len() {
                    s.push_str(&format!("... {} more\n", total - macs.len()));
                }
                return Ok(s);
            }
            _ => return Err(format!("usage: {}", VXLAN_GRAMMAR.iter().map(|g| g.0).collect::<Vec<_>>().join(" | "))),
        };
        match ask(change)? {
            VxlanAnswer::Done(r) => r,
            VxlanAnswer::Shown(..) => Err("the node answered another change".into()),
        }
    }
}

/// Whether a TSO or GSO frame's segments would each be longer than `mtu` once
/// encapsulated.
fn gso_too_big(h: &abi::Mbuf, mtu: usize) -> bool {
    let seg = h.ol_flags & abi::TX_TCP_SEG != 0
        || h.ol_flags & (abi::RX_AGGREGATED | abi::RX_L4_CKSUM_NONE) == abi::RX_AGGREGATED | abi::RX_L4_CKSUM_NONE;
    let hdr = usize::from(h.l2_len) + usize::from(h.l3_len) + usize::from(h.l4_len);
    seg && h.tso_segsz > 0
        && (h.pkt_len as usize) > hdr + usize::from(h.tso_segsz)
        && hdr + usize::from(h.tso_segsz) + OVERHEAD - ETH > mtu
}

/// Whether an inner packet went from one host to one host (unicast MAC, neither
/// address unspecified, multicast, broadcast or loopback): only such a packet's sender
/// gets an ICMP error as from its destination (RFC 1812 4.3.2.7, RFC 4443 2.4).
fn to_one_host(d: &[u8], off: usize, v6: bool) -> bool {
    if d[0] & 1 != 0 {
        return false;
    }
    let ip = &d[off..];
    if v6 {
        let a = |r: std::ops::Range<usize>| Ipv6Addr::from(<[u8; 16]>::try_from(&ip[r]).unwrap_or_default());
        let (src, dst) = (a(8..24), a(24..40));
        ![src, dst].iter().any(|x| x.is_unspecified() || x.is_multicast() || x.is_loopback())
    } else {
        let a = |at: usize| Ipv4Addr::new(ip[at], ip[at + 1], ip[at + 2], ip[at + 3]);
        let (src, dst) = (a(12), a(16));
        ![src, dst].iter().any(|x| x.is_unspecified() || x.is_multicast() || x.is_broadcast() || x.is_loopback())
    }
}

/// An inner frame's L2 header length (14, or 18/22 with tags) and packet type
/// (Ethernet, its IP version and transport), if it is IP.
fn inner_ip(d: &[u8]) -> Option<(usize, u32)> {
    use abi::ptype;
    let (off, l3, proto) = match l3_offset(d) {
        Ok((EtherType::IPV4, off)) => (off, ptype::L3_IPV4, d.get(off + 9).copied()),
        Ok((EtherType::IPV6, off)) => (off, ptype::L3_IPV6, d.get(off + 6).copied()),
        _ => return None,
    };
    let l4 = match proto {
        Some(6) => ptype::L4_TCP,
        Some(17) => ptype::L4_UDP,
        _ => 0,
    };
    Some((off, ptype::L2_ETHER | l3 | l4))
}

/// Whether the UDP checksum of the datagram at `off + ihl` (over `udp_len` bytes, all
/// segments) verifies.
fn udp_checksum_ok(m: &Mbuf, off: usize, ihl: usize, udp_len: usize) -> bool {
    let d = m.data();
    let (src, dst) = (
        Ipv4Addr::new(d[off + 12], d[off + 13], d[off + 14], d[off + 15]),
        Ipv4Addr::new(d[off + 16], d[off + 17], d[off + 18], d[off + 19]),
    );
    let mut b = vec![0u8; udp_len];
    if m.copy_to(off + ihl, &mut b) != udp_len {
        return false;
    }
    let sum =
        checksum::pseudo_header_v4(&src, &dst, ironpath_wire::IpProtocol::UDP, udp_len as u16) + checksum::sum(&b);
    checksum::fold(sum) == 0xffff
}

impl Node for Vxlan {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, next: &mut [u16; MAX_BURST]) -> Dispatch {
        let now = cx.now_tsc;
        let mut n: Counts = [0; VxlanCounter::COUNT];
        if !pkts.is_empty() {
            let mut work = std::mem::take(&mut self.work);
            pkts.take_into(&mut work);
            for m in work.drain(..) {
                if m.header().port == self.port {
                    self.decap(m, now, &mut n);
                    continue;
                }
                let Some(m) = self.inner_ready(m, &mut n) else { continue };
                if gso_too_big(m.header(), self.cfg.mtu) {
                    // Its segments would be: one error for the frame, not one each.
                    self.too_big(m, now, &mut n);
                    continue;
                }
                // The burst held every one of these packets: there is room.
                let _ = self.inner.push(m);
            }
            self.work = work;
            if !self.inner.is_empty() {
                self.encap_all(now, &mut n);
            }
        }
        let mut i = 0;
        while i < MAX_BURST {
            let Some((m, edge)) = self.out.pop_front() else { break };
            next[i] = edge;
            // At most MAX_BURST pushed into the emptied burst.
            let _ = pkts.push(m);
            i += 1;
        }
        for c in VxlanCounter::ALL {
            let k = n[usize::from(c)];
            if k > 0 {
                cx.count(c, k);
            }
        }
        if i == 0 {
            Dispatch::All(DROP)
        } else {
            Dispatch::Each
        }
    }

    fn counters(&self) -> &'static [CounterSpec] {
        VxlanCounter::SPECS
    }

    fn controller(&mut self) -> Option<Box<dyn Controller>> {
        self.ctl.take().map(|c| Box::new(c) as Box<dyn Controller>)
    }

    fn apply(&mut self, _cx: &mut NodeCx<'_>, msg: Msg) -> Msg {
        match msg.downcast::<VxlanChange>() {
            Ok(c) => Box::new(self.change(*c)),
            Err(m) => m,
        }
    }

    fn sleep(&mut self, cx: &mut NodeCx<'_>, plan: &mut SleepPlan) {
        plan.quiet();
        if !self.out.is_empty() {
            plan.until(cx.now_tsc);
        }
    }

    fn stop(&mut self) {
        self.out.clear();
        self.inner.free_all();
    }
}

/// `vxlan`.
pub const KIND: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "vxlan",
        doc: "a VXLAN tunnel endpoint (RFC 7348) over IPv4: decapsulates our VNI from the underlay port to `inner`, encapsulates other frames to the remote VTEP their MAC was learned behind (or floods them to every remote)",
        params: &[
            PORT,
            ParamSpec::new("local", ParamKind::IpList).required().doc("our underlay IPv4 address (the outer source; VXLAN to it is decapsulated)"),
            ParamSpec::new("remotes", ParamKind::IpList).required().doc("the remote VTEPs' IPv4 addresses (at most 64): flooded frames go to each; VXLAN from others is dropped"),
            ParamSpec::new("vni", ParamKind::Uint { min: 0, max: 0xff_ffff }).required().doc("the VXLAN network identifier (24 bits)"),
            ParamSpec::new("udp_port", ParamKind::Uint { min: 1, max: 65535 }).default("4789").doc("the UDP destination port of VXLAN (IANA: 4789; Linux's default without `dstport`: 8472)"),
            ParamSpec::new("mtu", ParamKind::Uint { min: 576, max: 65535 }).default("1500").doc("the underlay's IP MTU: inner packets longer than mtu - 50 get an ICMP error (IPv4 DF, IPv6) or are dropped"),
            ParamSpec::new("max_macs", ParamKind::Uint { min: 1, max: 1 << 20 }).default("4096").doc("most inner MACs learned (beyond, frames to new MACs flood)"),
            ParamSpec::new("age", ParamKind::Duration).default("300s").doc("a learned MAC is forgotten after this long without a packet from it"),
            MEMPOOL,
        ],
        nexts: Nexts::Fixed(&["inner", "underlay", "other"]),
        source: true,
        // A packet leaves on `inner` decapsulated (50 bytes shorter) and on
        // `underlay` encapsulated, the inner side's never on `inner`: a bridge and
        // its tunnel may feed each other (through rings). `other` passes packets on.
        ends_loops: true,
        loop_passes: &["other"],
        check: Some(|p| crate::kind::refused_at(p, VxlanConfig::from_params(Values(p)))),
        ..NodeSpec::DEFAULT
    },
    build: |b, env| {
        let p = b.params();
        let cfg = VxlanConfig::from_params(p)?;
        let port = p.port("port")?;
        let mut key = [0u8; 16];
        random_secret(&mut key)?;
        let pool = env.mempool(p.raw().mempool("mempool"), Some(port))?;
        Ok(Box::new(Vxlan::new(cfg, env.port_id(port)?, env.port_mac(port)?, pool, env.tsc_hz(), key)))
    },
};

#[cfg(test)]
mod bridge_attack_tests;
#[cfg(test)]
mod ctl_tests;
#[cfg(test)]
mod tests;
