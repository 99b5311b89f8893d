// What load_checkpoint refuses in a checkpoint's optimizer part (values a step would turn into
// NaN), which cause it names when nothing of the model is in the file, and that checkpoints of
// many tensors load (TensorDict's index keeps loading linear).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "safetensors_test_helpers.h"

using namespace weft;
using safetensors_test::contains;
using safetensors_test::TempDir;

namespace {

// A model with one AdamW step taken, saved with its optimizer to `path`.
struct Saved {
  nn::Linear model{3, 2};
  optim::AdamW adam{model->parameters(), {.lr = 0.1}};
};

void save_after_one_step(Saved& s, const std::filesystem::path& path) {
  sum(s.model(ones({1, 3}))).backward();
  s.adam.step();
  io::save_checkpoint(path, *s.model, &s.adam);
}

// Rewrites the checkpoint at `path` with `edit` applied to its tensors and metadata.
void rewrite(const std::filesystem::path& path,
             const std::function<void(nn::TensorDict&, io::SafetensorsMetadata&)>& edit) {
  io::SafetensorsFile file = io::load_safetensors(path);
  nn::TensorDict tensors;
  for (const auto& [name, t] : file.tensors) tensors.insert(name, t.clone());
  edit(tensors, file.metadata);
  io::save_safetensors(path, tensors, file.metadata);
}

// A copy of `tensors` with `name` replaced by `value`.
nn::TensorDict replaced(const nn::TensorDict& tensors, const std::string& name, const Tensor& value) {
  nn::TensorDict out;
  for (const auto& [n, t] : tensors) out.insert(n, n == name ? value : t);
  return out;
}

// load_checkpoint's error for the checkpoint with `edit` applied; the model and optimizer it was
// refused into keep their values.
std::string load_error_after(const std::function<void(nn::TensorDict&, io::SafetensorsMetadata&)>& edit) {
  TempDir dir;
  const auto path = dir / "model.ckpt";
  Saved saved;
  save_after_one_step(saved, path);
  rewrite(path, edit);
  Saved target;
  const Tensor weight = target.model->weight.clone();
  const std::string e = error_of([&] { io::load_checkpoint(path, *target.model, &target.adam); });
  CHECK(equal(target.model->weight, weight));
  CHECK(target.adam.state(target.model->weight) == nullptr);
  return e;
}

}  // namespace

TEST_CASE("load_checkpoint refuses optimizer state a step would turn into NaN, naming the key") {
  const auto set = [](const std::string& key, const std::string& value) {
    return [=](nn::TensorDict&, io::SafetensorsMetadata& meta) { meta["__optimizer__." + key] = value; };
  };
  // The case: a negative step makes the bias correction 1 - beta^(step) negative.
  CHECK(contains(load_error_after(set("state.0.step", "-3")),
                 "'state.0.step' must be a non-negative integer (a count), got -3"));
  CHECK(contains(load_error_after(set("state.0.step", "2.5")), "'state.0.step': expected an integer, got '2.5'"));
  CHECK(contains(load_error_after(set("param_groups.0.lr", "-1")),
                 "the options under 'param_groups.0.*' are out of range: [AdamW] invalid learning rate: -1"));
  CHECK(contains(load_error_after(set("param_groups.0.lr", "inf")),
                 "'param_groups.0.lr' must be a finite number, got inf"));
  CHECK(contains(load_error_after(set("param_groups.0.eps", "nan")), "'param_groups.0.eps' must be a finite number"));
  CHECK(contains(load_error_after(set("param_groups.0.betas", "0.9,1")), "invalid beta parameter at index 1"));
  CHECK(contains(load_error_after(set("param_groups.0.betas", "-0.1,0.999")), "invalid beta parameter at index 0"));
  CHECK(contains(load_error_after(set("param_groups.0.weight_decay", "-0.5")), "invalid weight_decay value: -0.5"));

  const auto moment = [](const std::string& field, float value) {
    return [=](nn::TensorDict& tensors, io::SafetensorsMetadata&) {
      const std::string name = "__optimizer__.state.0." + field;
      Tensor t = tensors.at(name).clone();
      t.view({-1}).narrow(0, 1, 1).fill_(value);
      tensors = replaced(tensors, name, t);
    };
  };
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(contains(load_error_after(moment("exp_avg", inf)), "'state.0.exp_avg' holds 1 inf or NaN value(s)"));
  CHECK(contains(load_error_after(moment("exp_avg_sq", std::nanf(""))), "'state.0.exp_avg_sq' holds 1 inf or NaN"));
  CHECK(contains(load_error_after(moment("exp_avg_sq", -4.0f)),
                 "'state.0.exp_avg_sq' holds a negative second moment (-4)"));
  // A moment of another shape than its parameter (3 inputs, 2 outputs).
  CHECK(contains(load_error_after([](nn::TensorDict& tensors, io::SafetensorsMetadata&) {
          tensors = replaced(tensors, "__optimizer__.state.0.exp_avg", zeros({3, 2}));
        }),
        "'state.0.exp_avg' has shape (3, 2), but its parameter has shape (2, 3)"));
}

TEST_CASE("a valid checkpoint still loads, and the next step stays finite") {
  TempDir dir;
  const auto path = dir / "model.ckpt";
  Saved saved;
  save_after_one_step(saved, path);
  Saved target;
  io::load_checkpoint(path, *target.model, &target.adam);
  CHECK(equal(target.model->weight, saved.model->weight));
  sum(target.model(ones({1, 3}))).backward();
  target.adam.step();
  CHECK(sum(logical_not(isfinite(target.model->weight))).item<int64_t>() == 0);
}

TEST_CASE("a checkpoint holding none of the model's tensors names the missing keys, not the optimizer") {
  TempDir dir;
  const auto path = dir / "other.ckpt";
  nn::TensorDict unrelated;
  unrelated.insert("embedding.weight", zeros({4, 2}));
  io::save_safetensors(path, unrelated);
  nn::Linear model(3, 2);
  optim::AdamW adam(model->parameters(), {.lr = 0.1});
  const std::string e = error_of([&] { io::load_checkpoint(path, *model, &adam); });
  CHECK(contains(e, "does not fit the model"));
  CHECK(contains(e, "missing keys: "));
  CHECK(contains(e, "'bias'"));
  CHECK(contains(e, "unexpected keys: 'embedding.weight'"));
  CHECK_FALSE(contains(e, "holds no optimizer state"));
  // The model fits but the optimizer part is absent: then that is the cause.
  io::save_checkpoint(path, *model, nullptr);
  CHECK(contains(error_of([&] { io::load_checkpoint(path, *model, &adam); }),
                 "holds no optimizer state; it was saved without an optimizer"));
}

TEST_CASE("TensorDict keeps insertion order, finds by name, and refuses duplicates, copies included") {
  nn::TensorDict d;
  for (const char* name : {"t4", "t3", "t2", "t1", "t0"})
    d.insert(name, full({1}, static_cast<double>(d.size())));
  std::vector<std::string> order;
  for (const auto& [name, t] : d) order.push_back(name);
  CHECK(order == std::vector<std::string>{"t4", "t3", "t2", "t1", "t0"});
  CHECK(d.at("t1").item<float>() == 3.0f);
  CHECK(d.find("t9") == nullptr);
  nn::TensorDict copy = d;
  CHECK(contains(error_of([&] { copy.insert("t2", zeros({1})); }), "[TensorDict] duplicate name 't2'"));
  copy.insert("t5", zeros({1}));
  CHECK(copy.size() == 6);
  CHECK(d.size() == 5);
  CHECK_FALSE(d.contains("t5"));
  CHECK(copy.at("t0").item<float>() == 4.0f);
}

TEST_CASE("a checkpoint of 100,000 tensors saves and loads whole, in order") {
  // Quadratic before (TensorDict::insert scanned the list: 19 s for this file); linear now. The
  // time is measured by bench/bench_checkpoint_load, never asserted here.
  TempDir dir;
  const auto path = dir / "many.safetensors";
  constexpr int64_t kCount = 100'000;
  nn::TensorDict tensors;
  const Tensor values = arange(0, static_cast<double>(kCount), 1.0, kFloat32);
  for (int64_t i = 0; i < kCount; ++i) tensors.insert("layer." + std::to_string(i), values.narrow(0, i, 1));
  io::save_safetensors(path, tensors);
  const io::SafetensorsFile file = io::load_safetensors(path);
  REQUIRE(file.tensors.size() == static_cast<size_t>(kCount));
  CHECK(file.tensors.items().front().first == "layer.0");
  CHECK(file.tensors.items().back().first == "layer.99999");
  CHECK(file.tensors.at("layer.12345").item<float>() == 12345.0f);
}
