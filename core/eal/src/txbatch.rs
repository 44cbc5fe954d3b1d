//! TX batching with bounded delay, and TX completion made explicit.
//!
//! [`TxBatcher`] owns one TX queue. Packets given to it wait in a buffer until one of
//! the flush conditions holds (each counted, see [`FlushReason`]):
//! * `coalesce` packets are buffered (`Full`);
//! * the oldest buffered packet has waited `flush_tsc` ticks (`Timeout`), checked on
//!   every [`TxBatcher::poll`];
//! * the lcore found no work on a walk and `flush_on_idle` is set (`Idle`);
//! * a packet of the burst given to [`TxBatcher::enqueue`] carries [`TX_PUSH`]
//!   (`Push`): the batch goes out at the end of that burst, with the packets that
//!   followed the pushed one in it (they are already here: waiting would gain nothing),
//!   as a driver rings its doorbell once for what one `xmit_more` run queued;
//! * the owner stops (`Stop`).
//!
//! **Completion.** A driver that holds packets until the device has sent them (a NIC
//! descriptor ring, af_packet frames the kernel has not released) frees them when it
//! reclaims; the batcher asks it to on every poll ([`TxQ::done_cleanup`]). On top of
//! that, [`Completion`] emulates a NIC's completion (interrupt) coalescing: with
//! `Every(n)` or `Timer(t)` the batcher keeps its own reference to every sent packet
//! and releases them only when `n` are outstanding or the oldest is `t` ticks old. A
//! sender that waits for its packets to be freed (the `tcp` node's
//! `tx_inflight_limit`, like Linux's TCP Small Queues) sees completions exactly when
//! a driver with that coalescing would report them.
//!
//! Time is an argument (`now`, TSC ticks), so tests drive it with a virtual clock.

use crate::burst::Burst;
use crate::mbuf::Mbuf;
use crate::port::TxQ;
use std::collections::VecDeque;

/// Flag on a packet (`ol_flags`) that ends a batch: the batcher flushes at the end of
/// the burst that carried it. Drivers ignore it.
pub const TX_PUSH: u64 = ironpath_abi::TX_PUSH;

/// When completions of sent packets are reported (their last reference released).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    /// As soon as the driver frees them.
    Immediate,
    /// When this many sent packets are outstanding (a NIC's `tx-frames`); a timer of
    /// one second stands behind it so that nothing is held forever.
    Every(u32),
    /// When the oldest outstanding packet is this many TSC ticks old (a NIC's
    /// `tx-usecs`).
    Timer(u64),
}

impl Completion {
    /// Parse `immediate`, `every N` or `timer_us T` (testpmd's `set txcompletion`);
    /// `hz` converts microseconds to TSC ticks.
    pub fn parse(words: &[&str], hz: u64) -> Result<Self, String> {
        let num = |w: Option<&&str>, what: &str| -> Result<u64, String> {
            w.and_then(|s| s.parse::<u64>().ok())
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("`{what}` needs a positive integer"))
        };
        match words {
            ["immediate"] => Ok(Completion::Immediate),
            ["every", rest @ ..] if rest.len() <= 1 => {
                Ok(Completion::Every(num(rest.first(), "every")?.min(u64::from(u32::MAX)) as u32))
            }
            ["timer_us", rest @ ..] if rest.len() <= 1 => {
                Ok(Completion::Timer(us_to_tsc(num(rest.first(), "timer_us")?, hz)))
            }
            _ => Err("expected `immediate`, `every N` or `timer_us T`".to_owned()),
        }
    }

    /// The form [`Completion::parse`] reads (`hz`: TSC ticks per second).
    pub fn describe(&self, hz: u64) -> String {
        match *self {
            Completion::Immediate => "immediate".to_owned(),
            Completion::Every(n) => format!("every {n}"),
            Completion::Timer(t) => format!("timer_us {}", tsc_to_us(t, hz)),
        }
    }
}

/// Microseconds to TSC ticks.
pub fn us_to_tsc(us: u64, hz: u64) -> u64 {
    (u128::from(us) * u128::from(hz) / 1_000_000).min(u128::from(u64::MAX)) as u64
}

/// TSC ticks to microseconds (rounded to the nearest).
pub fn tsc_to_us(t: u64, hz: u64) -> u64 {
    let hz = u128::from(hz.max(1));
    ((u128::from(t) * 1_000_000 + hz / 2) / hz) as u64
}

/// Settings of a [`TxBatcher`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxBatchConfig {
    /// Flush when this many packets are buffered (1 = no batching; at most 256).
    pub coalesce: usize,
    /// Flush when the oldest buffered packet has waited this many TSC ticks.
    pub flush_tsc: u64,
    /// Flush when a walk of the lcore found no work.
    pub flush_on_idle: bool,
    /// Completion reporting.
    pub completion: Completion,
    /// Times a full queue is retried within one flush before packets are dropped.
    pub retries: u32,
    /// TSC ticks per second (for the `Every` policy's backstop timer).
    pub hz: u64,
}

/// Why a flush happened (index into [`TxBatchStats::flushes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushReason {
    /// `coalesce` packets were buffered.
    Full = 0,
    /// The oldest packet waited `flush_tsc`.
    Timeout = 1,
    /// The lcore was idle.
    Idle = 2,
    /// A packet carried [`TX_PUSH`].
    Push = 3,
    /// The owner stopped.
    Stop = 4,
}

/// Names of the flush reasons, in index order.
pub const FLUSH_REASONS: [&str; 5] = ["full", "timeout", "idle", "push", "stop"];

/// Counters of a [`TxBatcher`] (monotonic except `held`/`buffered`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxBatchStats {
    /// Flushes by [`FlushReason`].
    pub flushes: [u64; 5],
    /// Packets the driver took.
    pub sent: u64,
    /// Bytes the driver took.
    pub bytes: u64,
    /// Packets dropped because the queue stayed full.
    pub tx_full: u64,
    /// Completions reported (references released by the completion policy; with
    /// `Immediate`, packets the driver freed on request).
    pub completions: u64,
    /// Packets waiting in the buffer now.
    pub buffered: u64,
    /// Sent packets held by the completion policy now.
    pub held: u64,
    /// Longest wait of a packet in the buffer, in TSC ticks.
    pub max_wait_tsc: u64,
}

/// One TX queue with batching and a completion policy (see the module doc).
pub struct TxBatcher {
    q: TxQ,
    cfg: TxBatchConfig,
    buf: Burst,
    /// TSC when the oldest buffered packet arrived.
    oldest: u64,
    push: bool,
    /// Sent packets whose completion the policy has not reported yet, with the TSC
    /// they were sent at.
    held: VecDeque<(Mbuf, u64)>,
    stats: TxBatchStats,
    /// The driver may hold sent packets: ask it to reclaim on the next poll. Cleared
    /// when it says it holds none, so a driver that frees as it sends costs one
    /// reclaim call per flush, not one per poll.
    driver_holds: bool,
    /// Bumped whenever a counter changes (cheap change detection for publishers).
    version: u64,
}

impl TxBatcher {
    /// A batcher on `q` (`coalesce` is clamped to 1..=256).
    pub fn new(q: TxQ, mut cfg: TxBatchConfig) -> Self {
        cfg.coalesce = cfg.coalesce.clamp(1, crate::burst::MAX_BURST);
        Self {
            q,
            cfg,
            buf: Burst::new(),
            oldest: 0,
            push: false,
            held: VecDeque::new(),
            stats: Default::default(),
            driver_holds: false,
            version: 0,
        }
    }

    /// The settings.
    pub fn config(&self) -> &TxBatchConfig {
        &self.cfg
    }

    /// Change the coalesce size (flushes what is buffered first).
    pub fn set_coalesce(&mut self, n: usize, now: u64) {
        self.flush(FlushReason::Stop, now);
        self.cfg.coalesce = n.clamp(1, crate::burst::MAX_BURST);
    }

    /// Change the completion policy (reports what is held first).
    pub fn set_completion(&mut self, c: Completion) {
        self.release(self.held.len());
        self.cfg.completion = c;
    }

    /// The queue.
    pub fn queue(&self) -> &TxQ {
        &self.q
    }

    /// Counters, with the driver's view of in-flight packets left to the caller
    /// ([`TxQ::inflight`]).
    pub fn stats(&self) -> TxBatchStats {
        TxBatchStats { buffered: self.buf.len() as u64, held: self.held.len() as u64, ..self.stats }
    }

    /// A number that changes whenever [`TxBatcher::stats`] may have changed.
    #[inline]
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Take every packet of `pkts` (it is left empty), flushing as they fill batches;
    /// if one of them carried [`TX_PUSH`], what is buffered goes out at the end (one
    /// driver call for the burst, not one per pushed packet: a burst of answers to
    /// several requests is one kick).
    pub fn enqueue(&mut self, pkts: &mut Burst, now: u64) {
        while !pkts.is_empty() {
            if self.buf.is_empty() {
                self.oldest = now;
            }
            let take = (self.cfg.coalesce - self.buf.len()).min(pkts.len());
            if !self.push {
                self.push = (0..take).any(|k| pkts.header(k).ol_flags & TX_PUSH != 0);
            }
            pkts.move_front_to(&mut self.buf, take);
            if self.buf.len() >= self.cfg.coalesce {
                // A full batch carries any push it held (flush clears it).
                self.flush(if self.push { FlushReason::Push } else { FlushReason::Full }, now);
            }
        }
        if self.push {
            self.flush(FlushReason::Push, now);
        }
    }

    /// Per-walk work: the flush timer, completions from the driver and the policy.
    pub fn poll(&mut self, now: u64) {
        if !self.buf.is_empty() && now.wrapping_sub(self.oldest) >= self.cfg.flush_tsc {
            self.flush(FlushReason::Timeout, now);
        }
        self.complete(now);
    }

    /// What the batcher needs before its lcore may sleep: `Err` when it must keep
    /// polling (sent packets wait for their completion, which comes with no signal),
    /// `Ok(Some(t))` when a flush is due at TSC `t`, `Ok(None)` when nothing waits.
    pub fn wake_need(&self) -> Result<Option<u64>, &'static str> {
        if !self.held.is_empty() || (self.driver_holds && self.q.inflight() > 0) {
            return Err("sent packets waiting for their completion");
        }
        if !self.buf.is_empty() {
            return Ok(Some(self.oldest.wrapping_add(self.cfg.flush_tsc)));
        }
        Ok(None)
    }

    /// The lcore found no work: flush if `flush_on_idle`.
    pub fn idle(&mut self, now: u64) {
        if self.cfg.flush_on_idle && !self.buf.is_empty() {
            self.flush(FlushReason::Idle, now);
        }
        self.complete(now);
    }

    /// Flush everything and report every completion (the owner stops).
    pub fn stop(&mut self, now: u64) {
        self.flush(FlushReason::Stop, now);
        self.release(self.held.len());
        self.q.done_cleanup(0);
    }

    /// Ask the driver for completions and apply the policy to held packets.
    #[inline]
    fn complete(&mut self, now: u64) {
        if self.driver_holds {
            let freed = self.q.done_cleanup(0);
            if freed > 0 {
                self.version += 1;
                if self.cfg.completion == Completion::Immediate {
                    self.stats.completions += freed as u64;
                }
            }
            self.driver_holds = self.q.inflight() > 0;
        }
        if self.held.is_empty() {
            return;
        }
        match self.cfg.completion {
            Completion::Immediate => {}
            Completion::Every(n) => {
                let backstop = self.cfg.hz.max(1);
                if self.held.len() >= n as usize
                    || self.held.front().is_some_and(|(_, t)| now.wrapping_sub(*t) >= backstop)
                {
                    self.release(self.held.len());
                }
            }
            Completion::Timer(t) => {
                if self.held.front().is_some_and(|(_, s)| now.wrapping_sub(*s) >= t) {
                    self.release(self.held.len());
                }
            }
        }
    }

    fn release(&mut self, n: usize) {
        for _ in 0..n {
            drop(self.held.pop_front());
        }
        self.stats.completions += n as u64;
        self.version += 1;
    }

    /// Send what is buffered (with `retries` on a full queue; the rest is dropped).
    pub fn flush(&mut self, why: FlushReason, now: u64) {
        self.push = false;
        if self.buf.is_empty() {
            return;
        }
        self.stats.max_wait_tsc = self.stats.max_wait_tsc.max(now.wrapping_sub(self.oldest));
        self.stats.flushes[why as usize] += 1;
        self.version += 1;
        self.driver_holds = self.q.holds_packets();
        let hold = self.cfg.completion != Completion::Immediate;
        let mut left = self.cfg.retries;
        while !self.buf.is_empty() {
            if hold {
                for k in 0..self.buf.len() {
                    self.held.push_back((self.buf.share(k), now));
                }
            }
            let before = self.buf.len();
            let bytes: u64 = (0..before).map(|k| u64::from(self.buf.header(k).pkt_len)).sum();
            let sent = self.buf.tx(&self.q);
            let unsent_bytes: u64 = (0..self.buf.len()).map(|k| u64::from(self.buf.header(k).pkt_len)).sum();
            if hold {
                // The unsent ones stay ours: drop the references taken for them.
                for _ in 0..self.buf.len() {
                    self.held.pop_back();
                }
            }
            self.stats.sent += sent as u64;
            self.stats.bytes += bytes - unsent_bytes;
            if sent == 0 {
                if left == 0 {
                    break;
                }
                left -= 1;
                // A full ring: reclaim what the device has finished before retrying.
                self.q.done_cleanup(0);
            }
        }
        if !self.buf.is_empty() {
            self.stats.tx_full += self.buf.len() as u64;
            self.buf.free_all();
        }
    }
}

impl Drop for TxBatcher {
    fn drop(&mut self) {
        self.buf.free_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::testing::sink_txq;
    use crate::{MemPolicy, Mempool, MempoolConfig};
    use ironpath_util::testing::XorShift;

    const HZ: u64 = 1_000_000; // 1 tick = 1 us

    fn pool() -> Mempool {
        Mempool::create(&MempoolConfig::new("txbatch-test", 512).cache_size(0).policy(MemPolicy::NoHuge)).unwrap()
    }

    fn cfg(coalesce: usize, flush_us: u64, completion: Completion) -> TxBatchConfig {
        TxBatchConfig { coalesce, flush_tsc: flush_us, flush_on_idle: true, completion, retries: 0, hz: HZ }
    }

    fn pkts(pool: &Mempool, n: usize, push_last: bool) -> Burst {
        let mut b = Burst::new();
        for i in 0..n {
            let mut m = Mbuf::from_slice(pool, &[i as u8; 60]).unwrap();
            if push_last && i + 1 == n {
                m.header_mut().ol_flags |= TX_PUSH;
            }
            assert!(b.push(m).is_ok());
        }
        b
    }

    #[test]
    fn full_batches_go_out_and_the_rest_waits_for_the_timer() {
        let p = pool();
        let (q, dev) = sink_txq(1024, false);
        let mut t = TxBatcher::new(q, cfg(16, 100, Completion::Immediate));
        t.enqueue(&mut pkts(&p, 40, false), 0);
        assert_eq!(dev.logged(), 32);
        assert_eq!(t.stats().flushes[FlushReason::Full as usize], 2);
        assert_eq!(t.stats().buffered, 8);
        t.poll(99);
        assert_eq!(dev.logged(), 32, "not before flush_us");
        t.poll(100);
        assert_eq!(dev.logged(), 40);
        assert_eq!(t.stats().flushes[FlushReason::Timeout as usize], 1);
        assert_eq!(t.stats().max_wait_tsc, 100);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn a_push_or_an_idle_lcore_sends_a_lone_packet_at_once() {
        let p = pool();
        let (q, dev) = sink_txq(1024, false);
        let mut t = TxBatcher::new(q, cfg(32, 1_000_000, Completion::Immediate));
        t.enqueue(&mut pkts(&p, 3, true), 5);
        assert_eq!(dev.logged(), 3);
        assert_eq!(t.stats().flushes[FlushReason::Push as usize], 1);
        t.enqueue(&mut pkts(&p, 1, false), 6);
        assert_eq!(dev.logged(), 3);
        t.idle(6);
        assert_eq!(dev.logged(), 4);
        assert_eq!(t.stats().flushes[FlushReason::Idle as usize], 1);
        // Without flush_on_idle the lone packet waits for the timer.
        let (q, dev) = sink_txq(1024, false);
        let mut t = TxBatcher::new(q, TxBatchConfig { flush_on_idle: false, ..cfg(32, 50, Completion::Immediate) });
        t.enqueue(&mut pkts(&p, 1, false), 0);
        t.idle(10);
        assert_eq!(dev.logged(), 0);
        t.poll(50);
        assert_eq!(dev.logged(), 1);
    }

    #[test]
    fn a_burst_with_pushed_packets_goes_out_in_one_driver_call_at_its_end() {
        let p = pool();
        let (q, dev) = sink_txq(1024, false);
        let mut t = TxBatcher::new(q, cfg(32, 1_000_000, Completion::Immediate));
        // Three answers of one burst, each ending with a push, then a packet without.
        let mut b = pkts(&p, 7, false);
        for k in [1, 3, 5] {
            b.header_mut(k).ol_flags |= TX_PUSH;
        }
        t.enqueue(&mut b, 5);
        assert_eq!(dev.logged(), 7, "the whole burst, the packet after the last push too");
        assert_eq!(t.stats().flushes[FlushReason::Push as usize], 1);
        assert_eq!(t.stats().flushes.iter().sum::<u64>(), 1, "one driver call");
        // A burst larger than a batch: full batches go out as they fill, the rest
        // (pushed) at the end.
        let (q, dev) = sink_txq(1024, false);
        let mut t = TxBatcher::new(q, cfg(4, 1_000_000, Completion::Immediate));
        let mut b = pkts(&p, 10, true);
        t.enqueue(&mut b, 5);
        assert_eq!(dev.logged(), 10);
        assert_eq!(t.stats().flushes[FlushReason::Full as usize], 2);
        assert_eq!(t.stats().flushes[FlushReason::Push as usize], 1);
        // A push inside a full batch is spent with it: what follows waits.
        let (q, dev) = sink_txq(1024, false);
        let mut t = TxBatcher::new(q, cfg(4, 1_000_000, Completion::Immediate));
        let mut b = pkts(&p, 6, false);
        b.header_mut(0).ol_flags |= TX_PUSH;
        t.enqueue(&mut b, 5);
        assert_eq!(dev.logged(), 4);
        assert_eq!(t.stats().flushes[FlushReason::Push as usize], 1);
        assert_eq!(t.stats().buffered, 2);
    }

    #[test]
    fn no_packet_waits_longer_than_flush_us_under_a_random_virtual_clock() {
        let p = pool();
        let (q, dev) = sink_txq(1 << 20, false);
        let flush = 37;
        let mut t = TxBatcher::new(q, TxBatchConfig { flush_on_idle: false, ..cfg(16, flush, Completion::Immediate) });
        let mut now = 0u64;
        let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
        let mut total = 0;
        for _ in 0..5000 {
            let x = rng.next_u64();
            now += x % 20; // walks 0..19 us apart
            let n = (x >> 20) as usize % 4;
            total += n;
            if n > 0 {
                t.enqueue(&mut pkts(&p, n, false), now);
            }
            t.poll(now);
            // Waits are measured at flush; a walk is at most 19 us late.
            assert!(t.stats().max_wait_tsc < flush + 20, "waited {}", t.stats().max_wait_tsc);
        }
        t.stop(now);
        assert_eq!(dev.logged(), total);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn completion_timer_holds_references_until_it_fires() {
        let p = pool();
        let (q, _dev) = sink_txq(1024, false);
        let mut t = TxBatcher::new(q, cfg(4, 10, Completion::Timer(10_000)));
        let mut b = pkts(&p, 4, false);
        let probe = b.share(0);
        t.enqueue(&mut b, 0);
        assert_eq!(t.stats().sent, 4);
        assert_eq!(t.stats().held, 4);
        assert_eq!(probe.refcnt(), 2, "the policy's reference is still out");
        t.poll(9_999);
        assert_eq!(probe.refcnt(), 2);
        t.poll(10_000);
        assert_eq!(probe.refcnt(), 1, "reported after 10 ms");
        assert_eq!(t.stats().completions, 4);
        drop(probe);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn completion_every_n_waits_for_n_and_a_device_holds_until_reclaimed() {
        let p = pool();
        let (q, dev) = sink_txq(1024, true);
        let mut t = TxBatcher::new(q, cfg(1, 10, Completion::Every(8)));
        let mut b = pkts(&p, 7, false);
        let probe = b.share(6);
        t.enqueue(&mut b, 0);
        t.poll(1);
        assert_eq!(t.stats().held, 7);
        assert_eq!(t.queue().inflight(), 7);
        t.enqueue(&mut pkts(&p, 1, false), 2);
        t.poll(2);
        assert_eq!(t.stats().held, 0, "8 outstanding: reported");
        assert_eq!(probe.refcnt(), 2, "but the device still has it");
        dev.finish(8);
        t.poll(3);
        assert_eq!(probe.refcnt(), 1);
        assert_eq!(t.queue().inflight(), 0);
        drop(probe);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn a_full_queue_drops_and_counts_after_retries() {
        let p = pool();
        let (q, dev) = sink_txq(5, true);
        let mut t = TxBatcher::new(q, TxBatchConfig { retries: 3, ..cfg(8, 10, Completion::Immediate) });
        dev.set_room(0);
        t.enqueue(&mut pkts(&p, 8, false), 0);
        assert_eq!(t.stats().tx_full, 8);
        assert_eq!(t.stats().sent, 0);
        dev.set_room(5);
        t.enqueue(&mut pkts(&p, 8, false), 1);
        assert_eq!((t.stats().sent, t.stats().tx_full), (5, 11));
        dev.finish(5);
        t.poll(2);
        assert_eq!(t.stats().completions, 5);
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn completion_words_parse() {
        assert_eq!(Completion::parse(&["immediate"], HZ), Ok(Completion::Immediate));
        assert_eq!(Completion::parse(&["every", "16"], HZ), Ok(Completion::Every(16)));
        assert_eq!(Completion::parse(&["timer_us", "10000"], HZ), Ok(Completion::Timer(10_000)));
        assert_eq!(Completion::Timer(10_000).describe(HZ), "timer_us 10000");
        assert!(Completion::parse(&["every", "0"], HZ).unwrap_err().contains("positive"));
        assert!(Completion::parse(&["sometimes"], HZ).unwrap_err().contains("immediate"));
    }
}
