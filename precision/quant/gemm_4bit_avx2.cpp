// Fused 4-bit dequantize-and-multiply for AVX2: vpshufb table lookup, vpmaddubsw sign trick.
//
// Per 32 bytes of a weight row (64 values): split the nibbles (high = even values, low = odd),
// look both halves up in the int8 table with vpshufb, and for every activation row multiply them
// with its int8 codes: vpmaddubsw(|q|, t·sign(q)) then vpmaddwd with ones (|q|, |t| <= 127, so no
// int16 saturation). The int32 lanes of four blocks are folded together (each 128-bit half then
// holds a partial sum of each block), converted and added, scaled by the four blocks' absmax ·
// scale, into a float accumulator; the 8 lanes are summed at the end of the row (Note [4-bit
// product layout] in gemm_4bit_kernels.h). Converting and scaling block by block took a third of
// the time at 64-value blocks.
//
// The weight bytes are split once and used by up to 4 activation rows. A lone activation row
// (GEMV) converts and scales its block dots eight blocks at a time (row_gemv).
#include "precision/quant/gemm_4bit_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::precision::quant::kernels {
namespace {

constexpr int64_t kMr = 4;

inline float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// acc += Σ t·q over 32 byte lanes, in 8 int32 lanes.
inline __m256i dot(__m256i acc, __m256i t, const int8_t* q, const uint8_t* q_abs, __m256i ones) {
  const __m256i pairs = _mm256_maddubs_epi16(load(q_abs), _mm256_sign_epi8(t, load(q)));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
}

// The format's int8 table, in both 128-bit halves for vpshufb.
inline __m256i load_table(const Gemm4bitArgs& p) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p.table)));
}

// The table values of the 64 codes in 32 bytes of a weight row: the high nibbles (even values)
// and the low nibbles (odd values).
struct ChunkValues {
  __m256i even, odd;
};

inline ChunkValues look_up(const uint8_t* w, __m256i table) {
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  const __m256i bytes = load(w);
  return {_mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(bytes, 4), nibble)),
          _mm256_shuffle_epi8(table, _mm256_and_si256(bytes, nibble))};
}

// Two consecutive floats into the low half of a vector.
inline __m128 load2(const float* p) { return _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }

// Weight row n against activation rows i0 .. i0 + kRows - 1, blocks of kChunks · 64 values
// (0: any multiple of 64, read from the arguments; 1 is the default block size's fast case; -1:
// blocks of 32, two to a 64-value step: in each half-step vector, the 32 even or the 32 odd
// values, bytes 0-15 belong to the step's first block and 16-31 to its second, so int32 lanes 0-3
// of the products are the first block's and 4-7 the second's, each scaled by its own factor).
template <int kRows, int kChunks>
void row_tile(const Gemm4bitArgs& p, int64_t n, int64_t i0) {
  const __m256i table = load_table(p);
  const __m256i ones = _mm256_set1_epi16(1);
  const int64_t blocks = p.k / p.blocksize, chunks = kChunks > 0 ? kChunks : p.blocksize / 64;
  const uint8_t* w = p.w + n * p.w_stride;
  const float* absmax = p.absmax + n * p.absmax_stride;
  const int8_t* q[kRows];
  const uint8_t* q_abs[kRows];
  const float* scale[kRows];
  __m256 sum[kRows];
  for (int r = 0; r < kRows; ++r) {
    q[r] = p.q + (i0 + r) * p.k;
    q_abs[r] = p.q_abs + (i0 + r) * p.k;
    scale[r] = p.scale + (i0 + r) * blocks;
    sum[r] = _mm256_setzero_ps();
  }
  if constexpr (kChunks < 0) {
    const __m256i lanes = _mm256_set_epi32(1, 1, 1, 1, 0, 0, 0, 0);
    const int64_t steps = p.k / 64;
    for (int64_t c = 0; c < steps; ++c, w += 32) {
      _mm_prefetch(reinterpret_cast<const char*>(w + kWeightPrefetchBytes), _MM_HINT_T0);
      const ChunkValues t = look_up(w, table);
      const __m128 absmax2 = load2(absmax + 2 * c);
      for (int r = 0; r < kRows; ++r) {
        __m256i acc = dot(_mm256_setzero_si256(), t.even, q[r], q_abs[r], ones);
        acc = dot(acc, t.odd, q[r] + 32, q_abs[r] + 32, ones);
        const __m128 s2 = _mm_mul_ps(absmax2, load2(scale[r] + 2 * c));
        const __m256 s = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(s2), lanes);
        sum[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), s, sum[r]);
        q[r] += 64;
        q_abs[r] += 64;
      }
    }
  } else {
    // acc[r] = the products of the next block of W with row r's codes.
    auto block_dots = [&](__m256i(&acc)[kRows]) {
      for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_si256();
      for (int64_t c = 0; c < chunks; ++c, w += 32) {
        _mm_prefetch(reinterpret_cast<const char*>(w + kWeightPrefetchBytes), _MM_HINT_T0);
        const ChunkValues t = look_up(w, table);
        for (int r = 0; r < kRows; ++r) {
          acc[r] = dot(acc[r], t.even, q[r], q_abs[r], ones);
          acc[r] = dot(acc[r], t.odd, q[r] + 32, q_abs[r] + 32, ones);
          q[r] += 64;
          q_abs[r] += 64;
        }
      }
    };
    // Four blocks converted and scaled at once: their lanes are folded pairwise as they come (two
    // registers a row, not four), so that each 128-bit half holds a partial sum of each block.
    int64_t b = 0;
    for (; b + 4 <= blocks; b += 4) {
      __m256i acc[kRows], pair[kRows];
      block_dots(acc);
      for (int r = 0; r < kRows; ++r) pair[r] = acc[r];
      block_dots(acc);
      for (int r = 0; r < kRows; ++r) pair[r] = _mm256_hadd_epi32(pair[r], acc[r]);  // blocks 0 0 1 1 per half
      __m256i second[kRows];
      block_dots(acc);
      for (int r = 0; r < kRows; ++r) second[r] = acc[r];
      block_dots(acc);
      const __m128 absmax4 = _mm_loadu_ps(absmax + b);
      for (int r = 0; r < kRows; ++r) {
        const __m256i dots = _mm256_hadd_epi32(pair[r], _mm256_hadd_epi32(second[r], acc[r]));  // 0 1 2 3 per half
        const __m128 s = _mm_mul_ps(absmax4, _mm_loadu_ps(scale[r] + b));
        sum[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots), _mm256_set_m128(s, s), sum[r]);
      }
    }
    for (; b < blocks; ++b) {
      __m256i acc[kRows];
      block_dots(acc);
      for (int r = 0; r < kRows; ++r) {
        const float s = absmax[b] * scale[r][b];
        sum[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r]), _mm256_set1_ps(s), sum[r]);
      }
    }
  }
  for (int r = 0; r < kRows; ++r) p.y[(i0 + r) * p.y_stride + n * p.y_col_stride] = horizontal_sum(sum[r]);
}

// Lane j of the result is the sum of the eight int32 lanes of v[j].
inline __m256i lane_sums(const __m256i v[8]) {
  const __m256i h01 = _mm256_hadd_epi32(v[0], v[1]), h23 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i h45 = _mm256_hadd_epi32(v[4], v[5]), h67 = _mm256_hadd_epi32(v[6], v[7]);
  // Per 128-bit half: blocks 0-3 (of h0123) and 4-7 (of h4567), each summed over that half's lanes.
  const __m256i h0123 = _mm256_hadd_epi32(h01, h23), h4567 = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(h0123, h4567, 0x20),
                          _mm256_permute2x128_si256(h0123, h4567, 0x31));
}

inline int32_t horizontal_sum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

// Weight row n against activation row i: row_tile's sums for one row, but the per-block
// conversion and scaling, as costly as the block's products at 64 values a block, are done eight
// blocks at a time: their int32 dots are gathered into one vector, converted once and multiplied
// by eight absmax · scale products loaded side by side. GEMV (M = 1) is the case that needs it:
// its weights are read once, so the kernel's work per byte decides its speed.
template <int kChunks>
void row_gemv(const Gemm4bitArgs& p, int64_t n, int64_t i) {
  if constexpr (kChunks < 0) {  // blocks of 32: row_tile_32 already scales a step's two at once
    return row_tile<1, kChunks>(p, n, i);
  }
  const __m256i table = load_table(p);
  const __m256i ones = _mm256_set1_epi16(1);
  const int64_t blocks = p.k / p.blocksize, chunks = kChunks > 0 ? kChunks : p.blocksize / 64;
  const uint8_t* w = p.w + n * p.w_stride;
  const float* absmax = p.absmax + n * p.absmax_stride;
  const float* scale = p.scale + i * blocks;
  const int8_t* q = p.q + i * p.k;
  const uint8_t* q_abs = p.q_abs + i * p.k;
  // The dot of the next block, moving w, q and q_abs past it.
  auto block_dot = [&] {
    __m256i acc = _mm256_setzero_si256();
    for (int64_t c = 0; c < chunks; ++c, w += 32, q += 64, q_abs += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(w + kWeightPrefetchBytes), _MM_HINT_T0);
      const ChunkValues t = look_up(w, table);
      acc = dot(acc, t.even, q, q_abs, ones);
      acc = dot(acc, t.odd, q + 32, q_abs + 32, ones);
    }
    return acc;
  };
  __m256 sum = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 8 <= blocks; b += 8) {
    __m256i dots[8];
    for (int j = 0; j < 8; ++j) dots[j] = block_dot();
    const __m256 s = _mm256_mul_ps(_mm256_loadu_ps(absmax + b), _mm256_loadu_ps(scale + b));
    sum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lane_sums(dots)), s, sum);
  }
  float y = horizontal_sum(sum);
  for (; b < blocks; ++b) y += static_cast<float>(horizontal_sum(block_dot())) * (absmax[b] * scale[b]);
  p.y[i * p.y_stride + n * p.y_col_stride] = y;
}

template <int kChunks>
void panel(const Gemm4bitArgs& args) {
  for (int64_t n = 0; n < args.rows; ++n) {
    int64_t i = 0;
    for (; i + kMr <= args.m; i += kMr) row_tile<kMr, kChunks>(args, n, i);
    switch (args.m - i) {
      case 3: row_tile<3, kChunks>(args, n, i); break;
      case 2: row_tile<2, kChunks>(args, n, i); break;
      case 1: row_gemv<kChunks>(args, n, i); break;
      default: break;
    }
  }
}

}  // namespace

void gemm_4bit_panel_avx2(const Gemm4bitArgs& args) {
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

// The 16 float values of 8 packed bytes, in element order (each byte's high nibble first):
// vpermps looks the codes up in both halves of the block's table (entry c is table[c] · absmax, the
// one rounding the reference makes), bit 3 of the code chooses. Scaling the table once a block
// instead of every value: 12.1 -> 14.0 values/ns (one core, hot, Zen 5).
inline void decode16(const uint8_t* bytes8, __m256 table_lo, __m256 table_hi, float* out) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes8));
  const __m128i nibble = _mm_set1_epi8(0x0F);
  const __m128i codes = _mm_unpacklo_epi8(_mm_and_si128(_mm_srli_epi16(bytes, 4), nibble), _mm_and_si128(bytes, nibble));
  for (int half = 0; half < 2; ++half) {
    const __m256i idx = _mm256_cvtepu8_epi32(half == 0 ? codes : _mm_srli_si128(codes, 8));
    const __m256 lo = _mm256_permutevar8x32_ps(table_lo, idx);
    const __m256 hi = _mm256_permutevar8x32_ps(table_hi, idx);
    const __m256 value = _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
    _mm256_storeu_ps(out + 8 * half, value);
  }
}

inline float decode_one(const Dequant4bitArgs& p, int64_t i) {
  const uint8_t byte = p.packed[i / 2];
  return p.table[i % 2 == 0 ? byte >> 4 : byte & 0x0F] * p.absmax[i / p.blocksize];
}

}  // namespace

void dequantize_4bit_avx2(const Dequant4bitArgs& p) {
  const __m256 table_lo = _mm256_loadu_ps(p.table), table_hi = _mm256_loadu_ps(p.table + 8);
  // Block by block: 16 values at a time from an even index, the block's rest one by one. One
  // division per call: a 64-bit division per block cost more than decoding the block's 64 values.
  int64_t i = p.begin, block = i / p.blocksize;
  for (int64_t block_end = (block + 1) * p.blocksize; i < p.end; ++block, block_end += p.blocksize) {
    const int64_t stop = block_end < p.end ? block_end : p.end;
    if (i % 2 != 0) {  // an odd start: one value alone, then whole bytes
      p.out[i - p.begin] = decode_one(p, i);
      ++i;
    }
    const __m256 scale = _mm256_set1_ps(p.absmax[block]);
    const __m256 scaled_lo = _mm256_mul_ps(table_lo, scale), scaled_hi = _mm256_mul_ps(table_hi, scale);
    for (; i + 16 <= stop; i += 16) decode16(p.packed + i / 2, scaled_lo, scaled_hi, p.out + (i - p.begin));
    for (; i < stop; ++i) p.out[i - p.begin] = decode_one(p, i);
  }
}

}  // namespace weft::precision::quant::kernels
