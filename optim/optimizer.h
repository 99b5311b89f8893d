// Optimizer: the base every weft optimizer derives from, and the state dict they share.
//
// An optimizer holds parameter groups (tensors plus that group's hyperparameters) and per-
// parameter state (momentum buffers, moment estimates, step counts). Parameters are held by handle
// and updated in place, so the handles a model holds stay valid across steps; state is keyed by
// the parameter's TensorImpl, as PyTorch keys it by the Parameter object.
//
// Note [Optimizer state dict]: a state dict is two flat maps a checkpoint writer can store as is.
//   tensors: "state.<i>.<buffer>"             e.g. "state.3.exp_avg"
//   scalars: "optimizer"                      the optimizer's name, checked on load
//            "param_groups.<g>.<option>"      e.g. "param_groups.0.lr", doubles as %.17g
//            "param_groups.<g>.params"        the group's parameter indices, "0,1,2"
//            "param_groups.<g>.initial_lr"    set by the first LR scheduler, when there was one
//            "state.<i>.<counter>"            e.g. "state.3.step"
// <i> numbers parameters across groups in order, as PyTorch's optimizer state_dict does. Saving
// copies the state and loading copies it back, converted to the dtype the optimizer computes in,
// so save -> load -> step gives bit-for-bit the parameters that an uninterrupted run gives.
// Loading validates everything (optimizer name, group and parameter counts, shapes, option
// values) before it changes anything, and refuses state that a step would turn into NaN: option
// values that are not finite or out of range, negative counters (a step count), state tensors
// with inf or NaN, and what a ParamState's own validate() refuses; each error names the key.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <type_traits>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nn/tensor_dict.h"
#include "optim/scalar_codec.h"
#include "tensor/tensor.h"

namespace weft::optim {

struct OptimizerState {
  nn::TensorDict tensors;
  std::map<std::string, std::string> scalars;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  const std::string& name() const { return name_; }

  // One update of every parameter that has a gradient; parameters without .grad are skipped.
  virtual void step() = 0;
  // set_to_none drops the gradients (the next backward allocates fresh ones); otherwise they are
  // zeroed in place.
  void zero_grad(bool set_to_none = true);

  // True for an optimizer that unscales float16-mixed gradients inside its own step (PyTorch's
  // fused Adam/SGD, `_step_supports_amp_scaling`): an explicit unscale before it would unscale
  // twice, so precision plugins refuse gradient clipping with it. None of weft's does yet.
  virtual bool step_supports_amp_scaling() const { return false; }

  virtual OptimizerState state_dict() const = 0;
  virtual void load_state_dict(const OptimizerState& state) = 0;

  // The view of the groups that LR schedulers and generic training loops need.
  virtual size_t num_param_groups() const = 0;
  virtual const std::vector<Tensor>& params(size_t group) const = 0;
  virtual double lr(size_t group) const = 0;
  virtual void set_lr(size_t group, double lr) = 0;
  // The lr a group had when the first LR scheduler attached (PyTorch's group['initial_lr']).
  virtual std::optional<double> initial_lr(size_t group) const = 0;
  virtual void set_initial_lr(size_t group, double lr) = 0;

 protected:
  explicit Optimizer(std::string name) : name_(std::move(name)) {}
  // Movable through its concrete type only (so that Fabric can take one over; fabric/fabric.h).
  Optimizer(Optimizer&&) = default;

 private:
  std::string name_;
};

template <class Options>
struct ParamGroup {
  std::vector<Tensor> params;
  Options options;
  std::optional<double> initial_lr;
};

namespace detail {

// Checks a parameter when it joins a group: defined, floating, not already in a group.
void check_new_param(const std::string& op, const Tensor& param,
                     const std::vector<std::vector<Tensor>>& existing_groups);
// The dtype optimizer state is kept in for `param`: float64 for float64, float32 otherwise.
DType state_dtype(const Tensor& param);
// The state tensor as the optimizer keeps it for `param`: same shape and finite values (checked,
// naming `key`), converted to state_dtype, on param's device, a fresh copy.
Tensor adopt_state_tensor(const std::string& op, const std::string& key, const Tensor& value,
                          const Tensor& param);

// Throws naming `key` when a loaded option or counter is inf or NaN (nothing to check for the
// other types).
void check_finite_scalar(const std::string& op, const std::string& key, double value);
void check_finite_scalar(const std::string& op, const std::string& key, const std::pair<double, double>& value);
template <class T>
void check_finite_scalar(const std::string&, const std::string&, const T&) {}

// The state dict's keys split into their parts. Throws naming the key when it is malformed.
struct GroupKeys {
  std::map<std::string, std::string> options;  // option -> text, without "params"/"initial_lr"
  std::vector<int64_t> params;
  std::optional<double> initial_lr;
};
std::vector<GroupKeys> split_group_keys(const std::string& op, const OptimizerState& state);
// "state.<i>.<field>" -> (i, field); other keys give nullopt.
std::optional<std::pair<int64_t, std::string>> split_state_key(const std::string& key);

}  // namespace detail

// Parameter groups of one Options type and per-parameter state of one ParamState type. Options
// lists its fields once in visit() and checks them in validate(); ParamState lists its tensors and
// counters in visit(); both drive the state dict.
template <class Options, class ParamState>
class TypedOptimizer : public Optimizer {
 public:
  using Group = ParamGroup<Options>;

  // Adds a group with the optimizer's default options, or with its own.
  void add_param_group(std::vector<Tensor> params) { add_param_group(std::move(params), defaults_); }
  void add_param_group(std::vector<Tensor> params, Options options) {
    options.validate();
    WEFT_CHECK(!params.empty(), "[", name(), "] a parameter group needs at least one parameter");
    std::vector<std::vector<Tensor>> existing;
    for (const Group& g : groups_) existing.push_back(g.params);
    for (size_t i = 0; i < params.size(); ++i) {
      detail::check_new_param(name(), params[i], existing);
      for (size_t j = 0; j < i; ++j)
        WEFT_CHECK(!params[i].is_same(params[j]), "[", name(),
                   "] a parameter appears twice in the same parameter group");
    }
    groups_.push_back(Group{std::move(params), options, std::nullopt});
  }

  std::vector<Group>& param_groups() { return groups_; }
  const std::vector<Group>& param_groups() const { return groups_; }
  const Options& defaults() const { return defaults_; }
  // The state of `param`, or nullptr before its first step.
  const ParamState* state(const Tensor& param) const {
    auto it = state_.find(param.impl());
    return it == state_.end() ? nullptr : &it->second;
  }

  size_t num_param_groups() const override { return groups_.size(); }
  const std::vector<Tensor>& params(size_t group) const override { return checked_group(group).params; }
  double lr(size_t group) const override { return checked_group(group).options.lr; }
  void set_lr(size_t group, double lr) override { checked_group(group).options.lr = lr; }
  std::optional<double> initial_lr(size_t group) const override { return checked_group(group).initial_lr; }
  void set_initial_lr(size_t group, double lr) override { checked_group(group).initial_lr = lr; }

  OptimizerState state_dict() const override {
    OptimizerState out;
    out.scalars["optimizer"] = name();
    int64_t index = 0;
    for (size_t g = 0; g < groups_.size(); ++g) {
      const std::string prefix = "param_groups." + std::to_string(g) + ".";
      Options options = groups_[g].options;
      options.visit([&](const char* field, const auto& value) {
        out.scalars[prefix + field] = format_scalar(value);
      });
      if (groups_[g].initial_lr) out.scalars[prefix + "initial_lr"] = format_scalar(*groups_[g].initial_lr);
      std::string indices;
      for (const Tensor& p : groups_[g].params) {
        if (!indices.empty()) indices += ',';
        indices += std::to_string(index);
        auto it = state_.find(p.impl());
        if (it != state_.end()) save_param_state(out, index, it->second);
        ++index;
      }
      out.scalars[prefix + "params"] = indices;
    }
    return out;
  }

  void load_state_dict(const OptimizerState& state) override {
    const std::string op = name() + ".load_state_dict";
    auto saved_name = state.scalars.find("optimizer");
    WEFT_CHECK(saved_name != state.scalars.end(), "[", op, "] the state dict has no 'optimizer' entry");
    WEFT_CHECK(saved_name->second == name(), "[", op, "] expected a state dict saved by ", name(),
               ", got one saved by ", saved_name->second);
    const std::vector<detail::GroupKeys> saved = detail::split_group_keys(op, state);
    WEFT_CHECK(saved.size() == groups_.size(), "[", op, "] the optimizer has ", groups_.size(),
               " parameter groups, the state dict has ", saved.size());

    // Build everything first, commit at the end: a failed load leaves the optimizer untouched.
    const std::map<int64_t, const Tensor*> param_of = match_params(op, saved);
    std::vector<Options> options;
    for (size_t g = 0; g < groups_.size(); ++g) options.push_back(parse_options(op, g, saved[g].options));
    std::map<int64_t, ParamState> states = parse_states(op, state, param_of);

    for (size_t g = 0; g < groups_.size(); ++g) {
      groups_[g].options = options[g];
      groups_[g].initial_lr = saved[g].initial_lr;
    }
    state_.clear();
    for (auto& [index, param_state] : states) state_[param_of.at(index)->impl()] = std::move(param_state);
  }

 protected:
  TypedOptimizer(std::string name, std::vector<Tensor> params, Options defaults)
      : Optimizer(std::move(name)), defaults_(defaults) {
    add_param_group(std::move(params), defaults_);
  }

  // The state of `param`, created empty on first use.
  ParamState& state_for(const Tensor& param) { return state_[param.impl()]; }

  std::vector<Group> groups_;

 private:
  const Group& checked_group(size_t group) const {
    WEFT_CHECK(group < groups_.size(), "[", name(), "] no parameter group ", group, "; there are ",
               groups_.size());
    return groups_[group];
  }
  Group& checked_group(size_t group) {
    return const_cast<Group&>(static_cast<const TypedOptimizer&>(*this).checked_group(group));
  }

  // Saved parameter indices map to this optimizer's parameters by position, group by group, as
  // PyTorch maps them.
  std::map<int64_t, const Tensor*> match_params(const std::string& op,
                                                const std::vector<detail::GroupKeys>& saved) const {
    std::map<int64_t, const Tensor*> param_of;
    for (size_t g = 0; g < groups_.size(); ++g) {
      WEFT_CHECK(saved[g].params.size() == groups_[g].params.size(), "[", op, "] parameter group ", g,
                 " has ", groups_[g].params.size(), " parameters, the state dict's has ",
                 saved[g].params.size());
      for (size_t j = 0; j < saved[g].params.size(); ++j)
        WEFT_CHECK(param_of.emplace(saved[g].params[j], &groups_[g].params[j]).second, "[", op,
                   "] parameter index ", saved[g].params[j], " appears twice in the state dict's groups");
    }
    return param_of;
  }

  // One group's options from their texts: every field present, no unknown field, valid values.
  // Options a state dict does not hold (Adam's capturable) keep the group's current values.
  Options parse_options(const std::string& op, size_t group, std::map<std::string, std::string> texts) const {
    Options options = groups_[group].options;
    const std::string prefix = "param_groups." + std::to_string(group) + ".";
    options.visit([&](const char* field, auto& value) {
      const std::string key = prefix + field;
      auto it = texts.find(field);
      WEFT_CHECK(it != texts.end(), "[", op, "] the state dict has no '", key, "'");
      parse_scalar(key, it->second, value);
      detail::check_finite_scalar(op, key, value);
      texts.erase(it);
    });
    WEFT_CHECK(texts.empty(), "[", op, "] unknown option '", prefix, texts.empty() ? "" : texts.begin()->first,
               "' for ", name());
    try {
      options.validate();
    } catch (const Error& e) {
      WEFT_FAIL("[", op, "] the options under '", prefix, "*' are out of range: ", e.what());
    }
    return options;
  }

  // The per-parameter states of a state dict, keyed by saved parameter index. Tensors are checked
  // against their parameter and adopted (state dtype, fresh copy); every counter of a state that
  // appears must be present.
  std::map<int64_t, ParamState> parse_states(const std::string& op, const OptimizerState& state,
                                             const std::map<int64_t, const Tensor*>& param_of) const {
    std::map<int64_t, ParamState> states;
    std::map<int64_t, std::set<std::string>> counters;
    // Finds the state field `key` names and hands it to `fill`, which returns whether it took it.
    auto load_entry = [&](const std::string& key, auto&& fill) {
      auto parsed = detail::split_state_key(key);
      WEFT_CHECK(parsed.has_value(), "[", op, "] unexpected key '", key, "'");
      auto param = param_of.find(parsed->first);
      WEFT_CHECK(param != param_of.end(), "[", op, "] '", key, "' names parameter ", parsed->first,
                 ", which no parameter group of the state dict lists");
      bool known = false;
      states[parsed->first].visit([&](const char* field, auto& slot) {
        if (parsed->second == field) known = fill(slot, *param->second);
      });
      WEFT_CHECK(known, "[", op, "] unknown state entry '", key, "' for ", name());
      return *parsed;
    };
    // Plain names rather than structured bindings: lambdas cannot capture bindings before C++20's
    // P1091 fix, which clang 14 lacks.
    for (const auto& entry : state.tensors) {
      const std::string& key = entry.first;
      const Tensor& value = entry.second;
      load_entry(key, [&](auto& slot, const Tensor& param) {
        if constexpr (std::is_same_v<std::decay_t<decltype(slot)>, Tensor>) {
          slot = detail::adopt_state_tensor(op, key, value, param);
          return true;
        }
        return false;
      });
    }
    for (const auto& entry : state.scalars) {
      const std::string& key = entry.first;
      const std::string& text = entry.second;
      if (key.rfind("state.", 0) != 0) continue;
      auto [index, field] = load_entry(key, [&](auto& slot, const Tensor&) {
        if constexpr (!std::is_same_v<std::decay_t<decltype(slot)>, Tensor>) {
          parse_scalar(key, text, slot);
          detail::check_finite_scalar(op, key, slot);
          if constexpr (std::is_same_v<std::decay_t<decltype(slot)>, int64_t>)
            WEFT_CHECK(slot >= 0, "[", op, "] '", key, "' must be a non-negative integer (a count), got ", slot);
          return true;
        }
        return false;
      });
      counters[index].insert(field);
    }
    for (auto& entry : states) {
      const int64_t index = entry.first;
      entry.second.visit([&](const char* field, auto& slot) {
        if constexpr (!std::is_same_v<std::decay_t<decltype(slot)>, Tensor>)
          WEFT_CHECK(counters[index].count(field), "[", op, "] the state dict has no 'state.", index, ".", field,
                     "'");
      });
      if constexpr (requires(const ParamState& s) { s.validate(op, index); }) entry.second.validate(op, index);
    }
    return states;
  }

  static void save_param_state(OptimizerState& out, int64_t index, const ParamState& param_state) {
    ParamState copy = param_state;
    const std::string prefix = "state." + std::to_string(index) + ".";
    copy.visit([&](const char* field, const auto& value) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, Tensor>) {
        if (value.defined()) out.tensors.insert(prefix + field, value.clone());
      } else {
        out.scalars[prefix + field] = format_scalar(value);
      }
    });
  }

  Options defaults_;
  std::unordered_map<const weft::detail::TensorImpl*, ParamState> state_;
};

}  // namespace weft::optim
