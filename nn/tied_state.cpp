// Tie groups of a state dict and completing a dict that names a tied tensor once (see tied_state.h).
#include "nn/tied_state.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "nn/module.h"

namespace weft::nn {
namespace {

// What makes two entries one tensor: the same view of the same storage.
using ViewKey = std::tuple<const Storage*, int64_t, int, Shape, Shape>;

}  // namespace

std::vector<std::vector<std::string>> tied_groups(const TensorDict& state) {
  std::map<ViewKey, std::vector<std::string>> by_view;
  for (const auto& [name, t] : state) {
    if (!t.defined() || t.is_uninitialized()) continue;
    by_view[{t.storage().get(), t.offset(), static_cast<int>(t.dtype()), t.shape(), t.strides()}].push_back(name);
  }
  std::vector<std::vector<std::string>> groups;
  for (auto& [view, names] : by_view) {
    if (names.size() < 2) continue;
    std::sort(names.begin(), names.end());
    groups.push_back(std::move(names));
  }
  std::sort(groups.begin(), groups.end());
  return groups;
}

TensorDict complete_tied_names(const Module& model, const TensorDict& state) {
  TensorDict out = state;
  for (const auto& group : tied_groups(model.state_dict())) {
    const auto present = std::find_if(group.begin(), group.end(), [&](const std::string& n) { return state.contains(n); });
    if (present == group.end()) continue;
    const Tensor& tensor = state.at(*present);
    for (const std::string& name : group)
      if (!out.contains(name)) out.insert(name, tensor);
  }
  return out;
}

}  // namespace weft::nn
