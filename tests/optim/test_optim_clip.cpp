// Gradient clipping against PyTorch 1.13 (golden values from scripts/golden_optim.py) and against
// norms computed by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "optim/golden_optim.h"
#include "optim/all.h"

using namespace weft;
namespace golden = golden_optim;

namespace {

// The two golden parameters, float32, with the given concatenated gradients.
std::vector<Tensor> params_with_grads(const double* grads) {
  std::vector<Tensor> params;
  const double* at = grads;
  for (int p = 0; p < golden::kNumParams; ++p) {
    const auto& s = golden::kShapes[p];
    const Shape shape = s[1] == 0 ? Shape{s[0]} : Shape{s[0], s[1]};
    const int64_t n = detail::shape_numel(shape);
    Tensor param = zeros(shape).requires_grad_();
    param.set_grad(from_vector(std::vector<double>(at, at + n), shape));
    params.push_back(param);
    at += n;
  }
  return params;
}

std::vector<double> grads_of(const std::vector<Tensor>& params) {
  std::vector<double> out;
  for (const Tensor& p : params)
    for (double v : p.grad().to_vector<double>()) out.push_back(v);
  return out;
}

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("clip_grad_norm_ matches PyTorch") {
  for (const golden::ClipNormCase& c : golden::kClipNormCases) {
    SUBCASE(c.name) {
      std::vector<Tensor> params = params_with_grads(c.grads);
      const double total = optim::clip_grad_norm_(params, c.max_norm, c.norm_type);
      CHECK(total == doctest::Approx(c.total_norm).epsilon(1e-6));
      const std::vector<double> got = grads_of(params);
      for (int i = 0; i < golden::kNumel; ++i) {
        CAPTURE(i);
        CHECK(std::abs(got[i] - c.clipped[i]) <= 1e-6);
      }
    }
  }
}

TEST_CASE("clip_grad_norm_ computes the norm of all gradients as one vector") {
  Tensor a = zeros({2}, kFloat64).requires_grad_();
  Tensor b = zeros({1}, kFloat64).requires_grad_();
  Tensor no_grad = zeros({3}, kFloat64).requires_grad_();
  a.set_grad(tensor({3, -4}, kFloat64));
  b.set_grad(tensor({12}, kFloat64));
  SUBCASE("2-norm, then scaled to max_norm") {
    // √(9 + 16 + 144) = 13; float64 gradients keep the total in double precision.
    CHECK(optim::clip_grad_norm_({a, no_grad, b}, 6.5) == 13.0);
    const double coef = 6.5 / (13.0 + 1e-6);
    CHECK(a.grad().to_vector<double>() == std::vector<double>{3 * coef, -4 * coef});
    CHECK(b.grad().to_vector<double>() == std::vector<double>{12 * coef});
    CHECK_FALSE(no_grad.grad().defined());
  }
  SUBCASE("1-norm and the inf-norm") {
    CHECK(optim::clip_grad_norm_({a, b}, 100.0, 1.0) == 19.0);
    CHECK(optim::clip_grad_norm_({a, b}, 100.0, kInf) == 12.0);
    CHECK(a.grad().to_vector<double>() == std::vector<double>{3, -4});  // below max_norm: untouched
  }
  SUBCASE("no gradients at all") {
    CHECK(optim::clip_grad_norm_({no_grad}, 1.0) == 0.0);
    CHECK(optim::clip_grad_norm_({}, 1.0) == 0.0);
  }
}

TEST_CASE("clip_grad_norm_ with narrow gradients and many chunks") {
  const int64_t n = 100000;
  Tensor p = zeros({n}, kBFloat16).requires_grad_();
  p.set_grad(full({n}, 0.5, kBFloat16));
  const double total = optim::clip_grad_norm_({p}, 1.0);
  CHECK(total == doctest::Approx(0.5 * std::sqrt(static_cast<double>(n))).epsilon(1e-6));
  // 0.5 · 1/(0.5·√n) = 1/√n ≈ 0.00316, rounded to bfloat16.
  const Tensor expected = full({n}, 1.0 / std::sqrt(static_cast<double>(n)), kFloat32).to(kBFloat16);
  CHECK(allclose(p.grad().to(kFloat32), expected.to(kFloat32), 0, 1e-5));
}

TEST_CASE("clip_grad_norm_ and non-finite norms") {
  Tensor a = zeros({2}).requires_grad_();
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), kInf}) {
    CAPTURE(bad);
    a.set_grad(tensor({1.0, bad}));
    CHECK_THROWS_WITH_AS(optim::clip_grad_norm_({a}, 1.0, 2.0, true),
                         doctest::Contains("so they cannot be clipped; pass error_if_nonfinite = false"), Error);
    CHECK(a.grad().to_vector<double>()[0] == 1.0);  // refused before scaling
    // Without the check, PyTorch's behaviour: the gradients are scaled by the non-finite norm.
    const double total = optim::clip_grad_norm_({a}, 1.0);
    CHECK_FALSE(std::isfinite(total));
    CHECK((std::isnan(bad) ? std::isnan(a.grad().to_vector<double>()[0]) : a.grad().to_vector<double>()[0] == 0.0));
  }
  a.set_grad(tensor({1.0, std::numeric_limits<double>::quiet_NaN()}));
  CHECK_THROWS_WITH_AS(optim::clip_grad_norm_({a}, 1.0, kInf, true), doctest::Contains("is nan"), Error);
  CHECK_THROWS_WITH_AS(optim::clip_grad_norm_({a}, 1.0, 0.0), doctest::Contains("expected norm_type > 0"), Error);
}

TEST_CASE("clip_grad_value_ matches PyTorch") {
  const golden::ClipValueCase& c = golden::kClipValueCase;
  std::vector<Tensor> params = params_with_grads(c.grads);
  optim::clip_grad_value_(params, c.clip_value);
  const std::vector<double> got = grads_of(params);
  for (int i = 0; i < golden::kNumel; ++i) CHECK(got[i] == c.clipped[i]);
  CHECK_THROWS_WITH_AS(optim::clip_grad_value_(params, -1.0), doctest::Contains("expected clip_value >= 0"), Error);
}
