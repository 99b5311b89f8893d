// The launch function of precision/cuda/amp_kernels.cu (no Tensor, no CUDA header).
#pragma once

#include <cstdint>

#include "tensor/cuda/launch.h"

namespace weft::precision::cuda_detail {

using weft::cuda::detail::StreamHandle;

// grad (n elements of dtype) ← grad·inv_scale in place (skipped when inv_scale is 1); *found_inf
// (a device int) becomes 1 if any element was inf or NaN.
void launch_unscale(char* grad, DType dtype, int64_t n, float inv_scale, int* found_inf, StreamHandle stream);

}  // namespace weft::precision::cuda_detail
