// The launch functions of optim/cuda/fused_update.cu and their plain arguments (no Tensor, no
// CUDA header). The host side that fills them from an optimizer's launch is
// optim/cuda/fused_update.cpp.
#pragma once

#include <cstdint>

#include "tensor/cuda/launch.h"

namespace weft::optim::cuda_detail {

using weft::cuda::detail::StreamHandle;

// One parameter of `dtype` (n elements) with its gradient; the state (m, v, v_max, the momentum
// buffer) is in the compute type: double for float64 parameters, float otherwise.
struct AdamArgs {
  char* param;
  const char* grad;
  char* exp_avg;
  char* exp_avg_sq;
  char* max_exp_avg_sq;  // null without amsgrad
  DType dtype;
  int64_t n;
  // As the CPU kernel computes them (optim/adam.cpp), rounded to the compute type in the kernel.
  double neg_step_size, inv_bias_correction2_sqrt, beta1, one_minus_beta1, beta2, one_minus_beta2, eps,
      weight_decay, decay_factor;
  bool coupled_decay, decoupled;
  // Capturable (Note [Capturable Adam] in optim/adam.h): the step count on the device, already
  // advanced; the kernel computes the step size and the bias correction from it and `lr` by the
  // host's formulas, in float64, instead of taking the two above. Null otherwise.
  const double* step;
  double lr;
};
void launch_adam(const AdamArgs& a, StreamHandle stream);
// *steps[i] += 1 for each of the `count` float64 device step counts, in few launches.
void launch_advance_steps(double* const* steps, int64_t count, StreamHandle stream);

struct SgdArgs {
  char* param;
  const char* grad;
  char* momentum_buffer;  // null without momentum
  DType dtype;
  int64_t n;
  double weight_decay, momentum, one_minus_dampening, neg_lr;
  bool decay, first_step, nesterov;
};
void launch_sgd(const SgdArgs& a, StreamHandle stream);

// *total (a device double) += Σ|g|^p over the gradient, or max'd with max |g| when p is infinite
// (NaN propagating).
void launch_grad_norm(const char* grad, DType dtype, int64_t n, double p, double* total, StreamHandle stream);
// g ← g·coef in the compute type.
void launch_scale(char* grad, DType dtype, int64_t n, double coef, StreamHandle stream);

}  // namespace weft::optim::cuda_detail
