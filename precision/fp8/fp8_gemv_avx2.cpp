// The FP8-weight GEMV for AVX2 and FMA (8 float lanes), to float32 rounding of the scalar
// reference (fp8_gemv_scalar.cpp). An ISA kernel unit: see Note [ISA kernel units] in
// tensor/cpu/simd.h. The decode is the AVX-512 unit's (Note [E4M3 decode by multiplication] in
// fp8_gemv_avx512.cpp) on half the lanes; with 16 vector registers the number of FMA chains per
// input row shrinks as the rows per pass grow, so the accumulators never spill.
#include "precision/fp8/fp8_gemv_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

constexpr int64_t kLanes = 8;
constexpr int kBatch = 4;  // input rows per pass over a weight row

// 8 codes -> their float32 values.
__m256 decode8(const uint8_t* codes) {
  const __m256i c = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes)));
  const __m256i bits = _mm256_and_si256(_mm256_slli_epi32(c, 20), _mm256_set1_epi32(static_cast<int>(0x87F00000u)));
  return _mm256_mul_ps(_mm256_castsi256_ps(bits), _mm256_set1_ps(0x1p120f));
}

float horizontal_sum(__m256 v) {
  alignas(32) float lanes[kLanes];
  _mm256_store_ps(lanes, v);
  float s = 0.0f;
  for (int i = 0; i < kLanes; ++i) s += lanes[i];
  return s;
}

float fma1(float a, float b, float c) { return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c))); }

// sums[r] = Σ_k value(w[k]) · x[r·ldx + k], r < R:  w: (n) codes, x: (R, n) with row stride ldx.
template <int R>
void dot_rows(const uint8_t* w, const float* x, int64_t ldx, int64_t n, float* sums) {
  constexpr int kUnroll = R <= 2 ? 4 : 2;  // R · kUnroll accumulators + kUnroll codes in 16 registers
  __m256 acc[R][kUnroll];
  for (int r = 0; r < R; ++r)
    for (int u = 0; u < kUnroll; ++u) acc[r][u] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + kUnroll * kLanes <= n; k += kUnroll * kLanes) {
    __m256 v[kUnroll];
    for (int u = 0; u < kUnroll; ++u) v[u] = decode8(w + k + u * kLanes);
    for (int r = 0; r < R; ++r)
      for (int u = 0; u < kUnroll; ++u)
        acc[r][u] = _mm256_fmadd_ps(v[u], _mm256_loadu_ps(x + r * ldx + k + u * kLanes), acc[r][u]);
  }
  for (; k + kLanes <= n; k += kLanes) {
    const __m256 v = decode8(w + k);
    for (int r = 0; r < R; ++r) acc[r][0] = _mm256_fmadd_ps(v, _mm256_loadu_ps(x + r * ldx + k), acc[r][0]);
  }
  if (k < n) {  // the last n % 8 through zero-padded copies (a zero code times zero adds nothing)
    alignas(32) uint8_t tail_w[kLanes] = {};
    for (int64_t t = k; t < n; ++t) tail_w[t - k] = w[t];
    const __m256 v = decode8(tail_w);
    for (int r = 0; r < R; ++r) {
      alignas(32) float tail_x[kLanes] = {};
      for (int64_t t = k; t < n; ++t) tail_x[t - k] = x[r * ldx + t];
      acc[r][1] = _mm256_fmadd_ps(v, _mm256_load_ps(tail_x), acc[r][1]);
    }
  }
  for (int r = 0; r < R; ++r) {
    __m256 total = acc[r][0];
    for (int u = 1; u < kUnroll; ++u) total = _mm256_add_ps(total, acc[r][u]);
    sums[r] = horizontal_sum(total);
  }
}

}  // namespace

void fp8_gemv_avx2(const Fp8GemvArgs& a) {
  for (int64_t j = a.row_begin; j < a.row_end; ++j) {
    const uint8_t* w = a.codes + j * a.in;  // (in), read from memory once, then from L1
    const float scale = a.row_scales ? a.row_scales[j] : a.tensor_scale;
    const float bias = a.bias ? a.bias[j] : 0.0f;
    for (int64_t i0 = 0; i0 < a.m; i0 += kBatch) {
      const int64_t rows = a.m - i0 < kBatch ? a.m - i0 : kBatch;
      const float* x = a.x + i0 * a.in;  // (rows, in)
      float sums[kBatch];
      switch (rows) {
        case 1: dot_rows<1>(w, x, a.in, a.in, sums); break;
        case 2: dot_rows<2>(w, x, a.in, a.in, sums); break;
        case 3: dot_rows<3>(w, x, a.in, a.in, sums); break;
        default: dot_rows<4>(w, x, a.in, a.in, sums); break;
      }
      for (int64_t r = 0; r < rows; ++r) a.y[(i0 + r) * a.out + j] = fma1(sums[r], scale, bias);
    }
  }
}

}  // namespace weft::detail
