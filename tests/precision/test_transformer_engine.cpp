// TransformerEnginePrecision (reference §3.9): convert_module (T40), module_init_context (T41),
// recipes from mappings (T42), the three-level forward context, the input/output casts and the
// precision strings. The training step through Fabric is in tests/fabric/test_fabric_fp8.cpp.
#include <doctest/doctest.h>

#include <string>
#include <typeinfo>
#include <vector>

#include "plugin_test_helpers.h"
#include "precision/all.h"

using namespace weft;
using namespace weft::precision;
using testing::contains;

namespace {

// l1 = Linear(16, 48), l2 = Sequential(Linear(1, 3)), ln = LayerNorm(48), l3 = Linear(16, 32,
// no bias), ln_plain = LayerNorm(48, no affine map), ln_no_bias = LayerNorm(48, no bias).
struct Model : nn::Module {
  Model() {
    register_module("l1", nn::Linear(16, 48));
    register_module("l2", nn::Sequential(nn::Linear(1, 3)));
    register_module("ln", nn::LayerNorm(48));
    register_module("l3", nn::Linear(16, 32, false));
    register_module("ln_plain", nn::LayerNorm(48, 1e-5, false));
    register_module("ln_no_bias", nn::LayerNorm(48, 1e-6, true, false));
  }
};

std::shared_ptr<nn::Module> child(const nn::Module& m, const std::string& dotted) {
  for (const auto& [name, module] : m.named_modules())
    if (name == dotted) return module;
  FAIL("no module ", dotted);
  return nullptr;
}

template <class T>
bool is(const std::shared_ptr<nn::Module>& m) {
  return testing::has_type<T>(*m);
}

TransformerEnginePrecision plugin_with(std::optional<bool> replace_layers, DType weights = kBFloat16) {
  TransformerEngineOptions options;
  options.weights_dtype = weights;
  options.replace_layers = replace_layers;
  return TransformerEnginePrecision(std::move(options));
}

}  // namespace

TEST_CASE("T40 convert_module: replace_layers=false only casts; true or unset swaps Linear and LayerNorm, keeps bad shapes with a warning") {
  {
    Model model;
    auto plugin = plugin_with(false);
    CaptureWarnings warnings;
    plugin.convert_module(model);
    CHECK(warnings.messages().empty());
    CHECK(is<nn::LinearImpl>(child(model, "l1")));
    CHECK(is<nn::LayerNormImpl>(child(model, "ln")));
    for (const Tensor& p : model.parameters()) CHECK(p.dtype() == kBFloat16);
  }
  for (const std::optional<bool> replace : {std::optional<bool>(), std::optional<bool>(true)}) {
    CAPTURE(replace.has_value());
    manual_seed(40);
    Model model;
    const Tensor l1_weight = std::dynamic_pointer_cast<nn::LinearImpl>(child(model, "l1"))->weight.clone();
    const Tensor l3_weight = std::dynamic_pointer_cast<nn::LinearImpl>(child(model, "l3"))->weight.clone();
    auto plugin = plugin_with(replace);
    CaptureWarnings warnings;
    plugin.convert_module(model);
    CHECK(is<Fp8LinearImpl>(child(model, "l1")));
    CHECK(is<nn::LinearImpl>(child(model, "l2.0")));  // 1 and 3 are not multiples of 16
    REQUIRE(warnings.messages().size() == 1);
    CHECK(warnings.messages()[0] ==
          "[TransformerEnginePrecision] layer 'l2.0' (Linear(1, 3)) is kept in high precision: FP8 execution needs "
          "in_features and out_features divisible by 16, and in_features=1 is not divisible by 16");
    // The weights were copied (then cast to bfloat16); a layer without bias stays without.
    CHECK(equal(std::dynamic_pointer_cast<nn::LinearImpl>(child(model, "l1"))->weight, l1_weight.to(kBFloat16)));
    auto l3 = std::dynamic_pointer_cast<Fp8LinearImpl>(child(model, "l3"));
    REQUIRE(l3 != nullptr);
    CHECK_FALSE(l3->bias.defined());
    CHECK(equal(l3->weight, l3_weight.to(kBFloat16)));
    CHECK(l3->weight.dtype() == kBFloat16);
    CHECK(l3->weight.requires_grad());
    CHECK(l3->fp8_meta().scale.dtype() == kFloat32);
    // LayerNorm: affine, non-affine (the reference crashes on it) and bias-less all convert.
    for (const char* name : {"ln", "ln_plain", "ln_no_bias"}) CHECK(is<TeLayerNormImpl>(child(model, name)));
    auto plain = std::dynamic_pointer_cast<nn::LayerNormImpl>(child(model, "ln_plain"));
    CHECK_FALSE(plain->weight.defined());
    CHECK_FALSE(plain->elementwise_affine);
    auto no_bias = std::dynamic_pointer_cast<nn::LayerNormImpl>(child(model, "ln_no_bias"));
    CHECK(no_bias->weight.defined());
    CHECK_FALSE(no_bias->bias.defined());
    CHECK(no_bias->eps == 1e-6);
    // l1 (2 + 3 FP8 buffers), l2.0, ln, l3 (1 + 3), ln_plain, ln_no_bias.
    CHECK(model.state_dict().size() == 5 + 2 + 2 + 4 + 0 + 1);
  }
  {
    // A model that already holds FP8 layers is left alone; with replace_layers=true, a warning.
    Model model;
    {
      CaptureWarnings first_conversion;
      plugin_with(std::nullopt).convert_module(model);
    }
    const auto l2 = child(model, "l2.0");
    CaptureWarnings warnings;
    plugin_with(true).convert_module(model);
    CHECK(child(model, "l2.0") == l2);
    REQUIRE(warnings.messages().size() == 1);
    CHECK(contains(warnings.messages()[0], "already contains TransformerEngine layers"));
    CaptureWarnings quiet;
    plugin_with(std::nullopt).convert_module(model);
    CHECK(quiet.messages().empty());
  }
}

TEST_CASE("T41 module_init_context: replace_layers unset builds plain layers, true builds FP8 ones; the dtype is restored, also on exception") {
  for (const bool fail : {false, true}) {
    CAPTURE(fail);
    try {
      auto plugin = plugin_with(std::nullopt);
      Context ctx = plugin.module_init_context();
      CHECK(default_dtype() == kBFloat16);
      nn::Linear fc(16, 48);
      CHECK(is<nn::LinearImpl>(fc.ptr()));
      CHECK(fc->weight.dtype() == kBFloat16);
      if (fail) throw Error("[test] a failure inside the context");
    } catch (const Error&) {
    }
    CHECK(default_dtype() == kFloat32);
  }
  for (const bool fail : {false, true}) {
    CAPTURE(fail);
    try {
      auto plugin = plugin_with(true, kFloat16);
      Context ctx = plugin.module_init_context();
      CHECK(default_dtype() == kFloat16);
      nn::Linear fc(16, 48);
      nn::LayerNorm ln(48);
      CHECK(is<Fp8LinearImpl>(fc.ptr()));
      CHECK(is<TeLayerNormImpl>(ln.ptr()));
      CHECK(fc->weight.dtype() == kFloat16);
      CaptureWarnings warnings;
      nn::Linear odd(1, 3);  // cannot run in FP8: a plain Linear, with a warning naming the dimension
      CHECK(is<nn::LinearImpl>(odd.ptr()));
      REQUIRE(warnings.messages().size() == 1);
      CHECK(contains(warnings.messages()[0], "Linear(1, 3) is kept in high precision"));
      if (fail) throw Error("[test] a failure inside the context");
    } catch (const Error&) {
    }
    CHECK(default_dtype() == kFloat32);
    CHECK(is<nn::LinearImpl>(nn::Linear(16, 48).ptr()));
  }
  // tensor_init_context never replaces (T39's guarantee).
  auto plugin = plugin_with(true);
  Context ctx = plugin.tensor_init_context();
  CHECK(is<nn::LinearImpl>(nn::Linear(16, 48).ptr()));
  CHECK(default_dtype() == kBFloat16);
}

TEST_CASE("T42 recipe from a mapping: the format name becomes the format, the caller's mapping keeps its string") {
  const RecipeMapping mapping{{"fp8_format", std::string("HYBRID")}, {"amax_history_len", int64_t{16}}};
  TransformerEngineOptions options;
  options.recipe = mapping;
  TransformerEnginePrecision plugin(options);
  const auto* recipe = std::get_if<DelayedScaling>(&plugin.recipe());
  REQUIRE(recipe != nullptr);
  CHECK(recipe->fp8_format == Fp8Format::HYBRID);
  CHECK(recipe->amax_history_len == 16);
  CHECK(std::get<std::string>(mapping.at("fp8_format")) == "HYBRID");
  CHECK(std::get<std::string>(std::get<RecipeMapping>(*options.recipe).at("fp8_format")) == "HYBRID");
  // An object is used as it is; none means DelayedScaling().
  options.recipe = Fp8Recipe(Float8CurrentScaling{.power_2_scale = true});
  CHECK(std::get<Float8CurrentScaling>(TransformerEnginePrecision(options).recipe()).power_2_scale);
  const auto defaults = plugin_with(std::nullopt);
  const auto& d = std::get<DelayedScaling>(defaults.recipe());
  CHECK(d.fp8_format == Fp8Format::HYBRID);
  CHECK(d.amax_history_len == 1024);
  CHECK(d.amax_compute_algo == AmaxComputeAlgo::Max);
  CHECK(defaults.fallback_compute_dtype() == kBFloat16);
  options.recipe = RecipeMapping{{"fp8_format", std::string("E5M2")}};
  CHECK(contains(error_of([&] { TransformerEnginePrecision bad(options); }), "Pure E5M2 training is not supported"));
}

TEST_CASE("forward_context nests the weights dtype, the fallback autocast and fp8_autocast, and unwinds them") {
  TransformerEngineOptions options;
  options.weights_dtype = kFloat16;
  options.fallback_compute_dtype = kBFloat16;
  options.recipe = Fp8Recipe(DelayedScaling{.fp8_format = Fp8Format::E4M3});
  TransformerEnginePrecision plugin(options);
  {
    Context ctx = plugin.forward_context();
    CHECK(default_dtype() == kFloat16);
    CHECK(is_autocast_enabled(DeviceType::CPU));
    CHECK(autocast_dtype(DeviceType::CPU) == kBFloat16);
    CHECK(fp8_autocast_state().enabled);
    CHECK(fp8_format_of(fp8_autocast_state().recipe) == Fp8Format::E4M3);
  }
  CHECK(default_dtype() == kFloat32);
  CHECK_FALSE(is_autocast_enabled(DeviceType::CPU));
  CHECK_FALSE(fp8_autocast_state().enabled);
  // A float32 fallback means no autocast; FP8 is still on.
  Context ctx = plugin_with(std::nullopt, kFloat32).forward_context();
  CHECK_FALSE(is_autocast_enabled(DeviceType::CPU));
  CHECK(fp8_autocast_state().enabled);
}

TEST_CASE("the plugin's strings, input and output casts, and its checks") {
  CHECK(plugin_with(std::nullopt).precision() == "transformer-engine");
  // float16 weights too: the reference's class attribute (T7); the mode keeps them apart.
  CHECK(plugin_with(std::nullopt, kFloat16).precision() == "transformer-engine");
  CHECK(plugin_with(std::nullopt, kFloat16).mode() == PrecisionMode::TransformerEngineFloat16);
  auto plugin = plugin_with(std::nullopt);
  CHECK(plugin.convert_input(ones({2}, kFloat32)).dtype() == kBFloat16);
  CHECK(plugin.convert_input(ones({2}, kInt64)).dtype() == kInt64);
  CHECK(plugin.convert_output(ones({2}, kBFloat16)).dtype() == kFloat32);
  CHECK_FALSE(plugin.requires_plugin_backward());
  CHECK(plugin.state_dict().empty());
  TransformerEngineOptions bad;
  bad.weights_dtype = kFloat8E4M3FN;
  CHECK(contains(error_of([&] { TransformerEnginePrecision p(bad); }), "expected weights_dtype float32, float64"));
  bad.weights_dtype = kBFloat16;
  bad.device = "tpu";
  CHECK(contains(error_of([&] { TransformerEnginePrecision p(bad); }), "expected device 'cpu' or 'cuda', got 'tpu'"));
}

TEST_CASE("TeLayerNorm returns the activation dtype: the autocast dtype under autocast, the input's otherwise") {
  TeLayerNorm te(Shape{8});
  nn::LayerNorm builtin(8);
  const Tensor x = randn({2, 8});
  CHECK(equal(te(x), builtin(x)));
  AutocastGuard autocast(DeviceType::CPU, kBFloat16);
  CHECK(builtin(x).dtype() == kFloat32);  // autocast runs layer norm in float32
  CHECK(te(x).dtype() == kBFloat16);
  CHECK(equal(te(x), builtin(x).to(kBFloat16)));
}
