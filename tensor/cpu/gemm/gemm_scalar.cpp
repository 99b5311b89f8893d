// The scalar reference GEMM kernel set: portable C++ that every vector kernel is tested against
// (tests/tensor/test_gemm.cpp), and what runs at CpuIsa::Scalar. bfloat16 inputs reach it widened
// to float32 by the packers.
//
// Tile 4×8: c(4×8) (+)= Σ_p a(:, p) · b(p, :), the accumulators in an array the compiler keeps
// in registers. The float64 set (kGemmF64Scalar) is the same tile over packed panels of doubles.
#include "tensor/cpu/gemm/gemm_kernels.h"

namespace weft::detail {
namespace {

constexpr int kMr = 4, kNr = 8;

void micro_scalar(const GemmTileF32& t) {
  float acc[kMr][kNr] = {};
  for (int64_t p = 0; p < t.kc; ++p) {
    const float* b = t.b + p * t.ldb;
    for (int i = 0; i < t.m; ++i) {
      const float a = t.a_packed ? t.a[p * kMr + i] : t.a[i * t.rs_a + p * t.cs_a];
      for (int j = 0; j < t.n; ++j) acc[i][j] += a * b[j];
    }
  }
  for (int i = 0; i < t.m; ++i)
    for (int j = 0; j < t.n; ++j) {
      float& c = t.c[i * t.ldc + j];
      c = t.accumulate ? c + acc[i][j] : acc[i][j];
    }
}

void dot_rows_scalar(const float* w, int64_t ldw, const float* x, int64_t k, int64_t rows, float* y, bool accumulate) {
  for (int64_t j = 0; j < rows; ++j) {
    float sum = 0;
    for (int64_t p = 0; p < k; ++p) sum += w[j * ldw + p] * x[p];
    y[j] = accumulate ? y[j] + sum : sum;
  }
}

void micro_scalar_f64(const GemmTileF64& t) {
  double acc[kMr][kNr] = {};
  for (int64_t p = 0; p < t.kc; ++p)
    for (int i = 0; i < t.m; ++i)
      for (int j = 0; j < t.n; ++j) acc[i][j] += t.a[p * kMr + i] * t.b[p * kNr + j];
  for (int i = 0; i < t.m; ++i)
    for (int j = 0; j < t.n; ++j) {
      double& c = t.c[i * t.ldc + j];
      c = t.accumulate ? c + acc[i][j] : acc[i][j];
    }
}

}  // namespace

const GemmKernel kGemmScalar = {
    .name = "scalar 4x8",
    .mr = kMr, .nr = kNr,
    .mc = 64, .kc = 256, .nc = 2048,
    .bf16_pairs = false,
    .micro_f32 = micro_scalar,
    .micro_bf16 = nullptr,
    .pack_b = nullptr,
    .pack_a = nullptr,
    .dot_rows = dot_rows_scalar,
};

const GemmKernelF64 kGemmF64Scalar = {
    .name = "scalar 4x8 fp64",
    .mr = kMr, .nr = kNr,
    .mc = 64, .kc = 256, .nc = 2048,
    .micro = micro_scalar_f64,
    .pack_by_steps = nullptr,
};

}  // namespace weft::detail
