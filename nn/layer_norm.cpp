// LayerNorm layer and its construction factory.
#include "nn/layer_norm.h"


#include "nn/init.h"
#include "nn/module_init_context.h"
#include "tensor/ops.h"

namespace weft::nn {

LayerNormImpl::LayerNormImpl(Shape normalized_shape_, double eps_, bool elementwise_affine_, bool with_bias)
    : normalized_shape(std::move(normalized_shape_)), eps(eps_), elementwise_affine(elementwise_affine_) {
  WEFT_CHECK(!normalized_shape.empty(), "[LayerNorm] normalized_shape must name at least one dimension");
  for (int64_t s : normalized_shape)
    WEFT_CHECK(s > 0, "[LayerNorm] normalized_shape must be positive, got ", normalized_shape);
  WEFT_CHECK(eps >= 0.0, "[LayerNorm] eps must be non-negative, got ", eps);
  if (elementwise_affine) {
    weight = register_parameter("weight", empty(normalized_shape));
    bias = register_parameter("bias", with_bias ? empty(normalized_shape) : Tensor());
  }
  reset_parameters();
}

void LayerNormImpl::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor LayerNormImpl::forward(const Tensor& input) {
  return layer_norm(input, normalized_shape, weight, bias, eps);
}

std::string LayerNormImpl::extra_repr() const {
  return weft::detail::cat(normalized_shape, ", eps=", eps, ", elementwise_affine=",
                           elementwise_affine ? "true" : "false");
}

std::shared_ptr<LayerNormImpl> make_layer_norm(const Shape& normalized_shape, double eps, bool elementwise_affine,
                                               bool bias) {
  if (!current_module_frame().layer_norm)
    return std::make_shared<LayerNormImpl>(normalized_shape, eps, elementwise_affine, bias);
  const LayerNormFactory factory = current_module_frame().layer_norm;
  const ModuleFrameGuard builtin(ModuleFrame{.linear = std::nullopt, .layer_norm = LayerNormFactory{}});
  std::shared_ptr<LayerNormImpl> impl = factory(normalized_shape, eps, elementwise_affine, bias);
  WEFT_CHECK(impl != nullptr, "[LayerNorm] the module frame's LayerNorm factory returned null");
  WEFT_CHECK(impl->normalized_shape == normalized_shape, "[LayerNorm] the module frame's LayerNorm factory was asked ",
             "for normalized_shape ", normalized_shape, " and built ", impl->normalized_shape);
  return impl;
}

}  // namespace weft::nn
