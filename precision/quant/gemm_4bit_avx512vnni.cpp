// Fused 4-bit dequantize-and-multiply for AVX-512 VNNI: vpshufb lookup into an unsigned table,
// vpdpbusd, +128 compensation.
//
// The table is looked up as t + 128 (unsigned), so vpdpbusd multiplies it with the signed
// activation codes directly: Σ (t + 128)·q = Σ t·q + 128·Σ q. Each block's int32 lanes therefore
// carry 128·q_sum too much, which is subtracted before the block is converted and scaled (Note
// [4-bit product layout] in gemm_4bit_kernels.h).
//
// Scaling each block's dot product on its own — a broadcast compensation, a conversion, a scalar
// scale broadcast and an FMA per block and activation row, against one vpdpbusd per 64 values —
// took half the kernel's time. So four blocks are folded into one vector first (fold4_epi32 in
// simd.h): every 128-bit lane holds a partial sum of each of the four, and one conversion and one
// FMA with the four scales in each lane do the work of four.
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

// Two consecutive 32-bit values into the low half of a vector.
inline __m128 load2(const float* p) { return _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
inline __m128i load2(const int32_t* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }

// Lane l of a 64-value step's int32 products belongs to the step's first block of 32 values when
// (l / 4) is even: bytes 0-15 and 32-47 of the step are that block's even and odd values.
inline __m512i block_of_lane() { return _mm512_set_epi32(1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0); }

// Weight row n against activation rows i0 .. i0 + kRows - 1, blocks of kChunks · 64 values
// (0: any multiple of 64, read from the arguments; 1 is the default block size's fast case; -1:
// blocks of 32, two to a 64-value step: one vpdpbusd serves both, each lane scaled by its own
// block's factor (block_of_lane), the compensation coming off lanes 0 and 4).
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
  if constexpr (kChunks < 0) {
    const __m512i lanes = block_of_lane();
    const int64_t steps = p.k / 64;
    for (int64_t c = 0; c < steps; ++c, w += 32) {
      _mm_prefetch(reinterpret_cast<const char*>(w + kWeightPrefetchBytes), _MM_HINT_T0);
      const __m512i t = lookup(w, table);
      const __m128 absmax2 = load2(absmax + 2 * c);
      for (int r = 0; r < kRows; ++r) {
        __m512i acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), t, _mm512_loadu_si512(q[r]));
        const __m128i compensation = _mm_slli_epi32(load2(q_sum[r] + 2 * c), 7);
        const __m512i spread = _mm512_permutexvar_epi32(lanes, _mm512_castsi128_si512(compensation));
        acc = _mm512_mask_sub_epi32(acc, 0x0011, acc, spread);  // lanes 0 and 4: the two blocks
        const __m128 s2 = _mm_mul_ps(absmax2, load2(scale[r] + 2 * c));
        const __m512 s = _mm512_permutexvar_ps(lanes, _mm512_castps128_ps512(s2));
        sum[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), s, sum[r]);
        q[r] += 64;
      }
    }
  } else {
    // acc[r] += the products of one block of W with row r's codes.
    auto block_dots = [&](__m512i(&acc)[kRows]) {
      for (int64_t c = 0; c < chunks; ++c, w += 32) {
        _mm_prefetch(reinterpret_cast<const char*>(w + kWeightPrefetchBytes), _MM_HINT_T0);
        const __m512i t = lookup(w, table);
        for (int r = 0; r < kRows; ++r) {
          acc[r] = _mm512_dpbusd_epi32(acc[r], t, _mm512_loadu_si512(q[r]));
          q[r] += 64;
        }
      }
    };
    int64_t b = 0;
    for (; b + 4 <= blocks; b += 4) {
      __m512i acc[4][kRows];
      for (int g = 0; g < 4; ++g) {
        for (int r = 0; r < kRows; ++r) acc[g][r] = _mm512_setzero_si512();
        block_dots(acc[g]);
      }
      const __m128 absmax4 = _mm_loadu_ps(absmax + b);
      for (int r = 0; r < kRows; ++r) {
        // 128 · q_sum of the four blocks, taken off the first 128-bit lane only.
        const __m128i q_sum4 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q_sum[r] + b));
        const __m128i compensation = _mm_slli_epi32(q_sum4, 7);
        const __m512i folded = fold4_epi32(acc[0][r], acc[1][r], acc[2][r], acc[3][r]);
        const __m512i dots = _mm512_mask_sub_epi32(folded, 0x000F, folded, _mm512_broadcast_i32x4(compensation));
        const __m512 s = _mm512_broadcast_f32x4(_mm_mul_ps(absmax4, _mm_loadu_ps(scale[r] + b)));
        sum[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots), s, sum[r]);
      }
    }
    for (; b < blocks; ++b) {
      __m512i acc[kRows];
      for (int r = 0; r < kRows; ++r) acc[r] = _mm512_maskz_set1_epi32(1, -128 * q_sum[r][b]);
      block_dots(acc);
      for (int r = 0; r < kRows; ++r) {
        const float s = absmax[b] * scale[r][b];
        sum[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r]), _mm512_set1_ps(s), sum[r]);
      }
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
  } else if (args.blocksize == 32) {
    panel<-1>(args);
  } else {
    panel<0>(args);
  }
}

}  // namespace weft::precision::quant::kernels
