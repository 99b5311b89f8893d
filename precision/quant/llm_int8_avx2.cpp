// LLM.int8()'s floating-point parts with AVX2, for every level from AVX2 up (they are small beside
// the int8 product, or bound by memory):
//   - the outlier correction: each output row's sums, 32 columns at a time in four ymm
//     accumulators, one fused multiply-add per outlier column in the scalar reference's order, so
//     every lane computes exactly the reference's chain (std::fma rounds once, as vfmadd does);
//   - the weight's dequantization, code · stat · (1/127) with the reference's two roundings;
//   - the rows' quantization (activations every forward, weights as they load): a pass for the
//     absmax of the values under the threshold, an integer max over their magnitudes' bits, and
//     one for the codes, converted with vcvtps2dq (ties to even, as round_half_even) and packed,
//     outliers masked to 0. At 128 × 4096 it was a fifth of Linear8bitLt's forward.
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

namespace {

// One row's absmax over the values below the threshold (all with !outliers), its outlier columns
// flagged. Magnitudes as integers: every NaN above infinity, as the reference's absmax_of.
float row_absmax(const float* x, int64_t k, bool outliers, float threshold, uint8_t* outlier_col) {
  const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256 t = _mm256_set1_ps(threshold);
  __m256i m = _mm256_setzero_si256();
  int64_t c = 0;
  for (; c + 8 <= k; c += 8) {
    __m256i bits = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + c)), magnitude);
    if (outliers) {
      const __m256 out = _mm256_cmp_ps(_mm256_castsi256_ps(bits), t, _CMP_GE_OQ);
      if (int mask = _mm256_movemask_ps(out); mask != 0)
        for (int j = 0; j < 8; ++j) outlier_col[c + j] |= static_cast<uint8_t>((mask >> j) & 1);
      bits = _mm256_andnot_si256(_mm256_castps_si256(out), bits);
    }
    m = _mm256_max_epu32(m, bits);
  }
  uint32_t most = hmax_epu32(m);
  for (; c < k; ++c) {
    uint32_t bits;
    __builtin_memcpy(&bits, x + c, 4);
    bits &= 0x7FFFFFFFu;
    float value;
    __builtin_memcpy(&value, &bits, 4);
    if (outliers && value >= threshold) {
      outlier_col[c] = 1;
      continue;
    }
    most = bits > most ? bits : most;
  }
  float amax;
  __builtin_memcpy(&amax, &most, 4);
  return amax;
}

// Codes of 8 values: round(x · scale) as int32, outliers 0.
__m256i codes8(const float* x, __m256 scale, bool outliers, __m256 threshold) {
  const __m256 v = _mm256_loadu_ps(x);
  const __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(v, scale));
  if (!outliers) return q;
  const __m256 magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
  return _mm256_andnot_si256(_mm256_castps_si256(_mm256_cmp_ps(magnitude, threshold, _CMP_GE_OQ)), q);
}

}  // namespace

void quantize_int8_rows_avx2(const QuantizeInt8RowsArgs& p) {
  const __m256 threshold = _mm256_set1_ps(p.threshold);
  for (int64_t r = 0; r < p.rows; ++r) {
    const float* x = p.x + r * p.k;
    int8_t* codes = p.codes + r * p.k;
    const float amax = row_absmax(x, p.k, p.outliers, p.threshold, p.outlier_col);
    p.stats[r] = amax;
    const float reciprocal = 1.0f / amax;
    const float scale = reciprocal * 127.0f;
    if (!(amax > 0.0f) || !__builtin_isfinite(amax) || !__builtin_isfinite(scale)) {
      __builtin_memset(codes, 0, static_cast<size_t>(p.k));
      continue;
    }
    const __m256 s = _mm256_set1_ps(scale);
    int64_t c = 0;
    for (; c + 32 <= p.k; c += 32) {
      const __m256i q0 = codes8(x + c, s, p.outliers, threshold);
      const __m256i q1 = codes8(x + c + 8, s, p.outliers, threshold);
      const __m256i q2 = codes8(x + c + 16, s, p.outliers, threshold);
      const __m256i q3 = codes8(x + c + 24, s, p.outliers, threshold);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + c), pack_epi32_to_epi8(q0, q1, q2, q3));
    }
    for (; c < p.k; ++c) {
      const float magnitude = x[c] < 0.0f ? -x[c] : x[c];
      const bool outlier = p.outliers && magnitude >= p.threshold;
      codes[c] = outlier ? int8_t{0} : static_cast<int8_t>(_mm_cvtss_si32(_mm_set_ss(x[c] * scale)));
    }
  }
}

}  // namespace weft::precision::quant::kernels
