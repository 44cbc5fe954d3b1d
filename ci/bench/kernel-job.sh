# Shared by the benchmarks that compare a pipeline of ours with the Linux kernel doing
# the same job on one core (ci/bench-vxlan, ci/bench-nat44). Sourced, with OUT, OURS,
# DUR, CPU and NS set by the caller.
#
# Ours: a pcap replayed from memory (net_pcap, infinite_rx=1) through the pipeline
# into net_null ports; the rate is what those ports sent over DUR s after a warm-up.
# The kernel: ironpath replays the same pcap onto a veth end (af_packet) whose peer
# is in namespace $NS, from CPU $CPU; the kernel does the job in that sender's
# context on the same CPU, and the rate is what the sink interfaces sent. The sender
# alone is measured too (the veth end given another MAC, so the kernel drops each
# frame as soon as the veth hands it over), and the kernel's own rate is estimated
# as 1 / (1/K - 1/S), the CPU's rate with the sender's cost taken off (which favours
# the kernel).

# The MAC our pcap port reports (the frames are addressed to it).
probe_mac() {
    python3 -c "import struct,sys; open(sys.argv[1],'wb').write(struct.pack('<IHHiIIIIIII',0xa1b2c3d4,2,4,0,0,65535,1,0,0,60,60)+bytes(60))" "$OUT/probe.pcap"
    (sleep 2; echo "show port info 0"; sleep 1; echo quit) |
        timeout 20 "$OURS" testpmd --no-huge --vdev "net_pcap0,rx_pcap=$OUT/probe.pcap" -- -i 2>/dev/null |
        awk '/MAC address:/ {print $3; exit}'
}

# sender_yaml IFACE: the pipeline replaying $OUT/in.pcap onto IFACE.
sender_yaml() {
    cat >"$OUT/sender.yaml" <<EOF
name: kernel-job-sender
mempools:
  - {name: pkts, size: 16383, cache: 256}
ports:
  - {name: in, driver: net_pcap, args: "rx_pcap=$OUT/in.pcap,infinite_rx=1"}
  - {name: out, driver: net_af_packet, args: "iface=$1"}
lcores:
  - {id: 0, cpu: $CPU}
nodes:
  - {name: rx, type: port_rx, lcore: 0, params: {port: in}}
  - {name: tx, type: port_tx, lcore: 0, params: {port: out}}
edges:
  - {from: rx, to: tx}
EOF
}

# ours YAML PORT... -> Mpps the pipeline sent out of the ports over the window
ours() {
    local yaml=$1
    shift
    local f="$OUT/ours.jsonl"
    rm -f "$f"
    timeout -k 5 $((DUR + 30)) "$OURS" run "$yaml" --duration $((DUR + 3)) --stats-period 1 \
        --file-prefix "kjob-ours-$$" --stats-json "$f" >"$OUT/ours.log" 2>&1 || { tail -5 "$OUT/ours.log" >&2; echo 0; return; }
    python3 - "$f" "$DUR" "$@" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
dur, ports = int(sys.argv[2]), sys.argv[3:]
sent = lambda l: sum(l["ports"][p]["opackets"] for p in ports)
a, b = lines[1], lines[min(1 + dur, len(lines) - 1)]
secs = b.get("t", 0) - a.get("t", 0) or (min(1 + dur, len(lines) - 1) - 1)
print(f"{(sent(b) - sent(a)) / secs / 1e6:.3f}")
PY
}

# kernel IFACE MAC SINK... -> "sinks-Mpps sender-Mpps": IFACE (in $NS) given MAC, the
# pcap sent into it; what the sinks (in $NS) and the sender sent over the window
kernel() {
    local iface=$1 mac=$2
    shift 2
    ip netns exec "$NS" ip link set "$iface" address "$mac"
    local f="$OUT/sender.jsonl"
    rm -f "$f"
    timeout -k 5 $((DUR + 30)) "$OURS" run "$OUT/sender.yaml" --duration $((DUR + 3)) --stats-period 1 \
        --file-prefix "kjob-sender-$$" --stats-json "$f" >"$OUT/sender.log" 2>&1 &
    local pid=$!
    sleep 2
    local a t0 b t1
    a=$(sinks "$@"); t0=$(date +%s.%N)
    sleep "$DUR"
    b=$(sinks "$@"); t1=$(date +%s.%N)
    wait "$pid" || true
    python3 - "$a" "$b" "$t0" "$t1" "$f" "$DUR" <<'PY'
import json, sys
a, b, t0, t1 = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
lines = [json.loads(l) for l in open(sys.argv[5]) if l.strip()]
dur = int(sys.argv[6])
la, lb = lines[1], lines[min(1 + dur, len(lines) - 1)]
secs = lb.get("t", 0) - la.get("t", 0) or (min(1 + dur, len(lines) - 1) - 1)
sender = (lb["ports"]["out"]["opackets"] - la["ports"]["out"]["opackets"]) / secs / 1e6
print(f"{(b - a) / (t1 - t0) / 1e6:.3f} {sender:.3f}")
PY
}

# Packets the sink interfaces (in $NS) sent.
sinks() {
    local s=0 d
    for d in "$@"; do
        s=$((s + $(ip netns exec "$NS" cat "/sys/class/net/$d/statistics/tx_packets")))
    done
    echo "$s"
}

# alternate JOB YAML OURS_PORTS IFACE MAC SINKS: REPS rounds of ours, the kernel and
# the sender alone, then the table row (medians) for JOB.
alternate() {
    local job=$1 yaml=$2 ports=$3 iface=$4 mac=$5 sinks_=$6
    echo "rep ours_mpps kernel_with_sender_mpps sender_mpps sender_alone_mpps kernel_alone_mpps" | tee "$OUT/runs.txt"
    local r o k kdone s est
    for r in $(seq 1 "$REPS"); do
        # shellcheck disable=SC2086
        o=$(ours "$yaml" $ports)
        # shellcheck disable=SC2086
        read -r k kdone < <(kernel "$iface" "$mac" $sinks_)
        # shellcheck disable=SC2086
        read -r _ s < <(kernel "$iface" 02:00:00:00:00:99 $sinks_)
        est=$(python3 -c "import sys; k, s = float(sys.argv[1]), float(sys.argv[2]); print(f'{1 / (1 / k - 1 / s):.3f}' if 0 < k < s else '0')" "$k" "$s")
        echo "$r $o $k $kdone $s $est" | tee -a "$OUT/runs.txt"
    done
    python3 - "$OUT/runs.txt" "$job" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:] if l.strip()]
ours = [float(r[1]) for r in rows]
kern = [float(r[5]) for r in rows]
raw = [float(r[2]) for r in rows]
so, sk = statistics.median(ours), statistics.median(kern)
ratio = f"{so / sk:.1f}x" if sk > 0 else "-"
worst = f"{min(ours) / max(kern):.1f}x" if max(kern) > 0 else "-"
print(f"\n| job | ours Mpps | kernel Mpps (alone, est.) | kernel + sender Mpps | ours / kernel | slowest ours / fastest kernel |")
print(f"|---|---|---|---|---|---|")
print(f"| {sys.argv[2]} | {so:.2f} | {sk:.3f} | {statistics.median(raw):.3f} | {ratio} | {worst} |")
PY
}
