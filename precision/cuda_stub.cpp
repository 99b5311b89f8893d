// The precision floor's CUDA kernel pointers in a build without CUDA (compiled only when
// WEFT_CUDA is OFF; Note [Linking kernels by reference] in tensor/kernel_registry.h).
#include "precision/amp_kernels.h"

namespace weft::precision::detail {

UnscaleKernel* const cuda_unscale_kernel = nullptr;

}  // namespace weft::precision::detail
