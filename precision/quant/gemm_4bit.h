// The fused 4-bit product: y = x · dequantize(W)ᵀ without materialising W in floating point.
//
//   x: (M, K) float32 · W: (N, K) in NF4 or FP4 (bitsandbytes' packed layout, float32 block
//   absmax) -> y: (M, N) float32
//
// GEMV for one row (batch 1) and tiled over activation rows for batches: each weight row's 32-byte
// chunks are split into codes once and used by up to 4 activation rows, and weight rows are spread
// over weft's threads. The weights stay as they are stored (Note [4-bit product layout]).
//
// Arithmetic, the same on every instruction set: the activations are quantized per weight block
// to int8 (round(x · 127 / max|x|)), the 16 table values to int8 (round(127 · value)), each block's
// dot product is exact in int32 and scaled in float32 by absmax · max|x| / 127². So y differs
// from dequantize-then-multiply by the two int8 roundings: up to about 0.5 % of max|y| on random
// data (measured against bitsandbytes' float32 path; an NF4 weight's own quantization error is
// ~20 times larger, and bitsandbytes' bfloat16 CPU kernel rounds comparably). The kernels differ
// from the scalar reference only in the order of the float32 additions.
//
// Requirements: K a multiple of the block size, and blocks of at least 64 values (the vector
// kernels' unit); Linear4bit multiplies other shapes by dequantizing first.
#pragma once

#include <cstdint>

#include "precision/quant/quant_format.h"
#include "tensor/cpu/isa.h"

namespace weft::precision::quant {

struct Weights4bit {
  const uint8_t* packed;  // (N · K + 1) / 2 bytes
  const float* absmax;    // N · K / blocksize values
  int64_t n, k, blocksize;
  QuantKind type;         // NF4 or FP4
};

// True when the fused kernels take this shape.
bool gemm_4bit_supported(int64_t k, int64_t blocksize);

// y: (m, w.n) = x: (m, w.k) · W^T, with the kernel for `isa` (default: cpu_isa()).
void gemm_4bit(const float* x, int64_t m, const Weights4bit& w, float* y, CpuIsa isa = cpu_isa());
// The scalar reference of the same arithmetic.
void gemm_4bit_reference(const float* x, int64_t m, const Weights4bit& w, float* y);

}  // namespace weft::precision::quant
