//! Needs root and tshark: `ironpath run configs/wire.yaml` between two namespaces
//! of the test's own (IPv6 off, so no frame but the test's crosses the wire), and
//! `ironpath ctl capture` of it. Frames of known sizes are written with an
//! AF_PACKET socket in the first namespace, so the capture can be compared exactly
//! with what port `a` counted: the frames tshark reads are the frames the port
//! received (count and bytes); a `tcp port 80` filter keeps only those; `-w - |
//! tshark -r -` reads the stream as it comes.

mod common;

use common::{config, text, Veth, BIN};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Two namespaces joined by `ironpath run configs/wire.yaml` (ports `a` and `b`),
/// with its own file prefix; everything removed on drop.
struct Wire {
    a: Veth,
    _b: Veth,
    run: Child,
    out: Arc<Mutex<Vec<u8>>>,
    prefix: String,
    dir: PathBuf,
}

impl Wire {
    fn start(tag: &str, net: u8) -> Wire {
        let a = Veth::new(&format!("{tag}a"), net);
        let b = Veth::new(&format!("{tag}b"), net + 1);
        for v in [&a, &b] {
            common::sh(&format!(
                "ip netns exec {ns} sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 \
                 net.ipv6.conf.{p}.disable_ipv6=1",
                ns = v.ns,
                p = v.peer
            ));
        }
        let prefix = format!("ironpath-cap-{tag}-{}", std::process::id());
        let dir = std::env::temp_dir().join(&prefix);
        std::fs::create_dir_all(&dir).unwrap();
        let mut run = Command::new(BIN)
            .args(["run", config("wire.yaml").to_str().unwrap(), "--no-huge", "--duration", "120"])
            .args(["--stats-period", "0", "--file-prefix", &prefix])
            .env("IRONPATH_PORT_A", &a.port)
            .env("IRONPATH_PORT_B", &b.port)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = Arc::new(Mutex::new(Vec::new()));
        for r in [Box::new(run.stdout.take().unwrap()) as Box<dyn Read + Send>, Box::new(run.stderr.take().unwrap())] {
            let out = out.clone();
            std::thread::spawn(move || {
                let mut r = r;
                let mut chunk = [0u8; 4096];
                while let Ok(n) = r.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    out.lock().unwrap().extend_from_slice(&chunk[..n]);
                }
            });
        }
        let w = Wire { a, _b: b, run, out, prefix, dir };
        let t = Instant::now();
        while !w.output().contains("control: ") {
            assert!(t.elapsed() < Duration::from_secs(30), "no control socket:\n{}", w.output());
            std::thread::sleep(Duration::from_millis(50));
        }
        w
    }

    fn output(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// `ironpath ctl -f PREFIX args...`, started.
    fn ctl(&self, args: &[&str]) -> Child {
        Command::new("timeout")
            .args(["20", BIN, "ctl", "-f", &self.prefix])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Port `a`'s received packets and bytes, from `show interface a`.
    fn rx_a(&self) -> (u64, u64) {
        let o = Command::new(BIN).args(["ctl", "-f", &self.prefix, "show", "interface", "a"]).output().unwrap();
        let t = text(&o);
        let get = |k: &str| -> u64 {
            t.lines()
                .find(|l| l.trim_start().starts_with(k))
                .and_then(|l| l.split_whitespace().last())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no `{k}` in {t}"))
        };
        (get("rx packets"), get("rx bytes"))
    }

    /// Writes frames from namespace `a`: per entry (protocol 6 or 17, destination
    /// port, frame length).
    fn send(&self, frames: &[(u8, u16, usize)]) {
        let list: Vec<String> = frames.iter().map(|(p, d, l)| format!("({p},{d},{l})")).collect();
        let script = format!(
            r#"
import socket, struct
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("{dev}", 0))
for i, (proto, dport, flen) in enumerate([{list}]):
    l4 = struct.pack("!HHIIBBHHH", 40000 + i % 1000, dport, i, 0, 0x50, 0x02, 8192, 0, 0) if proto == 6 \
        else struct.pack("!HHHH", 40000 + i % 1000, dport, flen - 34, 0)
    ip_len = flen - 14
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, i & 0xffff, 0, 64, proto, 0,
                     socket.inet_aton("198.18.{net}.1"), socket.inet_aton("198.18.99.9"))
    body = ip + l4
    frame = bytes.fromhex("020000000002020000000001") + b"\x08\x00" + body + b"\x00" * (flen - 14 - len(body))
    assert len(frame) == flen
    s.send(frame)
"#,
            dev = self.a.peer,
            net = self.a.net,
            list = list.join(",")
        );
        let o = self.a.exec_for(20, &["python3", "-c", &script]);
        assert!(o.status.success(), "python: {}", text(&o));
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-INT", &self.run.id().to_string()]).status();
        let t = Instant::now();
        while self.run.try_wait().ok().flatten().is_none() && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.run.kill();
        let _ = self.run.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Waits until `file` holds the stream's header (the capture is armed by then).
fn armed(file: &Path) {
    let t = Instant::now();
    while std::fs::metadata(file).map_or(0, |m| m.len()) == 0 {
        assert!(t.elapsed() < Duration::from_secs(10), "the capture did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (bounded) for a ctl client to end; its stderr.
fn finish(c: Child) -> (bool, String) {
    let o = c.wait_with_output().unwrap();
    (o.status.success(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// `tshark -r file -T fields -e ...` rows.
fn tshark(file: &str, fields: &[&str]) -> Vec<Vec<String>> {
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-r", file, "-T", "fields"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "tshark: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).lines().map(|l| l.split('\t').map(str::to_string).collect()).collect()
}

/// A mixed stream: sizes 60..=1514, TCP to 80 and 443, UDP to 53.
fn stream(n: usize) -> Vec<(u8, u16, usize)> {
    (0..n).map(|i| ([6u8, 17, 6][i % 3], [80u16, 53, 443][i % 3], 60 + (i * 97) % 1455)).collect()
}

#[test]
fn capture_holds_exactly_what_the_port_received_root() {
    if !common::ready(&["tshark", "python3"]) {
        return;
    }
    let w = Wire::start("cx", 61);
    let frames = stream(300);
    let file = w.file("rx.pcapng");
    let (p0, b0) = w.rx_a();
    let c = w.ctl(&["capture", "rx", "a", "-c", "300", "-w", file.to_str().unwrap()]);
    armed(&file);
    w.send(&frames);
    let (ok, err) = finish(c);
    assert!(ok, "{err}");
    assert!(err.contains("300 packets captured, 0 dropped by the capture ring"), "{err}");
    // Nothing else crosses the wire: what the port counted is the stream.
    let (p1, b1) = w.rx_a();
    let want_bytes: usize = frames.iter().map(|f| f.2).sum();
    assert_eq!((p1 - p0, b1 - b0), (300, want_bytes as u64), "{}", w.output());
    let rows = tshark(file.to_str().unwrap(), &["frame.interface_name", "frame.len", "frame.cap_len"]);
    assert_eq!(rows.len() as u64, p1 - p0);
    assert!(rows.iter().all(|r| r[0] == "a:rx" && r[1] == r[2]), "{rows:?}");
    let bytes: u64 = rows.iter().map(|r| r[1].parse::<u64>().unwrap()).sum();
    assert_eq!(bytes, b1 - b0);
    let lens: Vec<usize> = rows.iter().map(|r| r[1].parse().unwrap()).collect();
    assert_eq!(lens, frames.iter().map(|f| f.2).collect::<Vec<_>>(), "in order, sizes as sent");
    // The statistics block: 300 passed the (absent) filter, none dropped.
    let raw = std::fs::read(&file).unwrap();
    let mut sp = ironpath_pcapfile::ng::Splitter::default();
    sp.push(&raw);
    let mut isb = None;
    while let Some((k, b)) = sp.next_block().unwrap() {
        if k == ironpath_pcapfile::ng::ISB {
            isb = ironpath_pcapfile::ng::read_statistics(&b);
        }
    }
    assert_eq!(isb, Some((0, Some(300), Some(0))));
}

#[test]
fn a_filter_keeps_only_tcp_port_80_and_stdout_streams_to_tshark_root() {
    if !common::ready(&["tshark", "python3"]) {
        return;
    }
    let w = Wire::start("cf", 63);
    let frames = stream(90);
    let port80 = frames.iter().filter(|f| f.0 == 6 && f.1 == 80).count();
    assert_eq!(port80, 30);
    // Both directions of `a` and the edge rx_a.out, to a pipe read by tshark.
    let mut c = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "timeout 20 {BIN} ctl -f {} capture a rx_a.out -c {} tcp port 80 -w - | tshark -n -r - -T fields \
             -e frame.interface_name -e tcp.dstport",
            w.prefix,
            2 * port80
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The pipe gives no sign of the capture's start: `show ctl` counts it.
    let t = Instant::now();
    loop {
        let o = Command::new(BIN).args(["ctl", "-f", &w.prefix, "show", "ctl"]).output().unwrap();
        let served = text(&o)
            .lines()
            .find(|l| l.contains("captures served"))
            .and_then(|l| l.split_whitespace().last()?.parse::<u64>().ok());
        if served == Some(1) {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{}", text(&o));
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    w.send(&frames);
    let t = Instant::now();
    while c.try_wait().unwrap().is_none() {
        assert!(t.elapsed() < Duration::from_secs(15), "capture | tshark did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = c.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), 2 * port80, "{out}\n{err}");
    assert!(rows.iter().all(|r| r[1] == "80"), "{out}");
    assert_eq!(rows.iter().filter(|r| r[0] == "a:rx").count(), port80, "{out}");
    assert_eq!(rows.iter().filter(|r| r[0] == "rx_a.out").count(), port80, "{out}");
    assert!(err.contains(&format!("{} packets captured, 0 dropped", 2 * port80)), "{err}");
    // A filter libpcap cannot compile is refused with its reason; nothing is armed.
    let (ok, err) = finish(w.ctl(&["capture", "a", "tcp", "port", "-w", "-"]));
    assert!(!ok && err.contains("syntax error"), "{err}");
}
