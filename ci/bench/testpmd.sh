#!/usr/bin/env bash
# ironpath testpmd vs DPDK's dpdk-testpmd, side by side on the same machine in one run.
#
# Configurations (1 forwarding core, burst 32, 64-byte packets), each with 2 MiB
# hugepages and with --no-huge:
#   net_null pair: io, macswap, rxonly, txonly
#   net_ring pair (each port loops to itself, seeded with `start tx_first 8`): io, macswap
# For each, the two programs run alternately REPS times; each run: start, 2 s warm-up,
# `show port stats all`, DUR s, `show port stats all`, stop, quit. The rate is the sum
# of the ports' Rx-pps (Tx-pps for txonly) over the window; cycles/packet is the
# program's own `CPU cycles/packet=` (--record-core-cycles). The table shows medians
# and the ratio ours/DPDK.
#
# Usage (root):  ci/bench/testpmd.sh        env: REPS=3 DUR=3 MODES="io macswap rxonly txonly" MEM="huge nohuge"
set -euo pipefail
cd "$(dirname "$0")/../.."
REPS=${REPS:-3}
DUR=${DUR:-3}
NULL_MODES=${MODES:-io macswap rxonly txonly}
RING_MODES=${RING_MODES:-io macswap}
MEMS=${MEM:-huge nohuge}
OUT=${OUT:-target/bench/testpmd}
mkdir -p "$OUT"

if ! command -v dpdk-testpmd >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq dpdk >/dev/null
fi
cargo build --release --workspace --locked -q
OURS="$PWD/target/release/ironpath testpmd"
DPDK=dpdk-testpmd

prev_hp=$(cat /proc/sys/vm/nr_hugepages)
mounted=0
cleanup() {
    echo "$prev_hp" >/proc/sys/vm/nr_hugepages
    if [ "$mounted" = 1 ]; then umount /dev/hugepages || true; fi
}
trap cleanup EXIT
echo 1024 >/proc/sys/vm/nr_hugepages
if ! mountpoint -q /dev/hugepages; then
    mkdir -p /dev/hugepages && mount -t hugetlbfs none /dev/hugepages && mounted=1
fi

# run_one PROG TAG EAL APP STARTCMD -> prints "Mpps cycles"
run_one() {
    local prog=$1 tag=$2 eal=$3 app=$4 startcmd=$5 log="$OUT/$2.log"
    {
        sleep 2; echo "$startcmd"; sleep 2; echo "show port stats all"; sleep "$DUR"
        echo "show port stats all"; echo "stop"; sleep 1; echo "quit"
    } | timeout -k 5 $((DUR + 40)) $prog $eal -- -i $app >"$log" 2>&1 || true
    python3 - "$log" "$tag" <<'PY'
import re, sys
txt = open(sys.argv[1], errors="replace").read()
tx_mode = "txonly" in sys.argv[2]
ports = {}
for m in re.finditer(r"NIC statistics for port (\d+)\s+#+(.*?)#{20,}", txt, re.S):
    rx = re.search(r"Rx-pps:\s+(\d+)", m.group(2)); tx = re.search(r"Tx-pps:\s+(\d+)", m.group(2))
    if rx and tx:
        ports[int(m.group(1))] = int(tx.group(1) if tx_mode else rx.group(1))
cyc = re.findall(r"CPU cycles/packet=([\d.]+)", txt)
print(f"{sum(ports.values())/1e6:.2f} {cyc[-1] if cyc else 'nan'}")
PY
}

declare -A RES
configs=()
for mem in $MEMS; do
    if [ "$mem" = nohuge ]; then memarg="--no-huge -m 1024"; else memarg=""; fi
    for m in $NULL_MODES; do configs+=("null|$m|$mem|-l 0-1 -n 1 --no-pci $memarg --vdev=net_null0,size=64 --vdev=net_null1,size=64|start"); done
    for m in $RING_MODES; do configs+=("ring|$m|$mem|-l 0-1 -n 1 --no-pci $memarg --vdev=net_ring0 --vdev=net_ring1|start tx_first 8"); done
done
APP="--nb-cores=1 --burst=32 --txpkts=64 --record-core-cycles"

for c in "${configs[@]}"; do
    IFS='|' read -r pmd mode mem eal startcmd <<<"$c"
    for r in $(seq 1 "$REPS"); do
        for who in dpdk ours; do
            prog=$DPDK; [ "$who" = ours ] && prog=$OURS
            res=$(run_one "$prog" "${pmd}_${mode}_${mem}_${who}_r$r" "$eal" "$APP --forward-mode=$mode" "$startcmd")
            RES["$pmd|$mode|$mem|$who"]+="$res;"
            echo "  $pmd $mode $mem $who run $r: $res" >&2
        done
    done
done

echo
echo "| PMD | mode | memory | DPDK Mpps | ours Mpps | ratio ours/DPDK | DPDK cycles/pkt | ours cycles/pkt |"
echo "|---|---|---|---|---|---|---|---|"
for c in "${configs[@]}"; do
    IFS='|' read -r pmd mode mem _ _ <<<"$c"
    python3 - "${RES[$pmd|$mode|$mem|dpdk]}" "${RES[$pmd|$mode|$mem|ours]}" "$pmd" "$mode" "$mem" <<'PY'
import sys, statistics as st
def med(s, i):
    v = [float(x.split()[i]) for x in s.split(";") if x.strip()]
    v = [x for x in v if x == x]
    return st.median(v) if v else float("nan")
d, o = sys.argv[1], sys.argv[2]
dm, om, dc, oc = med(d, 0), med(o, 0), med(d, 1), med(o, 1)
ratio = om / dm if dm > 0 else float("nan")
print(f"| {sys.argv[3]} | {sys.argv[4]} | {sys.argv[5]} | {dm:.1f} | {om:.1f} | {ratio:.2f} | {dc:.1f} | {oc:.1f} |")
PY
done
echo
echo "medians of $REPS runs of ${DUR}s each; raw logs in $OUT/"
