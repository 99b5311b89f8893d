// PyTorch's float32 mean, rounding for rounding.
//
// Double quantization subtracts the mean of a block-absmax vector before quantizing it, and
// bitsandbytes takes that mean with torch.mean, whose float32 sum follows PyTorch's CPU kernel:
// a cascade of partial sums over interleaved lanes, not a left-to-right loop. Any other order
// rounds differently in about half of all cases, and the stored `nested_offset` (and every nested
// code after it) would no longer equal bitsandbytes'. This reproduces the kernel's order for a
// contiguous vector on one thread with 8-lane (AVX2) vectors, the configuration the golden files
// are generated in; PyTorch itself rounds differently with 16-lane (AVX-512) vectors or several
// threads on more than 32768 values.
#pragma once

#include <cstdint>

namespace weft::precision::quant {

float pytorch_sum(const float* x, int64_t n);
// pytorch_sum / n, divided in float32 (n > 0).
float pytorch_mean(const float* x, int64_t n);

}  // namespace weft::precision::quant
