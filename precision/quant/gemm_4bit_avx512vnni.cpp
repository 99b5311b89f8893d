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
// FMA with the four scales in each lane do the work of four. One activation row in blocks of 64
// (the default) goes further: two steps to a vector, eight blocks to a fold (Note [Two steps to a
// vector] in gemm_4bit_kernels.h).
//
// Note [Weight rows as lanes]: that still leaves, per activation row and 256 values, four
// vpdpbusd against some twenty instructions of folding, compensating and scaling, and the time
// grows with the rows (4096², 2 threads: 0.11 ms for one row, 0.58 for eight). So with several
// activation rows (kLanesMinRows) and blocks of whole 64-value steps, 16 weight rows are decoded
// together and transposed so that each int32 lane is one weight row: a step's 64 values become
// sixteen vectors of four values of each of the 16 rows, and one activation row's dot products
// with all 16 rows are sixteen vpdpbusd with its codes broadcast four at a time. A block's sums then
// need no folding: one compensation, one conversion and one FMA for 16 outputs, the weights'
// decoding and transposition shared by all activation rows. (bitsandbytes avoids the transposition
// by repacking the weight once, on the first forward; weft keeps bitsandbytes' layout, the one its
// state dicts hold. The transposition is not where the time goes: a build that skipped it, wrong
// results and all, was 5 % faster at 5-16 rows.) The pass is compiled for each number of
// activation rows, so that their accumulators are registers: indexed at run time they were an
// array in memory, stored and reloaded every step, and each row's 16 vpdpbusd one dependent chain
// (4096², 2 threads, 2 / 5 / 8 / 16 rows: row kernel 0.16 / 0.32 / 0.40 / 0.63 ms before,
// 0.14 / 0.21 / 0.29 / 0.58 now).
#include "precision/quant/gemm_4bit_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::precision::quant::kernels {
namespace {

constexpr int64_t kMr = 4;

// The int8 table as t + 128 (unsigned, vpdpbusd's first operand) in every 128-bit lane.
inline __m512i unsigned_table(const int8_t* table) {
  const __m512i t = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table)));
  return _mm512_xor_si512(t, _mm512_set1_epi8(-128));
}

// Two consecutive 32-bit values into the low half of a vector.
inline __m128 load2(const float* p) { return _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
inline __m128i load2(const int32_t* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }

// Lane l of a 64-value step's int32 products belongs to the step's first block of 32 values when
// (l / 4) is even: bytes 0-15 and 32-47 of the step are that block's even and odd values.
inline __m512i block_of_lane() { return _mm512_set_epi32(1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0); }

// Weight row n against activation rows i0 .. i0 + kRows - 1, blocks of a multiple of 64 values
// or, with kBlocksOf32, blocks of 32, two to a 64-value step: one vpdpbusd serves both, each lane
// scaled by its own block's factor (block_of_lane), the compensation coming off lanes 0 and 4.
template <int kRows, bool kBlocksOf32>
void row_tile(const Gemm4bitArgs& p, int64_t n, int64_t i0) {
  const __m512i table = unsigned_table(p.table);
  const int64_t blocks = p.k / p.blocksize, chunks = p.blocksize / 64;
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
  if constexpr (kBlocksOf32) {
    const __m512i lanes = block_of_lane();
    const int64_t steps = p.k / 64;
    for (int64_t c = 0; c < steps; ++c, w += 32) {
      _mm_prefetch(reinterpret_cast<const char*>(w + kWeightPrefetchBytes), _MM_HINT_T0);
      const __m512i t = nibbles_looked_up(w, table);
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
        const __m512i t = nibbles_looked_up(w, table);
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
        const __m512i dots = _mm512_mask_sub_epi32(folded, 0x000F, folded, _mm512_castsi128_si512(compensation));
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

// Rows of W per lanes panel (Note [Weight rows as lanes]) and activation rows per pass over it.
constexpr int kLanes = 16, kRowsPerPass = 16;
// Up to this many activation rows, a step's dot products go lane vector by lane vector, each
// against every row in turn: m independent accumulators between two uses of one, where row by row
// each is a chain of 16 vpdpbusd. Above it the 16 lane vectors and the accumulators no longer fit
// the 32 registers together, and row by row is faster (4096², 2 threads, 13 / 14 / 16 rows:
// 0.48 / 0.59 / 0.79 ms lane by lane, 0.50 / 0.51 / 0.57 row by row).
constexpr int kRowsInterleaved = 12;

// One 64-value step of 16 weight rows as lanes: out[j] lane r holds, as unsigned table bytes,
// the four values of row r that the prepared activations keep at bytes 4j .. 4j + 3 (Note [4-bit
// product layout]). The packed bytes are transposed before decoding, as 16 rows × 8 dwords: dword d
// of a row is 4 bytes, whose high nibbles are even values 8d, 8d + 2, 8d + 4, 8d + 6 (activation
// bytes 4d ..) and low nibbles the odd ones (bytes 32 + 4d ..). Rows r and r + 8 share a vector,
// one in each 256-bit half, so the transpose is AVX2's 8 × 8 in both halves at once.
inline void step_as_lanes(const uint8_t* const (&w)[kLanes], int64_t offset, __m512i table, __m512i (&out)[kLanes]) {
  __m512i z[8], t[8], u[8];
  for (int r = 0; r < 8; ++r) {
    const __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r] + offset));
    const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r + 8] + offset));
    z[r] = _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
  }
  for (int r = 0; r < 8; r += 2) {
    t[r] = _mm512_unpacklo_epi32(z[r], z[r + 1]);
    t[r + 1] = _mm512_unpackhi_epi32(z[r], z[r + 1]);
  }
  // u[4a + e], 128-bit lane L of each half: dword 4L' + e of rows 4a .. 4a + 3 (L' = L mod 2).
  for (int a = 0; a < 2; ++a) {
    u[4 * a] = _mm512_unpacklo_epi64(t[4 * a], t[4 * a + 2]);
    u[4 * a + 1] = _mm512_unpackhi_epi64(t[4 * a], t[4 * a + 2]);
    u[4 * a + 2] = _mm512_unpacklo_epi64(t[4 * a + 1], t[4 * a + 3]);
    u[4 * a + 3] = _mm512_unpackhi_epi64(t[4 * a + 1], t[4 * a + 3]);
  }
  // Each half's first 128-bit lanes together (dwords 0-3), then its second ones (dwords 4-7).
  const __m512i first = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
  const __m512i second = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  for (int e = 0; e < 4; ++e) {
    const __m512i dwords[2] = {_mm512_permutex2var_epi64(u[e], first, u[4 + e]),
                               _mm512_permutex2var_epi64(u[e], second, u[4 + e])};
    for (int h = 0; h < 2; ++h) {
      const int d = 4 * h + e;
      out[d] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(dwords[h], 4), nibble));
      out[8 + d] = _mm512_shuffle_epi8(table, _mm512_and_si512(dwords[h], nibble));
    }
  }
}

// acc + the products of lanes' unsigned bytes with the four signed codes at `four`, broadcast.
inline __m512i dot_four(__m512i acc, __m512i lanes, const int8_t* four) {
  int32_t codes;
  __builtin_memcpy(&codes, four, sizeof(codes));
  return _mm512_dpbusd_epi32(acc, lanes, _mm512_set1_epi32(codes));
}

// Weight rows n0 .. n0 + rows - 1 (rows <= 16) against activation rows i0 .. i0 + m - 1 (m <= 16),
// blocks of whole 64-value steps (Note [Weight rows as lanes]). Lanes past `rows` repeat the last
// row and are not stored.
template <int m>
void lanes_pass(const Gemm4bitArgs& p, int64_t n0, int rows, int64_t i0) {
  const __m512i table = unsigned_table(p.table);
  const int64_t blocks = p.k / p.blocksize, chunks = p.blocksize / 64;
  const uint8_t* w[kLanes];
  const float* absmax[kLanes];
  for (int r = 0; r < kLanes; ++r) {
    const int64_t n = n0 + (r < rows ? r : rows - 1);
    w[r] = p.w + n * p.w_stride;
    absmax[r] = p.absmax + n * p.absmax_stride;
  }
  __m512 y[m];
  __m512i acc[m];
#pragma GCC unroll 16
  for (int i = 0; i < m; ++i) y[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
#pragma GCC unroll 16
    for (int i = 0; i < m; ++i) acc[i] = _mm512_setzero_si512();
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t step = b * chunks + c;
      if (step % 2 == 0)  // each row's line 512 bytes ahead, once per line
        for (int r = 0; r < kLanes; ++r)
          _mm_prefetch(reinterpret_cast<const char*>(w[r] + step * 32 + kWeightPrefetchBytes / 4), _MM_HINT_T0);
      __m512i lanes[kLanes];
      step_as_lanes(w, step * 32, table, lanes);
      const int8_t* q = p.q + i0 * p.k + step * 64;
      if constexpr (m <= kRowsInterleaved) {
#pragma GCC unroll 16
        for (int j = 0; j < kLanes; ++j)
#pragma GCC unroll 16
          for (int i = 0; i < m; ++i) acc[i] = dot_four(acc[i], lanes[j], q + i * p.k + 4 * j);
      } else {
#pragma GCC unroll 16
        for (int i = 0; i < m; ++i) {
          const int8_t* row = p.q + (i0 + i) * p.k + step * 64;
          __m512i sum = acc[i];
          for (int j = 0; j < kLanes; ++j) sum = dot_four(sum, lanes[j], row + 4 * j);
          acc[i] = sum;
        }
      }
    }
    alignas(64) float block_absmax[kLanes];
    for (int r = 0; r < kLanes; ++r) block_absmax[r] = absmax[r][b];
    const __m512 am = _mm512_load_ps(block_absmax);
#pragma GCC unroll 16
    for (int i = 0; i < m; ++i) {
      const int64_t at = (i0 + i) * blocks + b;
      const __m512i dots = _mm512_sub_epi32(acc[i], _mm512_set1_epi32(128 * p.q_sum[at]));
      y[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots), _mm512_mul_ps(am, _mm512_set1_ps(p.scale[at])), y[i]);
    }
  }
  for (int i = 0; i < m; ++i) {
    alignas(64) float out[kLanes];
    _mm512_store_ps(out, y[i]);
    for (int r = 0; r < rows; ++r) p.y[(i0 + i) * p.y_stride + (n0 + r) * p.y_col_stride] = out[r];
  }
}

void lanes_panel(const Gemm4bitArgs& args) {
  for (int64_t n0 = 0; n0 < args.rows; n0 += kLanes)
    for (int64_t i0 = 0; i0 < args.m; i0 += kRowsPerPass) {
      const auto rows = static_cast<int>(args.rows - n0 < kLanes ? args.rows - n0 : kLanes);
      const auto m = static_cast<int>(args.m - i0 < kRowsPerPass ? args.m - i0 : kRowsPerPass);
      switch (m) {
        case 1: lanes_pass<1>(args, n0, rows, i0); break;
        case 2: lanes_pass<2>(args, n0, rows, i0); break;
        case 3: lanes_pass<3>(args, n0, rows, i0); break;
        case 4: lanes_pass<4>(args, n0, rows, i0); break;
        case 5: lanes_pass<5>(args, n0, rows, i0); break;
        case 6: lanes_pass<6>(args, n0, rows, i0); break;
        case 7: lanes_pass<7>(args, n0, rows, i0); break;
        case 8: lanes_pass<8>(args, n0, rows, i0); break;
        case 9: lanes_pass<9>(args, n0, rows, i0); break;
        case 10: lanes_pass<10>(args, n0, rows, i0); break;
        case 11: lanes_pass<11>(args, n0, rows, i0); break;
        case 12: lanes_pass<12>(args, n0, rows, i0); break;
        case 13: lanes_pass<13>(args, n0, rows, i0); break;
        case 14: lanes_pass<14>(args, n0, rows, i0); break;
        case 15: lanes_pass<15>(args, n0, rows, i0); break;
        default: lanes_pass<16>(args, n0, rows, i0); break;
      }
    }
}

template <bool kBlocksOf32>
void panel(const Gemm4bitArgs& args) {
  for (int64_t n = 0; n < args.rows; ++n) {
    int64_t i = 0;
    for (; i + kMr <= args.m; i += kMr) row_tile<kMr, kBlocksOf32>(args, n, i);
    switch (args.m - i) {
      case 3: row_tile<3, kBlocksOf32>(args, n, i); break;
      case 2: row_tile<2, kBlocksOf32>(args, n, i); break;
      case 1: row_tile<1, kBlocksOf32>(args, n, i); break;
      default: break;
    }
  }
}

// Weight row n against the one activation row, blocks of 64, two steps to a vector (Note [Two
// steps to a vector] in gemm_4bit_kernels.h). Zen 4 issues about one 512-bit operation of these
// kinds per cycle, so their count is the time: the row kernel spent on each 64 values a shift,
// and, lookup and vpdpbusd and a quarter of a four-block fold with its compensation and scaling;
// here two steps share one load and shift, and eight blocks one fold. 4096², Zen 4: one core 1.53
// -> 0.90-0.95 ns per 64 values, two threads 0.205 -> 0.121 ms.
void gemv_pairs_row(const Gemm4bitArgs& p, int64_t n, __m512i table) {
  const int64_t groups = p.k / 512, blocks = p.k / 64;
  const uint8_t* w = p.w + n * p.w_stride;
  const float* absmax = p.absmax + n * p.absmax_stride;
  const __m512i lane_block = _mm512_loadu_si512(kPairLaneBlock);
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  const int8_t* q = p.q_pairs;
  __m512 sum = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    __m512i acc[4];
    for (int j = 0; j < 4; ++j, w += 64, q += 128) {
      _mm_prefetch(reinterpret_cast<const char*>(w + kWeightPrefetchBytes), _MM_HINT_T0);
      const __m512i bytes = _mm512_loadu_si512(w);
      const __m512i evens = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(bytes, 4), nibble));
      const __m512i odds = _mm512_shuffle_epi8(table, _mm512_and_si512(bytes, nibble));
      acc[j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), evens, _mm512_loadu_si512(q));
      acc[j] = _mm512_dpbusd_epi32(acc[j], odds, _mm512_loadu_si512(q + 64));
    }
    const __m512i dots = _mm512_sub_epi32(fold4_epi32(acc[0], acc[1], acc[2], acc[3]),
                                          _mm512_loadu_si512(p.pair_compensation + 16 * g));
    const __m512 eight_absmax = _mm512_castps256_ps512(_mm256_loadu_ps(absmax + 8 * g));
    const __m512 s =
        _mm512_mul_ps(_mm512_permutexvar_ps(lane_block, eight_absmax), _mm512_loadu_ps(p.pair_scale + 16 * g));
    sum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots), s, sum);
  }
  for (int64_t b = groups * 8; b < blocks; ++b, w += 32) {  // the blocks after the last eight, one by one
    __m512i acc = _mm512_maskz_set1_epi32(1, -128 * p.q_sum[b]);
    acc = _mm512_dpbusd_epi32(acc, nibbles_looked_up(w, table), _mm512_loadu_si512(p.q + 64 * b));
    sum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_set1_ps(absmax[b] * p.scale[b]), sum);
  }
  p.y[n * p.y_col_stride] = _mm512_reduce_add_ps(sum);
}

void gemv_pairs_panel(const Gemm4bitArgs& args) {
  const __m512i table = unsigned_table(args.table);
  for (int64_t n = 0; n < args.rows; ++n) gemv_pairs_row(args, n, table);
}

}  // namespace

void gemm_4bit_panel_avx512vnni(const Gemm4bitArgs& args) {
  if (args.m >= kLanesMinRows && args.blocksize % 64 == 0) {  // Note [Weight rows as lanes]
    lanes_panel(args);
  } else if (args.q_pairs != nullptr) {  // one row in blocks of 64 (Note [Two steps to a vector])
    gemv_pairs_panel(args);
  } else if (args.blocksize == 32) {
    panel<true>(args);
  } else {
    panel<false>(args);
  }
}

}  // namespace weft::precision::quant::kernels
