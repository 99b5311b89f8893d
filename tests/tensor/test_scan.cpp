// cumsum, tril and triu (tensor/scan.cpp): hand-computed tables, result dtypes as PyTorch picks
// them, the accumulator widths (values a narrower accumulator would get wrong), long and wide
// scans (threaded) against a plain loop, 0-d and empty inputs, the error texts, and
// finite-difference gradients.
#include <doctest/doctest.h>

#include <vector>

#include "error_message.h"
#include "gradcheck.h"
#include "tensor_test_helpers.h"

using namespace weft;
using testing::gradcheck;
using testing::values;
using Inputs = std::vector<Tensor>;

namespace {

std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }

}  // namespace

TEST_CASE("cumsum: along each dim, negative dims, non-contiguous input") {
  const Tensor x = tensor({1, 2, 3, 4, 5, 6}).reshape({2, 3});
  CHECK(values(cumsum(x, 1)) == std::vector<double>{1, 3, 6, 4, 9, 15});
  CHECK(values(cumsum(x, -1)) == std::vector<double>{1, 3, 6, 4, 9, 15});
  CHECK(values(cumsum(x, 0)) == std::vector<double>{1, 2, 3, 5, 7, 9});
  CHECK(values(cumsum(x, -2)) == std::vector<double>{1, 2, 3, 5, 7, 9});
  // x.t() = [[1, 4], [2, 5], [3, 6]]
  CHECK(values(cumsum(x.t(), 1)) == std::vector<double>{1, 5, 2, 7, 3, 9});
  CHECK(values(cumsum(x.t(), 0)) == std::vector<double>{1, 4, 3, 9, 6, 15});
  // 3-D, the middle dim: x3[b] = [[b, 1], [2, 3]] + 10·b
  const Tensor x3 = tensor({0, 1, 2, 3, 10, 11, 12, 13}).reshape({2, 2, 2});
  CHECK(values(cumsum(x3, 1)) == std::vector<double>{0, 1, 2, 4, 10, 11, 22, 24});
  CHECK(cumsum(x, 1).dtype() == kFloat32);
}

TEST_CASE("cumsum: integer and bool inputs sum in int64 unless a dtype is given") {
  const Tensor i8 = from_vector<int8_t>({100, 100, 100}, {3});
  CHECK(cumsum(i8, 0).dtype() == kInt64);
  CHECK(ints(cumsum(i8, 0)) == std::vector<int64_t>{100, 200, 300});
  // In int8 the sum wraps, as PyTorch's: 200 − 256 = −56, 300 − 256 = 44.
  const Tensor wrapped = cumsum(i8, 0, kInt8);
  CHECK(wrapped.dtype() == kInt8);
  CHECK(ints(wrapped) == std::vector<int64_t>{100, -56, 44});
  const Tensor b = tensor({1, 1, 0, 1}).to(kBool);
  CHECK(cumsum(b, 0).dtype() == kInt64);
  CHECK(ints(cumsum(b, 0)) == std::vector<int64_t>{1, 2, 2, 3});
  CHECK(ints(cumsum(tensor({1, 2, 3}).to(kInt32), 0)) == std::vector<int64_t>{1, 3, 6});
  // A floating input converted first: 1.5 → 1, 2.5 → 2.
  CHECK(ints(cumsum(tensor({1.5, 2.5}), 0, kInt64)) == std::vector<int64_t>{1, 3});
  const Tensor f64 = cumsum(tensor({0.1, 0.2}), 0, kFloat64);
  CHECK(f64.dtype() == kFloat64);
  CHECK(values(f64) == std::vector<double>{double(0.1f), double(0.1f) + double(0.2f)});
}

TEST_CASE("cumsum: float32 accumulates in float64, narrow floats in float32") {
  // In float32, 1e8 + 1 == 1e8, so a float32 accumulator would end at 0; float64 ends at 4.
  const Tensor f = tensor({1e8, 1, 1, 1, 1, -1e8});
  CHECK(values(cumsum(f, 0)).back() == 4.0);
  // bfloat16 has 8 significant bits: near 256 its spacing is 2. A bfloat16 accumulator would
  // stay at 256; a float32 one runs 257, 258, 259, 260, each rounded to nearest even on store.
  const Tensor c = cumsum(tensor({256, 1, 1, 1, 1}).to(kBFloat16), 0);
  CHECK(c.dtype() == kBFloat16);
  CHECK(values(c) == std::vector<double>{256, 256, 258, 260, 260});
  // float16 (11 bits) near 2048 has spacing 2 as well.
  const Tensor h = cumsum(tensor({2048, 1, 1, 1, 1}).to(kFloat16), 0);
  CHECK(values(h) == std::vector<double>{2048, 2048, 2050, 2052, 2052});
}

TEST_CASE("cumsum: long and wide scans (split over the pool) match a plain loop") {
  Generator g(17);
  // One long row; many rows; one block of many columns (the scan runs down dim 0).
  for (const Shape& shape : {Shape{1, 70000}, Shape{300, 300}, Shape{2000, 40}}) {
    for (int64_t dim : {0, 1}) {
      CAPTURE(shape);
      CAPTURE(dim);
      const Tensor x = randint(-5, 6, shape, kInt64, &g);
      const auto v = ints(x);
      std::vector<int64_t> want(v.size());
      const int64_t rows = shape[0], cols = shape[1];
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const size_t at = static_cast<size_t>(r * cols + c);
          const int64_t before = dim == 1 ? (c > 0 ? want[at - 1] : 0) : (r > 0 ? want[at - static_cast<size_t>(cols)] : 0);
          want[at] = before + v[at];
        }
      CHECK(ints(cumsum(x, dim)) == want);
      // Small integers are exact in float64 as well.
      CHECK(ints(cumsum(x.to(kFloat64), dim)) == want);
    }
  }
}

TEST_CASE("cumsum: 0-d and empty inputs, errors") {
  const Tensor s = cumsum(scalar_tensor(3.0), 0);
  CHECK(s.shape() == Shape{});
  CHECK(s.item() == 3.0);
  CHECK(cumsum(scalar_tensor(3.0), -1).item() == 3.0);
  CHECK(cumsum(ones({0, 3}), 0).shape() == Shape{0, 3});
  CHECK(cumsum(ones({2, 0}), 1).shape() == Shape{2, 0});
  CHECK(error_of([] { cumsum(scalar_tensor(1.0), 1); }) == "[cumsum] dimension out of range: expected in [-1, 0], got 1");
  CHECK(error_of([] { cumsum(ones({2, 3}), 2); }) == "[cumsum] dimension out of range: expected in [-2, 1], got 2");
  CHECK(error_of([] { cumsum(ones({2}, kBool), 0, kBool); }) ==
        "[cumsum] cannot sum into a bool result, as PyTorch cannot; leave dtype unset for int64");
}

TEST_CASE("tril and triu: hand-computed tables") {
  const Tensor x = arange(12.0).reshape({3, 4});  // int64 0..11
  CHECK(ints(tril(x)) == std::vector<int64_t>{0, 0, 0, 0, 4, 5, 0, 0, 8, 9, 10, 0});
  CHECK(ints(tril(x, 1)) == std::vector<int64_t>{0, 1, 0, 0, 4, 5, 6, 0, 8, 9, 10, 11});
  CHECK(ints(tril(x, -1)) == std::vector<int64_t>{0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0});
  CHECK(ints(triu(x)) == std::vector<int64_t>{0, 1, 2, 3, 0, 5, 6, 7, 0, 0, 10, 11});
  CHECK(ints(triu(x, -1)) == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 0, 9, 10, 11});
  CHECK(ints(triu(x, 2)) == std::vector<int64_t>{0, 0, 2, 3, 0, 0, 0, 7, 0, 0, 0, 0});
  CHECK(ints(tril(x, -5)) == std::vector<int64_t>(12, 0));
  CHECK(ints(triu(x, 7)) == std::vector<int64_t>(12, 0));
  CHECK(equal(tril(x, 7), x));
  CHECK(tril(x).dtype() == kInt64);
  // Batched: every matrix of the leading dims.
  const Tensor batch = ones({2, 2, 3});
  CHECK(values(tril(batch)) == std::vector<double>{1, 0, 0, 1, 1, 0, 1, 0, 0, 1, 1, 0});
  CHECK(values(triu(batch, 1)) == std::vector<double>{0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 0, 1});
  // bool (a causal mask), non-contiguous input.
  const Tensor mask = tril(ones({2, 3}, kBool), -1);
  CHECK(mask.dtype() == kBool);
  CHECK(values(mask) == std::vector<double>{0, 0, 0, 1, 0, 0});
  CHECK(ints(tril(x.t())) == std::vector<int64_t>{0, 0, 0, 1, 5, 0, 2, 6, 10, 3, 7, 11});
}

TEST_CASE("tril and triu: errors") {
  CHECK(error_of([] { tril(ones({3})); }) == "[tril] expected an input with at least 2 dimensions, got shape (3,)");
  CHECK(error_of([] { triu(scalar_tensor(1.0)); }) == "[triu] expected an input with at least 2 dimensions, got shape ()");
}

TEST_CASE("grad: cumsum, tril and triu") {
  for (int64_t dim : {0, 1, 2, -1}) {
    CAPTURE(dim);
    gradcheck([&](const Inputs& in) { return cumsum(in[0], dim); }, {testing::arg({2, 3, 4}, 41)});
  }
  gradcheck([](const Inputs& in) { return cumsum(in[0], 0); }, {testing::arg({}, 42)});
  // The gradient of a sum of cumsums is the reverse running count: [3, 2, 1].
  Tensor x = tensor({1, 2, 3}, kFloat64).requires_grad_();
  cumsum(x, 0).sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{3, 2, 1});
  // Through a dtype conversion the gradient comes back in the input's dtype.
  Tensor y = tensor({1, 2, 3}, kFloat32).requires_grad_();
  cumsum(y, 0, kFloat64).sum().backward();
  CHECK(y.grad().dtype() == kFloat32);
  CHECK(values(y.grad()) == std::vector<double>{3, 2, 1});
  CHECK(!cumsum(y, 0, kInt64).requires_grad());
  for (int64_t diagonal : {-1, 0, 2}) {
    CAPTURE(diagonal);
    gradcheck([&](const Inputs& in) { return tril(in[0], diagonal); }, {testing::arg({2, 3, 4}, 43)});
    gradcheck([&](const Inputs& in) { return triu(in[0], diagonal); }, {testing::arg({3, 3}, 44)});
  }
}
