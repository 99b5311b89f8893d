// int8 GEMM panel kernel for AVX2: vpmaddubsw with the sign trick.
//
// vpmaddubsw multiplies unsigned by signed bytes and adds neighbouring products into int16 with
// saturation. Feeding it |a| and b·sign(a) gives the products a·b exactly, and since both
// operands lie in [-127, 127] a pair sums to at most 2·127·127 = 32258 < 32767: no saturation
// (cpu-kernels.md §4). vpmaddwd with ones then adds the pairs into int32 lanes, one per column.
//
// Register tile: 4 rows × 16 columns (two ymm of 8 int32 per row); one k-group (4 values of k)
// per step: B's 16 columns × 4 k are two 32-byte loads (Note [Packed int8 operands]).
#include "precision/quant/int8_gemm_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::precision::quant::kernels {
namespace {

constexpr int64_t kMr = 4;
constexpr int64_t kNr = 16;

inline __m256i broadcast_group(const uint8_t* p) { return _mm256_set1_epi32(_mm_cvtsi128_si32(_mm_loadu_si32(p))); }

// acc += Σ over the 4 k of the group: a·b, per column lane.
inline __m256i dot_group(__m256i acc, __m256i a_abs, __m256i a, __m256i b, __m256i ones) {
  const __m256i pairs = _mm256_maddubs_epi16(a_abs, _mm256_sign_epi8(b, a));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
}

inline void store_row(int32_t* c, __m256i lo, __m256i hi, int64_t cols) {
  if (cols == kNr) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c), lo);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + 8), hi);
    return;
  }
  alignas(32) int32_t tmp[kNr];
  _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), lo);
  _mm256_store_si256(reinterpret_cast<__m256i*>(tmp + 8), hi);
  for (int64_t j = 0; j < cols; ++j) c[j] = tmp[j];
}

// A: (4, 4·groups) packed rows · B panel: (16, 4·groups)ᵀ -> C: (4, cols)
//
// The accumulators are two flat arrays and the loops over rows are unrolled by pragma (as in
// int8_gemm_avx512vnni.cpp): held as acc[4][2], GCC 12 copied them through spare registers and
// the stack every step.
void tile(const Int8PanelArgs& p, int64_t row0) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i c0[kMr], c1[kMr];
#pragma GCC unroll 4
  for (int64_t r = 0; r < kMr; ++r) c0[r] = c1[r] = _mm256_setzero_si256();
  const uint8_t* a = p.a + row0 * p.a_stride;
  const int8_t* b = p.b;
  for (int64_t g = 0; g < p.groups; ++g, b += 4 * kNr) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32));
#pragma GCC unroll 4
    for (int64_t r = 0; r < kMr; ++r) {
      const __m256i ar = broadcast_group(a + r * p.a_stride + 4 * g);
      const __m256i ar_abs = _mm256_abs_epi8(ar);
      c0[r] = dot_group(c0[r], ar_abs, ar, b0, ones);
      c1[r] = dot_group(c1[r], ar_abs, ar, b1, ones);
    }
  }
#pragma GCC unroll 4
  for (int64_t r = 0; r < kMr; ++r)
    if (row0 + r < p.c_rows) store_row(p.c + (row0 + r) * p.c_stride, c0[r], c1[r], p.cols);
}

}  // namespace

void int8_gemm_panel_avx2(const Int8PanelArgs& args) {
  for (int64_t row0 = 0; row0 < args.rows; row0 += kMr) tile(args, row0);
}

}  // namespace weft::precision::quant::kernels
