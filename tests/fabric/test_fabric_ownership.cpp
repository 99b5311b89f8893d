// A Fabric-wrapped optimizer shares ownership of its optimizer, so it cannot dangle: a reference is
// refused at compile time (checked here with concepts), an optimizer moved in or handed over as a
// std::shared_ptr lives as long as the wrapper needs it.
#include <doctest/doctest.h>

#include <memory>
#include <utility>

#include "precision/plugin_test_helpers.h"
#include "fabric/all.h"

using namespace weft;
using fabric::Fabric;
using testing::contains;

namespace {

template <class Arg>
concept CanSetupOptimizer = requires(Fabric& f, Arg&& optimizer) { f.setup_optimizer(std::forward<Arg>(optimizer)); };
template <class Arg>
concept CanSetup = requires(Fabric& f, const nn::Linear& model, Arg&& optimizer) {
  f.setup(model, std::forward<Arg>(optimizer));
};

// A wrapper over a reference would dangle once the optimizer's scope ends: refused.
static_assert(!CanSetupOptimizer<optim::SGD&>);
static_assert(!CanSetupOptimizer<const optim::SGD&>);
static_assert(!CanSetupOptimizer<optim::Optimizer&>);
static_assert(!CanSetup<optim::AdamW&>);
// Ownership handed over: moved in, or shared.
static_assert(CanSetupOptimizer<optim::SGD>);
static_assert(CanSetupOptimizer<std::shared_ptr<optim::SGD>&>);
static_assert(CanSetupOptimizer<std::shared_ptr<optim::Optimizer>>);
static_assert(CanSetup<optim::AdamW>);
static_assert(CanSetup<const std::shared_ptr<optim::AdamW>&>);

}  // namespace

TEST_CASE("a Fabric-wrapped optimizer made in an inner scope still steps after that scope ended") {
  Fabric fabric;
  nn::Linear fc(2, 1, /*bias=*/false);
  auto model = fabric.setup_module(fc);
  // The optimizer is a local of the lambda; before shared ownership the wrapper kept its address.
  const fabric::FabricOptimizer optimizer = [&] {
    optim::SGD sgd(fc->parameters(), {.lr = 0.5});
    return fabric.setup_optimizer(std::move(sgd));
  }();
  {
    NoGradGuard no_grad;
    fc->weight.fill_(1.0);
  }
  // loss = x · w with x = (1, 2): dloss/dw = (1, 2); w - 0.5 · (1, 2) = (0.5, 0).
  fabric.backward(sum(model(tensor({1.0, 2.0}).reshape({1, 2}))), &model);
  CHECK(optimizer.step());
  CHECK(optimizer->name() == "SGD");
  const Tensor w = fc->weight.detach().to(kFloat64);
  CHECK(w.data<double>()[0] == 0.5);
  CHECK(w.data<double>()[1] == 0.0);
}

TEST_CASE("a shared optimizer stays the caller's too, and lives while a wrapper holds it") {
  Fabric fabric;
  nn::Linear fc(2, 1);
  auto adamw = std::make_shared<optim::AdamW>(fc->parameters(), optim::AdamWOptions{.lr = 0.25});
  std::weak_ptr<optim::AdamW> watch = adamw;
  {
    auto [model, optimizer] = fabric.setup(fc, adamw);
    CHECK(&optimizer.optimizer() == adamw.get());
    adamw.reset();
    CHECK_FALSE(watch.expired());  // the wrapper keeps it alive
    CHECK(optimizer->lr(0) == 0.25);
  }
  CHECK(watch.expired());
  CHECK(contains(error_of([&] { fabric.setup_optimizer(std::shared_ptr<optim::Optimizer>()); }),
                 "[Fabric.setup] expected an optimizer, got an empty pointer"));
}
