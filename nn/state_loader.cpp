// StateLoader bookkeeping: taken keys, missing keys, errors and the deferred changes.
#include "nn/state_loader.h"

namespace weft::nn {

const Tensor* StateLoader::take(const std::string& key) {
  const Tensor* t = state_.find(key);
  if (t != nullptr) taken_.insert(key);
  return t;
}

std::vector<std::string> StateLoader::keys_with_prefix(const std::string& prefix) const {
  std::vector<std::string> keys;
  for (const auto& [name, tensor] : state_)
    if (name.compare(0, prefix.size(), prefix) == 0) keys.push_back(name);
  return keys;
}

std::vector<std::string> StateLoader::unexpected_keys() const {
  std::vector<std::string> keys;
  for (const auto& [name, tensor] : state_)
    if (!taken_.contains(name)) keys.push_back(name);
  return keys;
}

void StateLoader::apply() {
  for (auto& change : changes_) change();
  changes_.clear();
}

}  // namespace weft::nn
