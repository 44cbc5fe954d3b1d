#!/usr/bin/env bash
# Run every cargo-fuzz target for a bounded time (default 30 s each).
#   ci/fuzz.sh [SECONDS]
# cargo-fuzz needs nightly flags; the stable toolchain takes them with RUSTC_BOOTSTRAP=1.
# Targets are built optimised but with debug assertions and overflow checks on
# (--debug-assertions): an arithmetic overflow on hostile input is a finding.
# Crashes are saved under fuzz/artifacts/<target>/ and fail the script.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
if ! command -v cargo-fuzz >/dev/null; then
    cargo install cargo-fuzz --locked
fi
export RUSTC_BOOTSTRAP=1
for t in $(cargo fuzz list); do
    echo "== fuzz $t for ${secs}s"
    mkdir -p "fuzz/corpus/$t"
    # Committed seed inputs (fuzz/seeds/TARGET), when a target has them, start the
    # search from valid packets.
    seeds=()
    if [ -d "fuzz/seeds/$t" ]; then seeds=("fuzz/seeds/$t"); fi
    cargo fuzz run "$t" --release --debug-assertions "fuzz/corpus/$t" "${seeds[@]}" -- -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 2>&1 |
        grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|==[0-9]+==|SUMMARY|thread .* panicked)" || true
    if [ -n "$(ls -A "fuzz/artifacts/$t" 2>/dev/null)" ]; then
        echo "fuzz target $t found a crash: fuzz/artifacts/$t" >&2
        exit 1
    fi
done
echo "fuzz: all targets ran ${secs}s without a crash"
