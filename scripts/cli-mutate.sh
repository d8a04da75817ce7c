#!/usr/bin/env bash
# Runs the real `picograd` binary on mutated ONNX models (issue 16's "10,000 CLI runs"): builds
# the CLI in release mode, writes the seed models — the fuzz seeds (std-runtime/fuzz's `seeds`
# example: a small CNN and 76 one-node models) and the models of scripts/onnx-test-models.py —
# then scripts/cli-mutate.py mutates them and runs `picograd run MODEL --interp` on each mutant
# and `picograd compile MODEL --out DIR` (host target) on every K-th, under a timeout, counting
# outcomes by exit code and keeping every panic, crash, timeout or undocumented exit in
# $WORK/failures/.
#
#   scripts/cli-mutate.sh [COUNT] [--seed S] [--jobs J] [--timeout SECONDS] [--compile-every K]
#
# COUNT defaults to 10,000 mutated models; K to 1 (a compile is a host C build per model that
# loads, about 100 times a run's cost). WORK is $CLI_MUTATE_DIR, else target/cli-mutate (emptied
# first); the runs use a kernel cache of their own there. Run it under `nice -n 19` on a shared
# machine. Exits 1 when any failure was seen.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

count=10000
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then
    count=$1
    shift
fi
target_dir="${CARGO_TARGET_DIR:-$ROOT/target}"
work="${CLI_MUTATE_DIR:-$target_dir/cli-mutate}"
python=$(scripts/python-env.sh)

# PICOGRAD_BIN: a CLI binary already built (scripts/test.sh passes the debug one `cargo test`
# built, to spare a release build).
if [ -n "${PICOGRAD_BIN:-}" ]; then
    bin=$PICOGRAD_BIN
else
    echo "== build (release picograd CLI)"
    cargo build --quiet --release -p picograd-cli
    bin="$target_dir/release/picograd"
fi

echo "== seeds"
rm -rf "$work"
mkdir -p "$work/seeds/models" "$work/fuzz-seeds"
# The fuzz crate is its own workspace; its target folder is scripts/fuzz.sh's.
(cd std-runtime/fuzz && CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$target_dir/fuzz}" \
    cargo run --quiet --release --example seeds -- "$work/fuzz-seeds")
mv "$work/fuzz-seeds/onnx_load_run" "$work/seeds/fuzz"
rm -rf "$work/fuzz-seeds"
for case in numeric_outputs external_data gru_forward gru_bidirectional lstm_reverse \
    lstm_bidirectional logreg logreg_binary logreg_strings mlp linear_regressor \
    linear_classifier_binary scaler_normalizer; do
    "$python" scripts/onnx-test-models.py "$case" "$work/seeds/models/$case" >/dev/null
done
echo "$(find "$work/seeds" -name 'seed-*' -o -name '*.onnx' | wc -l) seed models"

echo "== $count mutated models"
PICOGRAD_CACHE="$work/cache" "$python" scripts/cli-mutate.py "$bin" "$work/seeds" "$work" "$count" "$@"
