// AVX2 + FMA GEMM kernel set for float64 (ISA kernel unit: Note [ISA kernel units] in tensor/cpu/simd.h).
//
// Register tile 6×8: c(6×8) (+)= Σ_p a(:, p) · b(p, :), 12 ymm accumulators of four doubles (two
// per row), two ymm loads of B and six broadcasts of A per step: the float32 set's 6×16 tile at
// half the lanes (12 independent chains for two FMA pipes at latency 4-5; 12 + 2 + 1 of the 16 ymm
// registers). Instantiated per row count (1..6) and for tiles of at most four columns (one ymm a
// row); the panels are packed whole, so only C's loads and stores are masked.
//
// The packer of lanes with contiguous steps (a row-major A, a B read down its columns) transposes
// 4×4 blocks in registers.
//
// Blocking (Zen 3 / Haswell-class caches): a kc×8 panel of B is 16 KiB at kc = 256 (half of L1),
// an mc×kc block of A 288 KiB of a 512 KiB L2 at mc = 144, a kc×nc block of B 4 MiB of L3.
#include "tensor/cpu/gemm/gemm_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

constexpr int kMr = 6, kNr = 8;

// All-ones in the first n of 4 lanes of 64 bits (n may be ≤ 0 or ≥ 4).
__m256i lane_mask4(int n) {
  return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3));
}

template <int ROWS, int HALVES>
void tile(const GemmTileF64& t) {
  __m256d c0[ROWS], c1[ROWS];
#pragma GCC unroll 6
  for (int r = 0; r < ROWS; ++r) c0[r] = c1[r] = _mm256_setzero_pd();
#pragma GCC unroll 6
  for (int r = 0; r < ROWS; ++r) _mm_prefetch(reinterpret_cast<const char*>(t.c + r * t.ldc), _MM_HINT_T0);

  const double* a = t.a;
  const double* b = t.b;
#pragma GCC unroll 4
  for (int64_t p = 0; p < t.kc; ++p) {
    const __m256d b0 = _mm256_loadu_pd(b);
    const __m256d b1 = HALVES == 2 ? _mm256_loadu_pd(b + 4) : b0;
#pragma GCC unroll 6
    for (int r = 0; r < ROWS; ++r) {
      const __m256d ar = _mm256_broadcast_sd(a + r);
      c0[r] = _mm256_fmadd_pd(ar, b0, c0[r]);
      if constexpr (HALVES == 2) c1[r] = _mm256_fmadd_pd(ar, b1, c1[r]);
    }
    a += kMr;
    b += kNr;
  }

  const __m256i m0 = lane_mask4(t.n), m1 = lane_mask4(t.n - 4);
#pragma GCC unroll 6
  for (int r = 0; r < ROWS; ++r) {
    double* c = t.c + r * t.ldc;
    if (t.accumulate) {
      c0[r] = _mm256_add_pd(c0[r], _mm256_maskload_pd(c, m0));
      if constexpr (HALVES == 2) c1[r] = _mm256_add_pd(c1[r], _mm256_maskload_pd(c + 4, m1));
    }
    _mm256_maskstore_pd(c, m0, c0[r]);
    if constexpr (HALVES == 2) _mm256_maskstore_pd(c + 4, m1, c1[r]);
  }
}

// The tile for t.m rows (1..kMr), chosen at run time from the instantiations for each count.
template <int HALVES, int ROWS = 1>
void tile_rows(const GemmTileF64& t) {
  if constexpr (ROWS < kMr) {
    if (t.m > ROWS) return tile_rows<HALVES, ROWS + 1>(t);
  }
  return tile<ROWS, HALVES>(t);
}

void micro_avx2(const GemmTileF64& t) { return t.n <= kNr / 2 ? tile_rows<1>(t) : tile_rows<2>(t); }

// r[j][i] = r[i][j] for a 4×4 block of doubles.
void transpose4x4(__m256d r[4]) {
  const __m256d t0 = _mm256_unpacklo_pd(r[0], r[1]);  // steps 0, 2 of rows 0, 1
  const __m256d t1 = _mm256_unpackhi_pd(r[0], r[1]);  // steps 1, 3
  const __m256d t2 = _mm256_unpacklo_pd(r[2], r[3]);
  const __m256d t3 = _mm256_unpackhi_pd(r[2], r[3]);
  r[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
  r[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
  r[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
  r[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
}

// GemmPackBySteps: each panel in groups of four lanes, four steps at a time transposed in
// registers (lanes past `lanes` load as zeros).
void pack_by_steps_avx2(const double* src, int64_t lane_stride, int64_t lanes, int64_t steps, int width,
                        double* dst) {
  for (int64_t l0 = 0; l0 < lanes; l0 += width, dst += steps * width)
    for (int g = 0; g < width; g += 4) {
      const int64_t left = lanes - l0 - g, count = left < 0 ? 0 : left < 4 ? left : 4;
      const __m256i store = lane_mask4(width - g);
      const double* group = src + (l0 + g) * lane_stride;
      for (int64_t s0 = 0; s0 < steps; s0 += 4) {
        const int block = steps - s0 < 4 ? static_cast<int>(steps - s0) : 4;
        const __m256i load = lane_mask4(block);
        __m256d r[4];
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i)
          r[i] = i < count ? _mm256_maskload_pd(group + i * lane_stride + s0, load) : _mm256_setzero_pd();
        transpose4x4(r);
        for (int j = 0; j < block; ++j) _mm256_maskstore_pd(dst + (s0 + j) * width + g, store, r[j]);
      }
    }
}

}  // namespace

const GemmKernelF64 kGemmF64Avx2 = {
    .name = "avx2 6x8 fp64",
    .mr = kMr, .nr = kNr,
    .mc = 144, .kc = 256, .nc = 2048,
    .micro = micro_avx2,
    .pack_by_steps = pack_by_steps_avx2,
};

}  // namespace weft::detail
