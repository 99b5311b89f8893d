// Dropout layer.
#include "nn/dropout.h"

#include "tensor/ops.h"

namespace weft::nn {

DropoutImpl::DropoutImpl(double p_) : p(p_) {
  WEFT_CHECK(p >= 0.0 && p <= 1.0, "[Dropout] p must be in [0, 1], got ", p);
}

Tensor DropoutImpl::forward(const Tensor& input) { return dropout(input, p, is_training()); }

std::string DropoutImpl::extra_repr() const { return weft::detail::cat("p=", p); }

}  // namespace weft::nn
