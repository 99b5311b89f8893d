// The fused tanh GELU kernel (tensor/cpu/gelu/) on every instruction-set level the CPU has: its
// forward and gradient give exactly the bits of the per-element reference formulas
// (tensor/elementwise_math.h), in float32 and bfloat16, over special values and ragged lengths;
// with the forward's tanh kept for the gradient or not; and gelu() on a contiguous tensor (the
// fused kernel) agrees bit for bit with gelu() on a strided view of the same values (the
// elementwise ops).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "activation_test_helpers.h"
#include "tensor/all.h"
#include "tensor/cpu/isa.h"
#include "tensor/elementwise_math.h"
#include "tensor/float_formats.h"
#include "tensor/fused_kernels.h"

using namespace weft;
using detail::BinaryOp;
using detail::UnaryOp;

namespace {

// n values over [-12, 12] with the special ones first: zeros, infinities, NaN, the tanh's clamp
// at |u| = 9, tiny and huge magnitudes.
std::vector<float> inputs(int64_t n) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 9.0f, -9.0f, 1e-30f,
                          -1e-30f, 1e30f, -1e30f, 3.0f, -5.5f};
  v.resize(static_cast<size_t>(n));
  for (int64_t i = 13; i < n; ++i) v[static_cast<size_t>(i)] = -12.0f + 24.0f * static_cast<float>(i) / static_cast<float>(n);
  return v;
}

float forward_reference(float x) { return detail::unary_scalar<UnaryOp::GeluTanh>(x, 0, 0); }
float backward_reference(float g, float x) { return detail::binary_scalar<BinaryOp::GeluTanhBackward>(g, x); }

Tensor gelu_tanh(const Tensor& x) { return gelu(x, true); }

using testing::same_bits;

}  // namespace

TEST_CASE("fused tanh GELU: float32 forward and gradient are the reference's bits at every ISA level") {
  for (const int64_t n : {1, 7, 15, 17, 100'003})
    testing::check_activation_float32_bits(gelu_tanh, forward_reference, backward_reference, inputs(n));
}

TEST_CASE("fused tanh GELU kernel: the gradient with the forward's tanh and without it are the reference's bits") {
  // gelu() under autograd always hands the kernel the forward's tanh; here the kernel is called
  // directly both ways (forward writing the tanh or not, gradient reading it or computing it).
  detail::GeluTanhKernel* kernel = detail::gelu_tanh_kernels().find(DeviceType::CPU);
  REQUIRE((kernel != nullptr));
  for (const CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    for (const int64_t n : {1, 9, 17, 5'003}) {
      CAPTURE(cpu_isa_name(isa));
      CAPTURE(n);
      const std::vector<float> xs = inputs(n);
      std::vector<float> gs(xs.size());
      for (size_t i = 0; i < gs.size(); ++i) gs[i] = 0.25f - static_cast<float>(i % 5) * 0.5f;
      const Tensor x = from_vector(xs, {n}), g = from_vector(gs, {n});
      const Tensor t = empty({n}), y_kept = empty({n}), y_plain = empty({n}), dx_kept = empty({n}), dx_plain = empty({n});
      kernel({x, Tensor(), y_kept, t});
      kernel({x, Tensor(), y_plain, Tensor()});
      kernel({x, g, dx_kept, t});
      kernel({x, g, dx_plain, Tensor()});
      const std::vector<float> yk = y_kept.to_vector<float>(), yp = y_plain.to_vector<float>();
      const std::vector<float> dk = dx_kept.to_vector<float>(), dp = dx_plain.to_vector<float>();
      int wrong = 0;
      for (size_t i = 0; i < xs.size() && wrong < 3; ++i) {
        const float want_y = forward_reference(xs[i]), want_dx = backward_reference(gs[i], xs[i]);
        if (!same_bits(yk[i], want_y) || !same_bits(yp[i], want_y) || !same_bits(dk[i], want_dx) ||
            !same_bits(dp[i], want_dx)) {
          ++wrong;
          CHECK_MESSAGE(false, "x = ", xs[i], ": ", yk[i], " / ", yp[i], " vs ", want_y, ", gradient ", dk[i], " / ",
                        dp[i], " vs ", want_dx);
        }
      }
    }
  }
}

TEST_CASE("fused tanh GELU: bfloat16 is the reference computed in float32 and rounded once, at every ISA level") {
  testing::check_activation_bf16_bits(gelu_tanh, forward_reference, backward_reference, inputs(4099));
}

TEST_CASE("gelu(tanh): the fused kernel on a contiguous tensor and the elementwise ops on a strided view agree") {
  testing::check_activation_fused_matches_strided(gelu_tanh, inputs(37 * 41), 37, 41);
}
