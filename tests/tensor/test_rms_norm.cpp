// rms_norm (tensor/ops.h): the fused CPU kernel against the composition of ops it stands for, bit
// for bit; both against float64 arithmetic; the gradient autograd records against the analytic
// one; and the errors.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "tensor/all.h"
#include "tensor_test_helpers.h"

using namespace weft;
using weft::testing::random;

namespace {

// Hugging Face's LlamaRMSNorm, op by op: what rms_norm computes where autograd records it.
Tensor composed_rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  const Tensor x32 = x.to(kFloat32);
  const Tensor normed = mul(x32, rsqrt(add(mean(mul(x32, x32), {-1}, /*keepdim=*/true), eps)));
  return mul(weight, normed.to(x.dtype()));
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  return ac.dtype() == bc.dtype() && ac.shape() == bc.shape() &&
         std::memcmp(ac.data_ptr(), bc.data_ptr(), ac.numel() * itemsize(ac.dtype())) == 0;
}

}  // namespace

TEST_CASE("rms_norm without a gradient gives its composition's bits") {
  // The fused kernel rounds where the composition rounds: each square to float32, the mean of the
  // double sum, eps added in float32, the normalized value to x's dtype before the weight
  // multiplies it, the product again. Rows of odd widths (the partial sums' tail), one row, three
  // dims, a zero row (scale 1/√eps), values far apart in magnitude.
  for (const DType dtype : {kFloat32, kBFloat16, kFloat16})
    for (const Shape& shape : {Shape{3, 37}, Shape{1, 8}, Shape{2, 5, 2048}, Shape{4, 1}, Shape{6, 100}}) {
      CAPTURE(dtype);
      CAPTURE(shape);
      Tensor x = mul(random(shape, 5, kFloat32), 3.0);
      x.select(-1, 0).mul_(1000.0);  // one large value a row
      if (shape[0] > 2) x.select(0, 2).zero_();
      x = x.to(dtype);
      const Tensor weight = add(random({shape.back()}, 6, kFloat32), 1.0).to(dtype);
      for (const double eps : {1e-6, 1e-5}) {
        NoGradGuard no_grad;
        const Tensor got = rms_norm(x, weight, eps);
        CHECK(got.dtype() == dtype);
        CHECK(same_bytes(got, composed_rms_norm(x, weight, eps)));
      }
    }
}

TEST_CASE("rms_norm against float64 arithmetic") {
  const Tensor x = random({7, 300}, 11, kFloat32), weight = random({300}, 12, kFloat32);
  const double eps = 1e-5;
  const std::vector<float> xv = x.to_vector<float>(), wv = weight.to_vector<float>();
  const std::vector<float> got = rms_norm(x, weight, eps).to_vector<float>();
  for (int r = 0; r < 7; ++r) {
    double squares = 0;
    for (int c = 0; c < 300; ++c) squares += static_cast<double>(xv[r * 300 + c]) * xv[r * 300 + c];
    const double scale = 1.0 / std::sqrt(squares / 300 + eps);
    for (int c = 0; c < 300; ++c) {
      const double want = wv[c] * (xv[r * 300 + c] * scale);
      CHECK(got[r * 300 + c] == doctest::Approx(want).epsilon(1e-5).scale(1.0));
    }
  }
}

TEST_CASE("rms_norm records its composition for autograd: gradients of x and weight") {
  // y_c = w_c·x_c·s with s = (mean(x²) + eps)^(-1/2): for an upstream g,
  // ∂L/∂x_c = s·w_c·g_c − s³·x_c/n · Σ_i w_i·g_i·x_i and ∂L/∂w_c = Σ_rows g_c·x_c·s.
  const int64_t rows = 3, n = 40;
  const double eps = 1e-6;
  const Tensor x = random({rows, n}, 21, kFloat32).requires_grad_(true);
  const Tensor weight = add(random({n}, 22, kFloat32), 1.0).requires_grad_(true);
  const Tensor g = random({rows, n}, 23, kFloat32);
  const Tensor y = rms_norm(x, weight, eps);
  {
    NoGradGuard no_grad;
    CHECK(same_bytes(y.detach(), rms_norm(x.detach(), weight.detach(), eps)));
  }
  y.backward(g);
  const std::vector<float> xv = x.detach().to_vector<float>(), wv = weight.detach().to_vector<float>(),
                           gv = g.to_vector<float>(), gx = x.grad().to_vector<float>(),
                           gw = weight.grad().to_vector<float>();
  std::vector<double> want_gw(n, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double squares = 0, wgx = 0;
    for (int64_t c = 0; c < n; ++c) {
      squares += static_cast<double>(xv[r * n + c]) * xv[r * n + c];
      wgx += static_cast<double>(wv[c]) * gv[r * n + c] * xv[r * n + c];
    }
    const double s = 1.0 / std::sqrt(squares / n + eps);
    for (int64_t c = 0; c < n; ++c) {
      const double want = s * wv[c] * gv[r * n + c] - s * s * s * xv[r * n + c] / n * wgx;
      CHECK(gx[r * n + c] == doctest::Approx(want).epsilon(1e-4).scale(1.0));
      want_gw[c] += gv[r * n + c] * xv[r * n + c] * s;
    }
  }
  for (int64_t c = 0; c < n; ++c) CHECK(gw[c] == doctest::Approx(want_gw[c]).epsilon(1e-4).scale(1.0));
}

TEST_CASE("rms_norm with a weight of another dtype promotes, as its composition does") {
  const Tensor x = random({2, 16}, 31, kFloat32).to(kBFloat16), weight = random({16}, 32, kFloat32);
  const Tensor got = rms_norm(x, weight, 1e-6);
  CHECK(got.dtype() == kFloat32);
  CHECK(same_bytes(got, composed_rms_norm(x, weight, 1e-6)));
}

TEST_CASE("rms_norm refuses what it cannot normalize, naming what it expected") {
  const Tensor x = random({2, 8}, 41, kFloat32);
  CHECK_THROWS_WITH(rms_norm(x, random({7}, 42, kFloat32)),
                    doctest::Contains("expected weight of shape (8,) (the input's last dim), got (7,)"));
  CHECK_THROWS_WITH(rms_norm(x, random({2, 8}, 42, kFloat32)), doctest::Contains("expected weight of shape (8,)"));
  CHECK_THROWS_WITH(rms_norm(ones({2, 8}, kInt64), ones({8})), doctest::Contains("expected a floating input"));
  CHECK_THROWS_WITH(rms_norm(x, ones({8}, kInt64)), doctest::Contains("expected a floating weight"));
  CHECK_THROWS_WITH(rms_norm(Tensor(), ones({8})), doctest::Contains("rms_norm"));
}
