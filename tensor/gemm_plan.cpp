// The cuBLASLt plan for a row-major product (tensor/gemm_plan.h).
#include "tensor/gemm_plan.h"

#include <algorithm>

#include "tensor/error.h"

namespace weft::detail {
namespace {

// A row-major (rows, cols) view as a column-major operand: stored (cols × rows) when its rows
// are contiguous, or (rows × cols) used transposed when it is the transpose of such a matrix.
// One-row and one-column views take the packed leading dimension, whatever their strides.
std::optional<LtOperand> operand(const MatrixView& v) {
  if (v.col_stride == 1 && (v.rows == 1 || v.row_stride >= v.cols))
    return LtOperand{false, v.cols, v.rows, v.rows == 1 ? std::max<int64_t>(v.cols, 1) : v.row_stride};
  if (v.row_stride == 1 && (v.cols == 1 || v.col_stride >= v.rows))
    return LtOperand{true, v.rows, v.cols, v.cols == 1 ? std::max<int64_t>(v.rows, 1) : v.col_stride};
  return std::nullopt;
}

}  // namespace

std::optional<LtPlan> lt_plan(const MatrixView& a, const MatrixView& b) {
  WEFT_CHECK(a.cols == b.rows, "[matmul] inner dimensions differ: (", a.rows, ", ", a.cols, ") · (", b.rows, ", ",
             b.cols, ")");
  const std::optional<LtOperand> first = operand(b), second = operand(a);
  if (!first || !second) return std::nullopt;
  return LtPlan{b.cols, a.rows, a.cols, *first, *second, std::max<int64_t>(b.cols, 1)};
}

LtEpilogue lt_epilogue(bool bias, GemmActivation activation) {
  switch (activation) {
    case GemmActivation::None: return bias ? LtEpilogue::Bias : LtEpilogue::Default;
    case GemmActivation::Relu: return bias ? LtEpilogue::ReluBias : LtEpilogue::Relu;
    case GemmActivation::Gelu: return bias ? LtEpilogue::GeluBias : LtEpilogue::Gelu;
  }
  WEFT_FAIL("[matmul] unknown activation ", static_cast<int>(activation));
}

void check_fp8_compute_capability(int major, int minor) {
  WEFT_CHECK(major > 8 || (major == 8 && minor >= 9), "[fp8_gemm] FP8 matrix products on CUDA need compute "
             "capability 8.9 or newer (Ada, Hopper), got ", major, ".", minor);
}

bool is_tn(const LtPlan& plan) { return plan.a.transposed && !plan.b.transposed; }

void check_fp8_plan(const LtPlan& plan) {
  WEFT_CHECK(is_tn(plan), "[fp8_gemm] cuBLASLt takes FP8 operands only in the TN layout (its A transposed, B not: "
             "out = x·Wᵀ with x and W contiguous), got ", plan.a.transposed ? "T" : "N",
             plan.b.transposed ? "T" : "N");
  WEFT_CHECK(plan.k % 16 == 0 && plan.m % 16 == 0 && plan.a.ld % 16 == 0 && plan.b.ld % 16 == 0,
             "[fp8_gemm] FP8 products on cuBLASLt need K, N and the leading dimensions to be multiples of 16, got "
             "K=", plan.k, ", N=", plan.m, ", leading dimensions ", plan.a.ld, " and ", plan.b.ld);
}

}  // namespace weft::detail
