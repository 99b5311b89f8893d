// Layer replacement: Module::replace_module, replace_layers with its ignore list (T35's shape),
// the init_tensor / init_module split it must respect (T39, issue #18703), and the machinery
// parts of the bitsandbytes / TransformerEngine cases (T36, T40, T41), with a test-only plugin
// that swaps Linear for a marked subclass.
#include <doctest/doctest.h>

#include <typeinfo>

#include "plugin_test_helpers.h"
#include "precision/all.h"

using namespace weft;
using testing::MarkedLinear;
using testing::ReplacingPrecision;

namespace {

// l1 = Linear(16, 48); l2 = Sequential(Linear(1, 3)); l20 = Linear(2, 2) (a name that only a
// plain string prefix "l2" would match).
struct TwoBranches : nn::Module {
  TwoBranches() {
    register_module("l1", nn::Linear(16, 48));
    register_module("l2", nn::Sequential(nn::Linear(1, 3)));
    register_module("l20", nn::Linear(2, 2));
  }
};

bool is_plain_linear(const std::shared_ptr<nn::Module>& m) { return testing::has_type<nn::LinearImpl>(*m); }
bool is_marked(const std::shared_ptr<nn::Module>& m) { return dynamic_cast<MarkedLinear*>(m.get()) != nullptr; }

std::shared_ptr<nn::Module> child(const nn::Module& m, const std::string& dotted) {
  for (const auto& [name, module] : m.named_modules())
    if (name == dotted) return module;
  FAIL("no module ", dotted);
  return nullptr;
}

}  // namespace

TEST_CASE("Module::replace_module swaps a child; containers follow; unknown names fail") {
  nn::Sequential seq(nn::Linear(2, 2), nn::ReLU());
  auto marked = std::make_shared<MarkedLinear>(2, 2, true);
  seq->replace_module("0", marked);
  CHECK((*seq)[0] == std::static_pointer_cast<nn::Module>(marked));
  CHECK(seq->named_children()[0].second == std::static_pointer_cast<nn::Module>(marked));
  // The forward goes through the new layer: MarkedLinear doubles, ReLU keeps positives.
  {
    NoGradGuard no_grad;
    marked->weight.copy_(tensor({1.0, 0.0, 0.0, 1.0}).reshape({2, 2}));
    marked->bias.zero_();
  }
  const Tensor y = seq(tensor({3.0, 4.0}).reshape({1, 2}));
  CHECK(y.to(kFloat64).data<double>()[0] == 6.0);
  CHECK(y.to(kFloat64).data<double>()[1] == 8.0);
  CHECK_THROWS_WITH_AS(seq->replace_module("7", marked), doctest::Contains("expected a child named '7'"), Error);
}

TEST_CASE("T35 (machinery, test-only replacement) built-in Linears replaced with weights copied; ignore list matches dotted prefixes") {
  manual_seed(3);
  TwoBranches model;
  const Tensor l1_weight = std::dynamic_pointer_cast<nn::LinearImpl>(child(model, "l1"))->weight.clone();
  ReplacingPrecision plugin;
  plugin.ignore_modules = {"l2"};
  plugin.convert_module(model);
  CHECK(is_marked(child(model, "l1")));
  CHECK(is_plain_linear(child(model, "l2.0")));
  CHECK(is_marked(child(model, "l20")));
  const Tensor copied = std::dynamic_pointer_cast<nn::LinearImpl>(child(model, "l1"))->weight;
  CHECK(equal(copied, l1_weight));
  // Already replaced layers are left alone.
  CHECK(precision::replace_layers(model, precision::LayerConverters{
                                             [](const std::shared_ptr<nn::LinearImpl>&, const std::string&) {
                                               return std::make_shared<MarkedLinear>(1, 1, true);
                                             },
                                             nullptr}) == std::vector<std::string>{"l2.0"});
  CHECK(precision::is_under_module("l2.0", "l2"));
  CHECK(precision::is_under_module("l2", "l2"));
  CHECK_FALSE(precision::is_under_module("l20", "l2"));
}

TEST_CASE("replace_layers: a shared layer is replaced once and stays shared; LayerNorm has its own converter") {
  nn::Linear shared(3, 3);
  nn::Sequential model(shared, nn::LayerNorm(Shape{3}), shared);
  int linear_calls = 0;
  precision::LayerConverters converters;
  converters.linear = [&](const std::shared_ptr<nn::LinearImpl>& old, const std::string&) {
    ++linear_calls;
    return std::make_shared<MarkedLinear>(old->in_features, old->out_features, true);
  };
  converters.layer_norm = [](const std::shared_ptr<nn::LayerNormImpl>&, const std::string&) {
    return std::make_shared<nn::IdentityImpl>();
  };
  const auto replaced = precision::replace_layers(*model, converters);
  CHECK(replaced == std::vector<std::string>{"0", "1", "2"});
  CHECK(linear_calls == 1);
  CHECK((*model)[0] == (*model)[2]);
  CHECK(is_marked((*model)[0]));
  CHECK(testing::has_type<nn::IdentityImpl>(*(*model)[1]));
}

TEST_CASE("T39 init_tensor never replaces a Linear; init_module does (issue #18703)") {
  ReplacingPrecision plugin;
  {
    precision::Context ctx = plugin.tensor_init_context();
    nn::Linear fc(2, 3);
    CHECK(is_plain_linear(fc.ptr()));
    CHECK(fc->weight.dtype() == kFloat64);
  }
  {
    precision::Context ctx = plugin.module_init_context();
    nn::Linear fc(2, 3);
    CHECK(is_marked(fc.ptr()));
    CHECK(fc->weight.dtype() == kFloat64);
  }
  nn::Linear after(2, 3);
  CHECK(is_plain_linear(after.ptr()));
  CHECK(after->weight.dtype() == kFloat32);
}

// T36, T40 and T41 describe the bitsandbytes and TransformerEngine plugins. The cases below check
// what those plugins build on — replace_layers and a module_init_context that pushes a module
// frame — through the test-only ReplacingPrecision; the TransformerEngine plugin's own policies
// are tested in test_transformer_engine.cpp, bitsandbytes' with that plugin.

TEST_CASE("T36 (machinery, test-only replacement) a model built under module_init_context holds the replacement; outside, the original") {
  ReplacingPrecision plugin;
  std::shared_ptr<TwoBranches> inside;
  {
    precision::Context ctx = plugin.module_init_context();
    CHECK(default_dtype() == kFloat64);
    inside = std::make_shared<TwoBranches>();
  }
  CHECK(default_dtype() == kFloat32);
  TwoBranches outside;
  for (const char* name : {"l1", "l2.0", "l20"}) {
    CAPTURE(name);
    CHECK(is_marked(child(*inside, name)));
    CHECK(std::dynamic_pointer_cast<nn::LinearImpl>(child(*inside, name))->weight.dtype() == kFloat64);
    CHECK(is_plain_linear(child(outside, name)));
    CHECK(std::dynamic_pointer_cast<nn::LinearImpl>(child(outside, name))->weight.dtype() == kFloat32);
  }
}

namespace {

struct MarkedLayerNorm : nn::LayerNormImpl {
  using LayerNormImpl::LayerNormImpl;
};

// The converters a TE-like plugin would give replace_layers: Linear -> MarkedLinear (weights
// copied, bias only where there is one) unless the shape does not suit the fast kernels (a null
// answer keeps the layer), LayerNorm -> MarkedLayerNorm.
precision::LayerConverters te_like_converters() {
  precision::LayerConverters converters;
  converters.linear = [](const std::shared_ptr<nn::LinearImpl>& old,
                         const std::string&) -> std::shared_ptr<nn::Module> {
    if (old->in_features % 8 != 0 || old->out_features % 16 != 0) return nullptr;
    auto marked = std::make_shared<MarkedLinear>(old->in_features, old->out_features, old->bias.defined());
    NoGradGuard no_grad;
    marked->weight.copy_(old->weight);
    if (old->bias.defined()) marked->bias.copy_(old->bias);
    return marked;
  };
  converters.layer_norm = [](const std::shared_ptr<nn::LayerNormImpl>& old, const std::string&) {
    return std::make_shared<MarkedLayerNorm>(old->normalized_shape, old->eps, old->elementwise_affine,
                                             old->bias.defined());
  };
  return converters;
}

}  // namespace

TEST_CASE("T40 (machinery, test-only replacement) Linear and LayerNorm replaced once, kept on a null answer; no bias stays no bias") {
  manual_seed(40);
  nn::Sequential model(nn::Linear(16, 48), nn::LayerNorm(48), nn::Linear(1, 3), nn::Linear(16, 32, false));
  const Tensor no_bias_weight = model->at<nn::LinearImpl>(3)->weight.clone();
  CHECK(precision::replace_layers(*model, te_like_converters()) == std::vector<std::string>{"0", "1", "3"});
  CHECK(is_marked((*model)[0]));
  CHECK(dynamic_cast<MarkedLayerNorm*>((*model)[1].get()) != nullptr);
  CHECK(is_plain_linear((*model)[2]));
  REQUIRE(is_marked((*model)[3]));
  CHECK_FALSE(model->at<nn::LinearImpl>(3)->bias.defined());
  CHECK(model->named_parameters().size() == 2 + 2 + 2 + 1);
  CHECK(equal(model->at<nn::LinearImpl>(3)->weight, no_bias_weight));

  // A model that already holds replacements is not converted again: only the kept built-in
  // Linear(1, 3) is offered to the converter, which keeps it again.
  std::vector<std::shared_ptr<nn::Module>> before;
  for (const auto& [name, m] : model->named_children()) before.push_back(m);
  precision::LayerConverters counting = te_like_converters();
  std::vector<std::string> offered;
  counting.linear = [&offered, linear = counting.linear](const std::shared_ptr<nn::LinearImpl>& old,
                                                         const std::string& name) {
    offered.push_back(name);
    return linear(old, name);
  };
  counting.layer_norm = [&offered](const std::shared_ptr<nn::LayerNormImpl>&,
                                   const std::string& name) -> std::shared_ptr<nn::Module> {
    offered.push_back(name);
    return nullptr;
  };
  CHECK(precision::replace_layers(*model, counting).empty());
  CHECK(offered == std::vector<std::string>{"2"});
  for (size_t i = 0; i < before.size(); ++i) CHECK((*model)[i] == before[i]);

  // Nor is one built under module_init_context.
  ReplacingPrecision plugin;
  nn::Sequential built{nullptr};
  {
    precision::Context ctx = plugin.module_init_context();
    built = nn::Sequential(nn::Linear(16, 48), nn::Linear(16, 32, false));
  }
  const auto first = (*built)[0];
  plugin.convert_module(*built);
  CHECK((*built)[0] == first);
  CHECK(precision::replace_layers(*built, te_like_converters()).empty());
  CHECK_FALSE(built->at<nn::LinearImpl>(1)->bias.defined());
}

TEST_CASE("T41 (machinery, test-only replacement) module_init_context: replacement and float64 inside, restored after, also on exception") {
  ReplacingPrecision plugin;
  for (const bool fail : {false, true}) {
    CAPTURE(fail);
    try {
      precision::Context ctx = plugin.module_init_context();
      CHECK(default_dtype() == kFloat64);
      nn::Linear fc(16, 48);
      CHECK(is_marked(fc.ptr()));
      CHECK(fc->weight.dtype() == kFloat64);
      if (fail) throw Error("[test] a failure inside the context");
    } catch (const Error&) {
    }
    CHECK(default_dtype() == kFloat32);
    CHECK_FALSE(nn::current_module_frame().linear);
    nn::Linear after(16, 48);
    CHECK(is_plain_linear(after.ptr()));
    CHECK(after->weight.dtype() == kFloat32);
  }
}
