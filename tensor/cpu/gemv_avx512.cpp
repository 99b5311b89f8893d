// gemv_kernels.h's batch-1 products with AVX-512 F: bfloat16 or float16 rows widened to float32
// as they are loaded, four rows sharing each load of x; and x·B over float32 rows of B, four rows of B per pass over y (kept in L1), so B is
// read once, front to back, in the order it lies in memory.
//
// bfloat16 rows go 32 values a load, split into their even and odd values rather than widened in
// order: a 32-bit word of the row holds an even value in its low half and the next, odd, one in its
// high half, so the odd values as float32 are the words with the low half cleared and the even ones
// the words shifted up by 16: two simple ALU ops, where vpmovzxwd crosses lanes on
// the one shuffle port for every 16 values. x is split the same way once per load, for four rows.
// On an Emerald Rapids VM that runs bfloat16 here because its vdpbf16ps is slow (Note [Where BF16
// dot products pay]): 1024 rows × 768 in L2, one thread, 0.039 → 0.032 ms (vdpbf16ps 0.025 ms);
// GPT-2's bf16 decode 76-81 → 90-97 tokens/s (vdpbf16ps 102-106). Rows are fetched kGemvRowAhead
// ahead, as the vdpbf16ps kernel's are.
#include "tensor/cpu/gemv_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

// 16 float16 values as float32 (vcvtph2ps).
__m512 widen_f16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }

// y[0..R) (+)= float16 rows r[i·ldw ..] · x over k values; the last k % 16 through zero-padded
// copies (a zero code is +0, so the padding adds nothing). A cache line of each row (32 values) a
// step, fetched kGemvRowAhead ahead as the bfloat16 rows are: without, the int8 GPT-2's float16
// LM head, 77 MB a token, streamed at 0.7x the pace of its int8 weights.
template <int R>
void dot_block_f16(const uint16_t* r, int64_t ldw, const uint16_t* x, int64_t k, float* y, bool accumulate) {
  __m512 sum[R];
  for (int i = 0; i < R; ++i) sum[i] = _mm512_setzero_ps();
  int64_t p = 0;
  for (; p + 16 <= k; p += 16) {
    if (p % 32 == 0)
      for (int i = 0; i < R; ++i)
        _mm_prefetch(reinterpret_cast<const char*>(r + i * ldw + p + kGemvRowAhead), _MM_HINT_T0);
    const __m512 xv = widen_f16(x + p);
    for (int i = 0; i < R; ++i) sum[i] = _mm512_fmadd_ps(widen_f16(r + i * ldw + p), xv, sum[i]);
  }
  if (p < k) {
    uint16_t xt[16] = {}, rt[16] = {};
    for (int64_t q = p; q < k; ++q) xt[q - p] = x[q];
    const __m512 xv = widen_f16(xt);
    for (int i = 0; i < R; ++i) {
      for (int64_t q = p; q < k; ++q) rt[q - p] = r[i * ldw + q];
      sum[i] = _mm512_fmadd_ps(widen_f16(rt), xv, sum[i]);
    }
  }
  for (int i = 0; i < R; ++i) {
    const float s = _mm512_reduce_add_ps(sum[i]);
    y[i] = accumulate ? y[i] + s : s;
  }
}

struct EvenOdd {
  __m512 even, odd;
};
EvenOdd split_bf16_pairs(__m512i words) {
  return {_mm512_castsi512_ps(_mm512_slli_epi32(words, 16)),
          _mm512_castsi512_ps(_mm512_and_si512(words, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))))};
}

// The bfloat16 form of dot_block_f16: sums of the even and of the odd products, added at the
// end; the last k % 32 values through masked loads (zeros past k add nothing).
template <int R>
void dot_block_bf16(const uint16_t* r, int64_t ldw, const uint16_t* x, int64_t k, float* y, bool accumulate) {
  __m512 even[R], odd[R];
  for (int i = 0; i < R; ++i) even[i] = odd[i] = _mm512_setzero_ps();
  const auto step = [&](int64_t p, __mmask32 mask) {
    const EvenOdd xv = split_bf16_pairs(_mm512_maskz_loadu_epi16(mask, x + p));
    for (int i = 0; i < R; ++i) {
      const EvenOdd wv = split_bf16_pairs(_mm512_maskz_loadu_epi16(mask, r + i * ldw + p));
      even[i] = _mm512_fmadd_ps(wv.even, xv.even, even[i]);
      odd[i] = _mm512_fmadd_ps(wv.odd, xv.odd, odd[i]);
    }
  };
  int64_t p = 0;
  for (; p + 32 <= k; p += 32) {
    for (int i = 0; i < R; ++i)
      _mm_prefetch(reinterpret_cast<const char*>(r + i * ldw + p + kGemvRowAhead), _MM_HINT_T0);
    step(p, ~__mmask32{0});
  }
  if (p < k) step(p, lane_mask32(k - p));
  for (int i = 0; i < R; ++i) {
    const float s = _mm512_reduce_add_ps(_mm512_add_ps(even[i], odd[i]));
    y[i] = accumulate ? y[i] + s : s;
  }
}

template <bool Half>
void rows_of(const uint16_t* w, int64_t ldw, const uint16_t* x, int64_t k, int64_t rows, float* y, bool accumulate) {
  int64_t j = 0;
  if constexpr (Half) {
    for (; j + 4 <= rows; j += 4) dot_block_f16<4>(w + j * ldw, ldw, x, k, y + j, accumulate);
    for (; j < rows; ++j) dot_block_f16<1>(w + j * ldw, ldw, x, k, y + j, accumulate);
  } else {
    for (; j + 4 <= rows; j += 4) dot_block_bf16<4>(w + j * ldw, ldw, x, k, y + j, accumulate);
    for (; j < rows; ++j) dot_block_bf16<1>(w + j * ldw, ldw, x, k, y + j, accumulate);
  }
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
