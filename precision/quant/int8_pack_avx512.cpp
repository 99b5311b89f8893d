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
        transpose16x16_epi32(r);
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
