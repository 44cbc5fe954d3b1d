//! Needs root, python3 and curl: the TAP PMD against the kernel. The TAP devices are
//! created by testpmd and then moved into namespaces of the test's own (addresses in
//! 198.18.0.0/15); everything is removed on exit, pass or fail.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_ironpath");

fn sh(cmd: &str) -> String {
    let o = Command::new("sh").arg("-c").arg(cmd).output().expect("sh");
    assert!(o.status.success(), "`{cmd}` failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// testpmd plus the namespaces and helpers of one test; all removed on drop.
struct Scene {
    testpmd: Option<Child>,
    namespaces: Vec<String>,
    kids: Vec<Child>,
    dir: std::path::PathBuf,
}

impl Scene {
    fn new(tag: &str, vdevs: &[String], app: &str) -> Scene {
        let mut cmd = Command::new(BIN);
        cmd.args(["testpmd", "-l", "0-1", "--no-huge"]);
        for v in vdevs {
            cmd.args(["--vdev", v]);
        }
        let child = cmd
            .args(["--", "-i"])
            .args(app.split_whitespace())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn testpmd");
        Scene {
            testpmd: Some(child),
            namespaces: Vec::new(),
            kids: Vec::new(),
            dir: std::env::temp_dir().join(format!("ironpath-tap-{tag}-{}", std::process::id())),
        }
    }

    fn cmd(&mut self, line: &str) {
        writeln!(self.testpmd.as_mut().unwrap().stdin.as_mut().unwrap(), "{line}").unwrap();
    }

    /// Wait for a TAP to exist, move it into a new namespace with `ip`/24, up.
    fn host(&mut self, tap: &str, ns: &str, ip: &str) {
        let t = Instant::now();
        while !std::path::Path::new(&format!("/sys/class/net/{tap}")).exists() {
            assert!(t.elapsed() < Duration::from_secs(20), "{tap} never appeared");
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = Command::new("ip").args(["netns", "del", ns]).output();
        sh(&format!(
            "ip netns add {ns} && ip link set {tap} netns {ns} && ip netns exec {ns} sysctl -qw net.ipv6.conf.{tap}.disable_ipv6=1 && \
             ip netns exec {ns} ip addr add {ip}/24 dev {tap} && ip netns exec {ns} ip link set {tap} up && ip netns exec {ns} ip link set lo up"
        ));
        self.namespaces.push(ns.to_string());
    }

    fn finish(&mut self) -> String {
        self.cmd("quit");
        let mut c = self.testpmd.take().unwrap();
        let t = Instant::now();
        while c.try_wait().unwrap().is_none() {
            if t.elapsed() > Duration::from_secs(30) {
                let _ = c.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let o = c.wait_with_output().unwrap();
        format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        for k in &mut self.kids {
            let _ = k.kill();
            let _ = k.wait();
        }
        if let Some(mut c) = self.testpmd.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in &self.namespaces {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn num_after(s: &str, key: &str) -> u64 {
    let i = s.rfind(key).unwrap_or_else(|| panic!("`{key}` not in:\n{s}"));
    s[i + key.len()..].split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn kernel_ping_through_a_tap_gets_icmpecho_replies_root() {
    if !common::ready(&[]) {
        return;
    }
    let id = std::process::id() % 100_000;
    let tap = format!("iptp{id}");
    let mut s = Scene::new("ping", &[format!("net_tap0,iface={tap}")], "--forward-mode=icmpecho");
    s.host(&tap, &format!("ipt-tp-{id}"), "198.18.4.1");
    s.cmd("start");
    let ns = s.namespaces[0].clone();
    let ping = Command::new("ip")
        .args(["netns", "exec", &ns, "ping", "-c", "5", "-i", "0.2", "-W", "2", "-w", "10", "198.18.4.2"])
        .output()
        .unwrap();
    s.cmd("stop");
    let out = s.finish();
    let p = String::from_utf8_lossy(&ping.stdout);
    assert!(p.contains("5 packets transmitted, 5 received"), "ping:\n{p}\ntestpmd:\n{out}");
}

#[test]
fn kernel_tcp_through_two_taps_keeps_gso_root() {
    if !common::ready(&["curl", "python3"]) {
        return;
    }
    let id = std::process::id() % 100_000;
    let (ta, tb) = (format!("ipta{id}"), format!("iptb{id}"));
    let mut s =
        Scene::new("tcp", &[format!("net_tap0,iface={ta}"), format!("net_tap1,iface={tb}")], "--forward-mode=io");
    s.host(&ta, &format!("ipt-ta-{id}"), "198.18.5.1");
    s.host(&tb, &format!("ipt-tb-{id}"), "198.18.5.2");
    s.cmd("start");
    std::fs::create_dir_all(&s.dir).unwrap();
    let blob: Vec<u8> = (0..3_000_000u32).map(|i| (i * 13 % 251) as u8).collect();
    std::fs::write(s.dir.join("blob"), &blob).unwrap();
    let (nsa, nsb) = (s.namespaces[0].clone(), s.namespaces[1].clone());
    let www = s.dir.display().to_string();
    s.kids.push(
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &nsb,
                "python3",
                "-m",
                "http.server",
                "8080",
                "--bind",
                "198.18.5.2",
                "--directory",
                &www,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let got = s.dir.join("got");
    let t = Instant::now();
    loop {
        let st = Command::new("ip")
            .args(["netns", "exec", &nsa, "curl", "-s", "--max-time", "20", "-o"])
            .arg(&got)
            .arg("http://198.18.5.2:8080/blob")
            .status()
            .unwrap();
        if st.success() {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "curl through the taps kept failing");
        std::thread::sleep(Duration::from_millis(300));
    }
    s.cmd("stop");
    s.cmd("show port xstats 1");
    let out = s.finish();
    assert!(std::fs::read(&got).unwrap() == blob, "the file arrived changed");
    // The server's kernel handed us TCP segments larger than the MTU, with tso_segsz.
    let gso = num_after(&out, "rx_gso_packets:");
    let largest = num_after(&out, "rx_largest_frame:");
    assert!(gso > 0 && largest > 1514, "gso packets {gso}, largest frame {largest}\n{out}");
}
