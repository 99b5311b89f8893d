// The scalar reference FP8 kernels: one element at a time through the bit-exact conversions of
// tensor/float_formats.h. Every vector kernel is tested against these, code for code.
#include <bit>
#include <cmath>
#include <limits>

#include "precision/fp8/fp8_kernels.h"
#include "tensor/float_formats.h"

namespace weft::detail {
namespace {

float source_value(const void* src, bool src_bf16, int64_t i) {
  if (src_bf16) return bfloat16_to_float(static_cast<const uint16_t*>(src)[i]);
  return static_cast<const float*>(src)[i];
}

float code_value(uint8_t code, bool e5m2) { return e5m2 ? fp8_e5m2_to_float(code) : fp8_e4m3fn_to_float(code); }

// max that keeps a NaN once seen (Note [FP8 amax]).
float nan_max(float a, float b) { return std::isnan(a) || a > b ? a : b; }

}  // namespace

float fp8_encode_scalar(const Fp8EncodeArgs& a) {
  float amax = 0.0f;
  for (int64_t i = 0; i < a.n; ++i) {
    const float x = source_value(a.src, a.src_bf16, i);
    const float v = x * a.scale;
    const uint8_t code = a.e5m2 ? float_to_fp8_e5m2(v, a.saturate) : float_to_fp8_e4m3fn(v, a.saturate);
    a.codes[i] = code;
    if (a.decoded) a.decoded[i] = float_to_bfloat16(code_value(code, a.e5m2));
    amax = nan_max(amax, std::fabs(x));
  }
  return amax;
}

void fp8_decode_scalar(const Fp8DecodeArgs& a) {
  for (int64_t i = 0; i < a.n; ++i) {
    const float v = code_value(a.codes[i], a.e5m2) * a.scale_inv;
    if (a.out_f32) a.out_f32[i] = v;
    else a.out_bf16[i] = float_to_bfloat16(v);
  }
}

float fp8_amax_scalar(const void* src, bool src_bf16, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = nan_max(amax, std::fabs(source_value(src, src_bf16, i)));
  return amax;
}

void fp8_epilogue_scalar(const Fp8EpilogueArgs& a) {
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t j = 0; j < a.cols; ++j) {
      const float v = std::fma(a.acc[i * a.cols + j], a.scale, a.bias ? a.bias[j] : 0.0f);
      if (a.out_f32) a.out_f32[i * a.cols + j] = v;
      else a.out_bf16[i * a.cols + j] = float_to_bfloat16(v);
    }
}

}  // namespace weft::detail
