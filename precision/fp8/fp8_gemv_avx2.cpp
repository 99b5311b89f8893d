// The FP8-weight GEMV for AVX2 and FMA (8 float lanes), to float32 rounding of the scalar
// reference (fp8_gemv_scalar.cpp). An ISA kernel unit: see Note [ISA kernel units] in
// tensor/cpu/simd.h. The decode is the AVX-512 unit's (Note [E4M3 decode through float16] in
// fp8_gemv_avx512.cpp) on half the lanes, F16C's vcvtph2ps widening 8 float16s at a time; with 16
// vector registers the number of FMA chains per input row shrinks as the rows per pass grow, so
// the accumulators never spill.
#include "precision/fp8/fp8_gemv_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

constexpr int64_t kLanes = 8;
constexpr int64_t kGroup = 16;  // codes decoded at once: one 256-bit vector of float16s
constexpr int kBatch = 4;
// Codes are prefetched this far ahead of the loads, across row ends (rows are contiguous): the
// hardware prefetcher alone left the loop waiting on memory for a third of its time.
constexpr int64_t kPrefetchBytes = 4096;  // input rows per pass over a weight row

// 16 codes -> their values · 2^−8 as float32, in v[0] (codes 0..7) and v[1] (codes 8..15).
void decode16(const uint8_t* codes, __m256* v) {
  const __m256i c = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
  const __m256i h = _mm256_and_si256(_mm256_slli_epi16(c, 7), _mm256_set1_epi16(static_cast<short>(0xBFFF)));
  v[0] = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
  v[1] = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
}

// A halving tree, as the AVX-512 unit's.
float horizontal_sum(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

float fma1(float a, float b, float c) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

// sums[r] = Σ_k value(w[k]) · 2^−8 · x[r·ldx + k], r < R:  w: (n) codes, x: (R, n) with row stride
// ldx; codes below prefetch_end may be prefetched.
// The small fixed loops are unrolled by pragma: without it an -O2 build keeps acc and v in memory
// and the loop runs at a third of the speed.
template <int R>
void dot_rows(const uint8_t* w, const float* x, int64_t ldx, int64_t n, const uint8_t* prefetch_end, float* sums) {
  constexpr int kUnroll = R <= 2 ? 2 : 1;  // groups per step: R · 2 · kUnroll accumulators fit 16 registers
  constexpr int kAcc = 2 * kUnroll;
  __m256 acc[R][kAcc];
  for (int r = 0; r < R; ++r)
    for (int u = 0; u < kAcc; ++u) acc[r][u] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + kUnroll * kGroup <= n; k += kUnroll * kGroup) {
    if (prefetch_end - (w + k) > kPrefetchBytes)
      _mm_prefetch(reinterpret_cast<const char*>(w + k + kPrefetchBytes), _MM_HINT_T0);
    __m256 v[kAcc];
#pragma GCC unroll 8
    for (int g = 0; g < kUnroll; ++g) decode16(w + k + g * kGroup, v + 2 * g);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int u = 0; u < kAcc; ++u)
        acc[r][u] = _mm256_fmadd_ps(v[u], _mm256_loadu_ps(x + r * ldx + k + u * kLanes), acc[r][u]);
  }
  for (; k + kGroup <= n; k += kGroup) {
    __m256 v[2];
    decode16(w + k, v);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int u = 0; u < 2; ++u)
        acc[r][u] = _mm256_fmadd_ps(v[u], _mm256_loadu_ps(x + r * ldx + k + u * kLanes), acc[r][u]);
  }
  if (k < n) {  // the last n % 16 through zero-padded copies (a zero code times zero adds nothing)
    alignas(32) uint8_t tail_w[kGroup] = {};
    for (int64_t t = k; t < n; ++t) tail_w[t - k] = w[t];
    __m256 v[2];
    decode16(tail_w, v);
    for (int r = 0; r < R; ++r) {
      alignas(32) float tail_x[kGroup] = {};
      for (int64_t t = k; t < n; ++t) tail_x[t - k] = x[r * ldx + t];
      for (int u = 0; u < 2; ++u) acc[r][u] = _mm256_fmadd_ps(v[u], _mm256_load_ps(tail_x + u * kLanes), acc[r][u]);
    }
  }
  for (int r = 0; r < R; ++r) {
    __m256 total = acc[r][0];
    for (int u = 1; u < kAcc; ++u) total = _mm256_add_ps(total, acc[r][u]);
    sums[r] = horizontal_sum(total);
  }
}

}  // namespace

void fp8_gemv_avx2(const Fp8GemvArgs& a) {
  for (int64_t j = a.row_begin; j < a.row_end; ++j) {
    const uint8_t* w = a.codes + j * a.in;                 // (in), read from memory once, then from L1
    const uint8_t* prefetch_end = a.codes + a.out * a.in;  // past this task's rows: the next task follows
    const float scale = a.row_scales ? a.row_scales[j] : a.tensor_scale;
    const float bias = a.bias ? a.bias[j] : 0.0f;
    for (int64_t i0 = 0; i0 < a.m; i0 += kBatch) {
      const int64_t rows = a.m - i0 < kBatch ? a.m - i0 : kBatch;
      const float* x = a.x + i0 * a.in;  // (rows, in)
      float sums[kBatch];
      switch (rows) {
        case 1:
          dot_rows<1>(w, x, a.in, a.in, prefetch_end, sums);
          break;
        case 2:
          dot_rows<2>(w, x, a.in, a.in, prefetch_end, sums);
          break;
        case 3:
          dot_rows<3>(w, x, a.in, a.in, prefetch_end, sums);
          break;
        default:
          dot_rows<4>(w, x, a.in, a.in, prefetch_end, sums);
          break;
      }
      for (int64_t r = 0; r < rows; ++r) a.y[(i0 + r) * a.out + j] = fma1(sums[r] * 256.0f, scale, bias);  // 2^8: exact
    }
  }
}

}  // namespace weft::detail
