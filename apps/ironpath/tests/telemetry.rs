//! Telemetry with the real clients: DPDK's `dpdk-telemetry.py` (Debian `dpdk`)
//! through a pipe on the v2 socket, and `promtool check metrics` (Debian
//! `prometheus`) on a scrape, against `ironpath run configs/default.yaml` and
//! `ironpath testpmd`; the figures they show equal the final counters.

mod common;

use common::{tools_ready, BIN};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Runs `dpdk-telemetry.py -f prefix` with `cmds` on its stdin; one JSON value per
/// command, keyed by the command's path.
fn telemetry(prefix: &str, cmds: &[&str]) -> Vec<Value> {
    let mut c = Command::new("dpdk-telemetry.py")
        .args(["-f", prefix])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = cmds.join("\n");
    input.push('\n');
    c.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let o = c.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "dpdk-telemetry.py: {out}{}", String::from_utf8_lossy(&o.stderr));
    let values: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}\nall:\n{out}")))
        .collect();
    assert_eq!(values.len(), cmds.len(), "one reply per command:\n{out}");
    for (v, c) in values.iter().zip(cmds) {
        let key = c.split(',').next().unwrap();
        assert!(v.get(key).is_some(), "reply to {c} is keyed by {key}: {v}");
    }
    values
}

/// Scrapes `addr` and runs `promtool check metrics` on it; returns the text.
fn scrape_and_check(addr: &str) -> String {
    let o = Command::new("curl").args(["-sf", &format!("http://{addr}/metrics")]).output().unwrap();
    assert!(o.status.success(), "curl {addr}");
    let text = String::from_utf8(o.stdout).unwrap();
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let o = p.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "promtool check metrics:\n{}{}\n{text}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    text
}

/// The value of sample `name{labels}` in a scrape.
fn sample(text: &str, name_labels: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name_labels)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no sample {name_labels}"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Reads lines from the child's stdout (on a thread) until `pred` matches one.
fn wait_line(lines: &std::sync::mpsc::Receiver<String>, all: &mut String, pred: impl Fn(&str) -> bool) {
    let end = Instant::now() + Duration::from_secs(20);
    while Instant::now() < end {
        if let Ok(l) = lines.recv_timeout(Duration::from_millis(100)) {
            all.push_str(&l);
            all.push('\n');
            if pred(&l) {
                return;
            }
        }
    }
    panic!("no such line in:\n{all}");
}

fn spawn_lines(out: std::process::ChildStdout) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

#[test]
fn dpdk_telemetry_and_promtool_read_a_pipeline_run() {
    if !tools_ready(&["dpdk-telemetry.py", "promtool", "curl"]) {
        return;
    }
    let prefix = format!("ironpath-test-run-{}", std::process::id());
    let maddr = format!("127.0.0.1:{}", free_port());
    // 100 000 packets as fast as they go (no rate limit), then the source stops: the
    // counters are final long before the run ends and telemetry must show exactly
    // what the run prints at exit.
    let mut child = Command::new(BIN)
        .args(["run", "configs/default.yaml", "--no-huge", "--no-pin", "--duration", "6", "--stats-period", "0"])
        .args(["--file-prefix", &prefix, "--metrics", &maddr])
        .env("IRONPATH_COUNT", "100000")
        .env("IRONPATH_RATE", "0")
        .current_dir(repo())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = spawn_lines(child.stdout.take().unwrap());
    let mut all = String::new();
    wait_line(&lines, &mut all, |l| l.starts_with("metrics: "));
    std::thread::sleep(Duration::from_secs(2));
    let cmds = [
        "/",
        "/info",
        "/help,/ethdev/stats",
        "/eal/params",
        "/ethdev/list",
        "/ethdev/info,0",
        "/ethdev/stats,0",
        "/ethdev/stats,1",
        "/ethdev/xstats,0",
        "/mempool/list",
        "/mempool/info,mp0",
        "/ironpath/graph",
        "/ironpath/tcp",
        "/no/such/command",
    ];
    let v = telemetry(&prefix, &cmds);
    let metrics = scrape_and_check(&maddr);
    let pid = child.id();
    assert!(child.wait().unwrap().success());
    while let Ok(l) = lines.recv_timeout(Duration::from_millis(500)) {
        all.push_str(&l);
        all.push('\n');
    }
    assert!(v[0]["/"].as_array().unwrap().iter().any(|c| c == "/ethdev/stats"), "{}", v[0]);
    assert_eq!(v[1]["/info"]["pid"].as_u64(), Some(u64::from(pid)));
    assert!(v[2]["/help"]["/ethdev/stats"].as_str().unwrap().contains("port_id"));
    assert!(v[3]["/eal/params"].as_array().unwrap().iter().any(|a| a == "configs/default.yaml"));
    assert_eq!(v[4]["/ethdev/list"], serde_json::json!([0, 1]));
    assert_eq!(v[5]["/ethdev/info"]["label"], "p0");
    assert_eq!(v[5]["/ethdev/info"]["dev_started"], 1);
    assert_eq!(v[9]["/mempool/list"], serde_json::json!(["mp0"]));
    assert_eq!(v[10]["/mempool/info"]["size"], 16383);
    assert_eq!(v[13]["/no/such/command"], Value::Null);
    // The final port lines: `port p0 RX-packets: N RX-bytes: N TX-packets: N ...`.
    for (i, name) in ["p0", "p1"].iter().enumerate() {
        let line = all
            .lines()
            .find(|l| l.split_whitespace().take(2).eq(["port", name]))
            .unwrap_or_else(|| panic!("no final line of {name}:\n{all}"));
        let w: Vec<&str> = line.split_whitespace().collect();
        let rx: u64 = w[3].parse().unwrap();
        let tx: u64 = w[7].parse().unwrap();
        let s = &v[6 + i]["/ethdev/stats"];
        assert_eq!((s["ipackets"].as_u64(), s["opackets"].as_u64()), (Some(rx), Some(tx)), "{name}: {line}");
        assert_eq!(sample(&metrics, &format!("ironpath_port_rx_packets_total{{port=\"{name}\"}}")), rx);
        assert_eq!(sample(&metrics, &format!("ironpath_port_tx_packets_total{{port=\"{name}\"}}")), tx);
    }
    // What came back to p0 is what the reflector sent.
    assert!(v[6]["/ethdev/stats"]["ipackets"].as_u64().unwrap() > 0);
    // Graph: the sink's packets as the exit table prints them.
    let g = &v[11]["/ironpath/graph"]["nodes"];
    assert_eq!(g["back"]["counters"]["packets"], v[6]["/ethdev/stats"]["ipackets"], "{g}");
    assert_eq!(g["gen"]["packets"], 100000);
    assert_eq!(sample(&metrics, "ironpath_node_packets_total{node=\"gen\",lcore=\"0\"}"), 100000);
    assert_eq!(sample(&metrics, "ironpath_mempool_size_mbufs{pool=\"mp0\"}"), 16383);
    // The socket is gone with the process.
    assert!(!Path::new(&format!("/var/run/dpdk/{prefix}/dpdk_telemetry.v2")).exists());
    let _ = std::fs::remove_dir(format!("/var/run/dpdk/{prefix}"));
}

#[test]
fn dpdk_telemetry_and_promtool_read_testpmd() {
    if !tools_ready(&["dpdk-telemetry.py", "promtool", "curl"]) {
        return;
    }
    let prefix = format!("ironpath-test-tp-{}", std::process::id());
    let maddr = format!("127.0.0.1:{}", free_port());
    let mut child = Command::new(BIN)
        .args(["testpmd", "-l", "0-1", "--no-huge", "--vdev", "net_null0,size=64", "--vdev", "net_null1,size=64"])
        .args(["--file-prefix", &prefix, "--metrics", &maddr, "--", "-i"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = spawn_lines(child.stdout.take().unwrap());
    let mut all = String::new();
    wait_line(&lines, &mut all, |l| l.starts_with("metrics: "));
    writeln!(stdin, "start").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    writeln!(stdin, "stop").unwrap();
    wait_line(&lines, &mut all, |l| l.starts_with("Done."));
    let v =
        telemetry(&prefix, &["/ethdev/list", "/ethdev/stats,0", "/ethdev/stats,1", "/mempool/list", "/ethdev/info,0"]);
    let metrics = scrape_and_check(&maddr);
    writeln!(stdin, "show port stats all").unwrap();
    writeln!(stdin, "quit").unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    while let Ok(l) = lines.recv_timeout(Duration::from_millis(500)) {
        all.push_str(&l);
        all.push('\n');
    }
    assert!(status.success(), "{all}");
    assert_eq!(v[0]["/ethdev/list"], serde_json::json!([0, 1]));
    assert_eq!(v[3]["/mempool/list"], serde_json::json!(["mb_pool_0"]));
    assert_eq!(v[4]["/ethdev/info"]["name"], "net_null0");
    // `show port stats all` after stop: "RX-packets: N  RX-missed: ..." per port.
    let rx: Vec<u64> = all
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("RX-packets:"))
        .map(|r| r.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    let rx = &rx[rx.len() - 2..];
    assert!(rx[0] > 0, "{all}");
    for i in 0..2 {
        assert_eq!(v[1 + i]["/ethdev/stats"]["ipackets"].as_u64(), Some(rx[i]), "port {i}\n{all}");
        assert_eq!(sample(&metrics, &format!("ironpath_port_rx_packets_total{{port=\"net_null{i}\"}}")), rx[i]);
    }
}

/// `ironpath testpmd` (one null port, interactive) with its runtime directory
/// under `rundir` (`$RUNTIME_DIRECTORY`) and `extra` EAL arguments; stopped with
/// `quit`.
struct Testpmd {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
    all: String,
}

impl Testpmd {
    fn start(rundir: &Path, prefix: &str, extra: &[&str]) -> Testpmd {
        let mut child = Command::new(BIN)
            .args(["testpmd", "-l", "0", "--no-huge", "--vdev", "net_null0,size=64", "--file-prefix", prefix])
            .args(extra)
            .args(["--", "-i"])
            .env("RUNTIME_DIRECTORY", rundir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let lines = spawn_lines(child.stdout.take().unwrap());
        let mut err = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut s);
            s
        });
        Testpmd { child, stdin, lines, stderr: Some(stderr), all: String::new() }
    }

    /// Waits (20 s at most) for a stdout line starting with `start`.
    fn wait_for(&mut self, start: &str) {
        wait_line(&self.lines, &mut self.all, |l| l.starts_with(start));
    }

    /// Quits; (exit status success, stderr).
    fn quit(mut self) -> (bool, String) {
        if let Some(mut i) = self.stdin.take() {
            let _ = writeln!(i, "quit");
        }
        let end = Instant::now() + Duration::from_secs(20);
        while self.child.try_wait().unwrap().is_none() {
            if Instant::now() > end {
                let _ = self.child.kill();
                panic!("testpmd did not quit:\n{}", self.all);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let ok = self.child.wait().unwrap().success();
        (ok, self.stderr.take().unwrap().join().unwrap())
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        // A failed assertion leaves no process behind.
        let _ = self.child.kill();
    }
}

fn mode_of(p: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).mode() & 0o7777
}

/// A root-owned 0755 directory standing for `RUNDIR`, removed on drop.
fn rundir(tag: &str) -> common::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = common::TempDir::new(&format!("rundir-{tag}"));
    std::fs::set_permissions(&d.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

#[test]
fn a_runtime_directory_another_user_could_touch_is_refused_root() {
    use std::os::unix::fs::PermissionsExt;
    if !common::is_root() {
        common::skip("needs root (chown)");
        return;
    }
    let prefix = format!("ironpath-test-refuse-{}", std::process::id());
    // (what is planted at RUNDIR/dpdk/PREFIX, the refusal's reason)
    let cases: [(&str, &str); 4] = [
        ("other-owner", "refused: owned by uid 65534, expected uid 0"),
        ("group-writable", "refused: writable by group or others (mode 0770)"),
        ("symlink", "refused: it is a symbolic link"),
        ("dpdk-other-owner", "refused: owned by uid 65534, expected uid 0"),
    ];
    for (case, why) in cases {
        let base = rundir(case);
        let (dpdk, dir) = (base.0.join("dpdk"), base.0.join("dpdk").join(&prefix));
        std::fs::create_dir(&dpdk).unwrap();
        std::fs::set_permissions(&dpdk, std::fs::Permissions::from_mode(0o755)).unwrap();
        let refused = match case {
            "other-owner" => {
                std::fs::create_dir(&dir).unwrap();
                std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
                dir.clone()
            }
            "group-writable" => {
                std::fs::create_dir(&dir).unwrap();
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o770)).unwrap();
                dir.clone()
            }
            "symlink" => {
                let elsewhere = base.0.join("elsewhere");
                std::fs::create_dir(&elsewhere).unwrap();
                std::os::unix::fs::symlink(&elsewhere, &dir).unwrap();
                dir.clone()
            }
            _ => {
                std::os::unix::fs::chown(&dpdk, Some(65534), Some(65534)).unwrap();
                dpdk.clone()
            }
        };
        // The endpoints start before the shell reads its first command.
        let (ok, err) = Testpmd::start(&base.0, &prefix, &[]).quit();
        // Refused with the path and the reason; the process runs on without it.
        assert!(ok, "{case}: {err}");
        let line = format!("telemetry: runtime directory {}: {why}", refused.display());
        assert!(err.contains(&line) && err.contains("running without a telemetry socket"), "{case}: {line}\n{err}");
        let sockets = |d: &Path| std::fs::read_dir(d).map(|r| r.count()).unwrap_or(0);
        assert_eq!(sockets(&dir) + sockets(&base.0.join("elsewhere")), 0, "{case}: nothing was made in it");
    }
}

/// A Python client of the socket at `path` run by `as_user` (a prefix such as
/// `setpriv ...`, or nothing): prints `EACCES` if it cannot connect, `closed` if
/// the server closes without a word, else the replies to `cmds`, one a line.
fn socket_client(as_user: &[&str], python: &str, path: &Path, cmds: &[&str]) -> String {
    const CLIENT: &str = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.settimeout(5)
try:
    s.connect(sys.argv[1])
except PermissionError:
    print("EACCES")
    sys.exit(0)
if not s.recv(65536):
    print("closed")
    sys.exit(0)
for c in sys.argv[2:]:
    s.send(c.encode())
    print(s.recv(65536).decode())
"#;
    let mut argv: Vec<&str> = as_user.to_vec();
    argv.extend([python, "-c", CLIENT]);
    let path = path.to_str().unwrap();
    argv.push(path);
    argv.extend(cmds);
    let o = Command::new(argv[0]).args(&argv[1..]).output().unwrap();
    assert!(o.status.success(), "{argv:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_socket_is_0600_in_a_0700_directory_and_serves_our_user_and_root_only_root() {
    if !common::is_root() {
        common::skip("needs root (running a client as another uid)");
        return;
    }
    if !tools_ready(&["setpriv"]) {
        return;
    }
    // The system's interpreter: uid 65534 can run it (a per-user install under
    // /root it could not).
    let python = "/usr/bin/python3";
    if !Path::new(python).exists() {
        common::skip("needs /usr/bin/python3 (apt-get install python3)");
        return;
    }
    let base = rundir("peer");
    let prefix = format!("ironpath-test-peer-{}", std::process::id());
    let mut tp = Testpmd::start(&base.0, &prefix, &[]);
    tp.wait_for("telemetry: ");
    let dir = base.0.join("dpdk").join(&prefix);
    let sock = dir.join("dpdk_telemetry.v2");
    assert!(tp.all.contains(&format!("telemetry: {} ", sock.display())), "{}", tp.all);
    assert_eq!(mode_of(&sock), 0o600);
    assert_eq!(mode_of(&dir), 0o700);
    assert_eq!(mode_of(&base.0.join("dpdk")), 0o700);

    let root = socket_client(&[], python, &sock, &["/ethdev/list"]);
    assert_eq!(root.trim(), r#"{"/ethdev/list":[0]}"#);
    // Another user: the directory keeps it out; given the right to pass
    // (CAP_DAC_OVERRIDE), the server itself closes it unanswered.
    let nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"];
    assert_eq!(socket_client(&nobody, python, &sock, &["/ethdev/list"]).trim(), "EACCES");
    let mut passing = nobody.to_vec();
    passing.extend(["--inh-caps=+dac_override", "--ambient-caps=+dac_override"]);
    assert_eq!(socket_client(&passing, python, &sock, &["/ethdev/list"]).trim(), "closed");
    assert_eq!(socket_client(&passing, python, &sock, &["/ethdev/list"]).trim(), "closed");

    let counts = socket_client(&[], python, &sock, &["/ironpath/telemetry"]);
    let v: Value = serde_json::from_str(counts.trim()).unwrap();
    let socket = &v["/ironpath/telemetry"]["socket"];
    assert_eq!(socket["refused"]["peer_uid"], 2, "{v}");
    assert_eq!(socket["clients"], 2, "root's two: {v}");
    let (ok, err) = tp.quit();
    assert!(ok, "{err}");
    // Said once, with who it was.
    let said: Vec<&str> = err.lines().filter(|l| l.contains("telemetry: closed a client of uid 65534")).collect();
    assert_eq!(said.len(), 1, "{err}");
    assert!(!sock.exists());
}

/// One `GET /metrics` with `timeout` for the whole exchange: the reply, or why not.
fn scrape_within(addr: &str, timeout: Duration) -> Result<String, String> {
    use std::io::Read;
    let end = Instant::now() + timeout;
    let mut s = std::net::TcpStream::connect_timeout(&addr.parse().unwrap(), timeout).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout)).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: ironpath\r\n\r\n").map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("no whole reply within {timeout:?}"));
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) => return Err(format!("{e} after {} bytes", out.len())),
        }
    }
    String::from_utf8(out).map_err(|e| e.to_string())
}

/// A client that holds connections to `addr` until `stop`: it sends `each` (empty:
/// nothing) every `gap`, and connects again whenever the server closes it.
fn pest(addr: String, each: &'static [u8], gap: Duration, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use std::sync::atomic::Ordering;
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut s) = std::net::TcpStream::connect(&addr) else { return };
        while !stop.load(Ordering::Relaxed) {
            if !each.is_empty() && s.write_all(each).is_err() {
                break;
            }
            std::thread::sleep(gap);
            // Closed by the server (a 408 and FIN, or a reset): start again.
            s.set_nonblocking(true).unwrap();
            let mut b = [0u8; 64];
            match std::io::Read::read(&mut s, &mut b) {
                Ok(_) => break,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
            s.set_nonblocking(false).unwrap();
        }
    }
}

#[test]
fn scrapes_are_served_while_other_clients_trickle_stay_silent_or_flood() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let maddr = format!("127.0.0.1:{}", free_port());
    let base = rundir("metrics");
    let prefix = format!("ironpath-test-metrics-{}", std::process::id());
    let mut tp = Testpmd::start(&base.0, &prefix, &["--no-telemetry", "--metrics", &maddr]);
    tp.wait_for("metrics: ");
    let stop = Arc::new(AtomicBool::new(false));
    let mut pests = Vec::new();
    // One byte every 1.5 s, and one that sends nothing at all.
    for (each, gap) in [(&b"G"[..], Duration::from_millis(1500)), (&b""[..], Duration::from_millis(200))] {
        let (a, st) = (maddr.clone(), stop.clone());
        pests.push(std::thread::spawn(move || pest(a, each, gap, st)));
    }
    // 1 MiB without a newline: cut at the head's bound, the connection closed.
    let a = maddr.clone();
    let flood = std::thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(&a).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let sent = s.write_all(&vec![b'a'; 1 << 20]);
        let mut r = Vec::new();
        let read = std::io::Read::read_to_end(&mut s, &mut r);
        (sent.is_err() || read.is_err() || String::from_utf8_lossy(&r).starts_with("HTTP/1.1 431 "), r.len())
    });
    std::thread::sleep(Duration::from_millis(300));
    // Five scrapes in a row, each whole within 2.5 s: less than a head's deadline,
    // so none waited for a pest to be cut off.
    for i in 0..5 {
        let r = scrape_within(&maddr, Duration::from_millis(2500)).unwrap_or_else(|e| panic!("scrape {i}: {e}"));
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "scrape {i}: {r}");
        assert!(r.contains("\nironpath_port_rx_packets_total{port=\"net_null0\"} "), "scrape {i}: {r}");
    }
    let (cut, got) = flood.join().unwrap();
    assert!(cut, "the flood was answered {got} bytes that are no 431");
    // The pests are cut at their deadline (the head whole within 3 s of the
    // connection, however often a byte comes): both counted within 10 s.
    let end = Instant::now() + Duration::from_secs(10);
    let metrics = loop {
        let m = scrape_within(&maddr, Duration::from_millis(2500)).unwrap();
        let deadline = sample(&m, "ironpath_telemetry_refused_total{endpoint=\"metrics\",reason=\"deadline\"}");
        if deadline >= 2 || Instant::now() > end {
            break m;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    stop.store(true, Ordering::Relaxed);
    assert!(
        sample(&metrics, "ironpath_telemetry_refused_total{endpoint=\"metrics\",reason=\"deadline\"}") >= 2,
        "{metrics}"
    );
    assert_eq!(sample(&metrics, "ironpath_telemetry_refused_total{endpoint=\"metrics\",reason=\"too_large\"}"), 1);
    assert_eq!(sample(&metrics, "ironpath_telemetry_refused_total{endpoint=\"metrics\",reason=\"limit\"}"), 0);
    assert!(sample(&metrics, "ironpath_telemetry_clients_total{endpoint=\"metrics\"}") >= 9, "{metrics}");
    for p in pests {
        p.join().unwrap();
    }
    let (ok, err) = tp.quit();
    assert!(ok, "{err}");
}
