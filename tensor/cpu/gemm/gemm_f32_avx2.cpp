// AVX2 + FMA GEMM kernel set (ISA kernel unit: Note [ISA kernel units] in tensor/cpu/simd.h).
//
// Register tile 6×16: c(6×16) (+)= Σ_p a(:, p) · b(p, :), 12 ymm accumulators (two per row), two
// ymm loads of B and six broadcasts of A per step, 12 FMAs. 12 independent chains cover the FMA
// latency (4-5 cycles) of both FMA pipes, and 12 + 2 + 1 registers fit the 16 ymm. The tile is
// instantiated per row count (1..6), so M = 128 ends with a 2-row tile rather than 4 wasted rows;
// columns past n are masked. A tile of at most 8 columns (a product computed transposed at a batch
// of up to 8: Note [Few rows times a transposed B] in gemm.cpp) keeps one ymm per row and does
// half the FMAs.
//
// Blocking (Zen 3 / Haswell-class caches): a kc×16 panel of B is 16 KiB at kc = 256 (half of
// L1), an mc×kc block of A 144 KiB of a 512 KiB L2, a kc×nc block of B 4 MiB of L3.
//
// W·x (one row times a transposed B) is dot products of W's rows with x: four ymm accumulators
// over 32 values a step, summed across lanes at the end of the row.
//
// The fast packers transpose 8×8 blocks in registers: for B read down its columns (x·Wᵀ, the
// forward of every linear layer), widening bfloat16 on the way, and for a row-major A; an A read
// down its columns is one masked load per step.
#include "tensor/cpu/gemm/gemm_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

constexpr int kMr = 6, kNr = 16;

// All-ones in the first n of 8 lanes (n may be ≤ 0 or ≥ 8).
__m256i lane_mask(int n) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }

// One tile with ROWS rows. PACKED_A: A is a packed panel (rows 1 apart, steps kMr apart).
// FULL_B: every B row has 16 readable values. HALVES: 2, or 1 for tiles of at most 8 columns.
template <int ROWS, bool PACKED_A, bool FULL_B, int HALVES>
void tile(const GemmTileF32& t) {
  __m256 c0[ROWS], c1[ROWS];
#pragma GCC unroll 6
  for (int r = 0; r < ROWS; ++r) c0[r] = c1[r] = _mm256_setzero_ps();
  const int64_t rs = PACKED_A ? 1 : t.rs_a, cs = PACKED_A ? kMr : t.cs_a, ldb = t.ldb;
  const __m256i m0 = lane_mask(t.n), m1 = lane_mask(t.n - 8);
#pragma GCC unroll 6
  for (int r = 0; r < ROWS; ++r) _mm_prefetch(reinterpret_cast<const char*>(t.c + r * t.ldc), _MM_HINT_T0);

  const float* a = t.a;
  const float* b = t.b;
  const int64_t kc = t.kc;
  GemmLineFetcher fetch(t.fetch, kc);
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    fetch.step();
    const __m256 b0 = FULL_B ? _mm256_loadu_ps(b) : _mm256_maskload_ps(b, m0);
    __m256 b1 = b0;
    if constexpr (HALVES == 2) b1 = FULL_B ? _mm256_loadu_ps(b + 8) : _mm256_maskload_ps(b + 8, m1);
#pragma GCC unroll 6
    for (int r = 0; r < ROWS; ++r) {
      const __m256 ar = _mm256_broadcast_ss(a + r * rs);
      c0[r] = _mm256_fmadd_ps(ar, b0, c0[r]);
      if constexpr (HALVES == 2) c1[r] = _mm256_fmadd_ps(ar, b1, c1[r]);
    }
    a += cs;
    b += ldb;
  }

  if (HALVES == 2 && t.n == kNr) {
#pragma GCC unroll 6
    for (int r = 0; r < ROWS; ++r) {
      float* c = t.c + r * t.ldc;
      if (t.accumulate) {
        c0[r] = _mm256_add_ps(c0[r], _mm256_loadu_ps(c));
        c1[r] = _mm256_add_ps(c1[r], _mm256_loadu_ps(c + 8));
      }
      _mm256_storeu_ps(c, c0[r]);
      _mm256_storeu_ps(c + 8, c1[r]);
    }
    return;
  }
#pragma GCC unroll 6
  for (int r = 0; r < ROWS; ++r) {
    float* c = t.c + r * t.ldc;
    if (t.accumulate) {
      c0[r] = _mm256_add_ps(c0[r], _mm256_maskload_ps(c, m0));
      if constexpr (HALVES == 2) c1[r] = _mm256_add_ps(c1[r], _mm256_maskload_ps(c + 8, m1));
    }
    _mm256_maskstore_ps(c, m0, c0[r]);
    if constexpr (HALVES == 2) _mm256_maskstore_ps(c + 8, m1, c1[r]);
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
    default: return tile<6, PACKED_A, FULL_B, HALVES>(t);
  }
}

template <int HALVES>
void micro_halves(const GemmTileF32& t) {
  const bool full_b = t.b_padded || t.n == kNr;
  if (t.a_packed) return full_b ? tile_rows<true, true, HALVES>(t) : tile_rows<true, false, HALVES>(t);
  return full_b ? tile_rows<false, true, HALVES>(t) : tile_rows<false, false, HALVES>(t);
}

void micro_avx2(const GemmTileF32& t) { return t.n <= kNr / 2 ? micro_halves<1>(t) : micro_halves<2>(t); }

void dot_rows_avx2(const float* w, int64_t ldw, const float* x, int64_t k, int64_t rows, float* y, bool accumulate) {
  const __m256i tail_mask = lane_mask(static_cast<int>(k % 8));
  for (int64_t j = 0; j < rows; ++j, w += ldw) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t p = 0;
    for (; p + 32 <= k; p += 32) {
      s0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + p), _mm256_loadu_ps(x + p), s0);
      s1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + p + 8), _mm256_loadu_ps(x + p + 8), s1);
      s2 = _mm256_fmadd_ps(_mm256_loadu_ps(w + p + 16), _mm256_loadu_ps(x + p + 16), s2);
      s3 = _mm256_fmadd_ps(_mm256_loadu_ps(w + p + 24), _mm256_loadu_ps(x + p + 24), s3);
    }
    for (; p + 8 <= k; p += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + p), _mm256_loadu_ps(x + p), s0);
    if (p < k) s1 = _mm256_fmadd_ps(_mm256_maskload_ps(w + p, tail_mask), _mm256_maskload_ps(x + p, tail_mask), s1);
    const __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    const float sum = _mm_cvtss_f32(h);
    y[j] = accumulate ? y[j] + sum : sum;
  }
}

// 8 consecutive values at p, widened to float32 when they are bfloat16 bits.
__m256 load8(const void* p, bool bf16) {
  if (!bf16) return _mm256_loadu_ps(static_cast<const float*>(p));
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

float load1(const void* p, bool bf16) {
  if (!bf16) return *static_cast<const float*>(p);
  const uint32_t bits = uint32_t{*static_cast<const uint16_t*>(p)} << 16;
  return _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(static_cast<int>(bits))));
}

// Rows r[0..7] become columns: on return r[q] holds element q of each original row.
void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// B(p, j) = src[p·rs + j·cs]; dst: panels of kc×16.
bool pack_b_avx2(const void* src, bool bf16, int64_t rs, int64_t cs, int64_t kc, int64_t nc, float* dst) {
  const bool rows_contiguous = cs == 1, columns_contiguous = rs == 1 && !rows_contiguous;
  if (!columns_contiguous && !rows_contiguous) return false;
  const auto* base = static_cast<const char*>(src);
  const int64_t size = bf16 ? 2 : 4;
  for (int64_t j0 = 0; j0 < nc; j0 += kNr, dst += kc * kNr) {
    const int64_t cols = nc - j0 < kNr ? nc - j0 : kNr;
    const int64_t full_groups = cols / 8;  // groups of 8 columns handled with vectors
    int64_t p = 0;
    if (columns_contiguous) {
      for (; p + 8 <= kc; p += 8)
        for (int64_t g = 0; g < full_groups; ++g) {
          __m256 r[8];
          for (int q = 0; q < 8; ++q) r[q] = load8(base + ((j0 + g * 8 + q) * cs + p) * size, bf16);
          transpose8(r);
          for (int q = 0; q < 8; ++q) _mm256_storeu_ps(dst + (p + q) * kNr + g * 8, r[q]);
        }
    } else {
      for (; p < kc; ++p)
        for (int64_t g = 0; g < full_groups; ++g)
          _mm256_storeu_ps(dst + p * kNr + g * 8, load8(base + (p * rs + j0 + g * 8) * size, bf16));
    }
    // Steps left over from the 8×8 blocks, for the vector groups; then the last partial group
    // and the zero padding, for every step.
    for (int64_t q = p; q < kc; ++q)
      for (int64_t j = 0; j < full_groups * 8; ++j) dst[q * kNr + j] = load1(base + (q * rs + (j0 + j) * cs) * size, bf16);
    for (int64_t q = 0; q < kc; ++q)
      for (int64_t j = full_groups * 8; j < kNr; ++j)
        dst[q * kNr + j] = j < cols ? load1(base + (q * rs + (j0 + j) * cs) * size, bf16) : 0.0f;
  }
  return true;
}

// Packing A into panels of kc×6 by two layouts that the portable packer would copy one value at a
// time. Either way a step's 8 lanes are stored at its 6-value slot, where the next step's store
// overwrites the two extra lanes; the panel's last store is masked.
//
// One panel of `rows` ≤ 6 rows whose columns are contiguous (A(i, p) = a[i + p·cs]: dYᵀ of the
// weight gradients): each step is one masked load.
void pack_a_panel_columns(const float* a, int64_t cs, int64_t rows, int64_t kc, float* dst) {
  const __m256i live = lane_mask(static_cast<int>(rows)), six = lane_mask(kMr);
  for (int64_t p = 0; p + 1 < kc; ++p) _mm256_storeu_ps(dst + p * kMr, _mm256_maskload_ps(a + p * cs, live));
  _mm256_maskstore_ps(dst + (kc - 1) * kMr, six, _mm256_maskload_ps(a + (kc - 1) * cs, live));
}

// One panel whose rows are contiguous along K (A(i, p) = a[i·rs + p]: a row-major A taller than
// the in-place limit, a large batch's forward, the squares, any bfloat16 activations): 8 steps of
// the 6 rows are transposed in registers, as 8 rows of which the last two are zero. `a` is
// float32, or bfloat16 bits widened as they load.
void pack_a_panel_rows(const char* a, bool bf16, int64_t rs, int64_t rows, int64_t kc, float* dst) {
  const int64_t size = bf16 ? 2 : 4;
  const __m256i six = lane_mask(kMr);
  int64_t p = 0;
  for (; p + 8 <= kc; p += 8) {
    __m256 r[8];
    for (int q = 0; q < 8; ++q) r[q] = q < rows ? load8(a + (q * rs + p) * size, bf16) : _mm256_setzero_ps();
    transpose8(r);
    for (int q = 0; q < 7; ++q) _mm256_storeu_ps(dst + (p + q) * kMr, r[q]);
    _mm256_maskstore_ps(dst + (p + 7) * kMr, six, r[7]);
  }
  for (; p < kc; ++p)
    for (int64_t i = 0; i < kMr; ++i) dst[p * kMr + i] = i < rows ? load1(a + (i * rs + p) * size, bf16) : 0.0f;
}

// A(i, p) = src[i·rs + p·cs]; dst: panels of kc×6. Columns of bfloat16 are left to the portable
// packer's row copies: AVX2 has no masked load of 16-bit values for a step's ≤ 6 lanes.
bool pack_a_avx2(const void* src, bool bf16, int64_t rs, int64_t cs, int64_t mc, int64_t kc, float* dst) {
  if ((cs != 1 && rs != 1) || (bf16 && cs != 1)) return false;
  const auto* a = static_cast<const char*>(src);
  const int64_t size = bf16 ? 2 : 4;
  for (int64_t i0 = 0; i0 < mc; i0 += kMr, dst += kc * kMr) {
    const int64_t rows = mc - i0 < kMr ? mc - i0 : kMr;
    if (cs == 1) pack_a_panel_rows(a + i0 * rs * size, bf16, rs, rows, kc, dst);
    else pack_a_panel_columns(static_cast<const float*>(src) + i0, cs, rows, kc, dst);
  }
  return true;
}

}  // namespace

const GemmKernel kGemmF32Avx2 = {
    .name = "avx2 6x16",
    .mr = kMr, .nr = kNr,
    .mc = 144, .kc = 256, .nc = 4080,
    .bf16_pairs = false,
    .micro_f32 = micro_avx2,
    .micro_bf16 = nullptr,
    .pack_b = pack_b_avx2,
    .pack_a = pack_a_avx2,
    .dot_rows = dot_rows_avx2,
};

}  // namespace weft::detail
