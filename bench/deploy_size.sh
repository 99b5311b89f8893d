#!/usr/bin/env bash
# Issue 47's deployment figures, from a Release build, printed as a table and one JSON line:
#   1. the shipped programs mlp_train, weft-generate and generate_c: size stripped and shared libraries
#      (scripts/check-deploy-budget.sh, whose budget is 3 MB = 3145728 bytes);
#   2. the static C program: examples/generate_c.c linked statically against weft::c (the build's
#      generate_c: weft inside, the C and C++ runtimes shared, as the budget of 1. allows), and
#      the same linked fully static (-static: glibc and libstdc++ inside too), each loading a
#      random-init folder of GPT-2 124M's shape (bench/make_generate_models.py, written once to
#      MODELS_DIR) and generating 32 tokens. Their sizes stripped against the 3 MB budget, and
#      their peak resident memory (GNU time's maximum resident set size) against the budget model
#      file + KV cache + 20 MB, the KV cache being float32 keys and values for every layer and
#      every token of the run (prompt + 32);
#   3. with --build-time, the wall time to build the core library (target weft) from an empty
#      build directory with 2 jobs and no compiler cache (minutes on 2 cores; CI does not run it).
#
#   bash bench/deploy_size.sh [--build-dir build] [--models DIR] [--build-time]
#
# Needs the build's libraries and programs (cmake --build build --target weft_c mlp_train
# weft-generate), a C compiler, GNU time (/usr/bin/time), and for step 2 a Python with torch and
# transformers (PYTHON=/path/to/python). The folder's tokenizer is the small GPT-2 byte-level BPE
# of the tests padded with plain vocabulary entries to the model's 50257 ids
# (bench/pad_tokenizer.py), so that whatever a random model generates decodes.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
models=${TMPDIR:-/tmp}/weft-generate-models
build_time=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --build-time) build_time=1; shift ;;
    *) echo "usage: bench/deploy_size.sh [--build-dir DIR] [--models DIR] [--build-time]" >&2; exit 2 ;;
  esac
done
python=${PYTHON:-python3}
new_tokens=32
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

echo "== shipped programs ($build)"
budget_status=0
bash scripts/check-deploy-budget.sh --build-dir "$build" mlp_train weft-generate generate_c | tee "$scratch/budget.txt" ||
  budget_status=$?
size_of() { awk -v p="$1" '$1 == p {print $3}' "$scratch/budget.txt"; }

echo "== static C program: GPT-2 124M shape, $new_tokens new tokens"
cmake --build "$build" --target weft_c generate_c > "$scratch/build.log" 2>&1 || { cat "$scratch/build.log" >&2; exit 1; }
# The link cmake/WeftSmallPrograms.cmake gives a one-process program, made fully static.
link_flags=(-static -pthread -Wl,--gc-sections)
if echo 'int main(){}' | c++ -x c++ - -o "$scratch/probe" -fuse-ld=gold -Wl,--icf=safe 2> /dev/null; then
  link_flags+=(-fuse-ld=gold -Wl,--icf=safe)
fi
cc -std=c11 -O2 -I. -c examples/generate_c.c -o "$scratch/generate_c.o"
c++ "$scratch/generate_c.o" "$build/libweft_c.a" "$build/libweft.a" "${link_flags[@]}" -o "$scratch/generate_c_full"
strip "$scratch/generate_c_full"
ldd "$scratch/generate_c_full" > /dev/null 2>&1 && { echo "FAIL: generate_c_full is not static" >&2; exit 1; }
strip -o "$scratch/generate_c" "$build/examples/generate_c"

folder=$models/gpt2-124m
if [ ! -f "$folder/model.safetensors" ]; then
  mkdir -p "$models"
  # Only the GPT-2 folder: the script's second model (a 4.4 GB Llama) is not needed here.
  "$python" - "$folder" <<'PY'
import sys
import torch
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(0)
GPT2LMHeadModel(GPT2Config()).save_pretrained(sys.argv[1])
PY
fi
python3 bench/pad_tokenizer.py tests/models/data/gpt2_tokenizer.json "$folder"
model_bytes=$(stat -c %s "$folder/model.safetensors")
read -r n_layer n_embd < <(python3 -c "import json,sys; c=json.load(open(sys.argv[1])); print(c['n_layer'], c['n_embd'])" "$folder/config.json")
printf '%-40s %14s %14s  %s\n' figure measured budget ok
# run NAME: generate with $scratch/NAME, print its size and peak resident memory against the budgets.
run() {
  /usr/bin/time -v "$scratch/$1" "$folder" "The licenses" "$new_tokens" > "$scratch/run.txt" 2> "$scratch/time.txt" ||
    { cat "$scratch/run.txt" "$scratch/time.txt" >&2; exit 1; }
  bytes=$(stat -c %s "$scratch/$1")
  peak_bytes=$(($(awk -F': ' '/Maximum resident set size/ {print $2}' "$scratch/time.txt") * 1024))
  seconds=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$scratch/time.txt")
  prompt_tokens=$(sed -n 's/^tokens: \([0-9]*\) prompt.*/\1/p' "$scratch/run.txt")
  kv_bytes=$((2 * n_layer * (prompt_tokens + new_tokens) * n_embd * 4))
  rss_budget=$((model_bytes + kv_bytes + 20 * 1024 * 1024))
  printf '%-40s %14d %14d  %s\n' "$1, stripped bytes" "$bytes" 3145728 "$([ "$bytes" -le 3145728 ] && echo yes || echo NO)"
  printf '%-40s %14d %14d  %s\n' "$1, peak resident bytes" "$peak_bytes" "$rss_budget" \
    "$([ "$peak_bytes" -le "$rss_budget" ] && echo yes || echo NO)"
  printf '  (%s; model file %d + KV cache %d for %d+%d tokens + 20 MiB; run took %s)\n' "$(tail -n 1 "$scratch/run.txt")" \
    "$model_bytes" "$kv_bytes" "$prompt_tokens" "$new_tokens" "$seconds"
}
run generate_c
static_bytes=$bytes static_peak=$peak_bytes
run generate_c_full
full_bytes=$bytes full_peak=$peak_bytes

build_seconds=null
if [ "$build_time" = 1 ]; then
  echo "== core library from a clean build directory, 2 jobs, no compiler cache"
  generator=()
  command -v ninja > /dev/null && generator=(-G Ninja)
  CCACHE_DISABLE=1 cmake -S . -B "$scratch/clean" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_TESTS=OFF \
    -DWEFT_BUILD_EXAMPLES=OFF -DWEFT_BUILD_BENCH=OFF -DWEFT_DISTRIBUTED=OFF > "$scratch/configure.log"
  start=$(date +%s)
  CCACHE_DISABLE=1 cmake --build "$scratch/clean" --target weft -j 2 > "$scratch/clean.log" 2>&1 ||
    { cat "$scratch/clean.log" >&2; exit 1; }
  build_seconds=$(($(date +%s) - start))
  printf 'core library (weft), clean, -j2: %d s\n' "$build_seconds"
fi

printf '{"bench":"deploy_size","mlp_train_stripped":%s,"weft_generate_stripped":%s,"generate_c_static_stripped":%d,"generate_c_peak_rss":%d,"generate_c_fully_static_stripped":%d,"generate_c_fully_static_peak_rss":%d,"rss_budget":%d,"model_file":%d,"kv_cache":%d,"core_build_seconds":%s}\n' \
  "$(size_of mlp_train)" "$(size_of weft-generate)" "$static_bytes" "$static_peak" "$full_bytes" "$full_peak" "$rss_budget" "$model_bytes" \
  "$kv_bytes" "$build_seconds"
exit "$budget_status"
