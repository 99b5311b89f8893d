// The scaled FP8 casts as device kernels, each behind a KernelRegistry (tensor/kernel_registry.h):
// the CPU kernels in precision/fp8/fp8_cast_kernels.cpp (the instruction-set kernels of
// precision/fp8/fp8_kernels.h split over the CPU threads), the CUDA kernels in
// precision/cuda/fp8_cast_kernels.{cpp,cu} (null in a build without CUDA, precision/cuda_stub.cpp).
//
// The front-ends (precision/fp8/fp8_cast.h) check, convert the source and allocate; the kernels
// only compute, every tensor of a launch on one device and contiguous. Both devices give the same
// bits: the CUDA kernels encode through the codecs of tensor/narrow_codec.h that the CPU's
// scalar reference uses, and multiply by the scale in float32, rounded once.
#pragma once

#include "tensor/kernel_registry.h"
#include "tensor/tensor.h"

namespace weft::precision::detail {

// codes = fp8(source · scale), source float32 or bfloat16 (Note [FP8 amax] for amax).
//   codes     float8_e4m3fn or float8_e5m2, source's size; undefined: only the amax is wanted
//   decoded   bfloat16, the codes' exact values (unscaled); undefined: not wanted
//   scale     the factor, unless scale_on_device is defined: one float32 element that the kernel
//             reads where it lives, so a GPU's scale need not visit the host
//   scale_inv one float32 element or undefined: receives 1 / scale (float32 division)
//   amax      one float32 element or undefined: amax ← nan_max(amax, max |source|)
struct Fp8CastLaunch {
  Tensor source;
  Tensor codes;
  Tensor decoded;
  float scale = 1.0f;
  Tensor scale_on_device;
  Tensor scale_inv;
  Tensor amax;
  bool saturate = true;
};
using Fp8CastKernel = void(const Fp8CastLaunch&);
weft::detail::KernelRegistry<Fp8CastKernel>& fp8_cast_kernels();

// out = value(codes) · scale_inv, float32 or rounded once to bfloat16.
struct Fp8DequantizeLaunch {
  Tensor codes;
  Tensor out;
  float scale_inv = 1.0f;
};
using Fp8DequantizeKernel = void(const Fp8DequantizeLaunch&);
weft::detail::KernelRegistry<Fp8DequantizeKernel>& fp8_dequantize_kernels();

void cpu_fp8_cast(const Fp8CastLaunch& launch);
void cpu_fp8_dequantize(const Fp8DequantizeLaunch& launch);

// The CUDA kernels; null in a build without CUDA (Note [Linking kernels by reference]).
extern Fp8CastKernel* const cuda_fp8_cast;
extern Fp8DequantizeKernel* const cuda_fp8_dequantize;

}  // namespace weft::precision::detail
