//! `vlan`: 802.1Q / 802.1ad tag handling on a path (VPP's VLAN tag rewrite,
//! DPDK's `rte_vlan_insert` and strip done on the wire bytes).
//!
//! `action` says what happens to each frame's outermost tag:
//!
//! * `push` inserts a tag (TPID `tpid`, VLAN id `vid`, priority `pcp`, DEI clear)
//!   after the MAC addresses: it is always the new outermost tag, so pushing an
//!   802.1Q tag and then an 802.1ad one (`tpid: 0x88a8`) makes a QinQ frame.
//! * `pop` removes the outermost 802.1Q or 802.1ad tag.
//! * `rewrite` sets the outermost tag's VLAN id (and its priority when `pcp` is
//!   given) in place; the TPID, the DEI bit and the inner EtherType stay.
//!
//! `pop` and `rewrite` pass frames without a tag on unchanged (or drop them,
//! `untagged: drop`), counted `untagged`; with `match_vid` they touch only tags
//! of that VLAN id and pass the others on unchanged, counted `other_vid`.
//!
//! A tag the port stripped (`RX_VLAN_STRIPPED`, the tag in `vlan_tci`) is the
//! frame's outermost tag: `pop` clears the flag, `rewrite` changes `vlan_tci`, and
//! `push` first puts it back into the frame (TPID 0x8100: the mbuf does not keep
//! the stripped TPID) and then inserts the new tag outside it, so a later `pop`
//! removes the pushed tag and leaves the stripped one.
//!
//! Frames are changed in place when the packet is writable. A shared packet
//! (another reference is held, e.g. after `mirror` in share mode, or an indirect
//! one), or one without the headroom a push needs, is first replaced by a copy of
//! its own from `mempool` (`Mbuf::deep_copy`, which keeps the metadata), counted
//! `copied`; the other holders keep the original untouched. Without a buffer the
//! frame is dropped (`no_mbuf`).
//!
//! The Ethernet header must lie in the first segment: a frame whose first segment
//! is shorter than 14 bytes, or than 18 when its EtherType announces a tag, is
//! dropped and counted `malformed`.
//!
//! Offload metadata follows the bytes: TX checksum and TSO offloads find the L3
//! header `l2_len` bytes into the frame, so a push adds the bytes it inserts (4, or
//! 8 with a stripped tag put back) to `l2_len` when it is set (non-zero), and a pop
//! of a tag from the frame's bytes takes 4 from it when it is at least 18 (an
//! Ethernet header and a tag). Popping a stripped tag changes no byte, so no
//! length. A push that would take `l2_len` past 255 is refused as `malformed`.

use crate::kind::{NodeKind, Values, MEMPOOL};
use crate::NodeError;
use ironpath_config::{Choice, Nexts, NodeSpec, ParamKind, ParamSpec};
use ironpath_eal::abi::RX_VLAN_STRIPPED;
use ironpath_eal::{Burst, Mbuf, Mempool, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx, DROP};
use ironpath_wire::ethernet::{self, EtherType, EthernetFrame};
use ironpath_wire::vlan::{self, VlanHeader};

ironpath_config::choice! {
    /// `vlan`'s `action`.
    pub enum VlanAction {
        /// Insert an outermost tag.
        Push = "push",
        /// Remove the outermost tag.
        Pop = "pop",
        /// Change the outermost tag's VLAN id (and priority).
        Rewrite = "rewrite",
    }
}

ironpath_config::choice! {
    /// What `pop` and `rewrite` do with a frame that has no tag.
    pub enum Untagged {
        /// Send it on unchanged.
        Pass = "pass",
        /// Drop it.
        Drop = "drop",
    }
}

ironpath_graph::counters! {
    /// What `vlan` counts.
    pub enum VlanCounter {
        Pushed("pushed", "tags inserted"),
        Popped("popped", "tags removed (from the frame or a stripped one)"),
        Rewritten("rewritten", "tags whose VLAN id (and priority) were set"),
        Untagged("untagged", "frames pop or rewrite found without a tag (passed or dropped per `untagged`)"),
        OtherVid("other_vid", "tagged frames passed unchanged: their VLAN id is not `match_vid`"),
        Copied("copied", "shared packets, or packets without headroom for a push, replaced by a copy of their own"),
        NoMbuf("no_mbuf", "packets dropped: no buffer (with headroom for the tag) in `mempool` for their copy"),
        Malformed("malformed", "frames dropped: the first segment shorter than an Ethernet header, or than the tag it announces"),
    }
}

/// The node's one next edge.
pub const OUT: u16 = 0;

/// The TPIDs `tpid` accepts, in words.
const TPIDS: &str = "0x8100 (802.1Q) or 0x88a8 (802.1ad, the outer tag of QinQ)";

/// The two MAC addresses.
const MACS: usize = 12;
/// An Ethernet header: the addresses and the EtherType.
const ETH_LEN: usize = ethernet::HEADER_LEN;
/// An Ethernet header with one tag after it.
const TAGGED_LEN: usize = ETH_LEN + vlan::HEADER_LEN;
/// The VLAN id bits of a TCI.
const VID_MASK: u16 = 0x0fff;
/// The TPID a stripped tag is put back with.
const STRIPPED_TPID: u16 = 0x8100;

/// What the node does to a frame's outermost tag, as its parameters say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Insert a tag with this TPID and TCI.
    Push {
        /// `0x8100` or `0x88a8`.
        tpid: u16,
        /// Priority, DEI (clear) and VLAN id.
        tci: u16,
    },
    /// Remove the outermost tag.
    Pop,
    /// Set the outermost tag's VLAN id, and its priority when given.
    Rewrite {
        /// The new VLAN id.
        vid: u16,
        /// The new priority; `None` keeps the tag's.
        pcp: Option<u8>,
    },
}

/// The node's settings, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VlanConfig {
    /// What happens to the outermost tag.
    pub action: Action,
    /// Pop and rewrite only tags of this VLAN id.
    pub match_vid: Option<u16>,
    /// What pop and rewrite do with untagged frames.
    pub untagged: Untagged,
}

impl VlanConfig {
    /// The settings from the validated parameters; refused (naming the parameter)
    /// when they do not fit the action.
    pub fn from_params(p: Values<'_>) -> Result<Self, NodeError> {
        let action: VlanAction = p.choice("action")?;
        let vid = opt_int::<u16>(p, "vid")?;
        let pcp = opt_int::<u8>(p, "pcp")?;
        let match_vid = opt_int::<u16>(p, "match_vid")?;
        let refuse = |param, reason: &str| Err(NodeError::Param { param, reason: reason.to_owned() });
        let action = match action {
            VlanAction::Push => {
                let Some(vid) = vid else {
                    return refuse("vid", "`action: push` needs the VLAN id (0..=4095) of the tag it inserts");
                };
                if match_vid.is_some() {
                    return refuse("match_vid", "applies to `action: pop` and `action: rewrite` only");
                }
                let tpid = p.int::<u16>("tpid")?;
                if tpid != EtherType::VLAN.0 && tpid != EtherType::QINQ.0 {
                    return refuse("tpid", &format!("{tpid:#06x} is not a VLAN TPID; accepted: {TPIDS}"));
                }
                Action::Push { tpid, tci: tci_with(0, vid, pcp) }
            }
            VlanAction::Pop => {
                if vid.is_some() || pcp.is_some() {
                    let param = if vid.is_some() { "vid" } else { "pcp" };
                    return refuse(
                        param,
                        "is for push and rewrite: pop removes the outer tag whatever it holds (to pop one VLAN only, give `match_vid`)",
                    );
                }
                Action::Pop
            }
            VlanAction::Rewrite => {
                let Some(vid) = vid else {
                    return refuse("vid", "`action: rewrite` needs the VLAN id (0..=4095) to write");
                };
                Action::Rewrite { vid, pcp }
            }
        };
        Ok(Self { action, match_vid, untagged: p.choice("untagged")? })
    }
}

/// An optional integer parameter that the spec bounds to fit `T`.
fn opt_int<T: TryFrom<u64>>(p: Values<'_>, name: &'static str) -> Result<Option<T>, NodeError> {
    p.raw().uint(name).map(|_| p.int(name)).transpose()
}

/// `tci` with VLAN id `vid` and, when given, priority `pcp` (the DEI bit kept).
fn tci_with(tci: u16, vid: u16, pcp: Option<u8>) -> u16 {
    let mut b = [0u8; vlan::HEADER_LEN];
    let mut tag = VlanHeader::new_unchecked(&mut b[..]);
    tag.set_tci(tci);
    tag.set_vid(vid);
    if let Some(pcp) = pcp {
        tag.set_pcp(pcp);
    }
    tag.tci()
}

/// A frame's outermost tag.
enum Outer {
    /// No tag: the EtherType is not a TPID and no tag was stripped.
    Absent,
    /// Stripped by the port: this TCI is in `vlan_tci`.
    Stripped(u16),
    /// In the frame's bytes, after the MAC addresses, with this TCI.
    InFrame(u16),
}

/// The counts of one burst, by counter.
type Counts = [u64; VlanCounter::COUNT];

/// The node.
pub struct Vlan {
    cfg: VlanConfig,
    pool: Mempool,
    /// The packets of the burst being worked on (kept for its capacity).
    work: Vec<Mbuf>,
}

impl Vlan {
    /// A node doing `cfg`, with copies from `pool`.
    pub fn new(cfg: VlanConfig, pool: Mempool) -> Self {
        Vlan { cfg, pool, work: Vec::with_capacity(MAX_BURST) }
    }

    /// Does the action to `m`; returns the packet to send on (the same one, or its
    /// copy) and whether it goes on (`false`: drop it).
    fn handle(&self, m: Mbuf, n: &mut Counts) -> (Mbuf, bool) {
        let Ok(eth) = EthernetFrame::new_checked(m.data()) else { return malformed(m, n) };
        let h = m.header();
        let outer = if h.ol_flags & RX_VLAN_STRIPPED != 0 {
            Outer::Stripped(h.vlan_tci)
        } else if eth.ethertype().is_vlan() {
            match VlanHeader::new_checked(eth.payload()) {
                Ok(tag) => Outer::InFrame(tag.tci()),
                Err(_) => return malformed(m, n),
            }
        } else {
            Outer::Absent
        };
        match self.cfg.action {
            Action::Push { tpid, tci } => self.push(m, outer, tpid, tci, n),
            Action::Pop | Action::Rewrite { .. } => {
                let tci = match outer {
                    Outer::Absent => {
                        n[usize::from(VlanCounter::Untagged)] += 1;
                        return (m, self.cfg.untagged == Untagged::Pass);
                    }
                    Outer::Stripped(t) | Outer::InFrame(t) => t,
                };
                if self.cfg.match_vid.is_some_and(|v| v != tci & VID_MASK) {
                    n[usize::from(VlanCounter::OtherVid)] += 1;
                    return (m, true);
                }
                match self.cfg.action {
                    Action::Rewrite { vid, pcp } => self.rewrite(m, outer, tci_with(tci, vid, pcp), n),
                    _ => self.pop(m, outer, n),
                }
            }
        }
    }

    fn push(&self, m: Mbuf, outer: Outer, tpid: u16, tci: u16, n: &mut Counts) -> (Mbuf, bool) {
        let stripped = match outer {
            Outer::Stripped(t) => Some(t),
            _ => None,
        };
        let add = if stripped.is_some() { 2 * vlan::HEADER_LEN } else { vlan::HEADER_LEN };
        let l2_len = m.header().l2_len;
        let Some(new_l2) = (if l2_len == 0 { Some(0) } else { l2_len.checked_add(add as u8) }) else {
            return malformed(m, n);
        };
        let mut m = match self.own(m, |m| m.is_writable() && m.headroom() >= add, n) {
            Ok(m) => m,
            Err(m) => return (m, false),
        };
        if m.prepend(add).is_err() {
            // A copy from a pool whose buffers have less headroom than the tags.
            n[usize::from(VlanCounter::NoMbuf)] += 1;
            return (m, false);
        }
        // Writable: `own` made sure of it.
        let Ok(d) = m.data_mut() else { return (m, false) };
        d.copy_within(add..add + MACS, 0);
        put_tag(d, MACS, tpid, tci);
        if let Some(inner) = stripped {
            put_tag(d, MACS + vlan::HEADER_LEN, STRIPPED_TPID, inner);
        }
        let h = m.header_mut();
        if stripped.is_some() {
            h.ol_flags &= !RX_VLAN_STRIPPED;
            h.vlan_tci = 0;
        }
        h.l2_len = new_l2;
        n[usize::from(VlanCounter::Pushed)] += 1;
        (m, true)
    }

    fn pop(&self, m: Mbuf, outer: Outer, n: &mut Counts) -> (Mbuf, bool) {
        let stripped = matches!(outer, Outer::Stripped(_));
        // A stripped tag is metadata only: the header must be ours alone; a tag in
        // the frame moves bytes: the data must be.
        let in_place: fn(&Mbuf) -> bool = if stripped { |m| m.refcnt() == 1 } else { Mbuf::is_writable };
        let mut m = match self.own(m, in_place, n) {
            Ok(m) => m,
            Err(m) => return (m, false),
        };
        if stripped {
            let h = m.header_mut();
            h.ol_flags &= !RX_VLAN_STRIPPED;
            h.vlan_tci = 0;
        } else {
            // Writable: `own` made sure of it.
            let Ok(d) = m.data_mut() else { return (m, false) };
            d.copy_within(0..MACS, vlan::HEADER_LEN);
            // The first segment holds the tag (`handle` checked): `adj` cannot fail.
            if m.adj(vlan::HEADER_LEN).is_err() {
                return malformed(m, n);
            }
            let h = m.header_mut();
            if usize::from(h.l2_len) >= TAGGED_LEN {
                h.l2_len -= vlan::HEADER_LEN as u8;
            }
        }
        n[usize::from(VlanCounter::Popped)] += 1;
        (m, true)
    }

    fn rewrite(&self, m: Mbuf, outer: Outer, tci: u16, n: &mut Counts) -> (Mbuf, bool) {
        let (m, on) = match outer {
            // Nothing changes: no copy either.
            Outer::Stripped(old) | Outer::InFrame(old) if old == tci => (m, true),
            Outer::Stripped(_) => match self.own(m, |m| m.refcnt() == 1, n) {
                Ok(mut m) => {
                    m.header_mut().vlan_tci = tci;
                    (m, true)
                }
                Err(m) => (m, false),
            },
            _ => match self.own(m, Mbuf::is_writable, n) {
                Ok(mut m) => {
                    let tag = m.data_mut().ok().and_then(|d| VlanHeader::new_checked(d.get_mut(ETH_LEN..)?).ok());
                    match tag {
                        Some(mut tag) => {
                            tag.set_tci(tci);
                            (m, true)
                        }
                        // `handle` checked the first segment holds the tag.
                        None => return malformed(m, n),
                    }
                }
                Err(m) => (m, false),
            },
        };
        if on {
            n[usize::from(VlanCounter::Rewritten)] += 1;
        }
        (m, on)
    }

    /// `m` itself when `in_place` says it may be changed so, else a copy of its own
    /// (counted); `Err(m)` when the pool has no buffer for the copy.
    fn own(&self, m: Mbuf, in_place: impl Fn(&Mbuf) -> bool, n: &mut Counts) -> Result<Mbuf, Mbuf> {
        if in_place(&m) {
            return Ok(m);
        }
        match m.deep_copy(&self.pool) {
            Ok(c) => {
                n[usize::from(VlanCounter::Copied)] += 1;
                Ok(c)
            }
            Err(_) => {
                n[usize::from(VlanCounter::NoMbuf)] += 1;
                Err(m)
            }
        }
    }
}

/// Write a tag (its TPID, then its TCI) at `d[at..at + 4]`; the callers' frames
/// hold an Ethernet header and the tags just made room for, so `at + 4` is in range.
fn put_tag(d: &mut [u8], at: usize, tpid: u16, tci: u16) {
    d[at..at + 2].copy_from_slice(&tpid.to_be_bytes());
    d[at + 2..at + 4].copy_from_slice(&tci.to_be_bytes());
}

/// Count `m` malformed and drop it.
fn malformed(m: Mbuf, n: &mut Counts) -> (Mbuf, bool) {
    n[usize::from(VlanCounter::Malformed)] += 1;
    (m, false)
}

impl Node for Vlan {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, next: &mut [u16; MAX_BURST]) -> Dispatch {
        let mut n: Counts = [0; VlanCounter::COUNT];
        let mut work = std::mem::take(&mut self.work);
        pkts.take_into(&mut work);
        let mut dropped = false;
        for (i, m) in work.drain(..).enumerate() {
            let (m, on) = self.handle(m, &mut n);
            next[i] = if on { OUT } else { DROP };
            dropped |= !on;
            // The burst held every one of these packets: there is room for each again.
            let _ = pkts.push(m);
        }
        self.work = work;
        for c in VlanCounter::ALL {
            let k = n[usize::from(c)];
            if k > 0 {
                cx.count(c, k);
            }
        }
        if dropped {
            Dispatch::Each
        } else {
            Dispatch::All(OUT)
        }
    }

    fn counters(&self) -> &'static [CounterSpec] {
        VlanCounter::SPECS
    }
}

/// `vlan`.
pub const KIND: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "vlan",
        doc: "push, pop or rewrite the outermost 802.1Q/802.1ad tag of each frame (a tag the port stripped counts as one)",
        params: &[
            ParamSpec::new("action", ParamKind::Enum(VlanAction::NAMES)).required().doc("push: insert an outermost tag; pop: remove the outermost tag; rewrite: set its VLAN id (and priority)"),
            ParamSpec::new("vid", ParamKind::Uint { min: 0, max: 4095 }).doc("VLAN id of the pushed tag, or the one rewrite writes (needed by push and rewrite; pop takes none)"),
            ParamSpec::new("pcp", ParamKind::Uint { min: 0, max: 7 }).doc("priority: of the pushed tag (absent: 0), or the one rewrite writes (absent: the tag's is kept)"),
            ParamSpec::new("tpid", ParamKind::Uint { min: 0, max: 0xffff }).default("0x8100").doc("TPID of the pushed tag: 0x8100 (802.1Q) or 0x88a8 (802.1ad, the outer tag of QinQ)"),
            ParamSpec::new("match_vid", ParamKind::Uint { min: 0, max: 4095 }).doc("pop and rewrite only tags of this VLAN id; others pass unchanged (absent: every tag)"),
            ParamSpec::new("untagged", ParamKind::Enum(Untagged::NAMES)).default("pass").doc("what pop and rewrite do with a frame without a tag: pass it on unchanged or drop it"),
            MEMPOOL,
        ],
        nexts: Nexts::Fixed(&["out"]),
        // What the constructor refuses, `check` refuses too, at the parameter.
        check: Some(|p| crate::kind::refused_at(p, VlanConfig::from_params(Values(p)))),
        ..NodeSpec::DEFAULT
    },
    build: |b, env| {
        let p = b.params();
        let cfg = VlanConfig::from_params(p)?;
        Ok(Box::new(Vlan::new(cfg, env.mempool(p.raw().mempool("mempool"), None)?)))
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{burst, call, counter, eth, outputs, pool, stats, PEER_MAC, US_MAC};
    use ironpath_eal::abi::{self, RX_VLAN_STRIPPED};
    use ironpath_eal::{MemPolicy, MempoolConfig};
    use ironpath_graph::NodeStats;
    use ironpath_util::testing::XorShift;

    /// An untagged IPv4 frame with `len` payload bytes, each different.
    fn frame(len: usize) -> Vec<u8> {
        eth(US_MAC, PEER_MAC, 0x0800, &(0..len).map(|i| i as u8).collect::<Vec<_>>())
    }

    /// `f` with a tag (`tpid`, `tci`) inserted after its MAC addresses.
    fn tagged(tpid: u16, tci: u16, f: &[u8]) -> Vec<u8> {
        [&f[..12], &tpid.to_be_bytes()[..], &tci.to_be_bytes()[..], &f[12..]].concat()
    }

    /// A packet sent: its next edge and bytes.
    type Sent = (u16, Vec<u8>);
    /// A packet's `ol_flags & RX_VLAN_STRIPPED`, `vlan_tci` and `l2_len`.
    type Meta = (u64, u16, u8);

    fn cfg(action: Action) -> VlanConfig {
        VlanConfig { action, match_vid: None, untagged: Untagged::Pass }
    }

    fn push(tpid: u16, vid: u16, pcp: u8) -> Action {
        Action::Push { tpid, tci: tci_with(0, vid, Some(pcp)) }
    }

    /// Run a node doing `cfg` (copies from `p`) once on `frames`: what it sends
    /// (edge and bytes) and its stats.
    fn run(p: &Mempool, cfg: VlanConfig, frames: &[Vec<u8>]) -> (Vec<Sent>, NodeStats) {
        let mut node = Vlan::new(cfg, p.clone());
        let st = stats(&node);
        let mut b = burst(p, frames);
        let c = call(&mut node, &st, &mut b, 0);
        (outputs(&c, &mut b), st)
    }

    /// Every counter of `st` by name, the zero ones left out.
    fn counts(st: &NodeStats) -> Vec<(&'static str, u64)> {
        VlanCounter::SPECS.iter().map(|c| (c.name, counter(st, c.name))).filter(|&(_, v)| v > 0).collect()
    }

    fn on(frames: &[Vec<u8>]) -> Vec<Sent> {
        frames.iter().map(|f| (OUT, f.clone())).collect()
    }

    #[test]
    fn push_then_pop_gives_back_the_original_bytes() {
        let p = pool(64);
        let frames = vec![eth(US_MAC, PEER_MAC, 0x86dd, &[]), frame(46), frame(1500)];
        let (out, st) = run(&p, cfg(push(0x8100, 100, 5)), &frames);
        let want: Vec<Vec<u8>> = frames.iter().map(|f| tagged(0x8100, 0xa064, f)).collect();
        assert_eq!(out, on(&want));
        assert_eq!(counts(&st), [("pushed", 3)], "in place: no copy");
        assert_eq!(ironpath_wire::ethernet::l3_offset(&out[1].1), Ok((EtherType::IPV4, 18)));

        let (out, st) = run(&p, cfg(Action::Pop), &want);
        assert_eq!(out, on(&frames));
        assert_eq!(counts(&st), [("popped", 3)]);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn qinq_push_makes_an_outer_s_tag_and_two_pops_undo_it() {
        let p = pool(16);
        let f = frame(50);
        let (out, _) = run(&p, cfg(push(0x8100, 10, 0)), std::slice::from_ref(&f));
        let (out, st) = run(&p, cfg(push(0x88a8, 20, 3)), &[out[0].1.clone()]);
        let qinq = tagged(0x88a8, 0x6014, &tagged(0x8100, 0x000a, &f));
        assert_eq!(out, on(std::slice::from_ref(&qinq)));
        assert_eq!(counter(&st, "pushed"), 1);
        assert_eq!(ironpath_wire::ethernet::l3_offset(&qinq), Ok((EtherType::IPV4, 22)));
        let (out, _) = run(&p, cfg(Action::Pop), &[qinq]);
        assert_eq!(out, on(&[tagged(0x8100, 0x000a, &f)]), "the outer (S) tag goes first");
        let (out, st) = run(&p, cfg(Action::Pop), &[out[0].1.clone()]);
        assert_eq!(out, on(&[f]));
        assert_eq!(counts(&st), [("popped", 1)]);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn shared_packets_are_copied_and_the_original_is_left_untouched() {
        let p = pool(16);
        let f = frame(50);
        let t = tagged(0x8100, 0x2064, &f);
        let cases = [
            (push(0x8100, 7, 0), f.clone(), tagged(0x8100, 0x0007, &f)),
            (Action::Pop, t.clone(), f.clone()),
            (Action::Rewrite { vid: 9, pcp: None }, t.clone(), tagged(0x8100, 0x2009, &f)),
        ];
        for (action, input, want) in cases {
            let mut node = Vlan::new(cfg(action), p.clone());
            let st = stats(&node);
            let m = Mbuf::from_slice(&p, &input).unwrap();
            let other = m.share(); // e.g. the `copy` branch of a `mirror`
            let mut b = Burst::new();
            assert!(b.push(m).is_ok());
            let c = call(&mut node, &st, &mut b, 0);
            assert_eq!(p.stats().in_use, 2, "{action:?}: the original and a copy of its own");
            assert_eq!(other.refcnt(), 1, "{action:?}: the node let its reference go");
            assert_eq!(other.to_vec(), input, "{action:?}: the other holder sees the frame as it was");
            assert_eq!(outputs(&c, &mut b), [(OUT, want)], "{action:?}");
            assert_eq!(counter(&st, "copied"), 1, "{action:?}");
            drop(other);
            assert_eq!(p.stats().in_use, 0);
        }
    }

    #[test]
    fn rewriting_a_shared_tag_to_what_it_holds_copies_nothing() {
        let p = pool(16);
        let t = tagged(0x8100, 0x2064, &frame(50));
        let mut node = Vlan::new(cfg(Action::Rewrite { vid: 100, pcp: Some(1) }), p.clone());
        let st = stats(&node);
        let m = Mbuf::from_slice(&p, &t).unwrap();
        let other = m.share();
        let mut b = Burst::new();
        assert!(b.push(m).is_ok());
        let c = call(&mut node, &st, &mut b, 0);
        assert_eq!(p.stats().in_use, 1, "still the one shared packet");
        assert_eq!(outputs(&c, &mut b), [(OUT, t)]);
        assert_eq!(counts(&st), [("rewritten", 1)]);
        drop(other);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn a_stripped_tag_of_a_shared_packet_is_changed_on_a_copy() {
        // The header (where a stripped tag lives) is shared too.
        let p = pool(16);
        let f = frame(50);
        for action in [Action::Pop, Action::Rewrite { vid: 9, pcp: None }] {
            let mut node = Vlan::new(cfg(action), p.clone());
            let st = stats(&node);
            let mut m = Mbuf::from_slice(&p, &f).unwrap();
            m.header_mut().ol_flags |= RX_VLAN_STRIPPED;
            m.header_mut().vlan_tci = 0x2064;
            let other = m.share();
            let mut b = Burst::new();
            assert!(b.push(m).is_ok());
            call(&mut node, &st, &mut b, 0);
            assert_eq!(counter(&st, "copied"), 1, "{action:?}");
            let h = other.header();
            assert_eq!((h.ol_flags & RX_VLAN_STRIPPED, h.vlan_tci), (RX_VLAN_STRIPPED, 0x2064), "{action:?}");
            let h = b.header(0);
            let want = match action {
                Action::Pop => (0, 0),
                _ => (RX_VLAN_STRIPPED, 0x2009),
            };
            assert_eq!((h.ol_flags & RX_VLAN_STRIPPED, h.vlan_tci), want, "{action:?}");
            b.free_all();
            drop(other);
            assert_eq!(p.stats().in_use, 0);
        }
    }

    #[test]
    fn push_without_headroom_copies_and_an_empty_pool_drops() {
        let mut c = MempoolConfig::new("vlan-no-headroom", 8).cache_size(0).policy(MemPolicy::NoHuge);
        c.headroom = 0;
        let bare = Mempool::create(&c).unwrap();
        let p = pool(8);
        let f = frame(50);
        let tag = tagged(0x8100, 0x0005, &f);

        // Received into buffers without headroom: pushed on a copy from the node's pool.
        let mut node = Vlan::new(cfg(push(0x8100, 5, 0)), p.clone());
        let st = stats(&node);
        let mut b = burst(&bare, std::slice::from_ref(&f));
        let call1 = call(&mut node, &st, &mut b, 0);
        assert_eq!((bare.stats().in_use, p.stats().in_use), (0, 1), "the original went back, the copy is sent");
        assert_eq!(outputs(&call1, &mut b), [(OUT, tag)]);
        assert_eq!(counts(&st), [("pushed", 1), ("copied", 1)]);

        // Copies without headroom either: dropped, counted.
        let mut node = Vlan::new(cfg(push(0x8100, 5, 0)), bare.clone());
        let st = stats(&node);
        let mut b = burst(&bare, std::slice::from_ref(&f));
        let c = call(&mut node, &st, &mut b, 0);
        assert_eq!(outputs(&c, &mut b)[0].0, DROP);
        assert_eq!(counts(&st), [("copied", 1), ("no_mbuf", 1)]);

        // An empty pool: the shared packet is dropped here, the other holder keeps it.
        let tiny = pool(1);
        let _held = Mbuf::alloc(&tiny).unwrap();
        let mut node = Vlan::new(cfg(push(0x8100, 5, 0)), tiny.clone());
        let st = stats(&node);
        let m = Mbuf::from_slice(&p, &f).unwrap();
        let other = m.share();
        let mut b = Burst::new();
        assert!(b.push(m).is_ok());
        let c = call(&mut node, &st, &mut b, 0);
        assert_eq!(outputs(&c, &mut b), [(DROP, f.clone())]);
        assert_eq!(counts(&st), [("no_mbuf", 1)]);
        assert_eq!((other.refcnt(), other.to_vec()), (1, f));
        drop(other);
        assert_eq!((p.stats().in_use, bare.stats().in_use), (0, 0));
    }

    #[test]
    fn rewrite_sets_the_vid_and_pcp_and_keeps_the_rest() {
        let p = pool(16);
        let f = frame(50);
        // PCP 1, DEI set, VID 100.
        let t = tagged(0x8100, 0x3064, &f);
        let (out, st) = run(&p, cfg(Action::Rewrite { vid: 200, pcp: Some(6) }), std::slice::from_ref(&t));
        assert_eq!(out, on(&[tagged(0x8100, 0xd0c8, &f)]), "PCP 6, DEI kept, VID 200");
        assert_eq!(counts(&st), [("rewritten", 1)]);
        let (out, _) = run(&p, cfg(Action::Rewrite { vid: 200, pcp: None }), std::slice::from_ref(&t));
        assert_eq!(out, on(&[tagged(0x8100, 0x30c8, &f)]), "the PCP kept");
        // The outer tag of a QinQ frame: its TPID and the inner tag stay.
        let qinq = tagged(0x88a8, 0x0014, &t);
        let (out, _) = run(&p, cfg(Action::Rewrite { vid: 21, pcp: Some(2) }), &[qinq]);
        assert_eq!(out, on(&[tagged(0x88a8, 0x4015, &t)]));
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn match_vid_touches_only_that_vlan() {
        let p = pool(16);
        let f = frame(50);
        let frames = [tagged(0x8100, 100, &f), tagged(0x8100, 0xe007, &f), f.clone()];
        let only_100 = |action| VlanConfig { action, match_vid: Some(100), untagged: Untagged::Pass };
        let (out, st) = run(&p, only_100(Action::Rewrite { vid: 300, pcp: None }), &frames);
        assert_eq!(out, on(&[tagged(0x8100, 300, &f), frames[1].clone(), f.clone()]));
        assert_eq!(counts(&st), [("rewritten", 1), ("untagged", 1), ("other_vid", 1)]);
        let (out, st) = run(&p, only_100(Action::Pop), &frames);
        assert_eq!(out, on(&[f.clone(), frames[1].clone(), f.clone()]));
        assert_eq!(counts(&st), [("popped", 1), ("untagged", 1), ("other_vid", 1)]);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn untagged_frames_pass_unchanged_or_are_dropped_as_asked() {
        let p = pool(16);
        let f = frame(50);
        let frames = [f.clone(), tagged(0x8100, 5, &f)];
        for action in [Action::Pop, Action::Rewrite { vid: 5, pcp: None }] {
            let (out, st) = run(&p, cfg(action), &frames);
            assert_eq!(out[0], (OUT, f.clone()), "{action:?}");
            assert_eq!(out[1].0, OUT);
            assert_eq!(counter(&st, "untagged"), 1, "{action:?}");
            let dropping = VlanConfig { untagged: Untagged::Drop, ..cfg(action) };
            let (out, st) = run(&p, dropping, &frames);
            assert_eq!((out[0].0, out[1].0), (DROP, OUT), "{action:?}");
            assert_eq!(counter(&st, "untagged"), 1, "{action:?}");
        }
        assert_eq!(p.stats().in_use, 0);
    }

    /// Run `cfg` on `f` received with its tag stripped (`tci`) and `l2_len` 14: what
    /// it sends, its `ol_flags` stripped bit, `vlan_tci`, `l2_len`, and the stats.
    fn run_stripped(p: &Mempool, cfg: VlanConfig, f: &[u8], tci: u16) -> (Sent, Meta, NodeStats) {
        let mut node = Vlan::new(cfg, p.clone());
        let st = stats(&node);
        let mut b = burst(p, &[f.to_vec()]);
        let h = b.header_mut(0);
        h.ol_flags |= RX_VLAN_STRIPPED | abi::TX_IPV4 | abi::TX_IP_CKSUM;
        h.vlan_tci = tci;
        h.l2_len = 14;
        let c = call(&mut node, &st, &mut b, 0);
        let h = b.header(0);
        assert_eq!(
            h.ol_flags & (abi::TX_IPV4 | abi::TX_IP_CKSUM),
            abi::TX_IPV4 | abi::TX_IP_CKSUM,
            "offload requests kept"
        );
        let meta = (h.ol_flags & RX_VLAN_STRIPPED, h.vlan_tci, h.l2_len);
        let mut out = outputs(&c, &mut b);
        (out.remove(0), meta, st)
    }

    #[test]
    fn a_stripped_tag_is_the_outer_tag() {
        let p = pool(16);
        let f = frame(50);
        let (out, meta, st) = run_stripped(&p, cfg(Action::Pop), &f, 0x2064);
        assert_eq!((out, meta), ((OUT, f.clone()), (0, 0, 14)), "pop: the flag cleared, no byte moved");
        assert_eq!(counts(&st), [("popped", 1)]);

        let (out, meta, st) = run_stripped(&p, cfg(Action::Rewrite { vid: 300, pcp: None }), &f, 0x2064);
        assert_eq!((out, meta), ((OUT, f.clone()), (RX_VLAN_STRIPPED, 0x2000 | 300, 14)), "rewrite: vlan_tci");
        assert_eq!(counts(&st), [("rewritten", 1)]);

        let other = VlanConfig { match_vid: Some(5), ..cfg(Action::Pop) };
        let (out, meta, st) = run_stripped(&p, other, &f, 0x2064);
        assert_eq!((out, meta), ((OUT, f.clone()), (RX_VLAN_STRIPPED, 0x2064, 14)));
        assert_eq!(counts(&st), [("other_vid", 1)]);

        // Push puts the stripped tag back under the new one.
        let (out, meta, st) = run_stripped(&p, cfg(push(0x88a8, 7, 0)), &f, 0x2064);
        let both = tagged(0x88a8, 0x0007, &tagged(0x8100, 0x2064, &f));
        assert_eq!((out, meta), ((OUT, both.clone()), (0, 0, 22)));
        assert_eq!(counts(&st), [("pushed", 1)]);
        let (out, _) = run(&p, cfg(Action::Pop), &[both]);
        assert_eq!(out, on(&[tagged(0x8100, 0x2064, &f)]));
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn l2_len_follows_the_bytes_when_it_is_set() {
        let p = pool(16);
        let f = frame(50);
        let t = tagged(0x8100, 5, &f);
        let qinq = tagged(0x88a8, 6, &t);
        let cases = [
            (push(0x8100, 5, 0), &f, 14, 18),
            (push(0x8100, 5, 0), &f, 0, 0),
            (Action::Pop, &t, 18, 14),
            (Action::Pop, &qinq, 22, 18),
            (Action::Pop, &t, 14, 14),
            (Action::Pop, &t, 0, 0),
            (Action::Rewrite { vid: 9, pcp: None }, &t, 18, 18),
        ];
        for (action, input, before, after) in cases {
            let mut node = Vlan::new(cfg(action), p.clone());
            let st = stats(&node);
            let mut b = burst(&p, std::slice::from_ref(input));
            let h = b.header_mut(0);
            h.l2_len = before;
            h.l3_len = 20;
            h.ol_flags = abi::TX_IPV4 | abi::TX_IP_CKSUM;
            call(&mut node, &st, &mut b, 0);
            let h = b.header(0);
            assert_eq!(
                (h.l2_len, h.l3_len, h.ol_flags),
                (after, 20, abi::TX_IPV4 | abi::TX_IP_CKSUM),
                "{action:?} {before}"
            );
            b.free_all();
        }
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn runts_and_truncated_tags_are_dropped_and_counted() {
        let p = pool(64);
        let t = tagged(0x8100, 5, &frame(50));
        let q = tagged(0x88a8, 5, &frame(50));
        let mut bad: Vec<Vec<u8>> = (0..14).map(|n| t[..n].to_vec()).collect();
        bad.extend((14..18).map(|n| t[..n].to_vec()));
        bad.extend((14..18).map(|n| q[..n].to_vec()));
        for action in [push(0x8100, 5, 0), Action::Pop, Action::Rewrite { vid: 1, pcp: Some(1) }] {
            let (out, st) = run(&p, cfg(action), &bad);
            assert!(out.iter().all(|(k, _)| *k == DROP), "{action:?}: {out:?}");
            assert_eq!(counts(&st), [("malformed", bad.len() as u64)], "{action:?}");
        }
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn the_ethernet_header_must_be_in_the_first_segment() {
        let p = pool(64);
        let f = frame(100);
        let t = tagged(0x8100, 5, &f);
        // (frame, where its first segment ends)
        let cases = [(&f, 10), (&t, 16), (&f, 14), (&t, 18)];
        for action in [push(0x8100, 9, 0), Action::Pop] {
            let mut node = Vlan::new(cfg(action), p.clone());
            let st = stats(&node);
            let mut b = Burst::new();
            for (frame, cut) in cases {
                let mut m = Mbuf::from_slice(&p, &frame[..cut]).unwrap();
                m.chain(Mbuf::from_slice(&p, &frame[cut..]).unwrap()).unwrap();
                assert!(b.push(m).is_ok());
            }
            let c = call(&mut node, &st, &mut b, 0);
            let whole: Vec<Vec<u8>> = (0..b.len()).map(|i| b.segments(i).flatten().copied().collect()).collect();
            let next: Vec<u16> = outputs(&c, &mut b).iter().map(|o| o.0).collect();
            assert_eq!(next, [DROP, DROP, OUT, OUT], "{action:?}");
            assert_eq!(counter(&st, "malformed"), 2, "{action:?}");
            let want = match action {
                Action::Pop => [f.clone(), f.clone()], // untagged passed, tagged popped
                _ => [tagged(0x8100, 9, &f), tagged(0x8100, 9, &t)],
            };
            assert_eq!(whole[2..], want, "{action:?}");
        }
        assert_eq!(p.stats().in_use, 0);
    }

    /// Frames of every length and random bytes (tags announced half of the time,
    /// stripped tags, offload lengths) through every action: no panic, each
    /// packet counted once under one outcome, sent on or dropped as counted, every
    /// mbuf back in its pool.
    #[test]
    fn arbitrary_frames_never_panic_and_each_is_counted_once() {
        let p = pool(512);
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        let mut rnd = move || rng.next_u64();
        let actions = [
            push(0x8100, 4095, 7),
            push(0x88a8, 0, 0),
            Action::Pop,
            Action::Rewrite { vid: 1, pcp: None },
            Action::Rewrite { vid: 2, pcp: Some(3) },
        ];
        for round in 0..40 {
            let action = actions[round % actions.len()];
            let cfg = VlanConfig {
                action,
                match_vid: (round % 3 == 0 && !matches!(action, Action::Push { .. })).then_some(1),
                untagged: if round % 2 == 0 { Untagged::Pass } else { Untagged::Drop },
            };
            let mut frames = Vec::new();
            for _ in 0..64 {
                let r = rnd();
                let mut f: Vec<u8> = (0..(r % 40) as usize).map(|_| rnd() as u8).collect();
                if r & 0x100 != 0 && f.len() >= 14 {
                    let tpid: u16 = if r & 0x200 != 0 { 0x8100 } else { 0x88a8 };
                    f[12..14].copy_from_slice(&tpid.to_be_bytes());
                }
                frames.push((f, r));
            }
            let mut node = Vlan::new(cfg, p.clone());
            let st = stats(&node);
            let mut b = Burst::new();
            for (f, r) in &frames {
                let mut m = Mbuf::from_slice(&p, f).unwrap();
                let h = m.header_mut();
                if r & 0x400 != 0 {
                    h.ol_flags |= RX_VLAN_STRIPPED;
                    h.vlan_tci = (r >> 16) as u16;
                }
                h.l2_len = (r >> 32) as u8;
                assert!(b.push(m).is_ok());
            }
            let c = call(&mut node, &st, &mut b, 0);
            let out = outputs(&c, &mut b);
            assert_eq!(out.len(), frames.len());
            let by = |name| counter(&st, name);
            let done = by("pushed") + by("popped") + by("rewritten") + by("other_vid");
            let refused = by("malformed") + by("no_mbuf");
            assert_eq!(done + by("untagged") + refused, frames.len() as u64, "round {round}: {:?}", counts(&st));
            let dropped = out.iter().filter(|o| o.0 == DROP).count() as u64;
            let untagged_dropped = if cfg.untagged == Untagged::Drop { by("untagged") } else { 0 };
            assert_eq!(dropped, refused + untagged_dropped, "round {round}: {:?}", counts(&st));
            assert!(out.iter().all(|o| o.0 == OUT || o.0 == DROP));
            assert_eq!(p.stats().in_use, 0);
        }
    }

    use crate::tests::PoolEnv;

    /// A `vlan` node built from YAML `params`, through validation (defaults filled
    /// in) and the kind's constructor.
    fn build(p: &Mempool, params: &str) -> Result<ironpath_graph::NodeDecl, NodeError> {
        let catalog = ironpath_config::Catalog { nodes: &[KIND.spec], drivers: None };
        let yaml = format!("lcores: [{{id: 0}}]\nnodes:\n  - {{name: v, type: vlan, lcore: 0, params: {params}}}\n");
        let pipe = ironpath_config::parse_str(&yaml, std::path::Path::new("v.yaml"), &catalog).expect("valid YAML");
        crate::make_from(&[&KIND], &pipe.nodes[0], &[], &mut PoolEnv(p.clone()))
    }

    #[test]
    fn settings_that_do_not_fit_the_action_are_refused_at_the_parameter() {
        for (params, wrong) in [
            ("{action: push}", "vid"),
            ("{action: push, pcp: 3}", "vid"),
            ("{action: rewrite, pcp: 3}", "vid"),
            ("{action: push, vid: 5, tpid: 0x9100}", "tpid"),
            ("{action: push, vid: 5, match_vid: 3}", "match_vid"),
            ("{action: pop, vid: 5}", "vid"),
            ("{action: pop, pcp: 1}", "pcp"),
        ] {
            // Refused by the pipeline check, at the parameter, as `run` would refuse it.
            let catalog = ironpath_config::Catalog { nodes: &[KIND.spec], drivers: None };
            let yaml =
                format!("lcores: [{{id: 0}}]\nnodes:\n  - {{name: v, type: vlan, lcore: 0, params: {params}}}\n");
            let e = ironpath_config::parse_str(&yaml, std::path::Path::new("v.yaml"), &catalog)
                .expect_err(params)
                .to_string();
            assert!(e.contains(&format!("`{wrong}`: ")) && e.contains("v.yaml:3:"), "{params}: {e}");
            if wrong == "tpid" {
                assert!(e.contains("0x9100") && e.contains("0x88a8"), "{e}");
            }
        }
    }

    #[test]
    fn built_from_yaml_the_node_pushes_with_the_spec_defaults() {
        let p = pool(8);
        let f = frame(50);
        for (params, want) in [
            ("{action: push, vid: 100, pcp: 5}", tagged(0x8100, 0xa064, &f)),
            ("{action: push, vid: 20, tpid: 0x88a8}", tagged(0x88a8, 0x0014, &f)),
            ("{action: rewrite, vid: 4095}", f.clone()),
            ("{action: pop, untagged: drop, match_vid: 0}", f.clone()),
        ] {
            let mut d = build(&p, params).unwrap_or_else(|e| panic!("{params}: {e}"));
            assert_eq!(d.nexts, ["out"]);
            let st = stats(&*d.node);
            let mut b = burst(&p, std::slice::from_ref(&f));
            let c = call(&mut *d.node, &st, &mut b, 0);
            let out = outputs(&c, &mut b);
            let drop_untagged = params.contains("untagged: drop");
            assert_eq!(out, [(if drop_untagged { DROP } else { OUT }, want)], "{params}");
        }
        assert_eq!(p.stats().in_use, 0);
    }
}
