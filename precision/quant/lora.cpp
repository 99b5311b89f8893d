// LoRA adapters: the wrapper layer, merging, and wrapping a model's Linears.
#include "precision/quant/lora.h"

#include <set>

#include "tensor/autograd.h"
#include "tensor/init_context.h"
#include "tensor/ops.h"

namespace weft::precision::quant {
namespace {

// A plain LinearImpl (never a module frame's replacement) without bias, in `dtype`, initialised
// even under a skip-init frame (nothing will load into a fresh adapter).
nn::Linear adapter(int64_t in, int64_t out, DType dtype) {
  const TensorFrameGuard frame(TensorFrame{dtype, {}, false});
  return nn::Linear(std::make_shared<nn::LinearImpl>(in, out, false));
}

}  // namespace

LoraLinearImpl::LoraLinearImpl(std::shared_ptr<nn::LinearImpl> base, LoraOptions options)
    : base_layer(std::move(base)), options_(options) {
  WEFT_CHECK(base_layer != nullptr, "[LoraLinear] the base layer is null");
  WEFT_CHECK(options_.rank >= 1, "[LoraLinear] rank must be at least 1, got ", options_.rank);
  WEFT_CHECK(options_.dropout >= 0 && options_.dropout < 1, "[LoraLinear] dropout must be in [0, 1), got ",
             options_.dropout);
  WEFT_CHECK(is_floating(options_.dtype), "[LoraLinear] the adapter dtype must be floating, got ", options_.dtype);
  in_features = base_layer->in_features;
  out_features = base_layer->out_features;
  register_module("base_layer", std::static_pointer_cast<nn::Module>(base_layer));
  lora_A = register_module("lora_A", adapter(in_features, options_.rank, options_.dtype));
  lora_B = register_module("lora_B", adapter(options_.rank, out_features, options_.dtype));
  NoGradGuard no_grad;
  lora_B->weight.zero_();
}

std::string LoraLinearImpl::extra_repr() const {
  return weft::detail::cat("rank=", options_.rank, ", alpha=", options_.alpha, ", dropout=", options_.dropout,
                           merged_ ? ", merged" : "");
}

Tensor LoraLinearImpl::forward(const Tensor& input) {
  const Tensor y = base_layer->forward(input);
  if (merged_) return y;
  const Tensor x = dropout(input.to(options_.dtype), options_.dropout, is_training());
  const Tensor update = mul(lora_B(lora_A(x)), scaling());
  return add(y, update.to(y.dtype()));
}

Tensor LoraLinearImpl::delta_weight() const {
  const Tensor& w = base_layer->weight;
  WEFT_CHECK(w.is_floating_point() && w.shape() == Shape({out_features, in_features}), "[LoraLinear] merging needs ",
             "a floating base weight of shape (", out_features, ", ", in_features, "); a ", base_layer->type_name(),
             " base would have to be quantized again");
  NoGradGuard no_grad;
  return mul(matmul(lora_B->weight.to(kFloat32), lora_A->weight.to(kFloat32)), scaling());
}

void LoraLinearImpl::merge() {
  WEFT_CHECK(!merged_, "[LoraLinear] the adapter is already merged");
  const Tensor delta = delta_weight();
  NoGradGuard no_grad;
  Tensor w = base_layer->weight;
  w.copy_(add(w.to(kFloat32), delta));
  merged_ = true;
}

void LoraLinearImpl::unmerge() {
  WEFT_CHECK(merged_, "[LoraLinear] the adapter is not merged");
  const Tensor delta = delta_weight();
  NoGradGuard no_grad;
  Tensor w = base_layer->weight;
  w.copy_(sub(w.to(kFloat32), delta));
  merged_ = false;
}

std::vector<std::string> apply_lora(nn::Module& root, LoraOptions options,
                                    const std::function<bool(const std::string&)>& target) {
  std::vector<std::string> wrapped;
  std::function<void(nn::Module&, const std::string&)> visit = [&](nn::Module& module, const std::string& prefix) {
    if (dynamic_cast<LoraLinearImpl*>(&module) != nullptr) return;
    for (const auto& [name, child] : module.named_children()) {
      const std::string full = prefix.empty() ? name : prefix + "." + name;
      auto linear = std::dynamic_pointer_cast<nn::LinearImpl>(child);
      if (linear != nullptr && (!target || target(full))) {
        module.replace_module(name, std::make_shared<LoraLinearImpl>(linear, options));
        wrapped.push_back(full);
      } else {
        visit(*child, full);
      }
    }
  };
  visit(root, "");
  std::set<const weft::detail::TensorImpl*> adapters;
  for (const auto& m : root.modules())
    if (auto* lora = dynamic_cast<LoraLinearImpl*>(m.get())) {
      adapters.insert(lora->lora_A->weight.impl());
      adapters.insert(lora->lora_B->weight.impl());
    }
  for (Tensor p : root.parameters())
    if (!adapters.contains(p.impl()) && p.requires_grad()) p.requires_grad_(false);
  return wrapped;
}

}  // namespace weft::precision::quant
