// The FP8 metadata's scale updates (precision/fp8/fp8_meta.h) as device kernels, each behind a
// KernelRegistry (tensor/kernel_registry.h), so that a layer on a GPU updates its scales where
// they live and the host never waits to read them. The CPU kernels are in
// precision/fp8/fp8_scaling_kernels.cpp, the CUDA kernels in precision/cuda/fp8_scaling_kernels.cu
// (null in a build without CUDA, precision/cuda_stub.cpp). Both compute the scale through the
// shared rules of precision/fp8/fp8_scaling_rules.h.
//
// The tensors are the metadata's: amax_history (len, 3), scale and scale_inv (3,), float32,
// contiguous, on one device; `role` is the column (Fp8Role).
#pragma once

#include "tensor/kernel_registry.h"
#include "tensor/tensor.h"

namespace weft::precision::detail {

// One DelayedScaling update of a role (the three steps of precision/fp8/fp8_meta.h): the amax of
// the column (or of row 0 alone when most_recent), the roll, and scale / scale_inv.
struct Fp8DelayedUpdateLaunch {
  Tensor amax_history, scale, scale_inv;
  int role = 0;
  bool most_recent = false;
  float fp8_max = 448.0f;
  int margin = 0;
};
using Fp8DelayedUpdateKernel = void(const Fp8DelayedUpdateLaunch&);
weft::detail::KernelRegistry<Fp8DelayedUpdateKernel>& fp8_delayed_update_kernels();

// Float8CurrentScaling: scale and scale_inv of the role from `amax` (one float32 element on the
// metadata's device).
struct Fp8CurrentScaleLaunch {
  Tensor amax, scale, scale_inv;
  int role = 0;
  float fp8_max = 448.0f;
  float amax_epsilon = 0.0f;
  bool power_2_scale = false;
};
using Fp8CurrentScaleKernel = void(const Fp8CurrentScaleLaunch&);
weft::detail::KernelRegistry<Fp8CurrentScaleKernel>& fp8_current_scale_kernels();

void cpu_fp8_delayed_update(const Fp8DelayedUpdateLaunch& launch);
void cpu_fp8_current_scale(const Fp8CurrentScaleLaunch& launch);

// The CUDA kernels; null in a build without CUDA (Note [Linking kernels by reference]).
extern Fp8DelayedUpdateKernel* const cuda_fp8_delayed_update;
extern Fp8CurrentScaleKernel* const cuda_fp8_current_scale;

}  // namespace weft::precision::detail
