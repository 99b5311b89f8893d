// Dropout: zeroes each element with probability p while training and scales the survivors by
// 1 / (1 − p); the identity in eval mode. Draws from the default generator.
#pragma once

#include <string>

#include "nn/module.h"
#include "nn/module_holder.h"

namespace weft::nn {

class DropoutImpl : public Module {
 public:
  explicit DropoutImpl(double p = 0.5);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  double p;
};

WEFT_MODULE(Dropout);

}  // namespace weft::nn
