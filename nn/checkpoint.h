// Training checkpoints: a model's state dict, optionally an optimizer's state, and string
// metadata in ONE safetensors file (nn/safetensors.h), written atomically.
//
// Layout, chosen so that the file is also a plain weights file for other tools: the model's
// tensors keep their state-dict names ("0.weight", ...), so Python's safetensors / PyTorch load
// them as is; optimizer tensors live under "__optimizer__.<name>" and optimizer scalars in the
// metadata under the same prefix; the caller's metadata entries are stored as given. Names that
// would collide with the prefix are refused.
#pragma once

#include <filesystem>

#include "nn/module.h"
#include "nn/optim_optimizer.h"
#include "nn/safetensors.h"

namespace weft::nn {

inline constexpr const char* kOptimizerPrefix = "__optimizer__.";

void save_checkpoint(const std::filesystem::path& path, const Module& model, const optim::Optimizer* optimizer,
                     const SafetensorsMetadata& metadata = {});

// Loads into `model` (strictly: every key must match) and, when given, into `optimizer`; returns
// the caller's metadata. A checkpoint without optimizer state cannot restore an optimizer.
SafetensorsMetadata load_checkpoint(const std::filesystem::path& path, Module& model, optim::Optimizer* optimizer);

}  // namespace weft::nn
