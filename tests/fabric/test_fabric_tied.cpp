// Fabric with a tied model (tests/nn/tied_model.h: the LM head is the token embedding): setup
// under ddp and fsdp keeps the tie in every precision's conversion, training matches one process,
// and the checkpoint holds the tied tensor once (as Python's save_model writes it) and loads back
// under both names, full or sharded.
#include <doctest/doctest.h>

#include "../nn/tied_model.h"
#include "distributed/harness.h"
#include "fabric/all.h"

using namespace weft;
using fabric::Fabric;
using fabric::FabricOptions;

namespace {

constexpr int kSteps = 3;
constexpr int64_t kBatch = 12;

Tensor batch(int step, uint64_t stream) {
  Generator g(stream + static_cast<uint64_t>(step));
  return randint(0, test::kVocab, {kBatch}, {}, &g);
}

void train(Fabric& fabric, const fabric::FabricModule& model, const fabric::FabricOptimizer& opt) {
  const Tensor rows = fabric.distributed_sampler(kBatch, {.shuffle = false}).indices();
  for (int step = 0; step < kSteps; ++step) {
    const Tensor loss = cross_entropy(model(index_select(batch(step, 100), 0, rows)).to(kFloat32),
                                      index_select(batch(step, 200), 0, rows));
    opt.zero_grad();
    fabric.backward(loss, &model);
    opt.step();
  }
}

FabricOptions options_for(const std::string& strategy, const std::string& precision, int devices) {
  FabricOptions o;
  o.devices = devices;
  o.strategy = strategy;
  o.precision = precision;
  // The embedding and the head hold only the tied weight: it goes to the root unit.
  o.auto_wrap_policy = distributed::module_type_auto_wrap_policy({"Embedding", "Linear", "TiedHead"});
  return o;
}

nn::TensorDict reference(const std::string& precision) {
  Fabric fabric(options_for("auto", precision, 1));
  auto net = test::make_tied_lm(1234);
  auto model = fabric.setup_module(net);
  auto opt = fabric.setup_optimizer(optim::AdamW(net->parameters(), {.lr = 0.02}));
  train(fabric, model, opt);
  return net->state_dict();
}

double max_difference(const nn::TensorDict& a, const nn::TensorDict& b) {
  double worst = 0;
  for (const auto& [k, t] : a) worst = std::max(worst, amax(abs(sub(t.to(kFloat64), b.at(k).to(kFloat64)))).item<double>());
  return worst;
}

}  // namespace

// args: strategy, precision, state_dict_type
WEFT_RANK_WORKER(fabric_tied) {
  FabricOptions o = options_for(args.at(0), args.at(1), std::stoi(std::getenv("WORLD_SIZE")));
  o.state_dict_type = args.at(2);
  o.timeout = test::group_timeout();
  Fabric fabric(o);
  fabric.launch();
  auto net = test::make_tied_lm(1234);
  auto model = fabric.setup_module(net);
  test::require(net->head->weight.is_same(net->wte->weight), "setup_module cut the tie");
  auto opt = fabric.setup_optimizer(optim::AdamW(model.wrapped()->parameters(), {.lr = 0.02}));
  train(fabric, model, opt);

  const auto path = test::run_dir() / "checkpoint";
  fabric.save(path, model, &opt, {{"step", std::to_string(kSteps)}});
  const auto meta = fabric.load(path, model, &opt);
  test::require(meta.at("step") == std::to_string(kSteps) && !meta.count("wte.weight"),
                "the caller's metadata, without the record of the dropped tied name");
  test::require(net->head->weight.is_same(net->wte->weight), "load cut the tie");
  return 0;
}

TEST_CASE("Fabric keeps a tie under ddp and fsdp, trains like one process, and checkpoints it once") {
  for (const char* precision : {"32-true", "bf16-true"}) {
    const nn::TensorDict expected = reference(precision);
    for (const char* strategy : {"ddp", "fsdp"})
      for (const char* kind : {"full", "sharded"}) {
        if (std::string(strategy) == "ddp" && std::string(kind) == "sharded") continue;
        CAPTURE(precision);
        CAPTURE(strategy);
        CAPTURE(kind);
        const auto run = test::run_ranks(2, "fabric_tied", {strategy, precision, kind});
        INFO(run.logs());
        REQUIRE(run.ok());
        auto loaded = test::make_tied_lm(7);
        if (std::string(kind) == "full") {
          const io::SafetensorsFile file = io::load_safetensors(run.dir / "checkpoint");
          CHECK_FALSE(file.tensors.contains("wte.weight"));
          CHECK(file.tensors.contains("head.weight"));
          CHECK(file.metadata.at("wte.weight") == "head.weight");
          io::load_checkpoint(run.dir / "checkpoint", *loaded, nullptr);
        } else {  // reassemble the folder in this process, with a group of one
          Fabric one(options_for("fsdp", precision, 1));
          one.launch();
          auto net = test::make_tied_lm(8);
          auto model = one.setup_module(net);
          one.load(run.dir / "checkpoint", model, nullptr);
          one.save(run.dir / "gathered", model, nullptr);
          io::load_checkpoint(run.dir / "gathered", *loaded, nullptr);
        }
        CHECK(loaded->head->weight.is_same(loaded->wte->weight));
        CHECK(max_difference(loaded->state_dict(), expected) <= (std::string(precision) == "32-true" ? 1e-5 : 2e-2));
      }
  }
}
