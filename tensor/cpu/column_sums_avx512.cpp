// The column-sum kernel of column_sums_kernels.h on AVX-512 (ISA kernel unit: Note [ISA kernel
// units] in tensor/cpu/simd.h): eight columns' double accumulators per vector, each row's values
// widened (bfloat16 by a shift, float32 by vcvtps2pd) and added, rows in order, so every column
// is the scalar loop's sum bit for bit. A column's last n % 8 under a lane mask.
#include "tensor/cpu/column_sums_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {

void add_columns_avx512(const void* x, bool bf16, int64_t ld, int64_t rows, int64_t cols, double* acc) {
  for (int64_t j = 0; j < cols; j += 8) {
    const __mmask8 valid = static_cast<__mmask8>(lane_mask(cols - j));
    __m512d sum = _mm512_maskz_loadu_pd(valid, acc + j);
    for (int64_t r = 0; r < rows; ++r) {
      __m256 v;
      if (bf16) {
        const __m512i bits = _mm512_maskz_loadu_epi16(static_cast<__mmask32>(valid), static_cast<const uint16_t*>(x) + r * ld + j);
        v = _mm512_castps512_ps256(bf16_to_float_x16(_mm512_castsi512_si256(bits)));
      } else {
        v = _mm512_castps512_ps256(_mm512_maskz_loadu_ps(valid, static_cast<const float*>(x) + r * ld + j));
      }
      sum = _mm512_add_pd(sum, _mm512_cvtps_pd(v));
    }
    _mm512_mask_storeu_pd(acc + j, valid, sum);
  }
}

}  // namespace weft::detail
