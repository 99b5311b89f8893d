#!/usr/bin/env bash
# Installs the Debian packages weft builds, tests and trains with (or the packages named as
# arguments). With --clang it also installs clang 14 with its sanitizer and libFuzzer runtimes and
# LLVM's OpenMP, which the sanitizer, ThreadSanitizer and fuzz builds use. Run as root on
# Debian 12. Packages already present are left alone, so a second run costs a few seconds.
# The core library needs none of them at run time; Gloo is weft_distributed's, Eigen and OpenBLAS
# are the benchmarks' peers (and GEMM choices with -DWEFT_EIGEN=ON / -DWEFT_OPENBLAS=ON), pkg-config
# builds the package consumer test's second way.
set -euo pipefail
# bible-kjv (with its text, bible-kjv-text) is the King James Bible that examples/gpt_train learns
# from; its tests skip without it.
packages=(cmake ninja-build g++ python3 libeigen3-dev doctest-dev libopenblas-openmp-dev pkgconf
          dataset-fashion-mnist gnuplot-nox libsimde-dev libgloo-dev bible-kjv bible-kjv-text)
clang_packages=(clang libclang-rt-14-dev libomp-14-dev)
if [ "${1:-}" = "--clang" ]; then
  packages+=("${clang_packages[@]}")
elif [ $# -gt 0 ]; then
  packages=("$@")
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
