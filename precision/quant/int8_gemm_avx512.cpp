// int8 GEMM panel kernel for AVX-512 (F/BW, no VNNI): vpmaddubsw with the sign trick.
//
// As the AVX2 kernel (int8_gemm_avx2.cpp), on 512-bit vectors. AVX-512 has no vpsignb, so
// b·sign(a) is a masked negation: the rows' sign bits become a mask once per k-group and b is
// subtracted from zero under it (a zero a needs no care: |a| = 0 cancels the product).
//
// Register tile: 8 rows × 32 columns (two zmm of 16 int32 per row).
#include "precision/quant/int8_gemm_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::precision::quant::kernels {
namespace {

constexpr int64_t kMr = 8;
constexpr int64_t kNr = 32;

inline __m512i broadcast_group(const uint8_t* p) { return _mm512_set1_epi32(_mm_cvtsi128_si32(_mm_loadu_si32(p))); }

inline __m512i dot_group(__m512i acc, __m512i a_abs, __mmask64 a_negative, __m512i b, __m512i ones) {
  const __m512i signed_b = _mm512_mask_sub_epi8(b, a_negative, _mm512_setzero_si512(), b);
  const __m512i pairs = _mm512_maddubs_epi16(a_abs, signed_b);
  return _mm512_add_epi32(acc, _mm512_madd_epi16(pairs, ones));
}

// A: (8, 4·groups) packed rows · B panel: (32, 4·groups)ᵀ -> C: (8, cols)
//
// Flat accumulator arrays and rows unrolled by pragma, as in int8_gemm_avx512vnni.cpp.
void tile(const Int8PanelArgs& p, int64_t row0) {
  const __m512i ones = _mm512_set1_epi16(1);
  __m512i c0[kMr], c1[kMr];
#pragma GCC unroll 8
  for (int64_t r = 0; r < kMr; ++r) c0[r] = c1[r] = _mm512_setzero_si512();
  const uint8_t* a = p.a + row0 * p.a_stride;
  const int8_t* b = p.b;
  for (int64_t g = 0; g < p.groups; ++g, b += 4 * kNr) {
    const __m512i b0 = _mm512_loadu_si512(b);
    const __m512i b1 = _mm512_loadu_si512(b + 64);
#pragma GCC unroll 8
    for (int64_t r = 0; r < kMr; ++r) {
      const __m512i ar = broadcast_group(a + r * p.a_stride + 4 * g);
      const __m512i ar_abs = _mm512_abs_epi8(ar);
      const __mmask64 negative = _mm512_movepi8_mask(ar);
      c0[r] = dot_group(c0[r], ar_abs, negative, b0, ones);
      c1[r] = dot_group(c1[r], ar_abs, negative, b1, ones);
    }
  }
#pragma GCC unroll 8
  for (int64_t r = 0; r < kMr; ++r)
    if (row0 + r < p.c_rows) store_epi32_row(p.c + (row0 + r) * p.c_stride, c0[r], c1[r], p.cols);
}

}  // namespace

void int8_gemm_panel_avx512(const Int8PanelArgs& args) {
  for (int64_t row0 = 0; row0 < args.rows; row0 += kMr) tile(args, row0);
}

}  // namespace weft::precision::quant::kernels
