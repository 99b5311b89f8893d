// Entry points of the AVX2 unit of LLM.int8()'s floating-point parts (llm_int8_avx2.cpp), chosen
// at run time by llm_int8.cpp beside their scalar references. Plain declarations only (Note [ISA
// kernel units] in tensor/cpu/simd.h).
#pragma once

#include <cstdint>

namespace weft::precision::quant::kernels {

// out[i·n + j] += Σ_c x[i·outliers + c] · wt[c·n + j] for i < m, j < n, each sum a chain of fused
// multiply-adds in c's order starting from zero, added to out once complete.
void outlier_correction_avx2(const float* x, const float* wt, int64_t m, int64_t n, int64_t outliers, float* out);

// out[i] = (float(codes[i]) · stats[i / row]) · (1/127), two roundings in that order, for i < n:
// the llm_int8 format's dequantization (quant_format.cpp), eight values at a time.
void dequantize_int8_rows_avx2(const int8_t* codes, const float* stats, int64_t n, int64_t row, float* out);

// LLM.int8()'s row quantization of `rows` rows of k values (row stride k), the llm_int8 format's
// rule (quantize_int8_rows in quant_format.cpp, inside the scalar reference in llm_int8.cpp) with
// outliers left out: with `outliers`, a value whose magnitude reaches `threshold` counts as 0 —
// outside its row's absmax, code 0 — and sets outlier_col[column] to 1. Per row: stats = absmax,
// codes = round-half-even(x · ((1 / absmax) · 127)); a row whose absmax is 0, NaN or infinite, or
// whose scale overflows, codes 0.
struct QuantizeInt8RowsArgs {
  const float* x;
  int64_t rows, k;
  bool outliers;
  float threshold;
  int8_t* codes;         // rows · k
  float* stats;          // rows
  uint8_t* outlier_col;  // k flags, only set (never cleared) here
};

void quantize_int8_rows_avx2(const QuantizeInt8RowsArgs& args);

}  // namespace weft::precision::quant::kernels
