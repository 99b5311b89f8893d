// TeLayerNorm: float32 math, output in the activation dtype (precision/fp8/te_layer_norm.h).
#include "precision/fp8/te_layer_norm.h"

#include "tensor/autocast_state.h"
#include "tensor/ops.h"

namespace weft::precision {

Tensor TeLayerNormImpl::forward(const Tensor& input) {
  const Tensor y = LayerNormImpl::forward(input);
  if (!input.defined() || !input.is_floating_point() || input.dtype() == kFloat64) return y;
  const AutocastState autocast = autocast_state(input.device().type);
  return y.to(autocast.enabled ? autocast.dtype : input.dtype());
}

}  // namespace weft::precision
