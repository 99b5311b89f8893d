// The sigmoid (and so SiLU) in float32 uses an arithmetic exp (sigmoid_arith,
// tensor/elementwise_math.h) so its loops vectorise: its relative error against float64 over the
// range where the result is a normal float, its denormal tail and limits, NaN, and the float32 SiLU
// forward and backward against float64 over a dense range.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor_test_helpers.h"
#include "tensor/all.h"
#include "tensor/elementwise_math.h"

using namespace weft;

namespace {
double sigmoid64(double x) { return 1.0 / (1.0 + std::exp(-x)); }
}  // namespace

TEST_CASE("sigmoid_arith: relative error below 4e-7 where the result is normal, the denormal tail, limits, NaN") {
  double worst = 0.0;
  for (int i = -2'900'000; i <= 4'000'000; ++i) {
    const float x = static_cast<float>(i) * 3e-5f;  // [-87, 120]
    const double want = sigmoid64(x);
    worst = std::max(worst, std::abs(static_cast<double>(detail::sigmoid_arith(x)) - want) / want);
  }
  CHECK(worst < 4e-7);
  // Below -87 the result is denormal: within one step of the float rounding of the true value,
  // and 0 once that is.
  for (int i = 0; i <= 30'000; ++i) {
    const float x = -87.0f - static_cast<float>(i) * 1e-3f;  // [-117, -87]
    const double want = static_cast<float>(sigmoid64(x));
    CHECK(std::abs(static_cast<double>(detail::sigmoid_arith(x)) - want) <= std::numeric_limits<float>::denorm_min());
  }
  CHECK(detail::sigmoid_arith(0.0f) == 0.5f);
  CHECK(detail::sigmoid_arith(-0.0f) == 0.5f);
  CHECK(detail::sigmoid_arith(20.0f) == static_cast<float>(sigmoid64(20.0)));
  CHECK(detail::sigmoid_arith(1e30f) == 1.0f);
  CHECK(detail::sigmoid_arith(-1e30f) == 0.0f);
  CHECK(detail::sigmoid_arith(std::numeric_limits<float>::infinity()) == 1.0f);
  CHECK(detail::sigmoid_arith(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(std::isnan(detail::sigmoid_arith(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("silu and sigmoid in float32 match float64 in value and gradient; NaN propagates") {
  testing::check_float32_against_float64("silu", [](const Tensor& x) { return silu(x); }, 4e-7, 1e-6);
  testing::check_float32_against_float64("sigmoid", [](const Tensor& x) { return sigmoid(x); }, 4e-7, 1e-6);
  // The sigmoid's relative error, against float64 of the same float32 inputs.
  const Tensor x32 = add(mul(arange(200'001.0, TensorOptions(kFloat32)), 2e-4), -20.0);
  const std::vector<double> s32 = sigmoid(x32).to(kFloat64).to_vector<double>();
  const std::vector<double> s64 = sigmoid(x32.to(kFloat64)).to_vector<double>();
  double worst = 0.0;
  for (size_t i = 0; i < s32.size(); ++i) worst = std::max(worst, std::abs(s32[i] - s64[i]) / s64[i]);
  CHECK(worst < 4e-7);
  const Tensor nan = full({3}, std::numeric_limits<double>::quiet_NaN(), TensorOptions(kFloat32));
  CHECK(std::isnan(silu(nan).sum().item()));
  CHECK(std::isnan(sigmoid(nan).sum().item()));
}
