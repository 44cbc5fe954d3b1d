//! `ironpath testpmd`: DPDK testpmd's arguments, shell and forwarding engines on
//! ironpath ports. The shell state lives in [`App`]; each command is a method.

pub mod commands;
pub mod device_cmds;
pub mod display;
pub mod engine;
pub mod fwd;
pub mod gro;
pub mod params;
pub mod pipeline_cmds;
pub mod pkt;
pub mod runner;
pub mod shell;
pub mod vlan;

use engine::FwdSettings;
use ironpath_eal::abi::Stats;
use ironpath_eal::args::EalArgs;
use ironpath_eal::{tsc, Eal, Mempool, MempoolConfig, PortState};
use params::Params;
use runner::{Running, StreamInfo};
use std::collections::HashMap;
use std::time::Instant;

/// The shell's state.
pub struct App {
    /// Runtime: drivers and ports.
    pub eal: Eal,
    /// Current settings (start from the command line, changed by `set`/`port config`).
    pub p: Params,
    /// `set fwd MODE retry`.
    pub retry: bool,
    /// Lcores from `-l`; the first is the main lcore.
    pub lcores: Vec<u32>,
    /// The packet pool all ports receive into.
    pub pool: Mempool,
    running: Option<Running>,
    streams: Vec<StreamInfo>,
    stream_base: Vec<[u64; 9]>,
    fwd_base: HashMap<u16, Stats>,
    last_show: HashMap<u16, (Stats, Instant)>,
    /// `set verbose N`.
    pub verbose: u32,
    /// `set port ID gro on|off`, `set gro flush N`.
    pub gro: gro::GroSettings,
    /// `vlan set strip|filter`, `rx_vlan add|rm`.
    pub vlan: vlan::VlanSettings,
    /// `set txcoalesce N`.
    pub txcoalesce: usize,
    /// `set txcompletion immediate|every N|timer_us T`.
    pub txcompletion: ironpath_eal::Completion,
    /// The pipeline `pipeline load` started.
    pub pipeline: Option<crate::pipeline::PipelineRun>,
    /// `set eth-peer PORT MAC`: destination MACs of the mac/csum engines.
    pub peers: HashMap<u16, [u8; 6]>,
    /// `set nbport N`: forward on the first N started ports (`None`: all).
    pub nb_fwd_ports: Option<usize>,
    /// `set xstats-hide-zero on|off`.
    pub xstats_hide_zero: bool,
    pin: bool,
}

/// A startup failure, printed as one line.
pub type StartError = String;

/// Number of mbufs testpmd creates by default for `nb_ports` ports.
fn default_nb_mbufs(p: &Params, nb_ports: usize, nb_lcores: usize) -> u32 {
    let per_port = u32::from(p.rxd) * u32::from(p.rxq) + u32::from(p.txd) * u32::from(p.txq) + 2 * 512;
    let n = per_port * nb_ports.max(1) as u32 + nb_lcores as u32 * p.mbcache * 2;
    n.max(16384)
}

impl App {
    /// Parse both argument parts, load plugins, create the pool and the `--vdev` ports
    /// and start them.
    pub fn init(args: &[String]) -> Result<App, StartError> {
        let (eal_args, app_args) = EalArgs::parse(args).map_err(|e| e.to_string())?;
        eal_args.check_cpus().map_err(|e| e.to_string())?;
        eal_args.apply_log_levels();
        let p = Params::parse(&app_args)?;
        let mut eal = Eal::new(eal_args.mem_policy());
        let refused = eal.load_plugins(&eal_args.plugin_paths, !eal_args.no_default_plugins);
        for e in &refused {
            log::warn!("{e}");
        }
        // With every plugin refused, a --vdev still says which refusal it met.
        if eal.drivers().is_empty() && (refused.is_empty() || eal_args.vdevs.is_empty()) {
            return Err(crate::no_plugin_message(refused.len()));
        }
        let nb_ports = eal_args.vdevs.len() + eal_args.allow.len();
        let nb_mbufs = p.total_num_mbufs.unwrap_or_else(|| default_nb_mbufs(&p, nb_ports, eal_args.lcores.len()));
        let cfg = MempoolConfig::new("mb_pool_0", nb_mbufs).cache_size(p.mbcache.min(nb_mbufs / 2));
        let pool = eal.pool_create(cfg).map_err(|e| e.to_string())?;
        if let Some(mb) = eal_args.mem_mb {
            let (_, _, len) = pool.region();
            if (len as u64) > mb << 20 {
                return Err(format!(
                    "-m {mb}: the packet pool needs {} MiB ({} mbufs); raise -m or lower --total-num-mbufs",
                    (len as u64).div_ceil(1 << 20),
                    nb_mbufs
                ));
            }
        }
        crate::outln!("ironpath: memory: {} ({} mbufs of {} bytes)", pool.mem_kind(), nb_mbufs, pool.elt_size());
        let nb_fwd = eal_args.lcores.len().saturating_sub(1);
        if usize::from(p.nb_cores) > nb_fwd.max(1) {
            return Err(format!(
                "--nb-cores={} but only {nb_fwd} forwarding lcore(s) in -l {:?} (the first lcore is the main one)",
                p.nb_cores, eal_args.lcores
            ));
        }
        let ncpu = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) as u32;
        let pin = eal_args.lcores.iter().all(|l| *l < ncpu);
        if !pin {
            log::warn!("lcores {:?} exceed the {ncpu} CPUs here; lcores run unpinned", eal_args.lcores);
        }
        let mut app = App {
            eal,
            p,
            retry: false,
            lcores: eal_args.lcores.clone(),
            pool,
            running: None,
            streams: Vec::new(),
            stream_base: Vec::new(),
            fwd_base: HashMap::new(),
            last_show: HashMap::new(),
            verbose: 0,
            gro: gro::GroSettings::default(),
            vlan: vlan::VlanSettings::default(),
            txcoalesce: 1,
            txcompletion: ironpath_eal::Completion::Immediate,
            pipeline: None,
            peers: HashMap::new(),
            nb_fwd_ports: None,
            xstats_hide_zero: false,
            pin,
        };
        for d in &eal_args.vdevs {
            let id = app.eal.port_attach(d).map_err(|e| e.to_string())?;
            app.port_start_one(id)?;
        }
        for d in &eal_args.allow {
            let id = app.eal.port_allow(d).map_err(|e| e.to_string())?;
            app.port_start_one(id)?;
        }
        Ok(app)
    }

    /// What telemetry reports: every port, the packet pool (and a loaded
    /// pipeline's pools and graph).
    pub fn figures(&self, params: &[String]) -> crate::telemetry::Figures {
        let ports: Vec<(ironpath_eal::PortId, String)> =
            self.eal.ports().map(|p| (p.id(), p.name().to_string())).collect();
        let mut pools = vec![(self.pool.name().to_string(), self.pool.clone())];
        if let Some(run) = &self.pipeline {
            pools.extend(run.pools().iter().cloned());
        }
        let graph = self.pipeline.as_ref().map(|r| r.info.clone());
        crate::telemetry::Figures::collect("ironpath testpmd", params, &self.eal, &ports, &pools, graph)
    }

    /// The ports streams are built on: the started ones, the first `set nbport` of them.
    pub fn fwd_ports(&self) -> Vec<u16> {
        let started = self.eal.ports().filter(|p| p.state() == PortState::Started).map(|p| p.id());
        started.take(self.nb_fwd_ports.unwrap_or(usize::MAX)).collect()
    }

    /// The destination MAC the mac engine writes for TX port `p`.
    pub fn peer_mac(&self, p: u16) -> [u8; 6] {
        self.peers.get(&p).copied().unwrap_or_else(|| runner::default_peer_mac(p))
    }

    /// Forwarding lcores in use (`nb_cores` of the lcores after the main one).
    pub fn fwd_lcores(&self) -> Vec<u32> {
        self.lcores.iter().skip(1).take(usize::from(self.p.nb_cores)).copied().collect()
    }

    /// Whether forwarding is running.
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Configure, set up queues and start one port with the current settings.
    pub fn port_start_one(&mut self, id: u16) -> Result<(), String> {
        let (rxq, txq, rxd, txd) = (self.p.rxq, self.p.txq, self.p.rxd, self.p.txd);
        let pool = self.pool.clone();
        let port = self.eal.port_mut(id).map_err(|e| e.to_string())?;
        if port.state() == PortState::Started {
            return Ok(());
        }
        // Stopped with its queues set up as asked (a `port stop` then `port start`, an MTU
        // or link change in between): started again as it is, as DPDK's testpmd sets
        // queues up again only when their configuration changed.
        let as_asked = port.state() == PortState::Stopped
            && port.nb_rxq() == rxq
            && port.nb_txq() == txq
            && (0..rxq).all(|q| port.rxq_info(q).is_some_and(|(p, d)| d == rxd && p.name() == pool.name()))
            && (0..txq).all(|q| port.txq_info(q) == Some(txd));
        if !as_asked {
            port.configure(rxq, txq).map_err(|e| e.to_string())?;
            for q in 0..rxq {
                port.rx_queue_setup(q, rxd, &pool).map_err(|e| e.to_string())?;
            }
            for q in 0..txq {
                port.tx_queue_setup(q, txd).map_err(|e| e.to_string())?;
            }
        }
        port.start().map_err(|e| e.to_string())?;
        let _ = port.set_promiscuous(true);
        let mac = port.mac().map(|m| display::mac(&m)).unwrap_or_else(|_| "n/a".into());
        crate::outln!("Port {id}: {mac}");
        Ok(())
    }

    /// The TX batching of new streams: `None` (direct TX) unless `set txcoalesce` or
    /// `set txcompletion` asked for it. A batch waits at most 100 us; an idle round
    /// flushes at once.
    pub fn tx_batch_config(&self) -> Option<ironpath_eal::TxBatchConfig> {
        if self.txcoalesce <= 1 && self.txcompletion == ironpath_eal::Completion::Immediate {
            return None;
        }
        let hz = ironpath_eal::tsc::tsc_hz();
        Some(ironpath_eal::TxBatchConfig {
            coalesce: self.txcoalesce,
            flush_tsc: ironpath_eal::txbatch::us_to_tsc(100, hz),
            flush_on_idle: true,
            completion: self.txcompletion,
            retries: 0,
            hz,
        })
    }

    /// The published state of the batched TX queues of port `id` (queue, snapshot).
    pub fn txq_snaps(&self, id: u16) -> Vec<(u16, engine::TxqSnap)> {
        self.streams
            .iter()
            .filter(|s| s.tx_port == id)
            .filter_map(|s| s.txq.as_ref().map(|m| (s.tx_queue, *m.lock().unwrap_or_else(|e| e.into_inner()))))
            .collect()
    }

    fn settings(&self) -> FwdSettings {
        FwdSettings {
            burst: usize::from(self.p.burst),
            retry: self.retry,
            retry_num: 64,
            retry_delay_us: 1,
            txpkts: self.p.txpkts.clone(),
            flows: self.p.flowgen_flows,
            record_cycles: self.p.record_core_cycles,
            record_bursts: self.p.record_burst_stats,
            verbose: self.verbose,
            rx_mode: self.p.rx_mode,
        }
    }

    /// `start` / `start tx_first N`.
    pub fn start(&mut self, tx_first: Option<u32>) -> Result<String, String> {
        if self.running.is_some() {
            return Err("Packet forwarding already started".into());
        }
        if self.pipeline.is_some() {
            return Err("a pipeline is running on its own ports and lcores: pipeline stop first".into());
        }
        if self.eal.ports().any(|p| p.state() != PortState::Started) {
            return Err("Not all ports were started".into());
        }
        let engine = engine::engine(&self.p.forward_mode).ok_or("unknown forwarding mode")?;
        let fwd = self.fwd_lcores();
        let (mut streams, infos) = runner::build_streams(
            &self.eal,
            &self.pool,
            self.fwd_ports(),
            &self.peers,
            self.p.topology,
            &fwd,
            self.tx_batch_config(),
        )?;
        for (_, s) in streams.iter_mut() {
            if self.gro.ports.contains(&s.rx.port) {
                s.gro = Some(gro::StreamGro::new(&self.gro));
            }
            s.vlan = self.vlan.for_port(s.rx.port);
        }
        let set = self.settings();
        // DPDK's start banner: the streams, then the rxtx configuration.
        let mut out = self.fwd_config_text(&infos);
        out.push('\n');
        out.push_str(&self.rxtx_config_text());
        self.fwd_base.clear();
        for id in self.eal.port_ids() {
            if let Ok(s) = self.eal.port(id).and_then(|p| p.stats()) {
                self.fwd_base.insert(id, s);
            }
        }
        if let Some(n) = tx_first {
            runner::tx_first(&mut streams, &set, n);
        }
        self.stream_base = vec![[0; 9]; infos.len()];
        self.streams = infos;
        self.running = Some(runner::start(streams, engine, set, self.pin)?);
        Ok(out)
    }

    /// `stop`: stop the lcores and print the summary.
    pub fn stop(&mut self) -> Result<String, String> {
        let Some(r) = self.running.take() else {
            return Err("Packet forwarding not started".into());
        };
        let mut out = String::from("Telling cores to stop...\nWaiting for lcores to finish...\n");
        for e in r.stop() {
            out.push_str(&format!("lcore error: {e}\n"));
        }
        out.push_str(&self.fwd_stats_text());
        out.push_str("\nDone.\n");
        Ok(out)
    }

    /// The `show fwd stats all` text (also the body of `stop`).
    pub fn fwd_stats_text(&self) -> String {
        let mut out = String::new();
        let nb_ports = self.eal.ports().count();
        let deltas: Vec<[u64; 9]> = (0..self.streams.len()).map(|i| self.stream_delta(i)).collect();
        // A stream whose port was closed since `start` has no block (its port has
        // none either).
        let live = |s: &StreamInfo| self.eal.port(s.rx_port).is_ok() && self.eal.port(s.tx_port).is_ok();
        if self.streams.iter().filter(|s| live(s)).count() > nb_ports {
            for (s, d) in self.streams.iter().zip(&deltas).filter(|(s, _)| live(s)) {
                out.push_str(&display::fwd_stream(s.rx_port, s.rx_queue, s.tx_port, s.tx_queue, d[0], d[1], d[2]));
            }
        }
        let csum = self.p.forward_mode == "csum";
        let (mut trx, mut trd, mut ttx, mut ttd) = (0, 0, 0, 0);
        for id in self.eal.port_ids() {
            let Ok(cur) = self.eal.port(id).and_then(|p| p.stats()) else { continue };
            let base = self.fwd_base.get(&id).copied().unwrap_or_default();
            let mut fwd_drop = 0;
            let (mut bad_ip, mut bad_l4, mut filtered) = (0, 0, 0);
            for (s, d) in self.streams.iter().zip(&deltas) {
                if s.tx_port == id {
                    fwd_drop += d[2];
                }
                if s.rx_port == id {
                    bad_ip += d[3];
                    bad_l4 += d[4];
                    filtered += d[8];
                }
            }
            let spread = |rx: bool| -> Option<Vec<u64>> {
                if !self.p.record_burst_stats {
                    return None;
                }
                let mut sum = vec![0u64; ironpath_eal::MAX_BURST + 1];
                for s in self.streams.iter().filter(|s| if rx { s.rx_port == id } else { s.tx_port == id }) {
                    let v = if rx { s.stats.rx_bursts.get() } else { s.stats.tx_bursts.get() };
                    sum.iter_mut().zip(v).for_each(|(a, b)| *a += b);
                }
                Some(sum)
            };
            let pf = display::PortFwd {
                rx_bursts: spread(true),
                tx_bursts: spread(false),
                port: id,
                rx: cur.ipackets.saturating_sub(base.ipackets),
                rx_dropped: cur.imissed.saturating_sub(base.imissed) + filtered,
                tx: cur.opackets.saturating_sub(base.opackets),
                tx_dropped: fwd_drop + cur.oerrors.saturating_sub(base.oerrors),
                bad_ip,
                bad_l4,
            };
            trx += pf.rx;
            trd += pf.rx_dropped;
            ttx += pf.tx;
            ttd += pf.tx_dropped;
            out.push_str(&display::fwd_port(&pf, csum));
        }
        out.push_str(&display::fwd_total(trx, trd, ttx, ttd));
        let sleeps: u64 = self.streams.iter().map(|s| s.stats.sleeps.get()).sum();
        if sleeps > 0 {
            let asleep: u64 = self.streams.iter().map(|s| s.stats.asleep_cycles.get()).sum();
            out.push_str(&format!(
                "\n  Rx mode {}: {sleeps} sleeps, {:.3} s asleep (all lcores, since start)\n",
                self.p.rx_mode.name(),
                asleep as f64 / tsc::tsc_hz().max(1) as f64
            ));
        }
        if self.p.record_core_cycles {
            let cycles: u64 = deltas.iter().map(|d| d[6]).sum();
            let counts_tx = engine::engine(&self.p.forward_mode).is_some_and(|e| e.counts_tx);
            let pkts = if counts_tx { ttx } else { trx };
            if pkts > 0 {
                out.push_str(&format!(
                    "\n  CPU cycles/packet={:.2} (busy cycles={} / total {} packets={}) at {} MHz Clock\n",
                    cycles as f64 / pkts as f64,
                    cycles,
                    self.p.forward_mode,
                    pkts,
                    tsc::tsc_hz() / 1_000_000
                ));
            }
        }
        out
    }

    /// Counters of stream `i` since the last `clear fwd`: rx, tx, dropped, bad ip,
    /// bad l4, malformed, busy cycles, alloc failures.
    fn stream_delta(&self, i: usize) -> [u64; 9] {
        let cur = self.streams[i].stats.snapshot();
        let base = self.stream_base.get(i).copied().unwrap_or([0; 9]);
        std::array::from_fn(|k| cur[k].wrapping_sub(base[k]))
    }

    /// `clear fwd stats all`: counters have one writer (the lcore), so clearing
    /// records a baseline instead of writing to them.
    pub fn clear_fwd(&mut self) {
        self.stream_base = self.streams.iter().map(|s| s.stats.snapshot()).collect();
        self.fwd_base.clear();
        for id in self.eal.port_ids() {
            if let Ok(s) = self.eal.port(id).and_then(|p| p.stats()) {
                self.fwd_base.insert(id, s);
            }
        }
    }

    /// Port stats with rates since the previous show of that port.
    pub fn port_stats_text(&mut self, id: u16) -> Result<String, String> {
        let s = self.eal.port(id).and_then(|p| p.stats()).map_err(|e| e.to_string())?;
        let now = Instant::now();
        let r = match self.last_show.get(&id) {
            Some((prev, t)) => display::rates(prev, &s, now.duration_since(*t).as_secs_f64()),
            None => display::Rates::default(),
        };
        self.last_show.insert(id, (s, now));
        Ok(display::nic_stats(id, &s, &r))
    }

    /// `show config rxtx` and the second part of the `start` banner, laid out as
    /// DPDK 22.11's testpmd prints it. Its threshold-register lines are left out:
    /// no ironpath queue has such registers.
    pub fn rxtx_config_text(&self) -> String {
        let mode = self.p.forward_mode.as_str();
        let mut o = String::new();
        if mode == "flowgen" {
            for id in self.fwd_ports() {
                o.push_str(&format!("  number of flows for port {id}: {}\n", self.p.flowgen_flows));
            }
        }
        o.push_str(&format!("  {mode} packet forwarding packets/burst={}\n", self.p.burst));
        if mode == "txonly" || mode == "flowgen" {
            o.push_str(&format!(
                "  packet len={} - nb packet segments={}\n",
                self.p.txpkts.iter().map(|l| u32::from(*l)).sum::<u32>(),
                self.p.txpkts.len()
            ));
        }
        o.push_str(&format!(
            "  nb forwarding cores={} - nb forwarding ports={}\n",
            self.fwd_lcores().len(),
            self.fwd_ports().len()
        ));
        for p in self.eal.ports() {
            o.push_str(&format!(
                "  port {}: RX queue number: {} Tx queue number: {}\n    Rx offloads=0x0 Tx offloads=0x0\n",
                p.id(),
                p.nb_rxq(),
                p.nb_txq()
            ));
            // Configured sizes until the port is started with queues.
            let rxd = p.rxq_info(0).map(|(_, n)| n).unwrap_or(self.p.rxd);
            let txd = p.txq_info(0).unwrap_or(self.p.txd);
            for q in 0..p.nb_rxq() {
                let d = p.rxq_info(q).map(|(_, n)| n).unwrap_or(rxd);
                o.push_str(&format!(
                    "    RX queue: {q}\n      RX desc={d} - RX free threshold=0\n      RX Offloads=0x0\n"
                ));
            }
            for q in 0..p.nb_txq() {
                let d = p.txq_info(q).unwrap_or(txd);
                o.push_str(&format!(
                    "    TX queue: {q}\n      TX desc={d} - TX free threshold=0\n      TX offloads=0x0\n"
                ));
            }
        }
        o
    }

    /// `show config fwd` and the `start` banner.
    pub fn fwd_config_text(&self, infos: &[StreamInfo]) -> String {
        let ports = self.fwd_ports().len();
        let cores = self.fwd_lcores();
        let mut o = format!(
            "{}{} packet forwarding - ports={} - cores={} - streams={} - NUMA support disabled, MP allocation mode: native\n",
            self.p.forward_mode,
            if self.retry { " with retry" } else { "" },
            ports,
            cores.len(),
            infos.len()
        );
        for l in cores {
            let mine: Vec<&StreamInfo> = infos.iter().filter(|s| s.lcore == l).collect();
            if mine.is_empty() {
                continue;
            }
            o.push_str(&format!("Logical Core {l} (socket 0) forwards packets on {} streams:\n", mine.len()));
            for s in mine {
                o.push_str(&format!(
                    "  RX P={}/Q={} (socket 0) -> TX P={}/Q={} (socket 0) peer={}\n",
                    s.rx_port,
                    s.rx_queue,
                    s.tx_port,
                    s.tx_queue,
                    display::mac(&self.peer_mac(s.tx_port))
                ));
            }
        }
        o
    }
}

impl Drop for App {
    fn drop(&mut self) {
        if let Some(r) = self.running.take() {
            let _ = r.stop();
        }
        if let Some(mut p) = self.pipeline.take() {
            p.stop(&mut self.eal);
        }
    }
}

/// Entry point of `ironpath testpmd`.
pub fn main(args: &[String]) -> i32 {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        crate::outln!(
            "usage: ironpath testpmd [runtime args] -- [application args]\n\n{}\n\n{}",
            ironpath_eal::args::USAGE,
            params::usage()
        );
        return 0;
    }
    let app = match App::init(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ironpath testpmd: {e}");
            return 1;
        }
    };
    let eal_args = match EalArgs::parse(args) {
        Ok((a, _)) => a,
        Err(e) => {
            eprintln!("ironpath testpmd: {e}");
            return 1;
        }
    };
    let app = std::sync::Arc::new(std::sync::Mutex::new(app));
    let telemetry = match crate::telemetry::server::Server::start(
        (!eal_args.no_telemetry).then_some(eal_args.file_prefix.as_str()),
        eal_args.metrics.as_deref(),
    ) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("ironpath testpmd: {e}");
            return 1;
        }
    };
    let (server, requests) = telemetry;
    crate::pipeline::cli::announce(&server, Some(eal_args.file_prefix.as_str()));
    let (ctl, ctl_requests) = crate::pipeline::cli::start_ctl(&eal_args.file_prefix).unzip();
    crate::pipeline::cli::announce_ctl(ctl.as_ref(), &eal_args.file_prefix);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let responder = {
        let (app, done, params) = (app.clone(), done.clone(), args.to_vec());
        std::thread::spawn(move || {
            let mut control = crate::ctl::commands::Control::default();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let mut idle = true;
                while let Ok(req) = requests.try_recv() {
                    idle = false;
                    let f = shell::lock(&app).figures(&params);
                    let text = crate::telemetry::server::respond(&req.ask, &f);
                    req.reply(text);
                }
                while let Some(req) = ctl_requests.as_ref().and_then(|r| r.try_recv().ok()) {
                    idle = false;
                    let f = shell::lock(&app).figures(&params);
                    control.serve(req, &f);
                }
                if idle {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
        })
    };
    let rc = shell::run(&app);
    drop(server);
    drop(ctl);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = responder.join();
    rc
}
