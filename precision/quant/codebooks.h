// The code tables of bitsandbytes' formats: what each 4-bit or 8-bit code stands for, as a
// fraction of its block's absmax (../shared/reference/quantization-fp8.md §B.1.1, §B.1.3).
//
// NF4 is a lookup table sorted by value (code order = value order): 7 negative levels, an exact
// 0, 8 positive levels, the quantiles of a normal distribution scaled to [-1, 1]. FP4 is
// bitsandbytes' own 1-2-1 float layout, listed in bit-pattern order: bit 3 is the sign, and the low
// three bits map to 0, 0.0625, 8, 12, 4, 6, 2, 3 (divided by 12) — not OCP E2M1's order. The
// signed dynamic map is the 256-entry table that 8-bit blockwise quantization and double
// quantization use: 127 negative values, 0, 128 positive values, 1 to 64 values per decade.
//
// Values are exactly the float32 numbers bitsandbytes computes (tests compare them with its output).
#pragma once

#include <array>

namespace weft::precision::quant {

// Indexed by the 4-bit code.
const std::array<float, 16>& nf4_code();
const std::array<float, 16>& fp4_code();
// fp4_code() with the sign bit applied to zero too, so code 0b1000 gives -0 (the quant_map holds
// +0 there). bitsandbytes 0.50's own CPU kernels disagree on that one zero's sign by host: the
// scalar path decodes 0b1000 as -0, the AVX-512 path and the generic fallback as +0. weft decodes
// -0 on every path; the two agree on every value's magnitude, and only 1/x could tell them apart.
const std::array<float, 16>& fp4_cpu_decode_code();

// Sorted ascending; index = 8-bit code.
const std::array<float, 256>& dynamic_code();

}  // namespace weft::precision::quant
