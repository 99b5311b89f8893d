// Packing B for the int8 GEMM on AVX-512: 16 × 16 transposes of 4-byte words (ISA kernel unit:
// Note [ISA kernel units] in tensor/cpu/simd.h).
//
// A panel of 32 columns stores, for each k-group g (4 values of k), the 32 columns' words side by
// side (Note [Packed int8 operands]): column c's word g goes to word g·32 + c. Sixteen columns ×
// sixteen groups are one zmm load per column (64 bytes of its row of b) and, after a transpose,
// one zmm store per group (16 columns' words). The portable packer (pack_b_panel in int8_gemm.cpp)
// is the reference: it handles what this one leaves to plain loops here too (a panel's last
// columns when fewer than 16, groups past the last whole block of 16, K's last partial group).
#include "precision/quant/int8_gemm_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::precision::quant::kernels {
namespace {

constexpr int64_t kNr = 32;
constexpr int64_t kBlock = 16;

// r[c] holds 16 words of row c; afterwards r[w] holds word w of the 16 rows.
//   1. unpack 32-bit pairs of rows within 128-bit lanes;  2. unpack 64-bit pairs: lane L of u[4i+j]
//   is column 4L+j of rows 4i..4i+3;  3-4. gather the four lanes of each column across u[j],
//   u[4+j], u[8+j], u[12+j].
void transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 4) {
    t[i + 0] = _mm512_unpacklo_epi32(r[i + 0], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i + 0], r[i + 1]);
    t[i + 2] = _mm512_unpacklo_epi32(r[i + 2], r[i + 3]);
    t[i + 3] = _mm512_unpackhi_epi32(r[i + 2], r[i + 3]);
  }
  for (int i = 0; i < 16; i += 4) {
    u[i + 0] = _mm512_unpacklo_epi64(t[i + 0], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i + 0], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i a0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44);  // lanes 0, 1 of each
    const __m512i a1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xEE);  // lanes 2, 3
    const __m512i b0 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44);
    const __m512i b1 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xEE);
    r[0 + j] = _mm512_shuffle_i32x4(a0, b0, 0x88);   // lane 0 of the four
    r[4 + j] = _mm512_shuffle_i32x4(a0, b0, 0xDD);   // lane 1
    r[8 + j] = _mm512_shuffle_i32x4(a1, b1, 0x88);   // lane 2
    r[12 + j] = _mm512_shuffle_i32x4(a1, b1, 0xDD);  // lane 3
  }
}

void copy_word(const int8_t* src, int8_t* dst) { __builtin_memcpy(dst, src, 4); }

}  // namespace

void int8_pack_b_panel_avx512(const int8_t* src, int64_t k, int64_t cols, int8_t* dst) {
  const int64_t whole_groups = k / 4;
  const int64_t blocked_groups = whole_groups / kBlock * kBlock;
  for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
    const int64_t block_cols = cols - c0 < kBlock ? cols - c0 : kBlock;
    int64_t g0 = 0;
    if (block_cols == kBlock) {
      for (; g0 < blocked_groups; g0 += kBlock) {
        __m512i r[16];
        for (int c = 0; c < 16; ++c) r[c] = _mm512_loadu_si512(src + (c0 + c) * k + 4 * g0);
        transpose16(r);
        for (int w = 0; w < 16; ++w) _mm512_storeu_si512(dst + ((g0 + w) * kNr + c0) * 4, r[w]);
      }
    }
    for (int64_t g = g0; g < whole_groups; ++g)
      for (int64_t c = c0; c < c0 + block_cols; ++c) copy_word(src + c * k + 4 * g, dst + (g * kNr + c) * 4);
  }
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t l = whole_groups * 4; l < k; ++l) dst[(whole_groups * kNr + c) * 4 + l % 4] = src[c * k + l];
}

}  // namespace weft::precision::quant::kernels
