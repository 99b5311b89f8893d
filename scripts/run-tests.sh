#!/usr/bin/env bash
# Installs what is missing, builds weft in Release with g++ and runs the whole test suite with
# CTest. CI (.ci/run) adds both options:
#   --sanitize  also builds the suite with clang under AddressSanitizer + UndefinedBehaviorSanitizer
#               + LeakSanitizer, with the AVX-512 kernels compiled through SIMDe
#               (WEFT_SIMD_EMULATION) so that their logic is tested on any CPU, and runs it,
#               together with each libFuzzer target (fuzz/) for FUZZ_SECONDS (default 30) each;
#   --tsan      also builds the tests that start threads with clang under ThreadSanitizer and
#               runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize=false
tsan=false
for arg in "$@"; do
  case "$arg" in
    --sanitize) sanitize=true ;;
    --tsan) tsan=true ;;
    *) echo "usage: scripts/run-tests.sh [--sanitize] [--tsan]" >&2; exit 2 ;;
  esac
done
if $sanitize || $tsan; then bash scripts/install-deps.sh --clang; else bash scripts/install-deps.sh; fi

CC=gcc CXX=g++ cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_BENCH=OFF
cmake --build build
ctest --test-dir build --output-on-failure

# The CUDA backend is compiled wherever a toolkit is installed (CI's machines have CUDA 13 at
# /usr/local/cuda, but no GPU) and its test binary run: without a GPU its GPU cases report as
# skipped and the device seam is checked as a CUDA build sees it. sm_90 only, and host code at -O0
# without debug info (ptxas still optimises the kernels), to keep the second compile short.
nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc}
if [ -x "$nvcc" ]; then
  CC=gcc CXX=g++ cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 \
        -DCMAKE_CUDA_FLAGS_DEBUG= -DWEFT_CUDA=ON -DWEFT_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_COMPILER="$nvcc" \
        -DWEFT_BUILD_BENCH=OFF -DWEFT_BUILD_EXAMPLES=OFF
  cmake --build build-cuda --target test_tensor test_fabric
  (cd build-cuda/tests && ./test_tensor && ./test_fabric)
else
  echo "no CUDA toolkit at $nvcc: the CUDA build is skipped"
fi

if $sanitize; then
  # -O0 without debug info: the sanitizers need neither, and compiling is most of CI's time.
  CC=clang CXX=clang++ cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 \
        -DWEFT_SANITIZE=ON -DWEFT_SIMD_EMULATION=ON -DWEFT_FUZZ=ON -DWEFT_FUZZ_SECONDS="${FUZZ_SECONDS:-30}" \
        -DWEFT_BUILD_BENCH=OFF -DWEFT_BUILD_EXAMPLES=OFF
  cmake --build build-sanitize
  ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-sanitize --output-on-failure
fi
if $tsan; then
  # Only the library and the threaded tests are built (tests/CMakeLists.txt); -O1 keeps
  # ThreadSanitizer's slowdown small.
  CC=clang CXX=clang++ cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O1 \
        -DWEFT_TSAN=ON -DWEFT_OPENBLAS=OFF -DWEFT_BUILD_BENCH=OFF -DWEFT_BUILD_EXAMPLES=OFF
  cmake --build build-tsan
  TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build-tsan --output-on-failure
fi
