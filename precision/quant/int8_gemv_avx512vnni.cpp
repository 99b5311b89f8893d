// int8 product at a few rows of A with B read in place, for AVX-512 VNNI: the decode step of an
// LLM.int8() layer, which reads the whole weight once per token, so the loop must keep up with
// memory: a few instructions per 64 bytes of B.
//
//   a: (M, k) int8, M <= 4 · b: (n, k) int8, both row-major -> c: (M, n) int32
//
// vpdpbusd adds four products of unsigned bytes by signed ones into each int32 lane, without
// saturating, so each product a·b is formed as |a| · (b negated where a < 0) and summed in one
// instruction where AVX-512BW takes three (int8_gemv_avx512.cpp, the same loop). The true result
// fits in int32 (K <= kInt8GemmMaxK), so the lanes' sum, wrapping or not on the way, is exact.
// Four rows of B at a time share each load of A's bytes; B's -128 (outside the operands' range,
// and not negatable) is caught by a running byte minimum, not computed with.
#include "precision/quant/int8_gemm_kernels.h"
#include "tensor/cpu/gemv_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::precision::quant::kernels {
namespace {

using weft::detail::kGemvAheadBytes;

constexpr int64_t kRows = 4;  // rows of B per pass

// R rows of B against M rows of A (compile-time counts, so the R × M sums stay in registers);
// `lowest` takes the byte minimum of what it reads of B.
template <int R, int M>
void block(const int8_t* a, const int8_t* b, int64_t k, int32_t* c, int64_t ldc, __m512i& lowest) {
  const __m512i zero = _mm512_setzero_si512();
  __m512i acc[R][M];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < M; ++i) acc[r][i] = zero;
  for (int64_t kk = 0; kk < k; kk += 64) {
    const __mmask64 mask = k - kk >= 64 ? ~__mmask64{0} : (__mmask64{1} << (k - kk)) - 1;
    __m512i magnitude[M];
    __mmask64 negative[M];
    for (int i = 0; i < M; ++i) {
      const __m512i av = _mm512_maskz_loadu_epi8(mask, a + i * k + kk);
      magnitude[i] = _mm512_abs_epi8(av);
      negative[i] = _mm512_movepi8_mask(av);
    }
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(b + r * k + kk + kGemvAheadBytes), _MM_HINT_T0);
      const __m512i bv = _mm512_maskz_loadu_epi8(mask, b + r * k + kk);
      lowest = _mm512_min_epi8(lowest, bv);
      for (int i = 0; i < M; ++i) {
        const __m512i signed_b = _mm512_mask_sub_epi8(bv, negative[i], zero, bv);
        acc[r][i] = _mm512_dpbusd_epi32(acc[r][i], magnitude[i], signed_b);
      }
    }
  }
  for (int i = 0; i < M; ++i)
    for (int r = 0; r < R; ++r) c[i * ldc + r] = _mm512_reduce_add_epi32(acc[r][i]);
}

// M rows of A against all n rows of B.
template <int M>
bool rows_of_b(const int8_t* a, const int8_t* b, int64_t n, int64_t k, int32_t* c, int64_t ldc) {
  __m512i lowest = _mm512_setzero_si512();
  int64_t j = 0;
  for (; j + kRows <= n; j += kRows) block<kRows, M>(a, b + j * k, k, c + j, ldc, lowest);
  for (; j < n; ++j) block<1, M>(a, b + j * k, k, c + j, ldc, lowest);
  return _mm512_cmpeq_epi8_mask(lowest, _mm512_set1_epi8(-128)) != 0;
}

}  // namespace

const Int8Gemv kInt8GemvAvx512Vnni = {{rows_of_b<1>, rows_of_b<2>, rows_of_b<3>, rows_of_b<4>}};

}  // namespace weft::precision::quant::kernels
