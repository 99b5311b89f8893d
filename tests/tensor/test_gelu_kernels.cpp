// The fused tanh GELU kernel (tensor/cpu/gelu/) on every instruction-set level the CPU has: its
// forward and gradient give exactly the bits of the per-element reference formulas
// (tensor/elementwise_math.h), in float32 and bfloat16, over special values and ragged lengths;
// with the forward's tanh kept for the gradient or not; and gelu() on a contiguous tensor (the
// fused kernel) agrees bit for bit with gelu() on a strided view of the same values (the
// elementwise ops).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tensor/all.h"
#include "tensor/cpu/isa.h"
#include "tensor/elementwise_math.h"
#include "tensor/float_formats.h"
#include "tensor/fused_kernels.h"

using namespace weft;
using detail::BinaryOp;
using detail::UnaryOp;

namespace {

uint32_t bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

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

// Bit equality, NaN against any NaN.
bool same(float a, float b) { return bits(a) == bits(b) || (std::isnan(a) && std::isnan(b)); }

}  // namespace

TEST_CASE("fused tanh GELU: float32 forward and gradient are the reference's bits at every ISA level") {
  for (const CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    for (const int64_t n : {1, 7, 15, 17, 100'003}) {
      CAPTURE(cpu_isa_name(isa));
      CAPTURE(n);
      const std::vector<float> xs = inputs(n);
      std::vector<float> gs(xs.size());
      for (size_t i = 0; i < gs.size(); ++i) gs[i] = 0.5f - static_cast<float>(i % 7) * 0.25f;
      const Tensor x = from_vector(xs, {n}, TensorOptions(kFloat32)).requires_grad_();
      const Tensor y = gelu(x, true);
      y.backward(from_vector(gs, {n}, TensorOptions(kFloat32)));
      const std::vector<float> ys = y.detach().to_vector<float>(), dxs = x.grad().to_vector<float>();
      int wrong = 0;
      for (size_t i = 0; i < xs.size() && wrong < 3; ++i) {
        if (!same(ys[i], forward_reference(xs[i])) || !same(dxs[i], backward_reference(gs[i], xs[i]))) {
          ++wrong;
          CHECK_MESSAGE(false, "x = ", xs[i], ": ", ys[i], " vs ", forward_reference(xs[i]), ", gradient ", dxs[i],
                        " vs ", backward_reference(gs[i], xs[i]));
        }
      }
    }
  }
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
        if (!same(yk[i], want_y) || !same(yp[i], want_y) || !same(dk[i], want_dx) || !same(dp[i], want_dx)) {
          ++wrong;
          CHECK_MESSAGE(false, "x = ", xs[i], ": ", yk[i], " / ", yp[i], " vs ", want_y, ", gradient ", dk[i], " / ",
                        dp[i], " vs ", want_dx);
        }
      }
    }
  }
}

TEST_CASE("fused tanh GELU: bfloat16 is the reference computed in float32 and rounded once, at every ISA level") {
  const int64_t n = 4099;
  const std::vector<float> wide = inputs(n);
  // The inputs as bfloat16, and the float32 values those hold.
  const Tensor x16 = from_vector(wide, {n}, TensorOptions(kFloat32)).to(kBFloat16);
  const Tensor g16 = full({n}, -0.75).to(kBFloat16);
  const std::vector<float> xs = x16.to(kFloat32).to_vector<float>();
  for (const CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    CAPTURE(cpu_isa_name(isa));
    const Tensor x = x16.clone().requires_grad_();
    const Tensor y = gelu(x, true);
    y.backward(g16);
    const std::vector<float> ys = y.detach().to(kFloat32).to_vector<float>();
    const std::vector<float> dxs = x.grad().to(kFloat32).to_vector<float>();
    int wrong = 0;
    for (size_t i = 0; i < xs.size() && wrong < 3; ++i) {
      const float want_y = weft::bfloat16_to_float(weft::float_to_bfloat16(forward_reference(xs[i])));
      const float want_dx = weft::bfloat16_to_float(weft::float_to_bfloat16(backward_reference(-0.75f, xs[i])));
      if (!same(ys[i], want_y) || !same(dxs[i], want_dx)) {
        ++wrong;
        CHECK_MESSAGE(false, "x = ", xs[i], ": ", ys[i], " vs ", want_y, ", gradient ", dxs[i], " vs ", want_dx);
      }
    }
  }
}

TEST_CASE("gelu(tanh): the fused kernel on a contiguous tensor and the elementwise ops on a strided view agree") {
  const int64_t rows = 37, cols = 41;
  const Tensor base = from_vector(inputs(rows * cols), {cols, rows}, TensorOptions(kFloat32));
  const Tensor strided = base.t().detach().requires_grad_();  // (rows, cols), not contiguous
  const Tensor contiguous = base.t().contiguous().requires_grad_();
  REQUIRE_FALSE(strided.is_contiguous());
  const Tensor g = add(mul(arange(static_cast<double>(rows * cols)), 1e-3), -0.6).reshape({rows, cols});
  const Tensor a = gelu(strided, true), b = gelu(contiguous, true);
  a.backward(g);
  b.backward(g);
  const std::vector<float> av = a.detach().contiguous().to_vector<float>(), bv = b.detach().to_vector<float>();
  const std::vector<float> ag = strided.grad().contiguous().to_vector<float>(), bg = contiguous.grad().to_vector<float>();
  for (size_t i = 0; i < av.size(); ++i) {
    REQUIRE(same(av[i], bv[i]));
    REQUIRE(same(ag[i], bg[i]));
  }
}
