#!/usr/bin/env bash
# Builds picograd's QEMU instruction-counting plugin (targets/common/icount.c) with the host's cc
# into target/icount/libicount.so and prints its path; given a QEMU command line after the script's
# name, also runs it under the plugin and prints the plugin's lines (`insns=N`, and `range LO HI N`
# per `range=LO:HI` given in $ICOUNT_RANGES, comma-separated). `picograd compile` builds the same
# source itself for every measurement; this is for counting programs by hand.
#   scripts/icount.sh qemu-system-arm -M mps2-an386 -nographic -monitor none -serial none \
#       -semihosting-config enable=on,target=native -kernel prog.elf
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${CARGO_TARGET_DIR:-$root/target}/icount"
mkdir -p "$out"
lib="$out/libicount.so"
cc -O2 -shared -fPIC -fvisibility=hidden -Wall -Wextra -Werror -o "$lib" "$root/targets/common/icount.c"
if [ $# -eq 0 ]; then
    echo "$lib"
    exit 0
fi
spec="$lib"
if [ -n "${ICOUNT_RANGES:-}" ]; then
    IFS=, read -ra ranges <<<"$ICOUNT_RANGES"
    for r in "${ranges[@]}"; do spec="$spec,range=$r"; done
fi
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
"$@" -plugin "$spec" -d plugin -D "$log" >/dev/null
cat "$log"
