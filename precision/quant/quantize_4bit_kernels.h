// Entry points of the 4-bit quantization kernel units (quantize_4bit_<isa>.cpp), chosen at run
// time by blockwise.cpp. Plain declarations only (Note [ISA kernel units] in tensor/cpu/simd.h).
//
// bitsandbytes' rule, as the scalar reference quantize_4bit in quant_format.cpp computes it, for
// whole blocks: absmax = max |x| over the block (NaN if it holds one), each value scaled by
// 1 / max(absmax, 1e-38), clamped to [-1, 1], and given the code of the table entry nearest to it —
// the sorted entry whose index is the number of midpoints strictly below the value — two codes a
// byte, the first in the high nibble.
#pragma once

#include <cstdint>

namespace weft::precision::quant::kernels {

struct Quantize4bitArgs {
  const float* x;          // blocks · blocksize values
  int64_t blocks;
  int64_t blocksize;       // a multiple of 32
  const float* bounds;     // the 15 midpoints between the sorted table's neighbours, ascending
  const uint8_t* code_of;  // 16 entries: the code of each sorted table entry
  uint8_t* packed;         // blocks · blocksize / 2 bytes
  float* absmax;           // one per block
};

void quantize_4bit_avx2(const Quantize4bitArgs& args);

}  // namespace weft::precision::quant::kernels
