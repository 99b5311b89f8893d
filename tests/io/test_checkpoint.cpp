// Checkpoints from a model that is not the one being loaded: the error names the model's mismatch
// (the real cause), not the optimizer state that follows from it, and nothing changes.
#include <doctest/doctest.h>

#include "safetensors_test_helpers.h"

using namespace weft;
using safetensors_test::contains;
using safetensors_test::TempDir;

namespace {

// One Adam step on sum(model(x)), so the optimizer holds moments shaped like the model.
void step_once(nn::Sequential& model, optim::Adam& adam, int64_t inputs) {
  sum(model(ones({1, inputs}))).backward();
  adam.step();
}

}  // namespace

TEST_CASE("a checkpoint from a differently shaped model names the shape mismatch, not the optimizer") {
  TempDir dir;
  const auto path = dir / "other_model.ckpt";
  manual_seed(0);
  nn::Sequential saved(nn::Linear(4, 3), nn::ReLU(), nn::Linear(3, 2));
  optim::Adam saved_adam(saved->parameters(), {.lr = 0.1});
  step_once(saved, saved_adam, 4);
  io::save_checkpoint(path, *saved, &saved_adam);

  nn::Sequential model(nn::Linear(5, 3), nn::ReLU(), nn::Linear(3, 2));
  optim::Adam adam(model->parameters(), {.lr = 0.1});
  step_once(model, adam, 5);
  const Tensor weight_before = model->parameters()[0].clone();
  const optim::OptimizerState adam_before = adam.state_dict();

  const std::string e = error_of([&] { io::load_checkpoint(path, *model, &adam); });
  CHECK(contains(e, "[load_checkpoint] '" + path.string() + "' does not fit the model: "));
  CHECK(contains(e, "shape mismatch for '0.weight': the module has (3, 5), the state dict has (3, 4)"));
  CHECK_FALSE(contains(e, "Adam"));
  CHECK(equal(model->parameters()[0], weight_before));
  CHECK(adam.state_dict().scalars == adam_before.scalars);

  // Other names (a model with one more layer) are the model's mismatch too.
  nn::Sequential deeper(nn::Linear(4, 3), nn::ReLU(), nn::Linear(3, 3), nn::ReLU(), nn::Linear(3, 2));
  optim::Adam deeper_adam(deeper->parameters(), {.lr = 0.1});
  const std::string e2 = error_of([&] { io::load_checkpoint(path, *deeper, &deeper_adam); });
  CHECK(contains(e2, "does not fit the model: "));
  CHECK(contains(e2, "missing keys: '4.weight', '4.bias'"));
}
