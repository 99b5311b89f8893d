// Tied tensors in state dicts: which names of a state dict are one tensor (weight tying, as a
// GPT's token embedding and LM head; a module registered under two names), and completing a dict
// that lists such a tensor under only one of its names.
//
// A module's state_dict() lists a tied tensor under every name, each entry an alias of the same
// memory. Files keep it once, as Python's safetensors.torch.save_model does (io/checkpoint.h), so
// a file read back holds one name of the group; complete_tied_names gives the others back from
// the module's own tie structure, as safetensors.torch.load_model does.
//
// Two entries are one tensor when they are the same view (dtype, shape, strides, offset) of the
// same storage. Entries that overlap without being the same view are not a tie: each keeps its
// own name and bytes. Uninitialized (lazy) tensors have no memory yet and are never tied.
//
// Used by io (checkpoint save and load), Module::load_state_dict (tied names must agree) and
// distributed (FSDP's full and sharded state dicts).
#pragma once

#include <string>
#include <vector>

#include "nn/tensor_dict.h"

namespace weft::nn {

class Module;

// The names of `state` that are one tensor, each group sorted and with at least two names;
// groups ordered by their first name.
std::vector<std::vector<std::string>> tied_groups(const TensorDict& state);

// `state` (in its order) followed by, for each tie group of `model`'s state dict of which `state`
// holds some names but not all, the missing names bound to the present name's tensor (the
// alphabetically first present name when several are). Names of no group pass through as they are.
TensorDict complete_tied_names(const Module& model, const TensorDict& state);

}  // namespace weft::nn
