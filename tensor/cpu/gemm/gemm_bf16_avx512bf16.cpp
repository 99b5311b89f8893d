// AVX-512 BF16 GEMM kernel set: bfloat16 inputs, float32 accumulation (ISA kernel unit: Note [ISA
// kernel units] in tensor/cpu/simd.h).
//
// Register tile 12×32 over K-pairs (Note [bf16 K-pair panels] in packing.h): per pair step q,
// two zmm loads of B hold 32 columns × 2 steps, each row of A is one 32-bit broadcast of its two
// values, and vdpbf16ps adds a(i,2q)·b(2q,j) + a(i,2q+1)·b(2q+1,j) into fp32 lane j:
//   c(12×32) (+)= Σ_q A(:, 2q..2q+1) · B(2q..2q+1, :)
// 24 accumulators: vdpbf16ps has latency 6 on Zen 5 with two pipes, so 12 chains are the minimum.
// C is float32, or bfloat16 rounded in the tile's own stores (gemm_to_bf16 in gemm.h). A is a
// packed panel, or rows read in place (a 4-bit weight's rows made a strip at a time by a source).
// The instruction rounds after each of its two products and treats bf16 and fp32 denormals as
// zero, so results differ from the float32 kernels in the last bits; tests compare with a tolerance.
#include "tensor/cpu/gemm/gemm_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

constexpr int kMr = 12, kNr = 32;
// A source whose steps are rows (row-major B) is packed this many pairs at a time across all its
// panels: whole rows are read, not one panel's 64 bytes of each row down all K rows (2 KB apart
// at N = 1024: a new page every other row).
constexpr int64_t kPairsPerSweep = 8;

__m512bh as_bf16x32(__m512i v) {
  __m512bh r;
  __builtin_memcpy(&r, &v, sizeof(r));
  return r;
}

// The two bfloat16 values at p, as one 32-bit lane broadcast to all 16.
__m512bh broadcast_pair(const uint16_t* p) {
  int32_t pair;
  __builtin_memcpy(&pair, p, sizeof(pair));
  return as_bf16x32(_mm512_set1_epi32(pair));
}

template <int ROWS, bool PACKED_A>
void tile(const GemmTileBf16& t) {
  __m512 c0[ROWS], c1[ROWS];
#pragma GCC unroll 12
  for (int r = 0; r < ROWS; ++r) c0[r] = c1[r] = _mm512_setzero_ps();
  // The driver runs the tiles down a column of C, so each tile's rows are far apart and were last
  // touched a whole K chunk ago: fetched now, they arrive while the dot products run instead of
  // stalling the stores at the end. Zen 5, 2 threads: 512³ 815 -> 905, 2048³ 709 -> 880 GFLOP/s.
#pragma GCC unroll 12
  for (int r = 0; r < ROWS; ++r) {
    if (t.c_bf16) {
      _mm_prefetch(reinterpret_cast<const char*>(t.c_bf16 + r * t.ldc), _MM_HINT_T0);
    } else {
      _mm_prefetch(reinterpret_cast<const char*>(t.c + r * t.ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(t.c + r * t.ldc + 16), _MM_HINT_T0);
    }
  }
  // A read in place is up to twelve rows lda apart, addressed as the float32 kernel addresses its
  // rows read in place: a pointer per three rows, rows 3j + {0, 1, 2} at base_j + {0, 1, 2}·lda.
  const int64_t lda = PACKED_A ? 2 : t.lda, step = PACKED_A ? kMr * 2 : 2;
  constexpr int kBases = PACKED_A ? 1 : (ROWS + 2) / 3;
  const uint16_t* base[kBases];
#pragma GCC unroll 4
  for (int j = 0; j < kBases; ++j) base[j] = t.a + 3 * j * lda;
  const uint16_t* b = t.b;
#pragma GCC unroll 2
  for (int64_t q = 0; q < t.kpairs; ++q) {
    const __m512bh b0 = as_bf16x32(_mm512_loadu_si512(b));
    const __m512bh b1 = as_bf16x32(_mm512_loadu_si512(b + 32));
#pragma GCC unroll 12
    for (int r = 0; r < ROWS; ++r) {
      const __m512bh ar = broadcast_pair(PACKED_A ? base[0] + r * 2 : base[r / 3] + (r % 3) * lda);
      c0[r] = _mm512_dpbf16_ps(c0[r], ar, b0);
      c1[r] = _mm512_dpbf16_ps(c1[r], ar, b1);
    }
#pragma GCC unroll 4
    for (int j = 0; j < kBases; ++j) base[j] += step;
    b += kNr * 2;
  }

  if (t.c_bf16) {  // a row of the tile is 32 bfloat16: one 64-byte load and store
    const __mmask32 row = lane_mask32(t.n);
#pragma GCC unroll 12
    for (int r = 0; r < ROWS; ++r) {
      uint16_t* c = t.c_bf16 + r * t.ldc;
      if (t.accumulate) {
        const __m512i old = _mm512_maskz_loadu_epi16(row, c);
        c0[r] = _mm512_add_ps(c0[r], bf16_to_float_x16(_mm512_castsi512_si256(old)));
        c1[r] = _mm512_add_ps(c1[r], bf16_to_float_x16(_mm512_extracti64x4_epi64(old, 1)));
      }
      // Rounded by the instruction where it can (simd.h): at K = 128 the stores were a tenth of
      // a tile's time (one core, 12×32 tiles in L1: 201-204 -> 190-195 ns a tile).
      _mm512_mask_storeu_epi16(c, row, float_to_bf16_x32_vcvt(c0[r], c1[r]));
    }
    return;
  }
  const __mmask16 m0 = lane_mask(t.n), m1 = lane_mask(t.n - 16);
#pragma GCC unroll 12
  for (int r = 0; r < ROWS; ++r) {
    float* c = t.c + r * t.ldc;
    if (t.accumulate) {
      c0[r] = _mm512_add_ps(c0[r], _mm512_maskz_loadu_ps(m0, c));
      c1[r] = _mm512_add_ps(c1[r], _mm512_maskz_loadu_ps(m1, c + 16));
    }
    _mm512_mask_storeu_ps(c, m0, c0[r]);
    _mm512_mask_storeu_ps(c + 16, m1, c1[r]);
  }
}

// The fast packers of K-pair panels (Note [bf16 K-pair panels] in packing.h), one panel of
// `width` lanes (B: 32 columns, A: 12 rows) from a source whose lanes are `lane_stride` apart and
// steps `step_stride` apart; lanes past `lanes`, steps past `steps` and pairs past them are zero.
// The scalar reference is pack_panel_pairs in packing.cpp.
//
// Each lane's steps adjacent (x·Wᵀ's B, a row-major A): a pair is one 32-bit word, so 16 lanes ×
// 16 pairs are one load per lane and, transposed in registers, one store per pair.
void pack_pairs_by_lanes(const uint16_t* src, int64_t lane_stride, int lanes, int64_t steps, int64_t pairs,
                         int width, uint16_t* dst) {
  const int64_t filled = (steps + 1) / 2 < pairs ? (steps + 1) / 2 : pairs;
  for (int first = 0; first < width; first += 16) {
    const int count = lanes - first;
    const __mmask16 store = lane_mask(width - first);
    for (int64_t q0 = 0; q0 < filled; q0 += 16) {
      const __mmask32 load = lane_mask32(steps - 2 * q0);
      __m512i r[16];
      for (int l = 0; l < 16; ++l)
        r[l] = l < count ? _mm512_maskz_loadu_epi16(load, src + (first + l) * lane_stride + 2 * q0)
                         : _mm512_setzero_si512();
      transpose16x16_epi32(r);
      const int64_t run = filled - q0 < 16 ? filled - q0 : 16;
      for (int64_t q = 0; q < run; ++q) _mm512_mask_storeu_epi32(dst + ((q0 + q) * width + first) * 2, store, r[q]);
    }
    for (int64_t q = filled; q < pairs; ++q)
      _mm512_mask_storeu_epi32(dst + (q * width + first) * 2, store, _mm512_setzero_si512());
  }
}

// Each step's lanes adjacent (a row-major B, gᵀ as A): pair q interleaves steps 2q and 2q + 1,
// 16 lanes at a time, with one two-source permute of 16-bit words. Pairs q_begin..q_end of one panel.
void pack_pairs_by_steps(const uint16_t* src, int64_t step_stride, int lanes, int64_t steps, int64_t q_begin,
                         int64_t q_end, int width, uint16_t* dst) {
  const __m512i low = _mm512_load_si512(kBf16PairInterleave[0]), high = _mm512_load_si512(kBf16PairInterleave[1]);
  dst += q_begin * width * 2;
  for (int64_t q = q_begin; q < q_end; ++q, dst += width * 2) {
    const uint16_t* first_step = src + 2 * q * step_stride;
    if (width == 32 && lanes == 32 && 2 * q + 1 < steps) {  // a whole panel, both steps: 2 loads, 2 stores
      const __m512i even = _mm512_loadu_si512(first_step), odd = _mm512_loadu_si512(first_step + step_stride);
      _mm512_storeu_si512(dst, _mm512_permutex2var_epi16(even, low, odd));
      _mm512_storeu_si512(dst + 32, _mm512_permutex2var_epi16(even, high, odd));
      continue;
    }
    for (int first = 0; first < width; first += 16) {
      const int count = lanes - first;
      const __mmask32 load = lane_mask32(count < 16 ? count : 16);
      const __m512i even = 2 * q < steps ? _mm512_maskz_loadu_epi16(load, first_step + first) : _mm512_setzero_si512();
      const __m512i odd = 2 * q + 1 < steps ? _mm512_maskz_loadu_epi16(load, first_step + step_stride + first)
                                            : _mm512_setzero_si512();
      _mm512_mask_storeu_epi32(dst + first * 2, lane_mask(width - first), _mm512_permutex2var_epi16(even, low, odd));
    }
  }
}

}  // namespace

bool pack_pairs_avx512(const uint16_t* src, int64_t lane_stride, int64_t step_stride, int64_t lanes, int64_t steps,
                       int64_t pairs, int width, uint16_t* dst) {
  if (lane_stride != 1 && step_stride != 1) return false;
  auto count_at = [&](int64_t l0) { return lanes - l0 < width ? static_cast<int>(lanes - l0) : width; };
  if (step_stride == 1) {
    for (int64_t l0 = 0; l0 < lanes; l0 += width, dst += pairs * width * 2)
      pack_pairs_by_lanes(src + l0 * lane_stride, lane_stride, count_at(l0), steps, pairs, width, dst);
    return true;
  }
  for (int64_t q0 = 0; q0 < pairs; q0 += kPairsPerSweep) {
    const int64_t q_end = pairs - q0 < kPairsPerSweep ? pairs : q0 + kPairsPerSweep;
    for (int64_t l0 = 0; l0 < lanes; l0 += width)
      pack_pairs_by_steps(src + l0, step_stride, count_at(l0), steps, q0, q_end, width,
                          dst + l0 / width * pairs * width * 2);
  }
  return true;
}

namespace {

template <bool PACKED_A>
void micro_rows(const GemmTileBf16& t) {
  switch (t.m) {
    case 1: return tile<1, PACKED_A>(t);
    case 2: return tile<2, PACKED_A>(t);
    case 3: return tile<3, PACKED_A>(t);
    case 4: return tile<4, PACKED_A>(t);
    case 5: return tile<5, PACKED_A>(t);
    case 6: return tile<6, PACKED_A>(t);
    case 7: return tile<7, PACKED_A>(t);
    case 8: return tile<8, PACKED_A>(t);
    case 9: return tile<9, PACKED_A>(t);
    case 10: return tile<10, PACKED_A>(t);
    case 11: return tile<11, PACKED_A>(t);
    default: return tile<12, PACKED_A>(t);
  }
}

void micro_bf16(const GemmTileBf16& t) { return t.a_packed ? micro_rows<true>(t) : micro_rows<false>(t); }

}  // namespace

const GemmKernel kGemmBf16Avx512Bf16 = {
    .name = "avx512_bf16 12x32",
    .mr = kMr, .nr = kNr,
    .mc = 384, .kc = 1024, .nc = 4096,  // kc counts bf16 steps: 512 pairs; MLP forward K = 784 in one chunk
    .bf16_pairs = true,
    .micro_f32 = nullptr,
    .micro_bf16 = micro_bf16,
    .pack_b = nullptr,
    .pack_a = nullptr,
    .dot_rows = nullptr,
    .pack_pairs = pack_pairs_avx512,
    .stores_bf16 = true,
    .a_rows_in_place = true,
};

}  // namespace weft::detail
