#!/usr/bin/env bash
# Generation against transformers on PyTorch (bitsandbytes for int8 / nf4), in the same run:
# random-init folders of GPT-2 124M's and a 1.1B Llama's shapes (bench/make_generate_models.py,
# written once to MODELS_DIR), prompt 128, 128 new tokens, batch 1, greedy, 2 threads each side.
#
#   bash bench/compare_generate.sh [--models DIR] [--only gpt2|llama] [--modes "float32 bf16 int8 nf4 fp8"]
#                                   [--threads 2] [--repeat 3] [--device cpu|cuda] [--build-dir build]
#
# Prints, per model and mode, weft's and transformers' prefill and decode tokens/s and their
# ratios, weft's decode bandwidth against the read-only stream and the memory that holds its model
# over weights + KV cache (bench_generate's JSON), then every JSON line. fp8 (E4M3 weights) has no
# CPU peer in transformers: weft's side alone. Last, when the build folder holds weft-generate, the
# time to first token of a cold start of it on the GPT-2 folder (a tokenizer.json written for it).
# Needs bench/bench_generate in the build folder (cmake -DWEFT_BUILD_BENCH=ON) and a Python with
# torch, transformers (and bitsandbytes for int8/nf4): PYTHON=/path/to/python to choose it.
# --device cuda: both sides on the GPU (weft built with -DWEFT_CUDA=ON and benchmarks; a PyTorch
# with CUDA); the bandwidth bound is then the GPU's (a device-side read of the same bytes) and the
# memory the device's; no cold-start line.
set -euo pipefail
cd "$(dirname "$0")/.."
models=${TMPDIR:-/tmp}/weft-generate-models
only=""
modes="float32 bf16 int8 nf4 fp8"
threads=2
repeat=3
device=cpu
build=build
while [ $# -gt 0 ]; do
  case "$1" in
    --models) models=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    *) echo "usage: bench/compare_generate.sh [--models DIR] [--only gpt2|llama] [--modes LIST] [--threads N] [--repeat N] [--device cpu|cuda] [--build-dir DIR]" >&2; exit 2 ;;
  esac
done
python=${PYTHON:-python3}
bench=$build/bench/bench_generate
[ -x "$bench" ] || { echo "build $bench first: cmake -S . -B build -DWEFT_BUILD_BENCH=ON && cmake --build build --target bench_generate" >&2; exit 1; }
"$python" bench/make_generate_models.py "$models"
lines=()
printf '%-10s %-8s %12s %12s %7s %12s %12s %7s %9s %9s\n' model mode "weft pre/s" "hf pre/s" ratio "weft dec/s" "hf dec/s" ratio "bw frac" "mem/stored"
for name in gpt2-124m llama-1.1b; do
  case "$only" in gpt2) [ "$name" = gpt2-124m ] || continue ;; llama) [ "$name" = llama-1.1b ] || continue ;; esac
  for mode in $modes; do
    case "$mode" in
      float32) weft_args=(--dtype float32) ;;
      bf16) weft_args=(--dtype bfloat16) ;;
      int8|nf4|fp8) weft_args=(--quantize "$mode") ;;
      *) echo "unknown mode $mode" >&2; exit 2 ;;
    esac
    w=$("$bench" --model "$models/$name" "${weft_args[@]}" --threads "$threads" --repeat "$repeat" --device "$device" | tail -1)
    t='{}'
    if [ "$mode" != fp8 ]; then
      t=$("$python" bench/generate_torch.py --model "$models/$name" --mode "$mode" --threads "$threads" --repeat "$repeat" \
            --device "$device" 2>/dev/null | tail -1) || t='{}'
    fi
    lines+=("$w" "$t")
    "$python" - "$name" "$mode" "$w" "$t" <<'PY'
import json, sys
name, mode, w, t = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4] or "{}")
wp, wd = w["prefill_tokens_per_s"], w["decode_tokens_per_s"]
tp, td = t.get("prefill_tokens_per_s"), t.get("decode_tokens_per_s")
fmt = lambda v: f"{v:12.2f}" if v else f"{'-':>12}"
ratio = lambda a, b: f"{a / b:7.2f}" if b else f"{'-':>7}"
print(f"{name:<10} {mode:<8} {fmt(wp)} {fmt(tp)} {ratio(wp, tp)} {fmt(wd)} {fmt(td)} {ratio(wd, td)} "
      f"{w['bandwidth_fraction']:9.3f} {w['memory_over_stored']:9.3f}")
PY
  done
done
generate=$build/weft-generate
if [ -x "$generate" ] && [ "$only" != llama ] && [ "$device" = cpu ]; then
  # The test tokenizer (GPT-2's byte-level BPE trained small), its vocabulary padded with plain
  # tokens to the model's 50,257 ids so any id the random model picks decodes (bench/pad_tokenizer.py).
  python3 bench/pad_tokenizer.py tests/models/data/gpt2_tokenizer.json "$models/gpt2-124m"
  prompt=$(printf 'The quick brown fox jumps over the lazy dog near the river bank. %.0s' $(seq 5))
  g=$("$generate" --model "$models/gpt2-124m" --prompt "$prompt" --max-new-tokens 1 --greedy --threads "$threads" --json)
  lines+=("$g")
  "$python" - "$g" <<'PY'
import json, sys
g = json.loads(sys.argv[1])
prefill_ms = 1e3 * len(g["prompt_ids"]) / g["prefill_tokens_per_s"]
print(f"weft-generate cold start, GPT-2 shape, {len(g['prompt_ids'])}-token prompt: load {g['load_ms']:.1f} ms, "
      f"prefill {prefill_ms:.1f} ms, time to first token {g['time_to_first_token_ms']:.1f} ms "
      f"(target: 100 ms + prefill = {100 + prefill_ms:.1f} ms)")
PY
fi
printf '%s\n' "${lines[@]}"
