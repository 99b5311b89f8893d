// The FP8-weight GEMV kernels' entry points, one per instruction set (Note [ISA kernel units] in
// tensor/cpu/simd.h): the scalar reference (fp8_gemv_scalar.cpp) and the AVX2 and AVX-512 units.
// precision/fp8/fp8_gemv.h picks one from cpu_isa() and splits the output rows over threads.
//
// Each computes, for the output rows j in [row_begin, row_end) and every input row i < m,
//   y[i·out + j] = fma(Σ_k value(codes[j·in + k]) · x[i·in + k], scale_j, bias_j)
// with value() the exact float32 value of an E4M3 code, the sum accumulated in float32
// (the vector kernels keep several partial sums, and sum the values times 2^-8 — Note [E4M3
// decode through float16] in fp8_gemv_avx512.cpp — so they agree with the reference to float32
// rounding, not bit for bit), scale_j = row_scales[j] or tensor_scale when row_scales is null, and
// bias_j = 0 when bias is null. The codes must not hold the NaN codes 0x7F / 0xFF (the layer
// never makes or loads them), which the vector decoders do not special-case.
// Every weight row is read once whatever m is: a row's codes stay in the L1 cache while the input
// rows pass over them, so the kernels stream the weight at memory speed for the few rows of a
// decode step.
#pragma once

#include <cstdint>

namespace weft::detail {

struct Fp8GemvArgs {
  const uint8_t* codes;     // (out, in) float8_e4m3fn codes, row-major
  const float* x;           // (m, in), row-major
  const float* row_scales;  // (out) or null
  float tensor_scale;       // used when row_scales is null
  const float* bias;        // (out) or null
  float* y;                 // (m, out), row-major
  int64_t m;
  int64_t in;
  int64_t out;
  int64_t row_begin;
  int64_t row_end;
};

void fp8_gemv_scalar(const Fp8GemvArgs& args);
void fp8_gemv_avx2(const Fp8GemvArgs& args);
void fp8_gemv_avx512(const Fp8GemvArgs& args);

}  // namespace weft::detail
