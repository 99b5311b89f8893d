// Batch-1 products (decode's linear layers): one row of activations times a weight, which reads
// every weight once per token, so its pace is the memory's. The GEMM (tensor/cpu/gemm/gemm.h)
// would pack a bfloat16 weight whole before using each value once, and runs a float32 product
// this small on one thread; these read the weight in place, as it is stored, split by output
// columns over the threads (so no value's arithmetic depends on the thread count).
//
// The kernel is chosen at run time from cpu_isa() (tensor/cpu/isa.h): AVX-512 BF16 dot products
// (vdpbf16ps: pairs of bfloat16 products into float32, denormals flushed), AVX-512, AVX2 (float16
// through F16C's conversions at both), and the
// scalar reference every fast kernel is tested against (tests/tensor/test_gemv.cpp).
#pragma once

#include <cstdint>

#include "tensor/cpu/isa.h"

namespace weft::detail {

// y(n) (+)= W(n×k) · x(k): W bfloat16 bits with contiguous rows (row j at w + j·ldw), x bfloat16
// bits, y float32; float32 sums.
void gemv_bf16_rows(CpuIsa isa, const uint16_t* w, int64_t ldw, const uint16_t* x, int64_t k, int64_t n, float* y,
                    bool accumulate);

// The same over float16 bits (W and x): an LLM.int8() model's float16 head.
void gemv_f16_rows(CpuIsa isa, const uint16_t* w, int64_t ldw, const uint16_t* x, int64_t k, int64_t n, float* y,
                   bool accumulate);

// y(n) (+)= x(k) · B(k×n): B float32 with contiguous rows (row p at b + p·ldb), a layer's weight
// stored [in, out]; float32 sums.
void gemv_f32_cols(CpuIsa isa, const float* x, const float* b, int64_t ldb, int64_t k, int64_t n, float* y,
                   bool accumulate);

}  // namespace weft::detail
