// The FP8-weight GEMV for AVX-512 F/BW/VL/DQ (16 float lanes), to float32 rounding of the scalar
// reference (fp8_gemv_scalar.cpp). An ISA kernel unit: see Note [ISA kernel units] in
// tensor/cpu/simd.h.
//
// Note [E4M3 decode through float16]: every E4M3 value is a float16 value, and the code's bits
// drop into a float16's almost in place: s.eeee.mmm -> s.0eeee.mmm0000000 is the float16
// 2^(e−15)·1.mmm, or for e = 0 the float16 subnormal m·2^−17 — the E4M3 value times 2^−8, exactly,
// subnormals included. Sign-extending the code byte to 16 bits and shifting it left by 7 puts
// everything in place but copies the sign into bit 14 too, which an AND with 0xBFFF clears; then
// vcvtph2ps widens 16 of them to float32, exactly and at full speed for float16 subnormals.
// (Building the float32 bits directly and multiplying by 2^120 is one instruction shorter, but
// makes the subnormal codes float32 denormals, whose multiplication takes a microcode assist of
// about a hundred cycles: the GEMV slowed down twentyfold on weights with many small values.)
// The kernels so accumulate Σ value·2^−8·x, exact multiples of the true partial sums, and
// multiply by 2^8 before the scale: fma(acc·2^8, scale, bias). The NaN codes 0x7F / 0xFF would
// read as ±480, which is why the layer refuses them (precision/fp8/fp8_gemv_kernels.h).
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
constexpr int64_t kGroup = 32;  // codes decoded at once: one 512-bit vector of float16s
constexpr int kBatch = 4;
// Codes are prefetched this far ahead of the loads, across row ends (rows are contiguous): the
// hardware prefetcher alone left the loop waiting on memory for a third of its time.
constexpr int64_t kPrefetchBytes = 4096;  // input rows per pass over a weight row
constexpr int kUnroll = 2;                // groups per step: 4 independent FMA chains per input row

// 32 codes -> their values · 2^−8 as float32, in v[0] (codes 0..15) and v[1] (codes 16..31)
// (Note [E4M3 decode through float16]).
void decode32(const uint8_t* codes, __m512* v) {
  const __m512i c = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes)));
  const __m512i h = _mm512_and_si512(_mm512_slli_epi16(c, 7), _mm512_set1_epi16(static_cast<short>(0xBFFF)));
  v[0] = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
  v[1] = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
}

// A halving tree: a few cycles of latency per output row, where a scalar loop over the lanes
// would stall every row for dozens.
float horizontal_sum(__m512 v) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
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
  constexpr int kAcc = 2 * kUnroll;
  __m512 acc[R][kAcc];
  for (int r = 0; r < R; ++r)
    for (int u = 0; u < kAcc; ++u) acc[r][u] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + kUnroll * kGroup <= n; k += kUnroll * kGroup) {
    if (prefetch_end - (w + k) > kPrefetchBytes)
      _mm_prefetch(reinterpret_cast<const char*>(w + k + kPrefetchBytes), _MM_HINT_T0);
    __m512 v[kAcc];
#pragma GCC unroll 8
    for (int g = 0; g < kUnroll; ++g) decode32(w + k + g * kGroup, v + 2 * g);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int u = 0; u < kAcc; ++u)
        acc[r][u] = _mm512_fmadd_ps(v[u], _mm512_loadu_ps(x + r * ldx + k + u * kLanes), acc[r][u]);
  }
  for (; k + kGroup <= n; k += kGroup) {
    __m512 v[2];
    decode32(w + k, v);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int u = 0; u < 2; ++u)
        acc[r][u] = _mm512_fmadd_ps(v[u], _mm512_loadu_ps(x + r * ldx + k + u * kLanes), acc[r][u]);
  }
  if (k < n) {  // the last n % 32 through zero-padded copies (a zero code times zero adds nothing)
    alignas(64) uint8_t tail_w[kGroup] = {};
    for (int64_t t = k; t < n; ++t) tail_w[t - k] = w[t];
    __m512 v[2];
    decode32(tail_w, v);
    for (int r = 0; r < R; ++r) {
      alignas(64) float tail_x[kGroup] = {};
      for (int64_t t = k; t < n; ++t) tail_x[t - k] = x[r * ldx + t];
      for (int u = 0; u < 2; ++u) acc[r][u] = _mm512_fmadd_ps(v[u], _mm512_load_ps(tail_x + u * kLanes), acc[r][u]);
    }
  }
  for (int r = 0; r < R; ++r) {
    __m512 total = acc[r][0];
    for (int u = 1; u < kAcc; ++u) total = _mm512_add_ps(total, acc[r][u]);
    sums[r] = horizontal_sum(total);
  }
}

}  // namespace

void fp8_gemv_avx512(const Fp8GemvArgs& a) {
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
