//! Shell commands for YAML pipelines: `pipeline load FILE`, `pipeline stop`,
//! `show graph`, `show runtime`, `trace on NODE N`, `trace off`, `show trace`, and
//! the table commands of its nodes (`ip route`, `ip neighbor`, `acl rule`, `bridge
//! mac`, `show ip route|acl|bridge mac`).

use super::App;
use crate::pipeline::{check, PipelineRun};

fn need(app: &App) -> Result<&PipelineRun, String> {
    app.pipeline.as_ref().ok_or_else(|| "no pipeline running (pipeline load FILE)".to_string())
}

/// `pipeline load FILE` / `pipeline stop`.
pub fn pipeline(app: &mut App, t: &[&str]) -> Result<String, String> {
    match (t.get(1).copied(), t.get(2).copied(), t.get(3)) {
        (Some("load"), Some(file), None) => {
            if app.pipeline.is_some() {
                return Err("a pipeline is running: pipeline stop first".into());
            }
            if app.is_running() {
                return Err("forwarding is running: stop first (pipelines and engines share the lcores)".into());
            }
            let drivers: Vec<String> = app.eal.drivers().iter().map(|d| d.name.clone()).collect();
            let cfg = check(std::path::Path::new(file), Some(&drivers)).map_err(|e| e.to_string().trim_end().to_string())?;
            let run = PipelineRun::start(&mut app.eal, cfg, app.pin)?;
            let out = format!(
                "pipeline `{}` running: {} nodes, ports {}\n",
                run.cfg.name.clone().unwrap_or_else(|| file.to_string()),
                run.info.nodes.len(),
                run.ports.iter().map(|p| format!("{}={}", p.name, p.id)).collect::<Vec<_>>().join(" ")
            );
            app.pipeline = Some(run);
            Ok(out)
        }
        (Some("stop"), None, _) => {
            let mut run = app.pipeline.take().ok_or("no pipeline running")?;
            let errs = run.stop(&mut app.eal);
            let runtime = run.info.format_runtime();
            let mut out = format!("pipeline stopped\n{runtime}");
            for e in errs {
                out.push_str(&format!("error: {e}\n"));
            }
            Ok(out)
        }
        _ => Err("Bad arguments: expected `pipeline load FILE` or `pipeline stop`\nUsage: pipeline load FILE | pipeline stop".into()),
    }
}

/// `show graph` / `show runtime` / `show trace [max N]` (records past the first
/// `max` are counted and discarded, as all shown ones are).
pub fn show(app: &App, what: &str, max: Option<usize>) -> Result<String, String> {
    let run = need(app)?;
    Ok(match what {
        "graph" => run.info.format_graph(),
        "runtime" => run.info.format_runtime(),
        _ => {
            let t = run.info.take_trace();
            let shown = max.unwrap_or(t.len()).min(t.len());
            if t.is_empty() {
                "no trace records (trace on NODE N arms a trace)\n".to_string()
            } else if shown < t.len() {
                format!("{}\n({} more records not shown, discarded)\n", t[..shown].join("\n"), t.len() - shown)
            } else {
                t.join("\n") + "\n"
            }
        }
    })
}

/// A table command of the loaded pipeline's nodes (`ip route add ...`, `acl rule
/// del N`, `bridge mac flush`, `show ip route`: as `ironpath ctl`), with a trailing
/// `node NAME` when several nodes take it.
pub fn table(app: &App, t: &[&str]) -> Result<String, String> {
    let run = need(app)?;
    match run.info.control(t) {
        Some(r) => r.map(|mut s| {
            if !s.ends_with('\n') {
                s.push('\n');
            }
            s
        }),
        None => Err(format!("no node of the pipeline takes `{}` (help pipeline)", t.join(" "))),
    }
}

/// `clear trace`: disarm every node and drop the records.
pub fn clear_trace(app: &App) -> Result<String, String> {
    need(app)?.info.clear_trace();
    Ok("trace cleared\n".into())
}

/// `trace on|add NODE N` / `trace off [NODE]`.
pub fn trace(app: &App, t: &[&str]) -> Result<String, String> {
    let run = need(app)?;
    let usage = "Usage: trace on|add NODE N | trace off [NODE]";
    match (t.get(1).copied(), t.get(2).copied(), t.get(3).copied()) {
        (Some("on" | "add"), Some(node), n) => {
            let n: u32 = match n {
                None => 50,
                Some(s) => s.parse().map_err(|_| format!("Bad arguments: `{s}` is not a count\n{usage}"))?,
            };
            run.info.trace(node, n).map_err(|e| format!("Bad arguments: {e}\n{usage}"))?;
            Ok(format!("tracing the next {n} packets of `{node}` (show trace)\n"))
        }
        (Some("off"), node, None) => {
            for n in &run.info.nodes {
                if node.is_none_or(|x| x == n.name) {
                    let _ = run.info.trace(&n.name, 0);
                }
            }
            Ok("trace off\n".into())
        }
        _ => Err(format!("Bad arguments: expected on or off\n{usage}")),
    }
}
