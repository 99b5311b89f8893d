// Splitting and joining the model / optimizer / metadata parts of a checkpoint file.
#include "nn/checkpoint.h"

#include <string_view>

namespace weft::nn {
namespace {

bool has_prefix(std::string_view name) { return name.substr(0, std::string_view(kOptimizerPrefix).size()) == kOptimizerPrefix; }

std::string strip(const std::string& name) { return name.substr(std::string_view(kOptimizerPrefix).size()); }

}  // namespace

void save_checkpoint(const std::filesystem::path& path, const Module& model, const optim::Optimizer* optimizer,
                     const SafetensorsMetadata& metadata) {
  TensorDict tensors;
  for (const auto& [name, tensor] : model.state_dict()) {
    WEFT_CHECK(!has_prefix(name), "[save_checkpoint] the model's state name '", name, "' uses the reserved prefix ",
               kOptimizerPrefix);
    tensors.insert(name, tensor);
  }
  SafetensorsMetadata meta;
  for (const auto& [key, value] : metadata) {
    WEFT_CHECK(!has_prefix(key), "[save_checkpoint] the metadata key '", key, "' uses the reserved prefix ",
               kOptimizerPrefix);
    meta[key] = value;
  }
  if (optimizer != nullptr) {
    const optim::OptimizerState state = optimizer->state_dict();
    for (const auto& [name, tensor] : state.tensors) tensors.insert(kOptimizerPrefix + name, tensor);
    for (const auto& [key, value] : state.scalars) meta[kOptimizerPrefix + key] = value;
  }
  save_safetensors(path, tensors, meta);
}

SafetensorsMetadata load_checkpoint(const std::filesystem::path& path, Module& model, optim::Optimizer* optimizer) {
  SafetensorsFile file = load_safetensors(path);
  TensorDict model_state;
  optim::OptimizerState optimizer_state;
  for (const auto& [name, tensor] : file.tensors) {
    if (has_prefix(name)) optimizer_state.tensors.insert(strip(name), tensor);
    else model_state.insert(name, tensor);
  }
  SafetensorsMetadata user;
  for (const auto& [key, value] : file.metadata) {
    if (has_prefix(key)) optimizer_state.scalars[strip(key)] = value;
    else user[key] = value;
  }
  WEFT_CHECK(optimizer == nullptr || !optimizer_state.scalars.empty(), "[load_checkpoint] ", path.string(),
             " holds no optimizer state; it was saved without an optimizer");
  model.load_state_dict(model_state, true);
  if (optimizer != nullptr) optimizer->load_state_dict(optimizer_state);
  return user;
}

}  // namespace weft::nn
