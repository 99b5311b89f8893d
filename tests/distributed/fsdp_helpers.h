// Shared by the FSDP tests: the training loop under a precision plugin, the FSDP configurations,
// and the single-process references they must match.
#pragma once

#include <functional>
#include <string>

#include "train_helpers.h"

namespace weft::test {

// One training loop as a precision plugin runs it (what Fabric does per step). `after_backward`
// runs between backward and the optimizer step (checks, clipping).
inline void train_steps(precision::Precision& plugin, const std::function<Tensor(const Tensor&)>& forward,
                        nn::Module* module, optim::Optimizer& opt, int rank, int world, int first_step, int steps,
                        const std::function<void()>& after_backward = {}) {
  for (int step = first_step; step < first_step + steps; ++step) {
    const Batch b = local_rows(global_batch(step), rank, world);
    opt.zero_grad();
    const Tensor x = plugin.convert_input(b.x);
    Tensor out;
    {
      precision::Context ctx = plugin.forward_context();
      out = forward(x);
    }
    const Tensor loss = cross_entropy(plugin.convert_output(out), b.y);
    plugin.backward(loss, module);
    if (after_backward) after_backward();
    plugin.optimizer_step(opt);
  }
}

struct FsdpConfig {
  std::string precision = "32-true";
  std::string optimizer = "adamw";
  std::string strategy = "FULL_SHARD";
  std::string policy = "linear";  // "linear": every Linear; "size100": units of >= 100 parameters; "none": root only
  std::string name() const { return precision + "_" + optimizer + "_" + strategy + "_" + policy + "_"; }
};

inline distributed::AutoWrapPolicy policy_of(const std::string& name) {
  if (name == "linear") return distributed::module_type_auto_wrap_policy({"Linear"});
  if (name == "size100") return distributed::size_based_auto_wrap_policy(100);
  return {};
}

inline distributed::FSDPOptions fsdp_options(const FsdpConfig& c) {
  distributed::FSDPOptions o;
  o.sharding_strategy = distributed::parse_sharding_strategy(c.strategy);
  o.auto_wrap_policy = policy_of(c.policy);
  o.mixed_precision = precision::FSDPPrecision(c.precision).mixed_precision_config();
  return o;
}

// One process on the whole batch. For the mixed modes, the casts FSDP makes, done by hand: fp32
// master weights updated by the optimizer, a low-precision working copy for forward and backward
// (inputs cast to it, autocast on), its gradients cast back to fp32.
inline nn::TensorDict single_process_reference(const FsdpConfig& c, int steps) {
  auto plugin = precision::make_precision(c.precision, "cpu");
  if (c.precision.ends_with("-mixed")) {
    const DType half = c.precision.starts_with("bf16") ? kBFloat16 : kFloat16;
    auto master = make_mlp(1234);
    auto work = make_mlp(1234);
    work->to(half);
    auto opt = make_optimizer(c.optimizer, master->parameters());
    const auto mp = master->parameters(), wp = work->parameters();
    for (int step = 0; step < steps; ++step) {
      const Batch b = global_batch(step);
      {
        NoGradGuard no_grad;
        for (size_t i = 0; i < mp.size(); ++i) Tensor(wp[i]).copy_(mp[i]);
      }
      work->zero_grad();
      opt->zero_grad();
      Tensor out;
      {
        precision::Context ctx = plugin->forward_context();
        out = work(b.x.to(half));
      }
      cross_entropy(plugin->convert_output(out), b.y).backward();
      for (size_t i = 0; i < mp.size(); ++i) Tensor(mp[i]).set_grad(wp[i].grad().to(kFloat32));
      opt->step();
    }
    return master->state_dict();
  }
  auto model = make_mlp(1234);
  plugin->convert_module(*model);
  auto opt = make_optimizer(c.optimizer, model->parameters());
  train_steps(*plugin, [&](const Tensor& x) { return model(x); }, model.ptr().get(), *opt, 0, 1, 0, steps);
  return model->state_dict();
}

}  // namespace weft::test
