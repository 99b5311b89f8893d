// Autocast: the per-op policy (low precision / float32 / promote), the dtypes and values it
// produces, gradients in each leaf's dtype, no autocast inside backward, and the guard's scoping
// (nesting, exceptions, threads, device types).
#include <doctest/doctest.h>

#include <thread>

#include "precision/all.h"

using namespace weft;
using precision::AutocastGuard;

namespace {

// Values rounded through bfloat16 and back, as float32.
Tensor bf16_rounded(const Tensor& t) { return t.to(kBFloat16).to(kFloat32); }

}  // namespace

TEST_CASE("the policy table") {
  CHECK(cast_policy(AutocastOp::Matmul) == CastPolicy::LowPrecision);
  CHECK(cast_policy(AutocastOp::Linear) == CastPolicy::LowPrecision);
  for (AutocastOp op : {AutocastOp::Softmax, AutocastOp::LogSoftmax, AutocastOp::LogSumExp, AutocastOp::Exp,
                        AutocastOp::Log, AutocastOp::Pow, AutocastOp::Sum, AutocastOp::Mean, AutocastOp::Norm,
                        AutocastOp::LayerNorm, AutocastOp::CrossEntropy, AutocastOp::NllLoss, AutocastOp::MseLoss})
    CHECK(cast_policy(op) == CastPolicy::Float32);
  CHECK(cast_policy(AutocastOp::Elementwise) == CastPolicy::Promote);
  CHECK(cast_policy(AutocastOp::Cat) == CastPolicy::Promote);
}

TEST_CASE("linear under bf16 autocast is the exact x·wᵀ + b of bf16-rounded inputs, rounded once to bf16") {
  Generator gen(7);
  const Tensor x = randn({3, 5}, {}, &gen);
  const Tensor w = randn({4, 5}, {}, &gen);
  const Tensor b = randn({4}, {}, &gen);
  const Tensor expected_product = matmul(bf16_rounded(x), bf16_rounded(w).t()).to(kBFloat16);
  // Like PyTorch's addmm, the bias joins the float32 accumulation and the sum is rounded once
  // (float64 here stands in for the exact sum; float32 agrees with it after the bf16 rounding).
  const Tensor expected = add(matmul(bf16_rounded(x).to(kFloat64), bf16_rounded(w).to(kFloat64).t()),
                              bf16_rounded(b).to(kFloat64))
                              .to(kBFloat16);
  AutocastGuard guard(DeviceType::CPU, kBFloat16);
  const Tensor y = linear(x, w, b);
  CHECK(y.dtype() == kBFloat16);
  CHECK(equal(y, expected));
  const Tensor p = matmul(x, w.t());
  CHECK(p.dtype() == kBFloat16);
  CHECK(equal(p, expected_product));
  // float64 is never narrowed.
  CHECK(matmul(x.to(kFloat64), w.t().to(kFloat64)).dtype() == kFloat64);
}

TEST_CASE("float16 autocast runs matmul in float16") {
  const Tensor x = tensor({1.0009765625, 2, 3, 4}).view({2, 2});  // 1 + 2^-10 is exact in fp16, not in bf16
  AutocastGuard guard(DeviceType::CPU, kFloat16);
  const Tensor y = matmul(x, eye(2));
  CHECK(y.dtype() == kFloat16);
  CHECK(y.to_vector<double>() == std::vector<double>{1.0009765625, 2, 3, 4});
}

TEST_CASE("float32 ops widen narrow inputs and leave float64 and integers alone") {
  const Tensor h = tensor({0.5, 1.0, 1.5, 2.0}).view({2, 2}).to(kBFloat16);
  const Tensor target = tensor({1, 0}, kInt64);
  AutocastGuard guard(DeviceType::CPU, kBFloat16);
  CHECK(softmax(h, 1).dtype() == kFloat32);
  CHECK(log_softmax(h, 1).dtype() == kFloat32);
  CHECK(logsumexp(h, {1}).dtype() == kFloat32);
  CHECK(exp(h).dtype() == kFloat32);
  CHECK(log(h).dtype() == kFloat32);
  CHECK(pow(h, 2.0).dtype() == kFloat32);
  CHECK(pow(h, h).dtype() == kFloat32);
  CHECK(sum(h).dtype() == kFloat32);
  CHECK(mean(h).dtype() == kFloat32);
  CHECK(norm(h).dtype() == kFloat32);
  CHECK(layer_norm(h, {2}).dtype() == kFloat32);
  CHECK(cross_entropy(h, target).dtype() == kFloat32);
  CHECK(nll_loss(h, target).dtype() == kFloat32);
  CHECK(mse_loss(h, h).dtype() == kFloat32);
  // The values are those of the float32 op on the (exactly widened) inputs.
  DType widened_dtype;
  Tensor widened_softmax;
  {
    AutocastGuard off(DeviceType::CPU, kBFloat16, false);
    widened_softmax = softmax(h.to(kFloat32), 1);
    widened_dtype = widened_softmax.dtype();
  }
  CHECK(widened_dtype == kFloat32);
  CHECK(equal(softmax(h, 1), widened_softmax));
  // float64 and integer inputs are untouched.
  CHECK(softmax(h.to(kFloat64), 1).dtype() == kFloat64);
  CHECK(sum(tensor({1, 2}, kInt32)).dtype() == kInt64);
  // Elementwise ops keep their promotion: bf16 with f32 meets at f32, bf16 with bf16 stays bf16.
  CHECK(add(h, ones({2, 2})).dtype() == kFloat32);
  CHECK(mul(h, h).dtype() == kBFloat16);
  CHECK(cat({h, ones({2, 2})}).dtype() == kFloat32);
}

TEST_CASE("gradients come back in each leaf's dtype") {
  const Tensor x = tensor({0.5, -1.25, 2.0, 0.75, 1.5, -0.5}).view({2, 3}).requires_grad_();
  const Tensor w = tensor({1.0, 2.0, -1.0, 0.5, 0.25, 3.0}).view({2, 3}).requires_grad_();
  const Tensor b = tensor({0.1, -0.2}).requires_grad_();
  Tensor loss;
  {
    AutocastGuard guard(DeviceType::CPU, kBFloat16);
    const Tensor y = linear(x, w, b);
    CHECK(y.dtype() == kBFloat16);
    loss = sum(y);
    CHECK(loss.dtype() == kFloat32);
  }
  loss.backward();
  REQUIRE(w.grad().defined());
  CHECK(w.grad().dtype() == kFloat32);
  CHECK(x.grad().dtype() == kFloat32);
  CHECK(b.grad().dtype() == kFloat32);
  // d sum(x·wᵀ + b)/dw[o, i] = Σ_b x[b, i] (here exact in bf16); d/db = batch size; d/dx[b, i] = Σ_o w[o, i].
  CHECK(w.grad().to_vector<double>() == std::vector<double>{1.25, 0.25, 1.5, 1.25, 0.25, 1.5});
  CHECK(b.grad().to_vector<double>() == std::vector<double>{2.0, 2.0});
  CHECK(x.grad().to_vector<double>() == std::vector<double>{1.5, 2.25, 2.0, 1.5, 2.25, 2.0});

  // A bf16 leaf through a float32 op gets a bf16 gradient.
  const Tensor h = tensor({1.0, 2.0, 3.0}).to(kBFloat16).requires_grad_();
  {
    AutocastGuard guard(DeviceType::CPU, kBFloat16);
    sum(exp(h)).backward();
  }
  CHECK(h.grad().dtype() == kBFloat16);
  CHECK(equal(h.grad(), exp(tensor({1.0, 2.0, 3.0})).to(kBFloat16)));
}

TEST_CASE("linear's float32 weight and bias gradients under bf16 autocast are float32 sums, not rounded to bf16") {
  // Note [Autocast linear with float32 parameters]: on the CPU the gradients of float32 parameters
  // come from the GEMM's float32 sums of the bfloat16 products gᵀ·x and from a float32 sum of g,
  // with no bfloat16 rounding between (PyTorch rounds them to bfloat16, then widens).
  Generator gen(11);
  const Tensor x = randn({64, 96}, {}, &gen).requires_grad_();
  const Tensor w = randn({40, 96}, {}, &gen).requires_grad_();
  const Tensor b = randn({40}, {}, &gen).requires_grad_();
  const Tensor g = randn({64, 40}, {}, &gen);
  {
    AutocastGuard guard(DeviceType::CPU, kBFloat16);
    const Tensor y = linear(x, w, b);
    CHECK(y.dtype() == kBFloat16);
    y.backward(g.to(kBFloat16));
  }
  const Tensor g64 = bf16_rounded(g).to(kFloat64), x64 = bf16_rounded(x.detach()).to(kFloat64);
  const Tensor dw_exact = matmul(g64.t(), x64), db_exact = sum(g64, {0});
  REQUIRE(w.grad().dtype() == kFloat32);
  REQUIRE(b.grad().dtype() == kFloat32);
  // float32 sums of 64 exact products: within a few float32 ulps of the exact sums, far inside
  // bfloat16's rounding (2^-9 relative), and most of them not bfloat16 values at all.
  const double scale = amax(abs(dw_exact)).item<double>();
  CHECK(amax(abs(sub(w.grad().to(kFloat64), dw_exact))).item<double>() <= 1e-5 * scale);
  CHECK(amax(abs(sub(b.grad().to(kFloat64), db_exact))).item<double>() <= 1e-5 * amax(abs(db_exact)).item<double>());
  CHECK(sum(ne(w.grad(), bf16_rounded(w.grad()))).item<double>() > 0.9 * w.numel());
  // x's gradient stays the bfloat16 product g·w, widened to x's dtype: bfloat16 values, each the
  // exact product rounded to bfloat16. The kernel's float32 sums run in its own order (the AVX-512
  // BF16 one adds the products in pairs), so a sum that lands within float32 rounding of a
  // bfloat16 midpoint may round one bfloat16 step the other way: a few elements, one step.
  CHECK(x.grad().dtype() == kFloat32);
  CHECK(equal(x.grad(), bf16_rounded(x.grad())));
  const Tensor dx_rounded = bf16_rounded(matmul(g64, bf16_rounded(w.detach()).to(kFloat64)).to(kFloat32));
  CHECK(sum(ne(x.grad(), dx_rounded)).item<double>() <= 0.01 * x.numel());
  const double bf16_step = 1.0 / 128;  // one bfloat16 step is at most 2^-7 of the value
  CHECK(amax(div(abs(sub(x.grad(), dx_rounded)), abs(dx_rounded))).item<double>() <= bf16_step);
}

TEST_CASE("backward rules run without autocast") {
  const Tensor x = tensor({1.0, 2.0}).requires_grad_();
  bool enabled_in_rule = true;
  AutocastGuard guard(DeviceType::CPU, kBFloat16);
  Tensor probe = x.detach().clone();
  autograd::record("Probe", probe, {x}, [&enabled_in_rule](const Tensor& g) {
    enabled_in_rule = autocast_state(DeviceType::CPU).enabled;
    return std::vector<Tensor>{g};
  });
  probe.backward(ones({2}));
  CHECK_FALSE(enabled_in_rule);
  CHECK(precision::is_autocast_enabled(DeviceType::CPU));  // back on after backward
}

TEST_CASE("outside the guard nothing changes") {
  const Tensor x = ones({2, 2});
  { AutocastGuard guard(DeviceType::CPU, kBFloat16); }
  CHECK_FALSE(precision::is_autocast_enabled(DeviceType::CPU));
  CHECK(matmul(x, x).dtype() == kFloat32);
  CHECK(softmax(x.to(kBFloat16), 0).dtype() == kBFloat16);
}

TEST_CASE("guards nest, restore on exceptions, and default to PyTorch's dtypes") {
  CHECK(precision::autocast_dtype(DeviceType::CPU) == kBFloat16);
  CHECK(precision::autocast_dtype(DeviceType::CUDA) == kFloat16);
  const Tensor x = ones({2, 2});
  AutocastGuard outer(DeviceType::CPU, kBFloat16);
  {
    AutocastGuard inner(DeviceType::CPU, kFloat16);
    CHECK(inner.dtype() == kFloat16);
    CHECK(matmul(x, x).dtype() == kFloat16);
    {
      AutocastGuard off(DeviceType::CPU, kFloat16, false);
      CHECK_FALSE(precision::is_autocast_enabled(DeviceType::CPU));
      CHECK(matmul(x, x).dtype() == kFloat32);
    }
    CHECK(matmul(x, x).dtype() == kFloat16);
  }
  try {
    AutocastGuard inner(DeviceType::CPU, kFloat16);
    throw Error("boom");
  } catch (const Error&) {
  }
  CHECK(precision::is_autocast_enabled(DeviceType::CPU));
  CHECK(precision::autocast_dtype(DeviceType::CPU) == kBFloat16);
  CHECK(matmul(x, x).dtype() == kBFloat16);
}

TEST_CASE("a cuda guard leaves cpu ops alone, and only bf16/f16 are accepted") {
  const Tensor x = ones({2, 2});
  {
    AutocastGuard guard(DeviceType::CUDA, kBFloat16);
    CHECK(precision::is_autocast_enabled(DeviceType::CUDA));
    CHECK_FALSE(precision::is_autocast_enabled(DeviceType::CPU));
    CHECK(matmul(x, x).dtype() == kFloat32);
  }
  CHECK_THROWS_WITH_AS(AutocastGuard(DeviceType::CPU, kFloat32),
                       "[autocast] expected bfloat16 or float16 as the low-precision dtype, got float32", Error);
  CHECK_FALSE(precision::is_autocast_enabled(DeviceType::CPU));
}

TEST_CASE("another thread is unaffected") {
  AutocastGuard guard(DeviceType::CPU, kBFloat16);
  bool other_enabled = true;
  DType other_dtype = kBFloat16;
  std::thread t([&] {
    other_enabled = precision::is_autocast_enabled(DeviceType::CPU);
    other_dtype = matmul(ones({2, 2}), ones({2, 2})).dtype();
  });
  t.join();
  CHECK_FALSE(other_enabled);
  CHECK(other_dtype == kFloat32);
  CHECK(matmul(ones({2, 2}), ones({2, 2})).dtype() == kBFloat16);
}
