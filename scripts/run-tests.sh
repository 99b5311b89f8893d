#!/usr/bin/env bash
# Installs what is missing, builds weft in Release with g++ and runs the whole test suite with
# CTest. CI (.ci/run) adds both options:
#   --sanitize  also builds the suite with clang under AddressSanitizer + UndefinedBehaviorSanitizer
#               + LeakSanitizer, with the AVX-512 kernels compiled through SIMDe
#               (WEFT_SIMD_EMULATION) so that their logic is tested on any CPU, and runs it,
#               together with each libFuzzer target (fuzz/) for FUZZ_SECONDS (default 30) each;
#   --tsan      also builds the tests that start threads with clang under ThreadSanitizer and
#               runs them.
# Every stage is timed, and the times are printed at the end, whether the run passes or fails (CI's
# budget: 40 minutes on 2 cores), with the slowest tests of the Release suite.
set -euo pipefail
cd "$(dirname "$0")/.."

stage_times=()
# stage NAME COMMAND...: runs COMMAND, recording how long it took under NAME.
stage() {
  local name=$1 start=$SECONDS status=0
  shift
  echo "=== $name"
  "$@" || status=$?
  stage_times+=("$(printf '%-34s %4dm%02ds%s' "$name" $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)) \
                    "$([ $status -eq 0 ] || echo "  (failed: $status)")")")
  return $status
}
print_times() {
  echo "=== stage times"
  printf '%s\n' "${stage_times[@]}"
  printf '%-34s %4dm%02ds\n' "total" $((SECONDS / 60)) $((SECONDS % 60))
  if [ -f build/Testing/Temporary/LastTest.log ]; then
    echo "=== slowest tests (Release build)"
    # awk reads to the end: with pipefail and set -e, an early-exiting head would let SIGPIPE
    # (exit 141) fail a run whose stages all passed.
    awk '/^[0-9]+\/[0-9]+ Testing: /{name=$3} /^Test time = /{print $4, name}' build/Testing/Temporary/LastTest.log |
      sort -rn | awk 'NR <= 8 {printf "  %8.1f s  %s\n", $1, $2}'
  fi
}
trap print_times EXIT
sanitize=false
tsan=false
for arg in "$@"; do
  case "$arg" in
    --sanitize) sanitize=true ;;
    --tsan) tsan=true ;;
    *) echo "usage: scripts/run-tests.sh [--sanitize] [--tsan]" >&2; exit 2 ;;
  esac
done
if $sanitize || $tsan; then stage "install dependencies" bash scripts/install-deps.sh --clang
else stage "install dependencies" bash scripts/install-deps.sh; fi

stage "build (Release, g++)" bash -c 'CC=gcc CXX=g++ cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DWEFT_BUILD_BENCH=OFF && cmake --build build'
stage "tests (Release)" ctest --test-dir build --output-on-failure -j2

# The CUDA backend is compiled wherever a toolkit is installed (CI's machines have CUDA 13 at
# /usr/local/cuda, but no GPU) and its test binary run: without a GPU its GPU cases report as
# skipped and the device seam is checked as a CUDA build sees it. sm_90 only, and host code at -O0
# without debug info (ptxas still optimises the kernels), to keep the second compile short. The
# installed targets are built too, for the package test: a program that finds an installed CUDA
# build with find_package(weft) or pkg-config, as a user's would.
nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc}
if [ -x "$nvcc" ]; then
  stage "cuda build" bash -c 'CC=gcc CXX=g++ cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Debug \
        -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DCMAKE_CUDA_FLAGS_DEBUG= -DWEFT_CUDA=ON -DWEFT_CUDA_ARCHITECTURES=90 \
        -DCMAKE_CUDA_COMPILER="$0" -DWEFT_BUILD_BENCH=OFF -DWEFT_BUILD_EXAMPLES=OFF &&
        cmake --build build-cuda --target test_tensor test_fabric weft_c weft-generate weft-run' "$nvcc"
  # The doc snippets and model tests read their data from WEFT_SOURCE_DIR, which CTest sets.
  stage "cuda tests" env WEFT_SOURCE_DIR="$PWD" bash -c 'cd build-cuda/tests && ./test_tensor && ./test_fabric &&
        ctest --test-dir .. -R "^package$" --output-on-failure'
else
  echo "no CUDA toolkit at $nvcc: the CUDA build is skipped"
fi

if $sanitize; then
  # -O0 without debug info: the sanitizers need neither, and compiling is most of CI's time. One
  # tree, built once: the suite and the fuzz targets share its instrumented library.
  stage "sanitizer build (clang, ASan+UBSan)" bash -c 'CC=clang CXX=clang++ cmake -S . -B build-sanitize -G Ninja \
        -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DWEFT_SANITIZE=ON -DWEFT_SIMD_EMULATION=ON \
        -DWEFT_FUZZ=ON -DWEFT_FUZZ_SECONDS="${FUZZ_SECONDS:-30}" -DWEFT_BUILD_BENCH=OFF -DWEFT_BUILD_EXAMPLES=OFF &&
        cmake --build build-sanitize'
  stage "sanitizer tests + fuzzing" env ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-sanitize --output-on-failure -j2
fi
if $tsan; then
  # Only the library and the threaded tests are built (tests/CMakeLists.txt); -O1 keeps
  # ThreadSanitizer's slowdown small.
  stage "tsan build (clang)" bash -c 'CC=clang CXX=clang++ cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug \
        -DCMAKE_CXX_FLAGS_DEBUG=-O1 -DWEFT_TSAN=ON -DWEFT_BUILD_BENCH=OFF -DWEFT_BUILD_EXAMPLES=OFF &&
        cmake --build build-tsan'
  stage "tsan tests" env TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build-tsan --output-on-failure
fi
