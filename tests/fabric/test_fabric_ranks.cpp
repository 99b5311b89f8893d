// Fabric across processes: launch (joining weft-run's ranks, or spawning its own), DDP and FSDP
// strategies training like one process on the whole batch, the collectives, rank-0 checkpoints
// (full and sharded) that load back, the distributed sampler, FP8 scales agreed across ranks, and
// the launch-first rule (T44).
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include "distributed/harness.h"
#include "fabric/all.h"

using namespace weft;
using fabric::Fabric;
using fabric::FabricOptions;

namespace {

constexpr int kSteps = 3;
constexpr int64_t kBatch = 12;

nn::Sequential make_model() {
  manual_seed(1234);
  return nn::Sequential(nn::Linear(7, 13), nn::ReLU(), nn::Linear(13, 5));
}

Tensor batch_x(int step) {
  Generator g(1000 + static_cast<uint64_t>(step));
  return randn({kBatch, 7}, kFloat32, &g);
}
Tensor batch_y(int step) {
  Generator g(2000 + static_cast<uint64_t>(step));
  return randint(0, 5, {kBatch}, {}, &g);
}

// kSteps of AdamW through Fabric, each rank on its sampler's rows of the global batch.
void train(Fabric& fabric, const fabric::FabricModule& model, const fabric::FabricOptimizer& opt) {
  const Tensor rows = fabric.distributed_sampler(kBatch, {.shuffle = false}).indices();
  for (int step = 0; step < kSteps; ++step) {
    const Tensor loss = cross_entropy(model(index_select(batch_x(step), 0, rows)), index_select(batch_y(step), 0, rows));
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
  o.auto_wrap_policy = distributed::module_type_auto_wrap_policy({"Linear"});
  return o;
}

// What one process on the whole batch ends with, as a checkpoint's model state.
nn::TensorDict reference(const std::string& precision) {
  Fabric fabric(options_for("auto", precision, 1));
  auto net = make_model();
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
WEFT_RANK_WORKER(fabric_train) {
  FabricOptions o = options_for(args.at(0), args.at(1), std::stoi(std::getenv("WORLD_SIZE")));
  o.state_dict_type = args.at(2);
  o.timeout = test::group_timeout();
  Fabric fabric(o);
  fabric.launch();
  test::require(fabric.world_size() == o.devices && fabric.global_rank() == std::stoi(std::getenv("RANK")),
                "Fabric did not join the launcher's ranks");
  auto net = make_model();
  auto model = fabric.setup_module(net);
  auto opt = fabric.setup_optimizer(optim::AdamW(model.wrapped()->parameters(), {.lr = 0.02}));
  train(fabric, model, opt);

  // The collectives.
  const int n = fabric.world_size(), r = fabric.global_rank();
  test::require(fabric.all_reduce(full({2}, r)).to_vector<double>() == std::vector<double>(2, (n - 1) / 2.0),
                "all_reduce (mean)");
  test::require(equal(fabric.all_gather(tensor({static_cast<double>(r)})), arange(static_cast<double>(n), kFloat32).view({n, 1})),
                "all_gather");
  test::require(fabric.broadcast(full({3}, r), n - 1).to_vector<double>() == std::vector<double>(3, n - 1), "broadcast");
  fabric.barrier();

  // Rank 0 writes the checkpoint (a folder under sharded fsdp); every rank loads it back.
  const auto path = test::run_dir() / "checkpoint";
  fabric.save(path, model, &opt, {{"step", std::to_string(kSteps)}});
  const auto meta = fabric.load(path, model, &opt);
  test::require(meta.at("step") == std::to_string(kSteps), "the checkpoint's metadata did not come back");
  fabric.print("rank-zero message");
  return 0;
}

TEST_CASE("Fabric trains under ddp and fsdp like one process, with collectives and rank-0 checkpoints") {
  for (const char* precision : {"32-true", "bf16-mixed"}) {
    const nn::TensorDict expected = reference(precision);
    for (const char* strategy : {"ddp", "fsdp"})
      for (const char* kind : {"full", "sharded"}) {
        if (std::string(strategy) == "ddp" && std::string(kind) == "sharded") continue;
        CAPTURE(precision);
        CAPTURE(strategy);
        CAPTURE(kind);
        const auto run = test::run_ranks(2, "fabric_train", {strategy, precision, kind});
        INFO(run.logs());
        REQUIRE(run.ok());
        CHECK(run.log(0).find("rank-zero message") != std::string::npos);
        CHECK(run.log(1).find("rank-zero message") == std::string::npos);
        nn::TensorDict saved;
        if (std::string(kind) == "full") {
          saved = io::read_checkpoint(run.dir / "checkpoint").model;
        } else {  // reassemble the folder in this process, with a group of one
          Fabric one(options_for("fsdp", precision, 1));
          one.launch();
          auto net = make_model();
          auto model = one.setup_module(net);
          one.load(run.dir / "checkpoint", model, nullptr);
          one.save(run.dir / "gathered", model, nullptr);
          saved = io::read_checkpoint(run.dir / "gathered").model;
        }
        CHECK(max_difference(saved, expected) <= (std::string(precision) == "32-true" ? 1e-5 : 2e-2));
      }
  }
}

// args: keep_low_precision_grads ("0" or "1"). bf16-mixed fsdp training, with the gradient shards'
// dtype checked after every backward; saves the full parameters.
WEFT_RANK_WORKER(fabric_keep_low_precision_grads) {
  FabricOptions o = options_for("fsdp", "bf16-mixed", std::stoi(std::getenv("WORLD_SIZE")));
  o.keep_low_precision_grads = args.at(0) == "1";
  o.timeout = test::group_timeout();
  Fabric fabric(o);
  fabric.launch();
  auto net = make_model();
  auto model = fabric.setup_module(net);
  auto opt = fabric.setup_optimizer(optim::AdamW(model.wrapped()->parameters(), {.lr = 0.02}));
  const Tensor rows = fabric.distributed_sampler(kBatch, {.shuffle = false}).indices();
  for (int step = 0; step < kSteps; ++step) {
    const Tensor loss = cross_entropy(model(index_select(batch_x(step), 0, rows)), index_select(batch_y(step), 0, rows));
    opt.zero_grad();
    fabric.backward(loss, &model);
    for (const Tensor& shard : model.wrapped()->parameters())
      test::require(shard.grad().dtype() == (o.keep_low_precision_grads ? kBFloat16 : kFloat32),
                    "a gradient shard is " + std::string(dtype_name(shard.grad().dtype())));
    opt.step();
  }
  auto& fsdp = dynamic_cast<distributed::FullyShardedDataParallelImpl&>(*model.wrapped());
  test::save_result(fabric.global_rank(), fsdp.full_state_dict());
  return 0;
}

TEST_CASE("Fabric passes keep_low_precision_grads to fsdp: bf16 gradient shards, the same training") {
  const auto kept = test::run_ranks(2, "fabric_keep_low_precision_grads", {"1"});
  INFO(kept.logs());
  REQUIRE(kept.ok());
  const auto widened = test::run_ranks(2, "fabric_keep_low_precision_grads", {"0"});
  INFO(widened.logs());
  REQUIRE(widened.ok());
  // One backward per step: the reduced shard is bf16 either way and the optimizer widens it exactly.
  const nn::TensorDict a = kept.result(0), b = widened.result(0);
  CHECK(a.size() == b.size());
  for (const auto& entry : a) {
    const std::string& name = entry.first;
    CAPTURE(name);
    CHECK(equal(entry.second, b.at(name)));
  }
}

namespace {

// FP8 training needs layer sizes that are multiples of 16.
nn::Sequential make_fp8_model() {
  manual_seed(99);
  return nn::Sequential(nn::Linear(16, 32), nn::ReLU(), nn::Linear(32, 16));
}

// kSteps of AdamW on random (kBatch, 16) inputs, each rank on its sampler's rows; returns the
// model's state (parameters and the FP8 layers' scales and amax histories).
nn::TensorDict train_fp8(Fabric& fabric) {
  auto net = make_fp8_model();
  auto model = fabric.setup_module(net);
  auto opt = fabric.setup_optimizer(optim::AdamW(model.wrapped()->parameters(), {.lr = 0.02}));
  const Tensor rows = fabric.distributed_sampler(kBatch, {.shuffle = false}).indices();
  for (int step = 0; step < kSteps; ++step) {
    Generator g(3000 + static_cast<uint64_t>(step));
    const Tensor x = index_select(mul(randn({kBatch, 16}, kFloat32, &g), scalar_tensor(1.0 + step)), 0, rows);
    const Tensor loss = cross_entropy(model(x), index_select(batch_y(step), 0, rows));
    opt.zero_grad();
    fabric.backward(loss, &model);
    opt.step();
  }
  return net->state_dict();
}

}  // namespace

WEFT_RANK_WORKER(fabric_fp8) {
  FabricOptions o = options_for("ddp", "transformer-engine", std::stoi(std::getenv("WORLD_SIZE")));
  o.timeout = test::group_timeout();
  Fabric fabric(o);
  fabric.launch();
  test::save_result(fabric.global_rank(), train_fp8(fabric));
  return 0;
}

TEST_CASE("FP8 training under ddp: every rank scales with the amaxes of all ranks, and trains like one process") {
  Fabric one(options_for("auto", "transformer-engine", 1));
  const nn::TensorDict expected = train_fp8(one);
  REQUIRE(expected.contains("0.fp8_amax_history"));
  const auto run = test::run_ranks(2, "fabric_fp8");
  INFO(run.logs());
  REQUIRE(run.ok());
  const nn::TensorDict r0 = run.result(0), r1 = run.result(1);
  // The ranks saw different rows, so only an all-reduced amax gives them the same scales.
  for (const auto& entry : r0) {
    const auto& name = entry.first;  // named: clang 14 refuses bindings in CAPTURE's lambda
    const auto& t = entry.second;
    CAPTURE(name);
    CHECK(equal(t, r1.at(name)));
  }
  // The first layer's input amaxes (column 0 of its history) are the whole batch's, exactly as in
  // one process; the parameters follow one process's within FP8 rounding.
  CHECK(equal(r0.at("0.fp8_amax_history").select(1, 0), expected.at("0.fp8_amax_history").select(1, 0)));
  nn::TensorDict params, reference_params;
  for (const char* name : {"0.weight", "0.bias", "2.weight", "2.bias"}) {
    params.insert(name, r0.at(name));
    reference_params.insert(name, expected.at(name));
  }
  CHECK(max_difference(params, reference_params) <= 2e-2);
}

WEFT_RANK_WORKER(fabric_self_launch) {
  FabricOptions o = options_for("ddp", "32-true", 2);
  o.timeout = std::chrono::milliseconds(20'000);
  Fabric fabric(o);
  fabric.launch();  // not launched: this process becomes the launcher of two copies and exits
  auto net = make_model();
  auto model = fabric.setup_module(net);
  auto opt = fabric.setup_optimizer(optim::AdamW(net->parameters(), {.lr = 0.02}));
  train(fabric, model, opt);
  fabric.save(test::run_dir() / "self.safetensors", model, &opt);
  return 0;
}

TEST_CASE("Fabric({.devices = 2}).launch() starts its own ranks when no launcher did") {
  char self[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  REQUIRE(len > 0);
  const auto dir = std::filesystem::temp_directory_path() / ("weft-fabric-launch-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string cmd = "env -u RANK -u WORLD_SIZE WEFT_TEST_WORKER=fabric_self_launch WEFT_TEST_DIR=" + dir.string() +
                          " OMP_NUM_THREADS=1 timeout 120 " + std::string(self, static_cast<size_t>(len)) + " 2>&1";
  const int status = std::system(cmd.c_str());
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(max_difference(io::read_checkpoint(dir / "self.safetensors").model, reference("32-true")) <= 1e-5);
  std::filesystem::remove_all(dir);
}

TEST_CASE("T44: with several devices, init_module and setup need launch() first; init_tensor does not") {
  Fabric fabric(options_for("ddp", "32-true", 2));
  CHECK_THROWS_WITH_AS(fabric.init_module(), doctest::Contains("To use Fabric with more than one device, you must "
                                                               "call `.launch()`"), Error);
  CHECK_NOTHROW(fabric.init_tensor());
  auto net = make_model();
  CHECK_THROWS_WITH_AS(fabric.setup_module(net), doctest::Contains("you must call `.launch()` before `.setup_module()`"),
                       Error);
}
