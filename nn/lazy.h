// Helpers for models that contain lazy modules (nn/lazy_linear.h).
//
// A lazy module's parameters are uninitialized tensors (detail::make_uninitialized in
// tensor/tensor.h): they know the dtype and device they will get but not their shape, and asking
// for shape or data throws. The usual flow, as in PyTorch: build, convert (to(dtype), to(device)),
// dry-run once with a representative input, then hand parameters() to an optimizer.
#pragma once

#include "nn/module.h"
#include "nn/module_holder.h"

namespace weft::nn {

// True when any parameter or buffer of the tree is still uninitialized.
bool has_uninitialized_params(const Module& module);

// One forward of `example_input` without autograd, which materialises every lazy module on the
// path; fails, naming them, if uninitialized parameters remain.
void materialize(Module& module, const Tensor& example_input);

template <class Impl>
bool has_uninitialized_params(const ModuleHolder<Impl>& module) {
  return has_uninitialized_params(*module);
}
template <class Impl>
void materialize(const ModuleHolder<Impl>& module, const Tensor& example_input) {
  materialize(*module, example_input);
}

}  // namespace weft::nn
