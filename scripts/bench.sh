#!/usr/bin/env sh
# picograd's benchmark in one command: sets up the Python peers (numpy/OpenBLAS, onnxruntime,
# tinygrad) in .venv when missing, then runs the bench example, which runs the peers in a child
# process and prints a table of figures and ratios. PICOGRAD_THREADS sets the thread count.
set -eu
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -c "import numpy, onnx, onnxruntime, tinygrad" 2>/dev/null ||
  .venv/bin/pip install -q numpy onnx onnxruntime tinygrad
exec cargo run --release --example bench "$@"
