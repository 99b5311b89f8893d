#!/usr/bin/env bash
# A GPT training step (forward, backward, AdamW) in weft against PyTorch eager, in one run: the
# example's config (4 layers, 4 heads, 128 wide, batch 12 x 64, vocabulary 65) and GPT-2 124M at
# batch 4 x 64, each in 32-true and bf16-mixed (bench/bench_gpt.cpp, bench/gpt_torch.py: the same
# model, init, optimizer and batch shape). Prints a table of median ms/step, the ratio
# weft/PyTorch (the target is <= 0.5) and each step's GEMM floor, then one JSON line.
#
# Each case runs weft then PyTorch back to back, so both see the same machine load.
# Peer: PyTorch from PyPI (TORCH_PYTHON, default /work/venv/bin/python).
# --device cuda: both sides on the GPU (a CUDA build of weft with benchmarks, a PyTorch with CUDA);
# the GEMM floor is then left out, as no GPU peak is measured.
# Usage: bench/compare_gpt.sh [--build-dir DIR] [--threads N] [--steps N] [--config char|gpt2|both]
#                             [--precision 32-true|bf16-mixed|both] [--device cpu|cuda]
set -euo pipefail
cd "$(dirname "$0")/.."
build=build threads=2 steps="" configs="char gpt2" precisions="32-true bf16-mixed" device=cpu
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --config) [ "$2" = both ] || configs=$2; shift 2 ;;
    --precision) [ "$2" = both ] || precisions=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
bench="$build/bench/bench_gpt"
[ -x "$bench" ] || { echo "build $bench first (-DWEFT_BUILD_BENCH=ON, cmake --build $build --target bench_gpt)" >&2; exit 1; }
torch_python=${TORCH_PYTHON:-/work/venv/bin/python}
"$torch_python" -c 'import torch' 2>/dev/null || { echo "no PyTorch for $torch_python" >&2; exit 1; }
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
results=$(mktemp)
trap 'rm -f "$results"' EXIT

for config in $configs; do
  # GPT-2's step takes seconds: fewer of them.
  n=${steps:-$([ "$config" = gpt2 ] && echo 5 || echo 20)}
  for precision in $precisions; do
    "$bench" --config "$config" --precision "$precision" --steps "$n" --threads "$threads" --device "$device" |
      tee /dev/stderr | grep '^{' >> "$results"
    "$torch_python" bench/gpt_torch.py --config "$config" --precision "$precision" --steps "$n" \
      --threads "$threads" --device "$device" | tee /dev/stderr >> "$results"
  done
done

python3 - "$results" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(f"\n{'case':<5} {'precision':<11} {'weft ms':>9} {'torch ms':>9} {'weft/torch':>10} {'floor ms':>9} "
      f"{'weft fwd/bwd/adamw ms':>24} {'torch fwd/bwd/adamw ms':>24}")
summary = []
for w in (r for r in runs if r["side"] == "weft"):
    t = next(r for r in runs if r["side"] == "torch" and r["config"] == w["config"] and r["precision"] == w["precision"])
    ratio = w["ms_median"] / t["ms_median"]
    phases = lambda r: f"{r['ms_forward']:.1f}/{r['ms_backward']:.1f}/{r['ms_adamw']:.1f}"
    floor = f"{w['gemm_floor_ms']:.1f}" if w["gemm_floor_ms"] else "-"  # none on a GPU
    print(f"{w['config']:<5} {w['precision']:<11} {w['ms_median']:>9.1f} {t['ms_median']:>9.1f} {ratio:>10.3f} "
          f"{floor:>9} {phases(w):>24} {phases(t):>24}")
    summary.append({"config": w["config"], "precision": w["precision"], "device": w["device"], "weft": w, "pytorch": t,
                    "time_ratio_weft_over_pytorch": round(ratio, 3), "target": 0.5})
print(json.dumps({"bench": "gpt", "runs": summary}))
PY
