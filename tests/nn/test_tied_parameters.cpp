// Tied parameters (one tensor registered by two modules, as a GPT's token embedding and LM head):
// the gradient is the sum of both uses, parameters() lists the tensor once under its first name,
// state_dict() under every name, and loading keeps the tie and refuses names that disagree.
#include <doctest/doctest.h>

#include "nn/all.h"
#include "tied_model.h"

using namespace weft;
using test::kVocab;
using test::kWidth;

namespace {

std::vector<std::string> keys_of(const nn::TensorDict& dict) {
  std::vector<std::string> out;
  for (const auto& [name, t] : dict) out.push_back(name);
  return out;
}

Tensor ids() { return from_vector(std::vector<int64_t>{3, 0, 6, 3, 2}, {5}); }

// A fixed linear functional of the logits, so every output element has its own weight.
Tensor loss_of(const Tensor& logits) {
  return (logits * mul(arange(0, static_cast<double>(logits.numel()), 1.0, TensorOptions(kFloat32)).view(logits.shape()), 0.01)).sum();
}

}  // namespace

TEST_CASE("a tied parameter's gradient is the sum of both uses' gradients") {
  auto tied = test::make_tied_lm(5);
  loss_of(tied(ids())).backward();

  // The same model with the head's weight an independent copy: its two gradients, summed, are
  // what the tied tensor must get (the engine adds the two contributions before accumulating).
  auto untied = test::make_tied_lm(5);
  untied->replace_module("head", std::make_shared<test::TiedHeadImpl>(untied->wte->weight.detach().clone()));
  auto head = std::dynamic_pointer_cast<test::TiedHeadImpl>(untied->named_children().at(2).second);
  const Tensor logits = head->forward(tanh(untied->fc(untied->wte(ids()))));
  loss_of(logits).backward();
  const Tensor expected = untied->wte->weight.grad() + head->weight.grad();

  CHECK(tied->wte->weight.grad().is_same(tied->head->weight.grad()));
  CHECK(allclose(tied->wte->weight.grad(), expected, 1e-6, 1e-7));
  // Rows of ids never looked up still get the head's gradient: only the head's use reaches them.
  CHECK(allclose(tied->wte->weight.grad()[1], head->weight.grad()[1], 1e-6, 1e-7));
  CHECK(untied->wte->weight.grad()[1].abs().sum().item<float>() == 0.0f);
}

TEST_CASE("a tied tensor is one parameter under its first name and in state_dict under every name") {
  auto model = test::make_tied_lm(1);
  CHECK(model->parameters().size() == 3);
  std::vector<std::string> names;
  for (const auto& [name, p] : model->named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"wte.weight", "fc.weight", "fc.bias"});

  const nn::TensorDict state = model->state_dict();
  CHECK(keys_of(state) == std::vector<std::string>{"wte.weight", "fc.weight", "fc.bias", "head.weight"});
  CHECK(state.at("wte.weight").data_ptr() == state.at("head.weight").data_ptr());
  CHECK(nn::tied_groups(state) == std::vector<std::vector<std::string>>{{"head.weight", "wte.weight"}});
  // Copies are not ties, nor are different views of one storage.
  nn::TensorDict copies;
  copies.insert("a", state.at("wte.weight").clone());
  copies.insert("b", state.at("wte.weight").clone());
  copies.insert("c", state.at("fc.weight")[0]);
  copies.insert("d", state.at("fc.weight")[1]);
  CHECK(nn::tied_groups(copies).empty());
}

TEST_CASE("to(dtype) converts a tied tensor once and keeps the tie") {
  auto model = test::make_tied_lm(2);
  const Tensor expected = model->wte->weight.to(kFloat64);
  model->to(kFloat64);
  CHECK(model->head->weight.is_same(model->wte->weight));
  CHECK(model->head->weight.dtype() == kFloat64);
  CHECK(equal(model->head->weight, expected));
}

TEST_CASE("loading a tied model: both names agreeing, one name completed, disagreeing names refused") {
  auto source = test::make_tied_lm(3);
  auto model = test::make_tied_lm(4);

  SUBCASE("both names, from another model's state_dict") {
    model->load_state_dict(source->state_dict());
    CHECK(equal(model->head->weight, source->wte->weight));
    CHECK(model->head->weight.is_same(model->wte->weight));
  }
  SUBCASE("one name: missing for a strict load (as PyTorch), given back by complete_tied_names") {
    nn::TensorDict one;
    for (const auto& [name, t] : source->state_dict())
      if (name != "wte.weight") one.insert(name, t.clone());
    CHECK_THROWS_WITH_AS(model->load_state_dict(one),
                         "[load_state_dict] cannot load the state dict into TiedLM:\n  missing keys: 'wte.weight'",
                         Error);
    const nn::TensorDict completed = nn::complete_tied_names(*model, one);
    CHECK(keys_of(completed) == std::vector<std::string>{"fc.weight", "fc.bias", "head.weight", "wte.weight"});
    CHECK(completed.at("wte.weight").is_same(completed.at("head.weight")));
    model->load_state_dict(completed);
    CHECK(equal(model->wte->weight, source->wte->weight));
    CHECK(model->head->weight.is_same(model->wte->weight));
  }
  SUBCASE("equal copies under both names load; different values are refused, nothing copied") {
    nn::TensorDict copies;
    for (const auto& [name, t] : source->state_dict()) copies.insert(name, t.clone());
    model->check_state_dict(copies);
    model->load_state_dict(copies);
    CHECK(equal(model->wte->weight, source->wte->weight));

    const Tensor before = model->wte->weight.detach().clone();
    nn::TensorDict differing;
    for (const auto& [name, t] : source->state_dict()) differing.insert(name, name == "head.weight" ? t + 1 : t.clone());
    const std::string message = "[load_state_dict] cannot load the state dict into TiedLM:\n  'head.weight' and "
                                "'wte.weight' are one tied tensor in the module, but the state dict gives them "
                                "different values";
    CHECK_THROWS_WITH_AS(model->check_state_dict(differing), message.c_str(), Error);
    CHECK_THROWS_WITH_AS(model->load_state_dict(differing), message.c_str(), Error);
    CHECK(equal(model->wte->weight, before));
  }
}

TEST_CASE("complete_tied_names leaves untied names and complete dicts alone") {
  auto model = test::make_tied_lm(1);
  const nn::TensorDict full = model->state_dict();
  CHECK(keys_of(nn::complete_tied_names(*model, full)) == keys_of(full));
  nn::TensorDict only_fc;
  only_fc.insert("fc.bias", full.at("fc.bias"));
  CHECK(keys_of(nn::complete_tied_names(*model, only_fc)) == std::vector<std::string>{"fc.bias"});
  CHECK(kVocab * kWidth == full.at("head.weight").numel());
}
