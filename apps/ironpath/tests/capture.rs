//! `ironpath ctl capture` without root (needs tshark): against `ironpath testpmd`
//! with a loaded pipeline, and a client that stops reading its capture while
//! `ironpath run configs/default.yaml` forwards on: the ring's drops grow and are
//! reported, forwarding and other clients go on.

mod common;

use common::{config, text, BIN};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A process with its own file prefix, killed on drop.
struct Proc {
    child: Child,
    prefix: String,
    out: Arc<Mutex<Vec<u8>>>,
    dir: PathBuf,
}

impl Proc {
    fn spawn(mut cmd: Command, prefix: String) -> Proc {
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let out = Arc::new(Mutex::new(Vec::new()));
        for r in
            [Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>, Box::new(child.stderr.take().unwrap())]
        {
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
        let dir = std::env::temp_dir().join(&prefix);
        std::fs::create_dir_all(&dir).unwrap();
        let p = Proc { child, prefix, out, dir };
        let t = Instant::now();
        while !p.output().contains("control: ") {
            assert!(t.elapsed() < Duration::from_secs(60), "no control socket:\n{}", p.output());
            std::thread::sleep(Duration::from_millis(50));
        }
        p
    }

    fn output(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    fn send(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    fn ctl(&self, args: &[&str]) -> Output {
        Command::new("timeout").args(["20", BIN, "ctl", "-f", &self.prefix]).args(args).output().unwrap()
    }

    /// The control socket, as the process announced it (`control: PATH (...)`).
    fn socket(&self) -> PathBuf {
        let out = self.output();
        let line = out.lines().find_map(|l| l.strip_prefix("control: ")).expect("announced");
        PathBuf::from(line.split(" (").next().unwrap())
    }

    /// Port `port`'s received packets (`show interface`).
    fn rx(&self, port: &str) -> u64 {
        let t = text(&self.ctl(&["show", "interface", port]));
        t.lines()
            .find(|l| l.trim_start().starts_with("rx packets"))
            .and_then(|l| l.split_whitespace().last()?.parse().ok())
            .unwrap_or_else(|| panic!("{t}"))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `tshark -r file -T fields -e f...` rows.
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

#[test]
fn testpmd_captures_its_loaded_pipeline() {
    if !common::tools_ready(&["tshark"]) {
        return;
    }
    let prefix = format!("ironpath-capt-tp-{}", std::process::id());
    let mut cmd = Command::new(BIN);
    cmd.args(["testpmd", "-l", "0-1", "--no-huge", "--vdev", "net_null0,size=64", "--vdev", "net_null1,size=64"])
        .args(["--file-prefix", &prefix, "--", "-i"]);
    let mut p = Proc::spawn(cmd, prefix);
    let o = p.ctl(&["capture", "p0", "-c", "5", "-w", "-"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("no pipeline"), "{}", text(&o));
    p.send(&format!("pipeline load {}", config("default.yaml").display()));
    let t = Instant::now();
    while !p.ctl(&["show", "graph"]).status.success() {
        assert!(t.elapsed() < Duration::from_secs(30), "{}", p.output());
        std::thread::sleep(Duration::from_millis(100));
    }
    let file = p.dir.join("tp.pcapng");
    let o = p.ctl(&["capture", "rx", "p0", "gen.out", "-c", "40", "-s", "42", "-w", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("40 packets captured, 0 dropped by the capture ring"),
        "{}",
        text(&o)
    );
    let rows = tshark(file.to_str().unwrap(), &["frame.interface_name", "frame.len", "frame.cap_len", "ip.proto"]);
    assert_eq!(rows.len(), 40);
    // The source's 64-byte UDP frames, cut at 42 bytes (Ethernet, IPv4, UDP).
    assert!(
        rows.iter().all(|r| (r[0] == "p0:rx" || r[0] == "gen.out") && r[1] == "64" && r[2] == "42" && r[3] == "17"),
        "{rows:?}"
    );
    assert!(rows.iter().any(|r| r[0] == "gen.out"), "{rows:?}");
    // tcpdump reads it too (when installed).
    if common::have("tcpdump") {
        let o = Command::new("tcpdump").args(["-n", "-r", file.to_str().unwrap()]).output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 40);
    }
    let help = text(&p.ctl(&["help", "capture"]));
    assert!(help.contains("capture <POINT...>"), "{help}");
}

#[test]
fn a_client_that_stops_reading_costs_drops_not_forwarding() {
    if !common::tools_ready(&["tshark"]) {
        return;
    }
    let prefix = format!("ironpath-capt-slow-{}", std::process::id());
    let mut cmd = Command::new(BIN);
    cmd.args(["run", config("default.yaml").to_str().unwrap(), "--no-huge", "--duration", "120"])
        .args(["--stats-period", "0", "--file-prefix", &prefix])
        .env("IRONPATH_RATE", "300000");
    let p = Proc::spawn(cmd, prefix);
    let mut c = UnixStream::connect(p.socket()).unwrap();
    c.write_all(b"capture p0 gen.out\n").unwrap();
    let mut head = [0u8; 9];
    c.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"\0capture\n");
    // The client reads nothing more for 2 s: forwarding goes on, and another
    // capture is served meanwhile.
    let rx0 = p.rx("p0");
    let other = p.ctl(&["capture", "rx", "p1", "-c", "10", "-w", p.dir.join("other.pcapng").to_str().unwrap()]);
    assert!(other.status.success(), "{}", text(&other));
    assert_eq!(tshark(p.dir.join("other.pcapng").to_str().unwrap(), &["frame.len"]).len(), 10);
    std::thread::sleep(Duration::from_millis(1500));
    let rx1 = p.rx("p0");
    assert!(rx1 > rx0, "forwarding stalled: {rx0} -> {rx1}");
    // Now it ends its capture and reads the rest: the statistics count the drops.
    c.shutdown(std::net::Shutdown::Write).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).unwrap();
    let mut sp = ironpath_pcapfile::ng::Splitter::default();
    sp.push(&rest);
    let (mut packets, mut stats) = (0u64, Vec::new());
    while let Some((k, b)) = sp.next_block().unwrap() {
        match k {
            ironpath_pcapfile::ng::EPB => packets += 1,
            ironpath_pcapfile::ng::ISB => stats.push(ironpath_pcapfile::ng::read_statistics(&b).unwrap()),
            _ => {}
        }
    }
    assert_eq!(stats.len(), 3, "a statistics block per point: p0:rx, p0:tx, gen.out");
    let (recv, drop): (u64, u64) = stats.iter().fold((0, 0), |(r, d), s| (r + s.1.unwrap(), d + s.2.unwrap()));
    assert!(drop > 0, "{stats:?}");
    assert!(packets + drop <= recv, "{packets} written, {stats:?}");
    let ctl = text(&p.ctl(&["show", "ctl"]));
    assert!(ctl.lines().any(|l| l.contains("captures served") && l.trim_end().ends_with(" 2")), "{ctl}");
    // A capture of nothing known is refused, says why, and is counted.
    let o = p.ctl(&["capture", "nowhere", "-w", "-"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("`nowhere` is neither a port nor NODE.EDGE; ports: p0, p1"), "{}", text(&o));
    let ctl = text(&p.ctl(&["show", "ctl"]));
    assert!(ctl.lines().any(|l| l.contains("captures refused") && l.trim_end().ends_with(" 1")), "{ctl}");
}
