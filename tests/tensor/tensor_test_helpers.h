// Small helpers the tensor tests share: a tensor's values as doubles, a tolerance comparison of
// value lists or of a tensor against a list (NaN matches NaN, infinities must match exactly, finite values to a relative
// tolerance), and a seeded normal tensor.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "tensor/all.h"

namespace weft::testing {

inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

inline void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    if (std::isnan(want[i])) CHECK(std::isnan(got[i]));
    else if (std::isinf(want[i])) CHECK(got[i] == want[i]);
    else CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol).scale(1.0));
  }
}

inline void check_close(const Tensor& got, const std::vector<double>& want, double tol = 1e-12) {
  check_close(values(got.contiguous()), want, tol);
}

inline Tensor random(const Shape& shape, uint64_t seed, DType dtype = kFloat64) {
  Generator g(seed);
  return randn(shape, dtype, &g);
}

}  // namespace weft::testing
