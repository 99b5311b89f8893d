// TeLayerNorm: the LayerNorm the transformer-engine precision puts in place of nn::LayerNorm
// (TransformerEngine's te.LayerNorm). It normalises in float32 like the built-in one, but returns
// the activation dtype: under autocast the autocast dtype (bfloat16), otherwise the input's dtype,
// where the built-in LayerNorm under autocast returns float32 (autocast runs layer norm in
// float32). So an FP8 model's activations stay in the compute dtype from layer to layer.
//
// Every built-in variant converts: with or without an elementwise affine map, with or without a
// bias, any normalized_shape (the reference crashes on the non-affine one, Lightning #21755).
// Layers of this type are never converted again.
#pragma once

#include "nn/layer_norm.h"
#include "nn/module_holder.h"

namespace weft::precision {

class TeLayerNormImpl : public nn::LayerNormImpl {
 public:
  using LayerNormImpl::LayerNormImpl;

  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "TeLayerNorm"; }
};

WEFT_MODULE(TeLayerNorm);

}  // namespace weft::precision
