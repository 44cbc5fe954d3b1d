//! Shared by the root tests that talk to kernel peers: a namespace with a veth pair
//! (unique names, RFC 2544 and fd00::/8 addresses, removed on drop even when the test
//! fails), `ironpath run` in the background with its per-second JSON stats, and
//! small shell helpers.
#![allow(dead_code)]

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_ironpath");

pub fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

pub fn have(tool: &str) -> bool {
    Command::new("sh").arg("-c").arg(format!("command -v {tool}")).output().is_ok_and(|o| o.status.success())
}

/// Runs `cmd` with `sh -c`; panics with its stderr if it fails.
pub fn sh(cmd: &str) -> String {
    let o = Command::new("sh").arg("-c").arg(cmd).output().expect("sh");
    assert!(o.status.success(), "`{cmd}` failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// A shipped config file.
pub fn config(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs").join(name)
}

/// Namespace `ns` holding veth end `peer` with 198.18.`net`.1/24 and fd00:`net`::1/64;
/// the other end `port` stays in the root namespace, without addresses, for ironpath
/// (which answers for 198.18.`net`.2 and fd00:`net`::2).
pub struct Veth {
    pub ns: String,
    pub port: String,
    pub peer: String,
    pub net: u8,
}

impl Veth {
    pub fn new(tag: &str, net: u8) -> Veth {
        Self::with_queues(tag, net, 1)
    }

    /// The same, both ends with `queues` RX and TX queues.
    pub fn with_queues(tag: &str, net: u8, queues: u32) -> Veth {
        let id = std::process::id() % 100_000;
        let v =
            Veth { ns: format!("ipt-{tag}-{id}"), port: format!("ip{tag}{id}a"), peer: format!("ip{tag}{id}b"), net };
        v.teardown();
        let nq = if queues > 1 { format!("numtxqueues {queues} numrxqueues {queues}") } else { String::new() };
        sh(&format!(
            "ip netns add {ns} && ip link add {p} {nq} type veth peer name {q} {nq} && ip link set {q} netns {ns} && \
             sysctl -qw net.ipv6.conf.{p}.disable_ipv6=1 && ip link set {p} up && \
             ip netns exec {ns} ip addr add 198.18.{n}.1/24 dev {q} && \
             ip netns exec {ns} ip -6 addr add fd00:{n}::1/64 dev {q} nodad && \
             ip netns exec {ns} ip link set {q} up && ip netns exec {ns} ip link set lo up",
            ns = v.ns,
            p = v.port,
            q = v.peer,
            n = v.net,
        ));
        v
    }

    /// Our (ironpath's) IPv4 address on this link.
    pub fn ours4(&self) -> String {
        format!("198.18.{}.2", self.net)
    }

    /// Our IPv6 address on this link.
    pub fn ours6(&self) -> String {
        format!("fd00:{}::2", self.net)
    }

    /// The kernel peer's IPv4 address.
    pub fn peer4(&self) -> String {
        format!("198.18.{}.1", self.net)
    }

    /// On a machine with 2+ CPUs, steer the kernel peer's receive processing to CPU 1
    /// (RPS on its veth end) and return the `taskset` prefix that puts a client there
    /// too; the single lcore of the shipped configs runs on CPU 0. Without it, every
    /// frame we send runs the peer's whole TCP receive inside our `sendto` on our
    /// CPU: a client on another machine would not take the server's CPU that way.
    /// On one CPU: nothing, and an empty prefix.
    pub fn client_on_other_cpu(&self) -> &'static str {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cpus < 2 {
            return "";
        }
        sh(&format!("ip netns exec {} sh -c 'echo 2 > /sys/class/net/{}/queues/rx-0/rps_cpus'", self.ns, self.peer));
        "taskset -c 1 "
    }

    fn teardown(&self) {
        let _ = Command::new("ip").args(["link", "del", &self.port]).output();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
    }

    /// `cmd` inside the namespace, killed after `secs` seconds.
    pub fn exec_for(&self, secs: u32, cmd: &[&str]) -> Output {
        let secs = secs.to_string();
        let mut args = vec![secs.as_str(), "ip", "netns", "exec", &self.ns];
        args.extend_from_slice(cmd);
        Command::new("timeout").args(args).output().unwrap()
    }

    /// `cmd` (a shell line) inside the namespace, killed after `secs` seconds.
    pub fn sh_for(&self, secs: u32, cmd: &str) -> Output {
        self.exec_for(secs, &["sh", "-c", cmd])
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// `ironpath run FILE` in the background with JSON stats every second; stopped with
/// SIGINT (a clean stop) by [`Run::stop`] or on drop.
pub struct Run {
    child: Option<Child>,
    pub stats: PathBuf,
    /// Its `--file-prefix` (unique: runs of tests at once never share one).
    pub prefix: String,
    /// stdout and stderr, read as they come (a full pipe would block the pipeline's
    /// per-second printing, and with it the JSON stats).
    output: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

/// Copy everything `r` yields into `buf` until end of file.
fn drain(
    mut r: impl std::io::Read + Send + 'static,
    buf: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = r.read(&mut chunk) {
            if n == 0 {
                break;
            }
            buf.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(&chunk[..n]);
        }
    })
}

impl Run {
    /// Starts `ironpath run cfg` with `env`; waits until the first stats line shows up.
    pub fn start(cfg: &Path, env: &[(&str, String)], tag: &str) -> Run {
        Self::start_wrapped(&[], cfg, env, tag)
    }

    /// The same, run by the command `wrapper` (e.g. `prlimit --nofile=256:256`).
    pub fn start_wrapped(wrapper: &[&str], cfg: &Path, env: &[(&str, String)], tag: &str) -> Run {
        let stats = std::env::temp_dir().join(format!("ironpath-{tag}-{}.jsonl", std::process::id()));
        let _ = std::fs::remove_file(&stats);
        let mut cmd = Command::new(wrapper.first().copied().unwrap_or(BIN));
        if !wrapper.is_empty() {
            cmd.args(&wrapper[1..]).arg(BIN);
        }
        let prefix = format!("ironpath-{tag}-{}", std::process::id());
        cmd.args(["run", cfg.to_str().unwrap(), "--no-huge", "--duration", "900", "--stats-period", "1"])
            .args(["--file-prefix", &prefix, "--stats-json"])
            .arg(&stats)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let output = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let readers = vec![
            drain(child.stdout.take().unwrap(), output.clone()),
            drain(child.stderr.take().unwrap(), output.clone()),
        ];
        let mut run = Run { child: Some(child), stats, prefix, output, readers };
        let t = Instant::now();
        while run.lines().is_empty() && t.elapsed() < Duration::from_secs(20) {
            if let Some(st) = run.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("ironpath exited early ({st}): {}", run.stop());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        run
    }

    /// `ironpath ctl -f PREFIX words...`: its answer; panics (with the pipeline's
    /// output) when the command fails and `ok` says it must not.
    pub fn ctl(&self, line: &str, ok: bool) -> String {
        let o = Command::new(BIN).args(["ctl", "-f", &self.prefix]).args(line.split_whitespace()).output().unwrap();
        let t = text(&o);
        if ok {
            assert!(o.status.success(), "ctl {line}: {t}\npipeline:\n{}", self.output());
        } else {
            assert!(!o.status.success(), "ctl {line} must fail: {t}");
        }
        t
    }

    /// What the pipeline printed so far.
    pub fn output(&self) -> String {
        String::from_utf8_lossy(&self.output.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }

    /// The process id (of `ironpath`, or of its wrapper, which execs it).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The JSON stats lines so far.
    pub fn lines(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.stats)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The last stats line (waits for the next one to be written first).
    pub fn latest(&self) -> serde_json::Value {
        let n = self.lines().len();
        let t = Instant::now();
        while self.lines().len() <= n && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(100));
        }
        self.lines().pop().expect("a stats line")
    }

    /// Stops the pipeline; returns its output (the final `show runtime` included).
    pub fn stop(&mut self) -> String {
        let Some(mut child) = self.child.take() else { return String::new() };
        let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
        let t = Instant::now();
        while child.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        let out = self.output.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&out).into_owned()
    }

    /// The first stats line, waiting up to `secs` for one, for which `ok` holds (else
    /// the last one).
    pub fn wait_for(&self, secs: u64, ok: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
        let t = Instant::now();
        loop {
            let last = self.latest();
            if ok(&last) || t.elapsed() > Duration::from_secs(secs) {
                return last;
            }
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_file(&self.stats);
    }
}

/// Counter `name` of node `node` in a stats line.
pub fn counter(line: &serde_json::Value, node: &str, name: &str) -> u64 {
    line["nodes"][node]["counters"][name].as_u64().unwrap_or_else(|| panic!("no counter {node}.{name} in {line}"))
}

/// Objects of pool `pool` in use in a stats line.
pub fn in_use(line: &serde_json::Value, pool: &str) -> u64 {
    line["mempools"][pool]["in_use"].as_u64().unwrap_or_else(|| panic!("no mempool {pool} in {line}"))
}

/// SHA-256 of a file, by `sha256sum`.
pub fn sha256(path: &Path) -> String {
    sh(&format!("sha256sum {}", path.display())).split_whitespace().next().unwrap_or_default().to_owned()
}

/// A temporary directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("ironpath-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A www directory with `name` files of `size` random bytes each.
pub fn www(dir: &Path, files: &[(&str, usize)]) {
    for (name, size) in files {
        sh(&format!("head -c {size} /dev/urandom > {}/{name}", dir.display()));
    }
}

/// `sh -c cmd` in namespace `ns`, killed after `secs` seconds; its stdout and
/// stderr as text.
pub fn in_ns(ns: &str, secs: u32, cmd: &str) -> String {
    let o =
        Command::new("timeout").args([&secs.to_string(), "ip", "netns", "exec", ns, "sh", "-c", cmd]).output().unwrap();
    text(&o)
}

/// Whether this test can run: as root, with `ip` and `ping` (root tests make their
/// own namespaces and interfaces and most ping across them) and every tool of
/// `tools` installed. Otherwise it is skipped (see [`skip`]).
pub fn ready(tools: &[&str]) -> bool {
    if !is_root() {
        skip("needs root");
        return false;
    }
    let mut all = vec!["ip", "ping"];
    all.extend_from_slice(tools);
    tools_ready(&all)
}

/// Whether every tool of `tools` is installed; otherwise the test is skipped,
/// naming the Debian packages that bring them (`bash ci/test.sh` as root installs
/// them all).
pub fn tools_ready(tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools.iter().copied().filter(|t| !have(t)).collect();
    if missing.is_empty() {
        return true;
    }
    let mut pkgs: Vec<&str> = missing.iter().map(|t| package_of(t)).collect();
    pkgs.dedup();
    skip(&format!("needs {} (apt-get install {})", missing.join(", "), pkgs.join(" ")));
    false
}

/// The Debian package of a tool the tests run.
pub fn package_of(tool: &str) -> &str {
    match tool {
        "ping" => "iputils-ping",
        "ip" | "nstat" | "ss" => "iproute2",
        "editcap" => "wireshark-common",
        "ab" => "apache2-utils",
        "nginx" => "nginx-light",
        "qemu-system-x86_64" => "qemu-system-x86",
        "busybox" => "busybox-static",
        "dpdk-testpmd" => "dpdk",
        "dpdk-telemetry.py" => "dpdk-dev",
        "promtool" => "prometheus",
        "setpriv" => "util-linux",
        "nft" => "nftables",
        t => t,
    }
}

#[path = "../../../../ci/skip.rs"]
mod skip_log;
pub use skip_log::skip;

/// `configs/http-server.yaml` on `v`'s port serving `root`, with `extra` variables.
pub fn http_server(v: &Veth, root: &Path, extra: &[(&str, &str)], tag: &str) -> Run {
    http_server_wrapped(&[], v, root, extra, tag)
}

/// The same, run by the command `wrapper` ([`Run::start_wrapped`]).
pub fn http_server_wrapped(wrapper: &[&str], v: &Veth, root: &Path, extra: &[(&str, &str)], tag: &str) -> Run {
    let mut env = vec![
        ("IRONPATH_IFACE", v.port.clone()),
        ("IRONPATH_IPV4", v.ours4()),
        ("IRONPATH_IPV6", v.ours6()),
        ("IRONPATH_WWW", root.display().to_string()),
    ];
    env.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    Run::start_wrapped(wrapper, &config("http-server.yaml"), &env, tag)
}

/// Resident memory of process `pid` in bytes (`VmRSS` of /proc/PID/status).
pub fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next());
    kb.and_then(|k| k.parse::<u64>().ok()).map_or(0, |k| k * 1024)
}

/// Replies to 5 pings 200 ms apart from the namespace to our address.
pub fn pings_answered(v: &Veth) -> u32 {
    let o = v.exec_for(10, &["ping", "-c", "5", "-i", "0.2", "-W", "1", &v.ours4()]);
    let t = text(&o);
    t.split(", ").find_map(|p| p.strip_suffix(" received")).and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// The most objects of pool `pool` in use at any time of the run so far.
pub fn peak_in_use(run: &Run, pool: &str) -> u64 {
    run.lines().iter().filter_map(|l| l["mempools"][pool]["in_use_max"].as_u64()).max().unwrap_or(0)
}

/// What a finished `ironpath testpmd` printed, and its exit code.
pub struct Out {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
}

/// Run testpmd with `args`, feeding `input` line by line (a line `@sleep SECS` pauses
/// the feeder, as a user would wait between commands); killed after 60 s.
pub fn testpmd(args: &str, input: &str) -> Out {
    let mut child = Command::new(BIN)
        .arg("testpmd")
        .args(args.split_whitespace())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ironpath");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_string();
    let feeder = std::thread::spawn(move || {
        for line in input.lines() {
            if let Some(secs) = line.strip_prefix("@sleep ") {
                std::thread::sleep(Duration::from_secs_f64(secs.parse().unwrap()));
            } else if writeln!(stdin, "{line}").is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("testpmd did not exit within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = feeder.join();
    let o = child.wait_with_output().unwrap();
    Out {
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        code: o.status.code().unwrap_or(-1),
    }
}

/// 100 MiB by HTTP (python's http.server in namespace `server` at `addr`) to a curl in
/// namespace `client`, retried for up to 10 s while the path comes up; SHA-256 compared.
pub fn download_100mib(server: &str, client: &str, addr: &str, tag: &str) {
    let dir = TempDir::new(tag);
    www(&dir.0, &[("big", 100 << 20)]);
    let mut http = Command::new("ip")
        .args(["netns", "exec", server, "python3", "-m", "http.server", "8000", "--bind", addr, "--directory"])
        .arg(&dir.0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let got = dir.0.join("got");
    let t = Instant::now();
    let mut ok = false;
    while t.elapsed() < Duration::from_secs(10) && !ok {
        std::thread::sleep(Duration::from_millis(300));
        let o = Command::new("timeout")
            .args(["60", "ip", "netns", "exec", client, "curl", "-sS", "--fail", "-o"])
            .arg(&got)
            .arg(format!("http://{addr}:8000/big"))
            .output()
            .unwrap();
        ok = o.status.success();
    }
    let _ = http.kill();
    let _ = http.wait();
    assert!(ok, "curl of 100 MiB from {addr}");
    assert_eq!(sha256(&got), sha256(&dir.0.join("big")), "100 MiB: SHA-256 differs");
}

/// An interactive program (a testpmd, ours or DPDK's) fed commands on stdin, its
/// output (stdout and stderr) gathered in the background; killed on drop.
///
/// Each stream is also kept on its own and searched on its own: a prompt written
/// to stdout in pieces can have a stderr line land in its middle in the merged
/// output (DPDK's "test" + "Error during enabling promiscuous mode" + "pmd> ").
pub struct Interactive {
    child: Child,
    out: std::sync::Arc<std::sync::Mutex<String>>,
    streams: [std::sync::Arc<std::sync::Mutex<String>>; 2],
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Interactive {
    /// Start `prog` with `args`.
    pub fn spawn(prog: &str, args: &[String]) -> Interactive {
        let mut child = Command::new(prog)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {prog}: {e}"));
        let out = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let streams: [std::sync::Arc<std::sync::Mutex<String>>; 2] = Default::default();
        let mut readers = Vec::new();
        let pipes: Vec<Box<dyn std::io::Read + Send>> =
            vec![Box::new(child.stdout.take().unwrap()), Box::new(child.stderr.take().unwrap())];
        for (mut p, own) in pipes.into_iter().zip(streams.iter().cloned()) {
            let out = out.clone();
            readers.push(std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = p.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let text = String::from_utf8_lossy(&buf[..n]);
                    // Both locks at once, so the two views never disagree.
                    let mut all = out.lock().unwrap();
                    own.lock().unwrap().push_str(&text);
                    all.push_str(&text);
                }
            }));
        }
        Interactive { child, out, streams, readers }
    }

    /// Send one command line.
    pub fn send(&mut self, line: &str) {
        if let Some(i) = self.child.stdin.as_mut() {
            let _ = writeln!(i, "{line}");
            let _ = i.flush();
        }
    }

    /// Everything printed so far.
    pub fn output(&self) -> String {
        self.out.lock().unwrap().clone()
    }

    /// How many times `needle` appears in stdout and in stderr, each searched on
    /// its own.
    fn count(&self, needle: &str) -> usize {
        self.streams.iter().map(|s| s.lock().unwrap().matches(needle).count()).sum()
    }

    /// Wait up to `secs` for `needle` to appear `count` times in the output.
    pub fn wait_for(&self, needle: &str, count: usize, secs: u64) -> bool {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(secs) {
            if self.count(needle) >= count {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Send `line`, then wait (up to 10 s) until `needle` has appeared once more than
    /// before; returns the output from the command on.
    pub fn ask(&mut self, line: &str, needle: &str) -> String {
        let (before, n) = {
            // The reader threads take `out` first, then their own stream: the
            // same order here, so both views are of the same moment.
            let all = self.out.lock().unwrap();
            (all.clone(), self.count(needle))
        };
        self.send(line);
        self.wait_for(needle, n + 1, 10);
        std::thread::sleep(Duration::from_millis(50));
        self.output()[before.len()..].to_string()
    }

    /// Kill it now (SIGKILL).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        self.child.try_wait().ok().flatten().is_none()
    }

    /// Send `quit`, wait up to 15 s for the exit (then kill); all it printed.
    pub fn quit(mut self) -> String {
        self.send("quit");
        drop(self.child.stdin.take());
        let t = Instant::now();
        while self.running() && t.elapsed() < Duration::from_secs(15) {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        for r in std::mem::take(&mut self.readers) {
            let _ = r.join();
        }
        self.output()
    }
}

impl Drop for Interactive {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The number after `key` (`RX-packets:`) in the last NIC statistics block of `out`.
pub fn nic_stat(out: &str, key: &str) -> u64 {
    let at = out.rfind("NIC statistics for port").unwrap_or_else(|| panic!("no port stats in:\n{out}"));
    let rest = &out[at..];
    let i = rest.find(key).unwrap_or_else(|| panic!("no {key} in:\n{rest}"));
    rest[i + key.len()..]
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{key} not a number"))
}

/// The number after `key: ` in the last extended statistics block of `out`.
pub fn xstat_of(out: &str, key: &str) -> u64 {
    let at = out.rfind("NIC extended statistics").unwrap_or_else(|| panic!("no xstats in:\n{out}"));
    out[at..]
        .lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{key}: ")))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no xstat {key} in:\n{out}"))
}

/// A memif socket name for a test: in the abstract namespace, unique per process.
pub fn memif_sock(tag: &str) -> String {
    format!("ipmemif-{tag}-{}", std::process::id())
}

/// Our testpmd with ports `vdevs`, interactive, forwarding on lcore 1 (0 with
/// `other_core`, for the second process of a pair on two CPUs).
pub fn our_testpmd(vdevs: &[String], mode: &str, other_core: bool) -> Interactive {
    our_testpmd_with(vdevs, mode, other_core, &[])
}

/// The same, with `extra` testpmd arguments (`--rxq=2`).
pub fn our_testpmd_with(vdevs: &[String], mode: &str, other_core: bool, extra: &[&str]) -> Interactive {
    let mut a: Vec<String> = ["testpmd", "-l", "0-1"].iter().map(|s| s.to_string()).collect();
    if other_core {
        a.extend(["--main-lcore".to_string(), "1".to_string()]);
    }
    a.push("--no-huge".into());
    for v in vdevs {
        a.extend(["--vdev".to_string(), v.clone()]);
    }
    a.extend(["--".to_string(), "-i".to_string(), format!("--forward-mode={mode}")]);
    a.extend(extra.iter().map(|s| s.to_string()));
    Interactive::spawn(BIN, &a)
}

/// `in_use=` of the last pool in a `show mempool` output.
pub fn pool_in_use(out: &str) -> u64 {
    let at = out.rfind("in_use=").expect("show mempool");
    out[at + 7..].split_whitespace().next().unwrap().parse().unwrap()
}

/// Two testpmds (ours or DPDK's) on either end of a link: `sender` sends for `ms`
/// and stops, the receiver drains; both counters, read while still connected (DPDK
/// forgets a memif port's counters on disconnect): (sent, received).
pub fn burst_of_traffic(sender: &mut Interactive, receiver: &mut Interactive, ms: u64) -> (u64, u64) {
    receiver.ask("clear port stats all", "testpmd>");
    sender.ask("clear port stats all", "testpmd>");
    receiver.ask("start", "testpmd>");
    sender.ask("start", "testpmd>");
    std::thread::sleep(Duration::from_millis(ms));
    sender.ask("stop", "Done");
    std::thread::sleep(Duration::from_millis(300));
    let s = sender.ask("show port stats 0", "Tx-bps");
    let r = receiver.ask("show port stats 0", "Tx-bps");
    receiver.ask("stop", "Done");
    (nic_stat(&s, "TX-packets:"), nic_stat(&r, "RX-packets:"))
}

/// TCG guests on two cores: one at a time in a test binary.
pub static ONE_VM_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `ci/vm/run --bin-dir DIR --plugins PLUGINS ARGS` with this build's `ironpath` and
/// plugins (the directory of the test's `ironpath`, normally `target/debug`): its
/// whole output; fails the test if the guest did not run to its end. One guest at a
/// time.
pub fn vm_run(plugins: &str, args: &[&str]) -> String {
    let _one = ONE_VM_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = Path::new(BIN).parent().unwrap();
    for p in plugins.split_whitespace() {
        assert!(
            dir.join(format!("libironpath_pmd_{p}.so")).exists(),
            "libironpath_pmd_{p}.so next to ironpath: run `cargo build --workspace` first"
        );
    }
    let run = || {
        let out = Command::new("timeout")
            .arg("600")
            .arg(root.join("ci/vm/run"))
            .arg("--bin-dir")
            .arg(dir)
            .args(["--plugins", plugins, "--timeout", "240"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run ci/vm/run");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status, text)
    };
    let (mut status, mut text) = run();
    if !status.success() && !text.contains("GUEST: init up") {
        // The guest's kernel never reached our init (nothing of ours ran): a TCG
        // boot that hangs now and then on a loaded machine. Once more.
        eprintln!("the guest did not boot; booting it once more:\n{text}");
        (status, text) = run();
    }
    assert!(status.success(), "ci/vm/run failed ({status}):\n{text}");
    text
}

/// A pcap file of `frames`.
pub fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&65535u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        b.extend_from_slice(&(i as u32).to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(f);
    }
    std::fs::write(path, b).unwrap();
}

/// The frames of a pcap file (microsecond or nanosecond, little-endian).
pub fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(path).unwrap_or_default();
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= b.len() {
        let caplen = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16;
        if at + caplen > b.len() {
            break;
        }
        out.push(b[at..at + caplen].to_vec());
        at += caplen;
    }
    out
}

/// Owned copies of `a`.
pub fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// Both directions over one connection: `a` sends to `b`, then `b` to `a`.
pub fn both_ways(a: &mut Interactive, b: &mut Interactive, what: &str) {
    a.send("set fwd txonly");
    b.send("set fwd rxonly");
    let (sent, got) = burst_of_traffic(a, b, 1500);
    assert!(sent > 10_000, "{what}, first way: only {sent} sent\n{}\n{}", a.output(), b.output());
    assert_eq!(sent, got, "{what}, first way: every packet sent is received");
    a.send("set fwd rxonly");
    b.send("set fwd txonly");
    let (sent, got) = burst_of_traffic(b, a, 1500);
    assert!(sent > 10_000, "{what}, second way: only {sent} sent\n{}\n{}", a.output(), b.output());
    assert_eq!(sent, got, "{what}, second way: every packet sent is received");
}

/// A testpmd's output shows no driver panic and no fenced-off queue.
pub fn no_panic(out: &str) {
    assert!(!out.contains("panicked") && !out.contains("fenced off"), "{out}");
}
