#!/usr/bin/env bash
# Everything in weft that needs a GPU, in one pass, for a machine lent for minutes: the test
# suites with their CUDA cases, the NCCL backend's cases, the example MLP trained on the GPU in
# each precision it supports there, bench/compare_cuda.sh, the GPT example's bf16-mixed training
# and weft-generate on the GPU (bench/compare_gpt.sh and bench/compare_generate.sh against PyTorch
# and transformers there), and the CUDA cases again under compute-sanitizer (memcheck; racecheck,
# synccheck and initcheck on the FP8 and optimizer kernels).
# It runs a CUDA build made elsewhere (a GPU machine need not have weft's build dependencies), with
# examples and benchmarks, and reads only BUILD_DIR's tests/test_*, weft-run, weft-generate,
# examples/mlp_train, examples/gpt_train and bench/bench_{cuda,gpt,generate}. Its first run, on an
# H100 on 2026-11-27, is the README's CUDA row.
# Every step has its own time limit, cut to what is left of --budget seconds for the whole pass
# (a lent machine's time is short); the steps come in order of what they teach, the pass goes on
# after a failure, a step with no time left is reported as skipped, each step's output goes to
# LOG_DIR/<step>.log, and a table of steps, exit codes and the lines that matter ends the run.
# Status: 0 when every step ran and passed.
# Usage: scripts/gpu-check.sh [--build-dir DIR] [--data-dir DIR] [--logs DIR] [--steps N] [--budget S]
#        (TORCH_PYTHON for the bench/compare_*.sh steps: a Python with torch, and transformers and
#        bitsandbytes for compare_generate)
set -uo pipefail
cd "$(dirname "$0")/.."
build=build-cuda data=/usr/share/datasets/fashion-mnist logs=gpu-check-logs steps=300 budget=1800
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --data-dir) data=$2; shift 2 ;;
    --logs) logs=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    *) echo "gpu-check.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if ! nvidia-smi -L > /dev/null 2>&1; then
  echo "gpu-check.sh: needs a CUDA GPU, got none (nvidia-smi lists no device)" >&2
  exit 2
fi
[ -x "$build/tests/test_tensor" ] || { echo "gpu-check.sh: expected a CUDA build in $build (tests/test_tensor is missing)" >&2; exit 2; }
build=$(cd "$build" && pwd)
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
mkdir -p "$logs"
export WEFT_SOURCE_DIR=$PWD WEFT_RUN=$build/weft-run OMP_NUM_THREADS=2
rm -f "$logs"/*.summary "$logs/order"
deadline=$((SECONDS + budget))

# step NAME SECONDS COMMAND...: runs it with a limit, logs it, and writes its summary: the exit
# code and the log's lines that say how it went (doctest's totals, the trainer's epochs, the
# ratios). Files, not variables, so that steps can run in the background.
step() {
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS left=$((deadline - SECONDS)) rc=skipped
  [ "$limit" -le "$left" ] || limit=$left
  if [ "$limit" -ge 10 ]; then
    timeout --kill-after=5 "$limit" "$@" > "$logs/$name.log" 2>&1
    rc=$?
  else
    echo "skipped: the pass's --budget was spent" > "$logs/$name.log"
  fi
  {
    printf '%-30s rc=%-3s %4ss\n' "$name" "$rc" "$((SECONDS - start))"
    grep -E '^\[doctest\] (test cases|assertions)|SUMMARY|^epoch|accuracy|^(MLP|GEMM|alloc)' "$logs/$name.log" |
      tail -n 12 | sed 's/^/    /'
  } > "$logs/$name.summary"
  echo "$name" >> "$logs/order"
  echo "$name: rc=$rc in $((SECONDS - start)) s"
}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$logs/gpu.txt"
{
  lscpu | grep -E 'Model name|^CPU\(s\)'
  echo "AVX-512 / AMX: $(grep -o -w -E 'avx512[a-z0-9_]*|amx[a-z0-9_]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
} >> "$logs/gpu.txt"

# The suites whole (the CPU cases run on this machine's CPU too), four at once.
for t in tensor precision optim fabric models; do
  step "test_$t" 240 "$build/tests/test_$t" &
done
wait
step test_distributed_nccl 90 "$build/tests/test_distributed" -tc='*NCCL*'

# The example on the GPU: eager float32, the captured step, and the precisions that run there.
train=("$build/examples/mlp_train" --device cuda --epochs 2 --data-dir "$data" --log "" --no-progress)
step mlp_cuda_fp32 90 "${train[@]}"
step mlp_cuda_graph 90 "${train[@]}" --cuda-graph
step mlp_cuda_bf16_mixed 90 "${train[@]}" --precision bf16-mixed
step mlp_cuda_16_mixed 90 "${train[@]}" --precision 16-mixed
step mlp_cuda_transformer_engine 90 "${train[@]}" --precision transformer-engine

step compare_cuda 240 bash bench/compare_cuda.sh --build-dir "$build" --steps "$steps"

# The GPT example trained on the GPU in bf16-mixed (on this repository's own prose: any UTF-8 text
# does, and the KJV need not be installed here), weft-generate's command-line checks with the
# model on the GPU (transformers' greedy tokens), then both against their Python peers there.
cat README.md docs/*.md > "$logs/gpt_text.txt"
step gpt_cuda_bf16_mixed 120 "$build/examples/gpt_train" --device cuda --precision bf16-mixed --steps 300 \
  --data "$logs/gpt_text.txt" --no-progress --plot "" --log "" --checkpoint ""
step weft_generate_cuda 60 bash tests/tools/weft_generate_test.sh "$build/weft-generate" tests/models/data \
  "$logs/weft_generate_test"
step compare_gpt_cuda 240 bash bench/compare_gpt.sh --build-dir "$build" --device cuda --precision bf16-mixed
step compare_generate_cuda 300 env PYTHON="${TORCH_PYTHON:-python3}" bash bench/compare_generate.sh \
  --build-dir "$build" --device cuda --modes "float32 bf16 int8 nf4" --repeat 2 --models "$logs/generate-models"

# The CUDA cases under compute-sanitizer. memcheck on every binary's; in the NCCL cases API errors
# are not reported, because NCCL probes kernels it was not built for (cudaFuncGetAttributes: "no
# kernel image") and carries on.
gpu_cases=(tensor:'cuda*' precision:'*cuda*' optim:'*CUDA*,*captured*' fabric:'*cuda*' models:'*cuda*')
for entry in "${gpu_cases[@]}"; do
  t=${entry%%:*} filter=${entry#*:}
  step "memcheck_$t" 150 "$sanitizer" --tool memcheck --error-exitcode 1 "$build/tests/test_$t" -tc="$filter"
done
step memcheck_nccl 90 "$sanitizer" --tool memcheck --report-api-errors no --error-exitcode 1 \
  "$build/tests/test_distributed" -tc='*NCCL*'
# racecheck and synccheck where kernels share memory and barriers (the FP8 casts and amax, the
# optimizers). The Fp8Metadata case's many small launches take minutes under racecheck: left out.
# initcheck reports every read of the FP8 GEMM's result as uninitialised, although the tests check
# each element of it against the CPU (cuBLASLt's Hopper FP8 kernels write it in a way initcheck
# does not track, seen on an H100): those cases are left out of initcheck.
step racecheck_precision 150 "$sanitizer" --tool racecheck --error-exitcode 1 "$build/tests/test_precision" \
  -tc='*cuda*' -tce='*Fp8Metadata*'
step racecheck_optim 90 "$sanitizer" --tool racecheck --error-exitcode 1 "$build/tests/test_optim" -tc='*CUDA*,*captured*'
step synccheck_precision 90 "$sanitizer" --tool synccheck --error-exitcode 1 "$build/tests/test_precision" -tc='*cuda*'
step synccheck_optim 90 "$sanitizer" --tool synccheck --error-exitcode 1 "$build/tests/test_optim" -tc='*CUDA*,*captured*'
step initcheck_precision 90 "$sanitizer" --tool initcheck --error-exitcode 1 "$build/tests/test_precision" \
  -tc='*cuda*' -tce='*fp8_gemm*,*Fp8Linear*'
step initcheck_optim 90 "$sanitizer" --tool initcheck --error-exitcode 1 "$build/tests/test_optim" -tc='*CUDA*,*captured*'

failed=$(cat "$logs"/*.summary | grep -c ' rc=[1-9s]')
echo
echo "== summary: $(wc -l < "$logs/order") steps, $failed failed"
while read -r name; do cat "$logs/$name.summary"; done < "$logs/order"
[ "$failed" -eq 0 ]
