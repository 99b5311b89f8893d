// Layer replacement: Module::replace_module, replace_layers with its ignore list (T35's shape),
// and the init_tensor / init_module split it must respect (T39, issue #18703), with a test-only
// plugin that swaps Linear for a marked subclass.
#include <doctest/doctest.h>

#include <typeinfo>

#include "plugin_test_helpers.h"
#include "weft.h"

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

bool is_plain_linear(const std::shared_ptr<nn::Module>& m) { return typeid(*m) == typeid(nn::LinearImpl); }
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

TEST_CASE("replace_layers: built-in Linears replaced with weights copied; ignore list matches dotted prefixes") {
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
  CHECK(typeid(*(*model)[1]) == typeid(nn::IdentityImpl));
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
