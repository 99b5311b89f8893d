// LayerNorm: normalises over the trailing dims `normalized_shape`, then applies an elementwise
// affine map (weight = 1, bias = 0 at initialisation, as PyTorch).
//
// `nn::LayerNorm ln(512)` is built by make_layer_norm(), which asks the innermost module frame
// (nn/module_init_context.h) whether LayerNorm is replaced; replacements subclass LayerNormImpl.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "nn/module.h"
#include "nn/module_holder.h"

namespace weft::nn {

class LayerNormImpl : public Module {
 public:
  explicit LayerNormImpl(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                         bool bias = true);

  Tensor forward(const Tensor& input) override;
  virtual void reset_parameters();
  std::string extra_repr() const override;

  Shape normalized_shape;
  double eps;
  bool elementwise_affine;
  Tensor weight;  // undefined without elementwise_affine
  Tensor bias;    // undefined without elementwise_affine or bias
};

// Builds a LayerNorm as the innermost module frame says: the frame's replacement, or LayerNormImpl.
std::shared_ptr<LayerNormImpl> make_layer_norm(const Shape& normalized_shape, double eps = 1e-5,
                                               bool elementwise_affine = true, bool bias = true);

class LayerNorm : public ModuleHolder<LayerNormImpl> {
 public:
  LayerNorm(std::nullptr_t) : ModuleHolder(nullptr) {}  // NOLINT
  LayerNorm(std::shared_ptr<LayerNormImpl> impl) : ModuleHolder(std::move(impl)) {}  // NOLINT
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true, bool bias = true)
      : ModuleHolder(make_layer_norm(normalized_shape, eps, elementwise_affine, bias)) {}
  explicit LayerNorm(int64_t normalized_dim, double eps = 1e-5, bool elementwise_affine = true, bool bias = true)
      : LayerNorm(Shape{normalized_dim}, eps, elementwise_affine, bias) {}
};

}  // namespace weft::nn
