// The tanh GELU and its gradient on AVX2 (ISA kernel unit: Note [ISA kernel units] in
// tensor/cpu/simd.h), eight float32 lanes at a time: gelu_avx512.cpp's operations on ymm registers,
// so again the scalar reference's bits. float32 only.
#include "tensor/cpu/gelu/gelu_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

// float32 constants of the reference, as it rounds them.
constexpr float kSqrt2OverPi = static_cast<float>(0.7978845608028654);
constexpr float kCubic = static_cast<float>(0.044715);
constexpr float kThreeCubic = static_cast<float>(3 * 0.044715);

__m256 set(float v) { return _mm256_set1_ps(v); }

// tanh_arith over 8 lanes: tanh|u| = (1 − e) / (1 + e) with e = exp(−2·min(|u|, 9)), the sign of u.
__m256 tanh8(__m256 u) {
  const __m256i magnitude = _mm256_and_si256(_mm256_castps_si256(u), _mm256_set1_epi32(0x7fffffff));
  const __m256 y = _mm256_mul_ps(set(2.0f), _mm256_castsi256_ps(_mm256_min_epu32(magnitude, _mm256_set1_epi32(0x41100000))));
  const __m256i k = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(y, set(1.44269504f)), set(0.5f)));
  const __m256 kf = _mm256_cvtepi32_ps(k);
  const __m256 r = _mm256_sub_ps(_mm256_sub_ps(y, _mm256_mul_ps(kf, set(0.693145752f))), _mm256_mul_ps(kf, set(1.42860677e-6f)));
  const __m256 m = _mm256_sub_ps(_mm256_setzero_ps(), r);
  __m256 p = set(1.0f / 5040);
  p = _mm256_add_ps(set(1.0f / 720), _mm256_mul_ps(m, p));
  p = _mm256_add_ps(set(1.0f / 120), _mm256_mul_ps(m, p));
  p = _mm256_add_ps(set(1.0f / 24), _mm256_mul_ps(m, p));
  p = _mm256_add_ps(set(1.0f / 6), _mm256_mul_ps(m, p));
  p = _mm256_add_ps(set(0.5f), _mm256_mul_ps(m, p));
  p = _mm256_add_ps(set(1.0f), _mm256_mul_ps(m, p));
  p = _mm256_add_ps(set(1.0f), _mm256_mul_ps(m, p));
  // 2^−k: the reference multiplies the factors 1 − c_b·bit_b of k's bits, each an exact power of
  // two (c_b = 1 − 2^−(2^b) in float), so their product is exactly 2^−k, made here from its exponent.
  const __m256 scale = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(127), k), 23));
  const __m256 e = _mm256_mul_ps(p, scale);
  const __m256 t = _mm256_div_ps(_mm256_sub_ps(set(1.0f), e), _mm256_add_ps(set(1.0f), e));
  // copysign(t, u): t ≥ 0, so u's sign bit or'ed in.
  const __m256i sign = _mm256_and_si256(_mm256_castps_si256(u), _mm256_set1_epi32(static_cast<int>(0x80000000u)));
  return _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(t), sign));
}

// √(2/π)·(x + ((0.044715·x)·x)·x), the tanh's argument.
__m256 inner8(__m256 x) {
  return _mm256_mul_ps(set(kSqrt2OverPi), _mm256_add_ps(x, _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(set(kCubic), x), x), x)));
}

// ½x·(1 + t) with t = tanh8(inner8(x))
__m256 forward8(__m256 x, __m256 t) { return _mm256_mul_ps(_mm256_mul_ps(set(0.5f), x), _mm256_add_ps(set(1.0f), t)); }

// g · (½(1 + t) + ((½x)(1 − t²))·√(2/π)(1 + (3·0.044715·x)·x)) with t = tanh8(inner8(x))
__m256 backward8(__m256 g, __m256 x, __m256 t) {
  const __m256 d_inner =
      _mm256_mul_ps(set(kSqrt2OverPi), _mm256_add_ps(set(1.0f), _mm256_mul_ps(_mm256_mul_ps(set(kThreeCubic), x), x)));
  const __m256 slope = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(set(0.5f), x), _mm256_sub_ps(set(1.0f), _mm256_mul_ps(t, t))), d_inner);
  return _mm256_mul_ps(g, _mm256_add_ps(_mm256_mul_ps(set(0.5f), _mm256_add_ps(set(1.0f), t)), slope));
}

// The first `count` (at most 8) lanes: loads and stores of a ragged end go through a buffer
// (store_tail of 8 is a plain store).
__m256 load_tail(const float* p, int64_t count) {
  float lanes[8] = {};
  for (int64_t l = 0; l < count; ++l) lanes[l] = p[l];
  return _mm256_loadu_ps(lanes);
}

void store_tail(float* p, int64_t count, __m256 v) {
  if (count == 8) return _mm256_storeu_ps(p, v);
  float lanes[8];
  _mm256_storeu_ps(lanes, v);
  for (int64_t l = 0; l < count; ++l) p[l] = lanes[l];
}

}  // namespace

void gelu_tanh_forward_avx2(const float* x, float* y, float* t, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) {
    const int64_t count = n - i < 8 ? n - i : 8;
    const __m256 xv = count == 8 ? _mm256_loadu_ps(x + i) : load_tail(x + i, count);
    const __m256 tv = tanh8(inner8(xv));
    if (t) store_tail(t + i, count, tv);
    store_tail(y + i, count, forward8(xv, tv));
  }
}

void gelu_tanh_backward_avx2(const float* grad, const float* x, const float* t, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) {
    const int64_t count = n - i < 8 ? n - i : 8;
    auto at = [&](const float* p) { return count == 8 ? _mm256_loadu_ps(p + i) : load_tail(p + i, count); };
    const __m256 xv = at(x);
    store_tail(dx + i, count, backward8(at(grad), xv, t ? at(t) : tanh8(inner8(xv))));
  }
}

}  // namespace weft::detail
