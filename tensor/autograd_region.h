// The backward of a view that covers a region of its input (slice, select), recorded as a Node the
// engine knows (tensor/autograd.cpp): the gradient goes into that region of a zero tensor shaped
// like the input, or, when another gradient for the input is already waiting in the engine's
// buffer and nothing else holds that buffer, is added into its region in place. The pieces of a
// split (a GPT's q, k and v out of one projection) so cost one zero fill and one pass over their
// own regions instead of a zero fill, a copy and an add of the whole input each.
//
// A scatter (index_select's backward: the output's rows added into the rows they came from) is
// recorded the same way: zeros shaped like the input with the gradient added in, or the gradient
// added straight into a waiting one. A GPT's tied token embedding so adds its rows into the LM
// head's gradient of the same table (154 MB for GPT-2) instead of a zero table and a sum of two.
#pragma once

#include <functional>

#include "tensor/tensor.h"

namespace weft::autograd {

// `region(t)` applies the view that made `output` from `input` to a tensor shaped like `input`.
void record_region_view(const char* name, Tensor& output, const Tensor& input,
                        std::function<Tensor(const Tensor&)> region);

// `add(grad, input_grad)` adds the output's gradient into input_grad (shaped like `input`, of the
// gradient's dtype) where the op took the output's values from.
using ScatterFn = std::function<void(const Tensor& grad, Tensor& input_grad)>;
void record_scatter(const char* name, Tensor& output, const Tensor& input, ScatterFn add);

}  // namespace weft::autograd
