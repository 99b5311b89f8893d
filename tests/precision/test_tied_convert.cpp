// Weight tying under every precision plugin's convert_module: after the conversion the two uses
// of a tied tensor are still one tensor, in the dtype the plugin gives the model's floating
// weights. Plugins that swap Linears (bitsandbytes, transformer-engine) keep a Linear whose weight
// another module shares (a quantized or FP8 copy would cut the tie) and swap the others.
#include <doctest/doctest.h>

#include "../nn/tied_model.h"
#include "precision/all.h"

using namespace weft;

namespace {

// The exact dynamic type (typeid of a named reference: clang warns on typeid(*pointer)).
bool is_plain_linear(const nn::Module& m) { return typeid(m) == typeid(nn::LinearImpl); }

// What convert_module must leave: one tensor under both names, in `dtype`.
void check_tied(const test::TiedLM& model, DType dtype) {
  CHECK(model->head->weight.is_same(model->wte->weight));
  CHECK(model->wte->weight.dtype() == dtype);
  CHECK(model->parameters().size() == 3);
}

void check_tied(const test::HeadOwnedLM& model, DType dtype) {
  const auto head = std::dynamic_pointer_cast<nn::LinearImpl>(model->named_children().at(0).second);
  REQUIRE(head != nullptr);
  CHECK(is_plain_linear(*head));  // kept, not swapped
  CHECK(head->weight.is_same(model->emb->weight));
  CHECK(head->weight.dtype() == dtype);
}

}  // namespace

TEST_CASE("convert_module of every make_precision plugin keeps a tie, in the plugin's weight dtype") {
  const std::vector<std::pair<std::string, DType>> cases = {
      {"32-true", kFloat32},         {"64-true", kFloat64},           {"16-true", kFloat16},
      {"bf16-true", kBFloat16},      {"bf16-mixed", kFloat32},        {"transformer-engine", kBFloat16},
      {"transformer-engine-float16", kFloat16}};
  for (const auto& entry : cases) {
    const std::string& name = entry.first;  // not a structured binding: clang 14's CAPTURE refuses those
    const DType dtype = entry.second;
    CAPTURE(name);
    auto plugin = precision::make_precision(name, "cpu");
    auto tied = test::make_tied_lm(1);
    const Tensor values = tied->wte->weight.detach().to(dtype);
    plugin->convert_module(*tied);
    check_tied(tied, dtype);
    CHECK(equal(tied->head->weight, values));
    // The converted model still runs, and the tie still gets both uses' gradients.
    sum(tied(from_vector(std::vector<int64_t>{1, 2}, {2})).to(kFloat32)).backward();
    CHECK(tied->head->weight.grad().is_same(tied->wte->weight.grad()));

    test::HeadOwnedLM owned;
    plugin->convert_module(*owned);
    check_tied(owned, dtype);
  }
}

// HeadOwnedLM's layout in widths that FP8 execution takes (multiples of 16).
struct WideHeadOwnedImpl : nn::Module {
  nn::Linear head{nullptr};
  test::TiedEmbedding emb{nullptr};
  nn::Linear fc{nullptr};
  WideHeadOwnedImpl() {
    head = register_module("head", nn::Linear(16, 32, false));
    emb = register_module("emb", test::TiedEmbedding(head->weight));
    fc = register_module("fc", nn::Linear(16, 16));
  }
};

TEST_CASE("transformer-engine swaps the untied Linear for an FP8 one and keeps the tied head") {
  precision::TransformerEnginePrecision plugin({});
  auto model = std::make_shared<WideHeadOwnedImpl>();
  plugin.convert_module(*model);
  const auto head = model->named_children().at(0).second;
  const auto fc = model->named_children().at(2).second;
  CHECK(is_plain_linear(*head));
  CHECK(model->head->weight.is_same(model->emb->weight));
  CHECK(model->head->weight.dtype() == kBFloat16);
  CHECK_FALSE(is_plain_linear(*fc));
  CHECK(dynamic_cast<nn::LinearImpl*>(fc.get()) != nullptr);
}

TEST_CASE("bitsandbytes quantizes the untied Linear and keeps the tied head in floating point") {
  for (const std::string mode : {"nf4", "nf4-dq", "fp4", "int8-training", "int8"}) {
    CAPTURE(mode);
    precision::BitsandbytesPrecision plugin(mode, mode.starts_with("int8") ? kFloat16 : kBFloat16);
    test::HeadOwnedLM owned;
    plugin.convert_module(*owned);
    check_tied(owned, kFloat32);  // bitsandbytes leaves unquantized layers as they are
    const auto fc = owned->named_children().at(2).second;
    CHECK_FALSE(is_plain_linear(*fc));  // a quantized layer

    auto tied = test::make_tied_lm(1);  // its only Linear is untied: quantized; the tie untouched
    plugin.convert_module(*tied);
    check_tied(tied, kFloat32);
    const auto tied_fc = tied->named_children().at(1).second;
    CHECK_FALSE(is_plain_linear(*tied_fc));
  }
}

TEST_CASE("the FSDP and DeepSpeed precision tables' convert_module dtype keeps a tie") {
  for (const std::string mode : {"32-true", "16-true", "bf16-true", "bf16-mixed"}) {
    CAPTURE(mode);
    const std::optional<DType> fsdp = precision::FSDPPrecision(mode).convert_module_dtype();
    const std::optional<DType> deepspeed = precision::DeepSpeedPrecision(mode).convert_module_dtype();
    CHECK(fsdp == deepspeed);
    auto tied = test::make_tied_lm(1);
    if (fsdp) tied->to(*fsdp);
    check_tied(tied, fsdp.value_or(kFloat32));
  }
}
