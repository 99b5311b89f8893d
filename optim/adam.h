// Adam and AdamW, as torch.optim.Adam / torch.optim.AdamW (PyTorch 1.13, single-tensor
// implementation), with t the parameter's step count after this step:
//   Adam:  g = grad + weight_decay·p            AdamW: p = p·(1 − lr·weight_decay), g = grad
//   m = β1·m + (1 − β1)·g
//   v = β2·v + (1 − β2)·g·g
//   v̂ = max(v̂, v) with amsgrad, else v
//   p = p − (lr / (1 − β1ᵗ)) · m / (√v̂ / √(1 − β2ᵗ) + eps)
// One fused pass per parameter (optim/fused_update.h). State per parameter: step, exp_avg (m),
// exp_avg_sq (v), and max_exp_avg_sq (v̂) when amsgrad is on.
//
// Note [Capturable Adam]: with `capturable` (PyTorch's name) the step of a CUDA parameter can be
// recorded in a CUDA graph (Note [CUDA graphs] in tensor/cuda.h) and replayed: its step count
// lives in a device tensor (step_on_device) that the update kernel advances, and the bias
// corrections and step size are computed from it on the device, by the formulas above in float64,
// instead of being fixed on the host when the step is queued. A replayed step therefore is step
// t + 1, not a repeat of the step that was captured. A non-capturable Adam refuses to be captured.
// The option changes how a step runs, not what it computes: it is not part of the state dict
// (which always holds the count as `step`), and on CPU parameters, where there is no graph, it
// changes nothing — so a script that picks its device at run time sets it once.
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
  bool capturable = false;  // Note [Capturable Adam]; not in the state dict

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
  bool capturable = false;  // Note [Capturable Adam]; not in the state dict

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
  // The count of steps taken. Under capturable on a CUDA device the count is step_on_device (a
  // float64 scalar on the parameter's device, advanced by the update kernel) and `step` is what it
  // was when that tensor was made; state_dict() reads the device count.
  int64_t step = 0;
  Tensor exp_avg;
  Tensor exp_avg_sq;
  Tensor max_exp_avg_sq;  // only with amsgrad
  Tensor step_on_device;  // not visited: the state dict holds the count as `step`

  template <class F>
  void visit(F&& f) {
    f("step", step);
    f("exp_avg", exp_avg);
    f("exp_avg_sq", exp_avg_sq);
    f("max_exp_avg_sq", max_exp_avg_sq);
  }
  // On load (optim/optimizer.h): second moments must be >= 0, or the step's square root is NaN.
  void validate(const std::string& op, int64_t index) const;
};

class Adam : public TypedOptimizer<AdamOptions, AdamParamState> {
 public:
  explicit Adam(std::vector<Tensor> params, AdamOptions options = {});
  void step() override;
  OptimizerState state_dict() const override;  // reads capturable step counts from their devices
};

class AdamW : public TypedOptimizer<AdamWOptions, AdamParamState> {
 public:
  explicit AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  void step() override;
  OptimizerState state_dict() const override;  // reads capturable step counts from their devices
};

}  // namespace weft::optim
