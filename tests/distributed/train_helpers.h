// What the data-parallel tests train: a small MLP with deliberately odd sizes (so flat parameters
// do not divide by the world size and some ranks hold padding only), a deterministic global batch
// per step, and the optimizers under test. The single-process reference and every rank build the
// same things from the same seeds.
#pragma once

#include <cmath>
#include <memory>
#include <string>

#include "harness.h"
#include "distributed/all.h"

namespace weft::test {

inline constexpr int64_t kIn = 7, kHidden = 13, kOut = 5;
inline constexpr int64_t kGlobalBatch = 12;  // divisible by 1, 2, 3 and 4

// Linear(7, 13) - ReLU - Linear(13, 5), initialised from `seed`.
inline nn::Sequential make_mlp(uint64_t seed) {
  manual_seed(seed);
  return nn::Sequential(nn::Linear(kIn, kHidden), nn::ReLU(), nn::Linear(kHidden, kOut));
}

struct Batch {
  Tensor x;  // (B, 7)
  Tensor y;  // (B) int64 classes
};

inline Batch global_batch(int step, int64_t batch = kGlobalBatch) {
  Generator g(1000 + static_cast<uint64_t>(step));
  return {randn({batch, kIn}, kFloat32, &g), randint(0, kOut, {batch}, {}, &g)};
}

// Rank r's rows of the global batch.
inline Batch local_rows(const Batch& b, int rank, int world) {
  const int64_t rows = b.x.size(0) / world;
  return {b.x.narrow(0, rank * rows, rows).contiguous(), b.y.narrow(0, rank * rows, rows).contiguous()};
}

inline std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& kind, std::vector<Tensor> params) {
  if (kind == "sgd") return std::make_unique<optim::SGD>(std::move(params), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  require(kind == "adamw", "unknown optimizer " + kind);
  return std::make_unique<optim::AdamW>(std::move(params), optim::AdamWOptions{.lr = 0.02});
}

// A copy of every parameter's gradient, under the parameter's name.
inline nn::TensorDict gradients_of(const nn::Module& module) {
  nn::TensorDict grads;
  for (const auto& [name, p] : module.named_parameters()) grads.insert(name, p.grad().clone());
  return grads;
}

// |a - b| / max(1, |b|) over all elements of two state dicts with the same keys: the largest
// and the mean.
struct Difference {
  double max = 0;
  double mean = 0;
};
inline Difference relative_difference(const nn::TensorDict& a, const nn::TensorDict& b) {
  require(a.size() == b.size(), "state dicts differ in size");
  Difference d;
  size_t count = 0;
  for (const auto& [name, t] : a) {
    const auto x = t.to_vector<double>();
    const auto y = b.at(name).to_vector<double>();
    require(x.size() == y.size(), "'" + name + "' differs in size");
    for (size_t i = 0; i < x.size(); ++i) {
      const double r = std::abs(x[i] - y[i]) / std::max(1.0, std::abs(y[i]));
      d.max = std::max(d.max, r);
      d.mean += r;
      ++count;
    }
  }
  d.mean /= static_cast<double>(std::max<size_t>(count, 1));
  return d;
}
inline double max_relative_difference(const nn::TensorDict& a, const nn::TensorDict& b) {
  return relative_difference(a, b).max;
}

inline bool bitwise_equal(const nn::TensorDict& a, const nn::TensorDict& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a)
    if (!b.contains(name) || !equal(t, b.at(name))) return false;
  return true;
}

// How far N ranks may drift from one rank after a few steps: only the order of sums differs,
// then rounding in the parameters' dtype.
inline double tolerance(const std::string& precision) {
  if (precision == "64-true" || precision == "32-true") return 1e-5;  // 64-true's loss is float32 too
  if (precision == "16-true") return 5e-3;
  return 3e-2;  // bfloat16 parameters or compute
}

// Whether N ranks' parameters are close enough to one rank's. AdamW divides each gradient by its
// own running magnitude, so where a gradient is a rounding error away from zero, a different
// summation order can flip its step (±lr a step): in narrow precisions a few parameters may then
// differ by up to 2·lr·steps while the mean difference stays at the precision's level. (SGD has
// no such amplifier and is held to the tolerance everywhere; AdamW's scale invariance is why
// both optimizers are tested: an all-reduce that summed instead of averaged would pass AdamW.)
inline bool close_enough(const nn::TensorDict& got, const nn::TensorDict& expected, const std::string& precision,
                         const std::string& optimizer, int steps, std::string* why = nullptr) {
  const Difference d = relative_difference(got, expected);
  const bool narrow = precision != "32-true" && precision != "64-true";
  const bool ok = narrow && optimizer == "adamw" ? d.mean <= tolerance(precision) && d.max <= 2 * 0.02 * steps + 1e-3
                                                 : d.max <= tolerance(precision);
  if (why != nullptr) *why = "max " + std::to_string(d.max) + ", mean " + std::to_string(d.mean);
  return ok;
}

}  // namespace weft::test
