//! Needs root, curl, ping and python3: `configs/http-server.yaml` on af_packet under
//! attack from a namespace across a veth pair, each attack bounded to seconds:
//! (a) hundreds of connections each sending hundreds of one-byte out-of-order
//! segments, (b) the same in order, a request head that never ends, (c) slowloris
//! with thousands of kernel connections trickling a header byte from one address.
//! (The SYN flood is in `tcp_root`.) During each attack a kernel `curl` downloads
//! 1 MiB with its SHA-256 equal and `ping` is answered; the `pkts` pool's objects in
//! use never pass the share the `tcp` node may pin (`pool_share`, 25% here) by more
//! than what is in flight; once the attack stops and the timers have run, the pool
//! is back to its baseline. The counters that answered each attack are printed and
//! asserted. A forged segment with a client's address from another MAC does not
//! redirect that client's download. One address with 100 pipelining, trickle-reading
//! connections keeps no other client from a 1 MiB download within a second, and the
//! pool and the process's resident memory come back once it leaves.

mod common;

use common::*;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const POOL: u64 = 65535;
const SHARE_PCT: u64 = 25;
/// Objects in use beyond the share: RX bursts, the aggregator, TX frames in flight.
const SLACK: u64 = 2048;

/// The limits the attacks meet, shortened so that each test takes seconds.
fn limits() -> Vec<(&'static str, &'static str)> {
    vec![
        ("IRONPATH_HEADER_TIMEOUT", "4s"),
        ("IRONPATH_KEEPALIVE_TIMEOUT", "4s"),
        ("IRONPATH_SEND_TIMEOUT", "3s"),
        ("IRONPATH_POOL_SHARE", "25"),
        ("IRONPATH_MAX_PER_PEER", "400"),
    ]
}

fn tool(name: &str) -> String {
    format!("{}/tests/tools/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The server under attack, a 1 MiB file to fetch, and where it answers.
struct Scene {
    v: Veth,
    w: TempDir,
    run: Run,
    /// The server's MAC, as the namespace resolved it.
    mac: String,
    /// Objects of `pkts` in use before the attack.
    baseline: u64,
}

impl Scene {
    fn new(tag: &str, net: u8) -> Scene {
        Scene::with(tag, net, &[])
    }

    /// [`Scene::new`] with more settings than [`limits`].
    fn with(tag: &str, net: u8, more: &[(&'static str, &'static str)]) -> Scene {
        let v = Veth::new(tag, net);
        let w = TempDir::new(&format!("www-{tag}"));
        www(&w.0, &[("1m", 1 << 20)]);
        let run = http_server(&v, &w.0, &[limits(), more.to_vec()].concat(), tag);
        let ours = v.ours4();
        let o = v.exec_for(10, &["ping", "-c", "2", "-i", "0.2", "-W", "2", &ours]);
        assert!(o.status.success(), "ping before the attack: {}", text(&o));
        let neigh = text(&v.exec_for(5, &["ip", "neigh", "show", &ours]));
        let mac = neigh.split_whitespace().skip_while(|w| *w != "lladdr").nth(1).expect("the server's MAC").to_owned();
        // Fetch once: the lcore cache and the file cache are warm for the baseline.
        let mut s = Scene { v, w, run, mac, baseline: 0 };
        s.fetch("before");
        s.baseline = in_use(&s.run.latest(), "pkts");
        s
    }

    /// `curl` of the 1 MiB file: completes, byte for byte.
    fn fetch(&self, when: &str) {
        let out = self.w.0.join(format!("got-{when}"));
        let url = format!("http://{}/1m", self.v.ours4());
        let o = self.v.exec_for(30, &["curl", "-sS", "--fail", "--max-time", "20", "-o", out.to_str().unwrap(), &url]);
        assert!(o.status.success(), "curl {when} the attack: {}", text(&o));
        assert_eq!(sha256(&out), sha256(&self.w.0.join("1m")), "curl {when} the attack: SHA-256 differs");
        let _ = std::fs::remove_file(out);
    }

    /// `curl` of the 1 MiB file from the namespace's own address, within `secs`
    /// seconds (`--max-time`), byte for byte.
    fn fetch_within(&self, secs: u32, when: &str) {
        let out = self.w.0.join(format!("got-{}", when.replace(' ', "-")));
        let url = format!("http://{}/1m", self.v.ours4());
        let max = secs.to_string();
        let o = self
            .v
            .exec_for(secs + 5, &["curl", "-sS", "--fail", "--max-time", &max, "-o", out.to_str().unwrap(), &url]);
        assert!(o.status.success(), "curl {when}: {}", text(&o));
        assert_eq!(sha256(&out), sha256(&self.w.0.join("1m")), "curl {when}: SHA-256 differs");
        let _ = std::fs::remove_file(out);
    }

    /// `ping` is answered.
    fn ping(&self) {
        let got = pings_answered(&self.v);
        assert!(got >= 4, "ping during the attack: {got} of 5 answered");
    }

    /// An attacker process in the namespace.
    fn spawn(&self, args: &[&str]) -> Child {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.v.ns, "timeout", "60", "python3"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd.spawn().unwrap()
    }

    /// Fetches and pings while `attack` runs, waits for it, then checks that the pool
    /// stayed within the share and returns to the baseline once the timers ran.
    /// Returns the attacker's report and the last stats line.
    fn survive(&mut self, attack: Child, expect: impl Fn(&serde_json::Value) -> bool) -> (String, serde_json::Value) {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        self.fetch("during");
        self.ping();
        let o = attack.wait_with_output().unwrap();
        let report = String::from_utf8_lossy(&o.stdout).trim().to_owned();
        assert!(o.status.success(), "attacker: {report} {}", String::from_utf8_lossy(&o.stderr));
        let share = POOL * SHARE_PCT / 100;
        let base = self.baseline;
        // The timers end the attack's connections; their buffers come back.
        let last = self.run.wait_for(25, |l| in_use(l, "pkts") <= base + 64 && expect(l));
        let peak = peak_in_use(&self.run, "pkts");
        eprintln!(
            "{report}; pkts in use: baseline {base}, peak {peak}, after {} (share {share}); tcp: {}",
            in_use(&last, "pkts"),
            last["nodes"]["tcp"]["counters"]
        );
        assert!(peak <= share + SLACK, "pkts in use peaked at {peak}, over the share {share} (+{SLACK})");
        assert!(
            in_use(&last, "pkts") <= base + 64,
            "pkts in use {} after the attack, {base} before",
            in_use(&last, "pkts")
        );
        assert!(expect(&last), "the counters that answer the attack: {}", last["nodes"]["tcp"]["counters"]);
        self.fetch("after");
        (report, last)
    }
}

fn established(report: &str) -> u64 {
    report.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0)
}

#[test]
fn one_byte_out_of_order_segments_from_hundreds_of_connections_root() {
    if !ready(&["curl", "ping", "python3"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut s = Scene::new("ao", 30);
    let prefix = format!("198.18.{}", s.v.net);
    let a = s.spawn(&[&tool("tcp_attack.py"), "ooo", &s.v.peer, &s.mac, &s.v.ours4(), &prefix, "300", "256", "6"]);
    let (report, last) = s.survive(a, |l| counter(l, "tcp", "header_timeouts") >= 250);
    assert!(established(&report) >= 250, "{report}");
    let c = |n: &str| counter(&last, "tcp", n);
    assert!(c("rcv_collapsed") > 0, "small pieces were collapsed");
    assert!(c("header_timeouts") >= established(&report), "every attacking connection timed out");
}

#[test]
fn one_byte_in_order_segments_that_never_finish_a_head_root() {
    if !ready(&["curl", "ping", "python3"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut s = Scene::new("ai", 31);
    let prefix = format!("198.18.{}", s.v.net);
    let a = s.spawn(&[&tool("tcp_attack.py"), "inorder", &s.v.peer, &s.mac, &s.v.ours4(), &prefix, "300", "256", "6"]);
    let (report, last) = s.survive(a, |l| counter(l, "tcp", "header_timeouts") >= 250);
    assert!(established(&report) >= 250, "{report}");
    // Each begun head got its 408.
    assert!(counter(&last, "tcp", "http_errors") >= established(&report), "{}", last["nodes"]["tcp"]["counters"]);
}

#[test]
fn slowloris_from_one_address_is_capped_and_timed_out_root() {
    if !ready(&["curl", "ping", "python3"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut s = Scene::new("as", 32);
    let attacker = format!("198.18.{}.3", s.v.net);
    sh(&format!("ip netns exec {} ip addr add {attacker}/24 dev {}", s.v.ns, s.v.peer));
    let a = s.spawn(&[&tool("slowloris.py"), &attacker, &s.v.ours4(), "1500", "1", "7"]);
    let (report, last) = s.survive(a, |l| counter(l, "tcp", "header_timeouts") >= 400);
    let c = |n: &str| counter(&last, "tcp", n);
    assert!(c("peer_capped") > 0, "one address held at most max_per_peer connections: {report}");
    assert!(c("header_timeouts") >= 400, "{report}");
}

#[test]
fn one_address_pipelining_and_reading_slowly_does_not_lock_out_another_root() {
    pipelining_attack("ap", 34, 1, 100, "2");
}

/// Four addresses, each with 25 pipelining connections that read fast enough to pass
/// `send_min_rate` (2 KiB every half second): together over the memory budget, each
/// keeps to its fair part and a newcomer is still served.
#[test]
fn four_addresses_pipelining_and_reading_steadily_do_not_lock_out_another_root() {
    pipelining_attack("a4", 35, 4, 25, "0.5");
}

/// Six addresses complete handshakes they never use (raw frames: their kernel keeps
/// no state), up to `max_per_peer` (400) each, more than the table (2,048 here)
/// holds: once it is full, a newcomer's connection takes the place of the idlest of
/// the peers over their fair part, at once, and its download completes within a
/// second. (Without it the table stayed full until the header timeout.)
#[test]
fn a_few_addresses_filling_the_connection_table_do_not_lock_out_another_root() {
    if !ready(&["curl", "ping", "python3"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = Scene::with("at", 36, &[("IRONPATH_MAX_CONNECTIONS", "2048")]);
    let sources: Vec<String> = (0..6).map(|k| format!("198.18.{}.{}", s.v.net, 100 + k)).collect();
    let mut args =
        vec![tool("handshake_flood.py"), s.v.peer.clone(), s.mac.clone(), s.v.ours4(), "80".into(), "400".into()];
    args.extend(sources);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = s.spawn(&args).wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&o.stdout).trim().to_owned();
    assert!(o.status.success(), "handshake_flood: {report} {}", String::from_utf8_lossy(&o.stderr));
    let full = s.run.latest();
    // The table filled during the flood; each later peer's handshakes took the place
    // of the idlest connections of the peers over their part.
    let held = full["nodes"]["tcp"]["gauges"]["established"].as_u64().unwrap_or(0);
    assert!(held >= 1792, "the table is (nearly) full: {held}: {report}: {}", full["nodes"]["tcp"]["counters"]);
    s.fetch_within(1, "with the table full");
    let last = s.run.latest();
    let c = |n: &str| counter(&last, "tcp", n);
    eprintln!("{report}; tcp: {}", last["nodes"]["tcp"]["counters"]);
    assert!(c("conns_reclaimed") > 0, "the peers over their part lost connections");
    assert!(c("peer_capped") > 0, "each peer kept to its part");
    s.fetch_within(1, "again");
}

/// `peers` attacking addresses of the test's namespace, each with `conns` pipelining
/// connections reading 2 KiB every `read_every` seconds, for 8 s (12 s for the slow
/// readers: at least three send-timeout periods once they are all connected, even
/// on a loaded machine): a download of 1 MiB
/// from another address completes within a second every ~0.7 s, no newcomer is
/// refused, and once the attackers leave every buffer and the memory come back.
fn pipelining_attack(tag: &str, net: u8, peers: u8, conns: u32, read_every: &str) {
    if !ready(&["curl", "ping", "python3", "ethtool"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = Scene::new(tag, net);
    let attackers: Vec<String> = (0..peers).map(|k| format!("198.18.{}.{}", s.v.net, 3 + k)).collect();
    for a in &attackers {
        sh(&format!("ip netns exec {} ip addr add {a}/24 dev {}", s.v.ns, s.v.peer));
    }
    // The requests in MSS-sized segments: the frame ring does not take 64 KiB
    // super-frames (see docs/tcp.md), and the attack must fill receive buffers.
    sh(&format!("ip netns exec {} ethtool -K {} tso off gso off", s.v.ns, s.v.peer));
    let pid = s.run.pid();
    let rss0 = rss(pid);
    let secs: u64 = if read_every == "2" { 12 } else { 8 };
    let spawned: Vec<Child> = attackers
        .iter()
        .map(|a| {
            // The slow readers go on until one is reset (at most 24 s in all).
            let until_reset = if read_every == "2" { "24" } else { "0" };
            let (flood, ours, conns, secs) =
                (tool("pipeline_flood.py"), s.v.ours4(), conns.to_string(), secs.to_string());
            s.spawn(&[flood.as_str(), a, &ours, &conns, &secs, read_every, until_reset])
        })
        .collect();
    // A download within a second every ~0.7 s while the attack runs (from the
    // namespace's first address: another peer).
    let t0 = std::time::Instant::now();
    std::thread::sleep(std::time::Duration::from_millis(700));
    let mut fetched = 0;
    while t0.elapsed() < std::time::Duration::from_secs(secs - 1) {
        s.fetch_within(1, &format!("at {:.1} s of the attack", t0.elapsed().as_secs_f64()));
        fetched += 1;
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let during = s.run.latest();
    let rss_peak = rss(pid);
    let mut report = String::new();
    for a in spawned {
        let o = a.wait_with_output().unwrap();
        let r = String::from_utf8_lossy(&o.stdout).trim().to_owned();
        assert!(o.status.success(), "attacker: {r} {}", String::from_utf8_lossy(&o.stderr));
        report = format!("{report}[{r}] ");
    }
    // Its connections gone, every buffer is back, and the memory too.
    let base = s.baseline;
    let last =
        s.run.wait_for(25, |l| in_use(l, "pkts") <= base + 64 && l["nodes"]["tcp"]["gauges"]["established"] == 0);
    std::thread::sleep(std::time::Duration::from_secs(1));
    let rss1 = rss(pid);
    let c = |n: &str| counter(&last, "tcp", n);
    eprintln!(
        "{report}; {fetched} downloads within 1 s; pkts in use: baseline {base}, during {}, after {}; \
         RSS {} MiB before, {} MiB during, {} MiB after; tcp: {}",
        in_use(&during, "pkts"),
        in_use(&last, "pkts"),
        rss0 >> 20,
        rss_peak >> 20,
        rss1 >> 20,
        last["nodes"]["tcp"]["counters"]
    );
    assert!(fetched >= 5, "{fetched} downloads during the attack");
    assert!(
        in_use(&last, "pkts") <= base + 64,
        "pkts in use {} after the attack, {base} before",
        in_use(&last, "pkts")
    );
    assert!(rss1 <= rss0 + rss0 / 10, "RSS {} MiB after the attack, {} MiB before", rss1 >> 20, rss0 >> 20);
    assert!(c("peer_mem_dropped") + c("pipeline_held") + c("held_back") > 0, "the peers were pushed back");
    if read_every == "2" {
        assert!(c("send_too_slow") > 0, "the slow readers were reset");
    }
    assert_eq!(c("mem_refused"), 0, "no newcomer refused");
    s.fetch_within(1, "after the attack");
}

#[test]
fn a_forged_segment_from_another_mac_does_not_redirect_a_download_root() {
    if !ready(&["curl", "python3"]) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let v = Veth::new("af", 33);
    let w = TempDir::new("www-af");
    www(&w.0, &[("big", 32 << 20)]);
    let mut run = http_server(&v, &w.0, &[], "forge");
    const PORT: &str = "40555";
    let forge = Command::new("ip")
        .args(["netns", "exec", &v.ns, "timeout", "30", "python3", "-c", FORGE, &v.peer, &v.ours4(), &v.peer4(), PORT])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = w.0.join("got");
    let url = format!("http://{}/big", v.ours4());
    let o = v.exec_for(
        60,
        &[
            "curl",
            "-sS",
            "--local-port",
            PORT,
            "--limit-rate",
            "16M",
            "-o",
            out.to_str().unwrap(),
            "--max-time",
            "40",
            &url,
        ],
    );
    let f = forge.wait_with_output().unwrap();
    assert!(f.status.success(), "forger: {}", String::from_utf8_lossy(&f.stderr));
    assert!(o.status.success(), "curl with forged segments around: {}\n{}", text(&o), run.stop());
    assert_eq!(sha256(&out), sha256(&w.0.join("big")));
    let last = run.wait_for(5, |l| counter(l, "tcp", "neigh_refused") > 0);
    assert!(counter(&last, "tcp", "neigh_refused") > 0, "the forged source was not learned: {last}");
    eprintln!(
        "forged: {}; neigh_refused {}",
        String::from_utf8_lossy(&f.stdout).trim(),
        counter(&last, "tcp", "neigh_refused")
    );
}

/// Frames from a made-up MAC with the client's address and port, and sequence numbers
/// guessed off-path, while the client downloads: `FORGE IFACE DST SRC SPORT`.
const FORGE: &str = r#"
import random, socket, struct, sys, time
iface, dst, src, sport = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
evil = bytes([0x02, 0x66, 0x66, 0x66, 0x66, 0x66])
a, d = socket.inet_aton(src), socket.inet_aton(dst)
rng = random.Random(5)
time.sleep(0.5)
sent = 0
end = time.time() + 2.5
while time.time() < end:
    seq, ack = rng.getrandbits(32), rng.getrandbits(32)
    tcp = struct.pack("!HHIIBBHHH", sport, 80, seq, ack, 5 << 4, 0x18, 65535, 0, 0) + b"GET /big HTTP/1.1\r\n\r\n"
    tcp = tcp[:16] + struct.pack("!H", csum(a + d + struct.pack("!BBH", 0, 6, len(tcp)) + tcp)) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0, a, d)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    s.send(b"\xff" * 6 + evil + b"\x08\x00" + ip + tcp)
    sent += 1
    time.sleep(0.002)
print("forged %d" % sent)
"#;
