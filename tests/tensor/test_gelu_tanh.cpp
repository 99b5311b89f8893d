// The tanh GELU in float32 uses an arithmetic tanh (tanh_arith, tensor/elementwise_math.h) so its
// loops vectorise: its absolute error against the float64 tanh, its limits, and the float32 GELU
// forward and backward against float64 over a dense range.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tensor/all.h"
#include "tensor/elementwise_math.h"

using namespace weft;

TEST_CASE("tanh_arith: absolute error below 1.5e-7 on a dense grid, odd, saturating at +-1") {
  double worst = 0.0;
  for (int i = -2'000'000; i <= 2'000'000; ++i) {
    const float u = static_cast<float>(i) * 6e-6f;  // [-12, 12]
    worst = std::max(worst, std::abs(static_cast<double>(detail::tanh_arith(u)) - std::tanh(static_cast<double>(u))));
    CHECK(detail::tanh_arith(-u) == -detail::tanh_arith(u));
  }
  CHECK(worst < 1.5e-7);
  for (const float tiny : {1e-30f, 1e-10f, 1e-6f, 1e-3f})
    CHECK(std::abs(detail::tanh_arith(tiny) - std::tanh(static_cast<double>(tiny))) < 1.5e-7);
  CHECK(detail::tanh_arith(0.0f) == 0.0f);
  CHECK(detail::tanh_arith(30.0f) == 1.0f);
  CHECK(detail::tanh_arith(-1e30f) == -1.0f);
  CHECK(detail::tanh_arith(std::numeric_limits<float>::infinity()) == 1.0f);
}

TEST_CASE("gelu(tanh) in float32 matches float64 in value and gradient; NaN propagates") {
  const int64_t n = 200'001;
  const Tensor x64 = add(mul(arange(static_cast<double>(n), TensorOptions(kFloat64)), 2e-4), -20.0).requires_grad_();
  const Tensor x32 = x64.detach().to(kFloat32).requires_grad_();
  const Tensor y64 = gelu(x64, true), y32 = gelu(x32, true);
  // The same upstream gradient on both sides.
  const Tensor g = add(mul(arange(static_cast<double>(n), TensorOptions(kFloat64)), 1e-5), -1.0);
  y64.backward(g);
  y32.backward(g.to(kFloat32));
  const std::vector<double> xs = x64.detach().to_vector<double>();
  const std::vector<double> v64 = y64.detach().to_vector<double>(), v32 = y32.detach().to(kFloat64).to_vector<double>();
  const std::vector<double> d64 = x64.grad().to_vector<double>(), d32 = x32.grad().to(kFloat64).to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) {
    // Within a few float32 roundings of the values involved.
    if (std::abs(v32[i] - v64[i]) > 4e-7 * (1.0 + std::abs(xs[i]))) {
      CHECK_MESSAGE(false, "value at x = ", xs[i], ": ", v32[i], " vs ", v64[i]);
      break;
    }
    if (std::abs(d32[i] - d64[i]) > 1e-6 * (1.0 + std::abs(xs[i]))) {
      CHECK_MESSAGE(false, "gradient at x = ", xs[i], ": ", d32[i], " vs ", d64[i]);
      break;
    }
  }
  const Tensor nan = full({3}, std::numeric_limits<double>::quiet_NaN());
  CHECK(std::isnan(gelu(nan, true).sum().item()));
}
