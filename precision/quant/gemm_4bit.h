// The 4-bit product: y = x · dequantize(W)ᵀ without materialising W in floating point.
//
//   x: (M, K) float32 · W: (N, K) in NF4 or FP4 (bitsandbytes' packed layout, float32 block
//   absmax) -> y: (M, N) float32
//
// Which product (Product4bit, product_4bit.h) is the caller's choice, Exact by default; the regime
// is chosen by the number of rows (never by the CPU, so a result does not depend on the machine):
//   M <= kFusedMaxRows, Exact (memory-bound: GEMV and small batches) — the exact fused kernel
//     (Note [Exact 4-bit product] in gemm_4bit_kernels.h): each weight row's packed codes are
//     streamed once and decoded to float32 in registers through the 16-entry table times the
//     block absmax (dequantize_4bit's very values), then FMAed with x in float32 for up to 4
//     activation rows at a time; weight rows are spread over weft's threads. It differs from
//     dequantize-then-multiply only in the order of the float32 additions. It needs K and the
//     block size multiples of 64 (rows may start inside a block, e.g. K = 192 in blocks of 128);
//     other shapes (the example's 784 inputs, blocks of 32) take the exact few-rows path below.
//   M <= kFusedMaxRows, Int8Activations — the fused int8 kernel. Each weight row's 32-byte chunks
//     are split into codes once and used by up to 4 activation rows; weight
//     rows are spread over weft's threads; the weights stay as stored (Note [4-bit product
//     layout]). The activations are quantized per weight block to int8 (round(x · 127 / max|x|)),
//     the 16 table values to int8 (round(127 · value)), each block's dot product is exact in int32
//     and scaled in float32 by absmax · max|x| / 127². So y differs from dequantize-then-multiply
//     by the two int8 roundings: under 1 % of the products' magnitude Σ|x·w| (0.8 % at worst over
//     600 random shapes), about 1 % of max|y| with many outputs, 0.3 % typically — though a few
//     percent of max|y| where a handful of outputs make max|y| small (3.6 % with 4). An NF4
//     weight's own quantization error is ~20 times larger, and bitsandbytes' bfloat16 CPU kernel
//     rounds comparably. It needs blocks of a multiple of 64 values, and K whose rows start
//     at no more than 16 different offsets into a block (blocksize / gcd(K, blocksize): any
//     multiple of the block, the example's 784 in blocks of 64; Note [Blocks across rows]) — or
//     blocks of 32 with K a multiple of 64 (two blocks to each of the kernel's 64-value steps).
//   otherwise (compute-bound, either product) — weft's float32 GEMM, W dequantized exactly a cache
//     block at a time (Note [Dequantized block by block]): as exact as dequantize-then-multiply,
//     without the float32 matrix. A few rows whose K the chosen fused kernel refuses are exact
//     the same way, with a few rows of W dequantized per thread and multiplied by the GEMM's
//     few-rows paths.
// In bfloat16 (gemm_4bit_bf16: a Linear4bit whose compute dtype is bfloat16), the second regime
// rounds W's dequantized values to bfloat16, as bitsandbytes dequantizes to its compute dtype, and
// runs weft's bfloat16 GEMM in the same two orientations: on CPUs with AVX-512 BF16 pairs of values
// multiply in one instruction, and W as A is made a strip of the GEMM's tile at a time, straight
// into L1 (4096² at batch 32, 2 threads, Zen 5: 1.40 ms, against 2.9 ms in float32 and
// bitsandbytes' 1.63).
// The vector kernels differ from their scalar references only in the order of float32 additions
// (the fused one) or not at all (dequantization).
#pragma once

#include <cstdint>

#include "precision/quant/product_4bit.h"
#include "precision/quant/quant_format.h"
#include "tensor/cpu/aligned_vector.h"
#include "tensor/cpu/isa.h"

namespace weft::precision::quant {

inline constexpr int64_t kFusedMaxRows = 16;

struct Weights4bit {
  const uint8_t* packed;  // (N · K + 1) / 2 bytes
  const float* absmax;    // one per block of the flat N · K values
  int64_t n, k, blocksize;
  QuantKind type;         // NF4 or FP4
};

// y: (m, w.n) = x: (m, w.k) · W^T, the product asked for, in the regime m calls for.
void gemm_4bit(const float* x, int64_t m, const Weights4bit& w, float* y, Product4bit product = Product4bit::Exact,
               CpuIsa isa = cpu_isa());

// y: (m, w.n) = x: (m, w.k) · W^T in bfloat16: x is bfloat16 bits. Up to kFusedMaxRows rows as
// gemm_4bit computes them, x widened exactly; more rows by weft's bfloat16 GEMM, with W
// dequantized and rounded to bfloat16 block by block (as bitsandbytes dequantizes to its compute
// dtype) and the products of pairs summed in float32.
void gemm_4bit_bf16(const uint16_t* x, int64_t m, const Weights4bit& w, float* y,
                    Product4bit product = Product4bit::Exact, CpuIsa isa = cpu_isa());

// The exact fused kernel alone (any m; K and the block size multiples of 64), with the kernel for
// `isa`; and its scalar reference, which sums the products in the order of K.
bool gemm_4bit_exact_supported(int64_t k, int64_t blocksize);
void gemm_4bit_exact(const float* x, int64_t m, const Weights4bit& w, float* y, CpuIsa isa = cpu_isa());
void gemm_4bit_exact_reference(const float* x, int64_t m, const Weights4bit& w, float* y);

// The fused int8 kernel alone (any m), with the kernel for `isa`; and its scalar reference.
bool gemm_4bit_fused_supported(int64_t k, int64_t blocksize);
void gemm_4bit_fused(const float* x, int64_t m, const Weights4bit& w, float* y, CpuIsa isa = cpu_isa());
void gemm_4bit_fused_reference(const float* x, int64_t m, const Weights4bit& w, float* y);

// The fused kernel's activations (Note [4-bit product layout] in gemm_4bit_kernels.h): m rows of
// k values (k a multiple of 64 and of blocksize) quantized per block and permuted, as the
// preparation for `isa` makes them (CpuIsa::Scalar: the reference). Every level gives the same
// bytes; exposed so that the tests can check it.
struct PreparedActivations {
  detail::AlignedVector<int8_t> q;
  detail::AlignedVector<uint8_t> q_abs;
  detail::AlignedVector<int32_t> q_sum;
  detail::AlignedVector<float> scale;
};
PreparedActivations prepare_4bit_activations(const float* x, int64_t m, int64_t k, int64_t blocksize,
                                             CpuIsa isa = cpu_isa());

// dx: (m, w.k) = g: (m, w.n) · W, the gradient of x·Wᵀ with respect to x, with W dequantized
// exactly block by block inside weft's float32 GEMM (as exact as dequantize-then-multiply).
void gemm_4bit_input_grad(const float* g, int64_t m, const Weights4bit& w, float* dx, CpuIsa isa = cpu_isa());

// out: (rows, w.k) float32 = W's rows [row0, row0 + rows), exactly dequantize_4bit's values (up to
// the sign of zero).
void dequantize_4bit_rows(const Weights4bit& w, int64_t row0, int64_t rows, float* out, CpuIsa isa = cpu_isa());
// The same rows rounded to bfloat16 (float_to_bfloat16 of each value): gemm_4bit_bf16's weights.
void dequantize_4bit_rows_bf16(const Weights4bit& w, int64_t row0, int64_t rows, uint16_t* out,
                               CpuIsa isa = cpu_isa());

}  // namespace weft::precision::quant
