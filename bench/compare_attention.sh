#!/usr/bin/env bash
# Runs bench_attention (weft's fused attention) and bench/attention_torch.py (PyTorch's CPU SDPA)
# back to back with the same arguments, and prints, per dtype and context, both times and the
# ratio weft / PyTorch of the forward + backward (the target: <= 0.5) and of the forward, as a
# table and one JSON line ({"bench":"attention_summary", ...}).
#
#   bench/compare_attention.sh [--build-dir DIR] [--python PY] [--threads N] [--min-time S] [--quick]
#
# DIR (default build, or $WEFT_BUILD_DIR) is a build configured with -DWEFT_BUILD_BENCH=ON. PY
# defaults to /work/venv/bin/python when it exists, else python3; it needs torch.
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

weft_out=$("$build_dir/bench/bench_attention" "${args[@]}")
torch_out=$("$python" bench/attention_torch.py "${args[@]}")
echo "$weft_out"
echo "$torch_out"
WEFT_JSON=$(grep '^{"bench":"attention"' <<<"$weft_out") TORCH_JSON=$(grep '^{"bench":"attention_torch"' <<<"$torch_out") \
"$python" - <<'PY'
import json, os
weft = json.loads(os.environ["WEFT_JSON"])
torch = json.loads(os.environ["TORCH_JSON"])
peer = {(c["dtype"], c["T"]): c for c in torch["cases"]}
rows = []
print(f"{'dtype':<9} {'T':>6} {'weft f+b ms':>12} {'torch f+b ms':>13} {'ratio':>6} {'fwd ratio':>9} "
      f"{'weft MiB':>9} {'torch MiB':>9}")
for c in weft["cases"]:
    p = peer[(c["dtype"], c["T"])]
    ratio = c["fwd_bwd_ms"] / p["fwd_bwd_ms"]
    fwd_ratio = c["forward_ms"] / p["forward_ms"]
    print(f"{c['dtype']:<9} {c['T']:>6} {c['fwd_bwd_ms']:>12.2f} {p['fwd_bwd_ms']:>13.2f} {ratio:>6.2f} "
          f"{fwd_ratio:>9.2f} {c['peak_extra_mib']:>9.1f} {p['peak_extra_mib']:>9.1f}")
    rows.append({"dtype": c["dtype"], "T": c["T"], "weft_fwd_bwd_ms": c["fwd_bwd_ms"],
                 "torch_fwd_bwd_ms": p["fwd_bwd_ms"], "ratio": round(ratio, 3), "forward_ratio": round(fwd_ratio, 3),
                 "weft_peak_extra_mib": c["peak_extra_mib"], "torch_peak_extra_mib": p["peak_extra_mib"]})
print(json.dumps({"bench": "attention_summary", "attention": weft["attention"], "attention_bf16": weft["attention_bf16"],
                  "threads": weft["threads"],
                  "torch": torch["torch"], "target_ratio": 0.5, "cases": rows}, separators=(",", ":")))
PY
