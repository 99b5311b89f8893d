// The tanh GELU and its gradient on AVX-512 (ISA kernel unit: Note [ISA kernel units] in
// tensor/cpu/simd.h), sixteen float32 lanes at a time: tanh_arith (tensor/elementwise_math.h)
// spelled in intrinsics, operation for operation, so the results are the scalar reference's bits.
// The elementwise loops run the reference at the baseline instruction set (four lanes, no FMA
// units' width to spare); in a GPT step the GELU and its gradient took a fifth of the time.
#include "tensor/cpu/gelu/gelu_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

// float32 constants of the reference, as it rounds them.
constexpr float kSqrt2OverPi = static_cast<float>(0.7978845608028654);
constexpr float kCubic = static_cast<float>(0.044715);
constexpr float kThreeCubic = static_cast<float>(3 * 0.044715);

__m512 set(float v) { return _mm512_set1_ps(v); }

// tanh_arith over 16 lanes: tanh|u| = (1 − e) / (1 + e) with e = exp(−2·min(|u|, 9)), the sign of u.
__m512 tanh16(__m512 u) {
  const __m512i magnitude = _mm512_and_si512(_mm512_castps_si512(u), _mm512_set1_epi32(0x7fffffff));
  const __m512 y = _mm512_mul_ps(set(2.0f), _mm512_castsi512_ps(_mm512_min_epu32(magnitude, _mm512_set1_epi32(0x41100000))));
  __m512i k;
  const __m512 p = exp_neg_reduced_x16(y, &k);
  // 2^−k: the reference multiplies the factors 1 − c_b·bit_b of k's bits, each an exact power of
  // two (c_b = 1 − 2^−(2^b) in float), so their product is exactly 2^−k, made here from its exponent.
  const __m512 scale = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(127), k), 23));
  const __m512 e = _mm512_mul_ps(p, scale);
  const __m512 t = _mm512_div_ps(_mm512_sub_ps(set(1.0f), e), _mm512_add_ps(set(1.0f), e));
  // copysign(t, u): t ≥ 0, so u's sign bit or'ed in.
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(u), _mm512_set1_epi32(static_cast<int>(0x80000000u)));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(t), sign));
}

// √(2/π)·(x + ((0.044715·x)·x)·x), the tanh's argument.
__m512 inner16(__m512 x) {
  return _mm512_mul_ps(set(kSqrt2OverPi), _mm512_add_ps(x, _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(set(kCubic), x), x), x)));
}

// ½x·(1 + t) with t = tanh16(inner16(x))
__m512 forward16(__m512 x, __m512 t) { return _mm512_mul_ps(_mm512_mul_ps(set(0.5f), x), _mm512_add_ps(set(1.0f), t)); }

// g · (½(1 + t) + ((½x)(1 − t²))·√(2/π)(1 + (3·0.044715·x)·x)) with t = tanh16(inner16(x))
__m512 backward16(__m512 g, __m512 x, __m512 t) {
  const __m512 d_inner =
      _mm512_mul_ps(set(kSqrt2OverPi), _mm512_add_ps(set(1.0f), _mm512_mul_ps(_mm512_mul_ps(set(kThreeCubic), x), x)));
  const __m512 slope = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(set(0.5f), x), _mm512_sub_ps(set(1.0f), _mm512_mul_ps(t, t))), d_inner);
  return _mm512_mul_ps(g, _mm512_add_ps(_mm512_mul_ps(set(0.5f), _mm512_add_ps(set(1.0f), t)), slope));
}

}  // namespace

void gelu_tanh_forward_avx512(const void* x, void* y, float* t, int64_t n, bool bf16) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = lane_mask(n - i);
    const __m512 xv = load_float_or_bf16_x16(x, i, mask, bf16);
    const __m512 tv = tanh16(inner16(xv));
    if (t) _mm512_mask_storeu_ps(t + i, mask, tv);
    store_float_or_bf16_x16(y, i, mask, bf16, forward16(xv, tv));
  }
}

void gelu_tanh_backward_avx512(const void* grad, const void* x, const float* t, void* dx, int64_t n, bool bf16) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = lane_mask(n - i);
    const __m512 xv = load_float_or_bf16_x16(x, i, mask, bf16);
    const __m512 tv = t ? _mm512_maskz_loadu_ps(mask, t + i) : tanh16(inner16(xv));
    store_float_or_bf16_x16(dx, i, mask, bf16, backward16(load_float_or_bf16_x16(grad, i, mask, bf16), xv, tv));
  }
}

}  // namespace weft::detail
