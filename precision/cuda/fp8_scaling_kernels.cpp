// The CUDA kernels of the FP8 scale updates (precision/fp8/fp8_scaling_kernels.h): each points the
// plain arguments of precision/cuda/fp8_launch.h at the role's entries of the metadata and queues
// the kernel on the current stream of its device.
#include "precision/cuda/fp8_launch.h"
#include "precision/fp8/fp8_recipe.h"
#include "precision/fp8/fp8_scaling_kernels.h"
#include "tensor/cuda/cuda_backend.h"
#include "tensor/cuda/runtime.h"

namespace weft::precision::detail {
namespace {

using weft::cuda::detail::DeviceGuard;
using weft::cuda::detail::stream_for;

void delayed_update_on_cuda(const Fp8DelayedUpdateLaunch& l) {
  DeviceGuard guard(l.amax_history.device().index);
  const cuda_detail::Fp8DelayedUpdateArgs args{l.amax_history.data<float>() + l.role, l.amax_history.size(0),
                                               kNumFp8Roles, l.scale.data<float>() + l.role,
                                               l.scale_inv.data<float>() + l.role, l.most_recent, l.fp8_max,
                                               l.margin};
  cuda_detail::launch_fp8_delayed_update(args, stream_for(l.amax_history));
}

void current_scale_on_cuda(const Fp8CurrentScaleLaunch& l) {
  DeviceGuard guard(l.scale.device().index);
  const cuda_detail::Fp8CurrentScaleArgs args{l.amax.data<float>(), l.scale.data<float>() + l.role,
                                              l.scale_inv.data<float>() + l.role, l.fp8_max, l.amax_epsilon,
                                              l.power_2_scale};
  cuda_detail::launch_fp8_current_scale(args, stream_for(l.scale));
}

}  // namespace

Fp8DelayedUpdateKernel* const cuda_fp8_delayed_update = &delayed_update_on_cuda;
Fp8CurrentScaleKernel* const cuda_fp8_current_scale = &current_scale_on_cuda;

}  // namespace weft::precision::detail
