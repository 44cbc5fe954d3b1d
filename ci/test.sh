#!/usr/bin/env bash
# The whole test suite (the README's second command). As root on a machine with
# apt-get it first installs the tools the tests run (ci/deps.sh; IRONPATH_NO_APT=1
# skips that); a test that needs root or a missing tool is skipped with one line
# naming the package, and the end of the run lists every skip.
#   0. install the tools (root + apt only)
#   1. build every crate and every PMD plugin (tests load the .so files built here)
#   2. cargo test --workspace
#   3. loom model checks of the lock-free MPMC ring
#   4. the core's tests again under AddressSanitizer (stable toolchain + RUSTC_BOOTSTRAP)
#   5. every cargo-fuzz target for FUZZ_SECS seconds (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && [ -z "${IRONPATH_NO_APT:-}" ]; then
    echo "== install the tools the tests run (ci/deps.sh)"
    bash ci/deps.sh
fi
export IRONPATH_SKIP_LOG="$PWD/target/skipped-tests.txt"
mkdir -p target && : > "$IRONPATH_SKIP_LOG"
report_skips() {
    local n
    n=$(wc -l < "$IRONPATH_SKIP_LOG")
    if [ "$n" -gt 0 ]; then
        echo "== $n test(s) skipped:"
        sed 's/^/   /' "$IRONPATH_SKIP_LOG"
    else
        echo "== no test skipped"
    fi
}
trap report_skips EXIT

echo "== build (workspace, plugins included)"
cargo build --workspace --all-targets --locked

echo "== cargo test --workspace"
cargo test --workspace --locked

echo "== loom: MPMC ring models"
RUSTFLAGS="--cfg loom" cargo test -p ironpath-eal --lib --release --locked --target-dir target/loom -- loom

echo "== AddressSanitizer: core runtime, SDK and plugins"
# The ASan runtime is linked into the test executables; --export-dynamic lets the
# dlopen()ed plugins (built with ASan too) find it. Backtraces off: std's backtrace
# cache inside a plugin is a one-time allocation LeakSanitizer would report.
export RUSTC_BOOTSTRAP=1
export RUSTFLAGS="-Zsanitizer=address -Clink-arg=-Wl,--export-dynamic"
export RUST_BACKTRACE=0 ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
# Built: the runtime and every package under pmds/ (the SDK, each PMD plugin, which the
# loader tests load and probe, and the test plugins), not the app and the nodes, which
# would take minutes of CI and run nothing here.
target=x86_64-unknown-linux-gnu
mapfile -t asan_pkgs < <(cargo metadata --format-version 1 --no-deps --locked | python3 -c '
import json, os, sys
m = json.load(sys.stdin)
for p in m["packages"]:
    if os.path.relpath(p["manifest_path"], m["workspace_root"]).startswith("pmds/") or p["name"] == "ironpath-eal":
        print("-p"); print(p["name"])')
cargo build "${asan_pkgs[@]}" --locked --target "$target" --target-dir target/asan
cargo test -p ironpath-eal -p ironpath-pmd-sdk --locked --target "$target" --target-dir target/asan

echo "== fuzz: every target for ${FUZZ_SECS:-20}s"
unset RUSTFLAGS ASAN_OPTIONS
bash ci/fuzz.sh "${FUZZ_SECS:-20}"
