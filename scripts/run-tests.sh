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
# The CUDA backend is compiled wherever a toolkit is installed (Debian has none in main, so a
# fresh CI machine skips this) and its test binary run: without a GPU its GPU cases report as
# skipped and the device seam is checked as a CUDA build sees it. sm_90 only, to keep it short.
nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc}
if [ -x "$nvcc" ]; then
  cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_CUDA=ON -DWEFT_CUDA_ARCHITECTURES=90 \
        -DCMAKE_CUDA_COMPILER="$nvcc" -DWEFT_BUILD_BENCH=OFF -DWEFT_BUILD_EXAMPLES=OFF
  cmake --build build-cuda --target test_tensor
  build-cuda/tests/test_tensor
else
  echo "no CUDA toolkit at $nvcc: the CUDA build is skipped"
fi
if [ "${1:-}" = "--sanitize" ]; then
  # -O0 without debug info: the sanitizers need neither, and compiling is most of CI's time.
  cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DWEFT_SANITIZE=ON \
        -DWEFT_SIMD_EMULATION=ON \
        -DWEFT_BUILD_BENCH=OFF -DWEFT_BUILD_EXAMPLES=OFF
  cmake --build build-sanitize
  ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-sanitize --output-on-failure
fi
