// The optimizers' updates on AVX-512 (ISA kernel unit: Note [ISA kernel units] in
// tensor/cpu/simd.h), sixteen float32 lanes at a time: the AVX2 kernels of optim/update_avx2.cpp
// widened, with the same operations in the same order (no fused multiply-adds), so the bits are
// the scalar path's (tests/optim/test_optim.cpp checks every level). Adam's update is bound by the
// divider and the square root, whose zmm forms take about as long per instruction as their ymm
// forms on Zen 5 (measured: divide 0.71 / 0.73 ns, square root 1.13 / 1.12 ns): twice the lanes
// for the same time. The careful path of Note [Denormal moments] (update_avx2.cpp) is the same,
// its tests on tiny lanes mask compares instead of vector tricks.
#include "optim/update_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::optim::detail {
namespace {

// The thresholds of Note [Denormal moments]: p, m, v and SGD's buffer tiny below 2^-100, the
// gradient below 2^-50.
constexpr int kTinyBits = 0x0d800000;       // 2^-100 as float32 bits
constexpr int kTinyGradientBits = 0x26800000;  // 2^-50

// The lanes holding a nonzero magnitude below `limit_bits`: |x| − 1 as unsigned lanes puts zero
// above every limit, and NaN and infinity are above too.
__mmask16 lanes_below(__m512 x, int limit_bits) {
  const __m512i magnitude = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff));
  const __m512i minus_one = _mm512_sub_epi32(magnitude, _mm512_set1_epi32(1));
  return _mm512_cmplt_epu32_mask(minus_one, _mm512_set1_epi32(limit_bits - 1));
}
__mmask16 tiny_lanes(__m512 x) { return lanes_below(x, kTinyBits); }
bool any_tiny(__m512 x) { return tiny_lanes(x) != 0; }

// The float32 operations carried out in float64 and rounded once (Note [Denormal moments]).
__m512d low(__m512 a) { return _mm512_cvtps_pd(_mm512_castps512_ps256(a)); }
__m512d high(__m512 a) { return _mm512_cvtps_pd(_mm512_extractf32x8_ps(a, 1)); }
__m512 narrow(__m512d lo, __m512d hi) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
}
__m512 mul(__m512 a, __m512 b, bool through_float64) {
  if (!through_float64) return _mm512_mul_ps(a, b);
  return narrow(_mm512_mul_pd(low(a), low(b)), _mm512_mul_pd(high(a), high(b)));
}
__m512 div(__m512 a, __m512 b, bool through_float64) {
  if (!through_float64) return _mm512_div_ps(a, b);
  return narrow(_mm512_div_pd(low(a), low(b)), _mm512_div_pd(high(a), high(b)));
}
__m512 sqrt(__m512 a, bool through_float64) {
  if (!through_float64) return _mm512_sqrt_ps(a);
  return narrow(_mm512_sqrt_pd(low(a)), _mm512_sqrt_pd(high(a)));
}

// The 16 elements at i, masked to the ragged end's lanes (all lanes elsewhere).
struct Access {
  int64_t i;
  __mmask16 mask;
  __m512 load(const float* x) const { return _mm512_maskz_loadu_ps(mask, x + i); }
  void store(float* x, __m512 v) const { _mm512_mask_storeu_ps(x + i, mask, v); }
};

struct AdamLanes {
  __m512 weight_decay, decay_factor, beta1, one_minus_beta1, beta2, one_minus_beta2, neg_step_size, inv_bc2_sqrt, eps;
};

// Adam's update of 16 elements from their loaded values, as adam_update8 in update_avx2.cpp: on
// the careful path the first moment's operations go through float64, the others' only when p, g
// or v has a tiny lane.
template <bool kCareful>
[[gnu::always_inline]] inline void adam_update16(const AdamBlockF32& b, const AdamLanes& k, Access at, __m512 p,
                                                 __m512 g, __m512 m, __m512 v, __m512 v_max, bool tiny_others) {
  const bool others = kCareful && tiny_others;
  if (b.coupled_decay) g = _mm512_add_ps(g, mul(k.weight_decay, p, others));
  if (b.decoupled) p = mul(p, k.decay_factor, others);
  m = _mm512_add_ps(mul(m, k.beta1, kCareful), mul(k.one_minus_beta1, g, others));
  v = _mm512_add_ps(mul(v, k.beta2, others), mul(mul(k.one_minus_beta2, g, others), g, others));
  __m512 second = v;
  if (b.v_max) {
    // max(v, v_max) with v_max's value where v is NaN, as std::max(v_max, v) gives.
    second = _mm512_max_ps(v, v_max);
    at.store(b.v_max, second);
  }
  const __m512 denom = _mm512_add_ps(_mm512_mul_ps(sqrt(second, others), k.inv_bc2_sqrt), k.eps);
  const __m512 numerator = mul(k.neg_step_size, m, kCareful);
  p = _mm512_add_ps(p, div(numerator, denom, kCareful && any_tiny(numerator)));
  at.store(b.p, p);
  at.store(b.m, m);
  at.store(b.v, v);
}

[[gnu::always_inline]] inline void adam_update16(const AdamBlockF32& b, const AdamLanes& k, Access at) {
  const __m512 p = at.load(b.p), g = at.load(b.g), m = at.load(b.m), v = at.load(b.v);
  const __m512 v_max = b.v_max ? at.load(b.v_max) : _mm512_setzero_ps();
  const bool tiny_m = any_tiny(m);
  const bool tiny_others = (tiny_lanes(p) | lanes_below(g, kTinyGradientBits) | tiny_lanes(v)) != 0;
  if (tiny_m || tiny_others) adam_update16<true>(b, k, at, p, g, m, v, v_max, tiny_others);
  else adam_update16<false>(b, k, at, p, g, m, v, v_max, false);
}

struct SgdLanes {
  __m512 weight_decay, momentum, one_minus_dampening, neg_lr;
};

// SGD's update of 16 elements, as sgd_update8 in update_avx2.cpp.
template <bool kCareful>
[[gnu::always_inline]] inline void sgd_update16(const SgdBlockF32& b, const SgdLanes& k, Access at, __m512 p,
                                                __m512 g, __m512 buf) {
  __m512 d = b.decay ? _mm512_add_ps(g, mul(k.weight_decay, p, kCareful)) : g;
  if (b.buf) {
    if (b.first_step) buf = d;
    else buf = _mm512_add_ps(mul(buf, k.momentum, kCareful), mul(k.one_minus_dampening, d, kCareful));
    at.store(b.buf, buf);
    d = b.nesterov ? _mm512_add_ps(d, mul(k.momentum, buf, kCareful)) : buf;
  }
  at.store(b.p, _mm512_add_ps(p, mul(k.neg_lr, d, kCareful)));
}

[[gnu::always_inline]] inline void sgd_update16(const SgdBlockF32& b, const SgdLanes& k, Access at) {
  const __m512 p = at.load(b.p), g = at.load(b.g);
  const __m512 buf = b.buf ? at.load(b.buf) : _mm512_setzero_ps();
  const bool tiny = (tiny_lanes(p) | lanes_below(g, kTinyGradientBits) | tiny_lanes(buf)) != 0;
  if (tiny) sgd_update16<true>(b, k, at, p, g, buf);
  else sgd_update16<false>(b, k, at, p, g, buf);
}

// Runs update(at) over n elements, 16 at a time, the last few masked.
template <class Update>
[[gnu::always_inline]] inline void for_each_16(int64_t n, Update&& update) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) update(Access{i, __mmask16(0xFFFF)});
  if (i < n) update(Access{i, lane_mask(n - i)});
}

// Adam's update of 8 float64 elements, as adam_update4 in update_avx2.cpp.
struct AdamLanesF64 {
  __m512d weight_decay, decay_factor, beta1, one_minus_beta1, beta2, one_minus_beta2, neg_step_size, inv_bc2_sqrt, eps;
};

[[gnu::always_inline]] inline void adam_update8(const AdamBlockF64& b, const AdamLanesF64& k, int64_t i, __mmask8 at) {
  __m512d p = _mm512_maskz_loadu_pd(at, b.p + i), g = _mm512_maskz_loadu_pd(at, b.g + i);
  __m512d m = _mm512_maskz_loadu_pd(at, b.m + i), v = _mm512_maskz_loadu_pd(at, b.v + i);
  if (b.coupled_decay) g = _mm512_add_pd(g, _mm512_mul_pd(k.weight_decay, p));
  if (b.decoupled) p = _mm512_mul_pd(p, k.decay_factor);
  m = _mm512_add_pd(_mm512_mul_pd(m, k.beta1), _mm512_mul_pd(k.one_minus_beta1, g));
  v = _mm512_add_pd(_mm512_mul_pd(v, k.beta2), _mm512_mul_pd(_mm512_mul_pd(k.one_minus_beta2, g), g));
  __m512d second = v;
  if (b.v_max) {
    second = _mm512_max_pd(v, _mm512_maskz_loadu_pd(at, b.v_max + i));
    _mm512_mask_storeu_pd(b.v_max + i, at, second);
  }
  const __m512d denom = _mm512_add_pd(_mm512_mul_pd(_mm512_sqrt_pd(second), k.inv_bc2_sqrt), k.eps);
  p = _mm512_add_pd(p, _mm512_div_pd(_mm512_mul_pd(k.neg_step_size, m), denom));
  _mm512_mask_storeu_pd(b.p + i, at, p);
  _mm512_mask_storeu_pd(b.m + i, at, m);
  _mm512_mask_storeu_pd(b.v + i, at, v);
}

}  // namespace

void adam_block_avx512(const AdamBlockF32& b) {
  const AdamLanes k{_mm512_set1_ps(b.weight_decay),  _mm512_set1_ps(b.decay_factor),
                    _mm512_set1_ps(b.beta1),         _mm512_set1_ps(b.one_minus_beta1),
                    _mm512_set1_ps(b.beta2),         _mm512_set1_ps(b.one_minus_beta2),
                    _mm512_set1_ps(b.neg_step_size), _mm512_set1_ps(b.inv_bias_correction2_sqrt),
                    _mm512_set1_ps(b.eps)};
  for_each_16(b.n, [&](Access at) __attribute__((always_inline)) { adam_update16(b, k, at); });
}

void sgd_block_f32_avx512(const SgdBlockF32& b) {
  const SgdLanes k{_mm512_set1_ps(b.weight_decay), _mm512_set1_ps(b.momentum), _mm512_set1_ps(b.one_minus_dampening),
                   _mm512_set1_ps(b.neg_lr)};
  for_each_16(b.n, [&](Access at) __attribute__((always_inline)) { sgd_update16(b, k, at); });
}

void adam_block_avx512(const AdamBlockF64& b) {
  const AdamLanesF64 k{_mm512_set1_pd(b.weight_decay),  _mm512_set1_pd(b.decay_factor),
                       _mm512_set1_pd(b.beta1),         _mm512_set1_pd(b.one_minus_beta1),
                       _mm512_set1_pd(b.beta2),         _mm512_set1_pd(b.one_minus_beta2),
                       _mm512_set1_pd(b.neg_step_size), _mm512_set1_pd(b.inv_bias_correction2_sqrt),
                       _mm512_set1_pd(b.eps)};
  int64_t i = 0;
  for (; i + 8 <= b.n; i += 8) adam_update8(b, k, i, __mmask8(0xFF));
  if (i < b.n) adam_update8(b, k, i, static_cast<__mmask8>((1u << (b.n - i)) - 1));
}

}  // namespace weft::optim::detail
