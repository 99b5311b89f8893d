// Splitting and joining the model / optimizer / metadata parts of a checkpoint file.
#include "io/checkpoint.h"

#include <string_view>
#include <utility>

namespace weft::io {
namespace {

bool has_prefix(std::string_view name) { return name.substr(0, std::string_view(kOptimizerPrefix).size()) == kOptimizerPrefix; }

std::string strip(const std::string& name) { return name.substr(std::string_view(kOptimizerPrefix).size()); }

}  // namespace

void save_checkpoint(const std::filesystem::path& path, const nn::Module& model, const optim::Optimizer* optimizer,
                     const SafetensorsMetadata& metadata) {
  nn::TensorDict tensors;
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

Checkpoint read_checkpoint(const std::filesystem::path& path) {
  SafetensorsFile file = load_safetensors(path);
  Checkpoint checkpoint;
  checkpoint.path = path;
  for (const auto& [name, tensor] : file.tensors) {
    if (has_prefix(name)) checkpoint.optimizer.tensors.insert(strip(name), tensor);
    else checkpoint.model.insert(name, tensor);
  }
  for (const auto& [key, value] : file.metadata) {
    if (has_prefix(key)) checkpoint.optimizer.scalars[strip(key)] = value;
    else checkpoint.metadata[key] = value;
  }
  return checkpoint;
}

void apply_checkpoint(const Checkpoint& checkpoint, nn::Module& model, optim::Optimizer* optimizer) {
  if (optimizer == nullptr) {
    model.load_state_dict(checkpoint.model, true);
    return;
  }
  // The model's part is checked first: a file saved from another model would otherwise fail in
  // the optimizer's state, whose buffers have that other model's shapes, and blame the optimizer.
  try {
    model.check_state_dict(checkpoint.model, true);
  } catch (const Error& e) {
    WEFT_FAIL("[load_checkpoint] '", checkpoint.path.string(), "' does not fit the model: ", e.what());
  }
  WEFT_CHECK(!checkpoint.optimizer.scalars.empty(), "[load_checkpoint] ", checkpoint.path.string(),
             " holds no optimizer state; it was saved without an optimizer");
  const optim::OptimizerState previous = optimizer->state_dict();
  optimizer->load_state_dict(checkpoint.optimizer);
  try {
    model.load_state_dict(checkpoint.model, true);
  } catch (...) {
    optimizer->load_state_dict(previous);
    throw;
  }
}

SafetensorsMetadata load_checkpoint(const std::filesystem::path& path, nn::Module& model, optim::Optimizer* optimizer) {
  Checkpoint checkpoint = read_checkpoint(path);
  apply_checkpoint(checkpoint, model, optimizer);
  return std::move(checkpoint.metadata);
}

}  // namespace weft::io
