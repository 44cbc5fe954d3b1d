//! Receive aggregation of TCP segments, as GRO (segments kept as an mbuf chain)
//! or LRO (payloads copied into one large buffer, as a NIC does), for IPv4 and
//! IPv6; and [`gso`], which splits an aggregate back into segments.
//!
//! Only what can be split back exactly is merged: same flow (L2 header incl. VLAN
//! tags, addresses, ports), same ACK, window and TCP option bytes, same IPv4
//! TOS/TTL/DF (IPv6 traffic class, flow label, hop limit), IPv4 IDs incrementing
//! by one, contiguous sequence numbers, every segment's payload at most the first
//! one's (the MSS), no SYN/RST/URG/ECE/CWR. PSH, FIN or a short segment ends an
//! aggregate (it is merged, then the flow is flushed). Segments that arrive out
//! of order are held as separate runs of the flow and joined when the gap fills.
//! A packet of a flow that cannot be merged (a pure ACK, different options ...)
//! first flushes the flow, so the order within a flow is kept.
//!
//! The aggregate carries `RX_AGGREGATED`, `aggr_segs` (original segments, for
//! ACK accounting) and `tso_segsz` (the MSS); its IP lengths, IPv4 header
//! checksum and TCP checksum are rewritten (the TCP checksum from the segments'
//! payload sums: header-only work when the port verified them).
//!
//! Segments of the usual layout (untagged IPv4 without options, TCP with no or
//! 12 option bytes, checksums verified by the port) are read into a small view
//! and matched to their flow by masked header words ([`parse::tpl_words`]): key
//! and template in one compare, which also requires the IPv4 reserved flag, the
//! TCP reserved bits and the urgent pointer to match. Others take the general
//! path (a full key and template per segment); both kinds meet in the same flows.
//!
//! The [`Aggregator`] is independent of the graph: the `rx_aggregate` node and
//! testpmd's `set port N gro on` both drive it.

pub mod gso;
mod merge;
pub mod node;
pub mod parse;

pub(crate) use merge::same_template;
use merge::*;

use ironpath_eal::abi;
use ironpath_eal::{prefetch, Burst, Mbuf, Mempool, SegList};
use ironpath_wire::ethernet::{l3_offset, EtherType};
use ironpath_wire::IpProtocol;
use parse::{
    at_offset, fast_hash, fast_words, finish_headers, key_of_words, parse_fast_pkt, parse_into, same_key_words,
    same_tpl, sum_at_offset, tpl_matches, tpl_may_match, tpl_words, tso_headers, Hdr, Kind, Pkt, Seg, Skip, END_MERGE,
    NO_MERGE, TPL_WORDS,
};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;

/// How segments are merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Chain the segments (no payload copy).
    Gro,
    /// Copy payloads into one buffer from a large-buffer pool.
    Lro,
}

ironpath_config::choice! {
    /// When held aggregates leave (`rx_aggregate`'s `flush`).
    pub enum Flush {
        /// At the end of every burst (nothing is held between calls).
        Burst = "burst",
        /// When the flow's first segment has waited `flush_tsc` ticks (or limits hit).
        Timeout = "timeout",
    }
}

/// Settings of an aggregator.
#[derive(Clone, Copy, Debug)]
pub struct AggrConfig {
    /// GRO or LRO.
    pub mode: Mode,
    /// Most bytes of IP payload (TCP header + data) in an aggregate (<= 65535).
    pub max_bytes: u32,
    /// Most segments in an aggregate.
    pub max_segments: u16,
    /// Most flows held at once (the oldest is flushed to make room).
    pub max_flows: usize,
    /// Most packets the flows hold between bursts ([`Flush::Timeout`]); beyond it the
    /// oldest flows leave early (`flush_held`). A bound on the share of the pool a
    /// peer's segments can pin.
    pub max_held: usize,
    /// Flush policy.
    pub flush: Flush,
    /// Timeout in TSC ticks for [`Flush::Timeout`].
    pub flush_tsc: u64,
    /// Drop (rather than pass on) malformed and bad-checksum packets.
    pub drop_bad: bool,
    /// Aggregates leave as TSO packets (`TX_TCP_SEG | TX_TCP_CKSUM`, `tso_segsz` the
    /// MSS, the TCP checksum field the pseudo-header sum) for the sending port, or
    /// the kernel behind it, to cut again: a pipeline that forwards what it merged
    /// sends one packet where the segments were many, as Linux forwards its GRO
    /// packets. Off: complete checksums, for a consumer such as `tcp`.
    pub tso: bool,
}

/// Counters of an aggregator (cumulative).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AggrStats {
    /// Packets received.
    pub packets_in: u64,
    /// Packets sent on (aggregates count once).
    pub packets_out: u64,
    /// TCP segments that were candidates for merging.
    pub tcp_in: u64,
    /// Aggregates made (outputs of two or more segments).
    pub aggregates: u64,
    /// Segments inside those aggregates.
    pub merged: u64,
    /// Flow flushes at the end of a burst.
    pub flush_burst: u64,
    /// Flow flushes by timeout.
    pub flush_timeout: u64,
    /// Flow flushes by PSH, FIN or a short segment.
    pub flush_end: u64,
    /// Flow flushes because an aggregate was full (bytes or segments).
    pub flush_limit: u64,
    /// Flow flushes by a packet that could not join (pure ACK, other ACK/options/ID,
    /// retransmission).
    pub flush_mismatch: u64,
    /// Flows flushed to make room for a new one.
    pub flows_evicted: u64,
    /// Flows flushed early because the flows held more than `max_held` packets.
    pub flush_held: u64,
    /// Segments held out of order.
    pub reordered: u64,
    /// Packets with a bad IPv4 or TCP checksum (never merged).
    pub bad_checksum: u64,
    /// Packets with truncated or inconsistent headers (never merged).
    pub malformed: u64,
    /// Packets that are not TCP segments we aggregate (passed on).
    pub passed: u64,
    /// LRO buffers not available (segments passed on unmerged).
    pub lro_alloc_failed: u64,
    /// Bad packets dropped (`drop_bad`), or held packets freed at stop.
    pub dropped: u64,
}

/// Most out-of-order runs held per flow.
const MAX_RUNS: usize = 8;

/// Contiguous segments of a flow.
struct Run {
    /// What the run keeps of its first segment's headers.
    seg: Hdr,
    start: u32,
    next: u32,
    // The fields appended segments update are 32 bits wide (holding 16 or 8
    // bits): the next segment reads them back at once, and a load wider than the
    // store that wrote it (the compiler reads a u16 beside another as one u32)
    // cannot be forwarded from the store buffer.
    last_id: u32,
    segs: u32,
    bytes: u32,
    /// The first segment's payload sum ([`Pkt::sum`]).
    head_sum: u64,
    /// The other segments' payload sums at their offsets ([`parse::at_offset`]).
    acc: u64,
    last_flags: u32,
    /// Payload bytes of the last segment. Only the last segment of a run may be
    /// shorter than the first (the MSS): nothing joins after a short one. So
    /// `last_len < seg.payload` says `bytes % seg.payload != 0` without a division.
    last_len: u32,
    /// Most payload bytes the run may hold ([`Aggregator::run_cap`]).
    cap: u32,
    /// First segment (with headers); for LRO once merged, the large buffer.
    /// `None` only in a free slot.
    head: Option<Mbuf>,
    /// GRO: the other segments, headers stripped, already linked to each other
    /// (hung behind `head` in one step when the run leaves).
    tails: SegList,
    /// LRO: `head` is a large buffer holding every payload.
    copied: bool,
}

impl Run {
    fn empty() -> Self {
        Run {
            seg: Hdr::default(),
            start: 0,
            next: 0,
            last_id: 0,
            segs: 0,
            bytes: 0,
            head_sum: 0,
            acc: 0,
            last_flags: 0,
            last_len: 0,
            cap: 0,
            head: None,
            tails: SegList::new(),
            copied: false,
        }
    }
}

struct Flow {
    /// Started by a segment of the usual layout ([`parse::parse_fast_pkt`]):
    /// `words` are the flow's key and template at once ([`parse::tpl_words`]), and
    /// `seg` holds only the key (for segments of other layouts to find the flow).
    fast: bool,
    words: [u64; TPL_WORDS],
    /// Else the flow's key and template: ACK, window, options and IP fields to match.
    /// Boxed (the box stays with the slot): flows move when one leaves, and a
    /// small `Flow` moves cheaply.
    seg: Box<Seg>,
    /// Run slots: `runs[..nruns]` are held (contiguous segments each, out of
    /// order among themselves); the slots after them are free, for the next runs.
    runs: Vec<Run>,
    nruns: usize,
}

impl Flow {
    fn empty() -> Self {
        Flow { fast: false, words: [0; TPL_WORDS], seg: Box::default(), runs: Vec::with_capacity(MAX_RUNS), nruns: 0 }
    }
}

/// A segment's key and template, as the path that read it has them.
#[derive(Clone, Copy)]
enum Tpl<'a> {
    /// The usual layout, with a TCP header of this many bytes: the template is
    /// in the frame ([`parse::tpl_words`]).
    Fast(u8),
    /// Any other: the full view.
    Slow(&'a Seg),
}

/// Why a flow is flushed.
#[derive(Clone, Copy)]
enum Why {
    Burst,
    Timeout,
    End,
    Limit,
    Mismatch,
    Evict,
    Held,
}

/// The receive aggregator.
pub struct Aggregator {
    cfg: AggrConfig,
    lro_pool: Option<Mempool>,
    /// Segments the held flows' runs hold (what `max_held` bounds).
    held_segs: usize,
    /// Flow slots: `flows[..live]` are the held flows; the slots after them keep
    /// their (empty) run vectors for the next flows, so starting or ending a flow
    /// allocates nothing and moves no flow (the last held flow fills a gap).
    flows: Vec<Flow>,
    live: usize,
    /// `hashes[i]` is the hash of `flows[i]`'s key (`live` entries), scanned first.
    hashes: Vec<u32>,
    /// The flow the last segment joined (of the usual layout) or started. Any
    /// index: it is checked against `live` and the template.
    hint: usize,
    /// The last two segments of the usual layout joined the same flow (`hint`):
    /// the next is tried against it before its hash is computed and scanned (a
    /// burst's segments come in trains of one flow; flows taking turns skip the
    /// try).
    train: bool,
    /// `first_tsc[i]`: when `flows[i]`'s first segment arrived. Beside the hashes,
    /// not in the flows: the timeout and eviction scans read them all, and a
    /// thousand held flows' slots are out of the cache.
    first_tsc: Vec<u64>,
    /// Bytes an LRO buffer holds after its headroom.
    lro_room: u32,
    /// The burst's packets while they are placed (kept for its capacity; a
    /// [`Burst::drain`] would copy the whole pointer array).
    input: Vec<Mbuf>,
    pending: VecDeque<Mbuf>,
    /// Counters.
    pub stats: AggrStats,
}

/// Where outputs go: the burst, or the overflow queue when it is full.
struct Out<'a> {
    pkts: &'a mut Burst,
    pending: &'a mut VecDeque<Mbuf>,
    n: &'a mut u64,
}

impl Out<'_> {
    #[inline(always)]
    fn emit(&mut self, m: Mbuf) {
        *self.n += 1;
        if let Err(m) = self.pkts.push(m) {
            self.pending.push_back(m);
        }
    }
}

impl Aggregator {
    /// An aggregator; LRO needs `lro_pool` (buffers large enough for `max_bytes`
    /// plus headers).
    pub fn new(cfg: AggrConfig, lro_pool: Option<Mempool>) -> Self {
        let lro_room =
            lro_pool.as_ref().map_or(0, |p| u32::from(p.data_room()).saturating_sub(u32::from(abi::PKTMBUF_HEADROOM)));
        Self {
            cfg,
            lro_pool,
            flows: Vec::with_capacity(cfg.max_flows),
            live: 0,
            hashes: Vec::with_capacity(cfg.max_flows),
            hint: 0,
            train: false,
            first_tsc: Vec::with_capacity(cfg.max_flows),
            lro_room,
            input: Vec::new(),
            pending: VecDeque::new(),
            held_segs: 0,
            stats: AggrStats::default(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &AggrConfig {
        &self.cfg
    }

    /// Flows currently held.
    pub fn flows(&self) -> usize {
        self.live
    }

    /// Aggregate the packets in `pkts` (the burst ends holding the outputs: passed
    /// packets, aggregates, and any held ones that are due). `now_tsc` drives
    /// timeouts.
    pub fn process(&mut self, pkts: &mut Burst, now_tsc: u64) {
        // One pass: each packet's headers are read and the packet placed at once
        // (its view stays in registers; the headers of the packets a few places on
        // start loading meanwhile).
        let n = pkts.len();
        // Held runs (timeout flushing) take segments at their cold end: start
        // loading those ends now (a few flows only: this is for the common case).
        for f in &self.flows[..self.live.min(32)] {
            for r in &f.runs[..f.nruns] {
                r.tails.prefetch_tail();
            }
        }
        for i in 0..4 {
            pkts.prefetch_data(i);
        }
        // The full view of a packet not of the usual layout (`Kind::Slow`).
        let mut seg = Seg::default();
        let mut input = std::mem::take(&mut self.input);
        pkts.take_into(&mut input);
        let mut pending = std::mem::take(&mut self.pending);
        let mut n_out = 0;
        // Counted per burst (a counter in memory bumped per packet is a chain of
        // loads and stores through the whole burst).
        let mut tcp = n as u64;
        {
            let mut out = Out { pkts, pending: &mut pending, n: &mut n_out };
            // Outputs that did not fit last time go first.
            let waiting = out.pending.len();
            for _ in 0..waiting {
                if let Some(m) = out.pending.pop_front() {
                    out.emit(m);
                    *out.n -= 1; // counted when first emitted
                }
            }
            let timeout = self.cfg.flush == Flush::Timeout;
            let mut it = input.drain(..);
            while let Some(m) = it.next() {
                if let Some(ahead) = it.as_slice().get(3) {
                    if let Some(b) = ahead.data().first() {
                        prefetch(b);
                    }
                    // Its header's second line (`next`): written when the next
                    // segment of its flow links on behind it, and touched by
                    // nothing before. Segments held across bursts make the pool's
                    // working set many times larger, so that line is long out of
                    // the cache (timeout mode: 17% of the cycles at 16 flows);
                    // flushed every burst, a freed packet is soon allocated again
                    // with it still in the cache (and the prefetch costs 1-2%).
                    if timeout {
                        prefetch(&ahead.header().next);
                    }
                }
                let h = m.header();
                let frame = m.data();
                let mut p = Pkt::default();
                // (A tag the port took off is not in the frame's bytes, which key the
                // flows: such packets are passed on, never merged across VLANs.)
                if !writable_single(h) || frame.len() != h.pkt_len as usize || h.ol_flags & abi::RX_VLAN_STRIPPED != 0 {
                    tcp -= 1;
                    self.skip(m, Skip::NotTcp, &mut out);
                } else if parse_fast_pkt(frame, h.ol_flags, &mut p) {
                    self.one_fast(m, &mut p, now_tsc, &mut out);
                } else {
                    match parse_into(frame, frame.len(), h.ol_flags, &mut seg) {
                        Ok(()) => {
                            let p = Pkt::of(&seg, Kind::Slow);
                            self.one_slow(m, &seg, &p, now_tsc, &mut out);
                        }
                        Err(why) => {
                            tcp -= 1;
                            self.skip(m, why, &mut out);
                        }
                    }
                }
            }
            drop(it);
            match self.cfg.flush {
                Flush::Burst => self.flush_all(Why::Burst, &mut out),
                Flush::Timeout => {
                    self.flush_due(now_tsc, &mut out);
                    self.bound_held(&mut out);
                }
            }
        }
        self.stats.packets_in += n as u64;
        self.stats.tcp_in += tcp;
        self.pending = pending;
        self.input = input;
        self.stats.packets_out += n_out;
    }

    /// Flush every held flow into `pkts` (e.g. `set gro flush`, or before stop).
    pub fn flush(&mut self, pkts: &mut Burst) {
        let mut pending = std::mem::take(&mut self.pending);
        let mut n_out = 0;
        {
            let mut out = Out { pkts, pending: &mut pending, n: &mut n_out };
            self.flush_all(Why::Timeout, &mut out);
        }
        self.pending = pending;
        self.stats.packets_out += n_out;
    }

    /// Outputs waiting for room in the next burst.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Packets held (in flows or waiting for room).
    pub fn held(&self) -> usize {
        debug_assert_eq!(
            self.held_segs,
            self.flows[..self.live]
                .iter()
                .map(|f| f.runs[..f.nruns].iter().map(|r| r.segs as usize).sum::<usize>())
                .sum::<usize>(),
            "held segment count out of step"
        );
        self.pending.len() + self.held_segs
    }

    /// A packet that is not aggregated: counted, passed on or dropped.
    fn skip(&mut self, m: Mbuf, why: Skip, out: &mut Out<'_>) {
        // A TCP packet that is not merged (chained, an aggregate already, IP options,
        // malformed, a bad checksum) may belong to a held flow: what the flows hold
        // leaves first, so no flow's packets change order. (A peer that sends such
        // packets makes the flows leave sooner: less merging, nothing held longer.)
        if self.live > 0 && maybe_tcp(m.data()) {
            self.flush_all(Why::Mismatch, out);
        }
        let bad = match why {
            Skip::NotTcp => {
                self.stats.passed += 1;
                false
            }
            Skip::Malformed => {
                self.stats.malformed += 1;
                true
            }
            Skip::BadChecksum => {
                self.stats.bad_checksum += 1;
                true
            }
        };
        if bad && self.cfg.drop_bad {
            self.stats.dropped += 1;
        } else {
            out.emit(m);
        }
    }

    /// A segment of the usual layout: its flow and template are found by comparing
    /// header words with the flow of the train it continues ([`Aggregator::hint`]),
    /// else with each held flow of the same hash.
    fn one_fast(&mut self, m: Mbuf, p: &mut Pkt, now: u64, out: &mut Out<'_>) {
        let frame = m.data();
        let i = self.hint;
        let found = match self.flows.get(i) {
            // The flow of the last segment: only one held flow has a given key,
            // so a match is the one the hash scan would find.
            Some(f)
                if self.train
                    && i < self.live
                    && f.fast
                    && tpl_may_match(&f.words, frame)
                    && tpl_matches(&f.words, frame, p.l4) =>
            {
                p.hash = self.hashes[i];
                Some((i, true))
            }
            _ => {
                p.hash = fast_hash(frame);
                self.find_fast(frame, p)
            }
        };
        match found {
            Some((j, true)) => {
                self.train = j == i;
                self.hint = j;
            }
            _ => self.train = false,
        }
        self.place(m, p, Tpl::Fast(p.l4), found, now, out);
    }

    /// A segment of another layout: its flow is found by key, its template
    /// compared field by field.
    fn one_slow(&mut self, m: Mbuf, s: &Seg, p: &Pkt, now: u64, out: &mut Out<'_>) {
        let found = self.find(s).map(|i| {
            let f = &self.flows[i];
            let same = if f.fast {
                // A flow of the usual layout: this segment matches its template only
                // if it has that layout too (its checksum flags made it slow).
                fast_words(m.data()).is_some_and(|w| same_tpl(&f.words, &w))
            } else {
                same_template(&f.seg, s)
            };
            (i, same)
        });
        self.place(m, p, Tpl::Slow(s), found, now, out);
    }

    /// Put a segment where it goes: into held flow `i` when `found` says the
    /// template matches (`(i, true)`), else after flushing the flow it names, as
    /// a new flow (or passed on, if it cannot merge at all).
    #[inline(always)]
    fn place(&mut self, m: Mbuf, p: &Pkt, t: Tpl<'_>, found: Option<(usize, bool)>, now: u64, out: &mut Out<'_>) {
        let mergeable = p.payload > 0 && p.flags & NO_MERGE == 0;
        match found {
            Some((i, true)) if mergeable => self.add(i, m, p, t, now, out),
            Some((i, _)) => {
                self.flush_flow(i, Why::Mismatch, out);
                self.new_or_pass(m, p, t, mergeable, now, out);
            }
            None => self.new_or_pass(m, p, t, mergeable, now, out),
        }
    }

    #[inline(always)]
    fn new_or_pass(&mut self, m: Mbuf, p: &Pkt, t: Tpl<'_>, mergeable: bool, now: u64, out: &mut Out<'_>) {
        if mergeable {
            self.new_flow(m, p, t, now, out);
        } else {
            self.passthrough(m, out);
        }
    }

    #[inline(always)]
    fn find(&self, s: &Seg) -> Option<usize> {
        self.hashes.iter().enumerate().find(|&(i, &h)| h == s.hash && self.flows[i].seg.key == s.key).map(|(i, _)| i)
    }

    /// The held flow of segment `p` of the usual layout (`frame`), and whether
    /// its template matches.
    #[inline(always)]
    fn find_fast(&self, frame: &[u8], p: &Pkt) -> Option<(usize, bool)> {
        for (i, &h) in self.hashes.iter().enumerate() {
            if h != p.hash {
                continue;
            }
            let f = &self.flows[i];
            if f.fast && tpl_matches(&f.words, frame, p.l4) {
                return Some((i, true));
            }
            // Not the same template: the same flow?
            let w = tpl_words(frame, p.l4).unwrap_or_default();
            if f.fast {
                if same_key_words(&f.words, &w) {
                    return Some((i, false));
                }
            } else if key_of_words(&w) == f.seg.key {
                // A flow started by a segment of another layout: compare the
                // templates as the general path does.
                const GOOD: u64 = abi::RX_IP_CKSUM_GOOD | abi::RX_L4_CKSUM_GOOD;
                let mut s = Seg::default();
                let same = parse_into(frame, frame.len(), GOOD, &mut s).is_ok() && same_template(&f.seg, &s);
                return Some((i, same));
            }
        }
        None
    }

    /// Start a run of flow `f` with segment `m`, written field by field into a
    /// free slot: a `Run` built on the stack and pushed was read back from memory
    /// just written (a store-forwarding stall for every new flow). Its index.
    #[inline(always)]
    fn start_run(f: &mut Flow, m: Mbuf, s: &Pkt, cap: u32) -> usize {
        if f.nruns == f.runs.len() {
            f.runs.push(Run::empty());
        }
        let k = f.nruns;
        let r = &mut f.runs[k];
        r.seg = s.hdr();
        r.start = s.seq;
        r.next = s.seq.wrapping_add(u32::from(s.payload));
        r.last_id = u32::from(s.ip_id);
        r.segs = 1;
        r.bytes = u32::from(s.payload);
        r.head_sum = s.sum;
        r.acc = 0;
        r.last_flags = u32::from(s.flags);
        r.last_len = u32::from(s.payload);
        r.cap = cap;
        r.head = Some(m);
        r.copied = false;
        f.nruns += 1;
        k
    }

    fn new_flow(&mut self, m: Mbuf, s: &Pkt, t: Tpl<'_>, now: u64, out: &mut Out<'_>) {
        if self.live >= self.cfg.max_flows.max(1) {
            let oldest = (0..self.live).min_by_key(|&i| self.first_tsc[i]).unwrap_or(0);
            self.stats.flows_evicted += 1;
            self.flush_flow(oldest, Why::Evict, out);
        }
        let ends = s.flags & END_MERGE != 0;
        let i = self.live;
        if i == self.flows.len() {
            self.flows.push(Flow::empty());
        }
        self.hint = i;
        let f = &mut self.flows[i];
        match t {
            Tpl::Fast(l4) => {
                let w = tpl_words(m.data(), l4).unwrap_or_default();
                f.fast = true;
                f.words = w;
                f.seg.key = key_of_words(&w);
            }
            Tpl::Slow(seg) => {
                f.fast = false;
                *f.seg = *seg;
            }
        }
        let cap = self.run_cap(s);
        Self::start_run(&mut self.flows[i], m, s, cap);
        self.held_segs += 1;
        self.live += 1;
        self.hashes.push(s.hash);
        self.first_tsc.push(now);
        if ends {
            self.flush_flow(i, Why::End, out);
        }
    }

    #[inline(always)]
    fn add(&mut self, i: usize, m: Mbuf, s: &Pkt, t: Tpl<'_>, now: u64, out: &mut Out<'_>) {
        // The usual case first, with the run borrowed once: GRO, the flow holds one
        // run, `s` continues it, and its head needs no trimming.
        if self.cfg.mode == Mode::Gro {
            let max_segs = u32::from(self.cfg.max_segments);
            let f = &mut self.flows[i];
            if let [run] = &mut f.runs[..f.nruns] {
                if run.next == s.seq && (run.segs > 1 || !head_padded(run)) {
                    let why = match can_append(run, s, max_segs) {
                        Ok(()) => {
                            let mss = run.seg.payload;
                            if push_seg(run, m, s) {
                                self.held_segs += 1;
                            } else {
                                self.stats.malformed += 1;
                            }
                            if s.flags & END_MERGE != 0 || s.payload < mss {
                                Why::End
                            } else if fits(run, run.segs + 1, run.bytes + u32::from(mss), max_segs).is_err() {
                                Why::Limit
                            } else {
                                return;
                            }
                        }
                        Err(why) => {
                            self.flush_flow(i, why, out);
                            self.new_flow(m, s, t, now, out);
                            return;
                        }
                    };
                    self.flush_flow(i, why, out);
                    return;
                }
            }
        }
        self.add_general(i, m, s, t, now, out);
    }

    /// [`Aggregator::add`] in every case: any run of the flow, out of order, LRO.
    #[inline(never)]
    fn add_general(&mut self, i: usize, m: Mbuf, s: &Pkt, t: Tpl<'_>, now: u64, out: &mut Out<'_>) {
        let f = &self.flows[i];
        let held = &f.runs[..f.nruns];
        let end = s.seq.wrapping_add(u32::from(s.payload));
        if let Some(r) = held.iter().position(|r| r.next == s.seq) {
            match can_append(&held[r], s, u32::from(self.cfg.max_segments)) {
                Ok(()) => {
                    self.append(i, r, m, s, out);
                    return;
                }
                Err(why) => {
                    self.flush_flow(i, why, out);
                    self.new_flow(m, s, t, now, out);
                    return;
                }
            }
        }
        let overlaps = held.iter().any(|r| seq_lt(s.seq, r.next) && seq_lt(r.start, end));
        if overlaps {
            // A retransmission or overlap: deliver what we hold, start again.
            self.flush_flow(i, Why::Mismatch, out);
            self.new_flow(m, s, t, now, out);
            return;
        }
        if let Some(r) = held.iter().position(|r| r.start == end) {
            // `s` comes just before a held run: it becomes that run's head.
            self.stats.reordered += 1;
            let cap = self.run_cap(s);
            let a = Self::start_run(&mut self.flows[i], m, s, cap);
            self.held_segs += 1;
            let f = &self.flows[i];
            if self.can_concat(&f.runs[a], &f.runs[r]).is_ok() {
                self.concat(i, a, r, out);
            }
            return;
        }
        if held.len() >= MAX_RUNS {
            self.flush_flow(i, Why::Limit, out);
            self.new_flow(m, s, t, now, out);
            return;
        }
        self.stats.reordered += 1;
        let cap = self.run_cap(s);
        Self::start_run(&mut self.flows[i], m, s, cap);
        self.held_segs += 1;
    }

    /// Free everything held (at stop); returns how many packets were freed.
    pub fn discard(&mut self) -> usize {
        let n = self.held();
        for f in &mut self.flows[..self.live] {
            for r in &mut f.runs[..f.nruns] {
                r.head = None;
                r.tails.clear();
            }
            f.nruns = 0;
        }
        self.live = 0;
        self.held_segs = 0;
        self.hashes.clear();
        self.first_tsc.clear();
        self.pending.clear();
        self.stats.dropped += n as u64;
        n
    }
}

/// Whether a packet the aggregator does not merge may still be a TCP segment of a
/// held flow: IPv4 carrying TCP, or IPv6 with any next header but UDP and ICMPv6 (an
/// extension header may lead to TCP), behind any VLAN tags.
fn maybe_tcp(frame: &[u8]) -> bool {
    match l3_offset(frame) {
        Ok((EtherType::IPV4, o)) => frame.get(o + 9) == Some(&IpProtocol::TCP.0),
        Ok((EtherType::IPV6, o)) => frame.get(o + 6).is_some_and(|&n| n != 17 && n != 58),
        _ => false,
    }
}
