#!/usr/bin/env bash
# The device benchmark (not a test): ONNX models compiled by `picograd compile` — the path a user
# takes — for the Cortex-M4F (gcc -O2, clang -O2, gcc -Os) and RV32IMAFC (gcc -O2), each run under
# QEMU on a seeded non-zero input and checked against the desktop (--check). Per model and build it
# prints the exact instructions per inference (picograd's QEMU plugin: 2 calls minus none), flash
# split into code, weights and the library code the model calls, the arena, and the stack
# high-water mark from the stack pointer at the call; then instructions per function from a second
# gcc -O2 build with -fno-inline (kernels out of line, so each is counted in its own symbol range:
# attribution only, the inlined build is the one measured).
#
# The models (scripts/device-bench-models.py, built with onnx.helper): sine MLP 1-16-16-1, digits
# MLP 64-128-10 and CNN (trained weights from `cargo run --release --example train_digits` when
# out/digits_*.safetensors exist, else seeded), MLPerf Tiny's KWS DS-CNN as issue 15 gives it, and
# the same network quantized to int8 by onnxruntime (issue 17).
# Installs what it needs first. Output also goes to target/device-bench/report.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
export PICOGRAD_CACHE="${PICOGRAD_CACHE:-$PWD/target/picograd-cache}"
bash scripts/install-deps.sh
# The counting plugin must build (picograd compile builds it again for each measurement).
echo "counting plugin: $(bash scripts/icount.sh)"
PY=$(bash scripts/python-env.sh)
cargo build --release -q -p picograd-cli
BIN="${CARGO_TARGET_DIR:-target}/release/picograd"
OUT=target/device-bench
rm -rf "$OUT"
mkdir -p "$OUT/models"
"$PY" scripts/device-bench-models.py "$OUT/models" out | sed 's/^/weights: /'
# The int8 row (issue 17): the same KWS DS-CNN quantized by onnxruntime's quantize_static (QDQ,
# per-channel int8, 300 seeded calibration inputs; scripts/device-bench-int8.py). Its batch axis
# is symbolic, so its builds name the input's shape.
"$PY" scripts/device-bench-int8.py "$OUT/int8" | sed 's/^/int8: /'
cp "$OUT/int8/kws_int8.onnx" "$OUT/models/kws_int8.onnx"
cp "$OUT/int8/kws_input.npy" "$OUT/models/kws_int8_input.npy"

# One build: prints "instr code weights library arena stack", or the reason it failed.
measure() { # model target compiler opt tag [extra flags...]
    local model=$1 target=$2 cc=$3 opt=$4 tag=$5
    shift 5
    local budget=mps2-an386
    [ "${target#riscv}" != "$target" ] && budget=qemu-virt
    local dir="$OUT/$model-$target-$cc-$opt$tag"
    local log="$dir.txt"
    if ! "$BIN" compile "$OUT/models/$model.onnx" --target "$target" --compiler "$cc" --opt "$opt" \
        --budget "$budget" --out "$dir" --input "$OUT/models/${model}_input.npy" --check "$@" \
        >"$log" 2>"$dir.err"; then
        echo "FAILED (see $dir.err)"
        return
    fi
    awk '
        /^instructions:/ { ins = $2 }
        /^flash:/ {
            for (i = 1; i <= NF; i++) {
                if ($i == "code" && code == "") code = $(i+1)
                if ($i == "weights" && w == "") w = $(i+1)
                if ($i == "calls") lib = $(i+1)
            }
        }
        /^RAM:/ { arena = $3; stack = $7 }
        END { printf "%s %s %s %s %s %s\n", ins, code, w, lib, arena, stack }
    ' "$log"
}

{
for model in sine digits_mlp digits_cnn kws_dscnn kws_int8; do
    extra=()
    [ "$model" = kws_int8 ] && extra=(--shape x=1,1,49,10)
    echo
    echo "== $model"
    printf '   %-28s %12s %8s %9s %8s %8s %8s\n' build "instr/inf" "code B" "weights B" "lib B" "arena B" "stack B"
    for build in "cortex-m4 gcc speed" "cortex-m4 clang speed" "cortex-m4 gcc size" "riscv32imafc gcc speed"; do
        # shellcheck disable=SC2086
        set -- $build
        read -r ins code w lib arena stack <<<"$(measure "$model" "$1" "$2" "$3" "" "${extra[@]}")"
        opt=-O2
        [ "$3" = size ] && opt=-Os
        printf '   %-28s %12s %8s %9s %8s %8s %8s\n' "$1 $2 $opt" "$ins" "${code:-}" "${w:-}" "${lib:-}" "${arena:-}" "${stack:-}"
    done
    measure "$model" cortex-m4 gcc speed -noinline --cflag=-fno-inline "${extra[@]}" >/dev/null
    echo "   per function (cortex-m4 gcc -O2 -fno-inline: attribution build), instructions per inference:"
    sed -n '/^instructions:/,/^budget:/p' "$OUT/$model-cortex-m4-gcc-speed-noinline.txt" | sed -n '2,$p' | grep -v '^budget:' | sed 's/^/   /'
done
echo
echo "(exact counts: picograd's QEMU plugin, (2 calls - 0 calls) / 2, including the harness's call"
echo " loop; flash = text + data of the model's objects (code + weights) plus the library functions"
echo " they call; every build was checked against the desktop with --check.)"
} | tee "$OUT/report.txt"
