// SGD with momentum, dampening, Nesterov momentum and L2 weight decay, as torch.optim.SGD
// (PyTorch 1.13, single-tensor implementation):
//   g = grad + weight_decay·p
//   buf = g on the first step, else momentum·buf + (1 − dampening)·g      (when momentum ≠ 0)
//   g = g + momentum·buf (nesterov) or buf
//   p = p − lr·g
// One fused pass per parameter (optim/fused_update.h); the momentum buffer is the only state.
#pragma once

#include <vector>

#include "optim/optimizer.h"

namespace weft::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;

  template <class F>
  void visit(F&& f) {
    f("lr", lr);
    f("momentum", momentum);
    f("dampening", dampening);
    f("weight_decay", weight_decay);
    f("nesterov", nesterov);
  }
  void validate() const;
};

struct SGDParamState {
  Tensor momentum_buffer;  // undefined until the first step with momentum

  template <class F>
  void visit(F&& f) {
    f("momentum_buffer", momentum_buffer);
  }
};

class SGD : public TypedOptimizer<SGDOptions, SGDParamState> {
 public:
  explicit SGD(std::vector<Tensor> params, SGDOptions options = {});
  void step() override;
};

}  // namespace weft::optim
