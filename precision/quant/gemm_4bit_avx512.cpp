// Fused 4-bit dequantize-and-multiply for AVX-512 (F/BW, no VNNI): one zmm per 64 values.
//
// As the AVX2 kernel (gemm_4bit_avx2.cpp): 32 weight bytes are split into their even and odd
// values, which form one zmm (even values in the low half, odd in the high half — the order of
// the prepared activations), looked up with vpshufb and multiplied with vpmaddubsw. AVX-512 has
// no vpsignb, so t·sign(q) is t subtracted from zero under the mask of q's sign bits.
#include "precision/quant/gemm_4bit_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::precision::quant::kernels {
namespace {

constexpr int64_t kMr = 4;

// Two consecutive floats into the low half of a vector.
inline __m128 load2(const float* p) { return _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }

// Weight row n against activation rows i0 .. i0 + kRows - 1, blocks of kChunks · 64 values
// (0: any multiple of 64, read from the arguments; 1 is the default block size's fast case; -1:
// blocks of 32, two to a 64-value step: one product serves both and each int32 lane is scaled by
// its own block's factor; lane l belongs to the step's first block when (l / 4) is even, bytes
// 0-15 and 32-47 of the step being that block's even and odd values).
template <int kRows, int kChunks>
void row_tile(const Gemm4bitArgs& p, int64_t n, int64_t i0) {
  const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p.table)));
  const __m512i ones = _mm512_set1_epi16(1);
  const __m512i zero = _mm512_setzero_si512();
  const int64_t blocks = p.k / p.blocksize, chunks = kChunks > 0 ? kChunks : p.blocksize / 64;
  const uint8_t* w = p.w + n * p.w_stride;
  const float* absmax = p.absmax + n * p.absmax_stride;
  const int8_t* q[kRows];
  const uint8_t* q_abs[kRows];
  const float* scale[kRows];
  __m512 sum[kRows];
  for (int r = 0; r < kRows; ++r) {
    q[r] = p.q + (i0 + r) * p.k;
    q_abs[r] = p.q_abs + (i0 + r) * p.k;
    scale[r] = p.scale + (i0 + r) * blocks;
    sum[r] = _mm512_setzero_ps();
  }
  if constexpr (kChunks < 0) {
    const __m512i lanes = _mm512_set_epi32(1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0);
    const int64_t steps = p.k / 64;
    for (int64_t c = 0; c < steps; ++c, w += 32) {
      _mm_prefetch(reinterpret_cast<const char*>(w + kWeightPrefetchBytes), _MM_HINT_T0);
      const __m512i t = nibbles_looked_up(w, table);
      const __m128 absmax2 = load2(absmax + 2 * c);
      for (int r = 0; r < kRows; ++r) {
        const __m512i qv = _mm512_loadu_si512(q[r]);
        const __m512i signed_t = _mm512_mask_sub_epi8(t, _mm512_movepi8_mask(qv), zero, t);
        const __m512i pairs = _mm512_maddubs_epi16(_mm512_loadu_si512(q_abs[r]), signed_t);
        const __m512i acc = _mm512_madd_epi16(pairs, ones);
        const __m128 s2 = _mm_mul_ps(absmax2, load2(scale[r] + 2 * c));
        const __m512 s = _mm512_permutexvar_ps(lanes, _mm512_castps128_ps512(s2));
        sum[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), s, sum[r]);
        q[r] += 64;
        q_abs[r] += 64;
      }
    }
  } else {
    // acc[r] += the products of one block of W with row r's codes.
    auto block_dots = [&](__m512i(&acc)[kRows]) {
      for (int64_t c = 0; c < chunks; ++c, w += 32) {
        _mm_prefetch(reinterpret_cast<const char*>(w + kWeightPrefetchBytes), _MM_HINT_T0);
        const __m512i t = nibbles_looked_up(w, table);
        for (int r = 0; r < kRows; ++r) {
          const __m512i qv = _mm512_loadu_si512(q[r]);
          const __m512i signed_t = _mm512_mask_sub_epi8(t, _mm512_movepi8_mask(qv), zero, t);
          const __m512i pairs = _mm512_maddubs_epi16(_mm512_loadu_si512(q_abs[r]), signed_t);
          acc[r] = _mm512_add_epi32(acc[r], _mm512_madd_epi16(pairs, ones));
          q[r] += 64;
          q_abs[r] += 64;
        }
      }
    };
    // Four blocks converted and scaled at once (as the VNNI kernel does: gemm_4bit_avx512vnni.cpp).
    int64_t b = 0;
    for (; b + 4 <= blocks; b += 4) {
      __m512i acc[4][kRows];
      for (int g = 0; g < 4; ++g) {
        for (int r = 0; r < kRows; ++r) acc[g][r] = _mm512_setzero_si512();
        block_dots(acc[g]);
      }
      const __m128 absmax4 = _mm_loadu_ps(absmax + b);
      for (int r = 0; r < kRows; ++r) {
        const __m512 s = _mm512_broadcast_f32x4(_mm_mul_ps(absmax4, _mm_loadu_ps(scale[r] + b)));
        const __m512i dots = fold4_epi32(acc[0][r], acc[1][r], acc[2][r], acc[3][r]);
        sum[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots), s, sum[r]);
      }
    }
    for (; b < blocks; ++b) {
      __m512i acc[kRows];
      for (int r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_si512();
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

void gemm_4bit_panel_avx512(const Gemm4bitArgs& args) {
  if (args.blocksize == 64) {
    panel<1>(args);
  } else if (args.blocksize == 32) {
    panel<-1>(args);
  } else {
    panel<0>(args);
  }
}

}  // namespace weft::precision::quant::kernels

namespace weft::precision::quant::kernels {
namespace {

// A block's table: entry c is table[c] · absmax, the one rounding the reference makes, so a value
// is a single vpermps.
inline __m512 scaled_table(__m512 table, float absmax) { return _mm512_mul_ps(table, _mm512_set1_ps(absmax)); }

// The 16 float values of 8 packed bytes, in element order: one vpermps over the block's table.
inline void decode16(const uint8_t* bytes8, __m512 scaled, float* out) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes8));
  const __m128i nibble = _mm_set1_epi8(0x0F);
  const __m128i codes = _mm_unpacklo_epi8(_mm_and_si128(_mm_srli_epi16(bytes, 4), nibble), _mm_and_si128(bytes, nibble));
  _mm512_storeu_ps(out, _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(codes), scaled));
}

// The 64 values of a whole block of 64 from its 32 bytes. The nibbles are split and interleaved
// 32 bytes at a time, which leaves values 0-15 and 32-47 in one vector's halves and 16-31 and
// 48-63 in the other's; each half widens to 16 indices. One core, hot, blocks of 64: 13.8 -> 28-34
// values/ns (scaling the table once a block instead of every value did part of it).
inline void decode64(const uint8_t* bytes32, __m512 scaled, float* out) {
  const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes32));
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  const __m256i high = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), nibble), low = _mm256_and_si256(bytes, nibble);
  const __m256i first = _mm256_unpacklo_epi8(high, low), second = _mm256_unpackhi_epi8(high, low);
  _mm512_storeu_ps(out, _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(first)), scaled));
  _mm512_storeu_ps(out + 16, _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(second)), scaled));
  _mm512_storeu_ps(out + 32, _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(first, 1)), scaled));
  _mm512_storeu_ps(out + 48, _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(second, 1)), scaled));
}

inline float decode_one(const Dequant4bitArgs& p, int64_t i) {
  const uint8_t byte = p.packed[i / 2];
  return p.table[i % 2 == 0 ? byte >> 4 : byte & 0x0F] * p.absmax[i / p.blocksize];
}

}  // namespace

void dequantize_4bit_avx512(const Dequant4bitArgs& p) {
  const __m512 table = _mm512_loadu_ps(p.table);
  int64_t i = p.begin, block = i / p.blocksize;
  if (p.blocksize == 64 && i % 64 == 0)  // the default block size, whole blocks
    for (; i + 64 <= p.end; i += 64, ++block)
      decode64(p.packed + i / 2, scaled_table(table, p.absmax[block]), p.out + (i - p.begin));
  // Block by block: 16 values at a time from an even index, the block's rest one by one. One
  // division per call: a 64-bit division per block cost more than decoding the block's 64 values.
  for (int64_t block_end = (block + 1) * p.blocksize; i < p.end; ++block, block_end += p.blocksize) {
    const int64_t stop = block_end < p.end ? block_end : p.end;
    if (i % 2 != 0) {  // an odd start: one value alone, then whole bytes
      p.out[i - p.begin] = decode_one(p, i);
      ++i;
    }
    const __m512 scaled = scaled_table(table, p.absmax[block]);
    for (; i + 16 <= stop; i += 16) decode16(p.packed + i / 2, scaled, p.out + (i - p.begin));
    for (; i < stop; ++i) p.out[i - p.begin] = decode_one(p, i);
  }
}

}  // namespace weft::precision::quant::kernels

namespace weft::precision::quant::kernels {
namespace {

// A block's table for bf16_values: entry c, table[c] · absmax rounded to bfloat16, in the high
// word of dword c.
inline __m512i block_table(__m512 table, float absmax) {
  return bf16_in_high_words_x16(_mm512_mul_ps(table, _mm512_set1_ps(absmax)));
}

// The bfloat16 values of 16 packed bytes: byte j becomes the dword whose low word is the table's
// entry j >> 4 and high word entry j & 15, the pair of values 2j and 2j+1 in element order. Entry c
// is word 2c + 1 of the table, and vpermw reads five bits of each index word, so the low word's
// index is (j >> 3) | 1 and the high word's the byte shifted up by 17, its bit 0 set: the nibble's
// own bit 4 falls outside the index.
inline __m512i bf16_values(__m128i bytes, __m512i table) {
  const __m512i d = _mm512_cvtepu8_epi32(bytes);
  const __m512i index = _mm512_ternarylogic_epi32(_mm512_srli_epi32(d, 3), _mm512_slli_epi32(d, 17),
                                                  _mm512_set1_epi32(0x00010001), 0xFE);  // a | b | c
  return _mm512_permutexvar_epi16(index, table);
}

// The first `bytes` (at most 16) bytes' values, 2 · bytes words, through a copy: the bytes past
// them are not read (a row's run ending mid-block, once per run).
inline void bf16_values_partial(const uint8_t* packed, int bytes, __m512i table, uint16_t* out) {
  alignas(16) uint8_t some[16] = {};
  for (int b = 0; b < bytes; ++b) some[b] = packed[b];
  alignas(64) uint16_t words[32];
  _mm512_store_si512(words, bf16_values(_mm_load_si128(reinterpret_cast<const __m128i*>(some)), table));
  for (int v = 0; v < 2 * bytes; ++v) out[v] = words[v];
}

}  // namespace

void dequantize_4bit_bf16_avx512(const Dequant4bitBf16Args& p) {
  const __m512 table = _mm512_loadu_ps(p.table);
  int64_t i = p.begin, block = i / p.blocksize;
  if (p.blocksize == 64 && i % 64 == 0) {  // the default block size, whole blocks: two vectors each
    for (; i + 64 <= p.end; i += 64, ++block) {
      const __m512i words = block_table(table, p.absmax[block]);
      const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.packed + i / 2));
      _mm512_storeu_si512(p.out + (i - p.begin), bf16_values(_mm256_castsi256_si128(bytes), words));
      _mm512_storeu_si512(p.out + (i - p.begin) + 32, bf16_values(_mm256_extracti128_si256(bytes, 1), words));
    }
  }
  for (int64_t block_end = (block + 1) * p.blocksize; i < p.end; ++block, block_end += p.blocksize) {
    const int64_t stop = block_end < p.end ? block_end : p.end;
    const __m512i words = block_table(table, p.absmax[block]);
    if (i % 2 != 0) {  // an odd start: the low nibble of a byte alone, then whole bytes
      uint16_t pair[2];
      bf16_values_partial(p.packed + i / 2, 1, words, pair);
      p.out[i - p.begin] = pair[1];
      ++i;
    }
    for (; i + 32 <= stop; i += 32) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p.packed + i / 2));
      _mm512_storeu_si512(p.out + (i - p.begin), bf16_values(bytes, words));
    }
    if (i < stop) {  // the block's last values: whole bytes, and the high nibble of one more
      const int64_t values = stop - i;
      uint16_t rest[32];
      bf16_values_partial(p.packed + i / 2, static_cast<int>((values + 1) / 2), words, rest);
      for (int64_t v = 0; v < values; ++v) p.out[i - p.begin + v] = rest[v];
      i = stop;
    }
  }
}

}  // namespace weft::precision::quant::kernels
