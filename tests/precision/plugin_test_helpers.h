// Test doubles shared by the plugin and Fabric tests: an optimizer whose name and AMP flag the
// test chooses (LBFGS, fused optimizers) and that counts its steps, and a plugin that replaces
// Linear by a marked subclass, at conversion and at construction.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <typeinfo>
#include <vector>

#include "precision/all.h"
#include "error_message.h"

namespace weft::testing {

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// True when the dynamic type of `object` is exactly T. (typeid of a named reference: clang warns
// about typeid(*ptr), whose operand is a call.)
template <class T, class U>
bool has_type(const U& object) {
  return typeid(object) == typeid(T);
}

// Plain SGD with lr 1 over one or more groups, named as the test says.
class NamedSgd : public optim::Optimizer {
 public:
  NamedSgd(std::string name, std::vector<std::vector<Tensor>> groups, bool supports_amp = false)
      : Optimizer(std::move(name)), groups_(std::move(groups)), supports_amp_(supports_amp) {}

  void step() override {
    ++steps;
    NoGradGuard no_grad;
    for (auto& group : groups_)
      for (auto& p : group)
        if (p.grad().defined()) p.sub_(p.grad());
  }
  bool step_supports_amp_scaling() const override { return supports_amp_; }
  optim::OptimizerState state_dict() const override { return {}; }
  void load_state_dict(const optim::OptimizerState&) override {}
  size_t num_param_groups() const override { return groups_.size(); }
  const std::vector<Tensor>& params(size_t group) const override { return groups_.at(group); }
  double lr(size_t) const override { return 1.0; }
  void set_lr(size_t, double) override {}
  std::optional<double> initial_lr(size_t) const override { return std::nullopt; }
  void set_initial_lr(size_t, double) override {}

  int steps = 0;

 private:
  std::vector<std::vector<Tensor>> groups_;
  bool supports_amp_;
};

// A Linear that doubles its output, so a test can tell it ran.
class MarkedLinear : public nn::LinearImpl {
 public:
  MarkedLinear(int64_t in, int64_t out, bool bias) : LinearImpl(in, out, bias) {}
  Tensor forward(const Tensor& input) override { return mul(LinearImpl::forward(input), 2.0); }
  std::string type_name() const override { return "MarkedLinear"; }
};

// Replaces Linear by MarkedLinear: in convert_module (weights copied) and, under
// module_init_context only, at construction. Tensors are float64 in both init contexts. Like the
// reference's bitsandbytes plugin, module_init_context refuses a non-empty ignore_modules (layers
// built in the context have no names yet to be matched); it refuses after pushing its tensor
// frame, so tests can check that a half-built context unwinds (T52).
class ReplacingPrecision : public precision::Precision {
 public:
  std::vector<std::string> ignore_modules;

  void convert_module(nn::Module& module) override {
    precision::LayerConverters converters;
    converters.linear = [](const std::shared_ptr<nn::LinearImpl>& old, const std::string&) {
      auto marked = std::make_shared<MarkedLinear>(old->in_features, old->out_features, old->bias.defined());
      NoGradGuard no_grad;
      marked->weight.copy_(old->weight);
      if (old->bias.defined()) marked->bias.copy_(old->bias);
      return marked;
    };
    precision::replace_layers(module, converters, ignore_modules);
  }
  precision::Context tensor_init_context() override {
    precision::Context context;
    context.push<TensorFrameGuard>(TensorFrame{kFloat64, {}, {}});
    return context;
  }
  precision::Context module_init_context() override {
    precision::Context context = tensor_init_context();
    WEFT_CHECK(ignore_modules.empty(), "[ReplacingPrecision] Instantiating your model under the `init_module` "
               "context manager is not supported when used with ignore_modules");
    nn::ModuleFrame frame;
    frame.linear = [](int64_t in, int64_t out, bool bias) { return std::make_shared<MarkedLinear>(in, out, bias); };
    context.push<nn::ModuleFrameGuard>(frame);
    return context;
  }
};

}  // namespace weft::testing
