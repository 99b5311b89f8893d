// Checkpoints of a model with a tied tensor (one tensor under two state-dict names): written once,
// as Python's safetensors.torch.save_model writes it (the alphabetically first name kept, the
// dropped one recorded in the metadata), and loaded back under both names, as load_model does.
// tests/io/data/tied_save_model.safetensors was written by save_model (scripts/safetensors_interop.py).
#include <doctest/doctest.h>

#include "../nn/tied_model.h"
#include "safetensors_test_helpers.h"

using namespace weft;
using safetensors_test::TempDir;

namespace {

std::vector<std::string> keys_of(const nn::TensorDict& dict) {
  std::vector<std::string> out;
  for (const auto& [name, t] : dict) out.push_back(name);
  return out;
}

// The values scripts/safetensors_interop.py gives its tied model (exact in float32).
Tensor golden(int64_t rows, int64_t cols, double scale, double shift) {
  return add(mul(arange(0, static_cast<double>(rows * cols), 1.0, TensorOptions(kFloat32)), scale), shift)
      .view({rows, cols});
}

}  // namespace

TEST_CASE("save_checkpoint writes a tied tensor once, under its first name, and records the other") {
  TempDir dir;
  auto model = test::make_tied_lm(1);
  io::save_checkpoint(dir / "tied.safetensors", *model, nullptr, {{"step", "3"}});

  const io::SafetensorsFile file = io::load_safetensors(dir / "tied.safetensors");
  CHECK(keys_of(file.tensors) == std::vector<std::string>{"fc.weight", "fc.bias", "head.weight"});
  CHECK(file.metadata == io::SafetensorsMetadata{{"step", "3"}, {"wte.weight", "head.weight"}});
  CHECK(equal(file.tensors.at("head.weight"), model->wte->weight));

  auto loaded = test::make_tied_lm(2);
  const io::SafetensorsMetadata meta = io::load_checkpoint(dir / "tied.safetensors", *loaded, nullptr);
  CHECK(meta == io::SafetensorsMetadata{{"step", "3"}});  // the record is not the caller's
  CHECK(equal(loaded->wte->weight, model->wte->weight));
  CHECK(equal(loaded->fc->weight, model->fc->weight));
  CHECK(loaded->head->weight.is_same(loaded->wte->weight));
}

TEST_CASE("the caller's metadata entry under a dropped name wins over the record, as in Python") {
  TempDir dir;
  auto model = test::make_tied_lm(1);
  io::save_checkpoint(dir / "tied.safetensors", *model, nullptr, {{"wte.weight", "mine"}});
  CHECK(io::load_safetensors(dir / "tied.safetensors").metadata == io::SafetensorsMetadata{{"wte.weight", "mine"}});
  auto loaded = test::make_tied_lm(2);
  CHECK(io::load_checkpoint(dir / "tied.safetensors", *loaded, nullptr) ==
        io::SafetensorsMetadata{{"wte.weight", "mine"}});
  CHECK(equal(loaded->head->weight, model->head->weight));
}

TEST_CASE("a tied model's checkpoint with an optimizer resumes exactly") {
  TempDir dir;
  const Tensor ids = from_vector(std::vector<int64_t>{1, 4, 4, 0}, {4});
  const Tensor targets = from_vector(std::vector<int64_t>{2, 6, 0, 3}, {4});
  auto model = test::make_tied_lm(7);
  optim::Adam adam(model->parameters(), {.lr = 0.05});
  const auto step = [&](test::TiedLM& m, optim::Adam& opt) {
    opt.zero_grad();
    cross_entropy(m(ids), targets).backward();
    opt.step();
  };
  step(model, adam);
  io::save_checkpoint(dir / "ckpt.safetensors", *model, &adam);
  step(model, adam);

  auto resumed = test::make_tied_lm(8);
  optim::Adam resumed_adam(resumed->parameters(), {.lr = 0.05});
  io::load_checkpoint(dir / "ckpt.safetensors", *resumed, &resumed_adam);
  step(resumed, resumed_adam);
  CHECK(equal(resumed->wte->weight, model->wte->weight));
  CHECK(equal(resumed->fc->weight, model->fc->weight));
  CHECK(resumed->head->weight.is_same(resumed->wte->weight));
}

TEST_CASE("a tied model saved by Python's safetensors.torch.save_model loads under both names") {
  const auto path = safetensors_test::data_dir() / "tied_save_model.safetensors";
  const io::SafetensorsFile file = io::load_safetensors(path);
  // save_model kept "head.weight" (sorted first of the pair) and recorded the dropped name.
  CHECK(keys_of(file.tensors) == std::vector<std::string>{"fc.bias", "fc.weight", "head.weight"});
  CHECK(file.metadata == io::SafetensorsMetadata{{"wte.weight", "head.weight"}});

  auto model = test::make_tied_lm(3);
  CHECK(io::load_checkpoint(path, *model, nullptr).empty());
  CHECK(equal(model->wte->weight, golden(test::kVocab, test::kWidth, 0.125, -2.0)));
  CHECK(equal(model->fc->weight, golden(test::kWidth, test::kWidth, 1.0 / 32, -0.375)));
  CHECK(equal(model->fc->bias, golden(1, test::kWidth, 0.25, -0.5).view({test::kWidth})));
  CHECK(model->head->weight.is_same(model->wte->weight));
}
