#!/usr/bin/env bash
# weft's CUDA backend against PyTorch on the same GPU, in one run: bench_cuda (a build with
# -DWEFT_CUDA=ON) and bench/cuda_torch.py (PyTorch with CUDA), then one table of ratios:
#   MLP step      PyTorch time / weft time (above 1: weft is faster): fp32 eager, fp32 captured as
#                 one CUDA graph (both sides), bf16-mixed
#   GEMM          weft TFLOP/s / PyTorch TFLOP/s (the goal is 0.95 or more)
#   allocator     pairs/s weft / PyTorch, and peak reserved weft / PyTorch (below 1: weft holds less)
# Refuses (status 2) without a GPU, naming what is missing.
# Usage: bench/compare_cuda.sh [--build-dir DIR] [--steps N]
#        (TORCH_PYTHON: default /work/venv/bin/python where it exists, else python3)
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-cuda steps=500
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) echo "compare_cuda.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
python=${TORCH_PYTHON:-/work/venv/bin/python}
[ -n "${TORCH_PYTHON:-}" ] || [ -x "$python" ] || python=python3
if ! nvidia-smi -L > /dev/null 2>&1; then
  echo "compare_cuda.sh: needs a CUDA GPU, got none (nvidia-smi lists no device); nothing measured" >&2
  exit 2
fi
bench="$build/bench/bench_cuda"
[ -x "$bench" ] || { echo "compare_cuda.sh: build $bench first (configure with -DWEFT_CUDA=ON -DWEFT_BUILD_BENCH=ON, then cmake --build $build --target bench_cuda)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bench" --steps "$steps" | tee "$work/weft.txt"
echo
"$python" bench/cuda_torch.py --steps "$steps" | tee "$work/torch.txt"
echo
"$python" - "$work/weft.txt" "$work/torch.txt" <<'PY'
import json, sys
def last_json(path):
    return json.loads([l for l in open(path) if l.startswith('{"bench":"cuda"') or l.startswith('{"bench": "cuda"')][-1])
w, t = last_json(sys.argv[1]), last_json(sys.argv[2])
print(f"{'ratio':<34} {'weft':>10} {'pytorch':>10} {'ratio':>8}")
for mode in ("fp32_eager", "fp32_graph", "bf16_mixed"):
    a, b = w["mlp_us"][mode], t["mlp_us"][mode]
    print(f"{'MLP ' + mode + ' (us, torch/weft)':<34} {a:10.1f} {b:10.1f} {b / a:8.2f}")
for key in w["gemm_tflops"]:
    a, b = w["gemm_tflops"][key], t["gemm_tflops"][key]
    print(f"{'GEMM ' + key + ' (TFLOP/s, weft/torch)':<34} {a:10.1f} {b:10.1f} {a / b:8.2f}")
a, b = w["alloc_pairs_per_s"], t["alloc_pairs_per_s"]
print(f"{'alloc+free pairs/s (weft/torch)':<34} {a:10.0f} {b:10.0f} {a / b:8.2f}")
a, b = w["mlp_peak_reserved_mb"], t["mlp_peak_reserved_mb"]
print(f"{'MLP peak reserved MB (weft/torch)':<34} {a:10.1f} {b:10.1f} {a / b:8.2f}")
print(json.dumps({"bench": "compare_cuda", "weft": w, "pytorch": t}))
PY
