// BitsandbytesPrecision: mode table, layer construction and conversion, contexts.
#include "precision/bitsandbytes_precision.h"

#include <array>
#include <string_view>

#include "nn/module_init_context.h"
#include "precision/quant/linear_4bit.h"
#include "precision/quant/linear_8bit.h"
#include "precision/replace_layers.h"
#include "tensor/init_context.h"

namespace weft::precision {
namespace {

using quant::Linear4bitImpl;
using quant::Linear4bitOptions;
using quant::Linear8bitLtImpl;
using quant::Linear8bitLtOptions;
using quant::QuantKind;

constexpr std::array<std::string_view, 6> kModes = {"nf4", "nf4-dq", "fp4", "fp4-dq", "int8", "int8-training"};

bool is_int8(const std::string& mode) { return mode.starts_with("int8"); }

std::string torch_name(DType dtype) { return "torch." + std::string(dtype_name(dtype)); }

const std::string& checked_mode(const std::string& mode) {
  std::string allowed;
  for (std::string_view m : kModes) {
    if (m == mode) return mode;
    allowed += (allowed.empty() ? "'" : ", '") + std::string(m) + "'";
  }
  WEFT_FAIL("[BitsandbytesPrecision] unsupported mode '", mode, "'; expected one of (", allowed, ")");
}

DType checked_dtype(const std::string& mode, std::optional<DType> dtype) {
  const DType chosen = dtype.value_or(is_int8(mode) ? kFloat16 : kBFloat16);
  WEFT_CHECK(!is_int8(mode) || chosen == kFloat16, "[BitsandbytesPrecision] '", mode,
             "' only works with `dtype=torch.float16`, but you chose `", torch_name(chosen), "`");
  WEFT_CHECK(is_floating(chosen), "[BitsandbytesPrecision] dtype must be floating, got ", chosen);
  return chosen;
}

Linear4bitOptions four_bit_options(const std::string& mode, DType compute) {
  Linear4bitOptions o;
  o.quant_type = mode.starts_with("nf4") ? QuantKind::NF4 : QuantKind::FP4;
  o.compress_statistics = mode.ends_with("-dq");
  o.compute_dtype = compute;
  return o;
}

Linear8bitLtOptions eight_bit_options(const std::string& mode) {
  Linear8bitLtOptions o;
  o.has_fp16_weights = mode == "int8-training";
  return o;
}

bool is_quantized_layer(const nn::Module& m) {
  return dynamic_cast<const Linear4bitImpl*>(&m) != nullptr || dynamic_cast<const Linear8bitLtImpl*>(&m) != nullptr;
}

}  // namespace

BitsandbytesPrecision::BitsandbytesPrecision(std::string mode, std::optional<DType> dtype,
                                             std::vector<std::string> ignore_modules)
    : mode_(checked_mode(mode)), dtype_(checked_dtype(mode_, dtype)), ignore_modules_(std::move(ignore_modules)) {}

std::shared_ptr<nn::LinearImpl> BitsandbytesPrecision::make_layer(int64_t in, int64_t out, bool bias) const {
  if (is_int8(mode_)) return std::make_shared<Linear8bitLtImpl>(in, out, bias, eight_bit_options(mode_));
  return std::make_shared<Linear4bitImpl>(in, out, bias, four_bit_options(mode_, dtype_));
}

std::shared_ptr<nn::LinearImpl> BitsandbytesPrecision::convert_layer(const nn::LinearImpl& linear) const {
  if (is_int8(mode_)) return Linear8bitLtImpl::from_linear(linear, eight_bit_options(mode_));
  return Linear4bitImpl::from_linear(linear, four_bit_options(mode_, dtype_));
}

void BitsandbytesPrecision::convert_module(nn::Module& module) {
  bool has_linear = false, has_quantized = false;
  for (const auto& m : module.modules()) {
    has_linear = has_linear || dynamic_cast<const nn::LinearImpl*>(m.get()) != nullptr;
    has_quantized = has_quantized || is_quantized_layer(*m);
  }
  WEFT_CHECK(has_linear, "[BitsandbytesPrecision] You are using the bitsandbytes precision plugin, but your model has "
             "no Linear layers. This plugin won't work for your model.");
  if (!has_quantized) {
    LayerConverters converters;
    converters.linear = [this](const std::shared_ptr<nn::LinearImpl>& old, const std::string&) {
      return std::static_pointer_cast<nn::Module>(convert_layer(*old));
    };
    replace_layers(module, converters, ignore_modules_);
  }
  for (const auto& m : module.modules())
    if (auto* four = dynamic_cast<Linear4bitImpl*>(m.get())) four->set_compute_dtype(dtype_);
}

Context BitsandbytesPrecision::tensor_init_context() {
  Context context;
  context.push<TensorFrameGuard>(TensorFrame{dtype_, {}, {}});
  return context;
}

Context BitsandbytesPrecision::module_init_context() {
  WEFT_CHECK(ignore_modules_.empty(), "[BitsandbytesPrecision] Instantiating your model under the `init_module` context "
             "manager is not supported when used with `BitsandbytesPrecision(..., ignore_modules=...)` as this may "
             "initialize the layers on-device, defeating the purpose of quantization. You can remove `ignore_modules` "
             "or remove the `init_module` context manager.");
  Context context = tensor_init_context();
  nn::ModuleFrame frame;
  frame.linear = [this](int64_t in, int64_t out, bool bias) { return make_layer(in, out, bias); };
  context.push<nn::ModuleFrameGuard>(frame);
  return context;
}

Context BitsandbytesPrecision::forward_context() { return tensor_init_context(); }

Tensor BitsandbytesPrecision::convert_input_tensor(const Tensor& tensor) { return convert_fp_tensor(tensor, dtype_); }

Tensor BitsandbytesPrecision::convert_output_tensor(const Tensor& tensor) {
  return convert_fp_tensor(tensor, default_dtype());
}

}  // namespace weft::precision
