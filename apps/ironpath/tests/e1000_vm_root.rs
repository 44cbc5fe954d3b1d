//! Needs root and QEMU (ci/vm/run installs it with apt): the net_e1000 PMD on QEMU's
//! emulated e1000, through VFIO and an emulated IOMMU, in a TCG guest booted by
//! `ci/vm/run`. The e1000 sits on a tap device in a namespace the script makes and
//! removes (198.18.30.1/24 there; our port answers as 198.18.30.2). Each test boots
//! its own guest (5 to 20 s); a lock runs them one at a time (TCG on 2 cores).
//!
//! The guest runs this build's `ironpath` and `libironpath_pmd_e1000.so` (the
//! directory of the test's `ironpath`, normally `target/debug`).

mod common;

/// `ci/vm/run ARGS` with this build's `ironpath` and e1000 plugin.
fn vm(args: &[&str]) -> String {
    common::vm_run("e1000", args)
}

/// The number after `key` on the first line after `from` that has it.
fn num_after(s: &str, from: &str, key: &str) -> u64 {
    let i = s.find(from).unwrap_or_else(|| panic!("`{from}` not in the output:\n{s}"));
    let j = s[i..].find(key).unwrap_or_else(|| panic!("`{key}` not after `{from}` in:\n{s}"));
    let v = s[i + j + key.len()..].split_whitespace().next().unwrap_or("");
    v.trim_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .unwrap_or_else(|_| panic!("`{key}` {v}: not a number in:\n{s}"))
}

fn skip() -> bool {
    !common::ready(&["qemu-system-x86_64", "busybox", "cpio", "curl", "python3"])
}

#[test]
fn kernel_ping_gets_20_replies_from_icmpecho_on_e1000_root() {
    if skip() {
        return;
    }
    // Wait until the port answers (QEMU's e1000 ignores frames for a second after the
    // port enables its receiver), then the measured ping.
    let host = "for i in $(seq 40); do ping -c 1 -W 1 198.18.30.2 >/dev/null && break; done; \
                ping -c 20 -i 0.2 -W 2 198.18.30.2";
    let out = vm(&[
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
        "--duration=25",
    ]);
    assert!(out.contains("host: 20 packets transmitted, 20 received, 0% packet loss"), "{out}");
    assert!(out.contains("VM: host command exit=0"), "{out}");
    assert!(out.contains("Port 0: 52:54:00:12:34:56"), "the MAC from RAL0/RAH0:\n{out}");
    assert!(out.contains("GUEST: step 2 rc=0"), "{out}");
    // Every reply we sent reached the kernel's tap.
    let sent = num_after(&out, "Accumulated forward statistics", "TX-packets:");
    assert!(sent >= 20, "{out}");
    assert_eq!(num_after(&out, "VM: tap", "rx_packets="), sent, "{out}");
}

#[test]
fn every_txonly_frame_is_counted_by_the_kernel_and_in_xstats_root() {
    if skip() {
        return;
    }
    // A fixed count (tx_first: 64 bursts of 32 before forwarding starts; rxonly then
    // sends nothing), with the NIC's own counters; then a timed txonly run.
    let cmds = "printf 'start tx_first 64\\nstop\\nshow port xstats 0\\nquit\\n' > /tmp/cmds";
    let fixed =
        "ironpath testpmd -l 0-1 --no-huge -a 0000:00:01.0 -- -i --forward-mode=rxonly --cmdline-file=/tmp/cmds";
    let timed = "ironpath testpmd -l 0-1 --no-huge -a 0000:00:01.0 -- --forward-mode=txonly --duration=3";
    let out = vm(&["-e", "bind", "-e", cmds, "-e", fixed, "-e", timed]);
    assert!(out.contains("GUEST: step 3 rc=0") && out.contains("GUEST: step 4 rc=0"), "{out}");
    let step3 = &out[out.find("GUEST: step 3:").unwrap()..out.find("GUEST: step 4:").unwrap()];
    assert_eq!(num_after(step3, "Forward statistics for port 0", "TX-packets:"), 2048, "{out}");
    assert_eq!(num_after(step3, "NIC extended statistics", "tx_good_packets:"), 2048, "{out}");
    assert_eq!(num_after(step3, "NIC extended statistics", "hw_tx_good_packets:"), 2048, "{out}");
    assert_eq!(
        num_after(step3, "NIC extended statistics", "hw_tx_good_bytes:"),
        2048 * (64 + 4),
        "with the CRC:\n{out}"
    );
    let step4 = &out[out.find("GUEST: step 4:").unwrap()..];
    let timed_tx = num_after(step4, "Accumulated forward statistics", "TX-packets:");
    assert!(timed_tx > 1000, "{out}");
    let kernel = num_after(&out, "VM: tap", "rx_packets=");
    assert_eq!(kernel, 2048 + timed_tx, "the tap's rx_packets against our TX-packets:\n{out}");
}

/// The ABI 1.5 operations on the e1000's registers: all-multicast (RCTL.MPE), a
/// second receive address (RAL/RAH 1) added and removed, the link taken down
/// (CTRL.SLU) and up again, then traffic still flows.
#[test]
fn allmulti_mac_add_and_link_on_the_registers_root() {
    if skip() {
        return;
    }
    let script = [
        "set allmulti 0 off",
        "show port info 0",
        "mac_addr add 0 02:00:00:00:00:77",
        "mac_addr remove 0 02:00:00:00:00:77",
        "set link-down port 0",
        "set link-up port 0",
        "start tx_first 4",
        "stop",
        "quit",
    ];
    let cmds = format!("printf '{}\\n' > /tmp/cmds", script.join("\\n"));
    let run = "ironpath testpmd -l 0-1 --no-huge -a 0000:00:01.0 -- -i --forward-mode=rxonly --cmdline-file=/tmp/cmds";
    let out = vm(&["-e", "bind", "-e", &cmds, "-e", run]);
    assert!(out.contains("GUEST: step 3 rc=0"), "{out}");
    let step = &out[out.find("GUEST: step 3:").unwrap()..];
    assert!(step.contains("Allmulticast mode: disabled"), "{out}");
    assert!(!step.contains("mac_addr_cmd error") && !step.contains("fail."), "{out}");
    assert_eq!(num_after(step, "Forward statistics for port 0", "TX-packets:"), 128, "{out}");
}

#[test]
fn refusals_name_what_to_do_root() {
    if skip() {
        return;
    }
    let pmd = |a: &str| format!("ironpath testpmd --no-huge -a {a} -- --duration=1");
    let out = vm(&["-e", &pmd("0000:00:09.0"), "-e", &pmd("00:01.0"), "-e", "bind", "-e", "ironpath plugins"]);
    assert!(out.contains("-a 0000:00:09.0: no PCI device 0000:00:09.0 (lspci -D lists them)"), "{out}");
    assert!(
        out.contains(
            "PCI device 0000:00:01.0 is not bound to vfio-pci (it has no driver): bind it: echo vfio-pci > \
             /sys/bus/pci/devices/0000:00:01.0/driver_override; echo 0000:00:01.0 > /sys/bus/pci/drivers_probe"
        ),
        "{out}"
    );
    assert!(out.contains("GUEST: step 1 rc=1") && out.contains("GUEST: step 2 rc=1"), "{out}");
    assert!(out.contains("PCI 8086:100e (-a DDDD:BB:DD.F)"), "`ironpath plugins` lists the PCI ids:\n{out}");
    let out = vm(&["--no-iommu", "-e", "bind", "-e", &pmd("0000:00:01.0")]);
    assert!(out.contains("PCI device 0000:00:01.0 has no IOMMU group: boot with intel_iommu=on iommu=pt"), "{out}");
    assert!(out.contains("GUEST: step 2 rc=1"), "{out}");
}

/// The guest's HTTP pipeline: our TCP on the e1000 port serving an in-memory 1 MiB
/// object (the pattern byte `i % 251`), with ARP and ping answered.
const HTTP_YAML: &[&str] = &[
    "name: e1000-http",
    "ports: [{name: nic, driver: net_e1000, args: \"pci=0000:00:01.0\"}]",
    "mempools: [{name: pkts, size: 8191}]",
    "lcores: [{id: 0}]",
    "nodes:",
    "  - {name: rx, type: port_rx, lcore: 0, params: {port: nic}}",
    "  - {name: cls, type: classify, lcore: 0}",
    "  - {name: arp, type: arp, lcore: 0, params: {port: nic, addresses: [198.18.30.2]}}",
    "  - {name: icmp, type: icmp_echo, lcore: 0, params: {port: nic, addresses: [198.18.30.2]}}",
    "  - {name: tcp, type: tcp, lcore: 0, params: {port: nic, addresses: [198.18.30.2], \
     listen: [{port: 80, app: http, objects: \"/1m=1048576\"}]}}",
    "  - {name: tx, type: port_tx, lcore: 0, params: {port: nic}}",
    "  - {name: other, type: drop, lcore: 0}",
    "edges:",
    "  - {from: rx, to: cls}",
    "  - {from: cls, next: arp, to: arp}",
    "  - {from: cls, next: icmp, to: icmp}",
    "  - {from: cls, next: tcp, to: tcp}",
    "  - {from: cls, next: other, to: other}",
    "  - {from: tcp, to: tx}",
    "  - {from: arp, to: tx}",
    "  - {from: icmp, to: tx}",
];

/// Boot a guest serving [`HTTP_YAML`] (`ironpath run ... EXTRA`); the host waits for
/// the port (QEMU's e1000 ignores RX for 1 s after RCTL is written), runs `then`,
/// fetches the object with curl and checks it whole. Returns the whole output.
fn serve_1mib_to_curl(extra: &str, then: &str) -> String {
    let write = format!(
        "printf '%s\\n' {} > /tmp/http.yaml",
        HTTP_YAML.iter().map(|l| format!("'{l}'")).collect::<Vec<_>>().join(" ")
    );
    // Stopped as soon as the host is done (`until_host`); 45 s is the bound.
    let run = format!("until_host ironpath run /tmp/http.yaml --no-huge --duration 45 --stats-period 5 {extra}");
    let host = format!(
        "for i in $(seq 60); do ping -c 1 -W 1 198.18.30.2 >/dev/null && break; done; {then} \
         curl -sS --max-time 120 -o /tmp/ironpath-e1000-1m http://198.18.30.2/1m; echo curl rc=$?; \
         echo got $(sha256sum < /tmp/ironpath-e1000-1m | cut -d' ' -f1); \
         echo want $(python3 -c 'import sys,hashlib; print(hashlib.sha256(bytes(i % 251 for i in range(1 << 20))).hexdigest())'); \
         rm -f /tmp/ironpath-e1000-1m"
    );
    let out =
        vm(&["--ready", "pipeline `e1000-http` running", "--host", &host, "-e", "bind", "-e", &write, "-e", &run]);
    assert!(out.contains("host: curl rc=0"), "{out}");
    let sum = |k: &str| {
        out.lines().find_map(|l| l.strip_prefix(&format!("host: {k} "))).map(str::trim).unwrap_or("").to_owned()
    };
    assert_eq!(sum("got").len(), 64, "{out}");
    assert_eq!(sum("got"), sum("want"), "the body differs:\n{out}");
    assert!(out.contains("http_requests"), "the pipeline's counters:\n{out}");
    out
}

#[test]
fn http_pipeline_serves_1mib_over_e1000_to_curl_root() {
    if skip() {
        return;
    }
    serve_1mib_to_curl("", "");
}

/// Rx mode `interrupt`: the lcore sleeps whenever a walk finds nothing, and the
/// e1000's interrupt (INTx through VFIO, on the queue's eventfd) wakes it. Pings are
/// answered and the download comes whole; the exit report counts the wake-ups.
#[test]
fn interrupt_mode_answers_ping_and_serves_1mib_over_e1000_root() {
    if skip() {
        return;
    }
    let out = serve_1mib_to_curl("--rx-mode interrupt", "ping -c 10 -i 0.2 -W 2 198.18.30.2;");
    assert!(out.contains("host: 10 packets transmitted, 10 received, 0% packet loss"), "{out}");
    // The exit report's `show runtime` (the last one printed).
    let last = &out[out.rfind("rx mode interrupt:").unwrap_or_else(|| panic!("no rx mode line:\n{out}"))..];
    let line = last.lines().next().unwrap_or("");
    eprintln!("e1000, rx mode interrupt: {line}");
    assert!(!out.contains("no interrupt through VFIO") && !out.contains("interrupt failed"), "{out}");
    assert!(num_after(line, "rx mode interrupt:", "interrupt:") > 0, "it slept: {line}");
    assert!(num_after(line, "rx mode interrupt:", "woken by a queue") > 0, "the interrupt woke it: {line}\n{out}");
}
