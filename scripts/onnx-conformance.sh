#!/usr/bin/env bash
# ONNX backend node-test conformance: makes a local virtual environment with the `onnx` package
# (from PyPI), writes the node tests its package defines (scripts/onnx-node-data.py), runs them
# through picograd's importer, prints pass / fail / skip by operator and family, writes the table
# to target/onnx-conformance.md, and fails when the pass rate drops below the recorded floor.
set -euo pipefail
cd "$(dirname "$0")/.."

FLOOR="${ONNX_PASS_FLOOR:-$(cat std-runtime/src/onnx/PASS_FLOOR)}"
VENV="${ONNX_VENV:-.venv}"
DATA="${ONNX_NODE_DATA:-target/onnx-node-data}"

if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
"$VENV/bin/python" -c "import onnx" 2>/dev/null || "$VENV/bin/pip" install --quiet onnx numpy
if [ ! -d "$DATA/node" ]; then
    echo "writing the onnx package's node tests to $DATA ..."
    "$VENV/bin/python" scripts/onnx-node-data.py "$DATA" > /dev/null 2>&1
fi

cargo build --release --quiet -p picograd-runtime --example onnx_conformance
out="$(./target/release/examples/onnx_conformance "$DATA/node" target/onnx-conformance.md)"
echo "$out"
rate="$(echo "$out" | sed -n 's/^PASS_RATE=//p')"
if awk -v r="$rate" -v f="$FLOOR" 'BEGIN { exit !(r + 0 < f + 0) }'; then
    echo "ONNX pass rate $rate% is below the recorded floor $FLOOR%" >&2
    exit 1
fi
echo "ONNX pass rate $rate% (floor $FLOOR%)"
