#!/usr/bin/env bash
# picograd's main job: the end-to-end example (symbolic algebra, ShapeTracker, a fused and
# compiled forward pass on the digits data). Installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
exec cargo run --release --example demo
