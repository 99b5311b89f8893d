// The AVX-512 transposing copy of the AMX transposed products (Note [Few rows times a transposed
// B, in AMX tiles] in gemm.cpp; ISA kernel unit: Note [ISA kernel units] in tensor/cpu/simd.h):
// dst(j, i) = src(i, j), float32 or bfloat16 on either side, by 16 × 16 blocks transposed in
// registers. bfloat16 is widened exactly on loading and rounded to nearest even on storing, as
// the conversion kernels round (float_to_bf16_x16). The scalar reference is transpose_copy in
// gemm.cpp, which gives the same bits.
#include "tensor/cpu/gemm/gemm_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

// Rows of float32 or bfloat16 as 16 float32 lanes, as bits (simd.h's loads and stores).
__m512i load16(const void* src, bool bf16, int64_t offset, __mmask16 valid) {
  return _mm512_castps_si512(load_float_or_bf16_x16(src, offset, valid, bf16));
}

void store16(void* dst, bool bf16, int64_t offset, __mmask16 valid, __m512i v) {
  store_float_or_bf16_x16(dst, offset, valid, bf16, _mm512_castsi512_ps(v));
}

// The blocks of a transposing copy, the source's and destination's types fixed. A block with all
// sixteen rows and columns inside is a call of its own, its loops of constant bounds unrolled, so
// its rows stay in registers and its addresses are one pointer stepped per row: in the loop of the
// edge blocks, the rows went to the stack and back, and inlined, GCC hoisted all 32 row addresses
// out of the loops, more than there are registers (256 × 64 floats 3 KiB apart, one core: 6.0 µs,
// now 4.4; a T = 256 attention's transposes of q, dO and its outputs were a tenth of its time).
template <bool SRC_BF16, bool DST_BF16>
__attribute__((noinline)) void full_block(const void* src, int64_t ld_src, void* dst, int64_t ld_dst) {
  __m512i r[16];
#pragma GCC unroll 16
  for (int64_t i = 0; i < 16; ++i) r[i] = load16(src, SRC_BF16, i * ld_src, 0xFFFF);
  transpose16x16_epi32(r);
#pragma GCC unroll 16
  for (int64_t j = 0; j < 16; ++j) store16(dst, DST_BF16, j * ld_dst, 0xFFFF, r[j]);
}

template <bool SRC_BF16, bool DST_BF16>
void transpose_blocks(const void* src, int64_t ld_src, int64_t rows, int64_t cols, void* dst, int64_t ld_dst) {
  for (int64_t i0 = 0; i0 < rows; i0 += 16) {
    const int64_t block_rows = rows - i0 < 16 ? rows - i0 : 16;
    const __mmask16 valid_rows = lane_mask(block_rows);
    for (int64_t j0 = 0; j0 < cols; j0 += 16) {
      const int64_t block_cols = cols - j0 < 16 ? cols - j0 : 16;
      const int64_t src_size = SRC_BF16 ? 2 : 4, dst_size = DST_BF16 ? 2 : 4;
      if (block_rows == 16 && block_cols == 16) {
        full_block<SRC_BF16, DST_BF16>(static_cast<const char*>(src) + (i0 * ld_src + j0) * src_size, ld_src,
                                       static_cast<char*>(dst) + (j0 * ld_dst + i0) * dst_size, ld_dst);
        continue;
      }
      const __mmask16 valid_cols = lane_mask(block_cols);
      __m512i r[16];
      for (int64_t i = 0; i < 16; ++i)
        r[i] = i < block_rows ? load16(src, SRC_BF16, (i0 + i) * ld_src + j0, valid_cols) : _mm512_setzero_si512();
      transpose16x16_epi32(r);
      for (int64_t j = 0; j < block_cols; ++j) store16(dst, DST_BF16, (j0 + j) * ld_dst + i0, valid_rows, r[j]);
    }
  }
}

}  // namespace

void transpose_copy_avx512(const void* src, bool src_bf16, int64_t ld_src, int64_t rows, int64_t cols, void* dst,
                           bool dst_bf16, int64_t ld_dst) {
  if (src_bf16)
    return dst_bf16 ? transpose_blocks<true, true>(src, ld_src, rows, cols, dst, ld_dst)
                    : transpose_blocks<true, false>(src, ld_src, rows, cols, dst, ld_dst);
  return dst_bf16 ? transpose_blocks<false, true>(src, ld_src, rows, cols, dst, ld_dst)
                  : transpose_blocks<false, false>(src, ld_src, rows, cols, dst, ld_dst);
}

}  // namespace weft::detail
