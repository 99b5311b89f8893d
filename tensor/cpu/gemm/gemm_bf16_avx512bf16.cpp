// AVX-512 BF16 GEMM kernel set: bfloat16 inputs, float32 accumulation (ISA kernel unit: Note [ISA
// kernel units] in tensor/cpu/simd.h).
//
// Register tile 12×32 over K-pairs (Note [bf16 K-pair panels] in packing.h): per pair step q,
// two zmm loads of B hold 32 columns × 2 steps, each row of A is one 32-bit broadcast of its two
// values, and vdpbf16ps adds a(i,2q)·b(2q,j) + a(i,2q+1)·b(2q+1,j) into fp32 lane j:
//   c(12×32) (+)= Σ_q A(:, 2q..2q+1) · B(2q..2q+1, :)
// 24 accumulators: vdpbf16ps has latency 6 on Zen 5 with two pipes, so 12 chains are the minimum.
// The instruction rounds after each of its two products and treats bf16 and fp32 denormals as
// zero, so results differ from the float32 kernels in the last bits; tests compare with a tolerance.
#include "tensor/cpu/gemm/gemm_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

constexpr int kMr = 12, kNr = 32;

__mmask16 lane_mask(int n) { return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1); }

__m512bh as_bf16x32(__m512i v) {
  __m512bh r;
  __builtin_memcpy(&r, &v, sizeof(r));
  return r;
}

// The two bfloat16 values at p, as one 32-bit lane broadcast to all 16.
__m512bh broadcast_pair(const uint16_t* p) {
  int32_t pair;
  __builtin_memcpy(&pair, p, sizeof(pair));
  return as_bf16x32(_mm512_set1_epi32(pair));
}

template <int ROWS>
void tile(const GemmTileBf16& t) {
  __m512 c0[ROWS], c1[ROWS];
#pragma GCC unroll 12
  for (int r = 0; r < ROWS; ++r) c0[r] = c1[r] = _mm512_setzero_ps();
  const uint16_t* a = t.a;
  const uint16_t* b = t.b;
#pragma GCC unroll 2
  for (int64_t q = 0; q < t.kpairs; ++q) {
    const __m512bh b0 = as_bf16x32(_mm512_loadu_si512(b));
    const __m512bh b1 = as_bf16x32(_mm512_loadu_si512(b + 32));
#pragma GCC unroll 12
    for (int r = 0; r < ROWS; ++r) {
      const __m512bh ar = broadcast_pair(a + r * 2);
      c0[r] = _mm512_dpbf16_ps(c0[r], ar, b0);
      c1[r] = _mm512_dpbf16_ps(c1[r], ar, b1);
    }
    a += kMr * 2;
    b += kNr * 2;
  }

  const __mmask16 m0 = lane_mask(t.n), m1 = lane_mask(t.n - 16);
#pragma GCC unroll 12
  for (int r = 0; r < ROWS; ++r) {
    float* c = t.c + r * t.ldc;
    if (t.accumulate) {
      c0[r] = _mm512_add_ps(c0[r], _mm512_maskz_loadu_ps(m0, c));
      c1[r] = _mm512_add_ps(c1[r], _mm512_maskz_loadu_ps(m1, c + 16));
    }
    _mm512_mask_storeu_ps(c, m0, c0[r]);
    _mm512_mask_storeu_ps(c + 16, m1, c1[r]);
  }
}

void micro_bf16(const GemmTileBf16& t) {
  switch (t.m) {
    case 1: return tile<1>(t);
    case 2: return tile<2>(t);
    case 3: return tile<3>(t);
    case 4: return tile<4>(t);
    case 5: return tile<5>(t);
    case 6: return tile<6>(t);
    case 7: return tile<7>(t);
    case 8: return tile<8>(t);
    case 9: return tile<9>(t);
    case 10: return tile<10>(t);
    case 11: return tile<11>(t);
    default: return tile<12>(t);
  }
}

}  // namespace

const GemmKernel kGemmBf16Avx512Bf16 = {
    .name = "avx512_bf16 12x32",
    .mr = kMr, .nr = kNr,
    .mc = 384, .kc = 768, .nc = 4096,  // kc counts bf16 steps: 384 pairs
    .bf16_pairs = true,
    .micro_f32 = nullptr,
    .micro_bf16 = micro_bf16,
    .pack_b = nullptr,
    .pack_a = nullptr,
    .dot_rows = nullptr,
};

}  // namespace weft::detail
