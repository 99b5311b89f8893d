#!/usr/bin/env bash
# Runs the per-op overhead benchmark in weft and in PyTorch back to back, with the same arguments,
# and prints both figures and the ratio torch/weft (above 1: weft has less overhead per op).
# Without PyTorch it says so and prints weft's figures alone.
#
#   bench/run_op_overhead.sh [--build-dir DIR] [--ops N] [--every K] [--repeats R]
#
# DIR (default: build, or $WEFT_BUILD_DIR) is a build configured with -DWEFT_BUILD_BENCH=ON.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir="${WEFT_BUILD_DIR:-build}"
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --ops|--every|--repeats) args+=("$1" "$2"); shift 2 ;;
    *) echo "usage: $0 [--build-dir DIR] [--ops N] [--every K] [--repeats R]" >&2; exit 2 ;;
  esac
done

weft_bin="$build_dir/bench/bench_op_overhead"
if [ ! -x "$weft_bin" ]; then
  echo "run_op_overhead: $weft_bin not found; build it with" >&2
  echo "  cmake -S . -B $build_dir -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_BENCH=ON && cmake --build $build_dir -j2 --target bench_op_overhead" >&2
  exit 1
fi

# The value of "key":number in a one-line JSON object.
field() { grep -o "\"$2\":[-0-9.eE+]*" <<<"$1" | head -n1 | cut -d: -f2; }

weft_out="$("$weft_bin" "${args[@]}")"
echo "$weft_out"
weft_json="$(grep '^{"bench":"op_overhead"' <<<"$weft_out")"

if ! python3 -c 'import torch' 2>/dev/null; then
  echo
  echo "PyTorch is not installed (python3 -c 'import torch' failed): weft's figures only."
  echo "Install Debian's python3-torch to compare against PyTorch."
  exit 0
fi
echo
torch_out="$(python3 bench/op_overhead_torch.py "${args[@]}")"
echo "$torch_out"
torch_json="$(grep '^{"bench":"op_overhead"' <<<"$torch_out")"

echo
echo "summary: us/op (lower is better), ratio torch/weft (above 1: weft is faster)"
printf '%-16s %10s %10s %12s\n' mode weft torch torch/weft
for mode in no_grad forward with_backward; do
  w="$(field "$weft_json" "us_per_op_$mode")"
  t="$(field "$torch_json" "us_per_op_$mode")"
  awk -v m="$mode" -v w="$w" -v t="$t" 'BEGIN { printf "%-16s %10.3f %10.3f %12.2f\n", m, w, t, t / w }'
done
