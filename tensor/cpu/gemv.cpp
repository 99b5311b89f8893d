// Batch-1 products (gemv.h): the scalar references, the choice of kernel, and the split over
// threads. Each thread takes a contiguous range of output columns, whole cache lines of y, and
// reads only its share of the weight: rows of W, or a column stripe of every row of B.
#include "tensor/cpu/gemv.h"

#include <algorithm>

#include "tensor/cpu/gemv_kernels.h"
#include "tensor/float_formats.h"
#include "tensor/parallel.h"

namespace weft::detail {
namespace {

// Below this many weight values a product runs on the calling thread (~20 µs of reading: several
// times what handing a range to a pool thread costs).
constexpr int64_t kParallelValues = int64_t{1} << 16;
// Ranges per thread, so the pool's tail stealing can move the unstarted part of a thread slowed
// by a neighbour on its core to a running one.
constexpr int64_t kPartsPerThread = 4;
// Output columns per unit of a range: 16 float32 values, one cache line of y.
constexpr int64_t kUnit = 16;

// y[j] (+)= Σ_p widen(W[j, p])·widen(x[p]) for 16-bit floats that `widen` turns into float32.
template <float (*widen)(uint16_t)>
void gemv_16bit_rows_scalar(const uint16_t* w, int64_t ldw, const uint16_t* x, int64_t k, int64_t rows, float* y,
                            bool accumulate) {
  for (int64_t j = 0; j < rows; ++j) {
    float sum = 0;
    for (int64_t p = 0; p < k; ++p) sum += widen(w[j * ldw + p]) * widen(x[p]);
    y[j] = accumulate ? y[j] + sum : sum;
  }
}

void gemv_f32_cols_scalar(const float* x, const float* b, int64_t ldb, int64_t k, int64_t cols, float* y,
                          bool accumulate) {
  for (int64_t j = 0; j < cols; ++j) {
    float sum = 0;
    for (int64_t p = 0; p < k; ++p) sum += x[p] * b[p * ldb + j];
    y[j] = accumulate ? y[j] + sum : sum;
  }
}

// Runs part(first, count) over [0, n) in ranges of whole units, on the pool when the product
// reads at least kParallelValues weights.
template <class Part>
void split_columns(int64_t n, int64_t k, Part&& part) {
  const int64_t units = (n + kUnit - 1) / kUnit;
  const int64_t parts = n * k < kParallelValues ? 1 : std::min<int64_t>(units, num_threads() * kPartsPerThread);
  parallel_for_if(parts > 1, parts, [&](int64_t i) {
    const int64_t first = units * i / parts * kUnit, last = std::min(n, units * (i + 1) / parts * kUnit);
    if (last > first) part(first, last - first);
  });
}

}  // namespace

void gemv_bf16_rows(CpuIsa isa, const uint16_t* w, int64_t ldw, const uint16_t* x, int64_t k, int64_t n, float* y,
                    bool accumulate) {
  auto* kernel = isa >= CpuIsa::Avx512Bf16 ? gemv_bf16_rows_avx512bf16
                 : isa >= CpuIsa::Avx512   ? gemv_bf16_rows_avx512
                 : isa >= CpuIsa::Avx2     ? gemv_bf16_rows_avx2
                                           : gemv_16bit_rows_scalar<bfloat16_to_float>;
  split_columns(n, k, [&](int64_t first, int64_t count) { kernel(w + first * ldw, ldw, x, k, count, y + first, accumulate); });
}

void gemv_f16_rows(CpuIsa isa, const uint16_t* w, int64_t ldw, const uint16_t* x, int64_t k, int64_t n, float* y,
                   bool accumulate) {
  auto* kernel = isa >= CpuIsa::Avx512 ? gemv_f16_rows_avx512
                 : isa >= CpuIsa::Avx2 ? gemv_f16_rows_avx2
                                       : gemv_16bit_rows_scalar<half_to_float>;
  split_columns(n, k, [&](int64_t first, int64_t count) { kernel(w + first * ldw, ldw, x, k, count, y + first, accumulate); });
}

void gemv_f32_cols(CpuIsa isa, const float* x, const float* b, int64_t ldb, int64_t k, int64_t n, float* y,
                   bool accumulate) {
  auto* kernel = isa >= CpuIsa::Avx512 ? gemv_f32_cols_avx512
                 : isa >= CpuIsa::Avx2 ? gemv_f32_cols_avx2
                                       : gemv_f32_cols_scalar;
  split_columns(n, k, [&](int64_t first, int64_t count) { kernel(x, b + first, ldb, k, count, y + first, accumulate); });
}

}  // namespace weft::detail
