// The optimizers' updates on AVX2 (ISA kernel unit: Note [ISA kernel units] in
// tensor/cpu/simd.h), eight float32 lanes at a time: Adam's and AdamW's, and SGD's. Each line is
// one operation of the scalar path's loops (adam_update in optim/adam.cpp, sgd_update
// in optim/sgd.cpp), in the same order and without fused multiply-adds, so the result is bit for
// bit the scalar path's (tests/optim/test_optim.cpp checks it). Adam's update is bound by the
// vector divider and square root; this path runs them on 8 lanes where a build without
// -march=native gets 4.
//   Adam:  g' = g (+ wd·p);  p = p·decay;  m = m·β1 + (1−β1)·g';  v = v·β2 + ((1−β2)·g')·g'
//          v̂ = max(v_max, v) under amsgrad;  p = p + (−lr/bc1 · m) / (√v̂ · 1/√bc2 + eps)
//   SGD:   d = g (+ wd·p);  buf = d on its first step, else buf·μ + (1−dampening)·d
//          d = d + μ·buf (nesterov) or buf;  p = p + (−lr)·d
//
// Note [Denormal moments]: an element whose gradient stays zero (a pixel that is blank in a whole
// batch, a dead ReLU unit) has its first moment (SGD: its momentum buffer) multiplied by β1 (μ)
// every step, down into float32's denormal range, where k·2^-149 · 0.9 rounds back to itself for
// k ≤ 4: it stays there for good. A multiply, divide or square root that reads or produces a
// denormal costs a microcode assist of ~130 cycles on Intel cores (measured on an AMX Xeon: 33 ns
// per 8-lane instruction against 0.3; adds, maxima and float64 <-> float32 conversions run at full
// speed either way): the example MLP's AdamW step took 5× its time, and its bf16-mixed run 2.4 s
// instead of 1.9; an SGD step with momentum over 670k parameters, half of them without gradient,
// 35× (11 ms against 0.31). Flushing denormals to zero (MXCSR FTZ/DAZ) would change the results.
// Instead a vector with a tiny nonzero input lane takes the careful path: the operations such an
// input reaches are carried out in float64 and rounded once to float32. A product of two floats is
// exact in float64, and a float64 quotient or square root rounded to float32 equals the correctly
// rounded float32 one (53 ≥ 2·24 + 2 bits), so the bits are the float32 path's, and which vectors
// take the careful path decides only the speed, never the result.
#include "optim/update_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::optim::detail {
namespace {

// Below these magnitudes an input could make a product, quotient or square root of an update
// denormal with ordinary hyperparameters (factors such as β, 1−β, lr and weight decay ≥ 2^-24):
// p, m, v and SGD's buffer below 2^-100, and the gradient below 2^-50, since Adam squares it:
// (1−β2)·g·g stays above 2^-124 for |g| ≥ 2^-50. Small gradients (v ≈ 10^-19) are common and
// ordinary; a gradient or moment this tiny is mostly a decayed one. NaN and infinity compare above.
constexpr int kTinyBits = 0x0d800000;            // 2^-100 as float32 bits
constexpr int kGradientShift = 0x19000000;       // 2^-50 / 2^-100: 50 binary orders of magnitude

// Magnitude − 1 as unsigned lanes: a nonzero x is tiny when this is below kTinyBits − 1, and
// zero wraps to the largest value, so one unsigned minimum finds a tiny lane among several inputs.
__m256i magnitude_minus_one(__m256 x) {
  const __m256i magnitude = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fffffff));
  return _mm256_sub_epi32(magnitude, _mm256_set1_epi32(1));
}
// The same for a gradient, shifted down 50 orders so that it is tiny below 2^-50: anything
// smaller (but nonzero) becomes 0, zero stays the largest value.
__m256i gradient_magnitude_minus_one(__m256 g) {
  const __m256i shift = _mm256_set1_epi32(kGradientShift);
  return _mm256_sub_epi32(_mm256_max_epu32(magnitude_minus_one(g), shift), shift);
}
bool any_tiny(__m256i magnitude_minus_one) {
  const __m256i limit = _mm256_set1_epi32(kTinyBits - 1);
  const __m256i not_tiny = _mm256_cmpeq_epi32(_mm256_max_epu32(magnitude_minus_one, limit), magnitude_minus_one);
  return !_mm256_testc_si256(not_tiny, _mm256_set1_epi32(-1));
}
bool any_tiny(__m256 x) { return any_tiny(magnitude_minus_one(x)); }

// The float32 operations carried out in float64 and rounded once (Note [Denormal moments]).
__m256d low(__m256 a) { return _mm256_cvtps_pd(_mm256_castps256_ps128(a)); }
__m256d high(__m256 a) { return _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)); }
__m256 narrow(__m256d lo, __m256d hi) {
  return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(lo)), _mm256_cvtpd_ps(hi), 1);
}
__m256 mul(__m256 a, __m256 b, bool through_float64) {
  if (!through_float64) return _mm256_mul_ps(a, b);
  return narrow(_mm256_mul_pd(low(a), low(b)), _mm256_mul_pd(high(a), high(b)));
}
__m256 div(__m256 a, __m256 b, bool through_float64) {
  if (!through_float64) return _mm256_div_ps(a, b);
  return narrow(_mm256_div_pd(low(a), low(b)), _mm256_div_pd(high(a), high(b)));
}
__m256 sqrt(__m256 a, bool through_float64) {
  if (!through_float64) return _mm256_sqrt_ps(a);
  return narrow(_mm256_sqrt_pd(low(a)), _mm256_sqrt_pd(high(a)));
}

// Loads or stores the 8 elements at i (masked to the ragged end's lanes when not full).
struct Access {
  int64_t i;
  __m256i mask;
  bool full;
  __m256 load(const float* x) const { return full ? _mm256_loadu_ps(x + i) : _mm256_maskload_ps(x + i, mask); }
  void store(float* x, __m256 v) const {
    if (full) _mm256_storeu_ps(x + i, v);
    else _mm256_maskstore_ps(x + i, mask, v);
  }
};

struct AdamLanes {
  __m256 weight_decay, decay_factor, beta1, one_minus_beta1, beta2, one_minus_beta2, neg_step_size, inv_bc2_sqrt, eps;
};

// Adam's update of 8 elements from their loaded values. On the careful path the first moment's
// operations always go through float64 (a decaying moment is the common reason to be here, and a
// branch per operation would be mispredicted wherever stuck and live lanes mix), the others' only
// when p, g or v has a tiny lane (`tiny_others`: rare); on the fast path every operation is one
// float32 instruction.
template <bool kCareful>
[[gnu::always_inline]] inline void adam_update8(const AdamBlockF32& b, const AdamLanes& k, Access at, __m256 p,
                                                __m256 g, __m256 m, __m256 v, __m256 v_max, bool tiny_others) {
  const bool others = kCareful && tiny_others;
  if (b.coupled_decay) g = _mm256_add_ps(g, mul(k.weight_decay, p, others));
  if (b.decoupled) p = mul(p, k.decay_factor, others);
  m = _mm256_add_ps(mul(m, k.beta1, kCareful), mul(k.one_minus_beta1, g, others));
  v = _mm256_add_ps(mul(v, k.beta2, others), mul(mul(k.one_minus_beta2, g, others), g, others));
  __m256 second = v;
  if (b.v_max) {
    // maxps(v, v_max): NaN in v gives v_max, as the scalar path's std::max(v_max, v) does.
    second = _mm256_max_ps(v, v_max);
    at.store(b.v_max, second);
  }
  const __m256 denom = _mm256_add_ps(_mm256_mul_ps(sqrt(second, others), k.inv_bc2_sqrt), k.eps);
  const __m256 numerator = mul(k.neg_step_size, m, kCareful);
  // A moment stuck at 2^-149 gives a numerator of zero, which divides at full speed.
  p = _mm256_add_ps(p, div(numerator, denom, kCareful && any_tiny(numerator)));
  at.store(b.p, p);
  at.store(b.m, m);
  at.store(b.v, v);
}

// Adam's update of the 8 elements `at` names, careful where an input lane is tiny. (v_max ≥ v, so a
// tiny v_max comes with a tiny v, or with v = 0, whose square root still takes an assist: rare.)
[[gnu::always_inline]] inline void adam_update8(const AdamBlockF32& b, const AdamLanes& k, Access at) {
  const __m256 p = at.load(b.p), g = at.load(b.g), m = at.load(b.m), v = at.load(b.v);
  const __m256 v_max = b.v_max ? at.load(b.v_max) : _mm256_setzero_ps();
  const bool tiny_m = any_tiny(m);
  const bool tiny_others = any_tiny(_mm256_min_epu32(
      _mm256_min_epu32(magnitude_minus_one(p), gradient_magnitude_minus_one(g)), magnitude_minus_one(v)));
  if (tiny_m || tiny_others) adam_update8<true>(b, k, at, p, g, m, v, v_max, tiny_others);
  else adam_update8<false>(b, k, at, p, g, m, v, v_max, false);
}

struct SgdLanes {
  __m256 weight_decay, momentum, one_minus_dampening, neg_lr;
};

// SGD's update of 8 elements. Careful: every multiply through float64 (an update has no divide or
// square root, so this costs little).
template <bool kCareful>
[[gnu::always_inline]] inline void sgd_update8(const SgdBlockF32& b, const SgdLanes& k, Access at, __m256 p,
                                               __m256 g, __m256 buf) {
  __m256 d = b.decay ? _mm256_add_ps(g, mul(k.weight_decay, p, kCareful)) : g;
  if (b.buf) {
    if (b.first_step) buf = d;
    else buf = _mm256_add_ps(mul(buf, k.momentum, kCareful), mul(k.one_minus_dampening, d, kCareful));
    at.store(b.buf, buf);
    d = b.nesterov ? _mm256_add_ps(d, mul(k.momentum, buf, kCareful)) : buf;
  }
  at.store(b.p, _mm256_add_ps(p, mul(k.neg_lr, d, kCareful)));
}

[[gnu::always_inline]] inline void sgd_update8(const SgdBlockF32& b, const SgdLanes& k, Access at) {
  const __m256 p = at.load(b.p), g = at.load(b.g);
  const __m256 buf = b.buf ? at.load(b.buf) : _mm256_setzero_ps();
  const __m256i smallest = _mm256_min_epu32(
      _mm256_min_epu32(magnitude_minus_one(p), gradient_magnitude_minus_one(g)), magnitude_minus_one(buf));
  if (any_tiny(smallest)) sgd_update8<true>(b, k, at, p, g, buf);
  else sgd_update8<false>(b, k, at, p, g, buf);
}

// Runs update(at) over n elements, 8 at a time, the last few masked.
template <class Update>
[[gnu::always_inline]] inline void for_each_8(int64_t n, Update&& update) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) update(Access{i, _mm256_setzero_si256(), true});
  if (i < n) {
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - i)),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    update(Access{i, mask, false});
  }
}

// Adam's update of 4 float64 elements: each line one operation of adam_update, in its order.
struct AccessF64 {
  int64_t i;
  __m256i mask;
  bool full;
  __m256d load(const double* x) const { return full ? _mm256_loadu_pd(x + i) : _mm256_maskload_pd(x + i, mask); }
  void store(double* x, __m256d v) const {
    if (full) _mm256_storeu_pd(x + i, v);
    else _mm256_maskstore_pd(x + i, mask, v);
  }
};

struct AdamLanesF64 {
  __m256d weight_decay, decay_factor, beta1, one_minus_beta1, beta2, one_minus_beta2, neg_step_size, inv_bc2_sqrt, eps;
};

[[gnu::always_inline]] inline void adam_update4(const AdamBlockF64& b, const AdamLanesF64& k, AccessF64 at) {
  __m256d p = at.load(b.p), g = at.load(b.g), m = at.load(b.m), v = at.load(b.v);
  if (b.coupled_decay) g = _mm256_add_pd(g, _mm256_mul_pd(k.weight_decay, p));
  if (b.decoupled) p = _mm256_mul_pd(p, k.decay_factor);
  m = _mm256_add_pd(_mm256_mul_pd(m, k.beta1), _mm256_mul_pd(k.one_minus_beta1, g));
  v = _mm256_add_pd(_mm256_mul_pd(v, k.beta2), _mm256_mul_pd(_mm256_mul_pd(k.one_minus_beta2, g), g));
  __m256d second = v;
  if (b.v_max) {
    second = _mm256_max_pd(v, at.load(b.v_max));  // as the float32 kernel: NaN in v gives v_max
    at.store(b.v_max, second);
  }
  const __m256d denom = _mm256_add_pd(_mm256_mul_pd(_mm256_sqrt_pd(second), k.inv_bc2_sqrt), k.eps);
  p = _mm256_add_pd(p, _mm256_div_pd(_mm256_mul_pd(k.neg_step_size, m), denom));
  at.store(b.p, p);
  at.store(b.m, m);
  at.store(b.v, v);
}

}  // namespace

void adam_block_avx2(const AdamBlockF32& b) {
  const AdamLanes k{_mm256_set1_ps(b.weight_decay),  _mm256_set1_ps(b.decay_factor),
                    _mm256_set1_ps(b.beta1),         _mm256_set1_ps(b.one_minus_beta1),
                    _mm256_set1_ps(b.beta2),         _mm256_set1_ps(b.one_minus_beta2),
                    _mm256_set1_ps(b.neg_step_size), _mm256_set1_ps(b.inv_bias_correction2_sqrt),
                    _mm256_set1_ps(b.eps)};
  for_each_8(b.n, [&](Access at) __attribute__((always_inline)) { adam_update8(b, k, at); });
}

void sgd_block_f32_avx2(const SgdBlockF32& b) {
  const SgdLanes k{_mm256_set1_ps(b.weight_decay), _mm256_set1_ps(b.momentum), _mm256_set1_ps(b.one_minus_dampening),
                   _mm256_set1_ps(b.neg_lr)};
  for_each_8(b.n, [&](Access at) __attribute__((always_inline)) { sgd_update8(b, k, at); });
}

void adam_block_avx2(const AdamBlockF64& b) {
  const AdamLanesF64 k{_mm256_set1_pd(b.weight_decay),  _mm256_set1_pd(b.decay_factor),
                       _mm256_set1_pd(b.beta1),         _mm256_set1_pd(b.one_minus_beta1),
                       _mm256_set1_pd(b.beta2),         _mm256_set1_pd(b.one_minus_beta2),
                       _mm256_set1_pd(b.neg_step_size), _mm256_set1_pd(b.inv_bias_correction2_sqrt),
                       _mm256_set1_pd(b.eps)};
  int64_t i = 0;
  for (; i + 4 <= b.n; i += 4) adam_update4(b, k, AccessF64{i, _mm256_setzero_si256(), true});
  if (i < b.n) {
    const __m256i mask = _mm256_cmpgt_epi64(_mm256_set1_epi64x(b.n - i), _mm256_setr_epi64x(0, 1, 2, 3));
    adam_update4(b, k, AccessF64{i, mask, false});
  }
}

}  // namespace weft::optim::detail
