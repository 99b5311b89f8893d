// GradScaler's device kernel (precision/grad_scaler.h): unscale the gradients and look for
// inf/NaN in one pass, behind a KernelRegistry (tensor/kernel_registry.h). The CPU kernel is in
// precision/amp_kernels.cpp, the CUDA kernel in precision/cuda/amp_kernels.cu (null in a build
// without CUDA, precision/cuda_stub.cpp).
#pragma once

#include <vector>

#include "tensor/kernel_registry.h"
#include "tensor/tensor.h"

namespace weft::precision::detail {

// g ← g·inv_scale in place for every gradient (contiguous, all on one device, float64, float32,
// float16 or bfloat16; narrow ones computed in float32, float64 in float64) and whether any
// element was inf or NaN before. inv_scale == 1 only looks. As PyTorch's
// _amp_foreach_non_finite_check_and_unscale_; the CUDA kernel returns the flag to the host, so
// it waits for the device.
using UnscaleKernel = bool(const std::vector<Tensor>& grads, float inv_scale);
weft::detail::KernelRegistry<UnscaleKernel>& unscale_kernels();

bool cpu_unscale_kernel(const std::vector<Tensor>& grads, float inv_scale);
extern UnscaleKernel* const cuda_unscale_kernel;

}  // namespace weft::precision::detail
