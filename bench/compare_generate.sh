#!/usr/bin/env bash
# Generation against transformers on PyTorch (bitsandbytes for int8 / nf4), in the same run:
# random-init folders of GPT-2 124M's and a 1.1B Llama's shapes (bench/make_generate_models.py,
# written once to MODELS_DIR), prompt 128, 128 new tokens, batch 1, greedy, 2 threads each side.
#
#   bash bench/compare_generate.sh [--models DIR] [--only gpt2|llama] [--modes "float32 bf16 int8 nf4"]
#                                   [--threads 2] [--repeat 3]
#
# Prints, per model and mode, weft's and transformers' prefill and decode tokens/s and their
# ratios, and weft's decode bandwidth against the read-only stream (bench_generate's JSON), then
# every JSON line. Needs build/bench/bench_generate (cmake -DWEFT_BUILD_BENCH=ON) and a Python with
# torch, transformers (and bitsandbytes for int8/nf4): PYTHON=/path/to/python to choose it.
set -euo pipefail
cd "$(dirname "$0")/.."
models=${TMPDIR:-/tmp}/weft-generate-models
only=""
modes="float32 bf16 int8 nf4"
threads=2
repeat=3
while [ $# -gt 0 ]; do
  case "$1" in
    --models) models=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    *) echo "usage: bench/compare_generate.sh [--models DIR] [--only gpt2|llama] [--modes LIST] [--threads N] [--repeat N]" >&2; exit 2 ;;
  esac
done
python=${PYTHON:-python3}
bench=build/bench/bench_generate
[ -x "$bench" ] || { echo "build $bench first: cmake -S . -B build -DWEFT_BUILD_BENCH=ON && cmake --build build --target bench_generate" >&2; exit 1; }
"$python" bench/make_generate_models.py "$models"
lines=()
printf '%-10s %-8s %12s %12s %7s %12s %12s %7s %9s\n' model mode "weft pre/s" "hf pre/s" ratio "weft dec/s" "hf dec/s" ratio "bw frac"
for name in gpt2-124m llama-1.1b; do
  case "$only" in gpt2) [ "$name" = gpt2-124m ] || continue ;; llama) [ "$name" = llama-1.1b ] || continue ;; esac
  for mode in $modes; do
    case "$mode" in
      float32) weft_args=(--dtype float32) ;;
      bf16) weft_args=(--dtype bfloat16) ;;
      int8|nf4) weft_args=(--quantize "$mode") ;;
      *) echo "unknown mode $mode" >&2; exit 2 ;;
    esac
    w=$("$bench" --model "$models/$name" "${weft_args[@]}" --threads "$threads" --repeat "$repeat" | tail -1)
    t=$("$python" bench/generate_torch.py --model "$models/$name" --mode "$mode" --threads "$threads" --repeat "$repeat" 2>/dev/null | tail -1) || t='{}'
    lines+=("$w" "$t")
    "$python" - "$name" "$mode" "$w" "$t" <<'PY'
import json, sys
name, mode, w, t = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4] or "{}")
wp, wd = w["prefill_tokens_per_s"], w["decode_tokens_per_s"]
tp, td = t.get("prefill_tokens_per_s"), t.get("decode_tokens_per_s")
fmt = lambda v: f"{v:12.2f}" if v else f"{'-':>12}"
ratio = lambda a, b: f"{a / b:7.2f}" if b else f"{'-':>7}"
print(f"{name:<10} {mode:<8} {fmt(wp)} {fmt(tp)} {ratio(wp, tp)} {fmt(wd)} {fmt(td)} {ratio(wd, td)} {w['bandwidth_fraction']:9.3f}")
PY
  done
done
printf '%s\n' "${lines[@]}"
