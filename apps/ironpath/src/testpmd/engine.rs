//! Forwarding engines and streams. A stream is (RX port, queue) → (TX port, queue);
//! each forwarding lcore runs its streams in a loop, calling the current engine's
//! `fwd` once per stream per round, as DPDK's testpmd does. Each engine lives in its
//! own file under `fwd/` and is one value of [`FwdEngine`].

use ironpath_eal::{Burst, Mempool, RxQ, TxBatchStats, TxBatcher, TxQ};
pub use ironpath_util::Counter;
use std::sync::Arc;
use std::sync::Mutex;

/// Per-stream counters.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct StreamStats {
    /// Packets received.
    pub rx_packets: Counter,
    /// Packets sent.
    pub tx_packets: Counter,
    /// Packets dropped because the TX queue did not take them.
    pub fwd_dropped: Counter,
    /// Packets with a bad IPv4 header checksum (csum engine).
    pub rx_bad_ip_csum: Counter,
    /// Packets with a bad L4 checksum (csum engine).
    pub rx_bad_l4_csum: Counter,
    /// Malformed packets dropped (csum, icmpecho).
    pub rx_malformed: Counter,
    /// TSC cycles of the calls that moved packets, each from the end of the call
    /// before it (the forwarding loop's own work between included; see the runner).
    pub busy_cycles: Counter,
    /// Mbuf allocation failures (txonly, flowgen).
    pub alloc_failed: Counter,
    /// GRO: packets into the aggregator.
    pub gro_in: Counter,
    /// GRO: packets out of it.
    pub gro_out: Counter,
    /// GRO: aggregates made.
    pub gro_aggregates: Counter,
    /// GRO: segments inside them.
    pub gro_merged: Counter,
    /// Tagged frames the software VLAN filter dropped.
    pub rx_vlan_filtered: Counter,
    /// `set record-burst-stats on`: RX bursts by size (index: packets, 0 = empty).
    pub rx_bursts: BurstSpread,
    /// The same for TX bursts (packets the queue took).
    pub tx_bursts: BurstSpread,
    /// Sleeps of the stream's lcore (rx mode adaptive or interrupt; counted on the
    /// lcore's first stream).
    pub sleeps: Counter,
    /// TSC cycles it slept.
    pub asleep_cycles: Counter,
}

/// Bursts counted by size, 0..=[`MAX_BURST`](ironpath_eal::MAX_BURST) packets.
#[derive(Debug)]
pub struct BurstSpread(pub Box<[Counter]>);

impl Default for BurstSpread {
    fn default() -> Self {
        Self((0..=ironpath_eal::MAX_BURST).map(|_| Counter::default()).collect())
    }
}

impl BurstSpread {
    /// Counts one burst of `n` packets.
    #[inline(always)]
    pub fn add(&self, n: usize) {
        if let Some(c) = self.0.get(n) {
            c.add(1);
        }
    }

    /// The counts.
    pub fn get(&self) -> Vec<u64> {
        self.0.iter().map(Counter::get).collect()
    }
}

impl StreamStats {
    /// All counters, in field order.
    pub fn snapshot(&self) -> [u64; 9] {
        [
            self.rx_packets.get(),
            self.tx_packets.get(),
            self.fwd_dropped.get(),
            self.rx_bad_ip_csum.get(),
            self.rx_bad_l4_csum.get(),
            self.rx_malformed.get(),
            self.busy_cycles.get(),
            self.alloc_failed.get(),
            self.rx_vlan_filtered.get(),
        ]
    }
}

/// Settings every engine may read (a snapshot taken at `start`).
#[derive(Clone, Debug)]
pub struct FwdSettings {
    /// Packets per burst.
    pub burst: usize,
    /// Retry partial TX (`set fwd MODE retry`).
    pub retry: bool,
    /// TX retries before dropping (DPDK `burst_tx_retry_num`).
    pub retry_num: u32,
    /// Delay between retries in microseconds (DPDK `burst_tx_delay_time`).
    pub retry_delay_us: u64,
    /// txonly/flowgen segment lengths.
    pub txpkts: Vec<u16>,
    /// flowgen flows.
    pub flows: u32,
    /// Count busy cycles.
    pub record_cycles: bool,
    /// Count bursts by size (`set record-burst-stats on`).
    pub record_bursts: bool,
    /// `set verbose N`: at 1 or more, print every received packet (as DPDK's
    /// rx dump callback does; slow, for debugging).
    pub verbose: u32,
    /// How the forwarding lcores wait when their queues stay empty.
    pub rx_mode: ironpath_eal::sleep::RxMode,
}

/// What `show port ID txq` reads of a batched TX queue (published by its lcore).
#[derive(Clone, Copy, Debug, Default)]
pub struct TxqSnap {
    /// The batcher's counters.
    pub stats: TxBatchStats,
    /// Packets the driver holds (not completed or not yet freed).
    pub inflight: usize,
}

/// How a stream transmits.
pub enum TxPath {
    /// Straight to the queue (the default: `set txcoalesce 1`, `set txcompletion immediate`).
    Direct(TxQ),
    /// Through a [`TxBatcher`] (`set txcoalesce N`, `set txcompletion ...`).
    Batched {
        /// The batcher, owning the queue.
        b: Box<TxBatcher>,
        /// Published for `show port ID txq`.
        snap: Arc<Mutex<TxqSnap>>,
        /// Counters already added to the stream's stats: sent, dropped.
        seen: (u64, u64),
        /// TSC of the last publication.
        published: u64,
        /// Packets received or enqueued so far, and at the previous round (equal: the
        /// round was idle).
        activity: (u64, u64),
    },
}

/// One stream, owned by one forwarding lcore while forwarding runs.
pub struct Stream {
    /// Receive handle.
    pub rx: RxQ,
    /// Transmit path.
    pub tx: TxPath,
    /// MAC of the TX port (source of `mac` mode).
    pub tx_mac: [u8; 6],
    /// Peer MAC for the TX port (destination of `mac` mode).
    pub peer_mac: [u8; 6],
    /// Pool for generated packets.
    pub pool: Mempool,
    /// Counters.
    pub stats: Arc<StreamStats>,
    /// Engine-private state: txonly template, flowgen next flow.
    pub template: Vec<u8>,
    /// flowgen: next flow index.
    pub next_flow: u32,
    /// Scratch burst.
    pub burst: Burst,
    /// Receive aggregation, when the RX port has GRO on.
    pub gro: Option<super::gro::StreamGro>,
    /// Software VLAN strip/filter, when the RX port has one on.
    pub vlan: Option<super::vlan::StreamVlan>,
    /// What the TX port cannot do of what packets ask (a partial checksum, a GSO
    /// frame), done in software before they are sent; `None` when the RX port
    /// delivers no packet that asks (null, ring, pcap).
    pub fixup: Option<ironpath_nodes::offload::TxFixup>,
    /// Packets cut into more than a burst holds, sent after it.
    pub more: Vec<ironpath_eal::Mbuf>,
}

/// A forwarding engine.
pub struct FwdEngine {
    /// Mode name as typed in `set fwd`.
    pub name: &'static str,
    /// Called once per stream at start (build templates); may be a no-op.
    pub begin: fn(&mut Stream, &FwdSettings),
    /// One round on a stream.
    pub fwd: fn(&mut Stream, &FwdSettings),
    /// For cycles/packet: count TX (generators) rather than RX packets.
    pub counts_tx: bool,
}

/// No per-stream setup.
pub fn no_begin(_: &mut Stream, _: &FwdSettings) {}

/// Receive a burst into `s.burst`; returns how many.
#[inline(always)]
pub fn rx(s: &mut Stream, set: &FwdSettings) -> usize {
    let mut n = s.burst.rx(&s.rx, set.burst);
    s.stats.rx_packets.add(n as u64);
    if set.record_bursts {
        s.stats.rx_bursts.add(n);
    }
    if s.vlan.is_some() && n > 0 {
        let dropped = super::vlan::apply(s);
        s.stats.rx_vlan_filtered.add(dropped as u64);
        n -= dropped;
    }
    if s.gro.is_some() {
        let n = super::gro::apply(s);
        if set.verbose > 0 && n > 0 {
            dump(s, n);
        }
        return n;
    }
    if set.verbose > 0 && n > 0 {
        dump(s, n);
    }
    n
}

/// Print the received packets, one line each, DPDK-style.
#[cold]
fn dump(s: &Stream, n: usize) {
    use std::fmt::Write;
    let mut o = format!("port {}/queue {}: received {n} packets\n", s.rx.port, s.rx.queue);
    for i in 0..n {
        let (h, d) = (s.burst.header(i), s.burst.data(i));
        let mac = |b: &[u8]| b.iter().map(|x| format!("{x:02X}")).collect::<Vec<_>>().join(":");
        let (dst, src, ty) = if d.len() >= 14 {
            (mac(&d[0..6]), mac(&d[6..12]), u16::from_be_bytes([d[12], d[13]]))
        } else {
            ("?".into(), "?".into(), 0)
        };
        let _ = writeln!(
            o,
            "  src={src} - dst={dst} - type=0x{ty:04x} - length={} - nb_segs={} - ol_flags=0x{:x}",
            h.pkt_len, h.nb_segs, h.ol_flags
        );
    }
    crate::out!("{o}");
}

/// Send everything in `s.burst` (with retries if set), count, free what is left.
#[inline(always)]
pub fn tx_all(s: &mut Stream, set: &FwdSettings) {
    if s.burst.is_empty() {
        return;
    }
    if let Some(f) = s.fixup.as_mut() {
        let more = &mut s.more;
        f.prepare(&mut s.burst, |m| more.push(m));
    }
    tx_burst(s, set);
    while !s.more.is_empty() {
        for m in std::mem::take(&mut s.more) {
            if let Err(m) = s.burst.push(m) {
                s.more.push(m);
            }
        }
        tx_burst(s, set);
    }
}

#[inline(always)]
fn tx_burst(s: &mut Stream, set: &FwdSettings) {
    let total = s.burst.len();
    if total == 0 {
        return;
    }
    let q = match &mut s.tx {
        TxPath::Direct(q) => q,
        TxPath::Batched { b, activity, .. } => {
            // Counted when flushed (see `tx_poll`).
            activity.0 += total as u64;
            b.enqueue(&mut s.burst, ironpath_eal::tsc::rdtsc());
            return;
        }
    };
    let mut sent = s.burst.tx(q);
    if set.retry && !s.burst.is_empty() {
        let mut tries = 0;
        while !s.burst.is_empty() && tries < set.retry_num {
            if set.retry_delay_us > 0 {
                let until = std::time::Instant::now() + std::time::Duration::from_micros(set.retry_delay_us);
                while std::time::Instant::now() < until {
                    std::hint::spin_loop();
                }
            }
            sent += s.burst.tx(q);
            tries += 1;
        }
    }
    s.stats.tx_packets.add(sent as u64);
    if set.record_bursts {
        s.stats.tx_bursts.add(sent);
    }
    if !s.burst.is_empty() {
        s.stats.fwd_dropped.add(s.burst.len() as u64);
        s.burst.free_all();
    }
}

/// Per-round work of a batched TX path: flush timer (or an idle flush when the round
/// received and enqueued nothing), completions, counters into the stream's stats, and (every ~1 ms)
/// the snapshot `show port ID txq` reads. Nothing for a direct path.
#[inline]
pub fn tx_poll(s: &mut Stream) {
    let TxPath::Batched { b, snap, seen, published, activity } = &mut s.tx else { return };
    let now = ironpath_eal::tsc::rdtsc();
    let act = activity.0 + s.stats.rx_packets.get();
    let idle = act == activity.1;
    activity.1 = act;
    if idle {
        b.idle(now);
    } else {
        b.poll(now);
    }
    let st = b.stats();
    s.stats.tx_packets.add(st.sent - seen.0);
    s.stats.fwd_dropped.add(st.tx_full - seen.1);
    *seen = (st.sent, st.tx_full);
    if now.wrapping_sub(*published) > b.config().hz / 1000 {
        *published = now;
        let inflight = b.queue().inflight();
        *snap.lock().unwrap_or_else(|e| e.into_inner()) = TxqSnap { stats: st, inflight };
    }
}

/// Flush a batched TX path and publish its final counters (forwarding stops).
pub fn tx_stop(s: &mut Stream) {
    if let TxPath::Batched { b, published, .. } = &mut s.tx {
        b.stop(ironpath_eal::tsc::rdtsc());
        *published = 0; // publish the final counters now
    }
    tx_poll(s);
}

/// All engines, in the order `help` lists them.
pub fn engines() -> [&'static FwdEngine; 9] {
    use super::fwd::*;
    [
        &io::ENGINE,
        &mac::ENGINE,
        &macswap::ENGINE,
        &fivetswap::ENGINE,
        &rxonly::ENGINE,
        &txonly::ENGINE,
        &flowgen::ENGINE,
        &csum::ENGINE,
        &icmpecho::ENGINE,
    ]
}

/// The engine named `name`.
pub fn engine(name: &str) -> Option<&'static FwdEngine> {
    engines().into_iter().find(|e| e.name == name)
}
