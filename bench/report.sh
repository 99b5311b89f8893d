#!/usr/bin/env bash
# Updates docs/PERFORMANCE.md in one command: runs the benchmarks of this machine's CPU class, each
# against its peer in the same run, and prints that class's table in Markdown (benchmark, command,
# weft, peer, ratio, date), one row per figure, from each benchmark's JSON line
# (bench/report_rows.py). The class comes from /proc/cpuinfo: amx_tile -> "AVX-512 + AMX Xeon",
# avx512f on an AMD CPU -> "AVX-512 Zen", avx512f on another (an Intel Xeon whose VM hides AMX, or
# one without it) -> "AVX-512 Xeon without AMX", anything else -> "AVX2".
#
#   bash bench/report.sh [--dry-run] [--build-dir DIR] [--only NAME[,NAME...]] [--out DIR] [--from DIR]
#
#   --dry-run   prints the class and the commands it would run, and runs nothing
#   --only      runs only the named benchmarks (the names --dry-run prints)
#   --out DIR   writes each benchmark's output to DIR/NAME.txt (default: a new temporary folder)
#   --from DIR  runs nothing and prints the table again from a run's outputs
#
# Needs a Release build with -DWEFT_BUILD_BENCH=ON in DIR (default build) and the Python peers of
# bench/README.md. A benchmark that fails gets a row saying so, with its output's path kept.
# Every benchmark takes the machine's cores: run this on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
dry_run=0 build=build only="" out="" from=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1; shift ;;
    --build-dir) build=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --from) from=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "report.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
vendor=$(grep -m1 '^vendor_id' /proc/cpuinfo || true)
if [[ " $flags " == *" amx_tile "* ]]; then
  class="AVX-512 + AMX Xeon"
elif [[ " $flags " == *" avx512f "* && "$vendor" == *AuthenticAMD* ]]; then
  class="AVX-512 Zen"
elif [[ " $flags " == *" avx512f "* ]]; then
  class="AVX-512 Xeon without AMX"
else
  class="AVX2"
fi

# name|command, in the order of docs/PERFORMANCE.md's rows. compare_generate.sh reads build/ only.
benchmarks=(
  "matmul|bash bench/compare_matmul.sh --build-dir $build --threads 2"
  "mlp|bash bench/compare_mlp.sh --build-dir $build --threads 2 --precision both --coretype both"
  "contention|bash bench/contention_mlp.sh --build-dir $build --threads 2 --busy 1"
  "quant|bash bench/run_quant.sh --build-dir $build --threads 2"
  "distributed|OMP_NUM_THREADS=1 bash bench/compare_distributed.sh --build-dir $build --repeat 3"
  "gpt|bash bench/compare_gpt.sh --build-dir $build --config both"
  "tokenizer|bash bench/compare_tokenizer.sh --build-dir $build"
  "generate|bash bench/compare_generate.sh"
  "fp8_weight|$build/bench/bench_fp8_weight"
  "load_safetensors|$build/bench/bench_load_safetensors"
  "checkpoint_load|$build/bench/bench_checkpoint_load"
)
[ -f bench/compare_attention.sh ] && benchmarks+=("attention|bash bench/compare_attention.sh --build-dir $build")
case "$class" in
  AVX2) benchmarks+=("op_overhead|bash bench/run_op_overhead.sh --build-dir $build") ;;
  "AVX-512 Zen")
    benchmarks+=("matmul_fp64|$build/bench/bench_matmul --threads 2 --dtype fp64"
                 "mlp_fp64|bash bench/compare_mlp.sh --build-dir $build --threads 2 --precision 64-true --coretype set") ;;
esac

selected=()
for entry in "${benchmarks[@]}"; do
  name=${entry%%|*}
  if [ -z "$only" ] || [[ ",$only," == *",$name,"* ]]; then selected+=("$entry"); fi
done
[ ${#selected[@]} -gt 0 ] || { echo "report.sh: --only $only names no benchmark of class $class" >&2; exit 2; }

if [ $dry_run -eq 1 ]; then
  echo "class: $class"
  for entry in "${selected[@]}"; do printf '%-17s %s\n' "${entry%%|*}" "${entry#*|}"; done
  exit 0
fi

if [ -n "$from" ]; then
  out=$from
else
  [ -n "$out" ] || out=$(mktemp -d)
  mkdir -p "$out"
  : > "$out/commands.tsv"
  for entry in "${selected[@]}"; do
    name=${entry%%|*} command=${entry#*|}
    printf '%s\t%s\n' "$name" "$command" >> "$out/commands.tsv"
    echo "== $name: $command" >&2
    bash -c "$command" > "$out/$name.txt" 2> "$out/$name.err" || echo "== $name failed (see $out/$name.err)" >&2
  done
  date -u +%F > "$out/date"
  echo "== outputs kept in $out (bash bench/report.sh --from $out prints the table again)" >&2
fi
python3 bench/report_rows.py "$out" "$class"
