#!/usr/bin/env bash
# Installs what picograd's example and test suite need on a fresh Debian 12 machine with Rust:
# clang, the Cortex-M and RISC-V cross toolchains with picolibc, QEMU, and the Rust device targets.
# Each piece is checked first, so a warm machine skips the install entirely.
set -euo pipefail

need_apt=()
for tool in clang:clang ld.lld:lld arm-none-eabi-gcc:gcc-arm-none-eabi \
            riscv64-unknown-elf-gcc:gcc-riscv64-unknown-elf \
            qemu-system-arm:qemu-system-arm qemu-system-riscv32:qemu-system-misc; do
  cmd=${tool%%:*} pkg=${tool#*:}
  command -v "$cmd" >/dev/null 2>&1 || need_apt+=("$pkg")
done
[ -d /usr/lib/picolibc/arm-none-eabi ] || need_apt+=(picolibc-arm-none-eabi)
[ -d /usr/lib/picolibc/riscv64-unknown-elf ] || need_apt+=(picolibc-riscv64-unknown-elf)
# The ONNX conformance run and peer benchmarks make a Python virtual environment.
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
python3 -c "import venv, ensurepip" >/dev/null 2>&1 || need_apt+=(python3-venv)

if [ ${#need_apt[@]} -gt 0 ]; then
  echo "install-deps: installing ${need_apt[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  # Without recommends: Debian 12's qemu-system packages conflict with the backported qemu-utils
  # a fresh machine ships (see shared/TOOLCHAINS.md); picograd does not need qemu-utils.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

installed=$(rustup target list --installed)
for t in thumbv7em-none-eabihf riscv32imac-unknown-none-elf; do
  grep -qx "$t" <<<"$installed" || rustup target add "$t"
done
components=$(rustup component list --installed)
for c in rustfmt clippy; do
  grep -q "^$c" <<<"$components" || rustup component add "$c"
done
