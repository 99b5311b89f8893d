// The construction seam: module frames replace Linear and LayerNorm; tensor frames never do;
// frames nest, unwind on exceptions, and belong to one thread.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <typeinfo>

#include "nn/all.h"

using namespace weft;

namespace {

// True when the dynamic type of `object` is exactly T (typeid of a named reference; clang warns
// about typeid(*ptr), whose operand is a call).
template <class T, class U>
bool has_type(const U& object) {
  return typeid(object) == typeid(T);
}

// A test-only replacement: an ordinary Linear whose output is scaled, counting its constructions.
struct ScaledLinearImpl : nn::LinearImpl {
  static inline std::atomic<int> built{0};
  double factor;

  ScaledLinearImpl(int64_t in, int64_t out, bool bias, double factor_)
      : LinearImpl(in, out, bias), factor(factor_) {
    ++built;
  }
  Tensor forward(const Tensor& x) override { return LinearImpl::forward(x) * factor; }
  std::string extra_repr() const override {
    return LinearImpl::extra_repr() + ", factor=" + std::to_string(static_cast<int>(factor));
  }
};

struct ShiftedLayerNormImpl : nn::LayerNormImpl {
  using LayerNormImpl::LayerNormImpl;
  Tensor forward(const Tensor& x) override { return LayerNormImpl::forward(x) + 1.0; }
};

nn::ModuleFrame scaled(double factor) {
  return nn::ModuleFrame{.linear = [factor](int64_t in, int64_t out, bool bias) {
                           return std::make_shared<ScaledLinearImpl>(in, out, bias, factor);
                         },
                         .layer_norm = std::nullopt};
}

nn::ModuleFrame shifted_layer_norm() {
  return nn::ModuleFrame{.linear = std::nullopt,
                         .layer_norm = [](const Shape& shape, double eps, bool affine, bool bias) {
                           return std::make_shared<ShiftedLayerNormImpl>(shape, eps, affine, bias);
                         }};
}

// The factor of a Linear built now, or 1 for a built-in Linear.
double factor_now() {
  nn::Linear fc(2, 2);
  auto* s = dynamic_cast<ScaledLinearImpl*>(fc.get());
  return s ? s->factor : 1.0;
}

}  // namespace

TEST_CASE("under a module frame nn::Linear is built as the replacement, behind the ordinary handle") {
  const Tensor x = randn({3, 4});
  nn::Linear fc{nullptr};
  {
    const nn::ModuleFrameGuard frame(scaled(2.0));
    fc = nn::Linear(4, 5);
  }
  auto* replaced = dynamic_cast<ScaledLinearImpl*>(fc.get());
  REQUIRE(replaced != nullptr);
  CHECK(fc->in_features == 4);
  CHECK(fc->out_features == 5);
  CHECK(equal(fc(x), linear(x, fc->weight, fc->bias) * 2.0));
  CHECK(fc->type_name() == "ScaledLinear");
  CHECK(fc->to_string() == "ScaledLinear(in_features=4, out_features=5, bias=true, factor=2)");
  // Outside the frame construction is ordinary again.
  CHECK(factor_now() == 1.0);
  CHECK(has_type<nn::LinearImpl>(*nn::Linear(4, 5)));
}

TEST_CASE("a replacement built through the seam draws the same weights as the built-in layer") {
  manual_seed(3);
  nn::Linear plain(6, 2);
  manual_seed(3);
  const nn::ModuleFrameGuard frame(scaled(2.0));
  nn::Linear replaced(6, 2);
  CHECK(equal(plain->weight, replaced->weight));
  CHECK(equal(plain->bias, replaced->bias));
}

TEST_CASE("a tensor frame alone never redirects construction") {
  const nn::ModuleFrameGuard outer(scaled(2.0));
  {
    // Layer replacement is a module-frame matter: an inner tensor frame changes dtype only.
    DefaultDTypeGuard f64(kFloat64);
    nn::Linear fc(2, 2);
    CHECK(dynamic_cast<ScaledLinearImpl*>(fc.get()) != nullptr);
    CHECK(fc->weight.dtype() == kFloat64);
  }
}

TEST_CASE("with only a tensor frame, Linear is built-in in the frame's dtype") {
  const int before = ScaledLinearImpl::built;
  DefaultDTypeGuard f64(kFloat64);
  nn::Linear fc(2, 2);
  CHECK(has_type<nn::LinearImpl>(*fc));
  CHECK(fc->weight.dtype() == kFloat64);
  CHECK(ScaledLinearImpl::built == before);
}

TEST_CASE("module frames nest: inner wins, unset kinds inherit, an empty factory means built-in") {
  CHECK(factor_now() == 1.0);
  {
    const nn::ModuleFrameGuard outer(scaled(2.0));
    CHECK(factor_now() == 2.0);
    {
      const nn::ModuleFrameGuard inner(scaled(3.0));
      CHECK(factor_now() == 3.0);
    }
    CHECK(factor_now() == 2.0);
    {
      const nn::ModuleFrameGuard layer_norm_only(shifted_layer_norm());
      CHECK(factor_now() == 2.0);
      nn::LayerNorm ln(3);
      CHECK(dynamic_cast<ShiftedLayerNormImpl*>(ln.get()) != nullptr);
    }
    {
      const nn::ModuleFrameGuard builtin(nn::ModuleFrame{.linear = nn::LinearFactory{}, .layer_norm = std::nullopt});
      CHECK(factor_now() == 1.0);
    }
    CHECK(factor_now() == 2.0);
  }
  CHECK(factor_now() == 1.0);
}

TEST_CASE("LayerNorm goes through its own factory") {
  nn::LayerNorm ln{nullptr};
  {
    const nn::ModuleFrameGuard frame(shifted_layer_norm());
    ln = nn::LayerNorm(Shape{2, 2}, 1e-6);
  }
  REQUIRE(dynamic_cast<ShiftedLayerNormImpl*>(ln.get()) != nullptr);
  CHECK(ln->normalized_shape == Shape{2, 2});
  CHECK(ln->eps == 1e-6);
  const Tensor x = randn({3, 2, 2});
  CHECK(equal(ln(x), layer_norm(x, {2, 2}, ln->weight, ln->bias, 1e-6) + 1.0));
  CHECK(has_type<nn::LayerNormImpl>(*nn::LayerNorm(4)));
}

TEST_CASE("layers inside containers and user modules are replaced too") {
  const nn::ModuleFrameGuard frame(scaled(2.0));
  nn::Sequential seq(nn::Linear(4, 3), nn::ReLU(), nn::Linear(3, 1));
  CHECK(seq->at<ScaledLinearImpl>(0)->factor == 2.0);
  CHECK(seq->at<ScaledLinearImpl>(2)->factor == 2.0);
  CHECK(seq->at<nn::LinearImpl>(2)->type_name() == "ScaledLinear");
}

TEST_CASE("frames unwind on exceptions") {
  try {
    const nn::ModuleFrameGuard frame(scaled(2.0));
    CHECK(factor_now() == 2.0);
    throw Error("boom");
  } catch (const Error&) {
  }
  CHECK(factor_now() == 1.0);
}

TEST_CASE("frames belong to one thread") {
  const nn::ModuleFrameGuard frame(scaled(2.0));
  double other_thread_factor = 0.0;
  std::thread([&] { other_thread_factor = factor_now(); }).join();
  CHECK(other_thread_factor == 1.0);
  CHECK(factor_now() == 2.0);

  // And a frame pushed on another thread does not leak here.
  std::thread([&] {
    const nn::ModuleFrameGuard theirs(scaled(5.0));
    other_thread_factor = factor_now();
  }).join();
  CHECK(other_thread_factor == 5.0);
  CHECK(factor_now() == 2.0);
}

TEST_CASE("a factory that builds nn::Linear itself gets the built-in layer, not itself") {
  int calls = 0;
  nn::ModuleFrame wrapping{.linear = [&calls](int64_t in, int64_t out, bool bias) {
                             ++calls;
                             return nn::Linear(in, out, bias).ptr();
                           },
                           .layer_norm = std::nullopt};
  const nn::ModuleFrameGuard frame(wrapping);
  nn::Linear fc(2, 3);
  CHECK(calls == 1);
  CHECK(has_type<nn::LinearImpl>(*fc));
  CHECK(nn::Linear(1, 1)->in_features == 1);
  CHECK(calls == 2);
}

TEST_CASE("a factory must build what was asked for") {
  nn::ModuleFrame wrong{.linear = [](int64_t in, int64_t out, bool bias) {
                          return std::make_shared<nn::LinearImpl>(in + 1, out, bias);
                        },
                        .layer_norm = std::nullopt};
  const nn::ModuleFrameGuard frame(wrong);
  CHECK_THROWS_WITH_AS(nn::Linear(2, 3),
                       "[Linear] the module frame's Linear factory was asked for in_features=2, out_features=3 "
                       "and built in_features=3, out_features=3",
                       Error);
}
