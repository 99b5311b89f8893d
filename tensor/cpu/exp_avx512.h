// exp over sixteen float32 lanes, for AVX-512 kernel units only (Note [ISA kernel units] in
// tensor/cpu/simd.h): the fused attention's softmax and the cross-entropy rows share it.
//
// Cephes' expf: x = n·ln2 + r with |r| <= ln2/2 (ln2 split in two so r is exact), e^r from a
// degree-6 polynomial, 2^n applied with vscalefps; within 2 ulp of std::exp. Arguments below −87
// give 0 (e^−87 ≈ 1.6e-38: a weight that small against a row's largest, which is 1, is nothing),
// so −inf gives 0; NaN stays NaN.
#pragma once

#include "tensor/cpu/simd.h"

namespace weft::detail {

static inline __m512 exp_ps(__m512 x) {
  const __mmask16 underflow = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_LT_OQ);
  x = _mm512_min_ps(_mm512_set1_ps(88.0f), _mm512_max_ps(_mm512_set1_ps(-87.0f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_mask_mov_ps(_mm512_scalef_ps(y, n), underflow, _mm512_setzero_ps());
}

}  // namespace weft::detail
