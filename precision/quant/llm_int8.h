// LLM.int8() (Dettmers et al. 2022) on tensors, as bitsandbytes.functional spells it:
// vector-wise int8 quantization with outlier columns, the exact int8 product, its dequantization,
// and the mixed int8 + floating-point decomposition (quantization-fp8.md §B.1.4).
//
//   a: (rows, K) activations, w: (N, K) weights, both quantized row by row:
//     stats = max |row|, codes = round_half_even(x · (127 / stats))   (quant_format "llm_int8")
//   With threshold > 0, every |a| >= threshold is an outlier: outliers are left out of their row's
//   absmax and quantized as 0, and (for more than one row) every column holding one is zeroed
//   in all rows. Those columns are then multiplied in floating point instead:
//     out = dequant(codes_a · codes_wᵀ) + a[:, cols] · dequant(w)[:, cols]ᵀ + bias
//   dequant(C) = C · (stats_a ⊗ stats_w) · 6.200124e-05   (= 1/127², bitsandbytes' constant)
//
// Arithmetic is float32, in bitsandbytes' order, so codes, statistics, outlier columns, int32
// products and dequantized products equal bitsandbytes' CPU backend bit for bit; the floating
// correction for outlier columns may differ from its BLAS in the last bit. Inputs may be any
// floating dtype; the threshold is compared in the input's dtype as PyTorch does (bitsandbytes'
// layers pass float16).
#pragma once

#include <cstdint>

#include "precision/quant/int8_gemm.h"
#include "tensor/cpu/isa.h"
#include "tensor/tensor.h"

namespace weft::precision::quant {

struct Int8Rows {
  Tensor codes;         // int8 (rows, K)
  Tensor stats;         // float32 (rows,): each row's absmax, outliers excluded
  Tensor outlier_cols;  // int64 (n,), ascending; empty without threshold or outliers
};

// a: (..., K), flattened to rows.
Int8Rows int8_vectorwise_quant(const Tensor& a, double threshold = 0.0);
// codes: (rows, K) int8, stats: (rows,) -> float32 (rows, K): codes · stats · (1/127).
Tensor int8_vectorwise_dequant(const Tensor& codes, const Tensor& stats);
// g: (M, N) float32 · int8_vectorwise_dequant(codes (N, K), stats) -> float32 (M, K): a layer's
// input gradient, with the weight dequantized block by block inside weft's GEMM on the CPU.
Tensor int8_dequant_matmul(const Tensor& g, const Tensor& codes, const Tensor& stats);
// a: (M, K) int8 · b: (N, K) int8 -> int32 (M, N), exact (precision/quant/int8_gemm.h).
Tensor int8_linear_matmul(const Tensor& a, const Tensor& b);
// The same with B packed once (a layer's frozen weight).
Tensor int8_linear_matmul(const Tensor& a, const PackedInt8Matrix& b);
// c: (M, N) int32, row_stats: (M,), col_stats: (N,) -> (M, N) in dtype, plus bias (N,) if defined.
Tensor int8_mm_dequant(const Tensor& c, const Tensor& row_stats, const Tensor& col_stats, DType dtype,
                       const Tensor& bias = Tensor());
// The full LLM.int8() product of a: (M, K) (any floating dtype; the result has it) with the
// quantized weight (cb, scb); `q` is a's vector-wise quantization. `packed_cb`, when given, is
// cb packed for the int8 GEMM.
Tensor int8_mixed_scaled_mm(const Tensor& a, const Int8Rows& q, const Tensor& cb, const Tensor& scb,
                            const Tensor& bias = Tensor(), const PackedInt8Matrix* packed_cb = nullptr);

// n values of codes in rows of `row`, dequantized as int8_vectorwise_dequant does: (code · stat)
// · (1/127), two roundings; the AVX2 kernel (every level from AVX2 up) gives the llm_int8 format's
// scalar bits.
void int8_dequantize_rows(const int8_t* codes, const float* stats, int64_t n, int64_t row, float* out,
                          CpuIsa isa = cpu_isa());

// The floating correction of int8_mixed_scaled_mm: out[i·n + j] += Σ_c x[i·outliers + c] ·
// wt[c·n + j], x (m, outliers) and wt (outliers, n) float32, each sum a chain of fused
// multiply-adds in c's order from zero. The AVX2 kernel (for every level from AVX2 up) gives the
// scalar reference's bits.
void int8_outlier_correction(const float* x, const float* wt, int64_t m, int64_t n, int64_t outliers, float* out,
                             CpuIsa isa = cpu_isa());

}  // namespace weft::precision::quant
