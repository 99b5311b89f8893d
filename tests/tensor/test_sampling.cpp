// multinomial (tensor/sampling.cpp, tensor/cpu/sampling.cpp). Exact draws of a seed are not an
// independent expectation, so these tests check properties: with a fixed seed, the counts of many
// draws pass a chi-square bound against the weights (with replacement, and the first and second
// draws without replacement against their exact probabilities); the same seed gives the same
// draws whatever the thread count; no index repeats without replacement; zero-weight categories
// are never drawn; and the error texts.
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <set>
#include <vector>

#include "error_message.h"
#include "tensor_test_helpers.h"

using namespace weft;

namespace {

std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }

// Pearson's statistic of the category counts of `draws` against probabilities `p`.
double chi_square(const std::vector<int64_t>& draws, const std::vector<double>& p) {
  std::vector<double> count(p.size(), 0.0);
  for (int64_t d : draws) {
    REQUIRE(d >= 0);
    REQUIRE(d < static_cast<int64_t>(p.size()));
    count[static_cast<size_t>(d)] += 1.0;
  }
  double stat = 0.0;
  for (size_t c = 0; c < p.size(); ++c) {
    const double expected = p[c] * static_cast<double>(draws.size());
    stat += (count[c] - expected) * (count[c] - expected) / expected;
  }
  return stat;
}

// Column j of an (N, k) int64 result.
std::vector<int64_t> column(const Tensor& t, int64_t j) { return ints(t.select(1, j)); }

// Upper bounds of a chi-square variable with 3 and 4 degrees of freedom at p = 1e-5: a correct
// sampler exceeds them once in 100 000 seeds.
constexpr double kChi2Dof3 = 25.9, kChi2Dof4 = 28.5;

}  // namespace

TEST_CASE("multinomial: shapes and dtype") {
  Generator g(1);
  const Tensor one = multinomial(tensor({1, 2, 3}), 2, false, &g);
  CHECK(one.shape() == Shape{2});
  CHECK(one.dtype() == kInt64);
  CHECK(multinomial(ones({4, 3}), 5, true, &g).shape() == Shape{4, 5});
  CHECK(multinomial(ones({0, 3}), 1, false, &g).shape() == Shape{0, 1});
  // Not differentiable.
  const Tensor w = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  CHECK(!multinomial(w, 1, false, &g).requires_grad());
}

TEST_CASE("multinomial: with replacement the counts follow the (unnormalised) weights") {
  const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
  for (DType d : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    CAPTURE(d);
    Generator g(2024);
    const Tensor draws = multinomial(tensor({1, 2, 3, 4}).to(d), 40000, true, &g);
    CHECK(chi_square(ints(draws), p) < kChi2Dof3);
  }
  // Rows of an (N, C) input each follow their own weights; one sample per row, many rows.
  Generator g(7);
  const Tensor weights = mul(ones({30000, 1}), tensor({4, 1, 0, 5, 10}));
  const Tensor one_each = multinomial(weights, 1, true, &g);
  CHECK(one_each.shape() == Shape{30000, 1});
  auto draws = ints(one_each);
  CHECK(std::count(draws.begin(), draws.end(), 2) == 0);
  // Category 2 (weight 0) dropped: 4 degrees of freedom become 3.
  for (auto& c : draws) c = c > 2 ? c - 1 : c;
  CHECK(chi_square(draws, {0.2, 0.05, 0.25, 0.5}) < kChi2Dof3);
}

TEST_CASE("multinomial: one sample without replacement follows the weights") {
  Generator g(99);
  const Tensor w = mul(ones({20000, 1}), tensor({1, 2, 3, 4, 10}));
  const Tensor draws = multinomial(w, 1, false, &g);
  CHECK(chi_square(ints(draws), {0.05, 0.1, 0.15, 0.2, 0.5}) < kChi2Dof4);
}

TEST_CASE("multinomial: without replacement the first two draws have the sequential probabilities") {
  // p = (1, 2, 3, 4)/10. First draw: p. Second: P(j) = Σ_{i≠j} p_i·p_j / (1 − p_i).
  const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
  std::vector<double> second(4, 0.0);
  for (size_t j = 0; j < 4; ++j)
    for (size_t i = 0; i < 4; ++i)
      if (i != j) second[j] += p[i] * p[j] / (1.0 - p[i]);
  Generator g(31);
  const Tensor draws = multinomial(mul(ones({30000, 1}), tensor({1, 2, 3, 4})), 2, false, &g);
  const auto first = column(draws, 0), next = column(draws, 1);
  CHECK(chi_square(first, p) < kChi2Dof3);
  CHECK(chi_square(next, second) < kChi2Dof3);
  for (size_t r = 0; r < first.size(); ++r) REQUIRE(first[r] != next[r]);
}

TEST_CASE("multinomial: without replacement no index repeats and zero weights are never drawn") {
  Generator g(5);
  // All categories: every row is a permutation.
  const Tensor perms = multinomial(add(rand({10, 50}, kFloat32, &g), 0.01), 50, false, &g);
  for (int64_t r = 0; r < 10; ++r) {
    auto row = ints(perms[r]);
    std::sort(row.begin(), row.end());
    std::vector<int64_t> all(50);
    for (int64_t i = 0; i < 50; ++i) all[static_cast<size_t>(i)] = i;
    CHECK(row == all);
  }
  // Three non-zero weights, three samples: always exactly those three.
  const Tensor sparse = multinomial(mul(ones({200, 1}), tensor({0, 1, 0, 2, 3})), 3, false, &g);
  for (int64_t r = 0; r < 200; ++r) {
    const auto row = ints(sparse[r]);
    CHECK(std::set<int64_t>(row.begin(), row.end()) == std::set<int64_t>{1, 3, 4});
  }
  // With replacement, the zero-weight categories never come up either.
  const auto many = ints(multinomial(tensor({0, 1, 0, 1e-3, 0}), 5000, true, &g));
  CHECK(std::all_of(many.begin(), many.end(), [](int64_t c) { return c == 1 || c == 3; }));
}

TEST_CASE("multinomial: the same seed gives the same draws, whatever the thread count") {
  const Tensor w = add(rand({64, 1024}, kFloat32), 0.0);
  const int threads = num_threads();
  for (bool replacement : {false, true}) {
    CAPTURE(replacement);
    Generator a(77), b(77), c(78);
    const Tensor first = multinomial(w, 8, replacement, &a);
    set_num_threads(1);
    const Tensor serial = multinomial(w, 8, replacement, &b);
    set_num_threads(threads);
    CHECK(equal(first, serial));
    CHECK(!equal(first, multinomial(w, 8, replacement, &c)));
  }
  // The default generator, reseeded.
  manual_seed(123);
  const Tensor x = multinomial(w, 3);
  manual_seed(123);
  CHECK(equal(x, multinomial(w, 3)));
}

TEST_CASE("multinomial: errors") {
  constexpr double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(error_of([] { multinomial(tensor({1, -1}), 1); }) ==
        "[multinomial] probability tensor contains either `inf`, `nan` or element < 0: got -1 in row 0, category 1");
  CHECK(error_of([&] { multinomial(tensor({1, inf}), 1); }) ==
        "[multinomial] probability tensor contains either `inf`, `nan` or element < 0: got inf in row 0, category 1");
  CHECK(error_of([&] { multinomial(tensor({nan, 1, 1, 1}).reshape({2, 2}), 1, true); }) ==
        "[multinomial] probability tensor contains either `inf`, `nan` or element < 0: got nan in row 0, category 0");
  CHECK(error_of([] { multinomial(tensor({1, 1, 0, 0}).reshape({2, 2}), 1); }) ==
        "[multinomial] invalid multinomial distribution (sum of probabilities <= 0) in row 1");
  CHECK(error_of([] { multinomial(tensor({1, 0, 2}), 3); }) ==
        "[multinomial] invalid multinomial distribution (with replacement=False, not enough categories of non-zero "
        "weight to sample): row 0 has 2, num_samples is 3");
  CHECK(error_of([] { multinomial(tensor({1, 1}), 3); }) ==
        "[multinomial] cannot sample n_sample > prob_dist.size(-1) samples without replacement: num_samples = 3, "
        "categories = 2");
  CHECK(error_of([] { multinomial(tensor({1, 1}), 0); }) ==
        "[multinomial] cannot sample n_sample <= 0 samples, got num_samples = 0");
  CHECK(error_of([] { multinomial(ones({2, 2, 2}), 1); }) == "[multinomial] prob_dist must be 1 or 2 dim, got shape (2, 2, 2)");
  CHECK(error_of([] { multinomial(scalar_tensor(1.0), 1); }) == "[multinomial] prob_dist must be 1 or 2 dim, got shape ()");
  CHECK(error_of([] { multinomial(ones({3}, kInt64), 1); }) ==
        "[multinomial] only supports floating-point dtypes for input, got int64");
  CHECK(error_of([] { multinomial(ones({2, 0}), 1, true); }) ==
        "[multinomial] invalid multinomial distribution (sum of probabilities <= 0) in row 0");
}
