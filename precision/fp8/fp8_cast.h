// Scaled FP8 casts: q = cast(x · scale) and back, x ≈ q · scale_inv, for the two OCP formats
// (float8_e4m3fn, max 448; float8_e5m2, max 57344; quantization-fp8.md §B.3).
//
// A cast rounds x · scale (a float32 product) to nearest even. Saturating casts (the default, and
// TransformerEngine's: CUDA's satfinite) clamp what lies past the largest finite value, ±Inf
// included, to ±max; non-saturating casts give NaN (E4M3 has no Inf) or ±Inf (E5M2). NaN stays
// NaN. The results equal tensor/float_formats.h's scalar conversions bit for bit on every path.
//
// Sources are float32 or bfloat16 (other floating dtypes are converted to float32 first), of any
// shape and layout, on the CPU or a GPU; results are contiguous, on the source's device. The casts
// are not differentiable: the FP8 layers (precision/fp8/fp8_linear.h) write their own backward.
// Each device has its kernels behind a registry (precision/fp8/fp8_cast_kernels.h): on the CPU
// vectorised per instruction set (precision/fp8/fp8_kernels.h) and split over the threads, on CUDA
// one grid-stride pass with the amax reduced on the device; both give the same codes bit for bit.
//
// The functions that return a float (the amax) read it back from a GPU, so they wait for it;
// fp8_cast, fp8_dequantize, fp8_cast_scaled and fp8_amax_into only queue work there.
#pragma once

#include <utility>

#include "tensor/tensor.h"

namespace weft::precision {

// 448 for float8_e4m3fn, 57344 for float8_e5m2; throws for any other dtype.
float fp8_max(DType fp8_dtype);

// A quantized operand as the FP8 GEMM takes it (precision/fp8/fp8_gemm.h): codes and the factor
// that brings them back, x ≈ value(data) · scale_inv.
struct Fp8Tensor {
  Fp8Tensor() = default;
  explicit Fp8Tensor(Tensor data_, float scale_inv_ = 1.0f, Tensor decoded_ = Tensor(),
                     Tensor device_scale_inv_ = Tensor())
      : data(std::move(data_)),
        scale_inv(scale_inv_),
        decoded(std::move(decoded_)),
        device_scale_inv(std::move(device_scale_inv_)) {}

  Tensor data;  // float8_e4m3fn or float8_e5m2
  float scale_inv = 1.0f;
  // Optional: the exact bfloat16 copy of data's values, same layout, when the cast made one; the
  // CPU GEMM then skips decoding.
  Tensor decoded;
  // Optional: the factor as one float32 element on data's device, used instead of scale_inv. A
  // GPU cast with a scale that lives on the GPU (fp8_cast_scaled) leaves it there, so the GEMM
  // can read it without the host waiting for the device.
  Tensor device_scale_inv;
};

// max |x| over every element, NaN if any element is NaN (Note [FP8 amax] in fp8_kernels.h).
float fp8_amax(const Tensor& x);

Tensor fp8_cast(const Tensor& x, DType fp8_dtype, float scale, bool saturate = true);

// What one pass over the source gives: the codes, the source's amax, and, when asked for, the
// codes' values as bfloat16 (exact and unscaled), which is what the GEMM multiplies.
struct Fp8CastResult {
  Tensor codes;
  float amax = 0.0f;
  Tensor decoded;  // bfloat16, same shape; undefined unless asked for
};
Fp8CastResult fp8_cast_with_amax(const Tensor& x, DType fp8_dtype, float scale, bool saturate = true,
                                 bool decode_bf16 = false);

// For layers whose scale and amax live on the device beside x (precision/fp8/fp8_meta.h): the
// cast with its scale read on that device from `scale` (one float32 element), max |x| maxed into
// `amax` (one float32 element on x's device, NaN wins; skipped when undefined), and the factor
// 1 / scale computed there too: returned as scale_inv for a CPU source, as device_scale_inv
// otherwise. Nothing is read back from a GPU.
Fp8Tensor fp8_cast_scaled(const Tensor& x, DType fp8_dtype, const Tensor& scale, const Tensor& amax = Tensor(),
                          bool saturate = true, bool decode_bf16 = false);

// amax ← nan_max(amax, max |x|), amax one float32 element on x's device; nothing read back.
void fp8_amax_into(const Tensor& x, const Tensor& amax);

// value(q) · scale_inv as float32 or bfloat16 (rounded once, to nearest even).
Tensor fp8_dequantize(const Tensor& q, float scale_inv, DType dtype = kFloat32);

// The exact bfloat16 copy of q's values (no scale): what the CPU GEMM multiplies.
Tensor fp8_decode_bf16(const Tensor& q);

}  // namespace weft::precision
