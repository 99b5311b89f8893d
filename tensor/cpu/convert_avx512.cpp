// float32 <-> bfloat16 conversions on AVX-512 F/BW, 16 values per step (ISA kernel unit: Note
// [ISA kernel units] in tensor/cpu/simd.h): the rules of convert_avx2.cpp, twice as wide, with
// vpmovdw narrowing the 32-bit lanes in one instruction. bf16 autocast converts every weight and
// activation of a step, so these loops are hot in bf16-mixed training. (float16 stays on the AVX2
// unit's F16C instructions.)
//   bfloat16 from float32: u + 0x7FFF + ((u >> 16) & 1), top half; NaN -> 0x7FC0.
//   bfloat16 to float32: the bits shifted up by 16.
// The last n % 16 values go through a 16-wide scratch block, so every value takes the same path.
#include "tensor/cpu/convert_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

__m256i float_to_bfloat16_16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
  const __m512i magnitude = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(magnitude, _mm512_set1_epi32(0x7F800000));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, _mm512_set1_epi32(0x7FC0)));
}

__m512 bfloat16_to_float16(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }

}  // namespace

void float_to_bfloat16_avx512(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), float_to_bfloat16_16(_mm512_loadu_ps(src + i)));
  if (i == n) return;
  float in[16] = {};
  uint16_t out[16];
  __builtin_memcpy(in, src + i, static_cast<size_t>(n - i) * sizeof(float));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), float_to_bfloat16_16(_mm512_loadu_ps(in)));
  __builtin_memcpy(dst + i, out, static_cast<size_t>(n - i) * sizeof(uint16_t));
}

void bfloat16_to_float_avx512(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, bfloat16_to_float16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  if (i == n) return;
  uint16_t in[16] = {};
  float out[16];
  __builtin_memcpy(in, src + i, static_cast<size_t>(n - i) * sizeof(uint16_t));
  _mm512_storeu_ps(out, bfloat16_to_float16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in))));
  __builtin_memcpy(dst + i, out, static_cast<size_t>(n - i) * sizeof(float));
}

}  // namespace weft::detail
