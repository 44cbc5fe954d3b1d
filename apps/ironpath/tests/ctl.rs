//! `ironpath ctl` against a running `ironpath run configs/default.yaml` and
//! `ironpath testpmd`: the commands' figures against the run's own, `clear
//! runtime`, the shell through a pipe, hostile clients (silent, a line without
//! end, 100 at once) while forwarding goes on, and another user refused (root).
//! Each process has its own file prefix and is killed on drop.

mod common;

use common::{config, BIN};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An `ironpath run` or `ironpath testpmd` with its own file prefix; killed on drop.
struct Proc {
    child: Child,
    prefix: String,
    stats: Option<PathBuf>,
    out: Arc<Mutex<Vec<u8>>>,
    /// `RUNDIR` (`$RUNTIME_DIRECTORY` if the test set it).
    base: PathBuf,
}

fn drain(mut r: impl Read + Send + 'static, buf: Arc<Mutex<Vec<u8>>>) {
    std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = r.read(&mut chunk) {
            if n == 0 {
                break;
            }
            buf.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
}

impl Proc {
    fn spawn(mut cmd: Command, prefix: String, stats: Option<PathBuf>) -> Proc {
        let base = cmd
            .get_envs()
            .find(|(k, _)| *k == "RUNTIME_DIRECTORY")
            .and_then(|(_, v)| v)
            .map_or_else(|| PathBuf::from("/var/run"), PathBuf::from);
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let out = Arc::new(Mutex::new(Vec::new()));
        drain(child.stdout.take().unwrap(), out.clone());
        drain(child.stderr.take().unwrap(), out.clone());
        let p = Proc { child, prefix, stats, out, base };
        let t = Instant::now();
        while !p.output().contains("control: ") {
            assert!(t.elapsed() < Duration::from_secs(60), "no control socket announced:\n{}", p.output());
            std::thread::sleep(Duration::from_millis(50));
        }
        p
    }

    /// `ironpath run configs/default.yaml` with `env`.
    fn run(tag: &str, env: &[(&str, &str)]) -> Proc {
        let prefix = format!("ironpath-ctl-{tag}-{}", std::process::id());
        let stats = std::env::temp_dir().join(format!("{prefix}.jsonl"));
        let mut cmd = Command::new(BIN);
        cmd.args(["run", config("default.yaml").to_str().unwrap(), "--no-huge", "--duration", "300"])
            .args(["--stats-period", "0", "--file-prefix", &prefix, "--stats-json"])
            .arg(&stats);
        for (k, v) in env {
            cmd.env(k, v);
        }
        Proc::spawn(cmd, prefix, Some(stats))
    }

    /// `ironpath testpmd` on two null ports, interactive.
    fn testpmd(tag: &str) -> Proc {
        let prefix = format!("ironpath-ctl-{tag}-{}", std::process::id());
        let mut cmd = Command::new(BIN);
        cmd.args(["testpmd", "-l", "0-1", "--no-huge", "--vdev", "net_null0,size=64", "--vdev", "net_null1,size=64"])
            .args(["--file-prefix", &prefix, "--", "-i"]);
        Proc::spawn(cmd, prefix, None)
    }

    fn output(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    fn send(&mut self, line: &str) {
        let i = self.child.stdin.as_mut().unwrap();
        writeln!(i, "{line}").unwrap();
        i.flush().unwrap();
    }

    /// `ironpath ctl -f PREFIX args...`.
    fn ctl(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .args(["ctl", "-f", &self.prefix])
            .args(args)
            .env("RUNTIME_DIRECTORY", &self.base)
            .output()
            .unwrap()
    }

    /// The answer to a command that must succeed.
    fn ok(&self, args: &[&str]) -> String {
        let o = self.ctl(args);
        let text = common::text(&o);
        assert!(o.status.success(), "ctl {args:?} failed: {text}\nprocess:\n{}", self.output());
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// The last line of the stats JSON (waiting up to 20 s for the first).
    fn latest(&self) -> serde_json::Value {
        let t = Instant::now();
        loop {
            let text = std::fs::read_to_string(self.stats.as_ref().unwrap()).unwrap_or_default();
            if let Some(v) = text.lines().rev().find_map(|l| serde_json::from_str(l).ok()) {
                return v;
            }
            assert!(t.elapsed() < Duration::from_secs(20), "no stats line:\n{}", self.output());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn socket(&self) -> PathBuf {
        self.base.join("dpdk").join(&self.prefix).join("ironpath_ctl.sock")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(s) = &self.stats {
            let _ = std::fs::remove_file(s);
        }
    }
}

/// Waits up to `secs` for `args` to succeed with an answer on which `ok` holds; returns
/// the last answer. A command the shell has been sent may not have run yet, so a failed
/// answer is retried too until the time is up.
fn wait_answer(p: &Proc, args: &[&str], secs: u64, ok: impl Fn(&str) -> bool) -> String {
    let t = Instant::now();
    loop {
        if t.elapsed() > Duration::from_secs(secs) {
            return p.ok(args);
        }
        let o = p.ctl(args);
        let a = String::from_utf8_lossy(&o.stdout).into_owned();
        if o.status.success() && ok(&a) {
            return a;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// One node row of `show runtime`: name, calls, busy, packets, drops, pkts/call.
struct Row {
    name: String,
    calls: u64,
    packets: u64,
    drops: u64,
    per_call: f64,
}

fn rows(runtime: &str) -> Vec<Row> {
    runtime
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.starts_with("lcore ") && !l.starts_with("Name"))
        .map(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(c.len(), 10, "a node row has 10 columns: {l}");
            Row {
                name: c[0].to_string(),
                calls: c[3].parse().unwrap(),
                packets: c[5].parse().unwrap(),
                drops: c[6].parse().unwrap(),
                per_call: c[8].parse().unwrap(),
            }
        })
        .collect()
}

fn row<'a>(rows: &'a [Row], name: &str) -> &'a Row {
    rows.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("no node {name}"))
}

/// The number after `key` on its line of `show interface`'s block for `port`.
fn iface(text: &str, port: &str, key: &str) -> u64 {
    let block = text.split_once(&format!("{port} (port")).unwrap_or_else(|| panic!("no {port} in:\n{text}")).1;
    let line = block.lines().find(|l| l.trim_start().starts_with(key)).unwrap_or_else(|| panic!("no {key}"));
    line.split_whitespace().last().unwrap().parse().unwrap()
}

#[test]
fn show_runtime_columns_add_up() {
    let p = Proc::run("rt", &[]);
    let text = wait_answer(&p, &["show", "runtime"], 30, |a| rows(a).iter().any(|r| r.name == "sink" && r.packets > 0));
    let rs = rows(&text);
    assert_eq!(rs.len(), 8, "{text}");
    for r in &rs {
        let want = if r.calls == 0 { 0.0 } else { r.packets as f64 / r.calls as f64 };
        assert!((r.per_call - want).abs() <= 0.0051, "{}: Pkts/call {} vs {want}\n{text}", r.name, r.per_call);
    }
    assert!(row(&rs, "gen").packets > 0, "{text}");
    assert_eq!(row(&rs, "sink").drops, row(&rs, "sink").packets, "the sink drops all it gets\n{text}");
}

#[test]
fn counted_run_interface_errors_and_clear_runtime() {
    let p = Proc::run("count", &[("IRONPATH_COUNT", "1000")]);
    // The source stops after 1000 packets; all come back to p0 and end in sink.
    let text =
        wait_answer(&p, &["show", "interface"], 60, |a| a.contains("p0") && iface(a, "p0", "rx packets") == 1000);
    assert_eq!(iface(&text, "p0", "rx packets"), 1000, "{text}");
    // The run's own figures (its stats JSON, written every second) agree.
    let t = Instant::now();
    let json = loop {
        let j = p.latest();
        if j["ports"]["p0"]["ipackets"] == 1000 || t.elapsed() > Duration::from_secs(20) {
            break j;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    for port in ["p0", "p1"] {
        for (key, field) in
            [("rx packets", "ipackets"), ("rx bytes", "ibytes"), ("tx packets", "opackets"), ("tx bytes", "obytes")]
        {
            let want = json["ports"][port][field].as_u64().unwrap();
            assert_eq!(iface(&text, port, key), want, "{port} {key}\n{text}\n{json}");
        }
        assert_eq!(iface(&text, port, "drops: rx missed"), 0);
    }
    assert!(p.ok(&["show", "interface", "p1"]).starts_with("p1 (port 1"));
    let e = p.ctl(&["show", "interface", "nosuch"]);
    assert_eq!(e.status.code(), Some(1));
    assert!(common::text(&e).contains("no interface `nosuch`; interfaces: p0, p1"), "{}", common::text(&e));

    let errors = p.ok(&["show", "errors"]);
    let sink = errors.lines().find(|l| l.contains("sink")).unwrap_or_else(|| panic!("no sink in:\n{errors}"));
    assert_eq!(sink.split_whitespace().next(), Some("1000"), "{errors}");
    assert!(sink.contains("from back.out") && sink.contains("deliberately"), "{errors}");

    // clear runtime: zero, then counting again (calls go on without packets).
    let before = rows(&p.ok(&["show", "runtime"]));
    assert_eq!(row(&before, "gen").packets, 1000);
    assert_eq!(p.ok(&["clear", "runtime"]).trim(), "runtime counters cleared");
    std::thread::sleep(Duration::from_millis(300));
    let after = p.ok(&["show", "runtime"]);
    let rs = rows(&after);
    for r in &rs {
        assert_eq!((r.packets, r.drops), (0, 0), "{}\n{after}", r.name);
    }
    assert!(row(&rs, "gen").calls > 0, "calls count again after clear\n{after}");
    assert!(row(&rs, "gen").calls < row(&before, "gen").calls, "{after}");
    let edge = after.lines().find(|l| l.contains("from back.out")).unwrap_or_else(|| panic!("{after}"));
    assert_eq!(edge.split_whitespace().nth(2), Some("0"), "edge counts cleared too\n{after}");
    // The data plane's counters were not touched.
    assert_eq!(p.latest()["nodes"]["gen"]["packets"], 1000);
}

#[test]
fn testpmd_answers_for_its_ports() {
    let mut p = Proc::testpmd("tp");
    p.send("start");
    let text = wait_answer(&p, &["show", "interface"], 30, |a| iface(a, "net_null0", "rx packets") > 0);
    assert!(iface(&text, "net_null0", "rx packets") > 0, "{text}");
    assert!(text.contains("net_null1 (port 1"), "{text}");
    let pools = p.ok(&["show", "mempool"]);
    assert!(pools.contains("mb_pool_0"), "{pools}");
    let o = p.ctl(&["show", "runtime"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(common::text(&o).contains("no pipeline"), "{}", common::text(&o));
    assert!(p.ok(&["show", "memory"]).contains("process RSS"));
    p.send("stop");
    // A loaded pipeline: its runtime, graph and pools too.
    p.send(&format!("pipeline load {}", config("default.yaml").display()));
    let rt = wait_answer(&p, &["show", "runtime"], 30, |a| a.contains("gen ") && row(&rows(a), "sink").packets > 0);
    assert!(row(&rows(&rt), "sink").packets > 0, "{rt}");
    assert!(p.ok(&["show", "graph"]).contains("  swap [macswap]"));
    assert!(p.ok(&["show", "mempool"]).contains("mp0"));
    assert!(p.ok(&["show", "errors"]).contains("from back.out"));
    p.ok(&["clear", "runtime"]);
    let rt = p.ok(&["show", "runtime"]);
    assert!(row(&rows(&rt), "gen").calls < row(&rows(&p.ok(&["show", "runtime"])), "gen").calls, "counts again");
    p.send("pipeline stop");
    let t = Instant::now();
    while p.ctl(&["show", "runtime"]).status.success() && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(common::text(&p.ctl(&["show", "runtime"])).contains("no pipeline"));
}

#[test]
fn the_shell_reads_commands_from_a_pipe() {
    let p = Proc::run("pipe", &[("IRONPATH_COUNT", "100")]);
    let mut c = Command::new(BIN)
        .args(["ctl", "-f", &p.prefix])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(b"show graph\n\nshow mempool\nshow nothing\nquit\nshow runtime\n").unwrap();
    let o = c.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("ironpath# show graph\nlcore 0"), "{out}");
    assert!(out.contains("ironpath# show mempool\nName") && out.contains("mp0"), "{out}");
    assert!(out.contains("ironpath# show nothing\nerror: unknown command"), "{out}");
    assert!(!out.contains("ironpath# show runtime"), "stops at quit: {out}");
    assert_eq!(o.status.code(), Some(1), "a refused command makes the exit status 1");
}

#[test]
fn no_process_is_said_plainly() {
    let prefix = format!("ironpath-ctl-none-{}", std::process::id());
    let o = Command::new(BIN).args(["ctl", "-f", &prefix, "show", "runtime"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains(&format!("no ironpath process with file prefix {prefix}")) && e.contains("is it running?"),
        "{e}"
    );
}

/// A client whose line was refused reads the reason, then end of file.
fn read_all(mut s: UnixStream) -> String {
    let _ = s.set_read_timeout(Some(Duration::from_secs(60)));
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn hostile_clients_stall_nothing() {
    let p = Proc::run("hostile", &[]);
    let path = p.socket();
    let packets = |p: &Proc| p.latest()["ports"]["p0"]["ipackets"].as_u64().unwrap_or(0);
    let t0 = Instant::now();
    // Sends nothing.
    let silent = UnixStream::connect(&path).unwrap();
    // 1 MiB without a line end: refused after 4 KiB, one line saying why.
    // (Connected before the crowd: accepted in that order, it finds a place.)
    let long = {
        let mut s = UnixStream::connect(&path).unwrap();
        std::thread::spawn(move || {
            let _ = s.set_write_timeout(Some(Duration::from_secs(30)));
            let _ = s.write_all(&vec![b'x'; 1 << 20]);
            read_all(s)
        })
    };
    // 100 clients at once, each with a command: answered, or told busy.
    let crowd: Vec<_> = (0..100)
        .map(|_| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut s = UnixStream::connect(&path).unwrap();
                let _ = s.write_all(b"show interface\n");
                read_all(s)
            })
        })
        .collect();
    let before = packets(&p);
    let (mut answered, mut busy) = (0, 0);
    for c in crowd {
        let a = c.join().unwrap();
        if a.ends_with("\0ok\n") && a.contains("rx packets") {
            answered += 1;
        } else if a.starts_with("busy: ") {
            busy += 1;
        } else {
            panic!("neither an answer nor busy: {a:?}");
        }
    }
    assert_eq!(answered + busy, 100);
    assert!(answered > 0, "some of the crowd are served");
    let long = long.join().unwrap();
    assert!(long.starts_with("error: command longer than 4096 bytes"), "{long:?}");
    // With the silent client still connected, a normal client is answered at once.
    let t = Instant::now();
    let text = p.ok(&["show", "interface"]);
    assert!(t.elapsed() < Duration::from_secs(2), "ctl took {:?}", t.elapsed());
    assert!(iface(&text, "p0", "rx packets") > 0);
    // Forwarding went on.
    let t = Instant::now();
    while packets(&p) <= before && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(packets(&p) > before, "the run stopped forwarding\n{}", p.output());
    // The silent client is closed after its 10 s, with one line saying why.
    let said = read_all(silent);
    assert!(said.starts_with("error: no command line within 10 s"), "{said:?}");
    assert!(t0.elapsed() >= Duration::from_secs(9), "closed too early: {:?}", t0.elapsed());
    let counts = p.ok(&["show", "ctl"]);
    let count = |k: &str| -> u64 {
        let l = counts.lines().find(|l| l.contains(k)).unwrap_or_else(|| panic!("no {k} in {counts}"));
        l.split_whitespace().last().unwrap().parse().unwrap()
    };
    assert_eq!(count("line too long"), 1, "{counts}");
    assert_eq!(count("nothing sent in time"), 1, "{counts}");
    assert_eq!(count("busy"), busy, "{counts}");
}

/// Runs `ironpath ctl` as `nobody` (a copy of the binary nobody may execute).
fn ctl_as_nobody(dir: &std::path::Path, p: &Proc, cmd: &[&str]) -> Output {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("ironpath");
    if !bin.exists() {
        std::fs::copy(BIN, &bin).unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&bin)
        .args(["ctl", "-f", &p.prefix])
        .args(cmd)
        .env("RUNTIME_DIRECTORY", &p.base)
        .output()
        .unwrap()
}

#[test]
fn another_user_is_refused_root() {
    use std::os::unix::fs::PermissionsExt;
    if !common::is_root() {
        common::skip("needs root (setpriv to uid 65534)");
        return;
    }
    if !common::tools_ready(&["setpriv"]) {
        return;
    }
    // RUNDIR of its own, so that its modes can be opened up without touching others'.
    let base = common::TempDir::new("ctl-rundir");
    std::fs::set_permissions(&base.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let p = Proc::run("uid", &[("IRONPATH_COUNT", "100"), ("RUNTIME_DIRECTORY", base.0.to_str().unwrap())]);
    let dir = common::TempDir::new("ctl-nobody");
    // The 0700 directory stops it first.
    let o = ctl_as_nobody(&dir.0, &p, &["show", "runtime"]);
    assert_eq!(o.status.code(), Some(1), "{}", common::text(&o));
    assert!(common::text(&o).contains("permission denied"), "{}", common::text(&o));
    // With the directory and the socket opened up, the peer check still refuses.
    let sock = p.socket();
    let dirs = [base.0.join("dpdk"), sock.parent().unwrap().to_path_buf()];
    for d in &dirs {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o711)).unwrap();
    }
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let o = ctl_as_nobody(&dir.0, &p, &["show", "runtime"]);
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o600)).unwrap();
    for d in &dirs {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    assert_eq!(o.status.code(), Some(1), "{}", common::text(&o));
    assert!(common::text(&o).contains("refused: a client of uid 65534"), "{}", common::text(&o));
    let counts = p.ok(&["show", "ctl"]);
    assert!(counts.lines().any(|l| l.contains("another user") && l.trim_end().ends_with(" 1")), "{counts}");
}
