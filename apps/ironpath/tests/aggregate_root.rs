//! Needs root, tcpdump, tshark, ethtool and python3: receive aggregation against
//! real kernel traffic. The test makes two namespaces joined by a veth pair
//! (198.18.20.0/24, checksum offload off so the capture holds real checksums),
//! runs four concurrent kernel TCP transfers of known data, captures them with
//! tcpdump, then replays the capture (as captured, and with seeded reordering)
//! through the `rx_aggregate` node of an `ironpath run` pipeline (gro and lro) and
//! through testpmd with `set port 0 gro on`. tshark must find merged packets, no
//! bad checksum and nothing malformed, and its reassembly of every stream must
//! equal the data sent. Namespaces are removed on exit, pass or fail.

use ironpath_pcapfile::{read, Writer};
use ironpath_util::testing::XorShift;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_ironpath");
const STREAMS: usize = 4;
const STREAM_LEN: usize = 300_000;

fn sh(cmd: &str) -> String {
    let o = Command::new("sh").arg("-c").arg(cmd).output().expect("sh");
    assert!(
        o.status.success(),
        "`{cmd}` failed: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

struct Net {
    srv: String,
    cli: String,
    dir: PathBuf,
}

impl Net {
    fn new() -> Net {
        let id = std::process::id() % 100_000;
        let n = Net {
            srv: format!("ipt-gros-{id}"),
            cli: format!("ipt-groc-{id}"),
            dir: std::env::temp_dir().join(format!("ironpath-gro-{id}")),
        };
        n.teardown();
        std::fs::create_dir_all(&n.dir).unwrap();
        sh(&format!(
            "ip netns add {s} && ip netns add {c} && \
             ip link add gs{id} netns {s} type veth peer name gc{id} netns {c} && \
             ip netns exec {s} ip addr add 198.18.20.2/24 dev gs{id} && ip netns exec {c} ip addr add 198.18.20.1/24 dev gc{id} && \
             ip netns exec {s} ethtool -K gs{id} tx off rx off >/dev/null && ip netns exec {c} ethtool -K gc{id} tx off rx off >/dev/null && \
             ip netns exec {s} ip link set gs{id} up && ip netns exec {c} ip link set gc{id} up && \
             ip netns exec {s} ip link set lo up && ip netns exec {c} ip link set lo up",
            s = n.srv,
            c = n.cli
        ));
        n
    }

    fn teardown(&self) {
        let _ = Command::new("ip").args(["netns", "del", &self.srv]).output();
        let _ = Command::new("ip").args(["netns", "del", &self.cli]).output();
        if std::env::var_os("IRONPATH_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// The data of stream `k`: a header naming it, then seeded pseudo-random bytes.
fn original(k: usize) -> Vec<u8> {
    let mut v = format!("stream {k}\n").into_bytes();
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15 ^ k as u64);
    while v.len() < STREAM_LEN {
        v.push(rng.next_u64() as u8);
    }
    v
}

const SERVER: &str = r#"
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("198.18.20.2", 5201)); s.listen(8)
print("ready", flush=True)
def drain(c):
    while c.recv(65536): pass
    c.close()
ts = []
for _ in range(int(sys.argv[1])):
    c, _ = s.accept(); t = threading.Thread(target=drain, args=(c,)); t.start(); ts.append(t)
for t in ts: t.join()
"#;

const CLIENT: &str = r#"
import socket, sys, threading
def send(path):
    c = socket.create_connection(("198.18.20.2", 5201)); c.sendall(open(path, "rb").read()); c.close()
ts = [threading.Thread(target=send, args=(p,)) for p in sys.argv[1:]]
for t in ts: t.start()
for t in ts: t.join()
"#;

fn wait_line(child: &mut Child, what: &str) {
    use std::io::BufRead;
    let r = child.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(r).lines();
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(20) {
        match lines.next() {
            Some(Ok(l)) if l.contains(what) => return,
            Some(_) => {}
            None => break,
        }
    }
    panic!("never saw `{what}`");
}

/// Capture four kernel transfers; returns the capture's path.
fn capture(net: &Net) -> PathBuf {
    let cap = net.dir.join("kernel.pcap");
    let id = std::process::id() % 100_000;
    let mut paths = Vec::new();
    for k in 0..STREAMS {
        let p = net.dir.join(format!("stream{k}"));
        std::fs::write(&p, original(k)).unwrap();
        paths.push(p.display().to_string());
    }
    let errf = net.dir.join("tcpdump.err");
    let mut dump = Command::new("ip")
        .args([
            "netns",
            "exec",
            &net.srv,
            "tcpdump",
            "--immediate-mode",
            "-i",
            &format!("gs{id}"),
            "-s",
            "0",
            "-U",
            "-n",
            "-B",
            "65536",
            "-w",
        ])
        .arg(&cap)
        .arg("tcp")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&errf).unwrap())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !std::fs::read_to_string(&errf).unwrap_or_default().contains("listening on") {
        assert!(t.elapsed() < Duration::from_secs(20), "tcpdump did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut srv = Command::new("ip")
        .args(["netns", "exec", &net.srv, "python3", "-c", SERVER, &STREAMS.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    wait_line(&mut srv, "ready");
    let cli = Command::new("timeout")
        .args(["60", "ip", "netns", "exec", &net.cli, "python3", "-c", CLIENT])
        .args(&paths)
        .status()
        .unwrap();
    assert!(cli.success());
    let t = Instant::now();
    while srv.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = srv.kill();
    // Let tcpdump catch up: stop once the file has not grown for half a second.
    let mut last = (0, Instant::now());
    while last.1.elapsed() < Duration::from_millis(500) && t.elapsed() < Duration::from_secs(60) {
        let len = std::fs::metadata(&cap).map(|m| m.len()).unwrap_or(0);
        if len != last.0 {
            last = (len, Instant::now());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = Command::new("kill").args(["-INT", &dump.id().to_string()]).status();
    let _ = dump.wait();
    let err = std::fs::read_to_string(&errf).unwrap_or_default();
    assert!(err.contains("\n0 packets dropped by kernel"), "tcpdump lost packets: {err}");
    let count =
        |what: &str| err.lines().find(|l| l.ends_with(what)).and_then(|l| l.split(' ').next()?.parse::<u64>().ok());
    assert_eq!(count("packets captured"), count("packets received by filter"), "tcpdump stopped early: {err}");
    cap
}

/// A copy of `src` with packets reordered: each packet swaps with one up to 3
/// places later with probability 1/8 (seeded with `seed`).
fn reorder(src: &Path, dst: &Path, seed: u64) {
    let mut pkts = read(src).unwrap();
    let mut rng = XorShift(seed);
    for i in 0..pkts.len() {
        let x = rng.next_u64();
        if x.is_multiple_of(8) {
            let j = (i + 1 + (x as usize >> 8) % 3).min(pkts.len() - 1);
            pkts.swap(i, j);
        }
    }
    let mut w = Writer::create(dst, false).unwrap();
    for p in &pkts {
        w.write(&p.data).unwrap();
    }
    w.flush().unwrap();
}

/// tshark's checks on `file`: merged packets present, no bad checksum, nothing
/// malformed, and every stream's client data equals one of the originals.
fn check_with_tshark(file: &Path, what: &str) {
    let f = file.display();
    let big: usize = sh(&format!("tshark -n -r {f} -Y 'frame.len > 1514' -T fields -e frame.number | wc -l"))
        .trim()
        .parse()
        .unwrap();
    assert!(big > 20, "{what}: only {big} merged packets");
    check_streams(file, what);
}

/// No bad checksum, nothing malformed, every stream equal to what was sent.
fn check_streams(file: &Path, what: &str) {
    let f = file.display();
    let bad = sh(&format!(
        "tshark -n -r {f} -o ip.check_checksum:TRUE -o tcp.check_checksum:TRUE \
         -Y 'ip.checksum.status == 0 || tcp.checksum.status == 0 || _ws.malformed' -T fields -e frame.number"
    ));
    assert!(bad.trim().is_empty(), "{what}: bad or malformed frames: {bad}");
    // Reassemble each client stream from tshark's dissection: every frame's
    // payload placed at its sequence number (relative to the SYN's), so any order
    // and any merging give the same bytes; holes or overlaps that disagree fail.
    let fields = sh(&format!(
        "tshark -n -r {f} -Y 'tcp.dstport == 5201' -T fields -e tcp.srcport -e tcp.flags.syn -e tcp.seq_raw -e tcp.payload"
    ));
    let mut isn = std::collections::HashMap::new();
    let mut segs: Vec<(String, u32, Vec<u8>)> = Vec::new();
    for l in fields.lines() {
        let c: Vec<&str> = l.split('\t').collect();
        let seq: u32 = c[2].parse().unwrap();
        if c[1] == "1" {
            isn.insert(c[0].to_string(), seq.wrapping_add(1));
        } else if c.len() > 3 && !c[3].is_empty() {
            let hex = c[3].replace(':', "");
            let b = (0..hex.len() / 2).map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap()).collect();
            segs.push((c[0].to_string(), seq, b));
        }
    }
    assert_eq!(isn.len(), STREAMS, "{what}: SYNs seen: {isn:?}");
    let mut got = Vec::new();
    for (port, base) in &isn {
        let mut data = vec![None::<u8>; STREAM_LEN];
        for (p, seq, b) in segs.iter().filter(|s| &s.0 == port) {
            let off = seq.wrapping_sub(*base) as usize;
            for (i, &x) in b.iter().enumerate() {
                let slot = data.get_mut(off + i).unwrap_or_else(|| panic!("{what}: port {p}: byte beyond the stream"));
                assert!(slot.is_none_or(|y| y == x), "{what}: port {p}: overlapping bytes disagree at {}", off + i);
                *slot = Some(x);
            }
        }
        let holes = data.iter().filter(|x| x.is_none()).count();
        assert_eq!(holes, 0, "{what}: port {port}: {holes} bytes missing");
        got.push(data.into_iter().map(|x| x.unwrap_or_default()).collect::<Vec<u8>>());
    }
    got.sort();
    let mut want: Vec<Vec<u8>> = (0..STREAMS).map(original).collect();
    want.sort();
    for (g, w) in got.iter().zip(&want) {
        assert!(g == w, "{what}: a reassembled stream differs from what was sent ({} vs {} bytes)", g.len(), w.len());
    }
}

fn run_pipeline(net: &Net, input: &Path, mode: &str, flush: &str) -> PathBuf {
    let out = net.dir.join(format!("out-{mode}-{flush}-{}", input.file_name().unwrap().to_string_lossy()));
    let yaml = net.dir.join(format!("agg-{mode}-{flush}.yaml"));
    std::fs::write(
        &yaml,
        format!(
            "mempools:
  - {{name: mp, size: 16383}}
  - {{name: big, size: 256, data_room: 65535}}
ports:
  - {{name: cap, driver: net_pcap, args: 'rx_pcap={i},tx_pcap={o}'}}
lcores: [{{id: 0}}]
nodes:
  - {{name: rx, type: port_rx, lcore: 0, params: {{port: cap}}}}
  - {{name: agg, type: rx_aggregate, lcore: 0, params: {{mode: {mode}, flush: {flush}, flush_us: 200us, lro_mempool: big}}}}
  - {{name: tx, type: port_tx, lcore: 0, params: {{port: cap, retries: 64}}}}
edges:
  - {{from: rx, to: agg}}
  - {{from: agg, to: tx}}
",
            i = input.display(),
            o = out.display()
        ),
    )
    .unwrap();
    let o = Command::new(BIN)
        .args(["run", yaml.to_str().unwrap(), "--no-huge", "--no-pin", "--duration", "2", "--stats-period", "0"])
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{text}");
    assert!(text.contains("aggregates"), "{text}");
    out
}

#[test]
fn kernel_tcp_captures_aggregate_into_valid_packets_and_equal_streams_root() {
    if !common::ready(&["tcpdump", "tshark", "ethtool", "python3"]) {
        return;
    }
    let net = Net::new();
    let cap = capture(&net);
    let n = read(&cap).unwrap().len();
    assert!(n > 4 * STREAM_LEN / 1448, "capture too small: {n} packets");
    // The capture itself is sane (and the streams complete) before we touch it.
    check_streams(&cap, "the kernel capture");
    let reordered = net.dir.join("reordered.pcap");
    reorder(&cap, &reordered, 0x2545_f491_4f6c_dd1d);
    for input in [&cap, &reordered] {
        for (mode, flush) in [("gro", "burst"), ("lro", "burst"), ("gro", "timeout")] {
            let out = run_pipeline(&net, input, mode, flush);
            check_with_tshark(&out, &format!("{mode}/{flush} on {}", input.display()));
        }
    }
    // testpmd: set port 0 gro on, io forwarding from the capture into a file.
    let out = net.dir.join("testpmd-gro.pcap");
    let mut tp = Command::new(BIN)
        .args(["testpmd", "-l", "0-1", "--no-huge", "--vdev"])
        .arg(format!("net_pcap0,rx_pcap={},tx_pcap={}", reordered.display(), out.display()))
        .args(["--", "-i", "--forward-mode=io"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut i = tp.stdin.take().unwrap();
        writeln!(i, "set port 0 gro on\nstart").unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        writeln!(i, "stop\nshow port 0 gro\nquit").unwrap();
    }
    let o = tp.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("GRO type: TCP/IPv4") && text.contains("aggregates:"), "{text}");
    check_with_tshark(&out, "testpmd gro");
}
