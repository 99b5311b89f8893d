// Weight tying under data parallelism: a tiny language model whose head is its token embedding
// (tests/nn/tied_model.h) trains at 2 ranks under DDP and under FSDP as one process trains on the
// whole batch. The tied gradient is the sum of both uses, reduced once (a bucket or flat
// parameter that counted it twice would drift from the reference). FSDP keeps the tied tensor
// once, in the unit that holds both uses, and its full and sharded checkpoints round-trip it.
#include <doctest/doctest.h>

#include "../nn/tied_model.h"
#include "train_helpers.h"

using namespace weft;
using distributed::DistributedDataParallel;
using distributed::FullyShardedDataParallel;

namespace {

constexpr int kSteps = 4;
constexpr int64_t kBatch = 12;

// Token ids and next-token targets of step `step`, the same on every rank.
test::Batch tied_batch(int step) {
  Generator g(500 + static_cast<uint64_t>(step));
  return {randint(0, test::kVocab, {kBatch}, {}, &g), randint(0, test::kVocab, {kBatch}, {}, &g)};
}

void train(const std::function<Tensor(const Tensor&)>& forward, optim::Optimizer& opt, int rank, int world) {
  for (int step = 0; step < kSteps; ++step) {
    const test::Batch b = test::local_rows(tied_batch(step), rank, world);
    opt.zero_grad();
    cross_entropy(forward(b.x), b.y).backward();
    opt.step();
  }
}

// One process on the whole batch.
nn::TensorDict reference(const std::string& optimizer) {
  auto model = test::make_tied_lm(1234);
  auto opt = test::make_optimizer(optimizer, model->parameters());
  train([&](const Tensor& ids) { return model(ids); }, *opt, 0, 1);
  return model->state_dict();
}

distributed::FSDPOptions fsdp_options(const std::string& policy) {
  distributed::FSDPOptions o;
  // "layers": every layer its own unit, so the embedding and the head, which share their only
  // parameter, hold nothing of their own and the tied weight goes to the root.
  if (policy == "layers") o.auto_wrap_policy = distributed::module_type_auto_wrap_policy({"Embedding", "Linear", "TiedHead"});
  return o;
}

// A tied pair one level down, beside a Linear of its own, the head a unit of its own (it has a
// bias) whose weight is the embedding's: that weight belongs to "lm", the innermost unit holding
// both uses, which is gathered while the head's unit runs forward and backward.
struct BiasedTiedHeadImpl : nn::Module {
  Tensor weight, bias;
  explicit BiasedTiedHeadImpl(const Tensor& w) {
    weight = register_parameter("weight", w);
    bias = register_parameter("bias", full({test::kVocab}, 0.1));
  }
  Tensor forward(const Tensor& x) override { return linear(x, weight, bias); }
};
WEFT_MODULE(BiasedTiedHead);

struct InnerImpl : nn::Module {
  nn::Embedding wte{nullptr};
  nn::Linear fc{nullptr};
  BiasedTiedHead head{nullptr};
  InnerImpl() {
    wte = register_module("wte", nn::Embedding(test::kVocab, test::kWidth));
    fc = register_module("fc", nn::Linear(test::kWidth, test::kWidth));
    head = register_module("head", BiasedTiedHead(wte->weight));
  }
  Tensor forward(const Tensor& ids) override { return head(tanh(fc(wte(ids)))); }
};
WEFT_MODULE(Inner);

struct OuterImpl : nn::Module {
  Inner lm{nullptr};
  nn::Linear out{nullptr};
  OuterImpl() {
    lm = register_module("lm", Inner());
    out = register_module("out", nn::Linear(test::kVocab, test::kVocab));
  }
  Tensor forward(const Tensor& ids) override { return out(lm(ids)); }
};
WEFT_MODULE(Outer);

Outer make_outer(uint64_t seed) {
  manual_seed(seed);
  return Outer();
}

}  // namespace

WEFT_RANK_WORKER(tied_fsdp_nested) {
  auto pg = test::init_group();
  auto model = make_outer(1234 + static_cast<uint64_t>(pg->rank()));
  distributed::FSDPOptions o;
  o.auto_wrap_policy = distributed::module_type_auto_wrap_policy({"Inner", "Linear", "BiasedTiedHead"});
  FullyShardedDataParallel fsdp(model, pg, o);
  std::vector<std::pair<std::string, int64_t>> units;
  for (const auto& u : fsdp->units()) units.emplace_back(u.name, u.numel);
  test::require(units == std::vector<std::pair<std::string, int64_t>>{{"lm", test::kVocab * test::kWidth},
                                                                      {"lm.fc", 30},
                                                                      {"lm.head", test::kVocab},
                                                                      {"out", 56}},
                "the tied weight belongs in 'lm'; the root holds nothing");
  auto opt = test::make_optimizer("adamw", fsdp->parameters());
  train([&](const Tensor& ids) { return fsdp(ids); }, *opt, pg->rank(), pg->size());
  test::save_result(pg->rank(), fsdp->full_state_dict());
  return 0;
}

TEST_CASE("FSDP keeps a tied weight in the innermost unit holding both uses, below the root") {
  auto model = make_outer(1234);
  auto opt = test::make_optimizer("adamw", model->parameters());
  train([&](const Tensor& ids) { return model(ids); }, *opt, 0, 1);
  const nn::TensorDict expected = model->state_dict();
  const auto run = test::run_ranks(2, "tied_fsdp_nested");
  INFO(run.logs());
  REQUIRE(run.ok());
  for (int r = 0; r < 2; ++r) {
    const nn::TensorDict got = run.result(r);
    CHECK(test::max_relative_difference(got, expected) <= 1e-5);
    CHECK(equal(got.at("lm.head.weight"), got.at("lm.wte.weight")));
  }
}

WEFT_RANK_WORKER(tied_ddp) {
  auto pg = test::init_group();
  for (const std::string o : {"sgd", "adamw"}) {
    auto model = test::make_tied_lm(1234 + static_cast<uint64_t>(pg->rank()));  // rank 0's must win
    DistributedDataParallel ddp(model, pg, {.bucket_cap_mb = 0.0001, .first_bucket_cap_mb = 0.0001});
    test::require(ddp->parameters().size() == 3, "DDP must see the tied tensor once");
    auto opt = test::make_optimizer(o, ddp->parameters());
    train([&](const Tensor& ids) { return ddp(ids); }, *opt, pg->rank(), pg->size());
    test::require(model->head->weight.is_same(model->wte->weight), "DDP cut the tie");
    test::save_result(pg->rank(), model->state_dict(), o);
  }
  return 0;
}

TEST_CASE("a tied model under DDP at 2 ranks trains as one process on the whole batch") {
  const auto run = test::run_ranks(2, "tied_ddp");
  INFO(run.logs());
  REQUIRE(run.ok());
  for (const std::string o : {"sgd", "adamw"}) {
    CAPTURE(o);
    const nn::TensorDict expected = reference(o);
    for (int r = 0; r < 2; ++r) {
      const nn::TensorDict got = run.result(r, o);
      CHECK(test::max_relative_difference(got, expected) <= 1e-5);
      CHECK(equal(got.at("head.weight"), got.at("wte.weight")));
    }
  }
}

WEFT_RANK_WORKER(tied_fsdp) {
  auto pg = test::init_group();
  const std::string policy = args.at(0);
  const std::filesystem::path folder = test::run_dir() / "sharded";
  auto model = test::make_tied_lm(1234 + static_cast<uint64_t>(pg->rank()));
  FullyShardedDataParallel fsdp(model, pg, fsdp_options(policy));
  const auto units = fsdp->units();
  if (policy == "layers") {
    test::require(units.size() == 2 && units[0].name.empty() && units[0].numel == test::kVocab * test::kWidth &&
                      units[1].name == "fc",
                  "the tied weight belongs in the root unit, fc in its own");
  } else {
    test::require(units.size() == 1 && units[0].numel == (test::kVocab + test::kWidth + 1) * test::kWidth,
                  "one unit holding the tied weight once");
  }
  auto opt = test::make_optimizer("adamw", fsdp->parameters());
  train([&](const Tensor& ids) { return fsdp(ids); }, *opt, pg->rank(), pg->size());
  const nn::TensorDict full = fsdp->full_state_dict();
  test::require(full.at("head.weight").is_same(full.at("wte.weight")), "the full state dict lists one tensor twice");
  test::save_result(pg->rank(), full, "trained");

  // The full state dict as a file keeps it (io/checkpoint.h): one name, which loads back.
  io::SafetensorsMetadata meta;
  const nn::TensorDict once = io::drop_tied_names(full, meta);
  test::require(!once.contains("wte.weight") && meta.at("wte.weight") == "head.weight", "the file keeps head.weight");
  fsdp->save_sharded(folder, opt.get());

  auto fresh_model = test::make_tied_lm(99);
  FullyShardedDataParallel fresh(fresh_model, pg, fsdp_options(policy));
  fresh->load_full_state_dict(once);
  test::require(test::bitwise_equal(fresh->full_state_dict(), full), "a full state dict under one name round-trips");

  auto other_model = test::make_tied_lm(98);
  FullyShardedDataParallel other(other_model, pg, fsdp_options(policy));
  auto other_opt = test::make_optimizer("adamw", other->parameters());
  other->load_sharded(folder, other_opt.get());
  test::require(test::bitwise_equal(other->full_state_dict(), full), "a sharded checkpoint round-trips");
  // Both resume alike: one more step each.
  train([&](const Tensor& ids) { return fsdp(ids); }, *opt, pg->rank(), pg->size());
  train([&](const Tensor& ids) { return other(ids); }, *other_opt, pg->rank(), pg->size());
  test::require(test::bitwise_equal(other->full_state_dict(), fsdp->full_state_dict()), "the resumed runs differ");

  nn::TensorDict differing;
  for (const auto& [name, t] : full) differing.insert(name, name == "head.weight" ? t + 1 : t);
  try {
    fresh->load_full_state_dict(differing);
    test::require(false, "tied names with different values must be refused");
  } catch (const Error& e) {
    test::require(std::string(e.what()).find("'wte.weight' and 'head.weight' are one tied parameter but carry "
                                             "different values") != std::string::npos,
                  e.what());
  }
  return 0;
}

TEST_CASE("a tied model under FSDP FULL_SHARD at 2 ranks trains as one process; its checkpoints round-trip") {
  const nn::TensorDict expected = reference("adamw");
  for (const std::string policy : {"none", "layers"}) {
    CAPTURE(policy);
    const auto run = test::run_ranks(2, "tied_fsdp", {policy});
    INFO(run.logs());
    REQUIRE(run.ok());
    for (int r = 0; r < 2; ++r) {
      const nn::TensorDict got = run.result(r, "trained");
      CHECK(test::max_relative_difference(got, expected) <= 1e-5);
    }
  }
}
