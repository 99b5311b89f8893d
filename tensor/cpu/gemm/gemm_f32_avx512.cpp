// AVX-512 GEMM kernel set for float32 (ISA kernel unit: Note [ISA kernel units] in tensor/cpu/simd.h).
//
// Register tile 6×64: c(6×64) (+)= Σ_p a(:, p) · b(p, :), 24 zmm accumulators (four per row),
// four zmm loads of B and six broadcasts of A per step, 24 FMAs: enough independent chains for
// two FMA units at latency 4, and 24 + 4 + 1 of the 32 zmm registers. Instantiated per row count
// (1..6) and per number of vectors a row needs (1..4: a tile of at most 16, 32 or 48 columns does
// only the FMAs it needs); columns past n are handled with k-masks.
//
// Products whose C is at most 32 columns wide (yᵀ = W·xᵀ at a batch of 32, the MLP's last layer,
// Note [Few rows times a transposed B] in gemm.cpp) take a second set from the same template,
// 12×32: a 6×64 tile there would hold 12 accumulators and load B twice as often per FMA (a 4-bit
// weight's yᵀ at batch 32, 4096², took 1.3-1.9× as long in 6-row strips).
//
// Note [C rows that share cache sets]
// Why six rows of 64 columns and not twelve of 32 (the same 24 accumulators): a tile's rows of C
// are ldc apart, and when that is a multiple of 4 KiB (C 1024 or 2048 floats wide) every row's
// lines fall in the same sets of an L1 that has 8 ways (32 KiB). Twelve rows of two lines put
// twelve lines in each of two sets, so a tile evicts its own C while it loads, adds and stores
// it, once per K chunk: a sweep of 12×32 tiles over a packed block (kc 256, C 2048 wide, one core,
// Zen 4) ran at 93 % of the FMA peak against 97 % with C 2064 wide, and 1024³ / 2048³ products
// lost 3 % to it. Six rows of four lines put six lines in each of four sets: 97 % either way.
//
// Blocking (Skylake-SP / Zen 4-5 caches): a kc×64 panel of B is 96 KiB at kc = 384 and streams
// from L2 through L1 (32-48 KiB) beside the 9 KiB panel of A; an mc×kc block of A is 576 KiB of a
// 1-2 MiB L2. (kc = 256 measured the same on the squares and 1 % slower on the MLP's forward, whose
// K = 784 it cuts into four chunks instead of three.)
//
// W·x (one row times a transposed B) is dot products of W's rows with x: four zmm accumulators
// over 64 values a step, the tail under a k-mask, summed across lanes at the end of the row.
//
// bfloat16 inputs reach this kernel widened to float32 by its packers: a bfloat16 is the top half
// of a float32, so widening is a shift (CPUs whose BF16 dot products outpace their float32 FMAs
// use gemm_bf16_avx512bf16.cpp instead; Note [Where BF16 dot products pay] in tensor/cpu/isa.h).
#include "tensor/cpu/gemm/gemm_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

// The two sets' tiles: rows × vectors of 16 columns.
constexpr int kWideMr = 6, kWideVectors = 4, kNarrowMr = 12, kNarrowVectors = 2;

// MR: the set's rows (packed A's panel width). VECTORS: zmm per row of the tile, the set's, or
// fewer for a tile of at most 16·VECTORS columns.
template <int MR, int ROWS, bool PACKED_A, bool FULL_B, int VECTORS>
void tile(const GemmTileF32& t) {
  __m512 acc[ROWS][VECTORS];
#pragma GCC unroll 12
  for (int r = 0; r < ROWS; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < VECTORS; ++v) acc[r][v] = _mm512_setzero_ps();
  const int64_t rs = PACKED_A ? 1 : t.rs_a, cs = PACKED_A ? MR : t.cs_a, ldb = t.ldb;
  __mmask16 mask[VECTORS];
#pragma GCC unroll 4
  for (int v = 0; v < VECTORS; ++v) mask[v] = lane_mask(t.n - 16 * v);

  // With A packed the driver runs the tiles down a column of C: each tile's rows are new, far
  // apart and last touched a whole K chunk ago, so they are fetched now and arrive while the FMAs
  // run instead of stalling the stores at the end (2048³: ~8 % faster). Tiles along a row of C
  // (A read in place) are streams the hardware prefetcher follows.
  if constexpr (PACKED_A) {
#pragma GCC unroll 12
    for (int r = 0; r < ROWS; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < VECTORS; ++v)
        _mm_prefetch(reinterpret_cast<const char*>(t.c + r * t.ldc + 16 * v), _MM_HINT_T0);
  }
  // A read in place is up to twelve rows rs apart. Addressed from one pointer, each row needs its own
  // offset register, more than x86 has: GCC spilled them to the stack and to vector registers
  // (moves that took FMA ports). From a pointer per three rows, rows 3j, 3j+1, 3j+2 are
  // base_j + {0, 1, 2}·rs, which the addressing modes' scales reach from one register.
  constexpr int kBases = PACKED_A ? 1 : (ROWS + 2) / 3;
  const float* base[kBases];
#pragma GCC unroll 4
  for (int j = 0; j < kBases; ++j) base[j] = t.a + 3 * j * rs;
  const float* b = t.b;
  GemmLineFetcher fetch(t.fetch, t.kc);
#pragma GCC unroll 2
  for (int64_t p = 0; p < t.kc; ++p) {
    fetch.step();
    __m512 bv[VECTORS];
#pragma GCC unroll 4
    for (int v = 0; v < VECTORS; ++v) bv[v] = FULL_B ? _mm512_loadu_ps(b + 16 * v) : _mm512_maskz_loadu_ps(mask[v], b + 16 * v);
#pragma GCC unroll 12
    for (int r = 0; r < ROWS; ++r) {
      const __m512 ar = _mm512_set1_ps(PACKED_A ? base[0][r] : base[r / 3][(r % 3) * rs]);
#pragma GCC unroll 4
      for (int v = 0; v < VECTORS; ++v) acc[r][v] = _mm512_fmadd_ps(ar, bv[v], acc[r][v]);
    }
#pragma GCC unroll 4
    for (int j = 0; j < kBases; ++j) base[j] += cs;
    b += ldb;
  }

#pragma GCC unroll 12
  for (int r = 0; r < ROWS; ++r) {
    float* c = t.c + r * t.ldc;
#pragma GCC unroll 4
    for (int v = 0; v < VECTORS; ++v) {
      if (t.accumulate) acc[r][v] = _mm512_add_ps(acc[r][v], _mm512_maskz_loadu_ps(mask[v], c + 16 * v));
      _mm512_mask_storeu_ps(c + 16 * v, mask[v], acc[r][v]);
    }
  }
}

// The tile for t.m rows (1..MR), chosen at run time from the instantiations for each count.
template <int MR, bool PACKED_A, bool FULL_B, int VECTORS, int ROWS = 1>
void tile_rows(const GemmTileF32& t) {
  if constexpr (ROWS < MR) {
    if (t.m > ROWS) return tile_rows<MR, PACKED_A, FULL_B, VECTORS, ROWS + 1>(t);
  }
  return tile<MR, ROWS, PACKED_A, FULL_B, VECTORS>(t);
}

template <int MR, int VECTORS>
void micro_vectors(const GemmTileF32& t) {
  const bool full_b = t.b_padded || t.n == 16 * VECTORS;
  if (t.a_packed) return full_b ? tile_rows<MR, true, true, VECTORS>(t) : tile_rows<MR, true, false, VECTORS>(t);
  return full_b ? tile_rows<MR, false, true, VECTORS>(t) : tile_rows<MR, false, false, VECTORS>(t);
}

// A set's microkernel: MR rows, up to MOST_VECTORS zmm a row, as few as t.n columns need.
template <int MR, int MOST_VECTORS, int VECTORS = 1>
void micro(const GemmTileF32& t) {
  if constexpr (VECTORS < MOST_VECTORS) {
    if (t.n > 16 * VECTORS) return micro<MR, MOST_VECTORS, VECTORS + 1>(t);
  }
  return micro_vectors<MR, VECTORS>(t);
}

// W·x streams W from memory once (a decode step): the hardware's prefetch alone kept too few of
// its lines in flight, so each step also asks for the line 4 KB ahead (the 1.1B Llama's float32
// decode: 0.90x the time per token, paired in one process).
constexpr int64_t kDotAhead = 1024;

void dot_rows_avx512(const float* w, int64_t ldw, const float* x, int64_t k, int64_t rows, float* y, bool accumulate) {
  for (int64_t j = 0; j < rows; ++j, w += ldw) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t p = 0;
    for (; p + 64 <= k; p += 64) {
      for (int l = 0; l < 64; l += 16) _mm_prefetch(reinterpret_cast<const char*>(w + p + kDotAhead + l), _MM_HINT_T0);
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

// The fast packers: one panel of `width` lanes per step (B: 64 columns, A: 6 rows) from a
// source whose lanes are `lane_stride` apart and steps `step_stride` apart, zeros past `lanes`.
// T is the stored type: float, or uint16_t for bfloat16 bits (widened as they are packed).
//
// Each step's lanes contiguous in the source (a row-major B, dYᵀ as A): masked loads, one masked
// store per 16 lanes. The panels go a group of at least 64 lanes at a time, step by step across the
// group, so that a step's cache lines are read once: panel by panel, the 6-lane panels of A read
// each 16-float line two or three times, a whole panel apart, and a large step stride puts those
// lines in few cache sets, so they came from L2 every time (the MLP's dW1, gᵀ·x: 7 % of its time
// went to packing A).
template <class T>
void pack_panels_by_steps(const T* src, int64_t step_stride, int64_t lanes, int64_t steps, int width, float* dst) {
  const int64_t group = (64 + width - 1) / width * width;
  for (int64_t g0 = 0; g0 < lanes; g0 += group) {
    const int64_t g1 = lanes < g0 + group ? lanes : g0 + group;
    for (int64_t p = 0; p < steps; ++p)
      for (int64_t l0 = g0; l0 < g1; l0 += width) {
        float* panel_step = dst + l0 * steps + p * width;
        for (int first = 0; first < width; first += 16)
          _mm512_mask_storeu_ps(panel_step + first, lane_mask(width - first),
                                load_float_or_bf16_x16(src, p * step_stride + l0 + first,
                                                       lane_mask(lanes - l0 - first), sizeof(T) == 2));
      }
  }
}

// Each lane's steps contiguous in the source (x·Wᵀ's B, a row-major A): 16 lanes × 16 steps are
// one load per lane and, transposed in registers, one store per step. Lanes past the source's are
// zeros stored directly (a product with N = 10 packs B into a 64-lane panel).
template <class T>
void pack_panel_by_lanes(const T* src, int64_t lane_stride, int lanes, int64_t steps, int width, float* dst) {
  for (int first = 0; first < width; first += 16) {
    const int count = lanes - first;
    const __mmask16 store = lane_mask(width - first);
    if (count <= 0) {
      for (int64_t p = 0; p < steps; ++p) _mm512_mask_storeu_ps(dst + p * width + first, store, _mm512_setzero_ps());
      continue;
    }
    for (int64_t p0 = 0; p0 < steps; p0 += 16) {
      const int run = steps - p0 < 16 ? static_cast<int>(steps - p0) : 16;
      __m512i r[16];
      for (int l = 0; l < 16; ++l)
        r[l] = l < count ? _mm512_castps_si512(load_float_or_bf16_x16(src, (first + l) * lane_stride + p0,
                                                                      lane_mask(run), sizeof(T) == 2))
                         : _mm512_setzero_si512();
      transpose16x16_epi32(r);
      for (int q = 0; q < run; ++q) _mm512_mask_storeu_ps(dst + (p0 + q) * width + first, store, _mm512_castsi512_ps(r[q]));
    }
  }
}

// Panels of `width` lanes over all `lanes`, with either stride 1; false for other layouts (the
// portable packer in packing.cpp, the reference, takes those).
template <class T>
void pack_panels(const T* x, int64_t lane_stride, int64_t step_stride, int64_t lanes, int64_t steps, int width,
                 float* dst) {
  if (lane_stride == 1) {
    pack_panels_by_steps(x, step_stride, lanes, steps, width, dst);
    return;
  }
  for (int64_t l0 = 0; l0 < lanes; l0 += width, dst += steps * width) {
    const int count = lanes - l0 < width ? static_cast<int>(lanes - l0) : width;
    pack_panel_by_lanes(x + l0 * lane_stride, lane_stride, count, steps, width, dst);
  }
}
bool pack_panels(const void* src, bool bf16, int64_t lane_stride, int64_t step_stride, int64_t lanes, int64_t steps,
                 int width, float* dst) {
  if (lane_stride != 1 && step_stride != 1) return false;
  if (bf16) pack_panels(static_cast<const uint16_t*>(src), lane_stride, step_stride, lanes, steps, width, dst);
  else pack_panels(static_cast<const float*>(src), lane_stride, step_stride, lanes, steps, width, dst);
  return true;
}

// B(p, j) = src[p·rs + j·cs] into panels of kc×WIDTH; A(i, p) = src[i·rs + p·cs] into panels of kc×WIDTH.
template <int WIDTH>
bool pack_b(const void* src, bool bf16, int64_t rs, int64_t cs, int64_t kc, int64_t nc, float* dst) {
  return pack_panels(src, bf16, cs, rs, nc, kc, WIDTH, dst);
}
template <int WIDTH>
bool pack_a(const void* src, bool bf16, int64_t rs, int64_t cs, int64_t mc, int64_t kc, float* dst) {
  return pack_panels(src, bf16, rs, cs, mc, kc, WIDTH, dst);
}

}  // namespace

const GemmKernel kGemmF32Avx512 = {
    .name = "avx512 6x64",
    .mr = kWideMr, .nr = 16 * kWideVectors,
    .mc = 384, .kc = 384, .nc = 4096,
    .n_split = 16,
    .bf16_pairs = false,
    .micro_f32 = micro<kWideMr, kWideVectors>,
    .micro_bf16 = nullptr,
    .pack_b = pack_b<16 * kWideVectors>,
    .pack_a = pack_a<kWideMr>,
    .dot_rows = dot_rows_avx512,
    .a_columns_in_place = true,
};

const GemmKernel kGemmF32Avx512Narrow = {
    .name = "avx512 12x32",
    .mr = kNarrowMr, .nr = 16 * kNarrowVectors,
    .mc = 384, .kc = 384, .nc = 4096,
    .bf16_pairs = false,
    .micro_f32 = micro<kNarrowMr, kNarrowVectors>,
    .micro_bf16 = nullptr,
    .pack_b = pack_b<16 * kNarrowVectors>,
    .pack_a = pack_a<kNarrowMr>,
    .dot_rows = dot_rows_avx512,
};

}  // namespace weft::detail
