// LLM.int8()'s floating-point parts with AVX2, for every level from AVX2 up (they are small beside
// the int8 product, or bound by memory):
//   - the outlier correction: each output row's sums, 32 columns at a time in four ymm
//     accumulators, one fused multiply-add per outlier column in the scalar reference's order, so
//     every lane computes exactly the reference's chain (std::fma rounds once, as vfmadd does);
//   - the weight's dequantization, code · stat · (1/127) with the reference's two roundings.
#include "precision/quant/llm_int8_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::precision::quant::kernels {

void outlier_correction_avx2(const float* x, const float* wt, int64_t m, int64_t n, int64_t outliers, float* out) {
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x + i * outliers;
    float* oi = out + i * n;
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
      __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
      for (int64_t c = 0; c < outliers; ++c) {
        const __m256 xc = _mm256_broadcast_ss(xi + c);
        const float* w = wt + c * n + j;
        s0 = _mm256_fmadd_ps(xc, _mm256_loadu_ps(w), s0);
        s1 = _mm256_fmadd_ps(xc, _mm256_loadu_ps(w + 8), s1);
        s2 = _mm256_fmadd_ps(xc, _mm256_loadu_ps(w + 16), s2);
        s3 = _mm256_fmadd_ps(xc, _mm256_loadu_ps(w + 24), s3);
      }
      _mm256_storeu_ps(oi + j, _mm256_add_ps(_mm256_loadu_ps(oi + j), s0));
      _mm256_storeu_ps(oi + j + 8, _mm256_add_ps(_mm256_loadu_ps(oi + j + 8), s1));
      _mm256_storeu_ps(oi + j + 16, _mm256_add_ps(_mm256_loadu_ps(oi + j + 16), s2));
      _mm256_storeu_ps(oi + j + 24, _mm256_add_ps(_mm256_loadu_ps(oi + j + 24), s3));
    }
    for (; j < n; ++j) {
      __m128 s = _mm_setzero_ps();
      for (int64_t c = 0; c < outliers; ++c) s = _mm_fmadd_ss(_mm_set_ss(xi[c]), _mm_set_ss(wt[c * n + j]), s);
      oi[j] += _mm_cvtss_f32(s);
    }
  }
}

void dequantize_int8_rows_avx2(const int8_t* codes, const float* stats, int64_t n, int64_t row, float* out) {
  const float inverse_127 = 7.874015718698502e-3f;  // the reference's constant (quant_format.cpp)
  const __m256 inverse = _mm256_set1_ps(inverse_127);
  for (int64_t start = 0, r = 0; start < n; start += row, ++r) {
    const int64_t end = start + row < n ? start + row : n;
    const __m256 stat = _mm256_set1_ps(stats[r]);
    int64_t i = start;
    for (; i + 8 <= end; i += 8) {
      const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + i));
      const __m256 values = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
      _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(values, stat), inverse));
    }
    for (; i < end; ++i) out[i] = static_cast<float>(codes[i]) * stats[r] * inverse_127;
  }
}

}  // namespace weft::precision::quant::kernels
