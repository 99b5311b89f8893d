// FullyShardedDataParallel: N ∈ {1, 2, 3, 4} ranks match one process on the full batch for
// FULL_SHARD, SHARD_GRAD_OP and NO_SHARD, every wrap policy, in every FSDP precision the CPU runs;
// the exact invariants (identical ranks, zero padding, FULL_SHARD == SHARD_GRAD_OP bitwise,
// NO_SHARD == DDP bitwise at two ranks); which collectives run in which dtype; when unsharded
// parameters are freed; the managed-module annotation; lazy modules.
#include <doctest/doctest.h>

#include "fsdp_helpers.h"

using namespace weft;
using distributed::FullyShardedDataParallel;

namespace {

constexpr int kSteps = 4;

std::vector<test::FsdpConfig> equivalence_configs() {
  std::vector<test::FsdpConfig> configs;
  for (const char* strategy : {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"}) {
    for (const char* precision : {"32-true", "bf16-mixed", "bf16-true", "16-true"})
      for (const char* opt : {"sgd", "adamw"}) configs.push_back({precision, opt, strategy, "linear"});
    for (const char* policy : {"none", "size100"}) configs.push_back({"32-true", "adamw", strategy, policy});
  }
  return configs;
}

// Every shard's padding, of the parameter, of its gradient and of Adam's moments, is exactly zero.
void check_padding_zero(FullyShardedDataParallel& fsdp, const optim::Optimizer& opt) {
  const auto units = fsdp->units();
  const optim::OptimizerState st = opt.state_dict();
  for (size_t u = 0; u < units.size(); ++u) {
    const int64_t pad = fsdp->shard_padding(u);
    const Tensor shard = fsdp->shard(u);
    const int world = fsdp->sharding_strategy() == distributed::ShardingStrategy::NoShard ? 1 : fsdp->process_group().size();
    test::require(shard.numel() == units[u].shard_numel && units[u].padded_numel == units[u].shard_numel * world &&
                      units[u].padded_numel - units[u].numel < world,
                  "unit " + std::to_string(u) + " has a wrong layout");
    if (pad == 0) continue;
    const auto tail = [&](const Tensor& t) { return t.narrow(0, t.numel() - pad, pad); };
    test::require(equal(tail(shard.detach()), zeros({pad}, shard.dtype())), "padding of a shard is not zero");
    if (shard.grad().defined())
      test::require(equal(tail(shard.grad()), zeros({pad}, shard.grad().dtype())), "padding of a gradient is not zero");
    for (const auto& [key, t] : st.tensors)
      if (t.numel() == shard.numel() && key.starts_with("state." + std::to_string(u) + "."))
        test::require(equal(tail(t), zeros({pad}, t.dtype())), "padding of optimizer state " + key + " is not zero");
  }
}

}  // namespace

WEFT_RANK_WORKER(fsdp_equivalence) {
  auto pg = test::init_group();
  for (const auto& c : equivalence_configs()) {
    auto plugin = precision::make_precision(c.precision, "cpu");
    auto model = test::make_mlp(1234 + static_cast<uint64_t>(pg->rank()));  // rank 0's must win
    plugin->convert_module(*model);
    FullyShardedDataParallel fsdp(model, pg, test::fsdp_options(c));
    auto opt = test::make_optimizer(c.optimizer, fsdp->parameters());
    test::train_steps(*plugin, [&](const Tensor& x) { return fsdp(x); }, fsdp.ptr().get(), *opt, pg->rank(),
                      pg->size(), 0, kSteps, [&] { check_padding_zero(fsdp, *opt); });
    check_padding_zero(fsdp, *opt);
    test::save_result(pg->rank(), fsdp->full_state_dict(), c.name());
  }
  return 0;
}

TEST_CASE("FSDP at 1-4 ranks matches one process on the full batch, every strategy and CPU precision") {
  std::map<std::string, nn::TensorDict> reference;
  for (const auto& c : equivalence_configs()) reference[c.name()] = test::single_process_reference(c, kSteps);
  for (int n : {1, 2, 3, 4}) {
    CAPTURE(n);
    const auto run = test::run_ranks(n, "fsdp_equivalence");
    INFO(run.logs());
    REQUIRE(run.ok());
    for (const auto& c : equivalence_configs()) {
      CAPTURE(c.name());
      const nn::TensorDict r0 = run.result(0, c.name());
      for (int r = 1; r < n; ++r) CHECK(test::bitwise_equal(run.result(r, c.name()), r0));
      std::string why;
      CHECK_MESSAGE(test::close_enough(r0, reference[c.name()], c.precision, c.optimizer, kSteps, &why), why);
      // One rank is the plain model, flattened. SGD's update is the same arithmetic on a flat buffer,
      // bit for bit; AdamW's fused kernel rounds its vector body and its scalar tail differently, and
      // flattening moves elements between them.
      if (n == 1 && c.precision != "bf16-mixed") {
        if (c.optimizer == "sgd") CHECK(test::bitwise_equal(r0, reference[c.name()]));
        else CHECK(test::max_relative_difference(r0, reference[c.name()]) <= 1e-6);
      }
      if (c.strategy == "SHARD_GRAD_OP") {  // the same arithmetic as FULL_SHARD, other lifetimes
        test::FsdpConfig full = c;
        full.strategy = "FULL_SHARD";
        CHECK(test::bitwise_equal(r0, run.result(0, full.name())));
      }
    }
  }
}

WEFT_RANK_WORKER(fsdp_vs_ddp) {
  auto pg = test::init_group();
  for (const char* which : {"ddp", "no_shard"}) {
    auto model = test::make_mlp(5);
    std::shared_ptr<nn::Module> wrapped;
    if (std::string(which) == "ddp") wrapped = distributed::DistributedDataParallel(model, pg).ptr();
    else wrapped = FullyShardedDataParallel(model, pg, {.sharding_strategy = distributed::ShardingStrategy::NoShard}).ptr();
    optim::AdamW opt(wrapped->parameters(), {.lr = 0.02});
    auto plugin = precision::make_precision("32-true");
    test::train_steps(*plugin, [&](const Tensor& x) { return wrapped->call(x); }, wrapped.get(), opt, pg->rank(),
                      pg->size(), 0, kSteps);
    test::save_result(pg->rank(), model->state_dict(), which);
  }
  return 0;
}

TEST_CASE("NO_SHARD is DDP: the same parameters bit for bit at two ranks") {
  const auto run = test::run_ranks(2, "fsdp_vs_ddp");
  INFO(run.logs());
  REQUIRE(run.ok());
  CHECK(test::bitwise_equal(run.result(0, "ddp"), run.result(0, "no_shard")));
}

// args: precision, strategy. Records the collectives of one step and checks their dtypes, and
// checks when units hold their unsharded parameters.
WEFT_RANK_WORKER(fsdp_plumbing) {
  auto pg = test::init_group();
  const test::FsdpConfig c{args.at(0), "adamw", args.at(1), "linear"};
  const auto mp = precision::FSDPPrecision(c.precision).mixed_precision_config();
  auto plugin = precision::make_precision(c.precision, "cpu");
  auto model = test::make_mlp(3);
  plugin->convert_module(*model);
  FullyShardedDataParallel fsdp(model, pg, test::fsdp_options(c));
  for (const auto& m : model->modules()) test::require(distributed::is_fsdp_managed(*m), "a module is not marked managed");
  test::require(fsdp->units().size() == 2, "expected a unit per Linear and none for the parameterless root");
  // After the first Linear's forward (this hook runs after FSDP's): FULL_SHARD has freed it,
  // SHARD_GRAD_OP and NO_SHARD keep it.
  bool unsharded_after_forward = false;
  model->at<nn::LinearImpl>(0)->register_forward_hook([&](nn::Module&, const Tensor& out) {
    unsharded_after_forward = fsdp->units()[0].unsharded;
    return out;
  });
  optim::AdamW opt(fsdp->parameters(), {.lr = 0.01});
  pg->set_recording(true);
  test::train_steps(*plugin, [&](const Tensor& x) { return fsdp(x); }, fsdp.ptr().get(), opt, pg->rank(),
                    pg->size(), 0, 1, [&] {
                      for (size_t u = 0; u < 2; ++u)
                        test::require(fsdp->shard(u).grad().dtype() == fsdp->shard(u).dtype(),
                                      "a gradient shard is not in the master dtype");
                    });
  int gathers = 0, scatters = 0, reduces = 0;
  for (const auto& r : pg->records()) {
    if (r.kind == distributed::CollectiveKind::AllGather) {
      ++gathers;
      test::require(r.dtype == mp.param_dtype, "an all_gather ran in " + std::string(dtype_name(r.dtype)));
    } else if (r.kind == distributed::CollectiveKind::ReduceScatter) {
      ++scatters;
      test::require(r.dtype == mp.reduce_dtype, "a reduce_scatter ran in " + std::string(dtype_name(r.dtype)));
    } else if (r.kind == distributed::CollectiveKind::AllReduce) {
      ++reduces;
    }
  }
  const bool full = c.strategy == "FULL_SHARD", no_shard = c.strategy == "NO_SHARD";
  // FULL_SHARD gathers each unit in forward and again in backward; SHARD_GRAD_OP only in forward.
  const int expected_gathers = no_shard ? 0 : full ? 4 : 2;
  test::require(gathers == expected_gathers, "expected " + std::to_string(expected_gathers) + " all_gathers, got " +
                                                 std::to_string(gathers));
  test::require(scatters == (no_shard ? 0 : 2) && reduces == (no_shard ? 2 : 0), "unexpected gradient reductions");
  test::require(unsharded_after_forward == !full, "unit 0 after its forward: unsharded = " +
                                                      std::to_string(unsharded_after_forward));
  for (const auto& u : fsdp->units())
    test::require(u.unsharded == no_shard, "a unit is still unsharded after the step");
  for (const auto& [name, p] : model->named_parameters())
    test::require(no_shard || p.numel() == 0, "'" + name + "' is not empty outside forward and backward");
  return 0;
}

TEST_CASE("FSDP communicates in param_dtype and reduce_dtype, and frees unsharded parameters when its strategy says") {
  for (const char* precision : {"32-true", "bf16-mixed", "16-true"})
    for (const char* strategy : {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"}) {
      CAPTURE(precision);
      CAPTURE(strategy);
      const auto run = test::run_ranks(2, "fsdp_plumbing", {precision, strategy});
      INFO(run.logs());
      CHECK(run.ok());
    }
}

TEST_CASE("the managed-module annotation lasts as long as the wrapper") {
  auto pg = test::solo_group();
  auto model = test::make_mlp(1);
  nn::Linear outsider(2, 2);
  {
    FullyShardedDataParallel fsdp(model, pg);
    for (const auto& m : model->modules()) CHECK(distributed::is_fsdp_managed(*m));
    CHECK_FALSE(distributed::is_fsdp_managed(*outsider));
  }
  for (const auto& m : model->modules()) CHECK_FALSE(distributed::is_fsdp_managed(*m));
}

namespace {
nn::Sequential make_lazy_mlp() {
  manual_seed(1234);
  return nn::Sequential(nn::LazyLinear(test::kHidden), nn::ReLU(), nn::LazyLinear(test::kOut));
}
}  // namespace

WEFT_RANK_WORKER(fsdp_lazy) {
  auto pg = test::init_group();
  auto model = make_lazy_mlp();
  try {
    FullyShardedDataParallel refused(model, pg);
    test::require(false, "FSDP accepted uninitialized parameters");
  } catch (const Error& e) {
    test::require(std::string(e.what()).find("Modules with uninitialized parameters can't be used with "
                                             "`FullyShardedDataParallel`") != std::string::npos, e.what());
  }
  nn::materialize(model, zeros({1, test::kIn}));
  FullyShardedDataParallel fsdp(
      model, pg, {.auto_wrap_policy = distributed::module_type_auto_wrap_policy({"Linear", "LazyLinear"})});
  auto opt = test::make_optimizer("adamw", fsdp->parameters());
  auto plugin = precision::make_precision("32-true");
  test::train_steps(*plugin, [&](const Tensor& x) { return fsdp(x); }, fsdp.ptr().get(), *opt, pg->rank(), pg->size(),
                    0, kSteps);
  test::save_result(pg->rank(), fsdp->full_state_dict());
  return 0;
}

TEST_CASE("a lazy model is refused until materialised, then trains as it does in one process") {
  auto model = make_lazy_mlp();
  nn::materialize(model, zeros({1, test::kIn}));
  auto opt = test::make_optimizer("adamw", model->parameters());
  auto plugin = precision::make_precision("32-true");
  test::train_steps(*plugin, [&](const Tensor& x) { return model(x); }, model.ptr().get(), *opt, 0, 1, 0, kSteps);
  const auto expected = model->state_dict();
  const auto run = test::run_ranks(3, "fsdp_lazy");
  INFO(run.logs());
  REQUIRE(run.ok());
  CHECK(test::max_relative_difference(run.result(0), expected) <= 1e-5);
}

namespace {

// Multiplies by a buffer, which FSDP must keep whole (never sharded) in buffer_dtype.
struct Scale : nn::Module {
  explicit Scale(double value) { scale = register_buffer("scale", full({test::kOut}, value)); }
  Tensor forward(const Tensor& x) override { return mul(x, scale.to(x.dtype())); }
  Tensor scale;
};

}  // namespace

WEFT_RANK_WORKER(fsdp_buffers) {
  auto pg = test::init_group();
  auto model = test::make_mlp(9);
  auto scale = std::make_shared<Scale>(1.0 + pg->rank());  // rank 0's value (1) must win
  model->push_back(scale);
  const test::FsdpConfig c{"bf16-mixed", "adamw", "FULL_SHARD", "linear"};
  FullyShardedDataParallel fsdp(model, pg, test::fsdp_options(c));
  test::require(scale->scale.dtype() == kBFloat16, "the buffer is not in buffer_dtype");
  test::require(equal(scale->scale, full({test::kOut}, 1.0, kBFloat16)), "the buffer is not rank 0's, whole");
  const test::Batch b = test::local_rows(test::global_batch(0), pg->rank(), pg->size());
  cross_entropy(fsdp(b.x).to(kFloat32), b.y).backward();
  const nn::TensorDict full = fsdp->full_state_dict();
  test::require(full.at("3.scale").dtype() == kFloat32 && equal(full.at("3.scale"), ones({test::kOut})),
                "the full state dict does not hold the buffer in its own dtype");
  return 0;
}

TEST_CASE("FSDP keeps buffers whole, in buffer_dtype, with rank 0's values; state dicts hold their own dtype") {
  const auto run = test::run_ranks(3, "fsdp_buffers");
  INFO(run.logs());
  CHECK(run.ok());
}
