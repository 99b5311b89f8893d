// The autograd engine's semantics (tensor/autograd.cpp): how backward() is called, how
// gradients accumulate, grad-mode guards, detach, graphs with shared and unused parts, the
// dtype and shape adaptation of Note [Gradient shape and dtype], node names, and deep graphs.
#include <doctest/doctest.h>

#include <pthread.h>

#include <functional>

#include "gradcheck.h"
#include "tensor_test_helpers.h"

using namespace weft;
using testing::values;
using weft::autograd::EnableGradGuard;
using Inputs = std::vector<Tensor>;

namespace {

Tensor leaf(std::initializer_list<double> v) { return tensor(v, kFloat64).requires_grad_(); }

// Runs `body` on a thread with a small stack (256 KiB), so that anything that recurses once per
// graph node overflows there long before it would on the main thread.
void run_on_small_stack(std::function<void()> body) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t thread;
  auto trampoline = [](void* p) -> void* {
    (*static_cast<std::function<void()>*>(p))();
    return nullptr;
  };
  REQUIRE(pthread_create(&thread, &attr, trampoline, &body) == 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

// Identity whose backward counts its runs and returns no gradient for its input.
Tensor gradient_stopper(const Tensor& x, int* runs) {
  Tensor out = x.detach().clone();
  autograd::record("GradientStopper", out, {x}, [runs](const Tensor&) {
    ++*runs;
    return std::vector<Tensor>{Tensor()};
  });
  return out;
}

// Identity whose backward counts its runs.
Tensor counted_identity(const Tensor& x, int* runs) {
  Tensor out = x.detach().clone();
  autograd::record("CountedIdentity", out, {x}, [runs](const Tensor& g) {
    ++*runs;
    return std::vector<Tensor>{g};
  });
  return out;
}

}  // namespace

TEST_CASE("autograd: backward() on a scalar and on a one-element tensor") {
  Tensor x = leaf({1, 2, 3});
  Tensor y = mul(x, x).sum();
  CHECK(y.dim() == 0);
  y.backward();
  CHECK(values(x.grad()) == std::vector<double>{2, 4, 6});

  Tensor z = leaf({3});
  mul(z, 5.0).view({1, 1}).backward();  // one element, two dims: the seed is implicit too
  CHECK(values(z.grad()) == std::vector<double>{5});
}

TEST_CASE("autograd: backward(gradient) on a non-scalar") {
  Tensor x = leaf({1, 2, 3, 4});
  Tensor y = mul(x.view({2, 2}), 3.0);
  y.backward(tensor({1, 10, 100, 1000}, kFloat64).view({2, 2}));
  CHECK(values(x.grad()) == std::vector<double>{3, 30, 300, 3000});
}

TEST_CASE("autograd: backward() on a non-scalar without a gradient is an error") {
  Tensor x = leaf({1, 2});
  Tensor y = mul(x, 2.0);
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("grad can be implicitly created only for one-element outputs"),
                       Error);
  CHECK_THROWS_WITH_AS(y.backward(ones({3}, kFloat64)), doctest::Contains("expected a gradient of shape (2,)"), Error);
  CHECK_FALSE(x.grad().defined());
  CHECK_THROWS_WITH_AS(ones({2}).sum().backward(), doctest::Contains("does not require grad"), Error);
}

TEST_CASE("autograd: a second backward without retain_graph is a clear error") {
  Tensor x = leaf({1, 2});
  Tensor y = mul(x, x).sum();
  y.backward();
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("backward through the graph a second time"), Error);
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("retain_graph=true"), Error);
  CHECK(values(x.grad()) == std::vector<double>{2, 4});  // the failed call added nothing
}

TEST_CASE("autograd: retain_graph=true allows another backward, which accumulates") {
  Tensor x = leaf({1, 2});
  Tensor y = mul(x, x).sum();
  y.backward(Tensor(), /*retain_graph=*/true);
  CHECK(values(x.grad()) == std::vector<double>{2, 4});
  y.backward(Tensor(), /*retain_graph=*/true);
  CHECK(values(x.grad()) == std::vector<double>{4, 8});  // 2× the gradient
  y.backward();  // the last one may free the graph
  CHECK(values(x.grad()) == std::vector<double>{6, 12});
  CHECK_THROWS_AS(y.backward(), Error);
}

TEST_CASE("autograd: gradients accumulate across backward calls, in the same .grad tensor") {
  Tensor x = leaf({1, 2});
  mul(x, 3.0).sum().backward();
  const Tensor first = x.grad();
  mul(x, x).sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{5, 7});
  CHECK(x.grad().is_same(first));  // accumulated in place: optimizers may hold the handle
  CHECK_FALSE(x.grad().requires_grad());
}

TEST_CASE("autograd: set_grad(Tensor()) clears the gradient, and the next backward starts fresh") {
  Tensor x = leaf({1, 2});
  mul(x, 3.0).sum().backward();
  x.set_grad(Tensor());
  CHECK_FALSE(x.grad().defined());
  mul(x, 4.0).sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{4, 4});
  x.set_grad(full({2}, 10.0, kFloat64));
  mul(x, 4.0).sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{14, 14});
  CHECK_THROWS_WITH_AS(x.set_grad(ones({3}, kFloat64)), doctest::Contains("[set_grad]"), Error);
}

TEST_CASE("autograd: non-leaf tensors get no .grad") {
  Tensor x = leaf({1, 2});
  Tensor y = mul(x, 2.0);
  y.sum().backward();
  CHECK(x.is_leaf());
  CHECK_FALSE(y.is_leaf());
  CHECK_FALSE(y.grad().defined());
}

TEST_CASE("autograd: detach() shares data and stops gradients") {
  Tensor x = leaf({1, 2, 3});
  Tensor d = x.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  CHECK(d.data_ptr() == x.data_ptr());
  // Only the attached factor is differentiated: d(x·sg(x))/dx = x, not 2x.
  mul(x, d).sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{1, 2, 3});
  CHECK_FALSE(d.grad().defined());
}

TEST_CASE("autograd: NoGradGuard stops recording; a nested EnableGradGuard resumes it") {
  Tensor x = leaf({1, 2});
  CHECK(autograd::grad_mode_enabled());
  {
    NoGradGuard no_grad;
    CHECK_FALSE(autograd::grad_mode_enabled());
    Tensor y = mul(x, 2.0);
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
    {
      EnableGradGuard enable;
      CHECK(autograd::grad_mode_enabled());
      Tensor z = mul(x, 3.0);
      CHECK(z.requires_grad());
      z.sum().backward();
      CHECK(values(x.grad()) == std::vector<double>{3, 3});
      {
        NoGradGuard inner;
        CHECK_FALSE(mul(x, 2.0).requires_grad());
      }
      CHECK(autograd::grad_mode_enabled());
    }
    CHECK_FALSE(autograd::grad_mode_enabled());
  }
  CHECK(autograd::grad_mode_enabled());
  // Guards restore the mode when an exception unwinds them.
  try {
    NoGradGuard no_grad;
    throw Error("unwind");
  } catch (const Error&) {
  }
  CHECK(autograd::grad_mode_enabled());
}

TEST_CASE("autograd: requires_grad_ only on floating tensors, and only leaves may drop it") {
  CHECK_THROWS_WITH_AS(ones({2}, kInt64).requires_grad_(), doctest::Contains("only floating tensors"), Error);
  CHECK_THROWS_WITH_AS(ones({2}, kBool).requires_grad_(), doctest::Contains("only floating tensors"), Error);
  CHECK_NOTHROW(ones({2}, kInt64).requires_grad_(false));
  for (DType d : {kFloat64, kFloat32, kFloat16, kBFloat16}) CHECK(ones({2}, d).requires_grad_().requires_grad());
  CHECK(ones({2}, TensorOptions(kFloat32).requires_grad()).requires_grad());

  Tensor x = leaf({1});
  Tensor y = mul(x, 2.0);
  CHECK_THROWS_WITH_AS(y.requires_grad_(false), doctest::Contains("use detach()"), Error);
  x.requires_grad_(false);
  CHECK_FALSE(mul(x, 2.0).requires_grad());
}

TEST_CASE("autograd: a tensor used in several places (a diamond) sums its gradients") {
  Tensor x = leaf({0.5, -1.0});
  Tensor a = mul(x, 2.0);
  Tensor d = add(add(mul(a, a), exp(a)), a);  // a feeds three branches that meet again
  d.sum().backward();
  const auto xv = values(x);
  for (size_t i = 0; i < xv.size(); ++i) {
    const double av = 2 * xv[i];
    CHECK(x.grad().to_vector<double>()[i] == doctest::Approx((2 * av + std::exp(av) + 1) * 2).epsilon(1e-14));
  }
  testing::gradcheck([](const Inputs& in) {
    const Tensor a = mul(in[0], in[1]);
    return sub(mul(a, exp(a)), div(a, add(in[1], 3.0)));
  }, {testing::arg({2, 3}, 1), testing::arg({3}, 2)});
}

TEST_CASE("autograd: a float32 leaf gets a float32 gradient from a float64 computation") {
  Tensor x = tensor({1, 2, 3}, kFloat32).requires_grad_();
  Tensor w = tensor({0.1, 0.2, 0.3}, kFloat64).requires_grad_();
  Tensor y = mul(x, w);
  CHECK(y.dtype() == kFloat64);
  y.sum().backward();
  CHECK(x.grad().dtype() == kFloat32);
  CHECK(x.grad().to_vector<float>() == std::vector<float>{0.1f, 0.2f, 0.3f});
  CHECK(w.grad().dtype() == kFloat64);
  CHECK(values(w.grad()) == std::vector<double>{1, 2, 3});

  // With broadcasting as well: the engine sums over the broadcast dims, then casts.
  Tensor b = tensor({1, 2}, kFloat32).view({2, 1}).requires_grad_();
  Tensor m = testing::uniform({2, 3}, -1, 1, 3).requires_grad_();
  matmul(add(b, m), testing::uniform({3, 2}, -1, 1, 4)).sum().backward();
  CHECK(b.grad().dtype() == kFloat32);
  CHECK(b.grad().shape() == Shape{2, 1});
  CHECK(allclose(b.grad().to(kFloat64), sum(m.grad(), {1}, true), 1e-6));
}

TEST_CASE("autograd: grad_fn names print") {
  Tensor x = leaf({1, 2, 3, 4});
  CHECK(x.grad_fn() == nullptr);
  CHECK(mul(x, x).grad_fn()->name() == "MulBackward");
  CHECK(add(x, 1.0).grad_fn()->name() == "AddBackward");
  CHECK(x.sum().grad_fn()->name() == "SumBackward");
  CHECK(exp(x).grad_fn()->name() == "ExpBackward");
  CHECK(x.view({2, 2}).grad_fn()->name() == "ViewBackward");
  CHECK(x.view({2, 2}).t().grad_fn()->name() == "TransposeBackward");
  CHECK(matmul(x.view({2, 2}), x.view({2, 2})).grad_fn()->name() == "MatmulBackward");
  CHECK(linear(x.view({2, 2}), x.view({2, 2})).grad_fn()->name() == "LinearBackward");
  CHECK(x.clone().grad_fn()->name() == "CloneBackward");
  CHECK(x.to(kFloat32).grad_fn()->name() == "ToBackward");
  CHECK(softmax(x, 0).grad_fn()->name() == "SoftmaxBackward");
  CHECK(mul(x, 2.0).to_string().find("grad_fn=<MulBackward>") != std::string::npos);
  CHECK(x.to_string().find("requires_grad=True") != std::string::npos);
}

TEST_CASE("autograd: a 10k-op chain runs backward and frees its graph on a small stack") {
  // The engine and the graph's destruction are iterative: neither uses a stack frame per node,
  // so the chain fits in a 256 KiB thread stack.
  double grad = 0.0;
  bool threw = false;
  run_on_small_stack([&] {
    try {
      Tensor x = leaf({1.0});
      {
        Tensor y = x;
        for (int i = 0; i < 10000; ++i) y = i % 2 ? mul(y, 1.0001) : add(y, 0.5);
        y.sum().backward();
      }  // the graph dies here
      grad = x.grad().item();
    } catch (...) {
      threw = true;
    }
  });
  CHECK_FALSE(threw);
  CHECK(grad == doctest::Approx(std::pow(1.0001, 5000)).epsilon(1e-12));
}

TEST_CASE("autograd: leaves and branches that the root does not reach get no gradient") {
  Tensor x = leaf({1, 2});
  Tensor unused = leaf({3, 4});
  int unused_runs = 0;
  Tensor dead_branch = counted_identity(mul(x, unused), &unused_runs);  // never reaches the root
  mul(x, 2.0).sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{2, 2});
  CHECK_FALSE(unused.grad().defined());
  CHECK(unused_runs == 0);
  CHECK(dead_branch.requires_grad());
}

TEST_CASE("autograd: a node that gets no gradient does not run, and does not hold back shared nodes") {
  // x → a = 2x → { stopper(a) → behind_stopper, 3a } → sum. The stopper returns no gradient
  // for a, so a's node must run once, with 3 only; a leaf reachable only through the stopper
  // gets nothing, and the node behind it never runs.
  Tensor x = leaf({1, 2});
  Tensor only_behind = leaf({5, 6});
  int stopper_runs = 0, behind_runs = 0;
  Tensor a = mul(x, 2.0);
  Tensor behind = counted_identity(add(a, only_behind), &behind_runs);
  Tensor stopped = gradient_stopper(behind, &stopper_runs);
  add(stopped, mul(a, 3.0)).sum().backward();
  CHECK(stopper_runs == 1);
  CHECK(behind_runs == 0);
  CHECK(values(x.grad()) == std::vector<double>{6, 6});
  CHECK_FALSE(only_behind.grad().defined());
}

TEST_CASE("autograd: gradient shapes follow broadcasting back to each input") {
  Tensor a = testing::uniform({3, 1}, -1, 1, 5).requires_grad_();
  Tensor b = testing::uniform({4}, -1, 1, 6).requires_grad_();
  Tensor c = testing::uniform({}, -1, 1, 7).requires_grad_();
  mul(add(a, b), c).sum().backward();
  CHECK(a.grad().shape() == Shape{3, 1});
  CHECK(b.grad().shape() == Shape{4});
  CHECK(c.grad().shape() == Shape{});
  const double sum_a = values(a).at(0) + values(a).at(1) + values(a).at(2);
  const auto bv = values(b);
  const double sum_b = bv[0] + bv[1] + bv[2] + bv[3];
  CHECK(c.grad().item() == doctest::Approx(4 * sum_a + 3 * sum_b).epsilon(1e-14));
  for (double g : values(a.grad())) CHECK(g == doctest::Approx(4 * c.item()).epsilon(1e-14));
}

TEST_CASE("autograd: a first gradient is adopted without a copy only when nothing else holds it") {
  // a + b hands the same incoming gradient to both leaves: one of them must get a copy, so the
  // two .grad tensors are independent.
  Tensor a = tensor({1, 2}).requires_grad_(true), b = tensor({3, 4}).requires_grad_(true);
  add(a, b).sum().backward();
  CHECK(a.grad().data_ptr() != b.grad().data_ptr());
  a.grad().add_(10.0);
  CHECK(b.grad().to_vector<double>() == std::vector<double>{1, 1});

  // A caller's gradient passed straight through to a leaf is still the caller's: .grad is a copy.
  Tensor x = tensor({1, 2}).requires_grad_(true);
  Tensor seed = tensor({5, 6});
  add(x, 0.0).backward(seed);
  CHECK(x.grad().data_ptr() != seed.data_ptr());
  seed.fill_(0.0);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{5, 6});

  // A fresh gradient that only the engine holds becomes .grad as it is.
  Tensor w = tensor({1, 2, 3, 4}).view({2, 2}).requires_grad_(true);
  linear(tensor({1, 1}).view({1, 2}), w).sum().backward();
  CHECK(w.grad().to_vector<double>() == std::vector<double>{1, 1, 1, 1});
}
