// The cuBLASLt plan (tensor/gemm_plan.h), checked on the CPU against cuda.md §4's swap table with
// M ≠ N ≠ K (square shapes hide transposition bugs), the epilogue values of cublasLt.h, and the
// FP8 rules (TN layout, multiples of 16, compute capability 8.9).
#include <doctest/doctest.h>

#include <string>

#include "error_message.h"
#include "tensor/gemm_plan.h"

using namespace weft;
using namespace weft::detail;

namespace {

constexpr int64_t M = 4, N = 6, K = 10;

MatrixView contiguous(int64_t rows, int64_t cols) { return {rows, cols, cols, 1}; }
// The transpose of a contiguous (cols, rows) matrix, seen as (rows, cols).
MatrixView transposed(int64_t rows, int64_t cols) { return {rows, cols, 1, rows}; }

}  // namespace

TEST_CASE("lt_plan: the four layouts of cuda.md's swap table") {
  // C = A·B: OP_N, OP_N, m=N, n=M, k=K, lda N, ldb K, ldc N.
  CHECK(*lt_plan(contiguous(M, K), contiguous(K, N)) == LtPlan{N, M, K, {false, N, K, N}, {false, K, M, K}, N});
  // C = A·Bᵀ, B[N, K] (the linear forward): OP_T, OP_N, lda K, ldb K.
  CHECK(*lt_plan(contiguous(M, K), transposed(K, N)) == LtPlan{N, M, K, {true, K, N, K}, {false, K, M, K}, N});
  // C = Aᵀ·B, A[K, M] (the weight gradient): OP_N, OP_T, lda N, ldb M.
  CHECK(*lt_plan(transposed(M, K), contiguous(K, N)) == LtPlan{N, M, K, {false, N, K, N}, {true, M, K, M}, N});
  // C = Aᵀ·Bᵀ: OP_T, OP_T, lda K, ldb M.
  CHECK(*lt_plan(transposed(M, K), transposed(K, N)) == LtPlan{N, M, K, {true, K, N, K}, {true, M, K, M}, N});
}

TEST_CASE("lt_plan: padded rows keep their stride, single rows pack, other views need a copy") {
  const LtPlan padded = *lt_plan({M, K, K + 3, 1}, contiguous(K, N));
  CHECK(padded.b == LtOperand{false, K, M, K + 3});
  const LtPlan one_row = *lt_plan({1, K, 999, 1}, contiguous(K, N));
  CHECK(one_row.b == LtOperand{false, K, 1, K});
  CHECK(one_row.n == 1);
  const LtPlan one_column = *lt_plan(contiguous(M, K), {K, 1, 1, 77});
  CHECK(one_column.a == LtOperand{true, K, 1, K});
  CHECK_FALSE(lt_plan({M, K, 2 * K, 2}, contiguous(K, N)).has_value());  // every other column
  CHECK_FALSE(lt_plan(contiguous(M, K), {K, N, 2, 2 * K}).has_value());
  CHECK_THROWS_WITH_AS(lt_plan(contiguous(M, K), contiguous(K + 1, N)),
                       "[matmul] inner dimensions differ: (4, 10) · (11, 6)", Error);
}

TEST_CASE("lt_epilogue: cuBLASLt's epilogue values for bias and activation") {
  CHECK(static_cast<int>(lt_epilogue(false, GemmActivation::None)) == 1);
  CHECK(static_cast<int>(lt_epilogue(false, GemmActivation::Relu)) == 2);
  CHECK(static_cast<int>(lt_epilogue(true, GemmActivation::None)) == 4);
  CHECK(static_cast<int>(lt_epilogue(true, GemmActivation::Relu)) == 6);
  CHECK(static_cast<int>(lt_epilogue(false, GemmActivation::Gelu)) == 32);
  CHECK(static_cast<int>(lt_epilogue(true, GemmActivation::Gelu)) == 36);
}

TEST_CASE("FP8 on cuBLASLt: compute capability 8.9 and up, TN only, multiples of 16") {
  for (auto [major, minor] : {std::pair{8, 9}, {9, 0}, {10, 0}, {12, 0}})
    CHECK_NOTHROW(check_fp8_compute_capability(major, minor));
  CHECK(error_of([] { check_fp8_compute_capability(8, 6); }) ==
        "[fp8_gemm] FP8 matrix products on CUDA need compute capability 8.9 or newer (Ada, Hopper), got 8.6");
  CHECK_THROWS_AS(check_fp8_compute_capability(7, 9), Error);

  const LtPlan forward = *lt_plan(contiguous(32, 48), transposed(48, 16));  // x (32, 48) · Wᵀ, W (16, 48)
  CHECK(is_tn(forward));
  CHECK_NOTHROW(check_fp8_plan(forward));
  const LtPlan nn = *lt_plan(contiguous(32, 48), contiguous(48, 16));
  CHECK_FALSE(is_tn(nn));
  CHECK(error_of([] { check_fp8_plan(*lt_plan(contiguous(32, 48), contiguous(48, 16))); }) ==
        "[fp8_gemm] cuBLASLt takes FP8 operands only in the TN layout (its A transposed, B not: out = x·Wᵀ with x and "
        "W contiguous), got NN");
  CHECK(error_of([] { check_fp8_plan(*lt_plan(contiguous(32, 40), transposed(40, 16))); }) ==
        "[fp8_gemm] FP8 products on cuBLASLt need K, N and the leading dimensions to be multiples of 16, got K=40, "
        "N=16, leading dimensions 40 and 40");
  CHECK_THROWS_AS(check_fp8_plan(*lt_plan(contiguous(32, 48), transposed(48, 24))), Error);  // N = 24
}
