// The FP8-weight GEMV for AVX-512 F/BW/VL/DQ (16 float lanes), to float32 rounding of the scalar
// reference (fp8_gemv_scalar.cpp). An ISA kernel unit: see Note [ISA kernel units] in
// tensor/cpu/simd.h.
//
// Note [E4M3 decode by multiplication]: an E4M3 code s.eeee.mmm placed in a float32's bits with
// its exponent and mantissa at the top of the float's (bits 20..26) and its sign at bit 31 reads
// as ±2^(e−127)·1.mmm, or for e = 0 as the float32 denormal ±m·2^−129; one multiplication by
// 2^120 (exact: a power of two, no overflow) gives ±2^(e−7)·1.mmm and ±m·2^−9, exactly the E4M3
// normal and subnormal values, zeros included. Sign-extending the code byte to 32 bits and
// shifting it left by 20 puts everything in place but smears the sign over bits 27..31; an AND
// with 0x87F00000 keeps bit 31 and the seven magnitude bits. Four instructions per vector (load
// with sign extension, shift, AND, multiply), no table and no blend. The NaN codes 0x7F / 0xFF
// would read as ±480, which is why the layer refuses them (precision/fp8/fp8_gemv_kernels.h).
// GCC 12's AVX-512 intrinsics read their own placeholder operands and so trip -Wuninitialized
// wherever they are inlined (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "precision/fp8/fp8_gemv_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

constexpr int64_t kLanes = 16;
constexpr int kBatch = 4;   // input rows per pass over a weight row (kBatch · kUnroll accumulators)
constexpr int kUnroll = 4;  // vectors of codes per step: independent FMA chains hide the latency

// 16 codes -> their float32 values (Note [E4M3 decode by multiplication]).
__m512 decode16(const uint8_t* codes) {
  const __m512i c = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
  const __m512i bits = _mm512_and_si512(_mm512_slli_epi32(c, 20), _mm512_set1_epi32(static_cast<int>(0x87F00000u)));
  return _mm512_mul_ps(_mm512_castsi512_ps(bits), _mm512_set1_ps(0x1p120f));
}

float horizontal_sum(__m512 v) {
  alignas(64) float lanes[kLanes];
  _mm512_store_ps(lanes, v);
  float s = 0.0f;
  for (int i = 0; i < kLanes; ++i) s += lanes[i];
  return s;
}

float fma1(float a, float b, float c) { return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c))); }

// sums[r] = Σ_k value(w[k]) · x[r·ldx + k], r < R:  w: (n) codes, x: (R, n) with row stride ldx.
template <int R>
void dot_rows(const uint8_t* w, const float* x, int64_t ldx, int64_t n, float* sums) {
  __m512 acc[R][kUnroll];
  for (int r = 0; r < R; ++r)
    for (int u = 0; u < kUnroll; ++u) acc[r][u] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + kUnroll * kLanes <= n; k += kUnroll * kLanes) {
    __m512 v[kUnroll];
    for (int u = 0; u < kUnroll; ++u) v[u] = decode16(w + k + u * kLanes);
    for (int r = 0; r < R; ++r)
      for (int u = 0; u < kUnroll; ++u)
        acc[r][u] = _mm512_fmadd_ps(v[u], _mm512_loadu_ps(x + r * ldx + k + u * kLanes), acc[r][u]);
  }
  for (; k + kLanes <= n; k += kLanes) {
    const __m512 v = decode16(w + k);
    for (int r = 0; r < R; ++r) acc[r][0] = _mm512_fmadd_ps(v, _mm512_loadu_ps(x + r * ldx + k), acc[r][0]);
  }
  if (k < n) {  // the last n % 16 through zero-padded copies (a zero code times zero adds nothing)
    alignas(64) uint8_t tail_w[kLanes] = {};
    for (int64_t t = k; t < n; ++t) tail_w[t - k] = w[t];
    const __m512 v = decode16(tail_w);
    for (int r = 0; r < R; ++r) {
      alignas(64) float tail_x[kLanes] = {};
      for (int64_t t = k; t < n; ++t) tail_x[t - k] = x[r * ldx + t];
      acc[r][1] = _mm512_fmadd_ps(v, _mm512_load_ps(tail_x), acc[r][1]);
    }
  }
  for (int r = 0; r < R; ++r) {
    __m512 total = acc[r][0];
    for (int u = 1; u < kUnroll; ++u) total = _mm512_add_ps(total, acc[r][u]);
    sums[r] = horizontal_sum(total);
  }
}

}  // namespace

void fp8_gemv_avx512(const Fp8GemvArgs& a) {
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
