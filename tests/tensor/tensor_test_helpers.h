// Small helpers the tensor tests share: a tensor's values as doubles, a tolerance comparison of
// value lists or of a tensor against a list (NaN matches NaN, infinities must match exactly, finite values to a relative
// tolerance), float32 bit equality, and a seeded normal tensor.
#pragma once

#include <doctest/doctest.h>

#include <bit>
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

// float32 bit equality, NaN against any NaN: for kernels that must give a reference's bits.
inline bool same_bits(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) || (std::isnan(a) && std::isnan(b));
}

inline Tensor random(const Shape& shape, uint64_t seed, DType dtype = kFloat64) {
  Generator g(seed);
  return randn(shape, dtype, &g);
}

// An elementwise function in float32 against float64 on 200,001 points of [-20, 20], value and
// gradient (one upstream gradient for both): within value_tol·(1 + |x|) and grad_tol·(1 + |x|),
// a few float32 roundings of the values involved. Reports the first point outside.
template <class F>
void check_float32_against_float64(const char* name, F f, double value_tol, double grad_tol) {
  const int64_t n = 200'001;
  const Tensor x64 = add(mul(arange(static_cast<double>(n), TensorOptions(kFloat64)), 2e-4), -20.0).requires_grad_();
  const Tensor x32 = x64.detach().to(kFloat32).requires_grad_();
  const Tensor y64 = f(x64), y32 = f(x32);
  const Tensor g = add(mul(arange(static_cast<double>(n), TensorOptions(kFloat64)), 1e-5), -1.0);
  y64.backward(g);
  y32.backward(g.to(kFloat32));
  const std::vector<double> xs = x64.detach().to_vector<double>();
  const std::vector<double> v64 = y64.detach().to_vector<double>(), v32 = y32.detach().to(kFloat64).to_vector<double>();
  const std::vector<double> d64 = x64.grad().to_vector<double>(), d32 = x32.grad().to(kFloat64).to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) {
    if (std::abs(v32[i] - v64[i]) > value_tol * (1.0 + std::abs(xs[i]))) {
      CHECK_MESSAGE(false, name, " at x = ", xs[i], ": ", v32[i], " vs ", v64[i]);
      return;
    }
    if (std::abs(d32[i] - d64[i]) > grad_tol * (1.0 + std::abs(xs[i]))) {
      CHECK_MESSAGE(false, name, "'s gradient at x = ", xs[i], ": ", d32[i], " vs ", d64[i]);
      return;
    }
  }
}

}  // namespace weft::testing
