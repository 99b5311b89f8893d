// Adam's and AdamW's option checks, their step (one kernel launch per device and group,
// optim/fused_kernels.h), the device step counts of capturable steps (Note [Capturable Adam]) and
// the CPU kernel (formulas in optim/adam.h).
// Bias corrections are computed in double from the step count, as PyTorch computes them in Python;
// per-element scalars are then rounded to the compute type once, and each line of the loop is one
// PyTorch op of _single_tensor_adam(w), in the same order. That loop is also the scalar reference of the AVX2 and AVX-512 kernels (optim/update_avx2.cpp, update_avx512.cpp) that
// float32 and float64 blocks take on CPUs that have them: the same operations in the same order, so
// the same bits.
#include "optim/adam.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <type_traits>

#include "optim/update_kernels.h"
#include "tensor/cpu/isa.h"
#include "tensor/cuda.h"
#include "tensor/ops.h"

#include "optim/fused_kernels.h"
#include "optim/fused_update.h"

namespace weft::optim {

namespace {

using detail::AdamLaunch;
using detail::AdamParam;
using weft::detail::KernelRegistry;

void validate_adam(const char* op, double lr, const std::pair<double, double>& betas, double eps,
                   double weight_decay) {
  WEFT_CHECK(lr >= 0.0, "[", op, "] invalid learning rate: ", lr, "; expected lr >= 0");
  WEFT_CHECK(eps >= 0.0, "[", op, "] invalid epsilon value: ", eps, "; expected eps >= 0");
  WEFT_CHECK(betas.first >= 0.0 && betas.first < 1.0, "[", op, "] invalid beta parameter at index 0: ",
             betas.first, "; expected 0 <= beta < 1");
  WEFT_CHECK(betas.second >= 0.0 && betas.second < 1.0, "[", op, "] invalid beta parameter at index 1: ",
             betas.second, "; expected 0 <= beta < 1");
  WEFT_CHECK(weight_decay >= 0.0, "[", op, "] invalid weight_decay value: ", weight_decay,
             "; expected weight_decay >= 0");
}

// Elements [begin, end) of one parameter (begin on a block boundary).
template <class P, class G>
void adam_update(const AdamParam& a, const AdamLaunch& s, int64_t begin, int64_t end) {
  using C = detail::ComputeType<P>;
  C* m_data = a.exp_avg.data<C>();
  C* v_data = a.exp_avg_sq.data<C>();
  C* v_max_data = s.amsgrad ? a.max_exp_avg_sq.data<C>() : nullptr;

  const double step = static_cast<double>(a.step);
  const double bias_correction1 = 1.0 - std::pow(s.beta1, step);
  const double bias_correction2 = 1.0 - std::pow(s.beta2, step);
  const C neg_step_size = static_cast<C>(-(s.lr / bias_correction1));
  // A multiply by the reciprocal instead of a division: the update is bound by the vector
  // divider, and this leaves it one division per element instead of two.
  const C inv_bias_correction2_sqrt = static_cast<C>(1.0 / std::sqrt(bias_correction2));
  const C beta1 = static_cast<C>(s.beta1), one_minus_beta1 = static_cast<C>(1.0 - s.beta1);
  const C beta2 = static_cast<C>(s.beta2), one_minus_beta2 = static_cast<C>(1.0 - s.beta2);
  const C eps = static_cast<C>(s.eps);
  const C weight_decay = static_cast<C>(s.weight_decay);
  const C decay_factor = static_cast<C>(1.0 - s.lr * s.weight_decay);
  const bool coupled_decay = !s.decoupled && s.weight_decay != 0.0;
  // Blocks (float32, or float64 for float64 parameters) take the widest vector kernel the CPU has:
  // the same operations, a vector at a time.
  const CpuIsa isa = cpu_isa();

  detail::for_each_param_block(a.param.data<P>(), a.grad.data<G>(), begin, end,
                               [&](int64_t offset, int64_t length, C* p_data, const C* g_data) {
    if (isa >= CpuIsa::Avx2) {
      using AdamBlock = std::conditional_t<std::is_same_v<C, float>, detail::AdamBlockF32, detail::AdamBlockF64>;
      const AdamBlock block{p_data, g_data, m_data + offset, v_data + offset,
                            v_max_data ? v_max_data + offset : nullptr, length, s.decoupled,
                            coupled_decay, weight_decay, decay_factor, beta1, one_minus_beta1, beta2,
                            one_minus_beta2, neg_step_size, inv_bias_correction2_sqrt, eps};
      if (isa >= CpuIsa::Avx512) detail::adam_block_avx512(block);
      else detail::adam_block_avx2(block);
      return;
    }
    C* m = m_data + offset;
    C* v = v_data + offset;
    C* v_max = v_max_data ? v_max_data + offset : nullptr;
    for (int64_t i = 0; i < length; ++i) {
      C p = p_data[i];
      const C g = coupled_decay ? g_data[i] + weight_decay * p : g_data[i];
      if (s.decoupled) p = p * decay_factor;
      m[i] = m[i] * beta1 + one_minus_beta1 * g;
      v[i] = v[i] * beta2 + one_minus_beta2 * g * g;
      C second = v[i];
      if (v_max) second = v_max[i] = std::max(v_max[i], v[i]);  // NaN in v keeps v_max, as maxps(v, v_max)
      p_data[i] = p + neg_step_size * m[i] / (std::sqrt(second) * inv_bias_correction2_sqrt + eps);
    }
  });
}

// Whether a step of `param` keeps its count on the device (Note [Capturable Adam]).
template <class Options>
bool counts_on_device(const Options& o, const Tensor& param) {
  return o.capturable && param.device().is_cuda();
}

// A CUDA graph records what a step queues, once: a step that depends on host values that change
// from step to step, or that creates state (the graph would zero it on every replay), is refused.
template <class Options>
void check_capturable(const char* op, const Options& o, const Tensor& param,
                      const std::function<const AdamParamState*(const Tensor&)>& find_state) {
  if (!param.device().is_cuda() || !cuda::is_current_stream_capturing()) return;
  WEFT_CHECK(o.capturable, "[", op, "] a CUDA graph is being captured but capturable is false: the step count and "
             "bias corrections would be fixed in the graph and every replay would repeat this step; construct ",
             op, " with capturable = true");
  const AdamParamState* state = find_state(param);
  const bool complete = state != nullptr && state->exp_avg.defined() && state->exp_avg_sq.defined() &&
                        (!o.amsgrad || state->max_exp_avg_sq.defined()) && state->step_on_device.defined();
  WEFT_CHECK(complete, "[", op, "] a parameter's state would be created during a CUDA graph capture, and every "
             "replay would reset it; run the step eagerly first (cuda::Graph::warm_up)");
}

template <class Options>
void adam_step(const char* op, std::vector<ParamGroup<Options>>& groups,
               const std::function<AdamParamState&(const Tensor&)>& state_for,
               const std::function<const AdamParamState*(const Tensor&)>& find_state, bool decoupled) {
  for (auto& group : groups) {
    const Options& o = group.options;
    // Every parameter is checked before any state changes.
    std::vector<std::pair<Tensor, Tensor>> stepped;
    for (const Tensor& param : group.params)
      if (param.grad().defined()) {
        stepped.emplace_back(param, detail::fused_update_grad(op, param));
        check_capturable(op, o, param, find_state);
      }
    std::vector<std::pair<Device, AdamLaunch>> launches;  // one per device
    for (const auto& [param, grad] : stepped) {
      AdamParamState& state = state_for(param);
      // Lazily created, so a state dict without a buffer (or amsgrad switched on) still steps.
      if (!state.exp_avg.defined()) state.exp_avg = detail::zero_state(param);
      if (!state.exp_avg_sq.defined()) state.exp_avg_sq = detail::zero_state(param);
      if (o.amsgrad && !state.max_exp_avg_sq.defined()) state.max_exp_avg_sq = detail::zero_state(param);
      if (counts_on_device(o, param)) {
        if (!state.step_on_device.defined())
          state.step_on_device =
              full({}, static_cast<double>(state.step), TensorOptions(kFloat64).device(param.device()));
      } else {
        if (state.step_on_device.defined()) {  // capturable was switched off: the device has the count
          state.step = static_cast<int64_t>(state.step_on_device.item<double>());
          state.step_on_device = Tensor();
        }
        state.step += 1;
      }
      const Device device = param.device();  // named: clang 14 lets no lambda capture a structured binding
      auto at = std::find_if(launches.begin(), launches.end(), [&](const auto& l) { return l.first == device; });
      if (at == launches.end())
        at = launches.insert(launches.end(), {device, AdamLaunch{{}, o.lr, o.betas.first, o.betas.second, o.eps,
                                                                           o.weight_decay, o.amsgrad, decoupled}});
      at->second.params.push_back({param, grad, state.exp_avg, state.exp_avg_sq, state.max_exp_avg_sq, state.step,
                                   state.step_on_device});
    }
    for (const auto& [device, launch] : launches) {
      detail::adam_kernels().at(device)(launch);
      for (const AdamParam& a : launch.params) detail::mark_updated(a.param);
    }
  }
}

// The state dict with the count of every capturable parameter read from its device.
template <class Optim>
OptimizerState with_device_counts(const Optim& optimizer, OptimizerState out) {
  int64_t index = 0;
  for (const auto& group : optimizer.param_groups())
    for (const Tensor& param : group.params) {
      const AdamParamState* state = optimizer.state(param);
      if (state != nullptr && state->step_on_device.defined())
        out.scalars["state." + std::to_string(index) + ".step"] =
            format_scalar(static_cast<int64_t>(state->step_on_device.item<double>()));
      ++index;
    }
  return out;
}

}  // namespace

void detail::cpu_adam_kernel(const AdamLaunch& launch) {
  std::vector<int64_t> sizes;
  for (const AdamParam& a : launch.params) sizes.push_back(a.param.numel());
  for_each_param_range(sizes, [&](size_t i, int64_t begin, int64_t end) {
    const AdamParam& a = launch.params[i];
    dispatch_param_grad_dtype(a.param.dtype(), a.grad.dtype(), launch.decoupled ? "AdamW" : "Adam",
                              [&](auto p, auto g) { adam_update<decltype(p), decltype(g)>(a, launch, begin, end); });
  });
}

KernelRegistry<detail::AdamKernel>& detail::adam_kernels() {
  static KernelRegistry<AdamKernel> registry("Adam", &cpu_adam_kernel, cuda_adam_kernel);
  return registry;
}

void AdamOptions::validate() const { validate_adam("Adam", lr, betas, eps, weight_decay); }
void AdamWOptions::validate() const { validate_adam("AdamW", lr, betas, eps, weight_decay); }

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : TypedOptimizer("Adam", std::move(params), options) {}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : TypedOptimizer("AdamW", std::move(params), options) {}

void Adam::step() {
  adam_step<AdamOptions>("Adam", groups_, [this](const Tensor& p) -> AdamParamState& { return state_for(p); },
                         [this](const Tensor& p) { return state(p); }, false);
}

void AdamW::step() {
  adam_step<AdamWOptions>("AdamW", groups_, [this](const Tensor& p) -> AdamParamState& { return state_for(p); },
                          [this](const Tensor& p) { return state(p); }, true);
}

void AdamParamState::validate(const std::string& op, int64_t index) const {
  const auto check = [&](const char* field, const Tensor& t) {
    if (!t.defined() || t.numel() == 0) return;
    const double lowest = min(t).to(kFloat64).item<double>();
    WEFT_CHECK(lowest >= 0.0, "[", op, "] 'state.", index, ".", field, "' holds a negative second moment (", lowest,
               "); a step from it would write NaN into its parameter");
  };
  check("exp_avg_sq", exp_avg_sq);
  check("max_exp_avg_sq", max_exp_avg_sq);
}

OptimizerState Adam::state_dict() const { return with_device_counts(*this, TypedOptimizer::state_dict()); }
OptimizerState AdamW::state_dict() const { return with_device_counts(*this, TypedOptimizer::state_dict()); }

}  // namespace weft::optim
