// gemv_kernels.h's W·x over bfloat16 rows with AVX-512 BF16: vdpbf16ps multiplies 32 bfloat16
// pairs of a row and x and adds each pair's two products into a float32 lane (denormal inputs and
// results flushed to zero, as the instruction does). Four rows at a time share each load of x;
// their four sums are independent chains, so the loop runs at the pace of the loads.
#include "tensor/cpu/gemv_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

constexpr int64_t kLanes = 32;  // bfloat16 values per vector

__m512bh as_bf16x32(__m512i v) {
  __m512bh r;
  __builtin_memcpy(&r, &v, sizeof(r));
  return r;
}

// y[0..R) (+)= rows r[i·ldw ..] · x over k values; the last k % 32 through masked loads.
template <int R>
void dot_block(const uint16_t* r, int64_t ldw, const uint16_t* x, int64_t k, float* y, bool accumulate) {
  __m512 sum[R];
  for (int i = 0; i < R; ++i) sum[i] = _mm512_setzero_ps();
  int64_t p = 0;
  for (; p + kLanes <= k; p += kLanes) {
    const __m512bh xv = as_bf16x32(_mm512_loadu_si512(x + p));
    for (int i = 0; i < R; ++i)
      _mm_prefetch(reinterpret_cast<const char*>(r + i * ldw + p + kGemvRowAhead), _MM_HINT_T0);
    for (int i = 0; i < R; ++i) sum[i] = _mm512_dpbf16_ps(sum[i], as_bf16x32(_mm512_loadu_si512(r + i * ldw + p)), xv);
  }
  if (p < k) {
    const __mmask32 tail = static_cast<__mmask32>((uint64_t{1} << (k - p)) - 1);
    const __m512bh xv = as_bf16x32(_mm512_maskz_loadu_epi16(tail, x + p));
    for (int i = 0; i < R; ++i)
      sum[i] = _mm512_dpbf16_ps(sum[i], as_bf16x32(_mm512_maskz_loadu_epi16(tail, r + i * ldw + p)), xv);
  }
  for (int i = 0; i < R; ++i) {
    const float s = _mm512_reduce_add_ps(sum[i]);
    y[i] = accumulate ? y[i] + s : s;
  }
}

}  // namespace

void gemv_bf16_rows_avx512bf16(const uint16_t* w, int64_t ldw, const uint16_t* x, int64_t k, int64_t rows, float* y,
                               bool accumulate) {
  int64_t j = 0;
  for (; j + 4 <= rows; j += 4) dot_block<4>(w + j * ldw, ldw, x, k, y + j, accumulate);
  for (; j < rows; ++j) dot_block<1>(w + j * ldw, ldw, x, k, y + j, accumulate);
}

}  // namespace weft::detail
