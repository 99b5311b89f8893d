// Splitting and joining the model / optimizer / metadata parts of a checkpoint file.
#include "io/checkpoint.h"

#include <map>
#include <string_view>
#include <utility>

#include "nn/tied_state.h"

namespace weft::io {
namespace {

bool has_prefix(std::string_view name) { return name.substr(0, std::string_view(kOptimizerPrefix).size()) == kOptimizerPrefix; }

std::string strip(const std::string& name) { return name.substr(std::string_view(kOptimizerPrefix).size()); }

}  // namespace

nn::TensorDict drop_tied_names(const nn::TensorDict& state, SafetensorsMetadata& metadata) {
  std::map<std::string, std::string> kept_for;  // dropped name -> kept name
  for (const auto& group : nn::tied_groups(state))
    for (size_t i = 1; i < group.size(); ++i) kept_for[group[i]] = group[0];
  nn::TensorDict out;
  for (const auto& [name, tensor] : state) {
    const auto dropped = kept_for.find(name);
    if (dropped == kept_for.end()) out.insert(name, tensor);
    else metadata.try_emplace(name, dropped->second);  // the caller's entry of that key wins, as in Python
  }
  return out;
}

void save_checkpoint(const std::filesystem::path& path, const nn::Module& model, const optim::Optimizer* optimizer,
                     const SafetensorsMetadata& metadata) {
  nn::TensorDict tensors;
  SafetensorsMetadata meta;
  for (const auto& [name, tensor] : drop_tied_names(model.state_dict(), meta)) {
    WEFT_CHECK(!has_prefix(name), "[save_checkpoint] the model's state name '", name, "' uses the reserved prefix ",
               kOptimizerPrefix);
    tensors.insert(name, tensor);
  }
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
  save_safetensors(path, tensors, meta, Checksum::Crc32);
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
    if (has_prefix(key)) {
      checkpoint.optimizer.scalars[strip(key)] = value;
      continue;
    }
    // A record of a dropped tied name (a name the file does not hold, pointing at one it does) is
    // the save's, not the caller's.
    if (!(checkpoint.model.contains(value) && !file.tensors.contains(key))) checkpoint.metadata[key] = value;
  }
  return checkpoint;
}

void apply_checkpoint(const Checkpoint& checkpoint, nn::Module& model, optim::Optimizer* optimizer) {
  const nn::TensorDict state = nn::complete_tied_names(model, checkpoint.model);
  if (optimizer == nullptr) {
    model.load_state_dict(state, true);
    return;
  }
  // The model's part is checked first: a file saved from another model would otherwise fail in
  // the optimizer's state, whose buffers have that other model's shapes, and blame the optimizer.
  try {
    model.check_state_dict(state, true);
  } catch (const Error& e) {
    WEFT_FAIL("[load_checkpoint] '", checkpoint.path.string(), "' does not fit the model: ", e.what());
  }
  WEFT_CHECK(!checkpoint.optimizer.scalars.empty(), "[load_checkpoint] ", checkpoint.path.string(),
             " holds no optimizer state; it was saved without an optimizer");
  const optim::OptimizerState previous = optimizer->state_dict();
  optimizer->load_state_dict(checkpoint.optimizer);
  try {
    model.load_state_dict(state, true);
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
