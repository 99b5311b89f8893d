// Training checkpoints: a model's state dict, optionally an optimizer's state, and string
// metadata in ONE safetensors file (io/safetensors.h), written atomically, with the CRC-32 of its
// data recorded and checked on load (Note [Checksummed data] in io/safetensors.h).
//
// Layout, chosen so that the file is also a plain weights file for other tools: the model's
// tensors keep their state-dict names ("0.weight", ...), so Python's safetensors / PyTorch load
// them as is; optimizer tensors live under "__optimizer__.<name>" and optimizer scalars in the
// metadata under the same prefix; the caller's metadata entries are stored as given. Names that
// would collide with the prefix are refused.
//
// Tied tensors (one tensor under several state-dict names, nn/tied_state.h) are written once, as
// Python's safetensors.torch.save_model writes them: under the alphabetically first name, each
// dropped name recorded in the metadata as dropped -> kept (unless the caller's metadata has that
// key). Loading gives the dropped names back from the model's own ties, as load_model does, so a
// file written by save_model loads here and a weft checkpoint loads with load_model.
//
// Loading is all or nothing: the file is read and split before anything changes, and a load that
// fails leaves the model and the optimizer as they were (apply_checkpoint says how).
#pragma once

#include <filesystem>

#include "nn/module.h"
#include "optim/optimizer.h"
#include "io/safetensors.h"

namespace weft::io {

inline constexpr const char* kOptimizerPrefix = "__optimizer__.";

// The model's part of a checkpoint file: `state` with every tied tensor under one name only, the
// dropped names recorded in `metadata` (the rule above).
nn::TensorDict drop_tied_names(const nn::TensorDict& state, SafetensorsMetadata& metadata);

void save_checkpoint(const std::filesystem::path& path, const nn::Module& model, const optim::Optimizer* optimizer,
                     const SafetensorsMetadata& metadata = {});

// A checkpoint file read and split into its parts, not applied to anything yet.
struct Checkpoint {
  std::filesystem::path path;       // where it was read from, for messages
  nn::TensorDict model;                 // the model's state dict
  optim::OptimizerState optimizer;  // empty when it was saved without an optimizer
  SafetensorsMetadata metadata;     // the caller's entries (records of dropped tied names left out)
};

Checkpoint read_checkpoint(const std::filesystem::path& path);

// Loads into `model` (strictly: every key must match, tied names dropped by the save given back) and, when given, into `optimizer`, all or
// nothing. The model's part is checked first (Module::check_state_dict), so a file from another
// model is reported as the model's shape mismatch, not as the optimizer state that follows from
// it. Each load_state_dict validates before it writes, so the optimizer goes first, then the
// model; if the model refuses, the optimizer gets its previous state back. (The model is last
// because its writes cannot be taken back cheaply: lazy layers that a refused load materialised
// stay materialised, as Module::load_state_dict leaves them.) A checkpoint without optimizer
// state cannot restore an optimizer.
void apply_checkpoint(const Checkpoint& checkpoint, nn::Module& model, optim::Optimizer* optimizer);

// read_checkpoint, then apply_checkpoint; returns the caller's metadata.
SafetensorsMetadata load_checkpoint(const std::filesystem::path& path, nn::Module& model, optim::Optimizer* optimizer);

}  // namespace weft::io
