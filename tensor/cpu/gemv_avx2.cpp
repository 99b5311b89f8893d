// gemv_kernels.h's batch-1 products with AVX2 + FMA + F16C: the AVX-512 unit's loops at 8 lanes
// (bfloat16 or float16 widened as it is loaded, four rows sharing each load of x; x·B four rows of B per
// pass over y), the last columns one by one.
#include "tensor/cpu/gemv_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

// 8 bfloat16 (zero-extend and shift) or float16 values (vcvtph2ps, F16C) as float32.
template <bool Half>
__m256 widen8(const uint16_t* p) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (Half) return _mm256_cvtph_ps(bits);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The last k % 8 through zero-padded copies (a zero code is +0 in both formats). A cache line of
// each row (32 values) a step, fetched kGemvRowAhead ahead, as the AVX-512 kernels do.
template <bool Half, int R>
void dot_block(const uint16_t* r, int64_t ldw, const uint16_t* x, int64_t k, float* y, bool accumulate) {
  __m256 sum[R];
  for (int i = 0; i < R; ++i) sum[i] = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) {
    if (p % 32 == 0)
      for (int i = 0; i < R; ++i)
        _mm_prefetch(reinterpret_cast<const char*>(r + i * ldw + p + kGemvRowAhead), _MM_HINT_T0);
    const __m256 xv = widen8<Half>(x + p);
    for (int i = 0; i < R; ++i) sum[i] = _mm256_fmadd_ps(widen8<Half>(r + i * ldw + p), xv, sum[i]);
  }
  if (p < k) {
    uint16_t xt[8] = {}, rt[8] = {};
    for (int64_t q = p; q < k; ++q) xt[q - p] = x[q];
    const __m256 xv = widen8<Half>(xt);
    for (int i = 0; i < R; ++i) {
      for (int64_t q = p; q < k; ++q) rt[q - p] = r[i * ldw + q];
      sum[i] = _mm256_fmadd_ps(widen8<Half>(rt), xv, sum[i]);
    }
  }
  for (int i = 0; i < R; ++i) {
    const float s = hsum(sum[i]);
    y[i] = accumulate ? y[i] + s : s;
  }
}

template <bool Half>
void rows_of(const uint16_t* w, int64_t ldw, const uint16_t* x, int64_t k, int64_t rows, float* y, bool accumulate) {
  int64_t j = 0;
  for (; j + 4 <= rows; j += 4) dot_block<Half, 4>(w + j * ldw, ldw, x, k, y + j, accumulate);
  for (; j < rows; ++j) dot_block<Half, 1>(w + j * ldw, ldw, x, k, y + j, accumulate);
}

template <int R>
void add_rows(const float* x, const float* b, int64_t ldb, int64_t n, float* y) {
  __m256 xv[R];
  for (int i = 0; i < R; ++i) xv[i] = _mm256_set1_ps(x[i]);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 acc = _mm256_loadu_ps(y + j);
    for (int i = 0; i < R; ++i) acc = _mm256_fmadd_ps(xv[i], _mm256_loadu_ps(b + i * ldb + j), acc);
    _mm256_storeu_ps(y + j, acc);
  }
  for (; j < n; ++j)
    for (int i = 0; i < R; ++i) y[j] += x[i] * b[i * ldb + j];
}

}  // namespace

void gemv_bf16_rows_avx2(const uint16_t* w, int64_t ldw, const uint16_t* x, int64_t k, int64_t rows, float* y,
                         bool accumulate) {
  rows_of<false>(w, ldw, x, k, rows, y, accumulate);
}

void gemv_f16_rows_avx2(const uint16_t* w, int64_t ldw, const uint16_t* x, int64_t k, int64_t rows, float* y,
                        bool accumulate) {
  rows_of<true>(w, ldw, x, k, rows, y, accumulate);
}

void gemv_f32_cols_avx2(const float* x, const float* b, int64_t ldb, int64_t k, int64_t cols, float* y,
                        bool accumulate) {
  if (!accumulate)
    for (int64_t j = 0; j < cols; ++j) y[j] = 0;
  int64_t p = 0;
  for (; p + 4 <= k; p += 4) add_rows<4>(x + p, b + p * ldb, ldb, cols, y);
  for (; p < k; ++p) add_rows<1>(x + p, b + p * ldb, ldb, cols, y);
}

}  // namespace weft::detail
