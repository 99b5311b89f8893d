// The backward of a view that covers a region of its input (slice, select), recorded as a Node the
// engine knows (tensor/autograd.cpp): the gradient goes into that region of a zero tensor shaped
// like the input, or, when another gradient for the input is already waiting in the engine's
// buffer and nothing else holds that buffer, is added into its region in place. The pieces of a
// split (a GPT's q, k and v out of one projection) so cost one zero fill and one pass over their
// own regions instead of a zero fill, a copy and an add of the whole input each.
#pragma once

#include <functional>

#include "tensor/tensor.h"

namespace weft::autograd {

// `region(t)` applies the view that made `output` from `input` to a tensor shaped like `input`.
void record_region_view(const char* name, Tensor& output, const Tensor& input,
                        std::function<Tensor(const Tensor&)> region);

}  // namespace weft::autograd
