// Parameter-free layers: the elementwise activations, Identity and Flatten. Each wraps the op of
// the same name in tensor/ops.h so that it can sit in a Sequential and print like PyTorch's.
#pragma once

#include <cstdint>
#include <string>

#include "nn/module.h"
#include "nn/module_holder.h"

namespace weft::nn {

class ReLUImpl : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};

// approximate = "none" (the exact erf form) or "tanh", as PyTorch spells it.
class GELUImpl : public Module {
 public:
  explicit GELUImpl(std::string approximate = "none");
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  std::string approximate;
};

class SiLUImpl : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};

class TanhImpl : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};

class SigmoidImpl : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};

class IdentityImpl : public Module {
 public:
  Tensor forward(const Tensor& input) override { return input; }
};

// Flattens dims start_dim..end_dim into one; the default keeps the batch dim.
class FlattenImpl : public Module {
 public:
  explicit FlattenImpl(int64_t start_dim = 1, int64_t end_dim = -1) : start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  int64_t start_dim;
  int64_t end_dim;
};

WEFT_MODULE(ReLU);
WEFT_MODULE(GELU);
WEFT_MODULE(SiLU);
WEFT_MODULE(Tanh);
WEFT_MODULE(Sigmoid);
WEFT_MODULE(Identity);
WEFT_MODULE(Flatten);

}  // namespace weft::nn
