#!/usr/bin/env bash
# Installs what is missing, builds weft in Release and runs the whole test suite with CTest.
# With --sanitize it also builds and runs the suite under AddressSanitizer + UBSan, with the AVX-512
# kernels compiled through SIMDe (WEFT_SIMD_EMULATION) so that their logic is tested on any CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_BENCH=OFF
cmake --build build
ctest --test-dir build --output-on-failure
if [ "${1:-}" = "--sanitize" ]; then
  # -O0 without debug info: the sanitizers need neither, and compiling is most of CI's time.
  cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DWEFT_SANITIZE=ON \
        -DWEFT_SIMD_EMULATION=ON \
        -DWEFT_BUILD_BENCH=OFF -DWEFT_BUILD_EXAMPLES=OFF
  cmake --build build-sanitize
  ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-sanitize --output-on-failure
fi
