// The FP8 scale rules as WEFT_HD functions (tensor/host_device.h): the one definition of the
// amax maximum and of the DelayedScaling and Float8CurrentScaling formulas
// (precision/fp8/fp8_meta.h) that the CPU bookkeeping and the CUDA kernels share, so a scale
// computed on the GPU has the CPU's bits.
//
// Classification is done on the bit pattern (std::isnan and friends are not device functions);
// ldexpf is a host and device function both. The divisions are IEEE float32 divisions on both
// sides: nvcc divides to nearest unless --use_fast_math, which weft never passes.
#pragma once

#include <cmath>
#include <cstdint>

#include "tensor/host_device.h"

namespace weft::precision::detail {

WEFT_HD inline bool fp8_rule_is_nan(float v) { return (weft::detail::float_bits(v) & 0x7FFFFFFFu) > 0x7F800000u; }
WEFT_HD inline bool fp8_rule_is_inf(float v) { return (weft::detail::float_bits(v) & 0x7FFFFFFFu) == 0x7F800000u; }
WEFT_HD inline bool fp8_rule_is_finite(float v) { return (weft::detail::float_bits(v) & 0x7F800000u) != 0x7F800000u; }

// The largest finite float32: what a scale that overflows becomes.
WEFT_HD inline float fp8_rule_float_max() { return weft::detail::bits_float(0x7F7FFFFFu); }

// max that keeps a NaN once seen (Note [FP8 amax] in precision/fp8/fp8_kernels.h).
WEFT_HD inline float fp8_nan_max(float a, float b) { return fp8_rule_is_nan(a) || a > b ? a : b; }

// DelayedScaling: (fp8_max · 2^-margin) / amax when amax is finite and > 0, FLT_MAX where that
// overflows; the old scale otherwise.
WEFT_HD inline float fp8_delayed_scale(float amax, float old_scale, float fp8_max, int margin) {
  if (!(fp8_rule_is_finite(amax) && amax > 0.0f)) return old_scale;
  const float scaled_max = fp8_max * ldexpf(1.0f, -margin);
  const float scale = scaled_max / amax;
  return fp8_rule_is_inf(scale) ? fp8_rule_float_max() : scale;
}

// Float8CurrentScaling: fp8_max / max(amax, amax_epsilon); 1 when that is 0 or not finite;
// FLT_MAX where the quotient overflows; rounded down to a power of two when power_2_scale.
WEFT_HD inline float fp8_current_scale(float amax, float fp8_max, float amax_epsilon, bool power_2_scale) {
  const float a = fp8_rule_is_nan(amax) || amax > amax_epsilon ? amax : amax_epsilon;
  if (!(fp8_rule_is_finite(a) && a > 0.0f)) return 1.0f;
  float scale = fp8_max / a;
  if (fp8_rule_is_inf(scale)) scale = fp8_rule_float_max();
  // Keeping only sign and exponent rounds a positive normal float down to a power of two.
  if (power_2_scale) scale = weft::detail::bits_float(weft::detail::float_bits(scale) & 0xFF800000u);
  return scale;
}

}  // namespace weft::precision::detail
