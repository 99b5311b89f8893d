#!/usr/bin/env bash
# Builds the safetensors libFuzzer target (clang, ASan + UBSan) in build-fuzz/ and runs it for
# SECONDS (default 60), seeded with the committed golden files and past fuzz findings.
# New corpus entries collect in build-fuzz/corpus; a crashing input is written to
# build-fuzz/crashes/ and ends the run with a non-zero status. Once fixed, copy it to
# tests/io/data/fuzz_regressions/ so the test suite keeps checking it.
#   scripts/fuzz-safetensors.sh [SECONDS] [extra libFuzzer flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift $(($# > 0 ? 1 : 0))

bash scripts/install-deps.sh --clang

CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_FUZZ=ON \
  -DWEFT_BUILD_TESTS=OFF -DWEFT_BUILD_EXAMPLES=OFF -DWEFT_BUILD_BENCH=OFF
cmake --build build-fuzz --target fuzz_safetensors -j2
mkdir -p build-fuzz/corpus build-fuzz/crashes
# The first directory collects new inputs; the others only seed.
build-fuzz/fuzz/fuzz_safetensors build-fuzz/corpus tests/io/data \
  -dict=fuzz/safetensors.dict -max_len=4096 -max_total_time="$seconds" -print_final_stats=1 \
  -artifact_prefix=build-fuzz/crashes/ "$@"
