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
            "IRONPATH_DRIVER=net_virtio IRONPATH_PORT_ARGS=pci=0000:00:01.0 IRONPATH_IPV4=198.18.30.2 \
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
