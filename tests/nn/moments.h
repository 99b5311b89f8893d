// Sample statistics the nn tests use to check initialisation distributions.
#pragma once

#include <utility>
#include <vector>

#include "nn/all.h"

namespace weft::testing {

// Sample mean and (population) variance of all elements.
inline std::pair<double, double> moments(const Tensor& t) {
  const std::vector<double> v = t.to_vector<double>();
  double mean = 0.0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double var = 0.0;
  for (double x : v) var += (x - mean) * (x - mean);
  return {mean, var / static_cast<double>(v.size())};
}

}  // namespace weft::testing
