// Linear8bitLt: the LLM.int8() linear layer, as bitsandbytes.nn.Linear8bitLt behaves
// (quantization-fp8.md §B.1.4–§B.1.5), on the CPU.
//
// Two modes, as bitsandbytes' has_fp16_weights:
//   int8 inference (has_fp16_weights = false): the weight is frozen int8 codes (out, in), one
//     float32 scale per row (SCB) beside it. A float checkpoint is quantized on load.
//   int8 training (has_fp16_weights = true): the weight stays a trainable floating parameter and
//     is quantized afresh in every forward.
// Either way forward(x: (*, in)) -> (*, out) in x's dtype is the LLM.int8() product: x rounded to
// float16 and quantized row by row, columns holding a value with |x| >= threshold multiplied in
// x's dtype instead (threshold 0 disables this), the rest by the exact int8 GEMM, dequantized with
// the bias (precision/quant/llm_int8.h) — bit-identical to bitsandbytes' inference path.
// Gradients: to x through the dequantized weight (codes · SCB / 127), as bitsandbytes; to the
// float weight in training mode as the plain product gradᵀ · x (bitsandbytes' CPU rule,
// MatMul8bitFp); to the bias.
//
// State dict (inference), bitsandbytes' keys: weight (int8), bias, SCB (float32 (out,)) and
// weight_format (uint8 scalar 0 = row-major). Training mode saves weight and bias only.
//
// Deliberate differences: the threshold defaults to 6.0 (LLM.int8()'s and Hugging Face's value;
// the bare bitsandbytes class defaults to 0.0); quantization happens on the CPU at once; the bias
// is cast for the product, not converted in place to the input's dtype; training mode also runs
// the int8 product forward (bitsandbytes' CPU backend multiplies dequantized weights instead).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "nn/linear.h"
#include "nn/module_holder.h"

namespace weft::precision::quant {

struct Linear8bitLtOptions {
  bool has_fp16_weights = false;  // true: int8 training with trainable floating weights
  double threshold = 6.0;         // outlier threshold on the activations; 0 disables it
};

class Linear8bitLtImpl : public nn::LinearImpl {
 public:
  Linear8bitLtImpl(int64_t in_features, int64_t out_features, bool bias = true, Linear8bitLtOptions options = {});
  // From a float Linear: its weight (quantized in inference mode) and a copy of its bias.
  static std::shared_ptr<Linear8bitLtImpl> from_linear(const nn::LinearImpl& linear, Linear8bitLtOptions options);

  Tensor forward(const Tensor& input) override;
  void reset_parameters() override;
  std::string type_name() const override { return "Linear8bitLt"; }
  std::string extra_repr() const override;
  void save_own_state(const std::string& prefix, nn::TensorDict& out) const override;
  void load_own_state(nn::StateLoader& loader, const std::string& prefix) override;

  const Linear8bitLtOptions& options() const { return options_; }
  // Inference mode: quantizes `float_weight` (out, in) into the int8 weight and SCB.
  void quantize_weight(const Tensor& float_weight);
  // Inference mode: the per-row scales (out,).
  const Tensor& scb() const { return scb_; }
  int64_t weight_bytes() const;

 private:
  void set_quantized(const Tensor& codes, const Tensor& scb);
  // Training mode: the quantization of the current float weight, redone only when its values
  // changed since the last forward (compared byte for byte with a copy: optimizers write
  // parameters in place without telling anyone).
  void requantize_if_changed();

  Linear8bitLtOptions options_;
  Tensor scb_;               // inference mode; training mode: of quantized_from_
  Tensor codes_;             // training mode: of quantized_from_
  Tensor quantized_from_;    // training mode: the float weight codes_ and scb_ were made from
};

WEFT_MODULE(Linear8bitLt);

}  // namespace weft::precision::quant
