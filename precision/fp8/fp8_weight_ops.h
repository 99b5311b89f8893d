// FP8 weight-only quantization (precision/fp8/fp8_weight_linear.h's arithmetic): a float weight
// (out, in) stored as float8_e4m3fn codes with float32 scales, one per tensor or one per output
// row, and its product with float32 activations.
//
//   scale  = amax / 448 over the tensor or over the row (float32 division), where amax = max |w|;
//            1 where amax is 0 (an all-zero row), or where it is so small (< about 1e-35) that
//            1 / scale overflows float32; a NaN or ±Inf weight is an error
//   codes  = e4m3(w · (1 / scale)): the saturating, round-to-nearest-even cast of
//            precision/fp8/fp8_cast.h (bit-exact with tensor/float_formats.h's
//            float_to_fp8_e4m3fn on every instruction set) with the float32 factor 1 / scale, as
//            every scaled FP8 cast in weft multiplies; the codes are never NaN (0x7F / 0xFF)
//   value  = value(code) · scale (the dequantized weight)
//
// fp8_weight_matmul computes y = x · (codes · scale)ᵀ + b with float32 accumulation, the scale
// and bias applied once per output, fma(Σ_k value(code) · x, scale, b):
//   - up to kFp8GemvMaxRows input rows (decoding a token): the GEMV kernels of
//     precision/fp8/fp8_gemv_kernels.h for the active instruction set, the output rows split over
//     weft's threads; each weight byte is read once, so the product runs at memory bandwidth;
//   - more rows (a prompt): blocks of about 4 MB of weight rows decoded to their exact float32
//     values and multiplied by weft's float32 GEMM (linear()), the scale and bias applied to each
//     block's outputs; no more than one block is ever held as floats.
// Everything here runs on the CPU and takes contiguous tensors.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace weft::precision {

inline constexpr int64_t kFp8GemvMaxRows = 8;

struct Fp8QuantizedWeight {
  Tensor codes;  // float8_e4m3fn (out, in)
  Tensor scale;  // float32: () per tensor, (out) per channel
};

// w: (out, in), floating (float32 and bfloat16 are read as they are, other dtypes through float32).
Fp8QuantizedWeight quantize_fp8_weight(const Tensor& w, bool per_channel);

// codes · scale as float32 (out, in), each value rounded once.
Tensor dequantize_fp8_weight(const Tensor& codes, const Tensor& scale);

// x: (m, in) float32 · (codes: (out, in) · scale)ᵀ + bias: (out) float32 or undefined -> (m, out) float32.
Tensor fp8_weight_matmul(const Tensor& x, const Tensor& codes, const Tensor& scale, const Tensor& bias);

// True when the codes hold a NaN code (0x7F or 0xFF), which the layer refuses to load.
bool fp8_codes_have_nan(const Tensor& codes);

}  // namespace weft::precision
