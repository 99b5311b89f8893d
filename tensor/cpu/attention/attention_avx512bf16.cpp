// The bfloat16 path's fused tile steps (AttentionTilesBf16 in attention_tiles.h; ISA kernel unit:
// Note [ISA kernel units] in tensor/cpu/simd.h), for CPUs with AMX, which all have AVX-512 BF16.
// They walk a tile as the AVX-512 float32 set does (attention_avx512.cpp: sixteen queries per zmm,
// one block of sixteen columns at a time down the rows, Cephes' exp), and round what they produce
// to bf16 by the conversion instructions (float_to_bf16_x*_vcvt: the bits of float_to_bfloat16).
// A K-pair dword holds an even row's value in its low word and the next row's in its high word:
// both rows converted at once, then one word permute interleaves them.
//
// Rows at or above the causal diagonal's reach hide nothing, so only the rows below it build a
// lane mask (most tiles have no diagonal at all; each mask is a few scalar instructions a row).
// A block of columns past `cols` (no valid lanes) still writes its zeros into the bf16 copies.
#include "tensor/cpu/attention/attention_tiles.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

// The lanes of the column block at c0 that the causal mask hides in row j: none while j ≤ c0 − diag
// (attention_tiles.h: query i hides key j when i < diag + j). attention_avx512.cpp has the same.
static inline __mmask16 hidden_lanes(int64_t diag, int64_t j, int64_t c0) {
  return j <= c0 - diag ? __mmask16(0) : lane_mask(diag + j - c0);
}

// Two rows' 16 values as 16 K-pair dwords.
static inline __m512i pair_words(__m512 even, __m512 odd) {
  alignas(64) static const uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                       8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  return _mm512_permutexvar_epi16(_mm512_load_si512(kInterleave), float_to_bf16_x32_vcvt(even, odd));
}

static inline void store_row_bf16(uint16_t* dst, __m512 x) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), float_to_bf16_x16_vcvt(x));
}

void softmax_step_pairs(const float* s, int64_t ld, int rows, int cols, int64_t diag, float scale, float* m, float* l,
                        float* alpha, int64_t pairs, uint16_t* dst) {
  const __m512 minus_inf = _mm512_set1_ps(-__builtin_inff()), k = _mm512_set1_ps(scale);
  for (int64_t c0 = 0; c0 < (cols + 31) / 32 * 32; c0 += 16) {
    const __mmask16 valid = lane_mask(cols - c0);
    uint16_t* out = dst + c0 / 32 * pairs * 64 + c0 % 32 * 2;
    const __m512 m_old = _mm512_mask_loadu_ps(minus_inf, valid, m + c0);
    // Four running maxima: with one, each row waited on the previous row's max.
    __m512 most4[4] = {m_old, minus_inf, minus_inf, minus_inf};
    for (int64_t j0 = 0; j0 < rows; j0 += 4)
#pragma GCC unroll 4
      for (int u = 0; u < 4; ++u) {
        const int64_t j = j0 + u;
        if (j >= rows) break;
        const __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(valid, s + j * ld + c0), k);
        most4[u] = _mm512_max_ps(most4[u], _mm512_mask_mov_ps(x, hidden_lanes(diag, j, c0), minus_inf));
      }
    const __m512 most = _mm512_max_ps(_mm512_max_ps(most4[0], most4[1]), _mm512_max_ps(most4[2], most4[3]));
    const __m512 base = _mm512_mask_mov_ps(most, _mm512_cmp_ps_mask(most, minus_inf, _CMP_EQ_OQ), _mm512_setzero_ps());
    __m512 sum = _mm512_setzero_ps();
    for (int64_t q = 0; q < pairs; ++q) {
      __m512 e[2];
      for (int64_t t = 0; t < 2; ++t) {
        const int64_t j = 2 * q + t;
        if (j >= rows) {
          e[t] = _mm512_setzero_ps();
          continue;
        }
        const __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(valid, s + j * ld + c0), k);
        e[t] = _mm512_maskz_mov_ps(valid & ~hidden_lanes(diag, j, c0), exp_x16(_mm512_sub_ps(x, base)));
        sum = _mm512_add_ps(sum, e[t]);
      }
      _mm512_storeu_si512(out + q * 64, pair_words(e[0], e[1]));
    }
    const __m512 a = exp_x16(_mm512_sub_ps(m_old, base));
    _mm512_mask_storeu_ps(alpha + c0, valid, a);
    _mm512_mask_storeu_ps(l + c0, valid, _mm512_fmadd_ps(a, _mm512_maskz_loadu_ps(valid, l + c0), sum));
    _mm512_mask_storeu_ps(m + c0, valid, most);
  }
}

void probs_rows(float* s, int64_t ld, int rows, int cols, int64_t diag, float scale, const float* lse, int64_t pairs,
                uint16_t* rows_dst) {
  const __m512 k = _mm512_set1_ps(scale);
  const int64_t width = rows_dst != nullptr ? ld : cols;
  for (int64_t c0 = 0; c0 < width; c0 += 16) {
    const __mmask16 valid = lane_mask(cols - c0);
    const __m512 base = _mm512_maskz_loadu_ps(valid, lse + c0);
    // Queries before the diagonal's start see no key of the tile: their block is zeros, its
    // scores never read (the caller may have left them uncomputed).
    const bool all_hidden = c0 + 16 <= diag;
    for (int64_t j = 0; j < rows; ++j) {
      float* row = s + j * ld + c0;
      __m512 e = _mm512_setzero_ps();
      if (!all_hidden) {
        const __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(valid, row), k);
        e = _mm512_maskz_mov_ps(valid & ~hidden_lanes(diag, j, c0), exp_x16(_mm512_sub_ps(x, base)));
      }
      _mm512_mask_storeu_ps(row, valid, e);
      if (rows_dst != nullptr) store_row_bf16(rows_dst + j * ld + c0, e);
    }
    if (rows_dst != nullptr)
      for (int64_t j = rows; j < 2 * pairs; ++j) store_row_bf16(rows_dst + j * ld + c0, _mm512_setzero_ps());
  }
}

void dscores_bf16(const float* p, const float* dp, int64_t ld, int rows, int cols, const float* d, int64_t pairs,
                  uint16_t* rows_dst, uint16_t* pairs_dst) {
  const int64_t panel_columns = (cols + 31) / 32 * 32;
  for (int64_t c0 = 0; c0 < ld; c0 += 16) {
    const __mmask16 valid = lane_mask(cols - c0);
    const __m512 dv = _mm512_maskz_loadu_ps(valid, d + c0);
    uint16_t* out = pairs_dst + c0 / 32 * pairs * 64 + c0 % 32 * 2;
    for (int64_t q = 0; q < pairs; ++q) {
      __m512 ds[2];
      for (int64_t t = 0; t < 2; ++t) {
        const int64_t j = 2 * q + t;
        ds[t] = j < rows ? _mm512_mul_ps(_mm512_maskz_loadu_ps(valid, p + j * ld + c0),
                                         _mm512_sub_ps(_mm512_maskz_loadu_ps(valid, dp + j * ld + c0), dv))
                         : _mm512_setzero_ps();
        store_row_bf16(rows_dst + j * ld + c0, ds[t]);
      }
      if (c0 < panel_columns) _mm512_storeu_si512(out + q * 64, pair_words(ds[0], ds[1]));
    }
  }
}

}  // namespace

const AttentionTilesBf16 kAttentionTilesBf16Avx512Bf16 = {"avx512bf16", softmax_step_pairs, probs_rows, dscores_bf16};

}  // namespace weft::detail
