// The cross-entropy row kernels of cross_entropy_kernels.h on AVX-512 (ISA kernel unit: Note [ISA
// kernel units] in tensor/cpu/simd.h), sixteen logits at a time; a row's last n % 16 under a lane
// mask. The scalar reference is cpu_cross_entropy_forward / _backward in tensor/cpu/fused.cpp.
#include "tensor/cpu/cross_entropy_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

// The 16 lanes of v added into two accumulators of 8 doubles.
void add_wide(__m512 v, __m512d& low, __m512d& high) {
  low = _mm512_add_pd(low, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
  high = _mm512_add_pd(high, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

double total(__m512d low, __m512d high) {
  alignas(64) double lanes[8];
  _mm512_store_pd(lanes, _mm512_add_pd(low, high));
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

}  // namespace

CrossEntropyRowSums cross_entropy_row_sums_avx512(const float* x, int64_t n) {
  const __m512 minus_inf = _mm512_set1_ps(-__builtin_inff());
  // vmaxps(x, most) keeps `most` where x is NaN, as std::max(most, x) does.
  __m512 most = minus_inf;
  for (int64_t c = 0; c < n; c += 16) most = _mm512_max_ps(_mm512_mask_loadu_ps(minus_inf, lane_mask(n - c), x + c), most);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, most);
  float m = -__builtin_inff();
  for (const float v : lanes) m = m < v ? v : m;
  const float shift = m == -__builtin_inff() ? 0.0f : m;
  const __m512 base = _mm512_set1_ps(shift);
  __m512d exp_low = _mm512_setzero_pd(), exp_high = _mm512_setzero_pd();
  __m512d sum_low = _mm512_setzero_pd(), sum_high = _mm512_setzero_pd();
  for (int64_t c = 0; c < n; c += 16) {
    const __mmask16 valid = lane_mask(n - c);
    const __m512 v = _mm512_maskz_loadu_ps(valid, x + c);
    add_wide(_mm512_maskz_mov_ps(valid, exp_x16(_mm512_sub_ps(v, base))), exp_low, exp_high);
    add_wide(v, sum_low, sum_high);
  }
  return {m, total(exp_low, exp_high), total(sum_low, sum_high)};
}

void cross_entropy_row_grad_avx512(const float* x, int64_t n, float lse, float grad, float smooth, int64_t target,
                                   float hit, float* out) {
  const __m512 l = _mm512_set1_ps(lse), g = _mm512_set1_ps(grad), s = _mm512_set1_ps(smooth), h = _mm512_set1_ps(hit);
  for (int64_t c = 0; c < n; c += 16) {
    const __mmask16 valid = lane_mask(n - c);
    const __mmask16 is_target = target >= c && target < c + 16 ? __mmask16(1u << (target - c)) : __mmask16(0);
    __m512 d = _mm512_sub_ps(exp_x16(_mm512_sub_ps(_mm512_maskz_loadu_ps(valid, x + c), l)), s);
    d = _mm512_mask_sub_ps(d, is_target, d, h);
    _mm512_mask_storeu_ps(out + c, valid, _mm512_mul_ps(g, d));
  }
}

}  // namespace weft::detail
