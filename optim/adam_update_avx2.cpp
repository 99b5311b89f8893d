// Adam's and AdamW's update on AVX2 (ISA kernel unit: Note [ISA kernel units] in
// tensor/cpu/simd.h), eight float32 lanes at a time. Each line is one operation of adam_update's
// Eigen expressions in optim/adam.cpp, in the same order and without fused multiply-adds, so the
// result is bit for bit the scalar path's (tests/optim/test_optim.cpp checks it). The update is
// bound by the vector divider and square root; this path runs them on 8 lanes where a build
// without -march=native gets 4.
//   per element: g' = g (+ wd·p);  p = p·decay;  m = m·β1 + (1−β1)·g';  v = v·β2 + ((1−β2)·g')·g'
//                v̂ = max(v_max, v) under amsgrad;  p = p + (−lr/bc1 · m) / (√v̂ · 1/√bc2 + eps)
#include "optim/adam_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::optim::detail {
namespace {

struct Lanes {
  __m256 weight_decay, decay_factor, beta1, one_minus_beta1, beta2, one_minus_beta2, neg_step_size, inv_bc2_sqrt, eps;
};

// The update of 8 elements at i (masked to the first `count` when count < 8).
void update8(const AdamBlockF32& b, const Lanes& k, int64_t i, __m256i mask, bool full) {
  auto load = [&](const float* x) { return full ? _mm256_loadu_ps(x + i) : _mm256_maskload_ps(x + i, mask); };
  auto store = [&](float* x, __m256 v) {
    if (full) _mm256_storeu_ps(x + i, v);
    else _mm256_maskstore_ps(x + i, mask, v);
  };
  __m256 p = load(b.p), g = load(b.g), m = load(b.m), v = load(b.v);
  if (b.coupled_decay) g = _mm256_add_ps(g, _mm256_mul_ps(k.weight_decay, p));
  if (b.decoupled) p = _mm256_mul_ps(p, k.decay_factor);
  m = _mm256_add_ps(_mm256_mul_ps(m, k.beta1), _mm256_mul_ps(k.one_minus_beta1, g));
  v = _mm256_add_ps(_mm256_mul_ps(v, k.beta2), _mm256_mul_ps(_mm256_mul_ps(k.one_minus_beta2, g), g));
  __m256 second = v;
  if (b.v_max) {
    // Eigen's max(a, b) is maxps(b, a): NaN in v gives v_max, as std::max(v_max, v) does.
    second = _mm256_max_ps(v, load(b.v_max));
    store(b.v_max, second);
  }
  const __m256 denom = _mm256_add_ps(_mm256_mul_ps(_mm256_sqrt_ps(second), k.inv_bc2_sqrt), k.eps);
  p = _mm256_add_ps(p, _mm256_div_ps(_mm256_mul_ps(k.neg_step_size, m), denom));
  store(b.p, p);
  store(b.m, m);
  store(b.v, v);
}

}  // namespace

void adam_block_f32_avx2(const AdamBlockF32& b) {
  const Lanes k{_mm256_set1_ps(b.weight_decay),    _mm256_set1_ps(b.decay_factor),
                _mm256_set1_ps(b.beta1),           _mm256_set1_ps(b.one_minus_beta1),
                _mm256_set1_ps(b.beta2),           _mm256_set1_ps(b.one_minus_beta2),
                _mm256_set1_ps(b.neg_step_size),   _mm256_set1_ps(b.inv_bias_correction2_sqrt),
                _mm256_set1_ps(b.eps)};
  int64_t i = 0;
  for (; i + 8 <= b.n; i += 8) update8(b, k, i, _mm256_setzero_si256(), true);
  if (i < b.n) {
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(b.n - i)),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    update8(b, k, i, mask, false);
  }
}

}  // namespace weft::optim::detail
