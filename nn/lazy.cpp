// Lazy-model helpers.
#include "nn/lazy.h"

#include "tensor/autograd.h"

namespace weft::nn {
namespace {

std::vector<std::string> uninitialized_names(const Module& module) {
  std::vector<std::string> names;
  for (const auto& [name, t] : module.named_parameters())
    if (t.is_uninitialized()) names.push_back(name);
  for (const auto& [name, t] : module.named_buffers())
    if (t.is_uninitialized()) names.push_back(name);
  return names;
}

}  // namespace

bool has_uninitialized_params(const Module& module) { return !uninitialized_names(module).empty(); }

void materialize(Module& module, const Tensor& example_input) {
  {
    NoGradGuard no_grad;
    module.forward(example_input);
  }
  const std::vector<std::string> left = uninitialized_names(module);
  if (left.empty()) return;
  std::string names;
  for (const auto& name : left) names += (names.empty() ? "'" : ", '") + name + "'";
  WEFT_FAIL("[materialize] ", module.type_name(), " still has uninitialized parameters after the dry run: ", names,
            "; they are not on the forward path of the example input");
}

}  // namespace weft::nn
