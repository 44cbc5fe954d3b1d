//! `policer`: two- and three-colour metering of packets, RFC 2697's single rate
//! three colour marker (srTCM, `algorithm: srtcm`) and RFC 2698's two rate three
//! colour marker (trTCM, `algorithm: trtcm`), as DPDK's `rte_meter` and VPP's
//! policer meter them, with an action per colour: `pass`, `drop` or `remark`
//! (set the DSCP of an IPv4 or IPv6 packet to the colour's `*_dscp`).
//!
//! Rates are in bit/s with bursts in bytes (`rate_unit: bps`, a packet costing its
//! frame's bytes, Ethernet header included, FCS not, as Linux's `tc police` counts),
//! or in packets/s with bursts in packets (`rate_unit: pps`). A packet that stands
//! for several on the wire (a TSO frame, `TX_TCP_SEG`; an aggregate, `RX_AGGREGATED`)
//! costs what its segments will: their count, and its bytes plus the headers each
//! further segment repeats. A packet costing more than `cbs` can never be green
//! (counted `above_cbs`): give bursts that hold the largest frame metered, a 64 KiB
//! TSO frame where the senders use TSO.
//!
//! srTCM: the committed bucket (size `cbs`) fills at `cir`; what it cannot hold
//! fills the excess bucket (`ebs`, 0 by default: then nothing is yellow). A packet
//! is green if the committed bucket holds its cost, else yellow if the excess bucket
//! does, else red. trTCM: the committed bucket (`cbs`) fills at `cir`, the peak
//! bucket (`pbs`) at `pir`; a packet the peak bucket cannot hold is red, else one the
//! committed bucket cannot hold is yellow, else green. Both buckets start full.
//! Colour-aware (`color_aware: true`), a packet's DSCP gives its colour on arrival
//! (`yellow_in`, `red_in`; others and non-IP frames arrive green) and a packet is
//! never marked better than it came, as both RFCs define.
//!
//! Token counts are exact: a bucket counts in 1/hz of a bit (or of a packet), hz
//! being the TSC frequency, so `dt` ticks add exactly `dt * rate` tokens and no
//! rounding accumulates, whatever the rate. The walk's TSC is the time.
//!
//! `per` says what one meter covers: the whole node (`node`: one class; send each
//! class through a policer of its own, after a `classify` or an `acl`), each flow
//! (`flow`: the addresses, protocol and ports hash to one of `flows` meters, keyed
//! with random bits so that no peer can aim its flows at another's meter; a
//! non-IP frame hashes by its MAC addresses) or each DSCP value (`dscp`: 64 meters;
//! non-IP frames share meter 0). The meters are allocated when the node is built:
//! nothing a peer sends makes the node hold more. Per flow, a sender spraying many
//! flows spends many meters, and flows sharing a meter with it share its fate; what
//! all flows together get through is up to `flows` times the rates: a policer per node
//! in front (or behind) bounds the total. A node on several lcores (one per queue)
//! meters each lcore's packets on its own, as DPDK's per-queue meters do.
//!
//! Remarking changes the packet in place when it is writable (the IPv4 header
//! checksum updated incrementally; the ECN bits kept); a shared packet is replaced by
//! a copy of its own from `mempool` (`copied`, or dropped as `no_mbuf`). A frame that
//! is not IPv4 or IPv6 (after up to two VLAN tags), or whose IP header is cut short,
//! cannot be remarked: it goes on unchanged, counted `not_ip`; colour-aware, it
//! arrives green (its DSCP cannot be read), and per DSCP it takes meter 0.

use crate::handoff::mac_hash;
use crate::hash::{random_secret, KeyedState};
use crate::kind::{NodeKind, Values, MEMPOOL};
use crate::NodeError;
use ironpath_config::{Choice, Nexts, NodeSpec, ParamKind, ParamSpec};
use ironpath_eal::abi::{self, Mbuf as RawMbuf};
use ironpath_eal::{Burst, Mbuf, Mempool, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx, DROP};
use ironpath_wire::checksum;
use ironpath_wire::ethernet::{l3_offset, EtherType};
use std::hash::{BuildHasher, Hasher};

ironpath_config::choice! {
    /// `policer`'s `algorithm`.
    pub enum Algorithm {
        /// RFC 2697, single rate three colour marker.
        Srtcm = "srtcm",
        /// RFC 2698, two rate three colour marker.
        Trtcm = "trtcm",
    }
}

ironpath_config::choice! {
    /// What rates and bursts count.
    pub enum RateUnit {
        /// Rates in bit/s, bursts in bytes.
        Bps = "bps",
        /// Rates in packets/s, bursts in packets.
        Pps = "pps",
    }
}

ironpath_config::choice! {
    /// What one meter covers.
    pub enum Per {
        /// The node: one meter.
        Node = "node",
        /// A flow: `flows` meters chosen by the keyed flow hash.
        Flow = "flow",
        /// A DSCP value: 64 meters.
        Dscp = "dscp",
    }
}

ironpath_config::choice! {
    /// What happens to the packets of one colour.
    pub enum ColorAction {
        /// Send them on.
        Pass = "pass",
        /// Drop them.
        Drop = "drop",
        /// Set their DSCP to the colour's `*_dscp` and send them on.
        Remark = "remark",
    }
}

ironpath_graph::counters! {
    /// What `policer` counts.
    pub enum PolicerCounter {
        Green("green", "packets marked green"),
        Yellow("yellow", "packets marked yellow"),
        Red("red", "packets marked red"),
        GreenBytes("green_bytes", "bytes of the packets marked green (on the wire: a TSO frame's segments' bytes)"),
        YellowBytes("yellow_bytes", "bytes of the packets marked yellow"),
        RedBytes("red_bytes", "bytes of the packets marked red"),
        Dropped("dropped", "packets dropped by their colour's action"),
        Remarked("remarked", "packets whose DSCP was set by their colour's action"),
        NotIp("not_ip", "packets a remark could not change (not IPv4/IPv6, or the IP header cut short), sent on unchanged"),
        AboveCbs("above_cbs", "packets costing more than `cbs` (never green: raise cbs above the largest frame)"),
        Copied("copied", "shared packets replaced by a copy of their own to be remarked"),
        NoMbuf("no_mbuf", "packets dropped: no buffer in `mempool` for their copy"),
    }
}

/// The node's one next edge.
pub const OUT: u16 = 0;

/// A packet's colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Color {
    /// Within the committed rate and burst.
    Green = 0,
    /// Within the excess burst (srTCM) or the peak rate (trTCM).
    Yellow = 1,
    /// Beyond both.
    Red = 2,
}

/// Largest rate accepted (10 Tbit/s or 10^13 packets/s).
pub const MAX_RATE: u64 = 10_000_000_000_000;
/// Largest burst accepted (10^8 bytes or packets): with a TSC of up to 2^33 Hz the
/// two buckets' token counts fit in a `u64` together.
pub const MAX_BURST_SIZE: u64 = 100_000_000;
/// Fastest TSC the token arithmetic is sized for (8.6 GHz).
const MAX_HZ: u64 = 1 << 33;

/// A meter's rates and bucket sizes in tokens: 1/hz of a bit (`bps`) or of a packet
/// (`pps`), so a rate in units per second is also its tokens per TSC tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Profile {
    algorithm: Algorithm,
    /// Tokens per tick into the committed bucket.
    cir: u64,
    /// Tokens per tick into the peak bucket (trTCM); srTCM's excess bucket fills from
    /// the committed bucket's overflow.
    pir: u64,
    /// Size of the committed bucket.
    cbs: u64,
    /// Size of the excess (srTCM) or peak (trTCM) bucket.
    ebs: u64,
    /// Tokens one byte (`bps`) or one packet (`pps`) costs.
    per_unit: u64,
    unit: RateUnit,
}

impl Profile {
    /// A profile: `cir` (and `pir` for trTCM) in units per second, `cbs` and `ebs`
    /// (srTCM's excess burst, trTCM's peak burst) in bytes or packets, for a clock of
    /// `hz` ticks per second.
    pub fn new(
        algorithm: Algorithm,
        unit: RateUnit,
        cir: u64,
        cbs: u64,
        pir: u64,
        ebs: u64,
        hz: u64,
    ) -> Result<Profile, String> {
        if hz == 0 || hz > MAX_HZ {
            return Err(format!(
                "a TSC of {hz} Hz is outside what the policer's arithmetic is sized for (1..={MAX_HZ})"
            ));
        }
        let per_unit = match unit {
            RateUnit::Bps => 8 * hz,
            RateUnit::Pps => hz,
        };
        let tokens = |b: u64| b.checked_mul(per_unit).ok_or_else(|| format!("a burst of {b} is too large"));
        let (cbs, ebs) = (tokens(cbs)?, tokens(ebs)?);
        if cbs.checked_add(ebs).is_none() || cir > MAX_RATE || pir > MAX_RATE {
            return Err("the rates or bursts are too large".into());
        }
        let pir = if algorithm == Algorithm::Trtcm { pir } else { 0 };
        Ok(Profile { algorithm, cir, pir, cbs, ebs, per_unit, unit })
    }

    /// What a packet of `segs` segments and `bytes` bytes on the wire costs, in tokens.
    #[inline(always)]
    pub fn cost(&self, segs: u64, bytes: u64) -> u64 {
        let units = match self.unit {
            RateUnit::Bps => bytes,
            RateUnit::Pps => segs,
        };
        units.saturating_mul(self.per_unit)
    }
}

/// `dt * rate`, or `room` when that is more.
#[inline(always)]
fn credit(dt: u64, rate: u64, room: u64) -> u64 {
    let c = u128::from(dt) * u128::from(rate);
    if c < u128::from(room) {
        c as u64
    } else {
        room
    }
}

/// One meter's buckets: token counts and the time they were last filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meter {
    /// The committed bucket.
    c: u64,
    /// The excess (srTCM) or peak (trTCM) bucket.
    e: u64,
    /// TSC of the last fill.
    last: u64,
}

impl Meter {
    /// A meter with both buckets full at `now`.
    pub fn full(p: &Profile, now: u64) -> Meter {
        Meter { c: p.cbs, e: p.ebs, last: now }
    }

    /// The token counts: (committed, excess or peak).
    pub fn tokens(&self) -> (u64, u64) {
        (self.c, self.e)
    }

    /// Fill the buckets for the time since the last fill.
    #[inline(always)]
    fn fill(&mut self, p: &Profile, now: u64) {
        let dt = now.saturating_sub(self.last);
        if dt == 0 {
            return;
        }
        self.last = now;
        // The profile keeps c <= cbs, e <= ebs and cbs + ebs in range.
        match p.algorithm {
            Algorithm::Srtcm => {
                let (room_c, room_e) = (p.cbs - self.c, p.ebs - self.e);
                let add = credit(dt, p.cir, room_c + room_e);
                let to_c = add.min(room_c);
                self.c += to_c;
                self.e += add - to_c;
            }
            Algorithm::Trtcm => {
                self.c += credit(dt, p.cir, p.cbs - self.c);
                self.e += credit(dt, p.pir, p.ebs - self.e);
            }
        }
    }

    /// Mark a packet costing `cost` tokens that arrived `pre` (green when colour-blind)
    /// at `now`, taking its tokens.
    #[inline(always)]
    pub fn mark(&mut self, p: &Profile, now: u64, cost: u64, pre: Color) -> Color {
        self.fill(p, now);
        match p.algorithm {
            Algorithm::Srtcm => {
                if pre == Color::Green && self.c >= cost {
                    self.c -= cost;
                    Color::Green
                } else if pre != Color::Red && self.e >= cost {
                    self.e -= cost;
                    Color::Yellow
                } else {
                    Color::Red
                }
            }
            Algorithm::Trtcm => {
                if pre == Color::Red || self.e < cost {
                    Color::Red
                } else if pre == Color::Yellow || self.c < cost {
                    self.e -= cost;
                    Color::Yellow
                } else {
                    self.e -= cost;
                    self.c -= cost;
                    Color::Green
                }
            }
        }
    }
}

/// A packet's segments on the wire and their bytes: one and its length, or for a TSO
/// frame or an aggregate, its segments and its bytes plus the headers each further
/// segment repeats.
#[inline(always)]
pub fn wire_cost(h: &RawMbuf) -> (u64, u64) {
    let len = u64::from(h.pkt_len);
    let f = h.ol_flags;
    if f & (abi::TX_TCP_SEG | abi::RX_AGGREGATED) == 0 {
        return (1, len);
    }
    let hdr = u64::from(h.l2_len) + u64::from(h.l3_len) + u64::from(h.l4_len);
    let segs = if f & abi::TX_TCP_SEG != 0 && h.tso_segsz > 0 {
        len.saturating_sub(hdr).div_ceil(u64::from(h.tso_segsz)).max(1)
    } else if f & abi::RX_AGGREGATED != 0 {
        u64::from(h.aggr_segs).max(1)
    } else {
        1
    };
    (segs, len + (segs - 1) * hdr)
}

/// The IP header of a frame: IPv4 (true) or IPv6, and its offset, when the first
/// segment holds it whole (20 or 40 bytes).
#[inline]
fn ip_header(frame: &[u8]) -> Option<(bool, usize)> {
    let (t, off) = l3_offset(frame).ok()?;
    let ip = frame.get(off..)?;
    match t {
        EtherType::IPV4 if ip.len() >= 20 && ip[0] >> 4 == 4 => Some((true, off)),
        EtherType::IPV6 if ip.len() >= 40 && ip[0] >> 4 == 6 => Some((false, off)),
        _ => None,
    }
}

/// The DSCP of the IP header at `frame[off..]` ([`ip_header`] checked it).
#[inline]
fn dscp_of(frame: &[u8], v4: bool, off: usize) -> u8 {
    if v4 {
        frame[off + 1] >> 2
    } else {
        ((frame[off] << 4) | (frame[off + 1] >> 4)) >> 2
    }
}

/// The keyed hash of the flow of the IP header at `frame[off..]` ([`ip_header`]
/// checked it): its addresses, protocol and, for TCP, UDP and SCTP, its ports (none
/// for a fragment of an IPv4 datagram, so that all its fragments share a meter), as
/// whole words (two multiplies for IPv4, five for IPv6).
#[inline]
fn flow_of(frame: &[u8], v4: bool, off: usize, key: &KeyedState) -> u64 {
    let ip = &frame[off..];
    let (proto, l4, addrs) = if v4 {
        let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
        (ip[9], if fragment { None } else { Some(usize::from(ip[0] & 0x0f) * 4) }, &ip[12..20])
    } else {
        (ip[6], Some(40), &ip[8..40])
    };
    let ports = match (proto, l4.and_then(|at| ip.get(at..at + 4))) {
        (6 | 17 | 132, Some(p)) => u32::from_be_bytes([p[0], p[1], p[2], p[3]]),
        _ => 0,
    };
    let mut h = key.build_hasher();
    for w in addrs.chunks_exact(8) {
        h.write_u64(u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]));
    }
    h.write_u64(u64::from(ports) << 8 | u64::from(proto));
    h.finish()
}

/// Set the DSCP of the IP header at `frame[off..]` to `dscp`, keeping the ECN bits
/// (and for IPv4 the header checksum right).
fn set_dscp(frame: &mut [u8], v4: bool, off: usize, dscp: u8) {
    if v4 {
        let old = u16::from_be_bytes([frame[off], frame[off + 1]]);
        frame[off + 1] = (dscp << 2) | (frame[off + 1] & 0x03);
        let new = u16::from_be_bytes([frame[off], frame[off + 1]]);
        let sum = u16::from_be_bytes([frame[off + 10], frame[off + 11]]);
        frame[off + 10..off + 12].copy_from_slice(&checksum::update16(sum, old, new).to_be_bytes());
    } else {
        // Version (4 bits), traffic class (DSCP 6, ECN 2), flow label: the DSCP's top
        // four bits in the first byte's low nibble, its low two at the second's top.
        frame[off] = (frame[off] & 0xf0) | (dscp >> 2);
        frame[off + 1] = ((dscp & 0x03) << 6) | (frame[off + 1] & 0x3f);
    }
}

/// A set of DSCP values as a bitmap, from `"10,12,14-18"`.
pub fn parse_dscps(s: &str) -> Result<u64, String> {
    let mut set = 0u64;
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |t: &str| {
            t.trim().parse::<u8>().ok().filter(|&d| d < 64).ok_or_else(|| format!("`{t}` is not a DSCP value (0..=63)"))
        };
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if lo > hi {
            return Err(format!("`{part}`: the range runs backwards"));
        }
        for d in lo..=hi {
            set |= 1 << d;
        }
    }
    Ok(set)
}

/// The node's settings, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicerConfig {
    /// srTCM or trTCM.
    pub algorithm: Algorithm,
    /// What rates and bursts count.
    pub unit: RateUnit,
    /// Committed rate, units per second.
    pub cir: u64,
    /// Committed burst.
    pub cbs: u64,
    /// Peak rate (trTCM; 0 for srTCM).
    pub pir: u64,
    /// Excess burst (srTCM) or peak burst (trTCM).
    pub ebs: u64,
    /// Pre-colours by DSCP when colour-aware: (yellow set, red set).
    pub aware: Option<(u64, u64)>,
    /// What one meter covers.
    pub per: Per,
    /// Meters for `per: flow`.
    pub flows: u32,
    /// Action per colour (green, yellow, red).
    pub actions: [ColorAction; 3],
    /// DSCP a remark writes, per colour.
    pub dscp: [u8; 3],
}

impl PolicerConfig {
    /// The settings from the validated parameters; refused (naming the parameter)
    /// when they do not fit together.
    pub fn from_params(p: Values<'_>) -> Result<Self, NodeError> {
        let refuse = |param, reason: String| Err(NodeError::Param { param, reason });
        let algorithm: Algorithm = p.choice("algorithm")?;
        let raw = p.raw();
        let (cir, cbs) = (p.uint("cir")?, p.uint("cbs")?);
        let (pir, pbs, ebs) = (raw.uint("pir"), raw.uint("pbs"), raw.uint("ebs"));
        let (pir, ebs) = match algorithm {
            Algorithm::Srtcm => {
                if let Some(name) = [("pir", pir), ("pbs", pbs)].iter().find(|(_, v)| v.is_some()).map(|(n, _)| *n) {
                    return refuse(
                        name,
                        "is for `algorithm: trtcm`; srtcm has a committed rate and two bursts (cbs, ebs)".into(),
                    );
                }
                (0, ebs.unwrap_or(0))
            }
            Algorithm::Trtcm => {
                if ebs.is_some() {
                    return refuse(
                        "ebs",
                        "is for `algorithm: srtcm`; trtcm's second bucket is the peak one (pir, pbs)".into(),
                    );
                }
                let Some(pir) = pir else {
                    return refuse("pir", "`algorithm: trtcm` needs its peak rate, at least cir".into());
                };
                let Some(pbs) = pbs else {
                    return refuse("pbs", "`algorithm: trtcm` needs its peak burst size".into());
                };
                if pir < cir {
                    return refuse("pir", format!("{pir} is below cir ({cir}): RFC 2698 needs PIR >= CIR"));
                }
                (pir, pbs)
            }
        };
        let color_aware = p.bool("color_aware")?;
        let mut sets = [0u64; 2];
        for (set, name) in sets.iter_mut().zip(["yellow_in", "red_in"]) {
            if let Some(s) = raw.str(name) {
                if !color_aware {
                    return refuse(name, "gives colours on arrival: it needs `color_aware: true`".into());
                }
                *set = parse_dscps(s).map_err(|reason| NodeError::Param { param: name, reason })?;
            }
        }
        if sets[0] & sets[1] != 0 {
            let d = (sets[0] & sets[1]).trailing_zeros();
            return refuse("red_in", format!("DSCP {d} is also in yellow_in"));
        }
        let actions: [ColorAction; 3] = [p.choice("green")?, p.choice("yellow")?, p.choice("red")?];
        let mut dscp = [0u8; 3];
        for ((d, action), name) in dscp.iter_mut().zip(actions).zip(["green_dscp", "yellow_dscp", "red_dscp"]) {
            match (action, raw.uint(name)) {
                (ColorAction::Remark, Some(_)) => *d = p.int(name)?,
                (ColorAction::Remark, None) => {
                    return refuse(name, "its colour's action is remark: give the DSCP (0..=63) to write".into())
                }
                (_, Some(_)) => {
                    return refuse(name, "is the DSCP a remark writes: that colour's action is not remark".into())
                }
                (_, None) => {}
            }
        }
        let per: Per = p.choice("per")?;
        let flows = p.int("flows")?;
        let cfg = PolicerConfig {
            algorithm,
            unit: p.choice("rate_unit")?,
            cir,
            cbs,
            pir,
            ebs,
            aware: color_aware.then_some((sets[0], sets[1])),
            per,
            flows,
            actions,
            dscp,
        };
        cfg.profile(MAX_HZ).map_err(|reason| NodeError::Param { param: "cbs", reason })?;
        Ok(cfg)
    }

    /// The meter profile at `hz` TSC ticks per second.
    pub fn profile(&self, hz: u64) -> Result<Profile, String> {
        Profile::new(self.algorithm, self.unit, self.cir, self.cbs, self.pir, self.ebs, hz)
    }
}

/// The counts of one burst, by counter.
type Counts = [u64; PolicerCounter::COUNT];

/// The node.
pub struct Policer {
    profile: Profile,
    meters: Box<[Meter]>,
    per: Per,
    key: KeyedState,
    /// Colour on arrival per DSCP (colour-aware), else `None`.
    aware: Option<Box<[Color; 64]>>,
    actions: [ColorAction; 3],
    dscp: [u8; 3],
    /// The IP header is looked at (colour-aware, per DSCP or a remark).
    needs_ip: bool,
    pool: Mempool,
    /// Packets to remark in a copy of their own (shared).
    copy: [bool; MAX_BURST],
    /// The packets of a burst being copied (kept for its capacity).
    work: Vec<Mbuf>,
}

impl Policer {
    /// A node metering as `cfg` says at `hz` TSC ticks per second (its buckets full
    /// at time 0), flows hashed with `key`, copies from `pool`.
    pub fn new(cfg: &PolicerConfig, hz: u64, key: [u8; 16], pool: Mempool) -> Result<Self, String> {
        let profile = cfg.profile(hz)?;
        let n = match cfg.per {
            Per::Node => 1,
            Per::Flow => cfg.flows.max(1) as usize,
            Per::Dscp => 64,
        };
        let aware = cfg.aware.map(|(yellow, red)| {
            let mut t = Box::new([Color::Green; 64]);
            for (d, c) in t.iter_mut().enumerate() {
                if yellow >> d & 1 != 0 {
                    *c = Color::Yellow;
                } else if red >> d & 1 != 0 {
                    *c = Color::Red;
                }
            }
            t
        });
        let needs_ip = aware.is_some() || cfg.per != Per::Node || cfg.actions.contains(&ColorAction::Remark);
        Ok(Policer {
            profile,
            meters: vec![Meter::full(&profile, 0); n].into_boxed_slice(),
            per: cfg.per,
            key: KeyedState::new(key),
            aware,
            actions: cfg.actions,
            // A DSCP is six bits, whoever built the settings.
            dscp: cfg.dscp.map(|d| d & 0x3f),
            needs_ip,
            pool,
            copy: [false; MAX_BURST],
            work: Vec::new(),
        })
    }

    /// The meters (one per flow bucket or DSCP value, or the one of the node).
    pub fn meters(&self) -> &[Meter] {
        &self.meters
    }

    /// Packets marked for a remark in [`Policer::process`] whose data is shared: each
    /// is replaced by a remarked copy (or dropped when the pool has none).
    fn remark_copies(&mut self, pkts: &mut Burst, next: &mut [u16; MAX_BURST], n: &mut Counts) {
        let mut work = std::mem::take(&mut self.work);
        pkts.take_into(&mut work);
        for (i, m) in work.drain(..).enumerate() {
            let m = if std::mem::take(&mut self.copy[i]) {
                match m.deep_copy(&self.pool) {
                    Ok(mut c) => {
                        n[usize::from(PolicerCounter::Copied)] += 1;
                        let want = self.dscp[usize::from(next[i] >> 8)];
                        next[i] = OUT;
                        match c.data_mut().ok().and_then(|d| ip_header(d).map(|(v4, off)| (d, v4, off))) {
                            Some((d, v4, off)) => {
                                set_dscp(d, v4, off, want);
                                n[usize::from(PolicerCounter::Remarked)] += 1;
                            }
                            None => n[usize::from(PolicerCounter::NotIp)] += 1,
                        }
                        c
                    }
                    Err(_) => {
                        n[usize::from(PolicerCounter::NoMbuf)] += 1;
                        next[i] = DROP;
                        m
                    }
                }
            } else {
                m
            };
            // The burst held every one of these packets: there is room for each again.
            let _ = pkts.push(m);
        }
        self.work = work;
    }
}

/// Counter of packets, and of bytes, marked each colour.
const COLOR_COUNTERS: [(PolicerCounter, PolicerCounter); 3] = [
    (PolicerCounter::Green, PolicerCounter::GreenBytes),
    (PolicerCounter::Yellow, PolicerCounter::YellowBytes),
    (PolicerCounter::Red, PolicerCounter::RedBytes),
];

/// What a burst's packets were marked: per colour, packets and bytes.
#[derive(Default)]
struct Marked {
    packets: [u64; 3],
    bytes: [u64; 3],
}

impl Marked {
    #[inline(always)]
    fn add(&mut self, color: Color, bytes: u64) {
        self.packets[color as usize] += 1;
        self.bytes[color as usize] += bytes;
    }
}

impl Policer {
    /// One meter, no header read (colour-blind, no remark): the meter stays in
    /// registers for the burst (through memory, each packet's tokens would wait for
    /// the last one's store). Whether every packet goes on.
    fn plain(&mut self, now: u64, pkts: &Burst, next: &mut [u16; MAX_BURST], m: &mut Marked, n: &mut Counts) -> bool {
        let (p, mut meter) = (self.profile, self.meters[0]);
        let mut above = 0;
        let mut all_out = true;
        for (i, nx) in next.iter_mut().enumerate().take(pkts.len()) {
            let (segs, bytes) = wire_cost(pkts.header(i));
            let cost = p.cost(segs, bytes);
            above += u64::from(cost > p.cbs);
            let color = meter.mark(&p, now, cost, Color::Green);
            m.add(color, bytes);
            let drop = self.actions[color as usize] == ColorAction::Drop;
            *nx = if drop { DROP } else { OUT };
            all_out &= !drop;
        }
        self.meters[0] = meter;
        n[usize::from(PolicerCounter::AboveCbs)] += above;
        n[usize::from(PolicerCounter::Dropped)] +=
            (0..3).filter(|&c| self.actions[c] == ColorAction::Drop).map(|c| m.packets[c]).sum::<u64>();
        all_out
    }

    /// Any settings: the IP header read for a pre-colour, a DSCP meter or a remark;
    /// the meter of the packet's flow or DSCP. Whether every packet goes on (packets
    /// to remark in a copy are marked in `self.copy`, their colour in `next`'s high
    /// byte, for [`Policer::remark_copies`]), and whether there are such packets.
    fn general(
        &mut self,
        now: u64,
        pkts: &mut Burst,
        next: &mut [u16; MAX_BURST],
        m: &mut Marked,
        n: &mut Counts,
    ) -> (bool, bool) {
        let (mut all_out, mut copies) = (true, false);
        let nmeters = self.meters.len() as u64;
        for (i, nx) in next.iter_mut().enumerate().take(pkts.len()) {
            let (segs, bytes) = wire_cost(pkts.header(i));
            let cost = self.profile.cost(segs, bytes);
            let ip = if self.needs_ip { ip_header(pkts.data(i)) } else { None };
            let dscp = ip.map(|(v4, off)| dscp_of(pkts.data(i), v4, off));
            let pre = match (&self.aware, dscp) {
                (Some(t), Some(d)) => t[usize::from(d)],
                _ => Color::Green,
            };
            let at = match self.per {
                Per::Node => 0,
                Per::Dscp => usize::from(dscp.unwrap_or(0)),
                Per::Flow => {
                    let d = pkts.data(i);
                    let h = match ip {
                        Some((v4, off)) => flow_of(d, v4, off, &self.key),
                        None => mac_hash(d, false, &self.key),
                    };
                    ((u128::from(h) * u128::from(nmeters)) >> 64) as usize
                }
            };
            if cost > self.profile.cbs {
                n[usize::from(PolicerCounter::AboveCbs)] += 1;
            }
            *nx = OUT;
            // `at` is below the meters' count by construction.
            let Some(meter) = self.meters.get_mut(at) else { continue };
            let color = meter.mark(&self.profile, now, cost, pre);
            m.add(color, bytes);
            match self.actions[color as usize] {
                ColorAction::Pass => {}
                ColorAction::Drop => {
                    *nx = DROP;
                    all_out = false;
                    n[usize::from(PolicerCounter::Dropped)] += 1;
                }
                ColorAction::Remark => {
                    let want = self.dscp[color as usize];
                    match (ip, pkts.data_mut(i)) {
                        (None, _) => n[usize::from(PolicerCounter::NotIp)] += 1,
                        (Some((v4, off)), Some(d)) => {
                            set_dscp(d, v4, off, want);
                            n[usize::from(PolicerCounter::Remarked)] += 1;
                        }
                        (Some(_), None) if dscp == Some(want) => n[usize::from(PolicerCounter::Remarked)] += 1,
                        (Some(_), None) => {
                            // Shared: remarked in a copy; the colour rides in the edge's
                            // high byte until then.
                            self.copy[i] = true;
                            *nx = (color as u16) << 8;
                            copies = true;
                        }
                    }
                }
            }
        }
        (all_out, copies)
    }
}

impl Node for Policer {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, next: &mut [u16; MAX_BURST]) -> Dispatch {
        let now = cx.now_tsc;
        let mut n: Counts = [0; PolicerCounter::COUNT];
        let mut m = Marked::default();
        let (mut all_out, copies) = if self.per == Per::Node && !self.needs_ip {
            (self.plain(now, pkts, next, &mut m, &mut n), false)
        } else {
            self.general(now, pkts, next, &mut m, &mut n)
        };
        for (c, (k, b)) in COLOR_COUNTERS.iter().zip(m.packets.into_iter().zip(m.bytes)) {
            n[usize::from(c.0)] += k;
            n[usize::from(c.1)] += b;
        }
        if copies {
            self.remark_copies(pkts, next, &mut n);
            all_out = all_out && n[usize::from(PolicerCounter::NoMbuf)] == 0;
        }
        for c in PolicerCounter::ALL {
            let k = n[usize::from(c)];
            if k > 0 {
                cx.count(c, k);
            }
        }
        if all_out {
            Dispatch::All(OUT)
        } else {
            Dispatch::Each
        }
    }

    fn counters(&self) -> &'static [CounterSpec] {
        PolicerCounter::SPECS
    }
}

/// `policer`.
pub const KIND: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "policer",
        doc: "meter packets with RFC 2697 srTCM or RFC 2698 trTCM (colour-blind or colour-aware, per node, flow or DSCP) and pass, drop or remark each colour",
        params: &[
            ParamSpec::new("algorithm", ParamKind::Enum(Algorithm::NAMES)).default("srtcm").doc("srtcm: RFC 2697 (cir, cbs, ebs); trtcm: RFC 2698 (cir, cbs, pir, pbs)"),
            ParamSpec::new("rate_unit", ParamKind::Enum(RateUnit::NAMES)).default("bps").doc("bps: rates in bit/s, bursts in bytes (a frame's bytes without FCS); pps: rates in packets/s, bursts in packets"),
            ParamSpec::new("cir", ParamKind::Uint { min: 1, max: MAX_RATE }).required().doc("committed information rate, bit/s or packets/s"),
            ParamSpec::new("cbs", ParamKind::Uint { min: 1, max: MAX_BURST_SIZE }).required().doc("committed burst size, bytes (rate_unit: bps) or packets (pps); a packet costing more is never green"),
            ParamSpec::new("ebs", ParamKind::Uint { min: 0, max: MAX_BURST_SIZE }).doc("srtcm's excess burst size, bytes (rate_unit: bps) or packets (pps) (absent: 0, nothing yellow)"),
            ParamSpec::new("pir", ParamKind::Uint { min: 1, max: MAX_RATE }).doc("trtcm's peak information rate, at least cir (needed by trtcm)"),
            ParamSpec::new("pbs", ParamKind::Uint { min: 1, max: MAX_BURST_SIZE }).doc("trtcm's peak burst size, bytes (rate_unit: bps) or packets (pps) (needed by trtcm)"),
            ParamSpec::new("color_aware", ParamKind::Bool).default("false").doc("packets arrive coloured by their DSCP (yellow_in, red_in; others green) and are never marked better"),
            ParamSpec::new("yellow_in", ParamKind::Str).doc("colour-aware: DSCP values that arrive yellow, e.g. \"10,12-14\""),
            ParamSpec::new("red_in", ParamKind::Str).doc("colour-aware: DSCP values that arrive red"),
            ParamSpec::new("per", ParamKind::Enum(Per::NAMES)).default("node").doc("what one meter covers: the node, a flow (`flows` meters by keyed flow hash) or a DSCP value"),
            ParamSpec::new("flows", ParamKind::Uint { min: 1, max: 1 << 20 }).default("1024").doc("meters for per: flow (flows beyond share them by hash)"),
            ParamSpec::new("green", ParamKind::Enum(ColorAction::NAMES)).default("pass").doc("what happens to green packets: pass, drop, or remark (to green_dscp)"),
            ParamSpec::new("yellow", ParamKind::Enum(ColorAction::NAMES)).default("pass").doc("what happens to yellow packets: pass, drop, or remark (to yellow_dscp)"),
            ParamSpec::new("red", ParamKind::Enum(ColorAction::NAMES)).default("drop").doc("what happens to red packets: pass, drop, or remark (to red_dscp)"),
            ParamSpec::new("green_dscp", ParamKind::Uint { min: 0, max: 63 }).doc("DSCP green packets get (green: remark)"),
            ParamSpec::new("yellow_dscp", ParamKind::Uint { min: 0, max: 63 }).doc("DSCP yellow packets get (yellow: remark)"),
            ParamSpec::new("red_dscp", ParamKind::Uint { min: 0, max: 63 }).doc("DSCP red packets get (red: remark)"),
            MEMPOOL,
        ],
        nexts: Nexts::Fixed(&["out"]),
        // What the constructor refuses, `check` refuses too, at the parameter.
        check: Some(|p| crate::kind::refused_at(p, PolicerConfig::from_params(Values(p)))),
        ..NodeSpec::DEFAULT
    },
    build: |b, env| {
        let p = b.params();
        let cfg = PolicerConfig::from_params(p)?;
        let mut key = [0u8; 16];
        random_secret(&mut key)?;
        let pool = env.mempool(p.raw().mempool("mempool"), None)?;
        let node = Policer::new(&cfg, env.tsc_hz(), key, pool).map_err(NodeError::Refused)?;
        Ok(Box::new(node))
    },
};

#[cfg(test)]
mod tests;
