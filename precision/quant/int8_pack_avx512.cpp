// Packing the int8 GEMM's operands on AVX-512: B by 16 × 16 transposes of 4-byte words, the scan
// of B's rows for -128 and their sums, and A's rows copied, shifted and scanned in one pass (ISA
// kernel unit: Note [ISA kernel units] in tensor/cpu/simd.h).
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

// 64 bytes of a row at a time: one compare for -128 (masked-off bytes load as zero), and the
// sums through vpmaddubsw (1·b + 1·b into int16) and vpmaddwd (into int32), exact for any K
// within kInt8GemmMaxK. Done as scalar loops in pack_panels, the reference, this was 93 % of
// packing a 512 × 784 B.
bool int8_scan_b_rows_avx512(const int8_t* src, int64_t k, int64_t rows, int32_t* compensation) {
  const __m512i minus_128 = _mm512_set1_epi8(-128), ones8 = _mm512_set1_epi8(1), ones16 = _mm512_set1_epi16(1);
  __mmask64 found = 0;
  for (int64_t j = 0; j < rows; ++j) {
    const int8_t* row = src + j * k;
    __m512i sum = _mm512_setzero_si512();
    for (int64_t l = 0; l < k; l += 64) {
      const __m512i v = _mm512_maskz_loadu_epi8(lane_mask64(k - l), row + l);
      found |= _mm512_cmpeq_epi8_mask(v, minus_128);
      if (compensation) sum = _mm512_add_epi32(sum, _mm512_madd_epi16(_mm512_maddubs_epi16(ones8, v), ones16));
    }
    // 128·Σ wrapped to 32 bits, as the VNNI kernel's lanes wrap.
    if (compensation)
      compensation[j] = static_cast<int32_t>(static_cast<uint32_t>(_mm512_reduce_add_epi32(sum)) * 128u);
  }
  return found != 0;
}

// 64 bytes at a time: the masked load reads zeros past k, so the same XOR that shifts the values
// to unsigned writes the padding (a shifted zero).
bool int8_pack_a_row_avx512(const int8_t* src, int64_t k, int64_t kp, bool to_unsigned, uint8_t* dst) {
  const __m512i minus_128 = _mm512_set1_epi8(-128), flip = _mm512_set1_epi8(to_unsigned ? -128 : 0);
  __mmask64 found = 0;
  for (int64_t l = 0; l < kp; l += 64) {
    const __m512i v = _mm512_maskz_loadu_epi8(lane_mask64(k - l), src + l);
    found |= _mm512_cmpeq_epi8_mask(v, minus_128);
    _mm512_mask_storeu_epi8(dst + l, lane_mask64(kp - l), _mm512_xor_si512(v, flip));
  }
  return found != 0;
}

}  // namespace weft::precision::quant::kernels
