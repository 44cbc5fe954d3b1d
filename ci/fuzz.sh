#!/usr/bin/env bash
# Run every cargo-fuzz target for a bounded time.
#   ci/fuzz.sh [SECONDS] [NODE_SECONDS]
# SECONDS (default 30) for the parsers and the runtime's unsafe code, under
# AddressSanitizer; NODE_SECONDS (default 2 x SECONDS) for the targets whose code
# under test is all safe Rust: the node targets, which drive whole graph nodes (and
# the attack corpus's subjects) with arbitrary frames, and tcp_input, which drives
# the TCP engine. Those crates are `forbid(unsafe_code)`: AddressSanitizer would find
# nothing in them that Rust's own checks miss and would cost them four fifths of
# their speed (ip_router: 7.9k inputs/s with it, 35k without; tcp_input 2.4k with
# it, 13.9k without, and from an empty corpus in 30 s a corpus covering 1,384 edges
# and 8,200 features against 1,309 and 5,976 with it, both measured by the same
# build), so they run without a sanitizer, longer and deeper; the unsafe code under the
# nodes (mbufs, mempools) is fuzzed with it (mbuf_ops, packet) and tested with it
# (ci/test.sh). They are also built without trace-compares instrumentation: measured
# over 15 s from their seeds, each reached as much coverage or more without it, at
# 1.3x to 2x the inputs a second (tcp_node 7.7k -> 14k). Each target's speed is
# printed (exec/s): a target must keep >= 10,000 inputs/s to matter.
# cargo-fuzz needs nightly flags; the stable toolchain takes them with RUSTC_BOOTSTRAP=1.
# Targets are built optimised but with debug assertions and overflow checks on
# (--debug-assertions): an arithmetic overflow on hostile input is a finding.
# Crashes are saved under fuzz/artifacts/<target>/ and fail the script.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
node_secs=${2:-$((2 * secs))}
# The node targets (graph nodes with their state, fed bursts of frames) and the TCP
# engine's: safe Rust only.
node_targets="nodes l2_forward ip_router aggregate tcp_node node_kinds tcp_input"
if ! command -v cargo-fuzz >/dev/null; then
    cargo install cargo-fuzz --locked
fi
export RUSTC_BOOTSTRAP=1

# run TARGET SECONDS SANITIZER [libFuzzer options...]
run() {
    local t=$1 s=$2 san=$3
    shift 3
    echo "== fuzz $t for ${s}s (sanitizer: $san)"
    mkdir -p "fuzz/corpus/$t"
    # Committed seed inputs (fuzz/seeds/TARGET), when a target has them, start the
    # search from valid packets.
    local seeds=()
    if [ -d "fuzz/seeds/$t" ]; then seeds=("fuzz/seeds/$t"); fi
    local dir=()
    # The node targets' builds keep a target directory of their own (switching
    # sanitizers would rebuild everything twice a run).
    if [ "$san" = none ]; then dir=(--target-dir fuzz/target-nosan --no-trace-compares); fi
    mkdir -p fuzz/target
    local log="fuzz/target/run-$t.log"
    local rc=0
    cargo fuzz run "$t" --release --debug-assertions -s "$san" "${dir[@]}" "fuzz/corpus/$t" "${seeds[@]}" -- \
        -max_total_time="$s" -rss_limit_mb=2048 -print_final_stats=1 "$@" >"$log" 2>&1 || rc=$?
    grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::average_exec_per_sec|==[0-9]+==|SUMMARY|thread .* panicked)" "$log" || true
    if [ -n "$(ls -A "fuzz/artifacts/$t" 2>/dev/null)" ]; then
        echo "fuzz target $t found a crash: fuzz/artifacts/$t" >&2
        exit 1
    fi
    # A target that does not build (or stops without a crash file) fails the run
    # too: it would otherwise pass without having fuzzed anything.
    if [ "$rc" != 0 ] || ! grep -q "^stat::number_of_executed_units" "$log"; then
        echo "fuzz target $t did not run (exit $rc):" >&2
        tail -40 "$log" >&2
        exit 1
    fi
    rm -f "$log"
}

for t in $(cargo fuzz list); do
    case " $node_targets " in *" $t "*) continue ;; esac
    run "$t" "$secs" address
done
for t in $node_targets; do
    run "$t" "$node_secs" none
done
echo "fuzz: all targets ran (${secs}s; node targets ${node_secs}s) without a crash"
