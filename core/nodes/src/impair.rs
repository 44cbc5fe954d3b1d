//! `impair`: make a link bad on purpose, as `tc netem` would (this kernel has
//! none), smoltcp's FaultInjector or testpmd's `noisy` engine: seeded loss,
//! delay with jitter (which reorders), duplication and corruption of the packets
//! passing through. Put one on the receive path and one on the transmit path and
//! the peer sees impairment both ways.
//!
//! Every decision comes from a seeded generator, so a run can be repeated. Delayed
//! packets wait in a time-ordered queue (bounded by `max_held`; beyond it they
//! are dropped and counted); the node is polled, so they leave on time without
//! other traffic. A duplicate is a full copy (both copies stay writable); a
//! corruption flips one bit at or after byte 14 (past the Ethernet header, so the
//! damage is for checksums to find, not for the MAC filter; the port's checksum
//! verdicts are cleared on a corrupted packet and kept on a duplicate). A TSO
//! packet (`TX_TCP_SEG`) is cut into its wire segments first, each impaired alone,
//! as a link would see them (unless the node is idle: then it passes whole). The cut
//! frees the TSO packet's header buffer here, so a sender tracking TX completions
//! (`tcp`'s `tx_inflight_limit`) sees them as this node forwards, not as the port
//! sends.

use crate::kind::{NodeError, NodeKind, MEMPOOL};
use ironpath_config::{Nexts, NodeSpec, ParamKind, ParamSpec};
use ironpath_eal::{abi, Burst, Mbuf, Mempool, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx, SleepPlan};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

ironpath_graph::counters! {
    /// What `impair` counts.
    pub enum ImpairCounter {
        Passed("passed", "packets sent on"),
        Lost("lost", "packets dropped on purpose"),
        Duplicated("duplicated", "extra copies sent"),
        Corrupted("corrupted", "packets with one bit flipped"),
        Delayed("delayed", "packets held for a delay"),
        HeldFull("held_full", "packets dropped (max_held reached)"),
        NoMbuf("no_mbuf", "duplicates or copies not made (mempool empty)"),
    }
}

/// Probabilities are in parts per million.
pub const PPM: u32 = 1_000_000;

/// Settings of an `impair` node.
#[derive(Clone, Copy, Debug, Default)]
pub struct ImpairConfig {
    /// Generator seed.
    pub seed: u64,
    /// Loss probability (ppm).
    pub loss_ppm: u32,
    /// Duplication probability (ppm).
    pub duplicate_ppm: u32,
    /// Corruption probability (ppm).
    pub corrupt_ppm: u32,
    /// Base delay in TSC ticks.
    pub delay_tsc: u64,
    /// Jitter in TSC ticks: each packet's delay is uniform in delay ± jitter.
    pub jitter_tsc: u64,
    /// Most packets waiting at once.
    pub max_held: usize,
}

/// Parse a probability written as a percentage (`"1%"`, `"0.1%"`) or a plain
/// fraction (`"0.01"`) into parts per million.
pub fn parse_ppm(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(p) => (p.trim(), 10_000.0),
        None => (t, 1_000_000.0),
    };
    let v: f64 = num.parse().map_err(|_| format!("`{s}` is not a probability (write e.g. 1% or 0.01)"))?;
    let ppm = v * scale;
    if !(0.0..=1_000_000.0).contains(&ppm) || ppm.is_nan() {
        return Err(format!("`{s}` is not between 0% and 100%"));
    }
    Ok(ppm.round() as u32)
}

/// The node.
pub struct Impair {
    cfg: ImpairConfig,
    pool: Mempool,
    rng: u64,
    /// Release time and arrival number (keeps FIFO order among equal times).
    queue: BinaryHeap<Reverse<(u64, u64)>>,
    held: HashMap<u64, Mbuf>,
    seq: u64,
    /// Some impairment is configured (an idle node passes TSO packets whole).
    active: bool,
}

impl Impair {
    /// A node copying duplicates from `pool`.
    pub fn new(cfg: ImpairConfig, pool: Mempool) -> Self {
        let rng = cfg.seed ^ 0x9e37_79b9_7f4a_7c15;
        let active = cfg.loss_ppm | cfg.corrupt_ppm | cfg.duplicate_ppm != 0 || cfg.delay_tsc | cfg.jitter_tsc != 0;
        let held = HashMap::new();
        Self { cfg, pool, rng: if rng == 0 { 1 } else { rng }, queue: BinaryHeap::new(), held, seq: 0, active }
    }

    /// Packets waiting for their delay.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    fn next(&mut self) -> u64 {
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn chance(&mut self, ppm: u32) -> bool {
        ppm > 0 && (self.next() % u64::from(PPM)) < u64::from(ppm)
    }

    fn corrupt(&mut self, cx: &NodeCx<'_>, m: Mbuf) -> Mbuf {
        let mut m = if m.is_writable() && m.nb_segs() == 1 {
            m
        } else {
            match m.deep_copy(&self.pool) {
                Ok(c) => c,
                Err(_) => {
                    cx.count(ImpairCounter::NoMbuf, 1);
                    return m;
                }
            }
        };
        let r = self.next();
        if let Ok(d) = m.data_mut() {
            if d.len() > 14 {
                let at = 14 + (r as usize >> 8) % (d.len() - 14);
                d[at] ^= 1 << (r & 7);
                cx.count(ImpairCounter::Corrupted, 1);
                // Whatever the port verified no longer holds: let the checksums find it.
                m.header_mut().ol_flags &= !(abi::RX_IP_CKSUM_GOOD | abi::RX_L4_CKSUM_GOOD | abi::RX_L4_CKSUM_NONE);
            }
        }
        m
    }

    fn delay_of(&mut self) -> u64 {
        let (d, j) = (self.cfg.delay_tsc, self.cfg.jitter_tsc);
        if j == 0 {
            return d;
        }
        let off = self.next() % (2 * j + 1);
        (d + off).saturating_sub(j)
    }

    /// Send `m` on now or after its delay, counted from `arrival` (TSC).
    /// Loss, corruption and duplication of one frame, then on (now or delayed).
    fn one(&mut self, cx: &NodeCx<'_>, m: Mbuf, out: &mut Burst, arrival: u64) {
        if self.chance(self.cfg.loss_ppm) {
            cx.count(ImpairCounter::Lost, 1);
            return;
        }
        let m = if self.chance(self.cfg.corrupt_ppm) { self.corrupt(cx, m) } else { m };
        if self.chance(self.cfg.duplicate_ppm) {
            match m.deep_copy(&self.pool) {
                Ok(mut copy) => {
                    copy.header_mut().ol_flags &= !abi::RX_AGGREGATED;
                    cx.count(ImpairCounter::Duplicated, 1);
                    self.forward(cx, copy, out, arrival);
                }
                Err(_) => cx.count(ImpairCounter::NoMbuf, 1),
            }
        }
        self.forward(cx, m, out, arrival);
    }

    fn forward(&mut self, cx: &NodeCx<'_>, m: Mbuf, out: &mut Burst, arrival: u64) {
        let delay = self.delay_of();
        if delay == 0 && self.queue.is_empty() {
            match out.push(m) {
                Ok(()) => cx.count(ImpairCounter::Passed, 1),
                Err(m) => self.hold(cx, arrival, m),
            }
            return;
        }
        cx.count(ImpairCounter::Delayed, 1);
        self.hold(cx, arrival.wrapping_add(delay), m);
    }

    fn hold(&mut self, cx: &NodeCx<'_>, at: u64, m: Mbuf) {
        if self.held.len() >= self.cfg.max_held {
            cx.count(ImpairCounter::HeldFull, 1);
            return;
        }
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq)));
        self.held.insert(self.seq, m);
    }
}

impl Node for Impair {
    fn sleep(&mut self, _cx: &mut NodeCx<'_>, plan: &mut SleepPlan) {
        // Packets held for their delay leave at their time.
        plan.quiet();
        if let Some(Reverse((at, _))) = self.queue.peek() {
            plan.until(*at);
        }
    }

    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        if !self.active && self.queue.is_empty() {
            // Idle (no impairment configured, nothing held): every packet passes as
            // it is, as `one` would pass it, without building a second burst (that
            // costs a 2 KiB clear each call, on every walk of the graph).
            cx.count(ImpairCounter::Passed, pkts.len() as u64);
            return Dispatch::All(0);
        }
        if pkts.is_empty() && self.queue.peek().is_none_or(|Reverse((at, _))| *at > cx.now_tsc) {
            return Dispatch::All(0);
        }
        let mut out = Burst::new();
        if !pkts.is_empty() {
            // The delay counts from now, not from the start of the walk: a thread
            // preempted after the walk began must not shorten it.
            let arrival = if self.cfg.delay_tsc > 0 { cx.tsc() } else { cx.now_tsc };
            let mut wire = Vec::new();
            // An idle node passes TSO packets whole (cutting them would cost CPU and
            // end the sender's completion tracking at this node).
            let active = self.active;
            for m in pkts.drain() {
                let h = m.header();
                if active && h.ol_flags & abi::TX_TCP_SEG != 0 && h.tso_segsz > 0 {
                    // A TSO packet is many frames on the wire: impair each of them.
                    let mss = h.tso_segsz;
                    wire.clear();
                    match crate::aggregate::gso::segment(m, &self.pool, mss, &mut |s| wire.push(s)) {
                        Ok(_) => {
                            for s in wire.drain(..) {
                                self.one(cx, s, &mut out, arrival);
                            }
                        }
                        Err((m, _)) => self.one(cx, m, &mut out, arrival),
                    }
                } else {
                    self.one(cx, m, &mut out, arrival);
                }
            }
        }
        // Release what is due, oldest first, as far as the burst has room.
        while let Some(&Reverse((at, id))) = self.queue.peek() {
            if at > cx.now_tsc || out.room() == 0 {
                break;
            }
            self.queue.pop();
            if let Some(m) = self.held.remove(&id) {
                if let Err(m) = out.push(m) {
                    self.held.insert(id, m);
                    self.queue.push(Reverse((at, id)));
                    break;
                }
                cx.count(ImpairCounter::Passed, 1);
            }
        }
        out.move_to(pkts);
        Dispatch::All(0)
    }

    fn counters(&self) -> &'static [CounterSpec] {
        ImpairCounter::SPECS
    }

    fn stop(&mut self) {
        self.queue.clear();
        self.held.clear();
    }
}

/// `impair`.
pub const KIND: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "impair",
        doc: "a bad link on purpose (as netem): seeded loss, delay with jitter (reordering), duplication, corruption",
        params: &[
            ParamSpec::new("seed", ParamKind::Uint { min: 0, max: u64::MAX })
                .default("1")
                .doc("generator seed (same seed, same decisions)"),
            ParamSpec::new("loss", ParamKind::Str)
                .default("0%")
                .doc("probability a packet is dropped (`1%`, `0.1%` or a fraction like `0.01`)"),
            ParamSpec::new("duplicate", ParamKind::Str).default("0%").doc("probability a packet is sent twice"),
            ParamSpec::new("corrupt", ParamKind::Str)
                .default("0%")
                .doc("probability one bit (past the Ethernet header) is flipped"),
            ParamSpec::new("delay", ParamKind::Duration).default("0us").doc("base delay"),
            ParamSpec::new("jitter", ParamKind::Duration)
                .default("0us")
                .doc("each packet's delay is uniform in delay ± jitter (reorders)"),
            ParamSpec::new("max_held", ParamKind::Uint { min: 1, max: 1_000_000 })
                .default("65536")
                .doc("most packets waiting (beyond: dropped, counted)"),
            MEMPOOL,
        ],
        nexts: Nexts::Fixed(&["out"]),
        source: true,
        check: Some(|p| {
            for k in ["loss", "duplicate", "corrupt"] {
                parse_ppm(p.str(k).unwrap_or("0")).map_err(|e| (p.loc(k), format!("`{k}`: {e}")))?;
            }
            Ok(())
        }),
        ..NodeSpec::DEFAULT
    },
    build: |b, env| {
        let p = b.params();
        let ppm = |k: &'static str| -> Result<u32, NodeError> {
            parse_ppm(p.str(k)?).map_err(|reason| NodeError::Param { param: k, reason })
        };
        let hz = env.tsc_hz();
        let cfg = ImpairConfig {
            seed: p.uint("seed")?,
            loss_ppm: ppm("loss")?,
            duplicate_ppm: ppm("duplicate")?,
            corrupt_ppm: ppm("corrupt")?,
            delay_tsc: p.tsc("delay", hz)?,
            jitter_tsc: p.tsc("jitter", hz)?,
            max_held: p.int("max_held")?,
        };
        Ok(Box::new(Impair::new(cfg, env.mempool(p.raw().mempool("mempool"), None)?)))
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{burst, call, counter, pool, stats};

    fn frames(n: usize) -> Vec<Vec<u8>> {
        frames_from(0, n)
    }

    /// `n` frames numbered from `start` (big-endian at byte 20).
    fn frames_from(start: u64, n: usize) -> Vec<Vec<u8>> {
        (0..n as u64)
            .map(|i| {
                let mut f = vec![0u8; 64];
                f[20..28].copy_from_slice(&(start + i).to_be_bytes());
                f
            })
            .collect()
    }

    fn seqs(b: &mut Burst) -> Vec<u64> {
        let v = (0..b.len()).map(|i| u64::from_be_bytes(b.data(i)[20..28].try_into().unwrap())).collect();
        b.free_all();
        v
    }

    #[test]
    fn parses_probabilities() {
        assert_eq!(parse_ppm("1%"), Ok(10_000));
        assert_eq!(parse_ppm("0.1%"), Ok(1_000));
        assert_eq!(parse_ppm("0.01"), Ok(10_000));
        assert_eq!(parse_ppm(" 100 % "), Ok(1_000_000));
        assert!(parse_ppm("101%").is_err());
        assert!(parse_ppm("-1%").is_err());
        assert!(parse_ppm("lots").unwrap_err().contains("not a probability"));
    }

    #[test]
    fn loss_duplication_and_corruption_follow_their_rates_and_the_seed() {
        let p = pool(4096);
        let cfg = ImpairConfig {
            seed: 7,
            loss_ppm: 100_000,
            duplicate_ppm: 50_000,
            corrupt_ppm: 20_000,
            max_held: 1000,
            ..Default::default()
        };
        let run = || {
            let mut n = Impair::new(cfg, p.clone());
            let st = stats(&n);
            let mut got = Vec::new();
            for r in 0..40 {
                let mut b = burst(
                    &p,
                    &frames(100)
                        .into_iter()
                        .map(|mut f| {
                            f[0] = r;
                            f
                        })
                        .collect::<Vec<_>>(),
                );
                call(&mut n, &st, &mut b, 1);
                got.extend(seqs(&mut b));
            }
            (got, counter(&st, "lost"), counter(&st, "duplicated"), counter(&st, "corrupted"), counter(&st, "passed"))
        };
        let (a, lost, dup, cor, passed) = run();
        assert_eq!(run().0, a, "same seed, same decisions");
        assert!((300..500).contains(&lost), "10% of 4000: {lost}");
        assert!((120..290).contains(&dup), "5% of 3600: {dup}");
        assert!((40..130).contains(&cor), "2% of 3600: {cor}");
        assert_eq!(passed, 4000 - lost + dup);
        assert_eq!(a.len() as u64, passed);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn corruption_flips_exactly_one_bit_past_the_ethernet_header() {
        let p = pool(64);
        let mut n =
            Impair::new(ImpairConfig { seed: 3, corrupt_ppm: PPM, max_held: 10, ..Default::default() }, p.clone());
        let st = stats(&n);
        let f = frames(1);
        for _ in 0..50 {
            let mut b = burst(&p, &f);
            call(&mut n, &st, &mut b, 1);
            let d = b.data(0).to_vec();
            let diff: u32 = d.iter().zip(&f[0]).map(|(x, y)| (x ^ y).count_ones()).sum();
            assert_eq!(diff, 1);
            assert_eq!(&d[..14], &f[0][..14]);
            b.free_all();
        }
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn delay_holds_until_due_and_jitter_reorders() {
        let p = pool(2048);
        let mut n =
            Impair::new(ImpairConfig { seed: 1, delay_tsc: 1000, max_held: 5000, ..Default::default() }, p.clone());
        let st = stats(&n);
        let mut b = burst(&p, &frames(10));
        call(&mut n, &st, &mut b, 100);
        assert!(b.is_empty(), "held for the delay");
        call(&mut n, &st, &mut b, 1099);
        assert!(b.is_empty(), "not due yet");
        call(&mut n, &st, &mut b, 1100);
        assert_eq!(seqs(&mut b), (0..10).collect::<Vec<_>>(), "due, in order");
        // With jitter: some packets overtake others; nothing is lost.
        let mut n = Impair::new(
            ImpairConfig { seed: 9, delay_tsc: 1000, jitter_tsc: 500, max_held: 5000, ..Default::default() },
            p.clone(),
        );
        let st = stats(&n);
        let mut out = Vec::new();
        for t in 0..100u64 {
            let mut b = burst(&p, &frames_from(t * 10, 10));
            call(&mut n, &st, &mut b, t * 100);
            out.extend(seqs(&mut b));
        }
        let mut b = Burst::new();
        call(&mut n, &st, &mut b, 1_000_000);
        out.extend(seqs(&mut b));
        assert_eq!(out.len(), 1000);
        assert!(out.windows(2).any(|w| w[0] > w[1]), "jitter reorders");
        assert_eq!(n.held(), 0);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn the_delay_line_is_bounded() {
        let p = pool(512);
        let mut n =
            Impair::new(ImpairConfig { seed: 1, delay_tsc: 1000, max_held: 50, ..Default::default() }, p.clone());
        let st = stats(&n);
        let mut b = burst(&p, &frames(80));
        call(&mut n, &st, &mut b, 0);
        assert_eq!((n.held(), counter(&st, "held_full")), (50, 30));
        drop(n);
        assert_eq!(p.stats().in_use, 0);
    }
}
