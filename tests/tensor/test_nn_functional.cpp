// Neural-network functions, forward values: softmax and log_softmax computed by hand, losses
// and layer norm against PyTorch's own values (golden_functional.h, written by
// gen_golden_functional.py), dropout's statistics under a seed.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "golden_functional.h"
#include "tensor_test_helpers.h"
#include "tensor/all.h"
#include "tensor/cpu/isa.h"

using namespace weft;
using testing::values;
using testing::check_close;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

template <class T, size_t N>
Tensor from_array(const T (&a)[N], const Shape& shape, DType dtype) {
  return from_vector(std::vector<T>(a, a + N), shape, dtype);
}

Reduction reduction_of(int r) { return r == 0 ? Reduction::None : r == 1 ? Reduction::Mean : Reduction::Sum; }

}  // namespace

TEST_CASE("softmax and log_softmax over rows and columns") {
  const Tensor x = tensor({1, 2, 3, 1, 1, 1}, kFloat64).view({2, 3});
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  check_close(values(softmax(x, 1)), {std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z, 1.0 / 3, 1.0 / 3, 1.0 / 3});
  check_close(values(log_softmax(x, -1)), {1 - std::log(z), 2 - std::log(z), 3 - std::log(z), -std::log(3.0),
                                           -std::log(3.0), -std::log(3.0)});
  // Over dim 0: columns (1, 1), (2, 1), (3, 1).
  const double e1 = 1 / (1 + std::exp(-1.0)), e2 = 1 / (1 + std::exp(-2.0));
  check_close(values(softmax(x, 0)), {0.5, e1, e2, 0.5, 1 - e1, 1 - e2});
  check_close(values(x.softmax(0)), values(softmax(x, 0)));
  check_close(values(x.log_softmax(0)), {std::log(0.5), std::log(e1), std::log(e2), std::log(0.5), std::log(1 - e1),
                                         std::log(1 - e2)});
  // Rows sum to one; shift invariance keeps huge logits finite.
  const Tensor big = tensor({1000, 1001, 1002}, kFloat64);
  check_close(values(softmax(big, 0)), {std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z});
  // A -inf logit gets probability 0; an all -inf row is NaN, as PyTorch.
  check_close(values(softmax(tensor({-kInf, 0.0}), 0)), {0.0, 1.0});
  CHECK(std::isnan(values(softmax(tensor({-kInf, -kInf}), 0))[0]));
  // Integer input computes in the default dtype; 0-d input is 1 (softmax) / 0 (log_softmax).
  CHECK(softmax(tensor({1, 2}, kInt64), 0).dtype() == kFloat32);
  CHECK(softmax(scalar_tensor(5.0), 0).item() == 1.0);
  CHECK(log_softmax(scalar_tensor(5.0), 0).item() == 0.0);
  // 3-D over the middle dim.
  const Tensor c = arange(24, kFloat64).view({2, 3, 4});
  const Tensor s = softmax(c, 1);
  check_close(values(sum(s, {1})), std::vector<double>(8, 1.0));
  const double w = std::exp(4.0) + std::exp(8.0) + 1;  // column (0, 4, 8) shifted by 0
  CHECK(values(s)[0] == doctest::Approx(1 / w).epsilon(1e-12));
}

TEST_CASE("cross_entropy against PyTorch: weights, ignore_index, label smoothing, reductions") {
  const Tensor logits = from_array(golden::kCELogits, {3, 4}, kFloat64);
  const Tensor target = from_array(golden::kCETarget, {3}, kInt64);
  const Tensor weight = from_array(golden::kCEWeight, {4}, kFloat64);
  for (const auto& c : golden::kCECases) {
    CAPTURE(c.label_smoothing);
    CAPTURE(c.weighted);
    CAPTURE(c.reduction);
    const Tensor loss = cross_entropy(logits, target, reduction_of(c.reduction), -100, c.label_smoothing,
                                      c.weighted ? weight : Tensor());
    if (c.reduction == 0) {
      CHECK(loss.shape() == Shape{3});
      check_close(values(loss), {c.expected[0], c.expected[1], c.expected[2]});
    } else {
      CHECK(loss.dim() == 0);
      check_close(values(loss), {c.expected[0]});
    }
  }
}

TEST_CASE("cross_entropy: hand-computed cases") {
  // Two classes, logits (0, ln 3): p = (1/4, 3/4).
  const Tensor logits = tensor({0.0, std::log(3.0), 0.0, std::log(3.0)}, kFloat64).view({2, 2});
  const Tensor target = tensor({1, 0}, kInt64);
  check_close(values(cross_entropy(logits, target, Reduction::None)), {-std::log(0.75), -std::log(0.25)});
  check_close(values(cross_entropy(logits, target)), {-(std::log(0.75) + std::log(0.25)) / 2});
  // Smoothing ε = 0.2 over C = 2: target mass 0.9 / 0.1.
  check_close(values(cross_entropy(logits, target, Reduction::None, -100, 0.2)),
              {-(0.9 * std::log(0.75) + 0.1 * std::log(0.25)), -(0.9 * std::log(0.25) + 0.1 * std::log(0.75))});
  // A custom ignore_index drops the sample from the mean.
  check_close(values(cross_entropy(logits, target, Reduction::Mean, 0)), {-std::log(0.75)});
  // A (C) input with a 0-d target.
  check_close(values(cross_entropy(tensor({0.0, std::log(3.0)}, kFloat64), tensor({1}, kInt64).view({}))),
              {-std::log(0.75)});
  CHECK_THROWS_WITH_AS(cross_entropy(logits, tensor({2, 0}, kInt64)), "[cross_entropy] target 2 is out of bounds for 2 classes",
                       Error);
  CHECK_THROWS_WITH_AS(cross_entropy(logits, tensor({1.0, 0.0})),
                       "[cross_entropy] expected class-index targets of an integer dtype, got float32", Error);
  CHECK_THROWS_WITH_AS(cross_entropy(logits, tensor({1, 0, 1}, kInt64)),
                       "[cross_entropy] expected a target of shape (2,) for input (2, 2), got (3,)", Error);
  CHECK_THROWS_AS(cross_entropy(logits, target, Reduction::Mean, -100, 1.5), Error);
}

TEST_CASE("cross_entropy over float32 rows at every instruction-set level against a float64 reference") {
  // The row kernels (AVX-512 where the CPU has it, else the scalar loops) on rows of 1 to 1,000
  // classes (whole and partial 16-lane steps), with a shifted row (its largest logit 80), a row
  // with −inf logits, an ignored row, with and without label smoothing: losses and gradients
  // (upstream weights per row) against log-sum-exp and softmax computed in double here.
  for (const CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    CAPTURE(cpu_isa_name(isa));
    for (const int64_t classes : {1, 15, 16, 17, 100, 1000})
      for (const double smoothing : {0.0, 0.1}) {
        CAPTURE(classes);
        CAPTURE(smoothing);
        constexpr int64_t kRows = 5;
        std::vector<float> x(static_cast<size_t>(kRows * classes));
        for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 4.0);
        for (int64_t c = 0; c < classes; ++c) x[static_cast<size_t>(classes + c)] += 76.0f;  // row 1 near 80
        for (int64_t c = 1; c < classes; c += 3) x[static_cast<size_t>(2 * classes + c)] = -INFINITY;  // row 2
        std::vector<int64_t> t(kRows);
        for (int64_t r = 0; r < kRows; ++r) t[static_cast<size_t>(r)] = (r * 7) % classes;
        t[3] = -100;  // ignored
        const std::vector<double> w = {0.5, -1.25, 2.0, 0.75, 1.5};
        Tensor logits = from_vector(x, {kRows, classes});
        logits.requires_grad_();
        const Tensor loss = cross_entropy(logits, from_vector(t, {kRows}), Reduction::None, -100, smoothing);
        sum(mul(loss, from_vector(std::vector<float>(w.begin(), w.end()), {kRows}))).backward();
        const std::vector<double> got_loss = values(loss), got_grad = values(logits.grad());
        for (int64_t r = 0; r < kRows; ++r) {
          CAPTURE(r);
          const float* row = x.data() + r * classes;
          double most = -INFINITY, total = 0, row_sum = 0;
          for (int64_t c = 0; c < classes; ++c) most = std::max(most, static_cast<double>(row[c]));
          for (int64_t c = 0; c < classes; ++c) total += std::exp(static_cast<double>(row[c]) - most);
          for (int64_t c = 0; c < classes; ++c) row_sum += static_cast<double>(row[c]);
          const double lse = most + std::log(total);
          const int64_t target = t[static_cast<size_t>(r)];
          const bool ignored = target == -100;
          const double smooth_term = smoothing > 0 ? smoothing / static_cast<double>(classes) * row_sum : 0.0;
          const double want_loss = ignored ? 0.0 : lse - (1 - smoothing) * row[target] - smooth_term;
          if (std::isinf(want_loss))  // smoothing spreads mass onto the −inf logits
            CHECK(got_loss[static_cast<size_t>(r)] == want_loss);
          else
            CHECK(got_loss[static_cast<size_t>(r)] == doctest::Approx(want_loss).epsilon(2e-6).scale(std::abs(lse) + 1));
          for (int64_t c = 0; c < classes; ++c) {
            const double p = std::exp(static_cast<double>(row[c]) - lse);
            const double want = ignored ? 0.0
                                        : w[static_cast<size_t>(r)] * (p - smoothing / static_cast<double>(classes) -
                                                                       (c == target ? 1 - smoothing : 0.0));
            CHECK(got_grad[static_cast<size_t>(r * classes + c)] == doctest::Approx(want).epsilon(4e-6).scale(1));
          }
        }
      }
  }
}

TEST_CASE("layer_norm over float32 rows at every instruction-set level against a float64 reference") {
  // The row kernels (AVX-512 where the CPU has it, else the scalar loops) on rows of 1 to 1,000
  // values (whole and partial 16-lane steps), with and without the affine parameters, and a row
  // offset far from 0 (its mean 50): y, then dx, dw and db (upstream weights per element) against
  // the formulas in double here.
  for (const CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    CAPTURE(cpu_isa_name(isa));
    for (const int64_t cols : {1, 7, 16, 17, 128, 1000})
      for (const bool affine : {false, true}) {
        CAPTURE(cols);
        CAPTURE(affine);
        constexpr int64_t kRows = 4;
        constexpr double kEps = 1e-5;
        const size_t count = static_cast<size_t>(kRows * cols);
        std::vector<float> x(count), up(count), w(static_cast<size_t>(cols)), b(static_cast<size_t>(cols));
        for (size_t i = 0; i < count; ++i) {
          x[i] = static_cast<float>(std::sin(0.61 * static_cast<double>(i)) * 3.0 + (i / static_cast<size_t>(cols) == 2 ? 50.0 : 0.0));
          up[i] = static_cast<float>(std::cos(0.23 * static_cast<double>(i)));
        }
        for (int64_t c = 0; c < cols; ++c) {
          w[static_cast<size_t>(c)] = static_cast<float>(1.0 + 0.5 * std::sin(static_cast<double>(c)));
          b[static_cast<size_t>(c)] = static_cast<float>(0.25 * std::cos(static_cast<double>(c)));
        }
        Tensor xt = from_vector(x, {kRows, cols}), wt = from_vector(w, {cols}), bt = from_vector(b, {cols});
        xt.requires_grad_();
        wt.requires_grad_();
        bt.requires_grad_();
        const Tensor y = affine ? layer_norm(xt, {cols}, wt, bt, kEps) : layer_norm(xt, {cols}, Tensor(), Tensor(), kEps);
        sum(mul(y, from_vector(up, {kRows, cols}))).backward();
        const std::vector<double> got_y = values(y), got_dx = values(xt.grad());
        std::vector<double> want_dw(static_cast<size_t>(cols)), want_db(static_cast<size_t>(cols));
        for (int64_t r = 0; r < kRows; ++r) {
          CAPTURE(r);
          const size_t row = static_cast<size_t>(r * cols);
          double mean = 0, var = 0;
          for (int64_t c = 0; c < cols; ++c) mean += x[row + static_cast<size_t>(c)];
          mean /= static_cast<double>(cols);
          for (int64_t c = 0; c < cols; ++c) var += std::pow(x[row + static_cast<size_t>(c)] - mean, 2);
          const double rstd = 1 / std::sqrt(var / static_cast<double>(cols) + kEps);
          std::vector<double> x_hat(static_cast<size_t>(cols)), g(static_cast<size_t>(cols));
          double mean_g = 0, mean_gx = 0;
          for (int64_t c = 0; c < cols; ++c) {
            const size_t i = row + static_cast<size_t>(c), k = static_cast<size_t>(c);
            x_hat[k] = (x[i] - mean) * rstd;
            g[k] = up[i] * (affine ? w[k] : 1.0);
            mean_g += g[k] / static_cast<double>(cols);
            mean_gx += g[k] * x_hat[k] / static_cast<double>(cols);
            want_dw[k] += up[i] * x_hat[k];
            want_db[k] += up[i];
            const double want_y = affine ? x_hat[k] * w[k] + b[k] : x_hat[k];
            CHECK(got_y[i] == doctest::Approx(want_y).epsilon(1e-5).scale(1));
          }
          for (int64_t c = 0; c < cols; ++c) {
            const size_t k = static_cast<size_t>(c);
            const double want_dx = rstd * (g[k] - mean_g - x_hat[k] * mean_gx);
            CHECK(got_dx[row + k] == doctest::Approx(want_dx).epsilon(1e-4).scale(rstd));
          }
        }
        if (!affine) continue;
        const std::vector<double> got_dw = values(wt.grad()), got_db = values(bt.grad());
        for (size_t k = 0; k < static_cast<size_t>(cols); ++k) {
          CHECK(got_dw[k] == doctest::Approx(want_dw[k]).epsilon(1e-5).scale(1));
          CHECK(got_db[k] == doctest::Approx(want_db[k]).epsilon(1e-5).scale(1));
        }
      }
  }
}

TEST_CASE("layer_norm's weight and bias gradients are the scalar reference's bits at every level, threaded") {
  // Column sums in double, products rounded to float, rows in order (tensor/cpu/layer_norm_kernels.h):
  // the vector kernel's sixteen columns down all the rows add what the reference adds, in its
  // order, whatever the columns each thread takes (300 × 200 values: two column ranges, starts
  // not on a 16-column boundary) and however many columns the last block has.
  const Tensor x = testing::random({300, 200}, 91, kFloat32), up = testing::random({300, 200}, 92, kFloat32);
  const Tensor w = testing::random({200}, 93, kFloat32), b = testing::random({200}, 94, kFloat32);
  auto gradients = [&]() {
    const Tensor wl = w.detach().requires_grad_(), bl = b.detach().requires_grad_();
    sum(mul(layer_norm(x, {200}, wl, bl), up)).backward();
    return std::vector<std::vector<double>>{values(wl.grad()), values(bl.grad())};
  };
  std::vector<std::vector<double>> reference;
  {
    CpuIsaGuard guard(CpuIsa::Scalar);
    reference = gradients();
  }
  for (const CpuIsa isa : cpu_isas_supported()) {
    CAPTURE(cpu_isa_name(isa));
    CpuIsaGuard guard(isa);
    const std::vector<std::vector<double>> got = gradients();
    CHECK(got[0] == reference[0]);
    CHECK(got[1] == reference[1]);
  }
}

TEST_CASE("cross_entropy over (N, C, d) against PyTorch") {
  const Tensor logits = from_array(golden::kSpatialLogits, {2, 3, 2}, kFloat64);
  const Tensor target = from_array(golden::kSpatialTarget, {2, 2}, kInt64);
  const Tensor weight = from_array(golden::kSpatialWeight, {3}, kFloat64);
  const Tensor none = cross_entropy(logits, target, Reduction::None, 0, 0.2, weight);
  CHECK(none.shape() == Shape{2, 2});
  check_close(values(none), std::vector<double>(std::begin(golden::kSpatialNone), std::end(golden::kSpatialNone)));
  check_close(values(cross_entropy(logits, target, Reduction::Mean, 0, 0.2, weight)), {golden::kSpatialMean});
}

TEST_CASE("nll_loss against PyTorch and by hand") {
  const Tensor scores = from_array(golden::kNllScores, {4, 3}, kFloat64);
  const Tensor target = from_array(golden::kNllTarget, {4}, kInt64);
  const Tensor weight = from_array(golden::kNllWeight, {3}, kFloat64);
  check_close(values(nll_loss(scores, target, Reduction::Mean, -100, weight)), {golden::kNllWeightedMean});
  check_close(values(nll_loss(scores, target, Reduction::Mean, 1)), {golden::kNllIgnore1Mean});
  // By hand: picked scores -0.5, -0.1, -4.0, -1.0.
  check_close(values(nll_loss(scores, target, Reduction::None)), {0.5, 0.1, 4.0, 1.0});
  check_close(values(nll_loss(scores, target, Reduction::Sum)), {5.6});
  check_close(values(nll_loss(scores, target)), {1.4});
  check_close(values(nll_loss(scores, target, Reduction::Sum, -100, weight)), {2 * 0.5 + 0.1 + 0.25 * 4.0 + 1.0});
  CHECK(nll_loss(scores, target.to(kInt32)).item() == doctest::Approx(1.4));
  CHECK_THROWS_WITH_AS(nll_loss(scores, target, Reduction::Mean, -100, ones({2}, kFloat64)),
                       "[nll_loss] expected a weight of shape (3,), got (2,)", Error);
}

TEST_CASE("mse_loss") {
  const Tensor a = tensor({1, 2, 3}), b = tensor({2, 2, 5});
  check_close(values(mse_loss(a, b, Reduction::None)), {1, 0, 4});
  check_close(values(mse_loss(a, b)), {5.0 / 3}, 1e-6);
  check_close(values(mse_loss(a, b, Reduction::Sum)), {5});
  CHECK_THROWS_WITH_AS(mse_loss(a, tensor({1, 2})), "[mse_loss] input and target shapes differ: (3,) vs (2,)", Error);
}

TEST_CASE("dropout") {
  const Tensor x = ones({100000});
  CHECK(dropout(x, 0.0, true).is_same(x));   // p = 0: identity
  CHECK(dropout(x, 0.5, false).is_same(x));  // evaluation: identity
  CHECK(values(dropout(x, 1.0, true)) == std::vector<double>(100000, 0.0));
  Generator g1(11), g2(11), g3(12);
  const auto y = values(dropout(x, 0.3, true, &g1));
  CHECK(values(dropout(x, 0.3, true, &g2)) == y);  // seeded: the same mask
  CHECK(values(dropout(x, 0.3, true, &g3)) != y);
  size_t kept = 0;
  bool scaled = true;
  for (double v : y) {
    if (v == 0.0) continue;
    ++kept;
    scaled &= std::fabs(v - 1 / 0.7) < 1e-6;
  }
  CHECK(scaled);  // survivors are scaled by 1 / (1 - p)
  // Kept fraction ≈ 1 - p; the standard error is √(0.21 / 1e5) ≈ 0.0015.
  CHECK(static_cast<double>(kept) / 1e5 == doctest::Approx(0.7).epsilon(0.01));
  double mean = 0;
  for (double v : y) mean += v / 1e5;
  CHECK(mean == doctest::Approx(1.0).epsilon(0.01));  // the expectation is preserved
  CHECK_THROWS_AS(dropout(x, 1.5, true), Error);
}

TEST_CASE("layer_norm against PyTorch") {
  const Tensor x = from_array(golden::kLayerNormInput, {2, 3, 4}, kFloat64);
  const Tensor w = from_array(golden::kLayerNormWeight, {3, 4}, kFloat64);
  const Tensor b = from_array(golden::kLayerNormBias, {3, 4}, kFloat64);
  check_close(values(layer_norm(x, {3, 4}, w, b)),
              std::vector<double>(std::begin(golden::kLayerNormOutput), std::end(golden::kLayerNormOutput)), 1e-10);
  const Tensor last = layer_norm(x, {4});
  check_close(values(last), std::vector<double>(std::begin(golden::kLayerNormLastDim), std::end(golden::kLayerNormLastDim)),
              1e-10);
  // Each normalised row has mean 0 and (biased) variance 1 - eps-ish.
  check_close(values(mean(last, {2})), std::vector<double>(6, 0.0), 1e-12);
  CHECK_THROWS_AS(layer_norm(x, {3}), Error);
  CHECK_THROWS_AS(layer_norm(x, {4}, ones({3}, kFloat64)), Error);
}
