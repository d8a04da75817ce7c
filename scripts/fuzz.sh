#!/usr/bin/env bash
# Fuzzes picograd's file readers with libFuzzer through cargo-fuzz, on stable Rust (`-s none`: no
# sanitizer, which would need nightly; debug assertions and overflow checks stay on). Targets
# (std-runtime/fuzz): onnx_load_run (ONNX load, and run on the interpreter when small), npy,
# safetensors, state_blob.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]   each target for SECONDS (default 60, the CI size)
#   scripts/fuzz.sh --long [TARGET...]      the long campaign: 30 minutes per target (FUZZ_LONG_SECONDS)
#   scripts/fuzz.sh --build-only            seeds the corpora and builds the targets, runs nothing
#
# Installs cargo-fuzz (`cargo install cargo-fuzz --locked`) when it is missing. Seeds the corpora
# (std-runtime/fuzz/corpus/<target>, not in git) with small valid files from picograd's own
# writers, keeps what libFuzzer adds there, and prints each target's executions and
# executions/second. A crash, panic, abort, out-of-memory or timeout stops the target, leaves the
# input in std-runtime/fuzz/artifacts/<target>/, and makes this script exit 1.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

seconds=60
build_only=false
if [ "${1:-}" = "--build-only" ]; then
    build_only=true
    shift
elif [ "${1:-}" = "--long" ]; then
    seconds="${FUZZ_LONG_SECONDS:-1800}"
    shift
elif [[ "${1:-}" =~ ^[0-9]+$ ]]; then
    seconds=$1
    shift
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(onnx_load_run npy safetensors state_blob)

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

# Kept apart from the workspace's target folder: the fuzz flags would rebuild everything there.
target_dir="${FUZZ_TARGET_DIR:-$ROOT/target/fuzz}"
fuzz="$ROOT/std-runtime/fuzz"
cd "$fuzz"

echo "== seeds"
# The dev profile: the seeds are a handful of small files, and the fuzz build below cannot reuse
# a release build made without its flags, so optimising this one only costs build time.
CARGO_TARGET_DIR="$target_dir" cargo run --quiet --example seeds -- "$fuzz/corpus"

echo "== build (cargo fuzz build -s none)"
cargo fuzz build -s none --target-dir "$target_dir"
if $build_only; then
    exit 0
fi

status=0
summary=()
for t in "${targets[@]}"; do
    echo "== $t: ${seconds}s"
    mkdir -p "corpus/$t" "artifacts/$t"
    log="$target_dir/fuzz-$t.log"
    # -rss_limit_mb: far above what a bounded input needs; -timeout: one input may take 10 s.
    if cargo fuzz run -s none --target-dir "$target_dir" "$t" "corpus/$t" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=3072 \
        -artifact_prefix="artifacts/$t/" -print_final_stats=1 2>&1 | tee "$log" | grep -E '^(#[0-9]+ +(DONE|pulse|NEW)|==|INFO: (Running|Loaded)|stat::)' | grep -vE 'NEW' || true; then :; fi
    if grep -qE 'ERROR: libFuzzer|panicked at|deadly signal|Test unit written' "$log"; then
        echo "!! $t: a crash — see $log and std-runtime/fuzz/artifacts/$t/"
        grep -E 'panicked at|ERROR: libFuzzer|Test unit written' "$log" | head -5
        status=1
    fi
    runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo 0)
    rate=$(grep -Eo 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo 0)
    summary+=("$t: $runs executions in ${seconds}s ($rate exec/s)")
done

echo
echo "== fuzz summary"
printf '%s\n' "${summary[@]}"
exit $status
