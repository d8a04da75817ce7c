#!/usr/bin/env sh
# picograd's benchmark in one command: sets up the Python peers (numpy/OpenBLAS, onnxruntime,
# tinygrad) in .venv when missing, then runs the bench example, which runs the peers in a child
# process and prints a table of figures and ratios. PICOGRAD_THREADS sets the thread count.
#
# `scripts/bench.sh models [options]` is the real-model bench instead: it makes its own Python
# environment with torch (scripts/bench-env.sh, target/bench-venv, never .venv), exports the models
# with torch's exporter into target/bench-models once (scripts/bench-models.py), builds the
# `picograd` command and the `bench_models` example in release, and runs scripts/bench_models.py,
# which times picograd's ONNX path against onnxruntime pair by pair (its --help lists the options).
set -eu
cd "$(dirname "$0")/.."
if [ "${1:-}" = models ]; then
  shift
  py=$(scripts/bench-env.sh)
  dir=${BENCH_MODELS:-target/bench-models}
  if [ ! -f "$dir/oddnet_b8.input.npy" ]; then
    "$py" scripts/bench-models.py "$dir"
  fi
  cargo build --release -p picograd-cli --bin picograd
  cargo build --release -p picograd --example bench_models
  target=${CARGO_TARGET_DIR:-target}
  exec "$py" scripts/bench_models.py "$dir" "$target/release/picograd" "$target/release/examples/bench_models" "$@"
fi
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -c "import numpy, onnx, onnxruntime, tinygrad" 2>/dev/null ||
  .venv/bin/pip install -q numpy onnx onnxruntime tinygrad
exec cargo run --release --example bench "$@"
