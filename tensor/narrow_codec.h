// The narrow float codecs as WEFT_HD functions: the one definition of float32 <-> float16,
// bfloat16, float8_e4m3fn and float8_e5m2 that the CPU (tensor/float_formats.cpp builds on it)
// and the CUDA kernels share, so a cast gives the same bits on both (semantics in
// tensor/float_formats.h: round to nearest even, NaN stays NaN, FP8 saturates unless told not to).
//
// One generic encoder serves float16 and both FP8 formats, which differ only in exponent and
// mantissa widths, bias and what overflow means; bfloat16 is the top half of a float32.
// Decoding builds the float32 bit pattern directly (every narrow code is exact in float32).
#pragma once

#include <cstdint>

#include "tensor/host_device.h"

namespace weft::detail {

// A narrow format with E exponent bits and M mantissa bits (sign bit on top). kMaxFiniteCode is
// the magnitude of the largest finite value; kHasInfinity: the all-ones exponent with a zero
// mantissa is Inf (IEEE style); kNanCode: the magnitude written for NaN.
template <int E, int M, uint32_t MaxFiniteCode, bool HasInfinity, uint32_t NanCode>
struct NarrowFormat {
  static constexpr int kExponentBits = E;
  static constexpr int kMantissaBits = M;
  static constexpr uint32_t kMaxFiniteCode = MaxFiniteCode;
  static constexpr bool kHasInfinity = HasInfinity;
  static constexpr uint32_t kNanCode = NanCode;
  static constexpr int kBias = (1 << (E - 1)) - 1;
  static constexpr uint32_t kSignBit = 1u << (E + M);
};

using HalfFormat = NarrowFormat<5, 10, 0x7BFF, true, 0x7E00>;
using E4M3Format = NarrowFormat<4, 3, 0x7E, false, 0x7F>;
using E5M2Format = NarrowFormat<5, 2, 0x7B, true, 0x7F>;

// Encodes with round-to-nearest-even. `overflow_code` is what a value past kMaxFiniteCode (or an
// infinity) becomes, without the sign.
template <class F>
WEFT_HD inline uint32_t narrow_encode(float value, uint32_t overflow_code) {
  const uint32_t u = float_bits(value);
  const uint32_t sign = (u >> 31) ? F::kSignBit : 0u;
  const uint32_t magnitude = u & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return sign | F::kNanCode;
  if (magnitude < 0x00800000u) return sign;  // float32 subnormals are far below every narrow format

  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  const uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;  // 24 bits, implicit one included
  int narrow_exponent = exponent + F::kBias;
  int shift = 23 - F::kMantissaBits;  // mantissa bits dropped
  if (narrow_exponent < 1) {  // subnormal in the narrow format: fewer mantissa bits survive
    shift += 1 - narrow_exponent;
    narrow_exponent = 0;
  }
  if (shift >= 25) return sign;  // below half the smallest subnormal: rounds to zero
  uint32_t q = mantissa >> shift;
  const uint32_t remainder = mantissa & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (remainder > half || (remainder == half && (q & 1u))) ++q;
  // A rounding carry out of the mantissa lands in the exponent field by plain addition.
  const uint32_t code = narrow_exponent == 0
                            ? q
                            : (static_cast<uint32_t>(narrow_exponent) << F::kMantissaBits) + q -
                                  (1u << F::kMantissaBits);
  if (code > F::kMaxFiniteCode) return sign | overflow_code;
  return sign | code;
}

template <class F>
WEFT_HD inline float narrow_decode(uint32_t code) {
  const uint32_t sign = (code & F::kSignBit) ? 0x80000000u : 0u;
  const uint32_t magnitude = code & (F::kSignBit - 1);
  constexpr int M = F::kMantissaBits;
  const uint32_t exponent = magnitude >> M;
  const uint32_t mantissa = magnitude & ((1u << M) - 1);
  if (magnitude > F::kMaxFiniteCode) {
    const bool is_inf = F::kHasInfinity && mantissa == 0;
    return bits_float(sign | (is_inf ? 0x7F800000u : 0x7FC00000u));
  }
  if (exponent == 0) {
    // mantissa · 2^(1 − bias − M): an exact product by a power of two inside float32's range.
    const float unit = bits_float(static_cast<uint32_t>(127 + 1 - F::kBias - M) << 23);
    const float value = static_cast<float>(mantissa) * unit;
    return sign ? -value : value;
  }
  const uint32_t float_exponent = exponent - F::kBias + 127;
  return bits_float(sign | (float_exponent << 23) | (mantissa << (23 - M)));
}

WEFT_HD inline uint16_t encode_half(float v) { return static_cast<uint16_t>(narrow_encode<HalfFormat>(v, 0x7C00)); }
WEFT_HD inline float decode_half(uint16_t bits) { return narrow_decode<HalfFormat>(bits); }

// E4M3FN has no infinity: overflow is either the largest finite value or NaN.
WEFT_HD inline uint8_t encode_e4m3(float v, bool saturate = true) {
  return static_cast<uint8_t>(narrow_encode<E4M3Format>(v, saturate ? 0x7E : 0x7F));
}
WEFT_HD inline float decode_e4m3(uint8_t bits) { return narrow_decode<E4M3Format>(bits); }

WEFT_HD inline uint8_t encode_e5m2(float v, bool saturate = true) {
  return static_cast<uint8_t>(narrow_encode<E5M2Format>(v, saturate ? 0x7B : 0x7C));
}
WEFT_HD inline float decode_e5m2(uint8_t bits) { return narrow_decode<E5M2Format>(bits); }

WEFT_HD inline float decode_bfloat16(uint16_t bits) { return bits_float(static_cast<uint32_t>(bits) << 16); }
WEFT_HD inline uint16_t encode_bfloat16(float value) {
  const uint32_t u = float_bits(value);
  const uint32_t rounding_bias = 0x7FFFu + ((u >> 16) & 1u);
  const auto rounded = static_cast<uint16_t>((u + rounding_bias) >> 16);
  return (u & 0x7FFFFFFFu) > 0x7F800000u ? uint16_t{0x7FC0} : rounded;  // NaN: canonical quiet NaN, as PyTorch
}

}  // namespace weft::detail
