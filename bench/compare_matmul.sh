#!/usr/bin/env bash
# weft's GEMM against every peer, in one run, on the same cases (bench/bench_matmul.cpp):
#   1. bench_matmul with OPENBLAS_CORETYPE unset in that command alone (OpenBLAS picks its kernels
#      for this CPU, as on a user's machine): weft, Eigen (compiled -march=native), OpenBLAS;
#   2. bench_matmul --dtype fp32 with OPENBLAS_CORETYPE set (its value from the environment, else
#      Haswell, as the project's machines set it): OpenBLAS forced to AVX2 kernels;
#   3. PyTorch 2.x from PyPI (TORCH_PYTHON, default /work/venv/bin/python, else python3);
#   4. Debian's PyTorch 1.13 (/usr/bin/python3 with python3-torch), when installed.
# Then one table: GFLOP/s per case and dtype, weft's share of the measured FMA peak (how it was
# computed is printed), and weft over the best peer (above 1: weft is faster).
# Usage: bench/compare_matmul.sh [--build-dir DIR] [--threads N] [--min-time S] [--only TEXT]
set -euo pipefail
cd "$(dirname "$0")/.."
build=build threads=0 min_time=0.6 only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --min-time) min_time=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
bench="$build/bench/bench_matmul"
[ -x "$bench" ] || { echo "build $bench first (cmake --build $build --target bench_matmul)" >&2; exit 1; }
[ "$threads" = 0 ] && threads=$(nproc)
args=(--threads "$threads" --min-time "$min_time")
[ -n "$only" ] && args+=(--only "$only")
coretype=${OPENBLAS_CORETYPE:-Haswell}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

env -u OPENBLAS_CORETYPE "$bench" "${args[@]}" | tee "$out/unset.txt"
OPENBLAS_CORETYPE=$coretype "$bench" "${args[@]}" --dtype fp32 > "$out/set.txt"
torch_python=${TORCH_PYTHON:-/work/venv/bin/python}
[ -x "$torch_python" ] || torch_python=python3
for py in "$torch_python" /usr/bin/python3; do
  if "$py" -c 'import torch' 2>/dev/null; then
    "$py" bench/matmul_torch.py "${args[@]}" >> "$out/torch.txt"
  else
    echo "no PyTorch for $py: its column stays empty" >&2
  fi
done

python3 - "$out" "$coretype" <<'PY'
import json, sys
out, coretype = sys.argv[1], sys.argv[2]
def bench_json(path):
    return json.loads([l for l in open(path, encoding="utf-8") if l.startswith('{"bench"')][-1])
unset, forced = bench_json(f"{out}/unset.txt"), bench_json(f"{out}/set.txt")
torches = []
try:
    seen = set()
    for line in open(f"{out}/torch.txt", encoding="utf-8"):
        t = json.loads(line)
        if t["torch"] not in seen:
            seen.add(t["torch"])
            torches.append(t)
except FileNotFoundError:
    pass
forced_blas = {(c["name"], c["dtype"]): c["openblas_gflops"] for c in forced["cases"]}
peak = unset["peak_gflops"]
peak_of = {"fp32": peak, "bf16": unset["peak_bf16_gflops"]}
cols = ["Eigen", "OpenBLAS", f"OpenBLAS {coretype}"] + [f"torch {t['torch'].split('+')[0]}" for t in torches]
print(f"\nweft: {unset['kernel_fp32']} / {unset['kernel_bf16']}; {unset['threads']} threads; "
      f"FMA peak {peak:.1f} GFLOP/s ({unset['flop_per_cycle']} FLOP/cycle/core = {unset['fma_units']} FMA units, best round {unset['fma_per_cycle_best']:.2f}/cycle, median {unset['fma_per_cycle_median']:.2f}, x {unset['ghz']:.2f} GHz x {unset['threads']})")
print(f"bf16 peak {unset['peak_bf16_gflops']:.1f} GFLOP/s (bench_matmul's header says how)")
print(f"OpenBLAS: {unset['openblas']}; with OPENBLAS_CORETYPE={coretype}: {forced['openblas']}")
for t in torches:
    print(f"torch {t['torch']}: {', '.join(t['backend'])}; {t['threads']} threads")
print(f"\n{'case':<16} {'dtype':>5} | {'weft':>7} {'%peak':>6} | " + " ".join(f"{c:>16}" for c in cols) + f" | {'weft/best':>9}")
summary = []
for c in unset["cases"]:
    key = (c["name"], c["dtype"])
    peers = [c["eigen_gflops"], c["openblas_gflops"], forced_blas.get(key)]
    for t in torches:
        peers.append(next((x["gflops"] for x in t["cases"] if (x["name"], x["dtype"]) == key), None))
    measured = [p for p in peers if p]
    best = max(measured) if measured else None
    ratio = c["weft_gflops"] / best if best else None
    summary.append({"name": c["name"], "dtype": c["dtype"], "weft_gflops": c["weft_gflops"],
                    "weft_percent_of_peak": round(100 * c["weft_gflops"] / peak_of[c["dtype"]], 1), "peers": dict(zip(cols, peers)),
                    "weft_over_best_peer": round(ratio, 3) if ratio else None})
    cells = " ".join(f"{p:>16.1f}" if p else f"{'-':>16}" for p in peers)
    print(f"{c['name']:<16} {c['dtype']:>5} | {c['weft_gflops']:>7.1f} {100 * c['weft_gflops'] / peak_of[c['dtype']]:>5.1f}% | {cells} | "
          + (f"{ratio:>9.2f}" if ratio else f"{'-':>9}"))
print(json.dumps({"bench": "compare_matmul", "peak_gflops": peak, "cases": summary}, ensure_ascii=False))
PY
