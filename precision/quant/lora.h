// LoRA: a trainable low-rank adapter beside a frozen linear layer (Hu et al. 2021), over any
// Linear — a float one, or a quantized Linear4bit / Linear8bitLt, which makes QLoRA (4-bit base,
// trained adapters) a C++ program.
//
//   y = base(x) + (alpha / rank) · dropout(x) · Aᵀ · Bᵀ      A: (rank, in), B: (out, rank)
//
// A starts as a Linear's weight would (kaiming uniform), B at zero, so a fresh adapter changes
// nothing. The adapters are float32 unless told otherwise (they are trained); the adapter's
// output is added in the base output's dtype. State-dict keys follow PEFT's layout:
// "base_layer.*" (the wrapped layer's own keys, quantization statistics included),
// "lora_A.weight", "lora_B.weight".
//
// merge() folds the adapter into a float base's weight (W += (alpha / rank) · B·A) so inference
// costs nothing extra, and unmerge() takes it out again; a quantized base cannot absorb it without
// being quantized again, so merge refuses one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/linear.h"
#include "nn/module.h"
#include "nn/module_holder.h"

namespace weft::precision::quant {

struct LoraOptions {
  int64_t rank = 8;
  double alpha = 16.0;
  double dropout = 0.0;
  DType dtype = kFloat32;  // of the adapter weights
};

class LoraLinearImpl : public nn::Module {
 public:
  LoraLinearImpl(std::shared_ptr<nn::LinearImpl> base, LoraOptions options = {});

  // x: (*, in) -> (*, out)
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "LoraLinear"; }
  std::string extra_repr() const override;

  void merge();
  void unmerge();
  bool merged() const { return merged_; }
  double scaling() const { return options_.alpha / static_cast<double>(options_.rank); }
  const LoraOptions& options() const { return options_; }

  std::shared_ptr<nn::LinearImpl> base_layer;
  nn::Linear lora_A{nullptr};  // (rank, in), no bias
  nn::Linear lora_B{nullptr};  // (out, rank), no bias
  int64_t in_features, out_features;

 private:
  // scaling · B · A, in the base weight's dtype.
  Tensor delta_weight() const;

  LoraOptions options_;
  bool merged_ = false;
};

WEFT_MODULE(LoraLinear);

// Wraps every Linear below `root` (plain or quantized, not the root itself, not one already
// wrapped) whose dotted name `target` accepts (all, when unset) in a LoraLinear, and freezes every
// parameter of the tree except the adapters. Returns the dotted names wrapped, in pre-order. Build
// the optimizer afterwards, from the parameters that require grad.
std::vector<std::string> apply_lora(nn::Module& root, LoraOptions options = {},
                                    const std::function<bool(const std::string&)>& target = {});

}  // namespace weft::precision::quant
