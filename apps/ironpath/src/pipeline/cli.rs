//! `ironpath run FILE` and `ironpath check FILE`.

use super::{check, check_ports, stats, PipelineRun};
use ironpath_eal::{Eal, MemPolicy};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Usage of `ironpath run`.
pub const RUN_USAGE: &str = "usage: ironpath run FILE [options]

Runs the pipeline FILE describes until Ctrl-C (or --duration), printing the
port table every second (per port: packets and bytes since the start, then
packets/s and Mbit/s over the last period; a quiet stretch is said in one line)
and, at exit, the per-node counters (`show runtime`) and why any node dropped.

options:
  --duration SECS       stop after SECS seconds
  --stats-period SECS   print the port table every SECS seconds (default 1; 0: never)
  --stats-json FILE     write the per-second figures as JSON lines to FILE
  -d PATH               also load PMD plugins from PATH (file or directory; repeatable),
                        before the default ones ($IRONPATH_PMD_PATH, next to the executable)
  --no-default-plugins  only the -d plugins
  --no-huge             ordinary pages for every mempool
  --no-pin              do not pin lcores to CPUs
  --rx-mode MODE        poll, adaptive or interrupt for every lcore (overrides the
                        file's `rx_mode`): how an lcore waits when its queues are empty
  --log-level LEVEL     emergency, alert, critical, error, warning, notice, info,
                        debug or 1-8 [default: notice]; PATTERN:LEVEL for the log
                        targets PATTERN matches (repeatable)
  --file-prefix NAME    the directory of the telemetry and control sockets:
                        /var/run/dpdk/NAME, as DPDK (dpdk-telemetry.py -f NAME,
                        ironpath ctl -f NAME) [default: rte]
  --no-telemetry        no telemetry socket (the control socket stays)
  --metrics ADDR:PORT   serve Prometheus/OpenMetrics text at http://ADDR:PORT/metrics
                        (ADDR: an IP address, [IPv6], a host name, or none: every
                        IPv4 address)";

/// The options of `ironpath run`, for "did you mean".
const OPTIONS: &[&str] = &[
    "--duration",
    "--stats-period",
    "--stats-json",
    "-d",
    "--no-default-plugins",
    "--no-huge",
    "--no-pin",
    "--rx-mode",
    "--log-level",
    "--file-prefix",
    "--no-telemetry",
    "--metrics",
    "--help",
];

struct RunArgs {
    file: PathBuf,
    duration: Option<f64>,
    period: f64,
    json: Option<PathBuf>,
    plugins: Vec<PathBuf>,
    default_plugins: bool,
    no_huge: bool,
    pin: bool,
    rx_mode: Option<&'static str>,
    prefix: Option<String>,
    /// The file prefix, kept with `--no-telemetry` too (the control socket's).
    file_prefix: String,
    metrics: Option<String>,
}

fn parse(args: &[String]) -> Result<RunArgs, String> {
    let mut r = RunArgs {
        file: PathBuf::new(),
        duration: None,
        period: 1.0,
        json: None,
        plugins: vec![],
        default_plugins: true,
        no_huge: false,
        pin: true,
        rx_mode: None,
        prefix: Some("rte".into()),
        file_prefix: "rte".into(),
        metrics: None,
    };
    let mut it = args.iter();
    let num = |name: &str, v: Option<&String>| -> Result<f64, String> {
        let v = v.ok_or_else(|| format!("{name} needs a value"))?;
        v.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| format!("{name} {v}: not a number of seconds"))
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--duration" => r.duration = Some(num("--duration", it.next())?),
            "--stats-period" => r.period = num("--stats-period", it.next())?,
            "--stats-json" => r.json = Some(it.next().ok_or("--stats-json needs a file")?.into()),
            "-d" => r.plugins.push(it.next().ok_or("-d needs a path")?.into()),
            "--no-huge" => r.no_huge = true,
            "--no-default-plugins" => r.default_plugins = false,
            "--no-pin" => r.pin = false,
            "--rx-mode" => {
                let v = it.next().ok_or("--rx-mode needs poll, adaptive or interrupt")?;
                let m = ironpath_config::RX_MODES.iter().find(|m| **m == v.as_str());
                r.rx_mode = Some(m.ok_or_else(|| format!("--rx-mode {v}: accepted: poll, adaptive, interrupt"))?);
            }
            "--file-prefix" => {
                let v = it.next().ok_or("--file-prefix needs a name")?;
                if v.is_empty() || v.contains('/') || v == "." || v == ".." {
                    return Err(format!("--file-prefix {v}: not a file name"));
                }
                r.prefix = r.prefix.as_ref().map(|_| v.clone());
                r.file_prefix = v.clone();
            }
            "--no-telemetry" => r.prefix = None,
            "--metrics" => {
                let v = it.next().ok_or("--metrics needs ADDRESS:PORT")?;
                ironpath_eal::args::metrics_addr(v).map_err(|e| format!("--metrics: {e}"))?;
                r.metrics = Some(v.clone());
            }
            "--log-level" => {
                let v = it.next().ok_or("--log-level needs a level")?;
                ironpath_eal::logging::set_level(v).map_err(|e| format!("--log-level: {e}"))?;
            }
            s if s.starts_with('-') => {
                let hint = ironpath_util::suggest::did_you_mean(s, OPTIONS.iter().copied());
                return Err(format!("unknown option `{s}`{hint} (`ironpath run --help` lists them)"));
            }
            s if r.file.as_os_str().is_empty() => r.file = s.into(),
            s => return Err(format!("unexpected argument `{s}` (one FILE only)")),
        }
    }
    if r.file.as_os_str().is_empty() {
        return Err(RUN_USAGE.to_string());
    }
    Ok(r)
}

/// Prints an error on stderr ending with one newline, whether or not its text has one.
fn eprint_line(e: &str) {
    eprintln!("{}", e.strip_suffix('\n').unwrap_or(e));
}

fn load_eal(plugins: &[PathBuf], defaults: bool, policy: MemPolicy) -> Eal {
    let mut eal = Eal::new(policy);
    for e in eal.load_plugins(plugins, defaults) {
        log::warn!("{e}");
    }
    eal
}

/// `ironpath check FILE...`: validate only; exit 1 if any file has errors.
pub fn check_main(args: &[String]) -> i32 {
    if args.is_empty() || args.iter().any(|a| a == "-h" || a == "--help") {
        crate::outln!("usage: ironpath check FILE...\n\nValidates pipeline files (every error with file:line:column) without running them.");
        return i32::from(args.is_empty()) * 2;
    }
    let eal = load_eal(&[], true, MemPolicy::NoHuge);
    let drivers: Vec<String> = eal.drivers().iter().map(|d| d.name.clone()).collect();
    let drivers = (!drivers.is_empty()).then_some(drivers.as_slice());
    let mut rc = 0;
    for f in args {
        match check(std::path::Path::new(f), drivers) {
            Ok(p) if check_ports(&eal, &p).is_err() => {
                eprint_line(&check_ports(&eal, &p).unwrap_err());
                rc = 1;
            }
            Ok(p) => crate::outln!(
                "{f}: ok ({} mempools, {} ports, {} lcores, {} nodes, {} edges)",
                p.mempools.len(),
                p.ports.len(),
                p.lcores.len(),
                p.nodes.len(),
                p.edges.len()
            ),
            Err(e) => {
                eprint_line(&e.to_string());
                rc = 1;
            }
        }
    }
    rc
}

/// Says where the telemetry endpoints listen.
pub fn announce(t: &crate::telemetry::server::Server, prefix: Option<&str>) {
    if let (Some(p), Some(prefix)) = (t.socket_path(), prefix) {
        let instance = p.to_string_lossy().rsplit_once(".v2:").map(|(_, i)| format!(" -i {i}")).unwrap_or_default();
        crate::outln!("telemetry: {} (dpdk-telemetry.py -f {prefix}{instance})", p.display());
    }
    if let Some(a) = t.metrics_addr() {
        crate::outln!("metrics: http://{a}/metrics");
    }
}

/// The control socket of `prefix` and the commands it receives; without it (the
/// reason said once) the process runs on.
pub fn start_ctl(prefix: &str) -> Option<(crate::ctl::server::Server, std::sync::mpsc::Receiver<crate::ctl::Request>)> {
    crate::ctl::server::Server::start(prefix).map_err(|e| log::warn!("{e}; running without a control socket")).ok()
}

/// Says where the control socket listens.
pub fn announce_ctl(s: Option<&crate::ctl::server::Server>, prefix: &str) {
    if let Some(s) = s {
        crate::outln!("control: {} (ironpath ctl -f {prefix}{})", s.path().display(), s.instance_arg());
    }
}

/// What telemetry reports about a running pipeline.
fn figures(eal: &Eal, run: &PipelineRun, args: &[String]) -> crate::telemetry::Figures {
    let ports: Vec<_> = run.ports.iter().map(|p| (p.id, p.name.clone())).collect();
    crate::telemetry::Figures::collect("ironpath run", args, eal, &ports, run.pools(), Some(run.info.clone()))
}

/// `ironpath run FILE [options]`.
pub fn run_main(args: &[String]) -> i32 {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        crate::outln!("{RUN_USAGE}");
        return 0;
    }
    let a = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ironpath run: {e}");
            return 2;
        }
    };
    let mut eal =
        load_eal(&a.plugins, a.default_plugins, if a.no_huge { MemPolicy::NoHuge } else { MemPolicy::PreferHuge });
    let drivers: Vec<String> = eal.drivers().iter().map(|d| d.name.clone()).collect();
    let cfg = match check(&a.file, Some(&drivers)) {
        Ok(c) => c,
        Err(e) => {
            eprint_line(&e.to_string());
            return 1;
        }
    };
    if let Err(e) = check_ports(&eal, &cfg) {
        eprint_line(&e);
        return 1;
    }
    let mut json = match &a.json {
        Some(p) => match std::fs::File::create(p) {
            Ok(f) => Some(std::io::BufWriter::new(f)),
            Err(e) => {
                eprintln!("ironpath run: --stats-json {}: {e}", p.display());
                return 1;
            }
        },
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    if let Err(e) = ctrlc::set_handler(move || s2.store(true, Ordering::Relaxed)) {
        log::warn!("no Ctrl-C handler: {e}");
    }
    let (telemetry, requests) = match crate::telemetry::server::Server::start(a.prefix.as_deref(), a.metrics.as_deref())
    {
        Ok(t) => t,
        Err(e) => {
            eprintln!("ironpath run: {e}");
            return 1;
        }
    };
    let ctl = start_ctl(&a.file_prefix);
    let name = cfg.name.clone().unwrap_or_else(|| a.file.display().to_string());
    let mut cfg = cfg;
    if let Some(m) = a.rx_mode {
        cfg.lcores.iter_mut().for_each(|l| l.rx_mode = Some(m));
    }
    let mut run = match PipelineRun::start(&mut eal, cfg, a.pin) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    crate::outln!(
        "ironpath: pipeline `{name}` running: {} nodes on lcores {:?}, {} ports{}",
        run.info.nodes.len(),
        run.cfg.lcores.iter().map(|l| l.id).collect::<Vec<_>>(),
        run.ports.len(),
        a.duration.map_or(" (Ctrl-C to stop)".to_string(), |d| format!(" for {d} s"))
    );
    announce(&telemetry, a.prefix.as_deref());
    announce_ctl(ctl.as_ref().map(|c| &c.0), &a.file_prefix);
    let mut control = crate::ctl::commands::Control::default();
    let t0 = Instant::now();
    // The first interval counts from zero, not from a snapshot taken now: the lcores
    // already run, and a short job (a few MiB over rings) can end before this line.
    let mut prev: stats::Snapshot = vec![Default::default(); run.ports.len()];
    let mut t_prev = t0;
    let mut next_print = a.period;
    let mut next_json = 1.0;
    let mut failed = false;
    let mut peaks = Vec::new();
    let mut quiet_said = false;
    let mut next_links = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(20));
        if Instant::now() >= next_links {
            run.poll_links(&eal);
            next_links = Instant::now() + Duration::from_millis(100);
        }
        while let Ok(req) = requests.try_recv() {
            let f = figures(&eal, &run, args);
            let text = crate::telemetry::server::respond(&req.ask, &f);
            req.reply(text);
        }
        while let Some(req) = ctl.as_ref().and_then(|c| c.1.try_recv().ok()) {
            let f = figures(&eal, &run, args);
            control.serve(req, &f);
        }
        if json.is_some() {
            stats::track_peaks(&run, &mut peaks);
        }
        let t = t0.elapsed().as_secs_f64();
        let done = stop.load(Ordering::Relaxed) || a.duration.is_some_and(|d| t >= d) || crate::out::gone();
        if !run.healthy() {
            failed = true;
        }
        let due_print = a.period > 0.0 && t >= next_print;
        let due_json = json.is_some() && t >= next_json;
        if due_print || due_json || done || failed {
            let cur = stats::snapshot(&eal, &run);
            let secs = t_prev.elapsed().as_secs_f64();
            if due_print || (done && a.period > 0.0) {
                // A quiet stretch (no port moved a packet: the work is done, or none
                // has come yet) is said once, not printed as rows of zeros; the
                // table comes back with traffic, and at the end with the totals.
                if done || !stats::quiet(&prev, &cur) {
                    crate::out!("{}", stats::table(&run, &prev, &cur, secs));
                    quiet_said = false;
                } else if !quiet_said {
                    crate::outln!(
                        "{:.1} s: no packet moved on any port since {:.1} s (the table resumes with traffic)",
                        t,
                        t - secs
                    );
                    quiet_said = true;
                }
                next_print += a.period;
            }
            if let Some(w) = json.as_mut() {
                // Flushed line by line: readers tail the file while the run goes on.
                let _ =
                    writeln!(w, "{}", stats::json_line(&run, t, &prev, &cur, secs, &peaks)).and_then(|()| w.flush());
                next_json = t.floor() + 1.0;
            }
            prev = cur;
            t_prev = Instant::now();
        }
        if done || failed {
            break;
        }
    }
    let errs = run.halt();
    let totals = stats::snapshot(&eal, &run);
    // After the lcores are joined: node counters read while they still walk are
    // taken at different instants (a burst counted by one node and not yet by
    // the next).
    let runtime = run.info.format_runtime();
    if let Some(mut w) = json {
        // One last line with the final counters (lcores joined), marked `final`.
        let line =
            stats::json_line(&run, t0.elapsed().as_secs_f64(), &prev, &totals, t_prev.elapsed().as_secs_f64(), &peaks);
        let _ = writeln!(w, "{{\"final\":true,{}", &line[1..]).and_then(|()| w.flush());
    }
    let errs = [errs, run.stop(&mut eal)].concat();
    crate::outln!("\n{runtime}");
    crate::out!("{}", stats::drop_notes(&run.info));
    for (p, s) in run.cfg.ports.iter().zip(&totals) {
        crate::outln!(
            "port {:<10} RX-packets: {:<12} RX-bytes: {:<14} TX-packets: {:<12} TX-bytes: {:<14} RX-missed: {} RX-nombuf: {}",
            p.name, s.ipackets, s.ibytes, s.opackets, s.obytes, s.imissed, s.rx_nombuf
        );
    }
    for e in &errs {
        eprintln!("ironpath: {e}");
    }
    // A node that panicked lost the packets of those calls and ran on (docs/graph.md):
    // the run still ends in an error status, naming it.
    let failed_nodes: Vec<String> = run
        .info
        .nodes
        .iter()
        .filter(|n| n.stats.panics.get() > 0)
        .map(|n| {
            let s = &n.stats;
            format!(
                "node `{}` panicked {} time(s), {} packet(s) dropped with those calls, {} while fenced (first: {})",
                n.name,
                s.panics.get(),
                s.panic_drops.get(),
                s.fenced_drops.get(),
                s.first_panic.get().map_or("", String::as_str)
            )
        })
        .collect();
    for f in &failed_nodes {
        eprintln!("ironpath: {f}");
    }
    if failed || !errs.is_empty() || !failed_nodes.is_empty() {
        1
    } else {
        0
    }
}
