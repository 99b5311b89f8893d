#!/usr/bin/env bash
# Data-parallel training against PyTorch on Gloo, in one run: the example MLP on 2 ranks, global
# batch 128, one thread per rank, DDP and FSDP (PyTorch: DDP and FSDP2), each side once as its
# ranks are scheduled by default and once with each rank bound to its own share of the CPUs
# (`weft-run --cpu-bind`; the PyTorch peer binds its ranks the same way), then weft's model-state
# memory per rank against the ZeRO formula at 1, 2 and 4 ranks. Prints each JSON line and the
# step-time ratios weft/PyTorch (below 1: weft is faster). Each step-time pair runs --repeat
# times back to back (weft, then PyTorch) and the summary gives the median ratio and its range:
# on a shared VM one pair can differ by 1.5× from the next. Final figures need a quiet machine.
# --bucket-view runs DDP with gradient_as_bucket_view on both sides (gradients live in the
# all-reduce buckets, saving a copy each way); --comm-hook fp16|bf16 with the 16-bit compressing
# comm hook on both sides (half the bytes on the wire).
# Usage: bench/compare_distributed.sh [--build-dir DIR] [--python PYTHON] [--steps N (default 100)]
#                                     [--repeat R (default 3)] [--bucket-view] [--comm-hook fp16|bf16]
set -euo pipefail
cd "$(dirname "$0")/.."
build=build python=/work/venv/bin/python steps=100 repeat=3 ddp_weft=() ddp_torch=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --bucket-view) ddp_weft+=(--bucket-view on) ddp_torch+=(--bucket-view); shift ;;
    --comm-hook) ddp_weft+=(--comm-hook "$2") ddp_torch+=(--comm-hook "$2"); shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
bench="$build/bench/bench_distributed" run="$build/weft-run"
for f in "$bench" "$run"; do
  [ -x "$f" ] || { echo "build $f first (cmake --build $build --target bench_distributed weft-run)" >&2; exit 1; }
done
export OMP_NUM_THREADS=1
# The PyTorch peer's JSON line. PyTorch 2.15's Gloo ranks now and then abort as they shut down
# ("terminate called without an active exception", seen on the Zen 5 VM), before the line is
# printed: such a run is retried, up to three times in all.
torch_peer() {
  local line attempt
  for attempt in 1 2 3; do
    if line=$("$python" bench/distributed_torch.py "$@" 2>/dev/null | grep '^{'); then
      echo "$line"
      return 0
    fi
    echo "PyTorch peer ($*) failed on attempt $attempt" >&2
  done
  return 1
}
results=()
for ((i = 0; i < repeat; i++)); do
  for bind in "" --cpu-bind; do
    mark="s/^{/{\"cpu_bind\": $([ -n "$bind" ] && echo true || echo false), \"repeat\": $i, /"
    for s in ddp fsdp; do
      weft_extra=() torch_extra=()
      [ "$s" = ddp ] && weft_extra=("${ddp_weft[@]}") torch_extra=("${ddp_torch[@]}")
      results+=("$("$run" -n 2 $bind "$bench" step --strategy "$s" --steps "$steps" "${weft_extra[@]}" | grep '^{' | sed "$mark")")
      if "$python" -c 'import torch' 2>/dev/null; then
        results+=("$(torch_peer --strategy "$s" --ranks 2 --steps "$steps" $bind "${torch_extra[@]}" | sed "$mark")")
      fi
    done
  done
done
# The sharded stages twice: bf16 gradient shards (keep_low_precision_grads, the formula's 2-byte
# gradients) and fp32 ones (PyTorch FSDP's default).
for s in ddp fsdp zero2; do
  grads=(bf16 fp32)
  [ "$s" = ddp ] && grads=(fp32)
  for g in "${grads[@]}"; do
    for n in 1 2 4; do
      results+=("$("$run" -n "$n" "$bench" memory --strategy "$s" --grads "$g" | grep '^{')")
    done
  done
done
printf '%s\n' "${results[@]}"
printf '%s\n' "${results[@]}" | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
steps = [r for r in rows if r["mode"] == "step"]
for bound in (False, True):
    for s in ("ddp", "fsdp"):
        pairs = []
        for i in sorted({r["repeat"] for r in steps}):
            same = [r for r in steps if r["strategy"] == s and r["cpu_bind"] == bound and r["repeat"] == i]
            w = [r for r in same if r["program"].startswith("weft")]
            t = [r for r in same if r["program"].startswith("pytorch")]
            if w and t:
                pairs.append((w[0]["median_ms"] / t[0]["median_ms"], w[0], t[0]))
        if not pairs:
            continue
        pairs.sort(key=lambda p: p[0])
        ratio, w, t = pairs[len(pairs) // 2]
        print("%s, %s: median of %d pairs: weft %.2f ms, pytorch %.2f ms, ratio %.2f (range %.2f-%.2f); "
              "bytes written per step %d vs %d"
              % (s, "ranks bound to a CPU each" if bound else "ranks unbound", len(pairs), w["median_ms"],
                 t["median_ms"], ratio, pairs[0][0], pairs[-1][0], w["bytes_written_per_step"],
                 t["bytes_written_per_step"]))
for r in rows:
    if r["mode"] == "memory":
        print("memory %-5s x%d, %-8s grads: %.2f MB vs ZeRO %.2f MB (%+.1f%%)"
              % (r["strategy"], r["ranks"], r["grad_dtype"], r["model_state_bytes"] / 1e6, r["zero_formula_bytes"] / 1e6,
                 100 * (r["ratio"] - 1)))
'
