#!/usr/bin/env bash
# One epoch of the example MLP on an otherwise idle machine and beside CPU-bound processes, for
# weft and for PyTorch in the same run (Note [A pool that survives a busy machine] in
# tensor/cpu/thread_pool.h). A fair share of the cores beside one busy process on a 2-core machine
# is half of them, so 2× the idle time is the fair figure; weft's target is at most 2.5×.
# OpenMP runtimes that spin while waiting (PyTorch's libgomp, OpenBLAS) fight the busy process
# for its core and can take 10-30× their idle time.
#
# A busy process is a shell spinning in a loop (no system calls, no memory traffic). Each side runs
# --threads threads (default: every core), PyTorch with its environment as a user has it
# (OMP_WAIT_POLICY unset). Prints a table and one JSON line.
# Usage: bench/contention_mlp.sh [--build-dir DIR] [--threads N] [--busy N] [--precision P]
set -euo pipefail
cd "$(dirname "$0")/.."
build=build threads=0 busy=1 precision=32-true
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --busy) busy=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
trainer="$build/examples/mlp_train"
[ -x "$trainer" ] || { echo "build $trainer first (cmake --build $build --target mlp_train)" >&2; exit 1; }
[ "$threads" = 0 ] && threads=$(nproc)
torch_python=${TORCH_PYTHON:-/work/venv/bin/python}
[ -x "$torch_python" ] && "$torch_python" -c 'import torch' 2>/dev/null || torch_python=""

hogs=()
start_busy() { for _ in $(seq "$busy"); do bash -c 'while :; do :; done' & hogs+=($!); done; sleep 0.5; }
stop_busy() { [ ${#hogs[@]} -gt 0 ] && kill "${hogs[@]}" 2>/dev/null; wait "${hogs[@]}" 2>/dev/null || true; hogs=(); }
trap stop_busy EXIT

weft_epoch() { "$trainer" --epochs 1 --threads "$threads" --precision "$precision" --no-progress --log "" --plot "" | grep '^{'; }
torch_epoch() { "$torch_python" bench/mlp_torch.py --epochs 1 --threads "$threads" --precision "$precision"; }
seconds() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])["seconds"])' "$1"; }

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs; $threads threads each side, $busy busy process(es)"
w_idle=$(weft_epoch); start_busy; w_busy=$(weft_epoch); stop_busy
t_idle=null t_busy=null
if [ -n "$torch_python" ]; then
  t_idle=$(seconds "$(torch_epoch)"); start_busy; t_busy=$(seconds "$(torch_epoch)"); stop_busy
else
  echo "no PyTorch (set TORCH_PYTHON): its column stays empty" >&2
fi
python3 - "$(seconds "$w_idle")" "$(seconds "$w_busy")" "$t_idle" "$t_busy" "$busy" "$threads" <<'PY'
import json, sys
w_idle, w_busy = float(sys.argv[1]), float(sys.argv[2])
t_idle = None if sys.argv[3] == "null" else float(sys.argv[3])
t_busy = None if sys.argv[4] == "null" else float(sys.argv[4])
print(f"\n{'one epoch':<10} {'idle s':>8} {'busy s':>8} {'busy/idle':>10}")
print(f"{'weft':<10} {w_idle:>8.2f} {w_busy:>8.2f} {w_busy / w_idle:>10.2f}")
if t_idle:
    print(f"{'pytorch':<10} {t_idle:>8.2f} {t_busy:>8.2f} {t_busy / t_idle:>10.2f}")
print(json.dumps({"bench": "contention_mlp", "busy_processes": int(sys.argv[5]), "threads": int(sys.argv[6]),
                  "weft": {"idle_s": w_idle, "busy_s": w_busy, "ratio": round(w_busy / w_idle, 3)},
                  "pytorch": {"idle_s": t_idle, "busy_s": t_busy, "ratio": round(t_busy / t_idle, 3)} if t_idle else None}))
PY
