// BitsandbytesPrecision (fabric-precision.md §3.8, cases T35–T37, T39): modes, defaults and errors,
// layer replacement with ignore_modules, and the tensor / module init-context split. The plugin
// at work through Fabric (T38, T39 through init_tensor / init_module) is in
// tests/fabric/test_bitsandbytes_fabric.cpp.
#include <doctest/doctest.h>

#include <typeinfo>

#include "plugin_test_helpers.h"
#include "precision/bitsandbytes_precision.h"
#include "precision/quant/linear_4bit.h"
#include "precision/quant/linear_8bit.h"
#include "precision/all.h"

using namespace weft;
using precision::BitsandbytesPrecision;
using precision::quant::Linear4bitImpl;
using precision::quant::Linear8bitLtImpl;

namespace {

const char* kModes[] = {"nf4", "nf4-dq", "fp4", "fp4-dq", "int8-training", "int8"};

// l1 = Linear(16, 48); l2 = Sequential(Linear(1, 3)) (reference test_bitsandbytes_plugin's shape).
struct MyModule : nn::Module {
  MyModule() {
    register_module("l1", nn::Linear(16, 48));
    register_module("l2", nn::Sequential(nn::Linear(1, 3)));
  }
};

std::shared_ptr<nn::Module> child(const nn::Module& m, const std::string& dotted) {
  for (const auto& [name, module] : m.named_modules())
    if (name == dotted) return module;
  FAIL("no module ", dotted);
  return nullptr;
}

// The layer class the mode builds.
bool is_mode_layer(const std::string& mode, const std::shared_ptr<nn::Module>& m) {
  if (mode.starts_with("int8")) {
    auto* layer = dynamic_cast<Linear8bitLtImpl*>(m.get());
    return layer != nullptr && layer->options().has_fp16_weights == (mode == "int8-training");
  }
  auto* layer = dynamic_cast<Linear4bitImpl*>(m.get());
  if (layer == nullptr) return false;
  const bool nf4 = layer->quant_state().type == precision::quant::QuantKind::NF4;
  return nf4 == mode.starts_with("nf4") && layer->quant_state().nested == mode.ends_with("-dq");
}

bool is_plain_linear(const std::shared_ptr<nn::Module>& m) { return testing::has_type<nn::LinearImpl>(*m); }

}  // namespace

TEST_CASE("T35 convert_module replaces Linear by each mode's layer, honours ignore_modules, refuses a model without Linear") {
  for (const char* mode : kModes) {
    CAPTURE(mode);
    manual_seed(35);
    MyModule model;
    const Tensor l1_weight = std::dynamic_pointer_cast<nn::LinearImpl>(child(model, "l1"))->weight.clone();
    const Tensor l1_bias = std::dynamic_pointer_cast<nn::LinearImpl>(child(model, "l1"))->bias.clone();
    BitsandbytesPrecision plugin(mode, std::nullopt, {"l2"});
    plugin.convert_module(model);
    CHECK(is_mode_layer(mode, child(model, "l1")));
    CHECK(is_plain_linear(child(model, "l2.0")));
    // The converted layer holds the old weights (quantized) and a trainable copy of the bias.
    auto l1 = std::dynamic_pointer_cast<nn::LinearImpl>(child(model, "l1"));
    CHECK(equal(l1->bias, l1_bias));
    CHECK(l1->bias.requires_grad());
    if (auto* four = dynamic_cast<Linear4bitImpl*>(l1.get())) {
      CHECK(four->options().compute_dtype == kBFloat16);
      CHECK(mean(abs(sub(four->dequantize_weight(), l1_weight))).item<double>() < 0.1 * mean(abs(l1_weight)).item<double>());
    }
  }
  // Only layer norms and embeddings: nothing to quantize.
  nn::Sequential no_linear(nn::Embedding(4, 3), nn::LayerNorm(Shape{3}));
  CHECK(error_of([&] { BitsandbytesPrecision("nf4").convert_module(*no_linear); }) ==
        "[BitsandbytesPrecision] You are using the bitsandbytes precision plugin, but your model has no Linear "
        "layers. This plugin won't work for your model.");
}

TEST_CASE("T35 a model already holding quantized layers is not converted again; their compute dtype becomes the plugin's") {
  BitsandbytesPrecision plugin("nf4", kFloat16);
  std::shared_ptr<MyModule> model;
  {
    precision::Context ctx = plugin.module_init_context();
    model = std::make_shared<MyModule>();
  }
  auto four = std::dynamic_pointer_cast<Linear4bitImpl>(child(*model, "l1"));
  REQUIRE(four != nullptr);
  four->set_compute_dtype(kFloat32);
  const auto before = child(*model, "l2.0");
  plugin.convert_module(*model);
  CHECK(child(*model, "l1") == std::static_pointer_cast<nn::Module>(four));
  CHECK(child(*model, "l2.0") == before);
  CHECK(four->options().compute_dtype == kFloat16);
}

TEST_CASE("T36 module_init_context builds the quantized layers directly in the plugin's dtype; refuses ignore_modules") {
  for (const char* mode : kModes) {
    CAPTURE(mode);
    BitsandbytesPrecision plugin(mode);
    std::shared_ptr<MyModule> inside;
    {
      precision::Context ctx = plugin.module_init_context();
      CHECK(default_dtype() == plugin.dtype());
      inside = std::make_shared<MyModule>();
    }
    CHECK(default_dtype() == kFloat32);
    CHECK(is_mode_layer(mode, child(*inside, "l1")));
    CHECK(is_mode_layer(mode, child(*inside, "l2.0")));
    CHECK(std::dynamic_pointer_cast<nn::LinearImpl>(child(*inside, "l1"))->bias.dtype() == plugin.dtype());
    MyModule outside;
    CHECK(is_plain_linear(child(outside, "l1")));
  }
  BitsandbytesPrecision with_ignore("nf4", std::nullopt, {"l2"});
  CHECK(error_of([&] { with_ignore.module_init_context(); }) ==
        "[BitsandbytesPrecision] Instantiating your model under the `init_module` context manager is not supported "
        "when used with `BitsandbytesPrecision(..., ignore_modules=...)` as this may initialize the layers "
        "on-device, defeating the purpose of quantization. You can remove `ignore_modules` or remove the "
        "`init_module` context manager.");
  CHECK(default_dtype() == kFloat32);  // nothing leaked (T52)
}

TEST_CASE("T37 int8 modes need float16 and default to it; 4-bit modes default to bfloat16; unknown modes fail") {
  CHECK(error_of([] { BitsandbytesPrecision("int8", kBFloat16); }) ==
        "[BitsandbytesPrecision] 'int8' only works with `dtype=torch.float16`, but you chose `torch.bfloat16`");
  CHECK(error_of([] { BitsandbytesPrecision("int8-training", kFloat32); }) ==
        "[BitsandbytesPrecision] 'int8-training' only works with `dtype=torch.float16`, but you chose `torch.float32`");
  CHECK(BitsandbytesPrecision("int8").dtype() == kFloat16);
  CHECK(BitsandbytesPrecision("int8-training").dtype() == kFloat16);
  CHECK(BitsandbytesPrecision("nf4").dtype() == kBFloat16);
  CHECK(BitsandbytesPrecision("fp4-dq", kFloat32).dtype() == kFloat32);
  CHECK(BitsandbytesPrecision("nf4").ignore_modules().empty());
  CHECK(BitsandbytesPrecision("nf4").precision() == "32-true");  // the reference's inherited value
  CHECK(BitsandbytesPrecision("int8").mode() == precision::PrecisionMode::Fp32True);
  CHECK(error_of([] { BitsandbytesPrecision("int4"); }) ==
        "[BitsandbytesPrecision] unsupported mode 'int4'; expected one of ('nf4', 'nf4-dq', 'fp4', 'fp4-dq', "
        "'int8', 'int8-training')");
  // Inputs go to the plugin's dtype, outputs back to the default; integers are untouched.
  BitsandbytesPrecision plugin("nf4");
  CHECK(plugin.convert_input(ones({2})).dtype() == kBFloat16);
  CHECK(plugin.convert_input(ones({2}, kInt64)).dtype() == kInt64);
  CHECK(plugin.convert_output(ones({2}, kBFloat16)).dtype() == kFloat32);
  {
    precision::Context ctx = plugin.forward_context();
    CHECK(default_dtype() == kBFloat16);
  }
  CHECK(default_dtype() == kFloat32);
}

TEST_CASE("T39 tensor_init_context builds plain Linear layers in the plugin's dtype; module_init_context the quantized ones") {
  for (const char* mode : kModes) {
    CAPTURE(mode);
    BitsandbytesPrecision plugin(mode);
    {
      precision::Context ctx = plugin.tensor_init_context();
      nn::Linear fc(64, 8);
      CHECK(is_plain_linear(fc.ptr()));
      CHECK(fc->weight.dtype() == plugin.dtype());
    }
    {
      precision::Context ctx = plugin.module_init_context();
      nn::Linear fc(64, 8);
      CHECK(is_mode_layer(mode, fc.ptr()));
    }
    CHECK(default_dtype() == kFloat32);
  }
}

TEST_CASE("a LazyLinear built under module_init_context materialises as the quantized layer and saves its statistics") {
  BitsandbytesPrecision plugin("nf4-dq", kFloat32);
  std::shared_ptr<nn::SequentialImpl> model;
  {
    precision::Context ctx = plugin.module_init_context();
    model = nn::Sequential(nn::LazyLinear(16), nn::ReLU()).ptr();
  }
  const Tensor y = model->forward(randn({3, 128}));
  CHECK(y.shape() == Shape{3, 16});
  CHECK((*model)[0]->type_name() == "Linear4bit");
  std::vector<std::string> keys;
  for (const auto& [k, v] : model->state_dict()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"0.weight", "0.bias", "0.weight.absmax", "0.weight.quant_map",
                                         "0.weight.nested_absmax", "0.weight.nested_quant_map",
                                         "0.weight.quant_state.bitsandbytes__nf4"});
  // And loads back strictly into another one.
  std::shared_ptr<nn::SequentialImpl> other;
  {
    precision::Context ctx = plugin.module_init_context();
    other = nn::Sequential(nn::Linear(128, 16), nn::ReLU()).ptr();
  }
  other->load_state_dict(model->state_dict());
  const Tensor x = randn({2, 128});
  CHECK(equal(other->forward(x), model->forward(x)));
}
