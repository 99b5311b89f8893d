// AVX2 tile kernels of the fused attention (contract: attention_tiles.h; ISA kernel unit: Note
// [ISA kernel units] in tensor/cpu/simd.h). The AVX-512 set's loops (attention_avx512.cpp) on
// eight queries per ymm; ragged column blocks and the causal diagonal use lane masks built by
// comparing lane numbers, loads and stores of ragged blocks vmaskmov.
//
// exp is the AVX-512 set's Cephes expf, with 2^n built in the exponent bits (n is within
// [−126, 127] once x is clamped to [−87, 88]).
//
// The decode path's row kernels (attention_rows.h) are here too, eight features or keys per ymm;
// a ragged end of a bfloat16 row goes through a zeroed buffer (AVX2 has no 16-bit masked load).
#include "tensor/cpu/attention/attention_rows.h"
#include "tensor/cpu/attention/attention_tiles.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

static inline __m256 exp_ps(__m256 x) {
  const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_set1_ps(88.0f), _mm256_max_ps(_mm256_set1_ps(-87.0f), x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  const __m256i exponent = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(underflow, _mm256_mul_ps(y, _mm256_castsi256_ps(exponent)));
}

// All-ones in the lanes below n (n clamped to [0, 8]).
static inline __m256i lanes_below(int64_t n) {
  const int32_t count = n <= 0 ? 0 : n >= 8 ? 8 : static_cast<int32_t>(n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Lanes of the column block starting at c0 that the causal mask hides in row j.
static inline __m256 hidden_lanes(int64_t diag, int64_t j, int64_t c0) {
  return _mm256_castsi256_ps(lanes_below(diag + j - c0));
}

static inline __m256 load(const float* p, __m256i valid) { return _mm256_maskload_ps(p, valid); }
static inline void store(float* p, __m256i valid, __m256 x) { _mm256_maskstore_ps(p, valid, x); }

void softmax_step(float* s, int64_t ld, int rows, int cols, int64_t diag, float* m, float* l, float* alpha) {
  const __m256 minus_inf = _mm256_set1_ps(-__builtin_inff());
  for (int64_t c0 = 0; c0 < cols; c0 += 8) {
    const __m256i valid = lanes_below(cols - c0);
    const __m256 m_old = _mm256_blendv_ps(minus_inf, load(m + c0, valid), _mm256_castsi256_ps(valid));
    __m256 most = m_old;
    for (int64_t j = 0; j < rows; ++j) {
      float* row = s + j * ld + c0;
      __m256 x = load(row, valid);
      const __m256 hidden = hidden_lanes(diag, j, c0);
      if (!_mm256_testz_ps(hidden, hidden)) {
        x = _mm256_blendv_ps(x, minus_inf, hidden);
        store(row, valid, x);
      }
      most = _mm256_max_ps(most, x);
    }
    const __m256 base = _mm256_andnot_ps(_mm256_cmp_ps(most, minus_inf, _CMP_EQ_OQ), most);
    __m256 sum = _mm256_setzero_ps();
    for (int64_t j = 0; j < rows; ++j) {
      float* row = s + j * ld + c0;
      const __m256 e = exp_ps(_mm256_sub_ps(load(row, valid), base));
      store(row, valid, e);
      sum = _mm256_add_ps(sum, e);
    }
    const __m256 a = exp_ps(_mm256_sub_ps(m_old, base));
    store(alpha + c0, valid, a);
    store(l + c0, valid, _mm256_fmadd_ps(a, load(l + c0, valid), sum));
    store(m + c0, valid, most);
  }
}

void rescale(float* o, int64_t ld, int rows, int cols, const float* alpha) {
  for (int64_t c0 = 0; c0 < cols; c0 += 8) {
    const __m256i valid = lanes_below(cols - c0);
    const __m256 a = load(alpha + c0, valid);
    for (int64_t d = 0; d < rows; ++d) {
      float* row = o + d * ld + c0;
      store(row, valid, _mm256_mul_ps(a, load(row, valid)));
    }
  }
}

void probs(float* s, int64_t ld, int rows, int cols, int64_t diag, const float* lse) {
  for (int64_t c0 = 0; c0 < cols; c0 += 8) {
    const __m256i valid = lanes_below(cols - c0);
    const __m256 base = load(lse + c0, valid);
    for (int64_t j = 0; j < rows; ++j) {
      float* row = s + j * ld + c0;
      const __m256 e = exp_ps(_mm256_sub_ps(load(row, valid), base));
      store(row, valid, _mm256_andnot_ps(hidden_lanes(diag, j, c0), e));
    }
  }
}

void dscores(const float* p, float* dp, int64_t ld, int rows, int cols, int64_t diag, const float* d) {
  for (int64_t c0 = 0; c0 < cols; c0 += 8) {
    const __m256i valid = lanes_below(cols - c0);
    const __m256 dv = load(d + c0, valid);
    for (int64_t j = 0; j < rows; ++j) {
      float* row = dp + j * ld + c0;
      const __m256 ds = _mm256_mul_ps(load(p + j * ld + c0, valid), _mm256_sub_ps(load(row, valid), dv));
      store(row, valid, _mm256_andnot_ps(hidden_lanes(diag, j, c0), ds));
    }
  }
}

// ---- decode rows (attention_rows.h) ----

// The bfloat16 values p[0, n) (n clamped to [0, 8]; the other lanes 0) widened to float32.
static inline __m256 load_bf16(const uint16_t* p, int64_t n) {
  __m128i bits;
  if (n >= 8) {
    bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  } else {
    alignas(16) uint16_t tail[8] = {};
    for (int64_t i = 0; i < n; ++i) tail[i] = p[i];
    bits = _mm_load_si128(reinterpret_cast<const __m128i*>(tail));
  }
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

// Up to 8 keys' or values' elements as float32 (n clamped to [0, 8]; the other lanes 0).
static inline __m256 load_x8(const uint16_t* p, int64_t n) { return load_bf16(p, n); }
static inline __m256 load_x8(const float* p, int64_t n) { return load(p, lanes_below(n)); }

static inline float sum_lanes(__m256 x) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

static inline float max_lanes(__m256 x) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}

template <class T>
void row_scores(const float* q, const T* k, int64_t ldk, int64_t rows, int64_t E, float scale, float* s) {
  for (int64_t j = 0; j < rows; ++j) {
    const T* key = k + j * ldk;
    __m256 sum = _mm256_setzero_ps();
    for (int64_t e = 0; e < E; e += 8) sum = _mm256_fmadd_ps(load(q + e, lanes_below(E - e)), load_x8(key + e, E - e), sum);
    s[j] = sum_lanes(sum) * scale;
  }
}

float row_exp(float* s, int64_t n, float* m) {
  const __m256 minus_inf = _mm256_set1_ps(-__builtin_inff());
  __m256 most = minus_inf;
  for (int64_t j = 0; j < n; j += 8) {
    const __m256i valid = lanes_below(n - j);
    most = _mm256_max_ps(most, _mm256_blendv_ps(minus_inf, load(s + j, valid), _mm256_castsi256_ps(valid)));
  }
  const float top = max_lanes(most);
  const __m256 base = _mm256_set1_ps(top == -__builtin_inff() ? 0.0f : top);
  __m256 sum = _mm256_setzero_ps();
  for (int64_t j = 0; j < n; j += 8) {
    const __m256i valid = lanes_below(n - j);
    const __m256 e = _mm256_and_ps(exp_ps(_mm256_sub_ps(load(s + j, valid), base)), _mm256_castsi256_ps(valid));
    store(s + j, valid, e);
    sum = _mm256_add_ps(sum, e);
  }
  *m = top;
  return sum_lanes(sum);
}

// Four ymm of output features at a time stay in registers down all the keys.
template <class T>
void row_accumulate(const float* p, const T* v, int64_t ldv, int64_t rows, int64_t Ev, float* o) {
  for (int64_t d0 = 0; d0 < Ev; d0 += 32) {
    const int64_t n0 = Ev - d0, n1 = n0 - 8, n2 = n0 - 16, n3 = n0 - 24;
    const __m256i m0 = lanes_below(n0), m1 = lanes_below(n1), m2 = lanes_below(n2), m3 = lanes_below(n3);
    __m256 o0 = load(o + d0, m0), o1 = load(o + d0 + 8, m1), o2 = load(o + d0 + 16, m2), o3 = load(o + d0 + 24, m3);
    for (int64_t j = 0; j < rows; ++j) {
      const T* row = v + j * ldv + d0;
      const __m256 w = _mm256_set1_ps(p[j]);
      o0 = _mm256_fmadd_ps(w, load_x8(row, n0), o0);
      o1 = _mm256_fmadd_ps(w, load_x8(row + 8, n1), o1);
      o2 = _mm256_fmadd_ps(w, load_x8(row + 16, n2), o2);
      o3 = _mm256_fmadd_ps(w, load_x8(row + 24, n3), o3);
    }
    store(o + d0, m0, o0);
    store(o + d0 + 8, m1, o1);
    store(o + d0 + 16, m2, o2);
    store(o + d0 + 24, m3, o3);
  }
}

}  // namespace

const AttentionTiles kAttentionTilesAvx2 = {"avx2", softmax_step, rescale, probs, dscores};
const AttentionRows kAttentionRowsAvx2 = {"avx2", row_scores<float>, row_scores<uint16_t>, row_exp, row_accumulate<float>,
                                          row_accumulate<uint16_t>};

}  // namespace weft::detail
