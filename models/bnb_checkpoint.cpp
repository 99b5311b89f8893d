// bitsandbytes folders: the checks of every stored tensor against the quantization_config, and
// the swap of the stored-quantized projections for weft's quantized layers.
#include "models/bnb_checkpoint.h"

#include <set>
#include <string_view>

#include "precision/quant/linear_4bit.h"
#include "precision/quant/linear_8bit.h"
#include "precision/quant/quant_state.h"
#include "precision/replace_layers.h"
#include "tensor/error.h"
#include "tensor/init_context.h"

namespace weft::models {

namespace {

using precision::quant::QuantState;

// "<module>.weight" + this + "nf4" | "fp4": the JSON blob of a 4-bit layer's QuantState.
constexpr std::string_view kStateTag = ".weight.quant_state.bitsandbytes__";

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_four_bit(const HfQuantization& q) { return q.mode != "int8"; }
std::string quant_type_of(const HfQuantization& q) { return q.mode.substr(0, 3); }  // "nf4" / "fp4"
bool double_quant_of(const HfQuantization& q) { return ends_with(q.mode, "-dq"); }

// A module name that llm_int8_skip_modules names as transformers matches plain names: the whole
// name, a leading run of its dotted components, or its trailing components ("down_proj" names
// "model.layers.0.mlp.down_proj").
bool skip_names(const std::string& skip, const std::string& module) {
  return precision::is_under_module(module, skip) || module == skip || ends_with(module, "." + skip);
}

// The checks of one 4-bit layer's tensors; throws a message without the key (the caller adds it).
void check_4bit_layer(const nn::TensorDict& file, const std::string& module, const std::string& stored_type,
                      const HfQuantization& q, const Tensor& blob) {
  WEFT_CHECK(stored_type == "nf4" || stored_type == "fp4", "names quant type '", stored_type,
             "', expected nf4 or fp4");
  WEFT_CHECK(stored_type == quant_type_of(q), "holds ", stored_type,
             " statistics, but quantization_config.bnb_4bit_quant_type is '", quant_type_of(q), "'");
  WEFT_CHECK(blob.dtype() == kUInt8 && blob.dim() == 1, "expected a 1-D uint8 tensor of JSON bytes, got ", blob.shape(),
             " ", blob.dtype());
  const Tensor bytes = blob.contiguous();
  QuantState state;
  precision::quant::parse_quant_state_json(
      std::string(static_cast<const char*>(bytes.data_ptr()), static_cast<size_t>(bytes.numel())), state);
  const std::string type(precision::quant::quant_format(state.type).name);
  WEFT_CHECK(type == stored_type, "holds quant_type '", type, "' under the key of ", stored_type);
  precision::quant::check_block_size(precision::quant::quant_format(state.type), state.blocksize, "quant_state");
  WEFT_CHECK(state.nested == double_quant_of(q), state.nested ? "holds" : "lacks",
             " double-quantized statistics (nested_*), but quantization_config.bnb_4bit_use_double_quant is ",
             double_quant_of(q) ? "true" : "false");
  WEFT_CHECK(!state.nested || state.nested_blocksize == precision::quant::kNestedBlockSize4bit,
             "expected nested_blocksize ", precision::quant::kNestedBlockSize4bit, ", got ", state.nested_blocksize);
  WEFT_CHECK(state.shape.size() == 2, "expected the shape of a Linear weight [out, in], got ", state.shape);
  const std::string weight_key = module + ".weight";
  const Tensor* packed = file.find(weight_key);
  WEFT_CHECK(packed != nullptr, "comes without its packed codes '", weight_key, "'");
  const Shape expected{(state.shape[0] * state.shape[1] + 1) / 2, 1};
  WEFT_CHECK(packed->dtype() == kUInt8 && packed->shape() == expected, "describes a ", state.shape[0], "x",
             state.shape[1], " weight, so '", weight_key, "' must be uint8 of shape ", expected,
             " (two 4-bit codes a byte), got ", packed->shape(), " ", packed->dtype());
}

void check_8bit_layer(const nn::TensorDict& file, const std::string& module) {
  const std::string weight_key = module + ".weight";
  const Tensor* weight = file.find(weight_key);
  WEFT_CHECK(weight != nullptr, "comes without its int8 weight '", weight_key, "'");
  WEFT_CHECK(weight->dtype() == kInt8 && weight->dim() == 2, "expects '", weight_key,
             "' to be int8 codes [out, in], got ", weight->shape(), " ", weight->dtype());
  const Tensor& scb = *file.find(module + ".SCB");
  WEFT_CHECK(scb.dtype() == kFloat32 && scb.shape() == Shape({weight->size(0)}), "expected ", weight->size(0),
             " float32 row scales (", weight->size(0), ",) for '", weight_key, "', got ", scb.shape(), " ", scb.dtype());
}

}  // namespace

void check_bnb_weights(const nn::TensorDict& file, const HfQuantization& q, const std::string& config_file) {
  std::vector<std::string> problems;
  std::set<std::string> quantized;  // module names
  const std::string bits = is_four_bit(q) ? "4 bits (bnb_4bit_quant_type '" + quant_type_of(q) + "')" : "8 bits";
  for (const auto& [key, t] : file) {
    const size_t at = key.find(kStateTag);
    std::string module;
    try {
      if (at != std::string::npos) {
        module = key.substr(0, at);
        WEFT_CHECK(is_four_bit(q), "holds 4-bit statistics, but quantization_config loads in ", bits);
        check_4bit_layer(file, module, key.substr(at + kStateTag.size()), q, t);
      } else if (ends_with(key, ".SCB")) {
        module = key.substr(0, key.size() - 4);
        WEFT_CHECK(!is_four_bit(q), "holds LLM.int8() row scales, but quantization_config loads in ", bits);
        check_8bit_layer(file, module);
      }
    } catch (const Error& e) {
      problems.push_back("'" + key + "' " + e.what());
    }
    if (!module.empty()) quantized.insert(module);
  }
  for (const auto& [key, t] : file) {
    const bool integer_weight = ends_with(key, ".weight") && (t.dtype() == kUInt8 || t.dtype() == kInt8);
    if (integer_weight && !quantized.count(key.substr(0, key.size() - 7)))
      problems.push_back(weft::detail::cat("'", key, "' is stored as ", t.dtype(), " without bitsandbytes statistics: ",
                                           "expected '", key, ".quant_state.bitsandbytes__<nf4|fp4>' or '",
                                           key.substr(0, key.size() - 7), ".SCB' beside it"));
  }
  for (const std::string& module : quantized)
    for (const std::string& skip : q.skip_modules)
      if (skip_names(skip, module))
        problems.push_back("'" + module + "' is stored quantized, but quantization_config.llm_int8_skip_modules " +
                           "names it ('" + skip + "'), which keeps it float");
  if (quantized.empty())
    problems.push_back(is_four_bit(q) ? "no tensor is a 4-bit quant_state ('<module>.weight.quant_state.bitsandbytes__" +
                                            quant_type_of(q) + "'): the weights are not stored quantized"
                                      : std::string("no tensor is an LLM.int8() row scale ('<module>.SCB'): the ") +
                                            "weights are not stored quantized");
  if (problems.empty()) return;
  std::string message = "[from_pretrained] " + config_file + " has a bitsandbytes quantization_config (" + q.mode +
                        ") that the stored tensors do not match:";
  for (const std::string& p : problems) message += "\n  " + p;
  throw Error(message);
}

void use_bnb_layers(nn::Module& model, const nn::TensorDict& file, const HfQuantization& q, DType dtype) {
  const TensorFrameGuard frame(TensorFrame{dtype, std::nullopt, true});
  precision::LayerConverters converters;
  converters.linear = [&](const std::shared_ptr<nn::LinearImpl>& old,
                          const std::string& name) -> std::shared_ptr<nn::Module> {
    const int64_t in = old->in_features, out = old->out_features;
    const bool bias = old->bias.defined();
    if (file.find(name + ".SCB") != nullptr) {
      precision::quant::Linear8bitLtOptions options;
      options.threshold = q.int8_threshold;
      return std::make_shared<precision::quant::Linear8bitLtImpl>(in, out, bias, options);
    }
    if (file.find(name + std::string(kStateTag) + quant_type_of(q)) != nullptr) {
      precision::quant::Linear4bitOptions options;
      options.quant_type = quant_type_of(q) == "nf4" ? precision::quant::QuantKind::NF4 : precision::quant::QuantKind::FP4;
      options.compress_statistics = double_quant_of(q);
      options.compute_dtype = q.compute_dtype;
      return std::make_shared<precision::quant::Linear4bitImpl>(in, out, bias, options);
    }
    return nullptr;
  };
  precision::replace_layers(model, converters);
}

}  // namespace weft::models
