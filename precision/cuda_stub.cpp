// The precision floor's CUDA kernel pointers in a build without CUDA (compiled only when
// WEFT_CUDA is OFF; Note [Linking kernels by reference] in tensor/kernel_registry.h).
#include "precision/amp_kernels.h"
#include "precision/fp8/fp8_cast_kernels.h"
#include "precision/fp8/fp8_gemm.h"
#include "precision/fp8/fp8_scaling_kernels.h"

namespace weft::precision::detail {

UnscaleKernel* const cuda_unscale_kernel = nullptr;
Fp8CastKernel* const cuda_fp8_cast = nullptr;
Fp8DequantizeKernel* const cuda_fp8_dequantize = nullptr;
Fp8DelayedUpdateKernel* const cuda_fp8_delayed_update = nullptr;
Fp8CurrentScaleKernel* const cuda_fp8_current_scale = nullptr;

}  // namespace weft::precision::detail

namespace weft::detail {

weft::detail::Fp8GemmFn* const cuda_fp8_gemm = nullptr;

}  // namespace weft::detail
