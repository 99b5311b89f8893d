// The CUDA kernels of the optimizers and of clipping (optim/fused_kernels.h): the per-step scalars
// are computed on the host exactly as the CPU kernels compute them (optim/adam.cpp,
// optim/sgd.cpp), then one launch per parameter on the current stream of its device; a
// capturable Adam first advances the device step counts of the launch, and its kernels compute
// the scalars from them (Note [Capturable Adam]). The norm is accumulated in one device double and
// read back, so clip_grad_norm_ waits for the device and cannot be captured in a CUDA graph.
#include <cmath>
#include <vector>

#include "optim/cuda/update_launch.h"
#include "optim/fused_kernels.h"
#include "tensor/cuda/capture.h"
#include "tensor/cuda/cuda_backend.h"
#include "tensor/cuda/runtime.h"

namespace weft::optim::detail {
namespace {

using weft::cuda::detail::DeviceGuard;
using weft::cuda::detail::stream_for;

char* ptr(const Tensor& t) { return t.defined() ? static_cast<char*>(t.data_ptr()) : nullptr; }

void adam_on_cuda(const AdamLaunch& s) {
  if (s.params.empty()) return;
  std::vector<double*> counts;
  for (const AdamParam& a : s.params)
    if (a.step_on_device.defined()) counts.push_back(static_cast<double*>(a.step_on_device.data_ptr()));
  if (!counts.empty()) {
    const Tensor& first = s.params.front().param;  // a launch holds the parameters of one device
    DeviceGuard guard(first.device().index);
    cuda_detail::launch_advance_steps(counts.data(), static_cast<int64_t>(counts.size()), stream_for(first));
  }
  for (const AdamParam& a : s.params) {
    DeviceGuard guard(a.param.device().index);
    const bool on_device = a.step_on_device.defined();
    const double step = static_cast<double>(a.step);
    // A capturable step's kernel computes these two from the device count instead.
    const double bias_correction1 = on_device ? 1.0 : 1.0 - std::pow(s.beta1, step);
    const double bias_correction2 = on_device ? 1.0 : 1.0 - std::pow(s.beta2, step);
    const cuda_detail::AdamArgs args{ptr(a.param), ptr(a.grad), ptr(a.exp_avg), ptr(a.exp_avg_sq),
                                     s.amsgrad ? ptr(a.max_exp_avg_sq) : nullptr, a.param.dtype(), a.param.numel(),
                                     -(s.lr / bias_correction1), 1.0 / std::sqrt(bias_correction2), s.beta1,
                                     1.0 - s.beta1, s.beta2, 1.0 - s.beta2, s.eps, s.weight_decay,
                                     1.0 - s.lr * s.weight_decay, !s.decoupled && s.weight_decay != 0.0, s.decoupled,
                                     on_device ? static_cast<const double*>(a.step_on_device.data_ptr()) : nullptr,
                                     s.lr};
    cuda_detail::launch_adam(args, stream_for(a.param));
  }
}

void sgd_on_cuda(const SgdLaunch& o) {
  for (const SgdParam& a : o.params) {
    DeviceGuard guard(a.param.device().index);
    const cuda_detail::SgdArgs args{ptr(a.param), ptr(a.grad), ptr(a.momentum_buffer), a.param.dtype(),
                                    a.param.numel(), o.weight_decay, o.momentum, 1.0 - o.dampening, -o.lr,
                                    o.weight_decay != 0.0, a.first_step, o.nesterov};
    cuda_detail::launch_sgd(args, stream_for(a.param));
  }
}

double grad_norm_on_cuda(const std::vector<Tensor>& grads, double norm_type) {
  weft::cuda::detail::refuse_during_capture("clip_grad_norm_", "it reads the total norm on the host");
  if (grads.empty()) return 0.0;
  const Device device = grads.front().device();
  DeviceGuard guard(device.index);
  Tensor total = weft::cuda::detail::device_scratch({1}, kFloat64, device);
  cudaStream_t stream = stream_for(total);
  WEFT_CUDA_CHECK(cudaMemsetAsync(total.data_ptr(), 0, sizeof(double), stream));
  for (const Tensor& g : grads)
    cuda_detail::launch_grad_norm(ptr(g), g.dtype(), g.numel(), norm_type, static_cast<double*>(total.data_ptr()),
                                  stream);
  double result = 0.0;
  WEFT_CUDA_CHECK(cudaMemcpyAsync(&result, total.data_ptr(), sizeof result, cudaMemcpyDeviceToHost, stream));
  WEFT_CUDA_CHECK(cudaStreamSynchronize(stream));
  return result;
}

void scale_grads_on_cuda(const std::vector<Tensor>& grads, double coef) {
  for (const Tensor& g : grads) {
    DeviceGuard guard(g.device().index);
    cuda_detail::launch_scale(ptr(g), g.dtype(), g.numel(), coef, stream_for(g));
  }
}

}  // namespace

AdamKernel* const cuda_adam_kernel = &adam_on_cuda;
SgdKernel* const cuda_sgd_kernel = &sgd_on_cuda;
GradNormKernel* const cuda_grad_norm_kernel = &grad_norm_on_cuda;
ScaleGradsKernel* const cuda_scale_grads_kernel = &scale_grads_on_cuda;

}  // namespace weft::optim::detail
