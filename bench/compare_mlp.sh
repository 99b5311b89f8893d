#!/usr/bin/env bash
# The example MLP against the same MLP in PyTorch, in one run: trains weft's examples/mlp_train
# and bench/mlp_torch.py for the same epochs on Fashion-MNIST and prints each wall time (training
# plus per-epoch evaluation, data loading excluded on both sides), test accuracy, and the ratio
# weft/PyTorch (below 1: weft is faster; the targets are 0.35 for 32-true, 0.5 for bf16-mixed;
# 64-true, float64 throughout, has none and runs only when asked for).
#
# Peers: PyTorch 2.x from PyPI (TORCH_PYTHON, default /work/venv/bin/python; MKL / oneDNN), the
# main one, and Debian's PyTorch 1.13 (/usr/bin/python3 with python3-torch; OpenBLAS), when
# installed. Every configuration runs twice, with OPENBLAS_CORETYPE unset and set (its value from
# the environment, else Haswell, as the project's machines set it): only OpenBLAS reads it.
# Threads: --threads N for both sides (default: every core), and for PyTorch's OpenBLAS pool.
# Usage: bench/compare_mlp.sh [--build-dir DIR] [--epochs N] [--threads N]
#                             [--precision 32-true|bf16-mixed|64-true|both] [--coretype unset|set|both]
set -euo pipefail
cd "$(dirname "$0")/.."
build=build epochs=3 threads=0 precisions="32-true bf16-mixed" coretypes="unset set"
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --precision) [ "$2" = both ] || precisions=$2; shift 2 ;;
    --coretype) [ "$2" = both ] || coretypes=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
trainer="$build/examples/mlp_train"
[ -x "$trainer" ] || { echo "build $trainer first (cmake --build $build --target mlp_train)" >&2; exit 1; }
[ "$threads" = 0 ] && threads=$(nproc)
coretype=${OPENBLAS_CORETYPE:-Haswell}
torch_python=${TORCH_PYTHON:-/work/venv/bin/python}
peers=()
for py in "$torch_python" /usr/bin/python3; do
  if [ -x "$py" ] && "$py" -c 'import torch' 2>/dev/null; then peers+=("$py"); else echo "no PyTorch for $py: skipped" >&2; fi
done
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
results=$(mktemp)
trap 'rm -f "$results"' EXIT

in_env() {  # in_env unset|set COMMAND...: runs COMMAND with OPENBLAS_CORETYPE unset or set
  if [ "$1" = unset ]; then shift; env -u OPENBLAS_CORETYPE "$@"; else shift; OPENBLAS_CORETYPE=$coretype "$@"; fi
}

for precision in $precisions; do
  for env_state in $coretypes; do
    w=$(in_env "$env_state" "$trainer" --epochs "$epochs" --threads "$threads" --precision "$precision" \
          --no-progress --log "" --plot "" | grep '^{')
    echo "weft ($precision, OPENBLAS_CORETYPE $env_state): $w"
    echo "{\"side\": \"weft\", \"env\": \"$env_state\", \"run\": $w}" >> "$results"
    for py in "${peers[@]}"; do
      t=$(in_env "$env_state" "$py" bench/mlp_torch.py --epochs "$epochs" --threads "$threads" --precision "$precision")
      echo "pytorch ($py, $precision, OPENBLAS_CORETYPE $env_state): $t"
      echo "{\"side\": \"torch\", \"env\": \"$env_state\", \"run\": $t}" >> "$results"
    done
  done
done

python3 - "$results" "$coretype" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
coretype = sys.argv[2]
print(f"\n{'precision':<11} {'OPENBLAS_CORETYPE':<18} {'weft s':>7} {'acc':>6} {'kernel':<34} | "
      f"{'peer':<14} {'s':>7} {'acc':>6} | {'weft/peer':>9}")
summary = []
for w in (r for r in runs if r["side"] == "weft"):
    wr = w["run"]
    for t in (r for r in runs if r["side"] == "torch" and r["env"] == w["env"] and r["run"]["precision"] == wr["precision"]):
        tr = t["run"]
        ratio = wr["seconds"] / tr["seconds"]
        env = "unset" if w["env"] == "unset" else coretype
        print(f"{wr['precision']:<11} {env:<18} {wr['seconds']:>7.2f} {wr['test_accuracy']:>6.4f} {wr['kernel']:<34} | "
              f"{'torch ' + tr['version'].split('+')[0]:<14} {tr['seconds']:>7.2f} {tr['test_accuracy']:>6.4f} | {ratio:>9.3f}")
        summary.append({"precision": wr["precision"], "openblas_coretype": env, "weft": wr, "pytorch": tr,
                        "time_ratio_weft_over_pytorch": round(ratio, 3)})
print(json.dumps({"bench": "mlp", "runs": summary}))
PY
