#!/usr/bin/env bash
# The example MLP against the same MLP in PyTorch, in one run: trains both for the same epochs
# on Fashion-MNIST and prints both wall times (training + per-epoch evaluation, data loading
# excluded for both), both test accuracies and the time ratio weft/PyTorch (below 1: weft is
# faster). Each side runs with its own default thread count unless --threads is given, which
# sets weft's, PyTorch's and PyTorch's OpenBLAS pool's (by default that pool uses every core
# even when PyTorch itself runs one thread).
# Usage: bench/compare_mlp.sh [--build-dir DIR] [--epochs N] [--threads N] [--precision P]
set -euo pipefail
cd "$(dirname "$0")/.."
build=build epochs=3 threads=0 precision=32-true
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
trainer="$build/examples/mlp_train"
[ -x "$trainer" ] || { echo "build $trainer first (cmake --build $build --target mlp_train)" >&2; exit 1; }
weft_args=(--epochs "$epochs" --no-progress --log "" --plot "")
torch_args=(--epochs "$epochs")
[ "$threads" != 0 ] && weft_args+=(--threads "$threads") && torch_args+=(--threads "$threads")
if [ "$precision" != 32-true ]; then
  weft_args+=(--precision "$precision")
  torch_args+=(--precision "$precision")
fi
weft_json=$("$trainer" "${weft_args[@]}" | grep '^{')
echo "weft:    $weft_json"
if ! python3 -c 'import torch' 2>/dev/null; then
  echo "PyTorch is not installed (apt-get install python3-torch): no ratio."
  exit 0
fi
torch_json=$(python3 bench/mlp_torch.py "${torch_args[@]}")
echo "pytorch: $torch_json"
python3 - "$weft_json" "$torch_json" <<'PY'
import json, sys
w, t = json.loads(sys.argv[1]), json.loads(sys.argv[2])
ratio = w["seconds"] / t["seconds"]
blas = t.get("blas_threads")
torch_threads = f"{t['threads']} threads" + (f", OpenBLAS {blas}" if blas is not None else "")
print(f"weft {w['seconds']:.2f} s ({w['threads']} threads), accuracy {w['test_accuracy']:.4f} | "
      f"pytorch {t['seconds']:.2f} s ({torch_threads}), accuracy {t['test_accuracy']:.4f} | "
      f"time ratio weft/pytorch {ratio:.2f}")
print(json.dumps({"bench": "mlp", "weft": w, "pytorch": t, "time_ratio_weft_over_pytorch": round(ratio, 3)}))
PY
