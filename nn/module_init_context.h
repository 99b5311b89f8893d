// The module-construction seam: a thread-local stack of module frames saying which layer kinds
// are built by which implementation.
//
// Constructing an nn::Linear or nn::LayerNorm goes through one factory function each
// (make_linear, make_layer_norm) that asks the innermost module frame. A frame that names a
// factory for a kind redirects every construction of that kind (a precision plugin's
// module_init_context() says "build Linear as an FP8 Linear"); a frame that leaves a kind unset
// inherits it from the frame below; at the bottom every kind is built-in. A replacement is a
// subclass of the built-in Impl, so the ordinary handle (nn::Linear, a shared_ptr<LinearImpl>)
// holds it and code that uses the layer does not change.
//
// Only module frames redirect construction: a tensor frame (tensor/init_context.h) changes the
// dtype, device and skip-init of the tensors a layer creates, never which layer is built. This is
// the split Lightning made between init_tensor() and init_module().
//
// Frames are pushed by RAII guards: strictly nested, restored on exceptions, per thread. While a
// factory runs, its own kind is built-in again, so a replacement may wrap an ordinary layer
// without recursing into itself.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "tensor/tensor.h"

namespace weft::nn {

class LinearImpl;
class LayerNormImpl;

using LinearFactory =
    std::function<std::shared_ptr<LinearImpl>(int64_t in_features, int64_t out_features, bool bias)>;
using LayerNormFactory = std::function<std::shared_ptr<LayerNormImpl>(
    const Shape& normalized_shape, double eps, bool elementwise_affine, bool bias)>;

// One frame as pushed. Per kind: nullopt inherits from the frame below; an empty function means
// the built-in layer; a function is the replacement.
struct ModuleFrame {
  std::optional<LinearFactory> linear;
  std::optional<LayerNormFactory> layer_norm;
};

// The innermost frame with everything inherited resolved; an empty function means built-in.
// Lazy modules keep a copy to build their layer later as it would have been built now.
struct ResolvedModuleFrame {
  LinearFactory linear;
  LayerNormFactory layer_norm;
};

const ResolvedModuleFrame& current_module_frame();

class ModuleFrameGuard {
 public:
  explicit ModuleFrameGuard(const ModuleFrame& frame);
  // Makes `frame` the innermost frame exactly, whatever is below (a lazy module re-entering the
  // frame it captured).
  explicit ModuleFrameGuard(const ResolvedModuleFrame& frame);
  ~ModuleFrameGuard();
  ModuleFrameGuard(const ModuleFrameGuard&) = delete;
  ModuleFrameGuard& operator=(const ModuleFrameGuard&) = delete;

 private:
  ResolvedModuleFrame saved_;
};

}  // namespace weft::nn
