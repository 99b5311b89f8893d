// The registries of the tensor floor's fused features (tensor/fused_kernels.h): each names its
// CPU kernel and its CUDA kernel pointer (Note [Linking kernels by reference]).
#include "tensor/fused_kernels.h"

#include "tensor/cpu/cpu_backend.h"

namespace weft::detail {

KernelRegistry<CrossEntropyForwardKernel>& cross_entropy_forward_kernels() {
  static KernelRegistry<CrossEntropyForwardKernel> registry("cross_entropy", &cpu_cross_entropy_forward,
                                                            cuda_cross_entropy_forward);
  return registry;
}

// The RMS norm has a CPU kernel only: on CUDA rms_norm computes its composition of ops.
KernelRegistry<RmsNormKernel>& rms_norm_kernels() {
  static KernelRegistry<RmsNormKernel> registry("rms_norm", &cpu_rms_norm, nullptr);
  return registry;
}

KernelRegistry<CrossEntropyBackwardKernel>& cross_entropy_backward_kernels() {
  static KernelRegistry<CrossEntropyBackwardKernel> registry("cross_entropy backward", &cpu_cross_entropy_backward,
                                                             cuda_cross_entropy_backward);
  return registry;
}

KernelRegistry<LayerNormForwardKernel>& layer_norm_forward_kernels() {
  static KernelRegistry<LayerNormForwardKernel> registry("layer_norm", &cpu_layer_norm_forward, cuda_layer_norm_forward);
  return registry;
}

KernelRegistry<LayerNormBackwardKernel>& layer_norm_backward_kernels() {
  static KernelRegistry<LayerNormBackwardKernel> registry("layer_norm backward", &cpu_layer_norm_backward,
                                                          cuda_layer_norm_backward);
  return registry;
}

KernelRegistry<DropoutKernel>& dropout_kernels() {
  static KernelRegistry<DropoutKernel> registry("dropout", &cpu_dropout, cuda_dropout);
  return registry;
}

KernelRegistry<LinearKernel>& linear_kernels() {
  static KernelRegistry<LinearKernel> registry("linear", &cpu_linear, cuda_linear);
  return registry;
}

KernelRegistry<GeluTanhKernel>& gelu_tanh_kernels() {
  static KernelRegistry<GeluTanhKernel> registry("gelu_tanh", &cpu_gelu_tanh, nullptr);
  return registry;
}

KernelRegistry<SiluKernel>& silu_kernels() {
  static KernelRegistry<SiluKernel> registry("silu", &cpu_silu, nullptr);
  return registry;
}

}  // namespace weft::detail
