#!/usr/bin/env bash
# The digits CNN quantized by picograd's calibration (`tests/quant_digits.rs`) with its
# Cortex-M4 bundle checked against the desktop on all 360 test images under QEMU, not the
# handful the test suite uses. Prints fp32/int8 accuracy and the device-vs-desktop difference.
set -euo pipefail
cd "$(dirname "$0")/.."
export PICOGRAD_CACHE="${PICOGRAD_CACHE:-$PWD/target/picograd-cache}"
QUANT_DIGITS_DEVICE_IMAGES=360 exec cargo test --test quant_digits -- --nocapture
