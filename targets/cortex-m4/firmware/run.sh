#!/usr/bin/env bash
# run.sh: builds the Cortex-M4 firmware example (picograd-core on the device, see src/main.rs)
# and runs it on QEMU mps2-an386, checking the values it prints over semihosting. Exits 0 and
# prints "firmware ok" only when the build, the run and the check all succeed. With `--build-only`
# it stops after the build (scripts/test.sh builds it ahead, beside other steps).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

# This crate has its own target dir and link flags (.cargo/config.toml); flags or a target dir
# from an outer cargo (e.g. when a test runs this script) must not override them.
unset RUSTFLAGS CARGO_ENCODED_RUSTFLAGS CARGO_BUILD_RUSTFLAGS CARGO_BUILD_TARGET
export CARGO_TARGET_DIR="$here/target"
rustup target list --installed 2>/dev/null | grep -qx thumbv7em-none-eabihf \
  || rustup target add thumbv7em-none-eabihf

cargo build --release --target thumbv7em-none-eabihf --quiet
[ "${1:-}" = "--build-only" ] && exit 0
elf="$here/target/thumbv7em-none-eabihf/release/picograd-firmware-m4"
arm-none-eabi-size "$elf" 2>/dev/null || true

out="$(timeout 60 qemu-system-arm -M mps2-an386 -nographic -monitor none -serial none \
  -chardev stdio,id=s -semihosting-config enable=on,target=native,chardev=s \
  -icount shift=0 -kernel "$elf")" || { echo "$out"; echo "run.sh: QEMU exited with failure" >&2; exit 1; }
echo "$out"
grep -qF 'a*b = [4.0, 10.0, 18.0], sum = 32' <<<"$out" \
  || { echo "run.sh: unexpected values" >&2; exit 1; }
grep -qx 'firmware ok' <<<"$out" || { echo "run.sh: no success line" >&2; exit 1; }
