#!/usr/bin/env bash
# The size and dependency budget of weft's shipped programs (issue 47), so neither creeps back:
# each program, stripped, is at most WEFT_BUDGET_BYTES (default 3 MB = 3145728 bytes), and `ldd`
# lists nothing beyond libc, libm, libstdc++, libgcc_s and the loader (or it is not a dynamic
# executable at all: a fully static build, -DWEFT_FULLY_STATIC=ON).
#
# Usage: scripts/check-deploy-budget.sh [--build-dir DIR] PROGRAM...
#   PROGRAM is a path to an executable, or the name of a CMake target that is built in DIR
#   (default: build, which should be a Release build) and then looked for there.
#   scripts/check-deploy-budget.sh mlp_train weft-generate
# Prints one line per program (stripped size, shared libraries) and exits 1 if any is over budget.
# CTest runs it on mlp_train and weft-generate in Release builds (examples/CMakeLists.txt, test
# deploy_budget); bench/deploy_size.sh prints it with the static C program's figures.
set -euo pipefail
budget=${WEFT_BUDGET_BYTES:-3145728}
build_dir=build
if [ "${1:-}" = "--build-dir" ]; then
  build_dir=$2
  shift 2
fi
if [ $# -eq 0 ]; then
  sed -n '2,13p' "$0" >&2
  exit 2
fi
# What a program may load: the C and C++ runtimes (pthreads live in libc since glibc 2.34) and
# the loader; linux-vdso is the kernel's, mapped into every process, no file.
allowed='^(linux-vdso\.so|libc\.so|libm\.so|libstdc\+\+\.so|libgcc_s\.so|ld-linux-x86-64\.so|ld-linux-aarch64\.so|libpthread\.so)'

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0
printf '%-18s %10s %10s  %s\n' program bytes stripped "shared libraries"
for program in "$@"; do
  path=$program
  if [ ! -x "$path" ]; then
    cmake --build "$build_dir" --target "$program" > "$scratch/build.log" 2>&1 ||
      { cat "$scratch/build.log" >&2; echo "FAIL: cannot build target $program in $build_dir" >&2; exit 1; }
    path=$(find "$build_dir" -type f -name "$program" -perm -u+x -print -quit)
    [ -n "$path" ] || { echo "FAIL: no executable $program under $build_dir" >&2; exit 1; }
  fi
  name=$(basename "$path")
  cp "$path" "$scratch/$name"
  strip "$scratch/$name"
  size=$(stat -c %s "$path")
  stripped=$(stat -c %s "$scratch/$name")
  if ldd_out=$(ldd "$path" 2>&1); then
    libs=$(echo "$ldd_out" | awk '{print $1}' | sed 's|.*/||' | sort | tr '\n' ' ')
  else
    libs="(not a dynamic executable)"
  fi
  printf '%-18s %10d %10d  %s\n' "$name" "$size" "$stripped" "$libs"
  if [ "$stripped" -gt "$budget" ]; then
    echo "FAIL: $name is $stripped bytes stripped, over the budget of $budget" >&2
    failures=$((failures + 1))
  fi
  if [ "$libs" != "(not a dynamic executable)" ]; then
    for lib in $libs; do
      if ! [[ $lib =~ $allowed ]]; then
        echo "FAIL: $name loads $lib; the budget allows only libc, libm, libstdc++, libgcc_s and the loader" >&2
        failures=$((failures + 1))
      fi
    done
  fi
done
exit $((failures > 0))
