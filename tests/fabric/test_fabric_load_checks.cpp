// What Fabric.load refuses and how it says so: optimizer state a step would turn into NaN (named
// by its key), a checkpoint holding none of the model's tensors (the missing keys, not the absent
// optimizer state, under every strategy), and a sharded checkpoint folder given to a strategy
// that loads single files (named as such, with how to load or convert it).
#include <doctest/doctest.h>

#include <fstream>

#include "error_message.h"
#include "fabric/all.h"
#include "temp_dir.h"

using namespace weft;
using fabric::Fabric;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Launches `fabric` (under fsdp: a group of one in this process) and sets up a seeded Linear(3, 2).
fabric::FabricModule launch_and_set_up(Fabric& fabric) {
  fabric.launch();
  manual_seed(3);
  return fabric.setup_module(nn::Linear(3, 2));
}

// A Linear(3, 2) set up by a fabric of `strategy`, with an AdamW that has taken one step.
struct Trained {
  Fabric fabric;
  fabric::FabricModule model;
  fabric::FabricOptimizer optimizer;
  explicit Trained(const std::string& strategy)
      : fabric(fabric::FabricOptions{.strategy = strategy}),
        model(launch_and_set_up(fabric)),
        optimizer(fabric.setup_optimizer(
            std::make_shared<optim::AdamW>(model.wrapped()->parameters(), optim::AdamWOptions{.lr = 0.1}))) {
    fabric.backward(sum(model(ones({1, 3}))), &model);
    optimizer.step();
  }
};

}  // namespace

TEST_CASE("Fabric.load refuses a negative step count, naming its key, and changes nothing") {
  test::TempDir dir;
  const auto path = dir / "model.ckpt";
  Trained source("single_device");
  source.fabric.save(path, source.model, &source.optimizer);
  io::SafetensorsFile file = io::load_safetensors(path);
  file.metadata["__optimizer__.state.0.step"] = "-3";
  io::save_safetensors(path, file.tensors, file.metadata);

  Trained target("single_device");
  target.model->parameters()[0].detach().fill_(0.5);  // other values than the file's
  nn::TensorDict before;
  for (const auto& [name, t] : target.model->state_dict()) before.insert(name, t.clone());
  const std::string e = error_of([&] { target.fabric.load(path, target.model, &target.optimizer); });
  CHECK(contains(e, "'state.0.step' must be a non-negative integer (a count), got -3"));
  for (const auto& [name, t] : before) CHECK(equal(target.model->state_dict().at(name), t));
}

TEST_CASE("Fabric.load of a file with none of the model's tensors names the missing keys, under every strategy") {
  test::TempDir dir;
  const auto path = dir / "other.ckpt";
  nn::TensorDict unrelated;
  unrelated.insert("embedding.weight", zeros({4, 2}));
  io::save_safetensors(path, unrelated);
  for (const char* strategy : {"single_device", "fsdp"}) {
    CAPTURE(strategy);
    Trained target(strategy);
    const std::string e = error_of([&] { target.fabric.load(path, target.model, &target.optimizer); });
    CHECK(contains(e, "does not fit the model"));
    CHECK(contains(e, "embedding.weight"));
    CHECK_FALSE(contains(e, "holds no optimizer state"));
  }
}

TEST_CASE("a sharded checkpoint given to a single-file strategy is named, with how to load or convert it") {
  test::TempDir dir;
  const auto folder = dir / "sharded";
  {
    Fabric sharded(fabric::FabricOptions{.strategy = "fsdp", .state_dict_type = "sharded"});
    sharded.launch();
    auto model = sharded.setup_module(nn::Linear(3, 2));
    sharded.save(folder, model, nullptr);
  }
  REQUIRE(std::filesystem::is_directory(folder));
  Trained target("single_device");
  const std::string e = error_of([&] { target.fabric.load(folder, target.model, &target.optimizer); });
  CHECK(contains(e, "[Fabric.load] '" + folder.string() + "' is a sharded checkpoint"));
  CHECK(contains(e, "the single_device strategy loads single-file checkpoints only: load it with strategy \"fsdp\""));
  CHECK(contains(e, "saving with state_dict_type \"full\""));
  CHECK_FALSE(contains(e, "is a directory"));
}

TEST_CASE("an fsdp fabric that was not launched says so instead of throwing std::bad_cast") {
  test::TempDir dir;
  Fabric fabric(fabric::FabricOptions{.strategy = "fsdp"});
  auto model = fabric.setup_module(nn::Linear(3, 2));
  CHECK(contains(error_of([&] { fabric.save(dir / "x.ckpt", model, nullptr); }),
                 "[Fabric] under the fsdp strategy the module must be wrapped: call fabric.launch() before"));
}
