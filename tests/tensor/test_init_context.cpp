// The init-context stack (tensor/init_context.h): factories take the innermost frame's dtype and
// device for what they are not told; an explicit dtype wins; integer factories stay int64;
// frames nest and unwind (also on exceptions); each thread has its own stack.
#include <doctest/doctest.h>

#include <stdexcept>
#include <thread>

#include "tensor/all.h"

using namespace weft;

TEST_CASE("the bottom frame is float32 on the cpu, without skip-init") {
  CHECK(default_dtype() == kFloat32);
  CHECK(default_device() == kCPU);
  CHECK_FALSE(skip_init());
}

TEST_CASE("floating factories take the frame's dtype; an explicit dtype wins") {
  DefaultDTypeGuard guard(kFloat64);
  CHECK(default_dtype() == kFloat64);
  CHECK(zeros({2}).dtype() == kFloat64);
  CHECK(ones({2}).dtype() == kFloat64);
  CHECK(empty({2}).dtype() == kFloat64);
  CHECK(full({2}, 1.5).dtype() == kFloat64);
  CHECK(rand({2}).dtype() == kFloat64);
  CHECK(randn({2}).dtype() == kFloat64);
  CHECK(eye(2).dtype() == kFloat64);
  CHECK(linspace(0, 1, 3).dtype() == kFloat64);
  CHECK(arange(0.0, 1.0, 0.5).dtype() == kFloat64);
  CHECK(tensor({0.1}).dtype() == kFloat64);
  CHECK(tensor({0.1}).item() == 0.1);  // really float64 values, not float32 ones widened
  CHECK(from_vector(std::vector<float>{1.0f}, {1}).dtype() == kFloat64);
  CHECK(scalar_tensor(1.0).dtype() == kFloat64);
  // Explicit dtypes win.
  CHECK(zeros({2}, kBFloat16).dtype() == kBFloat16);
  CHECK(rand({2}, kFloat16).dtype() == kFloat16);
  CHECK(tensor({1.0}, kFloat32).dtype() == kFloat32);
  // Ops whose integer inputs compute in floating use the default dtype too.
  CHECK(div(arange(3), arange(1, 4)).dtype() == kFloat64);
  CHECK(exp(arange(3)).dtype() == kFloat64);
}

TEST_CASE("integer factories keep int64 under a floating frame") {
  DefaultDTypeGuard guard(kBFloat16);
  CHECK(arange(5).dtype() == kInt64);
  CHECK(arange(1, 7, 2).dtype() == kInt64);
  CHECK(randint(0, 5, {3}).dtype() == kInt64);
  CHECK(randperm(4).dtype() == kInt64);
  CHECK(from_vector(std::vector<int64_t>{1, 2}, {2}).dtype() == kInt64);
  CHECK(from_vector(std::vector<int32_t>{1, 2}, {2}).dtype() == kInt32);
  CHECK(arange(0.0, 2.0, 0.5).dtype() == kBFloat16);
}

TEST_CASE("frames nest; each field inherits from the frame below") {
  {
    TensorFrameGuard outer(TensorFrame{kFloat64, {}, true});
    CHECK(default_dtype() == kFloat64);
    CHECK(skip_init());
    {
      TensorFrameGuard inner(TensorFrame{kFloat16, {}, {}});
      CHECK(default_dtype() == kFloat16);
      CHECK(skip_init());  // inherited
      CHECK(ones({1}).dtype() == kFloat16);
      {
        TensorFrameGuard innermost(TensorFrame{{}, {}, false});
        CHECK(default_dtype() == kFloat16);
        CHECK_FALSE(skip_init());
      }
      CHECK(skip_init());
    }
    CHECK(default_dtype() == kFloat64);
    CHECK(ones({1}).dtype() == kFloat64);
  }
  CHECK(default_dtype() == kFloat32);
  CHECK_FALSE(skip_init());
}

TEST_CASE("a scope that throws restores the frame") {
  try {
    DefaultDTypeGuard guard(kFloat16);
    TensorFrameGuard inner(TensorFrame{kFloat64, {}, true});
    CHECK(default_dtype() == kFloat64);
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  CHECK(default_dtype() == kFloat32);
  CHECK_FALSE(skip_init());
  // A weft error thrown by a factory inside the frame unwinds it just the same.
  CHECK_THROWS_AS(([] {
                    DefaultDTypeGuard guard(kFloat64);
                    return empty({-1});
                  }()),
                  Error);
  CHECK(default_dtype() == kFloat32);
}

TEST_CASE("another thread sees the default frame, not this thread's") {
  DefaultDTypeGuard guard(kFloat64);
  TensorFrameGuard skip(TensorFrame{{}, {}, true});
  DType seen_dtype = kBool, made_dtype = kBool;
  bool seen_skip = true;
  std::thread other([&] {
    seen_dtype = default_dtype();
    seen_skip = skip_init();
    made_dtype = zeros({1}).dtype();
    DefaultDTypeGuard own(kBFloat16);  // and its frames do not leak back here
  });
  other.join();
  CHECK(seen_dtype == kFloat32);
  CHECK_FALSE(seen_skip);
  CHECK(made_dtype == kFloat32);
  CHECK(default_dtype() == kFloat64);
  CHECK(skip_init());
}

TEST_CASE("a non-floating default dtype is rejected") {
  CHECK_THROWS_WITH_AS(DefaultDTypeGuard{kInt64}, "[init_context] the default dtype must be floating, got int64", Error);
  const TensorFrame bool_frame{kBool, {}, {}};
  CHECK_THROWS_AS(TensorFrameGuard{bool_frame}, Error);
  CHECK(default_dtype() == kFloat32);  // nothing was pushed
}

TEST_CASE("a device frame sends factories to that device; cuda fails clearly without a GPU") {
  if (cuda::is_available()) return;  // this case is about machines without one
  TensorFrameGuard guard(TensorFrame{{}, Device("cuda:0"), {}});
  CHECK(default_device() == Device(DeviceType::CUDA, 0));
  CHECK_THROWS_WITH_AS(zeros({2}),
                       cuda::is_built() ? "[device] cuda:0 requested but no CUDA device is visible (no GPU, or no driver)"
                                        : "[cuda] weft was built without CUDA (configure with -DWEFT_CUDA=ON)",
                       Error);
  CHECK(zeros({2}, kCPU).device() == kCPU);  // an explicit device wins
}
