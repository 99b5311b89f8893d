// The products of the quantized layers on tensors, and the seam through which a device supplies
// its own kernels for them (the CUDA backend: bitsandbytes-style 4-bit GEMV/GEMM and int8 GEMM),
// as precision/fp8/fp8_gemm.h does for FP8.
//
//   4-bit product  x: (M, K) float32 or bfloat16 · W: (N, K) packed NF4/FP4 -> y: (M, N) float32
//                  (a bfloat16 x asks for the product in bfloat16: gemm_4bit_bf16)
//                  W comes as its uint8 codes, its QuantState and its float32 absmax per block
//                  (decoded from nested statistics once, by the layer)        (Linear4bit's forward)
//   int8 product   a: (M, K) int8 · b: (N, K) int8 -> c: (M, N) int32, exact  (LLM.int8(): int8_linear_matmul)
//
// The CPU's kernels are built in (precision/quant/gemm_4bit.h, int8_gemm.h). A kernel installed
// for a device type is used for operands on that device, the CPU included (a test can watch
// what a layer asks for). Quantization and the statistics are not part of the seam: a layer
// quantizes its weight once, while these products run every step. Operands on a device with no
// kernel are an error that names the way out.
#pragma once

#include <functional>

#include "precision/quant/blockwise.h"
#include "precision/quant/product_4bit.h"
#include "tensor/device.h"
#include "tensor/tensor.h"

namespace weft::precision::quant {

using Gemm4bitKernel =
    std::function<Tensor(const Tensor& x, const Tensor& packed, const QuantState& state, const Tensor& block_absmax)>;
using Int8GemmKernel = std::function<Tensor(const Tensor& a, const Tensor& b)>;

// y = x · dequantize(W)ᵀ on x's device; x must be float32 or bfloat16 (M, state.shape[1]),
// contiguous. On the CPU, `product` picks gemm_4bit's product (product_4bit.h); an installed
// kernel gets x as it comes and computes its own product.
Tensor matmul_4bit(const Tensor& x, const Tensor& packed, const QuantState& state, const Tensor& block_absmax,
                   Product4bit product = Product4bit::Exact);

// The kernel installed for a device type; empty when none is (the CPU then uses its built-in).
Gemm4bitKernel gemm_4bit_kernel(DeviceType device_type);
Int8GemmKernel int8_gemm_kernel(DeviceType device_type);
// Installs `kernel` for the device type; an empty one removes it. Process-wide: a backend sets
// it once at start-up, a test around a scope.
void set_gemm_4bit_kernel(DeviceType device_type, Gemm4bitKernel kernel);
void set_int8_gemm_kernel(DeviceType device_type, Int8GemmKernel kernel);

}  // namespace weft::precision::quant
