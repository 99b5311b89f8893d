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

}  // namespace

void transpose_copy_avx512(const void* src, bool src_bf16, int64_t ld_src, int64_t rows, int64_t cols, void* dst,
                           bool dst_bf16, int64_t ld_dst) {
  for (int64_t i0 = 0; i0 < rows; i0 += 16) {
    const int64_t block_rows = rows - i0 < 16 ? rows - i0 : 16;
    const __mmask16 valid_rows = lane_mask(block_rows);
    for (int64_t j0 = 0; j0 < cols; j0 += 16) {
      const int64_t block_cols = cols - j0 < 16 ? cols - j0 : 16;
      const __mmask16 valid_cols = lane_mask(block_cols);
      __m512i r[16];
      for (int64_t i = 0; i < 16; ++i)
        r[i] = i < block_rows ? load16(src, src_bf16, (i0 + i) * ld_src + j0, valid_cols) : _mm512_setzero_si512();
      transpose16x16_epi32(r);
      for (int64_t j = 0; j < block_cols; ++j) store16(dst, dst_bf16, (j0 + j) * ld_dst + i0, valid_rows, r[j]);
    }
  }
}

}  // namespace weft::detail
