// BitsandbytesPrecision: the quantized-Linear plugin, after Lightning's BitsandbytesPrecision
// (fabric-precision.md §3.8), on weft's own layers (precision/quant/) — so it runs on the CPU,
// where the reference needs a CUDA GPU and raises "Bitsandbytes is only supported on CUDA GPUs."
//
// Modes and the layer every built-in Linear becomes:
//   nf4 / nf4-dq     Linear4bit, NF4, without / with double quantization
//   fp4 / fp4-dq     Linear4bit, FP4, without / with double quantization
//   int8-training    Linear8bitLt with trainable floating weights quantized in every forward
//   int8             Linear8bitLt with frozen int8 weights
// dtype: the dtype of new tensors and of the forward; default float16 for the int8 modes (which
// accept nothing else, as the reference) and bfloat16 for the 4-bit ones (the reference picks
// bfloat16 where the device supports it, which weft's CPU does). ignore_modules: dotted module
// names whose layers stay as they are (matched by whole name components, precision/replace_layers.h).
//
// Hooks: convert_module replaces the built-in Linears (quantizing their weights at once) unless
// the model already holds quantized layers, and sets every Linear4bit's compute dtype to the
// plugin's; a model with no Linear at all is an error. module_init_context builds Linears as the
// quantized layers directly (and refuses ignore_modules, which cannot be matched at construction);
// tensor_init_context and forward_context only set the default dtype; inputs are cast to the dtype
// and outputs back to the caller's default dtype, floating tensors only.
//
// The plugin has no row in the PrecisionMode table: like the reference, which defines no precision
// string for it, it inherits mode() 32-true. Deliberate differences besides the CPU: converted 4-bit
// layers keep a trainable bias (the reference's conversion
// freezes it, its init_module path does not); the int8 layers' outlier threshold is
// Linear8bitLt's default, 6.0 (the reference's layers use bitsandbytes' 0.0).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/linear.h"
#include "precision/precision.h"

namespace weft::precision {

class BitsandbytesPrecision : public Precision {
 public:
  explicit BitsandbytesPrecision(std::string mode, std::optional<DType> dtype = std::nullopt,
                                 std::vector<std::string> ignore_modules = {});

  const std::string& bnb_mode() const { return mode_; }  // "nf4", "int8", ...; mode() is the PrecisionMode
  DType dtype() const { return dtype_; }
  const std::vector<std::string>& ignore_modules() const { return ignore_modules_; }

  void convert_module(nn::Module& module) override;
  Context tensor_init_context() override;
  Context module_init_context() override;
  Context forward_context() override;
  Tensor convert_input_tensor(const Tensor& tensor) override;
  Tensor convert_output_tensor(const Tensor& tensor) override;

  // The quantized layer this plugin builds for Linear(in, out, bias), and the one it converts
  // `linear` into (its weights quantized, its bias copied).
  std::shared_ptr<nn::LinearImpl> make_layer(int64_t in_features, int64_t out_features, bool bias) const;
  std::shared_ptr<nn::LinearImpl> convert_layer(const nn::LinearImpl& linear) const;

 private:
  std::string mode_;
  DType dtype_;
  std::vector<std::string> ignore_modules_;
};

}  // namespace weft::precision
