// The tanh GELU in float32 uses an arithmetic tanh (tanh_arith, tensor/elementwise_math.h) so its
// loops vectorise: its absolute error against the float64 tanh, its limits, and the float32 GELU
// forward and backward against float64 over a dense range.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tensor_test_helpers.h"
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
  testing::check_float32_against_float64("gelu(tanh)", [](const Tensor& x) { return gelu(x, true); }, 4e-7, 1e-6);
  const Tensor nan = full({3}, std::numeric_limits<double>::quiet_NaN());
  CHECK(std::isnan(gelu(nan, true).sum().item()));
}
