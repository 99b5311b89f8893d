// AVX-512 row kernels of the attention's decode path (contract: attention_rows.h; ISA kernel
// unit: Note [ISA kernel units] in tensor/cpu/simd.h). Scores run along a key row (16 features per
// zmm, bf16 widened by a shift, one horizontal sum per key); the softmax and the value sums run
// 16 keys or 16 output features per zmm. Ragged ends use lane masks.
#include "tensor/cpu/attention/attention_rows.h"
#include "tensor/cpu/attention/exp_avx512.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

static inline __m512 load_bf16(const uint16_t* p, __mmask16 valid) {
  return bf16_to_float_x16(_mm256_maskz_loadu_epi16(valid, p));
}

void scores(const float* q, const uint16_t* k, int64_t ldk, int64_t rows, int64_t E, float scale, float* s) {
  for (int64_t j = 0; j < rows; ++j) {
    const uint16_t* key = k + j * ldk;
    __m512 sum = _mm512_setzero_ps();
    for (int64_t e = 0; e < E; e += 16) {
      const __mmask16 valid = lane_mask(E - e);
      sum = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(valid, q + e), load_bf16(key + e, valid), sum);
    }
    s[j] = _mm512_reduce_add_ps(sum) * scale;
  }
}

float exp_row(float* s, int64_t n, float* m) {
  const __m512 minus_inf = _mm512_set1_ps(-__builtin_inff());
  __m512 most = minus_inf;
  for (int64_t j = 0; j < n; j += 16) most = _mm512_max_ps(most, _mm512_mask_loadu_ps(minus_inf, lane_mask(n - j), s + j));
  const float top = _mm512_reduce_max_ps(most);
  const __m512 base = _mm512_set1_ps(top == -__builtin_inff() ? 0.0f : top);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 valid = lane_mask(n - j);
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(valid, s + j), base));
    _mm512_mask_storeu_ps(s + j, valid, e);
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(valid, e));
  }
  *m = top;
  return _mm512_reduce_add_ps(sum);
}

// Four zmm of output features at a time stay in registers down all the keys.
void accumulate(const float* p, const uint16_t* v, int64_t ldv, int64_t rows, int64_t Ev, float* o) {
  for (int64_t d0 = 0; d0 < Ev; d0 += 64) {
    const __mmask16 m0 = lane_mask(Ev - d0), m1 = lane_mask(Ev - d0 - 16), m2 = lane_mask(Ev - d0 - 32),
                    m3 = lane_mask(Ev - d0 - 48);
    __m512 o0 = _mm512_maskz_loadu_ps(m0, o + d0), o1 = _mm512_maskz_loadu_ps(m1, o + d0 + 16),
           o2 = _mm512_maskz_loadu_ps(m2, o + d0 + 32), o3 = _mm512_maskz_loadu_ps(m3, o + d0 + 48);
    for (int64_t j = 0; j < rows; ++j) {
      const uint16_t* row = v + j * ldv + d0;
      const __m512 w = _mm512_set1_ps(p[j]);
      o0 = _mm512_fmadd_ps(w, load_bf16(row, m0), o0);
      o1 = _mm512_fmadd_ps(w, load_bf16(row + 16, m1), o1);
      o2 = _mm512_fmadd_ps(w, load_bf16(row + 32, m2), o2);
      o3 = _mm512_fmadd_ps(w, load_bf16(row + 48, m3), o3);
    }
    _mm512_mask_storeu_ps(o + d0, m0, o0);
    _mm512_mask_storeu_ps(o + d0 + 16, m1, o1);
    _mm512_mask_storeu_ps(o + d0 + 32, m2, o2);
    _mm512_mask_storeu_ps(o + d0 + 48, m3, o3);
  }
}

}  // namespace

const AttentionRows kAttentionRowsAvx512 = {"avx512", scores, exp_row, accumulate};

}  // namespace weft::detail
