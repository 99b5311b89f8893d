// The FP8 GEMM, and the seam through which a device supplies its own (cuBLASLt on Hopper).
//
//   out = (A · B) · (a.scale_inv · b.scale_inv) + bias,    A: (M, K), B: (K, N), out: (M, N)
//
// where an operand with a device_scale_inv (Fp8Tensor) has that element as its scale_inv.
// A and B are FP8 codes (Fp8Tensor, precision/fp8/fp8_cast.h), each contiguous or the transpose
// of a contiguous matrix: the forward y = x·Wᵀ, the input gradient dx = dy·W and the weight
// gradient dW = dyᵀ·x of an FP8 linear layer are all of that form. The products are accumulated
// in float32; the epilogue computes fma(acc, a.scale_inv · b.scale_inv, bias) in float32 (the
// scale product first, as one float32; bias (N,) or 0) and rounds that to out_dtype (bfloat16
// directly; float16 and float64 are made from the float32 result). E5M2 × E5M2 is
// refused, as cuBLASLt refuses it; the layers never ask for it.
//
// CPU kernel: every FP8 value is a bfloat16 value and every product of two FP8 values is exact in
// float32, so the operands are decoded exactly to bfloat16 (into scratch, per call, unless the
// cast already made the copy) and multiplied by weft's own matmul on bfloat16 operands with a
// float32 result — the fastest exact path the CPU has (AVX-512 BF16 dot products where present,
// float32 FMAs otherwise). The result differs from an fp64 computation on the FP8-rounded
// operands only by float32 accumulation order.
//
// Seam: the CUDA kernel (precision/cuda/fp8_gemm.cpp: cuBLASLt with the scale_invs as A/B scale
// pointers, the bias epilogue, TN layout from transposed FP8 copies, compute capability 8.9+) is
// linked by reference — weft::detail::cuda_fp8_gemm, null in a build without CUDA (Note [Linking
// kernels by reference] in tensor/kernel_registry.h). set_fp8_gemm_kernel(type, fn) replaces a
// device's kernel. Operands on a device without a kernel are an error.
#pragma once

#include <functional>

#include "precision/fp8/fp8_cast.h"
#include "tensor/device.h"

namespace weft::detail {
using Fp8GemmFn = Tensor(const precision::Fp8Tensor& a, const precision::Fp8Tensor& b, DType out_dtype,
                         const Tensor& bias);
extern Fp8GemmFn* const cuda_fp8_gemm;
}  // namespace weft::detail

namespace weft::precision {

using Fp8GemmKernel =
    std::function<Tensor(const Fp8Tensor& a, const Fp8Tensor& b, DType out_dtype, const Tensor& bias)>;

// Checks the operands, then runs the kernel of their device.
Tensor fp8_gemm(const Fp8Tensor& a, const Fp8Tensor& b, DType out_dtype = kFloat32, const Tensor& bias = Tensor());

// The kernel fp8_gemm uses for a device type (the CPU has a built-in one; others none until set).
Fp8GemmKernel fp8_gemm_kernel(DeviceType device_type);
// Installs `kernel` for the device type; an empty one restores the built-in (none off the CPU).
// Process-wide: a backend sets it once at start-up, a test around a scope.
void set_fp8_gemm_kernel(DeviceType device_type, Fp8GemmKernel kernel);

}  // namespace weft::precision
