// StateLoader: one load_state_dict call as the modules see it, for the per-module state-dict
// hooks (Module::save_own_state / load_own_state).
//
// Note [State dict hooks]
// A module's entries in a state dict are normally its registered parameters and persistent
// buffers, one key each. A module whose state is more than its tensors — a quantized layer that
// keeps its block statistics beside the packed weight, under dotted sub-keys of the parameter
// ("weight.absmax", "weight.quant_state.bitsandbytes__nf4") as bitsandbytes does — overrides the two
// hooks instead:
//   save_own_state(prefix, out)   adds the module's own entries (not its children's) to `out`
//   load_own_state(loader, prefix)  takes the keys it owns from the loader, checks them, reports
//                                 missing keys and errors, and defers the changes it will make
// Module::load_state_dict calls load_own_state on every module of the tree (every path of a
// shared module), then fails — having changed nothing — if any module reported an error, or, in
// strict mode, if a key was missing or no module took it; otherwise it runs the deferred changes
// in order, without recording gradients. So a hook may depend on what the incoming dict holds (a
// float checkpoint loading into a quantized layer is quantized on load) and strict loading still
// means "every key consumed, nothing missing".
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "nn/tensor_dict.h"

namespace weft::nn {

class StateLoader {
 public:
  // kCheckOnly is Module::check_state_dict's dry run: nothing will be applied, and an uninitialized
  // (lazy) local tensor fits any incoming shape, as load_state_dict would materialise it first.
  enum class Mode { kLoad, kCheckOnly };
  explicit StateLoader(const TensorDict& state, Mode mode = Mode::kLoad) : state_(state), mode_(mode) {}

  bool check_only() const { return mode_ == Mode::kCheckOnly; }

  const TensorDict& state() const { return state_; }
  // The incoming tensor for `key`, now taken by the caller; null when the dict has none.
  const Tensor* take(const std::string& key);
  // Looks without taking.
  const Tensor* find(const std::string& key) const { return state_.find(key); }
  // The keys under `prefix` (e.g. "fc.weight.quant_state.") in the dict, in its order.
  std::vector<std::string> keys_with_prefix(const std::string& prefix) const;

  void missing(std::string key) { missing_.push_back(std::move(key)); }
  void error(std::string message) { errors_.push_back(std::move(message)); }
  // Runs after every module has checked its keys, and only if the load goes ahead.
  void defer(std::function<void()> change) { changes_.push_back(std::move(change)); }

  const std::vector<std::string>& missing_keys() const { return missing_; }
  const std::vector<std::string>& errors() const { return errors_; }
  std::vector<std::string> unexpected_keys() const;
  void apply();

 private:
  const TensorDict& state_;
  Mode mode_;
  std::set<std::string> taken_;
  std::vector<std::string> missing_;
  std::vector<std::string> errors_;
  std::vector<std::function<void()>> changes_;
};

}  // namespace weft::nn
