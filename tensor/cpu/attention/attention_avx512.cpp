// AVX-512 tile kernels of the fused attention (contract: attention_tiles.h; ISA kernel unit: Note
// [ISA kernel units] in tensor/cpu/simd.h). Sixteen queries per zmm; a tile is walked one block
// of sixteen columns at a time, down its rows, so the per-query statistics stay in registers.
// Ragged column blocks and the causal diagonal use lane masks.
//
// exp is Cephes' expf (exp_x16 in tensor/cpu/simd.h).
//
// The decode path's row kernels (attention_rows.h) are here too: scores along a key row (16
// features per zmm, bf16 widened by a shift, one horizontal sum per key), the softmax and the
// value sums 16 keys or 16 output features per zmm, ragged ends by lane masks.
#include "tensor/cpu/attention/attention_rows.h"
#include "tensor/cpu/attention/attention_tiles.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

// Lanes of the column block starting at c0 that the causal mask hides in row j: none while j is at
// most c0 − diag, which spares most rows (and every row of a tile off the diagonal) the scalar
// instructions of a lane mask.
static inline __mmask16 hidden_lanes(int64_t diag, int64_t j, int64_t c0) {
  return j <= c0 - diag ? __mmask16(0) : lane_mask(diag + j - c0);
}

void softmax_step(float* s, int64_t ld, int rows, int cols, int64_t diag, float* m, float* l, float* alpha) {
  const __m512 minus_inf = _mm512_set1_ps(-__builtin_inff());
  for (int64_t c0 = 0; c0 < cols; c0 += 16) {
    const __mmask16 valid = lane_mask(cols - c0);
    const __m512 m_old = _mm512_mask_loadu_ps(minus_inf, valid, m + c0);
    // Four running maxima: with one, each row waited on the previous row's max.
    __m512 most4[4] = {m_old, minus_inf, minus_inf, minus_inf};
    for (int64_t j0 = 0; j0 < rows; j0 += 4)
#pragma GCC unroll 4
      for (int u = 0; u < 4; ++u) {
        const int64_t j = j0 + u;
        if (j >= rows) break;
        float* row = s + j * ld + c0;
        __m512 x = _mm512_maskz_loadu_ps(valid, row);
        const __mmask16 hidden = hidden_lanes(diag, j, c0);
        if (hidden) {
          x = _mm512_mask_mov_ps(x, hidden, minus_inf);
          _mm512_mask_storeu_ps(row, valid, x);
        }
        most4[u] = _mm512_max_ps(most4[u], x);
      }
    const __m512 most = _mm512_max_ps(_mm512_max_ps(most4[0], most4[1]), _mm512_max_ps(most4[2], most4[3]));
    const __m512 base = _mm512_mask_mov_ps(most, _mm512_cmp_ps_mask(most, minus_inf, _CMP_EQ_OQ), _mm512_setzero_ps());
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < rows; ++j) {
      float* row = s + j * ld + c0;
      const __m512 e = exp_x16(_mm512_sub_ps(_mm512_maskz_loadu_ps(valid, row), base));
      _mm512_mask_storeu_ps(row, valid, e);
      sum = _mm512_add_ps(sum, e);
    }
    const __m512 a = exp_x16(_mm512_sub_ps(m_old, base));
    _mm512_mask_storeu_ps(alpha + c0, valid, a);
    _mm512_mask_storeu_ps(l + c0, valid, _mm512_fmadd_ps(a, _mm512_maskz_loadu_ps(valid, l + c0), sum));
    _mm512_mask_storeu_ps(m + c0, valid, most);
  }
}

// Columns whose every factor is 1 are left as they are: once the running maxima settle, most
// column blocks of the output accumulator keep their scale from tile to tile.
void rescale(float* o, int64_t ld, int rows, int cols, const float* alpha) {
  for (int64_t c0 = 0; c0 < cols; c0 += 16) {
    const __mmask16 valid = lane_mask(cols - c0);
    const __m512 a = _mm512_maskz_loadu_ps(valid, alpha + c0);
    if ((_mm512_cmp_ps_mask(a, _mm512_set1_ps(1.0f), _CMP_NEQ_UQ) & valid) == 0) continue;
    for (int64_t d = 0; d < rows; ++d) {
      float* row = o + d * ld + c0;
      _mm512_mask_storeu_ps(row, valid, _mm512_mul_ps(a, _mm512_maskz_loadu_ps(valid, row)));
    }
  }
}

void probs(float* s, int64_t ld, int rows, int cols, int64_t diag, const float* lse) {
  for (int64_t c0 = 0; c0 < cols; c0 += 16) {
    const __mmask16 valid = lane_mask(cols - c0);
    const __m512 base = _mm512_maskz_loadu_ps(valid, lse + c0);
    for (int64_t j = 0; j < rows; ++j) {
      float* row = s + j * ld + c0;
      const __m512 e = exp_x16(_mm512_sub_ps(_mm512_maskz_loadu_ps(valid, row), base));
      _mm512_mask_storeu_ps(row, valid, _mm512_mask_mov_ps(e, hidden_lanes(diag, j, c0), _mm512_setzero_ps()));
    }
  }
}

void dscores(const float* p, float* dp, int64_t ld, int rows, int cols, int64_t diag, const float* d) {
  for (int64_t c0 = 0; c0 < cols; c0 += 16) {
    const __mmask16 valid = lane_mask(cols - c0);
    const __m512 dv = _mm512_maskz_loadu_ps(valid, d + c0);
    for (int64_t j = 0; j < rows; ++j) {
      float* row = dp + j * ld + c0;
      const __m512 x = _mm512_sub_ps(_mm512_maskz_loadu_ps(valid, row), dv);
      const __m512 ds = _mm512_mul_ps(_mm512_maskz_loadu_ps(valid, p + j * ld + c0), x);
      _mm512_mask_storeu_ps(row, valid, _mm512_mask_mov_ps(ds, hidden_lanes(diag, j, c0), _mm512_setzero_ps()));
    }
  }
}

// Up to 16 keys' or values' elements as float32, the lanes outside `valid` 0.
static inline __m512 load_x16(const float* p, __mmask16 valid) { return _mm512_maskz_loadu_ps(valid, p); }
static inline __m512 load_x16(const uint16_t* p, __mmask16 valid) {
  return bf16_to_float_x16(_mm256_maskz_loadu_epi16(valid, p));
}

template <class T>
void row_scores(const float* q, const T* k, int64_t ldk, int64_t rows, int64_t E, float scale, float* s) {
  for (int64_t j = 0; j < rows; ++j) {
    const T* key = k + j * ldk;
    __m512 sum = _mm512_setzero_ps();
    for (int64_t e = 0; e < E; e += 16) {
      const __mmask16 valid = lane_mask(E - e);
      sum = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(valid, q + e), load_x16(key + e, valid), sum);
    }
    s[j] = _mm512_reduce_add_ps(sum) * scale;
  }
}

float row_exp(float* s, int64_t n, float* m) {
  const __m512 minus_inf = _mm512_set1_ps(-__builtin_inff());
  __m512 most = minus_inf;
  for (int64_t j = 0; j < n; j += 16)
    most = _mm512_max_ps(most, _mm512_mask_loadu_ps(minus_inf, lane_mask(n - j), s + j));
  const float top = _mm512_reduce_max_ps(most);
  const __m512 base = _mm512_set1_ps(top == -__builtin_inff() ? 0.0f : top);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 valid = lane_mask(n - j);
    const __m512 e = exp_x16(_mm512_sub_ps(_mm512_maskz_loadu_ps(valid, s + j), base));
    _mm512_mask_storeu_ps(s + j, valid, e);
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(valid, e));
  }
  *m = top;
  return _mm512_reduce_add_ps(sum);
}

// Four zmm of output features at a time stay in registers down all the keys.
template <class T>
void row_accumulate(const float* p, const T* v, int64_t ldv, int64_t rows, int64_t Ev, float* o) {
  for (int64_t d0 = 0; d0 < Ev; d0 += 64) {
    const __mmask16 m0 = lane_mask(Ev - d0), m1 = lane_mask(Ev - d0 - 16), m2 = lane_mask(Ev - d0 - 32),
                    m3 = lane_mask(Ev - d0 - 48);
    __m512 o0 = _mm512_maskz_loadu_ps(m0, o + d0), o1 = _mm512_maskz_loadu_ps(m1, o + d0 + 16),
           o2 = _mm512_maskz_loadu_ps(m2, o + d0 + 32), o3 = _mm512_maskz_loadu_ps(m3, o + d0 + 48);
    for (int64_t j = 0; j < rows; ++j) {
      const T* row = v + j * ldv + d0;
      const __m512 w = _mm512_set1_ps(p[j]);
      o0 = _mm512_fmadd_ps(w, load_x16(row, m0), o0);
      o1 = _mm512_fmadd_ps(w, load_x16(row + 16, m1), o1);
      o2 = _mm512_fmadd_ps(w, load_x16(row + 32, m2), o2);
      o3 = _mm512_fmadd_ps(w, load_x16(row + 48, m3), o3);
    }
    _mm512_mask_storeu_ps(o + d0, m0, o0);
    _mm512_mask_storeu_ps(o + d0 + 16, m1, o1);
    _mm512_mask_storeu_ps(o + d0 + 32, m2, o2);
    _mm512_mask_storeu_ps(o + d0 + 48, m3, o3);
  }
}

}  // namespace

void attention_pairs_avx512(const float* src, int64_t ld, int rows, int cols, int64_t pairs, uint16_t* dst) {
  const int64_t panels = (cols + 31) / 32;
  const __m512i low_words = _mm512_set1_epi32(0xFFFF);
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t q = 0; q < pairs; ++q) {
      uint16_t* out = dst + (p * pairs + q) * 64;
      for (int64_t half = 0; half < 2; ++half) {
        const int64_t c0 = 32 * p + 16 * half;
        const __mmask16 valid = lane_mask(cols - c0);
        const int64_t r0 = 2 * q, r1 = 2 * q + 1;
        const __m512 even = r0 < rows ? _mm512_maskz_loadu_ps(valid, src + r0 * ld + c0) : _mm512_setzero_ps();
        const __m512 odd = r1 < rows ? _mm512_maskz_loadu_ps(valid, src + r1 * ld + c0) : _mm512_setzero_ps();
        // Word pair j: the even row's bf16 low, the odd row's high.
        const __m512i words = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(bf16_in_high_words_x16(even), 16), low_words),
                                              _mm512_andnot_si512(low_words, bf16_in_high_words_x16(odd)));
        _mm512_storeu_si512(out + 32 * half, words);
      }
    }
}

const AttentionTiles kAttentionTilesAvx512 = {"avx512", softmax_step, rescale, probs, dscores};
const AttentionRows kAttentionRowsAvx512 = {"avx512", row_scores<float>, row_scores<uint16_t>, row_exp,
                                            row_accumulate<float>, row_accumulate<uint16_t>};

}  // namespace weft::detail
