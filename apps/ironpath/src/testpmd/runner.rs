//! Forwarding lcores: build streams from the ports, hand them to worker lcores, run
//! the engine until told to stop, and give the streams back.

use super::engine::{FwdEngine, FwdSettings, Stream, StreamStats};
use super::params::Topology;
use ironpath_eal::sleep::{Doorbell, RxMode, Sleeper, ADAPTIVE_IDLE, MIN_SLEEP};
use ironpath_eal::{abi, lcore, tsc, Burst, Eal, Mempool};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Description of one stream, kept by the shell for `show fwd stats` after the
/// stream itself went back.
#[derive(Clone, Debug)]
pub struct StreamInfo {
    /// RX port.
    pub rx_port: u16,
    /// RX queue.
    pub rx_queue: u16,
    /// TX port.
    pub tx_port: u16,
    /// TX queue.
    pub tx_queue: u16,
    /// Lcore running it.
    pub lcore: u32,
    /// Counters.
    pub stats: Arc<StreamStats>,
    /// The TX batcher's published state, when TX is batched.
    pub txq: Option<Arc<std::sync::Mutex<super::engine::TxqSnap>>>,
}

/// Forwarding in progress.
pub struct Running {
    stop: Arc<AtomicBool>,
    /// Each lcore gives its sleep set back when it ends (closed here, not on it).
    handles: Vec<lcore::LcoreHandle<Option<Sleeper>>>,
    /// Each lcore's doorbell (rung at stop, in case it sleeps).
    bells: Vec<Arc<Doorbell>>,
}

/// The TX port of `rx` in `topology` among `ports` (sorted ids).
pub fn peer_port(ports: &[u16], rx: u16, topology: Topology) -> u16 {
    let Some(i) = ports.iter().position(|p| *p == rx) else { return rx };
    match topology {
        Topology::Loop => rx,
        Topology::Chained => ports[(i + 1) % ports.len()],
        Topology::Paired => {
            let j = i ^ 1;
            if j < ports.len() {
                ports[j]
            } else {
                rx
            }
        }
    }
}

/// Streams with the lcore each is placed on.
pub type Placed = Vec<(u32, Stream)>;

/// DPDK's default peer address for port `p`: 02:00:00:00:00:pp.
pub fn default_peer_mac(p: u16) -> [u8; 6] {
    [2, 0, 0, 0, 0, p as u8]
}

/// Take queue handles from every started port and build the streams: one per (port,
/// RX queue), TX queue = RX queue modulo the peer's TX queue count.
#[allow(clippy::too_many_arguments)]
pub fn build_streams(
    eal: &Eal,
    pool: &Mempool,
    ports: Vec<u16>,
    peers: &std::collections::HashMap<u16, [u8; 6]>,
    topology: Topology,
    fwd_lcores: &[u32],
    batch: Option<ironpath_eal::TxBatchConfig>,
) -> Result<(Placed, Vec<StreamInfo>), String> {
    if ports.is_empty() {
        return Err("no started port to forward on (port start all)".into());
    }
    if fwd_lcores.is_empty() {
        return Err("no forwarding lcore: give at least two lcores with -l (the first is the main lcore)".into());
    }
    let mut streams = Vec::new();
    let mut infos = Vec::new();
    let mut k = 0usize;
    for &rp in &ports {
        let tp = peer_port(&ports, rp, topology);
        let (rport, tport) = (eal.port(rp).map_err(|e| e.to_string())?, eal.port(tp).map_err(|e| e.to_string())?);
        for q in 0..rport.nb_rxq() {
            let tq = q % tport.nb_txq().max(1);
            let rx = rport.rx_queue(q).ok_or_else(|| format!("port {rp} RX queue {q} is not available"))?;
            let tx = tport.tx_queue(tq).ok_or_else(|| {
                format!("port {tp} TX queue {tq} is already used by another stream (give it more TX queues: port config all txq N)")
            })?;
            let lcore = fwd_lcores[k % fwd_lcores.len()];
            k += 1;
            let stats = Arc::new(StreamStats::default());
            let (tx, txq) = match batch {
                None => (super::engine::TxPath::Direct(tx), None),
                Some(cfg) => {
                    let snap = Arc::new(std::sync::Mutex::new(super::engine::TxqSnap::default()));
                    let b = Box::new(ironpath_eal::TxBatcher::new(tx, cfg));
                    let path = super::engine::TxPath::Batched {
                        b,
                        snap: snap.clone(),
                        seen: (0, 0),
                        published: 0,
                        activity: (0, 0),
                    };
                    (path, Some(snap))
                }
            };
            infos.push(StreamInfo {
                rx_port: rp,
                rx_queue: q,
                tx_port: tp,
                tx_queue: tq,
                lcore,
                stats: stats.clone(),
                txq,
            });
            streams.push((
                lcore,
                Stream {
                    rx,
                    tx,
                    tx_mac: tport.mac().unwrap_or([2, 0, 0, 0, 0, tp as u8]),
                    peer_mac: peers.get(&tp).copied().unwrap_or_else(|| default_peer_mac(tp)),
                    pool: pool.clone(),
                    stats,
                    template: Vec::new(),
                    next_flow: 0,
                    burst: Burst::new(),
                    gro: None,
                    vlan: None,
                    // Only a port that delivers packets with offloads pending (a
                    // kernel port) can make the TX side owe anything.
                    fixup: rport
                        .dev_info()
                        .is_ok_and(|i| i.rx_offload_capa & (abi::RX_L4_CKSUM_NONE | abi::RX_AGGREGATED) != 0)
                        .then(|| {
                            ironpath_nodes::offload::TxFixup::new(
                                tport.dev_info().map_or(0, |i| i.tx_offload_capa),
                                pool.clone(),
                            )
                        }),
                    more: Vec::new(),
                },
            ));
        }
    }
    Ok((streams, infos))
}

/// Send `bursts` bursts of txonly packets on every stream first (`start tx_first`).
pub fn tx_first(streams: &mut [(u32, Stream)], set: &FwdSettings, bursts: u32) {
    let eng = &super::fwd::txonly::ENGINE;
    for (_, s) in streams.iter_mut() {
        (eng.begin)(s, set);
        for _ in 0..bursts {
            (eng.fwd)(s, set);
        }
    }
}

/// Start the worker lcores. `pin` pins each to the CPU of its id.
pub fn start(
    streams: Vec<(u32, Stream)>,
    engine: &'static FwdEngine,
    set: FwdSettings,
    pin: bool,
) -> Result<Running, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut by_lcore: Vec<(u32, Vec<Stream>)> = Vec::new();
    for (l, s) in streams {
        match by_lcore.iter_mut().find(|(x, _)| *x == l) {
            Some((_, v)) => v.push(s),
            None => by_lcore.push((l, vec![s])),
        }
    }
    let set = Arc::new(set);
    let mut handles = Vec::new();
    // `start` returns once every forwarding lcore runs its loop (DPDK's launch
    // waits for the lcores' acknowledgement too): a `stop` right after it then
    // finds packets forwarded, not lcores that never began.
    let n = by_lcore.len();
    let ready = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut bells = Vec::new();
    // Calibrated here: the first call measures the TSC for 20 ms, never on an lcore.
    let hz = tsc::tsc_hz();
    for (l, mut mine) in by_lcore {
        let (stop2, set, ready) = (stop.clone(), set.clone(), ready.clone());
        for s in mine.iter_mut() {
            (engine.begin)(s, &set);
        }
        // Generators always have work; the others may sleep (set rx-mode).
        let sleeper = if set.rx_mode != RxMode::Poll && !engine.counts_tx {
            let made = Doorbell::new().and_then(|b| {
                b.set_may_sleep(true);
                Sleeper::new(b)
            });
            match made {
                Ok(s) => {
                    bells.push(s.bell().clone());
                    Some(s)
                }
                Err(e) => {
                    let _ = (Running { stop, handles, bells }).stop();
                    return Err(format!("lcore {l}: cannot make its sleep set: {e}"));
                }
            }
        } else {
            None
        };
        let h = lcore::launch(l, pin, move || {
            ready.fetch_add(1, Ordering::Release);
            fwd_loop(mine, engine, &set, &stop2, sleeper, hz)
        });
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                let _ = (Running { stop, handles, bells }).stop();
                return Err(format!("cannot start lcore {l}: {e}"));
            }
        }
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while ready.load(Ordering::Acquire) < n && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    Ok(Running { stop, handles, bells })
}

/// Packets the streams received and sent so far (a round that changes it worked).
fn activity(streams: &[Stream]) -> u64 {
    streams.iter().map(|s| s.stats.rx_packets.get() + s.stats.tx_packets.get()).sum()
}

/// What an idle forwarding lcore sleeps on.
struct Idle {
    sleeper: Sleeper,
    /// TSC of the last round that moved packets (as of the first idle round after
    /// it: a busy round reads no clock for it).
    last_work: u64,
    /// A round moved packets since `last_work` was set.
    worked: bool,
    /// A queue without a wake-up source, or held packets: no attempt before this TSC.
    retry_at: u64,
    adaptive_tsc: u64,
    min_sleep_tsc: u64,
    hz: u64,
    fds: Vec<std::os::fd::RawFd>,
}

fn fwd_loop(
    mut streams: Vec<Stream>,
    engine: &FwdEngine,
    set: &FwdSettings,
    stop: &AtomicBool,
    sleeper: Option<Sleeper>,
    hz: u64,
) -> Option<Sleeper> {
    let per_us = hz / 1_000_000;
    let mut idle = sleeper.map(|sleeper| Idle {
        sleeper,
        last_work: tsc::rdtsc(),
        worked: false,
        retry_at: 0,
        adaptive_tsc: per_us * ADAPTIVE_IDLE.as_micros() as u64,
        min_sleep_tsc: per_us * MIN_SLEEP.as_micros() as u64,
        hz,
        fds: Vec::new(),
    });
    // The end of the last engine call (for busy cycles: see `round`).
    let mut clock = if set.record_cycles { tsc::rdtsc() } else { 0 };
    // At least one round, as DPDK's do-while: a stop right after start still polls.
    loop {
        let before = if idle.is_some() { activity(&streams) } else { 0 };
        round(&mut streams, engine, set, &mut clock);
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if let Some(idle) = idle.as_mut() {
            if activity(&streams) != before {
                idle.worked = true;
            } else {
                idle_sleep(&mut streams, engine, set, stop, idle, &mut clock);
                if set.record_cycles {
                    // An idle round, or a sleep, is no stream's busy time.
                    clock = tsc::rdtsc();
                }
            }
        }
    }
    for s in streams.iter_mut() {
        super::engine::tx_stop(s);
    }
    // Streams (and their queue leases) are dropped here, on the lcore; the sleep set
    // goes back to the thread that joins (closing its epoll descriptor is a syscall).
    idle.map(|i| i.sleeper)
}

/// A round found nothing: sleep on the RX queues' wake-up sources if the rx mode
/// and the streams allow it (the protocol of `ironpath_eal::sleep`).
#[cold]
#[inline(never)]
fn idle_sleep(
    streams: &mut [Stream],
    engine: &FwdEngine,
    set: &FwdSettings,
    stop: &AtomicBool,
    idle: &mut Idle,
    clock: &mut u64,
) {
    let now = tsc::rdtsc();
    if std::mem::take(&mut idle.worked) {
        idle.last_work = now;
    }
    if set.rx_mode == RxMode::Adaptive && now.wrapping_sub(idle.last_work) < idle.adaptive_tsc {
        return;
    }
    if now < idle.retry_at {
        return;
    }
    idle.fds.clear();
    let mut deadline: Option<u64> = None;
    let mut polling = false;
    for s in streams.iter() {
        match s.rx.wake_fd() {
            Some(fd) => idle.fds.push(fd),
            None => polling = true,
        }
        if s.gro.as_ref().is_some_and(|g| g.holding()) || !s.more.is_empty() {
            deadline = Some(now);
        }
        if let super::engine::TxPath::Batched { b, .. } = &s.tx {
            match b.wake_need() {
                Err(_) => polling = true,
                Ok(Some(t)) => deadline = Some(deadline.map_or(t, |d| d.min(t))),
                Ok(None) => {}
            }
        }
    }
    if polling {
        idle.retry_at = now + idle.adaptive_tsc * 20;
        return;
    }
    let timeout = match deadline {
        Some(d) if d.saturating_sub(now) < idle.min_sleep_tsc => return,
        Some(d) => Some(std::time::Duration::from_nanos(tsc_ns(d - now, idle.hz))),
        None => None,
    };
    let armed: Vec<bool> = streams.iter().map(|s| s.rx.wake_arm(true)).collect();
    let disarm = |streams: &mut [Stream]| {
        for (s, on) in streams.iter().zip(&armed) {
            if *on {
                s.rx.wake_arm(false);
            }
        }
    };
    if armed.contains(&false) {
        // A queue that cannot be armed now (nothing would signal): poll a while.
        disarm(streams);
        idle.retry_at = now + idle.adaptive_tsc * 20;
        return;
    }
    let bell = idle.sleeper.bell().clone();
    bell.asleep();
    // The last round with the wake-ups armed: what came before is found now.
    let before = activity(streams);
    if set.record_cycles {
        // Arming is no stream's busy time.
        *clock = tsc::rdtsc();
    }
    round(streams, engine, set, clock);
    if activity(streams) != before || stop.load(Ordering::Relaxed) {
        bell.awake();
        disarm(streams);
        idle.last_work = tsc::rdtsc();
        return;
    }
    let t0 = tsc::rdtsc();
    let woke = idle.sleeper.sleep(&idle.fds, timeout);
    let t1 = tsc::rdtsc();
    bell.awake();
    disarm(streams);
    if let Some(s) = streams.first() {
        s.stats.sleeps.add(1);
        s.stats.asleep_cycles.add(t1.wrapping_sub(t0));
    }
    if woke.is_err() {
        idle.retry_at = t1 + idle.adaptive_tsc * 20;
    }
}

fn tsc_ns(ticks: u64, hz: u64) -> u64 {
    (u128::from(ticks) * 1_000_000_000 / u128::from(hz.max(1))) as u64
}

/// One round of the engine over every stream. With `--record-core-cycles`, one clock
/// read after each engine call: a call that moved packets is charged from the end of
/// the call before it (`clock`, the loop's own work between included), as a graph
/// walk is.
#[inline(always)]
fn round(streams: &mut [Stream], engine: &FwdEngine, set: &FwdSettings, clock: &mut u64) {
    let batched = streams.iter().any(|s| matches!(s.tx, super::engine::TxPath::Batched { .. }));
    {
        for s in streams.iter_mut() {
            if set.record_cycles {
                let before = s.stats.rx_packets.get() + s.stats.tx_packets.get();
                (engine.fwd)(s, set);
                let t = tsc::rdtsc();
                if s.stats.rx_packets.get() + s.stats.tx_packets.get() != before {
                    s.stats.busy_cycles.add(t.wrapping_sub(*clock));
                }
                *clock = t;
            } else {
                (engine.fwd)(s, set);
            }
        }
        if batched {
            // An idle round (no packet received) flushes what waits, as the graph's
            // `flush_on_idle` does.
            for s in streams.iter_mut() {
                super::engine::tx_poll(s);
            }
        }
    }
}

impl Running {
    /// Tell the lcores to stop and wait for them; returns their errors.
    pub fn stop(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.bells.iter().for_each(|b| b.ring());
        // The sleep sets each lcore gives back are dropped here.
        self.handles.into_iter().filter_map(|h| h.join().err()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topologies() {
        let ports = [0, 1, 2];
        assert_eq!(peer_port(&ports, 0, Topology::Paired), 1);
        assert_eq!(peer_port(&ports, 1, Topology::Paired), 0);
        assert_eq!(peer_port(&ports, 2, Topology::Paired), 2);
        assert_eq!(peer_port(&ports, 2, Topology::Chained), 0);
        assert_eq!(peer_port(&ports, 1, Topology::Loop), 1);
    }
}
