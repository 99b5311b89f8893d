// float32 <-> float16 / bfloat16 conversions on AVX2 + F16C, 8 values per step (ISA kernel unit:
// Note [ISA kernel units] in tensor/cpu/simd.h). bf16 autocast converts every weight and
// activation of a step, so these loops are hot in bf16-mixed training.
//   float16: vcvtps2ph / vcvtph2ps (round to nearest even, NaN kept quiet, as float_to_half).
//   bfloat16 from float32: u + 0x7FFF + ((u >> 16) & 1), top half; NaN -> 0x7FC0.
//   bfloat16 to float32: the bits shifted up by 16.
// The last n % 8 values go through an 8-wide scratch block, so every value takes the same path.
#include "tensor/cpu/convert_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

__m128i float_to_half8(__m256 x) { return _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT); }
__m256 half_to_float8(__m128i h) { return _mm256_cvtph_ps(h); }

__m128i float_to_bfloat16_8(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
  const __m256i magnitude = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7F800000));
  const __m256i bits = _mm256_blendv_epi8(rounded, _mm256_set1_epi32(0x7FC0), nan);
  // Pack the 8 low halves: within each 128-bit lane, then the two lanes together.
  const __m256i packed = _mm256_packus_epi32(bits, bits);  // values are <= 0xFFFF: no saturation
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
}

__m256 bfloat16_to_float8(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }

template <__m128i (*Narrow)(__m256)>
void narrow_all(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), Narrow(_mm256_loadu_ps(src + i)));
  if (i == n) return;
  float in[8] = {};
  uint16_t out[8];
  __builtin_memcpy(in, src + i, static_cast<size_t>(n - i) * sizeof(float));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), Narrow(_mm256_loadu_ps(in)));
  __builtin_memcpy(dst + i, out, static_cast<size_t>(n - i) * sizeof(uint16_t));
}

template <__m256 (*Widen)(__m128i)>
void widen_all(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, Widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  if (i == n) return;
  uint16_t in[8] = {};
  float out[8];
  __builtin_memcpy(in, src + i, static_cast<size_t>(n - i) * sizeof(uint16_t));
  _mm256_storeu_ps(out, Widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in))));
  __builtin_memcpy(dst + i, out, static_cast<size_t>(n - i) * sizeof(float));
}

}  // namespace

void float_to_half_avx2(const float* src, uint16_t* dst, int64_t n) { narrow_all<float_to_half8>(src, dst, n); }
void half_to_float_avx2(const uint16_t* src, float* dst, int64_t n) { widen_all<half_to_float8>(src, dst, n); }
void float_to_bfloat16_avx2(const float* src, uint16_t* dst, int64_t n) { narrow_all<float_to_bfloat16_8>(src, dst, n); }
void bfloat16_to_float_avx2(const uint16_t* src, float* dst, int64_t n) { widen_all<bfloat16_to_float8>(src, dst, n); }

}  // namespace weft::detail
