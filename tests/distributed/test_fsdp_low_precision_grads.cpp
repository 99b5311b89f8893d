// FSDP's keep_low_precision_grads (precision/fsdp_precision.h): the optimizer gets bfloat16
// gradient shards under bf16-mixed, in every sharding strategy. Each rank trains two copies of the
// same model side by side, one keeping low-precision gradients and one casting them to float32 (the
// default), and compares them: without accumulation the reduced shard is bfloat16 either way and
// optim/ widens it exactly, so the runs agree bit for bit; accumulating several synchronised
// backward passes rounds the kept sum to bfloat16 once per pass (Note [Low-precision gradient
// shards] in distributed/flat_param.h), checked element by element and, after training, within a
// stated tolerance. Clipping over shards works on bfloat16 shards.
#include <doctest/doctest.h>

#include <cmath>

#include "fsdp_helpers.h"

using namespace weft;
using distributed::FullyShardedDataParallel;

namespace {

constexpr int kSteps = 3;

struct Pair {
  nn::Sequential model;
  FullyShardedDataParallel fsdp;
  std::unique_ptr<optim::Optimizer> opt;
};

Pair make_copy(const std::shared_ptr<distributed::ProcessGroup>& pg, const std::string& strategy,
               const std::string& optimizer, bool keep) {
  test::FsdpConfig c{"bf16-mixed", optimizer, strategy, "linear"};
  distributed::FSDPOptions o = test::fsdp_options(c);
  o.mixed_precision->keep_low_precision_grads = keep;
  auto model = test::make_mlp(77);
  FullyShardedDataParallel fsdp(model, pg, o);
  auto opt = test::make_optimizer(optimizer, fsdp->parameters());
  return {model, fsdp, std::move(opt)};
}

Tensor loss_of(FullyShardedDataParallel& fsdp, int batch, int rank, int world) {
  const test::Batch b = test::local_rows(test::global_batch(batch), rank, world);
  return cross_entropy(fsdp(b.x).to(kFloat32), b.y);
}

void require_grad_dtype(FullyShardedDataParallel& fsdp, DType expected) {
  for (size_t u = 0; u < fsdp->units().size(); ++u)
    test::require(fsdp->shard(u).grad().dtype() == expected && fsdp->shard(u).dtype() == kFloat32,
                  "unit " + std::to_string(u) + " hands the optimizer a " +
                      std::string(dtype_name(fsdp->shard(u).grad().dtype())) + " gradient, expected " +
                      std::string(dtype_name(expected)) + " on a float32 shard");
}

// Trains both copies for kSteps steps; each step runs `micro` backward passes (the first micro - 1
// under no_sync when `no_sync`), then steps. Returns the copies' full state dicts.
std::pair<nn::TensorDict, nn::TensorDict> train_both(const std::shared_ptr<distributed::ProcessGroup>& pg,
                                                     const std::string& strategy, const std::string& optimizer,
                                                     int micro, bool no_sync) {
  std::vector<nn::TensorDict> out;
  for (const bool keep : {false, true}) {
    Pair p = make_copy(pg, strategy, optimizer, keep);
    for (int step = 0; step < kSteps; ++step) {
      p.opt->zero_grad();
      for (int m = 0; m < micro; ++m) {
        const bool sync = !no_sync || m == micro - 1;
        p.fsdp->set_requires_gradient_sync(sync);
        loss_of(p.fsdp, step * micro + m, pg->rank(), pg->size()).backward();
      }
      p.fsdp->set_requires_gradient_sync(true);
      require_grad_dtype(p.fsdp, keep ? kBFloat16 : kFloat32);
      p.opt->step();
    }
    out.push_back(p.fsdp->full_state_dict());
  }
  return {out[0], out[1]};
}

}  // namespace

// args: strategy. Writes "accumulated_<optimizer>" (the default run, then the kept one) for the
// test to measure.
WEFT_RANK_WORKER(fsdp_low_precision_grads) {
  auto pg = test::init_group();
  const std::string strategy = args.at(0);
  for (const char* optimizer : {"sgd", "adamw"}) {
    const auto [plain32, plain16] = train_both(pg, strategy, optimizer, 1, false);
    test::require(test::bitwise_equal(plain32, plain16),
                  std::string(optimizer) + ": one backward per step differs from the float32-gradient run");
    const auto [no_sync32, no_sync16] = train_both(pg, strategy, optimizer, 3, true);
    test::require(test::bitwise_equal(no_sync32, no_sync16),
                  std::string(optimizer) + ": no_sync accumulation differs from the float32-gradient run");
    const auto [accumulated32, accumulated16] = train_both(pg, strategy, optimizer, 3, false);
    test::save_result(pg->rank(), accumulated32, std::string("accumulated32_") + optimizer);
    test::save_result(pg->rank(), accumulated16, std::string("accumulated16_") + optimizer);
  }

  // Two synchronised backward passes A then B: the kept shard is bf16(widen(A) + widen(B)), one
  // rounding of the float32 sum; the default holds widen(A) + widen(B) in float32.
  for (const bool keep : {false, true}) {
    Pair p = make_copy(pg, strategy, "sgd", keep);
    std::vector<std::vector<Tensor>> alone;  // each pass's gradient shards on their own
    for (int batch : {0, 1}) {
      p.opt->zero_grad();
      loss_of(p.fsdp, batch, pg->rank(), pg->size()).backward();
      std::vector<Tensor> grads;
      for (size_t u = 0; u < p.fsdp->units().size(); ++u) grads.push_back(p.fsdp->shard(u).grad().clone());
      alone.push_back(grads);
    }
    p.opt->zero_grad();
    for (int batch : {0, 1}) loss_of(p.fsdp, batch, pg->rank(), pg->size()).backward();
    for (size_t u = 0; u < p.fsdp->units().size(); ++u) {
      const Tensor sum32 = add(alone[0][u].to(kFloat32), alone[1][u].to(kFloat32));
      const Tensor expected = keep ? sum32.to(kBFloat16) : sum32;
      test::require(equal(p.fsdp->shard(u).grad(), expected),
                    "unit " + std::to_string(u) + (keep ? " (kept)" : " (default)") +
                        ": the accumulated gradient is not the once-rounded sum of the passes");
    }
  }

  // Clipping over bf16 shards: the same total norm as over the float32 ones (the same values,
  // summed in float64), and each clipped gradient the float32 one's within a bfloat16 rounding.
  std::vector<double> norms;
  std::vector<std::vector<Tensor>> clipped;
  for (const bool keep : {false, true}) {
    Pair p = make_copy(pg, strategy, "sgd", keep);
    loss_of(p.fsdp, 0, pg->rank(), pg->size()).backward();
    norms.push_back(p.fsdp->clip_grad_norm_(0.05));
    std::vector<Tensor> grads;
    for (size_t u = 0; u < p.fsdp->units().size(); ++u) grads.push_back(p.fsdp->shard(u).grad().to(kFloat64));
    clipped.push_back(grads);
  }
  test::require(norms[0] == norms[1] && norms[0] > 0.05, "clip_grad_norm_ over bf16 shards returned " +
                                                              std::to_string(norms[1]) + ", over float32 ones " +
                                                              std::to_string(norms[0]));
  for (size_t u = 0; u < clipped[0].size(); ++u) {
    const double bound = std::ldexp(1.0, -8);  // a bfloat16 rounding, relative
    const Tensor diff = abs(sub(clipped[1][u], clipped[0][u]));
    test::require(sum(logical_not(le(diff, mul(abs(clipped[0][u]), bound)))).item<int64_t>() == 0,
                  "a clipped bf16 gradient is further than a rounding from the float32 one");
  }
  return 0;
}

TEST_CASE("keep_low_precision_grads: bf16 gradient shards, the float32-gradient run's bits without accumulation, "
          "close to it with accumulation") {
  for (const std::string strategy : {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"}) {
    CAPTURE(strategy);
    const auto run = test::run_ranks(2, "fsdp_low_precision_grads", {strategy});
    INFO(run.logs());
    REQUIRE(run.ok());
    // Three synchronised passes per step, three steps: the kept sum rounds to bfloat16 after the
    // second and third pass (≤ 2^-9 of the gradient each). SGD (lr 0.1, momentum 0.9) carries that
    // into the parameters scaled by lr·(1 + 0.9 + 0.81) < 0.3: well under 1e-3 of parameters of
    // order 1. AdamW divides by the gradient's own magnitude, so where the gradient is near zero a
    // rounding can move a step by up to 2·lr; the mean stays at the rounding's level.
    const auto sgd = test::relative_difference(run.result(0, "accumulated16_sgd"), run.result(0, "accumulated32_sgd"));
    CHECK(sgd.max <= 1e-3);
    CHECK(sgd.max > 0);  // the passes did round: the test sees the accumulation
    const auto adamw =
        test::relative_difference(run.result(0, "accumulated16_adamw"), run.result(0, "accumulated32_adamw"));
    CHECK(adamw.mean <= 1e-3);
    CHECK(adamw.max <= 2 * 0.02 * kSteps);
  }
}
