//! Needs root and QEMU (ci/vm/run installs it with apt): a QEMU guest (TCG) whose
//! virtio-net NIC's back end is our `net_vhost` (`-netdev vhost-user`), served by
//! `configs/http-server.yaml` on the host. The guest's Linux pings our `icmp_echo`,
//! fetches 100 MiB with busybox `wget` (SHA-256 equal), and uploads 20 MiB to the
//! discard service with `nc`: its TSO frames arrive as TSO (`rx_gso_packets`), its
//! partial checksums are taken as such (`rx_partial_csum`) and our TCP counts no bad
//! checksum; we send it TSO frames too (`tx_gso_packets`). The port's counters come
//! from DPDK's `dpdk-telemetry.py`. `configs/vhost-bridge.yaml` bridges such a guest
//! to a kernel interface: the guest pings and downloads from a namespace behind it.

mod common;

use common::*;
use std::process::{Command, Stdio};

fn vm(args: &[&str]) -> String {
    vm_run("", args)
}

/// The port's xstats, by `dpdk-telemetry.py`.
fn xstats(prefix: &str) -> serde_json::Value {
    let mut c = Command::new("dpdk-telemetry.py")
        .args(["-f", prefix])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    c.stdin.take().unwrap().write_all(b"/ethdev/xstats,0\n").unwrap();
    let o = c.wait_with_output().unwrap();
    let t = String::from_utf8_lossy(&o.stdout);
    let j = t.lines().find(|l| l.contains("/ethdev/xstats")).unwrap_or_else(|| panic!("no xstats: {t}"));
    serde_json::from_str::<serde_json::Value>(j).unwrap()["/ethdev/xstats"].clone()
}

#[test]
fn a_guest_pings_downloads_and_uploads_over_net_vhost_with_tso_root() {
    if !ready(&["qemu-system-x86_64", "busybox", "cpio", "dpdk-telemetry.py"]) {
        return;
    }
    let dir = TempDir::new("vhost-vm");
    www(&dir.0, &[("f100m", 100 << 20)]);
    let want = sha256(&dir.0.join("f100m"));
    let sock = dir.0.join("vm.sock").display().to_string();
    let env = [
        ("IRONPATH_DRIVER", "net_vhost".to_string()),
        ("IRONPATH_PORT_ARGS", format!("iface={sock},tso=1")),
        ("IRONPATH_IPV4", "198.18.31.1".to_string()),
        ("IRONPATH_WWW", dir.0.display().to_string()),
    ];
    let mut run = Run::start(&config("http-server.yaml"), &env, "vhost-vm");
    let out = vm(&[
        "--nic",
        &format!("vhost-user={sock}"),
        "-e",
        "ip link set eth0 up; ip addr add 198.18.31.2/24 dev eth0; ping -c 3 -W 5 198.18.31.1",
        "-e",
        "echo got $(wget -q -O - http://198.18.31.1/f100m | sha256sum)",
        "-e",
        "dd if=/dev/zero of=/tmp/z bs=1M count=20 2>/dev/null; nc -w 5 198.18.31.1 9 < /tmp/z",
    ]);
    let x = xstats(&run.prefix);
    let last = run.latest();
    let log = run.stop();
    assert!(out.contains("3 packets transmitted, 3 packets received"), "{out}\n{log}");
    assert!(out.contains(&format!("got {want}")), "the download's SHA-256\n{out}\n{log}");
    for s in 1..=3 {
        assert!(out.contains(&format!("GUEST: step {s} rc=0")), "step {s}\n{out}\n{log}");
    }
    let n = |k: &str| x[k].as_u64().unwrap_or_else(|| panic!("no xstat {k}: {x}"));
    assert!(n("rx_gso_packets") > 0 && n("rx_partial_csum") > 0, "the guest's TSO frames: {x}");
    assert!(n("tx_gso_packets") > 0, "our TSO frames to the guest: {x}");
    for k in ["rx_bad_desc", "rx_bad_ring_index", "tx_bad_desc", "tx_bad_ring_index", "protocol_errors", "tx_too_long"]
    {
        assert_eq!(n(k), 0, "{k}: {x}");
    }
    // Our TCP took the guest's partial checksums as valid: none refused.
    assert_eq!(counter(&last, "tcp", "bad_checksum"), 0, "{last}");
    // The upload reached the discard service whole.
    assert!(counter(&last, "tcp", "app_bytes_in") >= 20 << 20, "{last}");
    assert!(log.contains("queue pair 0 ready: link up"), "{log}");
}

#[test]
fn vhost_bridge_yaml_carries_a_guests_ping_and_download_to_a_kernel_namespace_root() {
    if !ready(&["qemu-system-x86_64", "busybox", "cpio", "python3"]) {
        return;
    }
    let v = Veth::new("vhb", 32);
    let dir = TempDir::new("vhost-bridge");
    www(&dir.0, &[("f8m", 8 << 20)]);
    let want = sha256(&dir.0.join("f8m"));
    let sock = dir.0.join("vm.sock").display().to_string();
    // A web server in the namespace, behind the bridge.
    let mut server = Command::new("ip")
        .args(["netns", "exec", &v.ns, "python3", "-m", "http.server", "-b", "198.18.32.1", "80", "-d"])
        .arg(&dir.0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let env = [("IRONPATH_IFACE", v.port.clone()), ("IRONPATH_VHOST_SOCKET", sock.clone())];
    let mut run = Run::start(&config("vhost-bridge.yaml"), &env, "vhost-bridge");
    let out = vm(&[
        "--nic",
        &format!("vhost-user={sock}"),
        "-e",
        "ip link set eth0 up; ip addr add 198.18.32.2/24 dev eth0; ping -c 3 -W 5 198.18.32.1",
        "-e",
        "echo got $(wget -q -O - http://198.18.32.1/f8m | sha256sum)",
    ]);
    let _ = server.kill();
    let _ = server.wait();
    let log = run.stop();
    assert!(out.contains("3 packets transmitted, 3 packets received"), "{out}\n{log}");
    assert!(out.contains(&format!("got {want}")), "the download's SHA-256\n{out}\n{log}");
}
