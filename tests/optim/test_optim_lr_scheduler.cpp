// LR schedulers against PyTorch 1.13 (golden values from scripts/golden_optim.py) and against
// their closed forms, plus state-dict round trips.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <numbers>
#include <string>

#include "optim/golden_optim.h"
#include "optim/all.h"

using namespace weft;
namespace golden = golden_optim;

namespace {

// An SGD with two groups whose lrs are the golden base lrs.
struct TwoGroups {
  Tensor a = zeros({1}).requires_grad_();
  Tensor b = zeros({1}).requires_grad_();
  optim::SGD opt{{a}, {.lr = golden::kBaseLrs[0]}};
  TwoGroups() { opt.add_param_group({b}, {.lr = golden::kBaseLrs[1]}); }
};

std::unique_ptr<optim::LRScheduler> make_scheduler(optim::Optimizer& opt, const golden::SchedulerCase& c) {
  const std::string kind = c.kind;
  if (kind == "StepLR") return std::make_unique<optim::StepLR>(opt, c.step_size, c.gamma);
  if (kind == "CosineAnnealingLR") return std::make_unique<optim::CosineAnnealingLR>(opt, c.t_max, c.eta_min);
  if (kind == "LinearLR")
    return std::make_unique<optim::LinearLR>(opt, c.start_factor, c.end_factor, c.total_iters);
  auto warmup = std::make_shared<optim::LinearLR>(opt, c.start_factor, c.end_factor, c.total_iters);
  auto cosine = std::make_shared<optim::CosineAnnealingLR>(opt, c.t_max, c.eta_min);
  return std::make_unique<optim::SequentialLR>(opt, std::vector<std::shared_ptr<optim::ChainableLRScheduler>>{warmup, cosine},
                                               std::vector<int64_t>{c.milestone});
}

void check_lrs(const optim::LRScheduler& s, const double* expected, double tol) {
  for (size_t g = 0; g < 2; ++g) {
    CAPTURE(g);
    CHECK(std::abs(s.get_last_lr()[g] - expected[g]) <= tol);
    CHECK(s.optimizer().lr(g) == s.get_last_lr()[g]);
  }
}

constexpr double kPi = std::numbers::pi;

}  // namespace

TEST_CASE("LR schedulers match PyTorch step by step") {
  for (const golden::SchedulerCase& c : golden::kSchedulerCases) {
    SUBCASE(c.name) {
      TwoGroups model;
      auto scheduler = make_scheduler(model.opt, c);
      check_lrs(*scheduler, c.lrs[0], 1e-15);
      for (int k = 1; k <= golden::kSchedulerSteps; ++k) {
        CAPTURE(k);
        model.opt.step();
        scheduler->step();
        check_lrs(*scheduler, c.lrs[k], 1e-15);
      }
    }
  }
}

TEST_CASE("LR schedulers follow their closed forms") {
  TwoGroups model;
  const double base = golden::kBaseLrs[0];
  SUBCASE("StepLR") {
    optim::StepLR s(model.opt, 4, 0.3);
    for (int t = 0; t <= 20; ++t, s.step()) CHECK(s.get_last_lr()[0] == doctest::Approx(base * std::pow(0.3, t / 4)));
  }
  SUBCASE("CosineAnnealingLR over one period and past it") {
    const int t_max = 7;
    const double eta_min = 0.01;
    optim::CosineAnnealingLR s(model.opt, t_max, eta_min);
    for (int t = 0; t <= 3 * t_max; ++t, s.step()) {
      CAPTURE(t);
      CHECK(s.get_last_lr()[0] ==
            doctest::Approx(eta_min + (base - eta_min) * (1 + std::cos(kPi * t / t_max)) / 2).epsilon(1e-12));
    }
    CHECK(s.base_lrs() == std::vector<double>{golden::kBaseLrs[0], golden::kBaseLrs[1]});
  }
  SUBCASE("LinearLR as warm-up") {
    optim::LinearLR s(model.opt, 0.25, 1.0, 6);
    for (int t = 0; t <= 12; ++t, s.step())
      CHECK(s.get_last_lr()[1] ==
            doctest::Approx(golden::kBaseLrs[1] * (0.25 + 0.75 * std::min(t, 6) / 6.0)).epsilon(1e-12));
  }
  SUBCASE("SequentialLR: warm-up, then cosine from the base lr") {
    auto warmup = std::make_shared<optim::LinearLR>(model.opt, 0.1, 1.0, 4);
    auto cosine = std::make_shared<optim::CosineAnnealingLR>(model.opt, 10);
    optim::SequentialLR s(model.opt, {warmup, cosine}, {4});
    for (int t = 0; t <= 14; ++t, s.step()) {
      CAPTURE(t);
      const double expected = t < 4 ? base * (0.1 + 0.9 * t / 4.0) : base * (1 + std::cos(kPi * (t - 4) / 10)) / 2;
      CHECK(s.get_last_lr()[0] == doctest::Approx(expected).epsilon(1e-12));
    }
  }
}

TEST_CASE("schedules are chainable: an outside change to the lr carries forward") {
  TwoGroups model;
  optim::StepLR s(model.opt, 2, 0.5);
  s.step();
  model.opt.set_lr(0, 1.0);
  s.step();  // epoch 2: halves whatever the lr is now
  CHECK(s.get_last_lr()[0] == 0.5);
}

TEST_CASE("the first scheduler records each group's initial lr in the optimizer") {
  TwoGroups model;
  optim::LinearLR s(model.opt, 0.5, 1.0, 3);
  CHECK(model.opt.initial_lr(0) == golden::kBaseLrs[0]);
  CHECK(model.opt.lr(0) == golden::kBaseLrs[0] * 0.5);
  const auto state = model.opt.state_dict();
  CHECK(state.scalars.at("param_groups.1.initial_lr") == optim::format_scalar(golden::kBaseLrs[1]));
  // A second scheduler takes its base lrs from there, not from the lr the first one set.
  optim::StepLR second(model.opt, 1, 0.5);
  CHECK(second.base_lrs()[0] == golden::kBaseLrs[0]);
}

TEST_CASE("scheduler state dicts round trip exactly") {
  for (const golden::SchedulerCase& c : golden::kSchedulerCases) {
    SUBCASE(c.name) {
      TwoGroups uninterrupted, resumed;
      auto s1 = make_scheduler(uninterrupted.opt, c);
      for (int k = 0; k < 7; ++k) s1->step();
      const optim::SchedulerState saved = s1->state_dict();
      const optim::OptimizerState saved_opt = uninterrupted.opt.state_dict();

      auto s2 = make_scheduler(resumed.opt, c);
      resumed.opt.load_state_dict(saved_opt);
      s2->load_state_dict(saved);
      CHECK(s2->last_epoch() == s1->last_epoch());
      CHECK(s2->get_last_lr() == s1->get_last_lr());
      for (int k = 0; k < 20; ++k) {
        s1->step();
        s2->step();
        CHECK(s2->get_last_lr() == s1->get_last_lr());
      }
    }
  }
}

TEST_CASE("scheduler state dicts and options are checked") {
  TwoGroups model;
  optim::StepLR step(model.opt, 3);
  optim::LinearLR linear(model.opt);
  CHECK_THROWS_WITH_AS(step.load_state_dict(linear.state_dict()),
                       doctest::Contains("expected a state dict saved by StepLR, got one saved by LinearLR"), Error);
  optim::SchedulerState bad = step.state_dict();
  bad.erase("gamma");
  CHECK_THROWS_WITH_AS(step.load_state_dict(bad), doctest::Contains("no 'gamma'"), Error);
  bad = step.state_dict();
  bad["base_lrs"] = "0.1";
  CHECK_THROWS_WITH_AS(step.load_state_dict(bad), doctest::Contains("the optimizer has 2 parameter groups"), Error);

  CHECK_THROWS_WITH_AS(optim::LinearLR(model.opt, 0.0), doctest::Contains("greater than 0"), Error);
  CHECK_THROWS_WITH_AS(optim::LinearLR(model.opt, 0.5, 1.5), doctest::Contains("between 0 and 1"), Error);
  CHECK_THROWS_WITH_AS(optim::StepLR(model.opt, 0), doctest::Contains("step_size >= 1"), Error);
  CHECK_THROWS_WITH_AS(optim::CosineAnnealingLR(model.opt, 0), doctest::Contains("t_max >= 1"), Error);

  auto a = std::make_shared<optim::LinearLR>(model.opt);
  auto b = std::make_shared<optim::StepLR>(model.opt, 2);
  CHECK_THROWS_WITH_AS(optim::SequentialLR(model.opt, {a, b}, {}), doctest::Contains("one milestone fewer"), Error);
  TwoGroups other;
  auto foreign = std::make_shared<optim::StepLR>(other.opt, 2);
  CHECK_THROWS_WITH_AS(optim::SequentialLR(model.opt, {a, foreign}, {3}), doctest::Contains("same optimizer"), Error);
}
