// Adam and AdamW, as torch.optim.Adam / torch.optim.AdamW (PyTorch 1.13, single-tensor
// implementation), with t the parameter's step count after this step:
//   Adam:  g = grad + weight_decay·p            AdamW: p = p·(1 − lr·weight_decay), g = grad
//   m = β1·m + (1 − β1)·g
//   v = β2·v + (1 − β2)·g·g
//   v̂ = max(v̂, v) with amsgrad, else v
//   p = p − (lr / (1 − β1ᵗ)) · m / (√v̂ / √(1 − β2ᵗ) + eps)
// One fused pass per parameter (optim/fused_update.h). State per parameter: step, exp_avg (m),
// exp_avg_sq (v), and max_exp_avg_sq (v̂) when amsgrad is on.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "optim/optimizer.h"

namespace weft::optim {

struct AdamOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;

  template <class F>
  void visit(F&& f) {
    f("lr", lr);
    f("betas", betas);
    f("eps", eps);
    f("weight_decay", weight_decay);
    f("amsgrad", amsgrad);
  }
  void validate() const;
};

// The same fields as AdamOptions with AdamW's default weight decay; a separate aggregate so that
// designated initializers (`{.lr = 3e-4}`) keep that default.
struct AdamWOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;

  template <class F>
  void visit(F&& f) {
    f("lr", lr);
    f("betas", betas);
    f("eps", eps);
    f("weight_decay", weight_decay);
    f("amsgrad", amsgrad);
  }
  void validate() const;
};

struct AdamParamState {
  int64_t step = 0;
  Tensor exp_avg;
  Tensor exp_avg_sq;
  Tensor max_exp_avg_sq;  // only with amsgrad

  template <class F>
  void visit(F&& f) {
    f("step", step);
    f("exp_avg", exp_avg);
    f("exp_avg_sq", exp_avg_sq);
    f("max_exp_avg_sq", max_exp_avg_sq);
  }
};

class Adam : public TypedOptimizer<AdamOptions, AdamParamState> {
 public:
  explicit Adam(std::vector<Tensor> params, AdamOptions options = {});
  void step() override;
};

class AdamW : public TypedOptimizer<AdamWOptions, AdamParamState> {
 public:
  explicit AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  void step() override;
};

}  // namespace weft::optim
