// How a row-major matrix product is handed to cuBLASLt, as plain host logic: which operand goes
// first, transposed or not, with which leading dimension, which epilogue a request needs, and the
// FP8 rules (the "TN" layout, 16-byte multiples, compute capability 8.9). The CUDA code
// (tensor/cuda/cublaslt.cpp) only turns a plan into descriptors, so every decision here is tested
// on the CPU (tests/tensor/test_gemm_plan.cpp) in every build.
//
// cuBLASLt is column-major: a row-major (R, C) buffer is a column-major (C, R) matrix. So
// out = a·b, out (M, N), is computed as outᵀ = bᵀ·aᵀ: cuBLASLt's A is our b and its B our a,
// m = N, n = M, k = K, and D's leading dimension is N (cuda.md §4). A row-major operand whose
// rows are contiguous goes in as stored ("N"); the transpose of a contiguous matrix (a weight
// used as Wᵀ) goes in "T", its stored matrix being the untransposed one.
#pragma once

#include <cstdint>
#include <optional>

namespace weft::detail {

// A row-major view of a matrix: (rows, cols) with element strides.
struct MatrixView {
  int64_t rows, cols, row_stride, col_stride;
};

// One cuBLASLt operand: its stored column-major matrix (stored_rows × stored_cols, leading
// dimension ld) and whether the product uses it transposed.
struct LtOperand {
  bool transposed;
  int64_t stored_rows, stored_cols, ld;
  friend bool operator==(const LtOperand&, const LtOperand&) = default;
};

// D (m × n, column-major, leading dimension ldc) = op(A) · op(B), A: m × k, B: k × n.
struct LtPlan {
  int64_t m, n, k;
  LtOperand a, b;
  int64_t ldc;
  friend bool operator==(const LtPlan&, const LtPlan&) = default;
};

// The plan for out (M, N) row-major contiguous = a (M, K) · b (K, N). Empty when an operand is
// neither row-contiguous nor the transpose of a row-contiguous matrix (it must be packed first).
std::optional<LtPlan> lt_plan(const MatrixView& a, const MatrixView& b);

// What the epilogue does after the product. Bias is per output feature (N), which after the swap
// is a per-row vector of D — the only bias cuBLASLt has.
enum class GemmActivation { None, Relu, Gelu };

// cuBLASLt's cublasLtEpilogue_t values (cublasLt.h; tensor/cuda/cublaslt.cpp asserts they match).
enum class LtEpilogue : int { Default = 1, Relu = 2, Bias = 4, ReluBias = 6, Gelu = 32, GeluBias = 36 };
LtEpilogue lt_epilogue(bool bias, GemmActivation activation);

// FP8 on cuBLASLt: compute capability 8.9 or newer; throws "[fp8_gemm] ..." naming the device's.
void check_fp8_compute_capability(int major, int minor);
// The plan must be TN (cuBLASLt's A transposed, B not — the forward x·Wᵀ is) and every stored
// dimension cuBLASLt reads in 1-byte elements a multiple of 16, as must m (D's leading
// dimension); throws "[fp8_gemm] ..." saying which rule failed.
void check_fp8_plan(const LtPlan& plan);
// True when `plan` is TN; an operand pair that is not gets a transposed copy first.
bool is_tn(const LtPlan& plan);

}  // namespace weft::detail
