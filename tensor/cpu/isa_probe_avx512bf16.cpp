// The two loops of isa_probe_kernels.h: twelve chains of vdpbf16ps, and twelve of vfmadd231ps.
// The operands stay far from denormals and overflow (1.0 times small steps) so that neither loop
// meets a microcode assist, and the chains live in registers: the array is fully unrolled. Each
// chain starts from its own value: twelve identical chains were folded into one by the compiler,
// and the loops timed the instructions' latency instead.
#include "tensor/cpu/isa_probe_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

constexpr int kChains = 12;

__m512bh ones_bf16x32() {
  const __m512i bits = _mm512_set1_epi16(0x3F80);  // bfloat16 1.0
  __m512bh r;
  __builtin_memcpy(&r, &bits, sizeof(r));
  return r;
}

float sum_chains(const __m512 (&acc)[kChains]) {
  __m512 total = acc[0];
#pragma GCC unroll 12
  for (int c = 1; c < kChains; ++c) total = _mm512_add_ps(total, acc[c]);
  return _mm512_reduce_add_ps(total);
}

}  // namespace

float bf16_dot_chains_avx512bf16(int64_t steps) {
  const __m512bh one = ones_bf16x32();
  __m512 acc[kChains];
#pragma GCC unroll 12
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  for (int64_t s = 0; s < steps; ++s) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], one, one);
  }
  return sum_chains(acc);
}

float fma_chains_avx512bf16(int64_t steps) {
  const __m512 one = _mm512_set1_ps(1.0f), step = _mm512_set1_ps(1.0f / 1024);
  __m512 acc[kChains];
#pragma GCC unroll 12
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  for (int64_t s = 0; s < steps; ++s) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(one, step, acc[c]);
  }
  return sum_chains(acc);
}

}  // namespace weft::detail
