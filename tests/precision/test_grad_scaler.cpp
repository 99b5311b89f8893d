// GradScaler against PyTorch's semantics (reference fabric-precision.md §3.4.1, cases T21–T25
// and the state round trip of T43), driven through a tiny fake optimizer: plain SGD with lr 1
// that counts its steps. On a GPU, an enabled scaler refuses to be recorded in a CUDA graph.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "precision/all.h"

using namespace weft;
using precision::GradScaler;
using precision::GradScalerOptions;

namespace {

struct FakeParamGroup {
  std::vector<Tensor> params;
};

struct FakeOptimizer {
  std::vector<FakeParamGroup> groups;
  int steps = 0;
  int closure_calls = 0;

  std::vector<FakeParamGroup>& param_groups() { return groups; }
  void step() {
    ++steps;
    NoGradGuard no_grad;
    for (auto& group : groups)
      for (auto& p : group.params)
        if (p.grad().defined()) p.sub_(p.grad());
  }
  template <class Closure>
  void step(Closure&& closure) {
    closure();
    ++closure_calls;
    step();
  }
};

static_assert(precision::ScalableOptimizer<FakeOptimizer>);

Tensor param(std::initializer_list<double> values) { return tensor(values).requires_grad_(); }

// Gives p the gradient `values` (as a scaled backward would have left it).
void set_grad(Tensor& p, std::initializer_list<double> values) { p.set_grad(tensor(values, p.dtype())); }

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("T21: growth and backoff follow the update kernel step by step") {
  GradScaler scaler(GradScalerOptions{.init_scale = 8.0, .growth_interval = 3});
  Tensor p = param({1.0});
  FakeOptimizer opt{{{{p}}}};
  scaler.scale(tensor({1.0}));
  const bool found_inf[] = {false, false, false, true, false};
  const double scales[] = {8, 8, 16, 8, 8};
  const int64_t trackers[] = {1, 2, 0, 0, 1};
  for (int i = 0; i < 5; ++i) {
    set_grad(p, {found_inf[i] ? kInf : 1.0});
    CHECK(scaler.step(opt) == !found_inf[i]);
    scaler.update();
    CHECK(scaler.get_scale() == scales[i]);
    CHECK(scaler.growth_tracker() == trackers[i]);
  }
  CHECK(opt.steps == 4);
}

TEST_CASE("T22: an inf gradient skips the step, keeps the parameters and halves the scale") {
  GradScaler scaler;
  Tensor a = param({1.0, 2.0});
  Tensor b = param({3.0});
  FakeOptimizer opt{{{{a}}, {{b}}}};
  const Tensor loss = scaler.scale(scalar_tensor(1.5));
  CHECK(loss.item() == 1.5 * 65536.0);
  set_grad(a, {65536.0, 2 * 65536.0});
  set_grad(b, {kInf});
  CHECK_FALSE(scaler.step(opt));
  CHECK(opt.steps == 0);
  CHECK(a.to_vector<double>() == std::vector<double>{1.0, 2.0});
  CHECK(b.to_vector<double>() == std::vector<double>{3.0});
  scaler.update();
  CHECK(scaler.get_scale() == 32768.0);
  CHECK(scaler.growth_tracker() == 0);

  // A clean step unscales before stepping: SGD with lr 1 subtracts the true gradient.
  scaler.scale(scalar_tensor(1.0));
  set_grad(a, {32768.0, 3 * 32768.0});
  set_grad(b, {-32768.0});
  CHECK(scaler.step(opt));
  CHECK(opt.steps == 1);
  CHECK(a.grad().to_vector<double>() == std::vector<double>{1.0, 3.0});
  CHECK(a.to_vector<double>() == std::vector<double>{0.0, -1.0});
  CHECK(b.to_vector<double>() == std::vector<double>{4.0});
  scaler.update();
  CHECK(scaler.get_scale() == 32768.0);
  CHECK(scaler.growth_tracker() == 1);
}

TEST_CASE("a NaN counts as an inf, and each optimizer decides its own step") {
  GradScaler scaler(GradScalerOptions{.init_scale = 4.0});
  Tensor a = param({1.0});
  Tensor b = param({1.0});
  FakeOptimizer clean{{{{a}}}};
  FakeOptimizer broken{{{{b}}}};
  scaler.scale(scalar_tensor(1.0));
  set_grad(a, {4.0});
  set_grad(b, {std::nan("")});
  CHECK(scaler.step(clean));
  CHECK_FALSE(scaler.step(broken));
  CHECK(a.item() == 0.0);
  CHECK(b.item() == 1.0);
  scaler.update();  // the combined check saw the NaN
  CHECK(scaler.get_scale() == 2.0);
}

TEST_CASE("T23: the per-optimizer state machine refuses double unscale, unscale after step, double step") {
  GradScaler scaler;
  Tensor p = param({1.0});
  FakeOptimizer opt{{{{p}}}};
  scaler.scale(scalar_tensor(1.0));
  set_grad(p, {65536.0});
  scaler.unscale_(opt);
  CHECK(p.grad().item() == 1.0);
  CHECK_THROWS_WITH_AS(scaler.unscale_(opt),
                       "[GradScaler] unscale_() has already been called on this optimizer since the last update().",
                       Error);
  CHECK(scaler.step(opt));  // already unscaled: steps without unscaling again
  CHECK(p.item() == 0.0);
  CHECK_THROWS_WITH_AS(scaler.unscale_(opt), "[GradScaler] unscale_() is being called after step().", Error);
  CHECK_THROWS_WITH_AS(scaler.step(opt), "[GradScaler] step() has already been called since the last update().",
                       Error);
  scaler.update();
  set_grad(p, {65536.0});
  CHECK(scaler.step(opt));  // READY again after update()
}

TEST_CASE("T24: a closure is refused while the scaler is enabled") {
  Tensor p = param({1.0});
  FakeOptimizer opt{{{{p}}}};
  GradScaler scaler;
  scaler.scale(scalar_tensor(1.0));
  set_grad(p, {1.0});
  CHECK_THROWS_WITH_AS(scaler.step(opt, [] {}),
                       "[GradScaler] Closure use is not currently supported if GradScaler is enabled.", Error);
  CHECK(opt.closure_calls == 0);
  GradScaler disabled(GradScalerOptions{.enabled = false});
  CHECK(disabled.step(opt, [] {}));
  CHECK(opt.closure_calls == 1);
}

TEST_CASE("T25: a fresh state dict, and loading an empty one") {
  GradScaler scaler;
  const nn::TensorDict state = scaler.state_dict();
  REQUIRE(state.size() == 5);
  std::vector<std::string> names;
  for (const auto& [name, value] : state) names.push_back(name);
  CHECK(names == std::vector<std::string>{"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"});
  CHECK(state.at("scale").item() == 65536.0);
  CHECK(state.at("growth_factor").item() == 2.0);
  CHECK(state.at("backoff_factor").item() == 0.5);
  CHECK(state.at("growth_interval").dtype() == kInt64);
  CHECK(state.at("growth_interval").item<int64_t>() == 2000);
  CHECK(state.at("_growth_tracker").item<int64_t>() == 0);
  CHECK_THROWS_WITH_AS(scaler.load_state_dict(nn::TensorDict()),
                       "[GradScaler] The source state dict is empty, possibly because it was saved from a disabled "
                       "instance of GradScaler.",
                       Error);
  nn::TensorDict partial;
  partial.insert("scale", scalar_tensor(2.0, kFloat64));
  CHECK_THROWS_WITH_AS(scaler.load_state_dict(partial), doctest::Contains("expected an entry 'growth_factor'"), Error);
  CHECK(scaler.get_scale() == 65536.0);  // a refused load changes nothing
}

TEST_CASE("T43: state_dict / load_state_dict round trip, before and after the first scale()") {
  GradScaler source(GradScalerOptions{.init_scale = 1024.0, .growth_factor = 4.0, .backoff_factor = 0.25,
                                      .growth_interval = 5});
  Tensor p = param({1.0});
  FakeOptimizer opt{{{{p}}}};
  source.scale(scalar_tensor(1.0));
  for (double g : {kInf, 1.0, 1.0}) {
    set_grad(p, {g});
    source.step(opt);
    source.update();
  }
  CHECK(source.get_scale() == 256.0);
  CHECK(source.growth_tracker() == 2);
  const nn::TensorDict saved = source.state_dict();

  GradScaler fresh;  // loaded before its first scale(): the lazy initial values are replaced
  fresh.load_state_dict(saved);
  CHECK(fresh.get_scale() == 256.0);
  CHECK(fresh.growth_tracker() == 2);
  CHECK(fresh.get_growth_factor() == 4.0);
  CHECK(fresh.get_backoff_factor() == 0.25);
  CHECK(fresh.get_growth_interval() == 5);
  fresh.scale(scalar_tensor(1.0));
  CHECK(fresh.get_scale() == 256.0);

  GradScaler live;  // loaded after its first scale(): the live values are overwritten
  live.scale(scalar_tensor(1.0));
  live.load_state_dict(saved);
  CHECK(live.get_scale() == 256.0);
  CHECK(live.growth_tracker() == 2);

  // Both continue exactly like the source: three more clean steps reach the interval of 5.
  for (GradScaler* s : {&source, &fresh, &live}) {
    for (int i = 0; i < 3; ++i) {
      set_grad(p, {1.0});
      s->step(opt);
      s->update();
    }
    CHECK(s->get_scale() == 1024.0);
    CHECK(s->growth_tracker() == 0);
  }
}

TEST_CASE("misuse: no scale() yet, no gradients, no inf checks, fp16 gradients, bad factors") {
  Tensor p = param({1.0});
  FakeOptimizer opt{{{{p}}}};
  GradScaler scaler;
  const std::string hint =
      " but _scale is None.  This may indicate your script did not use scaler.scale(loss or outputs) earlier in the "
      "iteration.";
  CHECK_THROWS_WITH_AS(scaler.step(opt), ("[GradScaler] Attempted step" + hint).c_str(), Error);
  CHECK_THROWS_WITH_AS(scaler.update(), ("[GradScaler] Attempted update" + hint).c_str(), Error);
  CHECK_THROWS_WITH_AS(scaler.unscale_(opt), ("[GradScaler] Attempted unscale_" + hint).c_str(), Error);
  scaler.scale(scalar_tensor(1.0));
  CHECK_THROWS_WITH_AS(scaler.update(), "[GradScaler] No inf checks were recorded prior to update.", Error);
  CHECK_THROWS_WITH_AS(scaler.step(opt), doctest::Contains("No inf checks were recorded for this optimizer."), Error);

  Tensor h = tensor({1.0}, kFloat16).requires_grad_();
  set_grad(h, {2.0});
  FakeOptimizer half_opt{{{{h}}}};
  CHECK_THROWS_WITH_AS(scaler.unscale_(half_opt), doctest::Contains("Attempting to unscale FP16 gradients."), Error);
  CHECK(h.grad().item() == 2.0);

  CHECK_THROWS_WITH_AS(GradScaler(GradScalerOptions{.growth_factor = 1.0}),
                       doctest::Contains("The growth factor must be > 1.0."), Error);
  CHECK_THROWS_WITH_AS(GradScaler(GradScalerOptions{.backoff_factor = 1.0}),
                       doctest::Contains("The backoff factor must be < 1.0."), Error);
}

TEST_CASE("unscaling multiplies by the float32 inverse of the scale, in each gradient's dtype") {
  GradScaler scaler;
  scaler.scale(scalar_tensor(1.0));
  scaler.update(3.0);  // update(new_scale) needs no inf checks
  CHECK(scaler.get_scale() == 3.0);
  Tensor d = tensor({1.0}, kFloat64).requires_grad_();
  Tensor f = param({3.0});
  Tensor h = tensor({768.0}, kBFloat16).requires_grad_();
  set_grad(d, {1.0});
  set_grad(f, {1.0});
  set_grad(h, {3.0});
  std::vector<Tensor> params = {d, f, h};
  scaler.unscale_(&params, params);
  const double inv32 = static_cast<double>(1.0f / 3.0f);  // 1/3 rounded to float32
  CHECK(d.grad().item() == inv32);                          // not 1/3 in float64
  CHECK(f.grad().item() == inv32);
  CHECK(h.grad().item() == 1.0);
  CHECK(d.grad().dtype() == kFloat64);
  CHECK(h.grad().dtype() == kBFloat16);
}

TEST_CASE("the scale never grows into inf") {
  GradScaler scaler(GradScalerOptions{.init_scale = std::ldexp(1.0, 127), .growth_interval = 1});
  Tensor p = param({1.0});
  FakeOptimizer opt{{{{p}}}};
  scaler.scale(scalar_tensor(1.0));
  set_grad(p, {0.0});
  scaler.step(opt);
  scaler.update();
  CHECK(scaler.get_scale() == std::ldexp(1.0, 127));
  CHECK(scaler.growth_tracker() == 0);
}

TEST_CASE("scale() keeps the dtype of a tensor output and scales a narrow scalar loss in float32") {
  GradScaler scaler;
  const Tensor h = tensor({1.0, 2.0}, kBFloat16);
  const Tensor scaled = scaler.scale(h);
  CHECK(scaled.dtype() == kBFloat16);
  CHECK(scaled.to_vector<double>() == std::vector<double>{65536.0, 131072.0});
  const Tensor loss16 = scalar_tensor(2.0, kFloat16);
  const Tensor scaled_loss = scaler.scale(loss16);
  CHECK(scaled_loss.dtype() == kFloat32);  // 131072 would be inf in float16
  CHECK(scaled_loss.item() == 131072.0);
  const std::vector<Tensor> many = scaler.scale(std::vector<Tensor>{scalar_tensor(1.0), scalar_tensor(0.5)});
  CHECK(many[0].item() == 65536.0);
  CHECK(many[1].item() == 32768.0);

  // The scaled loss is differentiable: gradients arrive multiplied by the scale.
  Tensor w = param({2.0});
  scaler.scale(sum(mul(w, w))).backward();
  CHECK(w.grad().item() == 4.0 * 65536.0);
}

TEST_CASE("a disabled scaler is transparent") {
  GradScaler scaler(GradScalerOptions{.growth_factor = 0.5, .enabled = false});  // factors unchecked when disabled
  CHECK_FALSE(scaler.is_enabled());
  const Tensor loss = scalar_tensor(3.0);
  CHECK(scaler.scale(loss).is_same(loss));
  Tensor p = param({1.0});
  FakeOptimizer opt{{{{p}}}};
  set_grad(p, {kInf});
  scaler.unscale_(opt);
  CHECK(scaler.step(opt));  // steps even on inf: nothing is checked
  CHECK(opt.steps == 1);
  scaler.update();
  CHECK(scaler.get_scale() == 1.0);
  CHECK(scaler.growth_tracker() == 0);
  CHECK(scaler.state_dict().empty());
  scaler.load_state_dict(nn::TensorDict());  // ignored
}

TEST_CASE("an enabled scaler refuses to be captured in a CUDA graph" * doctest::skip(!cuda::is_available())) {
  const Device gpu("cuda");
  GradScaler scaler;
  const Tensor loss = scalar_tensor(2.0, TensorOptions(kFloat32).device(gpu));
  Tensor p = zeros({2}, gpu).requires_grad_();
  p.set_grad(ones({2}, gpu));
  FakeOptimizer opt{{{{p}}}};
  scaler.scale(loss);  // eagerly: creates the scale
  cuda::Graph graph;
  const std::string why = " during a CUDA graph capture: the scale and the decision to skip a step are kept on the "
                          "host, so a graph cannot replay them; capture float32 or bfloat16 steps, which need no "
                          "scaler, or run float16-mixed steps eagerly";
  CHECK_THROWS_WITH_AS(graph.capture([&] { scaler.scale(loss); }), ("[GradScaler] scale()" + why).c_str(), Error);
  CHECK_THROWS_WITH_AS(graph.capture([&] { scaler.unscale_(opt); }), ("[GradScaler] unscale_()" + why).c_str(),
                       Error);
  // Eagerly it still works, and nothing was unscaled by the refused calls.
  scaler.unscale_(opt);
  CHECK(p.grad().to_vector<float>() == std::vector<float>{1.0f / 65536, 1.0f / 65536});
}
