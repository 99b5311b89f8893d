// Linear8bitLt against bitsandbytes.nn.Linear8bitLt (tests/precision/data/bnb_linear8bit_*): its
// int8 checkpoints load strictly and save back byte for byte, a float checkpoint quantizes on
// load into exactly its state dict, forward is bit-identical (outlier decomposition included) and
// the input gradient agrees; int8 training keeps a trainable float weight with gradients.
#include <doctest/doctest.h>

#include "precision/quant/linear_8bit.h"
#include "precision/quant/llm_int8.h"
#include "quant_test_helpers.h"

using namespace weft;
using namespace weft::precision::quant;
using quant_test::check_bitwise;
using quant_test::get;

namespace {

struct LayerCase {
  const char* name;
  int64_t in, out;
  bool bias;
  double threshold;
  DType dtype;  // the input's (bitsandbytes converts the bias to it in forward)
};

const LayerCase kCases[] = {
    {"linear8bit_t6", 48, 20, true, 6.0, kFloat16},
    {"linear8bit_t0", 40, 12, false, 0.0, kFloat32},
};

const nn::TensorDict& bnb_state(const LayerCase& c) { return quant_test::golden(std::string("bnb_") + c.name); }
Tensor case_io(const LayerCase& c, const std::string& what) { return get("bnb_linear_io", std::string(c.name) + "." + what); }

Linear8bitLt make_layer(const LayerCase& c) {
  TensorFrameGuard frame(TensorFrame{c.dtype, {}, {}});
  return Linear8bitLt(c.in, c.out, c.bias, Linear8bitLtOptions{false, c.threshold});
}

}  // namespace

TEST_CASE("Linear8bitLt loads bitsandbytes' int8 checkpoints strictly and saves them back byte for byte") {
  for (const LayerCase& c : kCases) {
    INFO(c.name);
    Linear8bitLt layer = make_layer(c);
    const nn::IncompatibleKeys keys = layer->load_state_dict(bnb_state(c));
    CHECK(keys.missing_keys.empty());
    CHECK(keys.unexpected_keys.empty());
    const nn::TensorDict saved = layer->state_dict();
    CHECK(saved.size() == bnb_state(c).size());
    for (const auto& entry : bnb_state(c)) {
      const auto& key = entry.first;  // a named reference: clang 14 refuses bindings in doctest's lambdas
      const auto& tensor = entry.second;
      REQUIRE_MESSAGE(saved.contains(key), key);
      CHECK(saved.at(key).shape() == tensor.shape());
      check_bitwise(saved.at(key), tensor, key);
    }
  }
}

TEST_CASE("Linear8bitLt quantizes a float checkpoint on load into bitsandbytes' int8 weight and SCB") {
  for (const LayerCase& c : kCases) {
    INFO(c.name);
    Linear8bitLt layer = make_layer(c);
    nn::TensorDict d;
    d.insert("weight", case_io(c, "float.weight").to(kFloat32));
    if (c.bias) d.insert("bias", case_io(c, "float.bias").to(kFloat32));
    layer->load_state_dict(d);
    const nn::TensorDict saved = layer->state_dict();
    std::vector<std::string> keys;
    for (const auto& [key, tensor] : saved) keys.push_back(key);
    CHECK(keys == (c.bias ? std::vector<std::string>{"weight", "bias", "SCB", "weight_format"}
                          : std::vector<std::string>{"weight", "SCB", "weight_format"}));
    check_bitwise(saved.at("weight"), bnb_state(c).at("weight"), "weight");
    check_bitwise(saved.at("SCB"), bnb_state(c).at("SCB"), "SCB");
    check_bitwise(saved.at("weight_format"), bnb_state(c).at("weight_format"), "weight_format");
  }
}

TEST_CASE("Linear8bitLt forward equals bitsandbytes bit for bit; the input gradient agrees") {
  for (const LayerCase& c : kCases) {
    INFO(c.name);
    Linear8bitLt layer = make_layer(c);
    layer->load_state_dict(bnb_state(c));
    for (const CpuIsa isa : cpu_isas_supported()) {
      CpuIsaGuard guard(isa);
      const Tensor x = case_io(c, "x").detach().clone().requires_grad_(true);
      const Tensor y = layer(x);
      check_bitwise(y, case_io(c, "y"), std::string("forward at ") + std::string(cpu_isa_name(isa)));
      sum(y.to(kFloat32)).backward();
      // bitsandbytes multiplies the gradient in the input's dtype; weft in float32, then rounds.
      const Tensor expected = case_io(c, "x_grad");
      CHECK(quant_test::max_abs_diff(x.grad(), expected) <= 2e-3 * quant_test::max_abs(expected));
      if (c.bias) CHECK(quant_test::max_abs_diff(layer->bias.grad(), full({c.out}, 5.0)) == 0.0);
      layer->zero_grad();
    }
  }
}

TEST_CASE("Linear8bitLt int8 training: a trainable float weight, quantized each step, with gradients") {
  manual_seed(4);
  Linear8bitLt layer(32, 8, true, Linear8bitLtOptions{true, 6.0});
  CHECK(layer->weight.dtype() == kFloat32);
  CHECK(layer->weight.requires_grad());
  const Tensor x = randn({5, 32}).requires_grad_(true);
  const Tensor y = layer(x);
  // The forward is the int8 product of the freshly quantized weight.
  const Int8Rows qw = int8_vectorwise_quant(layer->weight.detach().to(kFloat16));
  const Int8Rows qx = int8_vectorwise_quant(x.detach().to(kFloat16), 6.0);
  CHECK(equal(y, int8_mixed_scaled_mm(x.detach(), qx, qw.codes, qw.stats, layer->bias.detach())));
  const Tensor g = randn({5, 8});
  y.backward(g);
  CHECK(allclose(layer->weight.grad(), matmul(g.t(), x.detach()), 1e-5, 1e-6));
  CHECK(allclose(layer->bias.grad(), sum(g, {0}), 1e-6, 1e-6));
  CHECK(allclose(x.grad(), matmul(g, int8_vectorwise_dequant(qw.codes, qw.stats)), 1e-5, 1e-6));
  // A weight written in place behind autograd's back (as fused optimizers do) is quantized afresh.
  layer->weight.data<float>()[5] += 1.0f;
  const Int8Rows moved = int8_vectorwise_quant(layer->weight.detach().to(kFloat16));
  {
    NoGradGuard no_grad;
    CHECK(equal(layer(x), int8_mixed_scaled_mm(x.detach(), qx, moved.codes, moved.stats, layer->bias.detach())));
  }
  // Its state dict is the float weight and bias, as bitsandbytes' has_fp16_weights layer.
  std::vector<std::string> keys;
  for (const auto& [key, tensor] : layer->state_dict()) keys.push_back(key);
  CHECK(keys == std::vector<std::string>{"weight", "bias"});
  // A quantized checkpoint does not load into it.
  CHECK_THROWS_WITH_AS(layer->load_state_dict(bnb_state(kCases[0])), doctest::Contains("int8 training) is not supported"),
                       Error);
}

TEST_CASE("Linear8bitLt refuses malformed checkpoints and options, changing nothing") {
  const LayerCase& c = kCases[0];
  Linear8bitLt layer = make_layer(c);
  layer->load_state_dict(bnb_state(c));
  const Tensor before = layer->weight.clone();
  auto with = [&](const std::string& key, const Tensor& value) {
    nn::TensorDict d;
    for (const auto& [k, v] : bnb_state(c)) d.insert(k, k == key ? value : v);
    return d;
  };
  CHECK_THROWS_WITH_AS(layer->load_state_dict(with("weight_format", ones({}, kUInt8))),
                       doctest::Contains("only 'row' weight format is supported"), Error);
  CHECK_THROWS_WITH_AS(layer->load_state_dict(with("SCB", zeros({19}))), doctest::Contains("must hold 20 float32 row scales"),
                       Error);
  CHECK_THROWS_WITH_AS(layer->load_state_dict(with("weight", full({20, 48}, -128.0, kInt8))),
                       doctest::Contains("holds -128"), Error);
  CHECK_THROWS_WITH_AS(layer->load_state_dict(with("weight", zeros({20, 48}, kInt32))),
                       doctest::Contains("must be int8 codes of shape (20, 48)"), Error);
  CHECK(equal(layer->weight, before));
  CHECK_THROWS_WITH_AS(Linear8bitLt(4, 4, true, Linear8bitLtOptions{false, -1.0}),
                       doctest::Contains("threshold must be >= 0"), Error);
  CHECK(layer->to_string() == "Linear8bitLt(in_features=48, out_features=20, bias=true, has_fp16_weights=false, threshold=6)");
  CHECK(layer->weight_bytes() == 20 * 48 + 20 * 4);
}
