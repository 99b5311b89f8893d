// The checks and allocations shared by the fused optimizer updates (optim/fused_update.h).
#include "optim/fused_update.h"

#include "optim/optimizer.h"
#include "tensor/ops.h"

namespace weft::optim::detail {

Tensor fused_update_grad(const std::string& op, const Tensor& param) {
  const Tensor grad = param.grad();
  WEFT_CHECK(!param.is_uninitialized(), "[", op, "] a parameter has a gradient but no shape; this is not possible "
             "for a lazy parameter before its first forward");
  WEFT_CHECK(grad.device() == param.device(), "[", op, "] a parameter on ", param.device(), " has a gradient on ",
             grad.device());
  WEFT_CHECK(param.is_contiguous(), "[", op, "] parameters must be contiguous to be updated in place, got one of "
             "shape ", param.shape(), " with strides ", param.strides());
  // The CPU kernels widen a 16-bit gradient block by block; the CUDA kernels take one dtype.
  const bool widened = param.device().is_cpu() && (param.dtype() == kFloat32 || param.dtype() == kFloat64) &&
                       (grad.dtype() == kFloat16 || grad.dtype() == kBFloat16);
  WEFT_CHECK(grad.dtype() == param.dtype() || widened, "[", op, "] a ", param.dtype(), " parameter has a ",
             grad.dtype(), " gradient; expected ", param.dtype(),
             is_narrow_float(param.dtype()) || !param.device().is_cpu() ? ""
                                                             : " (or float16 / bfloat16, widened in the update)");
  WEFT_CHECK(grad.shape() == param.shape(), "[", op, "] a parameter of shape ", param.shape(),
             " has a gradient of shape ", grad.shape());
  return grad.contiguous();
}

Tensor zero_state(const Tensor& param) {
  return zeros(param.shape(), TensorOptions(state_dtype(param)).device(param.device()));
}

}  // namespace weft::optim::detail
