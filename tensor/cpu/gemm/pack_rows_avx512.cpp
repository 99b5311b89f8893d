// The AVX-512 packer of bf16 A blocks as plain rows (the AMX set's A: Note [bf16 K-pair panels]
// in packing.h) for an A read down its columns (ISA kernel unit: Note [ISA kernel units] in
// tensor/cpu/simd.h). The scalar reference is pack_a_bf16_rows in packing.cpp, which gives the
// same bytes.
//
// A read down its columns is gᵀ in a weight gradient, gᵀ·x: A(i, p) = g(p, i), so a row of the
// packed block is a column of g. The reference walks it value by value in 16 × 16 blocks (a
// seventh of a bf16-mixed GPT step at width 128). Here a block is 32 rows × 32 steps: for each
// pair of steps, the two 32-value runs of g are interleaved into 32-bit words (one two-source
// word permute per 16 rows, as pack_pairs_by_steps does), which makes a 16 × 16 matrix of words
// per 16 rows; transposed in registers, each row's 32 steps are then one 64-byte store.
#include "tensor/cpu/gemm/gemm_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {

bool pack_rows_avx512(const uint16_t* src, int64_t rs, int64_t cs, int64_t mc, int64_t kc, int64_t width, int mr,
                      uint16_t* dst) {
  const int64_t padded_steps = (kc + 31) / 32 * 32;  // the blocks below write whole 32-step runs
  if (rs != 1 || cs == 1 || width < padded_steps) return false;  // rows in memory are copied whole by the reference
  // Word pair d of a result is (A(d, 2q), A(d, 2q + 1)).
  const __m512i low = _mm512_load_si512(kBf16PairInterleave[0]), high = _mm512_load_si512(kBf16PairInterleave[1]);
  for (int64_t i0 = 0; i0 < mc; i0 += 32) {
    const int64_t rows = mc - i0 < 32 ? mc - i0 : 32;
    const __mmask32 lanes = lane_mask32(rows);
    for (int64_t p0 = 0; p0 < kc; p0 += 32) {
      __m512i upper[16], lower[16];  // rows i0..i0+15, i0+16..i0+31; word q of a row: steps 2q, 2q + 1
      for (int q = 0; q < 16; ++q) {
        const int64_t p = p0 + 2 * q;
        const __m512i even = p < kc ? _mm512_maskz_loadu_epi16(lanes, src + i0 + p * cs) : _mm512_setzero_si512();
        const __m512i odd = p + 1 < kc ? _mm512_maskz_loadu_epi16(lanes, src + i0 + (p + 1) * cs) : _mm512_setzero_si512();
        upper[q] = _mm512_permutex2var_epi16(even, low, odd);
        lower[q] = _mm512_permutex2var_epi16(even, high, odd);
      }
      transpose16x16_epi32(upper);
      transpose16x16_epi32(lower);
      for (int64_t r = 0; r < rows; ++r)
        _mm512_storeu_si512(dst + (i0 + r) * width + p0, r < 16 ? upper[r] : lower[r - 16]);
    }
  }
  for (int64_t i = 0; i < mc; ++i)
    for (int64_t p = padded_steps; p < width; ++p) dst[i * width + p] = 0;
  const int64_t panels = (mc + mr - 1) / mr;
  for (int64_t i = mc * width; i < panels * mr * width; ++i) dst[i] = 0;
  return true;
}

}  // namespace weft::detail
