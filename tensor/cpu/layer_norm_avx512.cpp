// The layer-norm row kernels of layer_norm_kernels.h on AVX-512 (ISA kernel unit: Note [ISA kernel
// units] in tensor/cpu/simd.h), sixteen floats at a time; a row's last n % 16 under a lane mask
// (zeros, which add nothing to the sums). The scalar reference is cpu_layer_norm_forward /
// _backward in tensor/cpu/fused.cpp.
#include "tensor/cpu/layer_norm_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

// Lanes 0-7 and lanes 8-15 of v, widened to double.
__m512d low_half_wide(__m512 v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
__m512d high_half_wide(__m512 v) {
  return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

// Sixteen partial sums in double: lanes 0-7 of a step into `low`, 8-15 into `high`.
struct WideSum {
  __m512d low = _mm512_setzero_pd(), high = _mm512_setzero_pd();

  void add(__m512 v) {
    low = _mm512_add_pd(low, low_half_wide(v));
    high = _mm512_add_pd(high, high_half_wide(v));
  }
  // Each half's products of two float vectors, widened before multiplying.
  void add_product(__m512 a, __m512 b) {
    low = _mm512_add_pd(low, _mm512_mul_pd(low_half_wide(a), low_half_wide(b)));
    high = _mm512_add_pd(high, _mm512_mul_pd(high_half_wide(a), high_half_wide(b)));
  }
  double total() const {
    alignas(64) double lanes[8];
    _mm512_store_pd(lanes, _mm512_add_pd(low, high));
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  }
};

__m512 load(const float* p, int64_t c, __mmask16 valid) { return _mm512_maskz_loadu_ps(valid, p + c); }

}  // namespace

LayerNormRowStats layer_norm_row_avx512(const float* x, int64_t n, const float* w, const float* b, float eps, float* y) {
  WideSum sum;
  for (int64_t c = 0; c < n; c += 16) sum.add(load(x, c, lane_mask(n - c)));
  const float mean = static_cast<float>(sum.total() / static_cast<double>(n));
  const __m512 mu = _mm512_set1_ps(mean);
  WideSum squares;
  for (int64_t c = 0; c < n; c += 16) {
    const __mmask16 valid = lane_mask(n - c);
    const __m512 d = _mm512_maskz_sub_ps(valid, load(x, c, valid), mu);
    squares.add_product(d, d);
  }
  const float var = static_cast<float>(squares.total() / static_cast<double>(n));
  const float rstd = 1.0f / _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(var + eps)));  // sqrtss: std::sqrt's rounding
  const __m512 inv = _mm512_set1_ps(rstd);
  for (int64_t c = 0; c < n; c += 16) {
    const __mmask16 valid = lane_mask(n - c);
    __m512 v = _mm512_mul_ps(_mm512_sub_ps(load(x, c, valid), mu), inv);
    if (w) v = _mm512_mul_ps(v, load(w, c, valid));
    if (b) v = _mm512_add_ps(v, load(b, c, valid));
    _mm512_mask_storeu_ps(y + c, valid, v);
  }
  return {mean, rstd};
}

void layer_norm_row_grad_avx512(const float* x, const float* dy, int64_t n, const float* w, float mean, float rstd,
                                float* dx) {
  const __m512 mu = _mm512_set1_ps(mean), inv = _mm512_set1_ps(rstd);
  auto g_at = [&](int64_t c, __mmask16 valid) {
    const __m512 d = load(dy, c, valid);
    return w ? _mm512_mul_ps(d, load(w, c, valid)) : d;
  };
  WideSum sum_g, sum_gx;
  for (int64_t c = 0; c < n; c += 16) {
    const __mmask16 valid = lane_mask(n - c);
    const __m512 g = g_at(c, valid);
    sum_g.add(g);
    sum_gx.add_product(g, _mm512_mul_ps(_mm512_sub_ps(load(x, c, valid), mu), inv));
  }
  const __m512 mean_g = _mm512_set1_ps(static_cast<float>(sum_g.total() / static_cast<double>(n)));
  const __m512 mean_gx = _mm512_set1_ps(static_cast<float>(sum_gx.total() / static_cast<double>(n)));
  for (int64_t c = 0; c < n; c += 16) {
    const __mmask16 valid = lane_mask(n - c);
    const __m512 x_hat_term = _mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(load(x, c, valid), mu), inv), mean_gx);
    const __m512 v = _mm512_mul_ps(inv, _mm512_sub_ps(_mm512_sub_ps(g_at(c, valid), mean_g), x_hat_term));
    _mm512_mask_storeu_ps(dx + c, valid, v);
  }
}

void layer_norm_columns_avx512(const float* x, const float* dy, int64_t rows, int64_t n, int64_t begin, int64_t end,
                               const float* mean, const float* rstd, double* dw, double* db) {
  for (int64_t c = begin; c < end; c += 16) {
    const __mmask16 valid = lane_mask(end - c);
    const __mmask8 low_valid = static_cast<__mmask8>(valid), high_valid = static_cast<__mmask8>(valid >> 8);
    __m512d w_low = _mm512_maskz_loadu_pd(low_valid, dw + c), w_high = _mm512_maskz_loadu_pd(high_valid, dw + c + 8);
    __m512d b_low = _mm512_maskz_loadu_pd(low_valid, db + c), b_high = _mm512_maskz_loadu_pd(high_valid, db + c + 8);
    for (int64_t r = 0; r < rows; ++r) {
      const __m512 d = _mm512_maskz_loadu_ps(valid, dy + r * n + c);
      const __m512 xv = _mm512_maskz_loadu_ps(valid, x + r * n + c);
      const __m512 x_hat = _mm512_mul_ps(_mm512_sub_ps(xv, _mm512_set1_ps(mean[r])), _mm512_set1_ps(rstd[r]));
      const __m512 product = _mm512_mul_ps(d, x_hat);
      w_low = _mm512_add_pd(w_low, low_half_wide(product));
      w_high = _mm512_add_pd(w_high, high_half_wide(product));
      b_low = _mm512_add_pd(b_low, low_half_wide(d));
      b_high = _mm512_add_pd(b_high, high_half_wide(d));
    }
    _mm512_mask_storeu_pd(dw + c, low_valid, w_low);
    _mm512_mask_storeu_pd(dw + c + 8, high_valid, w_high);
    _mm512_mask_storeu_pd(db + c, low_valid, b_low);
    _mm512_mask_storeu_pd(db + c + 8, high_valid, b_high);
  }
}

}  // namespace weft::detail
