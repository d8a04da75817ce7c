#!/usr/bin/env bash
# The device benchmark: exported models on every device target under QEMU, with flash, RAM and
# instructions per inference, compared with the previous run. Installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."
export PICOGRAD_CACHE="${PICOGRAD_CACHE:-$PWD/target/picograd-cache}"
bash scripts/install-deps.sh
exec cargo run --release --example device_bench
