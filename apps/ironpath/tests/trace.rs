//! The decoded packet trace: `ironpath run` on a pipeline fed by a pcap of a TCP SYN,
//! an ARP request and an ICMPv6 neighbour solicitation; `ironpath ctl trace add`,
//! `show trace` and `clear trace` on it; and the decoder's lines compared, field by
//! field, with tshark's decoding of the same frames (skipped without tshark).

mod common;

use common::BIN;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// The three frames: a TCP SYN 198.18.0.1:40000 > 198.18.0.2:80 (mss 1460, sackOK, TS,
/// nop, wscale 7), an ARP request for 198.18.0.2 and a neighbour solicitation for fd00::2.
fn frames() -> Vec<Vec<u8>> {
    let mut syn = hex("020000000002 020000000001 0800 4500003c 1c46 4000 4006 0000 c6120001 c6120002
         9c40 0050 000003e8 00000000 a002 faf0 0000 0000
         020405b4 0402 080a0000006400000000 01 030307");
    let ck = !ironpath_wire::checksum::data(&syn[14..34]);
    syn[24..26].copy_from_slice(&ck.to_be_bytes());
    let arp = hex("ffffffffffff 020000000001 0806 0001 0800 06 04 0001 020000000001 c6120001 000000000000 c6120002");
    let ns = hex("3333ff000002 020000000001 86dd 6000000000203aff
         fd000000000000000000000000000001 ff0200000000000000000001ff000002
         8700 0000 00000000 fd000000000000000000000000000002 0101 020000000001");
    vec![syn, arp, ns]
}

fn write_pcap(path: &Path) {
    let mut w = ironpath_pcapfile::Writer::create(path, false).unwrap();
    for f in frames() {
        w.write(&f).unwrap();
    }
    w.flush().unwrap();
}

/// A scratch directory, removed on drop.
struct Dir(PathBuf);
impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("ironpath-trace-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
}
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// tshark's fields of each frame of `pcap`, as `name=value` pairs.
fn tshark(pcap: &Path) -> Vec<Vec<(String, String)>> {
    const FIELDS: &[&str] = &[
        "eth.src",
        "eth.dst",
        "ip.src",
        "ip.dst",
        "ip.ttl",
        "ip.id",
        "tcp.srcport",
        "tcp.dstport",
        "tcp.flags.syn",
        "tcp.flags.ack",
        "tcp.seq_raw",
        "tcp.window_size_value",
        "tcp.options.mss_val",
        "tcp.options.wscale.shift",
        "tcp.options.timestamp.tsval",
        "arp.opcode",
        "arp.src.hw_mac",
        "arp.src.proto_ipv4",
        "arp.dst.proto_ipv4",
        "ipv6.src",
        "ipv6.dst",
        "ipv6.hlim",
        "icmpv6.type",
        "icmpv6.nd.ns.target_address",
        "icmpv6.opt.linkaddr",
    ];
    let mut c = Command::new("tshark");
    c.args(["-r", pcap.to_str().unwrap(), "-T", "fields", "-E", "separator=|", "-E", "occurrence=f"]);
    for f in FIELDS {
        c.args(["-e", f]);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "tshark: {}", common::text(&o));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            FIELDS
                .iter()
                .zip(l.split('|'))
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// What the decoder's lines of a frame must say, from tshark's fields of it.
fn expected(t: &[(String, String)]) -> Vec<String> {
    let g = |k: &str| {
        t.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap_or_else(|| panic!("tshark gave no {k}: {t:?}"))
    };
    let has = |k: &str| t.iter().any(|(n, _)| n == k);
    let mut e = vec![format!("ethernet: {} > {}", g("eth.src"), g("eth.dst"))];
    if has("tcp.srcport") {
        assert_eq!((g("tcp.flags.syn").as_str(), g("tcp.flags.ack").as_str()), ("1", "0"), "a SYN: {t:?}");
        e.push(format!("ipv4: {} > {}, proto 6 (TCP), ttl {}", g("ip.src"), g("ip.dst"), g("ip.ttl")));
        e.push(format!("id {}", u32::from_str_radix(g("ip.id").trim_start_matches("0x"), 16).unwrap()));
        e.push(format!(
            "tcp: {} > {}, flags [S], seq {}, win {}",
            g("tcp.srcport"),
            g("tcp.dstport"),
            g("tcp.seq_raw"),
            g("tcp.window_size_value")
        ));
        e.push(format!("mss {}", g("tcp.options.mss_val")));
        e.push(format!("wscale {}", g("tcp.options.wscale.shift")));
        e.push(format!("TS val {} ecr 0", g("tcp.options.timestamp.tsval")));
    } else if has("arp.opcode") {
        assert_eq!(g("arp.opcode"), "1", "a request: {t:?}");
        e.push(format!(
            "arp: request who-has {} tell {} ({})",
            g("arp.dst.proto_ipv4"),
            g("arp.src.proto_ipv4"),
            g("arp.src.hw_mac")
        ));
    } else {
        assert_eq!(g("icmpv6.type"), "135", "a neighbour solicitation: {t:?}");
        e.push(format!(
            "ipv6: {} > {}, next header 58 (ICMPv6), hop limit {}",
            g("ipv6.src"),
            g("ipv6.dst"),
            g("ipv6.hlim")
        ));
        e.push(format!(
            "icmpv6: neighbor solicitation (type 135, code 0), cksum 0x0000, target {}",
            g("icmpv6.nd.ns.target_address")
        ));
        e.push(format!("icmpv6 option: source link-layer address {}", g("icmpv6.opt.linkaddr")));
    }
    e
}

#[test]
fn decoder_lines_carry_tsharks_values() {
    if !common::tools_ready(&["tshark"]) {
        return;
    }
    let d = Dir::new("tshark");
    let pcap = d.0.join("three.pcap");
    write_pcap(&pcap);
    let t = tshark(&pcap);
    assert_eq!(t.len(), 3, "{t:?}");
    for (f, fields) in frames().iter().zip(&t) {
        let mut lines = String::new();
        ironpath_wire::describe::describe(f, &mut lines);
        for want in expected(fields) {
            assert!(lines.contains(&want), "`{want}` (from tshark) not in:\n{lines}");
        }
    }
}

/// `ironpath run` of a pcap-fed pipeline (rx -> cnt -> sink); killed on drop.
struct Run {
    child: Child,
    prefix: String,
    log: PathBuf,
}

impl Run {
    fn start(d: &Path, pcap: &Path) -> Run {
        let yaml = d.join("trace.yaml");
        std::fs::write(
            &yaml,
            format!(
                "mempools:
  - {{name: mp, size: 1023}}
ports:
  - {{name: cap, driver: net_pcap, args: 'rx_pcap={},infinite_rx=1,rate=200'}}
lcores: [{{id: 0}}]
nodes:
  - {{name: rx, type: port_rx, lcore: 0, params: {{port: cap}}}}
  - {{name: cnt, type: counter, lcore: 0}}
  - {{name: sink, type: drop, lcore: 0}}
edges:
  - {{from: rx, to: cnt}}
  - {{from: cnt, to: sink}}
",
                pcap.display()
            ),
        )
        .unwrap();
        let prefix = format!("ironpath-trace-{}", std::process::id());
        let log = d.join("run.log");
        let child = Command::new(BIN)
            .args(["run", yaml.to_str().unwrap(), "--no-huge", "--no-pin", "--duration", "120"])
            .args(["--stats-period", "0", "--file-prefix", &prefix])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(d.join("run.err")).unwrap())
            .spawn()
            .unwrap();
        let r = Run { child, prefix, log };
        let t = Instant::now();
        while !r.ctl(&["show", "graph"]).status.success() {
            assert!(t.elapsed() < Duration::from_secs(60), "no control socket:\n{}", r.output());
            std::thread::sleep(Duration::from_millis(100));
        }
        r
    }

    fn ctl(&self, args: &[&str]) -> Output {
        Command::new(BIN).args(["ctl", "-f", &self.prefix]).args(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let o = self.ctl(args);
        assert!(o.status.success(), "ctl {args:?}: {}\nrun:\n{}", common::text(&o), self.output());
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn output(&self) -> String {
        let err = self.log.with_file_name("run.err");
        format!(
            "{}{}",
            std::fs::read_to_string(&self.log).unwrap_or_default(),
            std::fs::read_to_string(err).unwrap_or_default()
        )
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The records of a `show trace` answer (each starts with `lcore `).
fn records(text: &str) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for l in text.lines() {
        if l.starts_with("lcore ") {
            v.push(l.to_string());
        } else if let Some(r) = v.last_mut().filter(|_| l.starts_with("  ")) {
            r.push('\n');
            r.push_str(l);
        }
    }
    v
}

#[test]
fn ctl_trace_shows_decoded_records_of_a_running_pipeline() {
    let d = Dir::new("run");
    let pcap = d.0.join("three.pcap");
    write_pcap(&pcap);
    let r = Run::start(&d.0, &pcap);
    assert!(r.ok(&["show", "trace"]).contains("no trace records"));
    let o = r.ctl(&["trace", "add", "nope", "3"]);
    assert!(!o.status.success() && common::text(&o).contains("no node `nope`"), "{}", common::text(&o));
    let o = r.ctl(&["trace", "add", "cnt", "1001"]);
    assert!(!o.status.success() && common::text(&o).contains("1..=1000"), "{}", common::text(&o));
    assert!(r.ok(&["trace", "add", "cnt", "3"]).contains("tracing the next 3 packets of `cnt`"));
    let t = Instant::now();
    let mut text = String::new();
    while t.elapsed() < Duration::from_secs(30) {
        text = r.ok(&["show", "trace"]);
        if records(&text).len() >= 3 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let recs = records(&text);
    assert_eq!(recs.len(), 3, "three records (the trace stops after 3):\n{text}");
    let mut last_ns = 0u64;
    for rec in &recs {
        let head = rec.lines().next().unwrap();
        // `lcore 0 cnt: +T ns -> out, len L, ol_flags F` (out: the edge to sink)
        let ns: u64 = head
            .strip_prefix("lcore 0 cnt: +")
            .and_then(|s| s.split_once(" ns -> out, len "))
            .map(|(t, _)| t.parse().unwrap())
            .unwrap_or_else(|| panic!("record header: {head}\n{text}"));
        assert!(ns >= last_ns, "times never go back:\n{text}");
        last_ns = ns;
        assert!(head.contains(", ol_flags "), "{head}");
        assert!(rec.lines().nth(1).unwrap().starts_with("  ethernet: 02:00:00:00:00:01 > "), "{rec}");
    }
    // One of each frame (the pcap is replayed in a loop: three in a row are one each).
    let all = recs.join("\n");
    for want in
        ["tcp: 40000 > 80, flags [S], seq 1000", "arp: request who-has 198.18.0.2 tell 198.18.0.1", "target fd00::2"]
    {
        assert_eq!(all.matches(want).count(), 1, "`{want}`:\n{all}");
    }
    // Compared with tshark's decoding of the same frames, when tshark is here.
    if common::have("tshark") {
        for fields in tshark(&pcap) {
            let want = expected(&fields);
            let rec = recs
                .iter()
                .find(|r| r.contains(&want[1]))
                .unwrap_or_else(|| panic!("no record has `{}`:\n{all}", want[1]));
            for w in &want {
                assert!(rec.contains(w.as_str()), "`{w}` (from tshark) not in:\n{rec}");
            }
        }
    }
    // `show trace max 1` shows one and says how many more; records stay until cleared.
    let one = r.ok(&["show", "trace", "max", "1"]);
    assert_eq!(records(&one).len(), 1, "{one}");
    assert!(one.contains("(2 more records: show trace max N)"), "{one}");
    assert_eq!(records(&r.ok(&["show", "trace"])).len(), 3);
    assert_eq!(r.ok(&["clear", "trace"]), "trace cleared\n");
    assert!(r.ok(&["show", "trace"]).contains("no trace records"));

    // Traced at the port, a packet is followed through every node after it, each hop
    // with its time, edge and headers.
    r.ok(&["trace", "add", "rx", "2"]);
    text.clear();
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(30) && records(&text).len() < 2 {
        text = r.ok(&["show", "trace"]);
        std::thread::sleep(Duration::from_millis(100));
    }
    let recs = records(&text);
    assert_eq!(recs.len(), 2, "{text}");
    for rec in &recs {
        let lines: Vec<&str> = rec.lines().collect();
        assert!(lines[0].starts_with("lcore 0 rx: +") && lines[0].contains(" ns -> out, len "), "{rec}");
        let hop = |node: &str, to: &str| {
            let at = lines
                .iter()
                .position(|l| l.starts_with(&format!("  then lcore 0 {node}: +")))
                .unwrap_or_else(|| panic!("no hop at {node}:\n{rec}"));
            assert!(lines[at].contains(&format!(" ns -> {to}, len ")), "{rec}");
            assert_eq!(lines[at + 1], "    (headers as above)", "{rec}");
            let ns = |l: &str| -> u64 { l.split(": +").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap() };
            (at, ns(lines[at]))
        };
        let (at_cnt, t_cnt) = hop("cnt", "out");
        let (at_sink, t_sink) = hop("sink", "consumed");
        assert!(at_cnt < at_sink && t_cnt <= t_sink, "hops in order, times never go back:\n{rec}");
    }
}
