// Parameter-free layers.
#include "nn/activation.h"

#include "tensor/ops.h"

namespace weft::nn {

Tensor ReLUImpl::forward(const Tensor& input) { return relu(input); }

GELUImpl::GELUImpl(std::string approximate_) : approximate(std::move(approximate_)) {
  WEFT_CHECK(approximate == "none" || approximate == "tanh", "[GELU] approximate must be 'none' or 'tanh', got '",
             approximate, "'");
}

Tensor GELUImpl::forward(const Tensor& input) { return gelu(input, approximate == "tanh"); }

std::string GELUImpl::extra_repr() const { return "approximate='" + approximate + "'"; }

Tensor SiLUImpl::forward(const Tensor& input) { return silu(input); }
Tensor TanhImpl::forward(const Tensor& input) { return tanh(input); }
Tensor SigmoidImpl::forward(const Tensor& input) { return sigmoid(input); }

Tensor FlattenImpl::forward(const Tensor& input) { return input.flatten(start_dim, end_dim); }

std::string FlattenImpl::extra_repr() const {
  return weft::detail::cat("start_dim=", start_dim, ", end_dim=", end_dim);
}

}  // namespace weft::nn
