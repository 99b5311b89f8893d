// Vector kernels for the contiguous float32 <-> float16 / bfloat16 conversions of copy.cpp,
// chosen at run time (Note [ISA kernel units] in tensor/cpu/simd.h). Plain declarations.
// Each gives exactly the bits of the scalar conversions in tensor/float_formats.h (round to
// nearest even; bfloat16 NaN becomes the canonical quiet NaN 0x7FC0), which
// tests/tensor/test_float_formats.cpp checks code by code at every level.
#pragma once

#include <cstdint>

namespace weft::detail {

void float_to_half_avx2(const float* src, uint16_t* dst, int64_t n);
void half_to_float_avx2(const uint16_t* src, float* dst, int64_t n);
void float_to_bfloat16_avx2(const float* src, uint16_t* dst, int64_t n);
void bfloat16_to_float_avx2(const uint16_t* src, float* dst, int64_t n);
void float_to_bfloat16_avx512(const float* src, uint16_t* dst, int64_t n);
void bfloat16_to_float_avx512(const uint16_t* src, float* dst, int64_t n);

}  // namespace weft::detail
