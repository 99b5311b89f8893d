#!/usr/bin/env bash
# Runs the quantized-kernel benchmarks of weft (bench_quant) and of PyTorch / bitsandbytes
# (quant_torch.py) back to back with the same arguments, and prints the ratios the quantization
# issue sets as targets, as a table and one JSON line ({"bench":"quant_summary", ...}):
#
#   int8 GEMM        weft / torch._int_mm (target >= 0.9)
#   4-bit GEMV       weft GB/s / memcpy GB/s of the same bytes (>= 0.70);
#                    PyTorch fp32 linear time / weft time (>= 4)
#   exact 4-bit GEMV the default (exact) product at batch 1: GB/s of the packed weight bytes /
#                    a read-only stream over as many bytes (>= 0.90), beside the int8-activation one
#   Linear4bit       batch 32: PyTorch fp32 linear time / weft time (>= 1);
#                    bitsandbytes CPU Linear4bit time / weft time at batch 1 and 32 (>= 20);
#                    batch 8 too (the fused kernel at a small batch, no target); beside them
#                    weft's own fp32 linear of the shape, and PyTorch's over it; and both sides
#                    with a bfloat16 compute dtype on a bfloat16 batch (bitsandbytes computes in
#                    bfloat16 on AVX-512 BF16 CPUs whatever the compute dtype: its error column)
#   Linear8bitLt     float16 batch of 128, 0 and 8 outlier columns: bitsandbytes CPU Linear8bitLt
#                    time / weft time, and PyTorch's fp32 linear of the batch / weft time
#   training step    forward + backward to the input at batch 128, both layers: bitsandbytes /
#                    weft, and PyTorch's fp32 linear / weft
#
#   bench/run_quant.sh [--build-dir DIR] [--python PY] [--threads N] [--min-time S] [--quick]
#
# DIR (default build, or $WEFT_BUILD_DIR) is a build configured with -DWEFT_BUILD_BENCH=ON. PY
# defaults to /work/venv/bin/python when it exists, else python3; it needs torch (and
# bitsandbytes for its column). Without torch, weft's figures alone are printed.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir="${WEFT_BUILD_DIR:-build}"
python="python3"
[ -x /work/venv/bin/python ] && python=/work/venv/bin/python
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --threads|--min-time) args+=("$1" "$2"); shift 2 ;;
    --quick) args+=("$1"); shift ;;
    *) echo "usage: $0 [--build-dir DIR] [--python PY] [--threads N] [--min-time S] [--quick]" >&2; exit 2 ;;
  esac
done

weft_bin="$build_dir/bench/bench_quant"
if [ ! -x "$weft_bin" ]; then
  echo "run_quant: $weft_bin not found; build it with" >&2
  echo "  cmake -S . -B $build_dir -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_BENCH=ON && cmake --build $build_dir --target bench_quant" >&2
  exit 1
fi

weft_out="$("$weft_bin" "${args[@]}")"
echo "$weft_out"
weft_json="$(grep '^{"bench":"quant"' <<<"$weft_out")"

if ! "$python" -c 'import torch' 2>/dev/null; then
  echo
  echo "PyTorch is not available to $python: weft's figures only."
  exit 0
fi
echo
torch_out="$("$python" bench/quant_torch.py "${args[@]}" 2>/dev/null)"
echo "$torch_out"
torch_json="$(grep '^{"bench":"quant_torch"' <<<"$torch_out")"

echo
"$python" - "$weft_json" "$torch_json" <<'PY'
import json, sys
w, t = json.loads(sys.argv[1]), json.loads(sys.argv[2])
summary = {"bench": "quant_summary", "int8_gemm": [], "gemv_4bit": [], "linear4bit": {}}
print("summary (ratios above 1: weft is faster)")
print(f"{'int8 GEMM M x N x K':<24} {'weft GOP/s':>11} {'torch GOP/s':>12} {'weft/torch':>11}")
for a, b in zip(w["int8_gemm"], t["int_mm"]):
    ratio = None if not b["gops"] else a["gops"] / b["gops"]
    summary["int8_gemm"].append({"m": a["m"], "n": a["n"], "k": a["k"], "weft_gops": a["gops"], "torch_gops": b["gops"],
                                 "ratio": ratio})
    shape = f"{a['m']}x{a['n']}x{a['k']}"
    print(f"{shape:<24} {a['gops']:>11.1f} {b['gops'] or float('nan'):>12.1f} {ratio or float('nan'):>11.2f}")
print(f"\n{'4-bit GEMV N x K':<24} {'GB/s':>8} {'of memcpy':>10} {'fp32 ms':>9} {'weft ms':>9} {'fp32/weft':>10}")
for a, b in zip(w["gemv_4bit"], t["linear_gemv"]):
    speedup = b["seconds"] / a["seconds"]
    summary["gemv_4bit"].append({"n": a["n"], "k": a["k"], "gbps": a["gbps"], "of_memcpy": a["gbps"] / a["memcpy_gbps"],
                                 "torch_fp32_over_weft": speedup})
    shape = f"{a['n']}x{a['k']}"
    print(f"{shape:<24} {a['gbps']:>8.1f} {a['gbps'] / a['memcpy_gbps']:>10.2f} {b['seconds'] * 1e3:>9.3f} "
          f"{a['seconds'] * 1e3:>9.3f} {speedup:>10.2f}")
summary["gemv_4bit_exact"] = []
print(f"\n{'exact 4-bit GEMV N x K':<24} {'GB/s':>8} {'int8 GB/s':>10} {'stream GB/s':>12} {'of stream':>10}")
for a in w["gemv_4bit_exact"]:
    summary["gemv_4bit_exact"].append({"n": a["n"], "k": a["k"], "gbps": a["gbps"], "int8_gbps": a["int8_gbps"],
                                       "of_stream": a["ratio"]})
    shape = f"{a['n']}x{a['k']}"
    print(f"{shape:<24} {a['gbps']:>8.1f} {a['int8_gbps']:>10.1f} {a['stream_gbps']:>12.1f} {a['ratio']:>10.2f}")
f = w["linear4bit"]["features"]
print(f"\n{'Linear4bit ' + str(f) + '^2':<24} {'weft ms':>9} {'fp32 ms':>9} {'fp32/weft':>10} {'bnb ms':>9} {'bnb/weft':>9}"
      f" {'weft fp32':>10} {'fp32/weft fp32':>15} {'bnb error':>10}")
for batch in (1, 8, 32):
    key = f"batch{batch}_ms"
    wm, fm, bm = w["linear4bit"][key], t["linear_fp32"][key], t["bnb_linear4bit"].get(key)
    wf = w["linear4bit"][f"fp32_{key}"]
    be = t["bnb_linear4bit"].get(f"batch{batch}_error")
    summary["linear4bit"][f"batch{batch}"] = {"weft_ms": wm, "torch_fp32_ms": fm, "bnb_ms": bm,
                                             "fp32_over_weft": fm / wm, "bnb_over_weft": bm / wm if bm else None,
                                             "weft_fp32_ms": wf, "torch_fp32_over_weft_fp32": fm / wf,
                                             "bnb_relative_error": be}
    print(f"{'batch ' + str(batch):<24} {wm:>9.3f} {fm:>9.3f} {fm / wm:>10.2f} {bm or float('nan'):>9.3f} "
          f"{(bm or float('nan')) / wm:>9.2f} {wf:>10.3f} {fm / wf:>15.2f} {be or float('nan'):>10.1e}")
summary["linear4bit_bf16"] = {}
print(f"\n{'Linear4bit bf16 compute':<24} {'weft ms':>9} {'bnb ms':>9} {'bnb/weft':>9}")
for batch in (1, 8, 32):
    wm, bm = w["linear4bit"][f"bf16_batch{batch}_ms"], t["bnb_linear4bit"].get(f"bf16_batch{batch}_ms")
    summary["linear4bit_bf16"][f"batch{batch}"] = {"weft_ms": wm, "bnb_ms": bm, "bnb_over_weft": bm / wm if bm else None}
    print(f"{'batch ' + str(batch):<24} {wm:>9.3f} {bm or float('nan'):>9.3f} {(bm or float('nan')) / wm:>9.2f}")
e = w["linear8bit"]
summary["linear8bit"] = []
print(f"\n{'Linear8bitLt ' + str(e['features']) + '^2, b' + str(e['batch']):<24} {'weft ms':>9} {'bnb ms':>9} {'bnb/weft':>9}"
      f" {'fp32 ms':>9} {'fp32/weft':>10}")
for a, b in zip(e["cases"], t["linear8bit"]["cases"]):
    fm, bm = t["linear8bit"]["fp32_ms"], b["bnb_ms"]
    summary["linear8bit"].append({"outliers": a["outliers"], "weft_ms": a["ms"], "bnb_ms": bm,
                                  "bnb_over_weft": bm / a["ms"] if bm else None, "torch_fp32_ms": fm,
                                  "fp32_over_weft": fm / a["ms"]})
    print(f"{str(a['outliers']) + ' outlier columns':<24} {a['ms']:>9.3f} {bm or float('nan'):>9.3f} "
          f"{(bm or float('nan')) / a['ms']:>9.2f} {fm:>9.3f} {fm / a['ms']:>10.2f}")
ws, ts = w["train_step"], t["train_step"]
summary["train_step"] = {}
print(f"\n{'fwd + bwd to x, b' + str(ws['batch']):<24} {'weft ms':>9} {'bnb ms':>9} {'bnb/weft':>9} {'fp32 ms':>9} {'fp32/weft':>10}")
for name, key in (("Linear4bit", "linear4bit"), ("Linear8bitLt", "linear8bit")):
    wm, bm, fm = ws[key + "_ms"], ts["bnb_" + key + "_ms"], ts["fp32_ms"]
    summary["train_step"][key] = {"weft_ms": wm, "bnb_ms": bm, "bnb_over_weft": bm / wm if bm else None,
                                  "torch_fp32_ms": fm, "fp32_over_weft": fm / wm}
    print(f"{name:<24} {wm:>9.3f} {bm or float('nan'):>9.3f} {(bm or float('nan')) / wm:>9.2f} {fm:>9.3f} {fm / wm:>10.2f}")
print(json.dumps(summary, separators=(",", ":")))
PY
