// int8 GEMM panel kernel for AVX-512 VNNI: vpdpbusd with the +128 compensation.
//
// vpdpbusd adds four products of unsigned bytes of its first operand and signed bytes of its
// second into each int32 lane, without intermediate saturation. A is packed as a + 128 (so the
// products are (a + 128)·b) and the panel's compensation 128·Σk b is subtracted at the end
// (Note [Packed int8 operands]). The lanes wrap on overflow; the true result fits in int32, so
// the wrapped sum minus the wrapped compensation is exact.
//
// Register tile: 8 rows × 32 columns (two zmm of 16 int32 per row).
#include "precision/quant/int8_gemm_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::precision::quant::kernels {
namespace {

constexpr int64_t kMr = 8;
constexpr int64_t kNr = 32;

inline __m512i broadcast_group(const uint8_t* p) { return _mm512_set1_epi32(_mm_cvtsi128_si32(_mm_loadu_si32(p))); }

// A + 128: (8, 4·groups) packed rows · B panel: (32, 4·groups)ᵀ - compensation -> C: (8, cols)
//
// The accumulators are two flat arrays and the row loop is unrolled by pragma: held as acc[8][2],
// GCC 12 rotated them through spare registers and the stack every step (30 moves per 16
// vpdpbusd, on the ports vpdpbusd needs), and the kernel ran at 65 % of vpdpbusd's rate.
void tile(const Int8PanelArgs& p, int64_t row0) {
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
      c0[r] = _mm512_dpbusd_epi32(c0[r], ar, b0);
      c1[r] = _mm512_dpbusd_epi32(c1[r], ar, b1);
    }
  }
  const __m512i comp0 = _mm512_loadu_si512(p.compensation);
  const __m512i comp1 = _mm512_loadu_si512(p.compensation + 16);
#pragma GCC unroll 8
  for (int64_t r = 0; r < kMr; ++r)
    if (row0 + r < p.c_rows)
      store_epi32_row(p.c + (row0 + r) * p.c_stride, _mm512_sub_epi32(c0[r], comp0), _mm512_sub_epi32(c1[r], comp1),
                      p.cols);
}

}  // namespace

void int8_gemm_panel_avx512vnni(const Int8PanelArgs& args) {
  for (int64_t row0 = 0; row0 < args.rows; row0 += kMr) tile(args, row0);
}

}  // namespace weft::precision::quant::kernels
