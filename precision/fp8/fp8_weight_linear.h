// Fp8WeightLinear: a Linear for inference whose weight is stored as float8_e4m3fn codes with a
// float32 scale per tensor or per output channel (row) — FP8 weight-only quantization, as
// llama.cpp / vLLM users know it — while the activations stay in float32 or bfloat16:
//
//   y = x · (codes · scale)ᵀ + b, accumulated in float32      x: (*, in) -> y: (*, out)
//
//   weight        float8_e4m3fn (out, in), frozen (not differentiable)
//   weight_scale  float32: () per tensor, (out) per channel; a plain member, saved under that key
//   bias          an ordinary parameter in the layer's floating dtype
//
// The arithmetic (scale = amax / 448, codes = saturating round-to-nearest-even E4M3 of
// w · (1 / scale), an all-zero row getting scale 1) is precision/fp8/fp8_weight_ops.h's.
//
// The layer is quantized as soon as it has float weights: at construction (Linear's random
// initialisation, then quantized; under a skip-init tensor frame nothing is drawn and the codes
// are zeros with scale 1, waiting for a checkpoint, in memory that holds no resident page until
// written: tensor/cpu/exact_memory.h's zero_pages), when a float checkpoint loads into it (its
// "weight" (out, in) is quantized on load), or from an existing Linear (from_linear).
// State dict: "weight" (the codes), "weight_scale", "bias"; a checkpoint of those loads back
// exactly, and its granularity (scale shape () or (out)) becomes the layer's. Wrong shapes or
// dtypes, a scale that is not finite and positive, NaN codes (0x7F / 0xFF), or a "weight_scale"
// beside a floating weight are errors naming the key.
//
// forward: x rounded to the compute dtype (the option, else x's own dtype), multiplied in float32
// by fp8_weight_matmul (a bandwidth-bound GEMV for up to kFp8GemvMaxRows rows — decoding a token —
// and blocks of dequantized rows through weft's GEMM for more — a prompt), the bias added in the
// same float32 step, the result rounded to the compute dtype and returned in x's dtype. CPU only.
// Gradients flow to x (through the dequantized weight, as Linear4bit's do) and to the bias; the
// codes get none. Module::to(dtype) converts parameters, the codes included, so convert a model's
// dtype before quantizing it: forward refuses a weight that is no longer float8_e4m3fn.
//
// For model loaders: fp8_weight_init_context(granularity, compute) pushes a tensor frame (default
// dtype `compute`) and a module frame (nn/module_init_context.h) under which every nn::Linear is
// built as an Fp8WeightLinear, as BitsandbytesPrecision::module_init_context does for its layers;
// fp8_weight_granularity_of maps the quantize mode names "fp8" (per tensor) and "fp8-channel"
// (per channel).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "nn/linear.h"
#include "nn/module_holder.h"
#include "precision/context.h"

namespace weft::precision {

enum class Fp8WeightGranularity { PerTensor, PerChannel };

// "fp8" -> PerTensor, "fp8-channel" -> PerChannel, anything else -> nullopt.
std::optional<Fp8WeightGranularity> fp8_weight_granularity_of(std::string_view mode);

class Fp8WeightLinearImpl : public nn::LinearImpl {
 public:
  Fp8WeightLinearImpl(int64_t in_features, int64_t out_features, bool bias = true,
                      Fp8WeightGranularity granularity = Fp8WeightGranularity::PerTensor,
                      std::optional<DType> compute_dtype = std::nullopt);
  // An Fp8WeightLinear holding `linear`'s weight, quantized, and a copy of its bias.
  static std::shared_ptr<Fp8WeightLinearImpl> from_linear(const nn::LinearImpl& linear,
                                                          Fp8WeightGranularity granularity,
                                                          std::optional<DType> compute_dtype = std::nullopt);

  Tensor forward(const Tensor& input) override;
  // Draws float weights as Linear does, then quantizes them.
  void reset_parameters() override;
  std::string type_name() const override { return "Fp8WeightLinear"; }
  std::string extra_repr() const override;
  void save_own_state(const std::string& prefix, nn::TensorDict& out) const override;
  void load_own_state(nn::StateLoader& loader, const std::string& prefix) override;

  // Replaces the codes and scale by the quantization of `float_weight` (out, in).
  void quantize_weight(const Tensor& float_weight);
  // codes · scale as float32 (out, in).
  Tensor dequantize_weight() const;
  const Tensor& weight_scale() const { return scale_; }
  Fp8WeightGranularity granularity() const { return granularity_; }
  std::optional<DType> compute_dtype() const { return compute_dtype_; }
  void set_compute_dtype(std::optional<DType> dtype);
  // Bytes of the quantized weight: codes plus scales.
  int64_t weight_bytes() const;

 private:
  void set_quantized(const Tensor& codes, const Tensor& scale);

  Fp8WeightGranularity granularity_;
  std::optional<DType> compute_dtype_;
  Tensor scale_;
};

WEFT_MODULE(Fp8WeightLinear);

// An Fp8WeightLinear as a plain Linear handle, for module-frame factories and model builders.
std::shared_ptr<nn::LinearImpl> make_fp8_weight_linear(int64_t in_features, int64_t out_features, bool bias,
                                                       Fp8WeightGranularity granularity,
                                                       std::optional<DType> compute_dtype = std::nullopt);

// Under the returned Context, new floating tensors default to `compute` and every nn::Linear is
// built as Fp8WeightLinear(in, out, bias, granularity, compute). `compute` must be floating.
Context fp8_weight_init_context(Fp8WeightGranularity granularity, DType compute);

}  // namespace weft::precision
