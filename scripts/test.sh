#!/usr/bin/env bash
# picograd's whole test suite: formatting, lints, every test in the workspace, and the no_std core
# built for two microcontroller targets. Installs what it needs first (scripts/install-deps.sh, and
# scripts/python-env.sh for the ONNX tests, which skip without it).
set -euo pipefail
cd "$(dirname "$0")/.."
# Compiled kernels are cached here unless the caller chose a place (the default needs $HOME).
export PICOGRAD_CACHE="${PICOGRAD_CACHE:-$PWD/target/picograd-cache}"

bash scripts/install-deps.sh

# Each step's heading also says how long the suite has run so far (wall seconds), so a slow
# step shows in the log.
start=$SECONDS
step() { printf '\n== [%ss] %s\n' "$((SECONDS - start))" "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets -- -D warnings

step "no_std core for thumbv7em-none-eabihf and riscv32imac-unknown-none-elf"
# Both targets in one cargo call: the two builds run side by side and share the host-side
# proc macros.
cargo build -p picograd-core --no-default-features --target thumbv7em-none-eabihf \
    --target riscv32imac-unknown-none-elf
cargo build -p picograd-core --no-default-features --features defmt --target thumbv7em-none-eabihf

step "Python environment for the ONNX tests (.venv: onnx, onnxruntime, numpy, skl2onnx, scikit-learn)"
bash scripts/python-env.sh

step "cargo test --workspace"
mkdir -p target
cargo test --workspace --no-fail-fast 2>&1 | tee target/test.log

# 15 s per reader (four readers, plus a few minutes to build the fuzz crate the first time) keeps
# the suite well under 20 minutes; the issue's CI bound is 60 s per reader. A crash fails the
# suite. The long campaigns behind the README's figures are `scripts/fuzz.sh --long`.
step "fuzz the file readers, 15 s each (scripts/fuzz.sh)"
bash scripts/fuzz.sh 15

step "ONNX backend node tests (pass rate must not drop below std-runtime/onnx/PASS_FLOOR)"
bash scripts/onnx-conformance.sh

# One closing line with the totals of every cargo test binary above.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed;?$/) p += $(i-1); if ($i ~ /^failed;?$/) f += $(i-1) } }
     END { printf "\ntests: %d passed, %d failed\n", p, f }' target/test.log
printf 'suite: %ss wall\n' "$((SECONDS - start))"
