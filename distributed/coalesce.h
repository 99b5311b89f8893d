// Collectives over many small tensors at once: one flat buffer per dtype, one collective each,
// instead of one collective per tensor (a model's parameters are dozens of tensors).
#pragma once

#include <vector>

#include "distributed/process_group.h"

namespace weft::distributed {

// Every tensor becomes root's, in place.
void broadcast_coalesced(ProcessGroup& pg, const std::vector<Tensor>& tensors, int root = 0);

// Checks that every rank passes tensors of the same count, shapes and dtypes; fails on every
// rank naming the first rank that differs from rank 0 and what differs. `what` names the caller.
void verify_same_shapes(ProcessGroup& pg, const std::vector<Tensor>& tensors, const char* what);

// Concatenates the tensors' elements (all of `dtype`) into one contiguous buffer, and back.
Tensor flatten_into_buffer(const std::vector<Tensor>& tensors, DType dtype);
void copy_from_buffer(const Tensor& buffer, const std::vector<Tensor>& tensors);

}  // namespace weft::distributed
