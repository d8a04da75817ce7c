#!/usr/bin/env bash
# The real-model bench's own Python environment: a virtual environment in `target/bench-venv` (or
# $BENCH_VENV) with torch + torchvision (to export the models with torch's own exporter), onnx and
# onnxruntime (the peer) from PyPI. It is never the test suite's `.venv`: PyPI's Linux torch pulls its
# CUDA wheels (several GB), acceptable for a bench that installs once, not for the tests. Made once and
# reused; running this again on a ready environment does nothing. Prints the environment's python.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${BENCH_VENV:-target/bench-venv}"
if [ ! -x "$VENV/bin/python" ]; then
    mkdir -p "$(dirname "$VENV")"
    python3 -m venv "$VENV" >&2
fi
if ! "$VENV/bin/python" -c "import torch, torchvision, onnx, onnxruntime, numpy" 2>/dev/null; then
    echo "bench-env: installing torch torchvision onnx onnxruntime numpy into $VENV (several GB, once)" >&2
    "$VENV/bin/pip" install --quiet torch torchvision onnx onnxruntime numpy >&2
fi
echo "$VENV/bin/python"
