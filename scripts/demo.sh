#!/usr/bin/env bash
# picograd's main job: the end-to-end example (symbolic algebra, ShapeTracker, a fused and
# compiled forward pass on the digits data). Installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."
# Compiled kernels are cached here unless the caller chose a place (the default needs $HOME).
export PICOGRAD_CACHE="${PICOGRAD_CACHE:-$PWD/target/picograd-cache}"
bash scripts/install-deps.sh
exec cargo run --release --example demo
