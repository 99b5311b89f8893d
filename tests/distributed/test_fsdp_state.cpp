// FullyShardedDataParallel beyond the step: gradient accumulation (no_sync), clipping over shards,
// the sharded GradScaler, full and sharded state dicts (model and optimizer) that load at another
// world size, and a sharded save that dies half way never replacing the previous checkpoint.
#include <doctest/doctest.h>

#include <signal.h>

#include <cmath>
#include <limits>

#include "fsdp_helpers.h"

using namespace weft;
using distributed::FullyShardedDataParallel;
using distributed::FSDPOptions;

namespace {

constexpr int kSteps = 3;

FSDPOptions linear_units(const std::string& strategy = "FULL_SHARD") {
  FSDPOptions o;
  o.sharding_strategy = distributed::parse_sharding_strategy(strategy);
  o.auto_wrap_policy = distributed::module_type_auto_wrap_policy({"Linear"});
  return o;
}

// Plain AdamW training of the test MLP on the full batch, steps [first, first + steps).
void plain_steps(nn::Sequential& model, optim::Optimizer& opt, int first, int steps) {
  auto plugin = precision::make_precision("32-true");
  test::train_steps(*plugin, [&](const Tensor& x) { return model(x); }, model.ptr().get(), opt, 0, 1, first, steps);
}

void fsdp_steps(FullyShardedDataParallel& fsdp, optim::Optimizer& opt, int first, int steps) {
  auto plugin = precision::make_precision("32-true");
  test::train_steps(*plugin, [&](const Tensor& x) { return fsdp(x); }, fsdp.ptr().get(), opt,
                    fsdp->process_group().rank(), fsdp->process_group().size(), first, steps);
}

}  // namespace

// args: strategy
WEFT_RANK_WORKER(fsdp_no_sync) {
  auto pg = test::init_group();
  auto model = test::make_mlp(21);
  FullyShardedDataParallel fsdp(model, pg, linear_units(args.at(0)));
  optim::SGD opt(fsdp->parameters(), {.lr = 0.1});
  pg->set_recording(true);
  for (int micro = 0; micro < 3; ++micro) {
    const test::Batch b = test::local_rows(test::global_batch(micro), pg->rank(), pg->size());
    if (micro < 2) {
      auto guard = fsdp->no_sync();
      cross_entropy(fsdp(b.x), b.y).backward();
    } else {
      for (const auto& r : pg->records())
        test::require(r.kind == distributed::CollectiveKind::AllGather, "a gradient was reduced under no_sync");
      cross_entropy(fsdp(b.x), b.y).backward();
    }
  }
  opt.step();
  test::save_result(pg->rank(), fsdp->full_state_dict());
  return 0;
}

TEST_CASE("FSDP no_sync accumulates unsharded gradients; the next synchronised backward reduces the sums") {
  auto model = test::make_mlp(21);
  optim::SGD opt(model->parameters(), {.lr = 0.1});
  for (int micro = 0; micro < 3; ++micro) {
    const test::Batch b = test::global_batch(micro);
    cross_entropy(model(b.x), b.y).backward();
  }
  opt.step();
  for (const char* strategy : {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"}) {
    CAPTURE(strategy);
    const auto run = test::run_ranks(3, "fsdp_no_sync", {strategy});
    INFO(run.logs());
    REQUIRE(run.ok());
    CHECK(test::max_relative_difference(run.result(0), model->state_dict()) <= 1e-5);
  }
}

// args: norm type ("2" or "inf")
WEFT_RANK_WORKER(fsdp_clip) {
  auto pg = test::init_group();
  const double p = args.at(0) == "inf" ? std::numeric_limits<double>::infinity() : std::stod(args.at(0));
  auto model = test::make_mlp(31);
  FullyShardedDataParallel fsdp(model, pg, linear_units());
  optim::SGD opt(fsdp->parameters(), {.lr = 0.5});
  const test::Batch b = test::local_rows(test::global_batch(0), pg->rank(), pg->size());
  cross_entropy(fsdp(b.x), b.y).backward();
  const double norm = fsdp->clip_grad_norm_(0.05, p);
  opt.step();
  nn::TensorDict out = fsdp->full_state_dict();
  out.insert("norm", scalar_tensor(norm, kFloat64));
  test::save_result(pg->rank(), out);
  return 0;
}

TEST_CASE("FSDP clips by the norm of all shards together, as clipping the unsharded model does") {
  for (const char* p : {"2", "inf"}) {
    CAPTURE(p);
    auto model = test::make_mlp(31);
    optim::SGD opt(model->parameters(), {.lr = 0.5});
    const test::Batch b = test::global_batch(0);
    cross_entropy(model(b.x), b.y).backward();
    const double norm_type = std::string(p) == "inf" ? std::numeric_limits<double>::infinity() : 2.0;
    const double norm = optim::clip_grad_norm_(model->parameters(), 0.05, norm_type);
    opt.step();
    const auto run = test::run_ranks(3, "fsdp_clip", {p});
    INFO(run.logs());
    REQUIRE(run.ok());
    nn::TensorDict got = run.result(0);
    CHECK(got.at("norm").item<double>() == doctest::Approx(norm).epsilon(1e-6));
    CHECK(norm > 0.05);  // clipping did something
    nn::TensorDict params;
    for (const auto& [k, t] : got)
      if (k != "norm") params.insert(k, t);
    CHECK(test::max_relative_difference(params, model->state_dict()) <= 1e-5);
  }
}

// A NaN in one rank's shard: the ∞-norm is NaN on every rank (a max that dropped it would clip
// the other gradients by a finite norm and leave the NaN in place), and error_if_nonfinite makes
// every rank throw.
WEFT_RANK_WORKER(fsdp_clip_nan) {
  auto pg = test::init_group();
  auto model = test::make_mlp(31);
  FullyShardedDataParallel fsdp(model, pg, linear_units());
  const test::Batch b = test::local_rows(test::global_batch(0), pg->rank(), pg->size());
  cross_entropy(fsdp(b.x), b.y).backward();
  if (pg->rank() == 1) {
    Tensor g = fsdp->parameters().front().grad();
    g.narrow(0, 0, 1).fill_(std::numeric_limits<double>::quiet_NaN());
  }
  const double inf = std::numeric_limits<double>::infinity();
  for (double p : {inf, 2.0}) {
    const double norm = fsdp->clip_grad_norm_(0.05, p);
    test::require(std::isnan(norm), "clip_grad_norm_ of order " + std::to_string(p) + " returned " + std::to_string(norm));
    try {
      fsdp->clip_grad_norm_(0.05, p, /*error_if_nonfinite=*/true);
      test::require(false, "error_if_nonfinite did not throw on rank " + std::to_string(pg->rank()));
    } catch (const Error& e) {
      test::require(std::string(e.what()).find("so they cannot be clipped") != std::string::npos, e.what());
    }
  }
  return 0;
}

TEST_CASE("FSDP's clipping sees a NaN in any rank's shard, on every rank") {
  const auto run = test::run_ranks(3, "fsdp_clip_nan");
  INFO(run.logs());
  CHECK(run.ok());
}

// args: keep_low_precision_grads ("0" or "1"; with it the scaler unscales float16 shards)
WEFT_RANK_WORKER(fsdp_sharded_scaler) {
  auto pg = test::init_group();
  auto model = test::make_mlp(41);
  FSDPOptions o = linear_units();
  o.mixed_precision = precision::FSDPPrecision("16-mixed").mixed_precision_config();
  o.mixed_precision->keep_low_precision_grads = args.at(0) == "1";
  const DType grad_dtype = o.mixed_precision->keep_low_precision_grads ? kFloat16 : kFloat32;
  FullyShardedDataParallel fsdp(model, pg, o);
  optim::SGD opt(fsdp->parameters(), {.lr = 0.1});
  precision::GradScaler scaler({.init_scale = 1024.0});
  fsdp->shard_grad_scaler(scaler);
  std::vector<bool> stepped;
  std::vector<double> scales;
  for (int step = 0; step < 3; ++step) {
    const test::Batch b = test::local_rows(test::global_batch(step), pg->rank(), pg->size());
    opt.zero_grad();
    scaler.scale(cross_entropy(fsdp(b.x).to(kFloat32), b.y)).backward();
    test::require(fsdp->shard(0).grad().dtype() == grad_dtype, "the gradient shard is not in the expected dtype");
    if (step == 1 && pg->rank() == 1) {  // only this rank's shard sees the inf
      NoGradGuard no_grad;
      fsdp->shard(0).grad().narrow(0, 0, 1).fill_(std::numeric_limits<double>::infinity());
    }
    const auto before = fsdp->full_state_dict();
    stepped.push_back(scaler.step(&opt, fsdp->parameters(), [&] { opt.step(); }));
    test::require(test::bitwise_equal(before, fsdp->full_state_dict()) == !stepped.back(),
                  "a step changed the parameters exactly when it did not step");
    scaler.update();
    scales.push_back(scaler.get_scale());
  }
  test::require(stepped == std::vector<bool>{true, false, true}, "every rank must skip step 1, and only it");
  test::require(scales == std::vector<double>{1024.0, 512.0, 512.0}, "the scale backs off once, on every rank");
  return 0;
}

TEST_CASE("the sharded GradScaler skips a step on every rank when any rank's shard has an inf") {
  for (const char* keep : {"0", "1"}) {
    CAPTURE(keep);
    const auto run = test::run_ranks(2, "fsdp_sharded_scaler", {keep});
    INFO(run.logs());
    CHECK(run.ok());
  }
}

// args: phase ("save" or "resume"), checkpoint folder, kind ("sharded" or "full")
WEFT_RANK_WORKER(fsdp_checkpoint) {
  auto pg = test::init_group();
  const std::string phase = args.at(0), folder = args.at(1), kind = args.at(2);
  auto model = test::make_mlp(phase == "save" ? 51 : 999);  // resumed ranks start from other values
  FullyShardedDataParallel fsdp(model, pg, linear_units());
  optim::AdamW opt(fsdp->parameters(), {.lr = 0.02});
  if (phase == "save") {
    fsdp_steps(fsdp, opt, 0, kSteps);
    if (kind == "sharded") {
      fsdp->save_sharded(folder, &opt, {{"step", std::to_string(kSteps)}});
    } else {
      nn::TensorDict state = fsdp->full_state_dict();
      const optim::OptimizerState os = fsdp->full_optim_state_dict(opt);
      if (pg->rank() == 0) {  // rank 0 writes the full checkpoint
        for (const auto& [k, t] : os.tensors) state.insert("__optimizer__." + k, t);
        io::SafetensorsMetadata meta;
        for (const auto& [k, v] : os.scalars) meta["__optimizer__." + k] = v;
        io::save_safetensors(folder, state, meta);
      }
      pg->barrier()->wait();
    }
    test::save_result(pg->rank(), fsdp->full_state_dict(), "saved");
  } else {
    if (kind == "sharded") {
      const auto meta = fsdp->load_sharded(folder, &opt);
      test::require(meta.at("step") == std::to_string(kSteps), "the caller's metadata did not come back");
    } else {
      const io::SafetensorsFile file = io::load_safetensors(folder);
      nn::TensorDict state;
      optim::OptimizerState os;
      for (const auto& [k, t] : file.tensors) {
        if (k.starts_with("__optimizer__.")) os.tensors.insert(k.substr(14), t);
        else state.insert(k, t);
      }
      for (const auto& [k, v] : file.metadata) os.scalars[k.substr(14)] = v;
      fsdp->load_full_state_dict(state);
      fsdp->load_full_optim_state_dict(opt, os);
    }
    test::save_result(pg->rank(), fsdp->full_state_dict(), "loaded");
    fsdp_steps(fsdp, opt, kSteps, kSteps);
    test::save_result(pg->rank(), fsdp->full_state_dict(), "resumed");
  }
  return 0;
}

TEST_CASE("checkpoints saved at N ranks load at M and resume as if the run never stopped") {
  auto model = test::make_mlp(51);
  optim::AdamW opt(model->parameters(), {.lr = 0.02});
  plain_steps(model, opt, 0, 2 * kSteps);
  const nn::TensorDict straight = model->state_dict();
  const auto root = std::filesystem::temp_directory_path() / ("weft-ckpt-" + std::to_string(::getpid()));
  for (const char* kind : {"sharded", "full"})
    for (const auto& sizes : std::vector<std::pair<int, int>>{{2, 3}, {3, 2}, {4, 1}}) {
      const int n = sizes.first, m = sizes.second;  // named: clang 14 refuses bindings in CAPTURE's lambda
      CAPTURE(kind);
      CAPTURE(n);
      CAPTURE(m);
      const std::string path = (root / (std::string(kind) + std::to_string(n) + std::to_string(m))).string();
      const auto saved = test::run_ranks(n, "fsdp_checkpoint", {"save", path, kind});
      INFO(saved.logs());
      REQUIRE(saved.ok());
      const auto resumed = test::run_ranks(m, "fsdp_checkpoint", {"resume", path, kind});
      INFO(resumed.logs());
      REQUIRE(resumed.ok());
      CHECK(test::bitwise_equal(resumed.result(0, "loaded"), saved.result(0, "saved")));  // resharding is exact
      CHECK(test::max_relative_difference(resumed.result(0, "resumed"), straight) <= 1e-5);
    }
  std::filesystem::remove_all(root);
}

// args: checkpoint folder
WEFT_RANK_WORKER(fsdp_dies_while_saving) {
  auto pg = test::init_group();
  auto model = test::make_mlp(61);
  FullyShardedDataParallel fsdp(model, pg, linear_units());
  optim::AdamW opt(fsdp->parameters(), {.lr = 0.02});
  fsdp_steps(fsdp, opt, 0, 1);
  fsdp->save_sharded(args.at(0), &opt);
  test::save_result(pg->rank(), fsdp->full_state_dict(), "first");
  fsdp_steps(fsdp, opt, 1, 1);
  if (pg->rank() == 1) ::raise(SIGKILL);  // dies as the second save begins
  fsdp->save_sharded(args.at(0), &opt);
  return 0;
}

TEST_CASE("a sharded save that dies half way leaves the previous checkpoint in place; the partial one is refused") {
  const auto folder = std::filesystem::temp_directory_path() / ("weft-ckpt-die-" + std::to_string(::getpid()));
  test::RunOptions o;
  o.group_timeout = std::chrono::milliseconds(2000);
  const auto run = test::run_ranks(2, "fsdp_dies_while_saving", {folder.string()}, o);
  INFO(run.logs());
  CHECK_FALSE(run.ok());
  auto pg = test::solo_group();
  auto model = test::make_mlp(0);
  FullyShardedDataParallel fsdp(model, pg, linear_units());
  fsdp->load_sharded(folder);
  CHECK(test::bitwise_equal(fsdp->full_state_dict(), run.result(0, "first")));
  const auto partial = std::filesystem::path(folder.string() + ".partial");
  if (std::filesystem::exists(partial))
    CHECK_THROWS_WITH_AS(fsdp->load_sharded(partial), doctest::Contains("has no COMPLETE marker"), Error);
  std::filesystem::remove_all(folder);
  std::filesystem::remove_all(partial);
}

TEST_CASE("a state dict that does not fit is refused before anything changes") {
  auto pg = test::solo_group();
  auto model = test::make_mlp(71);
  FullyShardedDataParallel fsdp(model, pg, linear_units());
  const nn::TensorDict before = fsdp->full_state_dict();
  nn::TensorDict wrong;
  for (const auto& [k, t] : before) wrong.insert(k, k == "2.bias" ? zeros({4}) : zeros_like(t));
  wrong.insert("extra", zeros({1}));
  CHECK_THROWS_WITH_AS(fsdp->load_full_state_dict(wrong),
                       doctest::Contains("'2.bias' has shape (4,), the model (5,); unexpected 'extra'"), Error);
  CHECK(test::bitwise_equal(fsdp->full_state_dict(), before));
}
