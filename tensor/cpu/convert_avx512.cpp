// float32 <-> bfloat16 conversions on AVX-512 F/BW, 16 values per step (ISA kernel unit: Note
// [ISA kernel units] in tensor/cpu/simd.h): the rules of convert_avx2.cpp, twice as wide, with
// vpmovdw narrowing the 32-bit lanes in one instruction. bf16 autocast converts every weight and
// activation of a step, so these loops are hot in bf16-mixed training. (float16 stays on the AVX2
// unit's F16C instructions.)
// The 16-lane steps (to bfloat16: rounded to nearest even, NaN -> 0x7FC0; back: the bits shifted
// up by 16) are simd.h's float_to_bf16_x16 and bf16_to_float_x16, whose rounding the bf16 GEMM's
// stores share.
// The last n % 16 values go through a 16-wide scratch block, so every value takes the same path.
#include "tensor/cpu/convert_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {

void float_to_bfloat16_avx512(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), float_to_bf16_x16(_mm512_loadu_ps(src + i)));
  if (i == n) return;
  float in[16] = {};
  uint16_t out[16];
  __builtin_memcpy(in, src + i, static_cast<size_t>(n - i) * sizeof(float));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), float_to_bf16_x16(_mm512_loadu_ps(in)));
  __builtin_memcpy(dst + i, out, static_cast<size_t>(n - i) * sizeof(uint16_t));
}

void bfloat16_to_float_avx512(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, bf16_to_float_x16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  if (i == n) return;
  uint16_t in[16] = {};
  float out[16];
  __builtin_memcpy(in, src + i, static_cast<size_t>(n - i) * sizeof(uint16_t));
  _mm512_storeu_ps(out, bf16_to_float_x16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in))));
  __builtin_memcpy(dst + i, out, static_cast<size_t>(n - i) * sizeof(float));
}

}  // namespace weft::detail
