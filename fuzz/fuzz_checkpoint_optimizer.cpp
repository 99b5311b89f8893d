// libFuzzer target for a checkpoint's optimizer part (io/checkpoint.h): the keys and values under
// "__optimizer__." that load_checkpoint hands to the optimizer. The input edits a valid
// checkpoint of a Linear(2, 2) after one AdamW step, one edit a line:
//   key=value    sets the optimizer scalar `key` ("state.0.step=-3", "param_groups.0.lr=1e309")
//   key          removes it
//   @key=value   fills the optimizer tensor `key` with the number `value` ("@state.0.exp_avg=nan")
//   @key         removes it
// Invariants: apply_checkpoint loads or throws weft::Error (another exception or a crash is a
// finding); a refused load changes neither the model nor the optimizer; an accepted one leaves
// state a step cannot turn into NaN: non-negative step counts, finite state tensors, and
// non-negative second moments.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "weft.h"

namespace {

using namespace weft;

struct Trained {
  nn::Linear model{2, 2};
  optim::AdamW adam{model->parameters(), {.lr = 0.1}};
  Trained() {
    sum(model(ones({1, 2}))).backward();
    adam.step();
  }
};

// The checkpoint every input edits, made once.
const io::Checkpoint& baseline() {
  static const io::Checkpoint checkpoint = [] {
    manual_seed(0);
    Trained source;
    io::Checkpoint c;
    c.path = "fuzz.ckpt";
    c.model = source.model->state_dict();
    c.optimizer = source.adam.state_dict();
    return c;
  }();
  return checkpoint;
}

io::Checkpoint edited(std::string_view input) {
  io::Checkpoint c = baseline();
  nn::TensorDict tensors = c.optimizer.tensors;
  while (!input.empty()) {
    const size_t end = std::min(input.find('\n'), input.size());
    std::string_view line = input.substr(0, end);
    input.remove_prefix(std::min(end + 1, input.size()));
    const bool tensor = !line.empty() && line.front() == '@';
    if (tensor) line.remove_prefix(1);
    const size_t eq = line.find('=');
    const std::string key(line.substr(0, eq));
    const bool remove = eq == std::string_view::npos;
    const std::string value = remove ? "" : std::string(line.substr(eq + 1));
    if (!tensor) {
      if (remove) c.optimizer.scalars.erase(key);
      else c.optimizer.scalars[key] = value;
      continue;
    }
    nn::TensorDict next;
    for (const auto& [name, t] : tensors) {
      if (name != key) next.insert(name, t);
      else if (!remove) next.insert(name, full_like(t, std::strtod(value.c_str(), nullptr)));
    }
    tensors = next;
  }
  c.optimizer.tensors = tensors;
  return c;
}

bool same(const nn::TensorDict& a, const nn::TensorDict& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a) {
    const Tensor* other = b.find(name);
    if (other == nullptr || !equal(t, *other)) return false;
  }
  return true;
}

bool steppable(const optim::OptimizerState& state) {
  for (const auto& [key, value] : state.scalars)
    if (key.ends_with(".step") && (value.empty() || value.front() == '-')) return false;
  for (const auto& [name, t] : state.tensors) {
    if (sum(logical_not(isfinite(t)).to(kInt64)).item<int64_t>() != 0) return false;
    if (name.ends_with("exp_avg_sq") && t.numel() > 0 && min(t).to(kFloat64).item<double>() < 0.0) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const io::Checkpoint checkpoint = edited(std::string_view(reinterpret_cast<const char*>(data), size));
  manual_seed(1);
  Trained target;
  nn::TensorDict model_before;
  for (const auto& [name, t] : target.model->state_dict()) model_before.insert(name, t.clone());
  const optim::OptimizerState optimizer_before = target.adam.state_dict();
  try {
    io::apply_checkpoint(checkpoint, *target.model, &target.adam);
  } catch (const Error&) {
    const optim::OptimizerState optimizer_after = target.adam.state_dict();
    if (!same(target.model->state_dict(), model_before) || optimizer_after.scalars != optimizer_before.scalars ||
        !same(optimizer_after.tensors, optimizer_before.tensors))
      __builtin_trap();  // a refused load changed something
    return 0;
  }
  if (!steppable(target.adam.state_dict())) __builtin_trap();  // accepted state a step turns into NaN
  return 0;
}
