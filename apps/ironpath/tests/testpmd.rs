//! Drives `ironpath testpmd` as a user would: commands on standard input, from a
//! command file, and in a real terminal (tmux), with null and ring ports.

use std::process::Command;
use std::time::{Duration, Instant};

mod common;

use common::{testpmd, BIN};

const NULL2: &str = "-l 0-1 --no-huge --vdev net_null0,size=64 --vdev net_null1,size=64 -- -i";

/// RX and TX packet totals of the first "Accumulated forward statistics" block in `s`.
fn accumulated(s: &str) -> (u64, u64) {
    let i = s.find("Accumulated forward statistics").unwrap_or_else(|| panic!("no summary in:\n{s}"));
    let block: String = s[i..].lines().take(4).collect::<Vec<_>>().join("\n");
    (num_after(&block, "RX-packets:"), num_after(&block, "TX-packets:"))
}

fn num_after(s: &str, key: &str) -> u64 {
    let i = s.rfind(key).unwrap_or_else(|| panic!("`{key}` not in output:\n{s}"));
    s[i + key.len()..].split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn start_stop_show_and_quit_through_stdin() {
    let o = testpmd(
        &format!("{NULL2} --record-core-cycles"),
        "show port summary all\nshow port info 0\nstart\n@sleep 0.3\nshow config fwd\nshow port stats all\nshow fwd stats all\nstop\nshow port xstats 1\nclear port stats all\nshow port stats 0\nquit\n",
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let s = &o.stdout;
    for want in [
        "Number of available ports: 2",
        "Infos for port 0",
        "Driver name: net_null",
        "io packet forwarding - ports=2 - cores=1 - streams=2",
        "RX P=0/Q=0 (socket 0) -> TX P=1/Q=0 (socket 0)",
        "NIC statistics for port 0",
        "RX-packets:",
        "Rx-pps:",
        "Telling cores to stop...",
        "Forward statistics for port 1",
        "Accumulated forward statistics for all ports",
        "CPU cycles/packet=",
        "NIC extended statistics for port 1",
        "rx_q0_packets:",
        "NIC statistics for port 0 cleared",
        "Bye...",
    ] {
        assert!(s.contains(want), "missing `{want}` in:\n{s}");
    }
    // The stop summary adds up: everything received was sent (io, no drops).
    let (rx, tx) = accumulated(&s[s.find("Telling cores to stop").unwrap()..]);
    assert!(rx > 0 && rx == tx, "rx {rx} tx {tx}");
}

#[test]
fn engines_run_and_count_as_expected() {
    let script = "set fwd rxonly\nstart\n@sleep 0.3\nstop\nset fwd txonly\nset txpkts 64,36\nstart\n@sleep 0.3\nstop\nset fwd csum\nstart\n@sleep 0.3\nstop\nset fwd flowgen\nstart\n@sleep 0.3\nstop\nset fwd macswap retry\nstart\n@sleep 0.3\nstop\nquit\n";
    let o = testpmd(NULL2, script);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let s = &o.stdout;
    assert!(s.contains("Set macswap packet forwarding mode with retry"), "{s}");
    // txonly sends and receives nothing: TX-packets > 0 with RX-packets 0 in its block.
    let blocks: Vec<&str> = s.split("Telling cores to stop...").skip(1).collect();
    assert_eq!(blocks.len(), 5, "{s}");
    let acc = accumulated;
    let (rx, tx) = acc(blocks[0]);
    assert!(rx > 0 && tx == 0, "rxonly: {rx} {tx}");
    let (rx, tx) = acc(blocks[1]);
    assert!(rx == 0 && tx > 0, "txonly only sends: {rx} {tx}");
    assert!(blocks[2].contains("Bad-ipcsum:"), "csum prints checksum counters");
    // csum forwards what it receives (the null ports' packets are valid UDP).
    let (rx, tx) = acc(blocks[2]);
    assert!(rx > 0 && tx == rx, "csum forwards everything: {rx} {tx}");
    // flowgen receives (and frees) what arrives, as DPDK's, and sends its own.
    let (rx, tx) = acc(blocks[3]);
    assert!(rx > 0 && tx > 0, "flowgen receives and sends: {rx} {tx}");
    // macswap with retry on ports that never refuse: everything received is sent.
    let (rx, tx) = acc(blocks[4]);
    assert!(rx > 0 && tx == rx, "macswap retry: {rx} {tx}");
}

#[test]
fn ring_ports_with_tx_first_circulate_packets() {
    let o = testpmd(
        "-l 0-1 --no-huge --vdev net_ring0 --vdev net_ring1 -- -i",
        "start tx_first 4\n@sleep 0.5\nshow fwd stats all\nstop\nquit\n",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let (rx, tx) = accumulated(&o.stdout[o.stdout.find("Telling cores").unwrap()..]);
    // 4 bursts of 32 per port were seeded, then forwarded in a circle.
    assert!(rx > 1000 && tx >= rx, "rx {rx} tx {tx}\n{}", o.stdout);
}

#[test]
fn wrong_input_gets_a_reason_and_the_usage_and_never_crashes() {
    let cases = [
        ("frobnicate", "Bad arguments: unknown command `frobnicate`"),
        ("stat", "(did you mean `start`?)"),
        ("show port stats 9", "Bad arguments: no port 9"),
        ("show port stats x", "`x` is not a port id or `all`"),
        ("show port", "missing info|summary|stats|xstats"),
        ("set fwd fast", "unknown mode `fast`"),
        ("set burst 0", "`0` is not a number in 1..=256\nUsage: set burst N (1..=256)"),
        ("set burst 99999999999999999999", "is not a number in 1..=256"),
        ("set txpkts 10", "total length 10 must be 42..=9000"),
        ("set nbcore 5", "not a number in 1..=1"),
        ("set promisc all maybe", "expected on or off"),
        ("port attach net_nope0", "no driver for device `net_nope0`"),
        ("port attach net_null9,sise=1", "unknown device argument `sise` (did you mean `size`?)"),
        ("port config all rxq 0", "Usage: port config all rxq|txq|rxd|txd N"),
        ("stop", "Packet forwarding not started"),
        ("start tx_first abc", "`abc` is not a number"),
        ("clear fwd nonsense", "Usage:"),
        ("show config nothing", "expected rxtx, cores, fwd, txpkts or rxpkts"),
        ("\u{1b}[A\u{0}\u{7f}", "Bad arguments: unknown command"),
    ];
    let input: String = cases.iter().map(|(c, _)| format!("{c}\n")).collect::<String>() + "help\nhelp set\nquit\n";
    let o = testpmd(NULL2, &input);
    assert_eq!(o.code, 0, "{}", o.stderr);
    for (cmd, want) in cases {
        assert!(o.stdout.contains(want), "`{cmd}` should say `{want}`:\n{}", o.stdout);
    }
    assert!(o.stdout.contains("set fwd io|mac|macswap"), "help lists usages");
    assert!(o.stdout.contains("set burst N (1..=256)"), "help set lists the set commands");
}

#[test]
fn ports_can_be_attached_configured_restarted_and_detached() {
    let o = testpmd(
        NULL2,
        "port attach net_null2,size=128\nport start 2\nport stop all\nport config all rxq 2\nport config all txq 2\nport start all\nshow port info 2\nshow config rxtx\nset nbcore 1\nstart\n@sleep 0.3\nstop\nport detach 2\nshow port summary all\nset promisc 0 off\nshow port info 0\nquit\n",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let s = &o.stdout;
    for want in [
        "Port 2 is attached. Now total ports is 3",
        "Stopping ports...\nChecking link statuses...\nDone\n",
        "Current number of RX queues: 2",
        "RX queue number: 2 Tx queue number: 2",
        "Forward Stats for RX Port= 0/Queue= 1 -> TX Port= 1/Queue= 1",
        "Port 2 is detached. Now total ports is 2",
        "Number of available ports: 2",
        // net_null has no promiscuous operation: DPDK 22.11's text, and it stays on.
        "testpmd> set promisc 0 off\nError during disabling promiscuous mode for port 0: Operation not supported\n",
        "Promiscuous mode: enabled",
    ] {
        assert!(s.contains(want), "missing `{want}` in:\n{s}");
    }
}

#[test]
fn verbose_prints_each_received_packet() {
    // Ring ports seeded with one txonly burst each; rxonly receives them once.
    let o = testpmd(
        "-l 0-1 --no-huge --vdev net_ring0 --vdev net_ring1 -- -i",
        "set verbose 1\nset fwd rxonly\nstart tx_first\n@sleep 0.3\nstop\nquit\n",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let s = &o.stdout;
    assert!(s.contains("Change verbose level from 0 to 1"), "{s}");
    assert!(s.contains("port 0/queue 0: received 32 packets"), "{s}");
    assert_eq!(s.matches("type=0x0800 - length=64 - nb_segs=1").count(), 64, "{s}");
}

#[test]
fn command_file_and_non_interactive_mode() {
    let dir = std::env::temp_dir().join(format!("ironpath-cmdfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("cmds.txt");
    std::fs::write(&f, "set fwd macswap\n# a comment\nshow config rxtx\nstart\nstop\nquit\n").unwrap();
    let o = testpmd(&format!("{NULL2} --cmdline-file={}", f.display()), "");
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("Read CLI commands from"), "{}", o.stdout);
    assert!(o.stdout.contains("macswap packet forwarding packets/burst=32"), "{}", o.stdout);

    // Without -i: starts at once, reports every period, stops after --duration.
    let o = testpmd(
        "-l 0-1 --no-huge --vdev net_null0 --vdev net_null1 -- --forward-mode=io --stats-period 1 --duration 2.5",
        "",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.matches("Port statistics ====").count() >= 2, "{}", o.stdout);
    assert!(o.stdout.contains("rx-Mpps"), "per-second table:\n{}", o.stdout);
    assert!(o.stdout.contains("Accumulated forward statistics"), "{}", o.stdout);
}

#[test]
fn bad_command_line_arguments_are_one_line_errors() {
    let o = testpmd("-l 0-1 --no-huge --vdev net_null0 -- --burst=0", "");
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("invalid value `0` for --burst (accepted 1..=256)"), "{}", o.stderr);
    let o = testpmd("-l 0-1 --vdve net_null0 --", "");
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("unknown runtime argument `--vdve`"), "{}", o.stderr);
    let o = testpmd("-l 0-1 --no-huge --vdev net_null0,size=1 --", "");
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("`size=1` is out of range: accepted 14..=9000"), "{}", o.stderr);
    let o = testpmd("-l 0 --no-huge --vdev net_null0 -- -i", "start\n@sleep 0.3\nquit\n");
    assert_eq!(o.code, 0);
    assert!(o.stdout.contains("no forwarding lcore"), "{}", o.stdout);
}

#[test]
fn txcoalesce_and_txcompletion_batch_and_hold_until_reported() {
    let o = testpmd(
        "-l 0-1 --no-huge --vdev net_null0 --vdev net_null1 -- -i",
        "show port 0 txq\nset txcoalesce 16\nset txcompletion timer_us 10000\nset txcompletion every 0\n\
         start\n@sleep 1\nshow port 0 txq\n@sleep 0.05\nshow port 0 txq\n@sleep 0.05\nshow port 0 txq\n\
         @sleep 0.05\nshow port 0 txq\n@sleep 0.05\nshow port 0 txq\nstop\nshow port 0 txq\nquit\n",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let s = &o.stdout;
    assert!(s.contains("Port 0 TX: coalesce 1 - completion immediate - direct (no batching)"), "{s}");
    assert!(s.contains("TX coalesce set to 16 packets"), "{s}");
    assert!(s.contains("TX completion set to timer_us 10000"), "{s}");
    assert!(s.contains("Bad arguments: `every` needs a positive integer"), "{s}");
    // While forwarding: full batches of 16, and packets held for up to 10 ms.
    let running = &s[s.find("Start").unwrap_or(0)..s.find("Telling cores to stop").unwrap()];
    assert!(running.contains("packets/flush 16.0"), "{running}");
    // The timer releases everything it holds at once, and the lcore publishes its
    // counters every ~1 ms: a snapshot taken just after a release (say, when the lcore
    // was descheduled for over 10 ms on a loaded machine) reads 0. Of five snapshots
    // 50 ms apart, at least one must show packets held.
    let held: Vec<u64> = running
        .match_indices("(driver) +")
        .map(|(i, k)| running[i + k.len()..].split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(held.len(), 5, "{running}");
    assert!(held.iter().any(|&h| h > 0), "the completion timer holds sent packets:\n{running}");
    // After stop every sent packet is reported complete.
    let after = &s[s.rfind("Port 0 TX: coalesce 16").unwrap()..];
    assert_eq!(num_after(after, "sent"), num_after(after, "completions"), "{after}");
    assert_eq!(num_after(after, "(driver) +"), 0, "{after}");
}

#[test]
fn mempool_exhaustion_shows_as_rx_nombuf() {
    // null0 <-> ring_a; ring_a's peer end is never attached, so nobody drains a->b:
    // the ring swallows the whole pool and the null port's RX then finds it empty.
    let o = testpmd(
        "-l 0-1 --no-huge --vdev net_null0 --vdev net_ring_a,link=x,size=4096 \
         -- -i --total-num-mbufs=1024 --mbcache=0",
        "start\n@sleep 0.5\nstop\nshow port stats 0\nquit\n",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let s = &o.stdout;
    let i = s.rfind("NIC statistics for port 0").unwrap();
    let nombuf = num_after(&s[i..], "RX-nombuf:");
    assert!(nombuf > 0, "null RX found the pool empty and counted it:\n{s}");
}

/// Interactive editing in a real terminal: tab completion and history.
/// A testpmd in a tmux pane, killed on drop.
struct Tty(String);

impl Tty {
    /// Starts `ironpath testpmd ARGS`; the pane stays open after it exits so its
    /// last words can be read.
    fn start(name: &str, args: &str) -> Tty {
        let sess = format!("ironpath-{name}-{}", std::process::id());
        let cmd = format!("{BIN} testpmd {args}; sleep 30");
        let ok = Command::new("tmux")
            .args(["new-session", "-d", "-s", &sess, "-x", "200", "-y", "50", &cmd])
            .status()
            .unwrap();
        assert!(ok.success());
        Tty(sess)
    }

    fn keys(&self, k: &[&str]) {
        let mut c = Command::new("tmux");
        c.args(["send-keys", "-t", &self.0]).args(k);
        assert!(c.status().unwrap().success());
    }

    fn screen(&self) -> String {
        let o = Command::new("tmux").args(["capture-pane", "-p", "-t", &self.0, "-S", "-200"]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Waits (20 s at most) until the screen shows `what` `n` times.
    fn wait_for_n(&self, what: &str, n: usize) {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(20) {
            if self.screen().matches(what).count() >= n {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("`{what}` never appeared {n} times:\n{}", self.screen());
    }

    fn wait_for(&self, what: &str) {
        self.wait_for_n(what, 1);
    }
}

impl Drop for Tty {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["kill-session", "-t", &self.0]).status();
    }
}

#[test]
fn interactive_terminal_completion_and_history_tty() {
    if !common::tools_ready(&["tmux"]) {
        return;
    }
    let tty = Tty::start("tty", NULL2);
    tty.wait_for("testpmd>");
    // "sho<Tab> port sum<Tab> all<Enter>" completes to "show port summary all".
    tty.keys(&["sho", "Tab"]);
    tty.keys(&["port sum", "Tab"]);
    tty.keys(&["all", "Enter"]);
    tty.wait_for("Number of available ports: 2");
    assert!(tty.screen().contains("show port summary all"), "{}", tty.screen());
    // History: Up recalls the last command.
    tty.keys(&["Up", "Enter"]);
    tty.wait_for_n("Number of available ports: 2", 2);
    tty.keys(&["quit", "Enter"]);
    tty.wait_for("Bye...");
}

/// Tab in a terminal offers what may come next: port ids and `all` after `show
/// port info`, the engines after `set fwd`, and the usage where the next argument
/// is a number. DPDK 22.11's testpmd, for comparison (recorded on net_null ports):
///
/// ```text
/// testpmd> show port info <Tab>
///  [UINT16]: show|clear port info|summary|stats|xstats|fdir|dcb_tc <port_id>
///  all [Fixed STRING]: show|clear port info|summary|stats|xstats|fdir|dcb_tc all
///  [UINT16]: show port info <port_id> representor
/// testpmd> set fwd <Tab>
///  io [Mul-choice STRING]: set fwd io|mac|macswap|flowgen|rxonly|...: Set packet forwarding mode
///  mac [Mul-choice STRING]: ...
/// ```
#[test]
fn completion_knows_where_it_is_tty() {
    if !common::tools_ready(&["tmux"]) {
        return;
    }
    let tty = Tty::start("complete", NULL2);
    tty.wait_for("testpmd>");
    tty.keys(&["show port info ", "Tab"]);
    tty.wait_for("all");
    let s = tty.screen();
    let list = s.lines().find(|l| l.contains("all") && !l.contains("testpmd>")).unwrap_or_default();
    assert_eq!(list.split_whitespace().collect::<Vec<_>>(), ["0", "1", "all"], "{s}");
    assert!(!s.contains("5tswap"), "{s}");
    // Pick a port and run it: the line kept what was typed.
    tty.keys(&["1", "Enter"]);
    tty.wait_for("Infos for port 1");
    tty.keys(&["set fwd ", "Tab"]);
    tty.wait_for("icmpecho");
    let s = tty.screen();
    let engines: Vec<&str> = s
        .lines()
        .skip_while(|l| !l.contains("testpmd> set fwd"))
        .skip(1)
        .take_while(|l| !l.contains("testpmd>"))
        .flat_map(str::split_whitespace)
        .collect();
    assert_eq!(engines, ["io", "mac", "macswap", "5tswap", "rxonly", "txonly", "flowgen", "csum", "icmpecho"], "{s}");
    tty.keys(&["icm", "Tab", "Enter"]);
    tty.wait_for("Set icmpecho packet forwarding mode");
    tty.keys(&["set burst ", "Tab"]);
    tty.wait_for("<N>: set burst N (1..=256) (packets per burst)");
    tty.keys(&["16", "Enter"]);
    tty.wait_for("Number of packets per burst set to 16");
    tty.keys(&["quit", "Enter"]);
    tty.wait_for("Bye...");
}

/// Port states as DPDK 22.11's testpmd keeps them. Its output for the same
/// commands on two net_null ports (recorded once; MACs vary):
///
/// ```text
/// testpmd> port stop 0
/// Stopping ports...
/// Checking link statuses...
/// Done
/// testpmd> show port summary all
/// Number of available ports: 2
/// Port MAC Address       Name         Driver         Status   Link
/// 0    5A:29:0A:D2:15:9C net_null0    net_null       down     10 Gbps
/// 1    DE:D1:35:70:39:59 net_null1    net_null       up       10 Gbps
/// testpmd> start
/// Not all ports were started
/// testpmd> port close 1
/// Closing ports...
/// Cannot close started device (port 1)
/// Done
/// testpmd> port reset 1
/// Can not reset port(s), please stop port(s) first.
/// testpmd> port start 0
/// Port 0: 5A:29:0A:D2:15:9C
/// Checking link statuses...
/// Done
/// testpmd> port start all
/// Port 0 is now not stopped
/// Port 1 is now not stopped
/// Please stop the ports first
/// Done
/// testpmd> port stop 1
/// ...
/// testpmd> port reset 1
/// Resetting ports...
/// Done
/// testpmd> port close 1
/// Closing ports...
/// Port 1 is closed
/// Done
/// ```
#[test]
fn port_states_follow_dpdk() {
    let o = testpmd(
        NULL2,
        "port stop 0\nshow port summary all\nstart\nport close 1\nport reset 1\nport start 0\nport start all\n\
         show port info 0\nport stop 1\nshow port info 1\nport reset 1\nshow port info 1\nport close 1\n\
         show port summary all\nquit\n",
    );
    let s = &o.stdout;
    assert_eq!(o.code, 0, "{s}{}", o.stderr);
    let expect = [
        "testpmd> port stop 0\nStopping ports...\nChecking link statuses...\nDone\n",
        "Port MAC Address       Name         Driver         Status   Link\n",
        "net_null0    net_null       down     10 Gbps\n",
        "net_null1    net_null       up       10 Gbps\n",
        "testpmd> start\nNot all ports were started\n",
        "testpmd> port close 1\nClosing ports...\nCannot close started device (port 1)\nDone\n",
        "testpmd> port reset 1\nCan not reset port(s), please stop port(s) first.\n",
        "Checking link statuses...\nDone\ntestpmd> port start all\nPort 0 is now not stopped\nPort 1 is now not stopped\n\
         Please stop the ports first\nDone\n",
        "Port state: started\n",
        "Port state: stopped\n",
        "testpmd> port reset 1\nResetting ports...\nDone\n",
        "Port state: stopped (not configured)\n",
        "testpmd> port close 1\nClosing ports...\nPort 1 is closed\nDone\n",
        "Number of available ports: 1\n",
    ];
    let mut at = 0;
    for e in expect {
        let i = s[at..].find(e).unwrap_or_else(|| panic!("`{e}` not found (in order) in:\n{s}"));
        at += i + e.len();
    }
}

/// `start` returns once the forwarding lcores run: a `stop` on the next line finds
/// packets forwarded (DPDK's forwards a few hundred thousand there).
#[test]
fn start_then_stop_at_once_forwards_packets() {
    let o = testpmd(NULL2, "start\nstop\nquit\n");
    let (rx, tx) = accumulated(&o.stdout);
    assert!(rx > 0 && tx > 0, "{}", o.stdout);
}

/// The device commands, in DPDK 22.11's syntax and with its texts where it prints
/// any (recorded once on net_null and net_ring ports):
///
/// ```text
/// testpmd> port config mtu 0 10
/// MTU (10) < device min MTU (46) for port_id 0
/// testpmd> mac_addr set 0 zz                  (DPDK: `set eth-peer 0 zz`)
/// Error: Invalid ethernet address: zz
/// testpmd> show config txpkts
/// Number of segments: 2
/// Segment sizes: 64,64
/// Split packet: off
/// testpmd> set nbport 1
/// Number of forwarding ports set to 1
/// testpmd> show device info all
/// ********************* Infos for device net_null0 *********************
/// Bus name: vdev
/// Driver name: net_null
/// ...
///         Port id: 0
/// testpmd> dump_mempool
/// mempool <mb_pool_0>@0x11fa82c00
///   size=4096
///   ...
///   common_pool_count=4096
/// ```
#[test]
fn device_commands_answer_as_dpdk() {
    let o = testpmd(
        "-l 0-1 --no-huge --vdev net_null0,size=64 --vdev net_null1,size=64 -- -i",
        "port config mtu 0 10\nport config mtu 0 9000\nshow port info 0\nmac_addr set 0 zz\nmac_addr set 0 02:00:00:00:00:07\n\
         show port info 0\nshow rxq info 0 0\nshow txq info 1 0\nshow rxq info 0 3\nset txpkts 64,64\nshow config txpkts\nset rxpkts 64,128\nshow config rxpkts\nset rxpkts 99999\n\
         set eth-peer 1 02:00:00:00:00:99\nset nbport 1\nshow config fwd\nset nbport 2\nset fwd mac\nstart\n@sleep 0.3\nstop\n\
         show device info all\nset xstats-hide-zero on\nshow port xstats 0\ndump_mempool\nset frob\nquit\n",
    );
    let s = &o.stdout;
    assert_eq!(o.code, 0, "{s}{}", o.stderr);
    let expect = [
        "testpmd> port config mtu 0 10\nMTU (10) < device min MTU (68) for port_id 0\n",
        "MTU: 9000\n",
        "testpmd> mac_addr set 0 zz\nError: Invalid ethernet address: zz\n",
        "MAC address: 02:00:00:00:00:07\n",
        "********************* Infos for port 0 , RX queue 0  *********************\nMempool: mb_pool_0\n\
         Rx queue state: started\nNumber of RXDs: 1024\n",
        "********************* Infos for port 1 , TX queue 0  *********************\nTx queue state: started\n\
         Number of TXDs: 1024\n",
        "Failed to retrieve information for port: 0, RX queue: 3\n",
        "testpmd> show config txpkts\nNumber of segments: 2\nSegment sizes: 64,64\nSplit packet: off\n",
        "testpmd> show config rxpkts\nNumber of segments: 2\nSegment sizes: 64,128\n",
        "invalid rxpkts `99999`: expected up to 8 lengths",
        "Number of forwarding ports set to 1\n",
        "io packet forwarding - ports=1 - cores=1 - streams=1",
        "RX P=0/Q=0 (socket 0) -> TX P=0/Q=0 (socket 0) peer=02:00:00:00:00:00\n",
        "Number of forwarding ports set to 2\n",
        "RX P=0/Q=0 (socket 0) -> TX P=1/Q=0 (socket 0) peer=02:00:00:00:00:99\n",
        "********************* Infos for device net_null0 *********************\nBus name: vdev\n",
        "\tPort id: 1 \n",
        "###### NIC extended statistics for port 0",
        "mempool <mb_pool_0>@",
        "  size=",
        "common_pool_count=",
        "accepted after `set`: fwd, burst, txpkts, rxpkts, nbcore, nbport, promisc, allmulti, verbose, link-up, link-down, \
         eth-peer, record-core-cycles, record-burst-stats, xstats-hide-zero, port, gro, txcoalesce, txcompletion",
    ];
    let mut at = 0;
    for e in expect {
        let i = s[at..].find(e).unwrap_or_else(|| panic!("`{e}` not found (in order) in:\n{}", &s[at..]));
        at += i + e.len();
    }
    // xstats-hide-zero: no zero line after the header.
    let x = s.find("###### NIC extended statistics for port 0").unwrap();
    let block: Vec<&str> = s[x..].lines().skip(1).take_while(|l| !l.starts_with("testpmd>")).collect();
    assert!(!block.is_empty() && block.iter().all(|l| !l.trim_end().ends_with(": 0")), "{block:?}");
}

/// `set allmulti`, `mac_addr add|remove` and `set link-up|link-down` (ABI 1.5) on
/// net_ring's soft state (DPDK's net_ring has these operations too). DPDK's texts
/// where the driver lacks them (net_null, recorded once; see
/// `net_null_lacks_operations_as_dpdk`):
///
/// ```text
/// testpmd> set allmulti all off
/// Error during disabling all-multicast mode for port 0: Operation not supported
/// testpmd> mac_addr add 0 02:00:00:00:00:08
/// mac_addr_cmd error: (Operation not supported)
/// testpmd> set link-up port 9
/// Invalid port_id=9
///
/// Set link up fail.
/// ```
/// With the operations, each is silent on success, as DPDK is.
#[test]
fn allmulti_mac_add_and_link_state() {
    let o = testpmd(
        "-l 0-1 --no-huge --vdev net_ring0 --vdev net_ring1 -- -i",
        "set allmulti 0 off\nshow port info 0\nset allmulti all on\nshow port info 1\nmac_addr add 0 02:00:00:00:00:08\n\
         mac_addr remove 0 02:00:00:00:00:08\nmac_addr add 0 01:00:5e:00:00:01\nset link-down port 0\n\
         show port summary all\nset link-up port 0\nshow port summary 0\nset link-up port 9\nquit\n",
    );
    let s = &o.stdout;
    assert_eq!(o.code, 0, "{s}{}", o.stderr);
    let expect = [
        "testpmd> set allmulti 0 off\ntestpmd> show port info 0\n",
        "Allmulticast mode: disabled\n",
        "testpmd> set allmulti all on\ntestpmd> show port info 1\n",
        "Allmulticast mode: enabled\n",
        "testpmd> mac_addr add 0 02:00:00:00:00:08\ntestpmd> mac_addr remove 0 02:00:00:00:00:08\ntestpmd> ",
        "mac_addr_cmd error: (Invalid argument: an added MAC address must be unicast and not zero)\n",
        "net_ring0    net_ring       down     ",
        "net_ring1    net_ring       up       ",
        "net_ring0    net_ring       up       ",
        "testpmd> set link-up port 9\nInvalid port_id=9\n\nSet link up fail.\n",
    ];
    let mut at = 0;
    for e in expect {
        let i = s[at..].find(e).unwrap_or_else(|| panic!("`{e}` not found (in order) in:\n{}", &s[at..]));
        at += i + e.len();
    }
}

/// Software VLAN offloads: `vlan set filter on 0` with `rx_vlan add 100 0` drops
/// tagged frames of other ids (counted as RX-dropped), untagged frames pass, and
/// `vlan set strip on 0` takes the tag out of what is forwarded.
#[test]
fn vlan_filter_and_strip_in_software() {
    use ironpath_pcapfile::{read, Writer};
    let dir = std::env::temp_dir().join(format!("ironpath-vlan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (inp, outp) = (dir.join("in.pcap"), dir.join("out.pcap"));
    let frame = |tag: Option<u16>, k: u8| {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        if let Some(v) = tag {
            f.extend_from_slice(&[0x81, 0x00]);
            f.extend_from_slice(&v.to_be_bytes());
        }
        f.extend_from_slice(&[0x08, 0x00]);
        f.extend(std::iter::repeat_n(k, 46));
        f
    };
    let mut w = Writer::create(&inp, false).unwrap();
    for (tag, k) in [(Some(100), 1), (Some(200), 2), (None, 3), (Some(100), 4)] {
        w.write(&frame(tag, k)).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let args = format!(
        "-l 0-1 --no-huge --vdev net_pcap0,rx_pcap={} --vdev net_pcap1,tx_pcap={} -- -i",
        inp.display(),
        outp.display()
    );
    let o = testpmd(
        &args,
        "vlan set filter on 0\nrx_vlan add 100 0\nvlan set strip on 0\nshow port info 0\nstart\n@sleep 0.5\nstop\nquit\n",
    );
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("VLAN offload: \n  strip on, filter on"), "{}", o.stdout);
    assert!(o.stdout.contains("VLAN filter ids: 100"), "{}", o.stdout);
    let got: Vec<Vec<u8>> = read(&outp).unwrap().into_iter().map(|p| p.data).collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(got, [frame(None, 1), frame(None, 3), frame(None, 4)], "{}", o.stdout);
    let i = o.stdout.find("Forward statistics for port 0").unwrap();
    assert_eq!(num_after(&o.stdout[i..i + 300], "RX-dropped:"), 1, "{}", o.stdout);
}

/// `set record-burst-stats on`: burst lines in the forward statistics, laid out as
/// DPDK 22.11 prints them on net_null (recorded once):
///
/// ```text
///   ---------------------- Forward statistics for port 0  ----------------------
///   RX-packets: 89600          RX-dropped: 0             RX-total: 89600
///   TX-packets: 89600          TX-dropped: 0             TX-total: 89600
///   RX-bursts : 2800 [0% of 0 pkts + 100% of 32 pkts]
///   TX-bursts : 2800 [0% of 0 pkts + 100% of 32 pkts]
///   ----------------------------------------------------------------------------
/// ```
#[test]
fn record_burst_stats_as_dpdk() {
    let o = testpmd(
        NULL2,
        "set record-burst-stats on\nstart\n@sleep 0.3\nstop\nset record-burst-stats off\nstart\nstop\nquit\n",
    );
    let s = &o.stdout;
    assert_eq!(o.code, 0, "{s}{}", o.stderr);
    let i = s.find("Forward statistics for port 0").unwrap();
    let block: Vec<&str> = s[i..].lines().skip(1).take(4).collect();
    assert!(
        block[0].starts_with("  RX-packets: ") && block[0].contains(" RX-dropped: 0             RX-total: "),
        "{block:?}"
    );
    assert!(block[1].starts_with("  TX-packets: "), "{block:?}");
    let rx_pkts: u64 = block[0].split_whitespace().nth(1).unwrap().parse().unwrap();
    for (line, dir) in [(block[2], "RX"), (block[3], "TX")] {
        let rest = line.strip_prefix(&format!("  {dir}-bursts : ")).unwrap_or_else(|| panic!("{block:?}"));
        let bursts: u64 = rest.split_whitespace().next().unwrap().parse().unwrap();
        // net_null fills every burst of 32 (empty polls: none).
        assert!(rest.ends_with("[0% of 0 pkts + 100% of 32 pkts]"), "{line}");
        if dir == "RX" {
            assert_eq!(bursts * 32, rx_pkts, "{line}");
        }
    }
    // Off again: no burst lines in the second stop.
    let second = &s[s.rfind("Forward statistics for port 0").unwrap()..];
    assert!(!second.contains("-bursts"), "{second}");
}

/// RSS on ports without it: `show port 0 rss-hash` says disabled; asking for a
/// hash function says what the port kept (DPDK's wording).
#[test]
fn rss_on_a_port_without_it() {
    let o = testpmd(NULL2, "show port 0 rss-hash\nport config all rss tcp\nport config all rss none\nquit\n");
    let s = &o.stdout;
    for want in [
        "testpmd> show port 0 rss-hash\nRSS disabled\n",
        "Port 0 modified RSS hash function based on hardware support,requested:0x410 configured:0x0\n",
        "rss_hf 0x410\n",
        "testpmd> port config all rss none\nrss_hf 0x0\n",
    ] {
        assert!(s.contains(want), "missing `{want}` in:\n{s}");
    }
}

/// What DPDK 22.11 (22.11.11, Debian 12's dpdk-testpmd) answers on net_null,
/// which has no operation for these, recorded with
/// `dpdk-testpmd --no-huge -m 256 --vdev net_null0 --vdev net_null1 --no-pci -l 0-1 -- -i
/// --total-num-mbufs=4096`:
///
/// ```text
/// testpmd> set promisc 0 off
/// Error during disabling promiscuous mode for port 0: Operation not supported
/// testpmd> set promisc all off
/// Error during disabling promiscuous mode for port 0: Operation not supported
/// Error during disabling promiscuous mode for port 1: Operation not supported
/// testpmd> mac_addr add 0 02:00:00:00:00:01
/// mac_addr_cmd error: (Operation not supported)
/// testpmd> set link-down port 0
///
/// Set link down fail.
/// testpmd> set link-up port 0
///
/// Set link up fail.
/// ```
///
/// Not the same, deliberately: `vlan set strip on 0` (DPDK: `rx_vlan_strip_set(port_pi=0,
/// on=1) failed diag=-22`) works, as testpmd strips in software on every port;
/// `port reset 0` (DPDK: `Failed to reset port 0. diag=-95`) probes the port again,
/// which every ironpath driver supports.
#[test]
fn net_null_lacks_operations_as_dpdk() {
    let o = testpmd(
        NULL2,
        "set promisc 0 off\nset promisc all off\nset promisc 0 on\nmac_addr add 0 02:00:00:00:00:01\n\
         mac_addr remove 0 02:00:00:00:00:01\nset allmulti 0 off\nset link-down port 0\nset link-up port 0\n\
         show port summary 0\nshow port info 0\nquit\n",
    );
    let s = &o.stdout;
    assert_eq!(o.code, 0, "{s}{}", o.stderr);
    let want = "testpmd> set promisc 0 off
Error during disabling promiscuous mode for port 0: Operation not supported
testpmd> set promisc all off
Error during disabling promiscuous mode for port 0: Operation not supported
Error during disabling promiscuous mode for port 1: Operation not supported
testpmd> set promisc 0 on
testpmd> mac_addr add 0 02:00:00:00:00:01
mac_addr_cmd error: (Operation not supported)
testpmd> mac_addr remove 0 02:00:00:00:00:01
mac_addr_cmd error: (Operation not supported)
testpmd> set allmulti 0 off
Error during disabling all-multicast mode for port 0: Operation not supported
testpmd> set link-down port 0

Set link down fail.
testpmd> set link-up port 0

Set link up fail.
testpmd> show port summary 0
";
    assert!(s.contains(want), "expected\n{want}\nin:\n{s}");
    assert!(s.contains("net_null0    net_null       up       10 Gbps"), "the link stayed up:\n{s}");
    assert!(s.contains("Promiscuous mode: enabled\nAllmulticast mode: enabled\n"), "{s}");
}

/// `show port info`'s lines from DPDK 22.11 where ironpath has the facts. DPDK's
/// on net_null (recorded as above; its RSS list is what net_null claims):
///
/// ```text
/// Max possible number of RXDs per queue: 65535
/// Min possible number of RXDs per queue: 0
/// ...
/// Max possible number of TXDs per queue: 65535
/// Min possible number of TXDs per queue: 0
/// ```
///
/// and, on a driver without RSS, `No RSS offload flow type is supported.`
#[test]
fn port_info_has_descriptor_limits_rss_types_and_offloads() {
    let o = testpmd(NULL2, "show port info 0\nquit\n");
    let s = &o.stdout;
    for want in [
        "Max possible number of RXDs per queue: 65535\n",
        "Min possible number of RXDs per queue: 0\n",
        "Max possible number of TXDs per queue: 65535\nMin possible number of TXDs per queue: 0\n",
        "No RSS offload flow type is supported.\n",
        "Rx offload capabilities: 0x0\n",
        // net_null claims what it cannot fail at: checksums and segmentation.
        "Tx offload capabilities: 0xe00000000 (TCP_CKSUM UDP_CKSUM TCP_TSO)\n",
    ] {
        assert!(s.contains(want), "missing `{want}` in:\n{s}");
    }
}

/// `start` prints the streams and then the rxtx configuration, as DPDK 22.11 does.
/// DPDK's on two net_null ports with `--flowgen-flows=7` (recorded as above):
///
/// ```text
///   RX P=1/Q=0 (socket 0) -> TX P=0/Q=0 (socket 0) peer=02:00:00:00:00:00
///
///   number of flows for port 0: 7
///   number of flows for port 1: 7
///   flowgen packet forwarding packets/burst=32
///   packet len=64 - nb packet segments=1
///   nb forwarding cores=1 - nb forwarding ports=2
///   port 0: RX queue number: 1 Tx queue number: 1
///     Rx offloads=0x0 Tx offloads=0x0
///     RX queue: 0
///       RX desc=0 - RX free threshold=0
///       RX threshold registers: pthresh=0 hthresh=0  wthresh=0
///       RX Offloads=0x0
///     TX queue: 0
///       TX desc=0 - TX free threshold=0
///       TX threshold registers: pthresh=0 hthresh=0  wthresh=0
///       TX offloads=0x0 - TX RS bit threshold=0
/// ```
///
/// and for `io` the same without the flow and packet-length lines. ironpath's
/// queues have no threshold registers, so those lines are left out; its
/// descriptor counts are the queues' own (`--rxd`/`--txd`, 1024 by default).
/// flowgen's RX counts, as DPDK's (it receives and frees before it sends).
#[test]
fn start_prints_the_rxtx_configuration_and_flowgen_uses_its_flows() {
    let o = testpmd(
        "-l 0-1 --no-huge --vdev net_null0,size=64 --vdev net_null1,size=64 -- -i --flowgen-flows=7",
        "set fwd flowgen\nstart\n@sleep 0.3\nstop\nset fwd io\nstart\nstop\nquit\n",
    );
    let s = &o.stdout;
    assert_eq!(o.code, 0, "{s}{}", o.stderr);
    let flowgen = "peer=02:00:00:00:00:00

  number of flows for port 0: 7
  number of flows for port 1: 7
  flowgen packet forwarding packets/burst=32
  packet len=64 - nb packet segments=1
  nb forwarding cores=1 - nb forwarding ports=2
  port 0: RX queue number: 1 Tx queue number: 1
    Rx offloads=0x0 Tx offloads=0x0
    RX queue: 0
      RX desc=1024 - RX free threshold=0
      RX Offloads=0x0
    TX queue: 0
      TX desc=1024 - TX free threshold=0
      TX offloads=0x0
  port 1: RX queue number: 1 Tx queue number: 1
";
    assert!(s.contains(flowgen), "expected\n{flowgen}\nin:\n{s}");
    let io = "peer=02:00:00:00:00:00

  io packet forwarding packets/burst=32
  nb forwarding cores=1 - nb forwarding ports=2
  port 0: RX queue number: 1 Tx queue number: 1
";
    assert!(s.contains(io), "expected\n{io}\nin:\n{s}");
    let (rx, tx) = accumulated(&s[s.find("Telling cores to stop").unwrap()..]);
    assert!(rx > 0 && tx > 0, "flowgen receives and sends: {rx} {tx}");
}

/// After `port close`, `show fwd stats all` has no block for the closed port or its
/// streams. (DPDK 22.11 prints `Invalid port_id=1` and `fwd_stats_display: Error:
/// failed to get stats (port 1): -19` there instead of a block; ironpath prints
/// nothing for it.)
#[test]
fn fwd_stats_after_port_close_has_no_stale_blocks() {
    let o = testpmd(
        NULL2,
        "port stop all\nport config all rxq 2\nport config all txq 2\nport start all\nstart\n@sleep 0.2\nstop\n\
         show fwd stats all\nport stop 1\nport close 1\nshow fwd stats all\nquit\n",
    );
    let s = &o.stdout;
    assert_eq!(o.code, 0, "{s}{}", o.stderr);
    let before = &s[s.find("testpmd> show fwd stats all").unwrap()..s.find("testpmd> port stop 1").unwrap()];
    // Four streams on two ports: the per-stream blocks are there while both exist.
    assert!(before.contains("RX Port= 1/Queue= 1") && before.contains("statistics for port 1"), "{before}");
    let after = &s[s.rfind("testpmd> show fwd stats all").unwrap()..];
    assert!(after.contains("Forward statistics for port 0"), "{after}");
    assert!(!after.contains("Port= 1") && !after.contains("port 1"), "stale block:\n{after}");
}

/// `show trace max N` prints the first N records and says how many it left out.
#[test]
fn show_trace_max_n_parses() {
    let cfg = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/default.yaml");
    let o = testpmd(
        "-l 0-1 --no-huge -- -i",
        &format!(
            "show trace max\nshow trace max 0\nshow trace max 2 3\npipeline load {}\n@sleep 1\ntrace add swap 5\n@sleep 0.5\n\
             show trace max 2\ntrace add swap 5\n@sleep 0.5\nclear trace\nshow trace\npipeline stop\nquit\n",
            cfg.display()
        ),
    );
    let s = &o.stdout;
    assert_eq!(o.code, 0, "{s}{}", o.stderr);
    assert!(s.contains("testpmd> show trace max\nBad arguments: missing number\nUsage: show trace [max N]\n"), "{s}");
    assert!(s.contains("testpmd> show trace max 0\nBad arguments: `0` is not a number in 1..=1000000\n"), "{s}");
    assert!(s.contains("testpmd> show trace max 2 3\nBad arguments: unexpected `3`\n"), "{s}");
    let shown = &s[s.find("testpmd> show trace max 2\n").unwrap()..];
    let records = shown.lines().take_while(|l| !l.starts_with("testpmd> trace add")).collect::<Vec<_>>();
    assert_eq!(records.iter().filter(|l| l.starts_with("lcore 1 swap: +") && l.contains("len 64")).count(), 2, "{s}");
    assert!(records.contains(&"(3 more records not shown, discarded)"), "{s}");
    assert!(s.contains("testpmd> clear trace\ntrace cleared\ntestpmd> show trace\nno trace records"), "{s}");
}

/// Every line of the completion grammar is a command the shell runs: each form
/// (every keyword alternative, with and without its optional tail, sample values
/// for the arguments) is accepted by the dispatcher's syntax, whatever the command
/// then says about the state it finds (no pipeline, port not stopped ...).
#[test]
fn every_completion_grammar_line_is_a_command() {
    use ironpath::testpmd::commands::complete::GRAMMAR;
    let sample = |arg: &str| -> &str {
        match arg {
            "<port>" | "<QUEUE>" => "0",
            "<port|all>" => "all",
            "<engine>" => "io",
            "<command>" => "set",
            "<MAC>" => "02:00:00:00:00:09",
            "<LEN[,LEN...]>" => "64",
            "<NAME>" => "net_null0",
            "<DEVARGS>" => "net_null7",
            "<FILE>" => "/nonexistent.yaml",
            "<NODE>" => "swap",
            "<VID>" | "<T>" => "100",
            "<SECS>" => "0.1",
            _ => "1",
        }
    };
    let mut lines: Vec<String> = Vec::new();
    for g in GRAMMAR {
        // Forms: each prefix that ends before an optional word, and the whole.
        let words: Vec<&str> = g.pattern.split(' ').collect();
        let mut ends: Vec<usize> = (0..words.len()).filter(|&i| words[i].starts_with('[')).collect();
        ends.push(words.len());
        for end in ends {
            let mut forms = vec![String::new()];
            for w in &words[..end] {
                let w = w.trim_start_matches('[').trim_end_matches(']');
                let alts: Vec<&str> = if w.starts_with('<') { vec![sample(w)] } else { w.split('|').collect() };
                forms = forms.iter().flat_map(|f| alts.iter().map(move |a| format!("{f} {a}"))).collect();
            }
            lines.extend(forms.into_iter().map(|f| f.trim().to_string()));
        }
    }
    // What ends the session or takes ports away goes last; quit is the harness's.
    let last = |l: &String| ["port close", "port detach", "port reset", "port stop"].iter().any(|p| l.starts_with(p));
    // Bare `monitor` runs for 10 s; its forms with arguments are kept.
    lines.retain(|l| l != "quit" && l != "exit" && l != "monitor");
    lines.sort_by_key(last);
    let o = testpmd(NULL2, &(lines.join("\n") + "\nstop\nquit\n"));
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let s = &o.stdout;
    for l in &lines {
        let at = s.find(&format!("testpmd> {l}\n")).unwrap_or_else(|| panic!("`{l}` not run:\n{s}"));
        let rest = &s[at + l.len() + 10..];
        let answer = &rest[..rest.find("testpmd> ").unwrap_or(rest.len())];
        for syntax_error in ["unknown", "accepted after", "unexpected `", "expected ", "missing ", "is not a"] {
            assert!(!answer.contains(syntax_error), "`{l}` refused as syntax:\n{answer}");
        }
    }
}

/// The table commands of a loaded pipeline's nodes, in testpmd's own shell (as
/// `ironpath ctl` gives them): routes, an acl rule, and bad input refused.
#[test]
fn the_shell_changes_a_loaded_pipelines_tables() {
    let dir = std::env::temp_dir().join(format!("ironpath-tables-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("tables.yaml");
    std::fs::write(
        &cfg,
        "name: tables\nmempools:\n  - {name: pkts, size: 4096}\nports:\n  - {name: a, driver: net_null, args: \"size=64\"}\n  \
         - {name: b, driver: net_null, args: \"size=64\"}\nlcores:\n  - id: 1\nnodes:\n  \
         - {name: rx_a, type: port_rx, lcore: 1, params: {port: a}}\n  - {name: fw, type: acl, lcore: 1}\n  \
         - name: r\n    type: ip_router\n    lcore: 1\n    params:\n      interfaces:\n        \
         - {port: a, addresses: \"198.18.1.1/24\"}\n        - {port: b, addresses: \"198.18.2.1/24\"}\n  \
         - {name: tx_a, type: port_tx, lcore: 1, params: {port: a}}\n  - {name: tx_b, type: port_tx, lcore: 1, params: {port: b}}\n\
         edges:\n  - {from: rx_a, to: fw}\n  - {from: fw, to: r}\n  - {from: r, next: a, to: tx_a}\n  - {from: r, next: b, to: tx_b}\n",
    )
    .unwrap();
    let o = testpmd(
        "-l 0-1 --no-huge -- -i",
        &format!(
            "ip route add 198.19.0.0/16 via 198.18.2.2\npipeline load {}\n@sleep 0.5\n\
             ip route add 198.19.0.0/16 via 198.18.2.2\nip route add 198.19.0.0/16 via 203.0.113.1\nshow ip route\n\
             acl rule add deny proto udp dport 53\nshow acl\nbridge mac flush\npipeline stop\nquit\n",
            cfg.display()
        ),
    );
    let _ = std::fs::remove_dir_all(&dir);
    let s = &o.stdout;
    assert_eq!(o.code, 0, "{s}{}", o.stderr);
    assert!(s.contains("testpmd> ip route add 198.19.0.0/16 via 198.18.2.2\nno pipeline running"), "{s}");
    assert!(s.contains("198.19.0.0/16 via 198.18.2.2 port b: added"), "{s}");
    assert!(s.contains("gateway 203.0.113.1 is on no interface's subnet"), "{s}");
    assert!(s.contains("198.19.0.0/16 via 198.18.2.2 port b\n"), "show ip route: {s}");
    assert!(s.contains("rule 0 added: 1 rules"), "{s}");
    assert!(s.contains("     0: deny proto 17 dport 53"), "{s}");
    assert!(s.contains("testpmd> bridge mac flush\nno node of the pipeline takes `bridge mac flush`"), "{s}");
}
