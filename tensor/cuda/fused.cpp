// The CUDA kernels of the tensor floor's fused features (tensor/fused_kernels.h): each fills the
// plain arguments of tensor/cuda/fused_launch.h from its launch and queues the kernel on the
// current stream of the tensors' device.
#include "tensor/cuda/capture.h"
#include "tensor/cuda/cuda_backend.h"
#include "tensor/cuda/fused_launch.h"
#include "tensor/fused_kernels.h"

namespace weft::detail {
namespace {

using cuda::detail::CrossEntropyArgs;
using cuda::detail::DeviceGuard;
using cuda::detail::LayerNormArgs;
using cuda::detail::stream_for;

const char* cptr(const Tensor& t) { return t.defined() ? static_cast<const char*>(t.data_ptr()) : nullptr; }
char* ptr(const Tensor& t) { return t.defined() ? static_cast<char*>(t.data_ptr()) : nullptr; }

void cross_entropy_forward(const CrossEntropyForward& a) {
  DeviceGuard guard(a.logits.device().index);
  const CrossEntropyArgs args{cptr(a.logits), a.target.data<int64_t>(), ptr(a.lse), ptr(a.losses), nullptr, nullptr,
                              a.logits.dtype(), a.logits.size(0), a.logits.size(1), a.ignore_index,
                              a.label_smoothing, cuda::detail::device_error(a.logits.device().index)};
  cuda::detail::launch_cross_entropy_forward(args, stream_for(a.logits));
}

void cross_entropy_backward(const CrossEntropyBackward& a) {
  DeviceGuard guard(a.logits.device().index);
  const CrossEntropyArgs args{cptr(a.logits), a.target.data<int64_t>(), const_cast<char*>(cptr(a.lse)), nullptr,
                              cptr(a.grad_losses), ptr(a.grad_logits), a.logits.dtype(), a.logits.size(0),
                              a.logits.size(1), a.ignore_index, a.label_smoothing,
                              cuda::detail::device_error(a.logits.device().index)};
  cuda::detail::launch_cross_entropy_backward(args, stream_for(a.logits));
}

void layer_norm_forward(const LayerNormForward& a) {
  DeviceGuard guard(a.x.device().index);
  const LayerNormArgs args{cptr(a.x), cptr(a.weight), cptr(a.bias), ptr(a.y), ptr(a.mean), ptr(a.rstd), nullptr,
                           nullptr, nullptr, nullptr, a.x.dtype(), a.x.size(0), a.x.size(1), a.eps};
  cuda::detail::launch_layer_norm_forward(args, stream_for(a.x));
}

void layer_norm_backward(const LayerNormBackward& a) {
  DeviceGuard guard(a.x.device().index);
  const LayerNormArgs args{cptr(a.x), cptr(a.weight), nullptr, nullptr, const_cast<char*>(cptr(a.mean)),
                           const_cast<char*>(cptr(a.rstd)), cptr(a.grad_y), ptr(a.grad_x), ptr(a.grad_weight),
                           ptr(a.grad_bias), a.x.dtype(), a.x.size(0), a.x.size(1), 0.0};
  cuda::detail::launch_layer_norm_backward(args, stream_for(a.x));
}

void dropout(const DropoutLaunch& a) {
  cuda::detail::refuse_during_capture("dropout", "its random key is drawn on the host, so every replay would "
                                      "draw the same mask");
  DeviceGuard guard(a.x.device().index);
  cuda::detail::launch_dropout(a.x.data_ptr(), a.out.data_ptr(), a.x.dtype(), a.x.numel(), a.keep_probability, a.key,
                               stream_for(a.x));
}

}  // namespace

CrossEntropyForwardKernel* const cuda_cross_entropy_forward = &cross_entropy_forward;
CrossEntropyBackwardKernel* const cuda_cross_entropy_backward = &cross_entropy_backward;
LayerNormForwardKernel* const cuda_layer_norm_forward = &layer_norm_forward;
LayerNormBackwardKernel* const cuda_layer_norm_backward = &layer_norm_backward;
DropoutKernel* const cuda_dropout = &dropout;

}  // namespace weft::detail
