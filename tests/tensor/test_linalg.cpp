// matmul (all torch.matmul shape cases, broadcast batch dims, transposed and doubly strided
// operands, integer and mixed dtypes) and linear, against a naive triple loop in double.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "tensor_test_helpers.h"
#include "tensor/all.h"

using namespace weft;
using testing::check_close;
using testing::random;

namespace {

// The naive product of (B, M, K) and (B, K, N) row-major arrays.
std::vector<double> naive_bmm(const std::vector<double>& a, const std::vector<double>& b, int64_t batch, int64_t m,
                              int64_t k, int64_t n) {
  std::vector<double> c(static_cast<size_t>(batch * m * n), 0.0);
  for (int64_t s = 0; s < batch; ++s)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += a[static_cast<size_t>((s * m + i) * k + p)] * b[static_cast<size_t>((s * k + p) * n + j)];
        c[static_cast<size_t>((s * m + i) * n + j)] = acc;
      }
  return c;
}

}  // namespace

TEST_CASE("matmul: 1-D and 2-D shape cases") {
  const Tensor v = tensor({1, 2, 3}, kFloat64);
  const Tensor w = tensor({4, -5, 6}, kFloat64);
  const Tensor m = tensor({1, 2, 3, 4, 5, 6}, kFloat64).view({2, 3});  // [[1,2,3],[4,5,6]]
  SUBCASE("vector · vector is a 0-d dot product") {
    const Tensor d = matmul(v, w);
    CHECK(d.dim() == 0);
    CHECK(d.item() == 4 - 10 + 18);
  }
  SUBCASE("matrix · vector") {
    const Tensor r = matmul(m, v);
    CHECK(r.shape() == Shape{2});
    CHECK(r.to_vector<double>() == std::vector<double>{14, 32});
  }
  SUBCASE("vector · matrix") {
    const Tensor r = matmul(tensor({1, -1}, kFloat64), m);
    CHECK(r.shape() == Shape{3});
    CHECK(r.to_vector<double>() == std::vector<double>{-3, -3, -3});
  }
  SUBCASE("matrix · matrix") {
    const Tensor r = matmul(m, m.t());
    CHECK(r.shape() == Shape{2, 2});
    CHECK(r.to_vector<double>() == std::vector<double>{14, 32, 32, 77});
    CHECK(m.matmul(m.t()).to_vector<double>() == r.to_vector<double>());
  }
  SUBCASE("batched · vector and vector · batched") {
    const Tensor b = stack({m, mul(m, 2.0)});  // (2, 2, 3)
    CHECK(matmul(b, v).shape() == Shape{2, 2});
    CHECK(matmul(b, v).to_vector<double>() == std::vector<double>{14, 32, 28, 64});
    const Tensor bt = b.transpose(1, 2);  // (2, 3, 2)
    CHECK(matmul(v, bt).shape() == Shape{2, 2});
    CHECK(matmul(v, bt).to_vector<double>() == std::vector<double>{14, 32, 28, 64});
  }
}

TEST_CASE("matmul matches the naive loop on random, transposed and strided operands") {
  const int64_t m = 7, k = 5, n = 6;
  const Tensor a = random({m, k}, 1), b = random({k, n}, 2);
  const auto want = naive_bmm(a.to_vector<double>(), b.to_vector<double>(), 1, m, k, n);
  check_close(matmul(a, b).to_vector<double>(), want, 1e-12);
  // The same operands held transposed: (K, M)ᵀ and (N, K)ᵀ views, not contiguous.
  const Tensor at = a.t().contiguous().t(), bt = b.t().contiguous().t();
  CHECK_FALSE(at.is_contiguous());
  CHECK_FALSE(bt.is_contiguous());
  check_close(matmul(at, bt).to_vector<double>(), want, 1e-12);
  check_close(matmul(at, b).to_vector<double>(), want, 1e-12);
  // Strided in both dims (every other row and column of a bigger matrix).
  const Tensor big = random({2 * m, 2 * k}, 3);
  const Tensor as = big.slice(0, 0, 2 * m, 2).slice(1, 1, 2 * k, 2);
  CHECK(as.shape() == Shape{m, k});
  check_close(matmul(as, b).to_vector<double>(),
              naive_bmm(as.to_vector<double>(), b.to_vector<double>(), 1, m, k, n), 1e-12);
  // float32 agrees to float precision.
  check_close(matmul(a.to(kFloat32), b.to(kFloat32)).to_vector<double>(), want, 1e-5);
}

TEST_CASE("matmul broadcasts batch dims") {
  const Tensor a = random({2, 1, 3, 4}, 4);  // batch (2, 1)
  const Tensor b = random({5, 4, 2}, 5);     // batch (5)
  const Tensor c = matmul(a, b);
  CHECK(c.shape() == Shape{2, 5, 3, 2});
  // Reference: expand both to batch (2, 5) and multiply matrix by matrix.
  const auto av = a.expand({2, 5, 3, 4}).contiguous().to_vector<double>();
  const auto bv = b.expand({2, 5, 4, 2}).contiguous().to_vector<double>();
  check_close(c.to_vector<double>(), naive_bmm(av, bv, 10, 3, 4, 2), 1e-12);
  // A 2-D operand broadcasts against a batch.
  const Tensor x = random({3, 2, 4}, 6), w = random({4, 3}, 7);
  const auto xw = matmul(x, w);
  CHECK(xw.shape() == Shape{3, 2, 3});
  const auto wv = w.expand({3, 4, 3}).contiguous().to_vector<double>();
  check_close(xw.to_vector<double>(), naive_bmm(x.to_vector<double>(), wv, 3, 2, 4, 3), 1e-12);
  // A batched operand whose batch is itself a transposed view.
  const Tensor xs = random({2, 4, 3}, 8).transpose(0, 2).transpose(1, 2);  // (3, 2, 4), odd strides
  check_close(matmul(xs, w).to_vector<double>(),
              naive_bmm(xs.contiguous().to_vector<double>(), wv, 3, 2, 4, 3), 1e-12);
}

TEST_CASE("matmul of integers, mixed dtypes, and empty inner dims") {
  const Tensor a = tensor({1, 2, 3, 4}, kInt64).view({2, 2});
  const Tensor r = matmul(a, a);
  CHECK(r.dtype() == kInt64);
  CHECK(r.to_vector<int64_t>() == std::vector<int64_t>{7, 10, 15, 22});
  CHECK(matmul(a.t(), a).to_vector<int64_t>() == std::vector<int64_t>{10, 14, 14, 20});
  const Tensor mixed = matmul(a, tensor({0.5, 0.5}).view({2, 1}));
  CHECK(mixed.dtype() == kFloat32);
  CHECK(mixed.to_vector<double>() == std::vector<double>{1.5, 3.5});
  const Tensor e = matmul(zeros({2, 0}), zeros({0, 3}));
  CHECK(e.shape() == Shape{2, 3});
  CHECK(e.to_vector<double>() == std::vector<double>(6, 0.0));
}

TEST_CASE("linear is x · wᵀ + b") {
  const Tensor x = tensor({1, 2, 3, 4, 5, 6}, kFloat64).view({2, 3});
  const Tensor w = tensor({1, 0, -1, 2, 2, 2}, kFloat64).view({2, 3});
  const Tensor b = tensor({10, 20}, kFloat64);
  CHECK(linear(x, w).to_vector<double>() == std::vector<double>{-2, 12, -2, 30});
  CHECK(linear(x, w, b).to_vector<double>() == std::vector<double>{8, 32, 8, 50});
  CHECK(linear(x.view({1, 2, 3}), w, b).shape() == Shape{1, 2, 2});
  CHECK_THROWS_WITH_AS(linear(x, w.t()),
                       "[linear] input features differ: input (2, 3) has 3 features, weight (3, 2) expects 2", Error);
  CHECK_THROWS_WITH_AS(linear(x, w, tensor({1, 2, 3})), "[linear] expected a bias of shape (2,), got (3,)", Error);
}

TEST_CASE("linear: 1-D input, an empty feature dim, and gradients only for the inputs that need them") {
  const Tensor w = tensor({1, 0, -1, 2, 2, 2}, kFloat64).view({2, 3});
  CHECK(linear(tensor({1, 2, 3}, kFloat64), w).to_vector<double>() == std::vector<double>{-2, 12});
  CHECK(linear(zeros({4, 0}, kFloat64), zeros({2, 0}, kFloat64), tensor({1, 2}, kFloat64)).to_vector<double>() ==
        std::vector<double>{1, 2, 1, 2, 1, 2, 1, 2});

  // A first layer: the input needs no gradient, weight and bias do. dL/dw = Σ_rows x, dL/db = rows.
  const Tensor x = tensor({1, 2, 3, 4, 5, 6}, kFloat64).view({2, 3});
  Tensor weight = w.clone().requires_grad_(true), bias = tensor({10, 20}, kFloat64).requires_grad_(true);
  linear(x, weight, bias).sum().backward();
  CHECK(weight.grad().to_vector<double>() == std::vector<double>{5, 7, 9, 5, 7, 9});
  CHECK(bias.grad().to_vector<double>() == std::vector<double>{2, 2});

  // A frozen layer: only the input gets a gradient, dL/dx = Σ_out w.
  Tensor input = x.clone().requires_grad_(true);
  const Tensor frozen = w.clone();
  linear(input, frozen).sum().backward();
  CHECK(input.grad().to_vector<double>() == std::vector<double>{3, 2, 1, 3, 2, 1});
  CHECK_FALSE(frozen.grad().defined());
}
