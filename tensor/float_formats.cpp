// Narrow float encode/decode. One generic round-to-nearest-even encoder serves fp16 and both FP8
// formats (they differ only in exponent/mantissa widths, bias and what overflow means); bfloat16 is
// the top half of a float32 and gets its own two-line rounding. Decoding goes through tables built
// once from the format definition, so bulk conversions are a load per element.
#include "tensor/float_formats.h"

#include <array>
#include <bit>
#include <cmath>
#include <limits>

namespace weft {
namespace {

// A narrow format with E exponent bits and M mantissa bits (sign bit on top).
struct NarrowFormat {
  int exponent_bits;
  int mantissa_bits;
  uint32_t max_finite_code;  // magnitude bits of the largest finite value
  bool has_infinity;         // IEEE-style: all-ones exponent with zero mantissa is Inf
  uint32_t nan_code;         // magnitude bits written for NaN (sign is added)

  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
  uint32_t sign_bit() const { return 1u << (exponent_bits + mantissa_bits); }
};

constexpr NarrowFormat kHalfFormat{5, 10, 0x7BFF, true, 0x7E00};
constexpr NarrowFormat kE4M3Format{4, 3, 0x7E, false, 0x7F};
constexpr NarrowFormat kE5M2Format{5, 2, 0x7B, true, 0x7F};

// Encodes with round-to-nearest-even. `overflow_code` is what a value past max_finite_code (or an
// infinity) becomes, without the sign.
uint32_t encode(float value, const NarrowFormat& f, uint32_t overflow_code) {
  const uint32_t u = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (u >> 31) ? f.sign_bit() : 0;
  const uint32_t magnitude = u & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return sign | f.nan_code;
  if (magnitude < 0x00800000u) return sign;  // float32 subnormals are far below every narrow format

  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  const uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;  // 24 bits, implicit one included
  const int M = f.mantissa_bits;
  int narrow_exponent = exponent + f.bias();
  int shift = 23 - M;  // mantissa bits dropped
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
                            : (static_cast<uint32_t>(narrow_exponent) << M) + q - (1u << M);
  if (code > f.max_finite_code) return sign | overflow_code;
  return sign | code;
}

float decode(uint32_t code, const NarrowFormat& f) {
  const bool negative = code & f.sign_bit();
  const uint32_t magnitude = code & (f.sign_bit() - 1);
  const int M = f.mantissa_bits;
  const uint32_t exponent = magnitude >> M;
  const uint32_t mantissa = magnitude & ((1u << M) - 1);
  float value;
  if (magnitude > f.max_finite_code) {
    const bool is_inf = f.has_infinity && mantissa == 0;
    value = is_inf ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  } else if (exponent == 0) {
    value = std::ldexp(static_cast<float>(mantissa), 1 - f.bias() - M);
  } else {
    value = std::ldexp(static_cast<float>(mantissa + (1u << M)), static_cast<int>(exponent) - f.bias() - M);
  }
  return negative ? -value : value;
}

template <size_t N>
std::array<float, N> decode_table(const NarrowFormat& f) {
  std::array<float, N> table{};
  for (size_t code = 0; code < N; ++code) table[code] = decode(static_cast<uint32_t>(code), f);
  return table;
}

}  // namespace

float half_to_float(uint16_t bits) {
  static const auto table = decode_table<65536>(kHalfFormat);
  return table[bits];
}

uint16_t float_to_half(float value) {
  return static_cast<uint16_t>(encode(value, kHalfFormat, 0x7C00));  // IEEE: overflow is Inf
}

float fp8_e4m3fn_to_float(uint8_t bits) {
  static const auto table = decode_table<256>(kE4M3Format);
  return table[bits];
}

uint8_t float_to_fp8_e4m3fn(float value, bool saturate) {
  // E4M3FN has no infinity: overflow is either the largest finite value or NaN.
  return static_cast<uint8_t>(encode(value, kE4M3Format, saturate ? 0x7E : 0x7F));
}

float fp8_e5m2_to_float(uint8_t bits) {
  static const auto table = decode_table<256>(kE5M2Format);
  return table[bits];
}

uint8_t float_to_fp8_e5m2(float value, bool saturate) {
  return static_cast<uint8_t>(encode(value, kE5M2Format, saturate ? 0x7B : 0x7C));
}

}  // namespace weft
