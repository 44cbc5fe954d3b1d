//! Adversarial tests of a `vxlan` node and an `l2_bridge` feeding each other, as
//! `configs/vxlan-bridges.yaml` wires them: vxlan.inner -> bridge, the bridge's edge
//! `wan` (the underlay port) -> back to the vxlan node. The loop is modelled by hand:
//! each round every node takes what was sent to it the round before; what leaves the
//! pair (the underlay wire, the lan ports, `other`) is collected. Every run checks
//! that the packets between the two nodes never grow after the first round and drain
//! to nothing within a few rounds, that no buffer is leaked, and that the counters
//! account for every frame.

use super::*;
use crate::l2_bridge::L2Bridge;
use crate::tests::{call, counter, eth, ipv4, ipv6, pool, stats, udp, Rng, PEER_MAC};
use ironpath_graph::testing::Call;
use ironpath_graph::NodeStats;
use ironpath_wire::IpAddress;

const HZ: u64 = 1_000_000_000;
/// The underlay port (id 0: the bridge's edge 0 is `wan`), and the lan ports.
const WAN: u16 = 0;
const LAN1: u16 = 1;
const LAN2: u16 = 2;
const LAN3: u16 = 3;
const UNDER_MAC: [u8; 6] = [0x02, 0, 0, 0, 9, 9];
const LOCAL: Ipv4Addr = Ipv4Addr::new(198, 18, 60, 1);
const R1: Ipv4Addr = Ipv4Addr::new(198, 18, 60, 2);
const R2: Ipv4Addr = Ipv4Addr::new(198, 18, 60, 3);
const BCAST: [u8; 6] = [0xff; 6];
/// Inner hosts: A on lan1, C and D on lan2, B behind the remote R1, U never seen.
const A: [u8; 6] = [0x02, 0, 0, 0, 0x0a, 1];
const C: [u8; 6] = [0x02, 0, 0, 0, 0x0c, 2];
const D: [u8; 6] = [0x02, 0, 0, 0, 0x0d, 2];
const B: [u8; 6] = [0x02, 0, 0, 0, 0x0b, 0xee];
const U: [u8; 6] = [0x02, 0, 0, 0, 0x77, 0x77];
const A4: Ipv4Addr = Ipv4Addr::new(198, 18, 61, 1);
const B4: Ipv4Addr = Ipv4Addr::new(198, 18, 61, 2);
const C4: Ipv4Addr = Ipv4Addr::new(198, 18, 61, 3);
const D4: Ipv4Addr = Ipv4Addr::new(198, 18, 61, 4);
/// Packets the bridge is given per call (room left for its flood references).
const CHUNK: usize = 64;

fn cfg(vni: u32, remotes: Vec<Ipv4Addr>) -> VxlanConfig {
    VxlanConfig { vni, remotes, ..super::tests::cfg() }
}

fn vtep(p: &Mempool, c: VxlanConfig) -> (Vxlan, NodeStats) {
    let v = Vxlan::new(c, WAN, UNDER_MAC, p.clone(), HZ, [3; 16]);
    let st = stats(&v);
    (v, st)
}

/// The bridge of one VNI: edge 0 `wan` (port 0), then the lan ports given.
fn bridge(lans: &[u16], statics: &[([u8; 6], u16)]) -> (L2Bridge, NodeStats) {
    let ports: Vec<u16> = std::iter::once(WAN).chain(lans.iter().copied()).collect();
    let statics: Vec<((u16, [u8; 6]), u16)> = statics.iter().map(|&(m, e)| ((0, m), e)).collect();
    let br = L2Bridge::new(&ports, &statics, 64, 0, false, [7; 16]);
    let st = stats(&br);
    (br, st)
}

/// An inner UDP/IPv4 frame `src` -> `dst` (MACs and addresses) with `len` payload bytes.
fn inner(dst: [u8; 6], src: [u8; 6], ips: (Ipv4Addr, Ipv4Addr), len: usize) -> Vec<u8> {
    let u = udp(IpAddress::V4(ips.0), IpAddress::V4(ips.1), 5000, 53, &vec![0x42; len]);
    eth(dst, src, 0x0800, &ipv4(ips.0, ips.1, 17, 64, &u))
}

/// `inner` as VXLAN (VNI `vni`) from the remote `src` to us, Ethernet `eth_dst` <- `eth_src`.
fn vx_from(eth_dst: [u8; 6], eth_src: [u8; 6], src: Ipv4Addr, vni: u32, inner: &[u8]) -> Vec<u8> {
    let mut v = vec![0x08, 0, 0, 0];
    v.extend_from_slice(&(vni << 8).to_be_bytes());
    v.extend_from_slice(inner);
    let mut u = udp(IpAddress::V4(src), IpAddress::V4(LOCAL), 40000, 4789, &v);
    u[6..8].fill(0);
    eth(eth_dst, eth_src, 0x0800, &ipv4(src, LOCAL, 17, 64, &u))
}

/// `inner` as VXLAN of `vni` from `src`, as a remote VTEP sends it to us.
fn vx(src: Ipv4Addr, vni: u32, inner: &[u8]) -> Vec<u8> {
    vx_from(UNDER_MAC, PEER_MAC, src, vni, inner)
}

/// An untagged IPv4 frame with DF set (its header checksum fixed).
fn with_df(mut f: Vec<u8>) -> Vec<u8> {
    f[20] |= 0x40;
    f[24..26].fill(0);
    let s = !checksum::data(&f[14..34]);
    f[24..26].copy_from_slice(&s.to_be_bytes());
    f
}

/// A frame too big for the tunnel (1500 underlay MTU), DF set.
fn big(dst: [u8; 6], src: [u8; 6], ips: (Ipv4Addr, Ipv4Addr)) -> Vec<u8> {
    with_df(inner(dst, src, ips, 1460))
}

fn bytes(m: &Mbuf) -> Vec<u8> {
    let mut v = vec![0u8; m.pkt_len()];
    m.copy_to(0, &mut v);
    v
}

fn mbufs(p: &Mempool, frames: &[(u16, Vec<u8>)]) -> Vec<Mbuf> {
    frames
        .iter()
        .map(|(port, f)| {
            let mut m = Mbuf::from_slice(p, f).expect("mbuf");
            m.header_mut().port = *port;
            m
        })
        .collect()
}

/// Where a next edge leads in the model.
#[derive(Clone, Copy)]
enum To {
    Node(usize),
    /// A bridge's edge `wan`, to the vxlan node: no frame that came from the tunnel
    /// (the underlay port) may take it.
    Back(usize),
    Sink(&'static str),
}

/// A node of the model, its stats and where its next edges lead.
struct Hop<'a> {
    node: &'a mut dyn Node,
    st: &'a NodeStats,
    nexts: Vec<To>,
}

/// What a run did.
#[derive(Default)]
struct Trace {
    /// Packets waiting between the nodes at the start of each round (round 0: the
    /// injected ones), in all and by node.
    rounds: Vec<usize>,
    by_node: Vec<Vec<usize>>,
    /// Packets given to each node over the run.
    fed: Vec<usize>,
    /// What left the model: (sink, bytes).
    out: Vec<(&'static str, Vec<u8>)>,
    /// Packets a node sent to DROP.
    dropped: usize,
}

impl Trace {
    fn sunk(&self, name: &str) -> Vec<&Vec<u8>> {
        self.out.iter().filter(|(s, _)| *s == name).map(|(_, b)| b).collect()
    }

    fn count(&self, name: &str) -> usize {
        self.sunk(name).len()
    }

    /// Never more packets between the nodes than the round before (after the
    /// first), and none left within `max` rounds.
    fn assert_drains(&self, max: usize) {
        assert_eq!(self.rounds.last(), Some(&0), "{:?}", self.by_node);
        assert!(self.rounds.len() <= max + 1, "took {} rounds: {:?}", self.rounds.len() - 1, self.by_node);
        for r in 2..self.rounds.len() {
            assert!(self.rounds[r] <= self.rounds[r - 1], "grew at round {r}: {:?}", self.by_node);
        }
    }
}

fn edges(c: &Call, b: &Burst) -> Vec<u16> {
    (0..b.len())
        .map(|i| match c.dispatch {
            Dispatch::All(k) => k,
            Dispatch::Each => c.next[i],
            Dispatch::Consumed => DROP,
        })
        .collect()
}

/// Feed `input` to `h` (CHUNK at a time), then call it empty until it sends nothing
/// more: everything it sent, by edge.
fn pass(h: &mut Hop<'_>, input: Vec<Mbuf>, now: &mut u64) -> Vec<(u16, Mbuf)> {
    let mut out = Vec::new();
    let mut it = input.into_iter().peekable();
    loop {
        let fed = it.peek().is_some();
        let mut b = Burst::new();
        for m in it.by_ref().take(CHUNK) {
            assert!(b.push(m).is_ok());
        }
        *now += 1;
        let c = call(h.node, h.st, &mut b, *now);
        let e = edges(&c, &b);
        let got = !e.is_empty();
        out.extend(e.into_iter().zip(b.drain()));
        if !fed && !got {
            return out;
        }
    }
}

/// Run the model from `inject` (node, frames with their port) until nothing is
/// left between the nodes, `max_rounds` rounds at most (then it panics: a loop).
/// Frames to feed one node: (its index, (port, bytes) each).
type Inject = (usize, Vec<(u16, Vec<u8>)>);

fn drive(hops: &mut [Hop<'_>], p: &Mempool, inject: &[Inject], now: &mut u64, max_rounds: usize) -> Trace {
    let n = hops.len();
    let mut tr = Trace { fed: vec![0; n], ..Trace::default() };
    let mut pending: Vec<Vec<Mbuf>> = (0..n).map(|_| Vec::new()).collect();
    for (k, frames) in inject {
        pending[*k].extend(mbufs(p, frames));
    }
    for _ in 0..=max_rounds {
        let sizes: Vec<usize> = pending.iter().map(Vec::len).collect();
        tr.rounds.push(sizes.iter().sum());
        tr.by_node.push(sizes);
        if pending.iter().all(Vec::is_empty) {
            return tr;
        }
        let mut next: Vec<Vec<Mbuf>> = (0..n).map(|_| Vec::new()).collect();
        for (k, h) in hops.iter_mut().enumerate() {
            let input = std::mem::take(&mut pending[k]);
            tr.fed[k] += input.len();
            for (e, m) in pass(h, input, now) {
                match h.nexts.get(usize::from(e)) {
                    Some(To::Node(t)) => next[*t].push(m),
                    Some(To::Back(t)) => {
                        assert_ne!(
                            m.header().port,
                            WAN,
                            "a frame from the tunnel sent back into it: {:02x?}",
                            bytes(&m)
                        );
                        next[*t].push(m)
                    }
                    Some(To::Sink(s)) => tr.out.push((s, bytes(&m))),
                    None => tr.dropped += 1,
                }
            }
        }
        pending = next;
    }
    for v in pending {
        drop(v);
    }
    panic!("still circulating after {max_rounds} rounds: {:?}", tr.by_node);
}

/// One VNI: the vxlan node (hop 0) and its bridge (hop 1) with lan1 and lan2.
fn pair<'a>(v: &'a mut Vxlan, vs: &'a NodeStats, br: &'a mut L2Bridge, bs: &'a NodeStats) -> [Hop<'a>; 2] {
    [
        Hop { node: v, st: vs, nexts: vec![To::Node(1), To::Sink("wire"), To::Sink("other")] },
        Hop { node: br, st: bs, nexts: vec![To::Back(0), To::Sink("lan1"), To::Sink("lan2")] },
    ]
}

const VX: usize = 0;
const BR: usize = 1;

/// The vxlan node accounts for every underlay frame it was given (`underlay`), the
/// bridge for every frame (`bridged`).
fn assert_accounted(vs: &NodeStats, underlay: u64, bs: &NodeStats, bridged: u64) {
    let vx: u64 = ["decapsulated", "other", "other_vni", "unknown_remote", "fragment", "bad_checksum", "malformed"]
        .iter()
        .map(|c| counter(vs, c))
        .sum();
    assert_eq!(vx, underlay, "vxlan: every underlay frame counted once");
    let br: u64 =
        ["forwarded", "flooded", "filtered", "malformed", "vlan_filtered"].iter().map(|c| counter(bs, c)).sum();
    assert_eq!(br, bridged, "bridge: every frame counted once");
}

/// Learn A on lan1 and C on lan2 (broadcasts), and B behind R1 (a broadcast from it).
fn warm(hops: &mut [Hop<'_>], p: &Mempool, now: &mut u64) -> Trace {
    let lan = vec![(LAN1, inner(BCAST, A, (A4, B4), 10)), (LAN2, inner(BCAST, C, (C4, B4), 10))];
    let under = vec![(WAN, vx(R1, 100, &inner(BCAST, B, (B4, A4), 10)))];
    let tr = drive(hops, p, &[(BR, lan), (VX, under)], now, 6);
    tr.assert_drains(4);
    tr
}

/// A remote sends VXLAN of our VNI whose inner frame is itself VXLAN to our
/// address and port (one, two and three deep), to broadcast, unknown, a lan host's
/// MAC, our own underlay MAC: it is decapsulated once and bridged to the lans as an
/// opaque frame, never back into the node, never decapsulated again.
#[test]
fn nested_vxlan_for_us_is_decapsulated_once_and_never_reenters_the_node() {
    let p = pool(1024);
    let (mut v, vs) = vtep(&p, cfg(100, vec![R1, R2]));
    let (mut br, bs) = bridge(&[LAN1, LAN2], &[]);
    let mut now = 1;
    {
        let mut hops = pair(&mut v, &vs, &mut br, &bs);
        warm(&mut hops, &p, &mut now);
    }
    let before = (counter(&vs, "decapsulated"), counter(&vs, "encapsulated"));
    let mut under = Vec::new();
    for dst in [BCAST, U, A, UNDER_MAC] {
        let x = inner(dst, B, (B4, A4), 20);
        let once = vx_from(dst, B, R1, 100, &x);
        let twice = vx_from(dst, B, R1, 100, &once);
        under.push((WAN, vx(R1, 100, &once)));
        under.push((WAN, vx(R1, 100, &twice)));
        under.push((WAN, vx(R2, 100, &vx(R1, 100, &twice))));
    }
    let n = under.len();
    let tr = {
        let mut hops = pair(&mut v, &vs, &mut br, &bs);
        drive(&mut hops, &p, &[(VX, under.clone())], &mut now, 6)
    };
    tr.assert_drains(2);
    assert_eq!(tr.by_node[1], [0, n], "each frame decapsulated once, to the bridge");
    assert_eq!(tr.fed[VX], n, "nothing came back to the node");
    assert_eq!(counter(&vs, "decapsulated") - before.0, n as u64);
    assert_eq!(counter(&vs, "encapsulated"), before.1, "nothing re-encapsulated");
    assert_eq!((tr.count("wire"), tr.count("other")), (0, 0));
    // Broadcast, unknown and our MAC: both lans; A's: lan1 only (but the third
    // variant's frame, a VXLAN packet to our MAC, floods). The lan hosts get the
    // frame as sent, one layer off.
    assert_eq!(tr.count("lan1"), 12);
    assert_eq!(tr.count("lan2"), 10);
    for (k, (_, f)) in under.iter().enumerate() {
        let one_off = &f[50..];
        assert!(tr.out.iter().any(|(_, o)| o == one_off), "frame {k} delivered one layer off");
    }
    assert_eq!(br.lookup(0, &A), Some(1), "A stays on lan1");
    assert_eq!(p.stats().in_use, 0);
}

/// A remote spoofs a lan host's MAC as the inner source (plain bridge learning:
/// the MAC moves to `wan`), nested or not. Traffic to A then goes into the tunnel,
/// once, to the remote that sent it; nothing loops or multiplies; when A speaks
/// again it moves back.
#[test]
fn a_remote_spoofing_a_lan_mac_moves_it_but_nothing_loops_or_amplifies() {
    let p = pool(1024);
    let (mut v, vs) = vtep(&p, cfg(100, vec![R1, R2]));
    let (mut br, bs) = bridge(&[LAN1, LAN2], &[]);
    let mut now = 1;
    let mut bridged = 0;
    let mut underlay = 0;
    let mut hops = pair(&mut v, &vs, &mut br, &bs);
    let tr = warm(&mut hops, &p, &mut now);
    bridged += tr.fed[BR] as u64;
    underlay += 1;
    // The spoof: from A to broadcast, to C, to A itself, and nested.
    let spoofs = vec![
        (WAN, vx(R2, 100, &inner(BCAST, A, (A4, C4), 10))),
        (WAN, vx(R2, 100, &inner(C, A, (A4, C4), 10))),
        (WAN, vx(R2, 100, &inner(A, A, (A4, A4), 10))),
        (WAN, vx(R2, 100, &vx_from(A, A, R2, 100, &inner(A, A, (A4, A4), 10)))),
    ];
    let tr = drive(&mut hops, &p, &[(VX, spoofs)], &mut now, 6);
    tr.assert_drains(2);
    bridged += tr.fed[BR] as u64;
    underlay += 4;
    assert_eq!((tr.count("wire"), tr.fed[VX]), (0, 4), "nothing back into the tunnel");
    assert_eq!((tr.count("lan1"), tr.count("lan2")), (1, 2), "broadcast to both, C's to lan2; to A: filtered");
    // C (lan2) and a burst from lan2 to A: to the tunnel, one packet each, to R2 only.
    let to_a: Vec<(u16, Vec<u8>)> = (0..50).map(|_| (LAN2, inner(A, C, (C4, A4), 10))).collect();
    let tr = drive(&mut hops, &p, &[(BR, to_a)], &mut now, 6);
    tr.assert_drains(2);
    bridged += tr.fed[BR] as u64;
    let wire = tr.sunk("wire");
    assert_eq!(wire.len(), 50, "one copy each, no flood");
    assert!(wire.iter().all(|f| f[30..34] == R2.octets()), "to the remote that spoofed A");
    assert_eq!(tr.count("lan1"), 0, "misdirected: plain learning");
    // A speaks: back on lan1.
    let tr = drive(&mut hops, &p, &[(BR, vec![(LAN1, inner(C, A, (A4, C4), 10))])], &mut now, 6);
    tr.assert_drains(1);
    bridged += 1;
    drop(hops);
    assert_eq!(br.lookup(0, &A), Some(1));
    assert!(counter(&bs, "moved") >= 2);
    assert_accounted(&vs, underlay, &bs, bridged);
    assert_eq!(p.stats().in_use, 0);
}

/// Frames from the tunnel to MACs the bridge learned on `wan` are filtered (split
/// horizon), never sent back into the node to be encapsulated.
#[test]
fn frames_from_wan_to_macs_learned_on_wan_are_filtered_never_reencapsulated() {
    let p = pool(1024);
    let (mut v, vs) = vtep(&p, cfg(100, vec![R1, R2]));
    let (mut br, bs) = bridge(&[LAN1, LAN2], &[]);
    let mut now = 1;
    let mut hops = pair(&mut v, &vs, &mut br, &bs);
    warm(&mut hops, &p, &mut now);
    let e = [0x02, 0, 0, 0, 0x0e, 1];
    // E behind R2, then frames to B (behind R1) and E from both remotes, unicast,
    // tagged, and nested.
    let frames = vec![
        (WAN, vx(R2, 100, &inner(BCAST, e, (B4, A4), 10))),
        (WAN, vx(R2, 100, &inner(B, e, (B4, A4), 10))),
        (WAN, vx(R1, 100, &inner(e, B, (B4, A4), 10))),
        (WAN, vx(R1, 100, &crate::attack::frames::tagged(&inner(e, B, (B4, A4), 10), 0x8100, 5))),
        (WAN, vx(R1, 100, &vx_from(e, B, R1, 100, &inner(e, B, (B4, A4), 10)))),
        (WAN, vx(R2, 100, &inner(e, e, (B4, A4), 10))),
    ];
    let encapsulated = counter(&vs, "encapsulated");
    let filtered = counter(&bs, "filtered");
    let tr = drive(&mut hops, &p, &[(VX, frames)], &mut now, 6);
    tr.assert_drains(2);
    drop(hops);
    assert_eq!(tr.fed[VX], 6, "nothing came back");
    assert_eq!(tr.count("wire"), 0);
    assert_eq!(tr.count("lan1") + tr.count("lan2"), 2, "only E's broadcast reached the lans");
    assert_eq!(counter(&bs, "filtered") - filtered, 5);
    assert_eq!(counter(&vs, "encapsulated"), encapsulated, "nothing re-encapsulated");
    assert_eq!(p.stats().in_use, 0);
}

/// A lan host's packet too big for the tunnel (DF) gets an ICMP error sent on
/// `inner` with the underlay port. Whether the sender's MAC is on its lan, was
/// spoofed onto `wan` by a remote (before, or in the same burst as the packet, on
/// either side of it), is static on `wan`, or unknown to the bridge, the error never
/// goes back into the node; at most one error per packet; the errors keep to their
/// budget.
#[test]
fn icmp_too_big_to_a_sender_spoofed_onto_wan_does_not_loop() {
    let p = pool(2048);
    let (mut v, vs) = vtep(&p, cfg(100, vec![R1, R2]));
    let (mut br, bs) = bridge(&[LAN1, LAN2], &[]);
    let mut now = 1;
    let mut hops = pair(&mut v, &vs, &mut br, &bs);
    warm(&mut hops, &p, &mut now);
    let spoof = || (WAN, vx(R1, 100, &inner(BCAST, A, (A4, B4), 10)));
    let big_ab = |port| (port, big(B, A, (A4, B4)));
    // a) Spoofed first: A's packet moves it back, the error goes to lan1.
    let tr = drive(&mut hops, &p, &[(VX, vec![spoof()])], &mut now, 6);
    tr.assert_drains(2);
    let tr = drive(&mut hops, &p, &[(BR, vec![big_ab(LAN1)])], &mut now, 6);
    tr.assert_drains(3);
    assert_eq!((tr.count("wire"), tr.count("lan1"), tr.fed[VX]), (0, 1, 1), "the error to A on lan1");
    assert_eq!(tr.sunk("lan1")[0][34..36], [3, 4]);
    // b) The spoof reaches the node in the burst that holds A's packet (as the
    // bridge sent it: from lan1), after it and before it: the error is sent to
    // lan1 or filtered, never into the node again.
    for (k, frames) in [vec![big_ab(LAN1), spoof()], vec![spoof(), big_ab(LAN1)]].into_iter().enumerate() {
        now += 10 * HZ; // a fresh ICMP budget
        let sent = counter(&vs, "icmp_sent");
        let tr = drive(&mut hops, &p, &[(VX, frames)], &mut now, 6);
        tr.assert_drains(2);
        assert_eq!(counter(&vs, "icmp_sent"), sent + 1, "case {k}");
        assert_eq!((tr.fed[VX], tr.count("wire")), (2, 0), "case {k}: nothing back into the node");
        assert!(tr.count("lan1") <= 2, "case {k}");
    }
    // c) Many: A (spoofed onto wan in between) sends 200 big packets: the errors
    // stay within the budget, none ever reaches the node.
    now += 10 * HZ;
    let mut frames = Vec::new();
    for k in 0..200 {
        frames.push(if k % 10 == 0 { spoof() } else { big_ab(LAN1) });
    }
    let (sent, limited) = (counter(&vs, "icmp_sent"), counter(&vs, "icmp_limited"));
    let tr = drive(&mut hops, &p, &[(VX, frames)], &mut now, 6);
    tr.assert_drains(2);
    assert_eq!(tr.fed[VX], 200);
    assert_eq!(tr.count("wire"), 0);
    let (sent, limited) = (counter(&vs, "icmp_sent") - sent, counter(&vs, "icmp_limited") - limited);
    assert_eq!(sent + limited, 180, "one error or one limited per packet");
    assert!(sent <= 20, "{sent} errors to one host at once");
    drop(hops);
    assert_eq!(p.stats().in_use, 0);

    // d) A static on wan (an operator's entry): its packet is forwarded to wan, the
    // error comes from wan to A on wan: filtered. (The node sends errors only as
    // from a destination learned behind a remote: B speaks first.)
    let (mut v, vs) = vtep(&p, cfg(100, vec![R1, R2]));
    let (mut br, bs) = bridge(&[LAN1, LAN2], &[(A, 0), (B, 0)]);
    let mut hops = pair(&mut v, &vs, &mut br, &bs);
    drive(&mut hops, &p, &[(VX, vec![(WAN, vx(R1, 100, &inner(BCAST, B, (B4, A4), 10)))])], &mut now, 6)
        .assert_drains(2);
    let tr = drive(&mut hops, &p, &[(BR, vec![big_ab(LAN1), (LAN1, big(A, A, (A4, B4)))])], &mut now, 6);
    tr.assert_drains(3);
    assert_eq!((tr.fed[VX], tr.count("lan1") + tr.count("lan2"), tr.count("wire")), (2, 0, 0));
    drop(hops);
    assert_eq!(counter(&bs, "static_kept"), 2);
    // The error for A -> B is filtered (A is on wan); A -> A gets none: A is not
    // learned behind a remote.
    assert_eq!((counter(&vs, "icmp_sent"), counter(&vs, "too_big")), (1, 2));
    assert_eq!(counter(&bs, "filtered"), 1, "the error: A is on wan");

    // e) The bridge does not know A (a frame straight from the port to the node):
    // the error floods to the lans only.
    let (mut v, vs) = vtep(&p, cfg(100, vec![R1, R2]));
    let (mut br, bs) = bridge(&[LAN1, LAN2], &[]);
    let mut hops = pair(&mut v, &vs, &mut br, &bs);
    drive(&mut hops, &p, &[(VX, vec![(WAN, vx(R1, 100, &inner(BCAST, B, (B4, A4), 10)))])], &mut now, 6)
        .assert_drains(2);
    let tr = drive(&mut hops, &p, &[(VX, vec![big_ab(LAN1), big_ab(LAN2), big_ab(9)])], &mut now, 6);
    tr.assert_drains(2);
    assert_eq!(tr.fed[VX], 3);
    assert_eq!((tr.count("lan1"), tr.count("lan2"), tr.count("wire")), (3, 3, 0), "each error flooded to both lans");
    drop(hops);
    let _ = bs;
    assert_eq!(p.stats().in_use, 0);
}

/// A lan host's DF packet too big for the tunnel to a MAC the bridge does not
/// know (D, a quiet host on lan2) is flooded: D gets it on lan2, and the copy for
/// the tunnel is too big. An error as from D, on the underlay port, would make the
/// bridge learn D behind `wan` (though D never sent a frame and is not behind the
/// tunnel), and frames from lan1 to D would no longer reach it: the node answers
/// only for destinations learned behind a remote, so no error, and D stays unknown.
#[test]
fn icmp_too_big_for_a_flooded_frame_does_not_move_its_destination_to_wan() {
    let p = pool(1024);
    let (mut v, vs) = vtep(&p, cfg(100, vec![R1, R2]));
    let (mut br, bs) = bridge(&[LAN1, LAN2], &[]);
    let mut now = 1;
    let mut hops = pair(&mut v, &vs, &mut br, &bs);
    warm(&mut hops, &p, &mut now);
    let tr = drive(&mut hops, &p, &[(BR, vec![(LAN1, big(D, A, (A4, D4)))])], &mut now, 6);
    tr.assert_drains(3);
    assert_eq!(tr.count("lan2"), 1, "D got the packet by flooding");
    // Then a small frame from A to D.
    let tr = drive(&mut hops, &p, &[(BR, vec![(LAN1, inner(D, A, (A4, D4), 10))])], &mut now, 6);
    drop(hops);
    assert_eq!((counter(&vs, "icmp_sent"), counter(&vs, "too_big")), (0, 1));
    assert_ne!(br.lookup(0, &D), Some(0), "D learned behind wan from the node's error alone");
    assert_eq!(tr.count("lan2"), 1, "A's next frame to D reached it");
    assert_eq!(p.stats().in_use, 0);
}

/// Odd frames from a remote: another VNI, an inner frame shorter than an
/// Ethernet header, multicast and zero source MACs, VLAN-tagged (and double-tagged)
/// inner frames, inner frames with our own underlay MAC and address as source or
/// destination, a remote not in `remotes`. None comes back into the node; each is
/// counted where it is dropped.
#[test]
fn odd_inner_frames_from_a_remote_never_come_back() {
    use crate::attack::frames::tagged;
    let p = pool(1024);
    let (mut v, vs) = vtep(&p, cfg(100, vec![R1, R2]));
    let (mut br, bs) = bridge(&[LAN1, LAN2], &[]);
    let mut now = 1;
    let mut hops = pair(&mut v, &vs, &mut br, &bs);
    let w = warm(&mut hops, &p, &mut now);
    let own = |dst: [u8; 6], src: [u8; 6]| {
        let u = udp(IpAddress::V4(LOCAL), IpAddress::V4(LOCAL), 4789, 4789, &[0x08, 0, 0, 0, 0, 0, 100, 0]);
        eth(dst, src, 0x0800, &ipv4(LOCAL, LOCAL, 17, 64, &u))
    };
    let frames = vec![
        (WAN, vx(R1, 200, &inner(BCAST, B, (B4, A4), 10))), // other VNI: `other`
        (WAN, vx(R1, 100, &inner(BCAST, B, (B4, A4), 10)[..13])), // runt: malformed
        (WAN, vx(R1, 100, &inner(BCAST, [0x01, 0, 0x5e, 0, 0, 1], (B4, A4), 10))), // bridge: malformed
        (WAN, vx(R1, 100, &inner(A, [0xff; 6], (B4, A4), 10))), // bridge: malformed
        (WAN, vx(R1, 100, &inner(A, [0; 6], (B4, A4), 10))), // zero source: lan1
        (WAN, vx(R1, 100, &tagged(&inner(BCAST, B, (B4, A4), 10), 0x8100, 7))), // both lans
        (WAN, vx(R1, 100, &tagged(&tagged(&inner(A, B, (B4, A4), 10), 0x8100, 7), 0x88a8, 9))), // lan1
        (WAN, vx(R1, 100, &own(UNDER_MAC, B))),             // both lans
        (WAN, vx(R1, 100, &own(BCAST, UNDER_MAC))),         // both lans
        (WAN, vx(R1, 100, &own(UNDER_MAC, UNDER_MAC))),     // filtered
        (WAN, vx(Ipv4Addr::new(198, 18, 60, 99), 100, &inner(BCAST, B, (B4, A4), 10))), // unknown remote
        (
            WAN,
            vx(
                R1,
                100,
                &eth(BCAST, B, 0x86dd, &ipv6("fd00::1".parse().unwrap(), "ff02::1".parse().unwrap(), 58, 255, &[0; 8])),
            ),
        ),
    ];
    let n = frames.len();
    let tr = drive(&mut hops, &p, &[(VX, frames)], &mut now, 6);
    tr.assert_drains(2);
    let bridged = (w.fed[BR] + tr.fed[BR]) as u64;
    drop(hops);
    assert_eq!(tr.fed[VX], n, "nothing came back into the node");
    assert_eq!((tr.count("wire"), tr.count("other")), (0, 1));
    assert_eq!((tr.count("lan1"), tr.count("lan2")), (6, 4));
    assert_eq!(counter(&vs, "other_vni"), 1);
    assert_eq!(counter(&vs, "malformed"), 1);
    assert_eq!(counter(&vs, "unknown_remote"), 1);
    assert_eq!(counter(&bs, "malformed"), 2);
    assert_eq!(counter(&bs, "filtered"), 1);
    assert_accounted(&vs, 1 + n as u64, &bs, bridged);
    assert_eq!(p.stats().in_use, 0);
}

/// A lan host sends frames that are VXLAN to our underlay address and port (our
/// VNI and another, as from a remote, to our underlay MAC): they come from a lan
/// port, so the node encapsulates them like any inner frame; it never decapsulates
/// them (no injection into its own or another VNI's bridge), and nothing comes back.
#[test]
fn a_lan_host_sending_vxlan_to_our_vtep_gets_it_encapsulated_not_decapsulated() {
    let p = pool(1024);
    let (mut v, vs) = vtep(&p, cfg(100, vec![R1, R2]));
    let (mut br, bs) = bridge(&[LAN1, LAN2], &[]);
    let mut now = 1;
    let mut hops = pair(&mut v, &vs, &mut br, &bs);
    warm(&mut hops, &p, &mut now);
    let decap = counter(&vs, "decapsulated");
    let frames: Vec<(u16, Vec<u8>)> = [100u32, 200]
        .iter()
        .flat_map(|&vni| {
            [
                (LAN1, vx_from(UNDER_MAC, A, R1, vni, &inner(BCAST, B, (B4, A4), 10))),
                (LAN1, vx_from(B, A, R1, vni, &inner(C, B, (B4, C4), 10))),
            ]
        })
        .collect();
    let tr = drive(&mut hops, &p, &[(BR, frames.clone())], &mut now, 6);
    tr.assert_drains(2);
    drop(hops);
    assert_eq!(counter(&vs, "decapsulated"), decap, "not one decapsulated");
    // To our MAC (unknown to the bridge): lan2 and the tunnel (both remotes); to B: R1 only.
    assert_eq!((tr.count("lan2"), tr.count("wire"), tr.count("lan1")), (2, 6, 0));
    for f in tr.sunk("wire") {
        assert_eq!(&f[46..49], &[0, 0, 100], "our VNI");
        assert!(frames.iter().any(|(_, x)| x[..] == f[50..]), "the lan frame, whole");
    }
    assert_eq!(p.stats().in_use, 0);
}

/// Two VNIs over one underlay, as `configs/vxlan-bridges.yaml` wires them (vni100's
/// `other` to vni200, vni200's to a drop): no frame crosses from one VNI's bridge to
/// the other's, nested VXLAN of the other VNI included, in either direction.
#[test]
fn two_vnis_never_leak_into_each_other_even_nested() {
    let p = pool(1024);
    let (mut v1, s1) = vtep(&p, cfg(100, vec![R1]));
    let (mut v2, s2) = vtep(&p, cfg(200, vec![R1]));
    let (mut b1, t1) = bridge(&[LAN1, LAN2], &[]);
    let (mut b2, t2) = bridge(&[LAN3], &[]);
    let (b100, b200) = ([0x02, 0, 0, 0, 0x10, 0], [0x02, 0, 0, 0, 0x20, 0]);
    let (a100, a200) = ([0x02, 0, 0, 0, 0x10, 1], [0x02, 0, 0, 0, 0x20, 1]);
    let f100 = |dst| inner(dst, b100, (B4, A4), 11);
    let f200 = |dst| inner(dst, b200, (B4, A4), 22);
    let mut now = 1;
    let mut hops = [
        Hop { node: &mut v1, st: &s1, nexts: vec![To::Node(2), To::Sink("wire100"), To::Node(1)] },
        Hop { node: &mut v2, st: &s2, nexts: vec![To::Node(3), To::Sink("wire200"), To::Sink("other")] },
        Hop { node: &mut b1, st: &t1, nexts: vec![To::Back(0), To::Sink("lan1"), To::Sink("lan2")] },
        Hop { node: &mut b2, st: &t2, nexts: vec![To::Back(1), To::Sink("lan3")] },
    ];
    let under = vec![
        (WAN, vx(R1, 100, &f100(BCAST))),
        (WAN, vx(R1, 200, &f200(BCAST))),
        (WAN, vx(R1, 100, &vx_from(UNDER_MAC, b100, R1, 200, &f200(BCAST)))),
        (WAN, vx(R1, 200, &vx_from(UNDER_MAC, b200, R1, 100, &f100(BCAST)))),
        (WAN, vx(R1, 100, &vx_from(BCAST, b100, R1, 200, &f200(a200)))),
        (WAN, vx(R1, 300, &f100(BCAST))),
    ];
    let lans = |k: u8| {
        vec![
            (LAN1, inner(BCAST, a100, (A4, B4), 10 + usize::from(k))),
            (LAN3, inner(BCAST, a200, (A4, B4), 10 + usize::from(k))),
            (LAN1, vx_from(UNDER_MAC, a100, R1, 200, &f200(BCAST))),
            (LAN3, vx_from(UNDER_MAC, a200, R1, 100, &f100(BCAST))),
        ]
    };
    for k in 0..3u8 {
        let (l100, l200): (Vec<_>, Vec<_>) = lans(k).into_iter().partition(|(port, _)| *port == LAN1);
        let tr = drive(&mut hops, &p, &[(0, under.clone()), (2, l100), (3, l200)], &mut now, 6);
        tr.assert_drains(3);
        // bd100 frames reach lan1/lan2 only, and carry VNI 100's hosts as the
        // outermost source; bd200's, lan3.
        let srcs = |s: &str| tr.sunk(s).iter().map(|f| <[u8; 6]>::try_from(&f[6..12]).unwrap()).collect::<Vec<_>>();
        assert!(srcs("lan1").iter().chain(&srcs("lan2")).all(|m| [b100, a100, UNDER_MAC].contains(m)), "{k}");
        assert!(srcs("lan3").iter().all(|m| [b200, a200, UNDER_MAC].contains(m)), "{k}");
        assert_eq!((tr.count("lan1"), tr.count("lan2"), tr.count("lan3")), (3, 5, 2), "round {k}");
        for f in tr.sunk("wire100") {
            assert_eq!(&f[46..49], &[0, 0, 100]);
        }
        for f in tr.sunk("wire200") {
            assert_eq!(&f[46..49], &[0, 0, 200]);
        }
        assert_eq!((tr.count("wire100"), tr.count("wire200"), tr.count("other")), (2, 2, 1));
        // Into vni200: what vni100 passes on (VNI 200 twice, 300 once) and bd200's wan.
        assert_eq!(tr.fed[1], 3 + 2);
    }
    drop(hops);
    assert_eq!((counter(&s1, "decapsulated"), counter(&s2, "decapsulated")), (9, 6));
    assert_eq!(p.stats().in_use, 0);
}

/// A flood from one lan host with 64 remotes: the copies stay within
/// MAX_QUEUED, the rest is counted (`queue_full`), nothing comes back to the bridge,
/// nothing leaks; a broadcast storm from a remote, each frame from a new MAC, is
/// flooded to the lans only (two copies each) and keeps the bridge's table bounded.
#[test]
fn floods_to_many_remotes_are_bounded_and_a_remote_storm_stays_on_the_lans() {
    let p = pool(2600);
    let remotes: Vec<Ipv4Addr> = (0..64u8).map(|k| Ipv4Addr::new(198, 18, 62, k + 1)).collect();
    let (mut v, vs) = vtep(&p, cfg(100, remotes.clone()));
    let (mut br, bs) = bridge(&[LAN1, LAN2], &[]);
    let mut now = 1;
    let mut hops = pair(&mut v, &vs, &mut br, &bs);
    let lan: Vec<(u16, Vec<u8>)> = (0..32).map(|_| (LAN1, inner(BCAST, A, (A4, B4), 10))).collect();
    let tr = drive(&mut hops, &p, &[(BR, lan)], &mut now, 6);
    tr.assert_drains(2);
    assert_eq!(tr.by_node[1], [32, 0], "one reference each to the tunnel");
    assert_eq!(tr.count("lan2"), 32);
    assert_eq!(tr.count("wire"), MAX_QUEUED);
    assert_eq!(counter(&vs, "queue_full"), 32 * 64 - MAX_QUEUED as u64);
    assert_eq!(counter(&vs, "encapsulated"), 32 * 64, "each copy counted once, sent or dropped");
    // Unicast to a MAC learned behind one remote: one copy.
    let r = remotes[17];
    let tr = drive(&mut hops, &p, &[(VX, vec![(WAN, vx(r, 100, &inner(A, B, (B4, A4), 10)))])], &mut now, 6);
    tr.assert_drains(2);
    let tr = drive(&mut hops, &p, &[(BR, (0..100).map(|_| (LAN1, inner(B, A, (A4, B4), 10))).collect())], &mut now, 6);
    tr.assert_drains(2);
    assert_eq!(tr.count("wire"), 100);
    assert!(tr.sunk("wire").iter().all(|f| f[30..34] == r.octets()));
    // A remote's storm from 2000 new MACs.
    let storm: Vec<(u16, Vec<u8>)> = (0..2000u32)
        .map(|k| {
            let x = k.to_be_bytes();
            (WAN, vx(r, 100, &inner(BCAST, [0x02, 0x55, x[0], x[1], x[2], x[3]], (B4, A4), 10)))
        })
        .collect();
    let tr = drive(&mut hops, &p, &[(VX, storm)], &mut now, 6);
    tr.assert_drains(2);
    drop(hops);
    assert_eq!((tr.count("lan1"), tr.count("lan2"), tr.count("wire"), tr.fed[VX]), (2000, 2000, 0, 2000));
    assert!(br.entries() <= 64 && v.learned() <= 64);
    assert_eq!(p.stats().in_use, 0);
}

/// Random mixes of everything above, from both sides at once, round after round:
/// lan frames and remote frames with MACs from a small set (lan hosts, remote hosts,
/// our underlay MAC, group and zero addresses, new ones), nested VXLAN of either VNI
/// up to two deep, tagged frames, packets too big with DF, unknown remotes. The loop
/// always drains within three rounds of an injection, never grows, never sends a
/// frame from the tunnel back into it, and leaks nothing; the tables stay bounded.
#[test]
fn random_mixes_from_both_sides_always_drain() {
    use crate::attack::frames::tagged;
    let p = pool(4096);
    for seed in [1u64, 0x9e37_79b9_7f4a_7c15, 42, 0xdead_beef] {
        let mut rng = Rng(seed);
        let (mut v, vs) = vtep(&p, VxlanConfig { max_macs: 16, ..cfg(100, vec![R1, R2]) });
        let (mut br, bs) = bridge(&[LAN1, LAN2], &[(D, 2)]);
        let mut now = 1;
        let mut hops = pair(&mut v, &vs, &mut br, &bs);
        let macs = [A, B, C, D, U, UNDER_MAC, BCAST, [0x01, 0, 0x5e, 0, 0, 1], [0; 6], [0x02, 0x66, 0, 0, 0, 0]];
        let (mut under_n, mut bridged) = (0u64, 0u64);
        for step in 0..40 {
            let mut under = Vec::new();
            let mut lan = Vec::new();
            for _ in 0..(rng.next() % 120) {
                let mac = |rng: &mut Rng| {
                    let mut m = rng.pick(&macs);
                    if m[1] == 0x66 {
                        m[5] = rng.next() as u8;
                    }
                    m
                };
                let (dst, src) = (mac(&mut rng), mac(&mut rng));
                let ips = (rng.pick(&[A4, B4, C4, D4, LOCAL]), rng.pick(&[A4, B4, C4, D4, LOCAL]));
                let mut f = if rng.next().is_multiple_of(4) {
                    big(dst, src, ips)
                } else {
                    inner(dst, src, ips, (rng.next() % 200) as usize)
                };
                if rng.next().is_multiple_of(6) {
                    f = tagged(&f, 0x8100, (rng.next() % 4) as u16);
                }
                for _ in 0..rng.next() % 3 {
                    f = vx_from(rng.pick(&[UNDER_MAC, BCAST, A]), src, rng.pick(&[R1, R2]), rng.pick(&[100, 200]), &f);
                }
                if rng.next().is_multiple_of(2) {
                    lan.push((rng.pick(&[LAN1, LAN2]), f));
                } else {
                    let from = rng.pick(&[R1, R2, R1, R2, Ipv4Addr::new(198, 18, 60, 99)]);
                    under.push((WAN, vx(from, rng.pick(&[100, 100, 100, 200]), &f)));
                }
            }
            under_n += under.len() as u64;
            let tr = drive(&mut hops, &p, &[(VX, under), (BR, lan)], &mut now, 8);
            tr.assert_drains(3);
            bridged += tr.fed[BR] as u64;
            now += (rng.next() % 3) * HZ / 2;
            let _ = step;
        }
        drop(hops);
        assert!(br.entries() <= 64 && v.learned() <= 16);
        assert_accounted(&vs, under_n, &bs, bridged);
        assert_eq!(br.lookup(0, &D), Some(2), "the static entry never moved");
        assert_eq!(p.stats().in_use, 0, "seed {seed:#x}");
    }
}

/// The bridge floods a frame by sharing it (one buffer, one header) between a lan
/// port and the node. The node must not change the header its lan copy is sent
/// with: here an aggregate (`rx_aggregate`'s, checksums complete), which the node
/// marks to be cut (`TX_TCP_SEG`) in the shared header. In the real graph the lan's
/// `port_tx` (lcore 0) and the node (lcore 1) touch that header at once.
#[test]
fn the_node_leaves_the_header_of_a_shared_flooded_frame_alone() {
    let p = pool(256);
    let (mut v, vs) = vtep(&p, cfg(100, vec![R1]));
    let payload = vec![7u8; 3000];
    let seg = crate::attack::frames::tcp(
        (IpAddress::V4(A4), IpAddress::V4(B4)),
        (80, 5000),
        (1000, Some(1)),
        ironpath_wire::TcpControl::None,
        false,
        &payload,
    );
    let f = with_df(eth(BCAST, A, 0x0800, &ipv4(A4, B4, 6, 64, &seg)));
    let mut b = crate::tests::burst(&p, &[f]);
    let h = b.header_mut(0);
    h.port = LAN1;
    h.ol_flags |= abi::RX_AGGREGATED | abi::RX_L4_CKSUM_GOOD | abi::RX_IP_CKSUM_GOOD;
    (h.l2_len, h.l3_len, h.l4_len, h.tso_segsz) = (14, 20, 20, 1000);
    let lan2_copy = b.share(0);
    let flags = lan2_copy.header().ol_flags;
    let mut now = 1;
    let mut hop = Hop { node: &mut v, st: &vs, nexts: vec![] };
    let mut input = Vec::new();
    b.take_into(&mut input);
    let out = pass(&mut hop, input, &mut now);
    assert_eq!(out.len(), 3, "cut into three segments");
    assert_eq!(lan2_copy.header().ol_flags, flags, "the lan copy's offload flags changed under it");
    drop(out);
    drop(lan2_copy);
    assert_eq!(p.stats().in_use, 0);
}
