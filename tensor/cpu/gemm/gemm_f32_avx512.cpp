// AVX-512 GEMM kernel set for float32 (ISA kernel unit: Note [ISA kernel units] in tensor/cpu/simd.h).
//
// Register tile 12×32: c(12×32) (+)= Σ_p a(:, p) · b(p, :), 24 zmm accumulators (two per row),
// two zmm loads of B and twelve broadcasts of A per step, 24 FMAs: enough independent chains for
// two FMA units at latency 4, and 24 + 2 + 1 of the 32 zmm registers. Instantiated per row count
// (1..12); columns past n are handled with k-masks. A tile of at most 16 columns (a product computed
// transposed at a small batch: Note [Few rows times a transposed B] in gemm.cpp) keeps one zmm per
// row and does half the FMAs.
//
// Blocking (Skylake-SP / Zen 4-5 caches): a kc×32 panel of B is 48 KiB at kc = 384 (L1 is 32-48
// KiB; the panel streams through it), an mc×kc block of A 576 KiB of a 1-2 MiB L2.
//
// W·x (one row times a transposed B) is dot products of W's rows with x: four zmm accumulators
// over 64 values a step, the tail under a k-mask, summed across lanes at the end of the row.
//
// bfloat16 inputs reach this kernel widened by the portable packers (CPUs with AVX-512 BF16 use
// gemm_bf16_avx512bf16.cpp instead).
#include "tensor/cpu/gemm/gemm_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

constexpr int kMr = 12, kNr = 32;

// HALVES: 2, or 1 for tiles of at most 16 columns.
template <int ROWS, bool PACKED_A, bool FULL_B, int HALVES>
void tile(const GemmTileF32& t) {
  __m512 c0[ROWS], c1[ROWS];
#pragma GCC unroll 12
  for (int r = 0; r < ROWS; ++r) c0[r] = c1[r] = _mm512_setzero_ps();
  const int64_t rs = PACKED_A ? 1 : t.rs_a, cs = PACKED_A ? kMr : t.cs_a, ldb = t.ldb;
  const __mmask16 m0 = lane_mask(t.n), m1 = lane_mask(t.n - 16);

  // With A packed the driver runs the tiles down a column of C: each tile's rows are new, far
  // apart and last touched a whole K chunk ago, so they are fetched now and arrive while the FMAs
  // run instead of stalling the stores at the end (2048³: ~8 % faster). Tiles along a row of C
  // (A read in place) are streams the hardware prefetcher follows.
  if constexpr (PACKED_A) {
#pragma GCC unroll 12
    for (int r = 0; r < ROWS; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(t.c + r * t.ldc), _MM_HINT_T0);
      if constexpr (HALVES == 2) _mm_prefetch(reinterpret_cast<const char*>(t.c + r * t.ldc + 16), _MM_HINT_T0);
    }
  }
  // A read in place is up to twelve rows rs apart. Addressed from one pointer, each row needs
  // its own offset register, more than x86 has: GCC spilled them to the stack and to vector
  // registers (moves that took FMA ports). From a pointer per three rows, rows 3j, 3j+1, 3j+2
  // are base_j + {0, 1, 2}·rs, which the addressing modes' scales reach from one register.
  constexpr int kBases = PACKED_A ? 1 : (ROWS + 2) / 3;
  const float* base[kBases];
#pragma GCC unroll 4
  for (int j = 0; j < kBases; ++j) base[j] = t.a + 3 * j * rs;
  const float* b = t.b;
#pragma GCC unroll 2
  for (int64_t p = 0; p < t.kc; ++p) {
    const __m512 b0 = FULL_B ? _mm512_loadu_ps(b) : _mm512_maskz_loadu_ps(m0, b);
    __m512 b1 = b0;
    if constexpr (HALVES == 2) b1 = FULL_B ? _mm512_loadu_ps(b + 16) : _mm512_maskz_loadu_ps(m1, b + 16);
#pragma GCC unroll 12
    for (int r = 0; r < ROWS; ++r) {
      const __m512 ar = _mm512_set1_ps(PACKED_A ? base[0][r] : base[r / 3][(r % 3) * rs]);
      c0[r] = _mm512_fmadd_ps(ar, b0, c0[r]);
      if constexpr (HALVES == 2) c1[r] = _mm512_fmadd_ps(ar, b1, c1[r]);
    }
#pragma GCC unroll 4
    for (int j = 0; j < kBases; ++j) base[j] += cs;
    b += ldb;
  }

#pragma GCC unroll 12
  for (int r = 0; r < ROWS; ++r) {
    float* c = t.c + r * t.ldc;
    if (t.accumulate) {
      c0[r] = _mm512_add_ps(c0[r], _mm512_maskz_loadu_ps(m0, c));
      if constexpr (HALVES == 2) c1[r] = _mm512_add_ps(c1[r], _mm512_maskz_loadu_ps(m1, c + 16));
    }
    _mm512_mask_storeu_ps(c, m0, c0[r]);
    if constexpr (HALVES == 2) _mm512_mask_storeu_ps(c + 16, m1, c1[r]);
  }
}

template <bool PACKED_A, bool FULL_B, int HALVES>
void tile_rows(const GemmTileF32& t) {
  switch (t.m) {
    case 1: return tile<1, PACKED_A, FULL_B, HALVES>(t);
    case 2: return tile<2, PACKED_A, FULL_B, HALVES>(t);
    case 3: return tile<3, PACKED_A, FULL_B, HALVES>(t);
    case 4: return tile<4, PACKED_A, FULL_B, HALVES>(t);
    case 5: return tile<5, PACKED_A, FULL_B, HALVES>(t);
    case 6: return tile<6, PACKED_A, FULL_B, HALVES>(t);
    case 7: return tile<7, PACKED_A, FULL_B, HALVES>(t);
    case 8: return tile<8, PACKED_A, FULL_B, HALVES>(t);
    case 9: return tile<9, PACKED_A, FULL_B, HALVES>(t);
    case 10: return tile<10, PACKED_A, FULL_B, HALVES>(t);
    case 11: return tile<11, PACKED_A, FULL_B, HALVES>(t);
    default: return tile<12, PACKED_A, FULL_B, HALVES>(t);
  }
}

template <int HALVES>
void micro_halves(const GemmTileF32& t) {
  const bool full_b = t.b_padded || t.n == kNr;
  if (t.a_packed) return full_b ? tile_rows<true, true, HALVES>(t) : tile_rows<true, false, HALVES>(t);
  return full_b ? tile_rows<false, true, HALVES>(t) : tile_rows<false, false, HALVES>(t);
}

void micro_avx512(const GemmTileF32& t) { return t.n <= kNr / 2 ? micro_halves<1>(t) : micro_halves<2>(t); }

void dot_rows_avx512(const float* w, int64_t ldw, const float* x, int64_t k, int64_t rows, float* y, bool accumulate) {
  for (int64_t j = 0; j < rows; ++j, w += ldw) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t p = 0;
    for (; p + 64 <= k; p += 64) {
      s0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + p), _mm512_loadu_ps(x + p), s0);
      s1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + p + 16), _mm512_loadu_ps(x + p + 16), s1);
      s2 = _mm512_fmadd_ps(_mm512_loadu_ps(w + p + 32), _mm512_loadu_ps(x + p + 32), s2);
      s3 = _mm512_fmadd_ps(_mm512_loadu_ps(w + p + 48), _mm512_loadu_ps(x + p + 48), s3);
    }
    for (; p < k; p += 16) {
      const __mmask16 m = lane_mask(k - p);
      s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + p), _mm512_maskz_loadu_ps(m, x + p), s0);
    }
    const float sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
    y[j] = accumulate ? y[j] + sum : sum;
  }
}

// The fast packers: one panel of `width` lanes per step (B: 32 columns, A: 12 rows) from a
// source whose lanes are `lane_stride` apart and steps `step_stride` apart, zeros past `lanes`.
//
// Each step's lanes contiguous in the source (a row-major B, dYᵀ as A): masked loads, one masked
// store per 16 lanes.
void pack_panel_by_steps(const float* src, int64_t step_stride, int lanes, int64_t steps, int width, float* dst) {
  for (int64_t p = 0; p < steps; ++p, dst += width)
    for (int first = 0; first < width; first += 16)
      _mm512_mask_storeu_ps(dst + first, lane_mask(width - first),
                            _mm512_maskz_loadu_ps(lane_mask(lanes - first), src + p * step_stride + first));
}

// Each lane's steps contiguous in the source (x·Wᵀ's B, a row-major A): 16 lanes × 16 steps are
// one load per lane and, transposed in registers, one store per step.
void pack_panel_by_lanes(const float* src, int64_t lane_stride, int lanes, int64_t steps, int width, float* dst) {
  for (int first = 0; first < width; first += 16) {
    const int count = lanes - first;
    const __mmask16 store = lane_mask(width - first);
    for (int64_t p0 = 0; p0 < steps; p0 += 16) {
      const int run = steps - p0 < 16 ? static_cast<int>(steps - p0) : 16;
      __m512i r[16];
      for (int l = 0; l < 16; ++l)
        r[l] = l < count ? _mm512_castps_si512(_mm512_maskz_loadu_ps(lane_mask(run), src + (first + l) * lane_stride + p0))
                         : _mm512_setzero_si512();
      transpose16x16_epi32(r);
      for (int q = 0; q < run; ++q) _mm512_mask_storeu_ps(dst + (p0 + q) * width + first, store, _mm512_castsi512_ps(r[q]));
    }
  }
}

// Panels of `width` lanes over all `lanes`, float32 with either stride 1; false for other layouts
// and bfloat16 (the portable packer in packing.cpp, the reference, takes those).
bool pack_panels(const void* src, bool bf16, int64_t lane_stride, int64_t step_stride, int64_t lanes, int64_t steps,
                 int width, float* dst) {
  if (bf16 || (lane_stride != 1 && step_stride != 1)) return false;
  const auto* x = static_cast<const float*>(src);
  for (int64_t l0 = 0; l0 < lanes; l0 += width, dst += steps * width) {
    const int count = lanes - l0 < width ? static_cast<int>(lanes - l0) : width;
    if (lane_stride == 1) pack_panel_by_steps(x + l0, step_stride, count, steps, width, dst);
    else pack_panel_by_lanes(x + l0 * lane_stride, lane_stride, count, steps, width, dst);
  }
  return true;
}

// B(p, j) = src[p·rs + j·cs] into panels of kc×32; A(i, p) = src[i·rs + p·cs] into panels of kc×12.
bool pack_b_avx512(const void* src, bool bf16, int64_t rs, int64_t cs, int64_t kc, int64_t nc, float* dst) {
  return pack_panels(src, bf16, cs, rs, nc, kc, kNr, dst);
}
bool pack_a_avx512(const void* src, bool bf16, int64_t rs, int64_t cs, int64_t mc, int64_t kc, float* dst) {
  return pack_panels(src, bf16, rs, cs, mc, kc, kMr, dst);
}

}  // namespace

const GemmKernel kGemmF32Avx512 = {
    .name = "avx512 12x32",
    .mr = kMr, .nr = kNr,
    .mc = 384, .kc = 384, .nc = 4096,
    .bf16_pairs = false,
    .micro_f32 = micro_avx512,
    .micro_bf16 = nullptr,
    .pack_b = pack_b_avx512,
    .pack_a = pack_a_avx512,
    .dot_rows = dot_rows_avx512,
};

}  // namespace weft::detail
