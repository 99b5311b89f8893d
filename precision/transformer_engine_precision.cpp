// TransformerEnginePrecision: recipe parsing, layer conversion and the three-level forward context.
#include "precision/transformer_engine_precision.h"

#include <memory>
#include <span>

#include "nn/module_init_context.h"
#include "precision/autocast.h"
#include "precision/cross_rank.h"
#include "precision/fp8/fp8_linear.h"
#include "precision/fp8/te_layer_norm.h"
#include "precision/replace_layers.h"
#include "precision/warnings.h"
#include "tensor/autograd.h"
#include "tensor/init_context.h"
#include "tensor/ops.h"

namespace weft::precision {
namespace {

Fp8Recipe recipe_of(const std::optional<Fp8RecipeInput>& input) {
  if (!input) return DelayedScaling{};
  if (const auto* mapping = std::get_if<RecipeMapping>(&*input)) return delayed_scaling_from_mapping(*mapping);
  const Fp8Recipe recipe = std::get<Fp8Recipe>(*input);
  validate(recipe);
  return recipe;
}

DeviceType device_type_of(const std::string& device) {
  WEFT_CHECK(device == "cpu" || device == "cuda", "[TransformerEnginePrecision] expected device 'cpu' or 'cuda', got '",
             device, "'");
  return device == "cpu" ? DeviceType::CPU : DeviceType::CUDA;
}

int64_t history_len(const Fp8Recipe& recipe) {
  const auto* delayed = std::get_if<DelayedScaling>(&recipe);
  return delayed ? delayed->amax_history_len : DelayedScaling{}.amax_history_len;
}

// The default amax reducer: whatever reduction a data-parallel strategy installed.
void max_across_ranks(std::span<float> amaxes) {
  if (amaxes.empty()) return;
  all_reduce_max_across_ranks(from_blob(amaxes.data(), {static_cast<int64_t>(amaxes.size())}, kFloat32));
}

bool is_fp8(DType d) { return d == kFloat8E4M3FN || d == kFloat8E5M2; }

bool is_te_layer(const nn::Module& m) {
  return dynamic_cast<const Fp8LinearImpl*>(&m) != nullptr || dynamic_cast<const TeLayerNormImpl*>(&m) != nullptr;
}

std::string kept_warning(const std::string& layer, const std::string& problem) {
  return "[TransformerEnginePrecision] " + layer + " is kept in high precision: FP8 execution needs in_features "
         "and out_features divisible by 16, and " + problem;
}

// The replacement of a built-in Linear: an Fp8Linear with its parameters (values and
// requires_grad), or null, with a warning, when the shape rule forbids it.
std::shared_ptr<nn::Module> convert_linear(const std::shared_ptr<nn::LinearImpl>& old, const std::string& name,
                                           int64_t amax_history_len) {
  const std::string problem = fp8_linear_shape_problem(old->in_features, old->out_features);
  if (!problem.empty()) {
    warn(kept_warning("layer '" + name + "' (Linear(" + std::to_string(old->in_features) + ", " +
                          std::to_string(old->out_features) + "))",
                      problem));
    return nullptr;
  }
  auto fp8 = std::make_shared<Fp8LinearImpl>(old->in_features, old->out_features, old->bias.defined(),
                                             amax_history_len);
  NoGradGuard no_grad;
  fp8->weight.set_data(old->weight.detach().clone());
  fp8->weight.requires_grad_(old->weight.requires_grad());
  if (old->bias.defined()) {
    fp8->bias.set_data(old->bias.detach().clone());
    fp8->bias.requires_grad_(old->bias.requires_grad());
  }
  return fp8;
}

std::shared_ptr<nn::Module> convert_layer_norm(const std::shared_ptr<nn::LayerNormImpl>& old) {
  auto te = std::make_shared<TeLayerNormImpl>(old->normalized_shape, old->eps, old->elementwise_affine,
                                              old->bias.defined());
  NoGradGuard no_grad;
  if (old->weight.defined()) {
    te->weight.set_data(old->weight.detach().clone());
    te->weight.requires_grad_(old->weight.requires_grad());
  }
  if (old->bias.defined()) {
    te->bias.set_data(old->bias.detach().clone());
    te->bias.requires_grad_(old->bias.requires_grad());
  }
  return te;
}

}  // namespace

TransformerEnginePrecision::TransformerEnginePrecision(TransformerEngineOptions options)
    : weights_dtype_(options.weights_dtype),
      recipe_(recipe_of(options.recipe)),
      replace_layers_(options.replace_layers),
      fallback_compute_dtype_(options.fallback_compute_dtype.value_or(options.weights_dtype)),
      device_type_(device_type_of(options.device)),
      amax_reducer_(std::move(options.amax_reducer)) {
  WEFT_CHECK(is_floating(weights_dtype_) && !is_fp8(weights_dtype_),
             "[TransformerEnginePrecision] expected weights_dtype float32, float64, float16 or bfloat16, got ",
             weights_dtype_);
  WEFT_CHECK(is_floating(fallback_compute_dtype_) && !is_fp8(fallback_compute_dtype_),
             "[TransformerEnginePrecision] expected fallback_compute_dtype float32, float64, float16 or bfloat16, got ",
             fallback_compute_dtype_);
}

PrecisionMode TransformerEnginePrecision::mode() const {
  return weights_dtype_ == kFloat16 ? PrecisionMode::TransformerEngineFloat16 : PrecisionMode::TransformerEngine;
}

void TransformerEnginePrecision::convert_module(nn::Module& module) {
  bool has_te_layers = false;
  for (const auto& m : module.modules()) has_te_layers = has_te_layers || is_te_layer(*m);
  if (has_te_layers) {
    if (replace_layers_ == true)
      warn("[TransformerEnginePrecision] `replace_layers=True` is set but the model already contains "
           "TransformerEngine layers (Fp8Linear, TeLayerNorm). Skipping");
  } else if (replace_layers_ != false) {
    LayerConverters converters;
    converters.linear = [len = history_len(recipe_)](const std::shared_ptr<nn::LinearImpl>& old,
                                                     const std::string& name) { return convert_linear(old, name, len); };
    converters.layer_norm = [](const std::shared_ptr<nn::LayerNormImpl>& old, const std::string&) {
      return convert_layer_norm(old);
    };
    precision::replace_layers(module, converters);
  }
  module.to(weights_dtype_);
}

Context TransformerEnginePrecision::tensor_init_context() {
  Context context;
  context.push<TensorFrameGuard>(TensorFrame{weights_dtype_, {}, {}});
  return context;
}

Context TransformerEnginePrecision::module_init_context() {
  Context context = tensor_init_context();
  if (!replace_layers_.value_or(false)) return context;
  nn::ModuleFrame frame;
  frame.linear = [len = history_len(recipe_)](int64_t in, int64_t out, bool bias) -> std::shared_ptr<nn::LinearImpl> {
    const std::string problem = fp8_linear_shape_problem(in, out);
    if (problem.empty()) return std::make_shared<Fp8LinearImpl>(in, out, bias, len);
    warn(kept_warning("Linear(" + std::to_string(in) + ", " + std::to_string(out) + ")", problem));
    return std::make_shared<nn::LinearImpl>(in, out, bias);
  };
  frame.layer_norm = [](const Shape& shape, double eps, bool affine, bool bias) -> std::shared_ptr<nn::LayerNormImpl> {
    return std::make_shared<TeLayerNormImpl>(shape, eps, affine, bias);
  };
  context.push<nn::ModuleFrameGuard>(frame);
  return context;
}

Context TransformerEnginePrecision::forward_context() {
  const bool autocast = fallback_compute_dtype_ == kBFloat16 || fallback_compute_dtype_ == kFloat16;
  Context context = tensor_init_context();
  context.push<AutocastGuard>(device_type_, fallback_compute_dtype_, autocast);
  context.push<Fp8AutocastGuard>(true, recipe_, false, amax_reducer_ ? amax_reducer_ : AmaxReducer(max_across_ranks));
  return context;
}

Tensor TransformerEnginePrecision::convert_input_tensor(const Tensor& tensor) {
  return convert_fp_tensor(tensor, weights_dtype_);
}

Tensor TransformerEnginePrecision::convert_output_tensor(const Tensor& tensor) {
  return convert_fp_tensor(tensor, default_dtype());
}

}  // namespace weft::precision
