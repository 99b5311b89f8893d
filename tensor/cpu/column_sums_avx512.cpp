// The column-sum kernel of column_sums_kernels.h on AVX-512 (ISA kernel unit: Note [ISA kernel
// units] in tensor/cpu/simd.h): eight columns' double accumulators per vector, each row's values
// widened (bfloat16 by a shift, float32 by vcvtps2pd) and added, rows in order, so every column
// is the scalar loop's sum bit for bit. A column's last n % 8 under a lane mask. Four vectors of
// columns go down the rows together: one alone is a chain of dependent additions, a row every
// add's latency (a bias gradient of 768 rows × 384, two threads: 29.5 µs, now 17.8).
#include "tensor/cpu/column_sums_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

constexpr int kVectors = 4;

// Eight values of row-major x at `offset` (fewer under `valid`, zeros past them) as float32.
__m256 load8(const void* x, bool bf16, int64_t offset, __mmask8 valid) {
  return _mm512_castps512_ps256(load_float_or_bf16_x16(x, offset, valid, bf16));
}

}  // namespace

void add_columns_avx512(const void* x, bool bf16, int64_t ld, int64_t rows, int64_t cols, double* acc) {
  for (int64_t j0 = 0; j0 < cols; j0 += 8 * kVectors) {
    __mmask8 valid[kVectors];
    __m512d sum[kVectors];
    for (int v = 0; v < kVectors; ++v) {
      valid[v] = static_cast<__mmask8>(lane_mask(cols - j0 - 8 * v));
      sum[v] = _mm512_maskz_loadu_pd(valid[v], acc + j0 + 8 * v);
    }
    for (int64_t r = 0; r < rows; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v)
        sum[v] = _mm512_add_pd(sum[v], _mm512_cvtps_pd(load8(x, bf16, r * ld + j0 + 8 * v, valid[v])));
    for (int v = 0; v < kVectors; ++v) _mm512_mask_storeu_pd(acc + j0 + 8 * v, valid[v], sum[v]);
  }
}

}  // namespace weft::detail
