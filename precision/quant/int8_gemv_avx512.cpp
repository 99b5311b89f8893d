// int8 product at a few rows of A with B read in place, for AVX-512BW: the decode step of an
// LLM.int8() layer, which reads the whole weight once per token and so is bound by memory
// bandwidth, not by arithmetic.
//
//   a: (m, k) int8, m small (4 rows at a time) · b: (n, k) int8, both row-major -> c: (m, n) int32
//
// vpmaddubsw multiplies unsigned bytes by signed ones, so each product a·b is formed as
// |a| · (b negated where a < 0): |a| <= 127 and |b| <= 127 keep every pair sum within int16
// (2 · 127² = 32258), vpmaddwd by ones widens the pairs to int32 lanes, and the lanes are summed
// at the end. The true result fits in int32 (K <= kInt8GemmMaxK), so the sum, wrapping or not on
// the way, is exact: the scalar reference's integers. Four rows of B at a time share each load of
// A's bytes. B's -128 (outside the operands' range) is flagged, not computed with.
#include "precision/quant/int8_gemm_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::precision::quant::kernels {
namespace {

constexpr int64_t kRows = 4;  // rows of B per pass

// M rows of A, a compile-time count so that the 4 × M accumulators stay in registers.
template <int64_t M>
bool gemv(const int8_t* a, const int8_t* b, int64_t n, int64_t k, int32_t* c, int64_t ldc) {
  const __m512i zero = _mm512_setzero_si512(), ones = _mm512_set1_epi16(1), minus_128 = _mm512_set1_epi8(-128);
  __mmask64 bad = 0;
  for (int64_t j = 0; j < n; j += kRows) {
    const int64_t rows = n - j < kRows ? n - j : kRows;
    __m512i acc[kRows][M];
#pragma GCC unroll 4
    for (int64_t r = 0; r < kRows; ++r)
#pragma GCC unroll 4
      for (int64_t i = 0; i < M; ++i) acc[r][i] = zero;
    for (int64_t kk = 0; kk < k; kk += 64) {
      const __mmask64 mask = k - kk >= 64 ? ~__mmask64{0} : (__mmask64{1} << (k - kk)) - 1;
      __m512i bv[kRows];
#pragma GCC unroll 4
      for (int64_t r = 0; r < kRows; ++r) {
        bv[r] = r < rows ? _mm512_maskz_loadu_epi8(mask, b + (j + r) * k + kk) : zero;
        bad |= _mm512_cmpeq_epi8_mask(bv[r], minus_128);
      }
#pragma GCC unroll 4
      for (int64_t i = 0; i < M; ++i) {
        const __m512i av = _mm512_maskz_loadu_epi8(mask, a + i * k + kk);
        const __m512i magnitude = _mm512_abs_epi8(av);
        const __mmask64 negative = _mm512_movepi8_mask(av);
#pragma GCC unroll 4
        for (int64_t r = 0; r < kRows; ++r) {
          const __m512i signed_b = _mm512_mask_sub_epi8(bv[r], negative, zero, bv[r]);
          acc[r][i] = _mm512_add_epi32(acc[r][i], _mm512_madd_epi16(_mm512_maddubs_epi16(magnitude, signed_b), ones));
        }
      }
    }
    for (int64_t i = 0; i < M; ++i)
      for (int64_t r = 0; r < rows; ++r) c[i * ldc + j + r] = _mm512_reduce_add_epi32(acc[r][i]);
  }
  return bad != 0;
}

}  // namespace

bool int8_gemv_avx512(const int8_t* a, int64_t m, const int8_t* b, int64_t n, int64_t k, int32_t* c, int64_t ldc) {
  bool bad = false;
  for (int64_t i = 0; i < m; i += 4) {
    const int8_t* rows_a = a + i * k;
    int32_t* rows_c = c + i * ldc;
    switch (m - i) {
      case 1: bad |= gemv<1>(rows_a, b, n, k, rows_c, ldc); break;
      case 2: bad |= gemv<2>(rows_a, b, n, k, rows_c, ldc); break;
      case 3: bad |= gemv<3>(rows_a, b, n, k, rows_c, ldc); break;
      default: bad |= gemv<4>(rows_a, b, n, k, rows_c, ldc); break;
    }
  }
  return bad;
}

}  // namespace weft::precision::quant::kernels
