#!/usr/bin/env bash
# Soak run of issue 16's long-running-process goals (examples/soak.rs, release mode): eager Adam
# training of the digits MLP for 10,000 steps with resident memory sampled, then 20,000 distinct
# kernels in one process on the Clang device with mapped kernel libraries, live libraries,
# resident memory and the disk cache sampled. Fails (exit 1) when eager memory grows past its
# bound after warm-up or mapped libraries outgrow the realizer's program cache.
#
#   scripts/soak.sh [--steps N] [--kernels N] [--batch N] [--capacity N] [--rss-bound-mb N]
#
# Uses a fresh, private kernel cache (so every kernel is really compiled, not found on disk from
# an earlier run) bounded by PICOGRAD_CACHE_MAX_MB (default here 4, so the least-recently-used
# trimming runs), removed afterwards. Run it under `nice -n 19` on a shared machine.
set -euo pipefail
cd "$(dirname "$0")/.."

cache=$(mktemp -d "${TMPDIR:-/tmp}/picograd-soak-XXXXXX")
trap 'rm -rf "$cache"' EXIT
cargo build --quiet --release --example soak
PICOGRAD_CACHE="$cache" PICOGRAD_CACHE_MAX_MB="${PICOGRAD_CACHE_MAX_MB:-4}" \
    cargo run --quiet --release --example soak -- "$@"
