//! Pipelines from YAML: `ironpath run FILE`, `ironpath check FILE`, and the
//! shell's `pipeline load FILE`. [`PipelineRun`] creates the pools and ports a file
//! describes, builds its graph, and runs it on the file's lcores.

pub mod cli;
pub mod stats;

use ironpath_config::{Catalog, ConfigError, ConfigErrors, HugePages, Loc, Pipeline};
use ironpath_eal::{Eal, MemKind, MemPolicy, Mempool, MempoolConfig, PortId, RxQ, TxQ};
use ironpath_graph::{runner, EdgeDecl, GraphInfo, RxMode};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Parse and validate a pipeline file against the built-in node catalog and,
/// when given, the loaded drivers. `${VAR}` and `${VAR:-default}` in the text are
/// replaced from the environment first (so shipped files can name interfaces and
/// output files the user picks); an unset variable without a default is an error.
pub fn check(path: &Path, drivers: Option<&[String]>) -> Result<Pipeline, ConfigErrors> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigErrors::single(path, Loc::default(), format!("cannot read: {e}")))?;
    let text = expand_env(&text, |k| std::env::var(k).ok()).map_err(|e| ConfigErrors::new(path, e))?;
    ironpath_config::parse_str(&text, path, &Catalog { nodes: ironpath_nodes::CATALOG, drivers })
}

/// Checks every port's device arguments with its driver, creating nothing (the
/// plugins' `check_args`, ABI 1.4): what `run` would refuse at the port's probe is
/// reported at the port's entry. A plugin too old to check is passed over.
pub fn check_ports(eal: &Eal, cfg: &Pipeline) -> Result<(), String> {
    let mut per_driver: HashMap<&str, u32> = HashMap::new();
    let mut errs = Vec::new();
    for p in &cfg.ports {
        let k = per_driver.entry(p.driver.as_str()).or_default();
        let dev = format!("{}{k}", p.driver);
        *k += 1;
        let devargs = if p.args.is_empty() { dev } else { format!("{dev},{}", p.args) };
        if let Err(e) = eal.check_devargs(&devargs) {
            errs.push(at(cfg, p.loc, format!("port `{}`: {e}", p.name)));
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("\n") + "\n")
    }
}

/// Replace `${VAR}` / `${VAR:-default}` using `get`; a default may hold variables
/// of its own (`${PORT_ARGS:-iface=${IFACE:-veth0}}`), expanded only when it is
/// used. Every unset variable without a default (or unterminated `${`) is reported
/// at its line and column (one inside a default, at the outer `${`).
pub fn expand_env(text: &str, get: impl Fn(&str) -> Option<String>) -> Result<String, Vec<ConfigError>> {
    let mut out = String::with_capacity(text.len());
    let mut errs = Vec::new();
    for (ln, line) in text.split_inclusive('\n').enumerate() {
        let mut rest = line;
        let mut col = 1;
        while let Some(i) = rest.find("${") {
            out.push_str(&rest[..i]);
            col += rest[..i].chars().count();
            let loc = Loc { line: ln as u32 + 1, column: col as u32 };
            let Some(end) = closing_brace(&rest[i + 2..]).map(|e| i + 2 + e) else {
                errs.push(ConfigError::new(loc, "`${` without a closing `}`"));
                out.push_str(&rest[i..]);
                rest = "";
                break;
            };
            if let Err(e) = expand_one(&rest[i + 2..end], &get, &mut out) {
                errs.push(ConfigError::new(loc, e));
            }
            col += rest[i..end + 1].chars().count();
            rest = &rest[end + 1..];
        }
        out.push_str(rest);
    }
    if errs.is_empty() {
        Ok(out)
    } else {
        Err(errs)
    }
}

/// Where the `}` that closes a `${` lies in `s` (what follows the `${`), nested
/// `${...}` skipped.
fn closing_brace(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    let b = s.as_bytes();
    let mut k = 0;
    while k < b.len() {
        if b[k] == b'$' && b.get(k + 1) == Some(&b'{') {
            depth += 1;
            k += 2;
            continue;
        }
        if b[k] == b'}' {
            if depth == 0 {
                return Some(k);
            }
            depth -= 1;
        }
        k += 1;
    }
    None
}

/// Expand `VAR` or `VAR:-default` (the inside of `${...}`) onto `out`.
fn expand_one(inner: &str, get: &impl Fn(&str) -> Option<String>, out: &mut String) -> Result<(), String> {
    let (name, default) = match inner.split_once(":-") {
        Some((n, d)) => (n, Some(d)),
        None => (inner, None),
    };
    if let Some(v) = get(name).filter(|v| !v.is_empty()) {
        out.push_str(&v);
        return Ok(());
    }
    let Some(mut d) = default else {
        return Err(format!("environment variable `{name}` is not set (write `${{{name}:-DEFAULT}}` for a default)"));
    };
    while let Some(i) = d.find("${") {
        out.push_str(&d[..i]);
        let end = closing_brace(&d[i + 2..]).map(|e| i + 2 + e).ok_or("`${` without a closing `}`")?;
        expand_one(&d[i + 2..end], get, out)?;
        d = &d[end + 1..];
    }
    out.push_str(d);
    Ok(())
}

/// A port the pipeline made.
pub struct PipePort {
    /// Name in the file.
    pub name: String,
    /// Port id in the runtime.
    pub id: PortId,
    /// Its pool.
    pub pool: Mempool,
}

/// A running pipeline.
pub struct PipelineRun {
    /// The validated file.
    pub cfg: Pipeline,
    /// Ports, in file order.
    pub ports: Vec<PipePort>,
    /// Graph view for `show graph`/`show runtime`/trace.
    pub info: Arc<GraphInfo>,
    pools: Vec<(String, Mempool)>,
    running: Option<runner::Running>,
    /// Link flags nodes read (a bond's members), refreshed by [`PipelineRun::poll_links`].
    links: Vec<(PortId, Arc<AtomicBool>)>,
}

struct Env<'a> {
    eal: &'a Eal,
    ports: &'a [PipePort],
    pools: &'a [(String, Mempool)],
    /// Link flags nodes asked for, kept current while the pipeline runs.
    links: Vec<(PortId, Arc<AtomicBool>)>,
    /// Objects nodes share by key (a bond's two halves).
    shared: HashMap<String, Arc<dyn std::any::Any + Send + Sync>>,
}

impl Env<'_> {
    fn port(&self, name: &str) -> Result<&PipePort, String> {
        self.ports.iter().find(|p| p.name == name).ok_or_else(|| format!("no port `{name}`"))
    }
}

impl ironpath_nodes::Env for Env<'_> {
    fn rx_queue(&mut self, port: &str, queue: u16) -> Result<RxQ, String> {
        let p = self.port(port)?;
        let eport = self.eal.port(p.id).map_err(|e| e.to_string())?;
        eport.rx_queue(queue).ok_or_else(|| {
            format!(
                "port `{port}` RX queue {queue}: no such queue (rx_queues: {}) or already used by another node",
                eport.nb_rxq()
            )
        })
    }

    fn tx_queue(&mut self, port: &str, queue: u16) -> Result<TxQ, String> {
        let p = self.port(port)?;
        let eport = self.eal.port(p.id).map_err(|e| e.to_string())?;
        eport.tx_queue(queue).ok_or_else(|| {
            format!(
                "port `{port}` TX queue {queue}: no such queue (tx_queues: {}) or already used by another node (send several edges into one port_tx node)",
                eport.nb_txq()
            )
        })
    }

    fn port_tx_offloads(&self, port: &str) -> u64 {
        self.port(port)
            .ok()
            .and_then(|p| self.eal.port(p.id).ok())
            .and_then(|x| x.dev_info().ok())
            .map_or(0, |i| i.tx_offload_capa)
    }

    fn port_mac(&self, port: &str) -> Result<[u8; 6], String> {
        let p = self.port(port)?;
        self.eal.port(p.id).and_then(|x| x.mac()).map_err(|e| format!("port `{port}`: {e}"))
    }

    fn port_id(&self, port: &str) -> Result<u16, String> {
        Ok(self.port(port)?.id)
    }

    fn mempool(&self, name: Option<&str>, port: Option<&str>) -> Result<Mempool, String> {
        if let Some(n) = name {
            return self
                .pools
                .iter()
                .find(|p| p.0 == n)
                .map(|p| p.1.clone())
                .ok_or_else(|| format!("no mempool `{n}`"));
        }
        if let Some(p) = port {
            return Ok(self.port(p)?.pool.clone());
        }
        self.pools.first().map(|p| p.1.clone()).ok_or_else(|| "no mempool".to_string())
    }

    fn tsc_hz(&self) -> u64 {
        ironpath_eal::tsc::tsc_hz()
    }

    fn admin_state(&self, port: &str) -> Option<Arc<std::sync::atomic::AtomicBool>> {
        let p = self.port(port).ok()?;
        self.eal.port(p.id).ok().map(|x| x.admin_flag())
    }

    fn link_state(&mut self, port: &str) -> Option<Arc<AtomicBool>> {
        let p = self.port(port).ok()?;
        let x = self.eal.port(p.id).ok()?;
        // A driver without a link operation is taken as always up.
        let up = x.link().ok()?.up != 0;
        let flag = Arc::new(AtomicBool::new(up));
        self.links.push((p.id, flag.clone()));
        Some(flag)
    }

    fn shared(
        &mut self,
        key: &str,
        make: &mut dyn FnMut() -> Arc<dyn std::any::Any + Send + Sync>,
    ) -> Option<Arc<dyn std::any::Any + Send + Sync>> {
        Some(self.shared.entry(key.to_owned()).or_insert_with(make).clone())
    }
}

/// `file:line:col: error: message` for a runtime failure of something the file declared.
fn at(cfg: &Pipeline, loc: ironpath_config::Loc, msg: impl std::fmt::Display) -> String {
    format!("{}:{}:{}: error: {msg}", cfg.file.display(), loc.line, loc.column)
}

impl PipelineRun {
    /// Create pools and ports, build the graph and start its lcores. `pin` pins
    /// lcores to their CPUs (off when the CPUs do not exist here). On failure
    /// everything made so far is undone.
    pub fn start(eal: &mut Eal, cfg: Pipeline, pin: bool) -> Result<PipelineRun, String> {
        let mut run = PipelineRun {
            cfg,
            ports: Vec::new(),
            info: Arc::default(),
            pools: Vec::new(),
            running: None,
            links: Vec::new(),
        };
        match run.start_inner(eal, pin) {
            Ok(()) => Ok(run),
            Err(e) => {
                run.stop(eal);
                Err(e)
            }
        }
    }

    fn start_inner(&mut self, eal: &mut Eal, pin: bool) -> Result<(), String> {
        let cfg = self.cfg.clone();
        for m in &cfg.mempools {
            let policy = match (m.hugepages, eal.mem_policy()) {
                (HugePages::Off, _) | (HugePages::Auto, MemPolicy::NoHuge) => MemPolicy::NoHuge,
                _ => MemPolicy::PreferHuge,
            };
            let mc = MempoolConfig::new(&m.name, m.size).cache_size(m.cache).data_room(m.data_room).policy(policy);
            let pool = Mempool::create(&mc).map_err(|e| at(&cfg, m.loc, format!("mempool `{}`: {e}", m.name)))?;
            if m.hugepages == HugePages::On && pool.mem_kind() != MemKind::Hugepages {
                return Err(at(
                    &cfg,
                    m.loc,
                    format!("mempool `{}`: hugepages: on, but not enough free hugepages (see /proc/meminfo)", m.name),
                ));
            }
            self.pools.push((m.name.clone(), pool));
        }
        let mut per_driver: HashMap<&str, u32> = HashMap::new();
        for p in &cfg.ports {
            let k = per_driver.entry(p.driver.as_str()).or_default();
            // Device names are DRIVER + index, as DPDK's vdev names (net_ring0 ...).
            let mut dev = format!("{}{k}", p.driver);
            while eal.ports().any(|x| x.name() == dev) {
                *k += 1;
                dev = format!("{}{k}", p.driver);
            }
            *k += 1;
            let devargs = if p.args.is_empty() { dev.clone() } else { format!("{dev},{}", p.args) };
            let id = eal.port_attach(&devargs).map_err(|e| at(&cfg, p.loc, format!("port `{}`: {e}", p.name)))?;
            let pool = self.pools.iter().find(|x| x.0 == p.mempool).map(|x| x.1.clone()).expect("validated mempool");
            self.ports.push(PipePort { name: p.name.clone(), id, pool: pool.clone() });
            let port = eal.port_mut(id).map_err(|e| e.to_string())?;
            let fail = |e: ironpath_eal::PortError| at(&cfg, p.loc, format!("port `{}` ({dev}): {e}", p.name));
            port.configure(p.rx_queues, p.tx_queues).map_err(fail)?;
            for q in 0..p.rx_queues {
                port.rx_queue_setup(q, p.rx_desc, &pool).map_err(fail)?;
            }
            for q in 0..p.tx_queues {
                port.tx_queue_setup(q, p.tx_desc).map_err(fail)?;
            }
            if let Some(mtu) = p.mtu {
                port.set_mtu(mtu).map_err(fail)?;
            }
            port.start().map_err(fail)?;
            if let Err(e) = port.set_promiscuous(p.promisc) {
                log::warn!("port `{}`: promiscuous {}: {e}", p.name, p.promisc);
            }
        }
        let mut env = Env { eal, ports: &self.ports, pools: &self.pools, links: Vec::new(), shared: HashMap::new() };
        let mut decls = Vec::new();
        for n in &cfg.nodes {
            let connected: Vec<&str> = cfg.edges.iter().filter(|e| e.from == n.name).map(|e| e.next.as_str()).collect();
            let d = ironpath_nodes::make(n, &connected, &mut env)
                .map_err(|e| at(&cfg, n.loc, format!("node `{}` ({}): {e}", n.name, n.type_name)))?;
            decls.push(d);
        }
        self.links = std::mem::take(&mut env.links);
        let edges: Vec<EdgeDecl> = cfg
            .edges
            .iter()
            .map(|e| EdgeDecl {
                from: e.from.clone(),
                next: e.next.clone(),
                to: e.to.clone(),
                ring_size: e.ring_size as usize,
            })
            .collect();
        let lcores: Vec<(u32, Option<u32>)> = cfg.lcores.iter().map(|l| (l.id, Some(l.cpu as u32))).collect();
        let ncpu = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let pin = pin && cfg.lcores.iter().all(|l| l.cpu < ncpu);
        if pin {
            // Control threads started from here on (a router's kernel follower, FIB
            // rebuilds) stay off the lcores' CPUs when others remain.
            let cpus: Vec<u32> = cfg.lcores.iter().map(|l| l.cpu as u32).collect();
            ironpath_eal::lcore::avoid_cpus(&cpus);
        }
        let mut graph =
            ironpath_graph::build(decls, &edges, &lcores).map_err(|e| format!("{}: error: {e}", cfg.file.display()))?;
        for g in &mut graph.lcores {
            let mode = cfg.lcores.iter().find(|l| l.id == g.lcore).and_then(|l| l.rx_mode);
            g.set_rx_mode(mode.map_or(Ok(RxMode::default()), str::parse)?);
        }
        self.info = graph.info.clone();
        if !pin {
            log::info!("lcores run unpinned (CPUs named in the file exceed the {ncpu} here, or --no-pin)");
        }
        self.running = Some(runner::launch(graph.lcores, pin).map_err(|e| format!("cannot start lcores: {e}"))?);
        Ok(())
    }

    /// True while the lcores run (false after one of them failed).
    pub fn healthy(&self) -> bool {
        self.running.as_ref().is_some_and(|r| !r.any_finished())
    }

    /// Reads the link state of the ports whose flags nodes hold (a bond's members);
    /// called every 100 ms or so by the thread that runs the pipeline.
    pub fn poll_links(&self, eal: &Eal) {
        for (id, flag) in &self.links {
            if let Ok(l) = eal.port(*id).and_then(|p| p.link()) {
                flag.store(l.up != 0, Ordering::Relaxed);
            }
        }
    }

    /// The pipeline's mempools, by name.
    pub fn pools(&self) -> &[(String, Mempool)] {
        &self.pools
    }

    /// Stop the lcores, then stop and remove the ports and pools the pipeline
    /// made. Returns lcore failures (one line each).
    pub fn stop(&mut self, eal: &mut Eal) -> Vec<String> {
        let errs = self.halt();
        for p in self.ports.drain(..) {
            if let Ok(port) = eal.port_mut(p.id) {
                let _ = port.stop();
            }
            let _ = eal.port_detach(p.id);
        }
        self.pools.clear();
        errs
    }

    /// Stops and joins the lcores (the nodes stop: files flushed, held packets
    /// freed), keeping ports and pools for a last look at their counters;
    /// [`PipelineRun::stop`] then closes them. Returns the lcores' errors.
    pub fn halt(&mut self) -> Vec<String> {
        self.running.take().map(|r| r.stop()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::expand_env;

    #[test]
    fn expands_variables_and_reports_unset_ones_with_position() {
        let get = |k: &str| (k == "IF").then(|| "veth7".to_string());
        assert_eq!(expand_env("args: iface=${IF}\nx: ${NO:-d}\n", get).unwrap(), "args: iface=veth7\nx: d\n");
        let e = expand_env("a: 1\nb: x${NOPE}\nc: ${OPEN\n", get).unwrap_err();
        assert_eq!((e[0].loc.line, e[0].loc.column), (2, 5));
        assert!(e[0].message.contains("`NOPE` is not set"));
        assert_eq!((e[1].loc.line, e[1].loc.column), (3, 4));
    }

    #[test]
    fn defaults_may_hold_variables() {
        let get = |k: &str| match k {
            "IF" => Some("veth7".to_string()),
            "ARGS" => Some("iface=x".to_string()),
            _ => None,
        };
        let t = "a: ${NO:-iface=${IF:-v},ring=${RING:-frames}${MORE:-}}\nb: ${ARGS:-iface=${NOPE}}\n";
        assert_eq!(expand_env(t, get).unwrap(), "a: iface=veth7,ring=frames\nb: iface=x\n");
        let e = expand_env("a: 1\nb: ${NO:-x${NOPE}y}\nc: ${NO:-${OPEN}\n", get).unwrap_err();
        assert_eq!((e[0].loc.line, e[0].loc.column), (2, 4));
        assert!(e[0].message.contains("`NOPE` is not set"), "{}", e[0].message);
        assert_eq!((e[1].loc.line, e[1].loc.column), (3, 4));
        assert!(e[1].message.contains("without a closing"), "{}", e[1].message);
    }
}
