// Compiled by the test `third_party_quiet` for AVX-512 with -Werror and the build's warning
// flags: Eigen's AVX-512 code must not print warnings into weft's build (cmake/quiet_gcc12_avx512.h).
#include <Eigen/Core>

float scaled_sum(float* a, const float* b, int n) {
  Eigen::Map<Eigen::ArrayXf> x(a, n);
  const Eigen::Map<const Eigen::ArrayXf> y(b, n);
  x = x * 2.0f + y;
  return x.maxCoeff() + x.sum();
}
