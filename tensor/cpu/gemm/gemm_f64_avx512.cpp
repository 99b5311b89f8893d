// AVX-512 GEMM kernel set for float64 (ISA kernel unit: Note [ISA kernel units] in tensor/cpu/simd.h).
//
// Register tile 6×32: c(6×32) (+)= Σ_p a(:, p) · b(p, :), 24 zmm accumulators of eight doubles
// (four per row), four zmm loads of B and six broadcasts of A per step: the float32 set's 6×64
// tile at half the lanes, for the same reasons (enough independent FMA chains for two FMA units at
// latency 4; a row of C is four cache lines, so six rows put six lines in each of four L1 sets:
// Note [C rows that share cache sets] in gemm_f32_avx512.cpp). Instantiated per row count (1..6)
// and per number of vectors a row needs (1..4); the panels are packed whole, so only C's loads
// and stores are masked.
//
// The packer of lanes with contiguous steps (a row-major A, a B read down its columns) transposes
// 8×8 blocks in registers.
//
// Blocking (Zen 4-5 / Skylake-SP caches): a kc×32 panel of B is 64 KiB at kc = 256 and streams
// from L2 through L1 beside the 12 KiB panel of A; an mc×kc block of A is 384 KiB of a 1-2 MiB L2
// at mc = 192; a kc×nc block of B 4 MiB of L3.
#include "tensor/cpu/gemm/gemm_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

constexpr int kMr = 6, kVectors = 4, kNr = 8 * kVectors;

// All-ones in the first n of 8 lanes (n may be ≤ 0 or ≥ 8).
__mmask8 lane_mask8(int n) { return static_cast<__mmask8>(n <= 0 ? 0 : n >= 8 ? 0xFF : (1u << n) - 1); }

template <int ROWS, int VECTORS>
void tile(const GemmTileF64& t) {
  __m512d acc[ROWS][VECTORS];
#pragma GCC unroll 6
  for (int r = 0; r < ROWS; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < VECTORS; ++v) acc[r][v] = _mm512_setzero_pd();
  // The tiles run down a column of C, whose rows were last touched a K chunk ago: fetched now,
  // they arrive while the FMAs run (as in the float32 set).
#pragma GCC unroll 6
  for (int r = 0; r < ROWS; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < VECTORS; ++v) _mm_prefetch(reinterpret_cast<const char*>(t.c + r * t.ldc + 8 * v), _MM_HINT_T0);

  const double* a = t.a;
  const double* b = t.b;
#pragma GCC unroll 2
  for (int64_t p = 0; p < t.kc; ++p) {
    __m512d bv[VECTORS];
#pragma GCC unroll 4
    for (int v = 0; v < VECTORS; ++v) bv[v] = _mm512_loadu_pd(b + 8 * v);
#pragma GCC unroll 6
    for (int r = 0; r < ROWS; ++r) {
      const __m512d ar = _mm512_set1_pd(a[r]);
#pragma GCC unroll 4
      for (int v = 0; v < VECTORS; ++v) acc[r][v] = _mm512_fmadd_pd(ar, bv[v], acc[r][v]);
    }
    a += kMr;
    b += kNr;
  }

#pragma GCC unroll 6
  for (int r = 0; r < ROWS; ++r) {
    double* c = t.c + r * t.ldc;
#pragma GCC unroll 4
    for (int v = 0; v < VECTORS; ++v) {
      const __mmask8 mask = lane_mask8(t.n - 8 * v);
      if (t.accumulate) acc[r][v] = _mm512_add_pd(acc[r][v], _mm512_maskz_loadu_pd(mask, c + 8 * v));
      _mm512_mask_storeu_pd(c + 8 * v, mask, acc[r][v]);
    }
  }
}

// The tile for t.m rows (1..kMr), chosen at run time from the instantiations for each count.
template <int VECTORS, int ROWS = 1>
void tile_rows(const GemmTileF64& t) {
  if constexpr (ROWS < kMr) {
    if (t.m > ROWS) return tile_rows<VECTORS, ROWS + 1>(t);
  }
  return tile<ROWS, VECTORS>(t);
}

// Up to kVectors zmm a row, as few as t.n columns need.
template <int VECTORS = 1>
void micro(const GemmTileF64& t) {
  if constexpr (VECTORS < kVectors) {
    if (t.n > 8 * VECTORS) return micro<VECTORS + 1>(t);
  }
  return tile_rows<VECTORS>(t);
}

// r[j][i] = r[i][j] for an 8×8 block of doubles: pairs interleaved within 128-bit lanes, then
// 128-bit lanes shuffled twice.
void transpose8x8(__m512d r[8]) {
  __m512d t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm512_unpacklo_pd(r[i], r[i + 1]);  // steps 0, 2, 4, 6 of rows i, i+1
    t[i + 1] = _mm512_unpackhi_pd(r[i], r[i + 1]);  // steps 1, 3, 5, 7
  }
#pragma GCC unroll 2
  for (int h = 0; h < 8; h += 4) {  // rows h..h+3
    u[h + 0] = _mm512_shuffle_f64x2(t[h + 0], t[h + 2], 0x88);  // steps 0, 4
    u[h + 1] = _mm512_shuffle_f64x2(t[h + 0], t[h + 2], 0xDD);  // steps 2, 6
    u[h + 2] = _mm512_shuffle_f64x2(t[h + 1], t[h + 3], 0x88);  // steps 1, 5
    u[h + 3] = _mm512_shuffle_f64x2(t[h + 1], t[h + 3], 0xDD);  // steps 3, 7
  }
  r[0] = _mm512_shuffle_f64x2(u[0], u[4], 0x88);
  r[4] = _mm512_shuffle_f64x2(u[0], u[4], 0xDD);
  r[2] = _mm512_shuffle_f64x2(u[1], u[5], 0x88);
  r[6] = _mm512_shuffle_f64x2(u[1], u[5], 0xDD);
  r[1] = _mm512_shuffle_f64x2(u[2], u[6], 0x88);
  r[5] = _mm512_shuffle_f64x2(u[2], u[6], 0xDD);
  r[3] = _mm512_shuffle_f64x2(u[3], u[7], 0x88);
  r[7] = _mm512_shuffle_f64x2(u[3], u[7], 0xDD);
}

// GemmPackBySteps: each panel in groups of eight lanes, eight steps at a time transposed in
// registers (lanes past `lanes` load as zeros).
void pack_by_steps_avx512(const double* src, int64_t lane_stride, int64_t lanes, int64_t steps, int width,
                          double* dst) {
  for (int64_t l0 = 0; l0 < lanes; l0 += width, dst += steps * width)
    for (int g = 0; g < width; g += 8) {
      const int64_t left = lanes - l0 - g, count = left < 0 ? 0 : left < 8 ? left : 8;
      const __mmask8 store = lane_mask8(width - g);
      const double* group = src + (l0 + g) * lane_stride;
      for (int64_t s0 = 0; s0 < steps; s0 += 8) {
        const int block = steps - s0 < 8 ? static_cast<int>(steps - s0) : 8;
        const __mmask8 load = lane_mask8(block);
        __m512d r[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i)
          r[i] = i < count ? _mm512_maskz_loadu_pd(load, group + i * lane_stride + s0) : _mm512_setzero_pd();
        transpose8x8(r);
        for (int j = 0; j < block; ++j) _mm512_mask_storeu_pd(dst + (s0 + j) * width + g, store, r[j]);
      }
    }
}

}  // namespace

const GemmKernelF64 kGemmF64Avx512 = {
    .name = "avx512 6x32 fp64",
    .mr = kMr, .nr = kNr,
    .mc = 192, .kc = 256, .nc = 2048,
    .micro = micro<>,
    .pack_by_steps = pack_by_steps_avx512,
};

}  // namespace weft::detail
