//! The IPv4 classifier of `acl`: the rules compiled into tries that are walked one key
//! byte at a time, a burst of keys in lock step.
//!
//! A key is 13 bytes (source and destination addresses, protocol, ports). A trie's
//! state after some of those bytes stands for the rules that can still match, each
//! with what is left of its range in the field being read (whether the bytes so far
//! equal the range's low or high end). A state's next state depends only on which of
//! up to four points per rule the next byte falls between, so a node stores its
//! interval starts (up to 16, compared with the byte in one SSE2 instruction,
//! [`ironpath_eal::simd`], or a loop elsewhere) and a child per interval; a node with
//! more intervals keeps 256 children. Equal states are one node (the build hashes
//! them); a state whose every byte leads to the same child is that child (each node
//! names the key byte it reads, so a walk skips the bytes no live rule looks at); a
//! state whose first rule matches whatever follows, or that no rule can match, is a
//! result: a node that leads to itself, so a burst walks its keys in lock step and
//! stops when every key of a group has its result. The bytes are read in the order
//! that decides soonest: the fields whose rules are narrowest first.
//!
//! One trie holds every rule unless it would take more than [`NODES_PER_RULE`] nodes a
//! rule: rules open in an address field repeat their later fields under every state
//! the other rules' addresses make. Then the rules with a narrow destination get one
//! trie and the rest another, and a group whose trie outgrows the build's budget is
//! split in two, up to [`MAX_TRIES`]. A rule set that still does not fit is left to
//! the trees.

use super::{Rule, FIELDS};
use ironpath_eal::{memory::ZeroTable, simd};

/// Bytes of a key a trie reads.
pub const KEY_LEN: usize = 13;
/// An IPv4 key as the tries read it: source (0..4), destination (4..8), source port
/// (8..10), destination port (10..12), protocol (12), big-endian, every byte `^ 0x80`
/// (as the nodes compare: signed); 3 bytes unused.
pub type V4Key = [u8; 16];

/// Where each field (in [`FIELDS`] order: source, destination, protocol, source port,
/// destination port) sits in a [`V4Key`], and its width in bytes.
const FIELD_AT: [(usize, u32); FIELDS] = [(0, 4), (4, 4), (12, 1), (8, 2), (10, 2)];
/// Tries a rule set may be compiled into.
pub const MAX_TRIES: usize = 8;
/// Nodes all of a classifier's tries may hold (up to 16 bytes of interval starts each;
/// 10,000 firewall rules take about 100,000).
const MAX_NODES: usize = 1 << 20;
/// Child slots all of a classifier's tries may hold (4 bytes each).
const MAX_CHILDREN: usize = 1 << 22;
/// Rule steps (a rule carried from a state into a child) all of a classifier's builds
/// may take, those that end over budget included: bounds the compile time of rule
/// sets that overlap heavily (10,000 firewall rules take about 5 million).
const MAX_WORK: u64 = 1 << 26;
/// Nodes a rule may cost a trie of all the rules (10,000 firewall rules take about
/// 20 each in one trie; two tries take half as many nodes, and walk every key twice).
const NODES_PER_RULE: usize = 32;
/// Keys walked in lock step.
const GROUP: usize = 8;

/// The `rule` of a state that is not a result (while building).
const INNER: u32 = u32::MAX;
/// The `rule` of the result "no rule matches".
pub const MISS: u32 = u32::MAX - 1;
/// Bits of a link that hold the node's offset (in words).
const OFFSET_BITS: u32 = 22;
/// Where a link's shape (how many interval starts, 0..=16, or [`FULL`]) is.
const SHAPE_SHIFT: u32 = OFFSET_BITS;
/// Where a link's key byte (the byte its node reads, or [`RESULT`]) is.
const AT_SHIFT: u32 = 28;
/// The shape of a node with 256 children.
const FULL: u32 = 31;
/// The key byte of a result (a byte no key uses): the walk stops there.
const RESULT: u32 = 15;
/// What unused interval starts hold (255, stored as compared: `^ 0x80`).
const PAD: u8 = 0x7f;

/// The IPv4-mapped IPv6 addresses (`::ffff:0:0/96`), where the IPv4 keys live.
const MAPPED: (u128, u128) = (0xffff_0000_0000, 0xffff_ffff_ffff);

/// The key of `k` if both its addresses are IPv4 (IPv4-mapped) and its protocol and
/// ports fit their fields (a key parsed from a frame always does).
#[inline]
pub fn v4_key(k: &[u128; FIELDS]) -> Option<V4Key> {
    // All 96 bits above the IPv4 address: `2001:db8::ffff:a.b.c.d` is IPv6.
    if k[0] >> 32 != 0xffff || k[1] >> 32 != 0xffff || k[2] > 0xff || (k[3] | k[4]) > 0xffff {
        return None;
    }
    // Two words in memory order: the addresses, then the ports and the protocol.
    let flip = 0x8080_8080_8080_8080u64;
    let addrs = u64::from((k[0] as u32).swap_bytes()) | u64::from((k[1] as u32).swap_bytes()) << 32;
    let rest = u64::from((k[3] as u16).swap_bytes())
        | u64::from((k[4] as u16).swap_bytes()) << 16
        | (k[2] as u64 & 0xff) << 32;
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&(addrs ^ flip).to_le_bytes());
    b[8..].copy_from_slice(&(rest ^ flip).to_le_bytes());
    Some(b)
}

/// The key of a plain IPv4 frame (no VLAN tag, no IP options, at least 4 bytes
/// past its IP header both in the frame and by its total length), read from its
/// bytes as [`super::key_of`] reads it, then [`v4_key`]; `None` for every other frame
/// (tagged, with options, short, IPv6, not IP, malformed), which `key_of` then takes.
/// Everything it reads is in the frame's first 38 bytes: one length check.
#[inline]
pub fn fast_v4_key(frame: &[u8]) -> Option<V4Key> {
    let h: &[u8; 38] = frame.get(..38)?.try_into().ok()?;
    if h[12..15] != [0x08, 0x00, 0x45] || u16::from_be_bytes([h[16], h[17]]) < 24 {
        return None;
    }
    let proto = h[23];
    let later_fragment = u16::from_be_bytes([h[20], h[21]]) & 0x1fff != 0;
    // A later fragment has no ports; nor has a protocol without them.
    let has_ports = matches!(proto, 6 | 17 | 132) && !later_fragment;
    let ports = u32::from_ne_bytes([h[34], h[35], h[36], h[37]]) & if has_ports { u32::MAX } else { 0 };
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&h[26..34]);
    b[8..12].copy_from_slice(&ports.to_ne_bytes());
    b[12] = proto;
    Some((u128::from_ne_bytes(b) ^ 0x8080_8080_8080_8080_8080_8080_8080_8080).to_ne_bytes())
}

/// The key of [`V4Key`] `b` (as [`v4_key`] took it).
pub fn key_of_v4(b: &V4Key) -> [u128; FIELDS] {
    let b = (u128::from_ne_bytes(*b) ^ 0x8080_8080_8080_8080_8080_8080_8080_8080).to_ne_bytes();
    let be = |r: std::ops::Range<usize>| b[r].iter().fold(0u128, |a, &x| a << 8 | u128::from(x));
    [be(0..4) | MAPPED.0, be(4..8) | MAPPED.0, u128::from(b[12]), be(8..10), be(10..12)]
}

/// A rule restricted to IPv4 keys: an inclusive range per field.
#[derive(Clone, Debug)]
pub struct V4Rule {
    /// Its index in the rule set.
    pub id: u32,
    lo: [u32; FIELDS],
    hi: [u32; FIELDS],
}

impl V4Rule {
    /// `r` as it applies to IPv4 keys; `None` if it matches none (an IPv6 prefix, an
    /// empty range, a protocol or port range beyond its field).
    pub fn of(id: u32, r: &Rule) -> Option<V4Rule> {
        let mut lo = [0; FIELDS];
        let mut hi = [0; FIELDS];
        for (f, &(l, h)) in r.ranges.iter().enumerate() {
            let (min, max) = if f < 2 { MAPPED } else { (0, u128::from(field_max(f))) };
            if l > h || l > max || h < min {
                return None;
            }
            lo[f] = (l.max(min) - min) as u32;
            hi[f] = (h.min(max) - min) as u32;
        }
        Some(V4Rule { id, lo, hi })
    }

    /// Whether its range in field `f` is the whole field.
    fn open(&self, f: usize) -> bool {
        self.lo[f] == 0 && self.hi[f] == field_max(f)
    }

    /// Whether its range in field `f` is at least `w` wide (for grouping).
    pub fn wide(&self, f: usize, w: u32) -> bool {
        self.hi[f] - self.lo[f] >= w - 1
    }
}

fn field_max(f: usize) -> u32 {
    u32::MAX >> (32 - 8 * FIELD_AT[f].1)
}

/// A node as a walk reaches it is a link, one word: the node's offset in the trie's
/// words (the low [`OFFSET_BITS`]), its shape and the key byte it reads. The node is
/// the links of its children, one per interval (`shape + 1`), then its interval
/// starts after the first (which starts at 0), ascending, each `^ 0x80` (for a signed
/// compare), packed 4 to a word (byte `i` is `word[i / 4] >> 8 * (i % 4)`); or the
/// links of 256 children by key byte, and no starts. A result is its own link (it
/// leads to itself, whatever the byte) and its rule ([`MISS`] for none). Everything a
/// step needs before its memory read is in the link, and the node is one read (a node
/// of up to 16 words never crosses a cache line).
type Link = u32;

/// Words a step may read from a node's offset on (the table holds as many past the
/// last offset a link can name).
const WINDOW: usize = 256;

/// The offset (in words) of link `t`'s node.
#[inline(always)]
fn offset(t: Link) -> usize {
    (t & ((1 << OFFSET_BITS) - 1)) as usize
}

/// Words of a node of `shape` after its children.
#[inline(always)]
fn start_words(shape: u32) -> usize {
    if shape == FULL {
        0
    } else {
        (shape as usize).div_ceil(4)
    }
}

/// Which interval of a node key byte `v` (`^ 0x80`) falls in: the first start above it
/// (the starts ascend; bytes past the node's starts are its children, above `shape`),
/// in one SIMD compare where there is one.
#[inline(always)]
fn interval(bounds: [u64; 2], shape: u32, v: u8) -> usize {
    (simd::signed_bytes_above(bounds, v) | 1 << (shape & 31)).trailing_zeros() as usize
}

/// [`interval`] with the portable compare (tested against it).
#[cfg(test)]
fn interval_portable(bounds: [u64; 2], shape: u32, v: u8) -> usize {
    (simd::signed_bytes_above_portable(bounds, v) | 1 << (shape & 31)).trailing_zeros() as usize
}

/// A burst's walk of one trie, compiled into each of [`simd::with_avx2`]'s variants.
struct Walk<'a> {
    trie: &'a Trie,
    keys: &'a [V4Key],
    best: &'a mut [u32],
}

impl simd::Kernel for Walk<'_> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        self.trie.burst_with(self.keys, self.best, interval);
    }
}

/// Words of a trie's table: every offset a link can hold, and a window after it.
const TABLE: usize = (1 << OFFSET_BITS) + WINDOW;

/// One trie over a group of rules: its nodes laid out in one array of words (a node's
/// offset is its name). The table has room for every offset a link can name (a walk
/// checks no bounds), on a mapping of its own: only the pages the nodes take are
/// ever written, and so backed (whole 2 MiB pages for a trie of 256 KiB or more,
/// where the kernel gives transparent huge pages).
#[derive(Debug)]
pub struct Trie {
    flat: ZeroTable<TABLE>,
    /// Words the nodes take.
    words: usize,
    nodes: usize,
    root: Link,
}

impl Trie {
    /// The link a walk takes from link `t` with key `k`.
    #[inline(always)]
    fn step(flat: &[u32; TABLE], t: Link, k: &V4Key, pick: fn([u64; 2], u32, u8) -> usize) -> Link {
        let off = offset(t);
        let shape = t >> SHAPE_SHIFT & 31;
        let v = k[(t >> AT_SHIFT) as usize];
        // No bounds to check: `off` has OFFSET_BITS bits, and every word a step reads
        // is within WINDOW of it.
        let node: &[u32; WINDOW] = flat[off..off + WINDOW].try_into().unwrap_or(&[0; WINDOW]);
        let at = shape as usize + 1;
        let bounds = [
            u64::from(node[at]) | u64::from(node[at + 1]) << 32,
            u64::from(node[at + 2]) | u64::from(node[at + 3]) << 32,
        ];
        let i = std::hint::select_unpredictable(shape == FULL, usize::from(v), pick(bounds, shape, v));
        node[i % WINDOW]
    }

    /// The rule of result link `t`.
    #[inline(always)]
    fn rule(flat: &[u32; TABLE], t: Link) -> u32 {
        flat[offset(t) + 1]
    }

    /// The first rule (index) of this trie matching `k`, or [`MISS`].
    pub fn lookup(&self, k: &V4Key) -> u32 {
        let mut t = self.root;
        for _ in 0..KEY_LEN {
            if t >> AT_SHIFT == RESULT {
                break;
            }
            t = Self::step(&self.flat, t, k, interval);
        }
        Self::rule(&self.flat, t)
    }

    /// For each key, the smaller of `best` and the first rule of this trie matching it.
    /// The walk is compiled twice: for AVX2 (taken where the CPU has it; a step's
    /// byte broadcast is then one instruction instead of four) and for SSE2.
    #[inline]
    pub fn lookup_burst(&self, keys: &[V4Key], best: &mut [u32]) {
        simd::with_avx2(Walk { trie: self, keys, best });
    }

    /// [`Trie::lookup_burst`] compiled for the build's target only (SSE2 on x86_64;
    /// tested against the AVX2 and portable ones).
    #[cfg(test)]
    pub fn lookup_burst_sse2(&self, keys: &[V4Key], best: &mut [u32]) {
        self.burst_with(keys, best, interval);
    }

    /// [`Trie::lookup_burst`] with the portable interval search (tested against the SSE2 one).
    #[cfg(test)]
    pub fn lookup_burst_portable(&self, keys: &[V4Key], best: &mut [u32]) {
        self.burst_with(keys, best, interval_portable);
    }

    #[inline(always)]
    fn burst_with(&self, keys: &[V4Key], best: &mut [u32], pick: fn([u64; 2], u32, u8) -> usize) {
        let mut groups = keys.chunks_exact(GROUP);
        let mut bests = best.chunks_exact_mut(GROUP);
        for (keys, best) in (&mut groups).zip(&mut bests) {
            self.group(keys.try_into().unwrap_or(&[[0; 16]; GROUP]), best, pick);
        }
        let (keys, best) = (groups.remainder(), bests.into_remainder());
        if !keys.is_empty() {
            // The last keys padded to a group with copies of the first.
            let mut k = [keys[0]; GROUP];
            let mut b = [u32::MAX; GROUP];
            k[..keys.len()].copy_from_slice(keys);
            b[..best.len()].copy_from_slice(best);
            self.group(&k, &mut b, pick);
            best.copy_from_slice(&b[..best.len()]);
        }
    }

    /// [`Trie::lookup_burst`] of one group of keys, walked in lock step.
    #[inline(always)]
    fn group(&self, keys: &[V4Key; GROUP], best: &mut [u32], pick: fn([u64; 2], u32, u8) -> usize) {
        let flat = &*self.flat;
        let mut t = [self.root; GROUP];
        // A path reads each key byte at most once: KEY_LEN steps reach a result.
        for _ in 0..KEY_LEN {
            // A result's key byte is all ones: the group is done when every key's
            // link has it, tested on the links a step reached (not those it left: a
            // step fewer a group).
            let mut all = Link::MAX;
            for (t, k) in t.iter_mut().zip(keys) {
                *t = Self::step(flat, *t, k, pick);
                all &= *t;
            }
            if all >> AT_SHIFT == RESULT {
                break;
            }
        }
        for (b, &t) in best.iter_mut().zip(&t) {
            *b = (*b).min(Self::rule(flat, t));
        }
    }

    /// Bytes its nodes take (resident: rounded up to 4 KiB pages, or to 2 MiB
    /// ones for a trie of 256 KiB or more on transparent huge pages).
    pub fn bytes(&self) -> usize {
        self.words * 4
    }

    /// Nodes.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// Whether it has a 256-way node (for tests).
    #[cfg(test)]
    pub fn has_full_node(&self) -> bool {
        // Every node reachable from the root, each link followed once.
        let mut seen = std::collections::HashSet::from([self.root]);
        let mut todo = vec![self.root];
        while let Some(t) = todo.pop() {
            let shape = t >> SHAPE_SHIFT & 31;
            if shape == FULL {
                return true;
            }
            let off = offset(t);
            for &c in &self.flat[off..off + shape as usize + 1] {
                if seen.insert(c) {
                    todo.push(c);
                }
            }
        }
        false
    }
}

/// What is left of a classifier's budget, and what one trie may take (a quarter of
/// the whole: a group whose rules overlap so that its trie grows faster than its rule
/// count is split before it takes everything).
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    nodes: usize,
    children: usize,
    trie_nodes: usize,
    trie_children: usize,
    work: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget::new(MAX_NODES, MAX_CHILDREN)
    }
}

impl Budget {
    /// At most `nodes` nodes and `children` child slots in all, a quarter of each per
    /// trie (tests: a small budget makes the build split its groups, then give up).
    pub fn new(nodes: usize, children: usize) -> Self {
        Budget { nodes, children, trie_nodes: nodes / 4, trie_children: children / 4, work: MAX_WORK }
    }
}

/// A build went over its budget.
#[derive(Debug)]
pub struct Over;

/// One step of a walk: which field, and which of its bytes.
#[derive(Clone, Copy, Debug, Default)]
struct Step {
    /// The field (in [`FIELDS`] order).
    field: usize,
    /// Bits of the field below this byte.
    shift: u32,
    /// The next step's field, if this is the field's last byte.
    next_field: Option<usize>,
    /// Whether this is the field's last byte.
    last: bool,
}

/// A state being built: interval starts and the child (state id) of each interval.
struct State {
    starts: Vec<u8>,
    children: Vec<u32>,
    /// The key byte it reads.
    at: u8,
    rule: u32,
}

struct Builder<'a> {
    rules: &'a [V4Rule],
    steps: [Step; KEY_LEN],
    /// The key byte read at each step.
    order: [u8; KEY_LEN],
    /// Per rule: the first position in the field order from which every field is open.
    open_from: Vec<usize>,
    /// Per field: its position in the field order.
    pos: [usize; FIELDS],
    states: Vec<State>,
    memo: std::collections::HashMap<(u8, Vec<u32>), u32>,
    results: std::collections::HashMap<u32, u32>,
    children: usize,
    work: u64,
    budget: Budget,
}

/// Items of a state: `rule index << 2 | low end still binding | high end still binding << 1`.
type Item = u32;
const LO: u32 = 1;
const HI: u32 = 2;

impl Builder<'_> {
    /// The flags of rule `r` at the start of field `f`.
    fn fresh(&self, r: usize, f: usize) -> u32 {
        let rule = &self.rules[r];
        (u32::from(rule.lo[f] != 0) * LO) | (u32::from(rule.hi[f] != field_max(f)) * HI)
    }

    /// Whether item `it` matches whatever the key holds from step `d` on.
    fn certain(&self, it: Item, d: usize) -> bool {
        it & 3 == 0 && self.open_from[(it >> 2) as usize] <= self.pos[self.steps[d].field] + 1
    }

    fn result(&mut self, rule: u32) -> Result<u32, Over> {
        if let Some(&s) = self.results.get(&rule) {
            return Ok(s);
        }
        let id = self.push(State { starts: Vec::new(), children: Vec::new(), at: 0, rule })?;
        self.states[id as usize].children.push(id);
        self.results.insert(rule, id);
        Ok(id)
    }

    fn push(&mut self, s: State) -> Result<u32, Over> {
        self.children += if s.starts.len() > 16 { 256 } else { s.starts.len() + 1 };
        let b = &self.budget;
        if self.states.len() >= b.nodes.min(b.trie_nodes) || self.children > b.children.min(b.trie_children) {
            return Err(Over);
        }
        self.states.push(s);
        Ok(self.states.len() as u32 - 1)
    }

    /// The state of `items` before step `d`.
    fn state(&mut self, d: usize, mut items: Vec<Item>) -> Result<u32, Over> {
        if d == KEY_LEN {
            return self.result(items.first().map_or(MISS, |&i| self.rules[(i >> 2) as usize].id));
        }
        if let Some(c) = items.iter().position(|&i| self.certain(i, d)) {
            if c == 0 {
                return self.result(self.rules[(items[0] >> 2) as usize].id);
            }
            items.truncate(c + 1);
        }
        if items.is_empty() {
            return self.result(MISS);
        }
        let key = (d as u8, items);
        if let Some(&s) = self.memo.get(&key) {
            return Ok(s);
        }
        let items = key.1;
        let step = self.steps[d];
        let bytes = |it: Item| {
            let r = &self.rules[(it >> 2) as usize];
            let lo = if it & LO != 0 { (r.lo[step.field] >> step.shift) as u8 } else { 0 };
            let hi = if it & HI != 0 { (r.hi[step.field] >> step.shift) as u8 } else { 255 };
            (lo, hi)
        };
        let mut starts: Vec<u8> = Vec::with_capacity(4 * items.len());
        for &it in &items {
            let (lo, hi) = bytes(it);
            // Where the outcome may change: below `lo`, at it, between, at `hi`, above.
            // (Points past 255 saturate to it; a point that changes nothing only costs
            // the build a child that equals its neighbour, merged below.)
            starts.extend([lo, lo.saturating_add(1), hi, hi.saturating_add(1)].iter().filter(|&&p| p > 0));
        }
        starts.sort_unstable();
        starts.dedup();
        self.work += (starts.len() as u64 + 1) * items.len() as u64;
        if self.work > self.budget.work {
            return Err(Over);
        }
        let below = (1u32 << step.shift).wrapping_sub(1);
        let mut out_starts = Vec::with_capacity(starts.len());
        let mut children: Vec<u32> = Vec::with_capacity(starts.len() + 1);
        for v in std::iter::once(0u8).chain(starts.iter().copied()) {
            let mut next = Vec::with_capacity(items.len());
            for &it in &items {
                let (lo, hi) = bytes(it);
                if v < lo || v > hi {
                    continue;
                }
                let r = (it >> 2) as usize;
                let rule = &self.rules[r];
                let flags = match step.next_field {
                    Some(f) if step.last => self.fresh(r, f),
                    _ if step.last => 0,
                    _ => {
                        (u32::from(it & LO != 0 && v == lo && rule.lo[step.field] & below != 0) * LO)
                            | (u32::from(it & HI != 0 && v == hi && rule.hi[step.field] & below != below) * HI)
                    }
                };
                next.push(it & !3 | flags);
            }
            let child = self.state(d + 1, next)?;
            if children.last() != Some(&child) {
                if !children.is_empty() {
                    out_starts.push(v);
                }
                children.push(child);
            }
        }
        // A state every byte leaves for the same child is that child: its node reads
        // its own key byte, so a walk skips the bytes no alive rule looks at.
        let id = match children[..] {
            [only] => only,
            _ => self.push(State { starts: out_starts, children, at: self.order[d], rule: INNER })?,
        };
        self.memo.insert((d as u8, items), id);
        Ok(id)
    }
}

impl Trie {
    /// The trie of `rules` (in rule order), within `budget` (what it takes is taken
    /// off; nothing if it does not fit).
    pub fn build(rules: &[V4Rule], budget: &mut Budget) -> Result<Trie, Over> {
        // Fields in the order that decides soonest: the narrowest on average first.
        let mut fields: [usize; FIELDS] = [0, 1, 2, 3, 4];
        let openness = |f: usize| -> f64 {
            let bits = 8.0 * FIELD_AT[f].1 as f64;
            rules.iter().map(|r| f64::from(r.hi[f] - r.lo[f]).ln_1p() / std::f64::consts::LN_2 / bits).sum::<f64>()
        };
        let open: Vec<f64> = (0..FIELDS).map(openness).collect();
        fields.sort_by(|&a, &b| open[a].total_cmp(&open[b]));
        let mut steps = [Step::default(); KEY_LEN];
        let mut order = [0u8; KEY_LEN];
        let mut pos = [0usize; FIELDS];
        let mut d = 0;
        for (p, &f) in fields.iter().enumerate() {
            pos[f] = p;
            let (at, width) = FIELD_AT[f];
            for j in 0..width {
                let last = j + 1 == width;
                steps[d] = Step { field: f, shift: 8 * (width - 1 - j), next_field: fields.get(p + 1).copied(), last };
                order[d] = (at + j as usize) as u8;
                d += 1;
            }
        }
        let open_from =
            rules.iter().map(|r| (0..FIELDS).rev().take_while(|&p| r.open(fields[p])).fold(FIELDS, |_, p| p)).collect();
        let mut b = Builder {
            rules,
            steps,
            order,
            open_from,
            pos,
            states: Vec::new(),
            memo: Default::default(),
            results: Default::default(),
            children: 0,
            work: 0,
            budget: *budget,
        };
        b.result(MISS)?;
        let first = fields[0];
        let items: Vec<Item> = (0..rules.len()).map(|r| (r as u32) << 2 | b.fresh(r, first)).collect();
        let built = b.state(0, items);
        // Work spent counts whether or not the trie fits: failed builds are bounded too.
        budget.work = budget.work.saturating_sub(b.work);
        let root = built?;
        // Lay the states out in state order; a node of up to 16 words never crosses
        // a 64-byte line (the table is page-aligned). The four words of starts a step
        // reads may reach past a small node into the next line: keeping those in the
        // line too was measured to cost a fifth more memory for no speed.
        let shape = |st: &State| match st.starts.len() {
            n if n > 16 => FULL,
            n => n as u32,
        };
        let size = |st: &State| match (st.rule, shape(st)) {
            (INNER, FULL) => 256,
            (INNER, sh) => st.children.len() + start_words(sh),
            // Its link and its rule.
            _ => 2,
        };
        let mut link = Vec::with_capacity(b.states.len());
        let mut words = 0usize;
        for st in &b.states {
            let n = size(st);
            if n <= 16 && words % 16 + n > 16 {
                words = words.next_multiple_of(16);
            }
            if words >= 1 << OFFSET_BITS {
                return Err(Over);
            }
            let at = if st.rule == INNER { u32::from(st.at) } else { RESULT };
            let sh = if st.rule == INNER { shape(st) } else { 0 };
            link.push(words as u32 | sh << SHAPE_SHIFT | at << AT_SHIFT);
            words += n;
        }
        // Zeroed and page-aligned (a node of up to 16 words is then within one line);
        // pages past `words` are never written. Tries of a few hundred KiB or more
        // are walked at random over more pages than the data TLB holds: on huge
        // pages where the kernel gives them.
        let mut flat = ZeroTable::<TABLE>::with_front(words + WINDOW).map_err(|_| Over)?;
        for (st, &l) in b.states.iter().zip(&link) {
            let o = offset(l);
            let node = &mut flat[o..o + size(st)];
            if st.rule != INNER {
                node[0] = l;
                node[1] = st.rule;
                continue;
            }
            if shape(st) == FULL {
                // Indexed by the key byte as the walk has it (`^ 0x80`).
                let mut at = 0;
                for v in 0..=255u8 {
                    if st.starts.get(at) == Some(&v) {
                        at += 1;
                    }
                    node[usize::from(v ^ 0x80)] = link[st.children[at] as usize];
                }
                continue;
            }
            let (kids, starts) = node.split_at_mut(st.children.len());
            for (k, &c) in kids.iter_mut().zip(&st.children) {
                *k = link[c as usize];
            }
            let mut bytes = [PAD; 16];
            for (b, &v) in bytes.iter_mut().zip(&st.starts) {
                *b = v ^ 0x80;
            }
            for (w, c) in starts.iter_mut().zip(bytes.chunks(4)) {
                *w = u32::from_le_bytes(c.try_into().unwrap_or_default());
            }
        }
        budget.nodes -= b.states.len();
        budget.children -= b.children;
        Ok(Trie { flat, words, nodes: b.states.len(), root: link[root as usize] })
    }
}

/// Tries for `rules` (in rule order): one for them all if it takes at most
/// [`NODES_PER_RULE`] nodes a rule; else one for the rules with a narrow destination and
/// one for the rest (rules open in an address field repeat their later fields under
/// every state the other rules' addresses make: apart, each trie reads its narrowest
/// fields first), groups split in two while their trie does not fit; `None` if the
/// rule set needs more than [`MAX_TRIES`] or the budget.
pub fn compile(rules: Vec<V4Rule>, mut budget: Budget) -> Option<Vec<Trie>> {
    if rules.is_empty() {
        return Some(Vec::new());
    }
    let mut whole = budget;
    whole.trie_nodes = whole.trie_nodes.min(NODES_PER_RULE * rules.len() + 1024);
    match Trie::build(&rules, &mut whole) {
        Ok(t) => return Some(vec![t]),
        Err(Over) => budget.work = whole.work,
    }
    let (narrow, wide): (Vec<V4Rule>, Vec<V4Rule>) = rules.into_iter().partition(|r| !r.wide(1, 1 << 16));
    let mut pending: Vec<Vec<V4Rule>> = [narrow, wide].into_iter().filter(|g| !g.is_empty()).collect();
    let mut done = Vec::new();
    while let Some(g) = pending.pop() {
        match Trie::build(&g, &mut budget) {
            Ok(t) => done.push(t),
            Err(Over) if g.len() > 1 && done.len() + pending.len() + 2 <= MAX_TRIES => {
                let mut a = g;
                let b = a.split_off(a.len() / 2);
                pending.push(a);
                pending.push(b);
            }
            Err(Over) => return None,
        }
    }
    Some(done)
}

/// Whether `r` matches only keys whose addresses are both IPv4.
pub fn ipv4_only(r: &Rule) -> bool {
    let inside = |(lo, hi): (u128, u128)| lo >= MAPPED.0 && hi <= MAPPED.1;
    inside(r.ranges[0]) && inside(r.ranges[1])
}

#[cfg(test)]
#[path = "attack_tests.rs"]
mod attack_tests;
