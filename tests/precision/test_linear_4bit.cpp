// Linear4bit against bitsandbytes.nn.Linear4bit (tests/precision/data/bnb_linear4bit_*, from
// scripts/golden_bnb.py): its checkpoints load strictly and save back byte for byte, a float
// checkpoint quantizes on load into exactly bitsandbytes' state dict, and forward and the input
// gradient agree with bitsandbytes' on the same input.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "precision/quant/gemm_4bit.h"
#include "precision/quant/linear_4bit.h"
#include "precision/quant/quant_state.h"
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
  QuantKind type;
  bool nested;
};

const LayerCase kCases[] = {
    {"linear4bit_nf4_dq", 96, 40, true, QuantKind::NF4, true},
    {"linear4bit_nf4", 64, 24, false, QuantKind::NF4, false},
    {"linear4bit_fp4", 50, 7, true, QuantKind::FP4, false},
    {"linear4bit_fp4_dq", 130, 136, true, QuantKind::FP4, true},
};

const nn::TensorDict& bnb_state(const LayerCase& c) { return quant_test::golden(std::string("bnb_") + c.name); }
Tensor case_io(const LayerCase& c, const std::string& what) { return get("bnb_linear_io", std::string(c.name) + "." + what); }

// A layer configured as the case's bitsandbytes layer (the format then comes from the file anyway).
Linear4bit make_layer(const LayerCase& c) {
  return Linear4bit(c.in, c.out, c.bias, Linear4bitOptions{c.type, c.nested, 64, kFloat32});
}

nn::TensorDict float_checkpoint(const LayerCase& c) {
  nn::TensorDict d;
  d.insert("weight", case_io(c, "float.weight").to(kFloat32));
  if (c.bias) d.insert("bias", case_io(c, "float.bias").to(kFloat32));
  return d;
}

}  // namespace

TEST_CASE("Linear4bit loads bitsandbytes' checkpoints strictly and saves them back byte for byte") {
  for (const LayerCase& c : kCases) {
    INFO(c.name);
    Linear4bit layer = make_layer(c);
    const nn::IncompatibleKeys keys = layer->load_state_dict(bnb_state(c));
    CHECK(keys.missing_keys.empty());
    CHECK(keys.unexpected_keys.empty());
    CHECK(layer->quant_state().type == c.type);
    CHECK(layer->quant_state().nested == c.nested);
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

TEST_CASE("Linear4bit quantizes a float checkpoint on load into exactly bitsandbytes' state dict") {
  for (const LayerCase& c : kCases) {
    INFO(c.name);
    Linear4bit layer = make_layer(c);
    layer->load_state_dict(float_checkpoint(c));
    const nn::TensorDict saved = layer->state_dict();
    std::vector<std::string> keys;
    for (const auto& [key, tensor] : saved) keys.push_back(key);
    std::vector<std::string> expected = {"weight"};
    if (c.bias) expected.push_back("bias");
    expected.insert(expected.end(), {"weight.absmax", "weight.quant_map"});
    if (c.nested) expected.insert(expected.end(), {"weight.nested_absmax", "weight.nested_quant_map"});
    expected.push_back(std::string("weight.quant_state.bitsandbytes__") + (c.type == QuantKind::NF4 ? "nf4" : "fp4"));
    CHECK(keys == expected);  // bitsandbytes' state_dict order
    for (const auto& [key, tensor] : bnb_state(c)) {
      if (key == "bias") continue;  // bitsandbytes' bias is the float one, compared below
      check_bitwise(saved.at(key), tensor, key);
    }
    if (c.bias) check_bitwise(saved.at("bias"), bnb_state(c).at("bias"), "bias");
  }
}

TEST_CASE("Linear4bit forward and input gradient agree with bitsandbytes") {
  for (const LayerCase& c : kCases) {
    INFO(c.name);
    Linear4bit layer = make_layer(c);
    layer->load_state_dict(bnb_state(c));
    const Tensor x = case_io(c, "x").detach().clone().requires_grad_(true);
    const Tensor y = layer(x);
    const Tensor expected = case_io(c, "y");
    const double scale = quant_test::max_abs(expected);
    // The default product is bitsandbytes': the dequantized weight times x in float32 (the exact
    // fused kernel for 64 inputs, dequantized rows for the others), so within float32 sums.
    CHECK(quant_test::max_abs_diff(y, expected) <= 1e-5 * scale);
    {
      // Asked for by name, the int8 product rounds activations and table to int8 (about 1 % of
      // max|y|) where the fused int8 kernel takes the shape (not 50 and 130 inputs: 32 offsets
      // into a block of 64); it is never more exact than the default.
      Linear4bitOptions options{c.type, c.nested, 64, kFloat32};
      options.product = Product4bit::Int8Activations;
      Linear4bit int8(c.in, c.out, c.bias, options);
      int8->load_state_dict(bnb_state(c));
      const double tolerance = (gemm_4bit_fused_supported(c.in, 64) ? 2e-2 : 1e-5) * scale;
      const double diff = quant_test::max_abs_diff(int8(x.detach()), expected);
      CHECK(diff <= tolerance);
      if (gemm_4bit_fused_supported(c.in, 64)) CHECK(diff > 1e-5 * scale);
      CHECK(int8->to_string().find("product=int8_activations") != std::string::npos);
    }
    sum(y).backward();
    CHECK(quant_test::max_abs_diff(x.grad(), case_io(c, "x_grad")) <= 1e-5 * quant_test::max_abs(case_io(c, "x_grad")));
    if (c.bias) CHECK(equal(layer->bias.grad(), full({c.out}, static_cast<double>(x.size(0)))));
    CHECK_FALSE(layer->weight.requires_grad());
    CHECK(layer->weight.dtype() == kUInt8);
  }
}

TEST_CASE("Linear4bit with a bfloat16 compute dtype: bfloat16 products above 16 rows, the input gradient exact") {
  manual_seed(41);
  Linear4bit layer(256, 40, true, Linear4bitOptions{QuantKind::NF4, true, 64, kBFloat16});
  const Tensor x = randn({3, 8, 256}).requires_grad_(true);  // 24 rows: weft's bfloat16 GEMM
  const Tensor y = layer(x);
  CHECK(y.dtype() == kFloat32);
  CHECK(y.shape() == Shape({3, 8, 40}));
  // As bitsandbytes computes it in bfloat16: x and W rounded to bfloat16, float32 sums, the bias
  // added and the result rounded to bfloat16 (2^-9 of |y|).
  const Tensor xb = x.detach().reshape({24, 256}).to(kBFloat16).to(kFloat64);
  const Tensor wb = layer->dequantize_weight().to(kBFloat16).to(kFloat64);
  const Tensor expected = add(matmul(xb, wb.t()), layer->bias.detach().to(kBFloat16).to(kFloat64));
  const Tensor magnitude = matmul(abs(xb), abs(wb).t());
  const auto e = expected.to_vector<double>(), mag = magnitude.to_vector<double>();
  const auto got = y.reshape({24, 40}).to_vector<double>();
  int64_t outside = 0;
  for (size_t i = 0; i < got.size(); ++i)
    outside += std::fabs(got[i] - e[i]) > std::ldexp(std::fabs(e[i]), -8) + 2e-5 * mag[i];
  CHECK(outside == 0);
  // dL/dx = g · W with W dequantized exactly, in float32.
  sum(y).backward();
  const Tensor want = matmul(ones({24, 40}, kFloat64), layer->dequantize_weight().to(kFloat64));
  CHECK(quant_test::max_abs_diff(x.grad().reshape({24, 256}), want) <= 1e-5 * quant_test::max_abs(want));
}

TEST_CASE("Linear4bit: construction quantizes at once, in the frame's dtype; the format options apply") {
  manual_seed(3);
  nn::Linear reference(128, 16);
  manual_seed(3);
  Linear4bit layer(128, 16, true, Linear4bitOptions{QuantKind::NF4, false, 128, std::nullopt});
  // The same random draws as a Linear, quantized: dequantized within NF4's error of them.
  const Tensor deq = layer->dequantize_weight();
  CHECK(deq.shape() == Shape{16, 128});
  CHECK(equal(layer->bias, reference->bias));
  CHECK(mean(abs(sub(deq, reference->weight))).item<double>() < 0.1 * mean(abs(reference->weight)).item<double>());
  CHECK(layer->weight.shape() == Shape{1024, 1});
  CHECK(layer->quant_state().blocksize == 128);
  // 2048 values: 1024 code bytes + 16 float32 absmax.
  CHECK(layer->weight_bytes() == 1024 + 64);
  CHECK(layer->to_string() ==
        "Linear4bit(in_features=128, out_features=16, bias=true, quant_type=nf4, blocksize=128, compress_statistics=false, "
        "product=exact)");
  {
    TensorFrameGuard bf16(TensorFrame{kBFloat16, {}, {}});
    Linear4bit half(64, 4);
    CHECK(half->bias.dtype() == kBFloat16);
    CHECK(half->dequantize_weight().dtype() == kBFloat16);
    CHECK(half(ones({2, 64}, kBFloat16)).dtype() == kBFloat16);
  }
  // from_linear copies the bias and quantizes the weight; it draws no random numbers.
  manual_seed(9);
  const double before = rand({1}).item<double>();
  manual_seed(9);
  auto converted = Linear4bitImpl::from_linear(*reference, Linear4bitOptions{QuantKind::FP4, true, 64, {}});
  CHECK(rand({1}).item<double>() == before);
  CHECK(equal(converted->bias, reference->bias));
  auto [packed, state] = quantize_4bit(reference->weight.detach(), QuantKind::FP4, 64, true);
  CHECK(equal(converted->weight, packed));
}

TEST_CASE("Linear4bit refuses malformed checkpoints and inputs, changing nothing") {
  const LayerCase& c = kCases[0];
  Linear4bit layer = make_layer(c);
  layer->load_state_dict(bnb_state(c));
  const Tensor before = layer->weight.clone();
  auto with = [&](const std::string& key, const Tensor& value) {
    nn::TensorDict d;
    for (const auto& [k, v] : bnb_state(c)) d.insert(k, k == key ? value : v);
    return d;
  };
  auto json = [](const std::string& text) {
    Tensor t = empty({static_cast<int64_t>(text.size())}, kUInt8);
    std::memcpy(t.data_ptr(), text.data(), text.size());
    return t;
  };
  const std::string qs = "weight.quant_state.bitsandbytes__nf4";
  CHECK_THROWS_WITH_AS(layer->load_state_dict(with(qs, json("{\"quant_type\": \"nf4\""))),
                       doctest::Contains("the quant_state JSON is malformed"), Error);
  CHECK_THROWS_WITH_AS(
      layer->load_state_dict(with(qs, json("{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"float32\", "
                                           "\"shape\": [40, 95]}"))),
      doctest::Contains("expected 1900 uint8 codes"), Error);
  CHECK_THROWS_WITH_AS(layer->load_state_dict(with("weight.absmax", zeros({3}))),
                       doctest::Contains("expected 60 absmax values of dtype uint8"), Error);
  CHECK_THROWS_WITH_AS(layer->load_state_dict(with("weight.nested_quant_map", zeros({256}))),
                       doctest::Contains("nested_quant_map is not the signed dynamic map"), Error);
  nn::TensorDict wrong_float;
  wrong_float.insert("weight", zeros({40, 95}));
  wrong_float.insert("bias", zeros({40}));
  CHECK_THROWS_WITH_AS(layer->load_state_dict(wrong_float), doctest::Contains("must be a floating (40, 96) weight"),
                       Error);
  CHECK(equal(layer->weight, before));
  CHECK_THROWS_WITH_AS(layer(ones({2, 95})), doctest::Contains("expected a floating input (*, 96)"), Error);
  CHECK_THROWS_WITH_AS(Linear4bit(10, 10, true, Linear4bitOptions{QuantKind::NF4, false, 48, {}}),
                       doctest::Contains("block size must be a power of two"), Error);
}

TEST_CASE("quant_state JSON: written as Python's json.dumps writes it; floats as repr()") {
  CHECK(python_float_repr(0.10043131560087204) == "0.10043131560087204");
  CHECK(python_float_repr(1e-05) == "1e-05");
  CHECK(python_float_repr(0.0001) == "0.0001");
  CHECK(python_float_repr(-2.5e-07) == "-2.5e-07");
  CHECK(python_float_repr(1e16) == "1e+16");
  CHECK(python_float_repr(123456789012345.0) == "123456789012345.0");
  CHECK(python_float_repr(3.0) == "3.0");
  CHECK(python_float_repr(-0.0) == "-0.0");
  QuantState s;
  s.type = QuantKind::FP4;
  s.blocksize = 128;
  s.dtype = kBFloat16;
  s.shape = {3, 4};
  CHECK(quant_state_json(s) == "{\"quant_type\": \"fp4\", \"blocksize\": 128, \"dtype\": \"bfloat16\", \"shape\": [3, 4]}");
  QuantState back;
  parse_quant_state_json(quant_state_json(s), back);
  CHECK(back.type == QuantKind::FP4);
  CHECK(back.blocksize == 128);
  CHECK(back.dtype == kBFloat16);
  CHECK(back.shape == Shape{3, 4});
  CHECK_FALSE(back.nested);
  CHECK_THROWS_WITH_AS(parse_quant_state_json("{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"float32\", "
                                              "\"shape\": [1], \"nested_offset\": 0.5}", back),
                       doctest::Contains("needs nested_blocksize, nested_dtype and nested_offset"), Error);
  CHECK_THROWS_WITH_AS(parse_quant_state_json("{\"quant_type\": \"int4\"}", back),
                       doctest::Contains("quant_type must be 'nf4' or 'fp4'"), Error);
}
