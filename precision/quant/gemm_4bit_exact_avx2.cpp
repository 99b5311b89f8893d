// The exact 4-bit product for a few activation rows, AVX2 (Note [Exact 4-bit product] in
// gemm_4bit_kernels.h): one ymm per 8 values, decoded with two vpermps and a blend.
//
// Eight bytes of a weight row at a time are widened to 8 dwords: the low nibble is the odd
// value's code, the high nibble (shifted down) the even value's. vpermps reads the low 3 bits of
// an index, so the code's entry comes from the table's first or last 8 entries, chosen by the
// code's bit 3 moved into the sign bit (blendv). Within a 64-value chunk, bytes 8j .. 8j + 7 hold
// the evens at positions 8j .. 8j + 7 of the permuted activations and the odds at 32 + 8j ...;
// the four steps of a chunk alternate between two pairs of accumulators so that one activation
// row's FMAs do not wait on each other.
#include "precision/quant/gemm_4bit_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::precision::quant::kernels {
namespace {

// The 8 table entries the 8 codes in the low nibbles of `index` pick (the bits above ignored).
inline __m256 lookup(__m256i index, __m256 table_lo, __m256 table_hi) {
  const __m256 lo = _mm256_permutevar8x32_ps(table_lo, index), hi = _mm256_permutevar8x32_ps(table_hi, index);
  return _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(index, 28)));
}

inline float sum8(__m256 v) {
  const __m128 four = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_add_ss(two, _mm_movehdup_ps(two)));
}

// Weight row n against activation rows i0 .. i0 + kRows - 1: y (kRows) = x (kRows, k) · w (k). The
// row starts `offset` values into block `first_block`.
template <int kRows>
void row_tile(const Gemm4bitExactArgs& p, int64_t n, int64_t i0, int64_t first_block, int64_t offset) {
  const __m256 table_lo = _mm256_loadu_ps(p.table), table_hi = _mm256_loadu_ps(p.table + 8);
  const uint8_t* w = p.packed + n * p.k / 2;
  const float* absmax = p.absmax + first_block;
  int64_t left = p.blocksize - offset;  // values of the current block from chunk 0 on
  __m256 scale = _mm256_set1_ps(*absmax);
  __m256 lo = _mm256_mul_ps(table_lo, scale), hi = _mm256_mul_ps(table_hi, scale);
  __m256 acc[kRows][4];
  for (int r = 0; r < kRows; ++r)
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm256_setzero_ps();
  for (int64_t c = 0; c < p.k; c += 64, left -= 64) {
    if (left == 0) {
      scale = _mm256_set1_ps(*++absmax);
      lo = _mm256_mul_ps(table_lo, scale);
      hi = _mm256_mul_ps(table_hi, scale);
      left = p.blocksize;
    }
    const uint8_t* chunk = w + c / 2;
    if (c % 128 == 0) _mm_prefetch(reinterpret_cast<const char*>(chunk + kWeightPrefetchBytes), _MM_HINT_T0);
    for (int step = 0; step < 4; ++step) {
      const __m256i codes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(chunk + 8 * step)));
      const __m256 even = lookup(_mm256_srli_epi32(codes, 4), lo, hi), odd = lookup(codes, lo, hi);
      const int pair = 2 * (step % 2);
      for (int r = 0; r < kRows; ++r) {
        const float* x = p.x + (i0 + r) * p.k + c + 8 * step;
        acc[r][pair] = _mm256_fmadd_ps(even, _mm256_loadu_ps(x), acc[r][pair]);
        acc[r][pair + 1] = _mm256_fmadd_ps(odd, _mm256_loadu_ps(x + 32), acc[r][pair + 1]);
      }
    }
  }
  for (int r = 0; r < kRows; ++r) {
    const __m256 sum = _mm256_add_ps(_mm256_add_ps(acc[r][0], acc[r][1]), _mm256_add_ps(acc[r][2], acc[r][3]));
    p.y[(i0 + r) * p.y_stride + n] = sum8(sum);
  }
}

}  // namespace

void gemm_4bit_exact_avx2(const Gemm4bitExactArgs& p) {
  // Each row's first block and offset into it, stepped from row to row (no division per row).
  const int64_t blocks_per_row = p.k / p.blocksize, rest = p.k % p.blocksize;
  int64_t block = p.n0 * p.k / p.blocksize, offset = p.n0 * p.k % p.blocksize;
  for (int64_t n = p.n0; n < p.n0 + p.rows; ++n) {
    int64_t i = 0;
    for (; i + 2 <= p.m; i += 2) row_tile<2>(p, n, i, block, offset);
    if (i < p.m) row_tile<1>(p, n, i, block, offset);
    block += blocks_per_row;
    offset += rest;
    if (offset >= p.blocksize) {
      offset -= p.blocksize;
      ++block;
    }
  }
}

}  // namespace weft::precision::quant::kernels
