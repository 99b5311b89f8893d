// Fused 4-bit dequantize-and-multiply for AVX-512 VNNI: vpshufb lookup into an unsigned table,
// vpdpbusd, +128 compensation.
//
// The table is looked up as t + 128 (unsigned), so vpdpbusd multiplies it with the signed
// activation codes directly: Σ (t + 128)·q = Σ t·q + 128·Σ q. Each block's int32 lanes therefore
// carry 128·q_sum too much, which is subtracted from lane 0 before the block is converted and
// scaled (Note [4-bit product layout] in gemm_4bit_kernels.h).
#include "precision/quant/gemm_4bit_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::precision::quant::kernels {
namespace {

constexpr int64_t kMr = 4;

inline __m512i lookup(const uint8_t* bytes32, __m512i table) {
  const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes32));
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  const __m256i even = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), nibble);
  const __m256i odd = _mm256_and_si256(bytes, nibble);
  const __m512i codes = _mm512_inserti64x4(_mm512_castsi256_si512(even), odd, 1);
  return _mm512_shuffle_epi8(table, codes);
}

// Weight row n against activation rows i0 .. i0 + kRows - 1, blocks of kChunks · 64 values
// (0: any multiple of 64, read from the arguments; 1 is the default block size's fast case).
template <int kRows, int kChunks>
void row_tile(const Gemm4bitArgs& p, int64_t n, int64_t i0) {
  const __m512i table = _mm512_xor_si512(
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p.table))), _mm512_set1_epi8(-128));
  const int64_t blocks = p.k / p.blocksize, chunks = kChunks > 0 ? kChunks : p.blocksize / 64;
  const uint8_t* w = p.w + n * p.w_stride;
  const float* absmax = p.absmax + n * p.absmax_stride;
  const int8_t* q[kRows];
  const int32_t* q_sum[kRows];
  const float* scale[kRows];
  __m512 sum[kRows];
  for (int r = 0; r < kRows; ++r) {
    q[r] = p.q + (i0 + r) * p.k;
    q_sum[r] = p.q_sum + (i0 + r) * blocks;
    scale[r] = p.scale + (i0 + r) * blocks;
    sum[r] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    __m512i acc[kRows];
    for (int r = 0; r < kRows; ++r) acc[r] = _mm512_maskz_set1_epi32(1, -128 * q_sum[r][b]);
    for (int64_t c = 0; c < chunks; ++c, w += 32) {
      _mm_prefetch(reinterpret_cast<const char*>(w + kWeightPrefetchBytes), _MM_HINT_T0);
      const __m512i t = lookup(w, table);
      for (int r = 0; r < kRows; ++r) {
        acc[r] = _mm512_dpbusd_epi32(acc[r], t, _mm512_loadu_si512(q[r]));
        q[r] += 64;
      }
    }
    for (int r = 0; r < kRows; ++r) {
      const float s = absmax[b] * scale[r][b];
      sum[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r]), _mm512_set1_ps(s), sum[r]);
    }
  }
  for (int r = 0; r < kRows; ++r) p.y[(i0 + r) * p.y_stride + n * p.y_col_stride] = _mm512_reduce_add_ps(sum[r]);
}

template <int kChunks>
void panel(const Gemm4bitArgs& args) {
  for (int64_t n = 0; n < args.rows; ++n) {
    int64_t i = 0;
    for (; i + kMr <= args.m; i += kMr) row_tile<kMr, kChunks>(args, n, i);
    switch (args.m - i) {
      case 3: row_tile<3, kChunks>(args, n, i); break;
      case 2: row_tile<2, kChunks>(args, n, i); break;
      case 1: row_tile<1, kChunks>(args, n, i); break;
      default: break;
    }
  }
}

}  // namespace

void gemm_4bit_panel_avx512vnni(const Gemm4bitArgs& args) {
  if (args.blocksize == 64) {
    panel<1>(args);
  } else {
    panel<0>(args);
  }
}

}  // namespace weft::precision::quant::kernels
