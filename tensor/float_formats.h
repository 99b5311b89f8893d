// Bit-exact conversions between float32 and the narrow floating formats weft stores:
// IEEE binary16 (fp16), bfloat16, and the two OCP FP8 formats E4M3FN and E5M2.
//
// Rounding is round-to-nearest-even everywhere. NaN stays NaN (quiet, sign kept where the format
// has a sign on NaN). FP8 encodes saturate by default, as CUDA's __NV_SATFINITE casts do: finite
// values past the largest code, and ±Inf, become ±max; with saturate=false they become NaN (E4M3FN,
// which has no Inf) or ±Inf (E5M2). See ../shared/reference/quantization-fp8.md §B.3 for the table.
//
// Decoding is exact (every narrow code is representable in float32).
#pragma once

#include <bit>
#include <cstdint>

namespace weft {

float half_to_float(uint16_t bits);
uint16_t float_to_half(float value);

// bfloat16 is the top half of a float32, so both directions are a few integer operations; they
// are defined here so that conversion loops inline and vectorise them (bf16 autocast converts
// every weight and activation of a step).
inline float bfloat16_to_float(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

inline uint16_t float_to_bfloat16(float value) {
  const uint32_t u = std::bit_cast<uint32_t>(value);
  const uint32_t rounding_bias = 0x7FFFu + ((u >> 16) & 1u);
  const auto rounded = static_cast<uint16_t>((u + rounding_bias) >> 16);
  return (u & 0x7FFFFFFFu) > 0x7F800000u ? uint16_t{0x7FC0} : rounded;  // NaN: canonical quiet NaN, as PyTorch
}

float fp8_e4m3fn_to_float(uint8_t bits);
uint8_t float_to_fp8_e4m3fn(float value, bool saturate = true);

float fp8_e5m2_to_float(uint8_t bits);
uint8_t float_to_fp8_e5m2(float value, bool saturate = true);

// Storage types: a distinct C++ type per narrow format so kernels can dispatch on them.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};
struct Float8E4M3FN {
  uint8_t bits;
};
struct Float8E5M2 {
  uint8_t bits;
};

}  // namespace weft
