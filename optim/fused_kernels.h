// The optimizers' fused updates and gradient clipping as device kernels, each behind a
// KernelRegistry (tensor/kernel_registry.h): a CPU kernel beside its optimizer (optim/adam.cpp,
// optim/sgd.cpp, optim/clip_grad.cpp) and a CUDA kernel (optim/cuda/fused_update.cu; null in a
// build without CUDA, optim/cuda_stub.cpp).
//
// A launch carries every parameter of one group that lives on one device, so a device can update
// them all in a few launches (CUDA packs many tensors into each). Every tensor of a launch is
// contiguous; a parameter's state tensors have the parameter's shape and state_dtype(param)
// (float64 for float64 parameters, float32 otherwise); gradients have the parameter's dtype.
// Parameters are float64, float32, float16 or bfloat16, computed in float64 or float32.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/kernel_registry.h"
#include "tensor/tensor.h"

namespace weft::optim::detail {

using weft::detail::KernelRegistry;

// ---- Adam / AdamW (formulas in optim/adam.h) ----
struct AdamParam {
  Tensor param, grad, exp_avg, exp_avg_sq;
  Tensor max_exp_avg_sq;  // amsgrad only
  int64_t step;  // the parameter's step count, already advanced for this step
  // Capturable on CUDA (Note [Capturable Adam] in optim/adam.h): the count as a float64 device
  // scalar, not yet advanced, which the kernel advances and takes instead of `step`; else undefined.
  Tensor step_on_device;
};
struct AdamLaunch {
  std::vector<AdamParam> params;
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad;
  bool decoupled;  // AdamW: decay the parameter, not the gradient
};
using AdamKernel = void(const AdamLaunch&);
KernelRegistry<AdamKernel>& adam_kernels();

// ---- SGD (formulas in optim/sgd.h) ----
struct SgdParam {
  Tensor param, grad;
  Tensor momentum_buffer;  // undefined without momentum
  bool first_step;         // the buffer is fresh: it takes the gradient as it is
};
struct SgdLaunch {
  std::vector<SgdParam> params;
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
};
using SgdKernel = void(const SgdLaunch&);
KernelRegistry<SgdKernel>& sgd_kernels();

// ---- clipping (optim/clip_grad.h) ----
// Σ|g|^p over every element of every gradient (max |g| for p = ∞), accumulated in float64, NaN
// propagating. The CUDA kernel returns it to the host, so it waits for the device.
using GradNormKernel = double(const std::vector<Tensor>& grads, double norm_type);
KernelRegistry<GradNormKernel>& grad_norm_kernels();
// g ← g·coef in place, in each gradient's compute type.
using ScaleGradsKernel = void(const std::vector<Tensor>& grads, double coef);
KernelRegistry<ScaleGradsKernel>& scale_grads_kernels();

// The CPU kernels.
void cpu_adam_kernel(const AdamLaunch& launch);
void cpu_sgd_kernel(const SgdLaunch& launch);
double cpu_grad_norm_kernel(const std::vector<Tensor>& grads, double norm_type);
void cpu_scale_grads_kernel(const std::vector<Tensor>& grads, double coef);

// The CUDA kernels; null in a build without CUDA (Note [Linking kernels by reference]).
extern AdamKernel* const cuda_adam_kernel;
extern SgdKernel* const cuda_sgd_kernel;
extern GradNormKernel* const cuda_grad_norm_kernel;
extern ScaleGradsKernel* const cuda_scale_grads_kernel;

}  // namespace weft::optim::detail
