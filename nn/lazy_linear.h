// LazyLinear: a Linear whose in_features is inferred from its first input.
//
// At construction it captures what an eager Linear built at that point would have used: the
// tensor frame (its dtype and device live in the uninitialized weight and bias; skip-init is kept
// aside) and the module frame (which implementation Linear gets). module.to(dtype / device)
// before the first forward changes the placeholders, and so what the parameters become, as in
// PyTorch.
//
// Materialisation — on the first forward, on load_state_dict with an initialized weight, or by
// materialize(in_features) — re-enters the captured frames and builds the eager twin through
// make_linear, so the parameters get the same values (same random draws for the same seed) and
// the same implementation an eager Linear(in, out) would have got at construction. The twin
// adopts the placeholder handles (Note [Lazy adoption] in nn/module.h), so handles taken before
// materialisation stay valid. From then on the module is indistinguishable from the twin it
// delegates to: type_name() is "Linear" (or the replacement's), in_features is set, and
// state_dict keys and printing are the twin's.
//
// Unlike PyTorch, skip-init captured at construction also holds at materialisation (the eager
// twin would have skipped its initialisation), and load_state_dict finalises the module at once
// (the behaviour of pytorch#184698) instead of leaving in_features at 0 until a forward.
// Materialisation is not thread-safe: run the first forward from one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "nn/linear.h"
#include "nn/module_holder.h"
#include "nn/module_init_context.h"

namespace weft::nn {

class LazyLinearImpl : public LinearImpl {
 public:
  explicit LazyLinearImpl(int64_t out_features, bool bias = true);

  Tensor forward(const Tensor& input) override;  // materialises from input.size(-1) first
  void reset_parameters() override;              // a no-op until materialised
  std::string type_name() const override;
  std::string extra_repr() const override;
  Module& train(bool on = true) override;
  // Once materialised, the twin's state-dict hooks (a quantized twin saves more than its tensors).
  void save_own_state(const std::string& prefix, TensorDict& out) const override;
  void load_own_state(StateLoader& loader, const std::string& prefix) override;

  bool is_materialized() const { return twin_ != nullptr; }
  // Builds the parameters for `in_features` inputs now, without a forward.
  void materialize(int64_t in_features);

 protected:
  void before_load_state_dict(const TensorDict& state, const std::string& prefix) override;

 private:
  bool skip_init_;
  ResolvedModuleFrame module_frame_;
  std::shared_ptr<LinearImpl> twin_;
};

WEFT_MODULE(LazyLinear);

}  // namespace weft::nn
