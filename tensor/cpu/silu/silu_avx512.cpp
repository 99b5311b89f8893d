// SiLU and its gradient on AVX-512 (ISA kernel unit: Note [ISA kernel units] in
// tensor/cpu/simd.h), sixteen float32 lanes at a time: sigmoid_arith (tensor/elementwise_math.h)
// spelled in intrinsics, operation for operation, so the results are the scalar reference's bits.
// The elementwise loops ran the reference at the baseline instruction set, widening bfloat16
// through a chunk on the stack: a 1.1B Llama's bf16 prefill spent a twelfth of its time in SiLU.
#include "tensor/cpu/silu/silu_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

__m512 set(float v) { return _mm512_set1_ps(v); }

// A float whose bits are (127 − p) << 23: 2^−p, for p in [0, 126].
__m512 power_of_half(__m512i p) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(127), p), 23));
}

// sigmoid_arith over 16 lanes: 1 / (1 + e) for x ≥ 0, e / (1 + e) below, e = exp(−min(|x|, 110))
// as exp(−r)·2^−⌊k/2⌋·2^−⌈k/2⌉; NaN passed through.
__m512 sigmoid16(__m512 x) {
  const __m512i bits = _mm512_castps_si512(x);
  const __m512i magnitude = _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff));
  __m512i k;
  const __m512 p = exp_neg_reduced_x16(_mm512_castsi512_ps(_mm512_min_epu32(magnitude, _mm512_set1_epi32(0x42dc0000))), &k);
  const __m512i half = _mm512_srli_epi32(k, 1);
  const __m512 e = _mm512_mul_ps(_mm512_mul_ps(p, power_of_half(half)), power_of_half(_mm512_sub_epi32(k, half)));
  const __mmask16 negative = _mm512_cmpgt_epi32_mask(_mm512_setzero_si512(), bits);
  const __m512 s = _mm512_div_ps(_mm512_mask_blend_ps(negative, set(1.0f), e), _mm512_add_ps(set(1.0f), e));
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(magnitude, _mm512_set1_epi32(0x7f800000));  // sign bit clear
  return _mm512_mask_blend_ps(nan, s, x);
}

}  // namespace

void silu_forward_avx512(const void* x, void* y, int64_t n, bool bf16) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = lane_mask(n - i);
    const __m512 xv = load_float_or_bf16_x16(x, i, mask, bf16);
    store_float_or_bf16_x16(y, i, mask, bf16, _mm512_mul_ps(xv, sigmoid16(xv)));
  }
}

// grad · s · (1 + x·(1 − s)), s = σ(x), multiplied in the reference's order.
void silu_backward_avx512(const void* grad, const void* x, void* dx, int64_t n, bool bf16) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = lane_mask(n - i);
    const __m512 xv = load_float_or_bf16_x16(x, i, mask, bf16);
    const __m512 s = sigmoid16(xv);
    const __m512 g = load_float_or_bf16_x16(grad, i, mask, bf16);
    const __m512 slope = _mm512_add_ps(set(1.0f), _mm512_mul_ps(xv, _mm512_sub_ps(set(1.0f), s)));
    store_float_or_bf16_x16(dx, i, mask, bf16, _mm512_mul_ps(_mm512_mul_ps(g, s), slope));
  }
}

}  // namespace weft::detail
