// Eigen's GEMM as a peer of bench_matmul, in its own translation unit: it is compiled with
// -march=native (Eigen picks its kernels at compile time, so that is how its users run it) and
// includes nothing of weft, whose inline functions must not be compiled for the build machine.
#pragma once

#include <cstdint>

namespace bench {

// c(m×n, row-major) = a·b with a stored (k, m) when a_t, else (m, k); b stored (n, k) when b_t,
// else (k, n); all row-major. Runs on Eigen's OpenMP threads.
void eigen_gemm(int64_t m, int64_t n, int64_t k, const float* a, bool a_t, const float* b, bool b_t, float* c);
void eigen_gemm(int64_t m, int64_t n, int64_t k, const double* a, bool a_t, const double* b, bool b_t, double* c);
void eigen_set_threads(int threads);
int eigen_threads();
const char* eigen_simd();  // the instruction sets Eigen was compiled for

}  // namespace bench
