// The exact 4-bit product for a few activation rows, AVX-512 (Note [Exact 4-bit product] in
// gemm_4bit_kernels.h): one zmm per 16 values, decoded with vpermps.
//
// A 32-byte chunk of a weight row is two 16-byte halves, each widened to 16 dwords: the dword's
// low nibble is the odd value's code and its high nibble, shifted down, the even value's. vpermps
// reads only the low 4 bits of each index, so the low nibble needs no mask. The four vectors
// (evens of bytes 0-15 and 16-31, odds of the same) are positions 0-15, 16-31, 32-47 and 48-63 of
// the permuted activations, and each has its own accumulator per activation row, so that one
// activation row's FMAs do not wait on each other.
#include "precision/quant/gemm_4bit_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::precision::quant::kernels {
namespace {

// Weight row n against activation rows i0 .. i0 + kRows - 1: y (kRows) = x (kRows, k) · w (k). The
// row starts `offset` values into block `first_block`.
template <int kRows>
void row_tile(const Gemm4bitExactArgs& p, int64_t n, int64_t i0, int64_t first_block, int64_t offset) {
  const __m512 table = _mm512_loadu_ps(p.table);
  const uint8_t* w = p.packed + n * p.k / 2;
  const float* absmax = p.absmax + first_block;
  int64_t left = p.blocksize - offset;  // values of the current block from chunk 0 on
  __m512 scaled = _mm512_mul_ps(table, _mm512_set1_ps(*absmax));
  __m512 acc[kRows][4];
  for (int r = 0; r < kRows; ++r)
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_setzero_ps();
  for (int64_t c = 0; c < p.k; c += 64, left -= 64) {
    if (left == 0) {
      scaled = _mm512_mul_ps(table, _mm512_set1_ps(*++absmax));
      left = p.blocksize;
    }
    const uint8_t* chunk = w + c / 2;
    if (c % 128 == 0) _mm_prefetch(reinterpret_cast<const char*>(chunk + kWeightPrefetchBytes), _MM_HINT_T0);
    const __m512i first = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(chunk)));
    const __m512i second = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(chunk + 16)));
    const __m512 v[4] = {_mm512_permutexvar_ps(_mm512_srli_epi32(first, 4), scaled),
                         _mm512_permutexvar_ps(_mm512_srli_epi32(second, 4), scaled),
                         _mm512_permutexvar_ps(first, scaled), _mm512_permutexvar_ps(second, scaled)};
    for (int r = 0; r < kRows; ++r) {
      const float* x = p.x + (i0 + r) * p.k + c;
      for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_fmadd_ps(v[j], _mm512_loadu_ps(x + 16 * j), acc[r][j]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]), _mm512_add_ps(acc[r][2], acc[r][3]));
    p.y[(i0 + r) * p.y_stride + n] = _mm512_reduce_add_ps(sum);
  }
}

}  // namespace

void gemm_4bit_exact_avx512(const Gemm4bitExactArgs& p) {
  // Each row's first block and offset into it, stepped from row to row: a 64-bit division per
  // row cost a tenth of a row's decoding.
  const int64_t blocks_per_row = p.k / p.blocksize, rest = p.k % p.blocksize;
  int64_t block = p.n0 * p.k / p.blocksize, offset = p.n0 * p.k % p.blocksize;
  for (int64_t n = p.n0; n < p.n0 + p.rows; ++n) {
    int64_t i = 0;
    for (; i + 4 <= p.m; i += 4) row_tile<4>(p, n, i, block, offset);
    switch (p.m - i) {
      case 3: row_tile<3>(p, n, i, block, offset); break;
      case 2: row_tile<2>(p, n, i, block, offset); break;
      case 1: row_tile<1>(p, n, i, block, offset); break;
      default: break;
    }
    block += blocks_per_row;
    offset += rest;
    if (offset >= p.blocksize) {
      offset -= p.blocksize;
      ++block;
    }
  }
}

}  // namespace weft::precision::quant::kernels
