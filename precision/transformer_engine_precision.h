// TransformerEnginePrecision: "transformer-engine" (bfloat16 weights) and
// "transformer-engine-float16" (float16 weights), FP8 training after Lightning's plugin of the
// same name (reference §3.9, cases T40–T42) — on every CPU, where TransformerEngine itself needs
// an Ada or Hopper GPU and refuses to emulate.
//
//   weights_dtype           the dtype of every parameter (master weights included): convert_module
//                           casts the model to it; the init contexts and the forward make it the
//                           default dtype; inputs are cast to it, outputs back to the caller's.
//   recipe                  DelayedScaling (the default) or Float8CurrentScaling, or a mapping
//                           read as a DelayedScaling ({"fp8_format": "HYBRID", ...}; the caller's
//                           mapping is not touched).
//   replace_layers          nullopt (default) or true: convert_module swaps nn::Linear for
//                           Fp8Linear and nn::LayerNorm for TeLayerNorm, weights copied; false:
//                           no swapping (only the cast). Only true also swaps at construction,
//                           under module_init_context (the reference's truthiness test), so by
//                           default init_module builds plain layers and setup converts them.
//   fallback_compute_dtype  the autocast dtype for the operations FP8 does not cover (defaults to
//                           weights_dtype; float32 or float64 means no autocast).
//
// forward_context nests, outer to inner: the weights_dtype tensor frame, autocast on the plugin's
// device type with fallback_compute_dtype, and fp8_autocast(enabled, recipe) — so the FP8 scales
// move at the end of every model call (precision/fp8/fp8_autocast.h).
//
// Conversion rules: a Linear whose in_features or out_features is not a multiple of 16 stays a
// built-in Linear, with a warning naming the layer and the dimension (it then runs under the
// fallback autocast); a model that already holds Fp8Linear or TeLayerNorm layers is left as it
// is (with a warning when replace_layers is true). Differences from the reference, on purpose:
// the reference asks in_features % 8 and out_features % 16 at conversion but its FP8 GEMMs need
// both multiples of 16 (each is an inner dimension), so this plugin asks 16 of both; the
// construction-time swap checks the shapes too (the reference does not); "already converted" is
// a warning here, an info log there; non-affine LayerNorms convert instead of crashing.
//
// amax_reducer is the distributed layer's seam: it all-reduces the amaxes of each region's
// DelayedScaling update across ranks. Left empty, the maximum goes through the cross-rank
// reduction a data-parallel strategy installs (precision/cross_rank.h; a no-op in one process),
// so a plugin built before Fabric's ranks exist still agrees with them.
#pragma once

#include <optional>
#include <string>
#include <variant>

#include "precision/fp8/fp8_autocast.h"
#include "precision/fp8/fp8_recipe.h"
#include "precision/precision.h"
#include "tensor/device.h"

namespace weft::precision {

using Fp8RecipeInput = std::variant<Fp8Recipe, RecipeMapping>;

struct TransformerEngineOptions {
  DType weights_dtype = kBFloat16;
  std::optional<Fp8RecipeInput> recipe;
  std::optional<bool> replace_layers;
  std::optional<DType> fallback_compute_dtype;
  std::string device = "cpu";  // "cpu" or "cuda": the device type the fallback autocast acts on
  AmaxReducer amax_reducer;
};

class TransformerEnginePrecision : public Precision {
 public:
  explicit TransformerEnginePrecision(TransformerEngineOptions options);

  // TransformerEngineFloat16 ("transformer-engine-float16") for float16 weights,
  // TransformerEngine ("transformer-engine") otherwise.
  PrecisionMode mode() const override;
  // "transformer-engine" for both modes, as the reference's class attribute; mode() tells them apart.
  std::string precision() const override { return std::string(precision_name(PrecisionMode::TransformerEngine)); }
  DType weights_dtype() const { return weights_dtype_; }
  const Fp8Recipe& recipe() const { return recipe_; }
  std::optional<bool> replace_layers() const { return replace_layers_; }
  DType fallback_compute_dtype() const { return fallback_compute_dtype_; }

  void convert_module(nn::Module& module) override;
  Context tensor_init_context() override;
  Context module_init_context() override;
  Context forward_context() override;
  Tensor convert_input_tensor(const Tensor& tensor) override;
  Tensor convert_output_tensor(const Tensor& tensor) override;

 private:
  DType weights_dtype_;
  Fp8Recipe recipe_;
  std::optional<bool> replace_layers_;
  DType fallback_compute_dtype_;
  DeviceType device_type_;
  AmaxReducer amax_reducer_;
};

}  // namespace weft::precision
