// int8 product at a few rows of A with B read in place, for AVX2: the decode step of an
// LLM.int8() layer on CPUs without AVX-512 (int8_gemv_avx512.cpp is the same loop on zmm).
//
//   a: (M, k) int8, M <= 4 · b: (n, k) int8, both row-major -> c: (M, n) int32
//
// vpmaddubsw multiplies unsigned bytes by signed ones, so each product a·b is formed as
// |a| · sign(a)·b (vpsignb: b negated where a < 0, zeroed where a = 0): |a| <= 127 and |b| <= 127
// keep every pair sum within int16 (2 · 127² = 32258), vpmaddwd by ones widens the pairs to int32
// lanes, and the lanes are summed at the end; the sum is exact (K <= kInt8GemmMaxK keeps it in
// int32). Four rows of B at a time share each load of A's bytes. AVX2 has no masked byte loads,
// so the last k % 32 bytes go through zero-padded copies; B's -128 (outside the operands' range,
// and not negatable) is caught by a running byte minimum, not computed with.
#include "precision/quant/int8_gemm_kernels.h"
#include "tensor/cpu/gemv_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::precision::quant::kernels {
namespace {

using weft::detail::kGemvAheadBytes;

constexpr int64_t kRows = 4;  // rows of B per pass
constexpr int64_t kChunk = 32;

inline __m256i load32(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// The last `count` (< 32) bytes at p, zero-padded to 32.
inline __m256i load_tail(const int8_t* p, int64_t count) {
  alignas(32) int8_t padded[kChunk] = {};
  for (int64_t t = 0; t < count; ++t) padded[t] = p[t];
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(padded));
}

// R rows of B against M rows of A over one 32-byte chunk of K, loaded by `load`.
template <int R, int M, class Load>
void chunk(const int8_t* a, const int8_t* b, int64_t k, int64_t kk, Load&& load, __m256i (&acc)[R][M],
           __m256i& lowest) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i av[M], magnitude[M];
  for (int i = 0; i < M; ++i) {
    av[i] = load(a + i * k + kk);
    magnitude[i] = _mm256_abs_epi8(av[i]);
  }
  for (int r = 0; r < R; ++r) {
    const __m256i bv = load(b + r * k + kk);
    lowest = _mm256_min_epi8(lowest, bv);
    for (int i = 0; i < M; ++i) {
      const __m256i pairs = _mm256_maddubs_epi16(magnitude[i], _mm256_sign_epi8(bv, av[i]));
      acc[r][i] = _mm256_add_epi32(acc[r][i], _mm256_madd_epi16(pairs, ones));
    }
  }
}

inline int32_t sum_lanes(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

template <int R, int M>
void block(const int8_t* a, const int8_t* b, int64_t k, int32_t* c, int64_t ldc, __m256i& lowest) {
  __m256i acc[R][M];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < M; ++i) acc[r][i] = _mm256_setzero_si256();
  const int64_t whole = k / kChunk * kChunk;
  for (int64_t kk = 0; kk < whole; kk += kChunk) {
    if (kk % 64 == 0)  // a cache line of each row
      for (int r = 0; r < R; ++r)
        _mm_prefetch(reinterpret_cast<const char*>(b + r * k + kk + kGemvAheadBytes), _MM_HINT_T0);
    chunk<R, M>(a, b, k, kk, load32, acc, lowest);
  }
  if (whole < k) chunk<R, M>(a, b, k, whole, [&](const int8_t* p) { return load_tail(p, k - whole); }, acc, lowest);
  for (int i = 0; i < M; ++i)
    for (int r = 0; r < R; ++r) c[i * ldc + r] = sum_lanes(acc[r][i]);
}

// M rows of A against all n rows of B.
template <int M>
bool rows_of_b(const int8_t* a, const int8_t* b, int64_t n, int64_t k, int32_t* c, int64_t ldc) {
  __m256i lowest = _mm256_setzero_si256();
  int64_t j = 0;
  for (; j + kRows <= n; j += kRows) block<kRows, M>(a, b + j * k, k, c + j, ldc, lowest);
  for (; j < n; ++j) block<1, M>(a, b + j * k, k, c + j, ldc, lowest);
  return _mm256_movemask_epi8(_mm256_cmpeq_epi8(lowest, _mm256_set1_epi8(-128))) != 0;
}

}  // namespace

const Int8Gemv kInt8GemvAvx2 = {{rows_of_b<1>, rows_of_b<2>, rows_of_b<3>, rows_of_b<4>}};

}  // namespace weft::precision::quant::kernels
