// Quantized layers built to be loaded (a skip-init frame: from_pretrained) and their memory: the
// stand-in weight is zeros in pages that are not resident (tensor/cpu/exact_memory.h's
// zero_pages) — it computes as a zero weight, and loading a float checkpoint gives exactly the
// layer an ordinary build loads. The int8 layer keeps its codes as the only copy: its state dict
// after forwards at a token's rows and at a prompt's round-trips byte for byte.
#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "precision/all.h"
#include "precision/fp8/fp8_weight_linear.h"
#include "precision/quant/linear_4bit.h"
#include "precision/quant/linear_8bit.h"
#include "tensor/all.h"
#include "resident_pages.h"

using namespace weft;
using namespace weft::precision;
using namespace weft::precision::quant;

namespace {

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && equal(a.reshape({-1}).contiguous().view(kUInt8), b.reshape({-1}).contiguous().view(kUInt8));
}

void check_same_state(const nn::Module& got, const nn::Module& expected) {
  const nn::TensorDict g = got.state_dict(), e = expected.state_dict();
  REQUIRE(g.size() == e.size());
  for (const auto& entry : e) {
    const std::string& name = entry.first;  // not a structured binding: INFO captures it (clang 14)
    INFO(name);
    REQUIRE(g.find(name) != nullptr);
    CHECK(bitwise_equal(*g.find(name), entry.second));
  }
}

constexpr int64_t kIn = 512, kOut = 384;

nn::TensorDict float_checkpoint() {
  manual_seed(21);
  nn::TensorDict d;
  d.insert("weight", mul(randn({kOut, kIn}), 0.05));
  d.insert("bias", mul(randn({kOut}), 0.1));
  return d;
}

template <class Make>
void check_built_to_load(Make make, const std::function<Tensor(nn::Module&)>& dequantized) {
  std::shared_ptr<nn::LinearImpl> stand_in;
  {
    TensorFrameGuard skip(TensorFrame{kFloat32, std::nullopt, true});
    stand_in = make();
  }
  // Nothing of the stand-in weight is resident, and it computes as zeros: the output is the bias.
  CHECK(resident_pages(stand_in->weight) == 0);
  const Tensor w = dequantized(*stand_in);
  CHECK(w.shape() == Shape({kOut, kIn}));
  CHECK(equal(w, zeros({kOut, kIn})));
  manual_seed(4);
  const Tensor x = randn({3, kIn});
  stand_in->bias.detach().copy_(randn({kOut}));  // skip-init left it unwritten
  CHECK(equal(stand_in->forward(x), stand_in->bias.detach().unsqueeze(0).expand({3, kOut}).contiguous()));
  // A float checkpoint loads into it exactly as into a layer built the ordinary way.
  const std::shared_ptr<nn::LinearImpl> ordinary = make();
  stand_in->load_state_dict(float_checkpoint());
  ordinary->load_state_dict(float_checkpoint());
  check_same_state(*stand_in, *ordinary);
  CHECK(bitwise_equal(stand_in->forward(x), ordinary->forward(x)));
}

}  // namespace

TEST_CASE("a Linear4bit built to be loaded holds zeros in pages that are not resident, until a checkpoint loads") {
  for (const bool nested : {false, true})
    for (const QuantKind kind : {QuantKind::NF4, QuantKind::FP4}) {
      INFO("nested ", nested, " ", quant_format(kind).name);
      Linear4bitOptions options;
      options.quant_type = kind;
      options.compress_statistics = nested;
      check_built_to_load([&] { return std::make_shared<Linear4bitImpl>(kIn, kOut, true, options); },
                          [](nn::Module& m) { return dynamic_cast<Linear4bitImpl&>(m).dequantize_weight(); });
    }
}

TEST_CASE("an Fp8WeightLinear built to be loaded holds zero codes in pages that are not resident") {
  for (const auto granularity : {Fp8WeightGranularity::PerTensor, Fp8WeightGranularity::PerChannel})
    check_built_to_load(
        [&] { return std::make_shared<Fp8WeightLinearImpl>(kIn, kOut, true, granularity); },
        [](nn::Module& m) { return dynamic_cast<Fp8WeightLinearImpl&>(m).dequantize_weight(); });
}

TEST_CASE("a Linear8bitLt built to be loaded holds zero codes in pages that are not resident") {
  check_built_to_load([] { return std::make_shared<Linear8bitLtImpl>(kIn, kOut, true); },
                      [](nn::Module& m) {
                        auto& layer = dynamic_cast<Linear8bitLtImpl&>(m);
                        return int8_vectorwise_dequant(layer.weight.detach(), layer.scb());
                      });
}

TEST_CASE("Linear8bitLt: after forwards at a token's rows and a prompt's, its state dict round-trips exactly") {
  Linear8bitLt layer(kIn, kOut, true);
  layer->load_state_dict(float_checkpoint());
  const nn::TensorDict before = layer->state_dict();
  manual_seed(9);
  const Tensor token = randn({1, kIn}), prompt = randn({37, kIn});
  const Tensor token_out = layer->forward(token), prompt_out = layer->forward(prompt);
  const nn::TensorDict saved = layer->state_dict();
  for (const auto& entry : before) {
    const std::string& name = entry.first;
    INFO(name);
    CHECK(bitwise_equal(*saved.find(name), entry.second));
  }
  // Loaded into another layer, the codes give the same products.
  Linear8bitLt copy(kIn, kOut, true);
  copy->load_state_dict(saved);
  check_same_state(*copy, *layer);
  CHECK(bitwise_equal(copy->forward(token), token_out));
  CHECK(bitwise_equal(copy->forward(prompt), prompt_out));
  // A token's row is the same product as that row inside a prompt (read in place or packed).
  CHECK(bitwise_equal(layer->forward(prompt.narrow(0, 5, 1)), prompt_out.narrow(0, 5, 1).contiguous()));
}
