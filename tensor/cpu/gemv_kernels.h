// Vector kernels of the batch-1 products (tensor/cpu/gemv.h), one unit per instruction set
// (Note [ISA kernel units] in tensor/cpu/simd.h). Plain declarations; the scalar references and
// the choice between them are in tensor/cpu/gemv.cpp.
//
// gemv_bf16_rows_*: y(rows) (+)= W(rows×k) · x(k), W's rows contiguous bfloat16 bits (row j at
//   w + j·ldw), x bfloat16 bits, y float32. Each y[j] is one float32 dot product.
// gemv_f16_rows_*: the same over float16 bits (W and x), float32 sums.
// gemv_f32_cols_*: y(cols) (+)= x(k) · B(k×cols), B's rows contiguous float32 (row p at b + p·ldb):
//   the weight of a layer stored [in, out] (GPT-2's Conv1D), read row after row.
#pragma once

#include <cstdint>

namespace weft::detail {

// Bytes of a weight row the batch-1 kernels (these and the int8 ones in precision/quant/) fetch
// ahead of the ones they read: W streams from memory once per decode step, and the hardware's
// prefetch alone kept too few lines in flight (the 1.1B Llama's bf16 decode: 0.92x the time per
// token, paired in one process).
constexpr int64_t kGemvAheadBytes = 1024;
// The same in values of a 16-bit row.
constexpr int64_t kGemvRowAhead = kGemvAheadBytes / 2;

void gemv_bf16_rows_avx2(const uint16_t* w, int64_t ldw, const uint16_t* x, int64_t k, int64_t rows, float* y,
                         bool accumulate);
void gemv_bf16_rows_avx512(const uint16_t* w, int64_t ldw, const uint16_t* x, int64_t k, int64_t rows, float* y,
                           bool accumulate);
void gemv_bf16_rows_avx512bf16(const uint16_t* w, int64_t ldw, const uint16_t* x, int64_t k, int64_t rows, float* y,
                               bool accumulate);

void gemv_f16_rows_avx2(const uint16_t* w, int64_t ldw, const uint16_t* x, int64_t k, int64_t rows, float* y,
                        bool accumulate);
void gemv_f16_rows_avx512(const uint16_t* w, int64_t ldw, const uint16_t* x, int64_t k, int64_t rows, float* y,
                          bool accumulate);

void gemv_f32_cols_avx2(const float* x, const float* b, int64_t ldb, int64_t k, int64_t cols, float* y, bool accumulate);
void gemv_f32_cols_avx512(const float* x, const float* b, int64_t ldb, int64_t k, int64_t cols, float* y,
                          bool accumulate);

}  // namespace weft::detail
