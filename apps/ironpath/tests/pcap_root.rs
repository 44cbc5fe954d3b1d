//! Needs root, tcpdump, tshark (editcap), python3 and curl: a real kernel TCP transfer
//! in a namespace of the test's own is captured with tcpdump, replayed through
//! `testpmd io` from `rx_pcap` into `tx_pcap`, and tshark must read the same packets,
//! byte for byte, from both files — for pcap with nanosecond timestamps and for the
//! same capture converted to pcapng. A truncated capture is refused with its record.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_ironpath");

fn sh(cmd: &str) -> String {
    let o = Command::new("sh").arg("-c").arg(cmd).output().expect("sh");
    assert!(o.status.success(), "`{cmd}` failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Namespace, temp dir and background processes, all removed on drop.
struct Scene {
    ns: String,
    dir: PathBuf,
    kids: Vec<Child>,
}

impl Drop for Scene {
    fn drop(&mut self) {
        for k in &mut self.kids {
            let _ = k.kill();
            let _ = k.wait();
        }
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Every packet's bytes as tshark reads them (`-x` hex dump, TCP reassembly off so
/// each dump is one frame), in order.
fn tshark_frames(file: &Path) -> Vec<String> {
    let out = sh(&format!("tshark -n -o tcp.desegment_tcp_streams:FALSE -r {} -x", file.display()));
    let mut frames = Vec::new();
    let mut cur = String::new();
    for line in out.lines() {
        // "0000  45 00 ...  ascii" (offsets grow to 5 digits past 64 KiB)
        let Some((off, rest)) = line.split_once("  ") else { continue };
        if off.len() < 4 || !off.chars().all(|c| c.is_ascii_hexdigit()) {
            continue;
        }
        if off.chars().all(|c| c == '0') && !cur.is_empty() {
            frames.push(std::mem::take(&mut cur));
        }
        for tok in rest.split(' ').take_while(|t| t.len() == 2 && t.chars().all(|c| c.is_ascii_hexdigit())) {
            cur.push_str(tok);
        }
    }
    if !cur.is_empty() {
        frames.push(cur);
    }
    let count = sh(&format!("tshark -n -r {} -T fields -e frame.number | wc -l", file.display()));
    assert_eq!(frames.len(), count.trim().parse::<usize>().unwrap(), "one hex dump per frame");
    frames
}

fn replay(input: &Path, output: &Path) -> std::process::Output {
    Command::new("timeout")
        .args(["60", BIN, "testpmd", "-l", "0-1", "--no-huge", "--vdev"])
        .arg(format!("net_pcap0,rx_pcap={},tx_pcap={}", input.display(), output.display()))
        .args(["--", "--forward-mode=io", "--duration", "1.5"])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn tcpdump_capture_replays_through_io_byte_for_byte_root() {
    if !common::ready(&["tcpdump", "tshark", "editcap", "curl", "python3"]) {
        return;
    }
    let id = std::process::id();
    let mut s = Scene {
        ns: format!("ipt-pcap-{id}"),
        dir: std::env::temp_dir().join(format!("ironpath-pcap-{id}")),
        kids: Vec::new(),
    };
    let _ = Command::new("ip").args(["netns", "del", &s.ns]).output();
    std::fs::create_dir_all(&s.dir).unwrap();
    std::fs::write(s.dir.join("blob"), (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect::<Vec<u8>>()).unwrap();
    sh(&format!("ip netns add {ns} && ip netns exec {ns} ip link set lo up && ip netns exec {ns} ip addr add 198.18.7.1/32 dev lo", ns = s.ns));
    let www = s.dir.display().to_string();
    s.kids.push(
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &s.ns,
                "python3",
                "-m",
                "http.server",
                "8080",
                "--bind",
                "198.18.7.1",
                "--directory",
                &www,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let cap = s.dir.join("in.pcap");
    s.kids.push(
        Command::new("ip")
            .args(["netns", "exec", &s.ns, "tcpdump", "-i", "lo", "-U", "--time-stamp-precision=nano", "-w"])
            .arg(&cap)
            .args(["tcp", "port", "8080"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Wait for the server to answer, then make the transfer we keep.
    let t = Instant::now();
    while Command::new("ip")
        .args(["netns", "exec", &s.ns, "curl", "-s", "-o", "/dev/null", "--max-time", "2", "http://198.18.7.1:8080/"])
        .status()
        .is_ok_and(|st| !st.success())
    {
        assert!(t.elapsed() < Duration::from_secs(20), "http server did not start");
        std::thread::sleep(Duration::from_millis(200));
    }
    sh(&format!("ip netns exec {} curl -s -o /dev/null --max-time 10 http://198.18.7.1:8080/blob", s.ns));
    std::thread::sleep(Duration::from_millis(500));
    for k in s.kids.iter_mut().rev() {
        // SIGINT lets tcpdump finish its file; a process started with SIGINT ignored
        // (a background job of a script) gets SIGKILL after 3 s.
        let _ = Command::new("kill").args(["-INT", &k.id().to_string()]).status();
        let t = Instant::now();
        while k.try_wait().ok().flatten().is_none() && t.elapsed() < Duration::from_secs(3) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = k.kill();
        let _ = k.wait();
    }
    s.kids.clear();

    let want = tshark_frames(&cap);
    assert!(want.len() > 10, "tcpdump captured {} packets", want.len());

    // pcap (nanosecond timestamps) -> testpmd io -> pcap
    let out = s.dir.join("out.pcap");
    let o = replay(&cap, &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = tshark_frames(&out);
    assert_eq!(got.len(), want.len(), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(got == want, "bytes differ after replay");

    // the same capture as pcapng (microsecond timestamps)
    let ng = s.dir.join("in.pcapng");
    sh(&format!("editcap -F pcapng {} {}", cap.display(), ng.display()));
    let out2 = s.dir.join("out2.pcap");
    let o = replay(&ng, &out2);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(tshark_frames(&out2) == want, "pcapng replay differs");

    // a truncated capture is refused, naming the record where it breaks
    let full = std::fs::read(&cap).unwrap();
    let tr = s.dir.join("trunc.pcap");
    std::fs::write(&tr, &full[..full.len() - 10]).unwrap();
    let o = replay(&tr, &s.dir.join("never.pcap"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let last = want.len();
    assert!(err.contains(&format!("record {last}: file truncated")), "{err}");
}
