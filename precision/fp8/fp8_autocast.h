// fp8_autocast: the thread-local scope inside which FP8 layers compute in FP8, and the points at
// which their scales are updated (TransformerEngine's fp8_autocast / autocast, §B.2).
//
//   {
//     precision::Fp8AutocastGuard fp8(true, precision::DelayedScaling{.amax_history_len = 16});
//     y = model(x);                 // Fp8Linear layers cast to FP8 with the scales they have now
//   }                               // leaving the outermost scope updates the forward scales
//   loss(y).backward();             // after the first FP8 layer's backward: the gradient scales
//
// Scopes nest (RAII, strictly, per thread; Note [Thread-local state] in tensor/init_context.h):
// an inner scope sets its own enabled flag, recipe and calibrating flag, and the outer ones come
// back when it ends. The outermost scope is a *region*:
// every DelayedScaling tensor an FP8 layer casts inside it (input, weight) is remembered, and when
// the region ends their amaxes are all-reduced over the ranks (max) through the region's
// AmaxReducer, then each scale is updated (precision/fp8/fp8_meta.h). The gradient tensors of the
// layers run in a region form a backward group, updated the same way at the end of the backward
// of the first FP8 layer that ran (the last one whose backward runs), as TransformerEngine does.
// So a scale used at step t comes from the amaxes of the steps before t.
//
// The backward runs outside the scope; its precision is decided by the forward that recorded it
// (the recipe is captured then). calibrating = true runs the layers in high precision and only
// collects amaxes (calibrating scales before FP8 training). Outside every scope, or with
// enabled = false, FP8 layers compute in high precision like their built-in twins.
//
// The AmaxReducer is the seam to data-parallel training (the distributed layer supplies one that
// all-reduces with MAX across the process group); only the outermost scope may set it. If a
// region ends while an exception is unwinding, nothing is updated (the collected amaxes stay for
// the next update). If the reducer throws when the region ends, the scales stay as they were and
// the error is rethrown by the next fp8_autocast or FP8 layer forward on this thread (a
// destructor cannot throw it).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "precision/fp8/fp8_meta.h"
#include "precision/fp8/fp8_recipe.h"

namespace weft::precision {

// Replaces each value by its maximum over all ranks, in place; every rank passes the same count.
using AmaxReducer = std::function<void(std::span<float> amaxes)>;

struct Fp8AutocastState {
  bool enabled = false;
  bool calibrating = false;
  Fp8Recipe recipe = DelayedScaling{};
};

// The calling thread's innermost scope (disabled outside every scope).
const Fp8AutocastState& fp8_autocast_state();

class Fp8AutocastGuard {
 public:
  // Throws for an invalid recipe, for a reducer on an inner scope, and with the error a previous
  // region's reducer left behind.
  explicit Fp8AutocastGuard(bool enabled = true, Fp8Recipe recipe = DelayedScaling{}, bool calibrating = false,
                            AmaxReducer amax_reducer = {});
  ~Fp8AutocastGuard();
  Fp8AutocastGuard(const Fp8AutocastGuard&) = delete;
  Fp8AutocastGuard& operator=(const Fp8AutocastGuard&) = delete;

 private:
  Fp8AutocastState saved_;
  int uncaught_;
};

}  // namespace weft::precision

namespace weft::detail {

// Tensors (a layer's metadata and one role each) whose DelayedScaling scales are updated
// together, with one amax reduction for all of them.
class Fp8UpdateSet {
 public:
  explicit Fp8UpdateSet(precision::AmaxReducer reducer) : reducer_(std::move(reducer)) {}
  // Remembers the tensor once, however often it is added.
  void add(const std::shared_ptr<precision::Fp8Metadata>& meta, precision::Fp8Role role,
           const precision::DelayedScaling& recipe);
  // Reduces the current amaxes of the tensors whose recipe asks for it, then updates every scale.
  void update();
  bool empty() const { return entries_.empty(); }

 private:
  struct Entry {
    std::shared_ptr<precision::Fp8Metadata> meta;
    precision::Fp8Role role;
    precision::DelayedScaling recipe;
  };
  precision::AmaxReducer reducer_;
  std::vector<Entry> entries_;
};

// The gradient tensors of the FP8 layers of one region.
class Fp8BackwardGroup : public Fp8UpdateSet {
 public:
  using Fp8UpdateSet::Fp8UpdateSet;
  // True for the first layer that asks: its backward ends the group's backward.
  bool claim_finisher() { return !std::exchange(finisher_claimed_, true); }

 private:
  bool finisher_claimed_ = false;
};

// For FP8 layers inside a scope: remember a forward tensor for the region's update, and the
// region's backward group. Both throw outside every scope.
void fp8_region_add(const std::shared_ptr<precision::Fp8Metadata>& meta, precision::Fp8Role role,
                    const precision::DelayedScaling& recipe);
std::shared_ptr<Fp8BackwardGroup> fp8_region_backward_group();
// Rethrows (once) the error an earlier region's update left on this thread.
void fp8_rethrow_deferred_error();

}  // namespace weft::detail
