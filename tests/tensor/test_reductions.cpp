// Reductions: sum / mean / amax / amin / max and min with indices / argmax / argmin / var / std /
// norm / logsumexp, over all dims, chosen dims and with keepdim, on small tensors whose results
// are worked out by hand in the comments.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tensor_test_helpers.h"
#include "tensor/all.h"
#include "tensor/cpu/isa.h"
#include "tensor/float_formats.h"

using namespace weft;
using testing::values;
using testing::check_close;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }

// [[1, 2, 3], [4, 5, 6]] in float64.
Tensor m23() { return tensor({1, 2, 3, 4, 5, 6}, kFloat64).view({2, 3}); }

}  // namespace

TEST_CASE("sum over all dims, chosen dims, keepdim") {
  const Tensor x = m23();
  CHECK(sum(x).dim() == 0);
  CHECK(sum(x).item() == 21.0);
  CHECK(sum(x).dtype() == kFloat64);
  CHECK(values(sum(x, {0})) == std::vector<double>{5, 7, 9});
  CHECK(values(sum(x, {1})) == std::vector<double>{6, 15});
  CHECK(values(sum(x, {-1})) == std::vector<double>{6, 15});
  CHECK(sum(x, {1}, true).shape() == Shape{2, 1});
  CHECK(sum(x, {0, 1}, true).shape() == Shape{1, 1});
  CHECK(sum(x, {0, 1}).item() == 21.0);
  CHECK(values(x.sum({0})) == std::vector<double>{5, 7, 9});
  // Non-contiguous input.
  CHECK(values(sum(x.t(), {1})) == std::vector<double>{5, 7, 9});
  // Several dims of a 3-D tensor: Σ_i Σ_k (12i + 4j + k) = 60 + 32j.
  const Tensor c = arange(24, kFloat64).view({2, 3, 4});
  CHECK(values(sum(c, {0, 2})) == std::vector<double>{60, 92, 124});
  CHECK(sum(c, {2, 0}, true).shape() == Shape{1, 3, 1});
  // Empty reductions sum to zero.
  CHECK(sum(zeros({0})).item() == 0.0);
  CHECK(values(sum(zeros({2, 0}), {1})) == std::vector<double>{0, 0});
  CHECK_THROWS_WITH_AS(sum(x, {1, -1}), "[sum] a dimension appears twice in (1, -1)", Error);
  CHECK_THROWS_WITH_AS(sum(x, {2}), "[sum] dimension out of range: expected in [-2, 1], got 2", Error);
}

TEST_CASE("integer and bool sums give int64; an explicit dtype is honoured") {
  const Tensor i = tensor({100, 100, 100}, kInt8);
  CHECK(sum(i).dtype() == kInt64);
  CHECK(sum(i).item<int64_t>() == 300);  // no int8 wrap in the accumulator
  CHECK(sum(tensor({1, 0, 1, 1}, kBool)).dtype() == kInt64);
  CHECK(sum(tensor({1, 0, 1, 1}, kBool)).item<int64_t>() == 3);
  CHECK(ints(sum(tensor({1, 2, 3, 4}, kInt32).view({2, 2}), {0})) == std::vector<int64_t>{4, 6});
  const Tensor big = full({3}, 3e9, kInt64);
  CHECK(sum(big).item<int64_t>() == 9000000000LL);
  CHECK(sum(i, {}, false, kFloat64).dtype() == kFloat64);
  CHECK(sum(i, {}, false, kFloat64).item() == 300.0);
  CHECK(sum(tensor({0.5, 0.5}), {}, false, kInt32).dtype() == kInt32);
}

TEST_CASE("mean") {
  const Tensor x = m23();
  CHECK(mean(x).item() == 3.5);
  CHECK(values(mean(x, {0})) == std::vector<double>{2.5, 3.5, 4.5});
  CHECK(values(mean(x, {1}, true)) == std::vector<double>{2, 5});
  CHECK(mean(x, {1}, true).shape() == Shape{2, 1});
  CHECK(mean(tensor({1, 2}, kFloat16)).dtype() == kFloat16);
  CHECK_THROWS_WITH_AS(mean(tensor({1, 2}, kInt64)),
                       "[mean] expected a floating tensor, got int64; convert with .to(dtype) first", Error);
  CHECK(std::isnan(mean(zeros({0})).item()));  // 0 / 0, as PyTorch
}

TEST_CASE("amax, amin, max and min with indices, argmax, argmin") {
  const Tensor x = tensor({3, 1, 4, 1, 5, 9, 2, 6}, kFloat64).view({2, 4});  // [[3,1,4,1],[5,9,2,6]]
  CHECK(amax(x).item() == 9);
  CHECK(amin(x).item() == 1);
  CHECK(max(x).item() == 9);
  CHECK(min(x).item() == 1);
  CHECK(values(amax(x, {1})) == std::vector<double>{4, 9});
  CHECK(values(amin(x, {0})) == std::vector<double>{3, 1, 2, 1});
  CHECK(amax(x, {1}, true).shape() == Shape{2, 1});
  CHECK(values(amax(x.t(), {0})) == std::vector<double>{4, 9});

  const auto [vmax, imax] = max(x, 1);
  CHECK(values(vmax) == std::vector<double>{4, 9});
  CHECK(imax.dtype() == kInt64);
  CHECK(ints(imax) == std::vector<int64_t>{2, 1});
  const auto [vmin, imin] = min(x, 1, true);
  CHECK(vmin.shape() == Shape{2, 1});
  CHECK(values(vmin) == std::vector<double>{1, 2});
  CHECK(ints(imin) == std::vector<int64_t>{1, 2});  // ties keep the first index
  CHECK(ints(min(x, 0).indices) == std::vector<int64_t>{0, 0, 1, 0});

  CHECK(argmax(x).item<int64_t>() == 5);  // over the flattened tensor
  CHECK(argmin(x).item<int64_t>() == 1);
  CHECK(argmax(x).dim() == 0);
  CHECK(ints(argmax(x, 0)) == std::vector<int64_t>{1, 1, 0, 1});
  CHECK(ints(argmin(x, -1)) == std::vector<int64_t>{1, 2});
  CHECK(argmax(x, 1, true).shape() == Shape{2, 1});
  CHECK(ints(x.argmax(1)) == std::vector<int64_t>{2, 1});
  // Integer inputs keep their dtype.
  CHECK(amax(tensor({3, 7, 5}, kInt32)).dtype() == kInt32);
  CHECK(amax(tensor({3, 7, 5}, kInt32)).item<int64_t>() == 7);
  // NaN propagates, and its index is the one reported.
  const Tensor n = tensor({1.0, kNaN, 3.0});
  CHECK(std::isnan(amax(n).item()));
  CHECK(std::isnan(amin(n).item()));
  CHECK(argmax(n).item<int64_t>() == 1);
  CHECK(max(n, 0).indices.item<int64_t>() == 1);
  // Nothing to take the max of.
  CHECK_THROWS_AS(amax(zeros({0})), Error);
  CHECK_THROWS_AS(max(zeros({2, 0}), 1), Error);
  CHECK(amax(zeros({0, 2}), {1}).shape() == Shape{0});
}

TEST_CASE("var and std") {
  const Tensor x = m23();
  // Over all: mean 3.5, Σ(x - 3.5)² = 17.5; unbiased 17.5 / 5, biased 17.5 / 6.
  check_close(values(var(x)), {3.5});
  check_close(values(var(x, {}, 0)), {17.5 / 6});
  check_close(values(weft::std(x)), {std::sqrt(3.5)});
  check_close(values(var(x, {1})), {1, 1});
  check_close(values(var(x, {0})), {4.5, 4.5, 4.5});  // pairs 3 apart: (1.5² · 2) / 1
  check_close(values(weft::std(x, {0}, 0, true)), {1.5, 1.5, 1.5});
  CHECK(weft::std(x, {0}, 0, true).shape() == Shape{1, 3});
  CHECK(std::isnan(var(tensor({1.0})).item()));  // n - correction = 0: 0 / 0, as PyTorch
  CHECK_THROWS_AS(var(tensor({1, 2}, kInt64)), Error);
}

TEST_CASE("norm with p = 1, 2, inf and others") {
  const Tensor x = tensor({3, -4, 0, 12}, kFloat64).view({2, 2});  // [[3, -4], [0, 12]]
  CHECK(norm(x, 1).item() == 19);
  CHECK(norm(x).item() == 13);  // √(9 + 16 + 144)
  CHECK(norm(x, 2).item() == 13);
  CHECK(norm(x, kInf).item() == 12);
  check_close(values(norm(x, 3)), {std::cbrt(27.0 + 64 + 1728)});
  CHECK(values(norm(x, 2, {1})) == std::vector<double>{5, 12});
  CHECK(values(norm(x, 1, {0})) == std::vector<double>{3, 16});
  CHECK(values(norm(x, kInf, {1}, true)) == std::vector<double>{4, 12});
  CHECK(norm(x, kInf, {1}, true).shape() == Shape{2, 1});
  CHECK(norm(zeros({3})).item() == 0);
  CHECK_THROWS_AS(norm(x, 0.0), Error);
  CHECK_THROWS_AS(norm(tensor({1}, kInt64)), Error);
}

TEST_CASE("logsumexp is exact, stable and keeps dims on request") {
  const Tensor x = m23();
  const double l = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  check_close(values(logsumexp(x, {1})), {l, l + 3});
  CHECK(logsumexp(x, {1}, true).shape() == Shape{2, 1});
  check_close(values(logsumexp(x, {0, 1})), {std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(4.0) +
                                                      std::exp(5.0) + std::exp(6.0))});
  // Large values do not overflow; all -inf gives -inf; +inf gives +inf.
  check_close(values(logsumexp(tensor({1000, 1000}, kFloat64), {0})), {1000 + std::log(2.0)});
  check_close(values(logsumexp(tensor({-1000, -1000}), {0})), {-1000 + std::log(2.0)}, 1e-6);
  CHECK(logsumexp(tensor({-kInf, -kInf}), {0}).item() == -kInf);
  CHECK(logsumexp(tensor({1.0, kInf}), {0}).item() == kInf);
  CHECK(logsumexp(tensor({1, 2}, kInt64), {0}).dtype() == kFloat32);
}

TEST_CASE("sum_to undoes broadcasting") {
  const Tensor g = ones({2, 3, 4});
  CHECK(values(sum_to(g, {3, 1})) == std::vector<double>{8, 8, 8});
  CHECK(sum_to(g, {3, 1}).shape() == Shape{3, 1});
  CHECK(sum_to(g, {}).item() == 24);
  CHECK(sum_to(g, {2, 3, 4}).is_same(g));
  CHECK_THROWS_AS(sum_to(g, {5}), Error);
}

TEST_CASE("a sum over leading dims (read as columns in place) equals the same sum through the row kernel") {
  // The permuted twin is not contiguous, so its sum takes the row path: both must agree exactly
  // up to accumulation order, for every dtype family and at a size that runs on several threads.
  for (const DType dtype : {kFloat32, kFloat64, kBFloat16, kInt32, kInt8}) {
    CAPTURE(dtype);
    Generator gen(21);
    const Tensor x = randint(-50, 50, {300, 7, 130}, dtype, &gen);
    const Tensor twin = x.permute({2, 1, 0}).contiguous().permute({2, 1, 0});
    REQUIRE_FALSE(twin.is_contiguous());
    for (const Shape& dims : {Shape{0}, Shape{0, 1}}) {
      for (const bool keepdim : {false, true}) {
        const Tensor by_columns = sum(x, dims, keepdim), by_rows = sum(twin, dims, keepdim);
        CHECK(by_columns.shape() == by_rows.shape());
        CHECK(by_columns.dtype() == by_rows.dtype());
        CHECK(by_columns.to_vector<double>() == by_rows.to_vector<double>());  // integers: exact in any order
      }
    }
  }
  // Empty reduced dims give zeros; empty kept dims give an empty result.
  CHECK(values(sum(zeros({0, 3}), {0})) == std::vector<double>{0, 0, 0});
  CHECK(sum(zeros({4, 0}), {0}).shape() == Shape{0});
  // The gradient of a leading-dim sum broadcasts back over the summed dims.
  Tensor leaf = ones({2, 3}).requires_grad_(true);
  sum(mul(leaf, tensor({1, 2, 3})), {0}).sum().backward();
  CHECK(values(leaf.grad()) == std::vector<double>{1, 2, 3, 1, 2, 3});
}

TEST_CASE("sums of every dtype into every output dtype, by rows and by columns, round the exact total once") {
  // A (5, 7) matrix of the integers 0..3, exact in every dtype; its row sums (up to 21) and column
  // sums (up to 15) are exact in a wide accumulator and are rounded once into the output dtype, as
  // converting the exact total would round it (21 is not a float8 e4m3 value: it becomes 20).
  std::vector<double> v(35);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 5 + 3) % 4);
  std::vector<double> row_totals(5, 0), column_totals(7, 0);
  for (size_t i = 0; i < v.size(); ++i) {
    row_totals[i / 7] += v[i];
    column_totals[i % 7] += v[i];
  }
  const Tensor exact = from_vector(v, {5, 7}, kFloat64);
  for (const DType in : {kFloat64, kFloat32, kFloat16, kBFloat16, kFloat8E4M3FN, kFloat8E5M2, kInt8, kUInt8, kInt32,
                         kInt64}) {
    const Tensor x = exact.to(in);
    for (const DType out : {kInt64, kFloat64, kFloat32, kFloat16, kBFloat16, kFloat8E4M3FN, kFloat8E5M2}) {
      CAPTURE(in);
      CAPTURE(out);
      CHECK(values(sum(x, {1}, false, out)) == values(from_vector(row_totals, {5}, kFloat64).to(out)));
      CHECK(values(sum(x, {0}, false, out)) == values(from_vector(column_totals, {7}, kFloat64).to(out)));
    }
  }
}

TEST_CASE("amax and argmax of every dtype give the row's first largest element, bit for bit") {
  // Rows of 0..3 with the largest value first reached at a known column.
  const Tensor exact = tensor({1, 3, 0, 3, 2, 0, 0, 1, 2, 2, 3, 1, 1, 1, 1}, kFloat64).view({3, 5});
  for (const DType in : {kFloat64, kFloat32, kFloat16, kBFloat16, kFloat8E4M3FN, kFloat8E5M2, kInt8, kUInt8, kInt32,
                         kInt64}) {
    CAPTURE(in);
    const Tensor x = exact.to(in);
    const Tensor largest = amax(x, {1});
    CHECK(largest.dtype() == in);
    CHECK(values(largest) == std::vector<double>{3, 2, 3});
    CHECK(ints(argmax(x, 1)) == std::vector<int64_t>{1, 3, 0});
  }
}

TEST_CASE("sum over the rows (column sums) of float32 and bfloat16 at every instruction-set level, bit for bit") {
  // Each column's values widened to double and added row by row, then rounded once: the scalar
  // loop and the AVX-512 kernel (whole and partial 8-column vectors, more rows than one thread's
  // share) give exactly that sum, computed here.
  for (const CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    CAPTURE(cpu_isa_name(isa));
    for (const DType dtype : {kFloat32, kBFloat16})
      for (const int64_t rows : {1, 3, 700})
        for (const int64_t cols : {1, 7, 8, 9, 100}) {
          CAPTURE(dtype);
          CAPTURE(rows);
          CAPTURE(cols);
          std::vector<float> v(static_cast<size_t>(rows * cols));
          for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(1.7 * static_cast<double>(i)) * 1e3);
          const Tensor x = from_vector(v, {rows, cols}).to(dtype);
          const std::vector<double> held = values(x.to(kFloat32));
          const std::vector<double> got = values(sum(x, {0}).to(kFloat32));
          for (int64_t j = 0; j < cols; ++j) {
            double total = 0;
            for (int64_t r = 0; r < rows; ++r) total += held[static_cast<size_t>(r * cols + j)];
            const float want = dtype == kFloat32 ? static_cast<float>(total)
                                                 : bfloat16_to_float(float_to_bfloat16(static_cast<float>(total)));
            CHECK(got[static_cast<size_t>(j)] == static_cast<double>(want));
          }
        }
  }
}
