// The CPU side of the packed-weight cache (tensor/packed_weights.h): linear's product against a
// packed copy of its weight.
#pragma once

#include "tensor/tensor.h"

namespace weft::detail {

// out (+)= x · weightᵀ (x: (R, in), weight: (out, in), out: (R, out) contiguous, all bfloat16)
// through weight's packed copy, made now when there is none and the limit allows. Returns false,
// having done nothing, where the cache does not apply: off, one row, another dtype or GEMM
// library, a level without K-pair kernels, or no room under the limit.
bool linear_with_packed_weight(const Tensor& x, const Tensor& weight, const Tensor& out, bool accumulate);

}  // namespace weft::detail
