#!/usr/bin/env bash
# The Python environment the ONNX scripts and tests share: a virtual environment in `.venv` (or
# $ONNX_VENV) with `onnx`, `onnxruntime`, `numpy` and `sympy` (onnxruntime's `quant_pre_process`
# imports it) from PyPI, and `skl2onnx` with
# `scikit-learn` for the tests of scikit-learn models. Made once and reused; running this
# again on a ready environment does nothing. Prints the environment's python on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${ONNX_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV" >&2
fi
if ! "$VENV/bin/python" -c "import onnx, onnxruntime, numpy, sympy" 2>/dev/null; then
    echo "python-env: installing onnx onnxruntime numpy sympy into $VENV" >&2
    "$VENV/bin/pip" install --quiet onnx onnxruntime numpy sympy >&2
fi
if ! "$VENV/bin/python" -c "import skl2onnx, sklearn" 2>/dev/null; then
    echo "python-env: installing skl2onnx scikit-learn into $VENV" >&2
    "$VENV/bin/pip" install --quiet skl2onnx scikit-learn >&2
fi
echo "$VENV/bin/python"
