// FP8 scaling: the recipes, the scale rules, the amax-history bookkeeping and fp8_autocast's
// nesting and update points. Expected values are worked out by hand in the comments (448 is the
// E4M3 maximum, 57344 the E5M2 one; quantization-fp8.md §B.2).
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "precision/all.h"

using namespace weft;
using namespace weft::precision;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

std::vector<float> column(const Fp8Metadata& meta, Fp8Role role) {
  std::vector<float> out;
  const auto all = meta.amax_history.to_vector<float>();
  for (size_t r = 0; r < all.size() / kNumFp8Roles; ++r) out.push_back(all[r * kNumFp8Roles + static_cast<int>(role)]);
  return out;
}

// One delayed-scaling step of the input role: this step's amax, then the update.
float step(Fp8Metadata& meta, float amax, const DelayedScaling& recipe) {
  meta.record_amax(Fp8Role::Input, amax);
  meta.update(Fp8Role::Input, recipe);
  return meta.scale_of(Fp8Role::Input);
}

// A 16 -> 16 Fp8Linear whose weight is all `w` and whose bias is 0.
Fp8Linear layer_with_weight(float w, int64_t history = 4) {
  Fp8Linear fc(16, 16, true, history);
  NoGradGuard no_grad;
  fc->weight.fill_(w);
  fc->bias.zero_();
  return fc;
}

}  // namespace

TEST_CASE("DelayedScaling, max over a window of 3: hand-computed scale sequence") {
  Fp8Metadata meta(3);
  const DelayedScaling recipe{.amax_history_len = 3};
  // amax 2: window {2} -> 448/2 = 224; the history rolls to [0, 0, 2].
  CHECK(step(meta, 2.0f, recipe) == 224.0f);
  CHECK(column(meta, Fp8Role::Input) == std::vector<float>{0, 0, 2});
  CHECK(meta.scale_inv_of(Fp8Role::Input) == 1.0f / 224.0f);
  // amax 8: window {8, 0, 2} -> 56; history [0, 2, 8].
  CHECK(step(meta, 8.0f, recipe) == 56.0f);
  CHECK(column(meta, Fp8Role::Input) == std::vector<float>{0, 2, 8});
  // amax 1 and 0.5: the 8 is still in the window -> 56, 56.
  CHECK(step(meta, 1.0f, recipe) == 56.0f);
  CHECK(step(meta, 0.5f, recipe) == 56.0f);
  // amax 0.25: the window is {0.25, 1, 0.5} -> 448.
  CHECK(step(meta, 0.25f, recipe) == 448.0f);
  CHECK(column(meta, Fp8Role::Input) == std::vector<float>{0, 0.5f, 0.25f});
  // Other roles are untouched.
  CHECK(meta.scale_of(Fp8Role::Weight) == 1.0f);
  CHECK(column(meta, Fp8Role::Weight) == std::vector<float>{0, 0, 0});
}

TEST_CASE("DelayedScaling: most_recent, margin, the E5M2 gradient maximum, several casts in one step") {
  Fp8Metadata meta(3);
  const DelayedScaling recent{.amax_history_len = 3, .amax_compute_algo = AmaxComputeAlgo::MostRecent};
  CHECK(step(meta, 2.0f, recent) == 224.0f);
  CHECK(step(meta, 8.0f, recent) == 56.0f);
  CHECK(step(meta, 1.0f, recent) == 448.0f);  // the 8 is in the window but not the latest

  Fp8Metadata margin_meta(1);
  CHECK(step(margin_meta, 2.0f, DelayedScaling{.margin = 1, .amax_history_len = 1}) == 112.0f);  // 448/2/2
  CHECK(step(margin_meta, 2.0f, DelayedScaling{.margin = -2, .amax_history_len = 1}) == 896.0f);

  // HYBRID: the gradient is E5M2, 57344 / 2 = 28672; under E4M3 it is 448 / 2.
  Fp8Metadata grad(1);
  grad.record_amax(Fp8Role::GradOutput, 2.0f);
  grad.update(Fp8Role::GradOutput, DelayedScaling{.amax_history_len = 1});
  CHECK(grad.scale_of(Fp8Role::GradOutput) == 28672.0f);
  grad.record_amax(Fp8Role::GradOutput, 2.0f);
  grad.update(Fp8Role::GradOutput, DelayedScaling{.fp8_format = Fp8Format::E4M3, .amax_history_len = 1});
  CHECK(grad.scale_of(Fp8Role::GradOutput) == 224.0f);

  // Three casts in one step: row 0 keeps their maximum.
  Fp8Metadata many(2);
  for (float a : {1.0f, 7.0f, 3.0f}) many.record_amax(Fp8Role::Weight, a);
  CHECK(many.current_amax(Fp8Role::Weight) == 7.0f);
  many.update(Fp8Role::Weight, DelayedScaling{.amax_history_len = 2});
  CHECK(many.scale_of(Fp8Role::Weight) == 64.0f);
}

TEST_CASE("DelayedScaling keeps the old scale for a zero, infinite or NaN amax, and clamps tiny ones") {
  Fp8Metadata meta(2);
  const DelayedScaling recipe{.amax_history_len = 2};
  CHECK(step(meta, 4.0f, recipe) == 112.0f);
  // Zero now, but the 4 is still in the window.
  CHECK(step(meta, 0.0f, recipe) == 112.0f);
  // The window is all zero: the old scale stays.
  CHECK(step(meta, 0.0f, recipe) == 112.0f);
  // Inf: kept, and kept while the Inf is in the window (2 steps), then a fresh value rules.
  CHECK(step(meta, kInf, recipe) == 112.0f);
  CHECK(step(meta, 1.0f, recipe) == 112.0f);
  CHECK(step(meta, 1.0f, recipe) == 448.0f);
  // NaN likewise.
  CHECK(step(meta, kNan, recipe) == 448.0f);
  CHECK(std::isnan(column(meta, Fp8Role::Input)[1]));
  CHECK(step(meta, 2.0f, recipe) == 448.0f);
  CHECK(step(meta, 2.0f, recipe) == 224.0f);
  // A denormal amax: 448 / 1e-45 overflows, the scale is the largest float.
  Fp8Metadata tiny(1);
  CHECK(step(tiny, 1e-45f, DelayedScaling{.amax_history_len = 1}) == FLT_MAX);

  CHECK(delayed_scaling_scale(2.0f, 5.0f, 448.0f, 0) == 224.0f);
  CHECK(delayed_scaling_scale(-1.0f, 5.0f, 448.0f, 0) == 5.0f);
  CHECK(delayed_scaling_scale(kNan, 5.0f, 448.0f, 0) == 5.0f);
}

TEST_CASE("Float8CurrentScaling's rule: epsilon, power of two, degenerate amaxes") {
  CHECK(current_scaling_scale(2.0f, 448.0f, {}) == 224.0f);
  CHECK(current_scaling_scale(2.0f, 448.0f, {.amax_epsilon = 4.0f}) == 112.0f);  // max(2, 4) = 4
  CHECK(current_scaling_scale(3.0f, 448.0f, {.power_2_scale = true}) == 128.0f);  // 149.33 -> 128
  CHECK(current_scaling_scale(0.0f, 448.0f, {}) == 1.0f);
  CHECK(current_scaling_scale(kInf, 448.0f, {}) == 1.0f);
  CHECK(current_scaling_scale(kNan, 448.0f, {}) == 1.0f);
  CHECK(current_scaling_scale(1e-45f, 448.0f, {}) == FLT_MAX);
  CHECK(current_scaling_scale(1e-45f, 448.0f, {.power_2_scale = true}) == std::ldexp(1.0f, 127));
  CHECK(current_scaling_scale(2.0f, 57344.0f, {}) == 28672.0f);
}

TEST_CASE("Fp8Metadata on its own device: casts max into row 0 in place, current scaling sets one role") {
  Fp8Metadata meta(4);
  fp8_amax_into(tensor({-6.0, 2.0}, kFloat32), meta.current_amax_element(Fp8Role::Weight));
  fp8_cast_scaled(tensor({3.0, -9.0}, kFloat32), kFloat8E4M3FN, meta.scale_element(Fp8Role::Weight),
                  meta.current_amax_element(Fp8Role::Weight));
  CHECK(column(meta, Fp8Role::Weight) == std::vector<float>{9, 0, 0, 0});
  CHECK(column(meta, Fp8Role::Input) == std::vector<float>{0, 0, 0, 0});
  // 448 / 7 = 64; with power_2_scale 448 / 5 = 89.6 -> 64; an amax below epsilon uses epsilon.
  meta.set_scale_from_amax(Fp8Role::Weight, full({1}, 7.0, kFloat32), 448.0f, Float8CurrentScaling{});
  CHECK(meta.scale_of(Fp8Role::Weight) == 64.0f);
  CHECK(meta.scale_inv_of(Fp8Role::Weight) == 1.0f / 64.0f);
  meta.set_scale_from_amax(Fp8Role::Input, full({1}, 5.0, kFloat32), 448.0f, {.power_2_scale = true});
  CHECK(meta.scale_of(Fp8Role::Input) == 64.0f);
  meta.set_scale_from_amax(Fp8Role::GradOutput, zeros({1}, kFloat32), 57344.0f, {.amax_epsilon = 0.5f});
  CHECK(meta.scale_of(Fp8Role::GradOutput) == 114688.0f);
  CHECK(meta.scale.to_vector<float>() == std::vector<float>{64.0f, 64.0f, 114688.0f});
  CHECK_THROWS_WITH_AS(meta.set_scale_from_amax(Fp8Role::Input, zeros({2}, kFloat32), 448.0f, {}),
                       "[Fp8Metadata] expected the amax as one float32 element on cpu", Error);
}

TEST_CASE("the amax history resizes keeping the current row and the newest finished rows") {
  Fp8Metadata meta(4);
  float* h = meta.amax_history.data<float>();
  for (int r = 0; r < 4; ++r) h[r * kNumFp8Roles] = static_cast<float>(r + 1);  // input column 1, 2, 3, 4
  meta.resize_amax_history(2);
  CHECK(column(meta, Fp8Role::Input) == std::vector<float>{1, 4});
  meta.resize_amax_history(5);
  CHECK(column(meta, Fp8Role::Input) == std::vector<float>{1, 0, 0, 0, 4});
  CHECK_THROWS_WITH_AS(meta.resize_amax_history(0), "[Fp8Metadata] amax_history_len must lie in [1, 1048576], got 0",
                       Error);
}

TEST_CASE("recipes validate, name their formats, and read mappings without changing them (T42)") {
  const RecipeMapping mapping{{"fp8_format", std::string("HYBRID")}, {"amax_history_len", int64_t{16}}};
  const DelayedScaling recipe = delayed_scaling_from_mapping(mapping);
  CHECK(recipe.fp8_format == Fp8Format::HYBRID);
  CHECK(recipe.amax_history_len == 16);
  CHECK(recipe.margin == 0);
  CHECK(std::get<std::string>(mapping.at("fp8_format")) == "HYBRID");  // the caller's mapping keeps its string
  const DelayedScaling full = delayed_scaling_from_mapping({{"fp8_format", std::string("E4M3")},
                                                            {"margin", int64_t{2}},
                                                            {"amax_compute_algo", std::string("most_recent")},
                                                            {"reduce_amax", false}});
  CHECK(full.fp8_format == Fp8Format::E4M3);
  CHECK(full.margin == 2);
  CHECK(full.amax_compute_algo == AmaxComputeAlgo::MostRecent);
  CHECK_FALSE(full.reduce_amax);

  CHECK_THROWS_WITH_AS(delayed_scaling_from_mapping({{"interval", int64_t{1}}}),
                       doctest::Contains("unexpected recipe key 'interval'"), Error);
  CHECK_THROWS_WITH_AS(delayed_scaling_from_mapping({{"fp8_format", std::string("E3M4")}}),
                       "[fp8 recipe] expected fp8_format E4M3, E5M2 or HYBRID, got 'E3M4'", Error);
  CHECK_THROWS_WITH_AS(delayed_scaling_from_mapping({{"amax_history_len", std::string("16")}}),
                       "[DelayedScaling] recipe key 'amax_history_len' expects an integer", Error);
  CHECK_THROWS_WITH_AS(delayed_scaling_from_mapping({{"fp8_format", std::string("E5M2")}}),
                       doctest::Contains("Pure E5M2 training is not supported"), Error);
  CHECK_THROWS_WITH_AS(validate(DelayedScaling{.amax_history_len = 0}),
                       "[DelayedScaling] amax_history_len must lie in [1, 1048576], got 0", Error);
  CHECK_THROWS_WITH_AS(validate(Float8CurrentScaling{.amax_epsilon = -1.0f}),
                       doctest::Contains("amax_epsilon must be finite and non-negative"), Error);

  CHECK(fp8_dtype_for(Fp8Format::HYBRID, Fp8Role::Input) == kFloat8E4M3FN);
  CHECK(fp8_dtype_for(Fp8Format::HYBRID, Fp8Role::Weight) == kFloat8E4M3FN);
  CHECK(fp8_dtype_for(Fp8Format::HYBRID, Fp8Role::GradOutput) == kFloat8E5M2);
  CHECK(fp8_dtype_for(Fp8Format::E4M3, Fp8Role::GradOutput) == kFloat8E4M3FN);
}

TEST_CASE("fp8_autocast nests per thread and restores on exit and on exceptions") {
  CHECK_FALSE(fp8_autocast_state().enabled);
  {
    Fp8AutocastGuard outer(true, DelayedScaling{.fp8_format = Fp8Format::E4M3});
    CHECK(fp8_autocast_state().enabled);
    CHECK(fp8_format_of(fp8_autocast_state().recipe) == Fp8Format::E4M3);
    {
      Fp8AutocastGuard inner(false);
      CHECK_FALSE(fp8_autocast_state().enabled);
      {
        Fp8AutocastGuard calibrate(true, Float8CurrentScaling{}, true);
        CHECK(fp8_autocast_state().calibrating);
        CHECK(std::holds_alternative<Float8CurrentScaling>(fp8_autocast_state().recipe));
      }
      CHECK_FALSE(fp8_autocast_state().enabled);
    }
    CHECK(fp8_autocast_state().enabled);
    CHECK(fp8_format_of(fp8_autocast_state().recipe) == Fp8Format::E4M3);
    try {
      Fp8AutocastGuard failing(false);
      throw std::runtime_error("boom");
    } catch (const std::runtime_error&) {
    }
    CHECK(fp8_autocast_state().enabled);
    CHECK_THROWS_WITH_AS(Fp8AutocastGuard(true, DelayedScaling{}, false, [](std::span<float>) {}),
                         doctest::Contains("only the outermost fp8_autocast sets the amax reducer"), Error);
    CHECK_THROWS_AS(Fp8AutocastGuard(true, DelayedScaling{.fp8_format = Fp8Format::E5M2}), Error);
  }
  CHECK_FALSE(fp8_autocast_state().enabled);
  bool other_thread_enabled = true;
  {
    Fp8AutocastGuard here(true);
    std::thread([&] { other_thread_enabled = fp8_autocast_state().enabled; }).join();
  }
  CHECK_FALSE(other_thread_enabled);
}

TEST_CASE("forward scales move when the outermost region ends, from the amaxes the casts recorded") {
  Fp8Linear fc = layer_with_weight(0.5f);  // weight amax 0.5
  const Tensor x = full({8, 16}, -2.0);    // input amax 2
  {
    Fp8AutocastGuard outer(true, DelayedScaling{.amax_history_len = 4});
    fc(x);
    {
      Fp8AutocastGuard inner(true, DelayedScaling{.amax_history_len = 4});
      fc(mul(x, 2.0));  // input amax 4 this time
    }
    CHECK(fc->fp8_meta().scale_of(Fp8Role::Input) == 1.0f);  // not yet: the region is still open
    CHECK(fc->fp8_meta().current_amax(Fp8Role::Input) == 4.0f);
  }
  CHECK(fc->fp8_meta().scale_of(Fp8Role::Input) == 112.0f);  // 448 / 4
  CHECK(fc->fp8_meta().scale_of(Fp8Role::Weight) == 896.0f);  // 448 / 0.5
  CHECK(fc->fp8_meta().scale_inv_of(Fp8Role::Weight) == 1.0f / 896.0f);
  CHECK(fc->fp8_meta().scale_of(Fp8Role::GradOutput) == 1.0f);  // no backward ran
  CHECK(fc->fp8_meta().current_amax(Fp8Role::Input) == 0.0f);

  // A region that ends by an exception updates nothing; its amaxes wait for the next update.
  try {
    Fp8AutocastGuard failing(true, DelayedScaling{.amax_history_len = 4});
    fc(mul(x, 0.25));
    throw std::runtime_error("step failed");
  } catch (const std::runtime_error&) {
  }
  CHECK(fc->fp8_meta().scale_of(Fp8Role::Input) == 112.0f);
  CHECK(fc->fp8_meta().current_amax(Fp8Role::Input) == 0.5f);
}

TEST_CASE("the amax reducer sees every delayed tensor's amax once per region, and its result sets the scales") {
  Fp8Linear a = layer_with_weight(0.5f), b = layer_with_weight(0.25f);
  int calls = 0;
  std::vector<float> seen;
  // A fake all-reduce: another rank saw amaxes 8 (a's input) and 1 (b's weight), 0 elsewhere.
  const AmaxReducer reducer = [&](std::span<float> amaxes) {
    ++calls;
    seen.assign(amaxes.begin(), amaxes.end());
    const std::vector<float> remote = {8.0f, 0.0f, 0.0f, 1.0f};
    for (size_t i = 0; i < amaxes.size(); ++i) amaxes[i] = std::max(amaxes[i], remote[i]);
  };
  const Tensor x = full({4, 16}, 2.0);
  {
    Fp8AutocastGuard region(true, DelayedScaling{.amax_history_len = 4}, false, reducer);
    b(a(x));
    b(a(x));  // the same tensors again: still one entry each
  }
  CHECK(calls == 1);
  // Order of first cast: a.input (2), a.weight (0.5), b.input (|a(x)| = 16·2·0.5 = 16), b.weight (0.25).
  CHECK(seen == std::vector<float>{2.0f, 0.5f, 16.0f, 0.25f});
  CHECK(a->fp8_meta().scale_of(Fp8Role::Input) == 56.0f);    // 448 / max(2, 8)
  CHECK(a->fp8_meta().scale_of(Fp8Role::Weight) == 896.0f);  // 448 / 0.5
  CHECK(b->fp8_meta().scale_of(Fp8Role::Input) == 28.0f);    // 448 / 16
  CHECK(b->fp8_meta().scale_of(Fp8Role::Weight) == 448.0f);  // 448 / max(0.25, 1)

  // reduce_amax = false: the reducer is not asked.
  {
    Fp8AutocastGuard region(true, DelayedScaling{.amax_history_len = 4, .reduce_amax = false}, false, reducer);
    a(x);
  }
  CHECK(calls == 1);
}

TEST_CASE("gradient scales move after the backward of the first FP8 layer, with one reduction") {
  Fp8Linear a = layer_with_weight(0.5f), b = layer_with_weight(0.25f);
  int calls = 0;
  size_t count = 0;
  const AmaxReducer reducer = [&](std::span<float> amaxes) {
    ++calls;
    count = amaxes.size();
  };
  const Tensor x = full({4, 16}, 1.0).requires_grad_();
  Tensor y;
  {
    Fp8AutocastGuard region(true, DelayedScaling{.amax_history_len = 1}, false, reducer);
    y = b(a(x));
  }
  CHECK(calls == 1);  // the forward tensors
  CHECK(b->fp8_meta().scale_of(Fp8Role::GradOutput) == 1.0f);
  y.backward(full({4, 16}, 4.0));
  CHECK(calls == 2);  // the gradients of both layers, together
  CHECK(count == 2);
  // b's output gradient has amax 4: 57344 / 4 (E5M2 under HYBRID). a's is 16·4·0.25 = 16.
  CHECK(b->fp8_meta().scale_of(Fp8Role::GradOutput) == 14336.0f);
  CHECK(a->fp8_meta().scale_of(Fp8Role::GradOutput) == 3584.0f);
}

TEST_CASE("a reducer that fails at the end of a region leaves the scales and throws at the next fp8_autocast") {
  Fp8Linear fc = layer_with_weight(0.5f);
  bool fail = true;
  const AmaxReducer reducer = [&](std::span<float>) {
    if (fail) throw Error("[all_reduce] rank 1 is gone");
  };
  {
    Fp8AutocastGuard region(true, DelayedScaling{.amax_history_len = 2}, false, reducer);
    fc(full({2, 16}, 1.0));
  }  // no throw from the destructor
  CHECK(fc->fp8_meta().scale_of(Fp8Role::Input) == 1.0f);
  CHECK_THROWS_WITH_AS(Fp8AutocastGuard(true), "[all_reduce] rank 1 is gone", Error);
  fail = false;
  {
    Fp8AutocastGuard region(true, DelayedScaling{.amax_history_len = 2}, false, reducer);  // once only
    fc(full({2, 16}, 1.0));
  }
  CHECK(fc->fp8_meta().scale_of(Fp8Role::Input) == 448.0f);
}
