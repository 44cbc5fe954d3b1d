//! Needs root and QEMU (ci/vm/run installs it with apt): the net_virtio PMD on QEMU's
//! virtio-net-pci (modern, `iommu_platform=on`), through VFIO and an emulated IOMMU,
//! in a TCG guest booted by `ci/vm/run --nic virtio`. The NIC sits on a tap device in
//! a namespace the script makes and removes (198.18.30.1/24 there; our port answers
//! as 198.18.30.2): the host's ping gets testpmd's icmpecho answers, and
//! `configs/http-server.yaml` in the guest serves 100 MiB that the host fetches with
//! curl, SHA-256 equal.

mod common;

use common::*;

fn skip() -> bool {
    !ready(&["qemu-system-x86_64", "busybox", "cpio", "curl"])
}

#[test]
fn kernel_ping_gets_20_replies_from_icmpecho_on_net_virtio_root() {
    if skip() {
        return;
    }
    let host = "for i in $(seq 40); do ping -c 1 -W 1 198.18.30.2 >/dev/null && break; done; \
                ping -c 20 -i 0.2 -W 2 198.18.30.2";
    let out = vm_run(
        "virtio",
        &[
            "--nic",
            "virtio",
            "--host",
            host,
            "--",
            "testpmd",
            "-l",
            "0-1",
            "--no-huge",
            "-a",
            "0000:00:01.0",
            "--",
            "--forward-mode=icmpecho",
            "--duration=15",
        ],
    );
    assert!(out.contains("host: 20 packets transmitted, 20 received, 0% packet loss"), "{out}");
    assert!(out.contains("Port 0: 52:54:00:12:34:56"), "the MAC from the device's configuration:\n{out}");
    assert!(out.contains("GUEST: step 2 rc=0"), "{out}");
}

#[test]
fn http_server_yaml_on_net_virtio_serves_100_mib_to_curl_root() {
    if skip() {
        return;
    }
    let host = "for i in $(seq 60); do ping -c 1 -W 1 198.18.30.2 >/dev/null && break; done; \
                curl -sS --max-time 150 -o /tmp/ironpath-virtio-100m http://198.18.30.2/f100m; echo curl rc=$?; \
                echo got $(sha256sum < /tmp/ironpath-virtio-100m | cut -d' ' -f1); rm -f /tmp/ironpath-virtio-100m";
    let cfg = config("http-server.yaml");
    let out = vm_run(
        "virtio",
        &[
            "--nic",
            "virtio",
            "--file",
            cfg.to_str().unwrap(),
            "--ready",
            "pipeline `http-server` running",
            "--host",
            host,
            "-e",
            "bind",
            "-e",
            "mkdir -p /tmp/www && dd if=/dev/urandom of=/tmp/www/f100m bs=1M count=100 2>/dev/null && \
             echo want $(sha256sum < /tmp/www/f100m | cut -d' ' -f1)",
            "-e",
            "until_host env IRONPATH_DRIVER=net_virtio IRONPATH_PORT_ARGS=pci=0000:00:01.0 IRONPATH_IPV4=198.18.30.2 \
             IRONPATH_WWW=/tmp/www ironpath run /opt/ironpath/http-server.yaml --no-huge --duration 45 --stats-period 10",
        ],
    );
    assert!(out.contains("host: curl rc=0"), "{out}");
    let sum = |k: &str| out.lines().find_map(|l| l.trim().strip_prefix(&format!("{k} "))).unwrap_or("").to_owned();
    let want = sum("want");
    assert_eq!(want.len(), 64, "{out}");
    assert_eq!(sum("host: got"), want, "the body differs:\n{out}");
    assert!(out.contains("GUEST: step 3 rc=0"), "{out}");
}

/// Toeplitz hash of `data` under `key` (the RSS hash).
fn toeplitz(key: &[u8], data: &[u8]) -> u32 {
    let mut h = 0u32;
    for (i, &b) in data.iter().enumerate() {
        for j in 0..8 {
            if b & (0x80 >> j) != 0 {
                // The key's 32 bits starting at bit i * 8 + j.
                let at = i * 8 + j;
                let w = (0..5).fold(0u64, |a, k| a << 8 | u64::from(*key.get(at / 8 + k).unwrap_or(&0)));
                h ^= (w >> (8 - at % 8)) as u32;
            }
        }
    }
    h
}

/// The RX packets of queue `q`'s stream in testpmd's forward statistics.
fn queue_rx(out: &str, q: u16) -> Option<u64> {
    let head = format!("RX Port= 0/Queue={q:>2} ->");
    let mut lines = out.lines().skip_while(|l| !l.contains(&head));
    lines.next()?;
    lines.next()?.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn pings_from_eight_addresses_spread_over_two_queues_as_rss_says_on_net_virtio_root() {
    if skip() {
        return;
    }
    // The port's default key (Microsoft's verification key), checked against the
    // published vector: 66.9.149.187 -> 161.142.100.80 hashes to 0x323e8fc2.
    let key: Vec<u8> = (0..40)
        .map(|i| {
            u8::from_str_radix(
                &"6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa"[2 * i..2 * i + 2],
                16,
            )
            .unwrap()
        })
        .collect();
    assert_eq!(toeplitz(&key, &[66, 9, 149, 187, 161, 142, 100, 80]), 0x323e_8fc2);
    // Two queues, a table of 128 entries alternating 0, 1: an IPv4 packet goes to
    // queue `hash & 1` (ARP, not hashed, to queue 0).
    let srcs: Vec<u8> = (11..=18).collect();
    let on_q1 = srcs.iter().filter(|&&a| toeplitz(&key, &[198, 18, 30, a, 198, 18, 30, 2]) & 1 == 1).count() as u64;
    assert!(on_q1 > 0 && on_q1 < 8, "the addresses all hash to one queue: pick others");
    // A source that hashes to queue 0 waits for the guest, so that queue 1 sees
    // only the counted pings.
    let ready = srcs.iter().find(|&&a| toeplitz(&key, &[198, 18, 30, a, 198, 18, 30, 2]) & 1 == 0).unwrap();
    let host = format!(
        "tap=$(ls /sys/class/net | grep ipvmtap); for a in {list}; do ip addr add 198.18.30.$a/32 dev $tap; done; \
         for i in $(seq 40); do ping -c 1 -W 1 -I 198.18.30.{ready} 198.18.30.2 >/dev/null && break; done; \
         for a in {list}; do ping -c 3 -i 0.2 -W 2 -I 198.18.30.$a 198.18.30.2 | grep transmitted; done",
        list = srcs.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(" ")
    );
    let out = vm_run(
        "virtio",
        &[
            "--nic",
            "virtio",
            "--queues",
            "2",
            "--host",
            &host,
            "--",
            "testpmd",
            "-l",
            "0-1",
            "--no-huge",
            "-a",
            "0000:00:01.0",
            "--",
            "--forward-mode=icmpecho",
            "--rxq=2",
            "--txq=2",
            "--duration=30",
        ],
    );
    assert_eq!(out.matches("host: 3 packets transmitted, 3 received").count(), 8, "{out}");
    assert_eq!(queue_rx(&out, 1), Some(3 * on_q1), "queue 1 is not where RSS sends it:\n{out}");
    let q0 = queue_rx(&out, 0).unwrap_or(0);
    assert!(q0 > 3 * (8 - on_q1), "queue 0: {q0} (ARP and the waiting pings come on top):\n{out}");
    assert!(out.contains("GUEST: step 2 rc=0"), "{out}");
}
