// GradScaler: dynamic loss scaling for float16 mixed precision, with PyTorch's semantics
// (torch/amp/grad_scaler.py; reference fabric-precision.md §3.4.1).
//
// A training step reads
//   scaler.scale(loss).backward();   // gradients are S times too large, so small ones survive fp16
//   scaler.step(optimizer);          // unscales (unless unscale_ ran), skips the step on inf/NaN
//   scaler.update();                 // backs the scale off after an inf, grows it after
//                                    // growth_interval clean steps
//
// Invariants:
// - The scale is a float32 value and the growth tracker an int32, created by the first scale()
//   (before that, step/update/unscale_ fail: the usual cause is calling loss.backward() on an
//   unscaled loss). Updates use float32 arithmetic exactly as PyTorch's CPU kernel, so the
//   sequence of scales is bit-identical.
// - Each optimizer (identified by its address, as Python's id()) goes READY → UNSCALED →
//   STEPPED; update() puts every optimizer back to READY. Unscaling twice, unscaling after a
//   step, or stepping twice between updates fails.
// - Gradients are unscaled in place by the float32 value 1/S (computed in float64, rounded
//   once); narrow gradients are unscaled in float32 and rounded back. The inf/NaN check looks at
//   the gradients before unscaling. float16 gradients are refused (keep fp32 master weights).
// - A disabled scaler is transparent: scale() returns its input, step() steps, the others do
//   nothing, state_dict() is empty.
// - An enabled scaler refuses to be recorded in a CUDA graph (scale() and unscale_() throw during
//   cuda::Graph::capture): its scale and skip decision live on the host.
//
// Any optimizer type with `param_groups()` (groups holding `std::vector<Tensor> params`) and
// `step()` works (ScalableOptimizer); so does a bare parameter list through the OptimizerId
// overloads.
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <iterator>
#include <optional>
#include <ranges>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nn/tensor_dict.h"
#include "tensor/tensor.h"

namespace weft::precision {

template <class T>
concept ScalableOptimizer = requires(T& optimizer) {
  optimizer.step();
  { (*std::ranges::begin(optimizer.param_groups())).params } -> std::ranges::range;
};

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;
};

class GradScaler {
 public:
  using OptimizerId = const void*;

  explicit GradScaler(GradScalerOptions options = {});

  // outputs · S. A 0-dim output meets the float32 scale as a tensor (so a narrow scalar loss is
  // scaled in float32, as PyTorch); a larger one keeps its dtype.
  Tensor scale(const Tensor& outputs);
  std::vector<Tensor> scale(const std::vector<Tensor>& outputs);

  // Divides the optimizer's gradients by S in place and records whether any was inf or NaN.
  template <ScalableOptimizer Optimizer>
  void unscale_(Optimizer& optimizer) {
    unscale_(static_cast<OptimizerId>(&optimizer), params_of(optimizer));
  }
  void unscale_(OptimizerId optimizer, const std::vector<Tensor>& params);

  // Unscales first if unscale_ did not, then calls optimizer.step() unless an inf or NaN was
  // found. Returns whether the optimizer stepped.
  template <ScalableOptimizer Optimizer>
  bool step(Optimizer& optimizer) {
    if (!enabled_) {
      optimizer.step();
      return true;
    }
    const auto id = static_cast<OptimizerId>(&optimizer);
    const bool finite = prepare_step(id, params_of(optimizer));
    if (finite) optimizer.step();
    mark_stepped(id);
    return finite;
  }
  // The same for an optimizer known only by identity and parameters (a precision plugin holding
  // an optim::Optimizer&): `do_step` runs unless an inf or NaN was found.
  bool step(OptimizerId optimizer, const std::vector<Tensor>& params, const std::function<void()>& do_step);
  // A closure re-evaluates the loss, which the scaler cannot see to scale: refused when enabled.
  template <ScalableOptimizer Optimizer, std::invocable Closure>
    requires requires(Optimizer& o, Closure&& c) { o.step(std::forward<Closure>(c)); }
  bool step(Optimizer& optimizer, Closure&& closure) {
    if (enabled_) refuse_closure();
    optimizer.step(std::forward<Closure>(closure));
    return true;
  }

  // Backs off after an inf/NaN in any optimizer since the last update, else counts a clean step
  // and grows the scale every growth_interval of them. Resets every optimizer to READY.
  void update();
  // Sets the scale to `new_scale` (as float32) instead.
  void update(double new_scale);

  // Sharded data parallelism: each rank unscales only its shard of the gradients, so whether any
  // gradient was inf/NaN must be combined across ranks, or ranks would skip different steps
  // (PyTorch's ShardedGradScaler). `reduce` receives this rank's flag (1 or 0) and returns the
  // maximum over the ranks; distributed::FullyShardedDataParallel::shard_grad_scaler installs it.
  // A sharded scaler also unscales float16 gradients (ShardedGradScaler's allow_fp16): FSDP's
  // keep_low_precision_grads under 16-mixed hands the optimizer float16 gradient shards.
  void set_found_inf_reduction(std::function<float(float)> reduce) { found_inf_reduction_ = std::move(reduce); }

  double get_scale() const;  // init_scale before the first scale(); 1 when disabled
  double get_growth_factor() const { return growth_factor_; }
  void set_growth_factor(double factor) { growth_factor_ = factor; }
  double get_backoff_factor() const { return backoff_factor_; }
  void set_backoff_factor(double factor) { backoff_factor_ = factor; }
  int64_t get_growth_interval() const { return growth_interval_; }
  void set_growth_interval(int64_t interval) { growth_interval_ = interval; }
  int64_t growth_tracker() const;  // clean steps since the last change of scale
  bool is_enabled() const { return enabled_; }

  // {"scale": f64, "growth_factor": f64, "backoff_factor": f64, "growth_interval": i64,
  //  "_growth_tracker": i64} as 0-dim tensors; empty when disabled.
  nn::TensorDict state_dict() const;
  // Refuses an empty dict (saved from a disabled scaler); ignored by a disabled scaler.
  void load_state_dict(const nn::TensorDict& state);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct OptimizerState {
    Stage stage = Stage::Ready;
    std::vector<std::pair<Device, float>> found_inf_per_device;  // 1 where an inf/NaN was seen
  };

  template <class Optimizer>
  static std::vector<Tensor> params_of(Optimizer& optimizer) {
    std::vector<Tensor> params;
    for (auto& group : optimizer.param_groups())
      for (const Tensor& p : group.params) params.push_back(p);
    return params;
  }

  void check_scale_initialized(const char* function) const;
  bool prepare_step(OptimizerId optimizer, const std::vector<Tensor>& params);
  void mark_stepped(OptimizerId optimizer);
  [[noreturn]] static void refuse_closure();

  bool enabled_;
  double init_scale_;
  double growth_factor_;
  double backoff_factor_;
  int64_t growth_interval_;
  int64_t init_growth_tracker_ = 0;
  std::optional<float> scale_;              // set by the first scale()
  std::optional<int32_t> growth_tracker_;   // likewise
  std::unordered_map<OptimizerId, OptimizerState> per_optimizer_;
  std::function<float(float)> found_inf_reduction_;
};

}  // namespace weft::precision
