// sort, argsort and topk (tensor/sorting.cpp): hand-computed tables (NaN order, ties, dims,
// every dtype), random rows against an independent stable sort written here, both of topk's
// selection paths (the heap for k ≤ n/16, nth_element above), 0-d and empty inputs, the error
// texts, and finite-difference gradients of the values.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "error_message.h"
#include "gradcheck.h"
#include "tensor_test_helpers.h"

using namespace weft;
using testing::gradcheck;
using testing::values;
using Inputs = std::vector<Tensor>;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }

// NaN-aware equality of value lists (NaN equals NaN).
bool same_values(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}

// The reference order of a line: std::stable_sort of its positions, NaN above every number.
std::vector<int64_t> reference_order(const std::vector<double>& v, bool descending) {
  std::vector<int64_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  const auto ascending = [&](int64_t a, int64_t b) {
    const double x = v[static_cast<size_t>(a)], y = v[static_cast<size_t>(b)];
    return std::isnan(y) ? !std::isnan(x) : x < y;
  };
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return descending ? ascending(b, a) : ascending(a, b); });
  return idx;
}

// Random rows with many ties and a few NaNs: small integers as float64.
Tensor tied_rows(int64_t rows, int64_t n, uint64_t seed) {
  Generator g(seed);
  Tensor t = randint(0, 20, {rows, n}, kInt64, &g).to(kFloat64);
  Tensor nan_mask = lt(rand({rows, n}, kFloat64, &g), 0.05);
  return masked_fill(t, nan_mask, kNaN);
}

}  // namespace

TEST_CASE("sort: NaN sorts above every number, ascending and descending") {
  const Tensor x = tensor({3.0, kNaN, 1.0, kNaN, 2.0});
  const auto up = sort(x);
  CHECK(same_values(values(up.values), {1, 2, 3, kNaN, kNaN}));
  CHECK(ints(up.indices) == std::vector<int64_t>{2, 4, 0, 1, 3});
  const auto down = sort(x, -1, /*descending=*/true);
  CHECK(same_values(values(down.values), {kNaN, kNaN, 3, 2, 1}));
  CHECK(ints(down.indices) == std::vector<int64_t>{1, 3, 0, 4, 2});
  CHECK(up.indices.dtype() == kInt64);
  CHECK(up.values.dtype() == x.dtype());
  CHECK(ints(argsort(x, 0, true)) == std::vector<int64_t>{1, 3, 0, 4, 2});
}

TEST_CASE("sort: equal elements keep their original order, stable or not") {
  const Tensor x = tensor({2, 1, 2, 1, 0, -0.0});
  for (bool stable : {false, true}) {
    CAPTURE(stable);
    CHECK(ints(sort(x, 0, false, stable).indices) == std::vector<int64_t>{4, 5, 1, 3, 0, 2});
    CHECK(ints(sort(x, 0, true, stable).indices) == std::vector<int64_t>{0, 2, 1, 3, 4, 5});
  }
  // -0.0 and 0.0 are equal and keep their order; the values are the input's exact bits.
  const auto v = sort(tensor({0.0, -0.0, 0.0}), 0).values.to_vector<double>();
  CHECK(!std::signbit(v[0]));
  CHECK(std::signbit(v[1]));
}

TEST_CASE("sort: along any dim, negative dims, non-contiguous input") {
  // x = [[3, 1], [1, 2], [2, 0]]
  const Tensor x = tensor({3, 1, 1, 2, 2, 0}).reshape({3, 2});
  for (int64_t dim : {0, -2}) {
    const auto r = sort(x, dim);
    CHECK(values(r.values) == std::vector<double>{1, 0, 2, 1, 3, 2});
    CHECK(ints(r.indices) == std::vector<int64_t>{1, 2, 2, 0, 0, 1});
  }
  for (int64_t dim : {1, -1}) {
    const auto r = sort(x, dim, true);
    CHECK(values(r.values) == std::vector<double>{3, 1, 2, 1, 2, 0});
    CHECK(ints(r.indices) == std::vector<int64_t>{0, 1, 1, 0, 0, 1});
  }
  // The transpose [[3, 1, 2], [1, 2, 0]] sorted along its last dim.
  const auto t = sort(x.t(), -1);
  CHECK(values(t.values) == std::vector<double>{1, 2, 3, 0, 1, 2});
  CHECK(ints(t.indices) == std::vector<int64_t>{1, 2, 0, 2, 0, 1});
  CHECK(t.values.shape() == Shape{2, 3});
}

TEST_CASE("sort and topk: every dtype PyTorch sorts") {
  for (DType d : {kFloat64, kFloat32, kFloat16, kBFloat16, kFloat8E4M3FN, kInt8, kUInt8, kInt32, kInt64}) {
    CAPTURE(d);
    const Tensor x = tensor({5, 1, 4, 1, 3}).to(d);
    const auto s = sort(x);
    CHECK(s.values.dtype() == d);
    CHECK(values(s.values) == std::vector<double>{1, 1, 3, 4, 5});
    CHECK(ints(s.indices) == std::vector<int64_t>{1, 3, 4, 2, 0});
    const auto top = topk(x, 2);
    CHECK(values(top.values) == std::vector<double>{5, 4});
    CHECK(ints(top.indices) == std::vector<int64_t>{0, 2});
  }
  // bool sorts false < true; topk refuses bool, as PyTorch.
  const auto b = sort(tensor({1, 0, 1}).to(kBool));
  CHECK(values(b.values) == std::vector<double>{0, 1, 1});
  CHECK(ints(b.indices) == std::vector<int64_t>{1, 0, 2});
  CHECK(error_of([] { topk(ones({3}, kBool), 1); }) ==
        "[topk] is not implemented for bool tensors, as in PyTorch; convert with .to(dtype)");
}

TEST_CASE("sort: narrow floats order as their float32 values, NaN included") {
  Generator g(3);
  const Tensor x = masked_fill(randn({4, 300}, kFloat32, &g), lt(rand({4, 300}, kFloat32, &g), 0.02), kNaN);
  for (DType d : {kBFloat16, kFloat16}) {
    CAPTURE(d);
    const Tensor narrow = x.to(d);
    const Tensor wide = narrow.to(kFloat32);  // exact
    CHECK(equal(sort(narrow, 1).indices, sort(wide, 1).indices));
    CHECK(equal(topk(narrow, 7, 1, false).indices, topk(wide, 7, 1, false).indices));
  }
}

TEST_CASE("sort: random rows with ties and NaNs against a reference stable sort") {
  const Tensor x = tied_rows(8, 150, 11);
  for (bool descending : {false, true}) {
    CAPTURE(descending);
    const auto r = sort(x, 1, descending);
    for (int64_t row = 0; row < 8; ++row) {
      CAPTURE(row);
      const auto v = values(x[row]);
      const auto want = reference_order(v, descending);
      CHECK(ints(r.indices[row]) == want);
      std::vector<double> want_values;
      for (int64_t i : want) want_values.push_back(v[static_cast<size_t>(i)]);
      CHECK(same_values(values(r.values[row]), want_values));
    }
    // Along dim 0 (lines strided in memory): each column is the sort of the transpose's row.
    CHECK(equal(sort(x.t().contiguous(), 0, descending).indices, r.indices.t()));
  }
}

TEST_CASE("topk: hand-computed tables") {
  const Tensor x = tensor({1, 4, 2, 5});
  auto r = topk(x, 2);
  CHECK(values(r.values) == std::vector<double>{5, 4});
  CHECK(ints(r.indices) == std::vector<int64_t>{3, 1});
  r = topk(x, 2, 0, true, /*sorted=*/false);  // in increasing position
  CHECK(values(r.values) == std::vector<double>{4, 5});
  CHECK(ints(r.indices) == std::vector<int64_t>{1, 3});
  r = topk(x, 3, -1, /*largest=*/false);
  CHECK(values(r.values) == std::vector<double>{1, 2, 4});
  CHECK(ints(r.indices) == std::vector<int64_t>{0, 2, 1});
  // Ties go to the lower position.
  r = topk(tensor({1, 1, 1, 1, 0}), 2);
  CHECK(ints(r.indices) == std::vector<int64_t>{0, 1});
  r = topk(tensor({0, 2, 0, 2, 0}), 3, 0, false);
  CHECK(ints(r.indices) == std::vector<int64_t>{0, 2, 4});
  // NaN is the largest value.
  const Tensor n = tensor({3, kNaN, 1, kNaN, 2});
  r = topk(n, 3);
  CHECK(same_values(values(r.values), {kNaN, kNaN, 3}));
  CHECK(ints(r.indices) == std::vector<int64_t>{1, 3, 0});
  r = topk(n, 2, 0, false);
  CHECK(values(r.values) == std::vector<double>{1, 2});
  CHECK(ints(r.indices) == std::vector<int64_t>{2, 4});
  // Along dim 0 of [[3, 1], [1, 2], [2, 0]].
  r = topk(tensor({3, 1, 1, 2, 2, 0}).reshape({3, 2}), 2, 0);
  CHECK(r.values.shape() == Shape{2, 2});
  CHECK(values(r.values) == std::vector<double>{3, 2, 2, 1});
  CHECK(ints(r.indices) == std::vector<int64_t>{0, 1, 2, 0});
}

TEST_CASE("topk: both selection paths give the reference sort's prefix") {
  // n = 160: k ≤ 10 takes the heap, larger k nth_element.
  const Tensor x = tied_rows(6, 160, 21);
  for (int64_t k : {0, 1, 5, 10, 11, 80, 159, 160})
    for (bool largest : {true, false}) {
      CAPTURE(k);
      CAPTURE(largest);
      const auto s = topk(x, k, 1, largest, true);
      const auto u = topk(x, k, 1, largest, false);
      CHECK(s.indices.shape() == Shape{6, k});
      for (int64_t row = 0; row < 6; ++row) {
        CAPTURE(row);
        const auto v = values(x[row]);
        std::vector<int64_t> want = reference_order(v, largest);
        want.resize(static_cast<size_t>(k));
        CHECK(ints(s.indices[row]) == want);
        std::vector<double> want_values;
        for (int64_t i : want) want_values.push_back(v[static_cast<size_t>(i)]);
        CHECK(same_values(values(s.values[row]), want_values));
        std::sort(want.begin(), want.end());
        CHECK(ints(u.indices[row]) == want);
      }
    }
}

TEST_CASE("topk: many long rows (threaded) and strided lines") {
  // 64 rows of a 5000-word vocabulary: enough work to split over the pool.
  Generator g(5);
  const Tensor logits = randn({64, 5000}, kFloat32, &g);
  const auto r = topk(logits, 40);
  const auto s = sort(logits, 1, true);
  CHECK(equal(r.indices, s.indices.slice(1, 0, 40)));
  CHECK(equal(r.values, s.values.slice(1, 0, 40)));
  // The same rows as columns: lines strided in memory.
  const auto c = topk(logits.t().contiguous(), 40, 0);
  CHECK(equal(c.indices, r.indices.t()));
}

TEST_CASE("sort and topk: 0-d and empty inputs") {
  const Tensor s = scalar_tensor(3.0);
  for (int64_t dim : {0, -1}) {
    const auto r = sort(s, dim);
    CHECK(r.values.shape() == Shape{});
    CHECK(r.values.item() == 3.0);
    CHECK(r.indices.item<int64_t>() == 0);
  }
  // As PyTorch, a 0-d input gives its one element for k = 0 as for k = 1.
  for (int64_t k : {0, 1}) {
    const auto r = topk(s, k);
    CHECK(r.values.shape() == Shape{});
    CHECK(r.values.item() == 3.0);
    CHECK(r.indices.item<int64_t>() == 0);
  }
  CHECK(sort(ones({0, 3}), 0).values.shape() == Shape{0, 3});
  CHECK(sort(ones({2, 0}), 1).indices.shape() == Shape{2, 0});
  CHECK(topk(ones({2, 5}), 0).values.shape() == Shape{2, 0});
  CHECK(topk(ones({0, 5}), 3).indices.shape() == Shape{0, 3});
}

TEST_CASE("sort and topk: errors") {
  CHECK(error_of([] { topk(ones({2}), 3); }) == "[topk] selected index k out of range: k = 3 for dimension -1 of size 2");
  CHECK(error_of([] { topk(ones({2, 4}), -1, 0); }) ==
        "[topk] selected index k out of range: k = -1 for dimension 0 of size 2");
  CHECK(error_of([] { topk(scalar_tensor(1.0), 2); }) ==
        "[topk] selected index k out of range: k = 2 for dimension -1 of size 1");
  CHECK(error_of([] { sort(ones({2}), 1); }) == "[sort] dimension out of range: expected in [-1, 0], got 1");
  CHECK(error_of([] { topk(scalar_tensor(1.0), 1, 1); }) == "[topk] dimension out of range: expected in [-1, 0], got 1");
  CHECK(error_of([] { sort(Tensor()); }) == "[sort] the input tensor is undefined");
}

TEST_CASE("grad: sort and topk values scatter the gradient back to their positions") {
  for (int64_t dim : {0, 1, -1})
    for (bool descending : {false, true}) {
      CAPTURE(dim);
      CAPTURE(descending);
      gradcheck([&](const Inputs& in) { return sort(in[0], dim, descending).values; }, {testing::arg({3, 4}, 31)});
      gradcheck([&](const Inputs& in) { return topk(in[0], 2, dim, descending).values; }, {testing::arg({3, 4}, 32)});
      gradcheck([&](const Inputs& in) { return topk(in[0], 2, dim, descending, false).values; },
                {testing::arg({3, 4}, 33)});
    }
  gradcheck([](const Inputs& in) { return sort(in[0]).values; }, {testing::arg({}, 34)});
  // A known case: the gradient of the top value lands on its position.
  Tensor x = tensor({0.5, 2.0, -1.0}, kFloat64).requires_grad_();
  topk(x, 1).values.sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{0, 1, 0});
  CHECK(!sort(x).indices.requires_grad());
  CHECK(!argsort(x).requires_grad());
}
