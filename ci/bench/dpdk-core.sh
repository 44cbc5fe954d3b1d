#!/usr/bin/env bash
# DPDK baseline for ironpath's core data structures: rte_mempool and rte_ring, measured with
# Debian's DPDK 22.11 unit-test binary `dpdk-test` (ring_perf_autotest, mempool_perf_autotest).
# Prints a markdown table (ns per object) plus the raw dpdk-test lines behind each figure.
#
# Usage (as root, from anywhere):  ci/bench/dpdk-core.sh
# Env:
#   OUT=target/bench/dpdk-core  raw logs + summary.md (relative paths are taken from the repo root)
#   LCORES=0-1                  EAL core list (main lcore + 1 worker gives the 2-core figures)
#   RING_REPS=5                 ring_perf_autotest repetitions (~6 s each); table: best and median
#   MEMPOOL_MODE=scaled         scaled | full | skip   (see "mempool_perf duration" below)
#   MEMPOOL_SCALE=20            scaled mode: each (cache,bulk,keep) combination runs 5 s / SCALE
#   MEMPOOL_REPS=3              mempool_perf_autotest repetitions (~2 min each when scaled)
#   RUN_TIMEOUT=300             hard bound (s) of every dpdk-test run (full mode: MEMPOOL_TIMEOUT=3000)
#   HUGEPAGES=0                 N>0: reserve N 2 MiB pages for the run (restored afterwards);
#                               otherwise hugepages are used only if HugePages_Free*2MiB >= 128 MiB,
#                               else --no-huge -m 512
#   QUIET_WAIT=30               wait up to this many seconds for the machine to be <10% busy
#
# How the figures are converted (read from DPDK 22.11 app/test/test_{ring,mempool}_perf.c):
#  * ring, one core ("### Testing burst|bulk enq/deq ###", "legacy APIs" = pointer-sized objects):
#    value = TSC cycles per iteration, one iteration = enqueue of 32 + dequeue of 32 on the same
#    core (NOT per element in 22.11).  ns/object = value / 32 / TSC_GHz.
#  * ring, two cores ("### Testing using two physical cores|hyperthreads|NUMA nodes ###", bulk only):
#    value = producer's cycles per enqueued object + consumer's cycles per dequeued object (each
#    measured on its own core, running concurrently).  ns/object = value / TSC_GHz: the CPU time
#    spent per object, summed over both cores (the wall time per object is about half of that).
#  * mempool: line "mempool_autotest cache=C cores=K n_get_bulk=32 n_put_bulk=32 n_keep=32
#    constant_n=0 rate_persec=R": each core loops {get 32 objects in one bulk; put them back in
#    one bulk}; R = objects got+put per second summed over the K cores.
#    ns/object/core = K * 1e9 / R  (time one core spends on one get+put of one object).
#    "with cache" = section "start performance test (with cache)" (per-lcore cache of 512);
#    "without cache" = section "start performance test (without cache)" (ring_mp_mc, no cache).
#    For K=2 the first cores=2 pass is used (with -l 0-1 the "max cores" pass repeats it).
#  * TSC GHz: from DPDK's own "EAL: TSC frequency is ~N KHz" (printed at lib.eal:debug);
#    fallback /proc/cpuinfo "cpu MHz".  DPDK's cycles are TSC ticks, so this conversion is exact
#    even if the core clock differs from the TSC.
# mempool_perf duration: 22.11 hard-codes 5 s per combination and runs 720 combinations
# (~1 h; the with-cache 2-core line only appears after ~40 min) with no option to shorten it.
#   scaled (default): LD_PRELOAD a 10-line shim that makes rte_get_tsc_hz() return TSC_hz/SCALE,
#     so each combination's 5 s loop runs 5/SCALE s; the printed rate (count / 5 s) is then
#     multiplied by SCALE.  Stops as soon as the needed lines are out (~2 min at SCALE=20).
#     Error: each combination overruns by < 1 inner loop of 65536 objects (< 0.1% here).  Checked
#     against unmodified runs: scaled/unmodified rate over 59 one-core combinations, geomean 0.985,
#     the same as between two unmodified runs; single combinations scatter ~10%, hence MEMPOOL_REPS.
#   full: unmodified; stops once the needed lines are out (~40 min), bounded by MEMPOOL_TIMEOUT.
# Memory: HUGEPAGES=64 and --no-huge gave the same best-of-N figures within noise on this VM; the
# summary's EAL line says which was used.  Noise here is bursty and partly from outside the VM
# (repetitions can be bimodal even when runs.txt shows no other load): compare best-of-N figures.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-target/bench/dpdk-core}
LCORES=${LCORES:-0-1}
RING_REPS=${RING_REPS:-5}
MEMPOOL_MODE=${MEMPOOL_MODE:-scaled}
MEMPOOL_SCALE=${MEMPOOL_SCALE:-20}
MEMPOOL_REPS=${MEMPOOL_REPS:-3}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
if [ "$MEMPOOL_MODE" = full ]; then MEMPOOL_TIMEOUT=${MEMPOOL_TIMEOUT:-3000}; else MEMPOOL_TIMEOUT=${MEMPOOL_TIMEOUT:-$RUN_TIMEOUT}; fi
HUGEPAGES=${HUGEPAGES:-0}
QUIET_WAIT=${QUIET_WAIT:-30}
PREFIX=ipbench$$
T0=$(date +%s)

die() { echo "dpdk-core.sh: ERROR: $*" >&2; exit 1; }
warn() { echo "dpdk-core.sh: WARN: $*" >&2; }
[ "$(id -u)" = 0 ] || die "must run as root (DPDK EAL, hugepages, apt)"
mkdir -p "$OUT" || die "cannot create OUT=$OUT"
OUT=$(cd "$OUT" && pwd)
rm -f "$OUT"/*.log "$OUT"/summary.md "$OUT"/runs.txt

# ---------------------------------------------------------------- 1. install if needed
apt_wait() { # run an apt-get command, waiting (up to ~10 min) for other apt/dpkg runs to finish
  local i rc
  for ((i = 0; i < 60; i++)); do
    apt-get -o DPkg::Lock::Timeout=600 "$@" >"$OUT/apt.try" 2>&1; rc=$?
    cat "$OUT/apt.try" >>"$OUT/apt.log"
    [ $rc = 0 ] && return 0
    grep -qiE 'could not get lock|unable to acquire|is another process using it' "$OUT/apt.try" || return 1
    echo "waiting for the apt/dpkg lock (another apt-get/dpkg is running)..." >&2; sleep 10
  done
  return 1
}
if ! command -v dpdk-test >/dev/null 2>&1; then
  echo "dpdk-test not found: installing Debian's dpdk dpdk-dev (log: $OUT/apt.log)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt_wait update || die "apt-get update failed (see $OUT/apt.log)"
  apt_wait install -y dpdk dpdk-dev || die "apt-get install dpdk dpdk-dev failed (see $OUT/apt.log)"
  command -v dpdk-test >/dev/null 2>&1 || die "dpdk-test still missing after installing dpdk-dev"
fi
DPDK_VER=$(dpkg-query -W -f='${Version}' dpdk 2>/dev/null || echo unknown)

# ---------------------------------------------------------------- memory: hugepages or not
HP_PREV=$(cat /proc/sys/vm/nr_hugepages); HP_SET=0; HP_MNT=0
cleanup() {
  rm -rf "/var/run/dpdk/$PREFIX"
  rm -f /dev/hugepages/"$PREFIX"map_* 2>/dev/null
  [ "$HP_MNT" = 1 ] && umount /dev/hugepages
  [ "$HP_SET" = 1 ] && echo "$HP_PREV" >/proc/sys/vm/nr_hugepages
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ "$HUGEPAGES" -gt 0 ] 2>/dev/null; then
  echo "$HUGEPAGES" >/proc/sys/vm/nr_hugepages && HP_SET=1
fi
hp_free=$(awk '/^HugePages_Free/{f=$2} /^Hugepagesize/{s=$2} END{print int(f*s/1024)}' /proc/meminfo)
if [ "$hp_free" -ge 128 ]; then
  mountpoint -q /dev/hugepages || { mkdir -p /dev/hugepages && mount -t hugetlbfs none /dev/hugepages && HP_MNT=1; }
  MEM="--huge-unlink"; MEMDESC="hugepages (${hp_free} MiB free)"
else
  [ "$HP_SET" = 1 ] && warn "asked for $HUGEPAGES hugepages, got ${hp_free} MiB free: using --no-huge"
  MEM="--no-huge -m 512"; MEMDESC="--no-huge -m 512"
fi
EAL="-l $LCORES -n 1 --no-pci --file-prefix=$PREFIX $MEM"

# ---------------------------------------------------------------- helpers
cpustat() { awk '/^cpu /{print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat; }
busy_pct() { local a b; a=($(cpustat)); sleep 1; b=($(cpustat)); echo $(( 100 * (b[0]-a[0]) / (b[1]-a[1] + 1) )); }
wait_quiet() { # $1 = tag; records how busy the machine was before the run
  local i p=100
  for ((i = 0; i < QUIET_WAIT; i++)); do p=$(busy_pct); [ "$p" -lt 10 ] && break; done
  echo "$1: machine ${p}% busy before start (load $(cut -d' ' -f1-3 /proc/loadavg))" >>"$OUT/runs.txt"
  [ "$p" -ge 10 ] && { warn "machine still ${p}% busy before $1: figures may be noisy"; BUSY_RUNS="$BUSY_RUNS $1(${p}%)"; }
  return 0
}
BUSY_RUNS=""
# CPU used by everything except this script's children while a run lasts (% of all CPUs)
busy_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
my_child_ticks() { sed 's/.*) //' /proc/$$/stat | awk '{print $14+$15}'; }  # cutime+cstime
run_begin() { RB_T=$(date +%s.%N); RB_B=$(busy_ticks); RB_C=$(my_child_ticks); }
run_end() { # $1 = tag; sets RUN_NOTE (not to be called in a subshell)
  local p
  p=$(awk -v t0="$RB_T" -v t1="$(date +%s.%N)" -v b0="$RB_B" -v b1="$(busy_ticks)" -v c0="$RB_C" \
      -v c1="$(my_child_ticks)" -v n="$(nproc)" -v hz="$(getconf CLK_TCK)" \
      'BEGIN{p = 100 * ((b1-b0) - (c1-c0)) / hz / ((t1-t0) * n); printf "%d", (p < 0 ? 0 : p + 0.5)}')
  [ "$p" -ge 10 ] && { warn "other processes used ${p}% of the CPUs during $1: figures may be noisy"; BUSY_RUNS="$BUSY_RUNS $1(${p}% during)"; }
  RUN_NOTE="other processes used ${p}% of the CPUs during the run"
}

# ---------------------------------------------------------------- 2a. probe: can dpdk-test run? TSC?
echo "# $(date -u) dpdk $DPDK_VER, kernel $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), mem: $MEMDESC" >"$OUT/runs.txt"
echo quit | timeout -k 5 60 dpdk-test $EAL --log-level=lib.eal:debug >"$OUT/probe.log" 2>&1
rc=$?
grep -q 'RTE>>' "$OUT/probe.log" || {
  tail -n 15 "$OUT/probe.log" >&2
  die "dpdk-test cannot start (rc=$rc; EAL args: $EAL); full log: $OUT/probe.log"; }
TSC_KHZ=$(sed -n 's/.*TSC frequency is ~\([0-9]*\) KHz.*/\1/p' "$OUT/probe.log" | head -1)
if [ -n "$TSC_KHZ" ]; then
  GHZ=$(awk -v k="$TSC_KHZ" 'BEGIN{printf "%.4f", k/1e6}'); GHZ_SRC="DPDK EAL 'TSC frequency is ~$TSC_KHZ KHz'"
else
  GHZ=$(awk -F: '/cpu MHz/{printf "%.4f", $2/1000; exit}' /proc/cpuinfo); GHZ_SRC="/proc/cpuinfo cpu MHz"
  [ -n "$GHZ" ] || die "cannot determine the TSC frequency"
fi

# ---------------------------------------------------------------- 2b. ring_perf_autotest x RING_REPS
ring_ok=0
for ((r = 1; r <= RING_REPS; r++)); do
  wait_quiet "ring-$r"
  s=$(date +%s); run_begin
  DPDK_TEST=ring_perf_autotest timeout -k 5 "$RUN_TIMEOUT" dpdk-test $EAL >"$OUT/ring-$r.log" 2>&1
  rc=$?; run_end "ring-$r"
  echo "ring-$r: rc=$rc $(( $(date +%s) - s )) s; $RUN_NOTE" >>"$OUT/runs.txt"
  if [ $rc = 0 ] && grep -q 'Test OK' "$OUT/ring-$r.log"; then ring_ok=$((ring_ok + 1))
  else warn "ring_perf_autotest run $r failed (rc=$rc$([ $rc = 124 ] && echo ', timed out')): $OUT/ring-$r.log"; fi
done
[ "$ring_ok" -gt 0 ] || die "ring_perf_autotest never completed; see $OUT/ring-*.log"

# ---------------------------------------------------------------- 2c. mempool_perf_autotest
# mp_lines LOG: "section cores constant_n rate lineno" for n_get_bulk=n_put_bulk=n_keep=32, first pass only
mp_lines() {
  awk '/^start performance test \(without cache\)/{s="nocache"}
       /^start performance test for .*\(without cache\)/{s="default"}
       /^start performance test \(with cache\)/{s="cache"}
       /^start performance test \(with user-owned cache\)/{s="user"}
       / n_get_bulk=32 n_put_bulk=32 n_keep=32 constant_n=[01] rate_persec=[0-9]+/ {
         match($0, /cores=[0-9]+/); c=substr($0, RSTART+6, RLENGTH-6)
         match($0, /constant_n=[01]/); k=substr($0, RSTART+11, 1)
         match($0, /rate_persec=[0-9]+/); v=substr($0, RSTART+12, RLENGTH-12)
         if (!seen[s, c, k]++) print s, c, k, v, NR }' "$1"
}
MP_NOTE=""
if [ "$MEMPOOL_MODE" != skip ]; then
  PRE=""; SCALE=1
  if [ "$MEMPOOL_MODE" = scaled ]; then
    command -v cc >/dev/null || die "MEMPOOL_MODE=scaled needs a C compiler (cc); use MEMPOOL_MODE=full"
    SCALE=$MEMPOOL_SCALE
    cat >"$OUT/hzshim.c" <<'EOF'
/* Divides DPDK's reported TSC rate so mempool_perf's fixed 5 s loops run 5/IPB_HZ_DIV s. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
uint64_t rte_get_tsc_hz(void)
{
	static uint64_t (*real)(void);
	static uint64_t div = 1;
	if (!real) {
		const char *s = getenv("IPB_HZ_DIV");
		real = (uint64_t (*)(void))dlsym(RTLD_NEXT, "rte_get_tsc_hz");
		if (s && strtoull(s, NULL, 10) > 0)
			div = strtoull(s, NULL, 10);
	}
	return real() / div;
}
EOF
    cc -O2 -shared -fPIC -o "$OUT/hzshim.so" "$OUT/hzshim.c" -ldl || die "cannot build $OUT/hzshim.so"
    PRE="$OUT/hzshim.so"
  fi
  mp_ok=0
  for ((r = 1; r <= MEMPOOL_REPS; r++)); do
    MPLOG="$OUT/mempool-$r.log"
    wait_quiet "mempool-$r"
    s=$(date +%s); run_begin
    env ${PRE:+LD_PRELOAD=$PRE IPB_HZ_DIV=$SCALE} DPDK_TEST=mempool_perf_autotest \
      timeout -k 5 "$MEMPOOL_TIMEOUT" stdbuf -oL dpdk-test $EAL >"$MPLOG" 2>&1 &
    mppid=$!
    stopped=0
    while kill -0 "$mppid" 2>/dev/null; do
      sleep 1
      # every figure needed is out once the with-cache 2-core constant_n=1 line is printed
      if mp_lines "$MPLOG" | grep -q '^cache 2 1 '; then kill -TERM "$mppid" 2>/dev/null; stopped=1; break; fi
    done
    wait "$mppid"; rc=$?; run_end "mempool-$r"
    echo "mempool-$r ($MEMPOOL_MODE, scale $SCALE): rc=$rc $(( $(date +%s) - s )) s$([ $stopped = 1 ] && echo ', stopped by this script once the needed lines were out'); $RUN_NOTE" >>"$OUT/runs.txt"
    [ $rc = 124 ] && { warn "mempool_perf_autotest run $r hit the ${MEMPOOL_TIMEOUT}s bound: later rows are n/a"; MP_NOTE="timed out after ${MEMPOOL_TIMEOUT}s; "; }
    if grep -q 'rate_persec=' "$MPLOG"; then mp_ok=$((mp_ok + 1))
    else warn "mempool_perf_autotest run $r produced no result (rc=$rc): $MPLOG"; fi
  done
  [ "$mp_ok" -gt 0 ] || die "mempool_perf_autotest produced no result; see $OUT/mempool-*.log"
fi

# ---------------------------------------------------------------- 3. parse + table
# ring_lines LOG: "key value lineno" for the legacy-API (pointer) block of one ring_perf log
ring_lines() {
  awk '/^### Testing/ {sec=$0}
       /^elem APIs/ {exit}
       /^legacy APIs: (SP\/SC|MP\/MC): (bulk|burst) \(size: 32\): / {
         t = ($0 ~ /SP\/SC/) ? "spsc" : "mpmc"; o = ($0 ~ /burst/) ? "burst" : "bulk"
         if (sec ~ /Testing burst enq/) k = t "_1c_" o
         else if (sec ~ /Testing bulk enq/) k = t "_1c_" o
         else if (sec ~ /two hyperthreads/) k = t "_2c_ht"
         else if (sec ~ /two physical cores/) k = t "_2c_phys"
         else if (sec ~ /two NUMA nodes/) k = t "_2c_numa"
         else next
         n = split($0, f, " "); print k, f[n], NR }' "$1"
}
median() { sort -g | awk '{a[NR]=$1} END{if (NR==0) exit; print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
best() { sort -g | awk -v w="$1" 'NR==1{f=$1} {l=$1} END{if (NR) print (w == "max") ? l : f}'; }
RAW=$(mktemp); TABLE=$(mktemp)
for ((r = 1; r <= RING_REPS; r++)); do
  [ -f "$OUT/ring-$r.log" ] && ring_lines "$OUT/ring-$r.log" | while read -r k v n; do
    echo "$k $v ring-$r.log:$n $(sed -n "${n}p" "$OUT/ring-$r.log")"; done
done >"$RAW.ring"
for ((r = 1; r <= MEMPOOL_REPS; r++)); do
  [ "$MEMPOOL_MODE" != skip ] && [ -f "$OUT/mempool-$r.log" ] && mp_lines "$OUT/mempool-$r.log" | while read -r sec c k v n; do
    echo "$sec $c $k $v mempool-$r.log:$n $(sed -n "${n}p" "$OUT/mempool-$r.log")"; done
done >"$RAW.mp"

row() { echo "| $1 | $2 | $3 | $4 |" >>"$TABLE"; }  # $4 may carry the last column
mp_row() { # label section cores
  local n v b
  n=$(awk -v s="$2" -v c="$3" '$1==s && $2==c && $3==0' "$RAW.mp" | wc -l)
  if [ "$n" = 0 ]; then row "$1" "$3" "n/a (${MP_NOTE}not reached)" "n/a | n/a"; return; fi
  v=$(awk -v s="$2" -v c="$3" '$1==s && $2==c && $3==0 {print $4}' "$RAW.mp" | median)
  b=$(awk -v s="$2" -v c="$3" '$1==s && $2==c && $3==0 {print $4}' "$RAW.mp" | best max)
  row "$1" "$3" "rate_persec best $b / median $v$([ "${SCALE:-1}" != 1 ] && echo ", ×$SCALE") (n=$n)" \
      "$(awk -v b="$b" -v v="$v" -v k="${SCALE:-1}" -v c="$3" -v g="$GHZ" 'BEGIN{b *= k; v *= k; printf "**%.2f** (%.2f) | %.1f", c*1e9/b, c*1e9/v, c*1e9/b*g}')"
  awk -v s="$2" -v c="$3" -v lbl="$1, $3 core(s)" '$1==s && $2==c && $3==0 { loc=$5; $1=$2=$3=$4=$5=""; sub(/^ +/, ""); printf "- %s: %s: `%s`\n", lbl, loc, $0 }' "$RAW.mp" >>"$RAW"
}
ring_row() { # label key(s) cores divisor
  local key v b n
  for key in $2; do n=$(awk -v k="$key" '$1==k' "$RAW.ring" | wc -l); [ "$n" -gt 0 ] && break; done
  if [ "$n" = 0 ]; then row "$1" "$3" "n/a (not in output)" "n/a | n/a"; return; fi
  v=$(awk -v k="$key" '$1==k{print $2}' "$RAW.ring" | median)
  b=$(awk -v k="$key" '$1==k{print $2}' "$RAW.ring" | best min)
  local what; [ "$4" = 32 ] && what="cyc per enq32+deq32" || what="cyc/obj (enq core + deq core)"
  [ "$3" != 1 ] && case $key in *_ht) what="$what, two hyperthreads";; *_phys) what="$what, two physical cores";; *_numa) what="$what, two NUMA nodes";; esac
  row "$1" "$3" "best $b / median $v $what (n=$n)" "$(awk -v b="$b" -v v="$v" -v d="$4" -v g="$GHZ" 'BEGIN{printf "**%.2f** (%.2f) | %.2f", b/d/g, v/d/g, b/d}')"
  awk -v k="$key" -v lbl="$1" '$1==k { loc=$3; $1=$2=$3=""; sub(/^ +/, ""); printf "- %s: %s: `%s`\n", lbl, loc, $0 }' "$RAW.ring" >>"$RAW"
}
: >"$RAW"
echo "| figure | cores | DPDK figure | ns/object: best (median) | TSC cycles/object, best |" >"$TABLE"
echo "|---|---|---|---|---|" >>"$TABLE"
if [ "$MEMPOOL_MODE" != skip ]; then
  mp_row "mempool get+put bulk 32, per-lcore cache 512 (n_keep=32)" cache 1
  mp_row "mempool get+put bulk 32, no cache (n_keep=32)" nocache 1
  mp_row "mempool get+put bulk 32, per-lcore cache 512 (n_keep=32)" cache 2
  mp_row "mempool get+put bulk 32, no cache (n_keep=32)" nocache 2
fi
ring_row "ring MP/MC bulk 32 enq+deq" mpmc_1c_bulk 1 32
ring_row "ring MP/MC burst 32 enq+deq" mpmc_1c_burst 1 32
ring_row "ring MP/MC bulk 32, enq on one core, deq on other" "mpmc_2c_phys mpmc_2c_ht mpmc_2c_numa" 2 1
ring_row "ring SP/SC bulk 32 enq+deq" spsc_1c_bulk 1 32
ring_row "ring SP/SC burst 32 enq+deq" spsc_1c_burst 1 32
ring_row "ring SP/SC bulk 32, enq on one core, deq on other" "spsc_2c_phys spsc_2c_ht spsc_2c_numa" 2 1

{
  echo "## DPDK $DPDK_VER core data structure baseline ($(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  echo "EAL: \`$EAL\`; TSC ${GHZ} GHz from $GHZ_SRC; ring: best and median of $ring_ok ring_perf_autotest runs (legacy pointer API);"
  [ "$MEMPOOL_MODE" != skip ] && echo "mempool: best and median of $mp_ok mempool_perf_autotest runs, mode $MEMPOOL_MODE$([ "$MEMPOOL_MODE" = scaled ] && echo " (5 s loops shortened to $(awk -v s=$MEMPOOL_SCALE 'BEGIN{print 5/s}') s via rte_get_tsc_hz shim, rates ×$MEMPOOL_SCALE)"), n_get_bulk=n_put_bulk=n_keep=32, constant_n=0; ns/obj/core = cores×1e9/rate."
  echo "Ring 1-core: cycles per (enqueue 32 + dequeue 32) / 32. Ring 2-core: producer + consumer cycles per object (CPU time summed over both cores)."
  echo "Best = fastest repetition (noise on this VM only ever adds time; repetitions can be bimodal), median in parentheses."
  echo
  cat "$TABLE"
  echo
  [ -n "$BUSY_RUNS" ] && { echo "WARNING: other load on the machine at:$BUSY_RUNS (see runs.txt)"; echo; }
  echo "Raw lines (file:line in $OUT):"
  cat "$RAW"
  echo
  echo "Total time: $(( $(date +%s) - T0 )) s. Runs: see $OUT/runs.txt"
} | tee "$OUT/summary.md"
rm -f "$RAW" "$RAW.ring" "$RAW.mp" "$TABLE"
exit 0
