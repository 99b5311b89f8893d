// Per-module state-dict hooks (Note [State dict hooks] in nn/state_loader.h): a module that keeps
// extra state under dotted sub-keys of a parameter saves and loads it, strict loading requires
// every key to be taken, and a load that fails anywhere changes nothing anywhere.
#include <doctest/doctest.h>

#include "nn/all.h"

using namespace weft;

namespace {

// A layer whose "weight" carries a scale saved as "weight.scale" (as a quantized layer keeps its
// absmax), and which also accepts a plain float checkpoint without the scale ("quantize on
// load": the scale becomes max|weight|).
struct ScaledImpl : nn::Module {
  ScaledImpl() {
    weight = register_parameter("weight", zeros({2, 3}));
    bias = register_parameter("bias", zeros({2}));
  }
  void save_own_state(const std::string& prefix, nn::TensorDict& out) const override {
    save_tensor(prefix + "weight", weight, out);
    save_tensor(prefix + "bias", bias, out);
    out.insert(prefix + "weight.scale", from_vector(std::vector<float>{scale}, {1}));
  }
  void load_own_state(nn::StateLoader& loader, const std::string& prefix) override {
    const Tensor* s = loader.take(prefix + "weight.scale");
    if (s != nullptr && s->numel() != 1) {
      loader.error("'" + prefix + "weight.scale' must hold one value");
    } else if (s != nullptr) {
      const float value = s->item<float>();
      loader.defer([this, value] { scale = value; });
    } else if (const Tensor* w = loader.find(prefix + "weight"); w != nullptr && w->shape() == weight.shape()) {
      const float value = amax(abs(*w)).item<float>();
      loader.defer([this, value] { scale = value; });
    }
    load_tensor(loader, prefix + "weight", weight);
    load_tensor(loader, prefix + "bias", bias);
  }
  Tensor weight, bias;
  float scale = 1.0f;
};
WEFT_MODULE(Scaled);

struct Net : nn::Module {
  Net() {
    a = register_module("a", Scaled());
    b = register_module("b", nn::Linear(3, 2));
  }
  Scaled a{nullptr};
  nn::Linear b{nullptr};
};

}  // namespace

TEST_CASE("state-dict hooks: sub-keys under a parameter are saved in the module's order and loaded back") {
  Net src;
  src.a->scale = 2.5f;
  {
    NoGradGuard g;
    src.a->weight.fill_(1.5);
  }
  const nn::TensorDict state = src.state_dict();
  std::vector<std::string> keys;
  for (const auto& [k, v] : state) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"a.weight", "a.bias", "a.weight.scale", "b.weight", "b.bias"});

  Net dst;
  const nn::IncompatibleKeys result = dst.load_state_dict(state);
  CHECK(result.missing_keys.empty());
  CHECK(result.unexpected_keys.empty());
  CHECK(dst.a->scale == 2.5f);
  CHECK(equal(dst.a->weight, src.a->weight));
  CHECK(equal(dst.b->weight, src.b->weight));
}

TEST_CASE("state-dict hooks: a checkpoint without the sub-key loads by deriving it; strict still sees every key") {
  Net dst;
  nn::TensorDict plain;
  plain.insert("a.weight", full({2, 3}, -4.0));
  plain.insert("a.bias", zeros({2}));
  for (const auto& [k, v] : nn::Linear(3, 2)->state_dict()) plain.insert("b." + k, v);
  dst.load_state_dict(plain);
  CHECK(dst.a->scale == 4.0f);
  // An unknown sub-key is unexpected, and a failed strict load changes nothing anywhere.
  nn::TensorDict extra = Net().state_dict();
  extra.insert("a.weight.zero_point", zeros({1}));
  const float before = dst.a->scale;
  const Tensor b_before = dst.b->weight.clone();
  CHECK_THROWS_WITH_AS(dst.load_state_dict(extra), doctest::Contains("unexpected keys: 'a.weight.zero_point'"), Error);
  CHECK(dst.a->scale == before);
  CHECK(equal(dst.b->weight, b_before));
  const nn::IncompatibleKeys loose = dst.load_state_dict(extra, false);
  CHECK(loose.unexpected_keys == std::vector<std::string>{"a.weight.zero_point"});
  CHECK(dst.a->scale == 1.0f);
}

TEST_CASE("state-dict hooks: an error reported by a hook fails the load before any change") {
  Net dst;
  nn::TensorDict bad = Net().state_dict();
  nn::TensorDict with_bad_scale;
  for (const auto& [k, v] : bad) with_bad_scale.insert(k, k == "a.weight.scale" ? zeros({3}) : full(v.shape(), 7.0));
  CHECK_THROWS_WITH_AS(dst.load_state_dict(with_bad_scale), doctest::Contains("'a.weight.scale' must hold one value"),
                       Error);
  CHECK(amax(abs(dst.b->bias)).item<double>() != 7.0);
  CHECK(dst.a->scale == 1.0f);
}
