// gemv_kernels.h's batch-1 products with AVX-512 F: bfloat16 or float16 rows widened to float32
// as they are loaded, four rows sharing each load of x; and x·B over float32 rows of B, four rows of B per pass over y (kept in L1), so B is
// read once, front to back, in the order it lies in memory.
#include "tensor/cpu/gemv_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

// 16 bfloat16 (a bfloat16 is the top half of a float32: zero-extend and shift) or float16 values
// (vcvtph2ps) as float32.
template <bool Half>
__m512 widen16(const uint16_t* p) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if constexpr (Half) return _mm512_cvtph_ps(bits);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// y[0..R) (+)= rows r[i·ldw ..] · x over k values; the last k % 16 through zero-padded copies
// (a zero code is +0 in both formats, so the padding adds nothing).
template <bool Half, int R>
void dot_block(const uint16_t* r, int64_t ldw, const uint16_t* x, int64_t k, float* y, bool accumulate) {
  __m512 sum[R];
  for (int i = 0; i < R; ++i) sum[i] = _mm512_setzero_ps();
  int64_t p = 0;
  for (; p + 16 <= k; p += 16) {
    const __m512 xv = widen16<Half>(x + p);
    for (int i = 0; i < R; ++i) sum[i] = _mm512_fmadd_ps(widen16<Half>(r + i * ldw + p), xv, sum[i]);
  }
  if (p < k) {
    uint16_t xt[16] = {}, rt[16] = {};
    for (int64_t q = p; q < k; ++q) xt[q - p] = x[q];
    const __m512 xv = widen16<Half>(xt);
    for (int i = 0; i < R; ++i) {
      for (int64_t q = p; q < k; ++q) rt[q - p] = r[i * ldw + q];
      sum[i] = _mm512_fmadd_ps(widen16<Half>(rt), xv, sum[i]);
    }
  }
  for (int i = 0; i < R; ++i) {
    const float s = _mm512_reduce_add_ps(sum[i]);
    y[i] = accumulate ? y[i] + s : s;
  }
}

template <bool Half>
void rows_of(const uint16_t* w, int64_t ldw, const uint16_t* x, int64_t k, int64_t rows, float* y, bool accumulate) {
  int64_t j = 0;
  for (; j + 4 <= rows; j += 4) dot_block<Half, 4>(w + j * ldw, ldw, x, k, y + j, accumulate);
  for (; j < rows; ++j) dot_block<Half, 1>(w + j * ldw, ldw, x, k, y + j, accumulate);
}

// y[0..n) += Σ_i x[i] · b[i·ldb + 0..n) over R rows of B.
template <int R>
void add_rows(const float* x, const float* b, int64_t ldb, int64_t n, float* y) {
  __m512 xv[R];
  for (int i = 0; i < R; ++i) xv[i] = _mm512_set1_ps(x[i]);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m512 acc = _mm512_loadu_ps(y + j);
    for (int i = 0; i < R; ++i) acc = _mm512_fmadd_ps(xv[i], _mm512_loadu_ps(b + i * ldb + j), acc);
    _mm512_storeu_ps(y + j, acc);
  }
  if (j < n) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - j)) - 1);
    __m512 acc = _mm512_maskz_loadu_ps(tail, y + j);
    for (int i = 0; i < R; ++i) acc = _mm512_fmadd_ps(xv[i], _mm512_maskz_loadu_ps(tail, b + i * ldb + j), acc);
    _mm512_mask_storeu_ps(y + j, tail, acc);
  }
}

}  // namespace

void gemv_bf16_rows_avx512(const uint16_t* w, int64_t ldw, const uint16_t* x, int64_t k, int64_t rows, float* y,
                           bool accumulate) {
  rows_of<false>(w, ldw, x, k, rows, y, accumulate);
}

void gemv_f16_rows_avx512(const uint16_t* w, int64_t ldw, const uint16_t* x, int64_t k, int64_t rows, float* y,
                          bool accumulate) {
  rows_of<true>(w, ldw, x, k, rows, y, accumulate);
}

void gemv_f32_cols_avx512(const float* x, const float* b, int64_t ldb, int64_t k, int64_t cols, float* y,
                          bool accumulate) {
  if (!accumulate)
    for (int64_t j = 0; j < cols; ++j) y[j] = 0;
  int64_t p = 0;
  for (; p + 4 <= k; p += 4) add_rows<4>(x + p, b + p * ldb, ldb, cols, y);
  for (; p < k; ++p) add_rows<1>(x + p, b + p * ldb, ldb, cols, y);
}

}  // namespace weft::detail
