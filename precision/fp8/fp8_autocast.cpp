// The thread-local fp8_autocast state, its regions and the grouped scale updates.
#include "precision/fp8/fp8_autocast.h"

#include <exception>

#include "tensor/error.h"

namespace weft::detail {
namespace {

using precision::Fp8AutocastState;

struct Region {
  Fp8UpdateSet forward;
  std::shared_ptr<Fp8BackwardGroup> backward;
  precision::AmaxReducer reducer;
};

struct ThreadState {
  Fp8AutocastState state;
  int depth = 0;
  std::unique_ptr<Region> region;  // the outermost scope's, while one is open
  std::exception_ptr deferred_error;
};

// Note [Thread-local state] in tensor/init_context.h.
thread_local ThreadState tls;

Region& open_region(const char* op) {
  WEFT_CHECK(tls.region != nullptr, "[", op, "] needs an open fp8_autocast scope");
  return *tls.region;
}

}  // namespace
}  // namespace weft::detail

namespace weft::precision {

using detail::tls;

const Fp8AutocastState& fp8_autocast_state() { return tls.state; }

Fp8AutocastGuard::Fp8AutocastGuard(bool enabled, Fp8Recipe recipe, bool calibrating, AmaxReducer amax_reducer)
    : saved_(tls.state), uncaught_(std::uncaught_exceptions()) {
  detail::fp8_rethrow_deferred_error();
  validate(recipe);
  if (tls.depth == 0) {
    tls.region = std::make_unique<detail::Region>(
        detail::Region{detail::Fp8UpdateSet(amax_reducer), nullptr, amax_reducer});
  } else {
    WEFT_CHECK(!amax_reducer, "[fp8_autocast] only the outermost fp8_autocast sets the amax reducer; an inner one "
               "was given one");
  }
  ++tls.depth;
  tls.state = Fp8AutocastState{enabled, calibrating, std::move(recipe)};
}

Fp8AutocastGuard::~Fp8AutocastGuard() {
  tls.state = saved_;
  if (--tls.depth > 0) return;
  const std::unique_ptr<detail::Region> region = std::move(tls.region);
  if (std::uncaught_exceptions() > uncaught_) return;
  try {
    region->forward.update();
  } catch (...) {
    tls.deferred_error = std::current_exception();
  }
}

}  // namespace weft::precision

namespace weft::detail {

void Fp8UpdateSet::add(const std::shared_ptr<precision::Fp8Metadata>& meta, precision::Fp8Role role,
                       const precision::DelayedScaling& recipe) {
  for (const Entry& e : entries_)
    if (e.meta == meta && e.role == role) return;
  entries_.push_back({meta, role, recipe});
}

void Fp8UpdateSet::update() {
  // The amaxes visit the host only for a reducer (reading them waits for a GPU).
  std::vector<float> amaxes;
  if (reducer_)
    for (const Entry& e : entries_)
      if (e.recipe.reduce_amax) amaxes.push_back(e.meta->current_amax(e.role));
  if (!amaxes.empty()) {
    reducer_(std::span<float>(amaxes));
    size_t i = 0;
    for (const Entry& e : entries_)
      if (e.recipe.reduce_amax) e.meta->set_current_amax(e.role, amaxes[i++]);
  }
  for (const Entry& e : entries_) e.meta->update(e.role, e.recipe);
}

void fp8_region_add(const std::shared_ptr<precision::Fp8Metadata>& meta, precision::Fp8Role role,
                    const precision::DelayedScaling& recipe) {
  open_region("fp8_autocast").forward.add(meta, role, recipe);
}

std::shared_ptr<Fp8BackwardGroup> fp8_region_backward_group() {
  Region& region = open_region("fp8_autocast");
  if (!region.backward) region.backward = std::make_shared<Fp8BackwardGroup>(region.reducer);
  return region.backward;
}

void fp8_rethrow_deferred_error() {
  if (tls.deferred_error) std::rethrow_exception(std::exchange(tls.deferred_error, nullptr));
}

}  // namespace weft::detail
