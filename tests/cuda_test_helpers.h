// What the CUDA tests share: whether this machine has a GPU (cases skip with
// doctest::skip(kNoGpu), and so in a build without CUDA), the device, and an elementwise
// comparison of two tensors read back to the host.
#pragma once

#include <doctest/doctest.h>

#include <cmath>

#include "tensor/all.h"

namespace weft::test {

inline const bool kNoGpu = !cuda::is_available();
inline const Device kGpu("cuda");

// |got − want| <= atol + rtol·|want| elementwise; where want is NaN, got must be NaN too.
inline void check_close(const Tensor& got, const Tensor& want, double rtol, double atol) {
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  const auto g = got.to_vector<double>();
  const auto w = want.to_vector<double>();
  for (size_t i = 0; i < w.size(); ++i) {
    CAPTURE(i);
    if (std::isnan(w[i])) {
      CHECK(std::isnan(g[i]));
    } else {
      CHECK(std::abs(g[i] - w[i]) <= atol + rtol * std::abs(w[i]));
    }
  }
}

}  // namespace weft::test
