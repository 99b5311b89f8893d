// The fused 4-bit product's activation preparation for AVX2 (Note [4-bit product layout] in
// gemm_4bit_kernels.h): the bytes of the scalar reference, prepare_reference() in gemm_4bit.cpp,
// in under a third of its time (0.23 against 0.78 ns a value, buffers included; the reference is
// compiled for the baseline x86-64, and was a sixth of a 512×784 product at batch 8).
//
// Per block: max|x| as an unsigned integer max over the magnitudes' bits (every NaN above
// infinity, as the reference), then 32 values a step multiplied by 127 / max|x| and converted with
// vcvtps2dq — in the default rounding mode, ties to even, as the reference's round_half_even —
// and packed to int8 in order. Then each 64-value chunk is split into its even and odd values: a
// vpshufb gathers each 128-bit lane's even bytes before its odd ones, and two cross-lane permutes
// put the four lanes' halves together, once the chunk's values (two blocks of 32, or part of a
// larger block) are all quantized.
#include "precision/quant/gemm_4bit_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::precision::quant::kernels {
namespace {

constexpr int64_t kChunk = 64;

__m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
void store(void* p, __m256i v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }

int32_t horizontal_sum(__m256i v) {
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
  return _mm_cvtsi128_si32(h);
}

// The codes of 32 values, round(x · inverse) in order as int8; adds them to `sum`.
__m256i quantize32(const float* x, __m256 inverse, __m256i& sum) {
  __m256i v[4];
  for (int j = 0; j < 4; ++j) {
    v[j] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * j), inverse));
    sum = _mm256_add_epi32(sum, v[j]);
  }
  return pack_epi32_to_epi8(v[0], v[1], v[2], v[3]);
}

// One 64-value chunk of codes in order to the prepared layout: its 32 even values, then its 32 odd.
void permute_chunk(const int8_t* codes, int8_t* q, uint8_t* q_abs) {
  const __m256i split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,  //
                                         0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  // In 8-byte quarters, e0 = the even values of 0-15, o0 its odd ones, e1 those of 16-31, ...
  const __m256i low = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(load(codes), split), 0xD8);        // e0 e1 o0 o1
  const __m256i high = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(load(codes + 32), split), 0xD8);  // e2 e3 o2 o3
  const __m256i even = _mm256_permute2x128_si256(low, high, 0x20);
  const __m256i odd = _mm256_permute2x128_si256(low, high, 0x31);
  store(q, even);
  store(q + 32, odd);
  store(q_abs, _mm256_abs_epi8(even));
  store(q_abs + 32, _mm256_abs_epi8(odd));
}

}  // namespace

void prepare_4bit_avx2(const Prepare4bitArgs& p) {
  const int64_t blocks = p.k / p.blocksize;
  alignas(32) int8_t chunk[kChunk];  // the codes of the chunk in hand, in x's order
  for (int64_t i = 0; i < p.m; ++i) {
    const float* x = p.x + i * p.k;
    int8_t* q = p.q + i * p.k;
    uint8_t* q_abs = p.q_abs + i * p.k;
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t first = b * p.blocksize;
      const float amax = absmax_ps(x + first, p.blocksize);
      // As the reference: codes 0 where 127 / max|x| is not a finite positive number (a block of
      // zeros, one holding NaN or Inf, one of magnitudes below 3.7e-37).
      const float ratio = 127.0f / amax;
      const float inverse = __builtin_isfinite(ratio) && ratio > 0.0f ? ratio : 0.0f;
      __m256i sum = _mm256_setzero_si256();
      for (int64_t v = first; v < first + p.blocksize; v += 32) {
        store(chunk + v % kChunk,
              inverse == 0.0f ? _mm256_setzero_si256() : quantize32(x + v, _mm256_set1_ps(inverse), sum));
        if (v % kChunk == 32) permute_chunk(chunk, q + v - 32, q_abs + v - 32);
      }
      p.q_sum[i * blocks + b] = horizontal_sum(sum);
      p.scale[i * blocks + b] = amax / 16129.0f;
    }
  }
}

}  // namespace weft::precision::quant::kernels
