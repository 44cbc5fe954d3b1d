//! Forwarding lcores: build streams from the ports, hand them to worker lcores, run
//! the engine until told to stop, and give the streams back.

use super::engine::{FwdEngine, FwdSettings, Stream, StreamStats};
use super::params::Topology;
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
    handles: Vec<lcore::LcoreHandle<()>>,
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
    for (l, mut mine) in by_lcore {
        let (stop2, set, ready) = (stop.clone(), set.clone(), ready.clone());
        for s in mine.iter_mut() {
            (engine.begin)(s, &set);
        }
        let h = lcore::launch(l, pin, move || {
            ready.fetch_add(1, Ordering::Release);
            fwd_loop(mine, engine, &set, &stop2)
        });
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                let _ = (Running { stop, handles }).stop();
                return Err(format!("cannot start lcore {l}: {e}"));
            }
        }
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while ready.load(Ordering::Acquire) < n && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    Ok(Running { stop, handles })
}

fn fwd_loop(mut streams: Vec<Stream>, engine: &FwdEngine, set: &FwdSettings, stop: &AtomicBool) {
    let batched = streams.iter().any(|s| matches!(s.tx, super::engine::TxPath::Batched { .. }));
    // At least one round, as DPDK's do-while: a stop right after start still polls.
    loop {
        for s in streams.iter_mut() {
            if set.record_cycles {
                let t0 = tsc::rdtsc();
                let before = s.stats.rx_packets.get() + s.stats.tx_packets.get();
                (engine.fwd)(s, set);
                if s.stats.rx_packets.get() + s.stats.tx_packets.get() != before {
                    s.stats.busy_cycles.add(tsc::rdtsc().wrapping_sub(t0));
                }
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
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    for s in streams.iter_mut() {
        super::engine::tx_stop(s);
    }
    // Streams (and their queue leases) are dropped here, on the lcore.
}

impl Running {
    /// Tell the lcores to stop and wait for them; returns their errors.
    pub fn stop(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
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
