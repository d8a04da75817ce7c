#!/usr/bin/env bash
# ONNX backend node-test conformance: in the shared Python environment (scripts/python-env.sh:
# `.venv` with onnx, onnxruntime, numpy) writes the node tests the onnx package defines
# (scripts/onnx-node-data.py), runs them through picograd's importer (the `onnx_conformance`
# example of `picograd-onnx`, std-runtime/onnx/examples/), prints pass / fail / skip by operator
# and family, writes the table to target/onnx-conformance.md, and fails when the pass rate drops
# below the recorded floor (std-runtime/onnx/PASS_FLOOR).
set -euo pipefail
cd "$(dirname "$0")/.."

FLOOR="${ONNX_PASS_FLOOR:-$(cat std-runtime/onnx/PASS_FLOOR)}"
DATA="${ONNX_NODE_DATA:-target/onnx-node-data}"

PY="$(bash scripts/python-env.sh)"
if [ ! -d "$DATA/node" ]; then
    echo "writing the onnx package's node tests to $DATA ..."
    "$PY" scripts/onnx-node-data.py "$DATA" > /dev/null 2>&1
fi

# The dev build, with the workspace's features: after `cargo test --workspace` (scripts/test.sh)
# it is already built, where a release build would compile the whole crate graph again for a
# run of seconds (debug assertions and overflow checks stay on, too).
cargo build --quiet --workspace --example onnx_conformance
out="$("${CARGO_TARGET_DIR:-target}/debug/examples/onnx_conformance" "$DATA/node" target/onnx-conformance.md)"
echo "$out"
rate="$(echo "$out" | sed -n 's/^PASS_RATE=//p')"
if awk -v r="$rate" -v f="$FLOOR" 'BEGIN { exit !(r + 0 < f + 0) }'; then
    echo "ONNX pass rate $rate% is below the recorded floor $FLOOR%" >&2
    exit 1
fi
echo "ONNX pass rate $rate% (floor $FLOOR%)"
