// The optim floor's CUDA kernel pointers in a build without CUDA (compiled only when WEFT_CUDA is
// OFF; Note [Linking kernels by reference] in tensor/kernel_registry.h).
#include "optim/fused_kernels.h"

namespace weft::optim::detail {

AdamKernel* const cuda_adam_kernel = nullptr;
SgdKernel* const cuda_sgd_kernel = nullptr;
GradNormKernel* const cuda_grad_norm_kernel = nullptr;
ScaleGradsKernel* const cuda_scale_grads_kernel = nullptr;

}  // namespace weft::optim::detail
