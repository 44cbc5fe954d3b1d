//! `acl`: ordered 5-tuple rules (source and destination prefixes, protocol, port
//! ranges) with `permit`, `deny` or `count`, the first matching rule deciding; a
//! packet no rule matches gets `default`.
//!
//! The rules are compiled when the node is built. IPv4 keys are looked up in tries
//! walked one key byte at a time, a burst of keys in lock step ([`trie`]: 13 steps at
//! most whatever the rule count, no rule compared at the end). Keys with an IPv6
//! address, and rule sets whose tries would outgrow their budget, use decision trees
//! (HyperSplit: each inner node splits one field at a rule boundary chosen to balance
//! the rules on both sides; a leaf holds at most [`LEAF_RULES`] rules, in rule order),
//! whose cost grows with their depth. `cargo bench -p ironpath-nodes --bench acl`
//! measures 10, 1,000 and 10,000 rules, `ci/bench-acl` against DPDK's rte_acl
//! (docs/benchmarks.md). An IPv4 address is an IPv4-mapped IPv6 address
//! (`::ffff:a.b.c.d`) to a rule, so `any` matches both families and a prefix one.
//!
//! A frame that is not IPv4 or IPv6 (after up to two VLAN tags) passes, counted
//! (`not_ip`). IPv6 extension headers (hop-by-hop, routing, destination options,
//! fragment, AH) are walked to the transport, as a host would; an IP packet that
//! cannot be classified (cut short, a malformed or over-long header chain, a first
//! fragment too short to hold its ports) is dropped, counted (`malformed`). The ports of a fragment other than the first are unknown: such a
//! fragment matches only rules whose port ranges include 0 (`any` does), as Linux's
//! netfilter matches non-first fragments only against rules without ports. ICMP,
//! and protocols without ports, are looked up with ports 0.

use crate::kind::{NodeError, NodeKind};
use ironpath_config::{Choice, Loc, Nexts, NodeSpec, ParamKind, ParamSpec, Params};
use ironpath_eal::{Burst, MAX_BURST};
use ironpath_graph::{Controller, CounterSpec, Dispatch, Msg, Node, NodeCx, Remote, DROP};
use ironpath_wire::ethernet::{l3_offset, EtherType};
use ironpath_wire::ipv6;
use std::net::{IpAddr, Ipv6Addr};

pub mod trie;
use trie::{Trie, V4Rule, MISS};

ironpath_config::choice! {
    /// What a rule does with the packets it matches.
    pub enum Action {
        /// Pass the packet on.
        Permit = "permit",
        /// Drop it.
        Deny = "deny",
        /// Pass it on and count it (`counted`).
        Count = "count",
    }
}

ironpath_graph::counters! {
    /// What `acl` counts.
    pub enum AclCounter {
        Permitted("permitted", "packets a permit rule matched"),
        Denied("denied", "packets a deny rule matched (dropped)"),
        Counted("counted", "packets a count rule matched (passed on)"),
        DefaultPermit("default_permit", "packets no rule matched, passed (default: permit)"),
        DefaultDeny("default_deny", "packets no rule matched, dropped (default: deny)"),
        NotIp("not_ip", "frames that are not IP, passed on"),
        Malformed("malformed", "IP packets that cannot be classified (cut short, a bad or too long IPv6 header chain, a first fragment without its ports), dropped"),
    }
}

/// Keys classified together (a common burst: larger ones are taken a chunk at a time).
const CHUNK: usize = 32;

/// Rules a leaf of the tree holds at most (fewer past the depth limit is not
/// guaranteed: overlapping rules that no split separates stay together).
pub const LEAF_RULES: usize = 8;
/// Deepest path of the tree.
const MAX_DEPTH: usize = 40;
/// Rule slots a tree's leaves may hold (a rule set whose rules overlap so much that
/// splitting would copy them beyond this gets larger leaves instead: slower
/// lookups, bounded memory and build time).
const MAX_LEAF_SLOTS: usize = 1 << 24;
/// Fields: source, destination (IPv6 or IPv4-mapped), protocol, source port,
/// destination port.
const FIELDS: usize = 5;

/// One rule: an inclusive range per field, and what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// `[lo, hi]` of source, destination, protocol, source port, destination port.
    pub ranges: [(u128, u128); FIELDS],
    /// What to do with a match.
    pub action: Action,
}

impl Rule {
    fn matches(&self, key: &[u128; FIELDS]) -> bool {
        self.ranges.iter().zip(key).all(|(&(lo, hi), &k)| lo <= k && k <= hi)
    }
}

#[derive(Clone, Copy, Debug)]
enum TreeNode {
    /// Keys below `at` in field `field` go left.
    Split { field: u8, at: u128, left: u32, right: u32 },
    /// Rules `leaf_rules[start..start + len]`, in rule order.
    Leaf { start: u32, len: u32 },
}

/// One decision tree over a group of rules.
#[derive(Debug, Default)]
struct Tree {
    nodes: Vec<TreeNode>,
    leaf_rules: Vec<u32>,
}

/// The compiled rules: tries for IPv4 keys, and one decision tree per group of rules
/// that are wide in the same fields (as EffiCuts does), so that a rule open in one
/// field (`any` source, say) is not copied into every leaf the other rules' splits of
/// that field make. The trees hold the rules that can match a key with an IPv6
/// address, or every rule when the tries did not fit.
#[derive(Debug)]
pub struct Classifier {
    rules: Vec<Rule>,
    /// Each rule's counter ([`AclCounter`] as a byte): what a match on it does,
    /// read per packet from one byte instead of the rule's 160.
    verdicts: Vec<u8>,
    trees: Vec<Tree>,
    tries: Option<Vec<Trie>>,
}

/// A range at least this wide makes its field a wide one for grouping: addresses
/// shorter than an IPv4 /16, 1,024 ports or more, any protocol.
const WIDE: [u128; FIELDS] = [1 << 16, 1 << 16, 256, 1024, 1024];
/// The fields that group rules: the addresses (wide ones replicate the most; ports
/// and protocol are small spaces, and more groups mean more trees to walk).
const GROUP_FIELDS: usize = 2;

impl Classifier {
    /// Compile `rules` (first match wins).
    pub fn new(rules: Vec<Rule>) -> Self {
        Self::compile(rules, Some(trie::Budget::default()))
    }

    /// Compile `rules` with tries of at most `budget` (`None`: trees only).
    fn compile(rules: Vec<Rule>, budget: Option<trie::Budget>) -> Self {
        // Tries for IPv4 keys ([`trie::compile`]).
        let tries = budget.and_then(|budget| {
            let v4 = rules.iter().enumerate().filter_map(|(i, r)| V4Rule::of(i as u32, r)).collect();
            trie::compile(v4, budget)
        });
        // Trees for the rest: with tries, the rules that can match an IPv6 address
        // (and never a rule with an empty range, which matches nothing).
        let ids: Vec<u32> = (0..rules.len() as u32)
            .filter(|&i| {
                let r = &rules[i as usize];
                r.ranges.iter().all(|&(lo, hi)| lo <= hi) && (tries.is_none() || !trie::ipv4_only(r))
            })
            .collect();
        let trees = Self::build_trees(&rules, &ids);
        let verdicts = rules
            .iter()
            .map(|r| match r.action {
                Action::Permit => AclCounter::Permitted,
                Action::Deny => AclCounter::Denied,
                Action::Count => AclCounter::Counted,
            } as u8)
            .collect();
        Classifier { rules, verdicts, trees, tries }
    }

    fn build_trees(rules: &[Rule], ids: &[u32]) -> Vec<Tree> {
        let mut groups: Vec<(u8, Vec<u32>)> = Vec::new();
        for (i, r) in ids.iter().map(|&i| (i as usize, &rules[i as usize])) {
            let g = r
                .ranges
                .iter()
                .zip(WIDE)
                .enumerate()
                .take(GROUP_FIELDS)
                .fold(0u8, |g, (f, (&(lo, hi), w))| g | (u8::from(hi - lo >= w - 1) << f));
            match groups.iter_mut().find(|x| x.0 == g) {
                Some(x) => x.1.push(i as u32),
                None => groups.push((g, vec![i as u32])),
            }
        }
        let full = [(0, u128::MAX); FIELDS];
        groups
            .iter()
            .map(|(_, ids)| {
                let mut t = Tree::default();
                t.build(rules, ids, full, 0);
                t
            })
            .collect()
    }

    /// Index of the first rule matching `key`.
    #[inline]
    pub fn lookup(&self, key: &[u128; FIELDS]) -> Option<usize> {
        if let (Some(tries), Some(k)) = (&self.tries, trie::v4_key(key)) {
            let best = tries.iter().map(|t| t.lookup(&k)).min().unwrap_or(MISS);
            return (best != MISS).then_some(best as usize);
        }
        self.tree_lookup(key)
    }

    /// The first rule matching each key (its index), into `found`: IPv4 keys through
    /// the tries a burst at a time, the others through the trees.
    pub fn lookup_burst(&self, keys: &[[u128; FIELDS]], found: &mut [Option<usize>]) {
        let Some(tries) = &self.tries else {
            for (k, f) in keys.iter().zip(found) {
                *f = self.tree_lookup(k);
            }
            return;
        };
        for (keys, found) in keys.chunks(CHUNK).zip(found.chunks_mut(CHUNK)) {
            let mut v4 = [[0u8; 16]; CHUNK];
            let mut at = [0u8; CHUNK];
            let mut n = 0;
            for (i, (k, f)) in keys.iter().zip(found.iter_mut()).enumerate() {
                match trie::v4_key(k) {
                    Some(b) => {
                        v4[n] = b;
                        at[n] = i as u8;
                        n += 1;
                    }
                    None => *f = self.tree_lookup(k),
                }
            }
            let mut best = [MISS; CHUNK];
            for t in tries {
                t.lookup_burst(&v4[..n], &mut best[..n]);
            }
            for (&b, &i) in best[..n].iter().zip(&at[..n]) {
                found[usize::from(i)] = (b != MISS).then_some(b as usize);
            }
        }
    }

    /// The first rule matching each IPv4 key ([`trie::v4_key`]), or [`trie::MISS`],
    /// into `found`.
    pub fn lookup_v4_burst(&self, keys: &[trie::V4Key], found: &mut [u32]) {
        found.fill(MISS);
        match &self.tries {
            Some(tries) => tries.iter().for_each(|t| t.lookup_burst(keys, found)),
            None => {
                for (k, f) in keys.iter().zip(found) {
                    *f = self.tree_lookup(&trie::key_of_v4(k)).map_or(MISS, |i| i as u32);
                }
            }
        }
    }

    fn tree_lookup(&self, key: &[u128; FIELDS]) -> Option<usize> {
        let mut best = usize::MAX;
        for t in &self.trees {
            if let Some(i) = t.lookup(&self.rules, key, best) {
                best = i;
            }
        }
        (best != usize::MAX).then_some(best)
    }

    /// The counter of a packet whose first matching rule is `r` ([`MISS`]: none; its
    /// counter is then `miss`, the default's).
    #[inline(always)]
    fn verdict(&self, r: u32, miss: u8) -> u8 {
        // MISS is past every rule: one bounds check tells a match from none.
        self.verdicts.get(r as usize).copied().unwrap_or(miss)
    }

    /// The rule at `i`.
    pub fn rule(&self, i: usize) -> &Rule {
        &self.rules[i]
    }

    /// Depth of the deepest leaf (for the benchmark's report).
    pub fn depth(&self) -> usize {
        self.trees.iter().map(|t| t.depth(0)).max().unwrap_or(0)
    }

    /// Trees (groups of rules).
    pub fn trees(&self) -> usize {
        self.trees.len()
    }

    /// Rule slots in all leaves (a rule is repeated in every leaf it overlaps).
    pub fn leaf_slots(&self) -> usize {
        self.trees.iter().map(|t| t.leaf_rules.len()).sum()
    }

    /// IPv4 tries (0: IPv4 keys use the trees).
    pub fn tries(&self) -> usize {
        self.tries.as_ref().map_or(0, Vec::len)
    }

    /// Nodes of the tries, and the bytes their tables take.
    pub fn trie_size(&self) -> (usize, usize) {
        self.tries.iter().flatten().fold((0, 0), |(n, b), t| (n + t.nodes(), b + t.bytes()))
    }
}

impl Tree {
    /// The first rule below `below` (an index) matching `key`.
    #[inline]
    fn lookup(&self, rules: &[Rule], key: &[u128; FIELDS], below: usize) -> Option<usize> {
        let mut n = 0usize;
        loop {
            match self.nodes[n] {
                TreeNode::Split { field, at, left, right } => {
                    n = if key[usize::from(field)] < at { left } else { right } as usize;
                }
                TreeNode::Leaf { start, len } => {
                    let ids = &self.leaf_rules[start as usize..(start + len) as usize];
                    return ids.iter().map(|&i| i as usize).take_while(|&i| i < below).find(|&i| rules[i].matches(key));
                }
            }
        }
    }

    fn depth(&self, n: usize) -> usize {
        match self.nodes.get(n) {
            Some(TreeNode::Split { left, right, .. }) => {
                1 + self.depth(*left as usize).max(self.depth(*right as usize))
            }
            _ => 0,
        }
    }

    /// Build the subtree of `ids` (rules overlapping `bounds`); returns its index.
    fn build(&mut self, rules: &[Rule], ids: &[u32], bounds: [(u128, u128); FIELDS], depth: usize) -> u32 {
        let me = self.nodes.len() as u32;
        self.nodes.push(TreeNode::Leaf { start: 0, len: 0 });
        let room = self.leaf_rules.len() + 2 * ids.len() <= MAX_LEAF_SLOTS;
        let split =
            if ids.len() > LEAF_RULES && depth < MAX_DEPTH && room { best_split(rules, ids, &bounds) } else { None };
        match split {
            None => {
                let start = self.leaf_rules.len() as u32;
                self.leaf_rules.extend_from_slice(ids);
                self.nodes[me as usize] = TreeNode::Leaf { start, len: ids.len() as u32 };
            }
            Some((field, at)) => {
                let (mut lb, mut rb) = (bounds, bounds);
                lb[field].1 = at - 1;
                rb[field].0 = at;
                let left_ids: Vec<u32> =
                    ids.iter().copied().filter(|&i| rules[i as usize].ranges[field].0 < at).collect();
                let right_ids: Vec<u32> =
                    ids.iter().copied().filter(|&i| rules[i as usize].ranges[field].1 >= at).collect();
                let left = self.build(rules, &left_ids, lb, depth + 1);
                let right = self.build(rules, &right_ids, rb, depth + 1);
                self.nodes[me as usize] = TreeNode::Split { field: field as u8, at, left, right };
            }
        }
        me
    }
}

/// The field and point (a rule boundary inside `bounds`) whose split copies the
/// fewest rules into both sides, then leaves the fewest on the larger side; `None`
/// if no split makes progress.
fn best_split(rules: &[Rule], ids: &[u32], bounds: &[(u128, u128); FIELDS]) -> Option<(usize, u128)> {
    let mut best: Option<((usize, usize), usize, u128)> = None; // ((both + larger), field, at)
    for (f, &(blo, bhi)) in bounds.iter().enumerate() {
        // Candidate points: where a rule's range starts or ends, inside the box.
        let mut points: Vec<u128> = ids
            .iter()
            .flat_map(|&i| {
                let (lo, hi) = rules[i as usize].ranges[f];
                [lo, hi.saturating_add(1)]
            })
            .filter(|&p| p > blo && p <= bhi)
            .collect();
        if points.is_empty() {
            continue;
        }
        points.sort_unstable();
        points.dedup();
        // Up to 16 points spread over the sorted boundaries.
        let step = points.len().div_ceil(16);
        for &at in points.iter().step_by(step) {
            let l = ids.iter().filter(|&&i| rules[i as usize].ranges[f].0 < at).count();
            let r = ids.iter().filter(|&&i| rules[i as usize].ranges[f].1 >= at).count();
            let larger = l.max(r);
            let cost = (larger + (l + r - ids.len()) / 2, larger);
            if larger < ids.len() && best.is_none_or(|b| cost < b.0) {
                best = Some((cost, f, at));
            }
        }
    }
    best.map(|(_, f, at)| (f, at))
}

/// Why a frame has no lookup key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoKey {
    /// Not IPv4 or IPv6 (after up to two VLAN tags): passed on.
    NotIp,
    /// IP that cannot be classified: a header cut short or inconsistent, an IPv6
    /// extension-header chain that is malformed or longer than the walk's bound, a
    /// first fragment too short to hold its ports (RFC 1858's tiny fragments).
    /// Dropped: passing it would let a header chain hide the ports a rule names.
    Malformed,
}

/// The lookup key of an IP frame (its first segment): source, destination, protocol,
/// ports. IPv6 extension headers (hop-by-hop, routing, destination options,
/// fragment, AH) are walked to the transport header ([`ipv6::transport_at_hand`]),
/// so a header in front of the transport does not hide its ports.
pub fn key_of(frame: &[u8]) -> Result<[u128; FIELDS], NoKey> {
    let (ethertype, off) = l3_offset(frame).map_err(|_| NoKey::NotIp)?;
    let ip = frame.get(off..).ok_or(NoKey::NotIp)?;
    let (src, dst, proto, l4) = match ethertype {
        EtherType::IPV4 => {
            let ihl = usize::from(ip.first().ok_or(NoKey::Malformed)? & 0x0f) * 4;
            if ip.len() < 20 || ihl < 20 || ip[0] >> 4 != 4 {
                return Err(NoKey::Malformed);
            }
            let later_fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff != 0;
            let v4 = |b: &[u8]| u128::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])) | 0xffff << 32;
            // The packet ends at its total length: bytes after it (Ethernet padding, or
            // bytes put there to be read as ports) are not its transport header.
            let end = usize::from(u16::from_be_bytes([ip[2], ip[3]])).min(ip.len());
            let l4 = if later_fragment { None } else { Some(ip.get(ihl..end).ok_or(NoKey::Malformed)?) };
            (v4(&ip[12..16]), v4(&ip[16..20]), ip[9], l4)
        }
        EtherType::IPV6 => {
            if ip.len() < ipv6::HEADER_LEN || ip[0] >> 4 != 6 {
                return Err(NoKey::Malformed);
            }
            let t = ipv6::transport_at_hand(ip).map_err(|_| NoKey::Malformed)?;
            let a = |b: &[u8]| u128::from_be_bytes(b.try_into().unwrap_or_default());
            let end = (ipv6::HEADER_LEN + usize::from(u16::from_be_bytes([ip[4], ip[5]]))).min(ip.len());
            let l4 = if t.later_fragment { None } else { ip.get(t.offset..end) };
            (a(&ip[8..24]), a(&ip[24..40]), t.protocol.0, l4)
        }
        _ => return Err(NoKey::NotIp),
    };
    let ports = match (proto, l4) {
        (6 | 17 | 132, Some(l4)) if l4.len() >= 4 => {
            [u16::from_be_bytes([l4[0], l4[1]]), u16::from_be_bytes([l4[2], l4[3]])]
        }
        (6 | 17 | 132, Some(_)) => return Err(NoKey::Malformed),
        _ => [0, 0],
    };
    Ok([src, dst, u128::from(proto), u128::from(ports[0]), u128::from(ports[1])])
}

/// `any`, an address (its whole length) or a prefix `ADDR/LEN`, as a range of
/// IPv6 (or IPv4-mapped) addresses.
pub fn parse_prefix(s: &str) -> Result<(u128, u128), String> {
    if s == "any" {
        return Ok((0, u128::MAX));
    }
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let addr: IpAddr =
        addr.parse().map_err(|_| format!("`{s}`: not an address or prefix (e.g. 198.18.0.0/15, fd00::/8, any)"))?;
    let (bits, max) = match addr {
        IpAddr::V4(a) => (u128::from(a.to_ipv6_mapped()), 32u32),
        IpAddr::V6(a) => (u128::from(a), 128u32),
    };
    let len: u32 = match len {
        Some(l) => l.parse().ok().filter(|&l| l <= max).ok_or_else(|| format!("`{s}`: prefix length 0..={max}"))?,
        None => max,
    };
    let host_bits = max - len;
    let mask = if host_bits == 128 { u128::MAX } else { (1u128 << host_bits) - 1 };
    if bits & mask != 0 {
        return Err(format!("`{s}`: address bits set past the prefix length"));
    }
    Ok((bits, bits | mask))
}

/// `any`, a port, or `LO-HI`.
pub fn parse_ports(s: &str) -> Result<(u128, u128), String> {
    if s == "any" {
        return Ok((0, 65535));
    }
    let bad = || format!("`{s}`: a port, LO-HI, or any");
    let (lo, hi) = match s.split_once('-') {
        Some((a, b)) => (a.trim().parse::<u16>().map_err(|_| bad())?, b.trim().parse::<u16>().map_err(|_| bad())?),
        None => {
            let p = s.parse::<u16>().map_err(|_| bad())?;
            (p, p)
        }
    };
    if lo > hi {
        return Err(bad());
    }
    Ok((u128::from(lo), u128::from(hi)))
}

/// `any`, a protocol name (tcp, udp, icmp, icmpv6, sctp) or its number.
pub fn parse_proto(s: &str) -> Result<(u128, u128), String> {
    let n: u8 = match s {
        "any" => return Ok((0, 255)),
        "tcp" => 6,
        "udp" => 17,
        "icmp" => 1,
        "icmpv6" => 58,
        "sctp" => 132,
        _ => s.parse().map_err(|_| format!("`{s}`: tcp, udp, icmp, icmpv6, sctp, a number 0..=255, or any"))?,
    };
    Ok((u128::from(n), u128::from(n)))
}

/// The node.
pub struct Acl {
    rules: Classifier,
    default: Action,
    /// The control-plane half, until the graph takes it.
    ctl: Option<AclCtl>,
    /// A chunk's keys and results, kept between bursts (clearing 4 KiB of arrays on
    /// the stack each burst cost as much as a tenth of the lookups).
    scratch: Box<Scratch>,
}

/// What [`Acl::process`] works in, a chunk of packets at a time; each array is
/// written before it is read.
struct Scratch {
    /// Plain IPv4 frames' keys, straight from their bytes, and their packets.
    v4: [trie::V4Key; CHUNK],
    v4_at: [u8; CHUNK],
    v4_found: [u32; CHUNK],
    /// The other frames' keys, parsed whole, and their packets.
    keys: [[u128; FIELDS]; CHUNK],
    at: [u8; CHUNK],
    found: [Option<usize>; CHUNK],
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch {
            v4: [[0; 16]; CHUNK],
            v4_at: [0; CHUNK],
            v4_found: [MISS; CHUNK],
            keys: [[0; FIELDS]; CHUNK],
            at: [0; CHUNK],
            found: [None; CHUNK],
        }
    }
}

impl Acl {
    /// An ACL of `rules` (first match wins), `default` for packets none matches.
    pub fn new(rules: Vec<Rule>, default: Action) -> Self {
        let texts = rules.iter().map(rule_text).collect();
        Acl {
            rules: Classifier::new(rules),
            default,
            ctl: Some(AclCtl { rules: texts, default }),
            scratch: Box::default(),
        }
    }
}

/// A rule as `acl rule add` takes it and `show acl` prints it: the action, then the
/// fields that are not `any`.
fn rule_text(r: &Rule) -> String {
    let mut s = r.action.name().to_string();
    let names = ["src", "dst", "proto", "sport", "dport"];
    for (k, (&(lo, hi), any)) in r.ranges.iter().zip(ANY).enumerate() {
        if (lo, hi) == any {
            continue;
        }
        let v = match k {
            0 | 1 => prefix_text(lo, hi),
            _ if lo == hi => lo.to_string(),
            _ => format!("{lo}-{hi}"),
        };
        s.push_str(&format!(" {} {v}", names[k]));
    }
    s
}

/// An address range that is a prefix, as written (`198.18.0.0/15`, `fd00::/8`).
fn prefix_text(lo: u128, hi: u128) -> String {
    let len = (lo ^ hi).leading_zeros();
    let a = Ipv6Addr::from(lo);
    match a.to_ipv4_mapped() {
        Some(v4) if len >= 96 => format!("{v4}/{}", len - 96),
        _ => format!("{a}/{len}"),
    }
}

/// How one field of a rule is read.
type FieldParser = fn(&str) -> Result<(u128, u128), String>;

/// A rule from `ACTION [src P] [dst P] [proto X] [sport X] [dport X]`.
fn parse_rule(words: &[&str]) -> Result<Rule, String> {
    let usage = "a rule: permit|deny|count [src PREFIX] [dst PREFIX] [proto P] [sport PORTS] [dport PORTS]";
    let (action, rest) = words.split_first().ok_or(usage)?;
    let action = Action::from_name(action).ok_or_else(|| format!("`{action}` is not an action; {usage}"))?;
    let mut ranges = ANY;
    let mut it = rest.iter();
    while let Some(&field) = it.next() {
        let (k, parse): (usize, FieldParser) = match field {
            "src" => (0, parse_prefix),
            "dst" => (1, parse_prefix),
            "proto" => (2, parse_proto),
            "sport" => (3, parse_ports),
            "dport" => (4, parse_ports),
            other => return Err(format!("unknown field `{other}`; {usage}")),
        };
        let v = it.next().ok_or_else(|| format!("`{field}` needs a value"))?;
        ranges[k] = parse(v).map_err(|e| format!("`{field}`: {e}"))?;
    }
    Ok(Rule { ranges, action })
}

/// The controller of one `acl` node: the rules as text; every change compiles the
/// whole new rule set here and hands it to the node, which swaps it in between two
/// bursts and hands the old one back.
struct AclCtl {
    rules: Vec<String>,
    default: Action,
}

const ACL_GRAMMAR: &[(&str, &str)] = &[
    (
        "acl rule add [at <N>] permit|deny|count [<FIELD> <VALUE> ...]",
        "insert a rule (at position N, default last); fields src, dst (prefixes), proto, sport, dport",
    ),
    ("acl rule replace <N> permit|deny|count [<FIELD> <VALUE> ...]", "replace rule N"),
    ("acl rule del <N>", "remove rule N"),
    ("show acl", "the rules in order (first match wins) and the default"),
];

impl Controller for AclCtl {
    fn grammar(&self) -> &'static [(&'static str, &'static str)] {
        ACL_GRAMMAR
    }

    fn accepts(&self, words: &[&str]) -> bool {
        matches!(words, ["acl", ..] | ["show", "acl", ..])
    }

    fn command(&mut self, words: &[&str], remote: &Remote) -> Result<String, String> {
        let n = self.rules.len();
        let index = |w: &str, max: usize| -> Result<usize, String> {
            w.parse::<usize>().ok().filter(|&i| i < max).ok_or_else(|| {
                if max == 0 {
                    format!("`{w}`: there is no rule (show acl)")
                } else {
                    format!("`{w}` is not a rule number in 0..={} (show acl)", max - 1)
                }
            })
        };
        let mut rules = self.rules.clone();
        let what = match words {
            ["show", "acl"] => {
                let mut s = format!(
                    "{n} rules, first match wins; default {}
",
                    self.default.name()
                );
                for (i, r) in self.rules.iter().enumerate() {
                    s.push_str(&format!(
                        "{i:>6}: {r}
"
                    ));
                }
                return Ok(s);
            }
            ["acl", "rule", "add", "at", at, rule @ ..] => {
                let at = index(at, n + 1)?;
                rules.insert(at, rule_text(&parse_rule(rule)?));
                format!("rule {at} added")
            }
            ["acl", "rule", "add", rule @ ..] => {
                rules.push(rule_text(&parse_rule(rule)?));
                format!("rule {n} added")
            }
            ["acl", "rule", "replace", at, rule @ ..] => {
                let at = index(at, n)?;
                rules[at] = rule_text(&parse_rule(rule)?);
                format!("rule {at} replaced")
            }
            ["acl", "rule", "del" | "delete", at] => {
                let at = index(at, n)?;
                rules.remove(at);
                format!("rule {at} removed")
            }
            _ => return Err(format!("usage: {}", ACL_GRAMMAR.iter().map(|g| g.0).collect::<Vec<_>>().join(" | "))),
        };
        let start = std::time::Instant::now();
        let parsed: Vec<Rule> =
            rules.iter().map(|t| parse_rule(&t.split_whitespace().collect::<Vec<_>>())).collect::<Result<_, _>>()?;
        let old = remote.call(Box::new(Classifier::new(parsed)))?;
        if old.downcast::<Classifier>().is_err() {
            return Err("the node did not take the new rule set (it panicked): nothing changed".into());
        }
        self.rules = rules;
        Ok(format!(
            "{what}: {} rules, compiled and in force in {:.1} ms",
            self.rules.len(),
            start.elapsed().as_secs_f64() * 1e3
        ))
    }
}

impl Node for Acl {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, next: &mut [u16; MAX_BURST]) -> Dispatch {
        let mut n = [0u64; AclCounter::SPECS.len()];
        let miss = match self.default {
            Action::Deny => AclCounter::DefaultDeny,
            Action::Permit | Action::Count => AclCounter::DefaultPermit,
        } as u8;
        // A chunk of keys at a time. Plain IPv4 frames straight to the tries' keys;
        // the rest parsed whole.
        let Scratch { v4, v4_at, v4_found, keys, at, found } = &mut *self.scratch;
        for start in (0..pkts.len()).step_by(CHUNK) {
            let (mut k, mut f) = (0, 0);
            let end = pkts.len().min(start + CHUNK);
            let next = &mut next[start..end];
            // Each packet's counter, one byte a counter in one word (a chunk adds at
            // most CHUNK to a byte): no store and reload of a counter per packet.
            let mut tally = 0u64;
            let mut count = |c: u8| tally += 1 << ((8 * u32::from(c)) & 63);
            for (j, nx) in next.iter_mut().enumerate() {
                let data = pkts.data(start + j);
                if let Some(key) = trie::fast_v4_key(data) {
                    v4[f] = key;
                    v4_at[f] = j as u8;
                    f += 1;
                    continue;
                }
                match key_of(data) {
                    Ok(key) => {
                        keys[k] = key;
                        at[k] = j as u8;
                        k += 1;
                    }
                    Err(e) => {
                        let c = match e {
                            NoKey::NotIp => AclCounter::NotIp,
                            NoKey::Malformed => AclCounter::Malformed,
                        } as u8;
                        count(c);
                        *nx = EDGE[usize::from(c & 7)];
                    }
                }
            }
            self.rules.lookup_v4_burst(&v4[..f], &mut v4_found[..f]);
            for (&j, &r) in v4_at[..f].iter().zip(&v4_found[..f]) {
                let c = self.rules.verdict(r, miss);
                count(c);
                next[usize::from(j)] = EDGE[usize::from(c & 7)];
            }
            if k > 0 {
                self.rules.lookup_burst(&keys[..k], &mut found[..k]);
                for (&j, &r) in at[..k].iter().zip(&found[..k]) {
                    let c = self.rules.verdict(r.map_or(MISS, |r| r as u32), miss);
                    count(c);
                    next[usize::from(j)] = EDGE[usize::from(c & 7)];
                }
            }
            for (c, v) in n.iter_mut().enumerate() {
                *v += tally >> (8 * c) & 0xff;
            }
        }
        for (k, &v) in n.iter().enumerate() {
            if v > 0 {
                cx.count(k, v);
            }
        }
        Dispatch::Each
    }

    fn counters(&self) -> &'static [CounterSpec] {
        AclCounter::SPECS
    }

    fn controller(&mut self) -> Option<Box<dyn Controller>> {
        self.ctl.take().map(|c| Box::new(c) as Box<dyn Controller>)
    }

    fn apply(&mut self, _cx: &mut NodeCx<'_>, msg: Msg) -> Msg {
        match msg.downcast::<Classifier>() {
            Ok(mut new) => {
                std::mem::swap(&mut self.rules, &mut *new);
                new
            }
            Err(m) => m,
        }
    }
}

/// The edge of a packet by its counter ([`AclCounter`] as a byte, `& 7`): a deny,
/// a default deny and a malformed packet are dropped, the rest go on.
const EDGE: [u16; 8] = {
    const _: () = assert!(AclCounter::SPECS.len() <= 8);
    let mut e = [0; 8];
    e[AclCounter::Denied as usize] = DROP;
    e[AclCounter::DefaultDeny as usize] = DROP;
    e[AclCounter::Malformed as usize] = DROP;
    e
};

const RULE: &[ParamSpec] = &[
    ParamSpec::new("action", ParamKind::Enum(Action::NAMES)).required().doc("what to do with a match"),
    ParamSpec::new("src", ParamKind::Str)
        .default("any")
        .doc("source: a prefix (198.18.0.0/15, fd00::/8), an address, or any"),
    ParamSpec::new("dst", ParamKind::Str).default("any").doc("destination, as src"),
    ParamSpec::new("proto", ParamKind::Str).default("any").doc("tcp, udp, icmp, icmpv6, sctp, a number, or any"),
    ParamSpec::new("sport", ParamKind::Str).default("any").doc("source port: a port, LO-HI, or any"),
    ParamSpec::new("dport", ParamKind::Str).default("any").doc("destination port, as sport"),
];

/// The rules of the `rules` parameter, in order; an error names the rule and its
/// field, at the field's position in the file.
fn rules_of(p: &Params) -> Result<Vec<Rule>, (Option<Loc>, String)> {
    let rule = |i: usize, r: &Params| -> Result<Rule, (Option<Loc>, String)> {
        let field = |name: &'static str, parse: fn(&str) -> Result<(u128, u128), String>| {
            parse(r.str(name).unwrap_or("any")).map_err(|e| (r.loc(name), format!("rule {i}, `{name}`: {e}")))
        };
        Ok(Rule {
            ranges: [
                field("src", parse_prefix)?,
                field("dst", parse_prefix)?,
                field("proto", parse_proto)?,
                field("sport", parse_ports)?,
                field("dport", parse_ports)?,
            ],
            action: r.choice("action").ok_or((r.loc("action"), format!("rule {i}: `action` is required")))?,
        })
    };
    p.records("rules").unwrap_or(&[]).iter().enumerate().map(|(i, r)| rule(i, r)).collect()
}

/// `acl`.
pub const KIND: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "acl",
        doc: "ordered 5-tuple rules (prefixes, protocol, port ranges) that permit, deny or count; the first match decides",
        params: &[
            ParamSpec::new("rules", ParamKind::Records(RULE)).default("[]").doc("the rules, first match wins"),
            ParamSpec::new("default", ParamKind::Enum(Action::NAMES)).default("permit").doc("what happens to packets no rule matches"),
        ],
        nexts: Nexts::Fixed(&["out"]),
        check: Some(|p| rules_of(p).map(drop)),
        ..NodeSpec::DEFAULT
    },
    build: |b, _env| {
        let p = b.params();
        let rules = rules_of(p.raw()).map_err(|(_, reason)| NodeError::Param { param: "rules", reason })?;
        let default = match p.choice::<Action>("default")? {
            Action::Count => Action::Permit,
            a => a,
        };
        Ok(Box::new(Acl::new(rules, default)))
    },
};

/// `any` as a rule range for tests and benchmarks: every field open.
pub const ANY: [(u128, u128); FIELDS] = [(0, u128::MAX), (0, u128::MAX), (0, 255), (0, 65535), (0, 65535)];

/// The IPv4-mapped form of `a` (how IPv4 keys are looked up).
pub fn v4_key(a: std::net::Ipv4Addr) -> u128 {
    u128::from(a.to_ipv6_mapped())
}

/// The key of an IPv6 address.
pub fn v6_key(a: Ipv6Addr) -> u128 {
    u128::from(a)
}

/// Random rule sets and keys (IPv4 prefixes in 192.0.0.0/4 .. , ports, protocols), for
/// the tests and `benches/acl.rs`.
pub mod sample {
    use super::*;
    use std::net::Ipv4Addr;

    /// A small deterministic generator.
    pub struct Lcg(pub u64);
    impl Lcg {
        /// The next number (53 bits).
        pub fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            self.0 >> 11
        }
    }

    /// Random rules shaped as firewall ACLs are: source prefixes /16../32 (1 in 32
    /// `any`), destination prefixes /20../32 (1 in 64 `any`), mostly any source port,
    /// a destination port or range, TCP or UDP (1 in 5 any protocol). With `dense`,
    /// prefixes from /8 and open ranges are common: rules overlap heavily (a test of
    /// the tree, not a rule set anyone writes).
    pub fn random_rules(g: &mut Lcg, n: usize, dense: bool) -> Vec<Rule> {
        let (any_in, min_src, min_dst) = if dense { (8, 8, 8) } else { (32, 16, 20) };
        (0..n)
            .map(|_| {
                let prefix = |g: &mut Lcg, min: u64, any: u64| {
                    if g.next_u64().is_multiple_of(any) {
                        return (0, u128::MAX);
                    }
                    let len = (min + g.next_u64() % (33 - min)) as u32;
                    let a = Ipv4Addr::from(((g.next_u64() as u32) & 0x0f0f_ffff) | 0xc000_0000);
                    parse_prefix(&format!("{}/{len}", Ipv4Addr::from(u32::from(a) & (u32::MAX << (32 - len)))))
                        .expect("prefix")
                };
                let ports = |g: &mut Lcg, open: u64| match g.next_u64() % 10 {
                    k if k < open => (0, 65535),
                    k if k < open + (10 - open) / 2 => {
                        let p = u128::from(g.next_u64() % 2000);
                        (p, p)
                    }
                    _ => {
                        let lo = u128::from(g.next_u64() % 60000);
                        (lo, lo + u128::from(g.next_u64() % 5000))
                    }
                };
                let proto = match g.next_u64() % 5 {
                    0 => (0, 255),
                    1 | 2 => (6, 6),
                    _ => (17, 17),
                };
                let action = match g.next_u64() % 3 {
                    0 => Action::Permit,
                    1 => Action::Deny,
                    _ => Action::Count,
                };
                let src = prefix(g, min_src, any_in);
                let dst = prefix(g, min_dst, 2 * any_in);
                let (sport, dport) = if dense { (ports(g, 3), ports(g, 3)) } else { (ports(g, 9), ports(g, 1)) };
                Rule { ranges: [src, dst, proto, sport, dport], action }
            })
            .collect()
    }

    /// A random key in the space of [`random_rules`].
    pub fn random_key(g: &mut Lcg) -> [u128; FIELDS] {
        let a = |g: &mut Lcg| v4_key(Ipv4Addr::from(((g.next_u64() as u32) & 0x0f0f_ffff) | 0xc000_0000));
        [
            a(g),
            a(g),
            [6, 17, 1][(g.next_u64() % 3) as usize],
            u128::from(g.next_u64() % 65536),
            u128::from(g.next_u64() % 2000),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::sample::{random_key, random_rules, Lcg};
    use super::*;
    use crate::tests::{burst, call, counter, eth, ipv4, pool, stats, PEER_MAC, US_MAC};
    use ironpath_wire::IpAddress;
    use std::net::Ipv4Addr;

    #[test]
    fn the_tree_finds_the_first_match_as_a_linear_scan_does() {
        let mut g = Lcg(1);
        for (n, dense) in [(0, false), (1, false), (7, true), (9, true), (50, true), (1000, true), (3000, false)] {
            let rules = random_rules(&mut g, n, dense);
            let c = Classifier::new(rules.clone());
            for _ in 0..5000 {
                let k = random_key(&mut g);
                assert_eq!(c.lookup(&k), rules.iter().position(|r| r.matches(&k)), "{n} rules, key {k:x?}");
            }
        }
    }

    /// Keys at and around the ends of random rules' ranges (each field at its low end,
    /// one below it, its high end, one above, or inside), where the tries' byte-wise
    /// bounds are tested hardest; IPv4 unless `v6`, in which case addresses are also
    /// drawn from IPv6 and from the mapped space's edges.
    fn edge_keys(g: &mut Lcg, rules: &[Rule], n: usize, v6: bool) -> Vec<[u128; FIELDS]> {
        let (m_lo, m_hi) = (0xffff_0000_0000u128, 0xffff_ffff_ffffu128);
        (0..n)
            .map(|_| {
                let mut k = random_key(g);
                if let Some(r) = rules.get(g.next_u64() as usize % rules.len().max(1)) {
                    for (f, &(lo, hi)) in r.ranges.iter().enumerate() {
                        let max = [u128::MAX, u128::MAX, 255, 65535, 65535][f];
                        let v = match g.next_u64() % 6 {
                            0 => lo,
                            1 => lo.saturating_sub(1),
                            2 => hi,
                            3 => hi.saturating_add(1).min(max),
                            4 => lo + (hi - lo) / 2,
                            _ => k[f],
                        };
                        k[f] = if f < 2 && !v6 { v.clamp(m_lo, m_hi) } else { v };
                    }
                }
                if v6 && g.next_u64().is_multiple_of(4) {
                    let f = (g.next_u64() % 2) as usize;
                    k[f] = [0xfd00 << 112 | u128::from(g.next_u64()), m_lo - 1, m_hi + 1, m_lo, m_hi]
                        [g.next_u64() as usize % 5];
                }
                k
            })
            .collect()
    }

    /// Every way the classifier looks a key up (the tries one key and a burst at a
    /// time, with AVX2, SSE2 and the portable compare; the trees) finds what a linear
    /// first-match scan finds.
    fn agrees_with_a_linear_scan(c: &Classifier, rules: &[Rule], keys: &[[u128; FIELDS]], what: &str) {
        let want: Vec<Option<usize>> = keys.iter().map(|k| rules.iter().position(|r| r.matches(k))).collect();
        let mut found = vec![Some(usize::MAX); keys.len()];
        c.lookup_burst(keys, &mut found);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(c.lookup(k), want[i], "{what}: lookup of key {k:x?}");
            assert_eq!(found[i], want[i], "{what}: lookup_burst, key {i} {k:x?}");
        }
        for t in c.tries.iter().flatten() {
            let v4: Vec<trie::V4Key> = keys.iter().filter_map(trie::v4_key).collect();
            let (mut a, mut b) = (vec![MISS; v4.len()], vec![MISS; v4.len()]);
            t.lookup_burst(&v4, &mut a);
            t.lookup_burst_portable(&v4, &mut b);
            assert_eq!(a, b, "{what}: AVX2 (where the CPU has it) and portable walks differ");
            // From MISS again: a walk keeps the smaller of `best` and its own.
            b.fill(MISS);
            t.lookup_burst_sse2(&v4, &mut b);
            assert_eq!(a, b, "{what}: AVX2 (where the CPU has it) and SSE2 walks differ");
            assert!(v4.iter().zip(&a).all(|(k, &r)| t.lookup(k) == r), "{what}: one key and a burst differ");
        }
    }

    #[test]
    fn the_tries_and_trees_find_the_first_match_as_a_linear_scan_does() {
        let mut g = Lcg(11);
        for (n, dense) in
            [(0, false), (1, false), (2, true), (7, true), (40, true), (300, false), (300, true), (2000, false)]
        {
            let rules = random_rules(&mut g, n, dense);
            let keys = edge_keys(&mut g, &rules, 3000, false);
            let c = Classifier::new(rules.clone());
            assert!(c.tries.is_some() || n > 100, "{n} rules (dense: {dense}) fit the tries");
            agrees_with_a_linear_scan(&c, &rules, &keys, &format!("tries, {n} rules, dense {dense}"));
            let t = Classifier::compile(rules.clone(), None);
            assert_eq!(t.tries(), 0);
            agrees_with_a_linear_scan(&t, &rules, &keys, &format!("trees, {n} rules, dense {dense}"));
        }
    }

    /// IPv6 rules and keys, IPv4 rules with IPv6 keys (and keys with one IPv4-mapped
    /// address): the tries take the keys whose addresses are both IPv4, the trees the
    /// rest, with every rule that can match them.
    #[test]
    fn ipv4_and_ipv6_rules_and_keys_mix() {
        let mut g = Lcg(5);
        for n in [1, 20, 200] {
            let mut rules = random_rules(&mut g, n, false);
            for (i, r) in rules.iter_mut().enumerate() {
                match i % 4 {
                    0 => r.ranges[0] = parse_prefix("fd00::/8").unwrap(),
                    1 => r.ranges[1] = parse_prefix(&format!("fd00:{:x}::/32", i)).unwrap(),
                    2 => r.ranges[0] = ANY[0],
                    _ => {}
                }
            }
            let keys = edge_keys(&mut g, &rules, 4000, true);
            agrees_with_a_linear_scan(&Classifier::new(rules.clone()), &rules, &keys, &format!("{n} mixed rules"));
        }
    }

    /// A rule set too large for the tries' budget is split into more tries, and past
    /// [`trie::MAX_TRIES`] left to the trees: the same answers either way.
    #[test]
    fn a_budget_too_small_splits_the_tries_then_leaves_the_rules_to_the_trees() {
        let mut g = Lcg(9);
        let rules = random_rules(&mut g, 200, false);
        let keys = edge_keys(&mut g, &rules, 3000, false);
        let roomy = Classifier::new(rules.clone());
        assert_eq!(roomy.tries(), 1);
        let (nodes, _) = roomy.trie_size();
        // A quarter of the whole per trie: the rules do not fit one trie, nor maybe
        // those with a narrow destination.
        let split = Classifier::compile(rules.clone(), Some(trie::Budget::new(2 * nodes, usize::MAX)));
        assert!(split.tries() >= 2, "{} tries", split.tries());
        assert!(split.trie_size().0 <= 2 * nodes);
        agrees_with_a_linear_scan(&split, &rules, &keys, "split tries");
        let none = Classifier::compile(rules.clone(), Some(trie::Budget::new(80, usize::MAX)));
        assert_eq!(none.tries(), 0);
        assert!(none.trees() > 0);
        agrees_with_a_linear_scan(&none, &rules, &keys, "no tries");
    }

    #[test]
    fn parses_prefixes_ports_and_protocols_and_refuses_the_rest() {
        assert_eq!(parse_prefix("any").unwrap(), (0, u128::MAX));
        let (lo, hi) = parse_prefix("198.18.0.0/15").unwrap();
        assert_eq!((lo, hi), (v4_key(Ipv4Addr::new(198, 18, 0, 0)), v4_key(Ipv4Addr::new(198, 19, 255, 255))));
        assert_eq!(
            parse_prefix("fd00::1").unwrap(),
            (v6_key("fd00::1".parse().unwrap()), v6_key("fd00::1".parse().unwrap()))
        );
        assert!(parse_prefix("198.18.0.1/15").unwrap_err().contains("past the prefix"));
        assert!(parse_prefix("198.18.0.0/33").unwrap_err().contains("0..=32"));
        assert!(parse_prefix("example").is_err());
        assert_eq!(parse_ports("80").unwrap(), (80, 80));
        assert_eq!(parse_ports("1024-65535").unwrap(), (1024, 65535));
        assert!(parse_ports("9-1").is_err() && parse_ports("70000").is_err());
        assert_eq!(parse_proto("udp").unwrap(), (17, 17));
        assert_eq!(parse_proto("47").unwrap(), (47, 47));
        assert!(parse_proto("gre").is_err());
    }

    fn udp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
        let mut l4 = [sport.to_be_bytes(), dport.to_be_bytes(), 8u16.to_be_bytes(), [0, 0]].concat();
        l4.extend_from_slice(&[0; 8]);
        eth(US_MAC, PEER_MAC, 0x0800, &ipv4(src.into(), dst.into(), 17, 64, &l4))
    }

    /// A frame carrying IPv4 key `k` (a UDP-sized transport header whatever its
    /// protocol), then one of: IP options, a later fragment, a total length too short
    /// for the ports, cut short, ARP, or unchanged (the most often).
    fn frame_of(g: &mut Lcg, k: &[u128; FIELDS]) -> Vec<u8> {
        let a = |v: u128| Ipv4Addr::from(v as u32);
        let mut l4 = [(k[3] as u16).to_be_bytes(), (k[4] as u16).to_be_bytes(), 8u16.to_be_bytes(), [0, 0]].concat();
        l4.extend_from_slice(&[0; 8]);
        let mut f = eth(US_MAC, PEER_MAC, 0x0800, &ipv4(a(k[0]), a(k[1]), k[2] as u8, 64, &l4));
        match g.next_u64() % 12 {
            0 => {
                // Four bytes of options (NOPs): IHL 6, the total length 4 more.
                f.splice(34..34, [1, 1, 1, 1]);
                f[14] = 0x46;
                let len = u16::from_be_bytes([f[16], f[17]]) + 4;
                f[16..18].copy_from_slice(&len.to_be_bytes());
            }
            1 => f[20] |= 0x01,
            2 => f[16..18].copy_from_slice(&(20 + g.next_u64() as u16 % 4).to_be_bytes()),
            3 => f.truncate(g.next_u64() as usize % f.len()),
            4 => f[12..14].copy_from_slice(&[0x08, 0x06]),
            _ => {}
        }
        f
    }

    /// The node's edge for each packet and its counters, over bursts of random
    /// lengths (past a chunk) of frames to and around random rules' edges (or of one
    /// frame throughout), some with
    /// options, later fragments, short, cut or not IP: what `key_of`, a first-match
    /// scan of the rules and the default say, packet by packet and counter by counter.
    #[test]
    fn the_node_decides_and_counts_as_a_scan_of_each_frame_says() {
        let mut g = Lcg(21);
        for default in [Action::Permit, Action::Deny] {
            let rules = random_rules(&mut g, 300, false);
            let mut acl = Acl::new(rules.clone(), default);
            let st = stats(&acl);
            let p = pool(512);
            let mut want = [0u64; AclCounter::SPECS.len()];
            for _ in 0..40 {
                let n = 1 + g.next_u64() as usize % MAX_BURST;
                let mut frames: Vec<Vec<u8>> =
                    edge_keys(&mut g, &rules, n, false).iter().map(|k| frame_of(&mut g, k)).collect();
                if g.next_u64().is_multiple_of(4) {
                    // One frame throughout: whole chunks with one verdict.
                    frames = vec![frames[0].clone(); MAX_BURST];
                }
                let mut b = burst(&p, &frames);
                let c = call(&mut acl, &st, &mut b, 0);
                for (i, f) in frames.iter().enumerate() {
                    let counter = match key_of(f) {
                        Err(NoKey::NotIp) => AclCounter::NotIp,
                        Err(NoKey::Malformed) => AclCounter::Malformed,
                        Ok(k) => match rules.iter().find(|r| r.matches(&k)).map(|r| r.action) {
                            Some(Action::Permit) => AclCounter::Permitted,
                            Some(Action::Deny) => AclCounter::Denied,
                            Some(Action::Count) => AclCounter::Counted,
                            None if default == Action::Deny => AclCounter::DefaultDeny,
                            None => AclCounter::DefaultPermit,
                        },
                    };
                    want[counter as usize] += 1;
                    let dropped =
                        matches!(counter, AclCounter::Denied | AclCounter::DefaultDeny | AclCounter::Malformed);
                    assert_eq!(c.next[i], if dropped { DROP } else { 0 }, "{counter:?}: frame {i} {f:02x?}");
                }
                b.free_all();
            }
            for (spec, &w) in AclCounter::SPECS.iter().zip(&want) {
                assert_eq!(counter(&st, spec.name), w, "{} (default {default:?})", spec.name);
            }
            // Every counter but the other default's was reached.
            assert_eq!(want.iter().filter(|&&w| w > 0).count(), 6, "{want:?}");
        }
    }

    #[test]
    fn the_node_permits_denies_counts_and_applies_the_default() {
        let deny_dns = Rule { ranges: [ANY[0], ANY[1], (17, 17), ANY[3], (53, 53)], action: Action::Deny };
        let count_net = Rule {
            ranges: [parse_prefix("198.18.7.0/24").unwrap(), ANY[1], ANY[2], ANY[3], ANY[4]],
            action: Action::Count,
        };
        let permit_hi = Rule { ranges: [ANY[0], ANY[1], ANY[2], ANY[3], (1024, 65535)], action: Action::Permit };
        let mut acl = Acl::new(vec![deny_dns, count_net, permit_hi], Action::Deny);
        let st = stats(&acl);
        let p = pool(16);
        let frames = [
            udp([198, 18, 7, 1], [198, 18, 0, 2], 5000, 53), // denied (first rule wins)
            udp([198, 18, 7, 1], [198, 18, 0, 2], 5000, 80), // counted
            udp([198, 18, 1, 1], [198, 18, 0, 2], 5000, 8080), // permitted
            udp([198, 18, 1, 1], [198, 18, 0, 2], 5000, 80), // default: deny
            eth([0xff; 6], PEER_MAC, 0x0806, &[0; 28]),      // not IP: passed
        ];
        let mut b = burst(&p, &frames);
        let c = call(&mut acl, &st, &mut b, 0);
        assert_eq!(&c.next[..5], &[DROP, 0, 0, DROP, 0]);
        for (name, v) in [("denied", 1), ("counted", 1), ("permitted", 1), ("default_deny", 1), ("not_ip", 1)] {
            assert_eq!(counter(&st, name), v, "{name}");
        }
        b.free_all();
    }

    /// A burst larger than the chunk the node classifies at a time: every packet gets
    /// its own verdict, in place.
    #[test]
    fn bursts_longer_than_a_chunk_are_classified_packet_by_packet() {
        let deny_dns = Rule { ranges: [ANY[0], ANY[1], (17, 17), ANY[3], (53, 53)], action: Action::Deny };
        let mut acl = Acl::new(vec![deny_dns], Action::Permit);
        let st = stats(&acl);
        let p = pool(256);
        let frames: Vec<Vec<u8>> = (0..3 * CHUNK + 5)
            .map(|i| match i % 3 {
                0 => udp([198, 18, 7, 1], [198, 18, 0, 2], 5000, 53),
                1 => udp([198, 18, 7, 1], [198, 18, 0, 2], 5000, 80),
                _ => eth([0xff; 6], PEER_MAC, 0x0806, &[0; 28]),
            })
            .collect();
        let mut b = burst(&p, &frames);
        let c = call(&mut acl, &st, &mut b, 0);
        for i in 0..frames.len() {
            assert_eq!(c.next[i], if i % 3 == 0 { DROP } else { 0 }, "packet {i}");
        }
        assert_eq!(counter(&st, "denied"), frames.len().div_ceil(3) as u64);
        assert_eq!(counter(&st, "not_ip"), (frames.len() / 3) as u64);
        b.free_all();
    }

    /// The node's fast path for plain IPv4 frames reads the key `key_of` reads, or
    /// leaves the frame to it: frames cut, with options, fragments, odd lengths and
    /// random bytes.
    #[test]
    fn the_fast_ipv4_key_is_key_of_s_or_none() {
        let mut g = Lcg(3);
        let base = udp([198, 18, 7, 1], [198, 18, 0, 2], 5000, 53);
        assert!(trie::fast_v4_key(&base).is_some(), "a plain UDP frame takes the fast path");
        let mut fast = 0;
        for i in 0..20_000 {
            let mut f = base.clone();
            for _ in 0..g.next_u64() % 4 {
                let at = 12 + g.next_u64() as usize % 30;
                f[at] = [g.next_u64() as u8, 0x45, 0x46, 0x4f, 0x08, 0x00, 1, 6, 17, 132, 0x20, 0x3f]
                    [(g.next_u64() % 12) as usize];
            }
            if i % 3 == 0 {
                f.truncate(g.next_u64() as usize % (base.len() + 1));
            }
            if let Some(k) = trie::fast_v4_key(&f) {
                fast += 1;
                assert_eq!(Some(k), key_of(&f).ok().as_ref().and_then(trie::v4_key), "frame {f:02x?}");
            }
        }
        assert!(fast > 5_000, "{fast} frames took the fast path");
    }

    #[test]
    fn later_fragments_match_only_rules_that_allow_port_zero() {
        let mut f = udp([198, 18, 1, 1], [198, 18, 0, 2], 5000, 53);
        f[14 + 7] = 0x10; // fragment offset 16 x 8: no ports in this fragment
        let k = key_of(&f).unwrap();
        assert_eq!((k[3], k[4]), (0, 0));
        let dns = Rule { ranges: [ANY[0], ANY[1], (17, 17), ANY[3], (53, 53)], action: Action::Deny };
        assert_eq!(Classifier::new(vec![dns]).lookup(&k), None);
        assert_eq!(key_of(&[0u8; 20]), Err(NoKey::NotIp));
    }

    /// UDP to port 53 over IPv6, behind the extension headers `ext` (each `(next
    /// header of the one before it, bytes)`: the chain starts with `first`).
    fn udp6_behind(first: u8, ext: &[&[u8]]) -> Vec<u8> {
        let src: Ipv6Addr = "fd00::1".parse().unwrap();
        let dst: Ipv6Addr = "fd00::2".parse().unwrap();
        let u = crate::tests::udp(IpAddress::V6(src), IpAddress::V6(dst), 5000, 53, &[1; 16]);
        let mut payload = ext.concat();
        payload.extend_from_slice(&u);
        eth(US_MAC, PEER_MAC, 0x86dd, &crate::tests::ipv6(src, dst, first, 64, &payload))
    }

    #[test]
    fn ipv6_extension_headers_do_not_hide_the_ports() {
        let deny_dns = Rule { ranges: [ANY[0], ANY[1], (17, 17), ANY[3], (53, 53)], action: Action::Deny };
        let mut acl = Acl::new(vec![deny_dns], Action::Permit);
        let st = stats(&acl);
        let p = pool(16);
        let hbh: &[u8] = &[60, 0, 1, 4, 0, 0, 0, 0]; // hop-by-hop, then destination options
        let dst_opts: &[u8] = &[17, 0, 1, 4, 0, 0, 0, 0]; // destination options, then UDP
        let atomic_frag: &[u8] = &[17, 0, 0, 0, 0, 0, 0, 7]; // offset 0, no more fragments
        let ah: &[u8] = &[17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]; // AH with 4 bytes of ICV
        let later_frag: &[u8] = &[17, 0, 0, 0x10, 0, 0, 0, 7]; // offset 2 x 8: no ports
        let long: Vec<u8> = [[60u8, 0, 0, 0, 0, 0, 0, 0]; ipv6::MAX_EXT_HEADERS].concat();
        let frames = [
            udp6_behind(17, &[]),
            udp6_behind(0, &[hbh, dst_opts]),
            udp6_behind(60, &[dst_opts]),
            udp6_behind(44, &[atomic_frag]),
            udp6_behind(51, &[ah]),
            udp6_behind(44, &[later_frag]),
            // A chain beyond the walk's bound, and one cut short: not classified, dropped.
            udp6_behind(60, &[&long, dst_opts]),
        ];
        let mut cut = udp6_behind(60, &[dst_opts]);
        cut.truncate(14 + 40 + 8 + 2);
        cut[14 + 4..14 + 6].copy_from_slice(&10u16.to_be_bytes());
        let mut all = frames.to_vec();
        all.push(cut);
        let mut b = burst(&p, &all);
        let c = call(&mut acl, &st, &mut b, 0);
        assert_eq!(&c.next[..8], &[DROP, DROP, DROP, DROP, DROP, 0, DROP, DROP]);
        assert_eq!(counter(&st, "denied"), 5);
        assert_eq!(counter(&st, "malformed"), 2);
        assert_eq!(counter(&st, "default_permit"), 1, "the later fragment has no ports: only port-0 rules");
        b.free_all();
    }

    /// Bytes after the IP packet's end (its total or payload length) are not read as
    /// ports: a first fragment that holds no transport header, padded with what
    /// looks like one, is not classified by it.
    #[test]
    fn bytes_after_the_packet_are_not_its_ports() {
        let deny_dns = Rule { ranges: [ANY[0], ANY[1], (17, 17), ANY[3], (53, 53)], action: Action::Deny };
        let permit_other = Rule { ranges: [ANY[0], ANY[1], (17, 17), ANY[3], ANY[4]], action: Action::Permit };
        let c = Classifier::new(vec![deny_dns, permit_other]);
        // IPv6: a first fragment (more to come) of destination options only, then 4
        // bytes past the payload that read as ports 40000 -> 53.
        let mut f = udp6_behind(44, &[&[60, 0, 0, 1, 0, 0, 0, 9], &[17, 0, 1, 4, 0, 0, 0, 0]]);
        let at = 14 + 40 + 16;
        f.truncate(at);
        f[14 + 4..14 + 6].copy_from_slice(&16u16.to_be_bytes());
        f.extend_from_slice(&[0x9c, 0x40, 0, 53]);
        assert_eq!(key_of(&f), Err(NoKey::Malformed), "no transport header within the packet");
        // IPv4: total length says 20 + 2, the frame carries the rest of a UDP header.
        let mut g = udp([198, 18, 1, 1], [198, 18, 0, 2], 40000, 53);
        g[14 + 2..14 + 4].copy_from_slice(&22u16.to_be_bytes());
        assert_eq!(key_of(&g), Err(NoKey::Malformed));
        let whole = udp([198, 18, 1, 1], [198, 18, 0, 2], 40000, 53);
        assert_eq!(c.lookup(&key_of(&whole).unwrap()), Some(0));
    }

    #[test]
    fn tiny_first_fragments_and_cut_headers_are_dropped() {
        let mut f = udp([198, 18, 1, 1], [198, 18, 0, 2], 5000, 53);
        f.truncate(14 + 20 + 2); // two bytes of UDP: the destination port is missing
        assert_eq!(key_of(&f), Err(NoKey::Malformed));
        let f = udp([198, 18, 1, 1], [198, 18, 0, 2], 5000, 53);
        for len in 14..14 + 20 + 4 {
            assert_eq!(key_of(&f[..len]), Err(NoKey::Malformed), "IPv4 cut to {len}");
        }
        let f = udp6_behind(60, &[&[17, 0, 1, 4, 0, 0, 0, 0]]);
        for len in 14..14 + 40 + 8 + 4 {
            assert_eq!(key_of(&f[..len]), Err(NoKey::Malformed), "IPv6 cut to {len}");
        }
        assert!(key_of(&f).is_ok());
    }

    #[test]
    fn rules_added_replaced_and_removed_while_the_node_runs_and_bad_ones_refused() {
        let acl = Acl::new(
            vec![parse_rule(&["deny", "src", "198.18.0.0/15", "proto", "udp", "dport", "53"]).unwrap()],
            Action::Permit,
        );
        crate::tests::running(Box::new(acl), &["out"], |info| {
            let ok = |l: &str| crate::tests::ctl(info, l).unwrap().unwrap_or_else(|e| panic!("{l}: {e}"));
            let err = |l: &str| crate::tests::ctl(info, l).unwrap().unwrap_err();
            assert!(ok("show acl").contains("0: deny src 198.18.0.0/15 proto 17 dport 53"), "{}", ok("show acl"));
            assert!(ok("acl rule add permit dst fd00::/8 sport 1000-2000").contains("rule 1 added: 2 rules"));
            assert!(ok("acl rule add at 0 count proto tcp").contains("rule 0 added: 3 rules"));
            assert!(ok("acl rule replace 2 deny dst fd00::/16").contains("rule 2 replaced"));
            assert!(ok("acl rule del 1").contains("rule 1 removed: 2 rules"));
            let shown = ok("show acl");
            assert_eq!(
                shown.lines().skip(1).collect::<Vec<_>>(),
                ["     0: count proto 6", "     1: deny dst fd00::/16"],
                "{shown}"
            );
            assert!(err("acl rule add allow src any").contains("not an action"));
            assert!(err("acl rule add deny src 198.18.0.0/33").contains("`src`"));
            assert!(err("acl rule add deny color red").contains("unknown field"));
            assert!(err("acl rule add deny src").contains("needs a value"));
            assert!(err("acl rule del 2").contains("0..=1"));
            assert!(err("acl rule add at 5 deny").contains("0..=2"));
            assert_eq!(ok("show acl"), shown, "refused commands change nothing");
        });
    }
}
